"""fastdeflate in aiohttp: real clients and servers on 127.0.0.1, both implementations.

The enabled side is always this process (``enable()`` patches aiohttp process-wide, as
aiohttp has no per-connection codec hook); a stock aiohttp peer runs in a subprocess. A
stock ``websockets`` peer (never patched here) covers what two aiohttp peers cannot
negotiate (the no-context-takeover flags, a client window of 9) and fragmented messages.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import dataclasses
import functools
import gc
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import threading
import warnings
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest
import websockets.asyncio.client
import websockets.exceptions
import websockets.asyncio.server
from aiohttp import compression_utils, web
from aiohttp._websocket import reader_py, writer as ws_writer
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http_websocket import WebSocketError, WebSocketWriter, WSMsgType
from websockets.extensions.permessage_deflate import (
    ClientPerMessageDeflateFactory,
    ServerPerMessageDeflateFactory,
)

import fastdeflate
import fastdeflate._params
from fastdeflate import _off_loop
from fastdeflate.integrations import aiohttp as fd_aiohttp
from _mixed import grows
from _samezlib import same_zlib_as_stdlib

try:
    from aiohttp._websocket import reader_c
except ImportError:  # pragma: no cover - aiohttp's wheels ship it
    reader_c = None

SIZES = (0, 1, 1024, 65536, 1_000_000)
SMALL_SIZES = (0, 1, 1024)
KINDS = ("text", "binary")
TIMEOUT = 60


# --- messages ---------------------------------------------------------------------

MESSAGE_SRC = r'''
import random
def make_message(size, kind, seed=0):
    """Deterministic, partly compressible: JSON-ish ASCII; binary adds random bytes."""
    rnd = random.Random(size * 7 + seed)
    words = [b'{"id": ', b'"alpha"', b", ", b'"beta": ', b"true", b"}\n", b"gamma "]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words) if rnd.random() < 0.7 else b"%d" % rnd.randrange(10**6)
    if kind == "binary":
        out[: size // 4] = rnd.randbytes(size // 4)
    return bytes(out[:size])
'''
exec(MESSAGE_SRC)  # defines make_message (the stock peer subprocess uses the same code)
make_message = functools.lru_cache(maxsize=None)(make_message)  # type: ignore[name-defined]


def messages(sizes: tuple[int, ...] = SIZES, seed: int = 0) -> list[tuple[str, bytes]]:
    return [(kind, make_message(n, kind, seed)) for n in sizes for kind in KINDS]


# --- the stock aiohttp peer (a subprocess: this process may be patched) -------------

PEER_SRC = MESSAGE_SRC + r'''
import asyncio, json, sys
import aiohttp
from aiohttp import web

async def serve():
    async def echo(request):
        ws = web.WebSocketResponse(max_msg_size=int(request.query.get("max", 4 << 20)))
        await ws.prepare(request)
        while True:
            msg = await ws.receive()
            if msg.type == aiohttp.WSMsgType.TEXT:
                await ws.send_str(msg.data)
            elif msg.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(msg.data)
            else:
                break
        return ws
    app = web.Application()
    app.router.add_get("/", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runner.cleanup()

async def client(url, compress, sizes):
    results = []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url, compress=compress) as ws:
            for size in sizes:
                for kind in ("text", "binary"):
                    data = make_message(size, kind)
                    if kind == "text":
                        await ws.send_str(data.decode())
                        msg = await ws.receive()
                        ok = msg.type == aiohttp.WSMsgType.TEXT and msg.data == data.decode()
                    else:
                        await ws.send_bytes(data)
                        msg = await ws.receive()
                        ok = msg.type == aiohttp.WSMsgType.BINARY and msg.data == data
                    results.append([kind, size, ok])
            print(json.dumps({"compress": ws.compress, "results": results}), flush=True)

if sys.argv[1] == "server":
    asyncio.run(serve())
else:
    asyncio.run(client(sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
'''


# The fastdeflate this process imported (the source tree, or site-packages in CI).
# Subprocesses also run there: "-c" puts the working directory first on sys.path, and
# from a checkout's root that is the source tree, without the built extension.
PACKAGE_PARENT = str(Path(fastdeflate.__file__).resolve().parents[1])


def _peer_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": PACKAGE_PARENT}


@pytest.fixture(scope="module")
def stock_server_url() -> Iterator[str]:
    """A stock aiohttp echo server in a subprocess (``?max=N`` sets max_msg_size)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PEER_SRC, "server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_peer_env(), cwd=PACKAGE_PARENT,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()


def run_stock_client(url: str, compress: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", PEER_SRC, "client", url, str(compress), json.dumps(sizes)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_peer_env(), cwd=PACKAGE_PARENT,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# --- in-process helpers -----------------------------------------------------------


@pytest.fixture
def compress_everything() -> Iterator[None]:
    """Every message compressed, as stock aiohttp does (no minimum size, incompressible
    ones too); the settings put back after the test."""
    size = fastdeflate.set_min_size(0)
    skip = fastdeflate.set_skip_incompressible(False)
    try:
        yield
    finally:
        fastdeflate.set_min_size(size)
        fastdeflate.set_skip_incompressible(skip)


@pytest.fixture
def enabled(use_impl: ModuleType) -> Iterator[ModuleType]:
    """fastdeflate enabled for aiohttp, on the implementation ``use_impl`` selected."""
    fd_aiohttp.enable()
    try:
        yield use_impl
    finally:
        fd_aiohttp.disable()


@contextlib.contextmanager
def patched(on: bool) -> Iterator[None]:
    if on:
        fd_aiohttp.enable()
    try:
        yield
    finally:
        fd_aiohttp.disable()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


EVENTS = web.AppKey("events", list)


async def _echo(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse(max_msg_size=int(request.query.get("max", 4 << 20)))
    await ws.prepare(request)
    events = request.app[EVENTS]
    decompressors: set[type] = set()
    while True:
        msg = await ws.receive()
        if not ws.closed:  # the parser is released once closed
            decompressors |= decompressor_types(ws_parser(ws, request))
        if msg.type == WSMsgType.TEXT:
            await ws.send_str(msg.data)
        elif msg.type == WSMsgType.BINARY:
            await ws.send_bytes(msg.data)
        else:
            if msg.type == WSMsgType.ERROR:
                exc = msg.data
                events.append(("error", type(exc), getattr(exc, "code", None), str(exc)))
            break
    assert ws._writer is not None
    events.append(
        (
            "done",
            ws.compress,
            ws._writer.notakeover,
            type(ws._writer._compressobj),
            decompressors,
            ws.close_code,
        )
    )
    return ws


@contextlib.asynccontextmanager
async def aiohttp_server() -> AsyncIterator[tuple[str, list]]:
    """An aiohttp echo server in this process; yields its URL and its event list."""
    app = web.Application()
    app[EVENTS] = []
    app.router.add_get("/", _echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/", app[EVENTS]
    finally:
        await runner.cleanup()


def ws_parser(ws: Any, request: web.Request | None = None) -> object:
    """The WebSocketReader of a server (give ``request``) or client connection."""
    parser = getattr(ws, "_parser", None)  # aiohttp >= 3.14 keeps it here
    if parser is None:
        protocol = request.protocol if request is not None else ws._response.connection.protocol
        parser = protocol._payload_parser
    return getattr(parser, "reader", parser)  # behind fastdeflate's gate (off-loop)


def decompressor_types(parser: object) -> set[type]:
    """Types of the codec objects a (Cython or Python) WebSocketReader holds."""
    return {
        type(o)
        for o in gc.get_referents(parser) + list(getattr(parser, "__dict__", {}).values())
        if type(o) in (fd_aiohttp.WebSocketDecompressor, compression_utils.ZLibDecompressor)
    }


async def aiohttp_echo_session(
    url: str, compress: int, msgs: list[tuple[str, bytes]], **kwargs: Any
) -> aiohttp.ClientWebSocketResponse:
    """Send every message from an aiohttp client and check the echo of each."""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url, compress=compress, **kwargs) as ws:
            for kind, data in msgs:
                if kind == "text":
                    await ws.send_str(data.decode())
                    msg = await ws.receive()
                    assert (msg.type, msg.data) == (WSMsgType.TEXT, data.decode())
                else:
                    await ws.send_bytes(data)
                    msg = await ws.receive()
                    assert (msg.type, msg.data) == (WSMsgType.BINARY, data)
            ws.decompressors = decompressor_types(ws_parser(ws))  # type: ignore[attr-defined]
            return ws


def assert_server_used_fastdeflate(events: list, compress: int) -> None:
    done = [e for e in events if e[0] == "done"]
    assert len(done) == 1, events
    _, negotiated, _, compressor, decompressors, _ = done[0]
    assert negotiated == compress
    assert compressor is fd_aiohttp.WebSocketCompressor
    assert decompressors == {fd_aiohttp.WebSocketDecompressor}


# --- aiohttp <-> aiohttp -----------------------------------------------------------


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("wbits", [15, 9])
def test_enabled_server_stock_client(enabled: ModuleType, wbits: int) -> None:
    async def main() -> None:
        async with aiohttp_server() as (url, events):
            loop = asyncio.get_running_loop()
            report = await loop.run_in_executor(None, run_stock_client, url, wbits, SIZES)
            assert report["compress"] == 15  # aiohttp servers never limit the client
            assert len(report["results"]) == 2 * len(SIZES)
            assert all(ok for _, _, ok in report["results"]), report
            await asyncio.sleep(0.05)
        assert_server_used_fastdeflate(events, wbits)

    run(main())


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("wbits", [15, 9])
def test_stock_server_enabled_client(
    enabled: ModuleType, stock_server_url: str, wbits: int
) -> None:
    async def main() -> None:
        ws = await aiohttp_echo_session(stock_server_url, wbits, messages())
        assert ws.compress == 15
        assert type(ws._writer._compressobj) is fd_aiohttp.WebSocketCompressor
        assert ws.decompressors == {fd_aiohttp.WebSocketDecompressor}

    run(main())


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("wbits", [15, 9])
def test_enabled_server_enabled_client(enabled: ModuleType, wbits: int) -> None:
    async def main() -> None:
        async with aiohttp_server() as (url, events):
            ws = await aiohttp_echo_session(url, wbits, messages())
            assert type(ws._writer._compressobj) is fd_aiohttp.WebSocketCompressor
            assert ws.decompressors == {fd_aiohttp.WebSocketDecompressor}
            await asyncio.sleep(0.05)
        assert_server_used_fastdeflate(events, wbits)

    run(main())


@pytest.mark.timeout(TIMEOUT)
def test_uncompressed_connection_and_control_frames(enabled: ModuleType) -> None:
    """Without negotiation nothing is compressed; pings/pongs pass on a compressed one."""

    async def main() -> None:
        async with aiohttp_server() as (url, events):
            ws = await aiohttp_echo_session(url, 0, messages(SMALL_SIZES))
            assert ws.compress == 0 and ws._writer._compressobj is None
            assert ws.decompressors == set()
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(url, compress=15, autoping=False) as ws:
                    await ws.send_bytes(b"x" * 100)
                    assert (await ws.receive()).data == b"x" * 100
                    await ws.ping(b"ping-payload")
                    msg = await ws.receive()
                    assert (msg.type, msg.data) == (WSMsgType.PONG, b"ping-payload")
            await asyncio.sleep(0.05)
        assert [e[1] for e in events if e[0] == "done"] == [0, 15]

    run(main())


# --- aiohttp <-> websockets: the no-context-takeover flags, windows, fragments --------

FLAGS = {
    "takeover": {},
    "server_no_context_takeover": {"server_no_context_takeover": True},
    "client_no_context_takeover": {"client_no_context_takeover": True},
    "both_no_context_takeover": {
        "server_no_context_takeover": True,
        "client_no_context_takeover": True,
    },
    "window_9": {"server_max_window_bits": 9, "client_max_window_bits": 9},
}


def fragments(value: Any, parts: int = 3) -> list[Any]:
    """``value`` (str or bytes) cut into about ``parts`` pieces (one if empty)."""
    step = max(1, -(-len(value) // parts))
    return [value[i : i + step] for i in range(0, len(value), step)] or [value]


async def websockets_echo_check(ws: Any, msgs: list[tuple[str, bytes]]) -> None:
    """From a websockets peer: send each message whole and fragmented, check echoes."""
    for kind, data in msgs:
        value: Any = data.decode() if kind == "text" else data
        await ws.send(value)
        assert await ws.recv() == value
        await ws.send(fragments(value))  # continuation frames, compressed
        assert await ws.recv() == value


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("flags", list(FLAGS))
def test_enabled_server_websockets_client(enabled: ModuleType, flags: str) -> None:
    params = FLAGS[flags]
    sizes = SIZES if flags == "takeover" else SMALL_SIZES + (65536,)

    async def main() -> None:
        async with aiohttp_server() as (url, events):
            factory = ClientPerMessageDeflateFactory(**params)
            async with websockets.asyncio.client.connect(
                url.replace("http", "ws"), extensions=[factory], compression=None, max_size=None
            ) as ws:
                await websockets_echo_check(ws, messages(sizes))
            await asyncio.sleep(0.05)
        done = [e for e in events if e[0] == "done"]
        assert done and done[0][2] == params.get("server_no_context_takeover", False)
        assert_server_used_fastdeflate(events, params.get("server_max_window_bits", 15))

    run(main())


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("flags", list(FLAGS))
def test_enabled_client_websockets_server(enabled: ModuleType, flags: str) -> None:
    params = FLAGS[flags]
    sizes = SIZES if flags == "takeover" else SMALL_SIZES + (65536,)

    async def handler(ws: Any) -> None:
        async for message in ws:  # echo, fragmented when asked to
            if isinstance(message, str) and message.startswith("fragment:"):
                await ws.send([message[i : i + 7] for i in range(0, len(message), 7)])
            elif isinstance(message, bytes) and message.startswith(b"fragment:"):
                await ws.send([message[i : i + 7] for i in range(0, len(message), 7)])
            else:
                await ws.send(message)

    async def main() -> None:
        factory = ServerPerMessageDeflateFactory(**params)
        async with websockets.asyncio.server.serve(
            handler, "127.0.0.1", 0, extensions=[factory], compression=None, max_size=None
        ) as server:
            port = server.sockets[0].getsockname()[1]
            url = f"http://127.0.0.1:{port}/"
            msgs = messages(sizes)
            msgs += [(kind, b"fragment:" + data) for kind, data in messages(SMALL_SIZES)]
            ws = await aiohttp_echo_session(url, 15, msgs)
            assert ws.compress == params.get("client_max_window_bits", 15)
            assert ws.client_notakeover == params.get("client_no_context_takeover", False)
            assert type(ws._writer._compressobj) is fd_aiohttp.WebSocketCompressor
            assert ws.decompressors == {fd_aiohttp.WebSocketDecompressor}

    run(main())


# --- limits and errors: same close codes and exceptions as stock ----------------------


def _oversized_session(on: bool, side: str) -> tuple[Any, ...]:
    """aiohttp <-> aiohttp; the receiving side's limit is 64 KiB; 100 KB is sent."""
    limit, big = 65536, make_message(100_000, "text")

    async def main() -> tuple[Any, ...]:
        async with aiohttp_server() as (url, events):
            async with aiohttp.ClientSession() as session:
                if side == "server":
                    async with session.ws_connect(url + f"?max={limit}", compress=15) as ws:
                        await ws.send_bytes(big)
                        msg = await ws.receive()
                        assert msg.type == WSMsgType.CLOSE
                        peer = (msg.data, ws.close_code)
                    await asyncio.sleep(0.05)
                    error = [e for e in events if e[0] == "error"]
                    return (peer, error)
                async with session.ws_connect(url, compress=15, max_msg_size=limit) as ws:
                    await ws.send_bytes(big)
                    msg = await ws.receive()
                    assert msg.type == WSMsgType.ERROR
                    exc = msg.data
                    here = (type(exc), getattr(exc, "code", None), str(exc), ws.close_code)
                await asyncio.sleep(0.05)
                done = [e for e in events if e[0] == "done"]
                return (here, done[0][-1] if done else None)

    with patched(on):
        return run(main())


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("side", ["server", "client"])
def test_oversized_message_like_stock(use_impl: ModuleType, side: str) -> None:
    stock = _oversized_session(False, side)
    ours = _oversized_session(True, side)
    assert ours == stock
    if side == "server":  # the client saw the server close with 1009
        assert stock[0] == (1009, 1009)
    else:  # the client got aiohttp's WebSocketError(1009) and closed with 1009
        assert stock[0][1] == stock[0][3] == 1009


def _frame(opcode: int, payload: bytes, *, rsv1: bool = False, mask: bool = True) -> bytes:
    head = bytes([0x80 | (0x40 if rsv1 else 0) | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    key = await reader.readexactly(4) if b1 & 0x80 else b""
    data = await reader.readexactly(n)
    if key:
        data = bytes(b ^ key[i % 4] for i, b in enumerate(data))
    return b0, data


TAIL = b"\x00\x00\xff\xff"
CORRUPT = b"\xff\xff\xff\xff"  # BFINAL=1, BTYPE=11: "invalid block type"
HELLO = bytes.fromhex("f248cdc9c90700")  # RFC 7692: "Hello", compressed


#: A raw peer sends an uncompressed frame, a ping, a valid then a corrupt one.
CORRUPT_FRAMES = [
    (0x1, b"plain", False),  # uncompressed, RSV1 clear
    (0x9, b"ping", False),
    (0x1, HELLO, True),
    (0x2, CORRUPT, True),
]


def _raw_peer_session(
    on: bool, side: str, frames: list[tuple[int, bytes, bool]] = CORRUPT_FRAMES
) -> tuple[Any, ...]:
    """A raw peer sends ``frames`` (opcode, payload, RSV1) then reads until a close."""

    async def raw_frames(reader: asyncio.StreamReader, writer: Any, mask: bool) -> list:
        seen = []
        for opcode, payload, rsv1 in frames:
            writer.write(_frame(opcode, payload, rsv1=rsv1, mask=mask))
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                b0, data = await _read_frame(reader)
                seen.append((b0, data[:2] if b0 & 0xF == 0x8 else data))
                if b0 & 0xF == 0x8:
                    break
        return seen

    async def server_side() -> tuple[Any, ...]:
        async with aiohttp_server() as (url, events):
            port = int(url.rsplit(":", 1)[1].strip("/"))
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write(
                (
                    f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                    "Sec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
                ).encode()
            )
            response = await reader.readuntil(b"\r\n\r\n")
            assert b" 101 " in response and b"permessage-deflate" in response
            seen = await raw_frames(reader, writer, mask=True)
            writer.close()
            await asyncio.sleep(0.05)
        errors = [e[:3] for e in events if e[0] == "error"]
        return seen, errors, [e[-1] for e in events if e[0] == "done"]

    async def client_side() -> tuple[Any, ...]:
        seen: list = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            request = (await reader.readuntil(b"\r\n\r\n")).decode()
            key = next(
                line.split(":", 1)[1].strip()
                for line in request.split("\r\n")
                if line.lower().startswith("sec-websocket-key:")
            )
            accept = base64.b64encode(
                hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
            ).decode()
            writer.write(
                (
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n"
                    "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
                ).encode()
            )
            seen.extend(await raw_frames(reader, writer, mask=False))
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        received = []
        async with server:
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"http://127.0.0.1:{port}/", compress=15) as ws:
                    while True:
                        msg = await ws.receive()
                        if msg.type == WSMsgType.ERROR:
                            exc = msg.data
                            received.append((type(exc), getattr(exc, "code", None)))
                            break
                        received.append((msg.type, msg.data))
                        if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSED):
                            break
                    code = ws.close_code
            await asyncio.sleep(0.05)
        return seen, received, code

    with patched(on):
        return run(server_side() if side == "server" else client_side())


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("side", ["server", "client"])
def test_corrupt_frame_like_stock(use_impl: ModuleType, side: str) -> None:
    stock = _raw_peer_session(False, side)
    ours = _raw_peer_session(True, side)
    assert ours == stock
    seen = stock[0]
    assert seen[-1][0] == 0x88  # both send a close frame, with the same code


# --- messages made of several deflate streams (blocks with BFINAL set) ---------------------

#: The codec's limit of deflate streams per message (shared by both implementations).
MAX_STREAMS = fastdeflate._params.MAX_STREAMS_PER_MESSAGE
#: aiohttp >= 3.14.4 refuses more than this many streams ("members") in one message.
STOCK_MAX_STREAMS = getattr(compression_utils, "MAX_DECOMPRESS_MEMBERS", None)


def deflate_streams(count: int) -> bytes:
    """A message payload of ``count`` deflate streams, each ending with BFINAL set.

    Ends with ``00`` as RFC 7692 section 7.2.3.4 shows, so that the ``00 00 ff ff`` the
    receiver appends makes an empty stored block.
    """
    out = b""
    for i in range(count):
        c = zlib.compressobj(wbits=-15)
        out += c.compress(b"m%d;" % i) + c.flush(zlib.Z_FINISH)
    return out + b"\x00"


def echoed(seen: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The raw peer's frames from aiohttp, compressed payloads inflated (one stream)."""
    inflater = zlib.decompressobj(-15)
    return [(b0, inflater.decompress(data + TAIL) if b0 & 0x40 else data) for b0, data in seen]


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("side", ["server", "client"])
def test_message_of_many_deflate_streams_decodes(use_impl: ModuleType, side: str) -> None:
    """Up to the codec's limit of streams in one message, then a message after it, then
    one whose second stream refers back to the first (stock aiohttp 3.14 fails it)."""
    text = b"".join(b"m%d;" % i for i in range(MAX_STREAMS))
    fox = b"the quick brown fox jumps over the lazy dog " * 3
    first = zlib.compressobj(wbits=-15)
    second = zlib.compressobj(wbits=-15, zdict=fox)  # back-references into the first
    history = (
        first.compress(fox) + first.flush(zlib.Z_FINISH)
        + second.compress(fox) + second.flush(zlib.Z_FINISH) + b"\x00"
    )
    frames = [
        (0x2, deflate_streams(MAX_STREAMS), True),
        (0x2, HELLO, True),
        (0x2, history, True),
        (0x8, struct.pack("!H", 1000), False),
    ]
    ours = _raw_peer_session(True, side, frames)
    if side == "server":
        seen, errors, codes = ours
        assert echoed(seen) == [
            (0xC2, text), (0xC2, b"Hello"), (0xC2, fox * 2), (0x88, b"\x03\xe8")
        ]
        assert (errors, codes) == ([], [1000])
    else:
        seen, received, code = ours
        assert received == [
            (WSMsgType.BINARY, text), (WSMsgType.BINARY, b"Hello"),
            (WSMsgType.BINARY, fox * 2), (WSMsgType.CLOSE, 1000),
        ]
        assert (seen, code) == ([(0x88, b"\x03\xe8")], 1000)


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("side", ["server", "client"])
def test_too_many_deflate_streams_close_1009(use_impl: ModuleType, side: str) -> None:
    """Past the codec's limit: aiohttp's own error for too many deflate streams (1009)."""
    ours = _raw_peer_session(True, side, [(0x2, deflate_streams(MAX_STREAMS + 1), True)])
    if side == "server":
        seen, errors, codes = ours
        assert errors == [("error", WebSocketError, 1009)]
    else:
        seen, received, code = ours
        assert received == [(WebSocketError, 1009)]
    assert seen == [(0x88, b"\x03\xf1")]  # aiohttp's close frame: 1009
    if STOCK_MAX_STREAMS is not None:  # stock's limit is higher; past it, the same close
        frames = [(0x2, deflate_streams(STOCK_MAX_STREAMS + 1), True)]
        assert _raw_peer_session(False, side, frames) == ours

    decompressor = fd_aiohttp.WebSocketDecompressor(suppress_deflate_header=True)
    with pytest.raises(WebSocketError) as info:
        decompressor.decompress_sync(deflate_streams(MAX_STREAMS + 1) + TAIL, 0)
    assert info.value.code == 1009
    assert str(info.value) == "Compressed message has too many deflate members"  # aiohttp's


# --- byte identity of compressed frames, executor use ---------------------------------


#: Seconds the byte sink waits, after its block, for the writer's connection to close.
SINK_TIMEOUT = 10


@dataclasses.dataclass
class Sink:
    """Where :func:`byte_sink` listens and what it has received so far."""

    port: int
    received: bytearray


@contextlib.asynccontextmanager
async def byte_sink(timeout: float = SINK_TIMEOUT) -> AsyncIterator[Sink]:
    """A raw TCP peer on 127.0.0.1 (ephemeral port) that records every byte sent to it.

    No WebSocket handshake: a WebSocketWriter is put straight on a connection to
    ``sink.port``. Close that connection inside the block; on leaving it the sink waits
    (at most ``timeout`` seconds, else TimeoutError) for the close, so ``sink.received``
    then holds everything the writer sent.
    """
    received = bytearray()
    done = asyncio.Event()

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(1 << 16):
                received.extend(chunk)
        finally:
            writer.close()
            done.set()

    server = await asyncio.start_server(record, "127.0.0.1", 0)
    try:
        yield Sink(server.sockets[0].getsockname()[1], received)
        await asyncio.wait_for(done.wait(), timeout)
    finally:
        server.close()
        await asyncio.wait_for(server.wait_closed(), timeout)


async def capture_writer(
    wbits: int, notakeover: bool, send_plan: Callable[[WebSocketWriter], Awaitable[None]]
) -> bytes:
    """Everything a real WebSocketWriter writes to a real socket (a :func:`byte_sink`)
    when ``send_plan(writer)`` sends through it."""
    loop = asyncio.get_running_loop()
    async with byte_sink() as sink:
        transport, protocol = await loop.create_connection(
            lambda: BaseProtocol(loop), "127.0.0.1", sink.port
        )
        try:
            writer = WebSocketWriter(
                protocol, transport, compress=wbits, notakeover=notakeover
            )
            await send_plan(writer)
        finally:
            transport.close()
    return bytes(sink.received)


async def capture_writer_output(
    wbits: int, notakeover: bool, sends: list[tuple[bytes, int, int | None]]
) -> bytes:
    """Everything a real WebSocketWriter writes to a real socket for ``sends``."""

    async def plan(writer: WebSocketWriter) -> None:
        for message, opcode, compress in sends:
            await writer.send_frame(message, opcode, compress)

    return await capture_writer(wbits, notakeover, plan)


def _sends(sizes: tuple[int, ...]) -> list[tuple[bytes, int, int | None]]:
    sends: list[tuple[bytes, int, int | None]] = []
    for kind, data in messages(sizes) + messages(sizes):  # repeats reuse the window
        sends.append((data, WSMsgType.TEXT if kind == "text" else WSMsgType.BINARY, None))
    sends += [(b"ping", WSMsgType.PING, None), (b"pong", WSMsgType.PONG, None)]
    sends += [(make_message(5000, "text"), WSMsgType.BINARY, 10)]  # per-message window
    # incompressible, so a stored block whose data ends like the sync-flush marker
    sends += [(random.Random(1).randbytes(300) + b"\x00\x00\xff\xff", WSMsgType.BINARY, None)]
    sends += [(b"\x03\xe8bye", WSMsgType.CLOSE, None)]
    return sends


def decode_frames(stream: bytes) -> list[tuple[int, bytes]]:
    """(first header byte, payload decompressed if RSV1) of each unmasked frame."""
    out, pos, inflater = [], 0, zlib.decompressobj(-15)
    while pos < len(stream):
        b0, n = stream[pos], stream[pos + 1] & 0x7F
        pos += 2
        if n >= 126:
            size = 2 if n == 126 else 8
            n = int.from_bytes(stream[pos : pos + size], "big")
            pos += size
        payload = stream[pos : pos + n]
        assert len(payload) == n, "a frame cut short"
        pos += n
        out.append((b0, inflater.decompress(payload + TAIL) if b0 & 0x40 else payload))
    return out


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize(
    "wbits,notakeover,sizes",
    [(15, False, SIZES), (15, True, SIZES), (9, False, SMALL_SIZES + (65536,)),
     (9, True, SMALL_SIZES + (65536,)), (12, False, SMALL_SIZES)],
)
def test_frames_byte_identical_to_stock(
    use_impl: ModuleType, compress_everything: None, wbits: int, notakeover: bool,
    sizes: tuple[int, ...]
) -> None:
    """Same frames as stock, byte for byte on the same zlib; same messages on any
    (with every message compressed, as stock does: set_skip_incompressible(False))."""
    sends = _sends(sizes)
    with patched(False):
        stock = run(capture_writer_output(wbits, notakeover, sends))
    with patched(True):
        ours = run(capture_writer_output(wbits, notakeover, sends))
    expected = [
        (0x80 | (0 if opcode >= 8 else 0x40) | opcode, message)
        for message, opcode, _ in sends
    ]
    assert decode_frames(stock) == expected
    assert decode_frames(ours) == expected
    same_zlib = same_zlib_as_stdlib(use_impl)
    if same_zlib:  # byte identity is promised on the same zlib only
        assert len(ours) == len(stock)
        assert ours == stock


def test_compressor_keeps_bytes_for_flush_and_compresses_the_rest_at_once(
    use_impl: ModuleType,
) -> None:
    """``bytes`` wait for flush() (one codec call per message); anything mutable is
    compressed at once (the caller may change it); a second call before flush compresses
    the kept bytes first. Every output is the stock object's, decoded by stock zlib."""
    def stock_payloads(calls: list[Any]) -> bytes:
        stock = zlib.compressobj(-1, zlib.DEFLATED, -15)
        return b"".join(stock.compress(bytes(c)) for c in calls) + stock.flush(
            zlib.Z_SYNC_FLUSH)

    for calls in ([b"hello " * 50], [bytearray(b"mutable " * 50)],
                  [b"first " * 40, bytearray(b"second " * 40)], [b"a" * 100, b"b" * 100]):
        ours = fd_aiohttp.WebSocketCompressor(level=-1, wbits=-15)
        kept = [bytearray(c) if isinstance(c, bytearray) else c for c in calls]
        out = b"".join(ours.compress_sync(c) for c in kept)
        if isinstance(calls[0], bytes) and len(calls) == 1:
            assert out == b""  # kept for flush()
        for c in kept:
            if isinstance(c, bytearray):
                c[:] = b"x" * len(c)  # changed after the call: must not matter
        payload = out + ours.flush(zlib.Z_SYNC_FLUSH)
        assert not payload.endswith(TAIL)  # left out: the writer would strip it
        expected = b"".join(bytes(c) for c in calls)
        assert zlib.decompressobj(-15).decompress(payload + TAIL) == expected
        if same_zlib_as_stdlib(use_impl):
            assert payload + TAIL == stock_payloads(calls)


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A real thread pool that counts the jobs it is given."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.jobs = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        self.jobs += 1
        return super().submit(fn, *args, **kwargs)


def _executor_jobs(on: bool, size: int) -> tuple[int, int]:
    """(jobs given to the loop's default executor, jobs given to fastdeflate's workers)
    while one message of ``size`` bytes is sent."""
    async def main() -> tuple[int, int]:
        executor, workers = CountingExecutor(), CountingExecutor()
        asyncio.get_running_loop().set_default_executor(executor)
        with pytest.MonkeyPatch.context() as mp:  # (the pool _off_loop.run() takes)
            mp.setattr(_off_loop, "_workers", (os.getpid(), workers))
            await capture_writer_output(15, False, [(make_message(size, "text"), 2, None)])
        workers.shutdown()
        return executor.jobs, workers.jobs

    with patched(on):
        return run(main())


@pytest.mark.timeout(TIMEOUT)
def test_large_messages_compressed_off_the_loop_like_stock(use_impl: ModuleType) -> None:
    """The messages stock compresses in the loop's default executor (over aiohttp's sync
    limit) are compressed in fastdeflate's worker threads, nicer than the loop, and
    nothing goes to the default executor (the application's run_in_executor(None))."""
    limit = ws_writer.WEBSOCKET_MAX_SYNC_CHUNK_SIZE
    for size in (limit, limit + 1, 1_000_000):
        stock, ours = _executor_jobs(False, size), _executor_jobs(True, size)
        assert stock[1] == 0 and ours[0] == 0, (size, stock, ours)
        assert ours[1] == stock[0], (size, stock, ours)
        assert (ours[1] > 0) == (size > limit), (size, ours)


# --- concurrent sends on one connection (aiohttp 3.12.0-3.13.1 have no writer lock) ------

SENDERS = 4  # tasks sending on one connection at once
#: Per task: large messages (compressed in the executor on every aiohttp version: the
#: writer's threshold is 5 KiB on 3.12, 16 KiB from 3.13) mixed with small ones.
CONCURRENT_SIZES = (200_000, 0, 100, 3_000, 60_000, 10, 1_000, 300_000, 50)


def concurrent_plan(task: int) -> list[bytes]:
    """The messages task ``task`` sends, in order, each starting with ``task:seq:``."""
    return [
        b"%d:%d:" % (task, seq) + make_message(size, "binary", task)
        for seq, size in enumerate(CONCURRENT_SIZES)
    ]


async def send_concurrently(send: Any) -> None:
    """Every task's plan sent through ``send`` by SENDERS tasks at once."""

    async def sender(task: int) -> None:
        for message in concurrent_plan(task):
            await send(message)
            await asyncio.sleep(0)  # let the other tasks send in between

    await asyncio.gather(*(sender(task) for task in range(SENDERS)))


def summary(received: list[bytes]) -> dict[int, list[tuple[bytes, int, str]]]:
    """Per sending task: (head, length, digest) of each message, in arrival order."""
    out: dict[int, list[tuple[bytes, int, str]]] = {task: [] for task in range(SENDERS)}
    for message in received:
        task = int(message.split(b":", 1)[0]) if message[:1].isdigit() else -1
        out.setdefault(task, []).append(
            (message[:12], len(message), hashlib.sha256(message).hexdigest()[:16])
        )
    return out


def assert_all_received_in_order(received: list[bytes], outcome: Any) -> None:
    """Every message intact, each task's in the order that task sent them."""
    expected = [m for task in range(SENDERS) for m in concurrent_plan(task)]
    assert summary(received) == summary(expected), outcome


async def _concurrent_to_websockets_server() -> tuple[list[bytes], Any]:
    """The enabled aiohttp client sends; a stock websockets server receives."""
    received: list[bytes] = []
    total = SENDERS * len(CONCURRENT_SIZES)
    closed: list[Any] = []

    async def handler(ws: Any) -> None:
        try:
            while len(received) < total:
                received.append(await ws.recv())
            await ws.send("done")
        except websockets.exceptions.ConnectionClosed as exc:
            closed.append(exc)

    async with websockets.asyncio.server.serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"http://127.0.0.1:{port}/", compress=15) as ws:
                assert type(ws._writer._compressobj) is not compression_utils.ZLibCompressor
                sent = await asyncio.gather(send_concurrently(ws.send_bytes),
                                            return_exceptions=True)
                reply = await ws.receive()
    return received, (sent, reply.type, reply.data, closed)


async def _concurrent_to_websockets_client() -> tuple[list[bytes], Any]:
    """The enabled aiohttp server sends; a stock websockets client receives."""
    received: list[bytes] = []
    total = SENDERS * len(CONCURRENT_SIZES)
    sent: list[Any] = []

    async def handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        sent.extend(await asyncio.gather(send_concurrently(ws.send_bytes),
                                         return_exceptions=True))
        await ws.receive()  # the client's close
        return ws

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with websockets.asyncio.client.connect(
            f"ws://127.0.0.1:{port}/", max_size=None
        ) as client:
            assert client.protocol.extensions  # permessage-deflate negotiated
            try:
                while len(received) < total:
                    received.append(await client.recv())
            except websockets.exceptions.ConnectionClosed as exc:
                sent.append(exc)
    finally:
        await runner.cleanup()
    return received, (sent,)


async def _concurrent_to_stock_aiohttp(url: str) -> tuple[list[bytes], Any]:
    """The enabled aiohttp client sends; a stock aiohttp server (subprocess) echoes."""
    received: list[bytes] = []
    total = SENDERS * len(CONCURRENT_SIZES)
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url, compress=15) as ws:
            sending = asyncio.ensure_future(send_concurrently(ws.send_bytes))
            while len(received) < total:
                msg = await ws.receive()
                if msg.type != WSMsgType.BINARY:
                    break
                received.append(msg.data)
            sent = await asyncio.gather(sending, return_exceptions=True)
            if len(received) < total:
                sent.append((msg.type, msg.data, ws.close_code))
    return received, (sent,)


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize(
    "peer", ["stock-aiohttp-server", "websockets-server", "websockets-client"]
)
def test_concurrent_sends_never_interleave(
    enabled: ModuleType, stock_server_url: str, peer: str
) -> None:
    """Large and small messages sent at once by several tasks on one connection all
    arrive intact, each task's in order (on aiohttp < 3.13.2 only the compressor's own
    lock keeps a small send from adding its data to a large one being compressed)."""
    if peer == "stock-aiohttp-server":
        received, outcome = run(_concurrent_to_stock_aiohttp(stock_server_url))
    elif peer == "websockets-server":
        received, outcome = run(_concurrent_to_websockets_server())
    else:
        received, outcome = run(_concurrent_to_websockets_client())
    assert_all_received_in_order(received, outcome)
    assert outcome[0] == [None], outcome
    if peer == "websockets-server":
        assert outcome[1:] == (WSMsgType.TEXT, "done", [])


class StartSignallingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A real thread pool that tells when a job has started running."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.started = threading.Event()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        def job() -> Any:
            self.started.set()
            return fn(*args, **kwargs)

        return super().submit(job)


@pytest.mark.timeout(TIMEOUT)
def test_send_cancelled_during_off_loop_compression(
        enabled: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """A send cancelled while its message is compressed in a worker thread: the message
    goes out whole (aiohttp >= 3.13.2 shields it) or not at all, and never inside the
    next message; the connection goes on."""
    big = b"big:" + make_message(4_000_000, "binary")
    after, last = b"after:" + make_message(3000, "text"), b"last:" + make_message(100, "text")
    received: list[bytes] = []

    async def handler(ws: Any) -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            while not received or received[-1] != last:
                received.append(await ws.recv())
            await ws.send("done")

    async def main() -> Any:
        executor = StartSignallingExecutor()  # as fastdeflate's workers (_off_loop.run)
        monkeypatch.setattr(_off_loop, "_workers", (os.getpid(), executor))
        async with websockets.asyncio.server.serve(
            handler, "127.0.0.1", 0, max_size=None
        ) as server:
            port = server.sockets[0].getsockname()[1]
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(f"http://127.0.0.1:{port}/", compress=15) as ws:
                    sending = asyncio.ensure_future(ws.send_bytes(big))
                    while not executor.started.is_set():
                        await asyncio.sleep(0.001)
                    sending.cancel()
                    await ws.send_bytes(after)
                    await ws.send_bytes(last)
                    reply = await ws.receive()
                    with contextlib.suppress(asyncio.CancelledError):
                        await sending
                    return reply.type, reply.data

    assert run(main()) == (WSMsgType.TEXT, "done")
    assert [m[:8] for m in received] in ([after[:8], last[:8]], [big[:8], after[:8], last[:8]])
    assert received[-2:] == [after, last]
    assert received[0] in (after, big)


# --- negotiation unchanged, enable()/disable() ------------------------------------------


def _negotiated(on: bool, offer: dict[str, Any]) -> tuple[Any, ...]:
    async def main() -> tuple[Any, ...]:
        async with aiohttp_server() as (url, events):
            factory = ClientPerMessageDeflateFactory(**offer)
            async with websockets.asyncio.client.connect(
                url.replace("http", "ws"), extensions=[factory], compression=None
            ) as ws:
                header = ws.response.headers.get("Sec-WebSocket-Extensions")
                await ws.send("hi")
                assert await ws.recv() == "hi"
            await asyncio.sleep(0.05)
        done = [e for e in events if e[0] == "done"]
        return header, done[0][1], done[0][2]

    with patched(on):
        return run(main())


@pytest.mark.timeout(TIMEOUT)
def test_negotiation_unchanged(use_impl: ModuleType) -> None:
    offers = [
        {},
        {"server_no_context_takeover": True, "client_no_context_takeover": True},
        {"server_max_window_bits": 9},
        {"server_max_window_bits": 12, "client_max_window_bits": 10},
        {"server_max_window_bits": 8},  # aiohttp declines: zlib can't do 8
    ]
    for offer in offers:
        assert _negotiated(True, offer) == _negotiated(False, offer), offer


@pytest.mark.timeout(TIMEOUT)
def test_enable_disable_round_trip(use_impl: ModuleType) -> None:
    readers = [m for m in (reader_c, reader_py) if m is not None]
    stock_compressor = compression_utils.ZLibCompressor
    stock_decompressor = compression_utils.ZLibDecompressor
    assert not fd_aiohttp.is_enabled()
    assert ws_writer.ZLibCompressor is stock_compressor
    try:
        for _ in range(2):  # idempotent
            fd_aiohttp.enable()
            assert fd_aiohttp.is_enabled()
            assert ws_writer.ZLibCompressor is fd_aiohttp.WebSocketCompressor
            for module in readers:
                assert module.ZLibDecompressor is fd_aiohttp.WebSocketDecompressor
            # HTTP body compression is not touched
            assert compression_utils.ZLibCompressor is stock_compressor
            assert compression_utils.ZLibDecompressor is stock_decompressor
    finally:
        fd_aiohttp.disable()
        fd_aiohttp.disable()
    assert not fd_aiohttp.is_enabled()
    assert ws_writer.ZLibCompressor is stock_compressor
    for module in readers:
        assert module.ZLibDecompressor is stock_decompressor

    async def main() -> None:  # new connections are stock again
        async with aiohttp_server() as (url, events):
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(url, compress=15) as ws:
                    await ws.send_str("x" * 100)
                    assert (await ws.receive()).data == "x" * 100
                    assert type(ws._writer._compressobj) is stock_compressor
                    assert decompressor_types(ws_parser(ws)) == {stock_decompressor}

    run(main())


READERS = [m for m in (reader_c, reader_py) if m is not None]


def hooked() -> list[object]:
    """What aiohttp's writer and readers call to build their codec objects, right now."""
    return [ws_writer.ZLibCompressor] + [m.ZLibDecompressor for m in READERS]


STOCK = [compression_utils.ZLibCompressor] + [compression_utils.ZLibDecompressor] * len(READERS)
OURS = [fd_aiohttp.WebSocketCompressor] + [fd_aiohttp.WebSocketDecompressor] * len(READERS)


#: aiohttp's own writer methods that enable() replaces (to clear RSV1 on skipped messages).
STOCK_WRITER = {name: vars(WebSocketWriter)[name]
                for name in ("_send_compressed_frame_sync", "_send_compressed_frame_async_locked")
                if name in vars(WebSocketWriter)}
#: Compress what pays needs the writer's per-path send methods (aiohttp >= 3.13.2); an
#: older aiohttp compresses every message, as stock (its other tests check that).
needs_send_hooks = pytest.mark.skipif(
    len(STOCK_WRITER) < 2, reason="aiohttp < 3.13.2: no per-path send methods to send a "
    "message uncompressed from; every message is compressed, as stock")


@pytest.fixture
def restore_stock() -> Iterator[None]:
    """Whatever a test leaves installed, aiohttp is stock again after it."""
    assert hooked() == STOCK
    try:
        yield
    finally:
        ws_writer.ZLibCompressor = compression_utils.ZLibCompressor
        for module in READERS:
            module.ZLibDecompressor = compression_utils.ZLibDecompressor
        for name, method in STOCK_WRITER.items():
            setattr(WebSocketWriter, name, method)
        fd_aiohttp._originals.clear()


class LaterWrapper(fd_aiohttp.WebSocketCompressor):
    """What another tool might install over fastdeflate's compressor, after it."""


@pytest.mark.timeout(TIMEOUT)
def test_disable_leaves_a_later_wrapper_alone(restore_stock: None) -> None:
    fd_aiohttp.enable()
    ws_writer.ZLibCompressor = LaterWrapper
    fd_aiohttp.enable()  # enabling twice changes nothing, and keeps the wrapper
    assert hooked() == [LaterWrapper] + OURS[1:]
    with pytest.warns(RuntimeWarning, match=r"aiohttp\._websocket\.writer\.ZLibCompressor"):
        fd_aiohttp.disable()
    assert hooked() == [LaterWrapper] + STOCK[1:]  # the wrapper stays; the rest is stock
    assert not fd_aiohttp.is_enabled()

    async def main() -> None:  # new connections compress through the wrapper
        async with aiohttp_server() as (url, events):
            async with aiohttp.ClientSession() as session:
                async with session.ws_connect(url, compress=15) as ws:
                    await ws.send_str("x" * 100)
                    assert (await ws.receive()).data == "x" * 100
                    assert type(ws._writer._compressobj) is LaterWrapper

    run(main())
    ws_writer.ZLibCompressor = fd_aiohttp.WebSocketCompressor  # its owner takes it out
    assert fd_aiohttp.is_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fd_aiohttp.disable()  # fastdeflate's own is back there: now stock is restored
        fd_aiohttp.disable()
    assert hooked() == STOCK and not fd_aiohttp.is_enabled()


@pytest.mark.timeout(TIMEOUT)
def test_enable_twice_is_a_no_op(restore_stock: None) -> None:
    fd_aiohttp.enable()
    fd_aiohttp.enable()
    assert hooked() == OURS and fd_aiohttp.is_enabled()
    fd_aiohttp.disable()
    assert hooked() == STOCK and not fd_aiohttp.is_enabled()


@pytest.mark.timeout(TIMEOUT)
def test_stock_put_back_by_someone_else(restore_stock: None) -> None:
    """Another tool put aiohttp's own class back: disable() is quiet, enable() redoes it."""
    fd_aiohttp.enable()
    ws_writer.ZLibCompressor = compression_utils.ZLibCompressor
    fd_aiohttp.enable()
    assert hooked() == OURS
    ws_writer.ZLibCompressor = compression_utils.ZLibCompressor
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fd_aiohttp.disable()
    assert hooked() == STOCK and fd_aiohttp._originals == {}


@pytest.mark.timeout(TIMEOUT)
def test_concurrent_enable_disable_from_threads(restore_stock: None) -> None:
    """Threads enabling and disabling at once leave one consistent state, never
    fastdeflate's classes recorded as the stock ones."""
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def churn(seed: int) -> None:
        rnd = random.Random(seed)
        barrier.wait()
        try:
            for _ in range(1000):
                (fd_aiohttp.enable if rnd.random() < 0.5 else fd_aiohttp.disable)()
        except BaseException as exc:  # a RuntimeWarning made an error, say
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no thread may see a "later wrapper"
            threads = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(TIMEOUT)
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert hooked() in (OURS, STOCK)
    assert fd_aiohttp.is_enabled() == (hooked() == OURS)
    fd_aiohttp.enable()
    assert hooked() == OURS
    fd_aiohttp.disable()
    assert hooked() == STOCK


@pytest.mark.timeout(TIMEOUT)
def test_adapter_imported_again_while_enabled_still_restores_stock() -> None:
    """A second copy of the adapter module (re-imported while enabled) recognises the
    first copy's classes as fastdeflate's, never as aiohttp's own."""
    code = (
        "import sys, warnings\n"
        "import fastdeflate.integrations.aiohttp as first\n"
        "from aiohttp import compression_utils\n"
        "from aiohttp._websocket import writer, reader_py\n"
        "stock = dict(vars(writer.WebSocketWriter))\n"
        "first.enable()\n"
        "del sys.modules['fastdeflate.integrations.aiohttp']\n"
        "import fastdeflate.integrations.aiohttp as second\n"
        "assert second is not first\n"
        "second.enable()\n"
        "assert writer.ZLibCompressor is second.WebSocketCompressor\n"
        "second.disable()\n"
        "assert writer.ZLibCompressor is compression_utils.ZLibCompressor\n"
        "assert reader_py.ZLibDecompressor is compression_utils.ZLibDecompressor\n"
        "assert dict(vars(writer.WebSocketWriter)) == stock\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True,
        env=_peer_env(), cwd=PACKAGE_PARENT, timeout=TIMEOUT,
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_package_registry_lists_aiohttp(use_impl: ModuleType) -> None:
    from fastdeflate import integrations

    assert "aiohttp" in integrations.SUPPORTED
    try:
        integrations.enable()
        assert fd_aiohttp.is_enabled() and "aiohttp" in integrations.enabled()
    finally:
        integrations.disable()
    assert not fd_aiohttp.is_enabled()


def test_codec_classes_are_looked_up_at_call_time(use_impl: ModuleType) -> None:
    c = fd_aiohttp.WebSocketCompressor(level=1, wbits=-15)
    d = fd_aiohttp.WebSocketDecompressor(suppress_deflate_header=True)
    assert type(c._codec) is use_impl.Compressor
    assert type(d._codec) is use_impl.Decompressor
    payload = c.compress_sync(b"Hello") + c.flush(compression_utils.ZLibBackend.Z_SYNC_FLUSH)
    assert payload == bytes.fromhex("f248cdc9c90700")  # RFC 7692 section 7.2.3.1
    assert d.decompress_sync(payload + TAIL, 0) == b"Hello"
    with pytest.raises(ValueError):  # the reader always appends the marker
        d.decompress_sync(payload, 0)
    with pytest.raises(WebSocketError) as info:
        d2 = fd_aiohttp.WebSocketDecompressor(suppress_deflate_header=True)
        d2.decompress_sync(payload + TAIL, 3)
    assert info.value.code == 1009


@pytest.mark.timeout(TIMEOUT)
def _impl_name(impl: ModuleType) -> str:
    return "python" if impl.__name__.endswith("_pure") else "cython"


def _run_python(code: str, impl: ModuleType, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter on implementation ``impl`` (FASTDEFLATE_PURE)."""
    environ = {**_peer_env(), **env}
    if _impl_name(impl) == "python":
        environ["FASTDEFLATE_PURE"] = "1"
    else:
        environ.pop("FASTDEFLATE_PURE", None)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ,
        cwd=PACKAGE_PARENT,
        timeout=TIMEOUT,
    )


def test_clear_import_error_without_aiohttp(use_impl: ModuleType) -> None:
    code = (
        "import sys; sys.modules['aiohttp'] = None\n"  # what an uninstalled package looks like
        "import fastdeflate\n"
        "try:\n    import fastdeflate.integrations.aiohttp\n"
        "except ImportError as exc:\n    print(fastdeflate.IMPLEMENTATION, exc)\n"
    )
    out = _run_python(code, use_impl)
    assert out.stdout.startswith(_impl_name(use_impl) + " "), out
    assert "needs aiohttp, which is not installed" in out.stdout, out


ENABLE_FIRST = """
import fastdeflate, fastdeflate.integrations.aiohttp as fa
fa.enable()
import asyncio, sys
import aiohttp, aiohttp.web
from aiohttp._websocket import writer, reader
reader_module = sys.modules[reader.WebSocketReader.__module__]
assert writer.ZLibCompressor is fa.WebSocketCompressor
assert reader_module.ZLibDecompressor is fa.WebSocketDecompressor

async def echo(request):
    ws = aiohttp.web.WebSocketResponse()
    await ws.prepare(request)
    async for msg in ws:
        await ws.send_str(msg.data)
    return ws

async def main():
    app = aiohttp.web.Application()
    app.router.add_get("/", echo)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"http://127.0.0.1:{port}/", compress=15) as ws:
            await ws.send_str("x" * 5000)
            assert (await ws.receive()).data == "x" * 5000
            codec = ws._writer._compressobj._codec
    await runner.cleanup()
    return type(codec).__module__

module = asyncio.run(main())
fa.disable()
from aiohttp.compression_utils import ZLibCompressor, ZLibDecompressor
assert writer.ZLibCompressor is ZLibCompressor
assert reader_module.ZLibDecompressor is ZLibDecompressor
print(module, fastdeflate.IMPLEMENTATION)
"""


@pytest.mark.timeout(TIMEOUT)
def test_enable_before_aiohttp_is_imported_elsewhere(use_impl: ModuleType) -> None:
    """In a fresh process: enable() first, then the application imports aiohttp and
    opens a connection, on the implementation ``use_impl`` names."""
    for no_extensions in ("", "1"):  # the compiled reader, and aiohttp's pure-Python one
        out = _run_python(ENABLE_FIRST, use_impl, AIOHTTP_NO_EXTENSIONS=no_extensions)
        assert out.stdout.split() == [use_impl.__name__, _impl_name(use_impl)], out.stderr


# --- compress what pays (issue 31): skipped messages go out uncompressed, RSV1 clear ---

PNG_LIKE = b"\x89PNG\r\n\x1a\n" + random.Random(7).randbytes(3000)
LARGE = ws_writer.WEBSOCKET_MAX_SYNC_CHUNK_SIZE * 4  # compressed in the executor


def chat(i: int, size: int = 200) -> bytes:
    """A chat-like JSON message (compressible, like its neighbours)."""
    body = json.dumps({"id": i, "user": "alice", "text": "hello there " * (size // 12)})
    return body.encode()


#: (message, opcode, compressed on the wire, sent inside fastdeflate.uncompressed()).
#: Messages neither text-like nor random (_mixed.grows) are compressed from a snapshot
#: and grow, so they go out as they are too; each is followed by an echo of its end
#: (compressed: a compressor that kept the grown message would match it there, which the
#: peer cannot decode, even at window 9, where zlib reaches back only 250 bytes).
MIXED: list[tuple[bytes, int, bool, bool]] = [
    (chat(0), WSMsgType.TEXT, True, False),
    (random.Random(1).randbytes(2000), WSMsgType.BINARY, False, False),
    (chat(1), WSMsgType.TEXT, True, False),
    (PNG_LIKE, WSMsgType.BINARY, False, False),
    (grows(random.Random(2), 300), WSMsgType.BINARY, False, False),
    (grows(random.Random(2), 300)[-96:] * 2, WSMsgType.BINARY, True, False),  # echo
    (chat(2), WSMsgType.TEXT, True, False),
    (grows(random.Random(3), 700), WSMsgType.BINARY, False, False),
    (grows(random.Random(3), 700)[-96:] * 2, WSMsgType.BINARY, True, False),  # echo
    (random.Random(4).randbytes(300) + TAIL, WSMsgType.BINARY, False, False),
    (chat(3), WSMsgType.TEXT, False, True),  # opted out
    (chat(4), WSMsgType.TEXT, True, False),
    (random.Random(5).randbytes(LARGE), WSMsgType.BINARY, False, False),  # executor
    (chat(5, LARGE), WSMsgType.TEXT, True, False),  # executor, compressed
    (chat(6, LARGE), WSMsgType.TEXT, False, True),  # executor, opted out
    (chat(7), WSMsgType.TEXT, True, False),
    (b"", WSMsgType.TEXT, True, False),
]


def sent_uncompressed() -> dict[str, int]:
    return {reason: n["messages"]
            for reason, n in fastdeflate.status()["sent_uncompressed"].items()}


def counted_since(before: dict[str, int]) -> dict[str, int]:
    after = sent_uncompressed()
    return {r: after[r] - before.get(r, 0) for r in after if after[r] != before.get(r, 0)}


async def send_mixed(send: Any, plan: list[tuple[bytes, int, bool, bool]]) -> None:
    """``send(message, opcode)`` each message, opted-out ones inside uncompressed()."""
    for message, opcode, _, opt_out in plan:
        with fastdeflate.uncompressed(opt_out):
            await send(message, opcode)


@needs_send_hooks
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("wbits,notakeover", [(15, False), (15, True), (12, False),
                                              (9, False), (9, True)])
def test_skipped_messages_have_rsv1_clear_on_the_wire(
    enabled: ModuleType, wbits: int, notakeover: bool
) -> None:
    """Random, PNG, neither text nor random (grows) and opted-out messages (the large ones too,
    compressed in the executor) leave aiohttp's writer as they are, RSV1 clear; the rest
    compressed; stdlib zlib (one inflater: context takeover) decodes every message."""
    before = sent_uncompressed()

    async def plan(writer: WebSocketWriter) -> None:
        await send_mixed(lambda m, op: writer.send_frame(m, op), MIXED)

    stream = run(capture_writer(wbits, notakeover, plan))
    assert decode_frames(stream) == [
        (0x80 | (0x40 if compressed else 0) | opcode, message)
        for message, opcode, compressed, _ in MIXED
    ]
    skipped = sum(not compressed for _, _, compressed, _ in MIXED)
    counted = counted_since(before)
    assert sum(counted.values()) == skipped, counted
    assert counted["opt-out"] == 2 and counted["grew"] == 2, counted
    assert counted["compressed format"] == 1, counted


@needs_send_hooks
@pytest.mark.timeout(TIMEOUT)
def test_compress_flag_per_send_like_stock(use_impl: ModuleType) -> None:
    """``send_frame(..., compress=N)``: aiohttp's choice as before (N: a compressor of
    that window for this message; 0 or None: the connection's); with every message
    compressed the frames are stock's; by default a random message sent with
    ``compress=9`` goes out uncompressed too, and the next message still decodes."""
    text = make_message(3000, "text", 31)
    sends = [(text, WSMsgType.TEXT, None), (text, WSMsgType.TEXT, 0),
             (text, WSMsgType.TEXT, 9), (text, WSMsgType.BINARY, 12),
             (text, WSMsgType.TEXT, False), (chat(2, 3000), WSMsgType.TEXT, None)]

    async def plan(writer: WebSocketWriter) -> None:
        for message, opcode, compress in sends:
            await writer.send_frame(message, opcode, compress)

    expected = [(0x80 | 0x40 | opcode, message) for message, opcode, _ in sends]
    size, skip = fastdeflate.set_min_size(0), fastdeflate.set_skip_incompressible(False)
    try:
        with patched(False):
            stock = run(capture_writer(15, False, plan))
        with patched(True):
            ours = run(capture_writer(15, False, plan))
    finally:
        fastdeflate.set_min_size(size)
        fastdeflate.set_skip_incompressible(skip)
    assert decode_frames(stock) == decode_frames(ours) == expected
    if same_zlib_as_stdlib(use_impl):
        assert ours == stock
    # on any zlib: the same text again is a few bytes from the connection's compressor
    # (None, 0, False), a whole payload from a fresh one (9, 12)
    for stream in (stock, ours):
        first, *again = payload_sizes(stream)[:5]
        assert [size > first // 2 for size in again] == [False, True, True, False], (
            first, again)
    # by default: noise goes out uncompressed whatever compressor aiohttp picks for it
    noise = random.Random(9).randbytes(1000)
    sends = [(text, WSMsgType.TEXT, 9), (noise, WSMsgType.BINARY, 9),
             (noise, WSMsgType.BINARY, None), (text, WSMsgType.TEXT, None)]
    with patched(True):
        ours = run(capture_writer(15, False, plan))
    assert decode_frames(ours) == [(0xC1, text), (0x82, noise), (0x82, noise), (0xC1, text)]


def payload_sizes(stream: bytes) -> list[int]:
    """The payload length of each unmasked frame in ``stream``."""
    out, pos = [], 0
    while pos < len(stream):
        n = stream[pos + 1] & 0x7F
        pos += 2
        if n >= 126:
            size = 2 if n == 126 else 8
            n = int.from_bytes(stream[pos : pos + size], "big")
            pos += size
        out.append(n)
        pos += n
    return out


@needs_send_hooks
@pytest.mark.timeout(TIMEOUT)
def test_opt_out_from_two_concurrent_tasks(enabled: ModuleType) -> None:
    """Two tasks send on one writer at once, small and executor-sized messages; only the
    one inside ``fastdeflate.uncompressed()`` sends uncompressed, every message decodes."""
    def plan_of(task: str) -> list[bytes]:
        return [task.encode() + b":" + chat(i, size)
                for i, size in enumerate((100, LARGE, 300, LARGE * 2, 50, 2000, LARGE))]

    async def plan(writer: WebSocketWriter) -> None:
        async def sender(task: str, opt_out: bool) -> None:
            with fastdeflate.uncompressed(opt_out):
                for message in plan_of(task):
                    await writer.send_frame(message, WSMsgType.TEXT)
                    await asyncio.sleep(0)

        await asyncio.gather(sender("plain", False), sender("out", True))

    frames = decode_frames(run(capture_writer(15, False, plan)))
    assert sorted(frames) == sorted(
        [(0xC1, m) for m in plan_of("plain")] + [(0x81, m) for m in plan_of("out")])
    assert [m for _, m in frames if m.startswith(b"plain")] == plan_of("plain")
    assert [m for _, m in frames if m.startswith(b"out")] == plan_of("out")


@needs_send_hooks
@pytest.mark.timeout(TIMEOUT)
def test_mixed_stream_to_stock_aiohttp_server(
    enabled: ModuleType, stock_server_url: str
) -> None:
    """The enabled aiohttp client sends the mixed stream (twice, and from two tasks at
    once, one opted out) to a stock aiohttp server (subprocess), which echoes: every
    message comes back exactly; the skipped ones are counted."""
    before = sent_uncompressed()

    async def main() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(stock_server_url, compress=15) as ws:
                async def send(message: bytes, opcode: int) -> None:
                    if opcode == WSMsgType.TEXT:
                        await ws.send_str(message.decode())
                    else:
                        await ws.send_bytes(message)

                async def check(plan: list[tuple[bytes, int, bool, bool]]) -> None:
                    for message, opcode, _, _ in plan:
                        msg = await ws.receive()
                        data = msg.data.encode() if msg.type == WSMsgType.TEXT else msg.data
                        assert (msg.type, data) == (opcode, message)

                for _ in range(2):
                    await asyncio.gather(send_mixed(send, MIXED), check(MIXED))
                plan_a = [(b"a" + m, op, c, True) for m, op, c, _ in MIXED if op == 2]
                plan_b = [(b"b" + m, op, c, o) for m, op, c, o in MIXED if op == 2]
                await asyncio.gather(send_mixed(send, plan_a), send_mixed(send, plan_b))
                echoed = [(await ws.receive()).data for _ in plan_a + plan_b]
                assert sorted(echoed) == sorted(m for m, *_ in plan_a + plan_b)
                assert type(ws._writer._compressobj) is fd_aiohttp.WebSocketCompressor

    run(main())
    counted = counted_since(before)
    binary = [compressed for _, opcode, compressed, _ in MIXED if opcode == 2]
    # plan_a: every binary message opted out; plan_b: those MIXED sends as they are
    skipped = (2 * sum(not compressed for _, _, compressed, _ in MIXED) + len(binary)
               + sum(not compressed for compressed in binary))
    opted_out = 2 * sum(opt for *_, opt in MIXED) + len(binary)  # all of plan_a
    assert counted["opt-out"] == opted_out, counted
    assert sum(counted.values()) == skipped, counted


@needs_send_hooks
@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("flags", list(FLAGS))
def test_mixed_stream_from_enabled_server_to_websockets_client(
    enabled: ModuleType, flags: str
) -> None:
    """The enabled aiohttp server echoes the mixed stream to a stock websockets client,
    with and without context takeover and at window 9: every echo exact."""
    params = FLAGS[flags]
    before = sent_uncompressed()

    async def main() -> None:
        async with aiohttp_server() as (url, events):
            factory = ClientPerMessageDeflateFactory(**params)
            async with websockets.asyncio.client.connect(
                url.replace("http", "ws"), extensions=[factory], compression=None,
                max_size=None,
            ) as ws:
                for message, opcode, _, _ in MIXED * 2:
                    value: Any = message.decode() if opcode == WSMsgType.TEXT else message
                    await ws.send(value)
                    assert await ws.recv() == value
            await asyncio.sleep(0.05)
        assert_server_used_fastdeflate(events, params.get("server_max_window_bits", 15))

    run(main())
    counted = counted_since(before)
    opted_out = sum(opt for *_, opt in MIXED)
    skipped = 2 * (sum(not compressed for _, _, compressed, _ in MIXED) - opted_out)
    assert sum(counted.values()) == skipped, counted


@pytest.mark.timeout(TIMEOUT)
def test_connection_opened_before_enable_stays_stock(use_impl: ModuleType) -> None:
    """A writer whose compressor is aiohttp's (made before enable()) goes on as stock:
    every message compressed, RSV1 set, small and executor-sized; stdlib decodes all."""
    noise = [random.Random(11).randbytes(500), random.Random(12).randbytes(LARGE)]

    async def plan(writer: WebSocketWriter) -> None:
        await writer.send_frame(b"before", WSMsgType.BINARY)
        assert type(writer._compressobj) is compression_utils.ZLibCompressor
        fd_aiohttp.enable()
        for message in noise:
            await writer.send_frame(message, WSMsgType.BINARY)

    try:
        stream = run(capture_writer(15, False, plan))
    finally:
        fd_aiohttp.disable()
    assert decode_frames(stream) == [(0xC2, m) for m in [b"before", *noise]]


@needs_send_hooks
@pytest.mark.timeout(TIMEOUT)
def test_enable_replaces_writer_methods_and_disable_restores_them(
    restore_stock: None,
) -> None:
    assert STOCK_WRITER, "this aiohttp's writer has no per-path send methods"
    fd_aiohttp.enable()
    for name in STOCK_WRITER:
        assert vars(WebSocketWriter)[name] is getattr(fd_aiohttp, name)
    fd_aiohttp.disable()
    for name, method in STOCK_WRITER.items():
        assert vars(WebSocketWriter)[name] is method
