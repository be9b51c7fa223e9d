"""Many connections on every window size, decoded on several threads against stdlib zlib.

Where ``test_stress.py`` turns every knob at once, this stress holds one configuration
per run and hammers what connections share per window size: the rings' live streams,
parked windows, spare buffers and (compiled, bundled build) ISA-L's work buffers, which a
call takes from its ring and gives back, and which remember whose history they hold.

Each of ``THREADS`` threads owns connections with random parameters (windows 9..15, the
common 15 more often; levels, memLevels and strategies at random; with and without
context takeover) and drives them at random: whole messages (with and without the
tail), fragmented ones, large ones (2 KB, where the codec releases the GIL, up to 100
KB), damaged payloads, ``reset()``, and connections dropped and new ones made while the
others run. Meanwhile a thread turns the limits: ``set_live_states(1..4)``,
``set_park_after(0)``, ``_park_idle()``.

The oracle is stdlib ``zlib``: each decompressor under test is fed a peer's stream made
by ``zlib.compressobj(wbits=-w)`` + ``Z_SYNC_FLUSH`` with ``00 00 ff ff`` stripped (RFC
7692 7.2.1) and must return exactly the message; a damaged payload must be refused or
decode as stdlib zlib decodes it. Each compressor's payloads are decoded by a stdlib
``zlib.decompressobj(-w)``.

Configurations (each run for ``SECONDS``): the compiled codec with ISA-L inflate on and
off, each with the GIL released on every call (``_set_release_gil_always``, so that
threads interleave inside the codec on small messages too) and only on large ones; the
fallback (which always releases it).

``FASTDEFLATE_CONNECTIONS_SECONDS`` sets the time per configuration (default 4);
``FASTDEFLATE_CONNECTIONS_SEED`` replays a seed (printed on failure and in the run's
summary). A seed replays each thread's operations; how the threads interleave varies.
"""

from __future__ import annotations

import os
import random
import threading
import time
import zlib
from types import ModuleType
from typing import Callable, Optional

import pytest

import fastdeflate
from _tally import note, tally
from conftest import load_implementation

pytestmark = pytest.mark.test_build  # the compiled runs use its test hooks

TAIL = b"\x00\x00\xff\xff"
SECONDS = float(os.environ.get("FASTDEFLATE_CONNECTIONS_SECONDS", "4"))
THREADS = 6
CONNECTIONS = 6  # per thread
WINDOWS = (9, 10, 11, 12, 13, 14, 15)
WINDOW_WEIGHTS = (1, 1, 1, 1, 1, 1, 6)  # most connections are on window 15, as in life
SIZES = (0, 1, 40, 300, 1000, 2047, 2048, 3000, 8000, 20000, 65536, 100000)
SIZE_WEIGHTS = (1, 2, 6, 10, 8, 2, 4, 6, 4, 2, 1, 1)


def text_pool(seed: int) -> bytes:
    """200 KB of JSON-like text: messages cut from it share much (back-references
    across messages), and differ in their numbers (a wrong window decodes other bytes)."""
    rng = random.Random(f"{seed}-pool")
    parts = []
    size = 0
    while size < 200_000:
        part = b'{"id":%d,"px":%d.%02d,"side":"%s","sym":"%s"}' % (
            rng.randrange(10**6), rng.randrange(10**4), rng.randrange(100),
            rng.choice((b"buy", b"sell")), rng.choice((b"EURUSD", b"USDJPY", b"BTCUSD")))
        parts.append(part)
        size += len(part)
    return b"".join(parts)


class Messages:
    """Messages cut from a shared pool of text, or random bytes (incompressible)."""

    def __init__(self, seed: int):
        self.text = text_pool(seed)
        self.noise = random.Random(f"{seed}-noise").randbytes(120_000)

    def next(self, rng: random.Random, size: Optional[int] = None) -> bytes:
        if size is None:
            size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        source = self.noise if rng.random() < 0.1 else self.text
        start = rng.randrange(len(source) - size + 1)
        return source[start:start + size]


class Failure(AssertionError):
    pass


class Receiver:
    """A decompressor under test, fed a stdlib zlib peer's stream."""

    def __init__(self, impl: ModuleType, rng: random.Random, name: str):
        self.name = name
        self.window_bits = rng.choices(WINDOWS, WINDOW_WEIGHTS)[0]
        self.nct = rng.random() < 0.2
        self.level = rng.randrange(0, 10)
        self.mem_level = rng.randrange(1, 10)
        self.strategy = rng.choice((0, 0, 0, 1, 2, 3, 4))
        self.decompressor = impl.Decompressor(self.window_bits, self.nct)
        self.messages = 0
        self.history = b""  # the last 32 KB of messages (for a damaged one's reference)
        self.new_peer()

    def __repr__(self) -> str:
        return (f"{self.name}(window {self.window_bits}, nct {self.nct}, level "
                f"{self.level}, memLevel {self.mem_level}, strategy {self.strategy}, "
                f"after {self.messages} messages)")

    def new_peer(self) -> None:
        self.peer = zlib.compressobj(self.level, zlib.DEFLATED, -self.window_bits,
                                     self.mem_level, self.strategy)

    def payload(self, data: bytes) -> bytes:
        """The message as the peer sends it: the sync flush's tail still on."""
        if self.nct:
            self.new_peer()
        return self.peer.compress(data) + self.peer.flush(zlib.Z_SYNC_FLUSH)

    def receive(self, rng: random.Random, data: bytes) -> None:
        payload = self.payload(data)
        how = rng.random()
        if how < 0.2 and len(payload) > 4:  # fragmented
            body = payload[:-4]
            cuts = sorted(rng.randrange(len(body) + 1) for _ in range(rng.randrange(1, 4)))
            parts = [body[a:b] for a, b in zip([0] + cuts, cuts + [len(body)])]
            got = b"".join(self.decompressor.decompress(part, False) for part in parts[:-1])
            got += self.decompressor.decompress(parts[-1])
            tally("connections stress: fragmented messages decoded")
        elif how < 0.4:
            got = self.decompressor.decompress(payload, has_tail=True)
        else:
            got = self.decompressor.decompress(payload[:-4])
        self.messages += 1
        if got != data:
            raise Failure(f"{self!r} decoded other bytes from stdlib zlib's stream: "
                          f"{len(got)} bytes for a {len(data)}-byte message "
                          f"(first difference at {first_difference(got, data)})")
        tally("connections stress: messages decoded from stdlib zlib's streams")
        if len(data) >= 2048:
            tally("connections stress: of them 2 KB or more")

    def receive_damaged(self, rng: random.Random, data: bytes) -> None:
        """A payload with a bit flipped: refused, or decoded as stdlib zlib decodes the
        same stream; then both ends start over."""
        payload = bytearray(self.payload(data)[:-4] or b"\x00")
        payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
        # What stdlib zlib makes of it, from the same window: the peer's state before
        # this message is the stream so far, which we replay into a decompressobj.
        try:
            got: object = self.decompressor.decompress(bytes(payload))
        except fastdeflate.DecompressionError:
            got = "refused"
            tally("connections stress: damaged payloads refused")
        expected = self.reference_outcome(bytes(payload))
        if got != "refused" and expected is not None:
            if got != expected:
                raise Failure(f"{self!r}: a damaged payload decoded to other bytes than "
                              "stdlib zlib's")
            tally("connections stress: damaged payloads decoded as stdlib zlib decodes them")
        self.reset()

    def reference_outcome(self, payload: bytes) -> Optional[bytes]:
        """stdlib zlib's decoding of ``payload`` after this connection's stream so far:
        bytes, or None where it cannot say (refused, or a final block ended the stream:
        the codec goes on with a new one there)."""
        zdict = self.history[-(1 << self.window_bits):] if not self.nct else b""
        d = zlib.decompressobj(-self.window_bits, zdict=zdict) if zdict else \
            zlib.decompressobj(-self.window_bits)
        try:
            out = d.decompress(payload + TAIL)
        except zlib.error:
            return None
        return None if d.eof else out

    def reset(self) -> None:
        self.decompressor.reset()
        self.new_peer()
        self.history = b""


class Sender:
    """A compressor under test; a stdlib zlib peer decodes what it sends."""

    def __init__(self, impl: ModuleType, rng: random.Random, name: str):
        self.name = name
        self.window_bits = rng.choices(WINDOWS, WINDOW_WEIGHTS)[0]
        self.nct = rng.random() < 0.2
        self.params = (rng.randrange(-1, 10), self.window_bits, rng.randrange(1, 10),
                       rng.choice((0, 0, 1, 2, 3, 4)), self.nct)
        self.compressor = impl.Compressor(*self.params)
        self.peer = zlib.decompressobj(-self.window_bits)
        self.messages = 0

    def __repr__(self) -> str:
        return f"{self.name}{self.params} after {self.messages} messages"

    def send(self, rng: random.Random, data: bytes) -> None:
        if rng.random() < 0.2 and data:
            cut = rng.randrange(len(data) + 1)
            payload = self.compressor.compress(data[:cut], False, flush=rng.random() < 0.5)
            payload += self.compressor.compress(data[cut:])
        else:
            payload = self.compressor.compress(data)
        if self.nct:  # a new peer per message: a payload that refers back is caught
            self.peer = zlib.decompressobj(-self.window_bits)
        got = self.peer.decompress(payload + TAIL)
        self.messages += 1
        if got != data:
            raise Failure(f"{self!r}: stdlib zlib decoded other bytes from its payload")
        tally("connections stress: payloads decoded by stdlib zlib")

    def reset(self) -> None:
        self.compressor.reset()
        self.peer = zlib.decompressobj(-self.window_bits)


def first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def new_connection(impl: ModuleType, rng: random.Random, name: str) -> object:
    if rng.random() < 0.75:
        return Receiver(impl, rng, name)
    return Sender(impl, rng, name)


def worker(impl: ModuleType, rng: random.Random, messages: Messages, stop: threading.Event,
           deadline: float, index: int) -> None:
    made = 0

    def make() -> object:
        nonlocal made
        made += 1
        return new_connection(impl, rng, f"thread {index} connection {made}")

    connections = [make() for _ in range(CONNECTIONS)]
    while not stop.is_set() and time.monotonic() < deadline:
        k = rng.randrange(len(connections))
        connection = connections[k]
        roll = rng.random()
        if roll < 0.04:  # dropped, and a new one made (perhaps where the old one was)
            connections[k] = None
            del connection
            connections[k] = make()
            tally("connections stress: connections dropped and made")
        elif roll < 0.06:
            connection.reset()
            tally("connections stress: resets")
        elif isinstance(connection, Sender):
            connection.send(rng, messages.next(rng))
        elif roll < 0.08:
            connection.receive_damaged(rng, messages.next(rng, rng.choice((300, 3000))))
        else:  # a message, or a busy connection's few in a row
            for _ in range(1 if roll < 0.6 else rng.randrange(2, 6)):
                data = messages.next(rng)
                connection.receive(rng, data)
                if not connection.nct:
                    connection.history = (connection.history + data)[-32768:]


def turn_limits(impl: ModuleType, rng: random.Random, stop: threading.Event,
                deadline: float) -> None:
    """Few live streams per window, idle ones parked at once or soon, parking rounds."""
    while not stop.is_set() and time.monotonic() < deadline:
        choice = rng.randrange(4)
        if choice == 0:
            impl.set_live_states(rng.choice((1, 2, 3, 4, 16)))
        elif choice == 1:
            impl.set_park_after(rng.choice((0, 0, 0.001, 10)))
        elif choice == 2 and hasattr(impl, "_park_idle"):
            impl._park_idle()
        else:
            impl.live_states()
        time.sleep(rng.random() * 0.005)


CONFIGURATIONS = {
    # id: (implementation, ISA-L inflate, GIL released on every call)
    "cython-isal-gil_always": ("cython", True, True),
    "cython-isal-gil_large": ("cython", True, False),
    "cython-zlib-gil_always": ("cython", False, True),
    "cython-zlib-gil_large": ("cython", False, False),
    "python": ("python", False, True),
}


@pytest.fixture
def configured(request: pytest.FixtureRequest):
    name, isal, gil_always = CONFIGURATIONS[request.param]
    impl = load_implementation(name)
    saved_gil = impl._set_release_gil_always(gil_always)
    saved_isal = impl._set_isal_inflate(isal) if hasattr(impl, "_set_isal_inflate") \
        else None
    if isal and not impl._set_isal_inflate(True):
        impl._set_release_gil_always(saved_gil)
        impl._set_isal_inflate(saved_isal)
        pytest.skip(f"no ISA-L inflate here ({impl.INFLATE_ENGINE})")
    saved_limits = (impl.set_live_states(16), impl.set_park_after(10))
    try:
        yield impl, request.param
    finally:
        impl.set_live_states(saved_limits[0])
        impl.set_park_after(saved_limits[1])
        impl._set_release_gil_always(saved_gil)
        if saved_isal is not None:
            impl._set_isal_inflate(saved_isal)


def run_stress(impl: ModuleType, label: str, seed: int, seconds: float) -> dict:
    """The stress for ``seconds``; raises the first failure (with the seed); returns what
    it did (for the summary)."""
    messages = Messages(seed)
    stop = threading.Event()
    errors: list[tuple[float, BaseException]] = []
    started = time.monotonic()
    deadline = started + seconds
    isal_before = impl._isal_inflated() if hasattr(impl, "_isal_inflated") else 0

    def run(target: Callable[..., None], *args: object) -> None:
        try:
            target(impl, *args)
        except BaseException as exc:  # reported with the seed below
            errors.append((time.monotonic() - started, exc))
            stop.set()

    threads = [threading.Thread(target=run, args=(
        worker, random.Random(f"{seed}-{i}"), messages, stop, deadline, i))
        for i in range(THREADS)]
    threads.append(threading.Thread(target=run, args=(
        turn_limits, random.Random(f"{seed}-limits"), stop, deadline)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120)
        assert not thread.is_alive(), f"a thread did not finish (seed {seed})"
    isal = (impl._isal_inflated() if hasattr(impl, "_isal_inflated") else 0) - isal_before
    tally(f"connections stress: messages ISA-L inflated ({label})", isal)
    if errors:
        after, error = errors[0]
        raise AssertionError(f"{label}, seed {seed} (replay: FASTDEFLATE_CONNECTIONS_SEED="
                             f"{seed}), after {after:.2f}s: {error}") from error
    return {"isal": isal}


@pytest.mark.parametrize("configured", sorted(CONFIGURATIONS), indirect=True)
def test_many_connections_on_threads_decode_as_stdlib_zlib(configured) -> None:
    impl, label = configured
    seed = int(os.environ.get("FASTDEFLATE_CONNECTIONS_SEED") or random.randrange(2**32))
    note(f"connections stress seed ({label}): {seed} "
         f"(replay: FASTDEFLATE_CONNECTIONS_SEED={seed})")
    outcome = run_stress(impl, label, seed, SECONDS)
    if CONFIGURATIONS[label][1]:
        assert outcome["isal"] > 0, "ISA-L was on, but inflated no message"
    tally("connections stress: configurations run")
