"""Large compressed messages received off the event loop by aiohttp (issue 43).

aiohttp's reader decompresses inside the protocol's ``data_received``; fastdeflate puts
a gate (``fastdeflate/integrations/_frames.py``) in front of it that holds a large
compressed message, and what follows it, while a worker thread decompresses it. Tested
with a real aiohttp server and stock websockets clients, and a real aiohttp client and a
stock websockets server, on 127.0.0.1: every message arrives exactly and in order, the
large ones went off the loop, the limits and close codes are stock's. The gate itself
is tested on a stream cut at every place.
"""

from __future__ import annotations

import asyncio
import random
from types import ModuleType
from typing import Any, Iterator, Optional

import pytest

import fastdeflate
from fastdeflate import _off_loop
from fastdeflate.integrations import _frames

aiohttp = pytest.importorskip("aiohttp")
websockets = pytest.importorskip("websockets")
import fastdeflate.integrations.aiohttp as fa  # noqa: E402
from aiohttp import WSMsgType, web  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402
from websockets.asyncio.server import serve  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from .test_off_loop import (  # noqa: E402
    BIG, BIG_BYTES, CORRUPT, DEADLINE, HOST, SENT, SIZE, close_frame, describe,
    handshaken_client, raw_client, run, snapshot,
)

LARGE_SENT = 4  # the messages of SENT that go off the loop


@pytest.fixture
def enabled() -> Iterator[None]:
    previous = fastdeflate.set_off_loop_size(SIZE)
    was = fa.is_enabled()
    fa.enable()
    try:
        yield
    finally:
        if not was:
            fa.disable()
        fastdeflate.set_off_loop_size(previous)


class AiohttpServer:
    """An aiohttp server: "echo sizes" answers each message with its size and hash,
    "record" keeps them (then "closed") in ``recorded``."""

    def __init__(self, max_msg_size: int = 1 << 26) -> None:
        self.max_msg_size = max_msg_size
        self.recorded: list[str] = []
        self.closed = asyncio.Event()

    async def handler(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=self.max_msg_size)
        await ws.prepare(request)
        script = (await ws.receive()).data
        async for message in ws:
            if message.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                self.recorded.append(message.type.name)  # an ERROR: then the end
            elif script == "echo sizes":
                await ws.send_str(describe(message.data))
            else:
                self.recorded.append(describe(message.data))
        self.recorded.append("closed")
        self.closed.set()
        return ws

    async def __aenter__(self) -> "AiohttpServer":
        app = web.Application()
        app.router.add_get("/", self.handler)
        self.runner = web.AppRunner(app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, HOST, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.wait_for(self.runner.cleanup(), DEADLINE)


def stock_and_fast(exchange: Any) -> tuple[Any, Any, int]:
    """``exchange()`` with fastdeflate disabled, then enabled (at the tests' off-loop
    size); and how many messages the second decompressed off the loop."""
    previous = fastdeflate.set_off_loop_size(SIZE)
    try:
        fa.disable()
        stock = run(exchange())
        fa.enable()
        before = _off_loop.counts()[1]
        fast = run(exchange())
        return stock, fast, _off_loop.counts()[1] - before
    finally:
        fa.disable()
        fastdeflate.set_off_loop_size(previous)


# -- the server --------------------------------------------------------------------

def test_large_messages_received_exactly_and_in_order(
        use_impl: ModuleType, enabled: None, own_workers: int) -> None:
    """Two stock clients at once send large and small messages back to back; the
    server answers each with its size and hash, in order, and decompressed the large
    ones (the first message of a connection among them) off the loop."""
    before = _off_loop.counts()[1]

    async def one(port: int) -> list[str]:
        async with connect(f"ws://{HOST}:{port}", max_size=None) as client:
            await client.send("echo sizes")
            for message in SENT:
                await client.send(message)
            return [await client.recv() for _ in SENT]

    async def main() -> list[list[str]]:
        async with AiohttpServer() as server:
            return list(await asyncio.gather(one(server.port), one(server.port)))

    expected = [describe(message) for message in SENT]
    assert run(main()) == [expected, expected]
    assert _off_loop.counts()[1] - before == 2 * LARGE_SENT


@pytest.mark.parametrize("kind", ["inflates over the limit", "payload over the limit"])
def test_an_oversized_message_is_refused_as_stock_refuses_it(
        kind: str, use_impl: ModuleType) -> None:
    """A message that inflates beyond the server's limit (its payload within it) is
    refused with 1009 after its decompression in a thread, as stock refuses it on the
    loop; one whose payload is beyond the limit is refused at its header, not held."""
    limit = 1 << 20
    message = (snapshot(7, 2 * limit) if kind == "inflates over the limit"
               else random.Random(7).randbytes(limit + 4096))

    async def close_code() -> Optional[int]:
        async with AiohttpServer(max_msg_size=limit) as server:
            async with connect(f"ws://{HOST}:{server.port}", max_size=None) as client:
                await client.send("echo sizes")
                await client.send("small")
                assert await client.recv() == describe("small")
                await client.send(message)
                with pytest.raises(ConnectionClosed):
                    await client.recv()
                assert client.protocol.close_rcvd is not None
                return client.protocol.close_rcvd.code

    stock, fast, off_loop = stock_and_fast(close_code)
    assert stock == fast == 1009
    assert off_loop == (1 if kind == "inflates over the limit" else 0)


@pytest.mark.parametrize("tail", ["close", "corrupt"])
def test_frames_parsed_with_a_large_message_wait_for_it(
        tail: str, use_impl: ModuleType) -> None:
    """Large and small messages and then a close (or a corrupt frame) in one write:
    the server receives every message in order and then the close (or fails after
    the messages before the corrupt one), as stock does."""
    messages = [BIG[0], "small 0", BIG_BYTES, "small 1"]
    more = close_frame(1000) if tail == "close" else CORRUPT

    async def exchange() -> tuple[list[str], Optional[int]]:
        async with AiohttpServer() as server:
            code = await raw_client(server.port, messages, more)
            await asyncio.wait_for(server.closed.wait(), DEADLINE)
            return server.recorded, code

    stock, fast, off_loop = stock_and_fast(exchange)
    described = [describe(message) for message in messages]
    assert fast[0] == described + (["closed"] if tail == "close" else ["ERROR", "closed"])
    assert fast == stock
    assert off_loop == 2


def test_a_peer_gone_while_a_message_is_decompressed(use_impl: ModuleType) -> None:
    """A client that sends a large message and a small one and leaves at once: the
    server still gets both, then the end, as stock does."""
    async def exchange() -> list[str]:
        async with AiohttpServer() as server:
            _, writer, proto = await handshaken_client(server.port)
            proto.send_text(b"record")
            proto.send_text(BIG[1].encode())
            proto.send_text(b"last")
            writer.write(b"".join(proto.data_to_send()))
            writer.close()  # gone, without a close frame
            await asyncio.wait_for(server.closed.wait(), DEADLINE)
            return server.recorded

    stock, fast, off_loop = stock_and_fast(exchange)
    assert fast == stock == [describe(BIG[1]), describe("last"), "closed"]
    assert off_loop == 1


def test_a_fragmented_large_message_with_a_ping_between_its_frames(
        use_impl: ModuleType, enabled: None) -> None:
    """A large message in three frames (the first large) with a ping between them:
    the ping is answered and the message arrives whole, decompressed off the loop."""
    before = _off_loop.counts()[1]
    text = BIG[2]
    cuts = [0, len(text) // 2, len(text) - 1000, len(text)]
    fragments = [text[a:b] for a, b in zip(cuts, cuts[1:])]

    async def main() -> list[str]:
        async with AiohttpServer() as server:
            async with connect(f"ws://{HOST}:{server.port}", max_size=None) as client:
                await client.send("echo sizes")
                pong = await client.ping(b"between")  # answered while held: in order

                async def frames() -> Any:
                    for fragment in fragments:
                        yield fragment

                await client.send(frames())
                await client.send("after")
                await asyncio.wait_for(pong, DEADLINE)
                return [await client.recv(), await client.recv()]

    assert run(main()) == [describe(text), describe("after")]
    assert _off_loop.counts()[1] - before == 1


# -- the client --------------------------------------------------------------------

def test_the_client_receives_large_messages_exactly_and_in_order(
        use_impl: ModuleType, enabled: None, own_workers: int) -> None:
    """aiohttp's client, from a stock websockets server sending large and small
    messages back to back: all arrive exactly and in order, the large off the loop."""
    before = _off_loop.counts()[1]

    async def handler(ws: Any) -> None:
        for message in SENT:
            await ws.send(message)
        await ws.wait_closed()

    async def main() -> list[str]:
        async with serve(handler, HOST, 0, max_size=None) as server:
            port = server.sockets[0].getsockname()[1]
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"ws://{HOST}:{port}/", compress=15,
                                              max_msg_size=0) as ws:
                    received = []
                    for _ in SENT:
                        message = await ws.receive()
                        assert message.type in (WSMsgType.TEXT, WSMsgType.BINARY)
                        received.append(describe(message.data))
                    return received

    assert run(main()) == [describe(message) for message in SENT]
    assert _off_loop.counts()[1] - before == LARGE_SENT


def test_disable_puts_the_stock_readers_back(enabled: None) -> None:
    import aiohttp.client
    import aiohttp.web_ws

    assert aiohttp.web_ws.WebSocketReader is not aiohttp.http.WebSocketReader
    assert aiohttp.client.WebSocketReader is not aiohttp.http.WebSocketReader
    fa.disable()
    assert aiohttp.web_ws.WebSocketReader is aiohttp.http.WebSocketReader
    assert aiohttp.client.WebSocketReader is aiohttp.http.WebSocketReader


# -- the gate alone ----------------------------------------------------------------

def frame(payload: bytes, opcode: int = 1, fin: bool = True, rsv1: bool = False,
          mask: Optional[bytes] = None) -> bytes:
    """One frame as a peer sends it (masked if ``mask``)."""
    head = bytes([(0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode])
    flag = 0x80 if mask is not None else 0
    n = len(payload)
    if n < 126:
        head += bytes([flag | n])
    elif n < 1 << 16:
        head += bytes([flag | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([flag | 127]) + n.to_bytes(8, "big")
    if mask is None:
        return head + payload
    masked = bytearray(payload)
    _frames.unmask(masked, mask)
    return head + mask + bytes(masked)


@pytest.mark.parametrize("masked", [False, True])
def test_the_gate_holds_each_large_message_wherever_the_stream_is_cut(
        masked: bool) -> None:
    """A stream of small, large (compressed) and control frames, fed cut at random
    places (one byte at a time among them): the parser gets every byte in order, each
    large message whole with its payload, and nothing after a large message before
    its job is done."""
    rng = random.Random(43)
    mask = b"\x01\x02\x03\x04" if masked else None
    large = [rng.randbytes(20000 + 100 * n) for n in range(3)]
    stream = (frame(b"small", mask=mask)
              + frame(large[0], rsv1=True, mask=mask)
              + frame(b"\x00" * 100, opcode=9, mask=mask)  # a ping
              + frame(large[1][:12000], rsv1=True, fin=False, mask=mask)  # fragmented,
              + frame(b"ping", opcode=9, mask=mask)  # a ping between its frames
              + frame(large[1][12000:], opcode=0, mask=mask)
              + frame(b"compressed, small", rsv1=True, mask=mask)
              + frame(large[2], opcode=2, rsv1=True, mask=mask)
              + frame(b"x" * 70000, opcode=2, mask=mask))  # large, not compressed

    async def feed(cuts: list[int]) -> tuple[bytes, list[bytes]]:
        loop = asyncio.get_running_loop()
        parsed = bytearray()
        payloads: list[bytes] = []
        jobs: list[asyncio.Future[None]] = []

        def start(frames: list[tuple[memoryview, Optional[bytes]]]) -> Any:
            payload = bytearray()
            for data, key in frames:
                part = bytearray(data)
                if key is not None:
                    _frames.unmask(part, key)
                payload += part
            payloads.append(bytes(payload))
            job = loop.create_future()
            jobs.append(job)
            return job

        gate = _frames.Gate(parsed.extend, start, lambda job: None)
        for a, b in zip(cuts, cuts[1:]):
            gate.feed(stream[a:b])
            while jobs and gate.holding:
                assert parsed == stream[:len(parsed)]
                job = jobs.pop()
                job.set_result(None)
                await asyncio.sleep(0)
        return bytes(parsed), payloads

    previous = fastdeflate.set_off_loop_size(16 * 1024)
    try:
        for attempt in range(30):
            points = sorted(rng.sample(range(1, len(stream)), rng.randrange(1, 60)))
            if attempt == 0:  # one byte at a time through the first frames' headers
                points = sorted(set(points) | set(range(1, 40)))
            parsed, payloads = asyncio.run(feed([0, *points, len(stream)]))
            assert parsed == stream
            assert payloads == large
    finally:
        fastdeflate.set_off_loop_size(previous)


def test_the_gate_lets_a_message_in_too_many_pieces_through_as_it_is() -> None:
    """A large first frame followed by more continuation frames than the gate follows
    (``_frames.MAX_FRAMES``): no job, and the parser gets every byte, in order, as the
    stream goes on (following it costs the loop per frame; the parser's limits apply)."""
    many = _frames.MAX_FRAMES + 10
    stream = (frame(bytes(20000), rsv1=True, fin=False, mask=b"abcd")
              + b"".join(frame(b"x", opcode=0, fin=False, mask=b"abcd")
                         for _ in range(many))
              + frame(b"end", opcode=0, mask=b"abcd")
              + frame(b"after", mask=b"abcd"))
    parsed = bytearray()
    started: list[Any] = []
    previous = fastdeflate.set_off_loop_size(16 * 1024)
    try:
        gate = _frames.Gate(parsed.extend, started.append, lambda job: None)
        for at in range(0, len(stream), 4096):
            gate.feed(stream[at:at + 4096])
    finally:
        fastdeflate.set_off_loop_size(previous)
    assert started == []
    assert not gate.holding
    assert parsed == stream
