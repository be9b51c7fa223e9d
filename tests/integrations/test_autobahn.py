"""fastdeflate.integrations.autobahn against real autobahn (asyncio) servers and clients.

Every test uses ``use_impl``, so it runs on both codec implementations. Servers and
clients talk over 127.0.0.1 on ephemeral ports.

Which side uses fastdeflate is chosen per connection: autobahn looks the PMCE class
up in its registry right after calling the side's ``perMessageCompressionAccept``
callback, so each side's callback calls ``enable()`` (fastdeflate) or ``disable()``
(stock) just before; every test then asserts the class each side really got.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest

from _samezlib import same_zlib_as_stdlib

from ._mixed_driver import Exchanged, drive_mixed_stream, mixed_items
from ._support import (
    HELLO_PAYLOAD,
    autobahn_patience,
    deflate_streams,
    skip_module_without_autobahn,
)
from ._what_pays import Item, uncompressed_by_reason

skip_module_without_autobahn()

from autobahn.asyncio.websocket import (
    WebSocketClientFactory,
    WebSocketClientProtocol,
    WebSocketServerFactory,
    WebSocketServerProtocol,
)
from autobahn.websocket import compress as ab_compress
from autobahn.websocket import protocol as ab_protocol
from autobahn.websocket.compress import (
    PerMessageDeflateOffer,
    PerMessageDeflateOfferAccept,
    PerMessageDeflateResponse,
    PerMessageDeflateResponseAccept,
)
from autobahn.websocket.compress_deflate import PerMessageDeflate as StockPMCE

import fastdeflate
from fastdeflate.integrations import autobahn as fd_autobahn

FastPMCE = fd_autobahn.PerMessageDeflate
STEP = 10  # seconds for any one network step
PATIENCE = autobahn_patience(STEP)  # tests that want a short close timeout set their own
SIZES = (0, 1, 1024, 64 * 1024, 1024 * 1024)
SMALL_SIZES = (0, 1, 1024)
# fragmentSize for the fragmented variant: several frames for every size
FRAGMENT = {0: 1, 1: 1, 1024: 64, 64 * 1024: 4096, 1024 * 1024: 65536}
PAIRINGS = {  # name: (server uses fastdeflate, client uses fastdeflate)
    "fast_server-stock_client": (True, False),
    "stock_server-fast_client": (False, True),
    "fast-fast": (True, True),
}
MODES = {  # name: (server_no_context_takeover, client_no_context_takeover)
    "takeover": (False, False),
    "server_nct": (True, False),
    "client_nct": (False, True),
}


@pytest.fixture(autouse=True)
def stock_registry():
    """Every test starts and ends with autobahn's own class in the registry."""
    fd_autobahn.disable()
    assert ab_compress.PERMESSAGE_COMPRESSION_EXTENSION["permessage-deflate"]["PMCE"] is StockPMCE
    try:
        yield
    finally:
        fd_autobahn.disable()
        assert not fd_autobahn.is_enabled()


# ---------------------------------------------------------------- messages


def make_message(size: int, binary: bool, seed: int) -> bytes:
    """JSON-like text (compressible) or half-random binary of exactly ``size`` bytes."""
    rng = random.Random(seed * 1_000_003 + size)
    if binary:
        half = size // 2
        return rng.randbytes(half) + (bytes(range(256)) * ((size - half) // 256 + 1))[: size - half]
    parts, total = [], 0
    while total < size:
        item = json.dumps({"id": rng.randrange(10**6), "name": f"user{rng.randrange(999)}",
                           "score": round(rng.random(), 4), "tags": ["a", "é", "ws"]})
        parts.append(item)
        total += len(item.encode())
    text = ",".join(parts).encode()[:size]
    return text.decode("utf-8", "ignore").encode().ljust(size, b" ")


def message_plan(sizes, repeat: int = 2) -> list[tuple[bytes, bool, Optional[int]]]:
    """(payload, is_binary, fragmentSize) for each size, kind, framing; ``repeat``
    passes so later messages lean on the window of earlier ones."""
    plan = []
    for seed in range(repeat):
        for size in sizes:
            for binary in (False, True):
                for fragment in (None, FRAGMENT[size]):
                    plan.append((make_message(size, binary, seed), binary, fragment))
    return plan


# ---------------------------------------------------------------- peers


@dataclass
class Record:
    """What one side received: messages, raw data frames, close details."""

    messages: asyncio.Queue = field(default_factory=asyncio.Queue)
    raw: list = field(default_factory=list)  # per message: [(opcode, rsv, fin, bytes)]
    pongs: asyncio.Queue = field(default_factory=asyncio.Queue)
    echo_fragments: list = field(default_factory=list)  # server: fragmentSize per echo
    opened: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    closed: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class RecordingMixin:
    """Records raw (still compressed) data frames and delivered messages."""

    record: Record

    def onOpen(self) -> None:
        self.record.opened.set_result(self)

    def onFrameBegin(self) -> None:
        frame = self.current_frame
        if frame.opcode in (1, 2):
            self.record.raw.append([])
        if frame.opcode <= 2:
            self.record.raw[-1].append([frame.opcode, frame.rsv, frame.fin, bytearray()])
        super().onFrameBegin()

    def onFrameData(self, payload: bytes) -> Any:
        if self.current_frame.opcode <= 2:
            self.record.raw[-1][-1][3] += payload
        return super().onFrameData(payload)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.record.messages.put_nowait((payload, isBinary))

    def onPong(self, payload: bytes) -> None:
        self.record.pongs.put_nowait(payload)

    def onClose(self, wasClean: bool, code: Optional[int], reason: Optional[str]) -> None:
        if not self.record.closed.done():
            self.record.closed.set_result((wasClean, code, reason))


class EchoServerProtocol(RecordingMixin, WebSocketServerProtocol):
    """Echoes each message, with the fragmentSize the test queued for it (if any)."""

    def onConnect(self, request: Any) -> None:
        self.record = self.factory.records.pop(0)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        super().onMessage(payload, isBinary)
        fragments = self.record.echo_fragments
        self.sendMessage(payload, isBinary, fragmentSize=fragments.pop(0) if fragments else None)


class ClientProtocol(RecordingMixin, WebSocketClientProtocol):
    def onConnect(self, response: Any) -> None:
        self.record = self.factory.record


@dataclass
class Setup:
    server_fast: bool
    client_fast: bool
    server_nct: bool = False
    client_nct: bool = False
    window_bits: int = 15
    server_mem_level: Optional[int] = None
    client_mem_level: Optional[int] = None
    server_options: dict = field(default_factory=dict)
    accept_options: dict = field(default_factory=dict)  # extra PerMessageDeflateOfferAccept args


@dataclass
class Connection:
    client: ClientProtocol
    server: EchoServerProtocol
    client_record: Record
    server_record: Record
    listener: Any


def choose(fast: bool) -> None:
    (fd_autobahn.enable if fast else fd_autobahn.disable)()


async def connect(setup: Setup) -> Connection:
    loop = asyncio.get_running_loop()
    server_record, client_record = Record(), Record()

    def server_accept(offers):
        choose(setup.server_fast)
        for offer in offers:
            if isinstance(offer, PerMessageDeflateOffer):
                return PerMessageDeflateOfferAccept(
                    offer,
                    request_no_context_takeover=setup.client_nct,
                    request_max_window_bits=setup.window_bits,
                    mem_level=setup.server_mem_level,
                    **setup.accept_options,
                )
        return None

    def client_accept(response):
        choose(setup.client_fast)
        if isinstance(response, PerMessageDeflateResponse):
            return PerMessageDeflateResponseAccept(response, mem_level=setup.client_mem_level)
        return None

    server_factory = WebSocketServerFactory("ws://127.0.0.1", loop=loop)
    server_factory.protocol = EchoServerProtocol
    server_factory.records = [server_record]
    server_factory.setProtocolOptions(
        perMessageCompressionAccept=server_accept, **{**PATIENCE, **setup.server_options}
    )
    listener = await loop.create_server(server_factory, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]

    client_factory = WebSocketClientFactory(f"ws://127.0.0.1:{port}", loop=loop)
    client_factory.protocol = ClientProtocol
    client_factory.record = client_record
    offer = PerMessageDeflateOffer(
        accept_no_context_takeover=True,
        accept_max_window_bits=True,
        request_no_context_takeover=setup.server_nct,
        request_max_window_bits=setup.window_bits,
    )
    client_factory.setProtocolOptions(
        perMessageCompressionOffers=[offer], perMessageCompressionAccept=client_accept, **PATIENCE
    )
    await loop.create_connection(client_factory, "127.0.0.1", port)
    client = await asyncio.wait_for(client_record.opened, STEP)
    server = await asyncio.wait_for(server_record.opened, STEP)
    fd_autobahn.disable()  # only the callbacks choose; nothing else sees it enabled
    conn = Connection(client, server, client_record, server_record, listener)
    check_negotiated(conn, setup)
    return conn


def pmce_of(proto: Any) -> Any:
    (pmce,) = proto.websocket_extensions_in_use  # autobahn's public list
    return pmce


def check_negotiated(conn: Connection, setup: Setup) -> None:
    """Each side got the class chosen for it, with the negotiated parameters."""
    for proto, fast in ((conn.server, setup.server_fast), (conn.client, setup.client_fast)):
        pmce = pmce_of(proto)
        assert type(pmce) is (FastPMCE if fast else StockPMCE)
        assert pmce.server_no_context_takeover is setup.server_nct
        assert pmce.client_no_context_takeover is setup.client_nct
        assert pmce.server_max_window_bits == setup.window_bits
        assert pmce.client_max_window_bits == setup.window_bits
    assert pmce_of(conn.server).mem_level == (setup.server_mem_level or 8)
    assert pmce_of(conn.client).mem_level == (setup.client_mem_level or 8)


async def close(conn: Connection) -> None:
    if conn.client.state == ab_protocol.WebSocketProtocol.STATE_OPEN:
        conn.client.sendClose(1000)
    await asyncio.wait_for(conn.client_record.closed, STEP)
    await asyncio.wait_for(conn.server_record.closed, STEP)
    conn.listener.close()
    await asyncio.wait_for(conn.listener.wait_closed(), STEP)


def stock_encoder(sender_pmce: Any) -> StockPMCE:
    """A fresh stock autobahn encoder with the sender's negotiated parameters."""
    p = sender_pmce
    return StockPMCE(p._is_server, p.server_no_context_takeover, p.client_no_context_takeover,
                     p.server_max_window_bits, p.client_max_window_bits, p.mem_level)


def stock_payload(encoder: StockPMCE, message: bytes) -> bytes:
    encoder.start_compress_message()
    return encoder.compress_message_data(message) + encoder.end_compress_message()


def same_engine(impl: Any) -> bool:
    """Byte identity with stock is promised only when the codec runs on the zlib that
    the stdlib (and so stock autobahn) uses, not e.g. on a bundled zlib-ng."""
    return same_zlib_as_stdlib(impl)


async def echo_plan(conn: Connection, plan, identical: bool) -> None:
    """Send the plan client -> server -> client; check messages, framing and (when
    ``identical``) that every compressed payload is byte for byte stock's."""
    to_server = stock_encoder(pmce_of(conn.client))
    to_client = stock_encoder(pmce_of(conn.server))
    for i, (payload, binary, fragment) in enumerate(plan):
        conn.server_record.echo_fragments.append(fragment)
        conn.client.sendMessage(payload, binary, fragmentSize=fragment)
        assert await asyncio.wait_for(conn.server_record.messages.get(), STEP) == (payload, binary)
        assert await asyncio.wait_for(conn.client_record.messages.get(), STEP) == (payload, binary)
        for record, encoder in ((conn.server_record, to_server), (conn.client_record, to_client)):
            frames = record.raw[i]
            assert frames[0][:2] == [2 if binary else 1, 4]  # RSV1 on the first frame only
            assert all(f[0] == 0 and f[1] == 0 for f in frames[1:])
            assert [f[2] for f in frames] == [False] * (len(frames) - 1) + [True]
            wire = b"".join(bytes(f[3]) for f in frames)
            if fragment is not None:  # autobahn fragments only what is longer than that
                assert (len(frames) > 1) == (len(wire) > fragment)
            expected = stock_payload(encoder, payload)
            if identical:
                assert wire == expected, f"message {i} differs from stock"


def run(coro) -> Any:
    return asyncio.run(coro)


# ---------------------------------------------------------------- round trips


@pytest.mark.timeout(90)
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_all_sizes(use_impl, pairing):
    """0 B .. 1 MB, text and binary, single frame and fragmented, both ways."""
    setup = Setup(*PAIRINGS[pairing])

    async def main():
        conn = await connect(setup)
        await echo_plan(conn, message_plan(SIZES, repeat=1) + message_plan((1024,), repeat=2),
                        same_engine(use_impl))
        await close(conn)
        assert conn.client_record.closed.result()[:2] == (True, 1000)

    run(main())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("window_bits", (9, 15))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_parameters(use_impl, pairing, mode, window_bits):
    """Every pairing x context-takeover mode x window, small messages, several passes."""
    setup = Setup(*PAIRINGS[pairing], *MODES[mode], window_bits=window_bits)

    async def main():
        conn = await connect(setup)
        await echo_plan(conn, message_plan(SMALL_SIZES, repeat=3), same_engine(use_impl))
        await close(conn)

    run(main())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_mem_level(use_impl, pairing):
    """autobahn's mem_level setting (accept objects) is honoured: same bytes as stock."""
    setup = Setup(*PAIRINGS[pairing], window_bits=12, server_mem_level=3, client_mem_level=9)

    async def main():
        conn = await connect(setup)
        await echo_plan(conn, message_plan((1024, 64 * 1024), repeat=2), same_engine(use_impl))
        await close(conn)

    run(main())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_streaming_frames(use_impl, pairing):
    """autobahn's frame-by-frame API: each frame's compressed bytes equal stock's."""
    setup = Setup(*PAIRINGS[pairing])
    chunks = [make_message(n, False, n) for n in (0, 5, 700, 3000, 20000, 1)]

    async def main():
        conn = await connect(setup)
        for repeat in range(2):
            conn.client.beginMessage(isBinary=False)
            for chunk in chunks:
                conn.client.sendMessageFrame(chunk)
            conn.client.endMessage()
            payload, binary = await asyncio.wait_for(conn.server_record.messages.get(), STEP)
            assert (payload, binary) == (b"".join(chunks), False)
            await asyncio.wait_for(conn.client_record.messages.get(), STEP)
        encoder = stock_encoder(pmce_of(conn.client))
        for frames in conn.server_record.raw:
            assert [f[:3] for f in frames] == [[1, 4, False]] + [[0, 0, False]] * (len(chunks) - 1) + [[0, 0, True]]
            encoder.start_compress_message()
            expected = [encoder.compress_message_data(c) for c in chunks]
            expected.append(encoder.end_compress_message())
            if same_engine(use_impl):
                assert [bytes(f[3]) for f in frames] == expected
        await close(conn)

    run(main())


@pytest.mark.timeout(30)
@pytest.mark.parametrize("pairing", PAIRINGS)
def test_control_and_uncompressed_untouched(use_impl, pairing):
    """Pings/pongs and doNotCompress messages go out as they are (RSV1 clear)."""
    setup = Setup(*PAIRINGS[pairing])

    async def main():
        conn = await connect(setup)
        conn.client.sendPing(b"ping-payload")
        assert await asyncio.wait_for(conn.client_record.pongs.get(), STEP) == b"ping-payload"
        message = make_message(1024, False, 7)
        conn.client.sendMessage(message, False, doNotCompress=True)
        assert await asyncio.wait_for(conn.server_record.messages.get(), STEP) == (message, False)
        assert [f[:3] + [bytes(f[3])] for f in conn.server_record.raw[-1]] == [[1, 0, True, message]]
        await asyncio.wait_for(conn.client_record.messages.get(), STEP)  # echo (compressed)
        await echo_plan_after(conn, message)
        await close(conn)

    async def echo_plan_after(conn, message):
        # compression still works after an uncompressed message
        conn.client.sendMessage(message, False)
        assert await asyncio.wait_for(conn.server_record.messages.get(), STEP) == (message, False)
        assert conn.server_record.raw[-1][0][1] == 4

    run(main())


# ---------------------------------------------------------------- limits and errors


async def failing_connection(
    server_fast: bool, send, setup_kwargs: dict, drop: bool, close_timeout: float = 0.3
):
    """Open (stock client, chosen server), let ``send`` misbehave; return what both
    sides saw. ``drop`` is autobahn's failByDrop (its default: True)."""
    kwargs = dict(setup_kwargs)
    kwargs["server_options"] = {
        **kwargs.get("server_options", {}),
        "failByDrop": drop,
        # stock autobahn may stall the closing handshake after a failure: don't wait long
        "closeHandshakeTimeout": close_timeout,
    }
    conn = await connect(Setup(server_fast, False, **kwargs))
    send(conn.client)
    server_close = await asyncio.wait_for(conn.server_record.closed, STEP)
    client_close = await asyncio.wait_for(conn.client_record.closed, STEP)
    conn.listener.close()
    await asyncio.wait_for(conn.listener.wait_closed(), STEP)
    server = conn.server

    def cut(reason: Optional[str]) -> str:  # the codec's own message may differ in detail
        return (reason or "").split("invalid permessage-deflate data")[0]

    return {
        "client_close": client_close[:2],  # what the peer sees
        "client_reason": cut(client_close[2]),
        "failed_by_me": server.failedByMe,
        "too_big": server.wasMaxMessagePayloadSizeExceeded,
        "drop_reason": cut(server.wasNotCleanReason) if drop else None,
        "delivered": [len(m) for m, _ in drain(conn.server_record.messages)],
    }, server_close


def drain(queue: asyncio.Queue) -> list:
    return [queue.get_nowait() for _ in range(queue.qsize())]


def compare_to_stock(send, setup_kwargs: dict, expected_code: int) -> dict:
    """Run ``send`` against a stock and a fastdeflate server, with autobahn's default
    failByDrop=True and with False (close frame sent); all observations must match."""

    async def main():
        return {
            (fast, drop): (await failing_connection(fast, send, setup_kwargs, drop))[0]
            for drop in (True, False)
            for fast in (False, True)
        }

    seen = run(main())
    # sanity: what autobahn itself does
    assert seen[False, False]["client_close"][1] == expected_code
    assert seen[False, True]["client_close"][1] == 1006  # dropped without close frame
    for drop in (True, False):
        assert seen[True, drop] == seen[False, drop]
    return seen


LIMIT = 10_000
# JSON text of 5 * LIMIT: compresses far below LIMIT, so only inflation finds it
BIG = make_message(5 * LIMIT, False, 3)


def at_limit_then_big(fragment: Optional[int]):
    def send(client):
        client.sendMessage(b"a" * LIMIT, True)  # exactly at the limit: delivered
        client.sendMessage(BIG, True, fragmentSize=fragment)

    return send


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fragment", (None, 8))
@pytest.mark.parametrize("where", ("maxMessagePayloadSize", "max_message_size"))
def test_oversized_message_closes_like_stock(use_impl, where, fragment):
    """A message inflating past the limit closes with autobahn's own code (1009)."""
    if where == "maxMessagePayloadSize":
        kwargs = {"server_options": {"maxMessagePayloadSize": LIMIT}}
    else:  # the extension-level limit of PerMessageDeflateOfferAccept
        kwargs = {"accept_options": {"max_message_size": LIMIT}}
    seen = compare_to_stock(
        at_limit_then_big(fragment), kwargs, ab_protocol.WebSocketProtocol.CLOSE_STATUS_CODE_MESSAGE_TOO_BIG
    )
    assert seen[True, True]["delivered"] == [LIMIT]
    assert seen[True, True]["too_big"] is True


@pytest.mark.timeout(30)
def test_one_byte_over_the_limit_is_refused(use_impl):
    """LIMIT + 1 bytes right after a LIMIT-byte message (context takeover): refused
    with 1009. (Stock autobahn 26.10.2 delivers it cut to LIMIT bytes instead: zlib
    keeps the last byte for the 00 00 ff ff trailer call, whose output it drops.)"""

    def send(client):
        client.sendMessage(b"a" * LIMIT, True)
        client.sendMessage(b"a" * (LIMIT + 1), True)

    async def main():
        kwargs = {"server_options": {"maxMessagePayloadSize": LIMIT}}
        return await failing_connection(True, send, kwargs, drop=False)

    seen, _ = run(main())
    assert seen["client_close"][1] == 1009
    assert seen["delivered"] == [LIMIT]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("fragment", (None, 8))
def test_closing_handshake_completes_after_oversized(use_impl, fragment):
    """After failing an oversized message with a close frame, the rest of that message
    must not raise again: the client's close reply is still read (clean close)."""

    async def main():
        kwargs = {"server_options": {"maxMessagePayloadSize": LIMIT}}
        return await failing_connection(
            True, at_limit_then_big(fragment), kwargs, drop=False, close_timeout=2
        )

    seen, server_close = run(main())
    assert seen["client_close"][1] == 1009
    assert server_close[0] is True, server_close


def test_bfinal_blocks_decoded_where_stock_truncates(use_impl):
    """RFC 7692 7.2.3.4: a message of several deflate streams (blocks with BFINAL set)
    is valid. Stock autobahn keeps the first stream and decodes every later compressed
    message empty; fastdeflate decodes them all, up to 16 streams in a message (more is
    corrupt data: 1007). A known difference, listed in the README."""
    from autobahn.exception import PayloadCorruptError

    too_many = fastdeflate._params.MAX_STREAMS_PER_MESSAGE + 1
    payloads = [deflate_streams(2), HELLO_PAYLOAD, deflate_streams(too_many)]

    def decoded(cls):
        pmce = cls(is_server=True, server_no_context_takeover=False,
                   client_no_context_takeover=False, server_max_window_bits=15,
                   client_max_window_bits=15, mem_level=8)
        out = []
        for payload in payloads:
            try:
                pmce.start_decompress_message()
                out.append(pmce.decompress_message_data(payload))
                pmce.end_decompress_message()
            except PayloadCorruptError as exc:
                out.append(type(exc))
        return out

    assert decoded(StockPMCE) == [b"m0;", b"", b""]
    assert decoded(FastPMCE) == [b"m0;m1;", b"Hello", PayloadCorruptError]


def corrupt_first_frame(client):
    client.sendFrame(opcode=2, payload=b"\xff\xfe\xfd\xfc", rsv=4)  # BTYPE=11: invalid


def corrupt_continuation(client):
    good = zlib.compressobj(6, zlib.DEFLATED, -15).compress(b"x" * 100)
    client.sendFrame(opcode=2, payload=good, rsv=4, fin=False)
    client.sendFrame(opcode=0, payload=b"\x07\xff\xff\xff\xff\xff", fin=True)


def corrupt_at_end(client):
    # a stored block announcing 5 bytes: the appended 00 00 ff ff is a wrong NLEN,
    # so the error comes only when the trailer is inflated (end of message)
    client.sendFrame(opcode=2, payload=b"\x00\x05\x00", rsv=4)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("send", (corrupt_first_frame, corrupt_continuation, corrupt_at_end),
                         ids=lambda f: f.__name__)
def test_corrupt_frame_closes_like_stock(use_impl, send):
    """Corrupt compressed data closes with autobahn's own code (1007)."""
    seen = compare_to_stock(send, {}, ab_protocol.WebSocketProtocol.CLOSE_STATUS_CODE_INVALID_PAYLOAD)
    assert "cannot be decompressed" in seen[True, True]["drop_reason"]


# ---------------------------------------------------------------- codec objects


@pytest.mark.timeout(30)
@pytest.mark.parametrize("is_server", (True, False))
@pytest.mark.parametrize("mem_level", (1, 9))
@pytest.mark.parametrize("window_bits", (9, 15))
@pytest.mark.parametrize("mode", MODES)
def test_encoder_matches_stock(use_impl, mode, window_bits, mem_level, is_server):
    """The same message sequence through a stock and a fastdeflate encoder, whole and
    cut into frame-by-frame calls: stock's decoder reads fastdeflate's output, and on
    the same zlib each message's bytes are identical (fastdeflate keeps a message's
    first bytes until the next call, so that a whole message is one codec call)."""
    args = (*MODES[mode], window_bits, window_bits, mem_level)
    stock, fast = StockPMCE(is_server, *args), FastPMCE(is_server, *args)
    stock_decoder = StockPMCE(not is_server, *args)
    rng = random.Random(window_bits * 10 + mem_level)
    for i in range(24):
        message = make_message(rng.choice((0, 1, 100, 1024, 5000, 40000)), i % 3 == 0, i)
        cuts = sorted(rng.sample(range(len(message) + 1), min(3, len(message) + 1)))
        chunks = [message[a:b] for a, b in zip([0] + cuts, cuts + [len(message)])]
        outputs = []
        for pmce in (stock, fast):
            pmce.start_compress_message()
            outputs.append([pmce.compress_message_data(c) for c in chunks] + [pmce.end_compress_message()])
        stock_decoder.start_decompress_message()
        decoded = b"".join(stock_decoder.decompress_message_data(part) for part in outputs[1])
        stock_decoder.end_decompress_message()
        assert decoded == message
        if same_engine(use_impl):
            assert b"".join(outputs[1]) == b"".join(outputs[0])


def test_byte_identity_is_checked_on_the_stdlib_engine(use_impl):
    """The pure fallback always runs on the stdlib's zlib, so the identity checks
    above always run for it (and for the compiled one when built on system zlib)."""
    if use_impl.__name__ == "fastdeflate._pure":
        assert same_engine(use_impl)


def test_decoder_uses_fastdeflate(use_impl):
    """The fastdeflate class really runs on the selected implementation."""
    pmce = FastPMCE(True, False, False, 15, 15, 8)
    pmce.start_compress_message()
    pmce.start_decompress_message()
    assert type(pmce._compressor) is use_impl.Compressor
    assert type(pmce._decompressor) is use_impl.Decompressor


# ---------------------------------------------------------------- enable / disable


def test_enable_disable_round_trip(use_impl):
    registry = ab_compress.PERMESSAGE_COMPRESSION_EXTENSION
    entry = registry["permessage-deflate"]
    before_registry, before_entry = dict(registry), dict(entry)
    assert not fd_autobahn.is_enabled()
    fd_autobahn.enable()
    fd_autobahn.enable()  # idempotent
    assert fd_autobahn.is_enabled()
    assert registry["permessage-deflate"] is entry
    assert entry["PMCE"] is FastPMCE
    assert {k: v for k, v in entry.items() if k != "PMCE"} == {
        k: v for k, v in before_entry.items() if k != "PMCE"
    }
    assert ab_protocol.PERMESSAGE_COMPRESSION_EXTENSION is registry  # what autobahn reads
    fd_autobahn.disable()
    fd_autobahn.disable()  # idempotent
    assert not fd_autobahn.is_enabled()
    assert entry["PMCE"] is StockPMCE
    assert all(entry[k] is v for k, v in before_entry.items())
    assert all(registry[k] is v for k, v in before_registry.items()) and len(registry) == len(before_registry)
    assert ab_compress.PerMessageDeflate is StockPMCE


def test_disable_restores_a_custom_class(use_impl):
    """disable() puts back exactly what enable() replaced, not blindly the stock class."""
    entry = ab_compress.PERMESSAGE_COMPRESSION_EXTENSION["permessage-deflate"]

    class Custom(StockPMCE):
        pass

    entry["PMCE"] = Custom
    try:
        fd_autobahn.enable()
        assert entry["PMCE"] is FastPMCE
        fd_autobahn.disable()
        assert entry["PMCE"] is Custom
    finally:
        entry["PMCE"] = StockPMCE


def test_disable_leaves_a_class_registered_after_enable():
    """A class registered over fastdeflate's after enable() (a wrapper, say) is left in
    place by disable(), which then has nothing to undo."""
    entry = ab_compress.PERMESSAGE_COMPRESSION_EXTENSION["permessage-deflate"]

    class Wrapper(FastPMCE):
        pass

    try:
        fd_autobahn.enable()
        entry["PMCE"] = Wrapper
        assert not fd_autobahn.is_enabled()
        fd_autobahn.disable()
        assert entry["PMCE"] is Wrapper
        fd_autobahn.enable()  # over the wrapper; disable() puts the wrapper back
        fd_autobahn.disable()
        assert entry["PMCE"] is Wrapper
    finally:
        entry["PMCE"] = StockPMCE


def test_package_level_enable(use_impl):
    """fastdeflate.integrations.enable()/disable() reach the autobahn adapter."""
    import fastdeflate.integrations as integrations

    try:
        fd_autobahn.enable()
        assert "autobahn" in integrations.enabled()
    finally:
        fd_autobahn.disable()
    assert "autobahn" not in integrations.enabled()


@pytest.mark.timeout(30)
def test_enable_patches_existing_application_code(use_impl):
    """Plain application code (default offers/accept callback of its own) gets
    fastdeflate after enable() and stock after disable()."""

    async def one(fast_expected: bool) -> None:
        loop = asyncio.get_running_loop()
        record_s, record_c = Record(), Record()
        server_factory = WebSocketServerFactory("ws://127.0.0.1", loop=loop)
        server_factory.protocol = EchoServerProtocol
        server_factory.records = [record_s]
        server_factory.setProtocolOptions(
            perMessageCompressionAccept=lambda offers: PerMessageDeflateOfferAccept(offers[0]),
            **PATIENCE,
        )
        listener = await loop.create_server(server_factory, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        client_factory = WebSocketClientFactory(f"ws://127.0.0.1:{port}", loop=loop)
        client_factory.protocol = ClientProtocol
        client_factory.record = record_c
        client_factory.setProtocolOptions(
            perMessageCompressionOffers=[PerMessageDeflateOffer()],
            perMessageCompressionAccept=lambda response: PerMessageDeflateResponseAccept(response),
            **PATIENCE,
        )
        await loop.create_connection(client_factory, "127.0.0.1", port)
        client = await asyncio.wait_for(record_c.opened, STEP)
        server = await asyncio.wait_for(record_s.opened, STEP)
        expected = FastPMCE if fast_expected else StockPMCE
        assert type(pmce_of(client)) is expected and type(pmce_of(server)) is expected
        message = make_message(64 * 1024, False, 1)
        client.sendMessage(message)
        assert await asyncio.wait_for(record_c.messages.get(), STEP) == (message, False)
        conn = Connection(client, server, record_c, record_s, listener)
        await close(conn)

    async def main():
        fd_autobahn.enable()
        try:
            await one(True)
        finally:
            fd_autobahn.disable()
        await one(False)

    run(main())


def run_python(code: str, impl) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter importing the fastdeflate under test, on the
    implementation ``impl`` (``FASTDEFLATE_PURE=1`` for the fallback)."""
    env = dict(os.environ)
    if impl.__name__.endswith("_pure"):
        env["FASTDEFLATE_PURE"] = "1"
    else:
        env.pop("FASTDEFLATE_PURE", None)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
        cwd=str(Path(fastdeflate.__file__).resolve().parent.parent),
    )


@pytest.mark.timeout(60)
def test_enable_before_autobahn_is_imported_elsewhere(use_impl):
    """enable() first, autobahn's protocol modules imported afterwards: they see it, and
    the class they get compresses and decompresses with the implementation in use."""
    result = run_python(
        "import sys\n"
        "import fastdeflate.integrations.autobahn as fa\n"
        "assert 'autobahn.websocket.protocol' not in sys.modules\n"
        "fa.enable()\n"
        "from autobahn.asyncio.websocket import WebSocketServerFactory\n"
        "from autobahn.websocket import protocol\n"
        "entry = protocol.PERMESSAGE_COMPRESSION_EXTENSION['permessage-deflate']\n"
        "assert entry['PMCE'] is fa.PerMessageDeflate\n"
        "server, client = (entry['PMCE'](side, False, False, 15, 15, 8) for side in (1, 0))\n"
        "server.start_compress_message()\n"
        "data = server.compress_message_data(b'hello ' * 1000) + server.end_compress_message()\n"
        "client.start_decompress_message()\n"
        "assert client.decompress_message_data(data) == b'hello ' * 1000 and len(data) < 100\n"
        "client.end_decompress_message()\n"
        "print(type(server._compressor).__module__, type(client._decompressor).__module__)\n"
        "fa.disable()\n"
        "from autobahn.websocket.compress_deflate import PerMessageDeflate\n"
        "assert entry['PMCE'] is PerMessageDeflate\n"
        "print('ok')\n",
        use_impl,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [use_impl.__name__, use_impl.__name__, "ok"]


@pytest.mark.timeout(60)
def test_clear_import_error_without_autobahn(use_impl):
    """The same clear ImportError whichever implementation the package runs on."""
    result = run_python(
        "import sys\n"
        "sys.modules['autobahn'] = None  # as if not installed\n"
        "import fastdeflate\n"
        "print(fastdeflate.IMPLEMENTATION)\n"
        "try:\n"
        "    import fastdeflate.integrations.autobahn\n"
        "except ImportError as exc:\n"
        "    print(exc)\n",
        use_impl,
    )
    assert result.returncode == 0, result.stderr
    implementation, message = result.stdout.split("\n", 1)
    assert implementation == ("python" if use_impl.__name__.endswith("_pure") else "cython")
    assert "needs autobahn >= 26.10.1" in message


# ---------------------------------------------------------------- compress what pays
#
# The fastdeflate side sends the mixed stream (_mixed_driver, wider sizes: sendMessage,
# fragmented sendMessage and the streaming API); the stock side (autobahn's own class)
# receives it. Every message is checked exactly, and on the wire: RSV1 on its first frame
# only if compressed. The sender's wrappers are in place as under enable() (connect()
# leaves autobahn disabled, so the test enables it again once both sides have their
# classes).



def send_one(proto: Any, frames: list[bytes], fragment: Optional[int], binary: bool) -> None:
    if len(frames) == 1:
        proto.sendMessage(frames[0], binary, fragmentSize=fragment)
    else:
        proto.beginMessage(isBinary=binary)
        for frame in frames:
            proto.sendMessageFrame(frame)
        proto.endMessage()



def check_wire(frames: list, compressed: bool) -> None:
    """RSV1 on the first frame if compressed; never on continuation frames."""
    assert frames[0][1] == (4 if compressed else 0), (frames[0][:3], compressed)
    assert all(f[0] == 0 and f[1] == 0 for f in frames[1:])
    assert [f[2] for f in frames] == [False] * (len(frames) - 1) + [True]


def send_item(proto: Any, item: Item, fragment: Optional[int] = None) -> None:
    """``item`` as one message (send_one: fragmented by autobahn if ``fragment``, streamed
    if it has several parts), text or binary, inside uncompressed() if opted out."""
    binary = isinstance(item.parts[0], bytes)
    with fastdeflate.uncompressed(item.opt_out):
        send_one(proto, [p if binary else p.encode() for p in item.parts], fragment, binary)


def as_sent(payload: bytes, binary: bool) -> bytes | str:
    """A received message as it was sent: text as str."""
    return payload if binary else payload.decode()


def rsv1_of(raw: list) -> list[list[bool]]:
    """Each recorded message's frames' RSV1 (Record.raw), once their framing is checked:
    RSV2 and RSV3 clear, continuation frames after the first, FIN on the last only."""
    for frames in raw:
        assert all(f[1] in (0, 4) for f in frames) and all(f[0] == 0 for f in frames[1:])
        assert [f[2] for f in frames] == [False] * (len(frames) - 1) + [True]
    return [[f[1] == 4 for f in frames] for frames in raw]


MIXED_MODES = {"takeover": (False, False), "nct": (True, True)}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("window_bits", [15, 10, 9])
@pytest.mark.parametrize("mode", MIXED_MODES)
@pytest.mark.parametrize("sender", ["fast_server", "fast_client"])
def test_mixed_stream_to_stock_peer(use_impl, default_what_pays, sender, mode, window_bits):
    """The mixed stream from the fastdeflate side to autobahn's stock side: whole
    messages (every fifth fragmented by autobahn) and streamed ones (beginMessage +
    sendMessageFrame...: RSV1 clear on every frame of one whose first frame does not pay)."""
    server_fast = sender == "fast_server"
    setup = Setup(server_fast, not server_fast, *MIXED_MODES[mode], window_bits=window_bits)

    def exchange(items: list[Item]) -> Exchanged:
        async def main() -> Exchanged:
            conn = await connect(setup)
            fd_autobahn.enable()
            assert fd_autobahn.hooks_installed()
            # the stock server echoes: the client's stream is in the server's record
            proto, record = ((conn.server, conn.client_record) if server_fast
                             else (conn.client, conn.server_record))
            try:
                for k, item in enumerate(items):
                    send_item(proto, item, 1000 if k % 5 == 0 else None)
                received = [as_sent(*await asyncio.wait_for(record.messages.get(), STEP))
                            for _ in items]
            finally:
                await close(conn)
            return Exchanged(received, rsv1_of(record.raw))

        return run(main())

    drive_mixed_stream(window_bits * 3 + len(mode) + server_fast, exchange, wide=True)


@pytest.mark.timeout(60)
def test_messages_under_the_minimum_size_go_out_uncompressed(use_impl, default_what_pays):
    fastdeflate.set_min_size(200)
    texts = [b"x" * n for n in (10, 199, 200, 5000, 150, 300)]

    async def main():
        conn = await connect(Setup(True, False))
        fd_autobahn.enable()
        try:
            for text in texts:
                conn.server.sendMessage(text)
            for i, text in enumerate(texts):
                assert await asyncio.wait_for(conn.client_record.messages.get(), STEP) == (
                    text, False)
                check_wire(conn.client_record.raw[i], len(text) >= 200)
        finally:
            await close(conn)

    run(main())
    small = fastdeflate.status()["sent_uncompressed"]["small"]
    assert (small["messages"], small["bytes"]) == (3, 10 + 199 + 150)


@pytest.mark.timeout(60)
def test_opt_out_per_task_with_concurrent_senders(use_impl, default_what_pays):
    """Two tasks send on one connection at once, one inside ``fastdeflate.uncompressed()``
    (awaiting inside the block; some messages streamed): only its messages go out
    uncompressed, the other task's are compressed; the stock peer decodes all."""
    line = b'{"user": "someone", "msg": "a compressible chat line", "n": %d} ' * 8

    async def main():
        conn = await connect(Setup(True, False))
        fd_autobahn.enable()
        proto = conn.server
        sent: list[bytes] = []

        async def sender(prefix: bytes, opt_out: bool) -> None:
            with fastdeflate.uncompressed(opt_out):
                for i in range(20):
                    message = prefix + line % ((i,) * 8)
                    if i % 4 == 3:  # streamed, decided on its first frame
                        send_one(proto, [message[:50], message[50:]], None, False)
                    else:
                        proto.sendMessage(message)
                    sent.append(message)
                    await asyncio.sleep(0)

        try:
            await asyncio.gather(sender(b"raw ", True), sender(b"zip ", False))
            for i, message in enumerate(sent):
                assert await asyncio.wait_for(conn.client_record.messages.get(), STEP) == (
                    message, False)
                check_wire(conn.client_record.raw[i], message.startswith(b"zip"))
        finally:
            await close(conn)
        assert [m[:3] for m in sent] != [b"raw"] * 20 + [b"zip"] * 20  # interleaved

    run(main())
    assert fastdeflate.status()["sent_uncompressed"]["opt-out"]["messages"] == 20


def test_hooks_follow_enable_and_disable(use_impl):
    """enable() wraps autobahn's sendMessage and sendMessageFrame, disable() puts
    autobahn's own back exactly; a fastdeflate class made by hand installs them too."""
    stock = (vars(ab_protocol.WebSocketProtocol)["sendMessage"],
             vars(ab_protocol.WebSocketProtocol)["sendMessageFrame"])
    assert not fd_autobahn.hooks_installed()
    fd_autobahn.enable()
    assert fd_autobahn.hooks_installed()
    fd_autobahn.disable()
    assert not fd_autobahn.hooks_installed()
    assert (vars(ab_protocol.WebSocketProtocol)["sendMessage"],
            vars(ab_protocol.WebSocketProtocol)["sendMessageFrame"]) == stock
    FastPMCE(True, False, False, 15, 15, 8)
    assert fd_autobahn.hooks_installed()
    fd_autobahn.disable()
    assert not fd_autobahn.hooks_installed()


@pytest.mark.timeout(60)
def test_broadcast_decides_each_message_alike_for_every_member(use_impl, default_what_pays):
    """fd_autobahn.broadcast() of the mixed stream (whole messages) from three fastdeflate
    servers to stock clients: every message exact, with the RSV1 it had to have at every
    client."""
    items = mixed_items(5, whole=True, wide=True)

    async def main():
        conns = [await connect(Setup(True, False)) for _ in range(3)]
        fd_autobahn.enable()
        try:
            for item in items:
                with fastdeflate.uncompressed(item.opt_out):
                    fd_autobahn.broadcast([c.server for c in conns], item.message)
            for conn in conns:
                received = [as_sent(*await asyncio.wait_for(conn.client_record.messages.get(),
                                                            STEP)) for _ in items]
                assert received == [item.message for item in items]
                uncompressed_by_reason(items, rsv1_of(conn.client_record.raw))  # asserts RSV1
        finally:
            for conn in conns:
                await close(conn)

    run(main())
