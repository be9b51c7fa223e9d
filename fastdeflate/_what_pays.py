"""Compress what pays: which messages go out uncompressed, for both implementations.

RFC 7692 lets a sender leave any message uncompressed (RSV1 clear), and with context
takeover such a message stays out of both peers' windows. ``Compressor.compress_or_skip``
asks this module first; a message is sent uncompressed, without touching the compressor,
when

- ``"opt-out"``: the caller said so (``with fastdeflate.uncompressed(): ...``, a context
  variable: per asyncio task and per thread);
- ``"small"``: it is shorter than ``set_min_size(n)`` bytes (0, the default, as stock);
- ``"compressed format"``: it starts as a known compressed format does (PNG, JPEG, GIF,
  WebP, gzip, zlib-wrapped zstd, zip, bzip2, xz, 7z, WOFF2, Ogg, MP4);
- ``"incompressible"``: a sample of it (``SAMPLE`` bytes from eight places; messages of
  ``MIN_JUDGED`` bytes or more) has as many distinct byte values as random bytes do,
  and no sampled place repeats bytes from earlier in the message.

A message whose sample is neither text-like nor random (``"uncertain"``) is compressed
from a snapshot of the compressor's window: if its payload comes out no smaller than the
message (``"grew"``), it is sent uncompressed and the compressor put back where it was.
Everything else is compressed as before: the same bytes. The last two rules are
``set_skip_incompressible(False)``'s to turn off. The extension mirrors ``classify``
in C (``extension/what_pays.pxi``); tests/test_what_pays.py checks both decide alike.

Every integration sends a declined message as it is, RSV1 clear, in the library's own
way (each module's docstring says how); ``fastdeflate.status()["sent_uncompressed"]``
counts them by reason. A fragmented message is decided on its first fragment, and the
whole message follows it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Iterator, Optional
from ._forksafe import free_in_child

__all__ = ["uncompressed", "set_min_size", "set_skip_incompressible", "skipped_counts"]

#: Magic numbers of compressed formats, at offset 0 (MP4's ``ftyp`` is at 4).
MAGIC = (
    b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"\x1f\x8b",
    b"\x28\xb5\x2f\xfd", b"PK\x03\x04", b"BZh", b"\xfd7zXZ\x00", b"7z\xbc\xaf\x27\x1c",
    b"wOF2", b"OggS",
)
MAGIC_AT_4 = (b"ftyp",)  # MP4, MOV, HEIF, AVIF
RIFF_WEBP = (b"RIFF", b"WEBP")  # at 0 and at 8
#: Bytes sampled: RUNS runs of RUN bytes (the start, the end, and six places between).
SAMPLE = 128
RUNS = 8
RUN = SAMPLE // RUNS
#: Distinct byte values among SAMPLE random bytes: 100.7 on average (s.d. ~4). At or
#: above INCOMPRESSIBLE the message is taken as random, unless a sampled run's first
#: KEY bytes stand earlier in it too (repeats: deflate's matches); text and JSON stay
#: below UNCERTAIN.
INCOMPRESSIBLE = 88
UNCERTAIN = 64
KEY = 8
#: How far back the repeats are looked for: deflate's largest window (32 KiB), the
#: farthest a match can reach (so the check costs at most RUNS - 1 times this).
REACH = 1 << 15
#: Fewer than EARLY distinct values in the first two runs (random bytes: 30.1, s.d. ~1.3)
#: is text: the other runs are not read.
EARLY = 24
#: A message shorter than this is never judged by its bytes (too few to say, and a short
#: message's check would cost a noticeable share of its compression).
MIN_JUDGED = 256

_opt_out: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "fastdeflate_uncompressed", default=False)
_min_size = 0
_skip_incompressible = True
_lock = free_in_child(threading.Lock())
#: reason -> [messages, bytes, {level: bytes}, bytes their payloads had over them ("grew")]
_skipped: dict[str, list] = {}
_listeners: list = []  # the extension's setter, called on every change


@contextlib.contextmanager
def uncompressed(enabled: bool = True) -> Iterator[None]:
    """Within this block (this asyncio task or thread only), messages are sent
    uncompressed by the integrations, as ``Compressor.compress_or_skip`` then says."""
    token = _opt_out.set(enabled)
    try:
        yield
    finally:
        _opt_out.reset(token)


def set_min_size(size: int) -> int:
    """Send messages shorter than ``size`` bytes uncompressed (0, the default: compress
    every message, as the stock libraries do); returns the previous value.
    ``FASTDEFLATE_MIN_SIZE`` sets it at import."""
    global _min_size
    if type(size) is not int or size < 0:
        raise ValueError(f"min size must be an int >= 0, got {size!r}")
    with _lock:  # (the extension is told under it: the last change is the one it keeps)
        previous, _min_size = _min_size, size
        _changed()
    return previous


def set_skip_incompressible(enabled: bool) -> bool:
    """Whether messages in a compressed format, random-looking ones and those that would
    come out larger are sent uncompressed (True, the default); returns the previous
    value. ``FASTDEFLATE_SKIP_INCOMPRESSIBLE=0`` turns it off at import."""
    global _skip_incompressible
    if not isinstance(enabled, bool):
        raise TypeError(f"expected a bool, got {enabled!r}")
    with _lock:
        previous, _skip_incompressible = _skip_incompressible, enabled
        _changed()
    return previous


def settings() -> tuple[int, bool]:
    """(min size, skip incompressible), as set now."""
    with _lock:
        return _min_size, _skip_incompressible


def _changed() -> None:
    """Tell the extension (``_lock`` held: the listener only stores C values)."""
    for listener in _listeners:
        listener(_min_size, _skip_incompressible)


def skipped_counts() -> dict[str, tuple[int, int, dict[int, int], int]]:
    """Messages sent uncompressed so far, by reason: ``{reason: (messages, bytes, {level:
    bytes}, bytes over)}`` (``_savings.skipped()`` adds what they saved)."""
    with _lock:
        return {reason: (m, b, dict(levels), over)
                for reason, (m, b, levels, over) in _skipped.items()}


def count(reason: str, size: int, level: int, over: int = 0, message: bool = True) -> None:
    """``size`` bytes sent uncompressed for ``reason`` by a compressor at ``level``: a
    message (or its first fragment), or with ``message`` False a later fragment of one.
    ``over``: how much larger its payload came out ("grew")."""
    with _lock:
        entry = _skipped.setdefault(reason, [0, 0, {}, 0])
        entry[0] += message
        entry[1] += size
        entry[2][level] = entry[2].get(level, 0) + size
        entry[3] += over


def _forget_counts() -> None:
    """Test hook: start the counters over."""
    with _lock:
        _skipped.clear()


def opted_out() -> bool:
    """Whether the caller's context asked for uncompressed messages."""
    return _opt_out.get()


def sample_runs(n: int) -> list[int]:
    """Where the runs start in a message of ``n`` >= SAMPLE bytes: its start, its end,
    then six places evenly between."""
    step = (n - RUN) // (RUNS - 1)
    return [0, n - RUN] + [k * step for k in range(1, RUNS - 1)]


def sample_distinct(data: "bytes | memoryview", runs: int = RUNS) -> int:
    """Distinct byte values in the first ``runs`` runs of the sample (len >= SAMPLE)."""
    n = len(data) if type(data) is bytes else data.nbytes  # type: ignore[union-attr]
    seen: set[int] = set()
    for start in sample_runs(n)[:runs]:
        seen.update(data[start:start + RUN])
    return len(seen)


def sample_repeats(data: "bytes | memoryview") -> bool:
    """Whether a sampled run (after the first) starts with KEY bytes that stand earlier
    in the message, at most REACH bytes before it: random-looking bytes that deflate
    still shortens by matches (it reaches no further back)."""
    n = len(data) if type(data) is bytes else data.nbytes  # type: ignore[union-attr]
    whole = data if type(data) is bytes else bytes(data)
    for start in sample_runs(n)[1:]:
        if whole.find(whole[start:start + KEY], max(0, start - REACH),
                      start + KEY - 1) != -1:
            return True
    return False


def classify(data: "bytes | memoryview", min_size: int,
             skip_incompressible: bool) -> Optional[str]:
    """Why ``data`` (bytes, or a memoryview of bytes) goes out uncompressed without being
    compressed (a reason), or
    ``"uncertain"`` (compress from a snapshot, keep the payload only if smaller), or
    None (compress). The opt-out is the caller's to check first."""
    n = len(data) if type(data) is bytes else data.nbytes  # type: ignore[union-attr]
    if n < min_size:
        return "small"
    if not skip_incompressible or n < MIN_JUDGED:
        return None
    head = bytes(data[:12])
    if head.startswith(MAGIC) or head[4:8] in MAGIC_AT_4 or (
            head[:4] == RIFF_WEBP[0] and head[8:12] == RIFF_WEBP[1]):
        return "compressed format"
    if sample_distinct(data, 2) < EARLY:
        return None
    distinct = sample_distinct(data)
    if distinct >= INCOMPRESSIBLE:
        return "uncertain" if sample_repeats(data) else "incompressible"
    if distinct >= UNCERTAIN:
        return "uncertain"
    return None
