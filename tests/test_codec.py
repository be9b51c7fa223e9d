"""The RFC 7692 payload transformation, on both implementations (the ``impl`` fixture)."""

from __future__ import annotations

import array
import random
import sys
import types
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastdeflate import DecompressionError, DeflateError, MessageTooBig

TAIL = b"\x00\x00\xff\xff"
HELLO = b"Hello"
HELLO_PAYLOAD = bytes.fromhex("f248cdc9c90700")

# RFC 7692 §7.2.3, trailing 00 00 ff ff already removed.
RFC_VECTORS = [
    pytest.param([bytes.fromhex("f248cdc9c90700")], id="one-block"),
    pytest.param([bytes.fromhex("f248cd"), bytes.fromhex("c9c90700")], id="two-frames"),
    pytest.param([bytes.fromhex("000500faff48656c6c6f00")], id="stored-block"),
    pytest.param([bytes.fromhex("f348cdc9c9070000")], id="bfinal"),
    pytest.param([bytes.fromhex("f24805000000ffffcac9c90700")], id="two-blocks"),
]


def stdlib_engine(impl) -> bool:
    """True if ``impl`` runs the same zlib as the stdlib (so the same bytes come out)."""
    return impl.ENGINE in (f"zlib {zlib.ZLIB_RUNTIME_VERSION}",
                           f"zlib {zlib.ZLIB_RUNTIME_VERSION} (stdlib)")


def require_stdlib_engine(*impls) -> None:
    """Skip (with the reason) a byte-identity test when an engine differs from stdlib's."""
    for impl in impls:
        if not stdlib_engine(impl):
            pytest.skip(f"byte identity holds only on the same zlib: {impl.ENGINE} is not "
                        f"the stdlib's zlib {zlib.ZLIB_RUNTIME_VERSION}")


SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def stdlib_payload(message: bytes, level=6, wbits=15, mem_level=8, strategy=0) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -wbits, mem_level, strategy)
    data = c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH)
    assert data.endswith(TAIL)
    return data[:-4]


def stdlib_inflate(payload: bytes, wbits=15) -> bytes:
    return zlib.decompressobj(-wbits).decompress(payload + TAIL)


# --- RFC vectors ------------------------------------------------------------------


@pytest.mark.parametrize("frames", RFC_VECTORS)
def test_rfc_vectors_decode(impl, frames):
    d = impl.Decompressor()
    out = b"".join(d.decompress(f, fin=False) for f in frames[:-1])
    assert out + d.decompress(frames[-1]) == HELLO


@pytest.mark.parametrize("frames", RFC_VECTORS)
def test_rfc_vectors_keep_the_window_for_the_next_message(impl, frames):
    d = impl.Decompressor()
    out = b"".join(d.decompress(f, fin=False) for f in frames[:-1])
    assert out + d.decompress(frames[-1]) == HELLO
    # "Hello" again, encoded against the shared window.
    assert d.decompress(bytes.fromhex("f200110000")) == HELLO


def test_rfc_empty_message(impl):
    assert impl.Decompressor().decompress(b"\x00") == b""
    assert impl.Compressor().compress(b"") == b"\x00"


def test_rfc_hello_payloads(impl):
    c = impl.Compressor()
    assert c.compress(HELLO) == bytes.fromhex("f248cdc9c90700")
    assert c.compress(HELLO) == bytes.fromhex("f200110000")


def test_no_context_takeover_starts_every_message_empty(impl):
    c = impl.Compressor(no_context_takeover=True)
    assert [c.compress(HELLO) for _ in range(3)] == [bytes.fromhex("f248cdc9c90700")] * 3
    d = impl.Decompressor(no_context_takeover=True)
    assert [d.decompress(bytes.fromhex("f248cdc9c90700")) for _ in range(3)] == [HELLO] * 3


@pytest.mark.parametrize("level", [-1, 1, 6, 9])
def test_no_context_takeover_output_is_a_fresh_compressors(impl, level):
    """After the reset between messages, each message compresses exactly as on a new
    compressor (same search settings, nothing left over), at any level."""
    messages = [(b'{"seq": %d, "px": %d, "sym": "abc"}' % (i, i * 37)) * (40 + 90 * i)
                for i in range(6)]
    c = impl.Compressor(level=level, no_context_takeover=True)
    for message in messages:
        assert c.compress(message) == impl.Compressor(level=level).compress(message)


def test_default_level_is_level_6(impl):
    message = b'{"id": 1, "text": "the default level"}' * 300
    for no_context_takeover in (False, True):
        default = impl.Compressor(no_context_takeover=no_context_takeover)
        six = impl.Compressor(level=6, no_context_takeover=no_context_takeover)
        assert [default.compress(message) for _ in range(3)] == [
            six.compress(message) for _ in range(3)]


def test_no_context_takeover_decompressor_forgets_the_window(impl):
    d = impl.Decompressor(no_context_takeover=True)
    d.decompress(bytes.fromhex("f248cdc9c90700"))
    # This payload refers back to the previous message: without the window it fails.
    with pytest.raises(DecompressionError):
        d.decompress(bytes.fromhex("f200110000"))


def test_reset_forgets_the_window(impl):
    c = impl.Compressor()
    c.compress(HELLO)
    c.reset()
    assert c.compress(HELLO) == bytes.fromhex("f248cdc9c90700")
    d = impl.Decompressor()
    d.decompress(bytes.fromhex("f248cdc9c90700"))
    d.reset()
    with pytest.raises(DecompressionError):
        d.decompress(bytes.fromhex("f200110000"))


def test_bfinal_then_more_data_in_the_same_message(impl):
    # A final block, then a second (non-final) deflate stream referring to the first.
    first = bytes.fromhex("f348cdc9c90700")  # "Hello", BFINAL=1
    d = impl.Decompressor()
    assert d.decompress(first + bytes.fromhex("f200110000")) == HELLO * 2


# --- round trips, interop and byte identity ---------------------------------------

messages = st.lists(st.binary(max_size=3000) | st.text(max_size=500).map(str.encode),
                    min_size=1, max_size=6)
compressor_params = st.fixed_dictionaries({
    "level": st.sampled_from([-1, 0, 1, 6, 9]),
    "window_bits": st.integers(9, 15),
    "mem_level": st.integers(1, 9),
    "strategy": st.integers(0, 4),
    "no_context_takeover": st.booleans(),
})


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def send(c, message: bytes, cuts: list[int], flush: bool) -> bytes:
    """Compress one message in fragments at ``cuts``; return the whole payload."""
    parts = split(message, cuts)
    out = [c.compress(p, fin=False, flush=flush) for p in parts[:-1]]
    return b"".join(out) + c.compress(parts[-1])


def receive(d, payload: bytes, cuts: list[int], max_size=None) -> bytes:
    parts = split(payload, cuts)
    out = [d.decompress(p, fin=False, max_size=max_size) for p in parts[:-1]]
    return b"".join(out) + d.decompress(parts[-1], max_size=max_size)


@SETTINGS
@given(msgs=messages, params=compressor_params, cuts=st.lists(st.integers(0, 10**6), max_size=4),
       flush=st.booleans())
def test_round_trip_fragmented(impl, msgs, params, cuts, flush):
    c = impl.Compressor(**params)
    d = impl.Decompressor(params["window_bits"], params["no_context_takeover"])
    for m in msgs:
        payload = send(c, m, cuts, flush)
        assert receive(d, payload, cuts[::-1]) == m


@SETTINGS
@given(msgs=messages, params=compressor_params)
def test_identical_to_stdlib_zlib(impl, msgs, params):
    """Same bytes as the stdlib with one persistent compressobj (or one per message)."""
    require_stdlib_engine(impl)
    c = impl.Compressor(**params)
    ref = None
    for m in msgs:
        if ref is None or params["no_context_takeover"]:
            ref = zlib.compressobj(params["level"], zlib.DEFLATED, -params["window_bits"],
                                   params["mem_level"], params["strategy"])
        expected = ref.compress(m) + ref.flush(zlib.Z_SYNC_FLUSH)
        assert c.compress(m) == expected[:-4]


@SETTINGS
@given(msgs=messages, params=compressor_params, cuts=st.lists(st.integers(0, 10**6), max_size=4),
       flush=st.booleans())
def test_implementations_byte_identical(msgs, params, cuts, flush):
    from fastdeflate import _fastdeflate, _pure

    require_stdlib_engine(_fastdeflate, _pure)
    a, b = _fastdeflate.Compressor(**params), _pure.Compressor(**params)
    for m in msgs:
        parts = split(m, cuts)
        for p in parts[:-1]:
            assert a.compress(p, fin=False, flush=flush) == b.compress(p, fin=False, flush=flush)
        assert a.compress(parts[-1]) == b.compress(parts[-1])


@SETTINGS
@given(msgs=messages, wbits=st.integers(9, 15), nct=st.booleans())
def test_stdlib_output_inflates(impl, msgs, wbits, nct):
    ref = zlib.compressobj(6, zlib.DEFLATED, -wbits)
    d = impl.Decompressor(wbits, nct)
    for m in msgs:
        if nct:
            ref = zlib.compressobj(6, zlib.DEFLATED, -wbits)
        assert d.decompress((ref.compress(m) + ref.flush(zlib.Z_SYNC_FLUSH))[:-4]) == m


@SETTINGS
@given(msgs=messages, wbits=st.integers(9, 15))
def test_output_inflates_with_stdlib(impl, msgs, wbits):
    c = impl.Compressor(window_bits=wbits)
    ref = zlib.decompressobj(-wbits)
    for m in msgs:
        assert ref.decompress(c.compress(m) + TAIL) == m


def test_window_8_decompresses(impl):
    # zlib can't compress raw deflate with window 8, but any peer may; window-9 data
    # that only looks back <= 256 bytes is valid window-8 data.
    payload = stdlib_payload(b"abcabcabc" * 20, wbits=9)
    assert impl.Decompressor(window_bits=8).decompress(payload) == b"abcabcabc" * 20


def test_large_message_round_trip(impl):
    big = b"".join(b"%08d,{'price': %d}\n" % (i, i * 7 % 1000) for i in range(400_000))
    c, d = impl.Compressor(), impl.Decompressor()
    for _ in range(2):
        payload = c.compress(big)
        assert d.decompress(payload) == big
    assert stdlib_inflate(stdlib_payload(big)) == big


def test_input_types(impl):
    c, d = impl.Compressor(no_context_takeover=True), impl.Decompressor(no_context_takeover=True)
    expected = c.compress(b"bytes like")
    for data in (bytearray(b"bytes like"), memoryview(b"xxbytes likexx")[2:-2]):
        assert c.compress(data) == expected
    for data in (expected, bytearray(expected), memoryview(b"_" + expected)[1:]):
        assert d.decompress(data) == b"bytes like"
    wide = array.array("I", [1, 2, 3])
    assert d.decompress(c.compress(wide)) == wide.tobytes()


@pytest.mark.parametrize("bad", ["text", 42, None, [1, 2], memoryview(b"abcdef")[::2]])
def test_wrong_input_types(impl, bad):
    with pytest.raises(TypeError):
        impl.Compressor().compress(bad)
    with pytest.raises(TypeError):
        impl.Decompressor().decompress(bad)


@pytest.mark.parametrize("kwargs, error", [
    ({"level": 10}, ValueError), ({"level": -2}, ValueError), ({"level": 1.5}, TypeError),
    ({"window_bits": 8}, ValueError), ({"window_bits": 16}, ValueError),
    ({"window_bits": 7}, ValueError), ({"window_bits": "15"}, TypeError),
    ({"mem_level": 0}, ValueError), ({"mem_level": 10}, ValueError),
    ({"strategy": 5}, ValueError), ({"strategy": -1}, ValueError),
    ({"no_context_takeover": 1}, TypeError), ({"level": True}, TypeError),
])
def test_bad_compressor_parameters(impl, kwargs, error):
    with pytest.raises(error):
        impl.Compressor(**kwargs)


@pytest.mark.parametrize("kwargs, error", [
    ({"window_bits": 7}, ValueError), ({"window_bits": 16}, ValueError),
    ({"window_bits": None}, TypeError), ({"no_context_takeover": "yes"}, TypeError),
])
def test_bad_decompressor_parameters(impl, kwargs, error):
    with pytest.raises(error):
        impl.Decompressor(**kwargs)


def test_window_8_refused_for_compression_with_a_clear_message(impl):
    with pytest.raises(ValueError, match="window_bits=8"):
        impl.Compressor(window_bits=8)


def test_parameters_are_readable_and_read_only(impl):
    c = impl.Compressor(level=1, window_bits=10, mem_level=3, strategy=1,
                        no_context_takeover=True)
    assert (c.level, c.window_bits, c.mem_level, c.strategy, c.no_context_takeover) == (
        1, 10, 3, 1, True)
    d = impl.Decompressor(window_bits=8, no_context_takeover=True)
    assert (d.window_bits, d.no_context_takeover) == (8, True)
    with pytest.raises(AttributeError):
        c.level = 2
    with pytest.raises(AttributeError):
        d.window_bits = 9


# --- max_size and corrupt input ---------------------------------------------------

MESSAGE = bytes(range(256)) * 40  # 10240 bytes, compresses well


@pytest.mark.parametrize("max_size", [0, 1, 10239, 10240, 10241])
def test_max_size_whole_message(impl, max_size):
    payload = impl.Compressor().compress(MESSAGE)
    d = impl.Decompressor()
    if max_size >= len(MESSAGE):
        assert d.decompress(payload, max_size=max_size) == MESSAGE
    else:
        with pytest.raises(MessageTooBig):
            d.decompress(payload, max_size=max_size)


@given(cuts=st.lists(st.integers(0, 10**6), max_size=5), max_size=st.integers(10200, 10300))
@SETTINGS
def test_max_size_bounds_the_whole_message_across_fragments(impl, cuts, max_size):
    payload = impl.Compressor().compress(MESSAGE)
    d = impl.Decompressor()
    if max_size >= len(MESSAGE):
        assert receive(d, payload, cuts, max_size) == MESSAGE
        assert receive(d, impl.Compressor().compress(b"x"), [], 1) == b"x"
    else:
        with pytest.raises(MessageTooBig):
            receive(d, payload, cuts, max_size)


def test_tighter_max_size_on_a_later_fragment(impl):
    payload = impl.Compressor().compress(MESSAGE)
    d = impl.Decompressor()
    assert len(d.decompress(payload[:-20], fin=False)) > 100
    with pytest.raises(MessageTooBig):
        d.decompress(payload[-20:], max_size=100)


def test_max_size_is_per_message(impl):
    c, d = impl.Compressor(), impl.Decompressor()
    for _ in range(5):
        assert d.decompress(c.compress(MESSAGE), max_size=len(MESSAGE)) == MESSAGE


def test_empty_message_with_max_size_zero(impl):
    assert impl.Decompressor().decompress(b"\x00", max_size=0) == b""


@pytest.mark.parametrize("max_size", [sys.maxsize - 1, sys.maxsize, 2**63, 2**64, 2**100],
                         ids=["maxsize-1", "maxsize", "2^63", "2^64", "2^100"])
def test_max_size_beyond_the_platform_limit_is_unlimited(impl, max_size):
    """Any int >= 0 is accepted, however large: past what memory can hold it is no limit."""
    c, d = impl.Compressor(), impl.Decompressor()
    payload = c.compress(MESSAGE)
    assert d.decompress(payload, max_size=max_size) == MESSAGE
    assert d.decompress(c.compress(MESSAGE), max_size=max_size) == MESSAGE
    # Across fragments, with a BFINAL restart in the message.
    fragments = [payload[:7], payload[7:] + TAIL, bytes.fromhex("f348cdc9c90700")]
    d2 = impl.Decompressor()
    parts = [d2.decompress(f, fin=False, max_size=max_size) for f in fragments]
    parts.append(d2.decompress(bytes.fromhex("f200110000"), max_size=max_size))
    assert b"".join(parts) == MESSAGE + HELLO * 2
    # A later, tighter limit on the same message still applies.
    d.decompress(c.compress(MESSAGE, fin=False), fin=False, max_size=max_size)
    with pytest.raises(MessageTooBig):
        d.decompress(c.compress(HELLO), max_size=100)


@pytest.mark.parametrize("bad", [0, -1, "1", 1.0])
def test_bad_max_size(impl, bad):
    d = impl.Decompressor()
    error = ValueError if isinstance(bad, int) and bad < 0 else TypeError
    if bad == 0:
        with pytest.raises(MessageTooBig):
            d.decompress(impl.Compressor().compress(b"a"), max_size=bad)
        return
    with pytest.raises(error):
        d.decompress(b"\x00", max_size=bad)


def test_bomb_is_not_inflated_past_max_size(impl):
    """A 10 MB message of zeros is refused without being inflated to find out."""
    import tracemalloc

    payload = stdlib_payload(b"\0" * 10_000_000)
    d = impl.Decompressor()
    tracemalloc.start()
    try:
        with pytest.raises(MessageTooBig):
            d.decompress(payload, max_size=100_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # the inflate state + ~max_size, not 10 MB


# has_tail=True: the payload comes with 00 00 ff ff already appended (aiohttp's reader
# appends it before it calls its decompressor); it is inflated as it is.


@pytest.mark.parametrize("size", [0, 100, 2048, 2049, 70_000])
def test_has_tail_decodes_what_the_payload_alone_does(impl, size):
    """Messages over one window, around the extension's 2 KiB join limit and past one
    output block, from bytes, bytearray and memoryview; a tail appended again would
    leave the stream inside a stored block, and the next message would not decode."""
    rnd = random.Random(size)
    messages = [bytes(rnd.choice(b"abcdefgh ") for _ in range(size)) + b"#%d" % i
                for i in range(4)]
    c = impl.Compressor()
    plain, tailed = impl.Decompressor(), impl.Decompressor()
    for message, kind in zip(messages, (bytes, bytearray, memoryview, bytes)):
        payload = c.compress(message)
        assert plain.decompress(payload) == message
        assert tailed.decompress(kind(payload + TAIL), has_tail=True) == message


def test_has_tail_ends_a_fragmented_message(impl):
    c, d = impl.Compressor(), impl.Decompressor()
    payload = c.compress(MESSAGE)
    assert d.decompress(payload[:50], fin=False) + d.decompress(
        payload[50:] + TAIL, has_tail=True) == MESSAGE
    assert d.decompress(c.compress(HELLO) + TAIL, has_tail=True) == HELLO


@pytest.mark.parametrize("max_size", [0, 10239, 10240])
def test_has_tail_max_size(impl, max_size):
    payload = impl.Compressor().compress(MESSAGE) + TAIL
    d = impl.Decompressor()
    if max_size >= len(MESSAGE):
        assert d.decompress(payload, max_size=max_size, has_tail=True) == MESSAGE
    else:
        with pytest.raises(MessageTooBig):
            d.decompress(payload, max_size=max_size, has_tail=True)


def test_has_tail_refuses_data_without_it_and_fragments(impl):
    """ValueError before anything is read: the window and the message go on unharmed."""
    c, d = impl.Compressor(), impl.Decompressor()
    payload = c.compress(HELLO)
    for bad in (payload, b"", TAIL[1:], bytearray(payload + TAIL[:3])):
        with pytest.raises(ValueError, match="must end with 00 00 ff ff"):
            d.decompress(bad, has_tail=True)
    with pytest.raises(ValueError, match="fin=True"):
        d.decompress(payload + TAIL, fin=False, has_tail=True)
    assert d.decompress(payload + TAIL, has_tail=True) == HELLO
    assert d.decompress(c.compress(HELLO)) == HELLO


CORRUPT = [
    pytest.param(b"\xff\xff\xff\xff", id="invalid-block-type"),
    pytest.param(bytes.fromhex("0005 00ffff 48656c6c6f".replace(" ", "")), id="bad-stored-length"),
    pytest.param(bytes.fromhex("fc") + b"\xff" * 20, id="bad-code-lengths"),
]


@pytest.mark.parametrize("payload", CORRUPT)
@pytest.mark.parametrize("has_tail", [False, True])
def test_corrupt_payload(impl, payload, has_tail):
    d = impl.Decompressor()
    with pytest.raises(DecompressionError, match="Error -3") as info:
        d.decompress(payload + TAIL if has_tail else payload, has_tail=has_tail)
    assert isinstance(info.value, DeflateError)
    # The window is untrustworthy now: refused until reset().
    with pytest.raises(DecompressionError, match="reset"):
        d.decompress(bytes.fromhex("f248cdc9c90700"))
    d.reset()
    assert d.decompress(bytes.fromhex("f248cdc9c90700")) == HELLO


def test_corrupt_fragment(impl):
    d = impl.Decompressor()
    assert d.decompress(bytes.fromhex("000500faff4865"), fin=False) == b"He"  # stored block
    with pytest.raises(DecompressionError, match="invalid block type"):
        d.decompress(b"llo\xff", fin=False)  # then a block header of type 3
    with pytest.raises(DecompressionError):
        d.decompress(b"", fin=True)
    d.reset()
    assert d.decompress(bytes.fromhex("f248cdc9c90700")) == HELLO


def test_after_message_too_big_refused_until_reset(impl):
    c, d = impl.Compressor(), impl.Decompressor()
    with pytest.raises(MessageTooBig):
        d.decompress(c.compress(MESSAGE), max_size=10)
    with pytest.raises(DeflateError):
        d.decompress(bytes.fromhex("f248cdc9c90700"))
    d.reset()
    assert d.decompress(bytes.fromhex("f248cdc9c90700")) == HELLO


def damaged(message: bytes, level: int, changes: list[tuple[int, int]], cut: int) -> bytes:
    """``message``'s payload with bytes replaced at some offsets and maybe cut short."""
    payload = bytearray(stdlib_payload(message, level=level, wbits=9))
    for offset, value in changes:
        if payload:
            payload[offset % len(payload)] = value
    return bytes(payload[:cut])


near_payloads = st.builds(damaged, st.binary(max_size=400) | st.text(max_size=300).map(str.encode),
                          st.sampled_from([0, 1, 6]),
                          st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                   max_size=2),
                          st.integers(0, 500))


@SETTINGS
@given(data=st.binary(max_size=200) | near_payloads,
       cuts=st.lists(st.integers(0, 300), max_size=3),
       wbits=st.integers(8, 15), max_size=st.none() | st.integers(0, 5000))
def test_arbitrary_bytes_decode_as_stdlib_zlib_reads_them(impl, data, cuts, wbits, max_size):
    """Any bytes, in fragments: the output, DecompressionError or MessageTooBig that
    stdlib zlib's one pass over payload + tail gives (exactly, while no block with BFINAL
    ends the deflate stream; after one, decoding goes on with a new stream), then, after
    an error, refusal until reset()."""
    reference = zlib.decompressobj(-wbits)
    try:
        expected: "bytes | None" = reference.decompress(data + TAIL)
    except zlib.error:
        expected = None
    d = impl.Decompressor(wbits)
    try:
        out = receive(d, data, cuts, max_size)
    except DeflateError as exc:
        error: "type | None" = type(exc)
    else:
        error = None
    limited = max_size is not None
    if expected is None:  # corrupt: found unless output passes max_size before it
        produced = output_before_the_error(data + TAIL, wbits)
        if not limited or produced <= max_size:
            assert error is DecompressionError
        elif produced > max_size + 1:  # (one byte over: it depends on where cuts fall)
            assert error is MessageTooBig
    elif not reference.eof:
        if limited and len(expected) > max_size:
            assert error is MessageTooBig
        else:
            assert error is None and out == expected
    elif error is None:  # a stream ended: its output first, then the next stream's
        assert out.startswith(expected) and (not limited or len(out) <= max_size)
    else:
        assert error is DecompressionError or limited
    if error is not None:
        with pytest.raises(DecompressionError, match="reset"):
            d.decompress(HELLO_PAYLOAD)
        d.reset()
        assert d.decompress(HELLO_PAYLOAD) == HELLO


def output_before_the_error(data: bytes, wbits: int) -> int:
    """How many bytes stdlib zlib writes, fed ``data`` byte by byte, before it finds the
    corruption in it."""
    z, produced = zlib.decompressobj(-wbits), 0
    for i in range(len(data)):
        try:
            produced += len(z.decompress(data[i:i + 1]))
        except zlib.error:
            return produced
    raise AssertionError("no error found byte by byte")


@SETTINGS
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 400), max_size=3),
       wbits=st.integers(8, 15), max_size=st.none() | st.integers(0, 3000))
def test_implementations_agree_on_arbitrary_bytes(data, cuts, wbits, max_size):
    from fastdeflate import _fastdeflate, _pure

    results = []
    for module in (_fastdeflate, _pure):
        try:
            results.append(receive(module.Decompressor(wbits), data, cuts, max_size))
        except DeflateError as exc:
            results.append(type(exc))
    assert results[0] == results[1]


@pytest.mark.parametrize("level", [0, 6])
def test_output_where_output_space_runs_out(impl, level):
    """zlib's bytes depend on where its output space ends (level 0 sizes stored blocks
    by it; a sync flush that fills it is repeated). At input lengths that end output
    near CPython's block boundaries (32 KiB, 96 KiB, ...) every payload inflates back
    with stdlib zlib; the compiled codec on the stdlib's own zlib (CI's system-zlib
    build) keeps CPython's block schedule, so its bytes are the stdlib's. On another
    engine (zlib-ng) or in the fallback (which is stdlib zlib) only inflating is checked."""
    import random

    data = random.Random(7).randbytes(230_000)
    lengths = [*range(32_750, 32_770), *range(98_285, 98_300), 229_000]
    same_bytes = impl.__name__ == "fastdeflate._fastdeflate" and stdlib_engine(impl)
    for n in lengths:
        c = impl.Compressor(level=level)
        payload = c.compress(data[:n])
        assert stdlib_inflate(payload) == data[:n], n
        if same_bytes:
            ref = zlib.compressobj(level, zlib.DEFLATED, -15)
            expected = ref.compress(data[:n]) + ref.flush(zlib.Z_SYNC_FLUSH)
            assert payload == expected[:-4], n
        # The same data as a flushed fragment, then the rest: the stream stays valid.
        part = c.compress(data[:n], fin=False) + c.compress(data[n:n + 100])
        assert zlib.decompressobj(-15).decompress(payload + TAIL + part + TAIL) == (
            data[:n] * 2 + data[n:n + 100]), n


def test_streams_per_message_are_bounded(impl):
    """Each block with BFINAL set ends a stream and starts another over the same window;
    a flood of empty final blocks (03 00) is refused rather than restarted for ever."""
    from fastdeflate._params import MAX_STREAMS_PER_MESSAGE

    hello_final = bytes.fromhex("f348cdc9c90700")  # "Hello", BFINAL=1
    empty_final = bytes.fromhex("0300")
    d = impl.Decompressor()
    # As in the RFC's example, a 00 after the last final block starts the stored block
    # that the appended 00 00 ff ff completes.
    allowed = hello_final + empty_final * (MAX_STREAMS_PER_MESSAGE - 1) + b"\x00"
    assert d.decompress(allowed) == HELLO
    assert d.decompress(bytes.fromhex("f200110000")) == HELLO  # the window was kept
    with pytest.raises(DecompressionError, match="deflate streams"):
        d.decompress(hello_final + empty_final * 5000 + b"\x00")
    with pytest.raises(DecompressionError, match="reset"):
        d.decompress(hello_final)
    d.reset()
    # The bound is per message, across its fragments.
    for _ in range(3):
        for part in [hello_final] + [empty_final] * (MAX_STREAMS_PER_MESSAGE - 1):
            d.decompress(part, fin=False)
        assert d.decompress(b"\x00") == b""
    for part in [hello_final] + [empty_final] * MAX_STREAMS_PER_MESSAGE:
        try:
            d.decompress(part, fin=False)
        except DecompressionError as exc:
            assert "deflate streams" in str(exc)
            break
    else:
        raise AssertionError("one stream too many was accepted")


# --- the window: its limit, and BFINAL restarts after long histories ---------------


def stored_final(message: bytes) -> bytes:
    """``message`` as a deflate stream of stored blocks (no back-reference) ending with
    BFINAL, plus the 00 that, with the appended 00 00 ff ff, makes an empty stored block."""
    c = zlib.compressobj(0, zlib.DEFLATED, -15)
    return c.compress(message) + c.flush(zlib.Z_FINISH) + b"\x00"


def refer_back(history: bytes, distance: int) -> tuple[bytes, bytes]:
    """A message of 200 bytes copied from ``distance`` bytes back in ``history``, and
    its payload as the next message (zlib's preset dictionary is the window a peer's
    compressor would have; window 15, so the distance may pass a smaller window).
    Checked with stdlib zlib: it needs exactly the last ``distance`` bytes of history."""
    message = history[-distance:][:200]
    c = zlib.compressobj(9, zlib.DEFLATED, -15, zdict=history[-32768:])
    payload = (c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
    reference = zlib.decompressobj(-15, zdict=history[-distance:])
    assert reference.decompress(payload + TAIL) == message
    with pytest.raises(zlib.error, match="too far back"):
        zlib.decompressobj(-15, zdict=history[-distance + 1:]).decompress(payload + TAIL)
    return message, payload


@pytest.mark.parametrize("wbits", [8, 9, 12, 14])
@pytest.mark.parametrize("first", ["sync-flushed", "bfinal"])
def test_decompressor_window_is_exactly_2_to_the_window_bits(impl, wbits, first):
    """After a message of 2^w + 100 bytes, Decompressor(window_bits=w) decodes a
    back-reference of exactly 2^w bytes into it, and rejects one of 2^w + 1 (valid for a
    larger window) with DecompressionError, then refuses data until reset()."""
    history = random.Random(wbits).randbytes((1 << wbits) + 100)  # no repeats inside
    message1 = stored_final(history) if first == "bfinal" else stdlib_payload(history, level=0)
    within, within_payload = refer_back(history, 1 << wbits)
    beyond, beyond_payload = refer_back(history, (1 << wbits) + 1)
    wide = impl.Decompressor(window_bits=15)
    assert wide.decompress(message1) == history
    assert wide.decompress(beyond_payload) == beyond
    d = impl.Decompressor(window_bits=wbits)
    assert d.decompress(message1) == history
    assert d.decompress(within_payload) == within
    d = impl.Decompressor(window_bits=wbits)
    assert d.decompress(message1) == history
    with pytest.raises(DecompressionError, match="too far back"):
        d.decompress(beyond_payload)
    with pytest.raises(DecompressionError, match="reset"):
        d.decompress(HELLO_PAYLOAD)
    d.reset()
    assert d.decompress(HELLO_PAYLOAD) == HELLO
    # The same in one-byte fragments: refused in the fragment that holds the distance.
    d = impl.Decompressor(window_bits=wbits)
    assert d.decompress(message1) == history
    out = b""
    with pytest.raises(DecompressionError, match="too far back"):
        for i in range(len(beyond_payload)):
            out += d.decompress(beyond_payload[i:i + 1], fin=False)
    assert len(out) < len(beyond) and beyond.startswith(out)


@pytest.mark.parametrize("wbits", [9, 12, 14, 15])
@pytest.mark.parametrize("cuts", [[], [1, 333, 5000]], ids=["whole", "fragments"])
def test_bfinal_after_a_history_of_many_windows(impl, wbits, cuts):
    """Messages with context takeover, several windows of them, then a message that ends
    its deflate stream (BFINAL) and messages that refer back into the window across that
    end, the first one exactly 2^w bytes back; three times over. The window kept (or, in
    the fallback, rebuilt) after BFINAL must be exactly the last 2^w bytes."""
    rng = random.Random(wbits)
    words = [rng.randbytes(rng.randrange(3, 12)) for _ in range(300)]

    def text(size: int) -> bytes:
        return b"".join(rng.choice(words) for _ in range(size // 3))[:size]

    sender = zlib.compressobj(6, zlib.DEFLATED, -wbits)
    history = b""
    expected, payloads = [], []

    def sent(message: bytes, payload: bytes) -> None:
        nonlocal history
        history += message
        expected.append(message)
        payloads.append(payload)

    for round_ in range(3):
        while len(history) < (round_ + 1) * 5 * (1 << wbits):  # several windows more
            message = text(rng.randrange(50, 3000))
            sent(message, (sender.compress(message) + sender.flush(zlib.Z_SYNC_FLUSH))[:-4])
        # A message ending with BFINAL (then the 00 that the tail completes); the peer
        # starts a new stream over the same window (RFC 7692 §7.2.3.4).
        message = text(700)
        sent(message, sender.compress(message) + sender.flush(zlib.Z_FINISH) + b"\x00")
        if wbits < 15:  # deflate's farthest distance is 32768: no farther test at 15
            sent(*refer_back(history, 1 << wbits))
        # A new stream over the window, as a peer continues; messages made of pieces
        # of the window, from near its far end to its near end.
        sender = zlib.compressobj(6, zlib.DEFLATED, -wbits, zdict=history[-(1 << wbits):])
        for _ in range(3):
            start = len(history) - (1 << wbits) + 262 + rng.randrange(300)
            message = history[start:start + 200] + history[-300:-100] + text(100)
            sent(message, (sender.compress(message) + sender.flush(zlib.Z_SYNC_FLUSH))[:-4])
    d = impl.Decompressor(window_bits=wbits)
    assert [receive(d, payload, cuts) for payload in payloads] == expected


# --- inputs and outputs past zlib's uInt: the extension's slices ------------------
# The extension hands zlib at most 1 GiB of input or output per call; the test hook
# _set_max_slice makes slices small, so that the slicing runs on small data. The
# fallback has no slices: the stdlib zlib module slices on its own.

SLICES = [7, 64, 1000, 65536]


@pytest.fixture(params=SLICES, ids=[f"cython-slice-{s}" for s in SLICES])
def sliced(request):
    """The compiled codec, cutting inputs and outputs in slices of ``sliced.slice_size``."""
    from fastdeflate import _fastdeflate

    previous = _fastdeflate._set_max_slice(request.param)
    try:
        yield types.SimpleNamespace(codec=_fastdeflate, slice_size=request.param)
    finally:
        _fastdeflate._set_max_slice(previous)


def sizes_around(slice_size: int, top: int) -> list[int]:
    """Sizes at and around 1, 2 and 3 slices, and a few more, up to ``top``."""
    sizes = {0, 1, 5, top}
    for k in (1, 2, 3, 100):
        sizes.update((k * slice_size - 1, k * slice_size, k * slice_size + 1))
    return sorted(s for s in sizes if 0 <= s <= top)


TEXT = b"".join(b'{"seq": %d, "px": %d, "sym": "abc"}' % (i, i * 37 % 1009)
                for i in range(6000))  # ~200 KB


@pytest.mark.test_build
def test_set_max_slice_is_checked(sliced):
    codec = sliced.codec
    assert codec._set_max_slice(1 << 30) == sliced.slice_size  # the previous size
    assert codec._set_max_slice(sliced.slice_size) == 1 << 30
    for bad in (0, (1 << 30) + 1):
        with pytest.raises(ValueError, match="slice size"):
            codec._set_max_slice(bad)


@pytest.mark.test_build
@pytest.mark.parametrize("level", [0, 1, 6])
def test_sliced_compress_inflates_with_stdlib(sliced, level):
    """Inputs of one to many slices, whole and in fragments (flushed or not), with
    context takeover: stdlib zlib inflates the stream back; so does the sliced decoder."""
    data = TEXT[:100_000] + random.Random(level).randbytes(100_000)
    slice_size = sliced.slice_size
    c, d = sliced.codec.Compressor(level=level), sliced.codec.Decompressor()
    reference = zlib.decompressobj(-15)
    for size in sizes_around(slice_size, len(data)):
        message = data[len(data) - size:] if size % 2 else data[:size]
        payload = c.compress(message)
        assert reference.decompress(payload + TAIL) == message, size
        assert d.decompress(payload) == message, size
    for flush in (True, False):
        step = 3 * slice_size + 1
        parts = [data[i:min(i + step, 60_000)] for i in range(0, 60_000, step)]
        payload = b"".join(c.compress(p, fin=False, flush=flush) for p in parts)
        payload += c.compress(b"end")
        assert reference.decompress(payload + TAIL) == data[:60_000] + b"end"
        assert d.decompress(payload) == data[:60_000] + b"end"


def outcome(module, payload: bytes, cuts: list[int], wbits: int = 15, max_size=None):
    """What decoding ``payload`` in fragments at ``cuts`` gives: the bytes or the error."""
    try:
        return receive(module.Decompressor(wbits), payload, cuts, max_size)
    except DeflateError as exc:
        return type(exc)


def slicing_cases() -> list[tuple[bytes, int]]:
    """Payloads and the size of their message (or 0): text, zeros, BFINAL restarts,
    and corrupt data right after the output passes a max_size (read on, or not)."""
    cases = []
    for size in (0, 1, 100, 5000, 70_000):
        cases.append((stdlib_payload(TEXT[:size]), size))
    cases.append((stdlib_payload(b"\0" * 300_000, level=9), 300_000))  # 1000:1 bytes
    hello_final = bytes.fromhex("f348cdc9c90700")
    cases.append((hello_final + bytes.fromhex("f200110000"), 10))
    cases.append((stored_final(TEXT[:3000]) + stdlib_payload(TEXT[:3000]), 6000))
    fixed = zlib.compressobj(1, zlib.DEFLATED, -15, 8, zlib.Z_FIXED)
    literals = fixed.compress(bytes(range(98))) + fixed.flush(zlib.Z_FULL_FLUSH)
    for suffix in (b"\x07", b"\x44", b"\x3c", b"\xfd", b"\xdd\x01"):
        cases.append((literals + suffix, 0))
    cases.append((b"\xff" * 50, 0))
    return cases


@pytest.mark.test_build
@pytest.mark.parametrize("case", range(len(slicing_cases())))
def test_sliced_decompress_agrees_with_the_fallback(sliced, case):
    """Every payload decodes, or fails, as in the fallback (stdlib zlib, one pass, no
    slices): whole and in fragments, with max_size at, around and far from the size."""
    from fastdeflate import _pure

    payload, size = slicing_cases()[case]
    for cuts in ([], [3], [len(payload) // 2, len(payload) - 1]):
        for max_size in sorted({None, 0, 1, 96, 97, 98, size - 1, size, size + 1} - {-1},
                               key=lambda m: -1 if m is None else m):
            expected = outcome(_pure, payload, cuts, max_size=max_size)
            got = outcome(sliced.codec, payload, cuts, max_size=max_size)
            assert got == expected, (cuts, max_size)
