"""The second engine: ISA-L (igzip) runs level 1 in the bundled build.

``engines()`` says which engine compresses at each level; where it names ISA-L, the
bytes are ISA-L's (the same as python-isal's, whose ISA-L is the same release), every
back-reference stays inside the negotiated window, parked and restored windows, compress
once and fragments work as on zlib-ng, and a busy stream costs no more memory than stock
zlib's. ``FASTDEFLATE_EXPECT_ISAL=1`` (CI) makes a build without it fail.
"""

from __future__ import annotations

import gc
import os
import random
import tracemalloc
import zlib
from types import ModuleType

import pytest

TAIL = b"\x00\x00\xff\xff"


def has_isal(impl: ModuleType) -> bool:
    return impl.engines()[1].startswith("ISA-L ")


def needs_isal(impl: ModuleType) -> None:
    if not has_isal(impl):
        pytest.skip(f"{impl.__name__} runs level 1 on {impl.engines()[1]}")


def json_messages(count: int, size: int, seed: int = 0) -> list[bytes]:
    rnd = random.Random(seed)
    words = [b"price", b"bid", b"ask", b"volume", b"symbol", b"EURUSD", b"BTC", b"side"]
    out = []
    for _ in range(count):
        parts = []
        while sum(map(len, parts)) < size:
            parts.append(b'"%s": %d.%02d' % (rnd.choice(words), rnd.randrange(10**5),
                                            rnd.randrange(100)))
        out.append(b"{" + b", ".join(parts)[:size - 2] + b"}")
    return out


#: Six bytes no message repeats, put before a stream's first message where its bytes are
#: compared with python-isal's: that ISA-L (unpatched) hashes position 2 of a stream's
#: first message from an unloaded register (buildtools/isal.py, PATCHES), which
#: fastdeflate's build fixes; with a start found nowhere else the fix changes no byte.
UNIQUE_START = bytes(range(6))


def test_engines_names_an_engine_for_every_level(impl: ModuleType) -> None:
    names = impl.engines()
    assert sorted(names) == list(range(-1, 10))
    if impl.__name__.endswith("_pure"):
        assert set(names.values()) == {impl.ENGINE}
        return
    for level, name in names.items():
        assert name == impl.ENGINE or (1 <= level <= 3 and name.startswith("ISA-L "))


def test_engines_checks_its_parameters(impl: ModuleType) -> None:
    for bad in ({"window_bits": 8}, {"window_bits": 16}, {"mem_level": 0},
                {"mem_level": 10}, {"strategy": 9}, {"window_bits": "15"}):
        with pytest.raises((ValueError, TypeError)):
            impl.engines(**bad)


def test_isal_runs_level_1_where_its_state_is_no_larger_than_stock(
        impl: ModuleType) -> None:
    """Level 1 only: ISA-L's levels 2-3 sent more than stock's bytes on some shapes, and
    its level 3 other bytes on each kind of x86-64 CPU (issue 29, fd_deflate_engine)."""
    needs_isal(impl)
    default = impl.engines()
    assert default[1].split()[-1] == "1"
    assert all(not default[level].startswith("ISA-L") for level in (-1, 0, *range(2, 10)))
    # Stock's state at window 12 / memLevel 5 is about 40 KiB: ISA-L's (~170 KiB) is not run.
    assert not any(name.startswith("ISA-L") for name in impl.engines(12, 5).values())
    # ISA-L has no strategies: Z_FILTERED, Z_HUFFMAN_ONLY, Z_RLE, Z_FIXED stay on zlib-ng.
    for strategy in (zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE, zlib.Z_FIXED):
        assert not impl.engines(strategy=strategy)[1].startswith("ISA-L")


def test_the_isal_ci_expects() -> None:
    from fastdeflate import _fastdeflate

    if os.environ.get("FASTDEFLATE_EXPECT_ISAL") != "1":
        return  # only CI builds say that they meant to bundle it
    assert has_isal(_fastdeflate), _fastdeflate.engines()


@pytest.mark.parametrize("level", [1])
def test_where_engines_says_isal_the_bytes_are_isals(impl: ModuleType, level: int) -> None:
    """The same bytes as python-isal (the same ISA-L release) for a first message: fails
    if another engine runs the level."""
    needs_isal(impl)
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    for message in json_messages(4, 3000, seed=level):
        message = UNIQUE_START + message
        ours = impl.Compressor(level).compress(message)
        theirs = isal_zlib.compressobj(level, zlib.DEFLATED, -15, 8)
        expected = theirs.compress(message) + theirs.flush(zlib.Z_SYNC_FLUSH)
        assert expected.endswith(TAIL)
        assert ours == expected[:-4]


@pytest.mark.parametrize("level", [1])
def test_a_stream_of_messages_is_isals_byte_for_byte(impl: ModuleType, level: int) -> None:
    """80 messages with context takeover, past ISA-L's 64 KiB history buffer many times:
    every payload is python-isal's (its ISA-L unpatched): fastdeflate's edit to when ISA-L
    moves its history down (buildtools/isal.py, PATCHES) changes no byte."""
    needs_isal(impl)
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    ours = impl.Compressor(level)
    theirs = isal_zlib.compressobj(level, zlib.DEFLATED, -15, 8)
    for index, message in enumerate(json_messages(80, 1000 + 37 * (level * 13 % 50), level)):
        message = UNIQUE_START + message if index == 0 else message
        expected = theirs.compress(message) + theirs.flush(zlib.Z_SYNC_FLUSH)
        assert ours.compress(message) == expected[:-4], f"message {index}"


@pytest.mark.parametrize("window_bits", range(9, 16))
def test_back_references_stay_inside_the_window(impl: ModuleType, window_bits: int) -> None:
    """Each message repeats a chunk from just beyond and just inside 2^window_bits back;
    stock zlib at exactly that window refuses any reference past it."""
    rnd = random.Random(window_bits)
    span = 1 << window_bits
    comp = impl.Compressor(1, window_bits)
    stock = zlib.decompressobj(-window_bits)
    history = b""
    for _ in range(6):
        fresh = rnd.randbytes(span // 2)
        for distance in (span + 200, span + 3, span, span - 300):
            if len(history) >= distance:
                fresh += history[-distance:][:180]
        wire = comp.compress(fresh)
        assert stock.decompress(wire + TAIL) == fresh
        history += fresh


def test_takeover_fragments_and_reset_round_trip(impl: ModuleType) -> None:
    messages = json_messages(40, 2500, seed=7)
    comp = impl.Compressor(1)
    stock = zlib.decompressobj(-15)
    for index, message in enumerate(messages):
        if index % 9 == 8:
            comp.reset()
            stock = zlib.decompressobj(-15)
        if index % 4 == 3:  # in three fragments, the middle one not flushed
            cut = len(message) // 3
            wire = (comp.compress(message[:cut], fin=False)
                    + comp.compress(message[cut:2 * cut], fin=False, flush=False)
                    + comp.compress(message[2 * cut:]))
        else:
            wire = comp.compress(message)
        assert stock.decompress(wire + TAIL) == message
    # takeover paid: later messages are smaller than alone
    alone = sum(len(impl.Compressor(1).compress(m)) for m in messages[-8:])
    assert sum(len(comp.compress(m)) for m in messages[-8:]) < alone


def test_parked_windows_come_back(impl: ModuleType, parks_at_once: ModuleType) -> None:
    """More connections than live streams: each is parked (its window kept) and restored
    into another's stream between its messages; every peer decodes every message, in
    about the bytes of streams never parked."""
    needs_isal(impl)
    messages = json_messages(64, 1500, seed=3)

    def send(limit: int) -> int:
        previous = impl.set_live_states(limit)
        try:
            comps = [impl.Compressor(1) for _ in range(8)]
            peers = [zlib.decompressobj(-15) for _ in comps]
            sent = 0
            for index, message in enumerate(messages):
                which = (index * 5) % len(comps)
                wire = comps[which].compress(message)
                sent += len(wire)
                assert peers[which].decompress(wire + TAIL) == message
            live = [v[0] for k, v in impl.live_states().items() if k[:2] == ("deflate", 1)]
            assert live and max(live) <= limit
            return sent
        finally:
            impl.set_live_states(previous)

    parked, kept = send(2), send(100)
    alone = sum(len(impl.Compressor(1, no_context_takeover=True).compress(m))
                for m in messages)
    assert kept < alone and parked <= 1.02 * kept, (parked, kept, alone)


def test_compress_once_follows_an_isal_leader(impl: ModuleType) -> None:
    """A group of compressors sending the same messages: one compresses, the others
    take its payload and window; each peer decodes every message, then a message of
    its own."""
    comps = [impl.Compressor(1) for _ in range(5)]
    peers = [zlib.decompressobj(-15) for _ in comps]
    for message in json_messages(30, 1200, seed=11):
        for comp, peer in zip(comps, peers):
            assert peer.decompress(comp.compress(message) + TAIL) == message
    for index, (comp, peer) in enumerate(zip(comps, peers)):
        own = b'{"user": %d, "note": "yours alone"}' % index * 20
        assert peer.decompress(comp.compress(own) + TAIL) == own


@pytest.mark.test_build
@pytest.mark.parametrize("level, window_bits, mem_level", [
    (1, 15, 8), (1, 15, 7), (1, 14, 8), (1, 9, 9)])
def test_a_busy_isal_stream_costs_no_more_than_stocks(impl: ModuleType, level: int,
                                                       window_bits: int,
                                                       mem_level: int) -> None:
    """Where engines() gives a level to ISA-L, the traced memory of 12 compressors, each
    between messages with its stream, is no more than the stdlib's 12 (tracemalloc sees
    both)."""
    needs_isal(impl)
    if not impl.engines(window_bits, mem_level)[level].startswith("ISA-L"):
        pytest.fail(f"level {level} at window {window_bits} / memLevel {mem_level} is not "
                    "ISA-L's")
    messages = json_messages(3, 4000, seed=5)

    def held(make):  # type: ignore[no-untyped-def]
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            objs = [make() for _ in range(12)]
            for obj in objs:
                for message in messages:
                    obj(message)
            return tracemalloc.get_traced_memory()[0] - before, objs
        finally:
            tracemalloc.stop()

    previous = impl.set_live_states(100)
    # each compresses the same three messages: with compress once, one whose window the
    # first's messages fill (window 9) would take its state and give its stream back
    sharing = impl._set_sharing(False)
    try:
        ours, keep_ours = held(lambda: impl.Compressor(level, window_bits, mem_level).compress)

        def stock():  # type: ignore[no-untyped-def]
            obj = zlib.compressobj(level, zlib.DEFLATED, -window_bits, mem_level)
            return lambda m: obj.compress(m) + obj.flush(zlib.Z_SYNC_FLUSH)

        theirs, keep_theirs = held(stock)
        assert ours <= theirs, (ours, theirs)
        assert ours > 12 * 100_000  # each holds its ISA-L stream (~170 KiB), not a window
    finally:
        impl.set_live_states(previous)
        impl._set_sharing(sharing)


def test_isal_is_left_where_its_state_would_cost_more(impl: ModuleType) -> None:
    """Small windows and memLevels: stock's state is smaller than ISA-L's, zlib-ng runs."""
    needs_isal(impl)
    for window_bits, mem_level in ((15, 6), (15, 5), (14, 7), (12, 8), (9, 1)):
        assert not impl.engines(window_bits, mem_level)[1].startswith("ISA-L")
