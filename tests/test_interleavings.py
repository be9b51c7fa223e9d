"""Races of the shared state, hit on purpose: a thread is stopped at a named point of a
call (the test hook ``_set_test_hook``) while another does what races with it there, or
every ring lock is held while threads enter each path that takes one.

The points are reached by hooks, not by luck, so these tests mean the same with or without
a GIL (free-threaded CPython). Every test checks what a peer sees: stock zlib decodes each
payload exactly, a decompressor decodes stock zlib's stream.
"""

from __future__ import annotations

import gc
import random
import threading
import time
import zlib
from types import ModuleType
from typing import Callable, Optional

import pytest

import fastdeflate
from _tally import tally
from conftest import load_implementation
from test_rejoin import message  # ~1,000 bytes of JSON, different for each k and tag

ext = load_implementation("cython")
TAIL = b"\x00\x00\xff\xff"
WAIT = 20  # seconds: generous bounds for a stopped thread to arrive somewhere


def text(rng: random.Random, size: int) -> bytes:
    return b"".join(b'{"seq":%d,"v":%d}' % (rng.randrange(1000), rng.randrange(10**6))
                    for _ in range(size // 18 + 1))[:size]


class Stop:
    """Stops the first thread that reaches ``point`` (and for which ``when()`` holds)
    there, until :meth:`go`; other threads and other points pass."""

    def __init__(self, impl: ModuleType, point: str,
                 when: Callable[[], bool] = lambda: True):
        self.impl, self.point, self.when = impl, point, when
        self.arrived, self.released = threading.Event(), threading.Event()
        self.counts: dict[str, int] = {}

    def hook(self, point: str) -> None:
        self.counts[point] = self.counts.get(point, 0) + 1
        if point == self.point and not self.arrived.is_set() and self.when():
            self.arrived.set()
            assert self.released.wait(WAIT), "never released"

    def __enter__(self) -> "Stop":
        self.previous = self.impl._set_test_hook(self.hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.impl._set_test_hook(self.previous)

    def go(self) -> None:
        self.released.set()


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list]:
    """Run ``call`` in a new thread; the list gets its result or exception."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # judged by the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


@pytest.fixture(params=[False, True], ids=["gil-above-threshold", "gil-released-always"])
def settings(request):
    """Restore the live-state limits and park-after delays a test changes. Each test runs
    twice: with the GIL released around the engines only for large inputs (as shipped),
    and around every call (``_set_release_gil_always``), where threads also interleave
    inside the codec on small messages."""
    modules = [load_implementation(name) for name in ("cython", "python")]
    saved = [(m.set_live_states(16), m.set_park_after(10),
              m._set_release_gil_always(request.param)) for m in modules]
    yield
    for module, (limit, after, gil) in zip(modules, saved):
        module.set_live_states(limit)
        module.set_park_after(after)
        module._set_release_gil_always(gil)


class Pair:
    """A compressor under test with stock zlib as its peer."""

    def __init__(self, impl: ModuleType, window_bits: int = 12, level: int = 6):
        self.compressor = impl.Compressor(level, window_bits, 5)
        self.peer = zlib.decompressobj(-window_bits)

    def send(self, data: bytes, payload: Optional[bytes] = None) -> None:
        payload = self.compressor.compress(data) if payload is None else payload
        assert self.peer.decompress(payload + TAIL) == data
        tally("messages checked in interleavings")


def corrupt_decompressor(impl: ModuleType) -> object:
    d = impl.Decompressor(12)
    with pytest.raises(fastdeflate.DecompressionError):
        d.decompress(b"\xff\xff\xff\xff")
    return d


# --- the extension's rings: parked while a call settles or claims ------------------------


@pytest.mark.test_build
def test_refusing_decompressor_parked_while_it_settles(settings):
    """A decompressor refusing after an error settles without having claimed its stream;
    if the sweeper parks it just then, the settle finds no stream (it used to take the
    scratch of a NULL stream: SIGSEGV)."""
    impl = ext
    refused = corrupt_decompressor(impl)  # linked with its stream, least recently used
    other = impl.Decompressor(12)
    stock = zlib.compressobj(6, zlib.DEFLATED, -12)
    data = b"hello " * 50
    assert other.decompress((stock.compress(data) + stock.flush(zlib.Z_SYNC_FLUSH))[:-4]) == data
    impl.set_live_states(1)
    with Stop(impl, "settle") as stop:
        thread, outcome = in_thread(lambda: refused.decompress(b"\x00"))
        assert stop.arrived.wait(WAIT)
        impl.set_park_after(0)
        assert impl._park_idle()[0] >= 1  # the sweeper's round: parks the refused one
        stop.go()
        thread.join(WAIT)
    assert isinstance(outcome[0], fastdeflate.DecompressionError)
    assert "reset()" in str(outcome[0])
    refused.reset()
    again = zlib.compressobj(6, zlib.DEFLATED, -12)
    assert refused.decompress((again.compress(data) + again.flush(zlib.Z_SYNC_FLUSH))[:-4]) == data


@pytest.mark.test_build
def test_leader_with_another_history_parked_while_it_settles(settings):
    """broadcast()'s _lead() on a compressor whose history moved on settles without
    claiming: parked meanwhile, it must stay consistent."""
    impl, rng = ext, random.Random(2)
    pair, other = Pair(impl), Pair(impl)
    pair.send(text(rng, 900))
    other.send(text(rng, 900))
    impl.set_live_states(1)
    main = threading.main_thread()
    with Stop(impl, "settle", when=lambda: threading.current_thread() is not main) as stop:
        thread, outcome = in_thread(lambda: pair.compressor._lead(b"x" * 100, 12345))
        assert stop.arrived.wait(WAIT)
        impl.set_park_after(0)
        assert impl._park_idle()[0] >= 1
        stop.go()
        thread.join(WAIT)
    assert outcome == [None]
    for _ in range(3):
        pair.send(text(rng, 1500))
        other.send(text(rng, 1500))


@pytest.mark.test_build
def test_compressor_parked_while_it_claims(settings):
    """A compressor stopped just before it claims its stream is parked (its window saved,
    its stream ended): the call goes on with a stream of its own and its window back."""
    impl, rng = ext, random.Random(3)
    pair, other = Pair(impl), Pair(impl)
    pair.send(text(rng, 2000))
    other.send(text(rng, 2000))
    impl.set_live_states(1)
    data = text(rng, 2000)
    main = threading.main_thread()
    with Stop(impl, "claim", when=lambda: threading.current_thread() is not main) as stop:
        thread, outcome = in_thread(lambda: pair.compressor.compress(data))
        assert stop.arrived.wait(WAIT)
        impl.set_park_after(0)
        assert impl._park_idle()[0] >= 1
        stop.go()
        thread.join(WAIT)
    pair.send(data, outcome[0])
    other.send(text(rng, 900))


@pytest.mark.test_build
def test_live_states_while_objects_are_parked_and_freed(settings):
    """live_states() stopped between rings while others park and free objects: its
    report is a consistent snapshot of each ring, and nothing it holds is freed."""
    impl, rng = ext, random.Random(4)
    pairs = [Pair(impl) for _ in range(4)]
    for pair in pairs:
        pair.send(text(rng, 900))
    key = ("deflate", 6, 12, 5, 0)
    impl.set_live_states(1)
    main = threading.main_thread()
    with Stop(impl, "live_states", when=lambda: threading.current_thread() is not main) as stop:
        thread, outcome = in_thread(impl.live_states)
        assert stop.arrived.wait(WAIT)
        impl.set_park_after(0)
        impl._park_idle()
        del pairs[:2]
        stop.go()
        thread.join(WAIT)
    live, idle = outcome[0][key]
    assert 0 <= idle <= live
    for pair in pairs:
        pair.send(text(rng, 900))


# --- compress once: followers and leaders --------------------------------------------------


@pytest.mark.test_build(also_fallback=True)
def test_two_followers_that_both_found_no_window_share_one(impl, settings):
    """Two followers both see that the leader's window after a message was not fetched
    yet; the second must read the window the first stored (it used to fetch another and
    replace it, freeing the first's while it might still be read: a use-after-free
    without the GIL). The window is fetched once."""
    previous = impl._set_sharing(True)
    try:
        rng = random.Random(5)
        leader, first, second = Pair(impl), Pair(impl), Pair(impl)
        warm = text(rng, 800)
        for pair in (leader, first, second):
            pair.send(warm)
        data = text(rng, 1500)
        leader.send(data)
        main = threading.main_thread()
        with Stop(impl, "follow", when=lambda: threading.current_thread() is not main) as stop:
            thread, outcome = in_thread(lambda: first.compressor.compress(data))
            assert stop.arrived.wait(WAIT)  # it saw no window and stopped there
            second.send(data)
            stop.go()
            thread.join(WAIT)
        first.send(data, outcome[0])
        assert stop.counts.get("give_window") == 1, stop.counts
        for pair in (leader, first, second):
            pair.send(text(rng, 700))
    finally:
        impl._set_sharing(previous)


@pytest.mark.test_build(also_fallback=True)
def test_window_that_cannot_be_fetched_leaves_the_leader_parkable(impl, settings):
    """The leader's window fetch fails (MemoryError): the follower's call raises, and the
    leader goes back to its ring's idle list (it used to stay claimed: never parked)."""
    previous = impl._set_sharing(True)
    try:
        rng = random.Random(6)
        # a parameter set of its own: a ring no other test of this process has used
        leader, follower = Pair(impl, 10, 8), Pair(impl, 10, 8)
        first = text(rng, 800)
        leader.send(first)
        follower.send(first)  # follows: holds no stream
        data = text(rng, 1500)
        leader.send(data)

        def fail(point: str) -> None:
            if point == "give_window":
                raise MemoryError("injected")

        hook = impl._set_test_hook(fail)
        try:
            with pytest.raises(MemoryError):
                follower.compressor.compress(data)
        finally:
            impl._set_test_hook(hook)
        if impl is ext:
            key = ("deflate", 8, 10, 5, 0)
            live, idle = impl.live_states()[key]
            assert idle == live == 1, "the leader was left claimed"
            impl.set_live_states(1)
            impl.set_park_after(0)
            Pair(impl, 10, 8).send(text(rng, 300))  # another's call parks the idle leader
        for pair in (leader, follower):
            pair.send(text(rng, 900))
    finally:
        impl._set_sharing(previous)


@pytest.mark.test_build
@pytest.mark.parametrize("path", ["compress", "broadcast"])
def test_exception_after_the_message_went_in_loses_it_for_both_peers(impl, path):
    """Whatever raises after the stream has taken a message (an allocation of the
    compress-once bookkeeping, say), the peer's next message decodes exactly: the message
    that raised never reached it (it used to stay in the history: wrong bytes)."""
    previous = impl._set_sharing(True)
    try:
        rng = random.Random(7)
        pairs = [Pair(impl) for _ in range(3)]
        for _ in range(2):
            warm = text(rng, 900)
            for pair, payload in zip(pairs, fastdeflate.broadcast(
                    warm, [p.compressor for p in pairs])):
                pair.send(warm, payload)

        def fail(point: str) -> None:
            if point == "committed":
                raise MemoryError("injected")

        data = text(rng, 2000)
        hook = impl._set_test_hook(fail)
        try:
            with pytest.raises(MemoryError):
                if path == "compress":
                    pairs[0].compressor.compress(data)
                else:
                    fastdeflate.broadcast(data, [p.compressor for p in pairs])
        finally:
            impl._set_test_hook(hook)
        for _ in range(3):
            for pair in pairs:
                pair.send(text(rng, 1200))
    finally:
        impl._set_sharing(previous)


# --- every ring lock held while threads enter each path ------------------------------------


@pytest.mark.test_build
def test_every_path_waits_for_a_held_ring_lock_and_then_goes_on(settings):
    """With every ring's lock held (as across fork()), threads entering the sweeper,
    a compressor's claim and settle, a refusing decompressor's settle, live_states() and
    a follower all wait; released, each finishes and every peer decodes exactly. Repeated,
    so that the order in which the waiters get the lock varies."""
    impl, rng = ext, random.Random(8)
    previous = impl._set_sharing(True)
    try:
        impl.set_live_states(1)
        impl.set_park_after(0)
        for round in range(20):
            pairs = [Pair(impl) for _ in range(3)]
            refused = corrupt_decompressor(impl)
            shared = text(rng, 900)
            pairs[0].send(shared)
            pairs[1].send(text(rng, 900))
            # No collection while the ring locks are held: a thread's start-up could free
            # an earlier round's codec object, whose finalizer waits for its ring's lock,
            # and this thread waits for that start-up (a real fork() waits for no thread)
            gc.collect()
            gc.disable()
            impl._before_fork()  # every ring lock, held
            try:
                data = text(rng, 1200)
                calls = [
                    lambda: impl._park_idle(),
                    lambda: pairs[1].compressor.compress(data),
                    lambda: refused.decompress(b"\x00"),
                    impl.live_states,
                    lambda: pairs[2].compressor.compress(shared),
                ]
                started = [in_thread(call) for call in calls]
                # each thread has had at least 0.05 s since it started to finish if its
                # path took no lock (one wait for them all, not 0.05 s after each)
                until = time.monotonic() + 0.05
                for thread, outcome in started:
                    thread.join(max(0.0, until - time.monotonic()))
                assert all(thread.is_alive() for thread, _ in started), "a path took no lock"
            finally:
                impl._after_fork_in_parent()
                gc.enable()
            for thread, _ in started:
                thread.join(WAIT)
                assert not thread.is_alive()
            pairs[1].send(data, started[1][1][0])
            assert isinstance(started[2][1][0], fastdeflate.DecompressionError)
            pairs[2].send(shared, started[4][1][0])
            for pair in pairs:
                pair.send(text(rng, 600))
    finally:
        impl._set_sharing(previous)


# --- compress once: a straggler joining a younger group ------------------------------------


@pytest.mark.test_build(also_fallback=True)
@pytest.mark.parametrize("private", [40, 1000], ids=["private-small", "private-shareable"])
def test_a_private_message_while_a_straggler_joins_keeps_it_out(impl, settings, private):
    """Members 1, 3 and 5 were sent private messages; at the next broadcast 5 starts a
    cohort. At the one after, member 1 is stopped in its join just after it fetched the
    cohort's state (the "adopt" point: it holds no lock there) while another thread sends
    it a private message. Resumed, it must refuse the state it fetched: its peer now has
    the private message last, where the cohort's payloads would refer to the cohort's
    window (taking it anyway decodes wrong at stock zlib). Small private messages are
    never shared; a shareable one makes that thread join first itself."""
    previous = impl._set_sharing(True)
    impl._forget_kept()
    budget = impl.set_start_over_budget(1e-9)
    try:
        pairs = [Pair(impl) for _ in range(10)]
        def fan_out(data: bytes) -> None:  # one object for all: a broadcast
            for pair in pairs:
                pair.send(data)

        for k in range(3):
            fan_out(message(k))
        for j in (1, 3, 5):
            pairs[j].send(message(j, "private"))
        fan_out(message(10))  # 1, 3 alone; 5 starts a cohort, 7 and 9 take it
        data = message(11)
        pairs[0].send(data)
        before = impl._compress_once_counts()[2]
        main = threading.main_thread()
        with Stop(impl, "adopt", when=lambda: threading.current_thread() is not main) as stop:
            thread, outcome = in_thread(lambda: pairs[1].compressor.compress(data))
            assert stop.arrived.wait(WAIT)
            assert stop.counts.get("adopt") == 1  # stopped in its join, before its message
            words = message(1, "private again")[:private]
            pairs[1].send(words)
            stop.go()
            thread.join(WAIT)
        assert not thread.is_alive()
        pairs[1].send(data, outcome[0])
        if private < 64:
            assert impl._compress_once_counts()[2] == before  # nobody joined
        for k in range(12, 16):
            fan_out(message(k))
    finally:
        impl.set_start_over_budget(budget)
        impl._set_sharing(previous)
        impl._forget_kept()
