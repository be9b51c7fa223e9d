"""Busy connections keep their streams; only idle ones are parked.

Beyond ``set_live_states(n)`` streams per parameter set, the extension parks an object
only once it has been idle for ``set_park_after(seconds)``: when its ring is used (up to
two per call) or, with no call at all, from the sweeper thread. Connections served
round-robin faster than that all keep live streams (no window restored per message);
once they go quiet they keep only their window, down to the limit. The fallback has the
same interface (it never parks), and the message tests run on both.
"""

from __future__ import annotations

import math
import os
import sys
import time
import zlib

import pytest

import fastdeflate
from _subprocess import run_python
from fastdeflate._parking import wait_until_parked
from test_live_states import TAIL, message, parked

# each test its own parameter set: objects another test left alive never count
KEY = ("deflate", 6, 15, 8, 0)
SWEPT = ("deflate", 6, 15, 7, 0)
LENT = ("deflate", 6, 14, 8, 0)


def wait_until(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.02)


@pytest.fixture
def small_limit(impl):
    previous = impl.set_live_states(2), impl.set_park_after(60)
    yield 2
    impl.set_live_states(previous[0])
    impl.set_park_after(previous[1])


def round_robin(impl, pairs, stock, rounds: int, start: int = 0) -> None:
    """Each pair sends ``rounds`` messages, in turns; a stock decoder and the pair's own
    decompressor both get each message back."""
    for r in range(start, start + rounds):
        for i, (c, d) in enumerate(pairs):
            data = message(r * 1000 + i)
            payload = c.compress(data)
            assert stock[i].decompress(payload + TAIL) == data
            assert d.decompress(payload) == data


def test_busy_connections_keep_their_streams_until_idle(impl, small_limit):
    """40 pairs round-robin (limit 2, park-after 60 s): every compressor keeps its live
    stream, none is parked or restored. Made idle (park-after 0), they are parked down to
    the limit, and the next round restores their windows: the peer decodes all of it."""
    pairs = [(impl.Compressor(6, 15, 8), impl.Decompressor(15)) for _ in range(40)]
    stock = [zlib.decompressobj(-15) for _ in pairs]
    round_robin(impl, pairs, stock, 3)
    is_ext = impl.__name__.endswith("_fastdeflate")
    if is_ext:
        assert parked(impl, KEY) == (40, 40)
        assert parked(impl, ("inflate", 15)) == (40, 40)
    impl.set_park_after(0)
    if is_ext:
        wait_until(lambda: parked(impl, KEY) == (small_limit, small_limit))
        assert parked(impl, ("inflate", 15)) == (small_limit, small_limit)
    round_robin(impl, pairs, stock, 2, start=3)


@pytest.mark.test_build
def test_the_sweeper_parks_with_no_call_made(impl, small_limit):
    """No codec call after the messages: the sweeper thread alone parks the idle
    objects once park-after has passed, never below the limit."""
    if not impl.__name__.endswith("_fastdeflate"):
        pytest.skip("the fallback never parks")
    pairs = [(impl.Compressor(6, 15, 7), impl.Decompressor(15)) for _ in range(20)]
    stock = [zlib.decompressobj(-15) for _ in pairs]
    round_robin(impl, pairs, stock, 1)
    assert parked(impl, SWEPT) == (20, 20)
    assert impl._sweeper_running()
    impl.set_park_after(0.3)  # wakes the sweeper, whose period follows
    time.sleep(0.1)
    assert parked(impl, SWEPT)[0] > small_limit  # not yet: idle for less than 0.3 s
    wait_until(lambda: parked(impl, SWEPT) == (small_limit, small_limit))
    round_robin(impl, pairs, stock, 1, start=1)


def test_waiting_until_parked_follows_the_live_streams(impl, small_limit):
    """``wait_until_parked()`` (what the benchmarks and tools wait on) waits while a
    parameter set holds more live streams than the limit: busy objects keep theirs, so
    it times out; once they have been idle for park-after it returns True."""
    if not impl.__name__.endswith("_fastdeflate"):
        pytest.skip("the fallback never parks")
    key = ("deflate", 6, 13, 8, 0)
    objs = [impl.Compressor(6, 13, 8) for _ in range(6)]
    for i, c in enumerate(objs):
        c.compress(message(i))
    assert parked(impl, key) == (6, 6) and impl._sets_over_limit() >= 1
    assert not wait_until_parked(0.2)
    impl.set_park_after(0.05)
    assert wait_until_parked(30)
    assert parked(impl, key) == (small_limit, small_limit)
    assert impl._sets_over_limit() == 0


def test_an_object_idle_for_park_after_lends_its_stream(impl, small_limit):
    """At the limit, an object that needs a stream takes an idle one's only if that one
    has been idle for park-after; otherwise a new stream is made."""
    if not impl.__name__.endswith("_fastdeflate"):
        pytest.skip("the fallback never parks")
    a, b, c = (impl.Compressor(6, 14, 8) for _ in range(3))
    peer = zlib.decompressobj(-14)
    assert peer.decompress(a.compress(message(1)) + TAIL) == message(1)
    b.compress(message(2))
    c.compress(message(3))  # a and b were just used: c gets a stream of its own
    assert parked(impl, LENT) == (3, 3)
    impl.set_park_after(1e-9)  # a is now idle long enough; the next call parks it
    d = impl.Compressor(6, 14, 8)
    d.compress(message(4))  # takes a's stream (least recently used), then parks b
    assert parked(impl, LENT) == (small_limit, small_limit)
    assert peer.decompress(a.compress(message(5)) + TAIL) == message(5)  # window back


@pytest.mark.parametrize("bad,error", [(-1, ValueError), (-0.5, ValueError),
                                       (math.nan, ValueError), ("1", TypeError),
                                       (True, TypeError), (None, TypeError)])
def test_set_park_after_rejects_bad_values(impl, bad, error):
    previous = impl.set_park_after(3)
    try:
        with pytest.raises(error, match="seconds"):
            impl.set_park_after(bad)
        assert impl.set_park_after(math.inf) == 3.0  # unchanged by the refusal
        assert impl.set_park_after(0) == math.inf
    finally:
        impl.set_park_after(previous)


def test_package_exports_set_park_after():
    impl = __import__(fastdeflate.Compressor.__module__, fromlist=["x"])
    assert fastdeflate.set_park_after is impl.set_park_after


@pytest.mark.parametrize("value,expected,warns", [("0.5", 0.5, False), ("0", 0.0, False),
                                                  ("-1", 10.0, True), ("soon", 10.0, True),
                                                  ("", 10.0, False)])
def test_park_after_from_the_environment(impl, value, expected, warns):
    """FASTDEFLATE_PARK_AFTER sets the delay at import; a bad value warns and keeps the
    default (importing fastdeflate never fails over it)."""
    out = run_python("import fastdeflate as f; print(f.set_park_after(10))", impl=impl,
                     warnings=True, FASTDEFLATE_PARK_AFTER=value)
    assert out.stdout.split() == [str(expected)], out.stderr
    assert ("FASTDEFLATE_PARK_AFTER" in out.stderr) == warns, out.stderr


FORKED = """
import os
import fastdeflate._fastdeflate as ext
from fastdeflate._parking import wait_until_parked
ext.set_live_states(1)
ext.set_park_after(0.2)
def use(n):
    objs = [ext.Compressor(6, 12, 5) for _ in range(n)]
    for i, c in enumerate(objs):
        c.compress(b"x" * 100 + bytes([i]))
    return objs
keep = use(10)
assert ext._sweeper_running() and wait_until_parked(30)
pid = os.fork()
if pid == 0:
    ok = not ext._sweeper_running()  # the parent's thread does not exist here
    more = use(10)
    ok = ok and ext._sweeper_running() and wait_until_parked(30)
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.test_build
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")
def test_a_forked_child_starts_its_own_sweeper(impl):
    """The sweeper thread does not survive fork(): the child starts its own, which
    parks the child's idle objects."""
    if not impl.__name__.endswith("_fastdeflate"):
        pytest.skip("the fallback never parks")
    out = run_python(FORKED, impl=impl)
    assert out.stdout.split() == ["child", "0"], out.stderr


RSS_AFTER_PARKING = """
import sys, time
import fastdeflate._fastdeflate as ext
from fastdeflate._parking import wait_until_parked
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
ext.set_park_after(3600)
ext._set_trimming(sys.argv[1] == "trim")
before = rss()
pairs = [(ext.Compressor(6, 12, 5), ext.Decompressor(12)) for _ in range(2000)]
for i, (c, d) in enumerate(pairs):
    d.decompress(c.compress(b'{"seq": %d, "text": "%s"}' % (i, b"x" * (i % 50))))
busy = rss()
ext.set_park_after(0.05)
assert wait_until_parked(30), ext.live_states()
time.sleep(1.0)  # the sweeper's next round, after the last park
print(before, busy, rss(), ext._release_free_memory())
"""


@pytest.mark.test_build
@pytest.mark.skipif(not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION")
                    is None, reason="glibc's malloc_trim")
@pytest.mark.parametrize("trim", [True, False])
def test_parked_memory_goes_back_to_the_system(impl, trim):
    """2,000 busy pairs at window 12 / memLevel 5 (states of ~38 KiB: glibc keeps them
    in its heap when freed), then quiet: after the sweeper parks them it hands the freed
    pages back, and the process's RSS falls by most of what the streams took. Without
    that step (as on other C libraries) the pages stay, though reusable."""
    if not impl.__name__.endswith("_fastdeflate"):
        pytest.skip("the fallback never parks")
    out = run_python(RSS_AFTER_PARKING, "trim" if trim else "keep", impl=impl)
    before, busy, quiet, pending = out.stdout.split()
    grown, given_back = int(busy) - int(before), int(busy) - int(quiet)
    assert grown > 2000 * 25 * 1024, out.stderr  # the streams took 25 KiB or more each
    assert pending == "False"  # nothing parked since the sweeper's last round
    if trim:
        assert given_back > 0.6 * grown, (grown, given_back)
    else:
        assert given_back < 0.3 * grown, (grown, given_back)
