"""Type stubs for the compiled codec (same interface as fastdeflate._pure)."""

from typing import Optional

from typing_extensions import Buffer

ZLIB_VERSION: str
ENGINE: str

def _set_max_slice(size: int) -> int: ...  # test hook: slices of size bytes, not 1 GiB
def _set_parking(enabled: bool) -> bool: ...  # test hook: never park (zlib < 1.2.9)
def _set_pooling(enabled: bool) -> bool: ...  # test hook: no give-back of clean streams
def _park_idle(most: int = 64) -> tuple[int, int]: ...  # test hook: park idle objects now
def _sweeper_running() -> bool: ...  # test hook: the sweeper thread was started
def _sets_over_limit() -> int: ...  # parameter sets with more live streams than the limit
def _set_trimming(enabled: bool) -> bool: ...  # test hook: no malloc_trim (not glibc)
def _release_free_memory() -> bool: ...  # malloc_trim after parking (glibc)
def set_live_states(limit: int) -> int: ...
def set_park_after(seconds: float) -> float: ...
def live_states() -> dict[tuple, tuple[int, int]]: ...

class Compressor:
    def __init__(
        self,
        level: int = 6,
        window_bits: int = 15,
        mem_level: int = 8,
        strategy: int = 0,
        no_context_takeover: bool = False,
    ) -> None: ...
    @property
    def level(self) -> int: ...
    @property
    def window_bits(self) -> int: ...
    @property
    def mem_level(self) -> int: ...
    @property
    def strategy(self) -> int: ...
    @property
    def no_context_takeover(self) -> bool: ...
    def compress(self, data: Buffer, fin: bool = True, *, flush: bool = True) -> bytes: ...
    def reset(self) -> None: ...

class Decompressor:
    def __init__(self, window_bits: int = 15, no_context_takeover: bool = False) -> None: ...
    @property
    def window_bits(self) -> int: ...
    @property
    def no_context_takeover(self) -> bool: ...
    def decompress(
        self, data: Buffer, fin: bool = True, max_size: Optional[int] = None, *,
        has_tail: bool = False,
    ) -> bytes: ...
    def reset(self) -> None: ...
