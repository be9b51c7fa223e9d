"""live_states() and the traffic counters; the fallback parks nothing.

The extension parks idle objects beyond the live-state limit to their window and runs a
sweeper; here no object holds more than its own stdlib zlib object, so nothing is parked,
no thread sweeps, and live_states() is empty. The only lock the fallback holds across
fork() is compress once's (``compress_once.py`` registers its fork handlers); the
traffic counters' lock is made anew in a child (``fastdeflate/_forksafe.py``).

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/parking.pxi``.)
"""

from __future__ import annotations

import threading
from .._forksafe import free_in_child

# The extension's traffic counters, per direction only (the extension keeps them per
# parameter set, in its rings; here that would be a dict entry per set ever used):
# kind -> [messages, bytes in, bytes out, shared]
_counts: dict[str, list[int]] = {"deflate": [0, 0, 0, 0], "inflate": [0, 0, 0, 0]}
_counts_lock = free_in_child(threading.Lock())


def _count(kind: str, size: int, out: int, fin: bool, shared: bool) -> None:
    with _counts_lock:
        counts = _counts[kind]
        counts[0] += fin
        counts[1] += size
        counts[2] += out
        counts[3] += shared


def _traffic() -> dict[tuple, tuple[int, int, int, int]]:
    """As the extension's, but per direction: ``{(kind,): (messages, bytes in, bytes
    out, shared)}`` since the process started."""
    with _counts_lock:
        return {(kind,): tuple(counts) for kind, counts in _counts.items()}  # type: ignore[misc]


def live_states() -> dict[tuple, tuple[int, int]]:
    """The extension's streams shared per parameter set: none in the fallback."""
    return {}
