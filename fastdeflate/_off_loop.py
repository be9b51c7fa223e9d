"""Large messages off the event loop: the size setting and the counts, for every
integration (the mechanics are in ``fastdeflate/integrations/_outbox.py``).

A message of at least `off_loop_size()` bytes is compressed in a worker thread (the
event loop's default executor; the codec releases the GIL for it) while the
connection's later frames wait behind it and other connections go on; 0 turns it off.
``FASTDEFLATE_OFF_LOOP_SIZE`` sets it at import.
"""

from __future__ import annotations

import threading

__all__ = ["set_off_loop_size", "off_loop_size", "counted", "counts", "DEFAULT_SIZE"]

#: 64 KiB: about half a millisecond of compression at level 6 on JSON here, more than a
#: hand-off to a thread costs the loop (~50 us), far less than a 4 MB message (~40 ms).
DEFAULT_SIZE = 1 << 16

_lock = threading.Lock()
_size = DEFAULT_SIZE
_compressed = 0  # messages compressed off the loop
_decompressed = 0  # messages decompressed off the loop


def set_off_loop_size(size: int) -> int:
    """Compress messages of ``size`` bytes or more off the event loop (in a worker
    thread, in order: the connection's later frames wait behind them); 0 never does.
    Returns the previous value. ``FASTDEFLATE_OFF_LOOP_SIZE`` sets it at import."""
    global _size
    if type(size) is not int or size < 0:
        raise ValueError(f"off-loop size must be an int >= 0, got {size!r}")
    with _lock:
        previous, _size = _size, size
    return previous


def off_loop_size() -> int:
    """The size set by `set_off_loop_size()` (0: never off the loop)."""
    return _size  # an int, rebound only under _lock: read as it is


def counted(compressed: int = 0, decompressed: int = 0) -> None:
    """Count messages that went off the loop."""
    global _compressed, _decompressed
    with _lock:
        _compressed += compressed
        _decompressed += decompressed


def counts() -> tuple[int, int]:
    """(messages compressed, messages decompressed) off the loop since import."""
    with _lock:
        return _compressed, _decompressed
