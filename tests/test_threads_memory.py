"""Threads sharing codec objects, and memory that stays flat over many messages."""

from __future__ import annotations

import functools
import gc
import json
import sys
import threading
import time
import tracemalloc
from typing import Callable

import pytest

from fastdeflate import DeflateError

SMALL = json.dumps({"symbol": "ABC", "bid": 101.25, "ask": 101.5, "seq": 1}).encode()
LARGE = b"".join(b'{"seq": %d, "price": %d}' % (i, i * 31 % 997) for i in range(20_000))


def run_threads(target, count: int) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            target(index)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


@pytest.mark.timeout(120)
def test_threads_with_their_own_objects(impl):
    def work(index: int) -> None:
        c, d = impl.Compressor(), impl.Decompressor()
        for i in range(150):
            message = (LARGE if i % 10 == index % 10 else SMALL) + b"%d" % i
            assert d.decompress(c.compress(message), max_size=len(LARGE) + 100) == message

    assert run_threads(work, 6) == []


@pytest.mark.timeout(120)
def test_threads_sharing_one_compressor_and_one_decompressor(impl):
    """Shared objects without context takeover: every payload stands alone."""
    c = impl.Compressor(no_context_takeover=True)
    d = impl.Decompressor(no_context_takeover=True)
    reference = impl.Compressor(no_context_takeover=True)
    expected = {m: reference.compress(m) for m in (SMALL, LARGE)}

    def work(index: int) -> None:
        for i in range(150):
            message = LARGE if (i + index) % 7 == 0 else SMALL
            payload = c.compress(message)
            assert payload == expected[message]
            assert d.decompress(payload) == message

    assert run_threads(work, 6) == []


@pytest.mark.timeout(120)
def test_threads_hammering_a_context_takeover_pair_leave_it_usable(impl):
    """Unsynchronised calls from many threads never crash or corrupt the objects."""
    c, d = impl.Compressor(), impl.Decompressor()

    def work(index: int) -> None:
        for i in range(200):
            message = LARGE[: 1000 * (index + 1)] if i % 5 == 0 else SMALL
            payload = c.compress(message, fin=i % 3 == 0)
            try:  # interleaved with other threads: any result, or a documented error
                assert isinstance(d.decompress(payload, fin=i % 2 == 0), bytes)
            except DeflateError:
                d.reset()
            if i % 17 == index:
                c.reset()

    assert run_threads(work, 6) == []
    c.reset()
    d.reset()
    assert d.decompress(c.compress(LARGE)) == LARGE
    assert d.decompress(c.compress(LARGE)) == LARGE


def test_errors_from_threads_leave_the_decompressor_consistent(impl):
    d = impl.Decompressor()
    good = impl.Compressor(no_context_takeover=True).compress(SMALL)

    def work(index: int) -> None:
        for _ in range(200):
            try:
                d.decompress(b"\xff\xff" if index % 2 else good, max_size=10_000)
            except DeflateError:
                d.reset()

    assert run_threads(work, 4) == []
    d.reset()
    assert d.decompress(good) == SMALL


def traced_growth(step, warmup: int, count: int) -> int:
    """Bytes still allocated after ``count`` calls of ``step``, beyond the warm-up."""
    for i in range(warmup):
        step(i)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(count):
            step(i)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("no_context_takeover", [False, True])
def test_100k_messages_memory_stays_flat(impl, no_context_takeover):
    c = impl.Compressor(no_context_takeover=no_context_takeover)
    d = impl.Decompressor(no_context_takeover=no_context_takeover)
    corrupt = impl.Decompressor()

    def step(i: int) -> None:
        message = SMALL + b"%d" % i
        if i % 1000 == 999:
            message = LARGE  # the occasional large message grows, then frees, buffers
        assert d.decompress(c.compress(message), max_size=len(LARGE)) == message
        if i % 100 == 0:  # the error paths too
            try:
                corrupt.decompress(b"\xff\xff\xff")
            except DeflateError:
                corrupt.reset()

    assert traced_growth(step, warmup=2000, count=100_000) < 64 * 1024


def test_idle_objects_allocate_nothing_until_used(impl):
    """zlib state is created on first use: a thousand idle pairs cost almost nothing."""
    def make(_: int) -> None:
        pairs.append((impl.Compressor(), impl.Decompressor()))

    pairs: list = []
    growth = traced_growth(make, warmup=0, count=1000)
    assert growth < 1000 * 2 * 2048  # no 256 KiB deflate state per pair
    c, d = pairs[0]
    assert d.decompress(c.compress(SMALL)) == SMALL


def progress_during(call: Callable[[], object], attempts: int = 5) -> int:
    """How far another Python thread counts while ``call`` runs (the most of a few runs).

    The switch interval is made huge, so the interpreter never takes the GIL from a
    thread by itself; the counting thread gives it up at each step (a short sleep, so
    the main thread gets it back at once). It can therefore count during ``call`` only
    if ``call`` releases the GIL.
    """
    count = 0
    stop = False

    def spin() -> None:
        nonlocal count
        while not stop:
            count += 1
            time.sleep(0.0002)  # lets the main thread back in once its call returns

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    thread = threading.Thread(target=spin)
    thread.start()
    best = 0
    try:
        for _ in range(attempts):
            before = count
            call()
            best = max(best, count - before)
            if best:
                break
    finally:
        stop = True
        thread.join(timeout=60)
        sys.setswitchinterval(interval)
    assert not thread.is_alive()
    return best


HUGE = LARGE * 60  # ~1.5 MB: far over the sizes where the GIL is released


@pytest.mark.timeout(120)
@pytest.mark.parametrize("side", ["compress", "decompress"])
def test_long_calls_release_the_gil(impl, side):
    """Another thread makes progress during a long compress() or decompress() (the
    extension releases the GIL around zlib; the stdlib module, behind the fallback, too)."""
    c, d = impl.Compressor(), impl.Decompressor()
    payload = c.compress(HUGE)
    if side == "compress":
        call = functools.partial(c.compress, HUGE)
    else:
        call = functools.partial(d.decompress, payload)
    assert progress_during(call) > 0
    assert d.decompress(payload) == HUGE  # (and the results are right)
