"""fastdeflate for aiohttp's WebSocket client and server (permessage-deflate).

One line, anywhere before connections are opened::

    import fastdeflate.integrations.aiohttp; fastdeflate.integrations.aiohttp.enable()

Supports aiohttp >= 3.12; tested with aiohttp 3.12.0, 3.12.15, 3.13.2 and 3.14.5
(CPython 3.11, system zlib 1.2.13). aiohttp 3.11 uses a different decompressor interface
and is refused with ImportError.

How it hooks in. aiohttp has no per-connection extension object for permessage-deflate;
its WebSocket writer (``aiohttp._websocket.writer``) builds its compressor by calling the
module-level name ``ZLibCompressor`` (once per connection, plus once per message sent with
an explicit ``compress=`` argument) and its reader (``aiohttp._websocket.reader_c``, or the
pure-Python ``reader_py``) builds its decompressor by calling ``ZLibDecompressor`` (once per
connection, at the first compressed message). `enable()` rebinds exactly those three
names to `WebSocketCompressor` and `WebSocketDecompressor`, drop-ins that
keep aiohttp's interface (including the executor for payloads over
``WEBSOCKET_MAX_SYNC_CHUNK_SIZE``: fastdeflate's worker threads where aiohttp would take
the loop's default one) and delegate the codec to ``fastdeflate``;
`disable()` puts the original objects back where fastdeflate's are still in place
(never over a wrapper installed after `enable()`). aiohttp's negotiation, frame
handling, size limit and close codes are untouched (except the close for too many
deflate streams, see `WebSocketDecompressor`), and so is HTTP body compression
(which binds the same classes under other names). ``aiohttp.set_zlib_backend`` is not
used: it is global to all of aiohttp (HTTP bodies included) and would need a full
emulation of zlib objects.

Compress what pays (which messages go out uncompressed, and why: ``fastdeflate._what_pays``).
Where aiohttp's writer has a method per compressed-send path
(``_send_compressed_frame_sync`` and ``_send_compressed_frame_async_locked``, aiohttp >=
3.13.2), `enable()` replaces those two as well: a message that
`fastdeflate.Compressor.compress_or_skip()` declines is written as it is, RSV1 clear;
messages over the executor threshold are decided in the executor in a copy of the
sender's context, so the opt-out holds there too.
Whether a message is compressed at all, and with which compressor (``send_str(...,
compress=N)``: a fresh one of window N for that message; None, 0 or False: the
connection's), stays aiohttp's choice. On older aiohttp every message is compressed as
before.

A connection keeps the codec objects it created: enabling or disabling while connections
are open affects new connections (and new per-message compressors) only.

Large messages received (issue 43). aiohttp's reader decompresses inside the protocol's
``data_received()``, on the event loop. Where the off-loop size is not 0
(``fastdeflate.set_off_loop_size()``), `enable()` also rebinds ``WebSocketReader`` in
``aiohttp.web_ws`` and ``aiohttp.client`` so that a compressed connection's reader sits
behind a gate: a message whose compressed first frame is at least a quarter of that
size, and everything after it, waits there while a worker thread decompresses it with
the connection's codec; the reader then parses it as usual and its decompressor hands
over the result. Limits, close codes and order stay the reader's.

One message to many connections: `broadcast()` (aiohttp has none of its own).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import threading
import traceback
import warnings
import zlib  # flush modes: the same values in every zlib-compatible backend
from collections.abc import Coroutine, Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

import fastdeflate
from fastdeflate import _off_loop
from fastdeflate._forksafe import free_in_child
from fastdeflate._params import TOO_MANY_STREAMS_MESSAGE
from fastdeflate.integrations import _frames, _marks, _open, _outbox
from fastdeflate.integrations._fanout import Failures, Message, encode, logger

__all__ = ["WebSocketCompressor", "WebSocketDecompressor", "broadcast", "enable", "disable",
           "is_enabled"]

try:
    import aiohttp as _aiohttp
except ImportError as _exc:  # pragma: no cover - aiohttp is installed in CI
    raise ImportError(
        "fastdeflate.integrations.aiohttp needs aiohttp, which is not installed "
        "(pip install 'aiohttp>=3.12')"
    ) from _exc

#: Oldest aiohttp whose WebSocket writer/reader use the codec interface relied on here.
MIN_AIOHTTP = (3, 12)
_AIOHTTP_VERSION = tuple(int(p) for p in _aiohttp.__version__.split(".")[:2] if p.isdigit())
if _AIOHTTP_VERSION < MIN_AIOHTTP:
    raise ImportError(
        f"fastdeflate.integrations.aiohttp needs aiohttp >= 3.12, found {_aiohttp.__version__}"
    )

from aiohttp import ClientWebSocketResponse, WSMsgType  # noqa: E402
from aiohttp import compression_utils as _compression_utils  # noqa: E402
from aiohttp._websocket import writer as _writer  # noqa: E402
from aiohttp._websocket.helpers import websocket_mask as _websocket_mask  # noqa: E402
from aiohttp._websocket.models import WebSocketError, WSCloseCode  # noqa: E402

if TYPE_CHECKING:  # not at run time: a client-only application never loads aiohttp.web
    from aiohttp import web

_SYNC_FLUSH = zlib.Z_SYNC_FLUSH
_FULL_FLUSH = zlib.Z_FULL_FLUSH
_TOO_MANY_STREAMS = "Compressed message has too many deflate members"  # aiohttp's own text
_MAX_SYNC_CHUNK_SIZE = _compression_utils.MAX_SYNC_CHUNK_SIZE
_READER_MODULES = ("aiohttp._websocket.reader_c", "aiohttp._websocket.reader_py")


_until_done = _outbox.until_done


def _in_executor(executor: Any, job: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
    """``job(*args)`` in ``executor`` if the compressor was given one, else in
    fastdeflate's worker threads (nicer than the event loop on Linux), where aiohttp
    would take the loop's default executor."""
    loop = asyncio.get_running_loop()
    if executor is None:
        return _off_loop.run(loop, job, *args)
    return loop.run_in_executor(executor, job, *args)


@_marks.mark(replaces=_compression_utils.ZLibCompressor)  # (this class itself: enable())
class WebSocketCompressor:
    """aiohttp's ``ZLibCompressor`` as its WebSocket writer uses it, over fastdeflate.

    Raw deflate only (negative ``wbits``). The writer calls ``compress_sync(message)`` or
    ``await compress(message)`` then ``flush(Z_SYNC_FLUSH or Z_FULL_FLUSH)`` and strips
    the trailing ``00 00 ff ff`` if there is one: `flush()` leaves it out.
    ``Z_FULL_FLUSH`` (aiohttp's no-context-takeover) also forgets the window, which
    gives the same bytes as a fresh zlib stream.

    Concurrent sends: aiohttp < 3.13.2 has no send lock in its writer and relies on the
    one in the stock ``compress()``, so this class has it too. While one message is
    compressed in the executor, another task's ``compress()`` waits on an ``asyncio.Lock``
    (never on the codec's own lock, which would block the event loop), and the first
    message is flushed and written before that task goes on.
    """

    def __init__(
        self,
        encoding: Optional[str] = None,
        suppress_deflate_header: bool = False,
        level: Optional[int] = None,
        wbits: Optional[int] = None,
        strategy: Optional[int] = None,
        executor: Any = None,
        max_sync_chunk_size: Optional[int] = _MAX_SYNC_CHUNK_SIZE,
    ) -> None:
        if encoding is not None or wbits is None or wbits >= 0:
            raise ValueError("WebSocketCompressor does raw deflate only (negative wbits)")
        self._executor = executor
        self._max_sync_chunk_size = max_sync_chunk_size
        self._codec = fastdeflate.Compressor(
            level=-1 if level is None else level,
            window_bits=-wbits,
            strategy=0 if strategy is None else strategy,
        )
        self._compress = self._codec.compress  # bound once: this is the per-message path
        self._lock = asyncio.Lock()
        self._pending: Optional[bytes] = None  # a message's bytes, compressed by flush()
        _open.track("aiohttp compressor", self)  # status(): connections on fastdeflate

    def compress_sync(self, data: Any) -> bytes:
        """Feed ``data`` to the compressor (output may be held until `flush()`).

        ``bytes`` (immutable) are kept and compressed by `flush()` in the same codec
        call as the sync flush: one call per message instead of two, same bytes.
        """
        if type(data) is bytes and self._pending is None:
            self._pending = data
            return b""
        return self._feed(data)

    def _feed(self, data: Any) -> bytes:
        """Compress any kept bytes, then ``data``, now (output may be held until flush)."""
        pending, self._pending = self._pending, None
        out = b"" if pending is None else self._compress(pending, False, flush=False)
        return out + self._compress(data, False, flush=False)

    async def compress(self, data: Any) -> bytes:
        """Like `compress_sync()`, in the executor when ``data`` is large.

        One call at a time (an ``asyncio.Lock``, as in aiohttp's own class). If the
        caller is cancelled while ``data`` is compressed in the executor, the lock is
        held until the executor is done and the compressor then starts a new stream, so
        that ``data`` is never sent inside the next message.
        """
        async with self._lock:
            if (
                self._max_sync_chunk_size is None
                or len(data) <= self._max_sync_chunk_size
            ):
                return self.compress_sync(data)
            job = _in_executor(self._executor, self._feed, data)
            try:
                out = await asyncio.shield(job)
            except asyncio.CancelledError:
                await _until_done(job)
                self._codec.reset()  # drop data's pending output and the window
                raise
            _off_loop.counted(compressed=1)
            return out

    def message_sync(self, message: Any, mode: int) -> Optional[bytes]:
        """One whole message's payload (``00 00 ff ff`` left out), ended with ``mode``
        (``Z_SYNC_FLUSH``, or ``Z_FULL_FLUSH``: no context takeover), or None: send
        ``message`` as it is, uncompressed (RSV1 clear), the compressor untouched.
        `fastdeflate.Compressor.compress_or_skip()` decides (the opt-out, the minimum
        size, incompressible data)."""
        if mode != _SYNC_FLUSH and mode != _FULL_FLUSH:
            raise ValueError("WebSocketCompressor supports Z_SYNC_FLUSH and Z_FULL_FLUSH only")
        if self._pending is not None:  # a message begun with compress_sync(): ends as one
            return self.flush(mode)
        payload = self._codec.compress_or_skip(message)
        if payload is not None and mode == _FULL_FLUSH:
            self._codec.reset()
        return payload

    async def message(self, message: Any, mode: int) -> Optional[bytes]:
        """Like `message_sync()`, in the executor when ``message`` is large, under the
        same lock and cancellation rules as `compress()`. The executor runs it in a
        copy of the caller's context, so that ``fastdeflate.uncompressed()`` applies."""
        async with self._lock:
            if (
                self._max_sync_chunk_size is None
                or len(message) <= self._max_sync_chunk_size
            ):
                return self.message_sync(message, mode)
            job = _in_executor(self._executor, contextvars.copy_context().run,
                               self.message_sync, message, mode)
            try:
                payload = await asyncio.shield(job)
            except asyncio.CancelledError:
                await _until_done(job)
                self._codec.reset()  # the peer never gets this message: a new stream
                raise
            _off_loop.counted(compressed=1)
            return payload

    def flush(self, mode: Optional[int] = None) -> bytes:
        """End the message with a sync flush and return the rest of its payload.

        The ``00 00 ff ff`` that ends a sync flush is left out: aiohttp's writer
        removes it (``removesuffix``), which then leaves the bytes as they are, and the
        payload is not copied twice to add it and take it off again.
        """
        if mode != _SYNC_FLUSH and mode != _FULL_FLUSH:
            raise ValueError("WebSocketCompressor supports Z_SYNC_FLUSH and Z_FULL_FLUSH only")
        data, self._pending = self._pending, None
        # Ended as a whole message (fin=True), the same bytes sent to one connection after
        # another (one object, or a str encoded for each) are compressed once per group.
        out = self._compress(b"" if data is None else data)
        if mode == _FULL_FLUSH:
            self._codec.reset()
        return out


@_marks.mark(replaces=_compression_utils.ZLibDecompressor)  # (this class itself: enable())
class WebSocketDecompressor:
    """aiohttp's ``ZLibDecompressor`` as its WebSocket reader uses it, over fastdeflate.

    The reader calls ``decompress_sync(payload + 00 00 ff ff, max_msg_size + 1)`` once per
    message (0 means no limit). Errors come out as they do from the stock object and
    reader: a message over the limit raises aiohttp's ``WebSocketError`` with code 1009 and
    the reader's own text; corrupt data raises the zlib backend's ``error``. A message of
    more deflate streams (blocks with BFINAL set) than the codec accepts raises the
    ``WebSocketError`` (1009) that aiohttp >= 3.14.4 raises past its own, higher, limit.
    """

    def __init__(
        self,
        encoding: Optional[str] = None,
        suppress_deflate_header: bool = False,
        executor: Any = None,
        max_sync_chunk_size: Optional[int] = _MAX_SYNC_CHUNK_SIZE,
    ) -> None:
        if encoding is not None or not suppress_deflate_header:
            raise ValueError("WebSocketDecompressor does raw deflate only")
        self._executor = executor
        self._max_sync_chunk_size = max_sync_chunk_size
        # built by a reader behind a gate (while the gate feeds it): the gate's codec
        self._gated: Optional[_GatedReader] = getattr(_feeding, "gate", None)
        if self._gated is not None:
            self._codec = self._gated.adopted()
        else:
            self._codec = _new_codec()
        self._decompress = self._codec.decompress  # bound once: the per-message path
        _open.track("aiohttp decompressor", self)  # status(): connections on fastdeflate

    def decompress_sync(self, data: Any, max_length: int = 0) -> bytes:
        """Decompress one message's payload, given with ``00 00 ff ff`` appended
        (``ValueError`` without), read in place."""
        gated = self._gated
        if gated is not None and gated.ready is not None:
            return gated.take(data)  # decompressed off the loop already
        return _decompress(self._decompress, data, max_length)

    async def decompress(self, data: Any, max_length: int = 0) -> bytes:
        """Like `decompress_sync()`, in the executor when ``data`` is large."""
        if self._max_sync_chunk_size is not None and len(data) > self._max_sync_chunk_size:
            out = await _in_executor(self._executor, self.decompress_sync, data, max_length)
            _off_loop.counted(decompressed=1)
            return out
        return self.decompress_sync(data, max_length)


def _new_codec() -> fastdeflate.Decompressor:
    return fastdeflate.Decompressor(window_bits=_compression_utils.ZLibBackend.MAX_WBITS)


def _decompress(decompress: Any, data: Any, max_length: int, has_tail: bool = True) -> bytes:
    """``decompress`` (a codec's) on one message's payload (and tail: ``has_tail``; else
    the codec adds it), with aiohttp's
    errors: 1009 over ``max_length - 1`` bytes or too many deflate streams, the zlib
    backend's ``error`` if corrupt."""
    try:
        return decompress(data, True, max_length or None, has_tail=has_tail)
    except fastdeflate.MessageTooBig:
        raise WebSocketError(
            WSCloseCode.MESSAGE_TOO_BIG,
            f"Decompressed message exceeds size limit {max_length - 1}",
        ) from None
    except fastdeflate.DecompressionError as exc:
        if str(exc) == TOO_MANY_STREAMS_MESSAGE:
            raise WebSocketError(WSCloseCode.MESSAGE_TOO_BIG, _TOO_MANY_STREAMS) from None
        raise _compression_utils.ZLibBackend.error(str(exc)) from None


# --- the reader: large compressed messages decompressed off the loop ------------------
#
# aiohttp's reader decompresses inside ``feed_data()``, which its protocol calls from
# ``data_received()``: nowhere to wait. enable() puts a gate in front of every reader
# aiohttp builds for a compressed connection (the name ``WebSocketReader`` in
# ``aiohttp.web_ws`` and ``aiohttp.client``): a large compressed message and the bytes
# after it wait there while a worker thread decompresses it with the connection's codec;
# the reader then parses it as usual, and its decompressor hands over the result.
# Frames, limits, close codes and the order of everything stay the reader's.

_feeding = threading.local()  # .gate: the gate feeding its reader on this thread
_DEFLATE_TAIL = b"\x00\x00\xff\xff"  # (the reader adds it: counted in its length)
_PASSED = (False, b"")  # what the reader returns for bytes it took (held, here)


class _GatedReader:
    """aiohttp's ``WebSocketReader`` behind a `_frames.Gate`; it owns the connection's
    decompression codec, which the reader's `WebSocketDecompressor` adopts."""

    def __init__(self, reader: Any, queue: Any, max_msg_size: int) -> None:
        self.reader = reader
        self._queue = queue
        self._max_length = max_msg_size + 1 if max_msg_size else 0
        self._codec: Optional[fastdeflate.Decompressor] = None
        self._adopted = False  # the reader's decompressor uses self._codec
        self._paused = False  # this gate paused the transport
        #: (payload length, what decompressing it gave) for the reader's decompressor
        self.ready: Optional[tuple[int, Any]] = None
        self._gate = _frames.Gate(self._forward, self._start, self._done,
                                  limit=max_msg_size, passed=_PASSED)
        self.feed_data = self._gate.feed  # (bound once: aiohttp's per-read call)

    def feed_eof(self) -> None:
        self._gate.feed_eof(self.reader.feed_eof)

    def __getattr__(self, name: str) -> Any:  # anything else aiohttp may ask the reader
        return getattr(self.reader, name)

    def _forward(self, data: bytes) -> Any:
        if self._adopted:
            return self.reader.feed_data(data)
        _feeding.gate = self
        try:
            return self.reader.feed_data(data)
        finally:
            _feeding.gate = None

    def adopted(self) -> fastdeflate.Decompressor:
        """The codec, for the reader's decompressor being built now."""
        if self._codec is None:
            self._codec = _new_codec()
        self._adopted = True
        self._gate.forward = self.reader.feed_data  # nothing more to do on the way
        return self._codec

    def take(self, data: Any) -> bytes:
        """The ready result of the message the reader now passes to its decompressor."""
        ready, self.ready = self.ready, None
        assert ready is not None
        size, outcome = ready
        if size != len(data):  # not the message decompressed: never expected
            raise RuntimeError("fastdeflate: aiohttp reader out of step with its gate")
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _start(self, frames: list[tuple[memoryview, Optional[bytes]]]) -> Any:
        """Decompress the held message in a worker thread; None: on the loop instead."""
        if not self._adopted and (self._codec is not None or self._gate.compressed):
            return None  # the reader built its decompressor elsewhere: not ours to use
        if getattr(self._queue, "_stalled_reader", None) is not None:
            return None  # the reader has bytes it has not parsed yet (aiohttp >= 3.14)
        if self._codec is None:
            self._codec = _new_codec()  # the reader's first compressed message
        protocol = self._queue._protocol
        if not protocol._reading_paused:  # hold no more than what is already here
            protocol.pause_reading()
            self._paused = True
        return _off_loop.run(asyncio.get_running_loop(), _inflate, self._codec.decompress, frames,
                             self._max_length)

    def _done(self, job: "asyncio.Future[Any]") -> None:
        if job.cancelled():
            self.ready = (-1, asyncio.CancelledError())
        else:
            self.ready = job.result()
            _off_loop.counted(decompressed=1)
        if self._paused:
            self._paused = False
            protocol = self._queue._protocol
            if protocol._reading_paused:
                protocol.resume_reading()


def _unmasked(data: memoryview, mask: Optional[bytes]) -> Any:
    if mask is None:
        return data
    out = bytearray(data)
    _websocket_mask(mask, out)
    return out


def _inflate(decompress: Any, frames: list[tuple[memoryview, Optional[bytes]]],
             max_length: int) -> tuple[int, Any]:
    """In a worker thread: one message's frames unmasked, joined and decompressed (the
    codec adds the tail), as (payload length with the tail the reader adds, the message
    or what decompressing it raised)."""
    payload = _frames.joined(frames, _unmasked)
    size = len(payload) + len(_DEFLATE_TAIL)
    try:
        return size, _decompress(decompress, payload, max_length, False)
    except Exception as exc:  # raised by the reader's decompressor, on the loop
        return size, exc


def _gated_reader(stock: Any) -> Any:
    """A replacement for ``WebSocketReader`` that puts a gate in front of the readers
    of compressed connections while the off-loop size is not 0."""

    def WebSocketReader(queue: Any, max_msg_size: int, *args: Any, **kwargs: Any) -> Any:
        reader = stock(queue, max_msg_size, *args, **kwargs)
        compress = kwargs.get("compress", args[0] if args else True)
        if not compress or not _off_loop.off_loop_size():
            return reader
        return _GatedReader(reader, queue, max_msg_size)

    return WebSocketReader


#: The readers' gates, put in place by enable() (when aiohttp.web_ws is imported, for
#: a client-only application never imports aiohttp.web).
_READERS = (
    _outbox.LatePatch("aiohttp.web_ws:", "WebSocketReader", _gated_reader),
    _outbox.LatePatch("aiohttp.client:", "WebSocketReader", _gated_reader),
)


# --- the writer: RSV1 clear for a message sent uncompressed ---------------------------
#
# aiohttp's writer sets RSV1 on every message it passes through its compressor. Where it
# has a method per path (``_send_compressed_frame_sync`` for small messages,
# ``_send_compressed_frame_async_locked`` for those compressed in the executor; aiohttp
# >= 3.13.2), enable() replaces both: with fastdeflate's compressor, a message that
# ``compress_or_skip`` returns None for is written as it is, RSV1 clear; any other
# compressor (a connection opened before enable()) takes aiohttp's own method. Which
# compressor (the connection's, or the level ``send_*(compress=...)`` asks for) and
# whether to compress at all (``compress=0``) stay aiohttp's choice.

_SYNC_SEND = "_send_compressed_frame_sync"
_ASYNC_SEND = "_send_compressed_frame_async_locked"
_WRITER_CLASS = _writer.WebSocketWriter


def _stock_method(name: str) -> Any:
    """aiohttp's own writer method ``name`` (None if this aiohttp has none)."""
    # (a copy of this module's, enabled there, names the stock one it replaced)
    return _marks.stock(_WRITER_CLASS.__dict__.get(name))


_STOCK_SEND = {name: _stock_method(name) for name in (_SYNC_SEND, _ASYNC_SEND)}


def _mode(writer: Any) -> int:
    return _FULL_FLUSH if writer.notakeover else _SYNC_FLUSH


def _send_compressed_frame_sync(
    self: Any, message: bytes, opcode: int, compress: Optional[int]
) -> None:
    compressobj = self._get_compressor(compress)
    if not isinstance(compressobj, WebSocketCompressor):
        return _STOCK_SEND[_SYNC_SEND](self, message, opcode, compress)
    payload = compressobj.message_sync(message, _mode(self))
    if payload is None:
        self._write_websocket_frame(message, opcode, 0)
    else:
        self._write_websocket_frame(payload, opcode, 0x40)  # RSV1: compressed
    return None


async def _send_compressed_frame_async_locked(
    self: Any, message: bytes, opcode: int, compress: Optional[int]
) -> None:
    compressobj = self._get_compressor(compress)  # no await: as if under the lock
    if not isinstance(compressobj, WebSocketCompressor):
        return await _STOCK_SEND[_ASYNC_SEND](self, message, opcode, compress)
    async with self._send_lock:
        payload = await compressobj.message(message, _mode(self))
        if payload is None:
            self._write_websocket_frame(message, opcode, 0)
        else:
            self._write_websocket_frame(payload, opcode, 0x40)  # RSV1: compressed
    return None


_marks.mark(_send_compressed_frame_sync, replaces=_STOCK_SEND[_SYNC_SEND])
_marks.mark(_send_compressed_frame_async_locked, replaces=_STOCK_SEND[_ASYNC_SEND])


#: Sends a broadcast left running (waiting for a slow client to drain, or behind that
#: connection's own send): kept referenced until they end.
_unfinished: set["asyncio.Task[None]"] = set()


def _failure(task: "asyncio.Task[None]") -> Optional[BaseException]:
    """What a finished send raised, if anything but the connection being closed."""
    error = None if task.cancelled() else task.exception()
    return None if isinstance(error, ConnectionResetError) else error


def _finished_late(task: "asyncio.Task[None]") -> None:
    _unfinished.discard(task)
    error = _failure(task)
    if error is not None:
        logger.warning("broadcast: failed to write message: %s",
                       traceback.format_exception_only(error)[0].strip())


async def broadcast(
    websockets: Iterable[Union[web.WebSocketResponse, ClientWebSocketResponse]],
    message: Message,
    *,
    raise_exceptions: bool = False,
    text: Optional[bool] = None,
) -> None:
    """Send ``message`` to every open connection, compressed once per group.

    A ``str`` is encoded once and sent as text, bytes-like as binary (``text`` forces
    one or the other): every connection gets the same ``bytes`` object through its own
    ``send_frame()``, so aiohttp frames it, locks and flow-controls as usual (each send
    runs up to its first wait in place; only one that waits gets a task). Closed and
    closing connections are skipped. Returns once each connection has written its frame
    or queued it behind that connection's own unfinished send (so what is sent after
    comes after); it never waits for a slow client to drain, nor for a message over
    aiohttp's 16 KiB sync limit compressed in the executor (such messages are compressed
    per connection). A send that fails by then skips its connection with a warning on
    the ``fastdeflate`` logger or, with ``raise_exceptions=True`` (Python 3.11+), is
    raised in an ``ExceptionGroup`` once every connection was sent the message; one that
    fails later is logged.
    """
    data, is_text = encode(message, text)
    opcode = WSMsgType.TEXT if is_text else WSMsgType.BINARY
    failures = Failures(raise_exceptions)
    for ws in websockets:
        if ws.closed:
            continue
        # each send runs up to its first wait now, in order, as a task's first step
        # would (most never wait: no task for them); a task finishes the others
        send = ws.send_frame(data, opcode)
        try:
            waiting = send.send(None)
        except StopIteration:
            continue
        except Exception as error:
            if not isinstance(error, ConnectionResetError):
                failures.add("failed to write message", error)
            continue
        rest = asyncio.ensure_future(_finish(send, waiting))
        _unfinished.add(rest)
        rest.add_done_callback(_finished_late)
    await asyncio.sleep(0)  # the loop runs once per broadcast, as it did with a task each
    failures.done()


async def _finish(send: Coroutine[Any, Any, None], waiting: Any) -> None:
    """The rest of ``send``, whose step so far yielded ``waiting`` (a future, or None
    for a bare yield), stepped as its own task would: it reads the future's outcome
    itself, and a cancellation between two steps is thrown into it."""
    while True:
        try:
            if waiting is None:
                await asyncio.sleep(0)
            else:
                waiting._asyncio_future_blocking = False  # taken, as a task takes it
                await waiting
        except asyncio.CancelledError as cancel:
            if waiting is None or not waiting.cancelled():  # this task was cancelled
                try:
                    waiting = send.throw(cancel)
                except StopIteration:
                    return
                continue
        except BaseException:  # noqa: S110 (the future's outcome: send reads it)
            pass
        try:
            waiting = send.send(None)
        except StopIteration:
            return


_lock = free_in_child(threading.Lock())
#: (module, name) -> what that name held before enable() put fastdeflate's class there.
_originals: dict[tuple[ModuleType, str], object] = {}


def _points() -> list[tuple[Any, str, Any]]:
    """(module or class, name, fastdeflate's object) for each name `enable()` rebinds:
    the codec classes, then the writer's methods where aiohttp has them."""
    points: list[tuple[Any, str, Any]] = [
        (_writer, "ZLibCompressor", WebSocketCompressor)
    ]
    for name in _READER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # reader_c is absent on pure-Python installs
            continue
        points.append((module, "ZLibDecompressor", WebSocketDecompressor))
    if all(_STOCK_SEND.values()):  # else every message is compressed, RSV1 set
        points.append((_WRITER_CLASS, _SYNC_SEND, _send_compressed_frame_sync))
        points.append((_WRITER_CLASS, _ASYNC_SEND, _send_compressed_frame_async_locked))
    return points


def _hook_points() -> list[tuple[Any, str, Any]]:
    """The names aiohttp calls to build its WebSocket codec objects and send with them."""
    points = _points()
    for module, name, _ in points:
        if not hasattr(module, name):
            raise RuntimeError(
                f"unsupported aiohttp version: {module.__name__}.{name} not found "
                "(fastdeflate.integrations.aiohttp was tested with aiohttp 3.12 to 3.14)"
            )
    return points


def enable() -> None:
    """Make aiohttp's WebSocket client and server use fastdeflate.

    Idempotent and thread-safe: a name where fastdeflate's class already is, or where
    something replaced it after an earlier `enable()`, is left as it is. Connections
    already open keep the codec objects they have (aiohttp's own).
    """
    with _lock:
        for module, name, ours in _hook_points():
            current = getattr(module, name)
            if (module, name) in _originals and current is not _originals[(module, name)]:
                continue  # fastdeflate's class, or what replaced it since
            # (another copy of this module's, re-imported while enabled: what it replaced)
            _originals[(module, name)] = _marks.stock(current)
            setattr(module, name, ours)
        for patch in _READERS:
            patch.apply()


def disable() -> None:
    """Put back the objects `enable()` replaced, where fastdeflate's are still in place.

    Idempotent and thread-safe. Where something replaced fastdeflate's class after
    `enable()` (a wrapper, say), it is left there with a RuntimeWarning, and a later
    `disable()` restores aiohttp's own once fastdeflate's class is back in its place.
    New connections only: connections opened while enabled keep fastdeflate's codec until they close
    (``fastdeflate.status()["libraries"]["aiohttp"]["connections"]`` counts them).
    """
    with _lock:
        for module, name, ours in _hook_points():
            if (module, name) not in _originals:
                continue
            current = getattr(module, name)
            if current is ours or current is _originals[(module, name)]:
                setattr(module, name, _originals.pop((module, name)))
            else:
                warnings.warn(
                    f"fastdeflate: {module.__name__}.{name} was replaced after "
                    "fastdeflate.integrations.aiohttp.enable(); left as it is",
                    RuntimeWarning,
                    stacklevel=2,
                )
        for patch in _READERS:
            patch.remove()


def is_enabled() -> bool:
    """True while fastdeflate's class is in place of one of aiohttp's codec classes."""
    with _lock:
        return any(getattr(module, name, None) is ours for module, name, ours in _points())
