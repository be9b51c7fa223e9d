"""Randomized differential stress of the shared state, bounded in time, several threads.

Each thread owns connections with random parameters (levels -1..9, windows 9..15,
memLevels 1..9, strategies 0..4, with and without context takeover) and drives them at
random: whole messages, fragments with and without flush, the same message (one
object, or equal bytes) to several compressors (compress once), ``broadcast()`` groups,
``reset()``, damaged payloads (refused until ``reset()``), and a test hook that at the
named points of the shared state lets another thread run, parks idle objects, or fails
a call after its message went into the stream. Every payload is
decoded by stock zlib, every fastdeflate decompressor is fed stock zlib's streams, and
meanwhile one thread turns the process-wide settings: ``set_park_after(0)`` and back,
``set_live_states(1..16)``, pooling and sharing on and off, parking rounds, reports.

``FASTDEFLATE_STRESS_SECONDS`` sets the time per implementation (default 6);
``FASTDEFLATE_STRESS_SEED`` replays a seed (printed in a failure and in the run's summary).
A seed replays each thread's sequence of operations; how the threads interleave varies.
"""

from __future__ import annotations

import os
import random
import threading
import time
import zlib
from types import ModuleType
from typing import Callable

import pytest

import fastdeflate
from _tally import note, tally

pytestmark = pytest.mark.test_build  # the compiled runs use its test hooks

TAIL = b"\x00\x00\xff\xff"
SECONDS = float(os.environ.get("FASTDEFLATE_STRESS_SECONDS", "6"))
THREADS = 4


def message(rng: random.Random) -> bytes:
    """Varying JSON, a repeated payload, random bytes, or nothing; 0 B to 40 KB."""
    size = rng.choice((0, 1, 40, 300, 1000, 4000, 16000, 40000))
    kind = rng.randrange(4)
    if kind == 0:
        return bytes(rng.getrandbits(8) for _ in range(min(size, 3000)))
    if kind == 1:
        return (b'{"tick": "same every time"}' * (size // 27 + 1))[:size]
    return b"".join(b'{"id":%d,"px":%d,"side":"%s"}' % (
        rng.randrange(10**6), rng.randrange(10**4), rng.choice((b"buy", b"sell")))
        for _ in range(size // 30 + 1))[:size]


def parameters(rng: random.Random) -> tuple[int, int, int, int, bool]:
    return (rng.randrange(-1, 10), rng.randrange(9, 16), rng.randrange(1, 10),
            rng.randrange(5), rng.random() < 0.3)


class Injected(MemoryError):
    """A failure the chaos hook raised after a stream took a message."""


class Chaos:
    """The test hook during the stress: at the named points of the shared state, now and
    then, let another thread run, park idle objects (a sweeper's round at the worst
    moment), or fail the call after its message went into the stream."""

    def __init__(self, impl: ModuleType, seed: int):
        self.impl, self.rng = impl, random.Random(f"{seed}-chaos")  # (races on it are fine)
        self.inside = threading.local()

    def __call__(self, point: str) -> None:
        if point == "claim locked" or getattr(self.inside, "busy", False):
            return  # a ring lock is held there: nothing that takes one
        roll = self.rng.random()
        if point == "committed" and roll < 0.02:
            tally("failures injected after a message went into the stream")
            raise Injected("injected")
        if roll < 0.05:
            time.sleep(0)
        elif roll < 0.08 and hasattr(self.impl, "_park_idle") and point in (
                "claim", "settle", "live_states", "follow", "adopt"):
            self.inside.busy = True
            try:
                self.impl._park_idle()
            finally:
                self.inside.busy = False


class Sender:
    """A compressor under test; stock zlib decodes what it sends."""

    def __init__(self, impl: ModuleType, params: tuple):
        self.params = params
        self.compressor = impl.Compressor(*params)
        self.peer = zlib.decompressobj(-params[1])

    def deliver(self, data: bytes, payload: bytes) -> None:
        got = self.peer.decompress(payload + TAIL)
        assert got == data, f"stock zlib decoded other bytes ({self.params})"
        tally("messages checked by stock zlib")

    def send(self, data: bytes) -> None:
        try:
            payload = self.compressor.compress(data)
        except Injected:
            return  # never reached the peer: the next message must decode all the same
        self.deliver(data, payload)

    def send_fragments(self, rng: random.Random, data: bytes,
                       last: bytes | None = None) -> None:
        """``data`` in fragments; with ``last``, ``data`` then ``last`` (a group's
        message, as equal bytes) as the last fragment."""
        cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 4)))
        parts = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        if last is not None:
            parts.append(last)
            data += last
        payload = b"".join(self.compressor.compress(part, False, flush=rng.random() < 0.5)
                           for part in parts[:-1])
        try:
            payload += self.compressor.compress(parts[-1])
        except Injected:  # the message cannot be finished: refused until reset()
            assert len(parts) > 1
            with pytest.raises(fastdeflate.DeflateError, match=r"reset\(\)"):
                self.compressor.compress(b"")
            self.compressor.reset()
            self.peer = zlib.decompressobj(-self.params[1])  # a new connection
            return
        self.deliver(data, payload)


class Receiver:
    """A fastdeflate decompressor fed stock zlib's stream."""

    def __init__(self, impl: ModuleType, params: tuple):
        level, self.window_bits, self.mem_level, self.strategy, self.nct = params
        self.level = level
        self.decompressor = impl.Decompressor(self.window_bits, self.nct)
        self.new_peer()

    def new_peer(self) -> None:
        self.peer = zlib.compressobj(self.level, zlib.DEFLATED, -self.window_bits,
                                     self.mem_level, self.strategy)

    def payload(self, data: bytes) -> bytes:
        if self.nct:
            self.new_peer()
        return (self.peer.compress(data) + self.peer.flush(zlib.Z_SYNC_FLUSH))[:-4]

    def receive(self, rng: random.Random, data: bytes) -> None:
        payload = self.payload(data)
        if rng.random() < 0.3 and payload:
            cut = rng.randrange(len(payload))
            got = (self.decompressor.decompress(payload[:cut], False)
                   + self.decompressor.decompress(payload[cut:]))
        else:
            got = self.decompressor.decompress(payload)
        assert got == data, "decoded other bytes from stock zlib's stream"
        tally("messages decoded from stock zlib's streams")

    def receive_corrupt(self, rng: random.Random, data: bytes) -> None:
        """A damaged payload: DecompressionError (then refusals until reset()), or bytes
        if the damage still decodes; either way both ends start over."""
        payload = bytearray(self.payload(data) or b"\x00")
        payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
        try:
            self.decompressor.decompress(bytes(payload), max_size=1 << 20)
        except (fastdeflate.DecompressionError, fastdeflate.MessageTooBig):
            with pytest.raises(fastdeflate.DecompressionError, match=r"reset\(\)"):
                self.decompressor.decompress(b"\x00")
            tally("corrupt payloads refused")
        self.decompressor.reset()
        self.new_peer()


def worker(impl: ModuleType, rng: random.Random, deadline: float) -> None:
    """One thread's connections and operations, until ``deadline``."""
    senders = [Sender(impl, parameters(rng)) for _ in range(6)]
    receivers = [Receiver(impl, parameters(rng)) for _ in range(4)]
    group_params = parameters(rng)
    group = [Sender(impl, group_params) for _ in range(rng.randrange(2, 9))]
    while time.monotonic() < deadline:
        op = rng.randrange(10)
        if op <= 2:
            rng.choice(senders).send(message(rng))
        elif op == 3:
            rng.choice(senders).send_fragments(rng, message(rng))
        elif op <= 5 and rng.random() < 0.1:
            rng.choice(receivers).receive_corrupt(rng, message(rng))
        elif op <= 5:
            rng.choice(receivers).receive(rng, message(rng))
        elif op == 6:  # one object to several compressors in a row: compress once
            if rng.random() < 0.3:  # private messages to several first: a cohort
                for sender in rng.sample(group, rng.randrange(1, len(group) + 1)):
                    sender.send(message(rng))
            data = message(rng)
            # or equal bytes in a new object for each (a str encoded per connection)
            copies = rng.random() < 0.5
            for sender in rng.sample(group, rng.randrange(1, len(group) + 1)):
                if rng.random() < 0.1:  # its own message first: data ends it
                    sender.send_fragments(rng, message(rng), bytes(bytearray(data)))
                else:
                    sender.send(bytes(bytearray(data)) if copies else data)
        elif op == 7:
            data = message(rng)
            try:
                payloads = fastdeflate.broadcast(data, [s.compressor for s in group],
                                                 start_over_every=rng.randrange(1, 40))
            except Injected:
                continue  # no payload reached a peer
            for sender, payload in zip(group, payloads):
                sender.deliver(data, payload)
        elif op == 8:
            rng.choice(senders + group).compressor.reset()  # the peer's window may stay
        else:
            receiver = rng.choice(receivers)
            receiver.decompressor.reset()
            receiver.new_peer()


def turn_settings(impl: ModuleType, rng: random.Random, deadline: float) -> None:
    """The process-wide settings, turned at random while the workers run."""
    while time.monotonic() < deadline:
        choice = rng.randrange(7)
        if choice == 6:  # start-overs never, as set by default, or at every chance
            impl.set_start_over_budget(rng.choice((0.0, 0.02, 1.0)))
        elif choice == 0:
            impl.set_park_after(rng.choice((0, 0, 0.001, 10)))
        elif choice == 1:
            impl.set_live_states(rng.randrange(1, 17))
        elif choice == 2 and hasattr(impl, "_set_pooling"):
            impl._set_pooling(rng.random() < 0.7)
        elif choice == 3:
            impl._set_sharing(rng.random() < 0.8)
        elif choice == 4 and hasattr(impl, "_park_idle"):
            impl._park_idle()
        else:
            impl.live_states()
        time.sleep(rng.random() * 0.01)


def test_random_operations_in_threads_match_stock_zlib(impl):
    seed = int(os.environ.get("FASTDEFLATE_STRESS_SEED") or random.randrange(2**32))
    note(f"stress seed ({impl.__name__}): {seed} (replay: FASTDEFLATE_STRESS_SEED={seed})")
    saved = (impl.set_park_after(10), impl.set_live_states(16), impl._set_sharing(True),
             impl._set_pooling(True) if hasattr(impl, "_set_pooling") else None,
             impl.set_start_over_budget(0.02))
    counts = impl._compress_once_counts()
    deadline = time.monotonic() + SECONDS
    errors: list[BaseException] = []
    hook = impl._set_test_hook(Chaos(impl, seed))

    def run(target: Callable[..., None], rng: random.Random) -> None:
        try:
            target(impl, rng, deadline)
        except BaseException as exc:  # reported with the seed below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(worker, random.Random(f"{seed}-{i}")))
               for i in range(THREADS)]
    threads.append(threading.Thread(target=run, args=(turn_settings,
                                                      random.Random(f"{seed}-settings"))))
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SECONDS + 120)
            assert not thread.is_alive(), f"a thread did not finish (seed {seed})"
    finally:
        impl._set_test_hook(hook)
        impl.set_park_after(saved[0])
        impl.set_live_states(saved[1])
        impl._set_sharing(saved[2])
        if saved[3] is not None:
            impl._set_pooling(saved[3])
        impl.set_start_over_budget(saved[4])
    after = impl._compress_once_counts()
    tally("stress: stragglers rejoined by their window", after[2] - counts[2])
    tally("stress: group start-overs", after[3] - counts[3])
    tally("stress: stragglers' cohorts", after[4] - counts[4])
    if errors:
        raise AssertionError(f"seed {seed}: {errors[0]!r}") from errors[0]
    tally("stress seeds run")
