"""Part 5, memory: bytes per connection for 1,000 codec pairs, idle and after one message.

Measured with :mod:`tracemalloc`, which sees the zlib state of both the stdlib ``zlib``
module and fastdeflate (both allocate it through ``PyMem_RawMalloc``). A pair is one
compressor and one decompressor, as one connection has. "stock" is the stdlib objects
exactly as websockets creates them (``zlib.compressobj(wbits=-w, **compress_settings)``
and ``zlib.decompressobj(wbits=-w)``); the Python objects are counted too.
"""

from __future__ import annotations

import gc
import importlib
import tracemalloc
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import payloads
from .measure import Progress
from .report import markdown_table

__all__ = ["CONFIGS", "COLUMNS", "Config", "Row", "measure_pairs", "measure", "table"]

TAIL = b"\x00\x00\xff\xff"


@dataclass(frozen=True)
class Config:
    label: str
    window_bits: int
    mem_level: int


CONFIGS = (
    Config("default settings (window 15, memLevel 8)", 15, 8),
    Config("websockets' defaults (window 12, memLevel 5)", 12, 5),
)

Pair = tuple[Any, Any]
Use = Callable[[Pair, bytes], bytes]


def _stock(cfg: Config) -> tuple[Callable[[], Pair], Use]:
    settings = {} if cfg.mem_level == 8 else {"memLevel": cfg.mem_level}

    def make() -> Pair:
        return (zlib.compressobj(wbits=-cfg.window_bits, **settings),
                zlib.decompressobj(wbits=-cfg.window_bits))

    def use(pair: Pair, message: bytes) -> bytes:
        c, d = pair
        payload = (c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
        return d.decompress(payload + TAIL)

    return make, use


def _fastdeflate(module_name: str) -> Callable[[Config], tuple[Callable[[], Pair], Use]]:
    def columns(cfg: Config) -> tuple[Callable[[], Pair], Use]:
        module = importlib.import_module(module_name)

        def make() -> Pair:
            return (module.Compressor(window_bits=cfg.window_bits, mem_level=cfg.mem_level),
                    module.Decompressor(window_bits=cfg.window_bits))

        def use(pair: Pair, message: bytes) -> bytes:
            return pair[1].decompress(pair[0].compress(message))

        return make, use

    return columns


COLUMNS: dict[str, Callable[[Config], tuple[Callable[[], Pair], Use]]] = {
    "stock (stdlib zlib)": _stock,
    "fastdeflate (compiled)": _fastdeflate("fastdeflate._fastdeflate"),
    "fastdeflate fallback (_pure)": _fastdeflate("fastdeflate._pure"),
}


def measure_pairs(make: Callable[[], Pair], use: Use, messages: list[bytes],
                  count: int = 1000) -> tuple[float, float]:
    """(idle, after one message) traced bytes per pair, for ``count`` pairs, pair i sent
    ``messages[i % len(messages)]``."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        pairs = [make() for _ in range(count)]
        idle = tracemalloc.get_traced_memory()[0] - base
        for i, pair in enumerate(pairs):
            message = messages[i % len(messages)]
            if use(pair, message) != message:
                raise AssertionError("round trip failed")
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del pairs
    return idle / count, used / count


@dataclass
class Row:
    config: Config
    column: str
    idle: float
    used: float


def measure(count: int = 1000, progress: Optional[Progress] = None) -> list[Row]:
    # Each pair its own message: one message sent to every pair would be compressed once
    # and shared (compress once: the broadcast part measures that), not what a
    # connection's own conversation costs.
    messages = payloads.varying(1024, count)
    rows = []
    for cfg in CONFIGS:
        for name, columns in COLUMNS.items():
            make, use = columns(cfg)
            idle, used = measure_pairs(make, use, messages, count)
            rows.append(Row(cfg, name, idle, used))
            if progress is not None:
                progress.update(1)
    return rows


def runs() -> int:
    return len(CONFIGS) * len(COLUMNS)


def _kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB"


def table(rows: list[Row]) -> str:
    header = ["settings", "state"] + list(COLUMNS)
    out = []
    for cfg in CONFIGS:
        cells = {r.column: r for r in rows if r.config == cfg}
        out.append([cfg.label, "idle (never used)"] + [_kib(cells[c].idle) for c in COLUMNS])
        out.append([cfg.label, "after one 1 KB message"] + [_kib(cells[c].used) for c in COLUMNS])
    return markdown_table(header, out)


def legend(count: int) -> str:
    return (
        f"Traced memory (tracemalloc) per connection = one compressor + one decompressor, "
        f"averaged over {count:,} pairs alive at once, Python objects included; 'after one "
        f"message' = each pair compressed and decompressed one 1 KB JSON update of its own "
        f"(context takeover, so the state stays; every connection busy: none has been "
        f"quiet long enough to be parked). Stock = stdlib zlib objects as websockets creates "
        f"them; fastdeflate allocates its zlib state on first use."
    )
