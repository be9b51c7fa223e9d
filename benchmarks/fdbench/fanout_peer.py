"""The server process of the fan-out benchmark: the broadcast server, in other libraries.

``python -m fdbench.fanout_peer --library L --mode M --clients N --broadcasts B ...`` runs
a server of library L (aiohttp, wsproto, tornado or autobahn) on 127.0.0.1 and an
ephemeral port that behaves exactly as ``fdbench.broadcast_peer``'s websockets server:
the same stdin/stdout lines (``{"port": P, ...}``, then ``go`` and ``stop``), the same
updates (:func:`fdbench.broadcast_peer.update`, :func:`~fdbench.broadcast_peer.private`),
join points and acknowledgements, and the same report, so that ``python -m
fdbench.broadcast_peer clients ...`` (websockets' client, stock) is its other side.

How each library sends one update to every client (:data:`LIBRARIES`):

- ``stock``, ``enabled`` and ``off`` run the same application code, the fan-out a user of
  that library writes: aiohttp ``for ws in room: if not ws.closed: await
  ws.send_str(text)``; tornado ``write_message(text)`` per handler, skipping
  ``WebSocketClosedError`` (tornado's chat demo); autobahn ``sendMessage(text.encode())``
  per protocol (its ``BroadcastServerFactory`` example); wsproto ``transport.write(
  conn.send(Message(data=text)))`` per connection over an asyncio transport.
- ``enabled`` is that code with ``fastdeflate.enable()`` called after the imports;
  ``enabled-helper`` the same with the loop replaced by fastdeflate's helper for the
  library (``fastdeflate.integrations.<library>.broadcast``).
- Compression: each library's own defaults with compression on (aiohttp
  ``WebSocketResponse()``'s ``compress=True``, tornado ``get_compression_options()``
  returning ``{}``,
  autobahn accepting the client's permessage-deflate offer with
  ``PerMessageDeflateOfferAccept(offer)``, wsproto ``PerMessageDeflate()``); ``off``
  accepts no extension.

Private updates use each library's ordinary send (the same in every mode). On ``stop`` the
server prints its CPU seconds since ``go`` (``time.process_time``), what it sent, the
codec objects its connections hold and their extension classes (found from inside this
process) and ``fastdeflate.status()["compress_once"]`` (how many deliveries took another
connection's payload), then waits for the clients to close (up to 60 s) and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from .broadcast_peer import _say, join_points, private, update
from .server_peer import Holders, _codecs, _stdin_line, aiohttp_site, raise_fd_limit

MODES = ("stock", "enabled", "enabled-helper", "off")
#: Modes that call ``fastdeflate.enable()`` (after the library's imports).
ENABLED = ("enabled", "enabled-helper")


def _kind(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class Room:
    """What every library's server shares: the members in the order they joined, and
    client 0's acknowledgements."""

    def __init__(self) -> None:
        self.members: dict[int, Any] = {}  # id -> connection
        self.arrived = asyncio.Event()
        self.acked = -1
        self.ack_seen = asyncio.Event()
        self.kinds: Counter[str] = Counter()  # extension classes of the connections
        self.open = 0  # connections open (to wait for the clients to close)
        self.left = asyncio.Event()

    def join(self, ident: int, conn: Any, kind: str) -> None:
        """Connection ``conn`` of client ``ident`` is open; ``kind`` names its extension
        (``""``: none)."""
        self.members[ident] = conn
        if kind:
            self.kinds[kind] += 1
        self.open += 1
        self.arrived.set()

    def leave(self) -> None:
        self.open -= 1
        self.left.set()

    def message(self, text: str) -> None:
        """A message from a client: client 0's ``ack K``."""
        if text.startswith("ack "):
            self.acked = max(self.acked, int(text.split()[1]))
            self.ack_seen.set()

    async def until(self, condition: Callable[[], bool], event: asyncio.Event,
                    timeout: float = 120) -> None:
        """Wait (up to ``timeout`` s) until ``condition()``, checked whenever ``event``
        is set."""
        async def wait() -> None:
            while not condition():
                event.clear()
                await event.wait()

        await asyncio.wait_for(wait(), timeout)


Send = Callable[[list[Any], str], Awaitable[None]]
Started = tuple[int, Callable[[], Awaitable[None]]]  # port, and how to close the server


@dataclass(frozen=True)
class Library:
    """One library's server: how it starts, fans out, sends one message, and where its
    connections keep their codec objects."""

    imports: tuple[str, ...]  # imported before fastdeflate.enable(), as an application does
    start: Callable[[Room, bool], Awaitable[Started]]  # (room, compression) -> started
    loop: Send  # the application's own fan-out (stock, enabled, off)
    helper: Send  # fastdeflate.integrations.<library>.broadcast (enabled-helper)
    send: Callable[[Any, str], Awaitable[None]]  # one private message
    holders: Holders


# --- aiohttp -------------------------------------------------------------------------------


async def _aiohttp_start(room: Room, compression: bool) -> Started:
    from aiohttp import WSMsgType, web

    async def handler(request: Any) -> Any:
        ws = web.WebSocketResponse(compress=compression, max_msg_size=0)
        await ws.prepare(request)
        room.join(int(request.match_info["ident"]), ws,
                  f"aiohttp compress={ws.compress}" if ws.compress else "")
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    room.message(msg.data)
        finally:
            room.leave()
        return ws

    port, runner = await aiohttp_site(handler, "/{ident}")
    return port, runner.cleanup


async def _aiohttp_loop(members: list[Any], text: str) -> None:
    for ws in members:
        if not ws.closed:
            await ws.send_str(text)


async def _aiohttp_helper(members: list[Any], text: str) -> None:
    from fastdeflate.integrations.aiohttp import broadcast

    await broadcast(members, text)


async def _aiohttp_send(ws: Any, text: str) -> None:
    await ws.send_str(text)


def _aiohttp_holders(ws: Any) -> list[Any]:  # aiohttp creates its codec objects on first use
    return [ws._writer._compressobj, ws._parser]


# --- tornado -------------------------------------------------------------------------------


async def _tornado_start(room: Room, compression: bool) -> Started:
    import tornado.httpserver
    import tornado.netutil
    import tornado.web
    import tornado.websocket

    class Member(tornado.websocket.WebSocketHandler):
        def get_compression_options(self) -> Optional[dict[str, Any]]:
            return {} if compression else None  # {}: on, tornado's defaults

        def open(self, ident: str) -> None:  # type: ignore[override]
            protocol = self.ws_connection
            compressed = protocol is not None and protocol._compressor is not None
            room.join(int(ident), self, _kind(protocol) if compressed else "")

        def on_message(self, message: Any) -> None:
            room.message(message)

        def on_close(self) -> None:
            room.leave()

    app = tornado.web.Application([(r"/(\d+)", Member)])
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server = tornado.httpserver.HTTPServer(app)
    server.add_sockets(sockets)

    async def close() -> None:
        server.stop()

    return sockets[0].getsockname()[1], close


async def _tornado_loop(members: list[Any], text: str) -> None:
    import tornado.websocket

    for handler in members:
        try:
            handler.write_message(text)
        except tornado.websocket.WebSocketClosedError:
            pass


async def _tornado_helper(members: list[Any], text: str) -> None:
    from fastdeflate.integrations.tornado import broadcast

    broadcast(members, text)


async def _tornado_send(handler: Any, text: str) -> None:
    handler.write_message(text)


def _tornado_holders(handler: Any) -> list[Any]:
    protocol = handler.ws_connection
    return [protocol._compressor, protocol._decompressor] if protocol else []


# --- autobahn ------------------------------------------------------------------------------


async def _autobahn_start(room: Room, compression: bool) -> Started:
    from autobahn.asyncio.websocket import WebSocketServerFactory, WebSocketServerProtocol
    from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

    class Member(WebSocketServerProtocol):
        ident = -1

        def onConnect(self, request: Any) -> None:
            self.ident = int(request.path.strip("/"))

        def onOpen(self) -> None:
            pmce = self._perMessageCompress
            room.join(self.ident, self, _kind(pmce) if pmce is not None else "")

        def onMessage(self, payload: bytes, isBinary: bool) -> None:  # noqa: N803
            room.message(payload.decode("utf-8"))

        def onClose(self, wasClean: bool, code: Any, reason: Any) -> None:  # noqa: N803
            if self.ident in room.members and room.members[self.ident] is self:
                room.leave()

    def accept(offers: list[Any]) -> Any:  # autobahn accepts nothing unless told to
        for offer in offers:
            if isinstance(offer, PerMessageDeflateOffer):
                return PerMessageDeflateOfferAccept(offer)
        return None

    factory = WebSocketServerFactory("ws://127.0.0.1")
    factory.protocol = Member
    if compression:
        factory.setProtocolOptions(perMessageCompressionAccept=accept)
    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)

    async def close() -> None:
        server.close()

    return server.sockets[0].getsockname()[1], close


async def _autobahn_loop(members: list[Any], text: str) -> None:
    for protocol in members:  # autobahn's BroadcastServerFactory example
        protocol.sendMessage(text.encode("utf8"))


async def _autobahn_helper(members: list[Any], text: str) -> None:
    from fastdeflate.integrations.autobahn import broadcast

    broadcast(members, text)


async def _autobahn_send(protocol: Any, text: str) -> None:
    protocol.sendMessage(text.encode("utf8"))


def _autobahn_holders(protocol: Any) -> list[Any]:
    return list(protocol.websocket_extensions_in_use)


# --- wsproto -------------------------------------------------------------------------------


async def _wsproto_start(room: Room, compression: bool) -> Started:
    import wsproto.extensions
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, CloseConnection, Ping, Request, TextMessage

    class Member(asyncio.Protocol):
        """A plain asyncio server on wsproto (which does the HTTP handshake with h11)."""

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.ws = WSConnection(ConnectionType.SERVER)
            self.extension: Any = None
            self.parts: list[str] = []
            self.joined = False

        def data_received(self, data: bytes) -> None:
            ws = self.ws
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, Request):
                    extensions = []
                    if compression:  # looked up now, as an application does
                        self.extension = wsproto.extensions.PerMessageDeflate()
                        extensions.append(self.extension)
                    self.transport.write(ws.send(AcceptConnection(extensions=extensions)))
                    self.joined = True
                    accepted = any(e is self.extension
                                   for e in ws.connection._proto.extensions)  # enabled()
                    room.join(int(event.target.strip("/")), self,
                              _kind(self.extension) if accepted else "")
                elif isinstance(event, TextMessage):
                    self.parts.append(event.data)
                    if event.message_finished:
                        room.message("".join(self.parts))
                        self.parts = []
                elif isinstance(event, Ping):
                    self.transport.write(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self.transport.write(ws.send(event.response()))
                    self.transport.close()

        def connection_lost(self, exc: object) -> None:
            if self.joined:
                room.leave()

    server = await asyncio.get_running_loop().create_server(Member, "127.0.0.1", 0)

    async def close() -> None:
        server.close()

    return server.sockets[0].getsockname()[1], close


async def _wsproto_loop(members: list[Any], text: str) -> None:
    from wsproto.events import Message

    for member in members:
        member.transport.write(member.ws.send(Message(data=text)))


async def _wsproto_helper(members: list[Any], text: str) -> None:
    from fastdeflate.integrations.wsproto import broadcast

    for member, data in zip(members, broadcast([m.ws for m in members], text)):
        member.transport.write(data)


async def _wsproto_send(member: Any, text: str) -> None:
    from wsproto.events import Message

    member.transport.write(member.ws.send(Message(data=text)))


def _wsproto_holders(member: Any) -> list[Any]:
    return [member.extension]


LIBRARIES: dict[str, Library] = {
    "aiohttp": Library(("aiohttp.web",), _aiohttp_start, _aiohttp_loop, _aiohttp_helper,
                       _aiohttp_send, _aiohttp_holders),
    "wsproto": Library(("wsproto", "wsproto.extensions", "wsproto.events"), _wsproto_start,
                       _wsproto_loop, _wsproto_helper, _wsproto_send, _wsproto_holders),
    "tornado": Library(("tornado.httpserver", "tornado.netutil", "tornado.web",
                        "tornado.websocket"), _tornado_start, _tornado_loop, _tornado_helper,
                       _tornado_send, _tornado_holders),
    "autobahn": Library(("autobahn.asyncio.websocket", "autobahn.websocket.compress"),
                        _autobahn_start, _autobahn_loop, _autobahn_helper, _autobahn_send,
                        _autobahn_holders),
}


# --- the server ----------------------------------------------------------------------------


def _chosen(members: list[Any], k: int, private_every: int, private_one_in: int,
            sent: int) -> list[Any]:
    """The clients that get a private update after broadcast ``k`` (as broadcast_peer)."""
    if private_one_in:  # one client in K, rotating
        start = (k // private_every) % private_one_in
        return members[start::private_one_in]
    return [members[sent % len(members)]]  # one client, round-robin


async def serve(library: str, mode: str, clients: int, broadcasts: int, joiners: int,
                private_every: int, ack_every: int, private_one_in: int = 0) -> None:
    """broadcast_peer's ``serve()``, on ``library``."""
    limit = raise_fd_limit()
    lib = LIBRARIES[library]
    for module in lib.imports:
        importlib.import_module(module)
    import fastdeflate

    enabled = fastdeflate.enable() if mode in ENABLED else []
    fan_out = lib.helper if mode == "enabled-helper" else lib.loop
    room = Room()
    port, close = await lib.start(room, mode != "off")
    _say({"port": port, "pid": os.getpid(), "fd_limit": limit, "enabled": enabled,
          "implementation": fastdeflate.IMPLEMENTATION, "engine": fastdeflate.ENGINE,
          "library": library})
    await _stdin_line()  # "go"
    await room.until(lambda: len(room.members) >= clients, room.arrived)
    initial = len(room.members)
    points = Counter(join_points(broadcasts, joiners))
    expected = initial
    deliveries = sent_private = 0
    cpu0 = time.process_time()
    for k in range(broadcasts):
        if k in points:  # late joiners: client 0 connects them once it has k - 1
            expected += points[k]
            await room.until(lambda: len(room.members) >= expected, room.arrived)
        if k >= 2 * ack_every:
            await room.until(lambda: room.acked >= k - 2 * ack_every, room.ack_seen)
        members = list(room.members.values())
        await fan_out(members, update(k))
        deliveries += len(members)
        if (k + 1) % private_every == 0 and k < broadcasts - 1:
            for target in _chosen(members, k, private_every, private_one_in, sent_private):
                await lib.send(target, private(sent_private))
                sent_private += 1
    await _stdin_line()  # "stop": every client has every message
    cpu = time.process_time() - cpu0
    conns = set(room.members.values())
    _say({"cpu": cpu, "broadcasts": broadcasts, "deliveries": deliveries + sent_private,
          "broadcast_deliveries": deliveries, "privates": sent_private, "initial": initial,
          "connections": len(room.members), "joined": len(room.members) - initial,
          "codecs": _codecs(conns, lib.holders), "extensions": dict(room.kinds),
          "compress_once": fastdeflate.status()["compress_once"]})
    try:  # the clients close once told to (after this report)
        await room.until(lambda: room.open <= 0, room.left, timeout=60)
    finally:
        await close()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--library", choices=tuple(LIBRARIES), required=True)
    parser.add_argument("--mode", choices=MODES, default="stock")
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--broadcasts", type=int, required=True)
    parser.add_argument("--joiners", type=int, default=1)
    parser.add_argument("--private-every", type=int, default=5)
    parser.add_argument("--private-one-in", type=int, default=0)
    parser.add_argument("--ack-every", type=int, default=16)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.library, args.mode, args.clients, args.broadcasts, args.joiners,
                      args.private_every, args.ack_every, args.private_one_in))


if __name__ == "__main__":
    sys.exit(main())
