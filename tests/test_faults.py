"""Allocation failures at every allocation of every codec entry point, both implementations.

For k = 1, 2, ... a scene is set up afresh and one call made in it with its k-th memory
request failing (the extension's test hook ``_fail_allocation``: Python objects, PyMem and
PyMem_Raw, so zlib's own allocations too, in the extension and in the stdlib's zlib under
the fallback), until a k that the call does not reach. After each, the peers must agree:

- a compressor: stock zlib, fed every payload that was returned, decodes exactly the data
  of the calls that returned (the message that raised never reached the peer). After a
  failure in the middle of a fragmented message the compressor may instead refuse
  (``DeflateError``) until ``reset()``, after which a new peer decodes its messages;
- a decompressor fed stock zlib's stream: given the same payload again, it decodes the
  message exactly, or it refuses (``DecompressionError``) until ``reset()``.
"""

from __future__ import annotations

import gc
import itertools
import random
import re
import threading
import zlib
from types import ModuleType
from typing import Callable

import pytest

import fastdeflate
from fastdeflate import DecompressionError, DeflateError, MessageTooBig
from _tally import tally

from conftest import load_implementation

ext = load_implementation("cython")  # the hook lives in the extension (fails if unbuilt)

TAIL = b"\x00\x00\xff\xff"
# level, window_bits, mem_level, no_context_takeover: aiohttp's level 1 at memLevels 1 and
# 8, websockets' 12/5, a small window at level 9, and a set without context takeover
SETTINGS = [(1, 15, 1, False), (1, 15, 8, False), (6, 12, 5, False), (9, 9, 9, False),
            (6, 15, 8, True)]
SETTING_IDS = [f"L{s[0]}-w{s[1]}-m{s[2]}{'-nct' if s[3] else ''}" for s in SETTINGS]


WORDS = [b'"price"', b'"qty"', b'"side"', b'"buy"', b'"sell"', b"{", b"}", b":", b","]


def text(rng: random.Random, size: int) -> bytes:
    """Varying JSON-like bytes: compressible, never the same twice (a new object).

    Each part is ``rng.choice(WORDS)`` if ``rng.random() < 0.7``, else
    ``b"%d" % rng.randrange(10**6)``: the same draws written out (``choice`` and
    ``randrange`` take ``getrandbits(n.bit_length())`` until it is below n), so that the
    scenes, set up afresh for every allocation, do not spend their time here."""
    uniform, bits, words = rng.random, rng.getrandbits, WORDS
    parts: list[bytes] = []
    append, length = parts.append, 0
    while length < size:
        if uniform() < 0.7:
            r = bits(4)
            while r >= 9:
                r = bits(4)
            part = words[r]
        else:
            r = bits(20)
            while r >= 1_000_000:
                r = bits(20)
            part = b"%d" % r
        append(part)
        length += len(part)
    return b"".join(parts)[:size]


def out_of_memory(exc: object) -> bool:
    """MemoryError, or CPython 3.11's SystemError for a Python call whose frame could
    not be allocated (it sets no exception: "error return without exception set",
    "... returned NULL without setting an exception")."""
    return isinstance(exc, MemoryError) or (
        isinstance(exc, SystemError) and re.search(r"without (setting an )?exception",
                                                   str(exc)) is not None)


def sweep(make_scene: Callable[[], "Scene"]) -> int:
    """For k = 1, 2, ...: a fresh scene, its call with the k-th memory request failing,
    then the scene's check. Ends after the first k the call did not reach; returns the
    number of calls made with a failure injected."""
    for k in itertools.count(1):
        scene = make_scene()
        call = scene.call
        ext._fail_allocation(k)
        try:
            outcome: object = call()
        except Exception as exc:  # judged by the check
            outcome = exc
        finally:
            _, fired = ext._fail_allocation(0)
        scene.check(outcome)
        if not fired:
            tally("calls with an allocation failure injected", k - 1)
            return k - 1
        assert k < 3000, "more allocations than a codec call should make"
    raise AssertionError("unreachable")


@pytest.fixture(autouse=True)
def quiet_collector():
    """The same set-up makes the same requests: no cyclic collection in between."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()
    gc.collect()  # the scenes' cycles (their calls refer to them): streams held mid-message


@pytest.fixture
def sharing(request, impl):
    previous = impl._set_sharing(request.param)
    yield request.param
    impl._set_sharing(previous)


@pytest.fixture
def parking(impl):
    """One live stream per parameter set, idle objects parked at once: every call of
    another object parks this one, every call of this one restores it."""
    limit, after = impl.set_live_states(1), impl.set_park_after(0)
    yield
    impl.set_live_states(limit)
    impl.set_park_after(after)


class Scene:
    call: Callable[[], object]

    def check(self, outcome: object) -> None:
        raise NotImplementedError


class Sender:
    """A compressor under test and stock zlib as its peer."""

    def __init__(self, impl: ModuleType, setting: tuple, rng: random.Random,
                 warm: int = 3):
        self.rng = rng
        level, self.window_bits, mem_level, nct = setting
        self.compressor = impl.Compressor(level, self.window_bits, mem_level, 0, nct)
        self.peer = zlib.decompressobj(-self.window_bits)
        self.sent = self.received = b""  # the current message's data / decoded bytes
        for _ in range(warm):
            self.send(text(rng, rng.choice((200, 1500, 5000))))

    def deliver(self, data: bytes, payload: bytes, fin: bool = True) -> None:
        """The peer gets ``payload``: it must decode the data of the calls that returned."""
        self.sent += data
        self.received += self.peer.decompress(payload + TAIL if fin else payload)
        if fin:
            assert self.received == self.sent, "the peer decoded other bytes"
            self.sent = self.received = b""

    def send(self, data: bytes) -> bytes:
        payload = self.compressor.compress(data)
        self.deliver(data, payload)
        return payload

    def goes_on(self, outcome: object, data: bytes = b"", fin: bool = True,
                may_refuse: bool = False) -> None:
        """After an armed call: its payload reaches the peer if it returned one; then the
        next calls' must decode exactly (or, if allowed, the compressor refuses until
        reset(), and a new peer follows)."""
        if isinstance(outcome, bytes):
            self.deliver(data, outcome, fin)
        elif outcome is not None and not out_of_memory(outcome):
            raise AssertionError(f"expected a payload or MemoryError, got {outcome!r}")
        following = text(self.rng, 900)
        try:
            payload = self.compressor.compress(following)
        except DeflateError as exc:
            assert may_refuse, f"a compressor refused after a whole message: {exc}"
            assert "reset()" in str(exc), exc
            with pytest.raises(DeflateError):
                self.compressor.compress(following)
            self.compressor.reset()
            self.peer = zlib.decompressobj(-self.window_bits)  # a new connection
            self.sent = self.received = b""
            payload = self.compressor.compress(following)
        self.deliver(following, payload)
        self.send(text(self.rng, 3000))


# --- compressors --------------------------------------------------------------------------


class WholeMessage(Scene):
    def __init__(self, impl, setting, rng, fresh_buffer: bool = False):
        self.sender = Sender(impl, setting, rng)
        if fresh_buffer:  # its output buffer freed (too large to keep), no spare in reach:
            self.sender.send(text(rng, 120_000))  # the sync flush's output grows a new one
            impl._forget_kept()
        self.data = text(rng, 2500)
        self.call = lambda: self.sender.compressor.compress(self.data)

    def check(self, outcome):
        self.sender.goes_on(outcome, self.data)


class Fragment(Scene):
    """The middle fragment, or the last, of a fragmented message."""

    def __init__(self, impl, setting, rng, flush: bool, last: bool):
        self.sender = sender = Sender(impl, setting, rng)
        first = text(rng, 1800)
        sender.deliver(first, sender.compressor.compress(first, False, flush=flush), False)
        self.data, self.fin = text(rng, 2500), last
        self.call = lambda: sender.compressor.compress(self.data, last, flush=flush)

    def check(self, outcome):
        self.sender.goes_on(outcome, self.data, self.fin, may_refuse=True)


class Follower(Scene):
    """A compressor sent the message its leader (same history) has just compressed: it
    takes the leader's payload and state (compress once), or compresses alone."""

    def __init__(self, impl, setting, rng):
        self.leader = Sender(impl, setting, rng, warm=0)
        self.follower = Sender(impl, setting, rng, warm=0)
        for _ in range(2):  # the same message objects: one history
            data = text(rng, 1500)
            self.leader.send(data)
            self.follower.send(data)
        self.data = text(rng, 2500)
        self.leader.send(self.data)
        self.call = lambda: self.follower.compressor.compress(self.data)

    def check(self, outcome):
        self.follower.goes_on(outcome, self.data)
        self.leader.goes_on(None)


class Broadcast(Scene):
    """broadcast() to a group of three with one history and a straggler."""

    def __init__(self, impl, setting, rng):
        self.senders = [Sender(impl, setting, rng, warm=0) for _ in range(4)]
        compressors = [s.compressor for s in self.senders]
        for _ in range(2):
            data = text(rng, 1500)
            for sender, payload in zip(self.senders, fastdeflate.broadcast(data, compressors)):
                sender.deliver(data, payload)
        self.senders[3].send(text(rng, 700))  # a private message: a straggler
        self.data = text(rng, 2500)
        self.call = lambda: fastdeflate.broadcast(self.data, compressors)

    def check(self, outcome):
        if isinstance(outcome, list):
            for sender, payload in zip(self.senders, outcome):
                sender.deliver(self.data, payload)
            outcome = None
        for sender in self.senders:
            sender.goes_on(outcome)


class Joiner(Scene):
    """A straggler joins a younger group: three members of a group were sent private
    messages; at the next broadcast the first two compress it alone and the third starts
    a cohort; at the one after, the first takes the cohort's state (its tail holds the
    cohort's whole window) and compresses for it (stragglers need a start-over budget
    above 0, the default)."""

    def __init__(self, impl, setting, rng):
        self.group = [Sender(impl, setting, rng, warm=0) for _ in range(5)]
        for _ in range(2):
            data = text(rng, 1500)
            for sender in self.group:  # one object: one history
                sender.send(data)
        for sender in self.group[1:4]:
            sender.send(text(rng, 700))  # private messages: stragglers
        data = text(rng, 1500)
        for sender in self.group:
            sender.send(data)
        self.data = text(rng, 1500)
        self.group[0].send(self.data)
        self.call = lambda: self.group[1].compressor.compress(self.data)

    def check(self, outcome):
        self.group[1].goes_on(outcome, self.data)
        for sender in self.group[2:]:
            sender.goes_on(None)


class CompressorReset(Scene):
    def __init__(self, impl, setting, rng):
        self.sender = Sender(impl, setting, rng)
        self.call = self.sender.compressor.reset

    def check(self, outcome):
        self.sender.goes_on(outcome)


class ParkedCompressor(Scene):
    """Two compressors taking turns on one live stream: the armed call restores a parked
    window and parks the other one's."""

    def __init__(self, impl, setting, rng):
        self.sender, self.other = Sender(impl, setting, rng), Sender(impl, setting, rng)
        self.sender.send(text(rng, 1200))
        self.other.send(text(rng, 1200))
        self.data = text(rng, 2500)
        self.call = lambda: self.sender.compressor.compress(self.data)

    def check(self, outcome):
        self.sender.goes_on(outcome, self.data)
        self.other.goes_on(None)


COMPRESSOR_SCENES = {
    "whole": WholeMessage,
    "whole-new-buffer": lambda *a: WholeMessage(*a, fresh_buffer=True),
    "fragment": lambda *a: Fragment(*a, flush=True, last=False),
    "unflushed-fragment": lambda *a: Fragment(*a, flush=False, last=False),
    "last-fragment": lambda *a: Fragment(*a, flush=False, last=True),
    "follower": Follower,
    "broadcast": Broadcast,
    "joiner": Joiner,
    "reset": CompressorReset,
}


# compress once needs sharing (broadcast() shares in groups whatever the setting)
SHARING_SCENES = [(scene, shared) for scene in sorted(COMPRESSOR_SCENES)
                  for shared in (False, True)
                  if shared or scene not in ("follower", "broadcast", "joiner")]


@pytest.mark.test_build(also_fallback=True)
@pytest.mark.parametrize(("scene", "sharing"), SHARING_SCENES, indirect=["sharing"],
                         ids=[f"{s}-{'shared' if on else 'unshared'}"
                              for s, on in SHARING_SCENES])
@pytest.mark.parametrize("setting", SETTINGS, ids=SETTING_IDS)
def test_compressor_survives_each_failing_allocation(impl, sharing, setting, scene):
    rng = random.Random(7692)
    sweep(lambda: COMPRESSOR_SCENES[scene](impl, setting, rng))



@pytest.mark.test_build
@pytest.mark.parametrize("setting", [s for s in SETTINGS if not s[3] and s[1] >= 12],
                         ids=lambda s: f"L{s[0]}-w{s[1]}-m{s[2]}")
def test_the_joiner_scene_joins_a_younger_group(impl, setting):
    """(The scene above does what it says, with nothing failing: the straggler's call
    joins the cohort, counted as a rejoin, and its peer decodes it.)"""
    previous = impl._set_sharing(True)
    try:
        scene = Joiner(impl, setting, random.Random(7692))
        rejoined = impl._compress_once_counts()[2]
        outcome = scene.call()
        assert impl._compress_once_counts()[2] == rejoined + 1
        scene.check(outcome)
    finally:
        impl._set_sharing(previous)


class Counters(Scene):
    """status()'s compress-once counters, read under each parameter set's lock (from a
    group that shared a message): an allocation failing there leaves no lock held, as
    nothing is allocated under a ring lock; the group's next message goes through."""

    def __init__(self, impl, setting, rng):
        self.group = [Sender(impl, setting, rng, warm=0) for _ in range(3)]
        data = text(rng, 1500)
        for sender in self.group:  # one object: shared
            sender.send(data)
        self.data = text(rng, 1500)
        self.call = impl._compress_once_counts

    def check(self, outcome):
        if not out_of_memory(outcome):
            assert isinstance(outcome, tuple) and outcome[0] >= 1, outcome
        sent = threading.Event()

        def send() -> None:  # takes the ring lock: never returns if it was left held
            for sender in self.group:
                sender.send(self.data)
            sent.set()

        threading.Thread(target=send, daemon=True).start()
        assert sent.wait(10), "the counters left a parameter set's lock held"


@pytest.mark.test_build(also_fallback=True)
@pytest.mark.parametrize("setting", [s for s in SETTINGS if not s[3]][:2],
                         ids=lambda s: f"L{s[0]}-w{s[1]}-m{s[2]}")
def test_the_counters_survive_each_failing_allocation(impl, setting):
    previous = impl._set_sharing(True)
    try:
        sweep(lambda: Counters(impl, setting, random.Random(7692)))
    finally:
        impl._set_sharing(previous)


# --- decompressors ------------------------------------------------------------------------


class Receiver:
    """A decompressor under test fed stock zlib's stream."""

    def __init__(self, impl: ModuleType, setting: tuple, rng: random.Random):
        self.impl, self.setting, self.rng = impl, setting, rng
        self.level, self.window_bits, self.mem_level, self.nct = setting
        self.decompressor = impl.Decompressor(self.window_bits, self.nct)
        self.new_peer()
        for _ in range(3):
            self.receive(text(rng, rng.choice((200, 1500, 5000))))

    def new_peer(self) -> None:
        self.peer = zlib.compressobj(self.level, zlib.DEFLATED, -max(self.window_bits, 9),
                                     self.mem_level)

    def payload(self, data: bytes) -> bytes:
        if self.nct:
            self.new_peer()
        out = self.peer.compress(data) + self.peer.flush(zlib.Z_SYNC_FLUSH)
        assert out.endswith(TAIL)
        return out[:-4]

    def receive(self, data: bytes) -> None:
        assert self.decompressor.decompress(self.payload(data)) == data

    def goes_on(self, outcome: object, data: bytes, retry: Callable[[], object],
                expected: type = bytes) -> None:
        """After an armed call: it returned ``data`` (or raised the ``expected``
        error, after which the decompressor refuses until reset()), or retrying it gives
        that (the failure came before any input was read), or the decompressor refuses
        until reset(); then the next messages decode."""
        if isinstance(outcome, BaseException) and not isinstance(outcome, expected):
            assert out_of_memory(outcome), repr(outcome)
            try:
                outcome = retry()
            except DecompressionError as exc:
                self.refuses_until_reset(exc, retry)
                outcome = None
        if isinstance(outcome, bytes):
            assert outcome == data, "decoded other bytes"
        elif isinstance(outcome, BaseException):  # the expected error: refused after it
            with pytest.raises(DecompressionError) as refused:
                retry()
            self.refuses_until_reset(refused.value, retry)
        for size in (900, 3000):
            self.receive(text(self.rng, size))

    def refuses_until_reset(self, exc: BaseException, retry: Callable[[], object]) -> None:
        assert "reset()" in str(exc), exc
        with pytest.raises(DecompressionError):
            retry()
        self.decompressor.reset()
        self.new_peer()  # a new connection


class Inflate(Scene):
    def __init__(self, impl, setting, rng, fragments: bool = False, too_big: bool = False):
        self.receiver = receiver = Receiver(impl, setting, rng)
        self.data = text(rng, 2500)
        payload = receiver.payload(self.data)
        d = receiver.decompressor
        self.expected: type = bytes
        if too_big:
            self.expected = MessageTooBig
            self.call = lambda: _expecting(MessageTooBig, d.decompress, payload, True, 1000)
            self.retry = lambda: _expecting(MessageTooBig, d.decompress, payload, True, 1000)
        elif fragments:
            head, rest = payload[:len(payload) // 2], payload[len(payload) // 2:]
            self.data = self.data[len(d.decompress(head, False)):]
            self.call = self.retry = lambda: d.decompress(rest)
        else:
            self.call = self.retry = lambda: d.decompress(payload)

    def check(self, outcome):
        self.receiver.goes_on(outcome, self.data, self.retry, self.expected)


def _expecting(error: type, call: Callable, *args) -> BaseException:
    """``call(*args)``'s exception of type ``error``, returned (other exceptions raise)."""
    try:
        call(*args)
    except error as exc:
        return exc
    raise AssertionError(f"{error.__name__} expected")


class DecompressorReset(Scene):
    def __init__(self, impl, setting, rng):
        self.receiver = Receiver(impl, setting, rng)
        self.call = self.receiver.decompressor.reset

    def check(self, outcome):
        if outcome is None:
            self.receiver.new_peer()  # reset worked: so does a new connection's peer
        self.receiver.goes_on(outcome, b"", lambda: None)


class ParkedDecompressor(Scene):
    def __init__(self, impl, setting, rng):
        self.receiver, self.other = Receiver(impl, setting, rng), Receiver(impl, setting, rng)
        self.receiver.receive(text(rng, 1200))
        self.other.receive(text(rng, 1200))
        self.data = text(rng, 2500)
        payload = self.receiver.payload(self.data)
        self.call = self.retry = lambda: self.receiver.decompressor.decompress(payload)

    def check(self, outcome):
        self.receiver.goes_on(outcome, self.data, self.retry)
        self.other.receive(text(self.other.rng, 700))


DECOMPRESSOR_SCENES = {
    "whole": Inflate,
    "fragments": lambda *a: Inflate(*a, fragments=True),
    "too-big": lambda *a: Inflate(*a, too_big=True),
    "reset": DecompressorReset,
}


@pytest.mark.test_build(also_fallback=True)
@pytest.mark.parametrize("scene", sorted(DECOMPRESSOR_SCENES))
@pytest.mark.parametrize("setting", SETTINGS, ids=SETTING_IDS)
def test_decompressor_survives_each_failing_allocation(impl, setting, scene):
    rng = random.Random(7692)
    sweep(lambda: DECOMPRESSOR_SCENES[scene](impl, setting, rng))


@pytest.mark.test_build(also_fallback=True)
@pytest.mark.parametrize("scene", [ParkedCompressor, ParkedDecompressor],
                         ids=["compressor", "decompressor"])
@pytest.mark.parametrize("setting", SETTINGS, ids=SETTING_IDS)
def test_parked_objects_survive_each_failing_allocation(impl, parking, setting, scene):
    rng = random.Random(1)
    sweep(lambda: scene(impl, setting, rng))
