"""Broadcasts of a fastdeflate websockets server to peers that are not Python: Node.js's
``ws`` and headless Chromium decode every message (issue 11: nothing changes for the peer).

A real websockets server (``enable()``, both codec implementations through ``use_impl``)
on 127.0.0.1 serves a room of real clients: processes of ``node`` running ``ws`` and a
Chromium page, the same client code in both (tests/peers/peer.js). The server broadcasts
~1 KB JSON with websockets' own ``broadcast()`` (compress once), with private messages
between broadcasts, text and binary messages, messages over 64 KB, a fragmented message,
a late joiner and a client that leaves mid-run. Each client reports the kind, size and
SHA-256 of every message it received, in order, over its WebSocket (compressed by the
client: our decompressor decodes it), and the server checks it against what it sent that
client. The server also counts the payload objects its extensions produced per broadcast:
a broadcast that fell back to one compression per connection fails the test.

Compress what pays (issue 31): the server sends each connection the mixed stream of
tests/integrations/_what_pays.py, its window and context takeover chosen per connection
by name (one node process: server windows 9..15 with context takeover, 9, 12 and 15
without; one Chromium page: 9..15 with it). Messages that come out larger go out as they
are and the compressor is put back; compressed messages that reference the history
before them, or the grown message's own bytes (with_echoes), follow. Each client decodes
every message exactly (kind, size, SHA-256), the frames the server wrote carry RSV1 as
each message's reason says, and status() counts them by reason. With the restore
broken, a window that kept a message the peer never saw fails these tests at every
window size with context takeover.

Peers: ``node`` with ``npm ci`` run in tests/peers (``ws`` pinned by its lock file), and
Chromium (or Chrome; ``FASTDEFLATE_CHROMIUM`` names the binary). .ci/install-foreign-peers.sh
installs both; where one is missing its tests skip as a missing optional peer (``node-ws``,
``chromium``), which the skip check allows only where ``FASTDEFLATE_ABSENT_PEERS`` lists it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from types import ModuleType
from typing import Any, Awaitable, Callable, NamedTuple
from urllib.parse import parse_qs, urlsplit

import pytest
import websockets.asyncio.server as aserver
from websockets.exceptions import ConnectionClosed
from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory
from websockets.frames import Frame
from websockets.protocol import State

import fastdeflate
import fastdeflate.integrations.websockets as fw
from _skipcheck import PEER_MISSING

from ._support import make_binary, make_text
from ._what_pays import (Item, choice, messages_rsv1, mixed_stream, sent_uncompressed,
                         uncompressed_by_reason, uncompressed_bytes_by_reason, wire_frames,
                         with_echoes)

pytestmark = pytest.mark.timeout(180)

HOST = "127.0.0.1"
PEERS = Path(__file__).resolve().parent.parent / "peers"
#: Chromium's flags: headless, nothing fetched from the network, a fresh profile each run.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")
CHROMIUM_NAMES = ("chromium", "google-chrome", "google-chrome-stable", "chromium-browser")
#: What the clients offer, and what websockets' defaults answer (window 12 both ways).
OFFER = "permessage-deflate; client_max_window_bits"
ANSWER = "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"
NCT_OFFER = ("permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
             "client_max_window_bits")
NCT_ANSWER = ("permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
              "server_max_window_bits=12; client_max_window_bits=12")
NCT_OPTIONS = {"perMessageDeflate": {"serverNoContextTakeover": True,
                                     "clientNoContextTakeover": True}}

#: Messages after which a diverged connection joins its group again (compress once).
SETTLE = 100  # broadcasts with nothing else at the end: starting over pays by then

Message = str | bytes


def compressor_of(connection: Any) -> Any:
    """A connection's compressor: without context takeover the extension holds one only
    during a message, so the one it would make next stands in (same parameter set)."""
    extension = connection.protocol.extensions[0]
    return extension._compressor or extension._new_compressor()


def find_node_ws() -> str | None:
    """``node``, if tests/peers has its ``ws`` installed (npm ci)."""
    node = shutil.which("node")
    return node if node and (PEERS / "node_modules" / "ws" / "package.json").is_file() else None


def find_chromium() -> str | None:
    named = os.environ.get("FASTDEFLATE_CHROMIUM")
    if named:
        return shutil.which(named)
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


NODE = find_node_ws()
CHROMIUM = find_chromium()
needs_node = pytest.mark.skipif(NODE is None, reason=PEER_MISSING.format("node-ws"))
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=PEER_MISSING.format("chromium"))


# ------------------------------------------------------------------------- the clients


@dataclass(frozen=True)
class Clients:
    """Connections opened by one client program: ``names`` at once, then ``late`` (asked
    of the first, if ``joins``); the second leaves mid-run. ``options``: ws's constructor
    options. ``answer``: the server's to every one of them."""

    program: str  # "node" or "chromium"
    names: tuple[str, ...]
    offer: str
    answer: str = ""  # "": it differs per connection (WhatPaysRoom)
    options: dict[str, Any] = field(default_factory=dict)
    joins: bool = True  # a late joiner: the scenario asks for one

    @property
    def late(self) -> str:
        return f"{self.names[0]}-late"

    @property
    def leaver(self) -> str:
        return self.names[1]

    def every_name(self) -> list[str]:
        return [*self.names, self.late] if self.joins else list(self.names)


def node_clients(prefix: str, count: int, options: dict[str, Any] | None = None) -> Clients:
    nct = bool(options)
    return Clients("node", tuple(f"{prefix}-{i}" for i in range(count)),
                   NCT_OFFER if nct else OFFER, NCT_ANSWER if nct else ANSWER, options or {})


def chromium_clients(count: int) -> Clients:
    return Clients("chromium", tuple(f"chromium-{i}" for i in range(count)), OFFER, ANSWER)


async def start(clients: Clients, port: int, profile: Path) -> asyncio.subprocess.Process:
    """Start the program of ``clients``; its output goes to a file in ``profile``."""
    profile.mkdir(parents=True, exist_ok=True)
    if clients.program == "node":
        assert NODE is not None
        argv = [NODE, "node_peer.js", f"ws://{HOST}:{port}/ws", json.dumps(clients.options),
                *clients.names]
    else:
        assert CHROMIUM is not None
        argv = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile / 'chromium'}",
                f"http://{HOST}:{port}/page.html?names={','.join(clients.names)}"]
    with open(profile / "stderr.txt", "wb") as log:  # node prints its close codes
        stdout = asyncio.subprocess.PIPE if clients.program == "node" else log
        return await asyncio.create_subprocess_exec(
            *argv, cwd=PEERS, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=log)


async def stop(process: asyncio.subprocess.Process) -> None:
    """Kill the program (Chromium's helper processes exit with it)."""
    with contextlib.suppress(ProcessLookupError):  # (it may have just exited)
        process.kill()
    await process.wait()


# -------------------------------------------------------------------------- the server


def name_of(connection: aserver.ServerConnection) -> str:
    """The name a client gave its connection (peer.js: ``/ws?name=...``)."""
    [name] = parse_qs(urlsplit(connection.request.path).query)["name"]
    return name


def record(message: Message) -> list[Any]:
    """What a client reports of a message it received: [kind, size, SHA-256]."""
    data = message.encode() if isinstance(message, str) else message
    return ["text" if isinstance(message, str) else "binary", len(data),
            hashlib.sha256(data).hexdigest()]


@dataclass
class Member:
    """One connection of the room, as the server sees it."""

    connection: aserver.ServerConnection
    sent: list[Message] = field(default_factory=list)  # what it was meant to receive
    report: asyncio.Future[Any] = field(default_factory=asyncio.Future)
    compressed_frames_in: int = 0
    close_code: int | None = None


@dataclass
class Broadcast:
    deliveries: int  # connections it was written to
    payloads: int  # payload objects the server's extensions produced for it
    parameter_sets: int  # distinct compressor parameter sets among those connections


class Room:
    """The server's side: a websockets handler that registers each connection by name,
    watches its extension, and collects its report; and the sends of the scenario."""

    def __init__(self, impl: ModuleType) -> None:
        self.impl = impl
        self.members: dict[str, Member] = {}
        self.broadcasts: list[Broadcast] = []
        self.offers: dict[str, str] = {}
        self.processes: list[asyncio.subprocess.Process] = []  # the clients' programs
        self._payloads: list[bytes] | None = None

    # ---- serving

    def process_request(self, connection: aserver.ServerConnection, request: Any) -> Any:
        """Serve tests/peers/page.html and peer.js to Chromium; /ws is the WebSocket."""
        path = urlsplit(request.path).path
        if path == "/ws":
            return None
        if path not in ("/page.html", "/peer.js"):
            return connection.respond(HTTPStatus.NOT_FOUND, "not found\n")
        response = connection.respond(HTTPStatus.OK, (PEERS / path[1:]).read_text("utf-8"))
        del response.headers["Content-Type"]
        kind = "text/html" if path.endswith(".html") else "text/javascript"
        response.headers["Content-Type"] = f"{kind}; charset=utf-8"
        return response

    async def handler(self, connection: aserver.ServerConnection) -> None:
        name = name_of(connection)
        self.offers[name] = connection.request.headers["Sec-WebSocket-Extensions"]
        member = self.members[name] = Member(connection)
        [extension] = connection.protocol.extensions
        self.watch(extension, member)
        try:
            async for message in connection:
                if member.report.done():
                    raise AssertionError(f"{name} sent more than its report")
                member.report.set_result(json.loads(message))
        except ConnectionClosed:
            pass
        finally:
            member.close_code = connection.close_code
            if not member.report.done():
                member.report.set_exception(AssertionError(
                    f"{name} closed ({member.close_code}) before it reported"))

    def watch(self, extension: Any, member: Member) -> None:
        """Record the payload objects ``extension`` makes while a broadcast runs, and
        count the compressed frames it decodes."""
        encode, decode = extension.encode, extension.decode

        def encoding(frame: Frame) -> Frame:
            out = encode(frame)
            if self._payloads is not None:
                self._payloads.append(out.data)  # kept: ids stay distinct
            return out

        def decoding(frame: Frame, **kwargs: Any) -> Frame:
            member.compressed_frames_in += frame.rsv1
            return decode(frame, **kwargs)

        extension.encode, extension.decode = encoding, decoding

    # ---- the scenario's sends

    async def arrival(self, names: list[str]) -> None:
        while not all(name in self.members for name in names):
            for process in self.processes:
                if process.returncode is not None:
                    raise AssertionError(f"a client program exited ({process.returncode})")
            await asyncio.sleep(0.01)

    def broadcast(self, message: Message) -> None:
        """websockets' own broadcast() to every member, closed ones included."""
        members = list(self.members.values())
        reached = [m for m in members if m.connection.protocol.state is State.OPEN]
        self._payloads = []
        try:
            aserver.broadcast([m.connection for m in members], message, raise_exceptions=True)
            payloads = len({id(p) for p in self._payloads})
        finally:
            self._payloads = None
        for member in reached:
            member.sent.append(message)
        sets = {compressor_of(m.connection)._group()[0] for m in reached}
        self.broadcasts.append(Broadcast(len(reached), payloads, len(sets)))

    async def private(self, name: str, message: Message | list[Message]) -> None:
        """Send to one member; a list is sent as one fragmented message."""
        member = self.members[name]
        await member.connection.send(message)
        member.sent.append(message if isinstance(message, (str, bytes)) else "".join(message))

    async def leave(self, name: str) -> None:
        """The member reports and closes its connection itself."""
        await self.private(name, "__close__")
        await self.members[name].report
        await self.members[name].connection.wait_closed()

    def open_names(self) -> list[str]:
        return [name for name, m in self.members.items() if m.connection.state is State.OPEN]

    async def finish(self) -> None:
        """Every member still open reports; then the server closes it."""
        open_members = [self.members[name] for name in self.open_names()]
        for member in open_members:
            await member.connection.send("__report__")
            member.sent.append("__report__")
        await asyncio.gather(*(m.report for m in open_members))
        await asyncio.gather(*(m.connection.close() for m in open_members))


async def scenario(room: Room, groups: list[Clients]) -> None:
    """Broadcasts with everything the issue names between them."""
    seq = 0

    def update() -> str:  # ~1 KB of JSON, new each time
        nonlocal seq
        seq += 1
        return json.dumps({"seq": seq, "room": "lobby", "text": make_text(900, seq)})

    await room.arrival([name for group in groups for name in group.names])
    for _ in range(10):
        room.broadcast(update())
    await room.private(groups[0].names[0], make_text(1000, 1))  # one leaves the group
    for _ in range(5):
        room.broadcast(update())
    room.broadcast(make_binary(1024, 2))
    room.broadcast(make_text(100_000, 3))  # over 64 KB
    room.broadcast(make_binary(100_000, 4))
    room.broadcast(make_text(300_000, 5))  # over the size compress once shares
    room.broadcast(update())
    text = make_text(3000, 6)
    for name in room.open_names():  # a fragmented message, each connection on its own
        await room.private(name, [text[:1000], text[1000:2000], text[2000:]])
    for _ in range(5):
        room.broadcast(update())
    for group in groups:  # late joiners
        await room.private(group.names[0], f"__join__ {group.late}")
        await room.arrival([group.late])
    for _ in range(5):
        room.broadcast(update())
    for group in groups:  # a client leaves: its closed connection stays in the broadcasts
        await room.leave(group.leaver)
    for k in range(40):
        if k % 7 == 3:
            names = room.open_names()
            await room.private(names[k % len(names)], make_text(800, k))
        room.broadcast(update())
    for _ in range(SETTLE):  # nothing else: the groups come together again, once it pays
        room.broadcast(update())
    await room.finish()


Play = Callable[[Room, list[Clients]], Awaitable[None]]


def run_room(impl: ModuleType, groups: list[Clients], tmp_path: Path,
             room: Room | None = None, play: Play = scenario) -> Room:
    """Serve ``play`` (the scenario) to ``groups`` (enable(); websockets' defaults unless
    ``room`` chooses otherwise); the room."""
    room = Room(impl) if room is None else room

    async def main() -> None:
        processes = room.processes
        async with aserver.serve(room.handler, HOST, 0,
                                 process_request=room.process_request) as server:
            port = server.sockets[0].getsockname()[1]
            try:
                for i, group in enumerate(groups):
                    processes.append(await start(group, port, tmp_path / f"{i}-{group.program}"))
                await play(room, groups)
                for group, process in zip(groups, processes):
                    if group.program == "node":  # exits once its connections are closed
                        out, _ = await asyncio.wait_for(process.communicate(), 30)
                        codes = json.loads(out)
                        assert codes == dict.fromkeys(group.every_name(), 1000), codes
            finally:
                for process in processes:
                    await stop(process)

    fw.enable()
    try:
        asyncio.run(asyncio.wait_for(main(), 150))
    except BaseException:
        for log in sorted(tmp_path.glob("*/stderr.txt")):
            print(f"--- {log}\n{log.read_text(errors='replace')[-3000:]}")
        raise
    finally:
        fw.disable()
    return room


def check(room: Room, groups: list[Clients]) -> None:
    """Every client got exactly its messages; the broadcasts compressed once."""
    expected_names = {name for group in groups for name in group.every_name()}
    assert set(room.members) == expected_names
    for group in groups:
        for name in group.every_name():
            member = room.members[name]
            extension = member.connection.protocol.extensions[0]
            assert type(extension) is fw.PerMessageDeflate
            assert type(compressor_of(member.connection)) is room.impl.Compressor
            assert room.offers[name] == group.offer
            report = member.report.result()
            assert report["name"] == name
            assert member.connection.response.headers["Sec-WebSocket-Extensions"] == group.answer
            # the client's WebSocket.extensions: Chromium's is the answer, ws's the name
            assert report["extensions"] == (group.answer if group.program == "chromium"
                                            else "permessage-deflate")
            assert report["messages"] == [record(m) for m in member.sent], name
            assert member.sent[-1] == ("__close__" if name == group.leaver else "__report__")
            assert member.compressed_frames_in >= 1  # its report: our decompressor
            assert member.close_code == 1000
    first, last = room.broadcasts[0], room.broadcasts[-1]
    # compress once: one compression per parameter set, at the start and once the
    # private messages, fragments and late joiners are far enough behind that starting
    # over pays (_start_over_due_now); a connection that diverged compresses alone until then
    # (never more than one each)
    assert first.payloads == first.parameter_sets < first.deliveries
    assert last.payloads == last.parameter_sets < last.deliveries
    assert all(b.payloads <= b.deliveries for b in room.broadcasts)
    compressions = sum(b.payloads for b in room.broadcasts)
    deliveries = sum(b.deliveries for b in room.broadcasts)
    assert compressions < deliveries

# ---------------------------------------------------------------------------- the tests


@needs_node
@pytest.mark.parametrize("options", [{}, NCT_OPTIONS], ids=["default", "no_context_takeover"])
def test_node_ws_clients(use_impl: ModuleType, tmp_path: Path, options: dict[str, Any]) -> None:
    """Four Node.js ws clients (and a late joiner), with ws's default offer or with no
    context takeover both ways."""
    groups = [node_clients("node", 4, options)]
    check(run_room(use_impl, groups, tmp_path), groups)


@needs_chromium
def test_chromium_clients(use_impl: ModuleType, tmp_path: Path) -> None:
    """Three WebSockets of a headless Chromium page (and a late joiner)."""
    groups = [chromium_clients(3)]
    check(run_room(use_impl, groups, tmp_path), groups)


@needs_node
@needs_chromium
def test_a_room_of_node_and_chromium(use_impl: ModuleType, tmp_path: Path) -> None:
    """ws clients with both offers and Chromium in one room: two parameter sets, each
    compressed once per broadcast."""
    groups = [node_clients("node", 2), chromium_clients(2),
              node_clients("node-nct", 2, NCT_OPTIONS)]
    check(run_room(use_impl, groups, tmp_path), groups)


# ------------------------------------------------------------------ compress what pays

#: The what-pays tests' server windows: with context takeover every one websockets
#: compresses with (it takes 8 as 9); without, the smallest, its default and the largest.
WINDOWS = tuple(range(9, 16))
NCT_WINDOWS = (9, 12, 15)


class Setting(NamedTuple):
    """What the server negotiates on one connection of the what-pays tests."""

    bits: int  # server_max_window_bits (and client_max_window_bits)
    no_context_takeover: bool  # server_no_context_takeover

    @property
    def answer(self) -> str:
        """The server's Sec-WebSocket-Extensions (the clients offer ``OFFER``)."""
        nct = "server_no_context_takeover; " if self.no_context_takeover else ""
        return (f"permessage-deflate; {nct}server_max_window_bits={self.bits}; "
                f"client_max_window_bits={self.bits}")

    def factory(self) -> ServerPerMessageDeflateFactory:
        """websockets' own factory (enable(): fastdeflate's extension) for it."""
        return ServerPerMessageDeflateFactory(
            server_no_context_takeover=self.no_context_takeover,
            server_max_window_bits=self.bits, client_max_window_bits=self.bits,
            compress_settings={"memLevel": 5})  # websockets' default

    def stream(self) -> list[Item]:
        """The connection's messages: the mixed stream, each message that grows
        echoed (with_echoes)."""
        return with_echoes(mixed_stream(seed=self.bits + 100 * self.no_context_takeover))


class WhatPaysRoom(Room):
    """A room whose server negotiates each connection as ``settings`` says for its
    name, sends it its own mixed stream (``streams``) and keeps every byte it writes
    to it after the handshake (``written``)."""

    def __init__(self, impl: ModuleType, settings: dict[str, Setting]) -> None:
        super().__init__(impl)
        self.settings = settings
        self.streams = {name: setting.stream() for name, setting in settings.items()}
        self.written: dict[str, list[bytes]] = {}

    def process_request(self, connection: aserver.ServerConnection, request: Any) -> Any:
        """The WebSocket's extension: this connection's setting (called before the
        handshake's negotiation)."""
        if urlsplit(request.path).path == "/ws":
            setting = self.settings[name_of(connection)]
            connection.protocol.available_extensions = [setting.factory()]
        return super().process_request(connection, request)

    def watch(self, extension: Any, member: Member) -> None:
        """Also keep what the server writes to the socket from now on: the frames as
        they went out."""
        super().watch(extension, member)
        written = self.written[name_of(member.connection)] = []
        transport = member.connection.transport
        write = transport.write

        def writing(data: Any) -> None:
            written.append(bytes(data))
            write(data)

        transport.write = writing  # type: ignore[method-assign]

    async def send_stream(self, name: str) -> None:
        """The connection's mixed stream: fragmented messages from a list, the opted-out
        inside uncompressed() (this task only)."""
        member, items = self.members[name], self.streams[name]
        for k, item in enumerate(items):
            try:
                with fastdeflate.uncompressed(item.opt_out):
                    await member.connection.send(item.parts if len(item.parts) > 1
                                                 else item.parts[0])
            except ConnectionClosed as exc:  # Chromium drops what it cannot decode
                code = exc.rcvd.code if exc.rcvd else "no close frame"
                raise AssertionError(f"{name} closed ({code}) before message {k} of "
                                     f"{len(items)}") from exc
            member.sent.append(item.message)


async def what_pays(room: Room, groups: list[Clients]) -> None:
    """Every connection its mixed stream, all at once; then every one reports."""
    assert isinstance(room, WhatPaysRoom)
    names = [name for group in groups for name in group.names]
    await room.arrival(names)
    await asyncio.gather(*(room.send_stream(name) for name in names))
    await asyncio.sleep(0.1)  # for the message: which clients failed a message and closed
    shut = {name: room.members[name].connection.close_code
            for name in names if name not in room.open_names()}
    assert not shut, f"clients closed connections (codes): {shut}"
    await room.finish()


def check_what_pays(room: WhatPaysRoom, groups: list[Clients]) -> None:
    """Every client got exactly its messages (kind, size and SHA-256 of each); on the
    wire each went out compressed or as it is as its item says, with the window and
    context takeover its setting says; status() counts those sent as they are."""
    assert set(room.members) == {name for group in groups for name in group.names}
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for group in groups:
        for name in group.names:
            member, setting = room.members[name], room.settings[name]
            items = room.streams[name]
            extension = member.connection.protocol.extensions[0]
            assert type(extension) is fw.PerMessageDeflate
            assert extension.local_max_window_bits == setting.bits
            assert extension.local_no_context_takeover == setting.no_context_takeover
            assert type(compressor_of(member.connection)) is room.impl.Compressor
            assert room.offers[name] == group.offer
            answer = member.connection.response.headers["Sec-WebSocket-Extensions"]
            assert answer == setting.answer
            report = member.report.result()
            assert report["name"] == name
            assert report["extensions"] == (answer if group.program == "chromium"
                                            else "permessage-deflate")
            assert member.sent == [item.message for item in items] + ["__report__"]
            assert report["messages"] == [record(m) for m in member.sent], name
            rsv1 = messages_rsv1(wire_frames(b"".join(room.written[name])))
            assert rsv1[-1] == [True], name  # "__report__": compressed
            by_reason = uncompressed_by_reason(items, rsv1[:-1])
            assert by_reason["grew"] >= 1  # compressed messages follow each
            counts.update(by_reason)
            sizes.update(uncompressed_bytes_by_reason(items))
            assert member.compressed_frames_in >= 1  # its report: our decompressor
            assert member.close_code == 1000
    assert sent_uncompressed() == counts
    assert sent_uncompressed("bytes") == sizes


def run_what_pays(impl: ModuleType, program: str, settings: dict[str, Setting],
                  tmp_path: Path) -> None:
    """One run of ``program`` opens a connection per setting, named as its key; the
    server sends each its mixed stream (default choice() settings); check_what_pays."""
    groups = [Clients(program, tuple(settings), OFFER, joins=False)]
    with choice():
        room = WhatPaysRoom(impl, settings)
        run_room(impl, groups, tmp_path, room, what_pays)
        check_what_pays(room, groups)


@needs_node
def test_node_ws_what_pays_every_window(use_impl: ModuleType, tmp_path: Path) -> None:
    """Compress what pays to Node.js ws (issue 31): from one node process, a connection
    per server window 9..15 with context takeover and at 9, 12 and 15 without, each sent
    the mixed stream: messages that come out larger (sent as they are, the compressor
    put back) followed by compressed ones that reference the history or repeat the
    grown message's bytes, random and PNG blobs, opted-out and fragmented messages. ws
    decodes every message exactly, which it could not if the window kept a message it
    never saw."""
    settings = {f"ws-{bits}": Setting(bits, False) for bits in WINDOWS}
    settings |= {f"ws-nct-{bits}": Setting(bits, True) for bits in NCT_WINDOWS}
    run_what_pays(use_impl, "node", settings, tmp_path)


@needs_chromium
def test_chromium_what_pays_every_window(use_impl: ModuleType, tmp_path: Path) -> None:
    """The same to a headless Chromium page: a WebSocket per server window 9..15, with
    context takeover, from one browser run."""
    settings = {f"chromium-{bits}": Setting(bits, False) for bits in WINDOWS}
    run_what_pays(use_impl, "chromium", settings, tmp_path)
