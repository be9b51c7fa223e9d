"""Compress what pays (fastdeflate/_what_pays.py): Compressor.compress_or_skip.

A message sent uncompressed (None) must leave the compressor as if it had never seen
it: stock zlib, as the peer, decodes every later message exactly, with and without
context takeover, at every window, in both implementations. Both decide alike.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import zlib
from types import ModuleType
from typing import Iterator, Optional

import pytest
from hypothesis import given, settings, strategies as st

import fastdeflate
from fastdeflate import _what_pays, _savings

from _mixed import grows
from conftest import load_implementation

TAIL = b"\x00\x00\xff\xff"


@pytest.fixture(autouse=True)
def default_what_pays() -> Iterator[None]:
    """Every test starts from the defaults and fresh counters, and leaves them so."""
    size = fastdeflate.set_min_size(0)
    skip = fastdeflate.set_skip_incompressible(True)
    _what_pays._forget_counts()
    yield
    fastdeflate.set_min_size(size)
    fastdeflate.set_skip_incompressible(skip)
    _what_pays._forget_counts()


def chat(rng: random.Random, i: int) -> bytes:
    """A chat-like JSON message that refers to earlier ones (context takeover pays)."""
    return json.dumps({"seq": i, "user": f"user{rng.randrange(20)}", "room": "lobby",
                       "text": " ".join(rng.choice(["hello", "world", "price", "up",
                                                    "down", "ok"]) for _ in range(12))
                       }).encode()


class Peer:
    """Stock zlib decoding what a sender sends: compressed payloads (RSV1 set) go
    through its decompressor, uncompressed messages (RSV1 clear) do not."""

    def __init__(self, window_bits: int, no_context_takeover: bool) -> None:
        self.window_bits = window_bits
        self.nct = no_context_takeover
        self.d = zlib.decompressobj(-window_bits)

    def receive(self, payload: Optional[bytes], message: bytes) -> None:
        if payload is None:  # sent as it is
            return
        if self.nct:
            self.d = zlib.decompressobj(-self.window_bits)
        assert self.d.decompress(payload + TAIL) == message


def random_bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


# --- the decision: the same in both implementations ---------------------------------

SAMPLES = [
    b"", b"x" * 255, b"x" * 256, json.dumps({"a": list(range(200))}).encode(),
    "行情更新：价格上涨，成交量放大。".encode() * 20,  # UTF-8 CJK: compressible
    *[magic + b"\x00" * 100 for magic in _what_pays.MAGIC],
    b"\x00\x00\x00\x20ftypisom" + b"\x00" * 100, b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 100,
    b"RIFF\x00\x00\x00\x00WAVEfmt " + b"\x00" * 100,  # RIFF, not WebP: judged by its bytes
]


@pytest.mark.test_build
@pytest.mark.parametrize("data", SAMPLES, ids=range(len(SAMPLES)))
def test_both_implementations_decide_alike_on_known_shapes(data: bytes) -> None:
    ext = load_implementation("cython")
    assert ext._classify_for_tests(data) == _what_pays.classify(data, *_what_pays.settings())


@pytest.mark.test_build
@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=1200),
                 st.builds(lambda n, seed: grows(random.Random(seed), n),
                           st.integers(256, 1200), st.integers(0, 99))),
       st.integers(0, 300), st.booleans())
def test_both_implementations_decide_alike(data: bytes, min_size: int, skip: bool) -> None:
    ext = load_implementation("cython")
    fastdeflate.set_min_size(min_size)
    fastdeflate.set_skip_incompressible(skip)
    expected = _what_pays.classify(data, min_size, skip)
    assert ext._classify_for_tests(data) == expected
    assert ext._classify_for_tests(bytearray(data)) == expected
    assert _what_pays.classify(memoryview(data), min_size, skip) == expected


def test_what_each_shape_is_taken_for() -> None:
    rng = random.Random(1)
    classify = lambda data: _what_pays.classify(data, 0, True)  # noqa: E731
    assert classify(chat(rng, 1) * 4) is None  # text: compressed, as today
    assert classify("行情更新：价格上涨，成交量放大。".encode() * 20) is None
    assert classify(random_bytes(rng, 5000)) == "incompressible"
    deflated = zlib.compress(b"".join(chat(rng, i) for i in range(50)), 9)[2:]
    assert classify(deflated) == "incompressible"
    assert classify(b"\x1f\x8b" + bytes(300)) == "compressed format"
    assert classify(grows(rng, 1000)) == "uncertain"
    assert classify(random_bytes(rng, 255)) is None  # too short to judge


@pytest.mark.test_build
def test_repeats_count_only_within_deflates_reach() -> None:
    """Random bytes with one sampled run's first KEY bytes copied earlier: "uncertain"
    (deflate may match them) when the copy is within REACH bytes of the run, random
    beyond (deflate cannot reach so far back), in both implementations."""
    ext = load_implementation("cython")
    n = 4 * _what_pays.REACH
    data = bytearray(random.Random(17).randbytes(n))
    start = _what_pays.sample_runs(n)[-1]  # the last evenly spaced run, 6/7 of n in
    assert start > _what_pays.REACH + 100
    key = bytes(data[start:start + _what_pays.KEY])
    for at, expected in ((start - _what_pays.REACH + 10, "uncertain"),
                         (start - _what_pays.REACH - 10, "incompressible")):
        shaped = bytearray(data)
        shaped[at:at + _what_pays.KEY] = key
        assert _what_pays.classify(bytes(shaped), 0, True) == expected, at
        assert ext._classify_for_tests(bytes(shaped)) == expected, at


# --- skipped messages leave the compressor untouched ----------------------------------

@pytest.mark.parametrize("nct", [False, True], ids=["takeover", "no-takeover"])
@pytest.mark.parametrize("window_bits", range(9, 16))
def test_skipped_and_grown_messages_never_reach_the_peers_window(
        impl: ModuleType, window_bits: int, nct: bool) -> None:
    """Chat messages with binary ones in between: random (skipped unseen), a PNG
    (skipped by its magic), ones neither text nor random (compressed from a snapshot,
    grown, put back). Stock zlib decodes every compressed one; without the restore the history
    would hold bytes the peer never saw and the later messages would decode wrong."""
    rng = random.Random(window_bits)
    c = impl.Compressor(6, window_bits, 8, 0, nct)
    peer = Peer(window_bits, nct)
    reasons = []
    for i in range(60):
        kind = i % 5
        if kind == 1:
            message = random_bytes(rng, rng.randrange(256, 3000))
        elif kind == 2:
            message = b"\x89PNG\r\n\x1a\n" + random_bytes(rng, 500)
        elif kind == 3:
            message = grows(rng, rng.randrange(256, 1200))
        else:
            message = chat(rng, i)
        payload = c.compress_or_skip(message)
        if kind == 0 or kind == 4:
            assert payload is not None and len(payload) < len(message)
        else:
            assert payload is None, (kind, len(message))
        peer.receive(payload, message)
        reasons.append(kind)
        if kind == 3:  # its end again, compressed: only a compressor put back matches
            # nothing there (at window 9 zlib reaches back 250 bytes: less than the
            # message, so only a repeat of its bytes shows one that kept it)
            echo = message[-96:] * 2
            payload = c.compress_or_skip(echo)
            assert payload is not None
            peer.receive(payload, echo)
    counts = _savings.skipped()
    assert counts["incompressible"]["messages"] == 12
    assert counts["compressed format"]["messages"] == 12
    assert counts["grew"]["messages"] == 12


def test_compressible_text_gives_the_same_bytes_as_compress(impl: ModuleType) -> None:
    rng = random.Random(3)
    a, b = impl.Compressor(6, 15, 8), impl.Compressor(6, 15, 8)
    for i in range(50):
        message = chat(rng, i)
        assert a.compress_or_skip(message) == b.compress(message)


def test_a_grown_message_puts_the_history_back(impl: ModuleType) -> None:
    """After a message that grew, the next one refers to the history before it: its
    payload is as small as a twin's that never saw the grown message (an emptied
    window would make it many times larger), and stock zlib decodes it."""
    rng = random.Random(4)
    a, b = impl.Compressor(6, 15, 8), impl.Compressor(6, 15, 8)
    history = b"".join(chat(rng, i) for i in range(40))
    first = a.compress(history)
    b.compress(history)
    assert a.compress_or_skip(grows(rng, 600)) is None
    assert _savings.skipped()["grew"]["messages"] == 1
    again = history[-2000:]
    payload = a.compress_or_skip(again)
    twin = b.compress(again)
    assert payload is not None and len(payload) <= len(twin) + 8
    peer = zlib.decompressobj(-15)
    assert peer.decompress(first + TAIL) == history
    assert peer.decompress(payload + TAIL) == again


def test_fragments_follow_the_first_ones_decision(impl: ModuleType) -> None:
    """A message whose first fragment goes out as it is goes out whole so, every fragment
    counted (one message, all its bytes), the compressor untouched; one whose first
    fragment is compressed is compressed to its end, random fragments included."""
    rng = random.Random(5)
    c = impl.Compressor(6, 15, 8)
    peer = zlib.decompressobj(-15)
    binary = random_bytes(rng, 3000)
    text = chat(rng, 1) * 3
    assert c.compress_or_skip(binary[:1500], fin=False) is None  # the whole message raw
    assert c.compress_or_skip(text, fin=False) is None  # text, but a later fragment
    assert c.compress_or_skip(binary[1500:], fin=True) is None
    assert _savings.skipped()["incompressible"]["messages"] == 1
    assert _savings.skipped()["incompressible"]["bytes"] == len(binary) + len(text)
    first = c.compress_or_skip(text[:100], fin=False)
    rest = c.compress_or_skip(random_bytes(rng, 300), fin=True)  # mid-message: compressed
    assert first is not None and rest is not None
    out = peer.decompress(first + rest + TAIL)  # the raw message never reached the window
    assert out[:100] == text[:100] and len(out) == 400


def test_reset_ends_a_message_sent_as_it_is(impl: ModuleType) -> None:
    """reset() in the middle of a fragmented message sent as it is: the next message is
    decided afresh."""
    rng = random.Random(15)
    c = impl.Compressor()
    assert c.compress_or_skip(random_bytes(rng, 1000), fin=False) is None
    c.reset()
    text = chat(rng, 2) * 3
    payload = c.compress_or_skip(text)
    assert payload is not None
    assert zlib.decompressobj(-15).decompress(payload + TAIL) == text


# --- what it saved ---------------------------------------------------------------------

def test_the_counters_estimate_what_each_reason_saved(impl: ModuleType) -> None:
    """CPU saved: the bytes sent as they are at the per-byte cost this process's
    compressor measured on such data at that level (random for the checks, text for the
    threshold and the opt-out); bytes saved: the compressor's growth on random data, and
    exactly how much larger a grown message's payload came out; None where sending as it
    is may have cost bytes."""
    from fastdeflate import _savings

    rng = random.Random(16)
    fastdeflate.set_min_size(200)
    at1, at9 = impl.Compressor(1), impl.Compressor(9)
    noise = [random_bytes(rng, n) for n in (3000, 5000)]
    assert at1.compress_or_skip(noise[0]) is None and at9.compress_or_skip(noise[1]) is None
    assert at1.compress_or_skip(b"{}" * 50) is None  # small
    with fastdeflate.uncompressed():
        assert at9.compress_or_skip(chat(rng, 1)) is None
    grown = grows(rng, 900)
    twin = impl.Compressor(6)
    assert twin.compress_or_skip(grown) is None
    expected_over = len(impl.Compressor(6).compress(grown)) - len(grown)
    counts = _savings.skipped()
    random1, random9 = _savings.rate("random", 1), _savings.rate("random", 9)
    cpu = (3000 * random1[0] + 5000 * random9[0]) / 1e6
    assert counts["incompressible"]["cpu_saved_ms"] == pytest.approx(cpu, abs=0.001)
    assert counts["incompressible"]["cpu_saved_ms"] > 0
    assert counts["incompressible"]["bytes_saved"] == round(
        3000 * max(0, random1[1] - 1) + 5000 * max(0, random9[1] - 1))
    assert counts["small"]["cpu_saved_ms"] == pytest.approx(
        100 * _savings.rate("text", 1)[0] / 1e6, abs=0.001)
    assert counts["small"]["bytes_saved"] is None
    assert counts["opt-out"]["bytes_saved"] is None
    assert counts["grew"] == {"messages": 1, "bytes": len(grown), "cpu_saved_ms": 0.0,
                              "bytes_saved": expected_over}
    assert expected_over >= 0
    json.dumps(fastdeflate.status()["sent_uncompressed"])  # JSON as it is


def test_the_estimates_measurements_are_not_counted_as_traffic() -> None:
    """status() measures the compressor's rates the first time it needs them (here, at
    level 4, its measurement forgotten first): its sent traffic stays the application's
    (a message sent as it is is no traffic of the codec's)."""
    from fastdeflate import _savings

    _savings._rates.pop(("random", 4), None)
    before = fastdeflate.status()["traffic"]["sent"]
    c = fastdeflate.Compressor(4)
    assert c.compress_or_skip(random_bytes(random.Random(18), 3000)) is None
    after = fastdeflate.status()["traffic"]["sent"]  # measures level 4 (random)
    assert ("random", 4) in _savings._rates
    assert after == before


def test_the_rates_are_measured_on_this_processs_compressor() -> None:
    """Deflating random bytes costs more per byte at level 9 than the stored-like level 1
    does not: both are positive and finite, and the growth on random data is about nil
    (deflate falls back to stored blocks: a few bytes per block)."""
    from fastdeflate import _savings

    for level in (1, 6, 9):
        ns, growth = _savings.rate("random", level)
        assert 0 < ns < 1e4
        assert 1.0 <= growth < 1.01
        ns, growth = _savings.rate("text", level)
        assert 0 < ns < 1e4 and growth < 0.5  # JSON shrinks


# --- settings: the threshold, the switch, the opt-out -----------------------------------

def test_messages_under_the_minimum_size_go_out_uncompressed(impl: ModuleType) -> None:
    c = impl.Compressor()
    fastdeflate.set_min_size(100)
    assert c.compress_or_skip(b"a" * 99) is None
    assert c.compress_or_skip(b"a" * 100) is not None
    assert _savings.skipped()["small"]["messages"] == 1
    assert _savings.skipped()["small"]["bytes"] == 99
    assert fastdeflate.status()["min_size"] == 100


def test_the_switch_turns_the_checks_off(impl: ModuleType) -> None:
    fastdeflate.set_skip_incompressible(False)
    c = impl.Compressor()
    data = random_bytes(random.Random(6), 2000)
    assert c.compress_or_skip(data) is not None  # as stock: compressed, larger
    assert fastdeflate.status()["skip_incompressible"] is False


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        fastdeflate.set_min_size(-1)
    with pytest.raises(ValueError):
        fastdeflate.set_min_size(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fastdeflate.set_skip_incompressible("no")  # type: ignore[arg-type]


def test_the_environment_sets_them_at_import() -> None:
    code = ("import fastdeflate; s = fastdeflate.status(); "
            "print(s['min_size'], s['skip_incompressible'])")
    env = dict(os.environ, FASTDEFLATE_MIN_SIZE="256", FASTDEFLATE_SKIP_INCOMPRESSIBLE="0")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.split() == ["256", "False"], done.stderr
    env["FASTDEFLATE_SKIP_INCOMPRESSIBLE"] = "maybe"
    done = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["256", "True"] and "ignored" in done.stderr


def test_the_opt_out_holds_in_its_own_task_only(impl: ModuleType) -> None:
    """fastdeflate.uncompressed() is a context variable: one asyncio task's (or one
    thread's) block does not reach another running at the same time."""
    text = chat(random.Random(7), 1) * 2

    async def inside(c: object, seen: list, started: asyncio.Event, go: asyncio.Event):
        with fastdeflate.uncompressed():
            started.set()
            await go.wait()
            seen.append(c.compress_or_skip(text))  # type: ignore[attr-defined]

    async def outside(c: object, seen: list, started: asyncio.Event, go: asyncio.Event):
        await started.wait()
        seen.append(c.compress_or_skip(text))  # type: ignore[attr-defined]
        go.set()

    async def main() -> tuple[list, list]:
        a, b = impl.Compressor(), impl.Compressor()
        got_a: list = []
        got_b: list = []
        started, go = asyncio.Event(), asyncio.Event()
        await asyncio.wait_for(asyncio.gather(inside(a, got_a, started, go),
                                              outside(b, got_b, started, go)), 10)
        return got_a, got_b

    got_a, got_b = asyncio.run(main())
    assert got_a == [None] and got_b[0] is not None
    results: list = []
    barrier = threading.Barrier(2)

    def thread(opt_out: bool) -> None:
        c = impl.Compressor()
        with fastdeflate.uncompressed(opt_out):
            barrier.wait(10)
            results.append((opt_out, c.compress_or_skip(text)))

    threads = [threading.Thread(target=thread, args=(flag,)) for flag in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert dict(results)[True] is None and dict(results)[False] is not None
    assert _savings.skipped()["opt-out"]["messages"] == 2


def half_text(rng: random.Random, n: int = 1200) -> bytes:
    """Text, then random bytes: neither text-like nor random ("uncertain"), and smaller
    once compressed."""
    text = b"".join(chat(rng, i) for i in range(20))[: n // 2]
    return text + random_bytes(rng, n - len(text))


@pytest.mark.test_build
def test_a_group_takes_an_uncertain_message_together(impl: ModuleType) -> None:
    """Compressors with one history (a broadcast group) given the same message that is
    compressed from a snapshot: when it comes out smaller, one compression serves them
    all and they keep one history; when it grows, every member sends it as it is and
    keeps the history it had. Stock zlib peers decode everything."""
    previous = impl._set_sharing(True)
    try:
        rng = random.Random(8)
        members = [impl.Compressor(6, 12, 5) for _ in range(6)]
        peers = [zlib.decompressobj(-12) for _ in members]

        def send(message: bytes) -> list:
            payloads = [c.compress_or_skip(message) for c in members]
            for peer, payload in zip(peers, payloads):
                if payload is not None:
                    assert peer.decompress(payload + TAIL) == message
            return payloads

        for i in range(3):
            send(chat(rng, i))
        histories = {c._group()[1] for c in members}
        assert len(histories) == 1
        mixed = half_text(rng)
        assert _what_pays.classify(mixed, 0, True) == "uncertain"
        payloads = send(mixed)
        assert all(p is not None and len(p) < len(mixed) for p in payloads)
        assert len({c._group()[1] for c in members}) == 1  # still one group
        history = members[0]._group()[1]
        assert send(grows(rng, 800)) == [None] * len(members)
        assert {c._group()[1] for c in members} == {history}  # put back, together
        assert _savings.skipped()["grew"]["messages"] == len(members)
        for i in range(3, 6):
            send(chat(rng, i))
        assert len({c._group()[1] for c in members}) == 1
    finally:
        impl._set_sharing(previous)
