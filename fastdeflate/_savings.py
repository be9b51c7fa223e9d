"""What sending messages uncompressed saved, estimated from their sizes (``status()``'s
``sent_uncompressed``).

The CPU a skipped message saved is the time this process's compressor takes per byte of
such data at the level of the compressor that skipped it, measured once per level and
kind of data on a sample of ``SAMPLE_SIZE`` bytes (the least of ``TRIES`` runs, each a
new ``Compressor``; a few milliseconds, on the first ``status()`` that needs it):

- ``"compressed format"`` and ``"incompressible"``: random bytes. The bytes saved are the
  size the compressor adds to such data (its payload's length over the sample's, per byte);
- ``"small"`` and ``"opt-out"``: chat-like JSON. Such messages may well have compressed:
  their bytes saved are not estimated (None), since sending them as they are can cost
  bytes (the trade ``set_min_size`` makes);
- ``"grew"``: compressed, then sent as it is: no CPU saved, and the bytes saved are
  exact (how much larger the payloads came out).
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Optional
from ._forksafe import free_in_child

SAMPLE_SIZE = 1 << 15
TRIES = 5
#: The kind of data each reason's messages are estimated as.
KINDS = {"compressed format": "random", "incompressible": "random",
         "small": "text", "opt-out": "text"}

_rates: dict[tuple[str, int], tuple[float, float]] = {}  # (kind, level) -> rate, growth
#: What the measurements sent through the codec (messages, bytes, payload bytes):
#: status() leaves them out of its traffic, which is the application's.
measured_traffic = [0, 0, 0]
_lock = free_in_child(threading.Lock())


def sample(kind: str) -> bytes:
    """``SAMPLE_SIZE`` bytes of ``kind`` ("random" or "text"), the same every time."""
    rnd = random.Random(f"fastdeflate-savings-{kind}")
    if kind == "random":
        return rnd.randbytes(SAMPLE_SIZE)
    words = ["hello", "world", "price", "up", "down", "ok", "again", "room", "ready"]
    lines = []
    while sum(map(len, lines)) < SAMPLE_SIZE:
        lines.append(json.dumps({"seq": len(lines), "user": f"user{rnd.randrange(50)}",
                                 "text": " ".join(rnd.choices(words, k=rnd.randrange(4, 30)))}))
    return "\n".join(lines).encode()[:SAMPLE_SIZE]


def rate(kind: str, level: int) -> tuple[float, float]:
    """(CPU nanoseconds per byte, payload bytes per byte) of this process's compressor on
    ``kind`` at ``level`` (window 15, memLevel 8), measured once."""
    key = (kind, level)
    with _lock:
        if key not in _rates:
            _rates[key] = _measure(sample(kind), level)
        return _rates[key]


def _measure(data: bytes, level: int) -> tuple[float, float]:
    from ._codec import codec

    best, out = float("inf"), 0
    for _ in range(TRIES):
        compressor = codec.Compressor(level=level)
        start = time.perf_counter_ns()
        out = len(compressor.compress(data))
        best = min(best, time.perf_counter_ns() - start)
        measured_traffic[0] += 1
        measured_traffic[1] += len(data)
        measured_traffic[2] += out
    return best / len(data), out / len(data)


def saved(reason: str, levels: dict[int, int], over: int) -> dict[str, object]:
    """``{"cpu_saved_ms": x, "bytes_saved": n or None}`` for ``reason``'s messages:
    ``levels`` maps a level to the bytes sent uncompressed by compressors at it;
    ``over``: how much larger the payloads of "grew" came out."""
    kind = KINDS.get(reason)
    if kind is None:  # "grew": compressed first, so nothing saved but the bytes
        return {"cpu_saved_ms": 0.0, "bytes_saved": over}
    cpu_ns = 0.0
    extra: Optional[float] = 0.0 if kind == "random" else None
    for level, size in levels.items():
        ns_per_byte, growth = rate(kind, level)
        cpu_ns += size * ns_per_byte
        if extra is not None:
            extra += size * max(0.0, growth - 1.0)
    return {"cpu_saved_ms": round(cpu_ns / 1e6, 3),
            "bytes_saved": None if extra is None else round(extra)}


def skipped() -> dict[str, dict[str, object]]:
    """Messages sent uncompressed so far, by reason: ``{reason: {"messages": n, "bytes":
    n, "cpu_saved_ms": x, "bytes_saved": n or None}}``. ``bytes``: the messages' own (every
    fragment), sent as they are; the savings are estimates (see above)."""
    from . import _what_pays

    return {reason: {"messages": m, "bytes": b, **saved(reason, levels, over)}
            for reason, (m, b, levels, over) in _what_pays.skipped_counts().items()}
