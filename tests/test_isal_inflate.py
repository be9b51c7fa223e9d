"""ISA-L's inflate decodes whole messages in the bundled build; zlib the rest.

A whole message (``fin`` and not the end of a fragmented one), received while the stream
is between blocks, goes to ISA-L: it decodes after a copy of the window and the stream's
window then takes its output. Whatever ISA-L does not decode exactly as zlib would (corrupt
data, a block with BFINAL, a message ending inside a block, a back-reference past
2^window_bits, output that could pass ``max_size``) is left to zlib from the same window,
so the outcome is zlib's: the same bytes, or the same exception. These tests hold the
compiled codec to the fallback (stdlib zlib) on valid, hand-made and mutated messages,
and check that ISA-L really decoded what it should (``_isal_inflated()``).
"""

from __future__ import annotations

import os
import random
import zlib
from collections.abc import Iterator
from types import ModuleType

import pytest

from fastdeflate import DecompressionError, MessageTooBig

TAIL = b"\x00\x00\xff\xff"


def compiled_with_isal() -> ModuleType:
    from fastdeflate import _fastdeflate as ext

    if not ext.INFLATE_ENGINE.startswith("ISA-L "):
        pytest.skip(f"inflate runs on {ext.INFLATE_ENGINE}")
    return ext


@pytest.fixture
def isal_off() -> Iterator[ModuleType]:
    """The compiled codec with every message left to zlib (restored after the test)."""
    ext = compiled_with_isal()
    previous = ext._set_isal_inflate(False)
    try:
        yield ext
    finally:
        ext._set_isal_inflate(previous)


def messages(count: int, size: int, seed: int = 0) -> list[bytes]:
    """JSON-like messages that share much of their text (back-references across them)."""
    rnd = random.Random(seed)
    keys = [b"price", b"bid", b"ask", b"volume", b"symbol", b"EURUSD", b"side", b"ts"]
    out = []
    for _ in range(count):
        parts: list[bytes] = []
        while sum(map(len, parts)) < size:
            parts.append(b'"%s": %d' % (rnd.choice(keys), rnd.randrange(10**6)))
        out.append(b"{" + b", ".join(parts)[:max(0, size - 2)] + b"}")
    return out


def payloads(data: list[bytes], level: int = 1, wbits: int = 15, strategy: int = 0
             ) -> list[bytes]:
    """Each message compressed by stdlib zlib as a peer would (context takeover), with
    the sync flush's 00 00 ff ff still on."""
    c = zlib.compressobj(level, zlib.DEFLATED, -max(9, wbits), 8, strategy)
    return [c.compress(m) + c.flush(zlib.Z_SYNC_FLUSH) for m in data]


def outcome(d, data: bytes, **kwargs) -> object:
    try:
        return d.decompress(data, **kwargs)
    except (DecompressionError, MessageTooBig) as exc:
        return type(exc), str(exc)


def test_inflate_engine_says_which_engine_inflates(impl: ModuleType) -> None:
    if impl.__name__.endswith("_pure"):
        assert impl.INFLATE_ENGINE == impl.ENGINE
    else:
        assert impl.INFLATE_ENGINE in (impl.ENGINE, f"{impl._ISAL} (whole messages), "
                                       f"{impl.ENGINE} (the rest)")


@pytest.mark.test_build
@pytest.mark.parametrize("has_tail", [True, False], ids=["aiohttp", "websockets"])
@pytest.mark.parametrize("size", [0, 1, 1024, 20000, 70000])
def test_whole_messages_are_isals(has_tail: bool, size: int) -> None:
    """Messages with the tail (aiohttp's call) and without (the other libraries'), each
    referring back into the ones before: every one decoded by ISA-L, byte-exact."""
    ext = compiled_with_isal()
    data = messages(12, size)
    d = ext.Decompressor(15)
    before = ext._isal_inflated()
    for message, payload in zip(data, payloads(data)):
        if has_tail:
            assert d.decompress(payload, has_tail=True) == message
        else:
            assert d.decompress(payload[:-4]) == message
    assert ext._isal_inflated() - before == len(data)


@pytest.mark.test_build
@pytest.mark.parametrize("wbits", range(8, 16))
def test_window_is_exactly_2_to_the_window_bits_on_isal(wbits: int) -> None:
    """After 2^w + 100 bytes, a back-reference of exactly 2^w is ISA-L's to decode; one
    of 2^w + 1 (below window 15) is refused ("too far back", zlib's verdict), as on zlib
    alone, and a wider window takes it."""
    ext = compiled_with_isal()
    history = random.Random(wbits).randbytes((1 << wbits) + 100)  # no repeats inside
    c = zlib.compressobj(0, zlib.DEFLATED, -15)
    first = c.compress(history) + c.flush(zlib.Z_SYNC_FLUSH)

    def refer_back(distance: int) -> tuple[bytes, bytes]:
        message = history[-distance:][:200]
        c = zlib.compressobj(9, zlib.DEFLATED, -15, zdict=history[-32768:])
        return message, c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH)

    within, within_payload = refer_back(1 << wbits)
    beyond, beyond_payload = refer_back((1 << wbits) + 1)
    d = ext.Decompressor(wbits)
    before = ext._isal_inflated()
    assert d.decompress(first, has_tail=True) == history
    assert d.decompress(within_payload, has_tail=True) == within
    assert ext._isal_inflated() - before == 2
    if wbits == 15:
        return  # no deflate stream refers back further
    d = ext.Decompressor(wbits)
    assert d.decompress(first, has_tail=True) == history
    with pytest.raises(DecompressionError, match="too far back"):
        d.decompress(beyond_payload, has_tail=True)
    if wbits < 15:  # a wider window takes it
        wide = ext.Decompressor(15)
        assert wide.decompress(first, has_tail=True) == history
        assert wide.decompress(beyond_payload, has_tail=True) == beyond


class Bits:
    """A deflate bit writer (fields LSB first, Huffman codes MSB first)."""

    def __init__(self) -> None:
        self.value = 0
        self.count = 0

    def put(self, value: int, count: int) -> None:
        self.value |= value << self.count
        self.count += count

    def code(self, code: int, length: int) -> None:
        self.put(int(format(code, f"0{length}b")[::-1], 2), length)

    def sync_flush(self) -> bytes:
        """An empty stored block (BFINAL 0), then the bytes with the tail."""
        self.put(0, 3)
        self.count += -self.count % 8
        return self.value.to_bytes(self.count // 8, "little") + TAIL


def canonical(lengths: dict[int, int]) -> dict[int, tuple[int, int]]:
    """symbol -> (code, length) of the canonical Huffman code with these lengths."""
    codes, code, previous = {}, 0, 0
    for symbol, length in sorted(lengths.items(), key=lambda item: (item[1], item[0])):
        code <<= length - previous
        codes[symbol], code, previous = (code, length), code + 1, length
    return codes


CL_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]


def dynamic_block(lit_lengths: dict[int, int], dist_lengths: dict[int, int],
                  cl_lengths: dict[int, int], text: bytes) -> bytes:
    """One dynamic-Huffman block (286 lit/len and 30 distance codes; zero runs written
    with symbol 18) holding ``text`` as literals, then a sync flush."""
    lengths = [lit_lengths.get(s, 0) for s in range(286)] + \
        [dist_lengths.get(s, 0) for s in range(30)]
    cl = canonical(cl_lengths)
    out = Bits()
    out.put(0, 1)
    out.put(2, 2)
    out.put(286 - 257, 5)
    out.put(30 - 1, 5)
    out.put(19 - 4, 4)
    for symbol in CL_ORDER:
        out.put(cl_lengths.get(symbol, 0), 3)
    i = 0
    while i < len(lengths):
        run = 0
        while i + run < len(lengths) and lengths[i + run] == 0 and run < 138:
            run += 1
        if run >= 11:
            out.code(*cl[18])
            out.put(run - 11, 7)
            i += run
        else:
            out.code(*cl[lengths[i]])
            i += 1
    lit = canonical({s: n for s, n in lit_lengths.items() if n})
    for byte in text:
        out.code(*lit[byte])
    out.code(*lit[256])
    return out.sync_flush()


# lit/len: "a" and end-of-block; distances: none used. The code-length code's symbols are
# those the lengths need (0 and 1 only where used, 18 for the runs of zeros).
HAND_MADE = {
    # zlib refuses these three; ISA-L on its own (python-isal) decodes them.
    "incomplete literal/length code": (
        {97: 2, 256: 2}, {0: 1}, {18: 1, 1: 2, 2: 2}, "invalid literal/lengths set"),
    "incomplete distance code": (
        {97: 1, 256: 1}, {0: 2}, {18: 1, 1: 2, 2: 2}, "invalid distances set"),
    "incomplete code-length code": (
        {97: 1, 256: 1}, {0: 1}, {18: 1, 1: 2}, "invalid code lengths set"),
    # zlib takes a lone code of length 1 (here the distances'): decoded alike.
    "a lone distance code of length 1": (
        {97: 1, 256: 1}, {0: 1}, {18: 1, 1: 1}, None),
}


@pytest.mark.parametrize("case", sorted(HAND_MADE))
def test_codes_zlib_refuses_are_refused(impl: ModuleType, case: str) -> None:
    """Dynamic blocks whose Huffman codes leave codes unused: zlib refuses them, ISA-L
    took them (checked with python-isal's unpatched ISA-L, where installed); fastdeflate
    refuses them with zlib's message. A lone code of length 1 is fine for both."""
    lit, dist, cl, error = HAND_MADE[case]
    payload = dynamic_block(lit, dist, cl, b"aaaaa")
    if error is None:
        assert zlib.decompressobj(-15).decompress(payload) == b"aaaaa"
        assert impl.Decompressor().decompress(payload, has_tail=True) == b"aaaaa"
        return
    with pytest.raises(zlib.error, match=error):
        zlib.decompressobj(-15).decompress(payload)
    try:
        from isal import isal_zlib
    except ImportError:
        pass
    else:
        assert isal_zlib.decompressobj(-15).decompress(payload) == b"aaaaa"
    d = impl.Decompressor()
    with pytest.raises(DecompressionError, match=error):
        d.decompress(payload, has_tail=True)


@pytest.mark.test_build
def test_a_final_block_and_a_cut_message_go_to_zlib_then_isal_again() -> None:
    """A message ending with BFINAL set, and one cut inside a stored block (the tail is
    then data of that block, whose rest comes with the next message): zlib decodes those,
    as the fallback does, and ISA-L the whole messages once zlib is between blocks."""
    from fastdeflate import _pure

    ext = compiled_with_isal()
    data = messages(6, 3000, seed=1)
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    final = c.compress(data[0]) + c.flush(zlib.Z_FINISH)  # BFINAL: a new stream follows
    # (whose first block, an empty stored one, the byte 00 and the tail make)
    c = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=data[0])
    after = [c.compress(m) + c.flush(zlib.Z_SYNC_FLUSH) for m in data[1:3]]
    c = zlib.compressobj(0, zlib.DEFLATED, -15, zdict=data[0] + data[1] + data[2])
    stored = c.compress(data[3]) + c.flush(zlib.Z_SYNC_FLUSH)  # one stored block
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    last = c.compress(data[4]) + c.flush(zlib.Z_SYNC_FLUSH)  # its own window's
    # (the tail's 4 bytes are data of the stored block: the next message goes on after
    # 4 bytes more of it, and ends it)
    sent = [final + b"\x00" + TAIL, after[0], after[1], stored[:1000] + TAIL, stored[1004:],
            last]
    isal = [False, True, True, False, False, True]
    ours, reference = ext.Decompressor(15), _pure.Decompressor(15)
    for payload, by_isal in zip(sent, isal):
        before = ext._isal_inflated()
        assert ours.decompress(payload, has_tail=True) == \
            reference.decompress(payload, has_tail=True)
        assert ext._isal_inflated() - before == by_isal, sent.index(payload)


#: Runs of the mutation test (fewer under emulation: .ci/steps/45-arm64.sh).
MUTATED_RUNS = int(os.environ.get("FASTDEFLATE_MUTATED_RUNS", "2000"))


@pytest.mark.test_build
def test_mutated_messages_decode_as_zlib_decodes_them(impl: ModuleType) -> None:
    """2,000 runs (MUTATED_RUNS) of 1-4 messages (windows 8-15, levels 0-9, every strategy, with and
    without the tail, with and without max_size), one of them with bytes flipped,
    replaced, cut or inserted: each call returns what stdlib zlib's decompressor (the
    fallback's) returns, or raises the same exception with the same message, and (on the
    compiled codec) the same as the compiled codec with ISA-L off."""
    from fastdeflate import _pure

    rnd = random.Random(7692)
    pool = messages(30, 2000, seed=3) + [rnd.randbytes(300), b"a" * 5000, b""]
    others: list[ModuleType] = [_pure]
    if not impl.__name__.endswith("_pure"):
        others.append(None)  # type: ignore[arg-type]  # impl itself, ISA-L off
    isal_was = getattr(impl, "_set_isal_inflate", lambda on: False)(True)
    try:
        for run in range(MUTATED_RUNS):
            wbits = rnd.choice([8, 9, 10, 12, 15])
            data = [rnd.choice(pool)[:rnd.randrange(3000)] for _ in range(rnd.randrange(1, 5))]
            sent = payloads(data, rnd.randrange(10), wbits, rnd.randrange(5))
            k = rnd.randrange(len(sent))
            sent[k] = mutate(rnd, sent[k])
            has_tail = rnd.random() < 0.5
            max_size = rnd.choice([None, None, 100, 5000])
            ours = impl.Decompressor(wbits)
            references = [_pure.Decompressor(wbits), impl.Decompressor(wbits)]
            for payload in sent:
                if has_tail:
                    kwargs = {"has_tail": True, "max_size": max_size}
                    payload = payload if payload.endswith(TAIL) else payload + TAIL
                else:
                    kwargs = {"max_size": max_size}
                    payload = payload[:-4] if payload.endswith(TAIL) else payload
                got = outcome(ours, payload, **kwargs)
                expected = outcome(references[0], payload, **kwargs)
                assert got == expected, (run, wbits, payload.hex())
                if len(others) == 2:
                    impl._set_isal_inflate(False)
                    try:
                        assert outcome(references[1], payload, **kwargs) == expected
                    finally:
                        impl._set_isal_inflate(True)
                if not isinstance(got, bytes):
                    break
    finally:
        getattr(impl, "_set_isal_inflate", lambda on: None)(isal_was)


def mutate(rnd: random.Random, payload: bytes) -> bytes:
    """1-3 edits: a bit flipped, a byte replaced, 1-3 bytes cut, a byte inserted."""
    p = bytearray(payload)
    for _ in range(rnd.randrange(1, 4)):
        op = rnd.randrange(4)
        if op == 0 and p:
            p[rnd.randrange(len(p))] ^= 1 << rnd.randrange(8)
        elif op == 1 and p:
            p[rnd.randrange(len(p))] = rnd.randrange(256)
        elif op == 2 and len(p) > 1:
            i = rnd.randrange(len(p))
            del p[i:i + rnd.randrange(1, 4)]
        else:
            p.insert(rnd.randrange(len(p) + 1), rnd.randrange(256))
    return bytes(p)


@pytest.mark.test_build
def test_parked_windows_come_back_for_isal() -> None:
    """16 connections on 2 live streams (parked at once): each message is ISA-L's, after
    a window restored from parking, and decodes to itself."""
    ext = compiled_with_isal()
    previous_limit = ext.set_live_states(2)
    previous_park = ext.set_park_after(0)
    try:
        data = messages(160, 1500, seed=5)
        streams = [zlib.compressobj(1, zlib.DEFLATED, -15) for _ in range(16)]
        receivers = [ext.Decompressor(15) for _ in range(16)]
        before = ext._isal_inflated()
        for k, message in enumerate(data):
            i = (k * 5) % 16
            payload = streams[i].compress(message) + streams[i].flush(zlib.Z_SYNC_FLUSH)
            assert receivers[i].decompress(payload[:-4]) == message
        assert ext._isal_inflated() - before == len(data)
        assert ext.live_states()[("inflate", 15)][0] <= 2
    finally:
        ext.set_live_states(previous_limit)
        ext.set_park_after(previous_park)


@pytest.mark.test_build
def test_fragments_stay_on_zlib() -> None:
    """A message in fragments is zlib's, the whole one after it ISA-L's."""
    ext = compiled_with_isal()
    data = messages(2, 4000, seed=9)
    sent = payloads(data)
    d = ext.Decompressor(15)
    before = ext._isal_inflated()
    first = sent[0][:-4]
    out = d.decompress(first[:100], fin=False) + d.decompress(first[100:], fin=True)
    assert out == data[0]
    assert ext._isal_inflated() == before
    assert d.decompress(sent[1][:-4]) == data[1]
    assert ext._isal_inflated() == before + 1


@pytest.mark.test_build
def test_a_busy_connection_keeps_its_history_in_isals_buffer() -> None:
    """One connection's window stays in ISA-L's buffer from one of its messages to the
    next (moved down when the buffer is full): 400 messages, with another connection
    taking the buffer every 10th, a fragmented message (zlib's) every 37th and a reset
    at the 200th; each decodes to itself, and every whole one is ISA-L's."""
    ext = compiled_with_isal()
    data = messages(400, 1000, seed=11)
    other = messages(40, 3000, seed=12)
    sender = zlib.compressobj(1, zlib.DEFLATED, -15)
    other_sender = zlib.compressobj(1, zlib.DEFLATED, -15)
    d, d_other = ext.Decompressor(15), ext.Decompressor(15)
    before, whole = ext._isal_inflated(), 0
    for k, message in enumerate(data):
        if k == 200:
            d.reset()
            sender = zlib.compressobj(1, zlib.DEFLATED, -15)
        payload = (sender.compress(message) + sender.flush(zlib.Z_SYNC_FLUSH))[:-4]
        if k % 37 == 36:
            cut = len(payload) // 2
            got = d.decompress(payload[:cut], fin=False) + d.decompress(payload[cut:])
        else:
            got = d.decompress(payload)
            whole += 1
        assert got == message, k
        if k % 10 == 9:
            m = other[k // 10]
            p = (other_sender.compress(m) + other_sender.flush(zlib.Z_SYNC_FLUSH))[:-4]
            assert d_other.decompress(p) == m
            whole += 1
    assert ext._isal_inflated() - before == whole


# --- the operator's escape hatch: set_inflate("zlib") / FASTDEFLATE_INFLATE=zlib ----------


def test_set_inflate_is_checked_and_returns_the_previous_choice(impl: ModuleType) -> None:
    assert impl.set_inflate("zlib") == "auto"
    try:
        assert impl._inflate_choice_now() == "zlib"
        assert impl.inflate_engine() == impl.ENGINE
        for bad, error in (("isal", ValueError), ("ZLIB", ValueError), (None, TypeError),
                           (1, TypeError)):
            with pytest.raises(error):
                impl.set_inflate(bad)
        assert impl._inflate_choice_now() == "zlib"  # unchanged by the bad ones
    finally:
        assert impl.set_inflate("auto") == "zlib"
    assert impl.inflate_engine() == impl.INFLATE_ENGINE


@pytest.mark.test_build
def test_set_inflate_zlib_keeps_every_message_from_isal() -> None:
    """With "zlib" no message goes to ISA-L (its counter stays), the bytes are the same;
    "auto" gives them back to it."""
    ext = compiled_with_isal()
    data = messages(6, 2000)
    sent = payloads(data)
    previous = ext.set_inflate("zlib")
    try:
        d = ext.Decompressor(15)
        before = ext._isal_inflated()
        assert [d.decompress(p[:-4]) for p in sent[:3]] == data[:3]
        assert ext._isal_inflated() == before
        ext.set_inflate("auto")
        assert [d.decompress(p[:-4]) for p in sent[3:]] == data[3:]
        assert ext._isal_inflated() == before + 3
    finally:
        ext.set_inflate(previous)


@pytest.mark.parametrize("value,choice,warns", [("zlib", "zlib", False), ("auto", "auto", False),
                                                (" zlib ", "zlib", False), ("isal", "auto", True),
                                                ("", "auto", False)])
def test_inflate_from_the_environment(impl: ModuleType, value: str, choice: str,
                                      warns: bool) -> None:
    """FASTDEFLATE_INFLATE chooses at import, shown by status() and python -m
    fastdeflate; a bad value warns and keeps "auto" (importing never fails over it)."""
    from _subprocess import run_python

    out = run_python(
        "import json, fastdeflate as f, fastdeflate.__main__ as m; s = f.status(); "
        "print(json.dumps([s['inflate'], s['inflate_engine'], f.ENGINE, f.INFLATE_ENGINE, "
        "m.status_lines()]))", impl=impl, warnings=True, FASTDEFLATE_INFLATE=value)
    import json

    assert out.returncode == 0, out.stderr
    got, engine_now, engine, inflate_engine, lines = json.loads(out.stdout)
    assert got == choice
    assert engine_now == (engine if choice == "zlib" else inflate_engine)
    assert ("FASTDEFLATE_INFLATE" in out.stderr) == warns, out.stderr
    shown = [line for line in lines if "decompressing:" in line]
    if choice == "zlib":
        assert shown == [f"  decompressing: {engine} (set_inflate / FASTDEFLATE_INFLATE: 'zlib')"]
    elif inflate_engine != engine:
        assert shown == [f"  decompressing: {inflate_engine}"]


# --- ISA-L's own stateful inflate with little output room (intel/isa-l#316) ----------------
#
# fastdeflate's message path hands ISA-L the whole output room, but ISA-L's stateful
# isal_inflate(), which python-isal and others run, can meet a block's end with the output
# full. Up to ISA-L 2.31.1 its aarch64 decoder then tested BFINAL as 64 bits (with
# crc_flag beside it): a zlib or gzip stream whose non-final block ended with the output
# just full was taken to be over (isa-l#316, fixed in 2.32.0; the build refuses older
# releases: buildtools/isal.py, MINIMUM_VERSION). ``_isal_inflate_chunked`` (a test hook of
# the extension) runs isal_inflate() with ``out_chunk`` bytes of room per call; .ci/steps/
# 45-arm64.sh runs these tests on aarch64 (emulated), where they fail on ISA-L 2.31.1.


def acgt(size: int, seed: int) -> bytes:
    """Random bases: four letters, no structure."""
    return random.Random(seed).randbytes(size).translate(bytes(b"ACGT"[i % 4]
                                                                for i in range(256)))


def fastq(size: int, seed: int = 0) -> bytes:
    """FASTQ-like reads (python-isal's test data for isa-l#316 was a FASTQ file): a
    header, bases, a separator and quality letters, per read."""
    rnd = random.Random(seed)
    quality = bytes(33 + min(40, i * 41 // 256 + i % 7) for i in range(256))
    reads, total, n = [], 0, 0
    while total < size:
        length = 100 + rnd.randrange(50)
        read = (b"@read%d/1\n" % n + acgt(length, rnd.randrange(1 << 30)) + b"\n+\n"
                + rnd.randbytes(length).translate(quality) + b"\n")
        reads.append(read)
        total += len(read)
        n += 1
    return b"".join(reads)[:size]


#: Where a block ends: every BLOCK bytes of output (Z_BLOCK), blocks of 100 literals of
#: 2-bit codes whose last one ISA-L's decoder reads together with the end-of-block code.
BLOCK = 100


def huffman_only_blocks(data: bytes, wbits: int) -> bytes:
    """``data`` as stdlib zlib compresses it with Huffman codes alone (Z_HUFFMAN_ONLY, no
    matches), a block ended after every BLOCK bytes."""
    c = zlib.compressobj(1, zlib.DEFLATED, wbits, 8, zlib.Z_HUFFMAN_ONLY)
    return b"".join(c.compress(data[i:i + BLOCK]) + c.flush(zlib.Z_BLOCK)
                    for i in range(0, len(data), BLOCK)) + c.flush()


def isal_chunked_outcome(ext: ModuleType, stream: bytes, out_chunk: int, wbits: int,
                         expected: bytes) -> str | None:
    """None if ISA-L's stateful inflate, given out_chunk bytes of room per call, decodes
    ``stream`` to ``expected``; else what went wrong."""
    try:
        out, calls = ext._isal_inflate_chunked(stream, out_chunk, wbits,
                                               max_size=len(expected) + 1)
    except RuntimeError as exc:
        return f"out_chunk {out_chunk}: {exc}"
    if out != expected:
        at = next((i for i, (a, b) in enumerate(zip(out, expected)) if a != b),
                  min(len(out), len(expected)))
        return (f"out_chunk {out_chunk}: {len(out)} bytes, not {len(expected)}, "
                f"first difference at {at} ({calls} calls)")
    assert calls >= len(expected) // out_chunk
    return None


@pytest.mark.test_build
@pytest.mark.parametrize("wbits", [15, -15], ids=["zlib", "raw"])
def test_isal_stateful_inflate_with_the_output_full_just_before_a_block_end(
        wbits: int) -> None:
    """isa-l#316: ISA-L decodes its first 64 KiB into a buffer of its own, then straight
    into the caller's room: with ``out_chunk`` just over 64 KiB, the room runs out at
    ``out_chunk`` bytes of output. Put 0-3 bytes before the ends of ten blocks there, it
    runs out as the decoder reads a last literal with the end-of-block code. The zlib
    stream (crc_flag set) is the one 2.31.1 ended there on aarch64 ("isal_inflate returned
    -6": its checksum, read where the next block starts); a raw stream (fastdeflate's
    crc_flag, 0) never met it."""
    ext = compiled_with_isal()
    data = acgt(96 * 1024, seed=316)
    stream = huffman_only_blocks(data, wbits)
    ends = [(65536 // BLOCK + j) * BLOCK for j in range(1, 11)]
    failures = [outcome for end in ends for before in range(4)
                if (outcome := isal_chunked_outcome(ext, stream, end - before, wbits, data))]
    assert not failures, f"{len(failures)} of {4 * len(ends)} failed:\n" + "\n".join(failures)


@pytest.mark.test_build
@pytest.mark.parametrize("mem_level", [1, 8])
def test_isal_stateful_inflate_in_chunks_decodes_what_zlib_compressed(
        mem_level: int) -> None:
    """python-isal's case of isa-l#316 (128 KiB of FASTQ at zlib's level 1, a zlib
    stream; memLevel 1 makes blocks of 127 symbols), decoded with output rooms of many
    sizes: byte for byte the data, as stdlib zlib decodes it."""
    ext = compiled_with_isal()
    data = fastq(128 * 1024)
    c = zlib.compressobj(1, zlib.DEFLATED, 15, mem_level)
    stream = c.compress(data) + c.flush()
    assert zlib.decompress(stream) == data
    sizes = [1, 7, 100, 4095, 32767, 32768, 32769, 65535, 65536, 65537, 70001, 100003,
             len(data) - 1, len(data), len(data) + 1]
    failures = [outcome for size in sizes
                if (outcome := isal_chunked_outcome(ext, stream, size, 15, data))]
    assert not failures, "\n".join(failures)


@pytest.mark.test_build
def test_isal_stateful_inflate_hook_reports_what_isal_refuses() -> None:
    """The hook's own errors: a cut stream, a wrong checksum, output past max_size."""
    ext = compiled_with_isal()
    data = fastq(20000, seed=1)
    stream = zlib.compress(data, 1)
    assert ext._isal_inflate_chunked(stream, 4096, 15)[0] == data
    with pytest.raises(RuntimeError, match="input ended"):
        ext._isal_inflate_chunked(stream[:-10], 4096, 15)
    with pytest.raises(RuntimeError, match="returned -6"):  # ISAL_INCORRECT_CHECKSUM
        ext._isal_inflate_chunked(stream[:-1] + bytes([stream[-1] ^ 1]), 4096, 15)
    with pytest.raises(RuntimeError, match="max_size"):
        ext._isal_inflate_chunked(stream, 4096, 15, max_size=len(data) - 1)
    with pytest.raises(ValueError):
        ext._isal_inflate_chunked(stream, 0, 15)
    with pytest.raises(ValueError):
        ext._isal_inflate_chunked(stream, 4096, 16)
