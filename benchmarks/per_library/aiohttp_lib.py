"""aiohttp: one message through its own WebSocket writer and reader objects, no sockets.

The sending side is a ``WebSocketWriter`` (``aiohttp._websocket.writer``) compressing with
aiohttp's settings (level 1 = ``Z_BEST_SPEED``, window 15, memLevel 8; no context
takeover means its ``Z_FULL_FLUSH`` per message) and writing the frame to an in-memory
transport; the receiving side is aiohttp's (compiled) ``WebSocketReader`` parsing that
frame, decompressing it and queueing the message, read back through its
``WebSocketDataQueue``. ``enabled=False`` uses aiohttp's own codec objects,
``enabled=True`` fastdeflate's (``fastdeflate.integrations.aiohttp``).

Measured by ``python benchmarks/run.py --parts libraries`` (stock vs enabled,
interleaved, medians).
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any, Callable

from aiohttp import compression_utils
from aiohttp._websocket.reader import WebSocketDataQueue, WebSocketReader
from aiohttp._websocket.writer import WebSocketWriter
from aiohttp.http_websocket import WSMsgType

from fastdeflate.integrations import aiohttp as fa

NAME = "aiohttp"

WINDOW_BITS = 15  # aiohttp's default (compress=True / compress=15)
MAX_MSG_SIZE = 4 * 1024 * 1024  # aiohttp's default max_msg_size


class _MemoryTransport(asyncio.Transport):
    """Collects what the writer writes."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []

    def write(self, data: Any) -> None:
        self.chunks.append(data)

    def is_closing(self) -> bool:
        return False


class _Protocol:
    """The few attributes aiohttp's writer and data queue read from a protocol."""

    _paused = False
    _reading_paused = False

    def pause_reading(self) -> None:
        self._reading_paused = True

    def resume_reading(self) -> None:
        self._reading_paused = False


def _read_now(queue: WebSocketDataQueue) -> Any:
    """``await queue.read()`` for a queue that already holds a message (no event loop)."""
    coro = queue.read()
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the reader queued no message")


def _codec_types(writer: WebSocketWriter, reader: WebSocketReader) -> set[type]:
    return {type(writer._compressobj)} | {
        type(o) for o in gc.get_referents(reader) if "ompressor" in type(o).__name__
    }


def make_zlib_ng_roundtrip(no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """Stock aiohttp on its own zlib-ng backend: ``aiohttp.set_zlib_backend(zlib_ng)``
    while the codec objects are made (then the stdlib backend again)."""
    import aiohttp
    import zlib

    from zlib_ng import zlib_ng

    aiohttp.set_zlib_backend(zlib_ng)
    try:
        roundtrip = make_roundtrip(False, no_context_takeover, zlib_ng)
    finally:
        aiohttp.set_zlib_backend(zlib)
    return roundtrip


def _zlib_ng_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("zlib_ng") is not None


#: Other ways to run this library, measured beside stock and enabled (library_table):
#: aiohttp's own answer to slow zlib, the zlib-ng backend (both run zlib-ng at level 1).
ALTERNATIVES = {"zlib-ng backend": make_zlib_ng_roundtrip} if _zlib_ng_installed() else {}


def make_roundtrip(
    enabled: bool, no_context_takeover: bool = False, backend: Any = None
) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: aiohttp's writer compresses, its reader decompresses
    (``backend``: the zlib module aiohttp's stock objects are expected to run on)."""
    protocol = _Protocol()
    transport = _MemoryTransport()
    writer = WebSocketWriter(
        protocol, transport, compress=WINDOW_BITS, notakeover=no_context_takeover  # type: ignore[arg-type]
    )
    queue = WebSocketDataQueue(protocol, 2**16, loop=None)  # type: ignore[arg-type]
    reader = WebSocketReader(queue, MAX_MSG_SIZE, compress=True, decode_text=False)
    send = writer._send_compressed_frame_sync  # what send_frame runs for messages <= 16 KiB
    chunks, binary = transport.chunks, WSMsgType.BINARY

    def roundtrip(message: bytes) -> bytes:
        send(message, binary, None)
        frame = b"".join(chunks)
        chunks.clear()
        reader.feed_data(frame)
        return _read_now(queue).data

    # aiohttp creates its codec objects at the first compressed message: create them now,
    # with fastdeflate's enabled or not as asked, then leave the global switch as it was.
    was_enabled = fa.is_enabled()
    fa.enable() if enabled else fa.disable()
    try:
        assert roundtrip(b"") == b""
    finally:
        fa.enable() if was_enabled else fa.disable()
    if enabled:
        expected = {fa.WebSocketCompressor, fa.WebSocketDecompressor}
    else:
        expected = {compression_utils.ZLibCompressor, compression_utils.ZLibDecompressor}
    assert _codec_types(writer, reader) == expected, _codec_types(writer, reader)
    if backend is not None:  # the stock objects' zlib objects come from that module
        made = type(writer._compressobj._compressor)
        assert made is type(backend.compressobj()), made
    return roundtrip
