"""The ``broadcast()`` helpers of the aiohttp, tornado, autobahn and wsproto adapters.

A real server of each library on 127.0.0.1 (fastdeflate on its side) sends ~1 KB JSON
messages, as text and as binary, with the library's helper to 20 stock ``websockets``
clients, with private messages in between, a late joiner, a client that closes, one that
vanishes, and one whose ``max_size`` a 100 KiB broadcast exceeds (it closes with 1009,
which the server's library reports). Every client must get exactly its messages, in
order, decoded by stock zlib. Compress once is checked by counting: a compressor
subclass installed as ``fastdeflate.Compressor`` records each whole message's payload
object, so a message compressed once for many connections shows one object for many
deliveries (as in tests/test_compress_once.py); with sharing off (``_set_sharing``)
every delivery is a compression, which shows the count counts. Both implementations.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from types import ModuleType
from typing import Any, Optional, Union

import pytest
import websockets.asyncio.client
from websockets.exceptions import ConnectionClosed

import fastdeflate
from fastdeflate.integrations._fanout import encode

from ._support import autobahn_patience, autobahn_unusable, make_text, requires_autobahn

STEP = 20  # seconds any one network wait may take
CLIENTS = 20
# Past the messages after which a group starts over to take newcomers back: when what
# that costs in bytes (a message with no history to every member, about twice a
# message's excess) is at most 2-4% of the group's bytes since it last did.
BROADCASTS = 100
BIG = 100 * 1024  # over the small client's max_size (64 KiB)
LIBRARIES = ["aiohttp", "tornado", "autobahn", "autobahn-prepared", "wsproto",
             "uvicorn-wsproto"]

Message = Union[str, bytes]


def json_message(k: int) -> str:
    """~1 KB of JSON, a few non-ASCII characters included."""
    rows = [{"symbol": f"S{k % 7}{i}", "price": round(100 + k * 0.37 + i * 1.1, 2),
             "qty": (k * 31 + i * 17) % 997, "venue": "Zürich" if i % 5 == 0 else "NYSE"}
            for i in range(12)]
    return json.dumps({"seq": k, "room": "lobby", "rows": rows})


def message(k: int) -> Message:
    """The k-th broadcast: text for even k, binary for odd k."""
    text = json_message(k)
    return text if k % 2 == 0 else text.encode()


# --- counting compressions ------------------------------------------------------------


def _key(data: Any) -> bytes:
    """A copy of ``data`` (``bytes(data)`` is ``data`` itself for bytes): keeping every
    message object alive here would keep them all in compress-once's cache, which a
    server that lets its messages go does not; then rooms broadcasting from threads push
    each other's current message out of it, and split (a missed share)."""
    return bytes(memoryview(data))


@pytest.fixture
def compressions(use_impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> dict[bytes, list]:
    """message bytes -> the payload objects compressors returned for it as a whole
    message (kept alive, so distinct objects are distinct compressions)."""
    calls: dict[bytes, list] = defaultdict(list)

    class Counting(use_impl.Compressor):  # type: ignore[name-defined,misc]
        def compress(self, data: Any, fin: bool = True, *, flush: bool = True) -> bytes:
            out = super().compress(data, fin, flush=flush)
            if fin:
                calls[_key(data)].append(out)
            return out

        def compress_or_skip(self, data: Any, fin: bool = True, *,
                             flush: bool = True) -> Any:
            out = super().compress_or_skip(data, fin, flush=flush)
            if fin and out is not None:
                calls[_key(data)].append(out)
            return out

    monkeypatch.setattr(fastdeflate, "Compressor", Counting)
    return calls


@pytest.fixture(params=["shared", "unshared"])
def sharing(request: pytest.FixtureRequest, use_impl: ModuleType) -> Any:
    on = request.param == "shared"
    previous = use_impl._set_sharing(on)
    yield on
    use_impl._set_sharing(previous)


def tally(calls: dict[bytes, list], data: bytes) -> tuple[int, int]:
    """(deliveries, compressions) of one message."""
    payloads = calls.get(data, [])
    return len(payloads), len({id(p) for p in payloads})


# --- stock websockets clients ---------------------------------------------------------


class Client:
    def __init__(self, url: str, max_size: int = 1 << 20) -> None:
        self.url, self.max_size = url, max_size
        self.got: list[Message] = []
        self.expected: list[Message] = []
        self.ws: Any = None

    async def start(self) -> None:
        self.ws = await websockets.asyncio.client.connect(
            self.url, max_size=self.max_size, open_timeout=STEP)
        assert self.ws.protocol.extensions, "permessage-deflate was not negotiated"
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                self.got.append(msg)
        except ConnectionClosed:
            pass

    async def until_got(self, count: int) -> None:
        async def wait() -> None:
            while len(self.got) < count and not self.reader.done():
                await asyncio.sleep(0.01)
        await asyncio.wait_for(wait(), STEP)


async def until(condition: Callable[[], bool]) -> None:
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.01)
    await asyncio.wait_for(wait(), STEP)


# --- one room (a server and its connections) per library -------------------------------


class Room:
    """A server of one library; ``members`` are its server-side connections, in the
    order the clients connected."""

    def __init__(self) -> None:
        self.members: list[Any] = []
        self.url = ""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def broadcast(self, msg: Message) -> None: ...
    async def send(self, member: Any, msg: Message) -> None: ...
    def close_code(self, member: Any) -> Optional[int]: ...


class AiohttpRoom(Room):
    async def start(self) -> None:
        from aiohttp import web

        from fastdeflate.integrations import aiohttp as fd

        self.fd = fd

        async def handler(request: Any) -> Any:
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            self.members.append(ws)
            async for _ in ws:
                pass
            return ws

        app = web.Application()
        app.router.add_get("/", handler)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"ws://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/"

    async def stop(self) -> None:
        await self.runner.cleanup()

    async def broadcast(self, msg: Message) -> None:
        await self.fd.broadcast(self.members, msg)

    async def send(self, member: Any, msg: Message) -> None:
        await (member.send_str(msg) if isinstance(msg, str) else member.send_bytes(msg))

    def close_code(self, member: Any) -> Optional[int]:
        return member.close_code


class TornadoRoom(Room):
    async def start(self) -> None:
        import tornado.httpserver
        import tornado.netutil
        import tornado.web
        import tornado.websocket

        from fastdeflate.integrations import tornado as fd

        self.fd = fd
        room = self

        class Handler(fd.FastDeflateHandlerMixin, tornado.websocket.WebSocketHandler):
            def get_compression_options(self) -> dict[str, Any]:
                return {}

            def open(self) -> None:
                room.members.append(self)

            def on_message(self, message: Any) -> None:
                pass

        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        self.server = tornado.httpserver.HTTPServer(tornado.web.Application([("/", Handler)]))
        self.server.add_sockets(sockets)
        self.url = f"ws://127.0.0.1:{sockets[0].getsockname()[1]}/"

    async def stop(self) -> None:
        self.server.stop()
        for member in self.members:
            member.close()
        await self.server.close_all_connections()

    async def broadcast(self, msg: Message) -> None:
        self.fd.broadcast(self.members, msg)

    async def send(self, member: Any, msg: Message) -> None:
        await member.write_message(msg, binary=isinstance(msg, bytes))

    def close_code(self, member: Any) -> Optional[int]:
        return member.close_code


class AutobahnRoom(Room):
    """``prepared``: broadcasts with autobahn's own idiom, ``factory.prepareMessage()``
    and each protocol's ``sendPreparedMessage()``, instead of the helper."""

    def __init__(self, prepared: bool = False) -> None:
        super().__init__()
        self.prepared = prepared

    async def start(self) -> None:
        from autobahn.asyncio.websocket import WebSocketServerFactory, WebSocketServerProtocol
        from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

        from fastdeflate.integrations import autobahn as fd

        self.fd = fd
        room = self

        class Protocol(WebSocketServerProtocol):
            def onOpen(self) -> None:
                assert isinstance(self._perMessageCompress, fd.PerMessageDeflate)
                room.members.append(self)

        def accept(offers: list[Any]) -> Any:
            for offer in offers:
                if isinstance(offer, PerMessageDeflateOffer):
                    fd.enable()  # autobahn reads its registry right after this callback
                    return PerMessageDeflateOfferAccept(offer)
            return None

        loop = asyncio.get_running_loop()
        self.factory = WebSocketServerFactory("ws://127.0.0.1", loop=loop)
        self.factory.protocol = Protocol
        self.factory.setProtocolOptions(perMessageCompressionAccept=accept,
                                        **autobahn_patience(STEP))
        self.server = await loop.create_server(self.factory, "127.0.0.1", 0)
        self.url = f"ws://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"

    async def stop(self) -> None:
        self.fd.disable()
        for member in self.members:
            if member.transport is not None:
                member.transport.close()
        self.server.close()

    async def broadcast(self, msg: Message) -> None:
        if not self.prepared:
            self.fd.broadcast(self.members, msg)
            return
        data, is_text = encode(msg)
        prepared = self.factory.prepareMessage(data, not is_text)
        for member in self.members:
            if member.state == member.STATE_OPEN:
                member.sendPreparedMessage(prepared)

    async def send(self, member: Any, msg: Message) -> None:
        data, is_text = encode(msg)
        member.sendMessage(data, not is_text)

    def close_code(self, member: Any) -> Optional[int]:
        return member.remoteCloseCode


class WsprotoRoom(Room):
    """A sans-IO server: wsproto connections over asyncio transports."""

    async def start(self) -> None:
        from wsproto import ConnectionType, WSConnection
        from wsproto.events import AcceptConnection, CloseConnection, Ping, Request

        from fastdeflate.integrations import wsproto as fd

        self.fd = fd
        room = self

        class Server(asyncio.Protocol):
            closed_with: Optional[int] = None

            def connection_made(self, transport: Any) -> None:
                self.transport = transport
                self.conn = WSConnection(ConnectionType.SERVER)

            def data_received(self, data: bytes) -> None:
                self.conn.receive_data(data)
                self.handle()

            def connection_lost(self, exc: Optional[BaseException]) -> None:
                self.conn.receive_data(None)
                self.handle()

            def handle(self) -> None:
                for event in self.conn.events():
                    if isinstance(event, Request):
                        self.transport.write(self.conn.send(
                            AcceptConnection(extensions=[fd.PerMessageDeflate()])))
                        room.members.append(self)
                    elif isinstance(event, Ping):
                        self.transport.write(self.conn.send(event.response()))
                    elif isinstance(event, CloseConnection):
                        if self.closed_with is None:  # (not the 1006 of the lost connection)
                            self.closed_with = event.code
                        if not self.transport.is_closing():
                            self.transport.write(self.conn.send(event.response()))
                            self.transport.close()

            def write(self, data: bytes) -> None:
                if data and not self.transport.is_closing():
                    self.transport.write(data)

        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(Server, "127.0.0.1", 0)
        self.url = f"ws://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"

    async def stop(self) -> None:
        for member in self.members:
            member.transport.close()
        self.server.close()

    async def broadcast(self, msg: Message) -> None:
        outs = self.fd.broadcast([member.conn for member in self.members], msg)
        assert len(outs) == len(self.members)
        for member, out in zip(self.members, outs):
            member.write(out)

    async def send(self, member: Any, msg: Message) -> None:
        from wsproto.events import Message as WsMessage

        member.write(member.conn.send(WsMessage(data=msg)))

    def close_code(self, member: Any) -> Optional[int]:
        return member.closed_with


class UvicornRoom(Room):
    """uvicorn --ws wsproto with an ASGI app whose broadcast is the documented loop over
    its connections' ``send`` inside ``broadcasting(message)``."""

    class Member:
        def __init__(self, send: Callable[..., Any]) -> None:
            self.send = send
            self.code: Optional[int] = None

    async def start(self) -> None:
        import uvicorn

        from fastdeflate.integrations import wsproto as fd

        self.fd = fd

        async def app(scope: dict, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
            assert scope["type"] == "websocket"
            assert (await receive())["type"] == "websocket.connect"
            await send({"type": "websocket.accept"})
            member = self.Member(send)
            self.members.append(member)
            while True:
                event = await receive()
                if event["type"] == "websocket.disconnect":
                    member.code = event["code"]
                    return

        self.server = uvicorn.Server(uvicorn.Config(
            app, host="127.0.0.1", port=0, ws="wsproto", lifespan="off", log_level="error"))
        self.task = asyncio.create_task(self.server.serve())
        await until(lambda: self.server.started)
        self.url = f"ws://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}/"

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, STEP)

    @staticmethod
    def event(msg: Message) -> dict[str, Any]:
        if isinstance(msg, str):
            return {"type": "websocket.send", "text": msg}
        return {"type": "websocket.send", "bytes": msg}

    async def broadcast(self, msg: Message) -> None:
        encode(msg)  # (what the helpers do with a bad message: TypeError)
        with self.fd.broadcasting(msg):
            for member in self.members:
                if member.code is None:
                    try:
                        await member.send(self.event(msg))
                    except OSError:  # uvicorn's ClientDisconnected: gone meanwhile
                        pass

    async def send(self, member: Any, msg: Message) -> None:
        await member.send(self.event(msg))

    def close_code(self, member: Any) -> Optional[int]:
        return member.code


ROOMS: dict[str, Callable[[], Room]] = {
    "aiohttp": AiohttpRoom, "tornado": TornadoRoom, "autobahn": AutobahnRoom,
    "autobahn-prepared": lambda: AutobahnRoom(prepared=True), "wsproto": WsprotoRoom,
    "uvicorn-wsproto": UvicornRoom}


@pytest.fixture(params=LIBRARIES)
def library(request: pytest.FixtureRequest) -> Any:
    name = request.param
    if name.startswith("autobahn") and autobahn_unusable():
        pytest.skip(autobahn_unusable())  # Python 3.10, or a test set without autobahn
    if name in ("aiohttp", "uvicorn-wsproto"):  # enabled process-wide
        from fastdeflate.integrations import aiohttp as fd_aiohttp, wsproto as fd_wsproto

        adapter: Any = fd_aiohttp if name == "aiohttp" else fd_wsproto
        adapter.enable()
        yield name
        adapter.disable()
    else:
        yield name


# --- the scenario -----------------------------------------------------------------------


async def join(room: Room, clients: list[Client], max_size: int = 1 << 20) -> Client:
    client = Client(room.url, max_size)
    await client.start()
    clients.append(client)
    await until(lambda: len(room.members) == len(clients))
    return client


async def room_scenario(room: Room, calls: dict[bytes, list]) -> list[tuple[int, int]]:
    """Runs the broadcasts; returns (deliveries, compressions) per ~1 KB broadcast."""
    clients: list[Client] = []
    await room.start()
    try:
        for i in range(CLIENTS):
            await join(room, clients, 64 * 1024 if i == 7 else 1 << 20)
        small = clients[7]
        gone: set[int] = set()  # clients whose later messages are not checked
        tallies = []
        for k in range(BROADCASTS):
            if k == 3:
                await join(room, clients)  # a late joiner
            if k == 4:
                await clients[3].ws.close()  # a closed connection stays in the set
                gone.add(3)
            if k == 6:
                clients[5].ws.transport.abort()  # one that vanishes
                gone.add(5)
            if k == 10:
                with pytest.raises(TypeError):  # bad input: nothing sent to anyone
                    await room.broadcast(42)  # type: ignore[arg-type]
            msg = message(k)
            await room.broadcast(msg)
            for i, client in enumerate(clients):
                if i not in gone:
                    client.expected.append(msg)
            if k % 3 == 1 and k < 30:  # private messages (not after the last start-over)
                i = (k * 7) % CLIENTS
                if i not in gone:
                    private = f"private {k} for {i}" * 5
                    await room.send(room.members[i], private if k % 2 else private.encode())
                    clients[i].expected.append(private if k % 2 else private.encode())
            data, _ = encode(msg)
            tallies.append(tally(calls, data))

        big = make_text(BIG, seed=11)  # over the small client's max_size
        await room.broadcast(big)
        for i, client in enumerate(clients):
            if i not in gone and client is not small:
                client.expected.append(big)
        await asyncio.wait_for(small.reader, STEP)
        assert small.ws.protocol.close_sent.code == 1009  # websockets' own close code
        small_member = room.members[clients.index(small)]
        await until(lambda: room.close_code(small_member) == 1009)  # and what the server saw
        gone.add(clients.index(small))

        last = message(BROADCASTS)
        await room.broadcast(last)  # skips the closed ones
        for i, client in enumerate(clients):
            if i not in gone:
                client.expected.append(last)
                await client.until_got(len(client.expected))
                assert client.got == client.expected, f"client {i}"
                assert not client.reader.done(), f"client {i} was disconnected"
        assert clients[3].got == clients[3].expected
        assert clients[5].got == clients[5].expected[: len(clients[5].got)]
        assert small.got == small.expected
        for client in clients:
            if client.ws.state.name == "OPEN":
                await client.ws.close()
        return tallies
    finally:
        await room.stop()


@pytest.mark.test_build
def test_broadcast_reaches_every_client_compressed_once(
        library: str, use_impl: ModuleType, sharing: bool, compressions: dict) -> None:
    tallies = asyncio.run(asyncio.wait_for(room_scenario(ROOMS[library](), compressions),
                                           10 * STEP))
    deliveries = sum(d for d, _ in tallies)
    made = sum(c for _, c in tallies)
    assert deliveries >= BROADCASTS * (CLIENTS - 2)  # every broadcast went through fastdeflate
    if not sharing:
        assert made == deliveries  # every delivery compressed: the count counts
        return
    assert made * 2 <= deliveries, str(tallies)  # diverged ones alone until the start-over
    assert tallies[0] == (CLIENTS, 1)  # fresh connections: one group
    # after the start-over (once it pays: well before 70 messages after the last private
    # one), the late joiner and the connections sent private messages are in the group
    # again: one compression per broadcast
    assert tallies[-1][1] == 1, tallies


# --- concurrent broadcasts ----------------------------------------------------------------


async def concurrent_scenario(room: Room, rounds: int) -> None:
    """Two tasks broadcast their own messages to the same clients at the same time."""
    clients: list[Client] = []
    await room.start()
    try:
        for _ in range(8):
            await join(room, clients)

        async def sender(tag: str) -> list[Message]:
            sent: list[Message] = []
            for k in range(rounds):
                msg = f"{tag}{k} " + json_message(k)
                await room.broadcast(msg if k % 2 else msg.encode())
                sent.append(msg if k % 2 else msg.encode())
                await asyncio.sleep(0)
            return sent

        a, b = await asyncio.gather(sender("a"), sender("b"))
        for client in clients:
            await client.until_got(2 * rounds)
            text = [m if isinstance(m, str) else m.decode() for m in client.got]
            assert [m for m in text if m.startswith("a")] == [
                m if isinstance(m, str) else m.decode() for m in a]
            assert [m for m in text if m.startswith("b")] == [
                m if isinstance(m, str) else m.decode() for m in b]
            await client.ws.close()
    finally:
        await room.stop()


def test_concurrent_broadcasts_from_two_tasks(library: str, use_impl: ModuleType) -> None:
    asyncio.run(asyncio.wait_for(concurrent_scenario(ROOMS[library](), 20), 10 * STEP))


# --- connections a broadcast cannot send to -------------------------------------------------


async def started(room: Room, count: int) -> list[Client]:
    clients: list[Client] = []
    await room.start()
    for _ in range(count):
        await join(room, clients)
    return clients


async def finish(room: Room, clients: list[Client]) -> None:
    for client in clients:
        await client.ws.close()
    await room.stop()


def test_aiohttp_reports_a_connection_it_cannot_send_to(use_impl: ModuleType,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A ``WebSocketResponse`` never prepared (aiohttp: RuntimeError) is skipped with a
    warning, or raised in an ExceptionGroup after the others got the message."""
    from aiohttp import web

    from fastdeflate.integrations import aiohttp as fd

    async def main() -> None:
        room = AiohttpRoom()
        clients = await started(room, 3)
        try:
            unprepared = web.WebSocketResponse()
            text = json_message(1)
            with caplog.at_level(logging.WARNING, logger="fastdeflate"):
                await fd.broadcast([unprepared, *room.members], text)
            assert "skipped broadcast: failed to write message" in caplog.text
            assert "prepare" in caplog.text
            if sys.version_info >= (3, 11):
                with pytest.raises(ExceptionGroup) as caught:  # noqa: F821
                    await fd.broadcast([*room.members[:1], unprepared, *room.members[1:]],
                                       text.encode(), raise_exceptions=True)
                [error] = caught.value.exceptions
                assert isinstance(error.__cause__, RuntimeError)
            for client in clients:
                await client.until_got(2)
                assert client.got == [text, text.encode()][: len(client.got)]
                assert len(client.got) == (2 if sys.version_info >= (3, 11) else 1)
        finally:
            await finish(room, clients)

    fd.enable()
    try:
        asyncio.run(asyncio.wait_for(main(), 5 * STEP))
    finally:
        fd.disable()


def _aiohttp_has_send_lock() -> bool:
    """aiohttp >= 3.13.2: its writer has a send lock (before it, a send never waits
    before its write)."""
    try:
        from fastdeflate.integrations import aiohttp as fd
    except ImportError:
        return False
    return fd._STOCK_SEND[fd._ASYNC_SEND] is not None


requires_aiohttp_send_lock = pytest.mark.skipif(
    not _aiohttp_has_send_lock(), reason="aiohttp < 3.13.2: its writer has no send lock")


@requires_aiohttp_send_lock
def test_aiohttp_a_broadcast_queued_behind_a_connections_own_send_still_goes(
        use_impl: ModuleType) -> None:
    """A connection busy with its own send (its send lock held, as aiohttp holds it while
    its executor compresses a large message) takes the broadcast after it: the helper
    returns at once, with that send left to finish, and it does."""
    from fastdeflate.integrations import aiohttp as fd

    async def main() -> None:
        room = AiohttpRoom()
        clients = await started(room, 3)
        try:
            text = json_message(7)
            lock = room.members[1]._writer._send_lock
            await lock.acquire()
            try:
                await fd.broadcast(room.members, text)
                assert len(fd._unfinished) == 1  # the busy connection's, left waiting
                await clients[0].until_got(1)
                assert clients[1].got == []
            finally:
                lock.release()
            for client in clients:
                await client.until_got(1)
                assert client.got == [text]
            await until(lambda: not fd._unfinished)
        finally:
            await finish(room, clients)

    fd.enable()
    try:
        asyncio.run(asyncio.wait_for(main(), 5 * STEP))
    finally:
        fd.disable()


@requires_aiohttp_send_lock
def test_aiohttp_a_queued_broadcast_send_cancelled_leaves_the_connection_usable(
        use_impl: ModuleType) -> None:
    """The send the helper left waiting is cancelled (a server shutting down cancels its
    tasks): that message is not sent, the connection's lock is free again, and the
    connection's next message arrives."""
    from fastdeflate.integrations import aiohttp as fd

    async def main() -> None:
        room = AiohttpRoom()
        clients = await started(room, 2)
        try:
            busy = room.members[1]
            lock = busy._writer._send_lock
            await lock.acquire()
            try:
                await fd.broadcast(room.members, json_message(1))
                (left,) = fd._unfinished
                left.cancel()
                await asyncio.wait([left])
                assert left.cancelled() and not fd._unfinished
            finally:
                lock.release()
            await busy.send_str(json_message(2))
            await clients[1].until_got(1)
            assert clients[1].got == [json_message(2)] and not lock.locked()
            await clients[0].until_got(1)
            assert clients[0].got == [json_message(1)]
        finally:
            await finish(room, clients)

    fd.enable()
    try:
        asyncio.run(asyncio.wait_for(main(), 5 * STEP))
    finally:
        fd.disable()


@requires_autobahn()
def test_autobahn_skips_a_protocol_streaming_its_own_message(use_impl: ModuleType) -> None:
    """A protocol in the middle of a streamed message (beginMessage) is not sent the
    broadcast, which would corrupt it: reported, and its own message ends intact."""
    async def main() -> None:
        room = AutobahnRoom()
        clients = await started(room, 3)
        try:
            streaming = room.members[1]
            streaming.beginMessage(isBinary=False)
            streaming.sendMessageFrame(b"streamed, ")
            text = json_message(2)
            with pytest.raises(ExceptionGroup) as caught:  # noqa: F821
                room.fd.broadcast(room.members, text, raise_exceptions=True)
            [error] = caught.value.exceptions
            assert str(error) == "sending a fragmented message"
            streaming.sendMessageFrame(b"then ended")
            streaming.endMessage()
            for i, client in enumerate(clients):
                await client.until_got(1)
                assert client.got == (["streamed, then ended"] if i == 1 else [text])
        finally:
            await finish(room, clients)

    asyncio.run(asyncio.wait_for(main(), 5 * STEP))


def wsproto_pair(compressor_side: Any) -> tuple[Any, Any]:
    """A fastdeflate wsproto server connection and a stock wsproto client, handshaken
    (in memory: wsproto is sans-IO)."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, Request
    from wsproto.extensions import PerMessageDeflate as StockPMD

    server, client = WSConnection(ConnectionType.SERVER), WSConnection(ConnectionType.CLIENT)
    server.receive_data(client.send(Request(host="x", target="/", extensions=[StockPMD()])))
    [request] = server.events()
    assert isinstance(request, Request)
    client.receive_data(server.send(AcceptConnection(extensions=[compressor_side()])))
    [accepted] = client.events()
    assert isinstance(accepted, AcceptConnection) and accepted.extensions
    return server, client


def received(client: Any, data: bytes) -> list[Message]:
    """Whole messages a stock wsproto client decodes from ``data``."""
    from wsproto.events import BytesMessage, TextMessage

    client.receive_data(data)
    out, parts = [], []
    for event in client.events():
        assert isinstance(event, (TextMessage, BytesMessage)), event
        parts.append(event.data)
        if event.message_finished:
            out.append(("" if isinstance(event.data, str) else b"").join(parts))
            parts.clear()
    return out


def test_wsproto_skips_a_connection_sending_fragments(use_impl: ModuleType,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    from wsproto.events import Message as WsMessage

    from fastdeflate.integrations import wsproto as fd

    pairs = [wsproto_pair(fd.PerMessageDeflate) for _ in range(4)]
    server, client = pairs[2]
    first = received(client, server.send(WsMessage(data="fragment 1, ", message_finished=False)))
    text = json_message(3)
    with caplog.at_level(logging.WARNING, logger="fastdeflate"):
        outs = fd.broadcast([s for s, _ in pairs], text)
    assert "skipped broadcast: sending a fragmented message" in caplog.text
    assert outs[2] == b""
    rest = received(client, server.send(WsMessage(data="fragment 2")))
    assert first == [] and rest == ["fragment 1, fragment 2"]
    for i, ((_, other), out) in enumerate(zip(pairs, outs)):
        if i != 2:
            assert received(other, out) == [text]


def test_wsproto_broadcasts_from_threads(use_impl: ModuleType, compressions: dict) -> None:
    """Threads broadcasting to rooms of their own at once (one parameter set): every
    client decodes its messages, each compressed once per broadcast (about)."""
    from fastdeflate.integrations import wsproto as fd

    errors: list[BaseException] = []

    def room(seed: int) -> None:
        try:
            pairs = [wsproto_pair(fd.PerMessageDeflate) for _ in range(10)]
            for k in range(30):
                msg = f"thread {seed} " + json_message(k)
                outs = fd.broadcast([s for s, _ in pairs], msg if k % 2 else msg.encode())
                for (_, client), out in zip(pairs, outs):
                    assert received(client, out) == [msg if k % 2 else msg.encode()]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=room, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10 * STEP)
    assert not errors, errors[0]
    tallies = [tally(compressions, (f"thread {seed} " + json_message(k)).encode())
               for seed in range(4) for k in range(30)]
    assert {d for d, _ in tallies} == {10}
    # (in the fallback a thread's room, rarely, splits in two groups at its first message
    # while other threads' fresh compressors start too, until its group starts over: a
    # missed share, never a wrong payload)
    assert max(c for _, c in tallies) <= 2


def test_raise_exceptions_needs_python_3_11(monkeypatch: pytest.MonkeyPatch) -> None:
    """(Forced here:) before 3.11 there is no ExceptionGroup: asked for, ValueError."""
    from fastdeflate.integrations import _fanout, tornado as fd_tornado

    monkeypatch.setattr(_fanout, "sys", type("Sys", (), {"version_info": (3, 10, 14)}))
    with pytest.raises(ValueError, match="Python 3.11"):
        fd_tornado.broadcast([], "x", raise_exceptions=True)
    fd_tornado.broadcast([], "x")  # (no group asked for: fine)


@pytest.mark.parametrize("message, text, expected", [
    ("héllo", None, (b"h\xc3\xa9llo", True)),
    ("héllo", False, (b"h\xc3\xa9llo", False)),
    (b"raw", None, (b"raw", False)),
    (b"raw", True, (b"raw", True)),
    (bytearray(b"ba"), None, (b"ba", False)),
    (memoryview(b"mv"), None, (b"mv", False)),
])
def test_encode(message: Any, text: Optional[bool], expected: tuple[bytes, bool]) -> None:
    out = encode(message, text)
    assert out == expected and type(out[0]) is bytes
    if type(message) is bytes:
        assert out[0] is message  # not copied


@pytest.mark.parametrize("bad", [42, None, ["a"], {"a": 1}])
def test_bad_messages_raise_type_error(bad: Any) -> None:
    with pytest.raises(TypeError, match="str or bytes-like"):
        encode(bad)

