"""A model of the public codec, checked step by step against stdlib zlib (Hypothesis).

``CodecModel`` opens and closes connections in both directions (windows 9..15, with and
without context takeover), sends whole and fragmented messages, feeds damaged bytes,
resets, broadcasts (``fastdeflate.broadcast``) and sends one message object to several
compressors in a row (compress once), parks idle connections and changes the live-state
limit, turns ISA-L inflate and the GIL test knob on and off, and runs a step while
another thread decodes a large message on the same window: so that connections share
and hand on what a parameter set keeps between their calls (live streams, parked
windows, ISA-L's work buffers).

The oracle is stdlib zlib driven the same way: each decompressor's peer is a
``zlib.compressobj`` whose payloads (sync flush, ``00 00 ff ff`` stripped) must decode
to exactly what it compressed; each compressor's peer is a ``zlib.decompressobj`` that
must decode every payload to the message (a new one per message without context
takeover, so a payload that refers back is caught). Damaged bytes must decode as stdlib
zlib decodes them after the same history, or be refused where stdlib zlib refuses them.

Bounded (``MODEL_EXAMPLES`` examples of ``MODEL_STEPS`` steps per implementation; the
environment variables ``FASTDEFLATE_MODEL_EXAMPLES`` / ``FASTDEFLATE_MODEL_STEPS`` run it
longer); under ``HYPOTHESIS_PROFILE=ci`` (derandomized) every run is the same.
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import threading
import zlib
from types import ModuleType
from typing import Callable, Optional

import pytest
from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import (Bundle, RuleBasedStateMachine, consumes, initialize,
                                 invariant, precondition, rule, run_state_machine_as_test)

import fastdeflate
from _tally import tally

pytestmark = pytest.mark.test_build  # the compiled runs use its test hooks

TAIL = b"\x00\x00\xff\xff"
MODEL_EXAMPLES = int(os.environ.get("FASTDEFLATE_MODEL_EXAMPLES", "100"))
MODEL_STEPS = int(os.environ.get("FASTDEFLATE_MODEL_STEPS", "50"))


def _pool() -> bytes:
    rng = random.Random(7692)
    return b"".join(b'{"id":%d,"px":%d,"side":"%s"}' % (
        rng.randrange(10**6), rng.randrange(10**4), rng.choice((b"buy", b"sell")))
        for _ in range(8000))


POOL = _pool()  # ~250 KB of JSON-like text: messages cut from it refer back to each other
#: A large message per window, decoded on another thread while a step runs (its payload
#: made once: the decoder has no context takeover). 256 KB in ~90 KB of payload: the
#: decode releases the GIL (inputs >= 2 KB) and lasts long enough for the step.
BIG = POOL[:262144]
_big_payloads: dict[int, bytes] = {}


def big_payload(window_bits: int) -> bytes:
    if window_bits not in _big_payloads:
        c = zlib.compressobj(1, zlib.DEFLATED, -window_bits)
        _big_payloads[window_bits] = (c.compress(BIG) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
    return _big_payloads[window_bits]


windows = st.integers(9, 15)
messages = st.one_of(
    st.builds(lambda start, size: POOL[start:start + size],
              st.integers(0, len(POOL) - 100_000),
              st.sampled_from((0, 1, 30, 200, 1000, 2048, 5000, 70_000))),
    st.binary(max_size=300),
)
ways = st.sampled_from(("whole", "with tail", "fragments"))


_names = itertools.count(1)


class Receiver:
    """A decompressor under test and its peer, a stdlib zlib compressor."""

    def __init__(self, impl: ModuleType, window_bits: int, nct: bool, level: int):
        self.name = f"r{next(_names)}"
        self.window_bits, self.nct, self.level = window_bits, nct, level
        self.decompressor: Optional[object] = impl.Decompressor(window_bits, nct)
        self.history = b""  # what the peer's window holds (for damaged bytes' reference)
        self.new_peer()

    def __repr__(self) -> str:
        return (f"{self.name}: Receiver(window {self.window_bits}, nct {self.nct}, "
                f"level {self.level})")

    def new_peer(self) -> None:
        self.peer = zlib.compressobj(self.level, zlib.DEFLATED, -self.window_bits)
        self.history = b""

    def payload(self, data: bytes) -> bytes:
        """The peer's payload, with the tail still on."""
        if self.nct:
            self.new_peer()
        payload = self.peer.compress(data) + self.peer.flush(zlib.Z_SYNC_FLUSH)
        self.history = (self.history + data)[-(1 << self.window_bits):]
        return payload

    def decode(self, payload: bytes, way: str, cut: int) -> bytes:
        d = self.decompressor
        if way == "with tail":
            return d.decompress(payload, has_tail=True)
        body = payload[:-4]
        if way == "fragments" and body:
            cut = cut % (len(body) + 1)
            return d.decompress(body[:cut], fin=False) + d.decompress(body[cut:])
        return d.decompress(body)

    def check(self, got: bytes, data: bytes) -> None:
        assert got == data, (
            f"{self!r} decoded {len(got)} other bytes from stdlib zlib's payload of a "
            f"{len(data)}-byte message (first difference at "
            f"{next((i for i, (a, b) in enumerate(zip(got, data)) if a != b), None)})")
        tally("model: messages decoded from stdlib zlib's payloads")

    def reset(self) -> None:
        self.decompressor.reset()
        self.new_peer()


class Sender:
    """A compressor under test and its peer, a stdlib zlib decompressor."""

    def __init__(self, impl: ModuleType, window_bits: int, nct: bool, level: int):
        self.name = f"s{next(_names)}"
        self.window_bits, self.nct, self.level = window_bits, nct, level
        self.compressor: Optional[object] = impl.Compressor(level, window_bits, 8, 0, nct)
        self.peer = zlib.decompressobj(-window_bits)

    def __repr__(self) -> str:
        return (f"{self.name}: Sender(level {self.level}, window {self.window_bits}, "
                f"nct {self.nct})")

    def deliver(self, payload: bytes, data: bytes) -> None:
        if self.nct:
            self.peer = zlib.decompressobj(-self.window_bits)  # nothing to refer back to
        got = self.peer.decompress(payload + TAIL)
        assert got == data, f"stdlib zlib decoded other bytes from {self!r}'s payload"
        tally("model: payloads decoded by stdlib zlib")

    def reset(self) -> None:
        self.compressor.reset()
        self.peer = zlib.decompressobj(-self.window_bits)


def stdlib_outcome(receiver: Receiver, data: bytes) -> object:
    """stdlib zlib's decoding of ``data`` (the tail added) after the receiver's history:
    bytes, "refused", or None where the codec is free to differ (a final block ended the
    deflate stream: the codec goes on with a new one in the same message)."""
    zdict = receiver.history if not receiver.nct else b""
    d = zlib.decompressobj(-receiver.window_bits, zdict=zdict) if zdict else \
        zlib.decompressobj(-receiver.window_bits)
    try:
        out = d.decompress(data + TAIL)
    except zlib.error:
        return "refused"
    return None if d.eof else out


def shown(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(shown, value)) + "]"
    return repr(value)


def logged(function: Callable) -> Callable:
    """A rule that notes itself in the example's log (printed with a failure: the
    threads make an example's replay differ now and then, which Hypothesis reports as
    flaky; the log says what ran)."""

    @functools.wraps(function)
    def step(self, **kwargs: object) -> object:
        self.log.append(f"{function.__name__}(" + ", ".join(
            f"{k}={shown(v)}" for k, v in kwargs.items()) + ")")
        try:
            result = function(self, **kwargs)
        except BaseException as exc:
            if not FAILURES:
                FAILURES.append("\n".join([f"{type(exc).__name__}: {exc}",
                                            "in the steps:"] + self.log))
            raise
        if isinstance(result, (Receiver, Sender)):
            self.log[-1] += f" -> {result!r}"
        return result

    return step


FAILURES: list[str] = []  # the first failure and its example's steps


class CodecModel(RuleBasedStateMachine):
    impl: ModuleType  # set by the test

    receivers = Bundle("receivers")
    senders = Bundle("senders")

    examples = 0  # run so far (reported in a failure)

    def __init__(self) -> None:
        super().__init__()
        type(self).examples += 1
        self.log: list[str] = []
        tally("model: examples run")
        self.helpers: dict[int, object] = {}  # a decompressor per window for the big decodes

    @initialize(target=receivers, window_bits=windows, level=st.integers(0, 9))
    @logged
    def first_receiver(self, window_bits: int, level: int) -> Receiver:
        return Receiver(self.impl, window_bits, False, level)

    @initialize(target=receivers, window_bits=windows, nct=st.booleans(),
                level=st.integers(0, 9))
    @logged
    def second_receiver(self, window_bits: int, nct: bool, level: int) -> Receiver:
        return Receiver(self.impl, window_bits, nct, level)

    @initialize(target=senders, window_bits=windows, nct=st.booleans(),
                level=st.integers(-1, 9))
    @logged
    def first_sender(self, window_bits: int, nct: bool, level: int) -> Sender:
        return Sender(self.impl, window_bits, nct, level)

    @invariant()
    def count_steps(self) -> None:
        tally("model: steps run")

    # --- connections

    @rule(target=receivers, window_bits=windows, nct=st.booleans(), level=st.integers(0, 9))
    @logged
    def open_receiver(self, window_bits: int, nct: bool, level: int) -> Receiver:
        return Receiver(self.impl, window_bits, nct, level)

    @rule(target=senders, window_bits=windows, nct=st.booleans(), level=st.integers(-1, 9))
    @logged
    def open_sender(self, window_bits: int, nct: bool, level: int) -> Sender:
        return Sender(self.impl, window_bits, nct, level)

    @rule(receiver=consumes(receivers))
    @logged
    def close_receiver(self, receiver: Receiver) -> None:
        receiver.decompressor = None  # freed now (its memory may be the next one's)

    @rule(sender=consumes(senders))
    @logged
    def close_sender(self, sender: Sender) -> None:
        sender.compressor = None

    @rule(receiver=receivers)
    @logged
    def reset_receiver(self, receiver: Receiver) -> None:
        receiver.reset()

    @rule(sender=senders)
    @logged
    def reset_sender(self, sender: Sender) -> None:
        sender.reset()

    # --- messages

    @rule(receiver=receivers, data=messages, way=ways, cut=st.integers(0, 2**16))
    @logged
    def receive(self, receiver: Receiver, data: bytes, way: str, cut: int) -> None:
        receiver.check(receiver.decode(receiver.payload(data), way, cut), data)

    @rule(receiver=receivers, data=st.binary(max_size=200))
    @logged
    def receive_damaged(self, receiver: Receiver, data: bytes) -> None:
        """Arbitrary bytes as a message: as stdlib zlib decodes them after the same
        history; then both ends start over."""
        expected = stdlib_outcome(receiver, data)
        try:
            got: object = receiver.decompressor.decompress(data)
        except fastdeflate.DecompressionError:
            got = "refused"
        if expected is not None:
            assert got == expected, f"{receiver!r}: {got!r} where stdlib zlib: {expected!r}"
            tally("model: damaged bytes decoded or refused as stdlib zlib does")
        receiver.reset()

    @rule(sender=senders, data=messages, cut=st.none() | st.integers(0, 2**16),
          flush=st.booleans())
    @logged
    def send(self, sender: Sender, data: bytes, cut: Optional[int], flush: bool) -> None:
        c = sender.compressor
        if cut is None:
            payload = c.compress(data)
        else:
            cut %= len(data) + 1
            payload = c.compress(data[:cut], False, flush=flush) + c.compress(data[cut:])
        sender.deliver(payload, data)

    @rule(group=st.lists(senders, min_size=1, max_size=5, unique_by=id), data=messages,
          start_over_every=st.integers(1, 40))
    @logged
    def broadcast(self, group: list, data: bytes, start_over_every: int) -> None:
        payloads = fastdeflate.broadcast(data, [s.compressor for s in group],
                                         start_over_every=start_over_every)
        for sender, payload in zip(group, payloads):
            sender.deliver(payload, data)

    @rule(group=st.lists(senders, min_size=1, max_size=5, unique_by=id), data=messages)
    @logged
    def compress_once(self, group: list, data: bytes) -> None:
        """One bytes object to several compressors in a row (as a send loop does)."""
        data = bytes(data)
        for sender in group:
            sender.deliver(sender.compressor.compress(data), data)

    # --- another thread at the same time

    @rule(receiver=receivers, burst=st.lists(st.tuples(messages, ways, st.booleans()),
                                             min_size=1, max_size=4),
          cut=st.integers(0, 2**16))
    @logged
    def receive_during_big_decodes(self, receiver: Receiver, burst: list,
                                   cut: int) -> None:
        """A busy connection's few messages in a row, each received alone or while
        another thread decodes a 256 KB message on the same window (a connection of its
        own): the two take what the window's parameter set lends (ISA-L's work buffers,
        spare output buffers) at the same time."""
        for data, way, during in burst:
            payload = receiver.payload(data)  # made first: the step is only the decode
            if during:
                got = self.during_a_big_decode(receiver.window_bits,
                                               lambda: receiver.decode(payload, way, cut))
                tally("model: messages decoded during another thread's big decode")
            else:
                got = receiver.decode(payload, way, cut)
            receiver.check(got, data)

    def during_a_big_decode(self, window_bits: int, step: Callable[[], bytes]) -> bytes:
        """``step()`` run while another thread decodes a 256 KB message on a decompressor
        of ``window_bits`` (without context takeover: its payload is made once)."""
        helper = self.helpers.get(window_bits)
        if helper is None:
            helper = self.helpers[window_bits] = self.impl.Decompressor(window_bits, True)
        started = threading.Event()
        outcome: list = []

        def big() -> None:
            started.set()
            try:
                outcome.append(helper.decompress(big_payload(window_bits)))
            except BaseException as exc:  # judged below
                outcome.append(exc)

        thread = threading.Thread(target=big)
        thread.start()
        started.wait()  # (the GIL comes back once the big decode releases it)
        try:
            got = step()
        finally:
            thread.join()
        assert outcome and outcome[0] == BIG, "the big message decoded to other bytes"
        return got

    # --- process-wide settings (one rule, so that they take no more steps than a message)

    @rule(setting=st.sampled_from(("park", "limit", "gil", "isal")),
          limit=st.integers(1, 16), park_after=st.sampled_from((0, 0.001, 10)),
          on=st.booleans())
    @logged
    def change_settings(self, setting: str, limit: int, park_after: float, on: bool) -> None:
        """Park idle connections beyond the limit now (``set_park_after(0)``, a parking
        round); a new live-state limit and park-after delay; the GIL released on every
        call or only for large inputs; ISA-L inflate on or off (compiled codec)."""
        impl = self.impl
        if setting == "park":
            impl.set_park_after(0)
            if hasattr(impl, "_park_idle"):
                impl._park_idle()
        elif setting == "limit":
            impl.set_live_states(limit)
            impl.set_park_after(park_after)
        elif setting == "gil":
            impl._set_release_gil_always(on)
        elif hasattr(impl, "_set_isal_inflate"):
            impl._set_isal_inflate(on)


def test_codec_model_against_stdlib_zlib(impl: ModuleType) -> None:
    saved = (impl.set_live_states(4), impl.set_park_after(0),
             impl._set_release_gil_always(True), impl._set_sharing(True),
             impl._set_isal_inflate(True) if hasattr(impl, "_set_isal_inflate") else None)

    class Model(CodecModel):
        pass

    Model.impl = impl
    FAILURES.clear()
    try:
        run_state_machine_as_test(Model, settings=settings(
            max_examples=MODEL_EXAMPLES, stateful_step_count=MODEL_STEPS, deadline=None,
            # No shrinking: another thread's timing and what the rings keep from one
            # example to the next make a failing example replay differently now and
            # then; the failure reports its example's steps instead (FAILURES).
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]))
    except Exception as exc:
        if FAILURES:  # the first failure as it happened, whatever Hypothesis made of it
            raise AssertionError(f"{impl.__name__}, after {Model.examples} examples: "
                                 f"{FAILURES[0]}") from exc
        raise
    finally:
        impl.set_live_states(saved[0])
        impl.set_park_after(saved[1])
        impl._set_release_gil_always(saved[2])
        impl._set_sharing(saved[3])
        if saved[4] is not None:
            impl._set_isal_inflate(saved[4])
    tally("model: runs (examples x steps bounded)")
