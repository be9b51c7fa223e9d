"""Large messages off the event loop: the settings, the worker threads and the counts,
for every integration (the mechanics are in ``fastdeflate/integrations/_outbox.py``).

A message of at least `off_loop_size()` bytes is compressed in one of fastdeflate's
worker threads (the codec releases the GIL for it) while the connection's later frames
wait behind it and other connections go on; 0 turns it off. On Linux the workers run
`off_loop_nice()` steps nicer than the thread that started them, so that where the CPUs
are busy the event loop (the other connections' small messages) goes first.
``FASTDEFLATE_OFF_LOOP_SIZE`` and ``FASTDEFLATE_OFF_LOOP_NICE`` set them at import.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # (neither is imported with fastdeflate: only at the first large message)
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["set_off_loop_size", "off_loop_size", "set_off_loop_nice", "off_loop_nice",
           "run", "counted", "counts", "DEFAULT_SIZE", "DEFAULT_NICE"]

#: 64 KiB: about half a millisecond of compression at level 6 on JSON here, more than a
#: hand-off to a thread costs the loop (~50 us), far less than a 4 MB message (~40 ms).
DEFAULT_SIZE = 1 << 16

#: 10: where the CPUs are busy, a worker gets about a tenth of what the event loop
#: thread gets (Linux's weights for nice 0 and 10); an idle CPU it gets whole.
DEFAULT_NICE = 10
NICE_MAX = 19  # (Linux's lowest priority)

_lock = threading.Lock()
_size = DEFAULT_SIZE
_nice = DEFAULT_NICE
# (the process that made it, the pool): made at first use; rebound under _lock
_workers: "Optional[tuple[int, ThreadPoolExecutor]]" = None
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


def set_off_loop_nice(nice: int) -> int:
    """Run the worker threads that compress and decompress large messages ``nice`` steps
    below the priority of the thread that starts them (an increment of the Linux nice
    value, 0-19; 0: the same priority). Elsewhere they run at the same priority.
    Returns the previous value; the workers started from now on take it.
    ``FASTDEFLATE_OFF_LOOP_NICE`` sets it at import."""
    global _nice, _workers
    if type(nice) is not int or not 0 <= nice <= NICE_MAX:
        raise ValueError(f"off-loop nice must be an int in 0..{NICE_MAX}, got {nice!r}")
    with _lock:
        previous, _nice = _nice, nice
        old, _workers = _workers, None
    if old is not None:
        old[1].shutdown(wait=False)  # (its threads end after the jobs they have)
    return previous


def off_loop_nice() -> int:
    """The increment set by `set_off_loop_nice()` (0: the workers' priority is the
    loop's)."""
    return _nice  # an int, rebound only under _lock: read as it is


def run(loop: asyncio.AbstractEventLoop, job: Callable[..., Any],
        *args: Any) -> "asyncio.Future[Any]":
    """``job(*args)`` in one of the worker threads (made at first use, named
    ``fastdeflate-off-loop``), as ``loop.run_in_executor`` runs it."""
    workers = _workers
    if workers is None or workers[0] != os.getpid():
        workers = _pool()
    return loop.run_in_executor(workers[1], job, *args)


def _pool() -> "tuple[int, ThreadPoolExecutor]":
    """This process's worker pool, made if it has none (as many threads as CPUs, at least
    2): a forked child has none of its parent's threads, and makes its own. A pool is
    made outside the lock (nothing a garbage collection could run happens under it), and
    put in place only if none came first and the setting is still the one it took."""
    global _workers
    from concurrent.futures import ThreadPoolExecutor

    while True:
        nice = _nice
        made = (os.getpid(), ThreadPoolExecutor(
            max(2, os.cpu_count() or 1), thread_name_prefix="fastdeflate-off-loop",
            initializer=_lower_priority, initargs=(nice,)))  # (no thread until a job)
        with _lock:
            found = _workers
            if (found is None or found[0] != made[0]) and nice == _nice:
                _workers = found = made
        if found is made:
            return made
        made[1].shutdown(wait=False)
        if found is not None and found[0] == made[0]:
            return found  # another thread's pool came first
        # (the setting changed meanwhile: a pool with the new one)


def _lower_priority(nice: int) -> None:
    """A worker thread's start: ``nice`` steps nicer than it began (Linux only: there a
    thread's nice value is its own; elsewhere `os.setpriority` would reach a process)."""
    if nice and sys.platform.startswith("linux"):
        me = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, me,
                           min(NICE_MAX, os.getpriority(os.PRIO_PROCESS, me) + nice))
        except OSError:  # (a sandbox that refuses it: the worker runs as it is)
            pass


if hasattr(os, "register_at_fork"):  # a child never starts with _lock held elsewhere
    os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                        after_in_child=_lock.release)


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
