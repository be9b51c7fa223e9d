"""fastdeflate in tornado: real servers and clients on 127.0.0.1, both implementations.

tornado's own client always offers ``permessage-deflate; client_max_window_bits`` and its
server echoes the offer, so tornado <-> tornado always agrees on window 15 with context
takeover. The other parameters (window bits 9/15 both ways, either no-context-takeover
flag) are exercised against websockets peers, which offer or impose them, and the
fastdeflate objects are compared with tornado's stock ones byte for byte on every set.
"""

from __future__ import annotations

import asyncio
import logging
import random
import subprocess
import sys
import zlib
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, Optional

import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web
import tornado.websocket as tws
from websockets.asyncio.client import connect as wsk_connect
from websockets.asyncio.server import serve as wsk_serve
from websockets.extensions.permessage_deflate import (
    ClientPerMessageDeflateFactory,
    ServerPerMessageDeflateFactory,
)

import fastdeflate
import fastdeflate.integrations.tornado as ft
from _samezlib import same_zlib_as_stdlib

from ._mixed_driver import Exchanged, drive_mixed_stream, mixed_items
from ._support import HELLO_PAYLOAD, deflate_streams, impl_environ
from ._what_pays import Item, uncompressed_by_reason

pytestmark = pytest.mark.timeout(60)

STOCK_COMPRESSOR = tws._PerMessageDeflateCompressor
STOCK_DECOMPRESSOR = tws._PerMessageDeflateDecompressor
STOCK_PROTOCOL = tws.WebSocketProtocol13
SIZES = [0, 1, 1024, 65536, 1_000_000]
SMALL_SIZES = [0, 1, 1024, 65536]
# (server_no_context_takeover, client_no_context_takeover)
TAKEOVER = [(False, False), (True, False), (False, True)]
WBITS = [9, 15]


# --- messages ---------------------------------------------------------------------------


def make_message(size: int, binary: bool, seed: int = 0) -> str | bytes:
    """Half varying, half repetitive content: compressible, but not trivially."""
    rnd = random.Random(size * 2 + binary + seed * 7919)
    if binary:
        half = rnd.randbytes(size // 2)
        return half + (b"fastdeflate" * (size // 11 + 1))[: size - len(half)]
    words = ["alpha", "beta", "gamma", "delta", "é", "ω", "{\"k\":", "12345", "\n"]
    text = " ".join(rnd.choice(words) for _ in range(size // 3 + 1))
    return text.encode()[:size].decode("utf-8", "ignore")


def messages(sizes: list[int], seed: int = 0) -> list[str | bytes]:
    return [make_message(n, binary, seed) for n in sizes for binary in (False, True)]


# --- tornado servers and clients --------------------------------------------------------


class EchoHandler(tornado.websocket.WebSocketHandler):
    """Echoes every message; records what happened on this connection in ``events``."""

    options: Optional[dict[str, Any]] = {}
    events: dict[str, Any]

    def get_compression_options(self) -> Optional[dict[str, Any]]:
        return self.options

    def open(self) -> None:
        proto = self.ws_connection
        self.events["codec"] = (type(proto._compressor), type(proto._decompressor))
        self.events["protocol"] = type(proto)

    def on_message(self, message: str | bytes) -> None:
        if message == "send-corrupt":
            self.ws_connection._write_frame(True, 0x1, b"\xff" * 5, flags=0x40)
        elif isinstance(message, str) and message.startswith("send-big:"):
            self.write_message(b"a" * int(message[9:]), binary=True)
        else:
            self.write_message(message, binary=isinstance(message, bytes))

    def on_ping(self, data: bytes) -> None:
        self.events["ping"] = data

    def on_close(self) -> None:
        self.events["closed"] = (self.close_code, self.close_reason)

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        self.events["exception"] = typ


def handler_class(fast: bool, options: Optional[dict] = None, events: dict | None = None):
    bases = (ft.FastDeflateHandlerMixin, EchoHandler) if fast else (EchoHandler,)
    attrs = {"options": {} if options is None else options, "events": events}
    return type("FastEcho" if fast else "StockEcho", bases, attrs)


@contextmanager
def tornado_server(handler: type, **settings: Any) -> Iterator[int]:
    """A tornado HTTPServer on 127.0.0.1:<ephemeral>; yields the port. Needs a loop."""
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server = tornado.httpserver.HTTPServer(tornado.web.Application([("/", handler)], **settings))
    server.add_sockets(sockets)
    try:
        yield sockets[0].getsockname()[1]
    finally:
        server.stop()


def tornado_connect(fast: bool, url: str, **kwargs: Any) -> Awaitable[Any]:
    """tornado's client: fastdeflate per connection, or stock."""
    kwargs.setdefault("compression_options", {})
    return (ft.websocket_connect if fast else tws.websocket_connect)(url, **kwargs)


def run(coro: Awaitable[Any], timeout: float = 40) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


async def wait_for_key(events: dict, key: str, timeout: float = 5) -> Any:
    for _ in range(int(timeout / 0.01)):
        if key in events:
            return events[key]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {key!r} event: {events}")


@contextmanager
def logged_exceptions() -> Iterator[list]:
    """Exception types that tornado logs (app_log), e.g. from a client's frame loop."""
    found: list = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.exc_info:
                found.append(record.exc_info[0])

    recorder = Recorder()
    logger = logging.getLogger("tornado.application")
    logger.addHandler(recorder)
    try:
        yield found
    finally:
        logger.removeHandler(recorder)


def codec_of(fast: bool) -> tuple[type, type]:
    if fast:
        return (ft.FastDeflateCompressor, ft.FastDeflateDecompressor)
    return (STOCK_COMPRESSOR, STOCK_DECOMPRESSOR)


# --- tornado <-> tornado ----------------------------------------------------------------

PAIRS = [(True, False), (False, True), (True, True)]  # (fast server, fast client)
PAIR_IDS = ["fast-server", "fast-client", "fast-both"]


@pytest.mark.parametrize("fast_server,fast_client", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(
    "options", [{}, {"compression_level": 1, "mem_level": 5}], ids=["default", "level1-mem5"]
)
def test_tornado_echo(use_impl, fast_server, fast_client, options) -> None:
    sizes = SIZES if not options else SMALL_SIZES
    sent = messages(sizes) + messages(sizes, seed=1)  # repeats: context takeover matters

    async def main() -> None:
        events: dict = {}
        with tornado_server(handler_class(fast_server, options, events)) as port:
            conn = await tornado_connect(
                fast_client, f"ws://127.0.0.1:{port}/", compression_options=options
            )
            try:
                assert type(conn.protocol._compressor) is codec_of(fast_client)[0]
                assert events["codec"] == codec_of(fast_server)
                for message in sent:
                    await conn.write_message(message, binary=isinstance(message, bytes))
                    assert await conn.read_message() == message
                # control frames stay as they are; uncompressed frames pass through
                conn.ping(b"still-plain")
                assert await wait_for_key(events, "ping") == b"still-plain"
                conn.protocol._write_frame(True, 0x1, b"uncompressed")
                assert await conn.read_message() == "uncompressed"
            finally:
                conn.close(1000)
            assert (await wait_for_key(events, "closed"))[0] == 1000

    run(main())


# --- tornado server <-> websockets client: every parameter set --------------------------
#
# tornado 6.6.1's header parser (httputil._parse_header) drops parameters that have no
# value, so stock tornado ignores both *_no_context_takeover flags, as server and as
# client: a websockets client that asks for server_no_context_takeover refuses the
# response, and a websockets server that imposes client_no_context_takeover fails to
# inflate what tornado sends. fastdeflate must do exactly the same. "flags-kept" runs
# each test again with a protocol whose parser keeps the flags (as older tornado did),
# which is the only way tornado creates objects without context takeover.


def parse_keeping_flags(self: Any, headers: Any) -> list[tuple[str, dict]]:
    """RFC 7692 parsing: a parameter without a value is kept, as None."""
    offers = []
    for offer in headers.get("Sec-WebSocket-Extensions", "").split(","):
        name, *params = [part.strip() for part in offer.split(";")]
        if name:
            pairs = (param.partition("=") for param in params if param)
            values = {k.strip().lower(): v.strip() if eq else None for k, eq, v in pairs}
            offers.append((name, values))
    return offers


class StockKeepingFlags(tws.WebSocketProtocol13):
    _parse_extensions_header = parse_keeping_flags


class FastKeepingFlags(ft.FastDeflateWebSocketProtocol13):
    _parse_extensions_header = parse_keeping_flags


def keep_flags(protocol: Any) -> Any:
    fast = isinstance(protocol, ft.FastDeflateWebSocketProtocol13)
    protocol.__class__ = FastKeepingFlags if fast else StockKeepingFlags
    return protocol


class KeepFlagsHandlerMixin:
    def get_websocket_protocol(self) -> Any:
        return keep_flags(super().get_websocket_protocol())  # type: ignore[misc]


class StockClientKeepingFlags(tws.WebSocketClientConnection):
    def get_websocket_protocol(self) -> Any:
        return keep_flags(super().get_websocket_protocol())


class FastClientKeepingFlags(ft.FastDeflateWebSocketClientConnection):
    def get_websocket_protocol(self) -> Any:
        return keep_flags(super().get_websocket_protocol())


async def tornado_connect_keeping_flags(fast: bool, url: str) -> Any:
    cls = FastClientKeepingFlags if fast else StockClientKeepingFlags
    return await cls(tornado.httpclient.HTTPRequest(url), compression_options={}).connect_future


PARSERS = ["tornado", "flags-kept"]


async def websockets_exchange(ws: Any, sent: list[str | bytes]) -> int:
    """Echo ``sent``, then two messages fragmented; returns how many came back."""
    count = 0
    for message in sent:
        await ws.send(message)
        assert await ws.recv() == message
        count += 1
    for message in sent[2:4]:  # fragmented (continuation frames), one frame per piece
        pieces = [message[i : i + 9000] for i in range(0, len(message), 9000)] or [message]
        await ws.send(pieces)
        assert await ws.recv() == message
        count += 1
    return count


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("wbits", WBITS)
@pytest.mark.parametrize("takeover", TAKEOVER, ids=["takeover", "server_nct", "client_nct"])
def test_tornado_server_parameters(use_impl, takeover, wbits, parser) -> None:
    """Stock and fast tornado servers: same response, same outcome; messages intact."""
    server_nct, client_nct = takeover
    full = (takeover, wbits, parser) == ((False, False), 15, "tornado")
    sent = messages(SIZES if full else SMALL_SIZES) + messages(SMALL_SIZES, seed=1)

    async def session(fast: bool) -> tuple:
        events: dict = {}
        factory = ClientPerMessageDeflateFactory(
            server_no_context_takeover=server_nct,
            client_no_context_takeover=client_nct,
            server_max_window_bits=wbits,
            client_max_window_bits=wbits,
        )
        handler = handler_class(fast, {}, events)
        if parser == "flags-kept":
            handler = type("KeepFlags", (KeepFlagsHandlerMixin, handler), {})
        with tornado_server(handler) as port:
            try:
                async with wsk_connect(
                    f"ws://127.0.0.1:{port}/", extensions=[factory], compression=None,
                    max_size=None,
                ) as ws:
                    assert events["codec"] == codec_of(fast)
                    count = await websockets_exchange(ws, sent)
                    return ws.response.headers["Sec-WebSocket-Extensions"], count
            except Exception as exc:  # noqa: BLE001 - compared with stock below
                return type(exc), 0

    async def main() -> None:
        stock, fast = await session(False), await session(True)
        assert fast == stock
        if parser == "tornado" and server_nct:
            assert stock[0].__name__ == "NegotiationError"
            return
        header, count = fast
        assert count == len(sent) + 2
        assert f"server_max_window_bits={wbits}" in header
        assert ("server_no_context_takeover" in header) == (server_nct and parser != "tornado")
        assert ("client_no_context_takeover" in header) == (client_nct and parser != "tornado")

    run(main())


# --- tornado client <-> websockets server: every parameter set --------------------------


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("wbits", WBITS)
@pytest.mark.parametrize("takeover", TAKEOVER, ids=["takeover", "server_nct", "client_nct"])
def test_tornado_client_parameters(use_impl, takeover, wbits, parser) -> None:
    """Stock and fast tornado clients: same offer, same outcome under imposed parameters."""
    server_nct, client_nct = takeover
    full = (takeover, wbits, parser) == ((False, False), 15, "tornado")
    sent = messages(SIZES if full else SMALL_SIZES) + messages(SMALL_SIZES, seed=1)
    offers: list = []

    async def echo(ws: Any) -> None:
        offers.append(ws.request.headers["Sec-WebSocket-Extensions"])
        async for message in ws:
            if message == "fragments":  # reply with the next message, fragmented
                message = await ws.recv()
                await ws.send([message[i : i + 9000] for i in range(0, len(message), 9000)])
            else:
                await ws.send(message)

    async def session(fast: bool) -> tuple:
        factory = ServerPerMessageDeflateFactory(
            server_no_context_takeover=server_nct,
            client_no_context_takeover=client_nct,
            server_max_window_bits=wbits,
            client_max_window_bits=wbits,
        )
        async with wsk_serve(
            echo, "127.0.0.1", 0, extensions=[factory], compression=None, max_size=None
        ) as server:
            url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
            if parser == "flags-kept":
                conn = await tornado_connect_keeping_flags(fast, url)
            else:
                conn = await tornado_connect(fast, url)
            count = 0
            try:
                assert type(conn.protocol._decompressor) is codec_of(fast)[1]
                for message in sent:
                    await conn.write_message(message, binary=isinstance(message, bytes))
                    if await conn.read_message() != message:
                        break
                    count += 1
                else:
                    for message in sent[4:6]:
                        await conn.write_message("fragments")
                        await conn.write_message(message, binary=isinstance(message, bytes))
                        assert await conn.read_message() == message
                        count += 1
                return conn.headers["Sec-WebSocket-Extensions"], count, conn.close_code
            finally:
                conn.close()

    async def main() -> None:
        stock, fast = await session(False), await session(True)
        if same_zlib_as_stdlib(use_impl) or not (parser == "tornado" and client_nct):
            assert fast == stock
        else:  # where the peer fails depends on the compressed bytes
            assert fast[0] == stock[0]
        assert offers[0] == offers[1] == "permessage-deflate; client_max_window_bits"
        header, count, close_code = fast
        assert f"client_max_window_bits={wbits}" in header
        assert ("client_no_context_takeover" in header) == client_nct
        if parser == "tornado" and client_nct:
            # tornado ignores the flag and keeps its window: the peer fails to inflate
            # once a message refers back into an earlier one (these messages do at 15).
            assert count < len(sent) and close_code == 1002 or wbits == 9
            assert stock[1] < len(sent) or wbits == 9
        else:
            assert count == len(sent) + 2

    run(main())


# --- limits and errors: same as stock ---------------------------------------------------


def test_oversized_message_to_server(use_impl) -> None:
    """Decompressed size over websocket_max_message_size: close 1009, as stock."""
    limit = 4096

    async def session(fast: bool, size: int) -> tuple:
        events: dict = {}
        handler = handler_class(fast, {}, events)
        with tornado_server(handler, websocket_max_message_size=limit) as port:
            conn = await tornado_connect(False, f"ws://127.0.0.1:{port}/")
            await conn.write_message(b"a" * size, binary=True)  # compresses to ~20 bytes
            got = await conn.read_message()
            if got is not None:
                conn.close()
            closed = await wait_for_key(events, "closed")
            return (got is not None and len(got)), conn.close_code, conn.close_reason, closed

    async def main() -> None:
        for size in (limit, limit + 1, 100 * limit):
            stock, fast = await session(False, size), await session(True, size)
            assert fast == stock
        assert stock[1] == 1009 and stock[2] == "message too big after decompression"
        assert (await session(True, limit))[0] == limit

    run(main())


def test_oversized_message_to_client(use_impl) -> None:
    limit = 4096

    async def session(fast: bool, size: int) -> tuple:
        events: dict = {}
        with tornado_server(handler_class(False, {}, events)) as port:
            conn = await tornado_connect(
                fast, f"ws://127.0.0.1:{port}/", max_message_size=limit
            )
            await conn.write_message(f"send-big:{size}")
            got = await conn.read_message()
            if got is not None:
                conn.close()
            closed = await wait_for_key(events, "closed")
            return (got is not None and len(got)), closed

    async def main() -> None:
        for size in (limit, limit + 1):
            stock, fast = await session(False, size), await session(True, size)
            assert fast == stock
        assert stock[1] == (1009, "message too big after decompression")

    run(main())


def test_corrupt_frame_to_server(use_impl) -> None:
    """Stock tornado lets zlib.error escape its frame loop: no close frame, logged. 6.6
    then drops the connection; 6.5 (the last for Python 3.10) leaves it open."""

    async def session(fast: bool) -> tuple:
        events: dict = {}
        with tornado_server(handler_class(fast, {}, events)) as port:
            conn = await tornado_connect(False, f"ws://127.0.0.1:{port}/")
            await conn.write_message("hello")
            assert await conn.read_message() == "hello"
            conn.protocol._write_frame(True, 0x1, b"\xff" * 5, flags=0x40)
            try:
                got = await asyncio.wait_for(conn.read_message(), 10)
            except asyncio.TimeoutError:
                got = "no reply within 10 s"
            exception = await wait_for_key(events, "exception")
            result = got, conn.close_code, events.get("closed"), exception
            conn.close()
            return result

    async def main() -> None:
        stock, fast = await session(False), await session(True)
        assert fast == stock
        assert stock[1:] == (None, (None, None), zlib.error) or (
            tornado.version_info < (6, 6) and stock[3] is zlib.error), stock

    run(main())


def test_corrupt_frame_to_client(use_impl) -> None:
    async def session(fast: bool) -> tuple:
        events: dict = {}
        handler = handler_class(False, {}, events)
        with logged_exceptions() as logged, tornado_server(handler) as port:
            conn = await tornado_connect(fast, f"ws://127.0.0.1:{port}/")
            await conn.write_message("send-corrupt")
            try:  # 6.6 drops the connection; 6.5 leaves it open
                got = await asyncio.wait_for(conn.read_message(), 10)
            except asyncio.TimeoutError:
                got = "no reply within 10 s"
            for _ in range(200):
                if logged:
                    break
                await asyncio.sleep(0.01)
            conn.close()
            return got, conn.close_code, logged[:]

    async def main() -> None:
        stock, fast = await session(False), await session(True)
        assert fast == stock
        assert stock[2] == [zlib.error]

    run(main())


def test_bfinal_blocks_decoded_where_stock_truncates(use_impl) -> None:
    """RFC 7692 7.2.3.4: a message of several deflate streams (blocks with BFINAL set)
    is valid. Stock tornado keeps the first stream and decodes every later compressed
    message empty; fastdeflate decodes them all, up to 16 streams in a message (more is
    corrupt data: zlib.error, as stock's). A known difference, listed in the README."""
    too_many = fastdeflate._params.MAX_STREAMS_PER_MESSAGE + 1
    payloads = [deflate_streams(2), HELLO_PAYLOAD, deflate_streams(too_many)]

    def decoded(cls: type) -> list:
        decompressor = cls(persistent=True, max_wbits=15, max_message_size=1 << 20)
        out: list = []
        for payload in payloads:
            try:
                out.append(decompressor.decompress(payload))
            except zlib.error as exc:
                out.append(type(exc))
        return out

    assert decoded(STOCK_DECOMPRESSOR) == [b"m0;", b"", b""]
    assert decoded(ft.FastDeflateDecompressor) == [b"m0;m1;", b"Hello", zlib.error]


# --- byte identity with stock ------------------------------------------------------------


@pytest.mark.parametrize("persistent", [True, False], ids=["takeover", "no-takeover"])
@pytest.mark.parametrize("wbits", [9, 12, 15])
@pytest.mark.parametrize(
    "options", [None, {}, {"compression_level": 1, "mem_level": 5}, {"compression_level": 9}]
)
def test_payloads_identical_to_stock(use_impl, persistent, wbits, options) -> None:
    stock = STOCK_COMPRESSOR(persistent, wbits, options)
    fast = ft.FastDeflateCompressor(persistent, wbits, options)
    stock_in = STOCK_DECOMPRESSOR(persistent, wbits, 10**7, options)
    fast_in = ft.FastDeflateDecompressor(persistent, wbits, 10**7, options)
    sizes = SIZES if (persistent, wbits, options) == (True, 15, {}) else SMALL_SIZES
    stock_rx = STOCK_DECOMPRESSOR(persistent, wbits, 10**7, options)
    identical = same_zlib_as_stdlib(use_impl)
    for message in messages(sizes) + messages(sizes, seed=1):
        data = message if isinstance(message, bytes) else message.encode()
        payload, ours = stock.compress(data), fast.compress(data)
        if identical:
            assert ours == payload
        assert fast_in.decompress(payload) == stock_in.decompress(payload) == data
        assert stock_rx.decompress(ours) == data  # other engines: still stock-readable


def test_payloads_identical_on_the_wire(use_impl) -> None:
    """Frames a stock and a fast server send to the same recording client are equal."""

    class Recording(tws.WebSocketProtocol13):
        def _handle_message(self, opcode: int, data: bytes) -> Any:
            self.handler.frames.append((opcode, self._frame_compressed, data))
            return super()._handle_message(opcode, data)

    class RecordingClient(tws.WebSocketClientConnection):
        def get_websocket_protocol(self) -> tws.WebSocketProtocol:
            self.frames: list = []
            return Recording(self, mask_outgoing=True, params=self.params)

    sent = messages(SIZES)

    async def session(fast: bool) -> list:
        with tornado_server(handler_class(fast, {}, {})) as port:
            request = tornado.httpclient.HTTPRequest(f"ws://127.0.0.1:{port}/")
            conn = RecordingClient(request, compression_options={})
            conn = await conn.connect_future
            try:
                for message in sent:
                    await conn.write_message(message, binary=isinstance(message, bytes))
                    assert await conn.read_message() == message
                return conn.frames
            finally:
                conn.close()

    async def main() -> None:
        stock, fast = await session(False), await session(True)
        stock = [frame for frame in stock if frame[0] in (1, 2)]  # not the close frame
        fast = [frame for frame in fast if frame[0] in (1, 2)]
        assert [frame[1] for frame in stock] == [True] * len(sent)
        if same_zlib_as_stdlib(use_impl):
            assert fast == stock
        else:  # another engine: same frames, other bytes (each decoded by stock above)
            assert [frame[:2] for frame in fast] == [frame[:2] for frame in stock]

    run(main())


# --- same parameter errors as stock -------------------------------------------------------


def outcome(make: Callable[[], Any], then: Callable[[Any], Any] = lambda obj: None) -> Any:
    try:
        then(make())
    except Exception as exc:  # noqa: BLE001 - the exception type is what is compared
        return type(exc)
    return None


@pytest.mark.parametrize("wbits", [7, 8, 16, None])
@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.parametrize("options", [{}, {"compression_level": 10}, {"mem_level": 0}])
def test_same_errors_as_stock(use_impl, wbits, persistent, options) -> None:
    def compress(obj: Any) -> Any:
        return obj.compress(b"x")

    for stock_cls, fast_cls in [(STOCK_COMPRESSOR, ft.FastDeflateCompressor)]:
        assert outcome(lambda: fast_cls(persistent, wbits, options)) == outcome(
            lambda: stock_cls(persistent, wbits, options)
        )
        assert outcome(lambda: fast_cls(persistent, wbits, options), compress) == outcome(
            lambda: stock_cls(persistent, wbits, options), compress
        )
    assert outcome(lambda: ft.FastDeflateDecompressor(persistent, wbits, 100)) == outcome(
        lambda: STOCK_DECOMPRESSOR(persistent, wbits, 100)
    )


def test_unsupported_parameter_same_as_stock(use_impl) -> None:
    params = tws._WebSocketParams(compression_options={})
    for cls in (tws.WebSocketProtocol13, ft.FastDeflateWebSocketProtocol13):
        proto = cls(None, False, params)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="unsupported compression parameter"):
            proto._create_compressors("server", {"bogus": "1"}, {})


AGREED = [
    {},
    {"server_no_context_takeover": None},
    {"client_no_context_takeover": None, "server_max_window_bits": "9"},
    {"client_max_window_bits": "10", "server_max_window_bits": "12"},
]


@pytest.mark.parametrize("agreed", AGREED)
@pytest.mark.parametrize("side", ["server", "client"])
def test_same_settings_as_stock_protocol(use_impl, side, agreed) -> None:
    """FastDeflateWebSocketProtocol13 passes tornado's settings on unchanged."""
    options = {"compression_level": 3, "mem_level": 7}
    params = tws._WebSocketParams(max_message_size=12345, compression_options=options)
    stock = tws.WebSocketProtocol13(None, False, params)  # type: ignore[arg-type]
    fast = ft.FastDeflateWebSocketProtocol13(None, False, params)  # type: ignore[arg-type]
    stock._create_compressors(side, dict(agreed), options)
    fast._create_compressors(side, dict(agreed), options)
    sc, fc = stock._compressor, fast._compressor
    assert (fc._max_wbits, fc._persistent, fc._compression_level, fc._mem_level) == (
        sc._max_wbits, sc._compressor is not None, sc._compression_level, sc._mem_level
    )
    sd, fd = stock._decompressor, fast._decompressor
    assert (fd._max_wbits, fd._persistent, fd._max_size) == (
        sd._max_wbits, sd._decompressor is not None, sd._max_message_size
    )


# --- enable() / disable() ------------------------------------------------------------------


@pytest.fixture
def enabled() -> Iterator[None]:
    ft.enable()
    try:
        yield
    finally:
        ft.disable()


def test_enable_disable_restore_stock_exactly() -> None:
    assert not ft.is_enabled()
    try:
        ft.enable()
        ft.enable()
        assert ft.is_enabled()
        assert tws._PerMessageDeflateCompressor is ft.FastDeflateCompressor
        assert tws._PerMessageDeflateDecompressor is ft.FastDeflateDecompressor
        assert tws.WebSocketProtocol13 is ft.FastDeflateWebSocketProtocol13
        assert tws.websocket_connect is not ft.websocket_connect
        assert ft.stock_classes() == (STOCK_COMPRESSOR, STOCK_DECOMPRESSOR)
    finally:
        ft.disable()
    ft.disable()
    assert not ft.is_enabled()
    assert tws._PerMessageDeflateCompressor is STOCK_COMPRESSOR
    assert tws._PerMessageDeflateDecompressor is STOCK_DECOMPRESSOR
    assert tws.WebSocketProtocol13 is STOCK_PROTOCOL
    assert ft.FastDeflateWebSocketProtocol13.__bases__ == (STOCK_PROTOCOL,)
    assert ft.stock_classes() == (STOCK_COMPRESSOR, STOCK_DECOMPRESSOR)
    assert tws.WebSocketProtocol13._create_compressors is not (
        ft.FastDeflateWebSocketProtocol13._create_compressors
    )


def test_disable_leaves_a_class_installed_after_enable() -> None:
    """A class someone installs over fastdeflate's after enable() (a wrapper, say) is
    left in place by disable(); the other hook point goes back to stock all the same."""

    class Wrapper(ft.FastDeflateCompressor):
        pass

    try:
        ft.enable()
        tws._PerMessageDeflateCompressor = Wrapper
        ft.disable()
        assert tws._PerMessageDeflateCompressor is Wrapper
        assert tws._PerMessageDeflateDecompressor is STOCK_DECOMPRESSOR
        assert not ft.is_enabled()
        ft.disable()
        assert tws._PerMessageDeflateCompressor is Wrapper
        assert ft.stock_classes() == (STOCK_COMPRESSOR, STOCK_DECOMPRESSOR)
    finally:
        tws._PerMessageDeflateCompressor = STOCK_COMPRESSOR
        tws._PerMessageDeflateDecompressor = STOCK_DECOMPRESSOR


def test_enable_changes_nothing_without_both_hook_points(monkeypatch) -> None:
    """A tornado without ``_PerMessageDeflateDecompressor``: enable() raises before it
    replaces the compressor class (never half-enabled)."""
    monkeypatch.delattr(tws, "_PerMessageDeflateDecompressor")
    with pytest.raises(AttributeError, match="_PerMessageDeflateDecompressor"):
        ft.enable()
    assert tws._PerMessageDeflateCompressor is STOCK_COMPRESSOR


def test_enabled_stock_application_code(use_impl, enabled) -> None:
    """Plain WebSocketHandler and tornado.websocket.websocket_connect use fastdeflate."""
    sent = messages(SMALL_SIZES)

    async def main() -> None:
        events: dict = {}
        with tornado_server(handler_class(False, {}, events)) as port:
            conn = await tws.websocket_connect(
                f"ws://127.0.0.1:{port}/", compression_options={}
            )
            try:
                assert type(conn.protocol) is tws.WebSocketProtocol13
                assert type(conn.protocol._compressor) is ft.FastDeflateCompressor
                assert events["codec"] == codec_of(True)
                for message in sent:
                    await conn.write_message(message, binary=isinstance(message, bytes))
                    assert await conn.read_message() == message
            finally:
                conn.close()
        ft.disable()
        with tornado_server(handler_class(False, {}, events)) as port:
            conn = await tws.websocket_connect(
                f"ws://127.0.0.1:{port}/", compression_options={}
            )
            assert type(conn.protocol._compressor) is STOCK_COMPRESSOR
            assert events["codec"] == codec_of(False)
            conn.close()

    run(main())


def test_integrations_registry_enables_tornado() -> None:
    import fastdeflate.integrations as registry

    try:
        assert "tornado" in registry.enable()
        assert ft.is_enabled() and "tornado" in registry.enabled()
    finally:
        registry.disable()
    assert not ft.is_enabled()
    assert tws._PerMessageDeflateCompressor is STOCK_COMPRESSOR


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )


def test_enable_before_tornado_is_imported() -> None:
    result = run_python(
        "import sys, fastdeflate.integrations.tornado as ft\n"
        "ft.enable()\n"
        "import tornado.websocket as w\n"
        "assert w._PerMessageDeflateCompressor is ft.FastDeflateCompressor\n"
        "ft.disable(); assert not ft.is_enabled()\n"
        "print('ok')"
    )
    assert result.stdout.strip() == "ok", result.stderr


@pytest.mark.timeout(180)
def test_tornados_own_websocket_tests_pass_enabled(use_impl) -> None:
    """tornado's own ``tornado.test.websocket_test``, run after ``fastdeflate.enable()``,
    passes — among its tests ``test_compression_bomb``, which bounds the memory of a
    compressed message to 3x max_message_size (it failed at 32x before the compressor's
    output followed the output)."""
    result = subprocess.run(
        [sys.executable, "-c",
         "import sys, fastdeflate, tornado.websocket as w\n"
         "assert 'tornado' in fastdeflate.enable(fallback=True), 'not enabled'\n"
         "assert w._PerMessageDeflateCompressor.__module__ == 'fastdeflate.integrations.tornado'\n"
         "print('implementation', fastdeflate.IMPLEMENTATION)\n"
         "sys.argv = ['runtests', 'tornado.test.websocket_test']\n"
         "from tornado.test.runtests import main\n"
         "main()\n"],
        capture_output=True, text=True, timeout=150, env=impl_environ(use_impl), cwd="/",
    )
    expected = "python" if use_impl.__name__.endswith("_pure") else "cython"
    assert f"implementation {expected}" in result.stdout, result.stderr
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test_compression_bomb" not in result.stderr  # neither failed nor skipped
    ran = [line for line in result.stderr.splitlines() if line.startswith("Ran ")]
    # (49 tests in tornado 6.4, the oldest supported; more since)
    assert ran and int(ran[0].split()[1]) >= 45, result.stderr[-3000:]


def test_clear_import_error_without_tornado() -> None:
    result = run_python(
        "import sys; sys.modules['tornado'] = None\n"
        "try:\n"
        "    import fastdeflate.integrations.tornado\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert "needs tornado" in result.stdout, result.stderr


# --- compress what pays: messages sent uncompressed (RSV1 clear) -------------------------
#
# The fastdeflate side sends the mixed stream (_mixed_driver: whole messages, wider sizes);
# a stock tornado peer (tornado's own protocol and zlib objects, with a parser that keeps
# the no-context-takeover flags and a record of each data message's RSV1) receives it.
# The offer is the client's own, so window bits and context takeover can be chosen on
# both sides.



def write_item(write: Callable[..., Any], item: Item) -> Any:
    """``item``'s message through ``write`` (a ``write_message``), text or binary, inside
    uncompressed() if it is opted out."""
    with fastdeflate.uncompressed(item.opt_out):
        return write(item.message, binary=isinstance(item.message, bytes))


class StockRecording(tws.WebSocketProtocol13):
    """tornado's own protocol (stock codec objects), keeping the no-context-takeover
    flags and recording whether each data message arrived compressed (RSV1)."""

    _parse_extensions_header = parse_keeping_flags

    def _create_compressors(self, *args: Any, **kwargs: Any) -> None:
        # tornado's own classes, even while fastdeflate is enabled
        saved = tws._PerMessageDeflateCompressor, tws._PerMessageDeflateDecompressor
        tws._PerMessageDeflateCompressor = STOCK_COMPRESSOR
        tws._PerMessageDeflateDecompressor = STOCK_DECOMPRESSOR
        try:
            super()._create_compressors(*args, **kwargs)
        finally:
            tws._PerMessageDeflateCompressor, tws._PerMessageDeflateDecompressor = saved

    def _handle_message(self, opcode: int, data: bytes) -> Any:
        if opcode in (0x1, 0x2):
            self.handler.rsv1.append(self._frame_compressed)  # type: ignore[attr-defined]
        return super()._handle_message(opcode, data)


class Receiver(tornado.websocket.WebSocketHandler):
    """Stock server side: every message into ``received``, RSV1 into ``rsv1``."""

    received: list
    rsv1: list
    events: dict

    def get_compression_options(self) -> dict:
        return {}

    def get_websocket_protocol(self) -> Any:
        protocol = super().get_websocket_protocol()
        protocol.__class__ = StockRecording
        return protocol

    def open(self) -> None:
        self.events["codec"] = type(self.ws_connection._compressor)

    def on_message(self, message: str | bytes) -> None:
        self.received.append(message)

    def on_close(self) -> None:
        self.events["closed"] = True


async def wait_received(handler: type, count: int) -> None:
    """Until ``handler``'s connection received ``count`` messages or closed (5 s)."""
    for _ in range(500):
        if len(handler.received) >= count or "closed" in handler.events:
            return
        await asyncio.sleep(0.01)


class Sender(tornado.websocket.WebSocketHandler):
    """fastdeflate server side: sends ``outgoing`` (kept flags), one message per
    ``write_message``, each opted out if its text starts with "raw"."""

    outgoing: list
    events: dict

    def get_compression_options(self) -> dict:
        return {}

    def get_websocket_protocol(self) -> Any:
        protocol = ft._fast(super().get_websocket_protocol())
        protocol.__class__ = FastKeepingFlags
        return protocol

    def open(self) -> None:
        self.events["codec"] = type(self.ws_connection._compressor)
        self.events["opened"] = True


def offer(wbits: int, nct: bool) -> str:
    flags = "; server_no_context_takeover; client_no_context_takeover" if nct else ""
    return (f"permessage-deflate; server_max_window_bits={wbits}; "
            f"client_max_window_bits={wbits}{flags}")


async def connect_offering(fast: bool, url: str, extensions: str) -> Any:
    """A tornado client offering ``extensions``: fastdeflate (kept flags) or stock
    (recording: its messages' RSV1 go to ``conn.rsv1``)."""
    base = ft.FastDeflateWebSocketClientConnection if fast else tws.WebSocketClientConnection

    class Client(base):  # type: ignore[valid-type, misc]
        rsv1: list = []

        def get_websocket_protocol(self) -> Any:
            protocol = super().get_websocket_protocol()
            protocol.__class__ = FastKeepingFlags if fast else StockRecording
            return protocol

    request = tornado.httpclient.HTTPRequest(url)
    conn = Client(request, compression_options={})
    conn.rsv1 = []
    conn.handler = conn  # StockRecording records into protocol.handler.rsv1
    # tornado wrote its own offer into the request; it is sent on the next loop turn
    conn.request.headers["Sec-WebSocket-Extensions"] = extensions
    return await conn.connect_future



WINDOWS = [(15, False), (15, True), (12, False), (9, False), (9, True)]
WINDOW_IDS = ["w15", "w15-nct", "w12", "w9", "w9-nct"]


def per_message(rsv1: list[bool]) -> list[list[bool]]:
    """Each message's RSV1 (tornado records one per message) as messages_rsv1 gives them."""
    return [[bit] for bit in rsv1]


@pytest.mark.parametrize("wbits,nct", WINDOWS, ids=WINDOW_IDS)
def test_mixed_stream_fast_client_to_stock_server(
    use_impl, default_what_pays, wbits, nct
) -> None:
    """The mixed stream from a fastdeflate client to tornado's stock server."""

    def exchange(items: list[Item]) -> Exchanged:
        received: list = []
        rsv1: list = []
        events: dict = {}
        handler = type("R", (Receiver,), {"received": received, "rsv1": rsv1, "events": events})

        async def main() -> None:
            with tornado_server(handler) as port:
                conn = await connect_offering(True, f"ws://127.0.0.1:{port}/", offer(wbits, nct))
                try:
                    assert type(conn.protocol._compressor) is ft.FastDeflateCompressor
                    assert conn.protocol._compressor._persistent is not nct
                    assert conn.protocol._compressor._max_wbits == wbits
                    assert events["codec"] is STOCK_COMPRESSOR
                    for item in items:
                        await write_item(conn.write_message, item)
                    await wait_received(handler, len(items))
                finally:
                    conn.close()

        run(main())
        return Exchanged(received, per_message(rsv1))

    drive_mixed_stream(wbits * 2 + nct, exchange, whole=True, wide=True)


@pytest.mark.parametrize("wbits,nct", WINDOWS, ids=WINDOW_IDS)
def test_mixed_stream_fast_server_to_stock_client(
    use_impl, default_what_pays, wbits, nct
) -> None:
    """The mixed stream from a fastdeflate server to tornado's stock client."""

    def exchange(items: list[Item]) -> Exchanged:
        events: dict = {}
        handlers: list = []

        class Send(Sender):
            def open(self) -> None:
                super().open()
                handlers.append(self)

        Send.events = events

        async def main() -> Exchanged:
            with tornado_server(Send) as port:
                conn = await connect_offering(False, f"ws://127.0.0.1:{port}/", offer(wbits, nct))
                try:
                    await wait_for_key(events, "opened")
                    server = handlers[0].ws_connection
                    assert type(server._compressor) is ft.FastDeflateCompressor
                    assert server._compressor._persistent is not nct
                    assert server._compressor._max_wbits == wbits
                    assert type(conn.protocol._decompressor) is STOCK_DECOMPRESSOR
                    for item in items:
                        write_item(handlers[0].write_message, item)
                    received = [await asyncio.wait_for(conn.read_message(), 5) for _ in items]
                finally:
                    conn.close()
                return Exchanged(received, per_message(conn.rsv1))

        return run(main())

    drive_mixed_stream(wbits * 2 + nct + 1, exchange, whole=True, wide=True)


def test_messages_under_the_minimum_size_go_out_uncompressed(use_impl, default_what_pays):
    """set_min_size(n): shorter messages (compressible ones too) go out with RSV1 clear."""
    fastdeflate.set_min_size(200)
    texts = [("x" * n) for n in (10, 199, 200, 5000, 150, 300)]
    received: list = []
    rsv1: list = []
    handler = type("R", (Receiver,), {"received": received, "rsv1": rsv1, "events": {}})

    async def main() -> None:
        with tornado_server(handler) as port:
            conn = await ft.websocket_connect(f"ws://127.0.0.1:{port}/", compression_options={})
            try:
                for text in texts:
                    await conn.write_message(text)
                await wait_received(handler, len(texts))
            finally:
                conn.close()

    run(main())
    assert received == texts
    assert rsv1 == [len(t) >= 200 for t in texts]
    small = fastdeflate.status()["sent_uncompressed"]["small"]
    assert (small["messages"], small["bytes"]) == (3, 10 + 199 + 150)


def test_opt_out_per_task_with_concurrent_senders(use_impl, default_what_pays) -> None:
    """Two tasks write to the same connection at once, one inside
    ``fastdeflate.uncompressed()`` (awaiting inside the block): only its messages go
    out uncompressed; the other task's are compressed, and the stock peer decodes all."""
    received: list = []
    rsv1: list = []
    handler = type("R", (Receiver,), {"received": received, "rsv1": rsv1, "events": {}})
    chat = '{"user": "someone", "msg": "a compressible chat line", "n": %d} ' * 8

    async def main() -> None:
        with tornado_server(handler) as port:
            conn = await ft.websocket_connect(f"ws://127.0.0.1:{port}/", compression_options={})

            async def plain() -> None:
                with fastdeflate.uncompressed():
                    for i in range(20):
                        await conn.write_message("raw " + chat % ((i,) * 8))
                        await asyncio.sleep(0)

            async def compressed() -> None:
                for i in range(20):
                    await conn.write_message("zip " + chat % ((i,) * 8))
                    await asyncio.sleep(0)

            try:
                await asyncio.gather(plain(), compressed())
                await wait_received(handler, 40)
            finally:
                conn.close()

    run(main())
    assert sorted(received) == sorted(
        [p + chat % ((i,) * 8) for p in ("raw ", "zip ") for i in range(20)])
    assert [m[:3] for m in received] != ["raw"] * 20 + ["zip"] * 20  # interleaved
    assert [c for c in rsv1] == [m.startswith("zip") for m in received]
    assert fastdeflate.status()["sent_uncompressed"]["opt-out"]["messages"] == 20


def test_enabled_handler_skips_incompressible(use_impl, default_what_pays, enabled) -> None:
    """enable(): a plain WebSocketHandler sends a random message uncompressed, chat
    compressed, to tornado's stock client."""
    events: dict = {}
    handlers: list = []

    class Send(tornado.websocket.WebSocketHandler):
        def get_compression_options(self) -> dict:
            return {}

        def open(self) -> None:
            handlers.append(self)
            events["opened"] = True

    def exchange(items: list[Item]) -> Exchanged:
        async def main() -> Exchanged:
            with tornado_server(Send) as port:
                conn = await connect_offering(False, f"ws://127.0.0.1:{port}/",
                                              offer(15, False))
                try:
                    await wait_for_key(events, "opened")
                    handler = handlers[0]
                    assert type(handler.ws_connection) is ft.FastDeflateWebSocketProtocol13
                    assert type(handler.ws_connection._compressor) is ft.FastDeflateCompressor
                    assert type(conn.protocol._decompressor) is STOCK_DECOMPRESSOR
                    for item in items:
                        write_item(handler.write_message, item)
                    received = [await asyncio.wait_for(conn.read_message(), 5) for _ in items]
                finally:
                    conn.close()
                return Exchanged(received, per_message(conn.rsv1))

        return run(main())

    # chat, random, chat, PNG-like, chat, one that grows and its echo, an opted-out chat
    drive_mixed_stream(7, exchange, 7, whole=True, wide=True)


def test_broadcast_decides_each_message_alike_for_every_member(use_impl, default_what_pays):
    """broadcast() of the mixed stream to three stock tornado clients (fastdeflate server
    handlers, one compress-once group): every client gets every message exactly, with
    the RSV1 it had to have."""
    items = mixed_items(11, whole=True, wide=True)
    events: dict = {}
    handlers: list = []

    class Send(Sender):
        def open(self) -> None:
            handlers.append(self)

    Send.events = events

    async def main() -> None:
        with tornado_server(Send) as port:
            conns = [await connect_offering(False, f"ws://127.0.0.1:{port}/",
                                            offer(15, False)) for _ in range(3)]
            try:
                for _ in range(500):
                    if len(handlers) == 3:
                        break
                    await asyncio.sleep(0.01)
                for item in items:
                    with fastdeflate.uncompressed(item.opt_out):
                        ft.broadcast(handlers, item.message)
                for conn in conns:
                    received = [await asyncio.wait_for(conn.read_message(), 5)
                                for _ in items]
                    assert received == [item.message for item in items]
                    uncompressed_by_reason(items, per_message(conn.rsv1))  # asserts RSV1
            finally:
                for conn in conns:
                    conn.close()

    run(main())
