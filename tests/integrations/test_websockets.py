"""fastdeflate.integrations.websockets against real websockets servers and clients.

Every test takes ``use_impl``, so it runs on both codec implementations. Connections
are real (127.0.0.1, ephemeral ports); the enabled side of a mixed pair uses the
explicit per-connection factories, and ``enable()`` is tested on its own (always
undone in a ``finally``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import warnings
import zlib
from types import ModuleType
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest
import websockets.asyncio.client as aclient
import websockets.asyncio.server as aserver
import websockets.sync.client as sclient
import websockets.sync.server as sserver
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, PayloadTooBig, ProtocolError
from websockets.extensions import permessage_deflate as pmd
from websockets.frames import Frame, Opcode
from websockets.headers import build_extension, parse_extension

import fastdeflate
import fastdeflate.integrations.websockets as fw
from _samezlib import same_zlib_as_stdlib

from ._mixed_driver import Exchanged, check_sender_extension, drive_mixed_stream, window_params
from ._support import HELLO_PAYLOAD, deflate_streams
from ._support import make_binary as make_mixed_binary
from ._what_pays import PNG_HEAD, Item, chat, choice, messages_rsv1

#: The codec's limit of deflate streams (blocks with BFINAL set) in one message.
MAX_STREAMS = fastdeflate._params.MAX_STREAMS_PER_MESSAGE

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"
SMALL_SIZES = [0, 1, 1024, 65536]
LARGE_SIZE = 1_000_000
PAIRS = [("fast", "stock"), ("stock", "fast"), ("fast", "fast")]  # (server, client)
TAKEOVER = {
    "takeover": {},
    "server_nct": {"server_no_context_takeover": True},
    "client_nct": {"client_no_context_takeover": True},
}

Message = str | bytes


# ---------------------------------------------------------------------------- data


def make_text(size: int, seed: int) -> str:
    """Varying JSON-like ASCII text of exactly ``size`` characters."""
    rnd = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        record = json.dumps(
            {"id": rnd.randrange(10**6), "price": round(rnd.random() * 1000, 3),
             "user": f"user-{rnd.randrange(5000)}", "ok": rnd.random() < 0.5}
        )
        parts.append(record)
        total += len(record) + 1
    return "\n".join(parts)[:size]


def make_binary(size: int, seed: int) -> bytes:
    """Half random bytes, half a repeated pattern: neither trivial nor incompressible."""
    rnd = random.Random(seed)
    half = size // 2
    pattern = bytes(range(256)) * (size // 512 + 1)
    return rnd.randbytes(half) + pattern[: size - half]


def messages(sizes: list[int]) -> list[Message]:
    out: list[Message] = []
    for i, size in enumerate(sizes):
        out.append(make_text(size, seed=i))
        out.append(make_binary(size, seed=i))
    return out


def fragments(message: Message) -> list[Message]:
    """Three fragments (some possibly empty, e.g. for 0 or 1 byte messages)."""
    n = len(message)
    return [message[: n // 3], message[n // 3 : 2 * n // 3], message[2 * n // 3 :]]


# ------------------------------------------------------------------- factories


def server_factory(kind: str, **params: Any) -> pmd.ServerPerMessageDeflateFactory:
    cls = fw.ServerPerMessageDeflateFactory if kind == "fast" else pmd.ServerPerMessageDeflateFactory
    return cls(**params)


def client_factory(kind: str, **params: Any) -> pmd.ClientPerMessageDeflateFactory:
    cls = fw.ClientPerMessageDeflateFactory if kind == "fast" else pmd.ClientPerMessageDeflateFactory
    return cls(**params)


def factory_params(takeover: str, bits: int) -> dict[str, Any]:
    return {
        "server_max_window_bits": bits,
        "client_max_window_bits": bits,
        "compress_settings": {"memLevel": 5},
        **TAKEOVER[takeover],
    }


def expected_headers(params: dict[str, Any]) -> tuple[str, str]:
    """The offer and response that stock websockets produces for these parameters."""
    client = pmd.ClientPerMessageDeflateFactory(**params)
    offer = build_extension([(client.name, list(client.get_request_params()))])
    [(name, request_params)] = parse_extension(offer)
    response_params, _ = pmd.ServerPerMessageDeflateFactory(**params).process_request_params(
        request_params, []
    )
    return offer, build_extension([(name, response_params)])


def codecs(extension: fw.PerMessageDeflate) -> tuple[Any, Any]:
    """The extension's compressor and decompressor: without context takeover one
    exists only during a message, so the next one it would make stands in."""
    no_takeover = (extension.local_no_context_takeover, extension.remote_no_context_takeover)
    assert (extension._compressor is None) >= no_takeover[0]  # idle: none held
    assert (extension._decompressor is None) == no_takeover[1]
    return (extension._compressor or extension._new_compressor(),
            extension._decompressor or extension._new_decompressor())


def check_extension(extension: Any, kind: str, impl: ModuleType) -> None:
    """The negotiated extension is fastdeflate's (on ``impl``) or exactly the stock one."""
    if kind == "fast":
        assert type(extension) is fw.PerMessageDeflate
        compressor, decompressor = codecs(extension)
        assert type(compressor) is impl.Compressor
        assert type(decompressor) is impl.Decompressor
    else:
        assert type(extension) is pmd.PerMessageDeflate


# ------------------------------------------------------------------- asyncio helpers


async def echo(ws: aserver.ServerConnection) -> None:
    """Echo every message, with the fragmentation it arrived with."""
    try:
        while True:
            parts = [part async for part in ws.recv_streaming()]
            await ws.send(parts if len(parts) > 1 else parts[0])
    except ConnectionClosed:
        pass


async def recv_parts(ws: aclient.ClientConnection) -> list[Message]:
    return [part async for part in ws.recv_streaming()]


def port_of(server: aserver.Server) -> int:
    return server.sockets[0].getsockname()[1]


# ------------------------------------------------------------------- round trips


async def roundtrip_session(
    server_kind: str, client_kind: str, params: dict[str, Any], payloads: list[Message],
    impl: ModuleType,
) -> None:
    server_extensions: list[Any] = []

    async def handler(ws: aserver.ServerConnection) -> None:
        server_extensions.extend(ws.protocol.extensions)
        await echo(ws)

    async with aserver.serve(
        handler, HOST, 0, extensions=[server_factory(server_kind, **params)],
        max_size=2**21,
    ) as server:
        async with aclient.connect(
            f"ws://{HOST}:{port_of(server)}", extensions=[client_factory(client_kind, **params)],
            max_size=2**21,
        ) as ws:
            offer, response = expected_headers(params)
            assert ws.request.headers["Sec-WebSocket-Extensions"] == offer
            assert ws.response.headers["Sec-WebSocket-Extensions"] == response
            for rounds in range(2):  # twice: the second pass reuses the window
                for message in payloads:
                    await ws.send(message)
                    parts = await recv_parts(ws)
                    assert len(parts) == 1
                    assert parts[0] == message
                    await ws.send(fragments(message))
                    parts = await recv_parts(ws)
                    assert len(parts) >= 3  # websockets adds an empty final frame
                    assert parts[0][:0].join(parts) == message
            [client_ext] = ws.protocol.extensions
    [server_ext] = server_extensions
    check_extension(server_ext, server_kind, impl)
    check_extension(client_ext, client_kind, impl)
    bits = params["server_max_window_bits"]
    server_nct = params.get("server_no_context_takeover", False)
    client_nct = params.get("client_no_context_takeover", False)
    assert (server_ext.local_max_window_bits, server_ext.remote_max_window_bits) == (bits, bits)
    assert (client_ext.local_max_window_bits, client_ext.remote_max_window_bits) == (bits, bits)
    assert server_ext.local_no_context_takeover == client_ext.remote_no_context_takeover == server_nct
    assert client_ext.local_no_context_takeover == server_ext.remote_no_context_takeover == client_nct
    for ext in (server_ext, client_ext):
        if type(ext) is fw.PerMessageDeflate:  # the settings reached the codec
            compressor, decompressor = codecs(ext)
            assert (compressor.window_bits, compressor.mem_level) == (bits, 5)
            assert compressor.no_context_takeover == ext.local_no_context_takeover
            assert decompressor.window_bits == bits
            assert decompressor.no_context_takeover == ext.remote_no_context_takeover


@pytest.mark.parametrize("bits", [9, 15])
@pytest.mark.parametrize("takeover", sorted(TAKEOVER))
@pytest.mark.parametrize("server_kind,client_kind", PAIRS)
def test_roundtrip_small(
    use_impl: ModuleType, server_kind: str, client_kind: str, takeover: str, bits: int
) -> None:
    """0 B .. 64 KB, text and binary, single frame and 3 fragments, both directions."""
    coro = roundtrip_session(
        server_kind, client_kind, factory_params(takeover, bits), messages(SMALL_SIZES), use_impl
    )
    asyncio.run(asyncio.wait_for(coro, 40))


@pytest.mark.parametrize("takeover,bits", [("takeover", 15), ("client_nct", 9)])
@pytest.mark.parametrize("server_kind,client_kind", PAIRS)
def test_roundtrip_large(
    use_impl: ModuleType, server_kind: str, client_kind: str, takeover: str, bits: int
) -> None:
    """1 MB messages, text and binary, single frame and fragmented."""
    coro = roundtrip_session(
        server_kind, client_kind, factory_params(takeover, bits), messages([LARGE_SIZE]), use_impl
    )
    asyncio.run(asyncio.wait_for(coro, 50))


def test_control_frames_and_uncompressed_connection(use_impl: ModuleType) -> None:
    """Pings pass through an enabled connection; a client without compression still works."""

    async def main() -> None:
        async with aserver.serve(
            echo, HOST, 0, extensions=[fw.ServerPerMessageDeflateFactory()]
        ) as server:
            uri = f"ws://{HOST}:{port_of(server)}"
            async with aclient.connect(uri, extensions=[fw.ClientPerMessageDeflateFactory()]) as ws:
                assert len(ws.protocol.extensions) == 1
                pong = await ws.ping(b"ping payload")
                await asyncio.wait_for(pong, 5)
                await ws.send("after ping")
                assert await ws.recv() == "after ping"
            async with aclient.connect(uri, compression=None) as ws:
                assert ws.protocol.extensions == []
                await ws.send(b"plain" * 100)
                assert await ws.recv() == b"plain" * 100

    asyncio.run(asyncio.wait_for(main(), 20))


# ------------------------------------------------------------- limits and errors


Close = tuple[int, str]


async def receive_failure(
    receiver: str, receiver_kind: str, max_size: int, send: Callable[[Any], Awaitable[None]]
) -> tuple[Close, Close]:
    """(close the receiver sent, close its peer received) when the receiver fails.

    ``receiver`` ("server" or "client") uses ``receiver_kind``'s factory and ``max_size``;
    the other side is stock and runs ``send(ws)``.
    """
    server_view: asyncio.Future[Close] = asyncio.get_running_loop().create_future()
    server_kind = receiver_kind if receiver == "server" else "stock"
    client_kind = receiver_kind if receiver == "client" else "stock"

    async def handler(ws: aserver.ServerConnection) -> None:
        if receiver == "client":
            await send(ws)
        with pytest.raises(ConnectionClosedError) as info:
            await ws.recv()
        close = info.value.sent if receiver == "server" else info.value.rcvd
        assert close is not None
        server_view.set_result((close.code, close.reason))

    async with aserver.serve(
        handler, HOST, 0, extensions=[server_factory(server_kind)],
        max_size=max_size if receiver == "server" else None,
    ) as server:
        async with aclient.connect(
            f"ws://{HOST}:{port_of(server)}", extensions=[client_factory(client_kind)],
            max_size=max_size if receiver == "client" else None,
        ) as ws:
            if receiver == "server":
                await send(ws)
            with pytest.raises(ConnectionClosedError) as info:
                await ws.recv()
            close = info.value.sent if receiver == "client" else info.value.rcvd
            assert close is not None
            client_view = (close.code, close.reason)
        server_side = await server_view
    if receiver == "server":
        return server_side, client_view
    return client_view, server_side


def run_both(
    receiver: str, max_size: int, send: Callable[[Any], Awaitable[None]]
) -> tuple[tuple[Close, Close], tuple[Close, Close]]:
    async def main() -> tuple[tuple[Close, Close], tuple[Close, Close]]:
        stock = await receive_failure(receiver, "stock", max_size, send)
        fast = await receive_failure(receiver, "fast", max_size, send)
        return stock, fast

    return asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("fragmented", [False, True], ids=["single", "fragmented"])
@pytest.mark.parametrize("receiver", ["server", "client"])
def test_oversized_message_closes_like_stock(
    use_impl: ModuleType, receiver: str, fragmented: bool
) -> None:
    """A message that inflates past max_size: same close code (1009) and reason as stock."""
    message = make_text(5000, seed=7)  # compresses to well under the 1000-byte limit

    async def send(ws: Any) -> None:
        await ws.send(fragments(message) if fragmented else message)

    stock, fast = run_both(receiver, 1000, send)
    assert stock[0][0] == 1009
    assert fast == stock


@pytest.mark.parametrize("receiver", ["server", "client"])
def test_corrupt_frame_closes_like_stock(use_impl: ModuleType, receiver: str) -> None:
    """A compressed frame that is not valid deflate: same close (1002) as stock."""
    payload = b"\xff\xff\xff\xff\xff"  # BTYPE 11: an invalid deflate block
    # FIN + RSV1 + binary, then the length (with the mask bit and a zero mask from a client).
    header = bytes([0b1100_0010, len(payload) | (0x80 if receiver == "server" else 0)])
    raw = header + (b"\0\0\0\0" if receiver == "server" else b"") + payload

    async def send(ws: Any) -> None:
        # Written raw to the socket: the sender's own extension would compress it.
        ws.transport.write(raw)

    stock, fast = run_both(receiver, 2**20, send)
    assert stock[0] == (1002, "decompression failed")
    assert fast == stock


def test_bfinal_blocks_decoded_where_stock_truncates(use_impl: ModuleType) -> None:
    """RFC 7692 7.2.3.4: a message of several deflate streams (blocks with BFINAL set)
    is valid. Stock websockets keeps the first stream and decodes every later compressed
    message empty; fastdeflate decodes them all, up to 16 streams in a message (more is
    corrupt data: 1002). A known difference, listed in the README."""
    payloads = [deflate_streams(2), HELLO_PAYLOAD, deflate_streams(MAX_STREAMS + 1)]

    def decoded(extension: Any) -> list[Any]:
        out: list[Any] = []
        for payload in payloads:
            try:
                frame = extension.decode(Frame(Opcode.BINARY, payload, rsv1=True), max_size=None)
                out.append(frame.data)
            except ProtocolError as exc:
                out.append(str(exc))
        return out

    assert decoded(pmd.PerMessageDeflate(False, False, 15, 15)) == [b"m0;", b"", b""]
    assert decoded(fw.PerMessageDeflate(False, False, 15, 15)) == [
        b"m0;m1;", b"Hello", "decompression failed"]


@pytest.mark.parametrize("size_delta", [-1, 0, 1])
@pytest.mark.parametrize("fragmented", [False, True], ids=["single", "fragmented"])
def test_size_limit_edge_matches_stock(
    use_impl: ModuleType, fragmented: bool, size_delta: int
) -> None:
    """At max_size - 1, max_size and max_size + 1 the fast decoder decides like stock."""
    max_size = 3000
    for data in (make_binary(max_size + size_delta, 1), b"x" * (max_size + size_delta)):
        sender = pmd.PerMessageDeflate(False, False, 15, 15)
        frames = (
            [Frame(Opcode.BINARY, bytes(data), fin=True)]
            if not fragmented
            else [
                Frame(Opcode.BINARY, data[:1000], fin=False),
                Frame(Opcode.CONT, data[1000:2000], fin=False),
                Frame(Opcode.CONT, data[2000:], fin=True),
            ]
        )
        encoded = [sender.encode(frame) for frame in frames]
        outcomes = []
        for decoder in (pmd.PerMessageDeflate(False, False, 15, 15),
                        fw.PerMessageDeflate(False, False, 15, 15)):
            remaining = max_size  # what websockets' protocol passes per frame
            try:
                out = b""
                for frame in encoded:
                    decoded = decoder.decode(frame, max_size=remaining)
                    remaining -= len(decoded.data)
                    out += decoded.data
                outcomes.append(out)
            except PayloadTooBig as exc:
                outcomes.append(str(exc))
        assert outcomes[1] == outcomes[0]
        assert (outcomes[0] == data) == (size_delta <= 0)


# ------------------------------------------------------------------ byte identity

SETTINGS = [
    {},
    {"memLevel": 5},
    {"level": 1, "memLevel": 9},
    {"level": 9, "strategy": zlib.Z_FILTERED},
    {"level": 0},
    {"method": zlib.DEFLATED, "level": zlib.Z_DEFAULT_COMPRESSION, "strategy": zlib.Z_RLE},
]


def frame_sequence() -> list[Frame]:
    """Messages of every size, single and fragmented, with control frames in between."""
    frames: list[Frame] = []
    for message in messages(SMALL_SIZES + [LARGE_SIZE // 4]):
        data = message.encode() if isinstance(message, str) else message
        opcode = Opcode.TEXT if isinstance(message, str) else Opcode.BINARY
        frames.append(Frame(opcode, data))
        a, b, c = fragments(data)
        frames += [
            Frame(opcode, a, fin=False),
            Frame(Opcode.PING, b"ping"),
            Frame(Opcode.CONT, b, fin=False),
            Frame(Opcode.CONT, c, fin=True),
        ]
    return frames * 2


@pytest.mark.parametrize("bits", [9, 12, 15])
@pytest.mark.parametrize("nct", [False, True], ids=["takeover", "no_takeover"])
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_encoder_output_identical_to_stock(
    use_impl: ModuleType, settings: dict[str, Any], nct: bool, bits: int
) -> None:
    """Every encoded frame equals stock's (same zlib); each side decodes the other's.
    (Stock compresses every message: so does fastdeflate with the skip turned off.)"""
    with choice(skip_incompressible=False):
        encode_like_stock(use_impl, settings, nct, bits)


def encode_like_stock(use_impl: ModuleType, settings: dict[str, Any], nct: bool,
                      bits: int) -> None:
    stock = pmd.PerMessageDeflate(nct, nct, bits, bits, dict(settings))
    fast = fw.PerMessageDeflate(nct, nct, bits, bits, dict(settings))
    assert not fast._stock_encoder
    same_zlib = same_zlib_as_stdlib(use_impl)
    stock_rx = pmd.PerMessageDeflate(nct, nct, bits, bits)
    fast_rx = fw.PerMessageDeflate(nct, nct, bits, bits)
    for frame in frame_sequence():
        expected = stock.encode(frame)
        got = fast.encode(frame)
        if frame.opcode in (Opcode.PING, Opcode.PONG, Opcode.CLOSE):
            assert got is frame
            continue
        assert (got.opcode, got.fin, got.rsv1, got.rsv2, got.rsv3) == (
            expected.opcode, expected.fin, expected.rsv1, expected.rsv2, expected.rsv3
        )
        if same_zlib:  # byte identity is promised on the same zlib only
            assert bytes(got.data) == bytes(expected.data)
        assert fast_rx.decode(expected).data == frame.data
        assert stock_rx.decode(got).data == frame.data


def test_unsupported_compress_settings_fall_back_to_stock(use_impl: ModuleType) -> None:
    """A zdict (which fastdeflate can't do) keeps stock compression, byte for byte."""
    settings = {"zdict": b"hello world"}
    for nct in (False, True):
        stock = pmd.PerMessageDeflate(False, nct, 15, 15, settings)
        fast = fw.PerMessageDeflate(False, nct, 15, 15, settings)
        assert fast._stock_encoder and fast._compressor is None
        for _ in range(2):
            frame = Frame(Opcode.TEXT, b"hello world hello")
            assert bytes(fast.encode(frame).data) == bytes(stock.encode(frame).data)


def test_uncompressed_and_control_frames_untouched(use_impl: ModuleType) -> None:
    ext = fw.PerMessageDeflate(False, False, 15, 15)
    for frame in (
        Frame(Opcode.BINARY, b"abc"),
        Frame(Opcode.TEXT, b"abc", fin=False),
        Frame(Opcode.PING, b"x"),
        Frame(Opcode.PONG, b"x"),
        Frame(Opcode.CLOSE, b"\x03\xe8"),
    ):
        assert ext.decode(frame) is frame
    assert ext.decode(Frame(Opcode.CONT, b"def")).data == b"def"  # continuation of it
    assert ext.encode(Frame(Opcode.PING, b"x")).data == b"x"
    ext.decode(ext.encode(Frame(Opcode.TEXT, b"a", fin=False)))  # a compressed first frame
    with pytest.raises(ProtocolError, match="RSV1 bit set in continuation frame"):
        ext.decode(Frame(Opcode.CONT, b"\x00", rsv1=True))


def test_rfc7692_vectors(use_impl: ModuleType) -> None:
    """RFC 7692 §7.2.3 payloads decode through the fast extension."""
    ext = fw.PerMessageDeflate(False, False, 15, 15)
    hello = bytes.fromhex("f248cdc9c90700")
    assert ext.decode(Frame(Opcode.TEXT, hello, rsv1=True)).data == b"Hello"
    assert ext.decode(Frame(Opcode.TEXT, bytes.fromhex("f200110000"), rsv1=True)).data == b"Hello"
    first = ext.decode(Frame(Opcode.TEXT, hello[:3], fin=False, rsv1=True))
    rest = ext.decode(Frame(Opcode.CONT, hello[3:], fin=True))
    assert first.data + rest.data == b"Hello"
    assert not first.rsv1
    assert ext.decode(Frame(Opcode.BINARY, b"\x00", rsv1=True)).data == b""
    # A peer may compress with window 8 (websockets itself never does): decoding works.
    narrow = fw.PerMessageDeflate(False, False, 8, 9)
    assert narrow.decode(Frame(Opcode.TEXT, hello, rsv1=True)).data == b"Hello"


# ------------------------------------------------------------- enable / disable


def module_snapshot() -> dict[str, int]:
    return {name: id(value) for name, value in vars(pmd).items()}


def test_enable_disable_restores_exactly(use_impl: ModuleType) -> None:
    stock_class = pmd.PerMessageDeflate
    before = module_snapshot()
    factories = (pmd.ClientPerMessageDeflateFactory, pmd.ServerPerMessageDeflateFactory)
    functions = (pmd.enable_client_permessage_deflate, pmd.enable_server_permessage_deflate)
    assert not fw.is_enabled()
    try:
        fw.enable()
        fw.enable()  # idempotent
        assert fw.is_enabled()
        assert pmd.PerMessageDeflate is fw.PerMessageDeflate
        assert issubclass(fw.PerMessageDeflate, stock_class)
        changed = {k for k, v in module_snapshot().items() if before.get(k) != v}
        assert changed == {"PerMessageDeflate"}
        assert (pmd.ClientPerMessageDeflateFactory, pmd.ServerPerMessageDeflateFactory) == factories
    finally:
        fw.disable()
    fw.disable()  # idempotent
    assert not fw.is_enabled()
    assert pmd.PerMessageDeflate is stock_class
    assert module_snapshot() == before
    assert (pmd.enable_client_permessage_deflate, pmd.enable_server_permessage_deflate) == functions


def test_enabled_asyncio_default_compression(use_impl: ModuleType) -> None:
    """enable(): unchanged application code (compression="deflate" default) uses fastdeflate."""
    server_extensions: list[Any] = []

    async def handler(ws: aserver.ServerConnection) -> None:
        server_extensions.extend(ws.protocol.extensions)
        await echo(ws)

    async def main() -> Any:
        async with aserver.serve(handler, HOST, 0) as server:
            async with aclient.connect(f"ws://{HOST}:{port_of(server)}") as ws:
                for message in messages([0, 1, 1024, 65536]):
                    await ws.send(message)
                    assert await ws.recv() == message
                    await ws.send(fragments(message))
                    assert await ws.recv() == message
                return ws.protocol.extensions[0], ws.response.headers["Sec-WebSocket-Extensions"]

    fw.enable()
    try:
        client_ext, response = asyncio.run(asyncio.wait_for(main(), 20))
    finally:
        fw.disable()
    for ext in (client_ext, *server_extensions):
        check_extension(ext, "fast", use_impl)
    # websockets' defaults are honoured: window 12 both ways, memLevel 5
    assert response == "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"
    assert server_extensions[0]._compressor.mem_level == 5
    assert server_extensions[0]._compressor.window_bits == 12
    assert client_ext._compressor.mem_level == 5


@pytest.mark.timeout(60)
def test_broadcast_compresses_once_per_group(use_impl: ModuleType) -> None:
    """enable(): websockets' own broadcast() to 12 clients (stock client code) compresses
    each message once: the server's compressors share one history. A private message
    sets one client apart (two histories after); every client decodes all it was sent."""
    connections: list[Any] = []
    updates = [json.dumps({"seq": k, "prices": [k * j % 89 for j in range(60)]})
               for k in range(9)]

    async def handler(ws: aserver.ServerConnection) -> None:
        connections.append(ws)
        await ws.wait_closed()

    async def client(url: str) -> list[Any]:
        async with aclient.connect(url) as ws:
            got = []
            while len([m for m in got if m != "private"]) < len(updates):
                got.append(await ws.recv())
            return got

    async def main() -> tuple[list[list[Any]], list[set[int]]]:
        async with aserver.serve(handler, HOST, 0) as server:
            url = f"ws://{HOST}:{port_of(server)}"
            tasks = [asyncio.create_task(client(url)) for _ in range(12)]
            while len(connections) < 12:
                await asyncio.sleep(0.01)
            histories = []
            for k, update in enumerate(updates):
                aserver.broadcast(connections, update)
                if k == 5:
                    await connections[0].send("private")
                histories.append({c.protocol.extensions[0]._compressor._group()[1]
                                  for c in connections})
            return await asyncio.gather(*tasks), histories

    fw.enable()
    try:
        received, histories = asyncio.run(asyncio.wait_for(main(), 40))
    finally:
        fw.disable()
    assert all(len(h) == 1 for h in histories[:5])  # one compression per broadcast
    assert all(len(h) == 2 for h in histories[5:])  # the private one apart, the rest one
    assert sorted(got.count("private") for got in received) == [0] * 11 + [1]
    for got in received:
        assert [m for m in got if m != "private"] == updates


# A stock websockets peer in another process: in this one, enable() covers both ends.
STOCK_PEER = """
import sys, threading
from websockets.sync.client import connect
from websockets.sync.server import serve

def echo(ws):
    for message in ws:
        ws.send(message)

if sys.argv[1] == "server":
    with serve(echo, "127.0.0.1", 0) as server:
        print(server.socket.getsockname()[1], flush=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        sys.stdin.read()  # until the test closes our stdin
        server.shutdown()
else:
    for port in sys.argv[2:]:
        with connect(f"ws://127.0.0.1:{port}", open_timeout=5) as ws:
            for size in (0, 1, 1024, 65536):
                message = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
                for text in (False, True):
                    data = message.decode("latin-1") if text else message
                    ws.send(data)
                    assert ws.recv(timeout=5) == data
                    ws.send([data[:size // 2], data[size // 2:]])
                    assert ws.recv(timeout=5) == data
            print(type(ws.protocol.extensions[0]).__module__, flush=True)
"""


def peer_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the stock peer must not see fastdeflate
    return env


@pytest.fixture(scope="module")
def stock_server_port() -> Any:
    proc = subprocess.Popen(
        [sys.executable, "-c", STOCK_PEER, "server"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, env=peer_env(),
    )
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def exchange_sync(ws: Any) -> None:
    for message in messages([0, 1, 1024, 65536]):
        ws.send(message)
        assert ws.recv(timeout=5) == message
        ws.send(fragments(message))
        assert ws.recv(timeout=5) == message


async def exchange_async(ws: Any) -> None:
    for message in messages([0, 1, 1024, 65536]):
        await ws.send(message)
        assert await ws.recv() == message
        await ws.send(fragments(message))
        assert await ws.recv() == message


def legacy_modules() -> tuple[ModuleType, ModuleType]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import websockets.legacy.client as lclient
        import websockets.legacy.server as lserver
    return lclient, lserver


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_enabled_clients_against_stock_server(use_impl: ModuleType, stock_server_port: int) -> None:
    """enable(): asyncio, sync and legacy clients, unchanged, talk to a stock server."""
    uri = f"ws://{HOST}:{stock_server_port}"
    lclient, _ = legacy_modules()
    default_response = "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"

    async def async_clients() -> list[Any]:
        async with aclient.connect(uri) as ws:
            await exchange_async(ws)
            assert ws.response.headers["Sec-WebSocket-Extensions"] == default_response
            first = ws.protocol.extensions[0]
        async with lclient.connect(uri) as legacy:
            await exchange_async(legacy)
            return [first, legacy.extensions[0]]

    fw.enable()
    try:
        extensions = asyncio.run(asyncio.wait_for(async_clients(), 20))
        with sclient.connect(uri, open_timeout=5) as ws:
            exchange_sync(ws)
            extensions.append(ws.protocol.extensions[0])
    finally:
        fw.disable()
    for ext in extensions:
        check_extension(ext, "fast", use_impl)
        # websockets' defaults are honoured: window 12 both ways, memLevel 5
        assert (ext._compressor.window_bits, ext._compressor.mem_level) == (12, 5)
        assert ext._decompressor.window_bits == 12


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_enabled_servers_against_stock_client(use_impl: ModuleType) -> None:
    """enable(): asyncio, sync and legacy servers, unchanged, serve a stock client."""
    _, lserver = legacy_modules()
    extensions: list[Any] = []

    async def async_echo(ws: Any) -> None:
        extensions.append(ws.protocol.extensions[0])
        await echo(ws)

    async def legacy_echo(ws: Any) -> None:
        extensions.append(ws.extensions[0])
        async for message in ws:
            await ws.send(message)

    def sync_echo(ws: sserver.ServerConnection) -> None:
        extensions.append(ws.protocol.extensions[0])
        for message in ws:
            ws.send(message)

    async def main() -> str:
        async with aserver.serve(async_echo, HOST, 0) as server:
            legacy = await lserver.serve(legacy_echo, HOST, 0)
            try:
                with sserver.serve(sync_echo, HOST, 0) as sync_server:
                    thread = threading.Thread(target=sync_server.serve_forever, daemon=True)
                    thread.start()
                    ports = [port_of(server), legacy.sockets[0].getsockname()[1],
                             sync_server.socket.getsockname()[1]]
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable, "-c", STOCK_PEER, "client", *map(str, ports),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=peer_env(),
                    )
                    out, err = await proc.communicate()
                    sync_server.shutdown()
                    thread.join(5)
                    assert proc.returncode == 0, err.decode()
                    return out.decode()
            finally:
                legacy.close()
                await legacy.wait_closed()

    fw.enable()
    try:
        out = asyncio.run(asyncio.wait_for(main(), 40))
    finally:
        fw.disable()
    assert out.split() == ["websockets.extensions.permessage_deflate"] * 3  # stock client
    assert len(extensions) == 3
    for ext in extensions:
        check_extension(ext, "fast", use_impl)


def run_python(code: str, impl: ModuleType) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The fastdeflate this process imported (the source tree, or site-packages in CI).
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(fastdeflate.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    if impl.__name__.endswith("_pure"):
        env["FASTDEFLATE_PURE"] = "1"
    else:
        env.pop("FASTDEFLATE_PURE", None)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30,
        cwd=package_parent,  # not the source tree, which "-c" would put first on sys.path
    )


ENABLE_FIRST = """
import fastdeflate, fastdeflate.integrations.websockets as fw
fw.enable()
import asyncio
from websockets.asyncio.server import serve
from websockets.asyncio.client import connect
async def echo(ws):
    async for m in ws:
        await ws.send(m)
async def main():
    async with serve(echo, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}") as ws:
            await ws.send("x" * 5000)
            assert await ws.recv() == "x" * 5000
            print(type(ws.protocol.extensions[0]).__module__, fastdeflate.IMPLEMENTATION)
asyncio.run(main())
"""


def test_enable_before_websockets_is_imported(use_impl: ModuleType) -> None:
    """In a fresh interpreter: enable() first, then the application imports websockets."""
    name = "cython" if use_impl.__name__.endswith("_fastdeflate") else "python"
    result = run_python(ENABLE_FIRST, use_impl)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["fastdeflate.integrations.websockets", name]


def test_clear_import_error_without_websockets(use_impl: ModuleType) -> None:
    code = (
        "import sys; sys.modules['websockets'] = None\n"
        "import fastdeflate.integrations.websockets\n"
    )
    result = run_python(code, use_impl)
    assert result.returncode != 0
    assert "ImportError: fastdeflate.integrations.websockets needs the 'websockets' package" in result.stderr


@pytest.mark.parametrize("nct", [False, True], ids=["takeover", "no_takeover"])
def test_without_context_takeover_an_idle_connection_holds_no_codec(
    use_impl: ModuleType, nct: bool
) -> None:
    """Without context takeover codec objects live for one message, as stock's zlib
    objects do: none between messages, one during a fragmented message; with context
    takeover both live as long as the connection."""
    sender = fw.PerMessageDeflate(nct, nct, 12, 12, {"memLevel": 5})
    receiver = fw.PerMessageDeflate(nct, nct, 12, 12, {"memLevel": 5})
    held = lambda: (sender._compressor is not None, receiver._decompressor is not None)  # noqa: E731
    assert held() == (not nct, not nct)
    for _ in range(3):
        first = sender.encode(Frame(Opcode.TEXT, b"hello " * 40, fin=False))
        assert receiver.decode(first).data == b"hello " * 40
        assert held() == (True, True)  # in the middle of a message
        last = sender.encode(Frame(Opcode.CONT, b"world " * 40, fin=True))
        assert receiver.decode(last).data == b"world " * 40
        assert held() == (not nct, not nct)
        whole = sender.encode(Frame(Opcode.BINARY, b"again " * 40))
        assert receiver.decode(whole).data == b"again " * 40
        assert held() == (not nct, not nct)
        assert type(codecs(sender)[0]) is use_impl.Compressor


def test_connections_share_their_compressor_arguments(use_impl: ModuleType) -> None:
    """One (never modified) arguments dict for every connection with the same settings,
    not one per connection; settings it cannot hash leave compression to the stock code."""
    a = fw.PerMessageDeflate(False, False, 12, 12, {"memLevel": 5})
    b = fw.PerMessageDeflate(False, False, 12, 12, {"memLevel": 5})
    assert a._compressor_kwargs is b._compressor_kwargs == {"mem_level": 5}
    assert (a._compressor.mem_level, b._compressor.mem_level) == (5, 5)
    odd = fw.PerMessageDeflate(False, False, 12, 12, {"zdict": bytearray(b"hello")})
    assert odd._stock_encoder and odd._compressor is None
    frame = Frame(Opcode.TEXT, b"hello hello hello")
    stock = pmd.PerMessageDeflate(False, False, 12, 12, {"zdict": bytearray(b"hello")})
    assert bytes(odd.encode(frame).data) == bytes(stock.encode(frame).data)


# ----------------------------------------------------------- compress what pays


class RecordingPerMessageDeflate(pmd.PerMessageDeflate):
    """Stock websockets' extension, its decoding untouched, keeping every frame it is
    given as it came off the wire (RSV1 included)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.frames: list[Frame] = []

    def decode(self, frame: Frame, *, max_size: int | None = None) -> Frame:
        self.frames.append(frame)
        return super().decode(frame, max_size=max_size)


def recording(extension: Any) -> RecordingPerMessageDeflate:
    assert type(extension) is pmd.PerMessageDeflate  # what the stock factory negotiated
    return RecordingPerMessageDeflate(
        extension.remote_no_context_takeover, extension.local_no_context_takeover,
        extension.remote_max_window_bits, extension.local_max_window_bits,
        extension.compress_settings)


class RecordingServerFactory(pmd.ServerPerMessageDeflateFactory):
    def process_request_params(self, params: Any, accepted: Any) -> Any:
        response, extension = super().process_request_params(params, accepted)
        return response, recording(extension)


class RecordingClientFactory(pmd.ClientPerMessageDeflateFactory):
    def process_response_params(self, params: Any, accepted: Any) -> Any:
        return recording(super().process_response_params(params, accepted))



async def fragments_of(parts: list[Message]) -> AsyncIterator[Message]:
    """``parts``, other tasks running between them (not before the first: websockets
    17.4 lets another task start a fragmented message there, and fails an assertion)."""
    for k, part in enumerate(parts):
        if k:
            await asyncio.sleep(0)
        yield part


async def send_stream(ws: Any, items: list[Item]) -> None:
    """Each item as one message: a single frame, or fragments from an iterable (odd
    items) or an async iterable (even ones); the opted-out inside uncompressed()."""
    for k, item in enumerate(items):
        payload: Any = item.parts[0]
        if len(item.parts) > 1:
            payload = fragments_of(item.parts) if k % 2 == 0 else list(item.parts)
        with fastdeflate.uncompressed(item.opt_out):
            await ws.send(payload)


async def stream_to_stock(sender: str, params: dict[str, Any],
                          items: list[Item]) -> tuple[list[Message], list[Frame], Any]:
    """``sender`` ("server" or "client") on fastdeflate sends ``items`` to a stock peer;
    (what the peer received, the frames it was given, the sender's extension)."""
    loop = asyncio.get_running_loop()
    at_server: asyncio.Future[Any] = loop.create_future()

    async def handler(ws: aserver.ServerConnection) -> None:
        [extension] = ws.protocol.extensions
        try:
            if sender == "server":
                await send_stream(ws, items)
                at_server.set_result(extension)
                await ws.wait_closed()
            else:
                at_server.set_result(([await ws.recv() for _ in items], extension))
        except Exception as exc:  # to the test at once, not at its timeout
            if not at_server.done():
                at_server.set_exception(exc)

    server_factory = (fw.ServerPerMessageDeflateFactory if sender == "server"
                      else RecordingServerFactory)(**params)
    client_factory = (fw.ClientPerMessageDeflateFactory if sender == "client"
                      else RecordingClientFactory)(**params)
    async with aserver.serve(handler, HOST, 0, extensions=[server_factory]) as server:
        async with aclient.connect(f"ws://{HOST}:{port_of(server)}",
                                   extensions=[client_factory]) as ws:
            [extension] = ws.protocol.extensions
            if sender == "server":
                received = [await ws.recv() for _ in items]
                return received, extension.frames, await at_server
            await send_stream(ws, items)
            received, receiver = await at_server
            return received, receiver.frames, extension


@pytest.mark.parametrize("bits", [9, 12, 15])  # 12: websockets' default
@pytest.mark.parametrize("nct", [False, True], ids=["takeover", "no_takeover"])
@pytest.mark.parametrize("sender", ["server", "client"])
def test_mixed_stream_to_stock_peer(
    use_impl: ModuleType, default_what_pays: None, sender: str, nct: bool, bits: int
) -> None:
    """The mixed stream (_mixed_driver), sent by fastdeflate to stock websockets (whole
    messages, fragments from an iterable and from an async iterable)."""
    params = {**factory_params("takeover", bits), **window_params(bits, nct)}

    def exchange(items: list[Item]) -> Exchanged:
        received, frames, extension = asyncio.run(
            asyncio.wait_for(stream_to_stock(sender, params, items), 40))
        return Exchanged(received, messages_rsv1(frames), extension)

    sent = drive_mixed_stream(bits + 100 * nct, exchange)
    check_sender_extension(sent.extension, fw.PerMessageDeflate, use_impl.Compressor, nct)


@pytest.mark.parametrize("connections", [1, 2])
def test_opt_out_holds_in_its_own_task(
    use_impl: ModuleType, default_what_pays: None, connections: int
) -> None:
    """Two asyncio tasks send at once, their messages interleaved (on one connection or
    each on its own): every message of the task inside uncompressed() goes out as it
    is, every one of the other is compressed."""
    rng = random.Random(9)
    texts = {name: [f"{name}:{chat(rng, i)}" for i in range(24)] for name in "ab"}
    total = sum(map(len, texts.values()))
    at_server: list[tuple[list[str], RecordingPerMessageDeflate]] = []
    all_in = asyncio.Event()

    async def handler(ws: aserver.ServerConnection) -> None:
        received: list[str] = []
        at_server.append((received, ws.protocol.extensions[0]))
        try:
            async for message in ws:
                received.append(message)
                if sum(len(got) for got, _ in at_server) == total:
                    all_in.set()
        finally:
            all_in.set()  # a failure: to the test at once, not at its timeout

    async def send(ws: Any, name: str) -> None:
        opt_out = fastdeflate.uncompressed() if name == "a" else contextlib.nullcontext()
        with opt_out:
            for k, text in enumerate(texts[name]):
                await ws.send(fragments_of([text[:9], text[9:]]) if k % 3 == 2 else text)
                await asyncio.sleep(0)

    async def main() -> None:
        async with aserver.serve(handler, HOST, 0,
                                 extensions=[RecordingServerFactory()]) as server:
            uri = f"ws://{HOST}:{port_of(server)}"
            async with contextlib.AsyncExitStack() as stack:
                sockets = [await stack.enter_async_context(aclient.connect(
                    uri, extensions=[fw.ClientPerMessageDeflateFactory()]))
                    for _ in range(connections)]
                await asyncio.gather(send(sockets[0], "a"), send(sockets[-1], "b"))
                await asyncio.wait_for(all_in.wait(), 20)

    asyncio.run(asyncio.wait_for(main(), 30))
    assert len(at_server) == connections
    by_sender: dict[str, list[list[bool]]] = {"a": [], "b": []}
    for received, extension in at_server:
        bits = messages_rsv1(extension.frames)
        assert len(bits) == len(received)
        for message, rsv1 in zip(received, bits):
            by_sender[message[0]].append(rsv1)
        if connections == 1:  # interleaved: the sender changes many times
            order = [message[0] for message in received]
            assert sum(x != y for x, y in zip(order, order[1:])) > 10, order
    assert sorted(m for received, _ in at_server for m in received) == sorted(
        texts["a"] + texts["b"])
    assert [len(by_sender[name]) for name in "ab"] == [24, 24]
    assert all(not any(rsv1) for rsv1 in by_sender["a"]), by_sender["a"]
    assert all(rsv1[0] and not any(rsv1[1:]) for rsv1 in by_sender["b"]), by_sender["b"]
    assert {reason: entry["messages"] for reason, entry in
            fastdeflate.status()["sent_uncompressed"].items()} == {"opt-out": 24}


@pytest.mark.parametrize("kind", ["random", "png", "mixed"])
def test_broadcast_of_a_message_that_does_not_pay_keeps_compressing_once(
    use_impl: ModuleType, default_what_pays: None, kind: str
) -> None:
    """enable(): websockets' broadcast() of a message between chat updates, to 8 stock
    clients: every client decodes every message; a message sent as it is leaves the
    group whole (one compression per later update). ``mixed`` (half text, half random:
    compressed from a snapshot, kept as it came out smaller) is compressed once for the
    group too, which stays whole."""
    rng = random.Random(3)
    blob = {"random": rng.randbytes(5000), "png": PNG_HEAD + rng.randbytes(5000),
            "mixed": make_mixed_binary(5000, seed=3)}[kind]
    updates: list[Message] = [chat(rng, k) for k in range(4)] + [blob] + [
        chat(rng, k) for k in range(4, 8)]
    connections: list[Any] = []
    payloads: list[set[int]] = []
    histories: list[int] = []

    async def handler(ws: aserver.ServerConnection) -> None:
        connections.append(ws)
        await ws.wait_closed()

    async def client(url: str) -> list[Any]:
        async with aclient.connect(url, extensions=[pmd.ClientPerMessageDeflateFactory(
                client_max_window_bits=12, server_max_window_bits=12)]) as ws:
            return [await ws.recv() for _ in updates]

    async def main() -> list[list[Any]]:
        async with aserver.serve(handler, HOST, 0) as server:
            url = f"ws://{HOST}:{port_of(server)}"
            tasks = [asyncio.create_task(client(url)) for _ in range(8)]
            while len(connections) < 8:
                await asyncio.sleep(0.01)
            for update in updates:
                encoded: list[Any] = []
                for ws in connections:
                    extension = ws.protocol.extensions[0]
                    extension.encode = (lambda e: lambda frame: encoded.append(
                        type(e).encode(e, frame)) or encoded[-1])(extension)
                aserver.broadcast(connections, update)
                for ws in connections:
                    del ws.protocol.extensions[0].encode
                payloads.append({id(frame.data) for frame in encoded})
                histories.append(len({c.protocol.extensions[0]._compressor._group()[1]
                                      for c in connections}))
            return await asyncio.gather(*tasks)

    fw.enable()
    try:
        received = asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        fw.disable()
    assert all(got == updates for got in received)
    skipped = {reason: entry["messages"]
               for reason, entry in fastdeflate.status()["sent_uncompressed"].items()}
    assert skipped == ({} if kind == "mixed" else
                       {"incompressible" if kind == "random" else "compressed format": 8})
    assert histories == [1] * len(updates)  # one history for the group throughout
    assert [len(ids) for ids in payloads] == [1] * len(updates)  # one payload each


def test_a_broadcast_group_shares_one_frame_and_only_an_equal_one(use_impl: ModuleType) -> None:
    """Connections that take one payload object (a broadcast's group) get one frame
    object; a frame that differs in opcode, FIN or RSV bits, or another payload, is made
    anew (and each frame's bits are its own)."""
    data = json.dumps({"tick": list(range(200))}).encode()
    exts = [fw.PerMessageDeflate(False, False, 12, 12, {"memLevel": 5}) for _ in range(4)]
    text = [ext.encode(Frame(Opcode.TEXT, data)) for ext in exts]
    assert all(frame is text[0] for frame in text)  # compressed once, framed once
    assert (text[0].opcode, text[0].fin, text[0].rsv1) == (Opcode.TEXT, True, True)
    fresh = fw.PerMessageDeflate(False, False, 12, 12, {"memLevel": 5})
    binary = fresh.encode(Frame(Opcode.BINARY, data))  # the same payload, as binary
    assert binary.data is text[0].data and binary.opcode is Opcode.BINARY
    # the same payload object with other bits: fastdeflate's frame keeps them
    others = [fw.PerMessageDeflate(False, False, 12, 12, {"memLevel": 5}) for _ in range(2)]
    plain = others[0].encode(Frame(Opcode.TEXT, data))
    flagged = others[1].encode(Frame(Opcode.TEXT, data, rsv2=True))
    assert plain.data is flagged.data and not plain.rsv2 and flagged.rsv2
    # and the other way round: a frame with RSV3 first, then the same payload without
    other = json.dumps({"tock": list(range(200))}).encode()
    more = [fw.PerMessageDeflate(False, False, 12, 12, {"memLevel": 5}) for _ in range(2)]
    flagged_first = more[0].encode(Frame(Opcode.TEXT, other, rsv3=True))
    plain_after = more[1].encode(Frame(Opcode.TEXT, other))
    assert plain_after.data is flagged_first.data
    assert flagged_first.rsv3 and not plain_after.rsv3 and plain_after.rsv1
