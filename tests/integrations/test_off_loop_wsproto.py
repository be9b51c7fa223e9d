"""Large messages compressed off the event loop (issue 43) on wsproto's servers:
uvicorn ``--ws wsproto`` and hypercorn, both in this process on 127.0.0.1.

Each server runs a scripted ASGI app against a stock websockets client (websockets' own
zlib extension, recording the compressed payloads it receives): large and small
messages sent concurrently from several tasks, on two connections at once. Every
message must arrive exactly and in the order the tasks were started; the large ones
must have gone off the loop (``status()["off_loop"]``), and the payloads must be the
bytes the same script gives on the loop (``set_off_loop_size(0)``) and those of a
``fastdeflate.Compressor`` run over the messages. A send cancelled while its message is
compressed is never delivered and what follows decodes; a close while a message is
compressed delivers it first, as stock does; a peer gone meanwhile hangs nothing.

Receiving: a stock client's large compressed messages (whole or fragmented, among small
ones, on two connections at once) reach the app exactly and in order, decompressed off
the loop; a message over the server's limit, frames parsed behind a large message (a
close, a corrupt frame), a ping between fragments and a peer gone in the middle of a
held message end as they do with stock wsproto (run once with fastdeflate disabled).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from types import ModuleType
from typing import Any, Awaitable, Callable, Iterator

import pytest

import fastdeflate
import fastdeflate.integrations.wsproto as fwsproto
from fastdeflate import _off_loop
from fastdeflate.integrations import _marks

websockets = pytest.importorskip("websockets")
uvicorn = pytest.importorskip("uvicorn")
hypercorn = pytest.importorskip("hypercorn")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402


HOST = "127.0.0.1"
SIZE = 16 * 1024  # the off-loop size these tests set
DEADLINE = 60.0
SERVERS = ("uvicorn-wsproto", "hypercorn")


# the payloads, the stock client's recording extension, the raw client and its frames:
# as for websockets' servers
from .test_off_loop import (  # noqa: E402
    BIG, BIG_BYTES, CORRUPT, SENT, _RecordingFactory, close_frame, describe,
    handshaken_client, raw_client, snapshot,
)


async def receive_all(port: int, script: str, payloads: list[bytes],
                      path: str = "/") -> list[Any]:
    """What a stock client receives after asking for ``script``, until the close."""
    received: list[Any] = []
    async with connect(f"ws://{HOST}:{port}{path}", compression=None, max_size=None,
                       extensions=[_RecordingFactory(payloads)]) as client:
        await client.send(script)
        try:
            while True:
                received.append(await client.recv())
                if script == "in order" and received[-1] == "small 2":
                    break
                if script == "cancelled" and len(received) == 2:
                    break
        except ConnectionClosed:
            pass
    return received


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, DEADLINE))


# -- the scripts the servers run ----------------------------------------------------

Send = Callable[[Any], Awaitable[None]]


async def in_order(send: Send) -> None:
    """Large and small messages from concurrent tasks, started in this order."""
    tasks = [asyncio.ensure_future(send(BIG[0])), asyncio.ensure_future(send("small 0"))]
    await asyncio.sleep(0)
    tasks += [asyncio.ensure_future(send(BIG_BYTES)), asyncio.ensure_future(send("small 1")),
              asyncio.ensure_future(send(BIG[1])), asyncio.ensure_future(send("small 2"))]
    await asyncio.gather(*tasks)


IN_ORDER = [BIG[0], "small 0", BIG_BYTES, "small 1", BIG[1], "small 2"]


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


async def one_large(send: Send, close: Callable[[], Awaitable[None]]) -> None:
    """One large message (the peer closes meanwhile)."""
    try:
        await send(BIG[2])
    except Exception as exc:  # uvicorn's ClientDisconnected, say: the peer is gone
        peer_gone.append(exc)


async def opt_out(send: Send, close: Callable[[], Awaitable[None]]) -> None:
    """A message sent uncompressed on purpose while a large one is compressed."""
    task = asyncio.ensure_future(send(BIG[0]))
    await asyncio.sleep(0)
    with fastdeflate.uncompressed():
        await send("small 2" * 50)
    await task


SCRIPTS = {"cancelled": cancelled, "closing": closing, "one large": one_large,
           "opt out": opt_out}
peer_gone: list[Exception] = []

#: What the apps saw go wrong (an exception out of a send, say): nothing, in every test.
app_errors: list[BaseException] = []


#: What the "record" script received (the server side of the raw client's tests).
RECORDED: list[str] = []


async def receiving(script: str, receive: Callable, send: Callable) -> None:
    """"echo sizes": answer each message with its type, length and hash; "record":
    note them in RECORDED, then "closed"; until the client leaves."""
    while True:
        event = await receive()
        if event["type"] == "websocket.disconnect":
            if script == "record":
                RECORDED.append("closed")
            return
        message = event.get("text") if event.get("text") is not None else event["bytes"]
        if script == "record":
            RECORDED.append(describe(message))
        else:
            await send({"type": "websocket.send", "text": describe(message)})


async def asgi_app(scope: dict, receive: Callable, send: Callable) -> None:
    """The scripts over ASGI."""
    if scope["type"] == "lifespan":  # (hypercorn's)
        while True:
            event = (await receive())["type"]
            await send({"type": event + ".complete"})
            if event == "lifespan.shutdown":
                return
    try:
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        script = (await receive())["text"]
        if script in ("echo sizes", "record"):
            await receiving(script, receive, send)
            return

        async def send_message(message: Any) -> None:
            key = "text" if isinstance(message, str) else "bytes"
            await send({"type": "websocket.send", key: message})

        async def close() -> None:
            await send({"type": "websocket.close", "code": 1000})

        if script == "in order":
            await in_order(send_message)
        else:
            await SCRIPTS[script](send_message, close)
        while (await receive())["type"] != "websocket.disconnect":
            pass
    except BaseException as exc:
        app_errors.append(exc)
        raise


# -- the servers --------------------------------------------------------------------

class UvicornServer:
    def __init__(self, max_size: int = 1 << 26) -> None:
        self.max_size = max_size

    async def __aenter__(self) -> "UvicornServer":
        sock = socket.create_server((HOST, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(asgi_app, ws="wsproto", interface="asgi3", lifespan="off",
                                log_config=None, log_level="error",
                                ws_max_size=self.max_size)
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


class HypercornServer:
    def __init__(self, max_size: int = 1 << 26) -> None:
        self.max_size = max_size

    async def __aenter__(self) -> "HypercornServer":
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        sock = socket.create_server((HOST, 0))
        self.port = sock.getsockname()[1]
        config = Config()
        config.bind = [f"fd://{sock.detach()}"]
        config.websocket_max_message_size = self.max_size
        config.graceful_timeout = 2
        config.accesslog = None
        config.errorlog = logging.getLogger("hypercorn-test")
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(serve(asgi_app, config,
                                                shutdown_trigger=self.stop.wait))
        return self  # (the socket listens already: clients wait in its backlog)

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, DEADLINE)


def make_server(name: str, max_size: int = 1 << 26) -> Any:
    if name == "uvicorn-wsproto":
        return UvicornServer(max_size)
    return HypercornServer(max_size)


@pytest.fixture
def enabled(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The adapter enabled, the off-loop size SIZE; after the test, nothing went wrong
    in the apps and nothing was logged as an error (an exception in a server, a task's
    exception never retrieved)."""
    caplog.set_level(logging.WARNING)
    previous = fastdeflate.set_off_loop_size(SIZE)
    was = fwsproto.is_enabled()
    fwsproto.enable()
    app_errors.clear()
    try:
        yield
    finally:
        if not was:
            fwsproto.disable()
        fastdeflate.set_off_loop_size(previous)
    errors, app_errors[:] = list(app_errors), []
    assert errors == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def compressed_on_its_own(messages: list[Any]) -> list[bytes]:
    """The payloads wsproto's extension gives for ``messages`` on one fresh compressor
    (level 6, 15 window bits, memLevel 8), those sent as they are left out."""
    compressor = fastdeflate.Compressor(level=6, window_bits=15, mem_level=8)
    payloads = []
    for message in messages:
        data = message.encode() if isinstance(message, str) else message
        payload = compressor.compress_or_skip(data, True, flush=False)
        if payload is not None:
            payloads.append(payload)
    return payloads


# -- the tests ----------------------------------------------------------------------

@pytest.mark.parametrize("server", SERVERS)
def test_large_and_small_messages_arrive_exactly_and_in_order(
        server: str, use_impl: ModuleType, enabled: None, own_workers: int) -> None:
    """Two connections at once, each: large and small messages from concurrent tasks
    arrive exactly, in order; the large ones went off the loop."""
    before = _off_loop.counts()[0]

    async def main() -> list[list[Any]]:
        async with make_server(server) as running:
            return list(await asyncio.gather(
                receive_all(running.port, "in order", []),
                receive_all(running.port, "in order", [])))

    results = run(main())
    for received in results:
        assert received == IN_ORDER
    assert _off_loop.counts()[0] - before == 6  # 3 large messages x 2 connections


@pytest.mark.parametrize("server", SERVERS)
def test_the_same_bytes_as_on_the_loop(server: str, use_impl: ModuleType,
                                       enabled: None) -> None:
    """The payloads a peer receives are those of the same script run on the loop, and
    those of one compressor run over the messages in order."""
    def payloads(size: int) -> list[bytes]:
        fastdeflate.set_off_loop_size(size)
        recorded: list[bytes] = []

        async def main() -> None:
            async with make_server(server) as running:
                assert await receive_all(running.port, "in order", recorded) == IN_ORDER
        run(main())
        return recorded

    before = _off_loop.counts()[0]
    on_the_loop = payloads(0)
    assert _off_loop.counts()[0] == before
    off_the_loop = payloads(SIZE)
    assert _off_loop.counts()[0] - before == 3
    assert len(off_the_loop) >= 3
    assert off_the_loop == on_the_loop
    assert off_the_loop == compressed_on_its_own(IN_ORDER)


@pytest.mark.parametrize("server", SERVERS)
def test_a_send_cancelled_while_compressed_is_never_seen(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    """The cancelled message never arrives; the same message sent next decodes (the
    compressor started a new stream: without that, it would refer to a window the peer
    never saw)."""
    before = _off_loop.counts()[0]

    async def main() -> list[Any]:
        async with make_server(server) as running:
            return await receive_all(running.port, "cancelled", [])

    assert run(main()) == ["after", BIG[2]]
    assert _off_loop.counts()[0] - before == 1  # the one sent; the cancelled one not


@pytest.mark.parametrize("server", SERVERS)
def test_close_while_compressed_sends_the_message_first(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    """The app closes while its large message is compressed: the message, then a clean
    close (1000), no exception in the app, the server shuts down in time."""
    before = _off_loop.counts()[0]
    codes: list[Any] = []

    async def main() -> list[Any]:
        async with make_server(server) as running:
            received: list[Any] = []
            async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                await client.send("closing")
                try:
                    while True:
                        received.append(await client.recv())
                except ConnectionClosed as exc:
                    codes.append(exc.rcvd.code if exc.rcvd else None)
            return received

    assert run(main()) == [BIG[2]]
    assert codes == [1000]
    assert _off_loop.counts()[0] - before == 1


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

    assert run(main()) == IN_ORDER
    # uvicorn's send raises what stock's raises once the connection is lost (its
    # ClientDisconnected, which uvicorn's runner swallows); hypercorn's returns
    gone = [exc for exc in app_errors if type(exc).__name__ == "ClientDisconnected"]
    assert len(gone) <= (1 if server == "uvicorn-wsproto" else 0)
    app_errors[:] = [exc for exc in app_errors if exc not in gone]


@pytest.mark.parametrize("server", SERVERS)
def test_a_peer_closing_while_compressed_closes_cleanly(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    """The client starts the closing handshake while the server compresses a large
    message: the handshake completes (1000 both ways), the app's send returns, the app
    sees the disconnect, and a new connection is served as before."""
    async def main() -> tuple[Any, list[Any]]:
        async with make_server(server) as running:
            async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                await client.send("one large")
                await asyncio.sleep(0.002)
                await asyncio.wait_for(client.close(), 10)
                codes = (client.close_code, client.protocol.close_rcvd
                         and client.protocol.close_rcvd.code)
            return codes, await receive_all(running.port, "in order", [])

    peer_gone.clear()
    codes, received = run(main())
    assert codes == (1000, 1000)
    assert received == IN_ORDER
    # the send returns, or, on uvicorn, raises what stock raises for a send after the
    # peer's close (ClientDisconnected); hypercorn's send never raises for that
    assert [type(exc).__name__ for exc in peer_gone] in (
        [], ["ClientDisconnected"] if server == "uvicorn-wsproto" else [])


@pytest.mark.parametrize("server", SERVERS)
def test_an_opt_out_held_behind_a_large_message_holds(
        server: str, use_impl: ModuleType, enabled: None) -> None:
    """fastdeflate.uncompressed() around a send held behind a large message: it goes
    out uncompressed (framed later, in its sender's context)."""
    recorded: list[bytes] = []

    async def main() -> list[Any]:
        async with make_server(server) as running:
            async with connect(f"ws://{HOST}:{running.port}", compression=None,
                               max_size=None,
                               extensions=[_RecordingFactory(recorded)]) as client:
                await client.send("opt out")
                return [await client.recv(), await client.recv()]

    assert run(main()) == [BIG[0], "small 2" * 50]
    assert len(recorded) == 1  # the large message only


def test_disable_puts_the_stock_send_paths_back(enabled: None) -> None:
    from hypercorn.protocol.ws_stream import WSStream
    from uvicorn.protocols.websockets.wsproto_impl import WSProtocol

    patched = [WSProtocol.send, WSStream.app_send, WSProtocol.data_received,
               WSProtocol.connection_lost, WSStream.handle]
    assert all(_marks.is_ours(f) for f in patched)
    fwsproto.disable()
    try:
        for name, owner in [("send", WSProtocol), ("app_send", WSStream),
                            ("data_received", WSProtocol),
                            ("connection_lost", WSProtocol), ("handle", WSStream)]:
            assert not _marks.is_ours(getattr(owner, name)), name
    finally:
        fwsproto.enable()


# -- receiving: a peer's large compressed messages decompressed off the loop ----------

@contextlib.contextmanager
def adapter(enable: bool) -> Iterator[None]:
    """The adapter enabled (or stock wsproto), the off-loop size SIZE; nothing went
    wrong in the apps."""
    previous = fastdeflate.set_off_loop_size(SIZE)
    was = fwsproto.is_enabled()
    (fwsproto.enable if enable else fwsproto.disable)()
    app_errors.clear()
    try:
        yield
    finally:
        (fwsproto.enable if was else fwsproto.disable)()
        fastdeflate.set_off_loop_size(previous)
    errors, app_errors[:] = list(app_errors), []
    assert errors == []


#: A fragmented large message, as the stock client sends it from an iterable.
FRAGMENTS = [BIG[0][:700_000], BIG[0][700_000:]]


@pytest.mark.parametrize("server", SERVERS)
def test_large_messages_received_exactly_and_in_order(
        server: str, use_impl: ModuleType, enabled: None, own_workers: int) -> None:
    """Two stock clients at once send large and small messages back to back (and a
    fragmented large one); the server answers each with its length and hash, in order,
    and decompressed the large ones off the loop."""
    before = _off_loop.counts()[1]

    async def one(port: int) -> list[str]:
        async with connect(f"ws://{HOST}:{port}", max_size=None) as client:
            await client.send("echo sizes")
            for message in SENT:
                await client.send(message)
            await client.send(FRAGMENTS)
            return [await client.recv() for _ in range(len(SENT) + 1)]

    async def main() -> list[list[str]]:
        async with make_server(server) as running:
            return list(await asyncio.gather(one(running.port), one(running.port)))

    for received in run(main()):
        assert received == [describe(message) for message in SENT + [BIG[0]]]
    assert _off_loop.counts()[1] - before == 2 * 5


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("kind", ["text", "bytes"])
def test_an_oversized_message_is_refused_as_stock_refuses_it(
        server: str, kind: str, use_impl: ModuleType) -> None:
    """A message that inflates beyond the server's limit (its payload within it):
    close 1009 from fastdeflate, large enough to go off the loop, as from stock."""
    limit = 1 << 20
    too_big: Any = snapshot(7, 2 * limit)  # ~500 KiB compressed
    if kind == "bytes":
        too_big = too_big.encode()

    async def close_code(enable: bool) -> Any:
        with adapter(enable):
            async with make_server(server, max_size=limit) as running:
                async with connect(f"ws://{HOST}:{running.port}",
                                   max_size=None) as client:
                    await client.send("echo sizes")
                    await client.send("small")
                    assert await client.recv() == describe("small")
                    await client.send(too_big)
                    with pytest.raises(ConnectionClosed):
                        await client.recv()
                    return client.protocol.close_rcvd.code

    assert run(close_code(False)) == 1009
    before = _off_loop.counts()[1]
    assert run(close_code(True)) == 1009
    assert _off_loop.counts()[1] - before == 1  # refused by the decompression in a thread


async def recorded_after(server: str, send: Callable[[], Awaitable[Any]]) -> list[str]:
    """What the "record" script noted once ``send()`` is done and the server closed."""
    RECORDED.clear()
    async with make_server(server) as running:
        send.port = running.port  # type: ignore[attr-defined]
        code = await send()
        for _ in range(200):
            if RECORDED[-1:] == ["closed"]:
                break
            await asyncio.sleep(0.01)
    return list(RECORDED) + [f"code {code}"]


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("tail", ["close", "corrupt"])
def test_frames_parsed_with_a_large_message_wait_for_it(
        server: str, tail: str, use_impl: ModuleType) -> None:
    """Large and small messages and then a close (or a corrupt frame) in one write:
    the server receives every message in order and then the close (or fails as stock
    fails after the messages before the corrupt one), as stock does."""
    messages = [BIG[0], "small 0", BIG_BYTES, "small 1"]
    more = close_frame(1000) if tail == "close" else CORRUPT

    def exchange(enable: bool) -> list[str]:
        async def send() -> Any:
            return await raw_client(send.port, messages, more)  # type: ignore

        with adapter(enable):
            return run(recorded_after(server, send))

    stock = exchange(False)
    before = _off_loop.counts()[1]
    fast = exchange(True)
    assert _off_loop.counts()[1] - before == 2
    assert fast[:-1] == [describe(message) for message in messages] + ["closed"]
    assert fast == stock
    if tail == "close":
        assert fast[-1] == "code 1000"


async def raw_fragments(port: int, ping: bool) -> Any:
    """A stock sans-I/O client: "record", a large text message in two compressed
    fragments (with a ping between them if ``ping``), "small", a close, in one write;
    the close code the server answers with."""
    from websockets.frames import Close, Opcode as Op

    reader, writer, proto = await handshaken_client(port)
    proto.send_text(b"record")
    proto.send_text(FRAGMENTS[0].encode(), fin=False)
    if ping:
        proto.send_ping(b"between")
    proto.send_continuation(FRAGMENTS[1].encode(), fin=True)
    proto.send_text(b"small")
    proto.send_close(1000)
    writer.write(b"".join(proto.data_to_send()))
    code = None
    while code is None:
        try:
            data = await reader.read(65536)
        except ConnectionResetError:  # (the server closed with bytes unread)
            break
        if not data:
            break
        proto.receive_data(data)
        for event in proto.events_received():
            if getattr(event, "opcode", None) is Op.CLOSE:
                code = Close.parse(event.data).code
    writer.close()
    return code


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("ping", [False, True], ids=["fragments", "ping-between"])
def test_a_fragmented_message_as_stock(server: str, ping: bool,
                                       use_impl: ModuleType) -> None:
    """A large message in compressed fragments goes off the loop and arrives exactly;
    with a ping between its fragments (which makes wsproto take the rest as
    uncompressed) it is left to wsproto on the loop: what the server gets is stock's."""
    def exchange(enable: bool) -> list[str]:
        async def send() -> Any:
            return await raw_fragments(send.port, ping)  # type: ignore

        with adapter(enable):
            return run(recorded_after(server, send))

    stock = exchange(False)
    before = _off_loop.counts()[1]
    fast = exchange(True)
    assert _off_loop.counts()[1] - before == (0 if ping else 1)
    assert fast == stock
    if not ping:
        assert fast == [describe(BIG[0]), describe("small"), "closed", "code 1000"]


async def raw_half(port: int) -> None:
    """A stock sans-I/O client: "record", then half of a large compressed message,
    then the TCP connection dropped."""
    reader, writer, proto = await handshaken_client(port)
    proto.send_text(b"record")
    writer.write(b"".join(proto.data_to_send()))
    proto.send_text(BIG[0].encode())
    data = b"".join(proto.data_to_send())
    writer.write(data[:len(data) // 2])
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.transport.abort()


@pytest.mark.parametrize("server", SERVERS)
def test_a_connection_lost_in_a_held_message_is_seen(server: str,
                                                     use_impl: ModuleType) -> None:
    """The peer goes away in the middle of a large message (held by the gate, not all
    there): the app sees the disconnect at once, as with stock, and nothing hangs."""
    def exchange(enable: bool) -> list[str]:
        async def send() -> None:
            await raw_half(send.port)  # type: ignore

        with adapter(enable):
            return run(recorded_after(server, send))

    stock = exchange(False)
    assert exchange(True) == stock == ["closed", "code None"]
