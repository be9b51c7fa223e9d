"""Every library's client against every library's server, all enabled by one line.

``fastdeflate.enable()`` (in the ``enabled`` fixture) is the only thing that makes these
peers use fastdeflate: servers and clients are built exactly as an application would
build them with compression on. Each pair negotiates permessage-deflate (checked in the
response's ``Sec-WebSocket-Extensions``), echoes text and binary messages of several
sizes twice over one connection (so context takeover is exercised), compares the echoes
byte for byte, checks that both ends really ran on the selected codec implementation,
and closes with 1000. Everything runs in this process on one asyncio loop, 127.0.0.1,
ephemeral ports. wsproto's server is uvicorn ``--ws wsproto``; its client is a minimal
asyncio driver over ``wsproto.WSConnection``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator, Optional, Union

import pytest

from _skipcheck import peer_installed, pytest_without_peers

from ._support import AUTOBAHN_SUPPORTED, autobahn_patience, make_binary, make_text

import aiohttp
import aiohttp._websocket.reader_c
import aiohttp._websocket.reader_py
import aiohttp._websocket.writer
import tornado.httpserver
import tornado.netutil
import tornado.web
import tornado.websocket
import uvicorn
import websockets.asyncio.client
import websockets.asyncio.server
import websockets.extensions.permessage_deflate
import wsproto.extensions
from aiohttp import WSMsgType, web
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Request,
    TextMessage,
)

import fastdeflate
import fastdeflate.integrations
from fastdeflate.integrations import aiohttp as fd_aiohttp
from fastdeflate.integrations import tornado as fd_tornado
from fastdeflate.integrations import websockets as fd_websockets
from fastdeflate.integrations import wsproto as fd_wsproto

# Where fastdeflate cannot support autobahn (Python 3.10), or a wheel target's test set has
# no autobahn (it has no wheel there), the other four libraries' pairs still run.
# (tests/integrations/test_autobahn.py then skips wholesale, which the CI skip check allows
# only there.)
AUTOBAHN = AUTOBAHN_SUPPORTED and peer_installed("autobahn")
if AUTOBAHN:
    import autobahn.websocket.compress
    from autobahn.asyncio.websocket import (
        WebSocketClientFactory,
        WebSocketClientProtocol,
        WebSocketServerFactory,
        WebSocketServerProtocol,
    )
    from autobahn.websocket.compress import (
        PerMessageDeflateOffer,
        PerMessageDeflateOfferAccept,
        PerMessageDeflateResponse,
        PerMessageDeflateResponseAccept,
    )

    from fastdeflate.integrations import autobahn as fd_autobahn

Message = Union[str, bytes]
LIBRARIES = ["websockets", "aiohttp", "wsproto", "tornado"] + (
    ["autobahn"] if AUTOBAHN else [])
ADAPTERS = [fd_websockets, fd_aiohttp, fd_wsproto, fd_tornado] + (
    [fd_autobahn] if AUTOBAHN else [])
HOST = "127.0.0.1"
MAX_SIZE = 4 << 20  # every peer accepts messages up to 4 MiB
STEP = 20.0  # seconds for any single wait
SMALL_SIZES = (0, 1, 1024, 65536)
LARGE_SIZE = 1 << 20  # only for the pairs in LARGE_PAIRS


# ------------------------------------------------------------------------ hook points


def hook_points() -> dict[str, object]:
    """The objects each adapter documents as the one(s) it replaces, as they are now."""
    points = {
        "websockets.extensions.permessage_deflate.PerMessageDeflate":
            websockets.extensions.permessage_deflate.PerMessageDeflate,
        "aiohttp._websocket.writer.ZLibCompressor": aiohttp._websocket.writer.ZLibCompressor,
        "aiohttp._websocket.reader_c.ZLibDecompressor":
            aiohttp._websocket.reader_c.ZLibDecompressor,
        "aiohttp._websocket.reader_py.ZLibDecompressor":
            aiohttp._websocket.reader_py.ZLibDecompressor,
        "wsproto.extensions.PerMessageDeflate.__new__":  # (none: as the stock-like one)
            wsproto.extensions.PerMessageDeflate.__dict__.get("__new__", fd_wsproto._stock_new),
        "tornado.websocket._PerMessageDeflateCompressor":
            tornado.websocket._PerMessageDeflateCompressor,
        "tornado.websocket._PerMessageDeflateDecompressor":
            tornado.websocket._PerMessageDeflateDecompressor,
    }
    if AUTOBAHN:
        registry = autobahn.websocket.compress.PERMESSAGE_COMPRESSION_EXTENSION
        points[AUTOBAHN_HOOK] = registry["permessage-deflate"]["PMCE"]
    return points


AUTOBAHN_HOOK = "autobahn PERMESSAGE_COMPRESSION_EXTENSION['permessage-deflate']['PMCE']"


#: What enable() puts at each hook point.
ADAPTER_OBJECTS = {
    "websockets.extensions.permessage_deflate.PerMessageDeflate": fd_websockets.PerMessageDeflate,
    "aiohttp._websocket.writer.ZLibCompressor": fd_aiohttp.WebSocketCompressor,
    "aiohttp._websocket.reader_c.ZLibDecompressor": fd_aiohttp.WebSocketDecompressor,
    "aiohttp._websocket.reader_py.ZLibDecompressor": fd_aiohttp.WebSocketDecompressor,
    "wsproto.extensions.PerMessageDeflate.__new__": fd_wsproto._fastdeflate_new,
    "tornado.websocket._PerMessageDeflateCompressor": fd_tornado.FastDeflateCompressor,
    "tornado.websocket._PerMessageDeflateDecompressor": fd_tornado.FastDeflateDecompressor,
}
if AUTOBAHN:
    ADAPTER_OBJECTS[AUTOBAHN_HOOK] = fd_autobahn.PerMessageDeflate

#: The libraries' own objects, taken when this module is imported (nothing enabled yet).
STOCK = hook_points()


def assert_stock() -> None:
    """Every hook point holds exactly the library's own object again."""
    now = hook_points()
    for name, original in STOCK.items():
        assert now[name] is original, f"{name} is {now[name]!r}, not the stock {original!r}"
        assert original is fd_wsproto._stock_new or not (  # (the stock-like one, or none)
            getattr(original, "__module__", None) or "").startswith("fastdeflate"), name


def enable_everything() -> list[str]:
    """The one line an application adds: ``fastdeflate.enable()``. Where only the fallback
    was imported (``FASTDEFLATE_PURE=1``) enable() keeps the libraries stock unless asked
    for the fallback, so ask then (the ``use_impl`` fixture picks the codec either way)."""
    if fastdeflate.IMPLEMENTATION == "cython":
        return fastdeflate.enable()
    return fastdeflate.enable(fallback=True)


@pytest.fixture
def enabled(use_impl: ModuleType) -> Iterator[ModuleType]:
    """fastdeflate on for every library through the one line; stock again afterwards."""
    assert fastdeflate.integrations.enabled() == []
    assert enable_everything() == LIBRARIES
    try:
        yield use_impl
    finally:
        assert fastdeflate.disable() == LIBRARIES
        assert_stock()


# ------------------------------------------------------------------------ messages


def message_plan(sizes: tuple[int, ...]) -> list[Message]:
    """Text and binary messages of each size, then all of them again (and a variant):
    the repeats are compressed against the previous messages' window."""
    first = [m for n in sizes for m in (make_text(n, n), make_binary(n, n))]
    variant = [m for n in sizes for m in (make_text(n, n + 1), make_binary(n, n + 1))]
    return first + first + variant


def codec_types(holders: list[Any], impl: ModuleType) -> set[type]:
    """Types of ``impl``'s codec objects that ``holders`` (a peer's extension /
    compressor / decompressor objects) keep as attributes."""
    candidates = {impl.Compressor, impl.Decompressor}
    types = {type(value) for holder in holders
             for value in getattr(holder, "__dict__", {}).values()}
    for holder in holders:
        # Without context takeover these hold a codec only during a message; the
        # adapter makes each from fastdeflate's classes (the implementation in use).
        if isinstance(holder, fd_websockets.PerMessageDeflate) and not holder._stock_encoder:
            types |= {type(holder._new_compressor()), type(holder._new_decompressor())}
        if isinstance(holder, fd_wsproto.PerMessageDeflate):
            types |= {fastdeflate.Compressor, fastdeflate.Decompressor}
    return types & candidates


# ------------------------------------------------------------------------ servers
#
# Each server is an async context manager with ``port`` and ``codec_holders()``: the
# objects holding the server side's codec for the connection that is open right now.


class WebsocketsServer:
    """websockets' asyncio server with its default compression (window 12, memLevel 5)."""

    async def __aenter__(self) -> "WebsocketsServer":
        self.connections: list[Any] = []
        self.server = await websockets.asyncio.server.serve(self.echo, HOST, 0, max_size=MAX_SIZE)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def echo(self, ws: websockets.asyncio.server.ServerConnection) -> None:
        self.connections.append(ws)
        async for message in ws:
            await ws.send(message)

    def codec_holders(self) -> list[Any]:
        return list(self.connections[-1].protocol.extensions)

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        await self.server.wait_closed()


def aiohttp_parser(ws: Any, request: Optional[web.Request] = None) -> Any:
    """The WebSocketReader of an aiohttp connection (server: give ``request``)."""
    parser = getattr(ws, "_parser", None)
    if parser is None:
        protocol = request.protocol if request is not None else ws._response.connection.protocol
        parser = protocol._payload_parser
    return getattr(parser, "reader", parser)  # behind fastdeflate's gate (off-loop)


def aiohttp_codec_holders(ws: Any, request: Optional[web.Request] = None) -> list[Any]:
    """The writer's compressor and whatever the (Cython or Python) reader refers to."""
    parser = aiohttp_parser(ws, request)
    referents = gc.get_referents(parser) + list(getattr(parser, "__dict__", {}).values())
    return [ws._writer._compressobj, *referents]


class AiohttpServer:
    """An aiohttp application with a ``WebSocketResponse`` (compress=True, its default)."""

    async def __aenter__(self) -> "AiohttpServer":
        self.connections: list[tuple[web.WebSocketResponse, web.Request]] = []
        app = web.Application()
        app.router.add_get("/", self.echo)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, HOST, 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def echo(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=MAX_SIZE)
        await ws.prepare(request)
        self.connections.append((ws, request))
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                await ws.send_str(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
        return ws

    def codec_holders(self) -> list[Any]:
        return aiohttp_codec_holders(*self.connections[-1])

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


async def uvicorn_echo(scope: dict, receive: Callable, send: Callable) -> None:
    """An ASGI echo application."""
    assert scope["type"] == "websocket"
    assert (await receive())["type"] == "websocket.connect"
    await send({"type": "websocket.accept"})
    while True:
        event = await receive()
        if event["type"] == "websocket.disconnect":
            return
        if event.get("text") is not None:
            await send({"type": "websocket.send", "text": event["text"]})
        else:
            await send({"type": "websocket.send", "bytes": event["bytes"]})


class WsprotoServer:
    """uvicorn ``--ws wsproto`` (per-message-deflate on, its default) on this loop."""

    async def __aenter__(self) -> "WsprotoServer":
        sock = socket.create_server((HOST, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            uvicorn_echo, ws="wsproto", interface="asgi3", lifespan="off",
            log_config=None, log_level="error", ws_max_size=MAX_SIZE,
        )
        self.server = uvicorn.Server(config)
        self.task = asyncio.create_task(self.server.serve(sockets=[sock]))
        for _ in range(int(STEP / 0.01)):
            if self.server.started or self.task.done():
                break
            await asyncio.sleep(0.01)
        assert self.server.started, "uvicorn did not start"
        return self

    def codec_holders(self) -> list[Any]:
        (protocol,) = self.server.server_state.connections
        return list(protocol.conn.connection._proto.extensions)

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, STEP)


class TornadoEcho(tornado.websocket.WebSocketHandler):
    """Echoes each message; compression on with tornado's defaults."""

    connections: list["TornadoEcho"]

    def get_compression_options(self) -> dict[str, Any]:
        return {}

    def open(self) -> None:
        self.connections.append(self)

    def on_message(self, message: Union[str, bytes]) -> None:
        self.write_message(message, binary=isinstance(message, bytes))


class TornadoServer:
    """A tornado ``HTTPServer`` with one ``WebSocketHandler``."""

    async def __aenter__(self) -> "TornadoServer":
        self.connections: list[TornadoEcho] = []
        handler = type("Echo", (TornadoEcho,), {"connections": self.connections})
        sockets = tornado.netutil.bind_sockets(0, HOST)
        app = tornado.web.Application([("/", handler)], websocket_max_message_size=MAX_SIZE)
        self.server = tornado.httpserver.HTTPServer(app)
        self.server.add_sockets(sockets)
        self.port = sockets[0].getsockname()[1]
        return self

    def codec_holders(self) -> list[Any]:
        protocol = self.connections[-1].ws_connection
        return [protocol._compressor, protocol._decompressor]

    async def __aexit__(self, *exc: object) -> None:
        self.server.stop()
        await self.server.close_all_connections()


class AutobahnEcho:
    """The server protocol's callbacks (mixed into autobahn's WebSocketServerProtocol)."""

    def onOpen(self) -> None:
        self.factory.connections.append(self)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.sendMessage(payload, isBinary)


def autobahn_accept_offer(offers: list[Any]) -> Optional[PerMessageDeflateOfferAccept]:
    """Accept the first permessage-deflate offer as it is (autobahn's defaults)."""
    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(offer)
    return None


class AutobahnServer:
    """autobahn's asyncio server, accepting permessage-deflate offers."""

    async def __aenter__(self) -> "AutobahnServer":
        loop = asyncio.get_running_loop()
        factory = WebSocketServerFactory(f"ws://{HOST}", loop=loop)
        factory.protocol = type("Echo", (AutobahnEcho, WebSocketServerProtocol), {})
        factory.connections = []
        factory.setProtocolOptions(
            perMessageCompressionAccept=autobahn_accept_offer,
            maxMessagePayloadSize=MAX_SIZE,
            **autobahn_patience(STEP),
        )
        self.factory = factory
        self.listener = await loop.create_server(factory, HOST, 0)
        self.port = self.listener.sockets[0].getsockname()[1]
        return self

    def codec_holders(self) -> list[Any]:
        return list(self.factory.connections[-1].websocket_extensions_in_use)

    async def __aexit__(self, *exc: object) -> None:
        self.listener.close()
        await asyncio.wait_for(self.listener.wait_closed(), STEP)


# ------------------------------------------------------------------------ clients
#
# Each client is an async context manager made with the server's port, with
# ``extensions`` (the response's Sec-WebSocket-Extensions), ``send``, ``recv``,
# ``codec_holders()`` and ``close()``, which returns the close code the server answered.


class WebsocketsClient:
    """websockets' asyncio client with its default compression."""

    def __init__(self, port: int) -> None:
        self.url = f"ws://{HOST}:{port}/"

    async def __aenter__(self) -> "WebsocketsClient":
        self.ws = await websockets.asyncio.client.connect(self.url, max_size=MAX_SIZE)
        self.extensions = self.ws.response.headers.get("Sec-WebSocket-Extensions", "")
        return self

    async def send(self, message: Message) -> None:
        await self.ws.send(message)

    async def recv(self) -> Message:
        return await self.ws.recv()

    def codec_holders(self) -> list[Any]:
        return list(self.ws.protocol.extensions)

    async def close(self) -> Optional[int]:
        await self.ws.close()
        return self.ws.protocol.close_code  # (websockets < 15 has no ws.close_code)

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()


class AiohttpClient:
    """aiohttp's ``ws_connect`` with ``compress=15`` (aiohttp's client offers nothing
    by default)."""

    def __init__(self, port: int) -> None:
        self.url = f"http://{HOST}:{port}/"

    async def __aenter__(self) -> "AiohttpClient":
        self.session = aiohttp.ClientSession()
        try:
            self.ws = await self.session.ws_connect(self.url, compress=15, max_msg_size=MAX_SIZE)
        except BaseException:
            await self.session.close()
            raise
        self.extensions = self.ws._response.headers.get("Sec-WebSocket-Extensions", "")
        assert self.ws.compress, "aiohttp did not negotiate compression"
        return self

    async def send(self, message: Message) -> None:
        if isinstance(message, str):
            await self.ws.send_str(message)
        else:
            await self.ws.send_bytes(message)

    async def recv(self) -> Message:
        msg = await self.ws.receive()
        assert msg.type in (WSMsgType.TEXT, WSMsgType.BINARY), msg
        return msg.data

    def codec_holders(self) -> list[Any]:
        return aiohttp_codec_holders(self.ws)

    async def close(self) -> Optional[int]:
        await self.ws.close()
        return self.ws.close_code

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.session.close()


class WsprotoClient:
    """A minimal asyncio driver over ``wsproto.WSConnection`` offering wsproto's
    ``PerMessageDeflate()`` with its defaults."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def __aenter__(self) -> "WsprotoClient":
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.events: list[Any] = []
        extension = wsproto.extensions.PerMessageDeflate()
        await self._send(Request(host=f"{HOST}:{self.port}", target="/", extensions=[extension]))
        self.received = bytearray()  # the raw handshake response (wsproto consumes the
        accept = await self._next_event()  # extensions header: read it from the wire)
        assert isinstance(accept, AcceptConnection), accept
        assert [type(e) for e in accept.extensions] == [type(extension)]
        head = bytes(self.received).split(b"\r\n\r\n")[0].decode("latin-1")
        headers = dict(line.split(": ", 1) for line in head.split("\r\n")[1:])
        self.extensions = {k.lower(): v for k, v in headers.items()}.get(
            "sec-websocket-extensions", ""
        )
        del self.received
        return self

    async def _send(self, event: Any) -> None:
        self.writer.write(self.ws.send(event))
        await self.writer.drain()

    async def _next_event(self) -> Any:
        while not self.events:
            self.events.extend(self.ws.events())
            if self.events:
                break
            data = await self.reader.read(65536)
            if hasattr(self, "received"):
                self.received += data
            self.ws.receive_data(data or None)
        return self.events.pop(0)

    async def send(self, message: Message) -> None:
        await self._send(wsproto.events.Message(data=message))

    async def recv(self) -> Message:
        chunks: list[Any] = []
        while True:
            event = await self._next_event()
            if isinstance(event, Ping):
                await self._send(event.response())
                continue
            assert isinstance(event, (TextMessage, BytesMessage)), event
            chunks.append(event.data)
            if event.message_finished:
                # (BytesMessage.data is bytes or bytearray as wsproto's version has it —
                # 1.2 even as the message came compressed or not —: compared as bytes)
                message = chunks[0][:0].join(chunks)
                return bytes(message) if isinstance(message, bytearray) else message

    def codec_holders(self) -> list[Any]:
        assert self.ws.connection is not None
        return list(self.ws.connection._proto.extensions)

    async def close(self) -> Optional[int]:
        await self._send(CloseConnection(code=1000))
        while True:
            event = await self._next_event()
            if isinstance(event, CloseConnection):
                return int(event.code)

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


class TornadoClient:
    """tornado's ``websocket_connect`` with compression (``compression_options={}``)."""

    def __init__(self, port: int) -> None:
        self.url = f"ws://{HOST}:{port}/"

    async def __aenter__(self) -> "TornadoClient":
        self.conn = await tornado.websocket.websocket_connect(
            self.url, compression_options={}, max_message_size=MAX_SIZE
        )
        self.extensions = self.conn.headers.get("Sec-WebSocket-Extensions", "")
        return self

    async def send(self, message: Message) -> None:
        await self.conn.write_message(message, binary=isinstance(message, bytes))

    async def recv(self) -> Message:
        message = await self.conn.read_message()
        assert message is not None, "connection closed"
        return message

    def codec_holders(self) -> list[Any]:
        return [self.conn.protocol._compressor, self.conn.protocol._decompressor]

    async def close(self) -> Optional[int]:
        self.conn.close(1000)
        assert await self.conn.read_message() is None  # returns once the close is done
        return self.conn.close_code

    async def __aexit__(self, *exc: object) -> None:
        self.conn.close()


class AutobahnClientEvents:
    """The client protocol's callbacks (mixed into autobahn's WebSocketClientProtocol)."""

    def onConnect(self, response: Any) -> None:
        self.factory.headers = response.headers

    def onOpen(self) -> None:
        self.factory.opened.set_result(self)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.factory.messages.put_nowait(payload if isBinary else payload.decode())

    def onClose(self, wasClean: bool, code: Optional[int], reason: Optional[str]) -> None:
        if not self.factory.closed.done():
            self.factory.closed.set_result((wasClean, code))


def autobahn_accept_response(response: Any) -> Optional[PerMessageDeflateResponseAccept]:
    if isinstance(response, PerMessageDeflateResponse):
        return PerMessageDeflateResponseAccept(response)
    return None


class AutobahnClient:
    """autobahn's asyncio client offering permessage-deflate with autobahn's defaults."""

    def __init__(self, port: int) -> None:
        self.port = port

    async def __aenter__(self) -> "AutobahnClient":
        loop = asyncio.get_running_loop()
        factory = WebSocketClientFactory(f"ws://{HOST}:{self.port}/", loop=loop)
        factory.protocol = type("Client", (AutobahnClientEvents, WebSocketClientProtocol), {})
        factory.opened = loop.create_future()
        factory.closed = loop.create_future()
        factory.messages = asyncio.Queue()
        factory.setProtocolOptions(
            perMessageCompressionOffers=[PerMessageDeflateOffer()],
            perMessageCompressionAccept=autobahn_accept_response,
            maxMessagePayloadSize=MAX_SIZE,
            **autobahn_patience(STEP),
        )
        self.factory = factory
        await loop.create_connection(factory, HOST, self.port)
        self.proto = await asyncio.wait_for(factory.opened, STEP)
        self.extensions = factory.headers.get("sec-websocket-extensions", "")
        return self

    async def send(self, message: Message) -> None:
        if isinstance(message, str):
            self.proto.sendMessage(message.encode(), False)
        else:
            self.proto.sendMessage(message, True)

    async def recv(self) -> Message:
        return await self.factory.messages.get()

    def codec_holders(self) -> list[Any]:
        return list(self.proto.websocket_extensions_in_use)

    async def close(self) -> Optional[int]:
        self.proto.sendClose(1000)
        clean, code = await asyncio.wait_for(self.factory.closed, STEP)
        assert clean
        return code

    async def __aexit__(self, *exc: object) -> None:
        if not self.factory.closed.done():
            self.proto.dropConnection(abort=True)


SERVERS: dict[str, Callable[[], Any]] = {
    "websockets": WebsocketsServer,
    "aiohttp": AiohttpServer,
    "wsproto": WsprotoServer,
    "tornado": TornadoServer,
    "autobahn": AutobahnServer,
}
CLIENTS: dict[str, Callable[[int], Any]] = {
    "websockets": WebsocketsClient,
    "aiohttp": AiohttpClient,
    "wsproto": WsprotoClient,
    "tornado": TornadoClient,
    "autobahn": AutobahnClient,
}
if not AUTOBAHN:
    del SERVERS["autobahn"], CLIENTS["autobahn"]
assert list(SERVERS) == list(CLIENTS) == LIBRARIES

#: The pairs that also echo 1 MiB messages: each library with itself.
LARGE_PAIRS = {(name, name) for name in LIBRARIES}


# ------------------------------------------------------------------------ the matrix


async def echo_session(
    server_name: str, client_name: str, sizes: tuple[int, ...]
) -> tuple[str, list[Any], list[Any], Optional[int]]:
    """Run one connection from ``client_name`` to ``server_name``: every message of the
    plan is sent and its echo compared. Returns (the response's extensions header, the
    server's and the client's codec holders, the close code the server answered)."""
    async with SERVERS[server_name]() as server:
        async with CLIENTS[client_name](server.port) as client:
            for i, message in enumerate(message_plan(sizes)):
                await asyncio.wait_for(client.send(message), STEP)
                echo = await asyncio.wait_for(client.recv(), STEP)
                assert type(echo) is type(message), f"message {i}: {type(echo)}"
                assert echo == message, f"message {i} ({len(message)}) differs"
            server_holders = server.codec_holders()
            client_holders = client.codec_holders()
            close_code = await asyncio.wait_for(client.close(), STEP)
    return client.extensions, server_holders, client_holders, close_code


def run_pair(server_name: str, client_name: str, sizes: tuple[int, ...]) -> tuple:
    return asyncio.run(asyncio.wait_for(echo_session(server_name, client_name, sizes), 60))


PAIRS = [(server, client) for server in LIBRARIES for client in LIBRARIES]


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "server_name,client_name", PAIRS, ids=[f"{s}-server-{c}-client" for s, c in PAIRS]
)
def test_pair_echoes_compressed(enabled: ModuleType, server_name: str, client_name: str) -> None:
    sizes = SMALL_SIZES
    if (server_name, client_name) in LARGE_PAIRS:
        sizes += (LARGE_SIZE,)
    extensions, server_holders, client_holders, close_code = run_pair(
        server_name, client_name, sizes
    )
    assert extensions.startswith("permessage-deflate"), extensions
    both = {enabled.Compressor, enabled.Decompressor}
    assert codec_types(server_holders, enabled) == both, f"{server_name} server: {server_holders}"
    assert codec_types(client_holders, enabled) == both, f"{client_name} client: {client_holders}"
    assert close_code == 1000


# ------------------------------------------------------------------------ enable / disable


def test_enable_lists_every_library_and_disable_restores_stock(use_impl: ModuleType) -> None:
    assert fastdeflate.integrations.enabled() == []
    assert_stock()
    try:
        assert enable_everything() == LIBRARIES
        assert enable_everything() == LIBRARIES  # idempotent
        assert fastdeflate.integrations.enabled() == LIBRARIES
        now = hook_points()
        for name, adapter_object in ADAPTER_OBJECTS.items():
            assert now[name] is adapter_object, name
    finally:
        assert fastdeflate.disable() == LIBRARIES
    assert fastdeflate.integrations.enabled() == []
    assert fastdeflate.disable() == []  # nothing left to undo
    assert_stock()
    for module in ADAPTERS:
        assert not module.is_enabled()


# ------------------------------------------------------------------------ without autobahn

#: Runs pytest as on Python 3.10, where the extras install no autobahn (fastdeflate's
#: adapter needs autobahn >= 26.10.1, which needs 3.11): autobahn cannot be imported and
#: ``AUTOBAHN_SUPPORTED`` is False.
ON_PYTHON_3_10 = """
import sys
sys.modules["autobahn"] = None  # `import autobahn` fails, find_spec("autobahn") is None
sys.path.insert(0, sys.argv.pop(1))
import integrations._support
integrations._support.AUTOBAHN_SUPPORTED = False
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def pytest_without_autobahn(case: str, workdir: Path, *args: str
                            ) -> subprocess.CompletedProcess[str]:
    """pytest on this module and test_autobahn.py, with autobahn unimportable: on Python
    3.10 (``unsupported``), or on a wheel target whose test set lacks it (``absent``)."""
    tests = Path(__file__).resolve().parent
    files = [__file__, str(tests / "test_autobahn.py")]
    if case == "absent":
        return pytest_without_peers(["autobahn"], workdir, "-q", *files, *args, timeout=150)
    # (no skip check there: its Python-version condition cannot be forced)
    environ = {k: v for k, v in os.environ.items() if k != "FASTDEFLATE_CHECK_SKIPS"}
    return subprocess.run(
        [sys.executable, "-c", ON_PYTHON_3_10, str(tests.parent), "-q", "-p",
         "no:cacheprovider", *files, *args],
        cwd=workdir, env=environ, capture_output=True, text=True, timeout=150,
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", ["unsupported", "absent"])
def test_pairs_without_autobahn_still_run(case: str, tmp_path: Path) -> None:
    """The 16 pairs of the other four libraries are collected and run without autobahn
    (a wholesale skip there once dropped all of them on Python 3.10)."""
    collected = pytest_without_autobahn(case, tmp_path, "--collect-only")
    pairs = [line.split("[", 1)[1].rstrip("]") for line in collected.stdout.splitlines()
             if "::test_pair_echoes_compressed[" in line]
    expected = {f"{impl}-{s}-server-{c}-client" for impl in ("cython", "python")
                for s in LIBRARIES[:4] for c in LIBRARIES[:4]}
    assert set(pairs) == expected, collected.stdout + collected.stderr
    ran = pytest_without_autobahn(
        case, tmp_path, "-rs", "-k", "cython-tornado-server-aiohttp-client or "
        "python-wsproto-server-websockets-client or test_enable_lists_every_library")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "4 passed, 1 skipped" in ran.stdout, ran.stdout  # test_autobahn.py: skipped
    reason = ("optional test peer autobahn is not installed" if case == "absent" else
              "the autobahn that fastdeflate supports (>= 26.10.1) needs Python 3.11")
    assert reason in ran.stdout, ran.stdout
