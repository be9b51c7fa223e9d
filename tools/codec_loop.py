"""A loop over every path of the compiled codec, errors included, for leak checkers.

``python tools/codec_loop.py [ROUNDS]`` (default 50). Each round creates, uses and drops
codec objects along every documented outcome: messages whole and in fragments (flushed
or not, every input type, sizes on both sides of the GIL and buffer thresholds), inputs
and outputs cut in (small) slices, BFINAL restarts, resets mid-message, corrupt data and
the refusal after it, MessageTooBig whole and across fragments, bad arguments, objects
dropped mid-message or after an error.
Run under valgrind by tools/valgrind.sh; exits non-zero if any result is wrong. Needs the
test build (``FASTDEFLATE_TEST_HOOKS=1``) for its slices: a default build says so and
exits non-zero.
"""

from __future__ import annotations

import sys
import zlib

import fastdeflate
from fastdeflate import DecompressionError, MessageTooBig

if not fastdeflate.status()["build"]["test_build"]:
    raise SystemExit("tools/codec_loop.py needs the extension's test build: rebuild it with "
                     "FASTDEFLATE_TEST_HOOKS=1 (buildtools/test_build.py)")

TEXT = b"".join(b'{"seq": %d, "price": %d}' % (i, i * 31 % 997) for i in range(8000))  # ~190 KB
HELLO = bytes.fromhex("f248cdc9c90700")
BFINAL = bytes.fromhex("f348cdc9c9070000")
SHARED = bytes.fromhex("f200110000")
_fixed = zlib.compressobj(1, zlib.DEFLATED, -15, 8, zlib.Z_FIXED)
LITERALS = _fixed.compress(bytes(range(98))) + _fixed.flush(zlib.Z_FULL_FLUSH)  # 98 bytes out


def expect(error: type[BaseException], call, *args, **kwargs) -> None:
    try:
        call(*args, **kwargs)
    except error:
        return
    raise AssertionError(f"{call} did not raise {error.__name__}")


def bomb() -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return (c.compress(b"\0" * 500_000) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]


def one_round(codec, bomb_payload: bytes) -> None:
    # Round trips: sizes across thresholds, input types, window sizes, context modes.
    # Level 1 at window 15 runs on ISA-L in the bundled build, level 6 on zlib-ng.
    for level, wbits, nct in ((6, 9, False), (6, 15, True), (6, 12, False), (1, 15, False),
                              (1, 15, True)):
        c = codec.Compressor(level=level, window_bits=wbits, no_context_takeover=nct)
        d = codec.Decompressor(window_bits=wbits, no_context_takeover=nct)
        for size in (0, 5, 3000, 10_000, len(TEXT)):
            for kind in (bytes, bytearray, memoryview):
                message = TEXT[:size]
                assert d.decompress(kind(c.compress(kind(message))), max_size=size) == message
            # with room to spare (ISA-L decodes these whole messages in the bundled build),
            # with and without the sync tail
            message = TEXT[size // 3:size]
            assert d.decompress(c.compress(message)) == message
            payload = c.compress(message) + b"\x00\x00\xff\xff"
            assert d.decompress(memoryview(payload), has_tail=True) == message
        # Fragments, flushed and not; the peer gets them one by one.
        for flush in (True, False):
            parts = [c.compress(TEXT[i:i + 9000], fin=False, flush=flush)
                     for i in range(0, 36_000, 9000)]
            parts.append(c.compress(b"end"))
            out = b"".join(d.decompress(p, fin=False, max_size=40_000) for p in parts[:-1])
            assert out + d.decompress(parts[-1], max_size=40_000) == TEXT[:36_000] + b"end"
        c.reset()
        d.reset()
    # Window 8 decodes.
    assert codec.Decompressor(window_bits=8).decompress(HELLO) == b"Hello"
    # BFINAL: the stream restarts over the same window, within a message and after it.
    d = codec.Decompressor()
    assert d.decompress(BFINAL) == b"Hello"
    assert d.decompress(SHARED) == b"Hello"
    assert d.decompress(BFINAL[:-1] + HELLO, max_size=10) == b"HelloHello"
    # Corrupt data, the refusal after it, reset; corrupt in a later fragment.
    for payload in (b"\xff\xff\xff\xff", bytes.fromhex("000500ffff48656c6c6f"), b"\xfc" + b"\xff" * 20,
                    SHARED):  # the last: a distance with no window behind it
        d = codec.Decompressor()
        expect(DecompressionError, d.decompress, payload)
        expect(DecompressionError, d.decompress, HELLO)
        d.reset()
        assert d.decompress(HELLO) == b"Hello"
    d = codec.Decompressor()
    assert d.decompress(bytes.fromhex("000500faff4865"), fin=False) == b"He"
    expect(DecompressionError, d.decompress, b"llo\xff", fin=False)
    del d  # dropped while refusing data
    # Message too big: whole, across fragments, at max_size 0; dropped afterwards.
    d = codec.Decompressor()
    expect(MessageTooBig, d.decompress, bomb_payload, max_size=100_000)
    expect(DecompressionError, d.decompress, HELLO)
    d.reset()
    expect(MessageTooBig, d.decompress, HELLO, max_size=0)
    d.reset()
    try:
        for i in range(0, len(bomb_payload), 50):
            d.decompress(bomb_payload[i:i + 50], fin=False, max_size=200_000)
    except MessageTooBig:
        pass
    else:
        raise AssertionError("no MessageTooBig across fragments")
    codec.Decompressor().decompress(bomb_payload[:300], fin=False)  # dropped mid-message
    # Past max_size as the input ends: the tail is read with no room for output; both
    # a header it makes corrupt and one it leaves valid.
    for suffix, error in ((b"\x44", DecompressionError), (b"\xdd\x01", MessageTooBig)):
        expect(error, codec.Decompressor().decompress, LITERALS + suffix, max_size=97)
    # Inputs and outputs cut in slices (1 GiB in use; 7 bytes here, by the test hook):
    # round trips across them, and max_size passed where a slice ends, before a block
    # header the next slice or the tail makes corrupt, or not.
    previous = codec._set_max_slice(7)
    try:
        c, d = codec.Compressor(), codec.Decompressor()
        for size in (6, 7, 8, 20_000):
            assert d.decompress(c.compress(TEXT[:size]), max_size=size) == TEXT[:size]
        for size in range(1, 8):  # the slice ends somewhere in the last literal's bytes
            codec._set_max_slice(size)
            for suffix, error in ((b"\x07", DecompressionError), (b"\x44", DecompressionError),
                                  (b"\xdd\x01", MessageTooBig)):
                expect(error, codec.Decompressor().decompress, LITERALS + suffix, max_size=97)
    finally:
        codec._set_max_slice(previous)
    # Compressors dropped mid-message, unused, after reset.
    c = codec.Compressor(level=9, mem_level=9, strategy=1)
    c.compress(TEXT[:50_000], fin=False, flush=False)
    del c
    codec.Compressor()
    codec.Decompressor()
    c = codec.Compressor(level=0)
    c.reset()
    assert codec.Decompressor().decompress(c.compress(TEXT[:20_000])) == TEXT[:20_000]
    # Bad arguments, on new and on used objects.
    expect(ValueError, codec.Compressor, window_bits=8)
    expect(ValueError, codec.Compressor, level=10)
    expect(TypeError, codec.Compressor, mem_level="8")
    expect(ValueError, codec.Decompressor, window_bits=16)
    expect(TypeError, codec.Decompressor, no_context_takeover=1)
    c, d = codec.Compressor(), codec.Decompressor()
    expect(TypeError, c.compress, "text")
    expect(TypeError, c.compress, 12)
    expect(TypeError, d.decompress, "text")
    expect(TypeError, d.decompress, HELLO, max_size=1.5)
    expect(ValueError, d.decompress, HELLO, max_size=-1)
    assert d.decompress(c.compress(b"still fine")) == b"still fine"


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    codec = __import__("fastdeflate._fastdeflate", fromlist=["x"])
    assert fastdeflate.IMPLEMENTATION == "cython", "the compiled codec did not import"
    payload = bomb()
    for _ in range(rounds):
        one_round(codec, payload)
    print(f"codec loop: {rounds} rounds on {codec.__file__}, zlib {codec.ZLIB_VERSION}: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
