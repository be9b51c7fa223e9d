"""Nothing shared goes stale (issue 29): state a connection leaves in something shared
(ISA-L's work buffers, parked windows, pooled streams) is trusted by a later call only
when it is provably that connection's, by a token that never repeats, never by an
address; and parking never changes what a message decodes to.

Each test here was seen failing on 077cb0c (before the fix): the first two with wrong
bytes or another connection's plaintext, the parking one with "invalid stored block
lengths" where stdlib zlib decodes the message. The threads are placed deterministically
with the extension's test hook (``"isal work"``: a call holds one of ISA-L's work
buffers); tests/test_stress.py and tests/test_model.py look for the same class at random.
"""

from __future__ import annotations

import gc
import random
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import pytest

from fastdeflate import DecompressionError, MessageTooBig

TAIL = b"\x00\x00\xff\xff"


def compiled_with_isal() -> ModuleType:
    from fastdeflate import _fastdeflate as ext

    if not ext.INFLATE_ENGINE.startswith("ISA-L "):
        pytest.skip(f"inflate runs on {ext.INFLATE_ENGINE}")
    return ext


def text(seed: int, size: int) -> bytes:
    """JSON-like text of its own (no long repeats shared with another seed's)."""
    rnd = random.Random(seed)
    out = b""
    while len(out) < size:
        out += b'{"id": %d, "name": "%s"}, ' % (rnd.randrange(10**9), rnd.randbytes(6).hex().encode())
    return out[:size]


class Peer:
    """A sending peer: stdlib zlib, context takeover, the sync tail stripped."""

    def __init__(self, wbits: int = 15, zdict: bytes = b"") -> None:
        self.c = (zlib.compressobj(6, zlib.DEFLATED, -wbits, zdict=zdict) if zdict
                  else zlib.compressobj(6, zlib.DEFLATED, -wbits))

    def send(self, message: bytes) -> bytes:
        return (self.c.compress(message) + self.c.flush(zlib.Z_SYNC_FLUSH))[:-4]


class HeldWork:
    """Runs decompressor calls on threads that stop once they hold one of ISA-L's work
    buffers (the "isal work" hook point), until released: the interleaving that made a
    ring keep a second work buffer, placed where the test wants it."""

    def __init__(self, ext: ModuleType) -> None:
        self.ext = ext
        self.waiting: dict[int, tuple[threading.Event, threading.Event]] = {}

    def hook(self, point: str) -> None:
        if point == "isal work" and threading.get_ident() in self.waiting:
            holding, go = self.waiting[threading.get_ident()]
            holding.set()
            go.wait(30)

    @contextmanager
    def holding(self, d: object, payload: bytes, expected: bytes) -> Iterator[None]:
        """``d.decompress(payload)`` on a thread, stopped while it holds a work buffer for
        the duration of the block; then it finishes and must return ``expected``."""
        holding, go = threading.Event(), threading.Event()
        result: list[object] = []
        started = threading.Event()

        def run() -> None:
            self.waiting[threading.get_ident()] = (holding, go)
            started.set()
            try:
                result.append(d.decompress(payload))  # type: ignore[attr-defined]
            except BaseException as exc:  # reported below
                result.append(exc)
                holding.set()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        assert started.wait(30) and holding.wait(30), "the thread never took a work buffer"
        try:
            yield
        finally:
            go.set()
            thread.join(30)
        assert result == [expected]


@pytest.fixture
def held() -> Iterator[HeldWork]:
    ext = compiled_with_isal()
    was_on = ext._set_isal_inflate(True)
    tool = HeldWork(ext)
    previous = ext._set_test_hook(tool.hook)
    try:
        yield tool
    finally:
        ext._set_test_hook(previous)
        ext._set_isal_inflate(was_on)


@pytest.mark.test_build
def test_a_spare_work_buffer_never_gives_a_connection_an_older_window(held: HeldWork) -> None:
    """Defect 1: X decodes message 1 in work W2 while Y holds W1, message 2 in W1, and
    message 3 (message 2 again: back-references to it) while Y holds W1 again, in W2,
    which still held X's window of message 1. It must decode against message 2."""
    ext = held.ext
    first, second = text(1, 3000), text(2, 3000)
    sender, other = Peer(), Peer()
    x, y = ext.Decompressor(15), ext.Decompressor(15)
    y_messages = [text(10 + i, 500) for i in range(2)]
    before = ext._isal_inflated()
    with held.holding(y, other.send(y_messages[0]), y_messages[0]):
        assert x.decompress(sender.send(first)) == first
    assert x.decompress(sender.send(second)) == second
    with held.holding(y, other.send(y_messages[1]), y_messages[1]):
        assert x.decompress(sender.send(second)) == second
    assert ext._isal_inflated() - before == 5  # all of them ISA-L's: the path under test


@pytest.mark.test_build
def test_a_freed_connections_window_never_reaches_a_new_one(held: HeldWork) -> None:
    """Defect 2: connection D decodes a secret (in work W1 while Y holds W2) and is
    freed; N, allocated at D's address, decodes a message of its own (in W2), then,
    while Y holds W2 again, one whose first back-reference copies 1,000 bytes from
    1,000 back, in W1. Stdlib zlib refuses it
    ("too far back"): so must fastdeflate, never hand N D's secret."""
    ext = held.ext
    secret = (b'{"session": "' + random.Random(7).randbytes(500).hex().encode())[:998] + b'"}'
    assert len(secret) == 1000
    benign = b'{"hello": "world"}'
    crafted = Peer(zdict=secret).send(secret)  # refers 1,000 bytes back, and nothing else
    oracle = zlib.decompressobj(-15)
    oracle.decompress(Peer().send(benign) + TAIL)
    with pytest.raises(zlib.error, match="too far back"):
        oracle.decompress(crafted + TAIL)
    other = Peer()
    y = ext.Decompressor(15)
    y_messages = iter([text(100 + i, 300) for i in range(400)])
    for attempt in range(200):
        d = ext.Decompressor(15)
        message = next(y_messages)
        with held.holding(y, other.send(message), message):  # D's work: another than Y's
            assert d.decompress(Peer().send(secret)) == secret
        address = id(d)
        del d
        n = ext.Decompressor(15)
        if id(n) != address:
            continue  # the allocator put it elsewhere: try again
        assert n.decompress(Peer().send(benign)) == benign  # in Y's work
        message = next(y_messages)
        with held.holding(y, other.send(message), message):  # N gets D's work
            with pytest.raises(DecompressionError, match="too far back"):
                n.decompress(crafted)
        return
    pytest.fail("no new decompressor took a freed one's address in 200 tries")


@pytest.mark.parametrize("when", ["reset", "error"])
def test_reset_and_errors_forget_what_a_work_buffer_holds(when: str) -> None:
    """After reset() (or an error, then reset()) a connection's window is empty: a
    message referring back into what it decoded before is refused, as by stdlib zlib,
    even though the work buffer that decoded it still holds those bytes."""
    ext = compiled_with_isal()
    secret = text(3, 1000)
    crafted = Peer(zdict=secret).send(secret)
    d = ext.Decompressor(15)
    assert d.decompress(Peer().send(secret)) == secret
    if when == "error":
        with pytest.raises(DecompressionError):
            d.decompress(b"\xff\xff\xff\xff")
    d.reset()
    with pytest.raises(DecompressionError, match="too far back"):
        d.decompress(crafted)


@pytest.mark.parametrize("how", ["at settle", "by the sweeper"])
def test_parking_never_changes_what_a_message_decodes_to(impl: ModuleType, how: str) -> None:
    """Defect 3: a peer that leaves 00 00 ff ff on its payloads makes the tail appended
    to them open a stored block, so the stream ends a message inside a block. Parked
    there (only its window kept), the next message decoded otherwise than by stdlib
    zlib (or failed with "invalid stored block lengths"). A stream inside a block keeps
    its stream: the outcome is stdlib zlib's whether or not it was to be parked."""
    sender = zlib.compressobj(6, zlib.DEFLATED, -15)
    stored = zlib.compressobj(0, zlib.DEFLATED, -15)  # its payloads start with a 00 byte
    payloads = [sender.compress(text(4, 800)) + sender.flush(zlib.Z_SYNC_FLUSH)]  # tail left on
    payloads += [(stored.compress(text(5 + i, 600)) + stored.flush(zlib.Z_SYNC_FLUSH))[:-4]
                 for i in range(3)]
    oracle = zlib.decompressobj(-15)
    expected = []
    for payload in payloads:
        try:
            expected.append(oracle.decompress(payload + TAIL))
        except zlib.error as exc:  # pragma: no cover - the oracle decodes them
            expected.append(str(exc))
    assert expected[1] == payloads[1][1:] + TAIL  # what zlib makes of it: a stored block
    previous_limit = impl.set_live_states(1)
    previous_after = impl.set_park_after(0)
    try:
        holder = impl.Decompressor(15)  # mid-message: keeps a stream, so others park
        holder.decompress(Peer().send(b"x" * 100), fin=False)
        d = impl.Decompressor(15)
        got = []
        for payload in payloads:
            try:
                got.append(d.decompress(payload))
            except (DecompressionError, MessageTooBig) as exc:
                got.append(str(exc))
            if how == "by the sweeper" and hasattr(impl, "_park_idle"):
                gc.collect()
                impl._park_idle()
        assert got == expected
    finally:
        impl.set_live_states(previous_limit)
        impl.set_park_after(previous_after)


# --- back-references past 2^window_bits: zlib's verdict, whatever the path ---------------


def far_reference(position: int, distance: int, strategy: int) -> tuple[bytes, bytes]:
    """A message of random bytes that repeats, at ``position``, 200 bytes from
    ``distance`` back, compressed by stdlib zlib with a 32 KiB window (so the reference
    may pass a smaller negotiated window: what RFC 7692 forbids a peer to send)."""
    body = random.Random(position ^ distance).randbytes(position)
    message = body + body[position - distance:position - distance + 200]
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9, strategy)
    return message, (c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]


def stock_outcome(window_bits: int, parts: list[bytes]) -> object:
    """What a stock library's stdlib zlib makes of a message sent in ``parts``: one
    decompress() call per frame, the tail with the last."""
    d = zlib.decompressobj(-window_bits)
    try:
        return b"".join(d.decompress(part + (TAIL if i == len(parts) - 1 else b""))
                        for i, part in enumerate(parts))
    except zlib.error as exc:
        return "error" if "too far back" in str(exc) else str(exc)


def our_outcome(d: object, parts: list[bytes], has_tail: bool) -> object:
    try:
        if len(parts) == 1 and has_tail:
            return d.decompress(parts[0] + TAIL, has_tail=True)  # type: ignore[attr-defined]
        return b"".join(d.decompress(part, fin=i == len(parts) - 1)  # type: ignore[attr-defined]
                        for i, part in enumerate(parts))
    except DecompressionError as exc:
        return "error" if "too far back" in str(exc) else str(exc)


@pytest.mark.parametrize("window_bits", [9, 12, 14])
@pytest.mark.parametrize("strategy", [zlib.Z_DEFAULT_STRATEGY, zlib.Z_FIXED], ids=["dynamic", "fixed"])
def test_a_reference_past_the_window_gets_stock_zlibs_verdict(impl: ModuleType, window_bits: int,
                                                              strategy: int) -> None:
    """RFC 7692 forbids a back-reference past 2^window_bits; stdlib zlib takes one that
    stays within the output of one inflate() call, and its calls end at its output blocks
    (32 KiB, then 64 KiB...). So the stock libraries take such a reference 20,000 bytes
    into a message and refuse it 33,000 bytes in. The codec gives their verdict whatever
    decodes the message (ISA-L or zlib), whole, with the tail, or in fragments; it took
    what they refuse before (a whole message was one inflate() call, and ISA-L did not
    apply the window to fixed-Huffman blocks)."""
    isal = getattr(impl, "_set_isal_inflate", None)
    verdicts = set()
    for position, distance in ((5000, 1000), (20000, 5000), (33000, 1000), (33000, 30000),
                               (100000, 30000)):
        if distance <= 1 << window_bits:
            continue
        message, payload = far_reference(position, distance, strategy)
        cut = len(payload) // 3
        for parts in ([payload], [payload[:cut], payload[cut:]]):
            expected = stock_outcome(window_bits, parts)
            assert expected in (message, "error")
            verdicts.add(expected == message)
            for isal_on in ((True, False) if isal else (None,)):
                was = isal(isal_on) if isal else None
                try:
                    for has_tail in (False, True):
                        got = our_outcome(impl.Decompressor(window_bits), parts, has_tail)
                        assert got == expected, (position, distance, len(parts), isal_on, has_tail)
                finally:
                    if isal:
                        isal(was)
    assert verdicts == {True, False}  # some taken, some refused: both verdicts checked
