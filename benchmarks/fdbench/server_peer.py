"""The processes of the server-memory benchmark: a websocket server, and its clients.

``python -m fdbench.server_peer server --library L [--enabled]`` runs an echo server of
library L (websockets, aiohttp, wsproto, tornado or autobahn; compression on, the
library's own defaults otherwise) on 127.0.0.1 and an ephemeral port, with
``fastdeflate.enable()`` first if ``--enabled``. It prints ``{"port": P, ...}``, then
answers each ``measure N`` line on stdin, once it has N connections open, with its own
RSS after a garbage collection and the codec objects its connections hold (found from
inside this process), and exits on ``stop``. ``quiet N`` does the same once fastdeflate
has parked the connections that went idle (see ``fastdeflate.set_park_after``).

``python -m fdbench.server_peer clients --port P`` is the other side, websockets' client
with its defaults (always stock). Commands on stdin, one JSON answer each: ``warm`` (one
connection, one message each way, closed), ``connect N``, ``exchange`` (every connection
sends one ~1 KB JSON update and waits for its echo, checked) and ``close``.

Both raise their open-file limit to the hard limit (one descriptor per connection).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import sys
import time
from collections import Counter
from typing import Any, Awaitable, Callable, Iterable, Optional

from . import payloads
from .library_table import codec_types

LIBRARIES = ("websockets", "aiohttp", "wsproto", "tornado", "autobahn")
BATCH = 50  # clients connecting (or exchanging, closing) at once
MESSAGES = [m.decode("ascii") for m in payloads.varying(1024, 64, seed=7)]


def _say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


async def _stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


def raise_fd_limit() -> Optional[int]:
    """Raise this process's open-file limit as far as allowed (one descriptor per
    connection); returns the new soft limit, None where there are no such limits
    (Windows). Where the hard limit is infinite (macOS), the kernel may still refuse a
    large value: 65,536 is tried, then macOS's OPEN_MAX, 10,240."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = [hard] if hard != resource.RLIM_INFINITY else [65536, 10240]
    for target in wanted:
        if target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        return target
    return soft


def rss_bytes() -> int:
    """This process's resident set size: VmRSS from /proc on Linux, else psutil's (macOS,
    Windows: ``pip install psutil``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import psutil
    except ImportError:
        raise RuntimeError("the server's RSS needs /proc/self/status or psutil "
                           "(pip install psutil)") from None
    return int(psutil.Process().memory_info().rss)


# --- the servers: each returns (port, open connections, codec holders of a connection) ----

Holders = Callable[[Any], Iterable[Any]]
Server = tuple[int, set[Any], Holders]


async def _websockets() -> Server:
    from websockets.asyncio.server import serve

    conns: set[Any] = set()

    async def handler(ws: Any) -> None:
        conns.add(ws)
        try:
            async for message in ws:
                await ws.send(message)
        finally:
            conns.discard(ws)

    server = await serve(handler, "127.0.0.1", 0)
    port = next(iter(server.sockets)).getsockname()[1]
    return port, conns, lambda ws: ws.protocol.extensions


async def aiohttp_site(handler: Any, path: str) -> tuple[int, Any]:
    """An aiohttp application serving ``handler`` at ``path`` on 127.0.0.1 and an
    ephemeral port: (port, its AppRunner, whose cleanup() stops it)."""
    from aiohttp import web

    app = web.Application()
    app.router.add_get(path, handler)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return site._server.sockets[0].getsockname()[1], runner  # type: ignore[union-attr]


async def _aiohttp() -> Server:
    from aiohttp import WSMsgType, web

    conns: set[Any] = set()

    async def handler(request: Any) -> Any:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        conns.add(ws)
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    await ws.send_str(msg.data)
        finally:
            conns.discard(ws)
        return ws

    port, _ = await aiohttp_site(handler, "/")

    def holders(ws: Any) -> list[Any]:  # aiohttp creates its codec objects on first use
        return [ws._writer._compressobj, ws._parser]

    return port, conns, holders


async def _wsproto() -> Server:
    import wsproto.extensions
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import (AcceptConnection, CloseConnection, Message, Ping, Request,
                                TextMessage)

    conns: set[Any] = set()

    class Echo(asyncio.Protocol):
        """A plain asyncio server on wsproto (which does the HTTP handshake with h11)."""

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.ws = WSConnection(ConnectionType.SERVER)
            self.extension: Any = None
            self.parts: list[str] = []

        def data_received(self, data: bytes) -> None:
            ws = self.ws
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, Request):
                    # looked up now, as an application does: enable() patches the class
                    self.extension = wsproto.extensions.PerMessageDeflate()
                    self.transport.write(ws.send(AcceptConnection(extensions=[self.extension])))
                    conns.add(self)
                elif isinstance(event, TextMessage):
                    self.parts.append(event.data)
                    if event.message_finished:
                        self.transport.write(ws.send(Message(data="".join(self.parts))))
                        self.parts = []
                elif isinstance(event, Ping):
                    self.transport.write(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self.transport.write(ws.send(event.response()))
                    self.transport.close()

        def connection_lost(self, exc: object) -> None:
            conns.discard(self)

    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
    return server.sockets[0].getsockname()[1], conns, lambda echo: [echo.extension]


async def _tornado() -> Server:
    import tornado.httpserver
    import tornado.netutil
    import tornado.web
    import tornado.websocket

    conns: set[Any] = set()

    class Echo(tornado.websocket.WebSocketHandler):
        def get_compression_options(self) -> dict[str, Any]:
            return {}  # compression on, tornado's defaults

        def open(self) -> None:
            conns.add(self)

        def on_message(self, message: Any) -> None:
            self.write_message(message)

        def on_close(self) -> None:
            conns.discard(self)

    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    tornado.httpserver.HTTPServer(tornado.web.Application([("/", Echo)])).add_sockets(sockets)

    def holders(handler: Any) -> list[Any]:
        protocol = handler.ws_connection
        return [protocol._compressor, protocol._decompressor] if protocol else []

    return sockets[0].getsockname()[1], conns, holders


async def _autobahn() -> Server:
    from autobahn.asyncio.websocket import WebSocketServerFactory, WebSocketServerProtocol
    from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

    conns: set[Any] = set()

    class Echo(WebSocketServerProtocol):
        def onOpen(self) -> None:
            conns.add(self)

        def onMessage(self, payload: bytes, isBinary: bool) -> None:
            self.sendMessage(payload, isBinary)

        def onClose(self, wasClean: bool, code: Any, reason: Any) -> None:
            conns.discard(self)

    def accept(offers: list[Any]) -> Any:  # autobahn accepts nothing unless told to
        for offer in offers:
            if isinstance(offer, PerMessageDeflateOffer):
                return PerMessageDeflateOfferAccept(offer)
        return None

    factory = WebSocketServerFactory("ws://127.0.0.1")
    factory.protocol = Echo
    factory.setProtocolOptions(perMessageCompressionAccept=accept)
    server = await asyncio.get_running_loop().create_server(factory, "127.0.0.1", 0)
    return (server.sockets[0].getsockname()[1], conns,
            lambda proto: list(proto.websocket_extensions_in_use))


SERVERS: dict[str, Callable[[], Awaitable[Server]]] = {
    "websockets": _websockets, "aiohttp": _aiohttp, "wsproto": _wsproto,
    "tornado": _tornado, "autobahn": _autobahn,
}
#: What each server imports, imported before ``fastdeflate.enable()`` as an application
#: that enables it after its own imports does.
IMPORTS = {
    "websockets": ("websockets.asyncio.server",),
    "aiohttp": ("aiohttp.web",),
    "wsproto": ("wsproto", "wsproto.extensions", "wsproto.events"),
    "tornado": ("tornado.httpserver", "tornado.netutil", "tornado.web", "tornado.websocket"),
    "autobahn": ("autobahn.asyncio.websocket", "autobahn.websocket.compress"),
}


def _codecs(conns: set[Any], holders: Holders) -> dict[str, int]:
    """Codec object type -> how many of the connections hold one (within 4 references
    of the library's own per-connection codec attributes: an attribute and its wrapper's,
    each maybe through an instance ``__dict__``)."""
    counts: Counter[str] = Counter()
    for conn in list(conns):
        found: set[str] = set()
        for holder in holders(conn):
            if holder is not None:
                found |= codec_types(holder, limit=2000, depth=4)
        counts.update(found)
    return dict(sorted(counts.items()))


async def serve(library: str, enabled: bool) -> None:
    limit = raise_fd_limit()
    for module in IMPORTS[library]:
        importlib.import_module(module)
    import fastdeflate

    enabled_libraries = fastdeflate.enable() if enabled else []
    port, conns, holders = await SERVERS[library]()
    _say({"port": port, "pid": os.getpid(), "fd_limit": limit, "enabled": enabled_libraries,
          "implementation": fastdeflate.IMPLEMENTATION, "engine": fastdeflate.ENGINE})
    while True:
        command = (await _stdin_line()).split()
        if not command or command[0] == "stop":
            return
        expected = int(command[1])
        for _ in range(300):  # handlers may still be starting or ending: up to 30 s
            if len(conns) == expected:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)  # let pending writes and callbacks finish
        waited = await _until_parked() if command[0] == "quiet" else 0.0
        gc.collect()
        _say({"rss": rss_bytes(), "connections": len(conns), "codecs": _codecs(conns, holders),
              "waited": waited})


async def _until_parked(deadline: float = 60.0) -> float:
    """Wait (up to ``deadline`` s) until fastdeflate has parked every idle connection
    beyond its live-state limit (after its park-after delay, default 10 s); returns the
    seconds waited. Stock holds its codec state whatever happens: no wait."""
    from fastdeflate._parking import wait_until_parked

    start = time.monotonic()
    await asyncio.to_thread(wait_until_parked, deadline)
    return time.monotonic() - start


# --- the clients ---------------------------------------------------------------------------


async def _batched(items: list[Any], act: Callable[[Any], Awaitable[Any]]) -> list[Any]:
    out: list[Any] = []
    for i in range(0, len(items), BATCH):
        out += await asyncio.gather(*(act(x) for x in items[i : i + BATCH]))
    return out


#: What the clients offer: websockets' default offer, or the same asking both sides to
#: compress without context takeover.
OFFERS = ("default", "no-takeover")


async def clients(port: int, offer: str = "default") -> None:
    from websockets.asyncio.client import connect
    from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory

    raise_fd_limit()
    uri = f"ws://127.0.0.1:{port}/"
    conns: list[Any] = []
    options: dict[str, Any] = {}
    if offer == "no-takeover":
        options = {"compression": None, "extensions": [ClientPerMessageDeflateFactory(
            server_no_context_takeover=True, client_no_context_takeover=True,
            client_max_window_bits=True, compress_settings={"memLevel": 5})]}

    async def open_one(_: object) -> Any:
        return await connect(uri, ping_interval=None, open_timeout=120, max_size=None,
                             **options)

    async def exchange(pair: tuple[int, Any]) -> None:
        i, ws = pair
        message = MESSAGES[i % len(MESSAGES)]
        await ws.send(message)
        if await ws.recv() != message:
            raise AssertionError("the server's echo differs from the message sent")

    while True:
        command = (await _stdin_line()).split()
        if not command or command[0] == "close":
            await _batched(conns, lambda ws: ws.close())
            _say({"closed": len(conns)})
            return
        if command[0] == "warm":  # the server's first connection costs more than the rest
            ws = await open_one(None)
            await exchange((0, ws))
            await ws.close()
            _say({"warm": 1})
        elif command[0] == "connect":
            conns += await _batched(list(range(int(command[1]))), open_one)
            offers = Counter(ws.response.headers.get("Sec-WebSocket-Extensions", "")
                             for ws in conns)
            _say({"connected": len(conns), "extensions": dict(offers)})
        elif command[0] == "exchange":
            await _batched(list(enumerate(conns)), exchange)
            _say({"exchanged": len(conns)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("role", choices=("server", "clients"))
    parser.add_argument("--library", choices=LIBRARIES, default="websockets")
    parser.add_argument("--enabled", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--offer", choices=OFFERS, default="default")
    args = parser.parse_args(argv)
    if args.role == "server":
        asyncio.run(serve(args.library, args.enabled))
    else:
        asyncio.run(clients(args.port, args.offer))


if __name__ == "__main__":
    main()
