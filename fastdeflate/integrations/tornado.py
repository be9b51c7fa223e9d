"""fastdeflate for tornado's WebSocket permessage-deflate.

One line, before or after tornado is imported::

    import fastdeflate.integrations.tornado; fastdeflate.integrations.tornado.enable()

Every ``WebSocketHandler`` whose ``get_compression_options()`` returns a dict, and every
``tornado.websocket.websocket_connect(..., compression_options={...})``, then compresses
and decompresses with fastdeflate. `disable()` restores the stock classes exactly.

Per connection, without patching anything:

- server: ``class Echo(FastDeflateHandlerMixin, tornado.websocket.WebSocketHandler)``;
- client: `websocket_connect()` here, same arguments as tornado's (keyword-only,
  without the deprecated ``callback``).

tornado decides everything else as before: negotiation (``_accept_connection``,
``_process_server_headers``, ``_get_compressor_options``), ``compression_level`` and
``mem_level`` from the compression options, ``max_message_size`` (close 1009) and what
happens on corrupt data (``zlib.error`` escapes from the frame loop, as with stock).
The hook points are tornado's two module-level classes ``_PerMessageDeflateCompressor``
and ``_PerMessageDeflateDecompressor``, which ``WebSocketProtocol13._create_compressors``
instantiates per connection, and the class ``WebSocketProtocol13`` itself, which
``WebSocketHandler`` and ``WebSocketClientConnection`` instantiate by that name: the
classes here take the same constructor arguments and raise the same exceptions.
Compressed payloads are byte-identical to stock on the same zlib. tornado never sends
fragmented messages; fragmented ones it receives are joined by tornado before
decompression, as before.

Compress what pays (which messages go out uncompressed, and why: ``fastdeflate._what_pays``):
each message goes through ``Compressor.compress_or_skip``, and one it declines goes out
uncompressed (RSV1 clear). tornado's ``write_message`` sets RSV1 after calling the
compressor; ``FastDeflateWebSocketProtocol13`` clears it in ``_write_frame`` for the very
payload the compressor passed back untouched.
Per message, in the coroutine (or callback) that sends::

    with fastdeflate.uncompressed():
        handler.write_message(blob, binary=True)   # or conn.write_message(...)

``write_message`` compresses before it returns (the future only tracks the write), so
the block needs no ``await`` inside (a message held behind a large one is compressed
later, in the context it was written in); the opt-out is a context variable: other tasks
sending at the same time are not affected. A protocol class of the application's own,
derived from tornado's ``WebSocketProtocol13`` rather than from
``FastDeflateWebSocketProtocol13``, compresses every message as before.

Note on tornado 6.6.1 itself (unchanged here, stock and fastdeflate behave alike): its
header parser ``httputil._parse_header`` drops parameters without a value, so tornado
ignores ``server_no_context_takeover`` / ``client_no_context_takeover`` both in offers
(as server) and in responses (as client); it honours the window-bits parameters.

Large messages: ``FastDeflateWebSocketProtocol13.write_message`` compresses a message of
at least ``fastdeflate.set_off_loop_size()`` bytes in a worker thread; meanwhile the
connection's later messages, pings, pongs and close wait behind it and are written in
order. Its future resolves once the message is written, or fails with
``WebSocketClosedError`` if the connection closed meanwhile; cancelled while the message
is compressed, the message is never sent.

One message to many connections: `broadcast()` (tornado has none of its own).

Tested with tornado 6.6.1 (Python 3.11; peers: tornado 6.6.1, websockets 17.4) and 6.4,
the oldest it supports (.ci/steps/15-oldest-libraries.sh); needs tornado >= 6.4: an
older one is refused (ImportError; `fastdeflate.enable()` leaves it stock with a
RuntimeWarning).
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import threading
import zlib
from typing import Any, Awaitable, Callable, Iterable, Optional, Union

import fastdeflate
from fastdeflate import _off_loop
from fastdeflate._forksafe import free_in_child
from fastdeflate.integrations import _marks, _open, _outbox
from fastdeflate.integrations._fanout import Failures, Message, encode

try:
    import tornado.escape
    import tornado.web
    import tornado.websocket as _ws
    from tornado import httpclient, httputil
    from tornado.iostream import StreamClosedError
except ImportError as exc:  # pragma: no cover - tornado is installed in CI
    raise ImportError(
        "fastdeflate.integrations.tornado needs tornado (pip install tornado)"
    ) from exc

from fastdeflate.integrations import _require  # noqa: E402

#: The oldest tornado this adapter is tested with (.ci/steps/15-oldest-libraries.sh);
#: an older one is refused (ImportError: `fastdeflate.enable()` leaves it stock).
MIN_TORNADO = "6.4"
_require("tornado", tornado.version, MIN_TORNADO)

__all__ = [
    "FastDeflateCompressor",
    "FastDeflateDecompressor",
    "FastDeflateWebSocketProtocol13",
    "FastDeflateHandlerMixin",
    "FastDeflateWebSocketClientConnection",
    "websocket_connect",
    "broadcast",
    "enable",
    "disable",
    "is_enabled",
    "stock_classes",
]


def _check_wbits(max_wbits: Optional[int]) -> int:
    """tornado's own default and range check for ``max_wbits`` (same ValueError)."""
    if max_wbits is None:
        max_wbits = zlib.MAX_WBITS
    if not (8 <= max_wbits <= zlib.MAX_WBITS):
        raise ValueError(
            "Invalid max_wbits value %r; allowed range 8-%d" % (max_wbits, zlib.MAX_WBITS)
        )
    return max_wbits


@_marks.mark(replaces=_marks.stock(_ws._PerMessageDeflateCompressor))  # tornado's own
class FastDeflateCompressor:
    """Drop-in for ``tornado.websocket._PerMessageDeflateCompressor`` (same arguments)."""

    def __init__(
        self,
        persistent: bool,
        max_wbits: Optional[int],
        compression_options: Optional[dict[str, Any]] = None,
    ) -> None:
        self._max_wbits = _check_wbits(max_wbits)
        options = compression_options or {}
        self._compression_level = options.get(
            "compression_level", tornado.web.GZipContentEncoding.GZIP_LEVEL
        )
        self._mem_level = options.get("mem_level", 8)
        self._persistent = persistent
        self._codec: Any = None
        #: Set by `FastDeflateWebSocketProtocol13` on the compressor it makes: a
        #: message may then go out uncompressed, its ``_write_frame`` clearing RSV1.
        #: Off for a protocol class that does not know (it always sets RSV1).
        self._may_skip = False
        #: The message `compress()` returned as it was, until its frame is written.
        self._plain: Optional[bytes] = None
        if persistent:  # like stock: bad options raise here, otherwise at first use
            self._codec = self._create_codec()
        # status(): connections on fastdeflate's codec (one compressor each)
        _open.track("tornado", self)

    def _create_codec(self) -> Any:
        return fastdeflate.Compressor(
            self._compression_level,
            self._max_wbits,
            self._mem_level,
            no_context_takeover=not self._persistent,
        )

    def compress(self, data: bytes) -> bytes:
        """One whole message -> its payload (sync flush, trailing 00 00 ff ff removed),
        or, where the protocol can send it so, ``data`` itself to go out uncompressed
        (``Compressor.compress_or_skip`` decides; the message stays out of the window)."""
        codec = self._codec
        if codec is None:  # no context takeover: one codec that resets itself per message
            codec = self._codec = self._create_codec()
        if not self._may_skip:
            return codec.compress(data)
        payload = codec.compress_or_skip(data)
        if payload is None:
            self._plain = data
            return data
        return payload


@_marks.mark(replaces=_marks.stock(_ws._PerMessageDeflateDecompressor))  # tornado's own
class FastDeflateDecompressor:
    """Drop-in for ``tornado.websocket._PerMessageDeflateDecompressor`` (same arguments).

    A message larger than ``max_message_size`` raises tornado's
    ``_DecompressTooLargeError`` (tornado closes with 1009); corrupt data raises
    ``zlib.error``, as the stock class does.
    """

    def __init__(
        self,
        persistent: bool,
        max_wbits: Optional[int],
        max_message_size: int,
        compression_options: Optional[dict[str, Any]] = None,
    ) -> None:
        # zlib's max_length=0 means "no limit"; keep that meaning.
        self._max_size = max_message_size if max_message_size != 0 else None
        self._max_wbits = _check_wbits(max_wbits)
        self._persistent = persistent
        self._codec = fastdeflate.Decompressor(
            self._max_wbits, no_context_takeover=not persistent
        )

    def decompress(self, data: bytes) -> bytes:
        """One whole message's payload (all its frames joined) -> the message."""
        try:
            return self._codec.decompress(data, max_size=self._max_size)
        except fastdeflate.MessageTooBig:
            self._after_error()
            raise _ws._DecompressTooLargeError() from None
        except fastdeflate.DecompressionError as exc:
            self._after_error()
            raise zlib.error(str(exc)) from None

    def _after_error(self) -> None:
        # Stock makes a fresh zlib object per message without context takeover, so an
        # error does not outlive its message there; with takeover the stream stays broken.
        if not self._persistent:
            self._codec.reset()


@_marks.mark(replaces=_marks.stock(_ws.WebSocketProtocol13))  # tornado's own
class FastDeflateWebSocketProtocol13(_marks.stock(_ws.WebSocketProtocol13)):  # type: ignore[misc]
    """``WebSocketProtocol13`` whose permessage-deflate objects come from fastdeflate,
    and which sends a message the compressor passes over uncompressed (RSV1 clear)."""

    def _create_compressors(
        self,
        side: str,
        agreed_parameters: dict[str, Any],
        compression_options: Optional[dict[str, Any]] = None,
    ) -> None:
        # Same checks and arguments as tornado 6.6's method; only the classes differ.
        allowed_keys = {
            "server_no_context_takeover",
            "client_no_context_takeover",
            "server_max_window_bits",
            "client_max_window_bits",
        }
        for key in agreed_parameters:
            if key not in allowed_keys:
                raise ValueError("unsupported compression parameter %r" % key)
        other_side = "client" if side == "server" else "server"
        self._compressor = FastDeflateCompressor(  # type: ignore[assignment]
            **self._get_compressor_options(side, agreed_parameters, compression_options)
        )
        self._decompressor = FastDeflateDecompressor(  # type: ignore[assignment]
            max_message_size=self.params.max_message_size,
            **self._get_compressor_options(
                other_side, agreed_parameters, compression_options
            ),
        )
        self._compressor._may_skip = True  # type: ignore[union-attr]

    def _write_frame(
        self, fin: bool, opcode: int, data: bytes, flags: int = 0
    ) -> "asyncio.Future[None]":
        # write_message() calls compress() and then this, with what compress() returned
        # and RSV1 set: a message compress() passed over is that very object.
        compressor = self._compressor
        if flags & self.RSV1 and getattr(compressor, "_plain", None) is data:
            compressor._plain = None  # type: ignore[union-attr]
            flags &= ~self.RSV1
        return super()._write_frame(fin, opcode, data, flags)


    def _handle_message(self, opcode: int, data: bytes) -> "Optional[asyncio.Future[None]]":
        """tornado's ``_handle_message``; a large compressed message is decompressed in a
        worker thread first (tornado's frame loop awaits the future this returns before
        it reads the next frame: order is kept)."""
        if (self._frame_compressed and opcode in (0x1, 0x2) and not self.client_terminated
                and type(self._decompressor) is FastDeflateDecompressor
                and _outbox.large_payload(data) and _running_loop()):
            return asyncio.ensure_future(self._handle_large(opcode, data))
        return super()._handle_message(opcode, data)

    async def _handle_large(self, opcode: int, data: bytes) -> None:
        decompressor = self._decompressor
        assert decompressor is not None
        job = _off_loop.run(asyncio.get_running_loop(), decompressor.decompress, data)
        try:
            try:
                message = await asyncio.shield(job)
            finally:
                await _outbox.until_done(job)  # (the decompressor is the thread's until then)
                _off_loop.counted(decompressed=1)
        except _ws._DecompressTooLargeError:  # as tornado's _handle_message
            self.close(1009, "message too big after decompression")
            self._abort()
            return
        self._frame_compressed = False  # (decompressed: the rest is tornado's own)
        try:
            handled = super()._handle_message(opcode, message)
        finally:
            self._frame_compressed = True
        if handled is not None:
            await handled

    def write_message(
        self, message: Union[str, bytes, dict[str, Any]], binary: bool = False
    ) -> "asyncio.Future[None]":
        """tornado's ``write_message``; a large message (``fastdeflate.set_off_loop_size``)
        is compressed in a worker thread, and while it is, this connection's later
        messages, pings, pongs and close wait behind it (see `_TornadoOutbox`)."""
        outbox: Optional[_TornadoOutbox] = self.__dict__.get("_fastdeflate_outbox")
        holding = outbox is not None and outbox.holding
        compressor = self._compressor
        if isinstance(message, dict) and type(compressor) is FastDeflateCompressor:
            message = tornado.escape.json_encode(message)  # (as tornado: its size counts)
        if not holding and (type(compressor) is not FastDeflateCompressor
                            or not _outbox.large(message)):
            return super().write_message(message, binary=binary)
        if self.stream.closed() or not _running_loop():
            return super().write_message(message, binary=binary)  # (raises as stock)
        opcode = 0x2 if binary else 0x1
        data = tornado.escape.utf8(message)
        if type(compressor) is FastDeflateCompressor and _outbox.large(data):
            if outbox is None:
                outbox = self._fastdeflate_outbox = _TornadoOutbox(self)
            self._message_bytes_out += len(data)
            return _start_now(_write_large(self, outbox, compressor, opcode, data))
        assert outbox is not None
        self._message_bytes_out += len(data)  # a later message, held whole
        return asyncio.ensure_future(_as_tornado(outbox.keep_message(opcode, data)))


# -- Large messages off the event loop (fastdeflate.set_off_loop_size) -----------------


def _running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _TornadoOutbox(_outbox.Outbox):
    """A ``FastDeflateWebSocketProtocol13``'s frames while one of its large messages is
    compressed off the loop: held at ``_write_frame`` (pings, pongs, close) and at
    ``write_message`` (later messages, held whole: they are compressed when written,
    in order). Each gets a future, done when its frame is written (or failed with
    tornado's ``StreamClosedError``), as ``_write_frame`` returns."""

    def __init__(self, protocol: FastDeflateWebSocketProtocol13) -> None:
        super().__init__()
        self._protocol = protocol

    def _hold(self) -> None:
        self._protocol._write_frame = self._keep_frame  # type: ignore[method-assign]

    def _unhold(self) -> None:
        self._protocol.__dict__.pop("_write_frame", None)

    def _new_future(self) -> "asyncio.Future[None]":
        future = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieve)  # (a close frame's outcome is never read)
        return future

    def _keep_frame(self, fin: bool, opcode: int, data: bytes,
                    flags: int = 0) -> "asyncio.Future[None]":
        future = self._new_future()
        self.keep((future, fin, opcode, data, flags))
        return future

    def keep_message(self, opcode: int, data: bytes) -> "asyncio.Future[None]":
        """Hold a whole message, to be compressed when it is written."""
        future = self._new_future()
        # (compressed in the writer's context: fastdeflate.uncompressed() holds)
        self.keep((future, contextvars.copy_context(), opcode, data, 0))
        return future

    def _write(self, item: tuple) -> None:
        future, fin, opcode, data, flags = item
        protocol = self._protocol
        try:
            if type(fin) is contextvars.Context:  # a message: compressed now, as
                context, fin = fin, True           # tornado's write_message does
                if protocol._compressor:
                    data = context.run(protocol._compressor.compress, data)
                    flags |= protocol.RSV1
            written = type(protocol)._write_frame(protocol, fin, opcode, data, flags)
        except Exception as exc:  # StreamClosedError: closed meanwhile
            if not future.done():
                future.set_exception(exc)
            return
        _chain(written, future)


def _chain(source: "asyncio.Future[None]", target: "asyncio.Future[None]") -> None:
    """``target`` gets ``source``'s outcome."""
    def copy(source: "asyncio.Future[None]") -> None:
        if target.done():
            return
        if source.cancelled():
            target.cancel()
        elif source.exception() is not None:
            target.set_exception(source.exception())  # type: ignore[arg-type]
        else:
            target.set_result(None)

    source.add_done_callback(copy)


async def _as_tornado(written: "Awaitable[None]") -> None:
    """What tornado's ``write_message`` returns: the write, a closed stream raising
    ``WebSocketClosedError``."""
    try:
        await written
    except StreamClosedError:
        raise _ws.WebSocketClosedError() from None


async def _write_large(protocol: FastDeflateWebSocketProtocol13, outbox: _TornadoOutbox,
                       compressor: FastDeflateCompressor, opcode: int, data: bytes) -> None:
    """Compress ``data`` off the loop in its turn, write it (if the stream is still
    open), then wait for the write, as tornado's ``write_message`` future does."""
    codec = compressor._codec
    if codec is None:
        codec = compressor._codec = compressor._create_codec()
    may_skip = compressor._may_skip
    written: list[Any] = []

    def compress() -> Optional[bytes]:
        return codec.compress_or_skip(data) if may_skip else codec.compress(data)

    def write(payload: Optional[bytes]) -> None:
        if protocol.stream.closed():
            return  # closed meanwhile: dropped
        frame, flags = (data, 0) if payload is None else (payload, protocol.RSV1)
        try:
            written.append(type(protocol)._write_frame(protocol, True, opcode, frame,
                                                       flags))
        except StreamClosedError:
            pass

    await outbox.send(compress, write, codec.reset)
    if not written:
        raise _ws.WebSocketClosedError()
    await _as_tornado(written[0])


_NOTHING = object()


class _Resumed(collections.abc.Coroutine):
    """A coroutine whose first step has already run (`_start_now`), as a coroutine an
    asyncio task can run on: its first ``send`` gives what that step yielded."""

    def __init__(self, coroutine: Any, yielded: Any) -> None:
        self._coroutine = coroutine
        self._yielded = yielded

    def send(self, value: Any) -> Any:
        yielded = self._yielded
        if yielded is not _NOTHING:
            self._yielded = _NOTHING
            return yielded
        return self._coroutine.send(value)

    def throw(self, *exc: Any) -> Any:  # type: ignore[override]
        self._yielded = _NOTHING  # (cancelled before its task started: in the step)
        return self._coroutine.throw(*exc)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Any:
        return self

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        return self.send(None)


def _start_now(coroutine: Any) -> "asyncio.Future[None]":
    """Run ``coroutine`` as a task whose first step runs now, in the caller (tornado's
    ``write_message`` is synchronous: the message takes its place at once, before any
    message written after it)."""
    try:
        yielded = coroutine.send(None)
    except StopIteration:
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future
    except BaseException as exc:
        future = asyncio.get_running_loop().create_future()
        future.set_exception(exc)
        return future
    return asyncio.ensure_future(_Resumed(coroutine, yielded))


def _fast(protocol: Optional[_ws.WebSocketProtocol]) -> Optional[_ws.WebSocketProtocol]:
    """Turn tornado's own ``WebSocketProtocol13`` object into the fastdeflate one."""
    if protocol is None or isinstance(protocol, FastDeflateWebSocketProtocol13):
        return protocol
    if type(protocol) is not _marks.stock(FastDeflateWebSocketProtocol13):
        raise TypeError(
            f"cannot use fastdeflate with a custom protocol class {type(protocol)!r}; "
            "derive it from FastDeflateWebSocketProtocol13 instead"
        )
    # The subclass only overrides a method: switching the class keeps tornado's own
    # construction (parameters, ping settings, limits) untouched.
    protocol.__class__ = FastDeflateWebSocketProtocol13
    return protocol


class FastDeflateHandlerMixin:
    """Mix into a ``WebSocketHandler`` (before it) to use fastdeflate on its connections.

    Compression is still switched on and tuned by ``get_compression_options()``.
    """

    def get_websocket_protocol(self) -> Optional[_ws.WebSocketProtocol]:
        return _fast(super().get_websocket_protocol())  # type: ignore[misc]


class FastDeflateWebSocketClientConnection(_ws.WebSocketClientConnection):
    """``WebSocketClientConnection`` that uses fastdeflate; made by `websocket_connect()`."""

    def get_websocket_protocol(self) -> _ws.WebSocketProtocol:
        protocol = _fast(super().get_websocket_protocol())
        assert protocol is not None
        return protocol


def websocket_connect(
    url: Union[str, httpclient.HTTPRequest],
    *,
    connect_timeout: Optional[float] = None,
    on_message_callback: Optional[Callable[[Union[None, str, bytes]], None]] = None,
    compression_options: Optional[dict[str, Any]] = None,
    ping_interval: Optional[float] = None,
    ping_timeout: Optional[float] = None,
    max_message_size: int = _ws._default_max_message_size,
    subprotocols: Optional[list[str]] = None,
    resolver: Any = None,
) -> Awaitable[_ws.WebSocketClientConnection]:
    """``tornado.websocket.websocket_connect`` with fastdeflate on this connection."""
    if isinstance(url, httpclient.HTTPRequest):  # as tornado's own websocket_connect
        assert connect_timeout is None
        request = url
        request.headers = httputil.HTTPHeaders(request.headers)
    else:
        request = httpclient.HTTPRequest(url, connect_timeout=connect_timeout)
    request = httpclient._RequestProxy(  # type: ignore[assignment]
        request, httpclient.HTTPRequest._DEFAULTS
    )
    conn = FastDeflateWebSocketClientConnection(
        request,
        on_message_callback=on_message_callback,
        compression_options=compression_options,
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
        max_message_size=max_message_size,
        subprotocols=subprotocols,
        resolver=resolver,
    )
    return conn.connect_future


def _retrieve(future: "asyncio.Future[None]") -> None:
    """Mark a write's outcome as seen (a write to a connection closed meanwhile)."""
    if not future.cancelled():
        future.exception()


def broadcast(
    handlers: Iterable[Union[_ws.WebSocketHandler, _ws.WebSocketClientConnection]],
    message: Message,
    *,
    raise_exceptions: bool = False,
    text: Optional[bool] = None,
) -> None:
    """Send ``message`` to every connection, compressed once per group (no need to await).

    A ``str`` is encoded once and sent as text, bytes-like as binary (``text`` forces
    one or the other); every connection gets the same ``bytes`` object through its own
    ``write_message(data, binary=...)``, so tornado frames it and enforces its limits as
    usual. Closed and closing connections (``WebSocketClosedError``) are skipped. The
    futures ``write_message`` returns are not awaited: a slow client never holds up the
    others (its data waits in its stream's buffer, as with any unawaited write), and
    their errors are retrieved and dropped. Any other exception from one connection
    skips it with a warning on the ``fastdeflate`` logger, or, with
    ``raise_exceptions=True`` (Python 3.11+), is raised in an ``ExceptionGroup`` after
    the others were sent the message. Call it on the event loop's thread.
    """
    data, is_text = encode(message, text)
    failures = Failures(raise_exceptions)
    for handler in handlers:
        try:
            future = handler.write_message(data, binary=not is_text)
        except _ws.WebSocketClosedError:
            continue
        except Exception as exc:
            failures.add("failed to write message", exc)
            continue
        future.add_done_callback(_retrieve)
    failures.done()


#: The names in tornado.websocket that `enable()` rebinds, and what it puts there:
#: the two codec classes, and the protocol class that ``WebSocketHandler`` and
#: ``WebSocketClientConnection`` instantiate by that name (``get_websocket_protocol``),
#: which sends a message the compressor passes over with RSV1 clear.
_OURS = {"_PerMessageDeflateCompressor": FastDeflateCompressor,
         "_PerMessageDeflateDecompressor": FastDeflateDecompressor,
         "WebSocketProtocol13": FastDeflateWebSocketProtocol13}
_CODEC_NAMES = ("_PerMessageDeflateCompressor", "_PerMessageDeflateDecompressor")
# enable() and disable() read and write both names and _replaced
_lock = free_in_child(threading.Lock())
#: What `disable()` puts back: what `enable()` replaced last, tornado's own
#: classes until then (never one of this adapter's).
_replaced: dict[str, type] = {name: _marks.stock(ours) for name, ours in _OURS.items()}


def enable() -> None:
    """Make tornado build fastdeflate objects for every compressed connection.

    Idempotent and thread-safe. Connections already open keep the objects they have.
    """
    with _lock:
        current = {name: getattr(_ws, name) for name in _OURS}  # both, before any write
        for name, ours in _OURS.items():
            if current[name] is not ours:
                _replaced[name] = _marks.stock(current[name])
                setattr(_ws, name, ours)


def disable() -> None:
    """Put back exactly the classes `enable()` replaced. Idempotent, thread-safe.

    Only where fastdeflate's class still is: a class installed over it since (a
    wrapper, say) is left as it is. Connections opened while enabled keep fastdeflate's codec until they close
    (``fastdeflate.status()["libraries"]["tornado"]["connections"]`` counts them).
    """
    with _lock:
        for name, ours in _OURS.items():
            if getattr(_ws, name) is ours:
                setattr(_ws, name, _replaced[name])


def stock_classes() -> tuple[type, type]:
    """tornado's own (compressor, decompressor) classes, whether enabled or not (what
    `disable()` puts back)."""
    with _lock:
        compressor, decompressor = (_replaced[name] for name in _CODEC_NAMES)
    return compressor, decompressor


def is_enabled() -> bool:
    """True while a class `enable()` installed is in place (so `disable()` has
    something to undo)."""
    return any(getattr(_ws, name) is ours for name, ours in _OURS.items())
