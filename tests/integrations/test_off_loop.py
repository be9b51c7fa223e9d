"""Large messages compressed off the event loop (issue 43): websockets' asyncio server,
uvicorn's ``websockets`` (websockets' legacy protocol) and ``websockets-sansio``.

Each server sends a scripted sequence to a stock websockets client (websockets' own zlib
extension, recording the compressed payloads it receives): large and small messages
sent concurrently from several tasks, on two connections at once. Every message must
arrive exactly and in the order the tasks were started; the large ones must have gone
off the loop (``status()["off_loop"]``), and the payloads must be the bytes the same
script gives on the loop (``set_off_loop_size(0)``). A send cancelled while its message
is compressed is never delivered and what follows decodes; a close while a message is
compressed delivers it first, as stock does; a peer gone meanwhile hangs nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import socket
import warnings
from types import ModuleType
from typing import Any, Awaitable, Callable, Iterator

import pytest

import fastdeflate
import fastdeflate.integrations.websockets as fw
from fastdeflate import _off_loop
from fastdeflate.integrations import _marks

websockets = pytest.importorskip("websockets")
uvicorn = pytest.importorskip("uvicorn")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.asyncio.server import broadcast, serve  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.extensions import permessage_deflate as pmd  # noqa: E402

HOST = "127.0.0.1"
SIZE = 16 * 1024  # the off-loop size these tests set
DEADLINE = 60.0
SERVERS = ("websockets", "uvicorn-websockets", "uvicorn-websockets-sansio")


def snapshot(seed: int, size: int = 1_500_000) -> str:
    """A dashboard's JSON snapshot of about ``size`` characters."""
    rng = random.Random(seed)
    rows = [{"id": n, "price": round(rng.uniform(1, 500), 2), "qty": rng.randrange(10**5),
             "name": f"instrument-{rng.randrange(10**6)}", "up": rng.random() > 0.5}
            for n in range(size // 90)]
    return json.dumps(rows)


BIG = [snapshot(n) for n in range(3)]
BIG_BYTES = BIG[2].encode()


# -- the stock client, recording the compressed payloads ----------------------------

class _Recording(fw._StockPerMessageDeflate):  # type: ignore[misc, valid-type]
    """websockets' own zlib extension, keeping each compressed frame's payload."""

    payloads: list[bytes]

    def decode(self, frame: Any, *, max_size: int | None = None) -> Any:
        if frame.rsv1:
            self.payloads.append(bytes(frame.data))
        return super().decode(frame, max_size=max_size)


class _RecordingFactory(pmd.ClientPerMessageDeflateFactory):
    def __init__(self, payloads: list[bytes]) -> None:
        super().__init__(client_max_window_bits=True)
        self.payloads = payloads

    def process_response_params(self, params: Any, accepted: Any) -> Any:
        stock = super().process_response_params(params, accepted)
        ext = _Recording(stock.remote_no_context_takeover, stock.local_no_context_takeover,
                         stock.remote_max_window_bits, stock.local_max_window_bits,
                         stock.compress_settings)
        ext.payloads = self.payloads
        return ext


# -- the scripts the servers run ----------------------------------------------------

Send = Callable[[Any], Awaitable[None]]


async def in_order(send: Send, others: Callable[[str], None] | None) -> None:
    """Large and small messages from concurrent tasks, started in this order; where
    the server has a broadcast (``others``), one to every connection in between."""
    tasks = [asyncio.ensure_future(send(BIG[0])), asyncio.ensure_future(send("small 0"))]
    await asyncio.sleep(0)
    if others is not None:
        others("broadcast")
    tasks += [asyncio.ensure_future(send(BIG_BYTES)), asyncio.ensure_future(send("small 1")),
              asyncio.ensure_future(send(BIG[1])), asyncio.ensure_future(send("small 2"))]
    await asyncio.gather(*tasks)


def in_order_expected(broadcasts: bool) -> list[Any]:
    return [BIG[0], "small 0", *(["broadcast"] if broadcasts else []), BIG_BYTES,
            "small 1", BIG[1], "small 2"]


async def cancelled(send: Send, close: Callable[[], Awaitable[None]]) -> None:
    """A large message's send cancelled while it is compressed, then the same message."""
    task = asyncio.ensure_future(send(BIG[2]))
    for _ in range(3):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await send("after")
    await send(BIG[2])


async def closing(send: Send, close: Callable[[], Awaitable[None]]) -> None:
    """close() while a large message is compressed: it goes out first, as stock."""
    task = asyncio.ensure_future(send(BIG[2]))
    for _ in range(3):
        await asyncio.sleep(0)
    await close()
    await task


async def opt_out(send: Send, close: Callable[[], Awaitable[None]]) -> None:
    """A message sent with fastdeflate.uncompressed() while a large one is compressed:
    held, and framed later in its own sender's context (uncompressed)."""
    first = asyncio.ensure_future(send(BIG[0]))
    await asyncio.sleep(0)
    with fastdeflate.uncompressed():
        second = asyncio.ensure_future(send("small 2" * 50))
    await asyncio.gather(first, second)


async def behind_fragments(send: Send, close: Callable[[], Awaitable[None]]) -> None:
    """A large message sent while another task is in the middle of a fragmented one
    (websockets' server alone: send() of an async iterable): it goes out after the last
    fragment, as stock's send() waits for it."""
    async def parts() -> Any:
        for k in range(3):
            yield f"part {k} "
            await asyncio.sleep(0.05)  # the next fragment is still to come

    first = asyncio.ensure_future(send(parts()))
    await asyncio.sleep(0.01)  # the first fragment is out
    await send(BIG[0])
    await first


SCRIPTS = {"in order": in_order, "cancelled": cancelled, "closing": closing,
           "opt out": opt_out, "behind fragments": behind_fragments}


# -- the servers --------------------------------------------------------------------

@pytest.fixture
def enabled() -> Iterator[None]:
    previous = fastdeflate.set_off_loop_size(SIZE)
    was = fw.is_enabled()
    fw.enable()
    try:
        yield
    finally:
        if not was:
            fw.disable()
        fastdeflate.set_off_loop_size(previous)


async def run_script(ws: Any, script: str, connections: list[Any]) -> None:
    if script == "in order":  # (the client learns which broadcast is its own)
        await ws.send(f"you are {len(connections)}")
        name = f"broadcast from {len(connections)}"
        await in_order(ws.send, lambda m: broadcast(connections, name))
    else:
        await SCRIPTS[script](ws.send, ws.close)


class WebsocketsServer:
    """websockets' asyncio server on this loop: runs the script each client names."""

    def __init__(self, max_size: int | None = None) -> None:
        self.connections: list[Any] = []
        self.max_size = max_size

    async def handler(self, ws: Any) -> None:
        script = await ws.recv()
        if script == "echo sizes":
            async for message in ws:
                await ws.send(describe(message))
            return
        if script == "record":
            try:
                async for message in ws:
                    RECORDED.append(describe(message))
            except ConnectionClosed:  # (1002: the corrupt frame)
                pass
            RECORDED.append("closed")
            return
        self.connections.append(ws)
        try:
            await run_script(ws, script, self.connections)
        except ConnectionClosed:
            pass
        await ws.wait_closed()

    async def __aenter__(self) -> "WebsocketsServer":
        self.server = await serve(self.handler, HOST, 0, max_size=self.max_size)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await asyncio.wait_for(self.server.wait_closed(), DEADLINE)


async def echo_sizes(receive: Callable, send: Callable) -> None:
    """Answer each message with its type, length and hash, until the client leaves."""
    while True:
        event = await receive()
        if event["type"] == "websocket.disconnect":
            return
        message = event.get("text") if event.get("text") is not None else event["bytes"]
        await send({"type": "websocket.send", "text": describe(message)})


#: What the "record" script received (the server side of the raw client's tests).
RECORDED: list[str] = []


def describe(message: Any) -> str:
    data = message.encode() if isinstance(message, str) else message
    return f"{type(message).__name__} {len(data)} {hashlib.sha256(data).hexdigest()}"


async def asgi_app(scope: dict, receive: Callable, send: Callable) -> None:
    """The scripts over ASGI (uvicorn has no broadcast)."""
    assert (await receive())["type"] == "websocket.connect"
    await send({"type": "websocket.accept"})
    script = (await receive())["text"]
    if script == "echo sizes":
        await echo_sizes(receive, send)
        return
    if script == "record":
        while True:
            event = await receive()
            if event["type"] == "websocket.disconnect":
                RECORDED.append("closed")
                return
            RECORDED.append(describe(event.get("text") if event.get("text") is not None
                                     else event["bytes"]))

    async def send_message(message: Any) -> None:
        key = "text" if isinstance(message, str) else "bytes"
        await send({"type": "websocket.send", key: message})

    async def close() -> None:
        await send({"type": "websocket.close", "code": 1000})

    if script == "in order":
        await in_order(send_message, None)
    else:
        await SCRIPTS[script](send_message, close)
    while (await receive())["type"] != "websocket.disconnect":
        pass


class UvicornServer:
    def __init__(self, ws: str, max_size: int | None = None) -> None:
        self.ws = ws
        self.max_size = max_size

    async def __aenter__(self) -> "UvicornServer":
        sock = socket.create_server((HOST, 0))
        self.port = sock.getsockname()[1]
        with warnings.catch_warnings():  # uvicorn's "websockets" is deprecated
            warnings.simplefilter("ignore")
            config = uvicorn.Config(asgi_app, ws=self.ws, interface="asgi3",
                                    lifespan="off", log_config=None, log_level="error",
                                    ws_max_size=self.max_size or 1 << 26)
            self.server = uvicorn.Server(config)
            self.task = asyncio.ensure_future(self.server.serve(sockets=[sock]))
            for _ in range(500):
                if self.server.started or self.task.done():
                    break
                await asyncio.sleep(0.01)
        assert self.server.started, "uvicorn did not start"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, DEADLINE)


def make_server(name: str, max_size: int | None = None) -> Any:
    if name == "websockets":
        return WebsocketsServer(max_size)
    return UvicornServer(name.removeprefix("uvicorn-"), max_size)


async def receive_all(port: int, script: str, payloads: list[bytes]) -> list[Any]:
    """What a stock client receives after asking for ``script``, until the close."""
    received: list[Any] = []
    async with connect(f"ws://{HOST}:{port}", compression=None, max_size=None,
                       extensions=[_RecordingFactory(payloads)]) as client:
        await client.send(script)
        try:
            while True:
                received.append(await client.recv())
                if script == "in order" and received[-1] == "small 2":
                    break
                if (script in ("cancelled", "opt out", "behind fragments")
                        and len(received) == 2):
                    break
        except ConnectionClosed:
            pass
    return received


def own(received: list[Any]) -> list[Any]:
    """The messages of this connection's script: its own broadcast as "broadcast"
    (websockets' server first says which is its own), the other's left out."""
    if not received or not str(received[0]).startswith("you are "):
        return received
    mine = "broadcast from " + received[0].removeprefix("you are ")
    return ["broadcast" if m == mine else m for m in received[1:]
            if not (isinstance(m, str) and m.startswith("broadcast from ")) or m == mine]


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, DEADLINE))


# -- the tests ----------------------------------------------------------------------

@pytest.mark.parametrize("server", SERVERS)
def test_large_and_small_messages_arrive_exactly_and_in_order(
        server: str, use_impl: ModuleType, enabled: None, own_workers: int) -> None:
    """Two connections at once, each: large and small messages from concurrent tasks
    (and on websockets a broadcast) arrive exactly, in order; the large ones went off
    the loop."""
    before = _off_loop.counts()[0]

    async def main() -> list[list[Any]]:
        async with make_server(server) as running:
            return list(await asyncio.gather(
                receive_all(running.port, "in order", []),
                receive_all(running.port, "in order", [])))

    results = run(main())
    for received in results:
        assert own(received) == in_order_expected(server == "websockets")
    # 3 large messages x 2 connections; a message sent to both at once goes off the loop
    # once, and the other connection takes its payload (test_one_message_to_many_...)
    assert 3 <= _off_loop.counts()[0] - before <= 6


@pytest.mark.parametrize("server", SERVERS)
def test_the_same_bytes_as_on_the_loop(server: str, use_impl: ModuleType,
                                       enabled: None) -> None:
    """The payloads a peer receives are those of the same script run on the loop."""
    def payloads(size: int) -> list[bytes]:
        fastdeflate.set_off_loop_size(size)
        recorded: list[bytes] = []

        async def main() -> None:
            async with make_server(server) as running:
                await receive_all(running.port, "in order", recorded)
        run(main())
        return recorded

    before = _off_loop.counts()[0]
    on_the_loop = payloads(0)
    assert _off_loop.counts()[0] == before
    off_the_loop = payloads(SIZE)
    assert _off_loop.counts()[0] - before == 3
    assert len(off_the_loop) >= 6
    assert off_the_loop == on_the_loop


@pytest.mark.parametrize("server", SERVERS)
def test_a_send_cancelled_while_compressed_is_never_seen(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    """The cancelled message never arrives; the same message sent next decodes (the
    compressor started a new stream: without that, it would refer to a window the peer
    never saw)."""
    async def main() -> list[Any]:
        async with make_server(server) as running:
            return await receive_all(running.port, "cancelled", [])

    assert run(main()) == ["after", BIG[2]]


@pytest.mark.parametrize("server", SERVERS)
def test_close_while_compressed_sends_the_message_first(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    async def main() -> list[Any]:
        async with make_server(server) as running:
            return await receive_all(running.port, "closing", [])

    assert run(main()) == [BIG[2]]


@pytest.mark.parametrize("server", SERVERS)
def test_a_peer_gone_while_compressed_hangs_nothing(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    """The client drops its TCP connection while a large message is compressed: the
    server's send ends (delivered nowhere), the server shuts down in time, and a new
    connection is served as before."""
    async def main() -> list[Any]:
        async with make_server(server) as running:
            async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                await client.send("closing")
                await asyncio.sleep(0.005)
                client.transport.abort()
            return await receive_all(running.port, "in order", [])

    received = run(main())
    assert own(received) == in_order_expected(server == "websockets")


def test_one_message_to_many_connections_is_compressed_off_the_loop_once(
        use_impl: ModuleType, enabled: None) -> None:
    """``gather(ws.send(m) for ws in connections)``: one connection compresses ``m`` in
    a worker thread, the others wait for it and take its payload (compress once) on the
    loop, instead of each compressing it in a thread of its own; all arrive exactly."""
    connections: list[Any] = []
    count = 5
    MESSAGES = [snapshot(5, 200_000), snapshot(6, 200_000).encode(), BIG[0]]

    async def handler(ws: Any) -> None:
        connections.append(ws)
        await ws.wait_closed()

    async def main() -> list[list[Any]]:
        async with serve(handler, HOST, 0, max_size=None) as server:
            port = server.sockets[0].getsockname()[1]
            clients = [await connect(f"ws://{HOST}:{port}", max_size=None)
                       for _ in range(count)]
            while len(connections) < count:
                await asyncio.sleep(0.01)
            for message in MESSAGES:
                await asyncio.gather(*(ws.send(message) for ws in connections))
            received = [[await client.recv() for _ in MESSAGES] for client in clients]
            for client in clients:
                await client.close()
            return received

    def shared() -> int:  # compress once's shares, of the implementation in use
        return sum(counts[3] for key, counts in use_impl._traffic().items()
                   if key[0] == "deflate")

    before, shared_before = _off_loop.counts()[0], shared()
    assert run(main()) == [MESSAGES] * count
    # the shareable ones once each (a follower that comes after its leader is done
    # goes off the loop itself: seen once on CPython 3.15), without the one leader
    # 2 * count; the one too large to share, once per connection
    assert 2 + count <= _off_loop.counts()[0] - before <= 4 + count
    assert shared() - shared_before == 2 * (count - 1)


SENT = [BIG[0], "small 0", BIG_BYTES, "small 1", BIG[1].encode(), BIG[1]]


@pytest.mark.parametrize("server", SERVERS)
def test_large_messages_received_exactly_and_in_order(
        server: str, use_impl: ModuleType, enabled: None, own_workers: int) -> None:
    """A stock client sends large and small messages back to back; the server answers
    each with its length and hash, in order, and decompressed the large ones off the
    loop (the legacy protocol in the task that reads frames; the sans-I/O protocol
    with the events parsed after a large message waiting for it)."""
    before = _off_loop.counts()[1]

    async def main() -> list[str]:
        async with make_server(server) as running:
            async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                await client.send("echo sizes")
                for message in SENT:
                    await client.send(message)
                return [await client.recv() for _ in SENT]

    assert run(main()) == [describe(message) for message in SENT]
    assert _off_loop.counts()[1] - before == 4


@pytest.mark.parametrize("server", SERVERS)
def test_an_oversized_message_is_refused_as_stock_refuses_it(
        server: str, use_impl: ModuleType) -> None:
    """A message that inflates beyond the server's limit (its payload within it):
    close 1009 from fastdeflate, large enough to go off the loop, as from stock."""
    limit = 1 << 20
    TOO_BIG = snapshot(7, 2 * limit)  # ~200 KiB compressed

    async def close_code(enable: bool) -> int | None:
        previous = fastdeflate.set_off_loop_size(SIZE)
        (fw.enable if enable else fw.disable)()
        try:
            async with make_server(server, max_size=limit) as running:
                async with connect(f"ws://{HOST}:{running.port}",
                                   max_size=None) as client:
                    await client.send("echo sizes")
                    await client.send(TOO_BIG)
                    with pytest.raises(ConnectionClosed):
                        await client.recv()
                    return client.protocol.close_rcvd.code
        finally:
            fw.disable()
            fastdeflate.set_off_loop_size(previous)

    assert run(close_code(False)) == 1009
    before = _off_loop.counts()[1]
    assert run(close_code(True)) == 1009
    assert _off_loop.counts()[1] - before == 1  # refused by the decompression in a thread


async def handshaken_client(port: int) -> tuple[asyncio.StreamReader,
                                                 asyncio.StreamWriter, Any]:
    """A stock sans-I/O websockets client (permessage-deflate offered) connected to
    ``port``, its handshake done: (reader, writer, protocol)."""
    from websockets.client import ClientProtocol
    from websockets.http11 import Response
    from websockets.uri import parse_uri

    reader, writer = await asyncio.open_connection(HOST, port)
    proto = ClientProtocol(parse_uri(f"ws://{HOST}:{port}/"),
                           extensions=[_RecordingFactory([])], max_size=None)
    proto.send_request(proto.connect())
    writer.write(b"".join(proto.data_to_send()))
    events: list[Any] = []
    while not any(isinstance(event, Response) for event in events):
        proto.receive_data(await reader.read(65536))
        events += proto.events_received()
    return reader, writer, proto


async def raw_client(port: int, messages: list[Any], tail: bytes) -> int | None:
    """Send "record", ``messages`` and ``tail`` (more raw bytes) in one write, as a
    stock client would frame them, then read until the server closes; return the
    close code the server sent (None if it sent none)."""
    from websockets.frames import Close, Opcode as Op

    reader, writer, proto = await handshaken_client(port)
    proto.send_text(b"record")
    for message in messages:
        if isinstance(message, str):
            proto.send_text(message.encode())
        else:
            proto.send_binary(message)
    writer.write(b"".join(proto.data_to_send()) + tail)
    code = None
    while True:
        data = await reader.read(65536)
        if not data:
            break
        proto.receive_data(data)
        for event in proto.events_received():
            if getattr(event, "opcode", None) is Op.CLOSE:
                code = Close.parse(event.data).code
        writer.write(b"".join(proto.data_to_send()))
        if code is not None:  # (its close answered: the client leaves)
            break
    writer.close()
    return code


def close_frame(code: int) -> bytes:
    """A client's close frame (masked with zeros)."""
    payload = code.to_bytes(2, "big")
    return bytes([0x88, 0x80 | len(payload)]) + bytes(4) + payload


#: A compressed text frame whose payload is not deflate (a stored block's length and
#: its complement disagree), masked with zeros.
CORRUPT_PAYLOAD = b"\x00garbage\xff\xff"
CORRUPT = bytes([0xC1, 0x80 | len(CORRUPT_PAYLOAD)]) + bytes(4) + CORRUPT_PAYLOAD


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("tail", ["close", "corrupt"])
def test_frames_parsed_with_a_large_message_wait_for_it(
        server: str, tail: str, use_impl: ModuleType) -> None:
    """Large and small messages and then a close (or a corrupt frame) in one write:
    the server receives every message in order and then the close (or fails with
    1002 after the messages before the corrupt one), as stock does."""
    messages = [BIG[0], "small 0", BIG_BYTES, "small 1"]
    more = close_frame(1000) if tail == "close" else CORRUPT

    async def exchange(enable: bool) -> tuple[list[str], int | None]:
        previous = fastdeflate.set_off_loop_size(SIZE)
        (fw.enable if enable else fw.disable)()
        RECORDED.clear()
        try:
            async with make_server(server) as running:
                code = await raw_client(running.port, messages, more)
                for _ in range(200):
                    if RECORDED[-1:] == ["closed"]:
                        break
                    await asyncio.sleep(0.01)
            return list(RECORDED), code
        finally:
            fw.disable()
            fastdeflate.set_off_loop_size(previous)

    stock = run(exchange(False))
    before = _off_loop.counts()[1]
    fast = run(exchange(True))
    assert _off_loop.counts()[1] - before == 2
    assert fast[0] == [describe(message) for message in messages] + ["closed"]
    assert fast[1] == stock[1] == (1000 if tail == "close" else 1002)
    if server == "uvicorn-websockets-sansio" and tail == "corrupt":
        # uvicorn drops the messages parsed in the bytes where its parser failed;
        # fastdeflate hands over every message before the corrupt frame
        assert fast[0][:len(stock[0]) - 1] == stock[0][:-1]
    else:
        assert fast == stock


@pytest.mark.parametrize("server", SERVERS)
def test_an_opt_out_held_behind_a_large_message_holds(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    recorded: list[bytes] = []

    async def main() -> list[Any]:
        async with make_server(server) as running:
            return await receive_all(running.port, "opt out", recorded)

    assert run(main()) == [BIG[0], "small 2" * 50]
    assert len(recorded) == 1  # the large message only


def test_a_large_message_waits_for_a_fragmented_one_in_progress(
        use_impl: ModuleType, enabled: None) -> None:
    """websockets' asyncio server: a large message sent while another task is in the
    middle of a fragmented message is framed after its last fragment, as stock's send()
    waits for it (the future is ``send_in_progress`` in websockets 16+,
    ``fragmented_send_waiter`` in 14 and 15); the large one went off the loop."""
    before = _off_loop.counts()[0]

    async def main() -> list[Any]:
        async with make_server("websockets") as running:
            return await receive_all(running.port, "behind fragments", [])

    assert run(main()) == ["part 0 part 1 part 2 ", BIG[0]]
    assert _off_loop.counts()[0] > before


def test_status_reports_the_setting_and_counts(use_impl: ModuleType) -> None:
    previous = fastdeflate.set_off_loop_size(1234)
    try:
        off_loop = fastdeflate.status()["off_loop"]
        assert off_loop["size"] == 1234
        assert off_loop["compressed"] == _off_loop.counts()[0]
        with pytest.raises(ValueError):
            fastdeflate.set_off_loop_size(-1)
        assert fastdeflate.set_off_loop_size(0) == 1234
    finally:
        fastdeflate.set_off_loop_size(previous)


def test_disable_puts_the_stock_send_paths_back(enabled: None) -> None:
    from websockets.asyncio.connection import Connection

    assert _marks.is_ours(Connection.send)
    fw.disable()
    try:
        assert not _marks.is_ours(Connection.send)
    finally:
        fw.enable()


def test_an_inbox_whose_task_is_cancelled_before_it_runs_lets_held_calls_through() -> None:
    """The loop shutting down cancels every task, the inbox's among them, maybe before
    its first step: the calls it held (a connection's loss) must still go through, or
    the library waits for them forever (a server that never exits)."""
    from fastdeflate.integrations._outbox import Inbox

    class Recording(Inbox):
        delivered: list[list[Any]] = []

        def _deliver(self, events: list) -> None:
            self.delivered.append(events)

        def _fail(self, exc: BaseException) -> None:
            raise AssertionError(exc)

    replayed: list[str] = []

    async def main() -> Recording:
        inbox = Recording()
        inbox.defer(lambda: "decoded", "placeholder")
        inbox.start(["placeholder"])
        inbox.hold(replayed.append, "connection lost")
        assert inbox._task is not None
        inbox._task.cancel()  # before its first step
        for _ in range(5):
            await asyncio.sleep(0)
        return inbox

    inbox = run(main())
    assert replayed == ["connection lost"]
    assert not inbox.holding and not inbox.deferring
    assert Recording.delivered == []
