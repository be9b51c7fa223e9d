"""Fixtures shared by the integrations' tests."""

from __future__ import annotations

import os
import sys
import threading
from typing import Iterator

import pytest

import fastdeflate

from ._what_pays import choice


@pytest.fixture
def default_what_pays() -> Iterator[None]:
    """Compress what pays at its defaults (skip on, no minimum size), counters from zero;
    the settings before are back afterwards."""
    with choice():
        yield


@pytest.fixture
def own_workers() -> Iterator[int]:
    """Large messages must go to fastdeflate's worker threads at their nice: a fresh
    pool at nice 3 (yields it); afterwards, one of its threads is alive at 3 steps
    nicer than this thread on Linux (the pool is made only by a job sent to it)."""
    previous = fastdeflate.set_off_loop_nice(3)  # (replaces the pool: none of its threads yet)
    older = set(workers())  # (the old pool's, ending; held, so no new one is taken for one)
    try:
        yield 3
        found = [nice_of(t) for t in workers() if t not in older]
        assert found, "no large message went to fastdeflate's worker threads"
        if sys.platform.startswith("linux"):
            mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            assert min(19, mine + 3) in found, (mine, found)
    finally:
        fastdeflate.set_off_loop_nice(previous)


def workers() -> list[threading.Thread]:
    """fastdeflate's live worker threads."""
    return [t for t in threading.enumerate() if t.name.startswith("fastdeflate-off-loop")]


def nice_of(thread: threading.Thread) -> int:
    """A thread's nice value (Linux; elsewhere 0)."""
    if not sys.platform.startswith("linux") or thread.native_id is None:
        return 0
    return os.getpriority(os.PRIO_PROCESS, thread.native_id)
