"""fastdeflate's worker threads for large messages (fastdeflate/_off_loop.py): their own
pool, not the loop's default executor; on Linux nicer than the thread that starts them
(`set_off_loop_nice()`, ``FASTDEFLATE_OFF_LOOP_NICE``); the same priority elsewhere; a
forked child makes its own pool. Real threads and priorities, read back from the kernel.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from typing import Any, Iterator

import pytest
from _subprocess import run_python

import fastdeflate
from fastdeflate import _off_loop

LINUX = sys.platform.startswith("linux")


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def where_it_runs() -> tuple[str, int]:
    """A job's thread: its name and nice value."""
    return threading.current_thread().name, nice_of_this_thread()


async def in_worker(job: Any = where_it_runs) -> Any:
    loop = asyncio.get_running_loop()
    result = await _off_loop.run(loop, job)
    assert loop._default_executor is None  # type: ignore[attr-defined]  # (never made)
    return result


@pytest.fixture
def nice() -> Iterator[None]:
    """The setting (and a fresh pool) restored afterwards."""
    previous = _off_loop.off_loop_nice()
    yield
    fastdeflate.set_off_loop_nice(previous)


@pytest.mark.skipif(not LINUX, reason="a thread's nice value is its own on Linux only")
@pytest.mark.parametrize("setting", [10, 3, 0])
def test_workers_run_nicer_than_the_thread_that_starts_them(setting: int,
                                                            nice: None) -> None:
    fastdeflate.set_off_loop_nice(setting)
    name, worker = asyncio.run(in_worker())
    assert name.startswith("fastdeflate-off-loop")
    assert worker == min(19, nice_of_this_thread() + setting)
    assert fastdeflate.status()["off_loop"]["nice"] == setting


@pytest.mark.skipif(not LINUX, reason="a thread's nice value is its own on Linux only")
def test_a_new_setting_replaces_the_pool(nice: None) -> None:
    """Workers started before a change keep their nice (a thread cannot be made less
    nice again without privileges): the pool is replaced, its threads end."""
    fastdeflate.set_off_loop_nice(7)
    first = asyncio.run(in_worker(threading.current_thread))
    assert nice_of(first) == min(19, nice_of_this_thread() + 7)
    fastdeflate.set_off_loop_nice(0)
    name, worker = asyncio.run(in_worker())
    assert worker == nice_of_this_thread()
    first.join(10)
    assert not first.is_alive()


def nice_of(thread: threading.Thread) -> int:
    assert thread.native_id is not None
    return os.getpriority(os.PRIO_PROCESS, thread.native_id)


def test_elsewhere_the_workers_keep_the_loops_priority(nice: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and Windows: no setpriority on a thread id (there it would name a
    process): the workers run at the starting thread's priority."""
    monkeypatch.setattr(sys, "platform", "darwin")
    fastdeflate.set_off_loop_nice(10)  # (a fresh pool, started as on macOS)
    name, worker = asyncio.run(in_worker())
    assert name.startswith("fastdeflate-off-loop")
    assert worker == nice_of_this_thread()


@pytest.mark.parametrize("bad", [-1, 20, 2.0, "3", True, None])
def test_a_bad_setting_is_refused_and_changes_nothing(bad: Any, nice: None) -> None:
    before = _off_loop.off_loop_nice()
    with pytest.raises(ValueError, match="off-loop nice"):
        fastdeflate.set_off_loop_nice(bad)
    assert _off_loop.off_loop_nice() == before


def test_the_setting_returns_the_previous_one(nice: None) -> None:
    fastdeflate.set_off_loop_nice(4)
    assert fastdeflate.set_off_loop_nice(6) == 4
    assert _off_loop.off_loop_nice() == 6


@pytest.mark.parametrize("value, expected, warns", [("3", 3, False), ("0", 0, False),
                                                    ("25", 10, True), ("x", 10, True)])
def test_the_environment_sets_it_at_import(value: str, expected: int, warns: bool) -> None:
    done = run_python(
        "import warnings; warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    import fastdeflate\n"
        "print(fastdeflate.status()['off_loop']['nice'],"
        " any('FASTDEFLATE_OFF_LOOP_NICE' in str(x.message) for x in w))",
        FASTDEFLATE_OFF_LOOP_NICE=value)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(expected), str(warns)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_makes_its_own_pool(nice: None) -> None:
    """The parent's pool has idle threads the child does not have: without a pool of
    its own, the child's first large message would wait for them forever."""
    fastdeflate.set_off_loop_nice(1)
    asyncio.run(in_worker())  # the parent's pool, with an idle thread
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            name, _ = asyncio.run(asyncio.wait_for(in_worker(), 10))
            code = 0 if name.startswith("fastdeflate-off-loop") else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(code)
    os.close(write)
    try:
        _, status = os.waitpid(pid, 0)
        assert os.read(read, 1) == b"\x00"
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(read)


def test_importing_fastdeflate_starts_no_pool_and_loads_no_asyncio() -> None:
    """The pool, and asyncio and concurrent.futures with it, come at the first large
    message: a process that never sends one (or never runs an event loop) pays nothing
    at import."""
    done = run_python(
        "import sys, threading, fastdeflate\n"
        "print(sorted(m for m in ('asyncio', 'concurrent.futures') if m in sys.modules),"
        " [t.name for t in threading.enumerate() if 'off-loop' in t.name])")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"


def test_threads_starting_at_once_share_one_pool(nice: None) -> None:
    """Event loops in 8 threads send their first large message at the same moment (the
    jobs sleep without the GIL, as the codec runs): one pool is put in place, the others
    made meanwhile are dropped, and every job runs on one of its threads."""
    fastdeflate.set_off_loop_nice(0)  # (no pool yet)
    start = threading.Barrier(8)
    ran: list[threading.Thread] = []

    def job() -> threading.Thread:
        time.sleep(0.05)
        return threading.current_thread()

    def loop_thread() -> None:
        async def main() -> None:
            start.wait()
            ran.append(await _off_loop.run(asyncio.get_running_loop(), job))
        asyncio.run(main())

    threads = [threading.Thread(target=loop_thread) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    pool = _off_loop._workers
    assert pool is not None and len(ran) == 8
    assert {t.ident for t in ran} <= {t.ident for t in pool[1]._threads}  # type: ignore[attr-defined]
