"""fastdeflate for websockets: permessage-deflate through fastdeflate's codec.

One line, before or after websockets is imported, covers the new asyncio API, the
sync API, the trio API and the legacy API (``compression="deflate"`` — the default —
and every stock ``*PerMessageDeflateFactory`` the application builds)::

    import fastdeflate.integrations.websockets as fw; fw.enable()

Or per connection, through websockets' own extension mechanism, nothing patched::

    from fastdeflate.integrations.websockets import ServerPerMessageDeflateFactory
    websockets.serve(handler, host, port, extensions=[ServerPerMessageDeflateFactory(
        server_max_window_bits=12, client_max_window_bits=12,
        compress_settings={"memLevel": 5})])  # websockets' own defaults

The factories take exactly the arguments of websockets' own and negotiate with
websockets' own code (they subclass it); only the resulting extension object differs:
`PerMessageDeflate` compresses and decompresses with
[`fastdeflate.Compressor`][fastdeflate._fastdeflate.Compressor] and
[`fastdeflate.Decompressor`][fastdeflate._fastdeflate.Decompressor]. Limits and errors are websockets' own:
an oversized message raises ``PayloadTooBig`` (close 1009), corrupt data ``ProtocolError``
(close 1002), exactly where the stock extension raises them. `enable()` swaps one
name, ``websockets.extensions.permessage_deflate.PerMessageDeflate``, which websockets'
factories look up when a handshake succeeds; `disable()` puts the stock class back.

Compress what pays (which messages go out uncompressed, and why: ``fastdeflate._what_pays``):
a message `fastdeflate.Compressor.compress_or_skip()` declines goes out as it is, RSV1
clear. A fragmented message (``send()`` of an iterable or async iterable) is decided on
its first fragment and the whole message follows. To send messages uncompressed on
purpose::

    with fastdeflate.uncompressed():
        await ws.send(blob)            # the asyncio and trio APIs: this task only
        ws.send(blob)                  # the sync API: this thread only
        websockets.broadcast(connections, blob)   # every connection of this call

It is a context variable, read when the frame is encoded, which websockets does inside
``send()``: other tasks (or threads) sending meanwhile, on the same connection or
others, compress as usual. With ``compress_settings`` left to the stock code (a
``zdict``), every message is compressed, as stock does.

Tested with websockets 17.4 and 14.0, the oldest it supports (CPython 3.11;
.ci/steps/15-oldest-libraries.sh); needs websockets >= 14: an older one is refused
(ImportError; `fastdeflate.enable()` leaves it stock with a RuntimeWarning).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import zlib
from typing import Any, Awaitable, Callable, Sequence

try:
    import websockets.version
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "fastdeflate.integrations.websockets needs the 'websockets' package "
        "(>= 14): pip install websockets"
    ) from exc
if int(websockets.version.version.split(".")[0]) < 14:  # PayloadTooBig(size, max_size)
    raise ImportError(
        f"fastdeflate.integrations.websockets needs websockets >= 14, "
        f"found {websockets.version.version}"
    )

from websockets.exceptions import PayloadTooBig, ProtocolError
from websockets.extensions import permessage_deflate as _pmd
from websockets.frames import CTRL_OPCODES, Frame, Opcode
from websockets.typing import ExtensionParameter

import fastdeflate
from fastdeflate import _off_loop
from fastdeflate.integrations import _marks, _open, _outbox

__all__ = [
    "PerMessageDeflate",
    "ClientPerMessageDeflateFactory",
    "ServerPerMessageDeflateFactory",
    "enable",
    "disable",
    "is_enabled",
]

CONT = Opcode.CONT

# The stock class, even if this module is re-imported while enabled.
_StockPerMessageDeflate: type = _marks.stock(_pmd.PerMessageDeflate)

# compress_settings keys (zlib.compressobj keywords) -> fastdeflate.Compressor arguments.
_SETTINGS = {"level": "level", "memLevel": "mem_level", "strategy": "strategy"}


def _compressor_kwargs(settings: dict[Any, Any]) -> dict[str, Any] | None:
    """Compressor arguments for websockets' ``compress_settings``; None if it can't.

    One shared (never modified) dict per distinct settings: every connection of a
    server has the same, and a dict per connection would cost ~200 bytes each.
    """
    try:
        return _kwargs_for(tuple(sorted(settings.items())))
    except TypeError:  # unhashable or unorderable values: nothing fastdeflate can use
        return None


@functools.lru_cache(maxsize=64)
def _kwargs_for(settings: tuple[tuple[Any, Any], ...]) -> dict[str, Any] | None:
    kwargs: dict[str, Any] = {}
    for key, value in settings:
        if key == "method" and value == zlib.DEFLATED:
            continue
        if key not in _SETTINGS:  # zdict, another method, an unknown keyword
            return None
        kwargs[_SETTINGS[key]] = value
    return kwargs


@_marks.mark
class PerMessageDeflate(_StockPerMessageDeflate):  # type: ignore[misc, valid-type]
    """websockets' Per-Message Deflate extension on fastdeflate's codec.

    Same constructor, attributes and behaviour as
    ``websockets.extensions.permessage_deflate.PerMessageDeflate`` (a subclass of it).
    ``compress_settings`` that fastdeflate cannot honour (``zdict``, a ``method``
    other than ``DEFLATED``, unknown keywords) leave compression to the stock code.
    """

    def __init__(
        self,
        remote_no_context_takeover: bool,
        local_no_context_takeover: bool,
        remote_max_window_bits: int,
        local_max_window_bits: int,
        compress_settings: dict[Any, Any] | None = None,
    ) -> None:
        if compress_settings is None:
            compress_settings = {}
        # The stock class's checks (it is not called: it would allocate zlib objects).
        assert remote_no_context_takeover in [False, True]
        assert local_no_context_takeover in [False, True]
        assert 8 <= remote_max_window_bits <= 15
        assert 9 <= local_max_window_bits <= 15
        assert "wbits" not in compress_settings

        self.remote_no_context_takeover = remote_no_context_takeover
        self.local_no_context_takeover = local_no_context_takeover
        self.remote_max_window_bits = remote_max_window_bits
        self.local_max_window_bits = local_max_window_bits
        self.compress_settings = compress_settings

        # Without context takeover a codec object lives for one message only, as the
        # stock class's zlib objects do: an idle connection holds none.
        self._decompressor: fastdeflate.Decompressor | None = (
            None if remote_no_context_takeover else self._new_decompressor()
        )
        self._compressor_kwargs = _compressor_kwargs(compress_settings)
        # True if ``compress_settings`` leave compression to the stock code
        self._stock_encoder = self._compressor_kwargs is None
        self._compressor: fastdeflate.Compressor | None = (
            None if self._stock_encoder or local_no_context_takeover
            else self._new_compressor()
        )
        if self._stock_encoder and not local_no_context_takeover:
            self.encoder = zlib.compressobj(  # what the stock __init__ does
                wbits=-local_max_window_bits, **compress_settings
            )

        self.decode_cont_data = False  # same meaning as in the stock class
        self._decoded_size = 0  # bytes of the current message decoded so far
        # (a large message's data, its payload compressed off the loop): see _outbox
        self._ready: tuple[Any, bytes | None] | None = None
        # the connection's inbox while its parser runs, if large messages may be
        # decompressed off the loop (_ParserInbox)
        self._inbox: _ParserInbox | None = None
        _open.track("websockets", self)  # status(): connections on fastdeflate's codec

    def _new_decompressor(self) -> fastdeflate.Decompressor:
        return fastdeflate.Decompressor(
            self.remote_max_window_bits, self.remote_no_context_takeover
        )

    def _new_compressor(self) -> fastdeflate.Compressor:
        assert self._compressor_kwargs is not None
        return fastdeflate.Compressor(
            window_bits=self.local_max_window_bits,
            no_context_takeover=self.local_no_context_takeover,
            **self._compressor_kwargs,
        )

    def decode(self, frame: Frame, *, max_size: int | None = None) -> Frame:
        """Decode an incoming frame (``max_size`` bounds this frame's output)."""
        if frame.opcode in CTRL_OPCODES:
            return frame
        inbox = self._inbox
        if inbox is not None and (inbox.deferring or (
                frame.rsv1 and frame.fin and frame.opcode is not CONT
                and _outbox.large_payload(frame.data))):
            # Decompressed off the loop by the connection's inbox (and, once one is
            # deferred, every data frame after it, in order): a placeholder meanwhile.
            return inbox.defer(functools.partial(self._decode_later, frame, inbox.protocol),
                               Frame(frame.opcode, b"", frame.fin, False, frame.rsv2,
                                     frame.rsv3))
        return self._decode(frame, max_size)

    def _decode_later(self, frame: Frame, protocol: Any) -> Frame:
        """Decode a deferred frame within the protocol's limits for the whole message
        (those the parser gave later frames counted the placeholders as empty)."""
        max_size = _renamed(protocol, "max_message_size")
        if max_size is not None and frame.opcode is CONT:
            max_size -= self._decoded_size
        fragment = getattr(protocol, "max_fragment_size", None)
        if fragment is not None:
            max_size = fragment if max_size is None else min(max_size, fragment)
        return self._decode(frame, max_size)

    def _decode(self, frame: Frame, max_size: int | None) -> Frame:
        if frame.opcode is CONT:
            if not self.decode_cont_data:
                return frame
            if frame.rsv1:
                raise ProtocolError("RSV1 bit set in continuation frame")
            if frame.fin:
                self.decode_cont_data = False
        else:
            if not frame.rsv1:
                return frame
            if not frame.fin:
                self.decode_cont_data = True
            self._decoded_size = 0

        # fastdeflate's max_size bounds the whole message; websockets' bounds the frame.
        limit = None if max_size is None else self._decoded_size + max_size
        decompressor = self._decompressor
        if decompressor is None:
            decompressor = self._decompressor = self._new_decompressor()
        try:
            data = decompressor.decompress(frame.data, frame.fin, limit)
            if frame.fin and self.remote_no_context_takeover:
                self._decompressor = None
        except fastdeflate.MessageTooBig:
            raise PayloadTooBig(None, max_size) from None  # type: ignore[arg-type]
        except fastdeflate.DecompressionError as exc:
            raise ProtocolError("decompression failed") from exc
        self._decoded_size += len(data)
        return Frame(frame.opcode, data, frame.fin, False, frame.rsv2, frame.rsv3)

    def encode(self, frame: Frame) -> Frame:
        """Encode an outgoing frame: compressed and sync-flushed, or, for a message
        `fastdeflate.Compressor.compress_or_skip()` sends as it is, ``frame`` itself
        (RSV1 clear), and so every continuation frame of that message."""
        opcode = frame.opcode
        if opcode in CTRL_OPCODES:
            return frame
        compressor = self._compressor  # (per delivery of a broadcast: kept short)
        if compressor is None:
            if self._stock_encoder:
                return super().encode(frame)
            compressor = self._compressor = self._new_compressor()
        # Decided on a message's first frame, and every frame of it follows (a message
        # sent as it is: None for each, its bytes counted).
        fin = frame.fin
        ready = self._ready
        if ready is not None and ready[0] is frame.data:  # compressed off the loop
            self._ready = None
            data = ready[1]
        else:
            data = compressor.compress_or_skip(frame.data, fin)
        if fin and self.local_no_context_takeover:
            self._compressor = None  # as stock: one per message
        if data is None:  # the compressor untouched: the peer's window has not seen it
            return frame
        # A broadcast's connections in one group get the same payload object: the frame
        # made for the first serves them all (websockets only reads a frame it encoded).
        # Only frames without RSV2 and RSV3 (no other extension's) are kept for that.
        last = _last_frame
        if (last.data is data and last.opcode is opcode and last.fin is fin
                and not (frame.rsv2 or frame.rsv3)):
            return last
        encoded = Frame(
            opcode,
            data,
            fin,
            opcode is not CONT,  # RSV1 on the first frame of the message
            frame.rsv2,
            frame.rsv3,
        )
        return encoded if frame.rsv2 or frame.rsv3 else _remember_frame(encoded)


#: The frame encode() made last (a broadcast's followers take the same payload object).
#: Rebound without a lock on every frame's path, as a cache may be: encode() reads it
#: once and uses it only if it carries the very payload object being sent.
_last_frame: Frame = Frame(Opcode.BINARY, b"")


def _remember_frame(frame: Frame) -> Frame:
    global _last_frame
    _last_frame = frame
    return frame

# -- Large messages off the event loop (fastdeflate.set_off_loop_size) -----------------


def _ours(extensions: Sequence[Any]) -> PerMessageDeflate | None:
    """The connection's fastdeflate extension, if fastdeflate compresses for it."""
    for extension in extensions:
        if isinstance(extension, PerMessageDeflate) and not extension._stock_encoder:
            return extension
    return None


class _ProtocolOutbox(_outbox.Outbox):
    """websockets' sans-I/O ``Protocol`` (the asyncio API, uvicorn's websockets-sansio):
    frames held at its ``send_frame``, pushed by ``push()``."""

    def __init__(self, protocol: Any, push: Callable[[], None]) -> None:
        super().__init__()
        self._protocol = protocol
        self._push_out = push

    def _hold(self) -> None:  # (in the sender's context: fastdeflate.uncompressed())
        self._protocol.send_frame = lambda frame: self.keep(
            (contextvars.copy_context(), frame))

    def _unhold(self) -> None:
        self._protocol.__dict__.pop("send_frame", None)

    def _write(self, held: tuple[contextvars.Context, Frame]) -> None:
        context, frame = held
        context.run(type(self._protocol).send_frame, self._protocol, frame)

    def _push(self) -> None:
        self._push_out()


class _LegacyOutbox(_outbox.Outbox):
    """websockets' legacy protocol (uvicorn's websockets): frames held at its
    ``write_frame_sync``, which writes to the transport itself."""

    def __init__(self, protocol: Any) -> None:
        super().__init__()
        self._protocol = protocol

    def _hold(self) -> None:  # (in the sender's context: fastdeflate.uncompressed())
        self._protocol.write_frame_sync = lambda *frame: self.keep(
            (contextvars.copy_context(), frame))

    def _unhold(self) -> None:
        self._protocol.__dict__.pop("write_frame_sync", None)

    def _write(self, held: tuple[contextvars.Context, tuple[bool, int, Any]]) -> None:
        context, frame = held
        if not self._protocol.transport.is_closing():  # (closed meanwhile: dropped)
            context.run(type(self._protocol).write_frame_sync, self._protocol, *frame)


def _outbox_of(owner: Any, make: Callable[[], _outbox.Outbox]) -> _outbox.Outbox:
    outbox = owner.__dict__.get("_fastdeflate_outbox")
    if outbox is None:
        outbox = owner._fastdeflate_outbox = make()
    return outbox


def _message(message: Any, text: bool | None) -> tuple[Opcode, Any]:
    """(opcode, bytes) of a str or bytes-like message sent whole, as websockets sends it
    (a mutable buffer copied: it is read in another thread)."""
    if isinstance(message, str):
        return (Opcode.BINARY if text is False else Opcode.TEXT), message.encode()
    data = message if type(message) is bytes else bytes(message)
    return (Opcode.TEXT if text is True else Opcode.BINARY), data


async def _send_large(outbox: _outbox.Outbox, extension: PerMessageDeflate,
                      opcode: Opcode, data: Any, write: Callable[[], None],
                      message: Any) -> None:
    """Compress ``data`` off the loop, then ``write()`` it (encode() takes the payload)
    if the connection is still open (``write`` checks)."""
    compressor = extension._compressor
    if compressor is None:
        compressor = extension._compressor = extension._new_compressor()

    def compress() -> bytes | None:
        return compressor.compress_or_skip(data, True)

    def written(payload: bytes | None) -> None:
        extension._ready = (data, payload)
        try:
            write()
        finally:
            extension._ready = None

    await outbox.send(compress, written, compressor.reset, message)


def _asyncio_send(stock: Callable[..., Any]) -> Callable[..., Any]:
    """``websockets.asyncio.connection.Connection.send``, large messages off the loop."""
    from websockets.protocol import CLOSED, OPEN

    @functools.wraps(stock)
    def send(self: Any, message: Any, text: bool | None = None) -> Awaitable[None]:
        # (a plain function: a message under the size gets stock's coroutine itself)
        size = _off_loop.off_loop_size()
        if (type(message) is str or type(message) is bytes) and not 0 < size <= len(message):
            return stock(self, message, text=text)  # type: ignore[no-any-return]
        return send_large(self, message, text)

    async def send_large(self: Any, message: Any, text: bool | None) -> None:
        extension = _ours(self.protocol.extensions)
        if (extension is None or not isinstance(message, (str, bytes, bytearray, memoryview))
                or not _outbox.large(message)):
            return await stock(self, message, text=text)
        # A fragmented message goes first (the future stock send() waits on:
        # send_in_progress in websockets >= 16, fragmented_send_waiter in 14 and 15).
        while (waiting := _renamed(self, "send_in_progress")) is not None:
            await asyncio.shield(waiting)
        if self.protocol.state is not OPEN:
            return await stock(self, message, text=text)  # (raises as stock does)
        opcode, data = _message(message, text)
        protocol = self.protocol

        def push() -> None:  # as Connection.data_received writes
            try:
                self.send_data()
            except Exception as exc:
                self.set_connection_exc(exc)

        outbox = _outbox_of(self, lambda: _ProtocolOutbox(protocol, push))

        def write() -> None:  # (closing: its close frame is held, after this message)
            if protocol.state is not CLOSED:
                type(protocol).send_frame(protocol, Frame(opcode, data))

        await _send_large(outbox, extension, opcode, data, write, message)
        async with self.send_context():  # written out and drained, or ConnectionClosed
            pass

    if hasattr(inspect, "markcoroutinefunction"):  # (3.12+: still a coroutine function)
        inspect.markcoroutinefunction(send)
    return send


def _legacy_send(stock: Callable[..., Any]) -> Callable[..., Any]:
    """``websockets.legacy.protocol.WebSocketCommonProtocol.send`` (uvicorn's
    ``websockets``), large messages off the loop."""
    from websockets.protocol import State

    @functools.wraps(stock)
    async def send(self: Any, message: Any) -> None:
        extension = _ours(self.extensions)
        if (extension is None or not isinstance(message, (str, bytes, bytearray, memoryview))
                or not _outbox.large(message)):
            return await stock(self, message)
        await self.ensure_open()
        while self._fragmented_message_waiter is not None:
            await asyncio.shield(self._fragmented_message_waiter)
        opcode, data = _message(message, None)
        outbox = _outbox_of(self, lambda: _LegacyOutbox(self))

        def write() -> None:  # (closing: its close frame is held, after this message)
            if self.state is not State.CLOSED:
                type(self).write_frame_sync(self, True, opcode, data)

        await _send_large(outbox, extension, opcode, data, write, message)
        await self.drain()

    return send


class _Capture:
    """An extension that keeps the frame it is given (and clears RSV1, so that the
    legacy reader's checks pass as they would after decoding)."""

    frame: Frame

    def decode(self, frame: Frame, *, max_size: int | None = None) -> Frame:
        self.frame = frame
        return Frame(frame.opcode, frame.data, frame.fin, False, frame.rsv2, frame.rsv3)


def _legacy_read_frame(stock: Callable[..., Any]) -> Callable[..., Any]:
    """``websockets.legacy.protocol.WebSocketCommonProtocol.read_frame`` (uvicorn's
    ``websockets``): a large compressed message decompressed off the loop. The legacy
    protocol reads frames in a task of its own, one at a time, so order is kept."""
    from websockets.legacy.framing import Frame as LegacyFrame

    @functools.wraps(stock)
    async def read_frame(self: Any, max_size: int | None) -> Any:
        extensions = self.extensions
        if (len(extensions) != 1 or not isinstance(extensions[0], PerMessageDeflate)
                or _off_loop.off_loop_size() == 0):
            return await stock(self, max_size)
        extension = extensions[0]
        capture = _Capture()  # (in the extension's place: the frame as it came)
        await LegacyFrame.read(self.reader.readexactly, mask=not self.is_client,
                               max_size=max_size, extensions=[capture])
        raw = capture.frame
        if raw.rsv1 and raw.fin and raw.opcode is not CONT and _outbox.large_payload(raw.data):
            loop = asyncio.get_running_loop()
            job = _off_loop.run(loop, functools.partial(extension.decode, raw, max_size=max_size))
            try:
                frame = await asyncio.shield(job)
            except asyncio.CancelledError:
                await _outbox.until_done(job)  # (the decompressor is the thread's until then)
                raise
            finally:
                if job.done():  # (its bytes were read in the thread, refused or not)
                    _off_loop.counted(decompressed=1)
        else:
            frame = extension.decode(raw, max_size=max_size)
        frame.check()
        return LegacyFrame(frame.fin, frame.opcode, frame.data, frame.rsv1, frame.rsv2,
                           frame.rsv3)

    return read_frame


def _uvicorn_sansio_send(stock: Callable[..., Any]) -> Callable[..., Any]:
    """uvicorn's ``websockets-sansio`` ASGI ``send``, large messages off the loop."""
    from websockets.protocol import CLOSED

    @functools.wraps(stock)
    async def send(self: Any, message: Any) -> None:
        if (message.get("type") != "websocket.send" or not self.handshake_complete
                or self.close_sent or self.initial_response is not None):
            return await stock(self, message)
        body = message.get("bytes")
        text = message.get("text") if body is None else None
        extension = _ours(self.conn.extensions)
        if extension is None or not _outbox.large(body if text is None else text):
            return await stock(self, message)
        await self.writable.wait()
        if self.disconnected or self.close_sent:
            return await stock(self, message)  # (raises as stock does)
        opcode, data = _message(body if text is None else text, None)
        conn, transport = self.conn, self.transport

        def push() -> None:
            output = conn.data_to_send()
            if output and not transport.is_closing():  # (closed meanwhile: dropped)
                transport.write(b"".join(output))

        outbox = _outbox_of(self, lambda: _ProtocolOutbox(conn, push))

        def write() -> None:  # (closing: its close frame is held, after this message)
            if conn.state is not CLOSED:
                type(conn).send_frame(conn, Frame(opcode, data))

        await _send_large(outbox, extension, opcode, data, write,
                          body if text is None else text)

    return send


# -- Receiving: large messages decompressed off the loop --------------------------------


def _decoder(protocol: Any) -> PerMessageDeflate | None:
    """The connection's fastdeflate extension, if it is its only one and large messages
    go off the loop."""
    extensions = protocol.extensions
    if (len(extensions) == 1 and isinstance(extensions[0], PerMessageDeflate)
            and _off_loop.off_loop_size() > 0):
        return extensions[0]
    return None


class _ParserInbox(_outbox.Inbox):
    """websockets' sans-I/O ``Protocol``: events delivered by ``deliver(events)``; a
    refused frame fails the protocol as its parser does, then ``failed()``."""

    def __init__(self, protocol: Any, deliver: Callable[[list], None],
                 failed: Callable[[], None],
                 deferring: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.protocol = protocol
        self._deliver_events = deliver
        self._failed = failed
        self._deferring = deferring  # called at a parser run's first deferral
        self.events: list[Any] = []  # the events that run collected, if it wants them

    def defer(self, decode: Callable[[], Any], placeholder: Any) -> Any:
        if not self.deferring and self._deferring is not None:
            self._deferring()
        return super().defer(decode, placeholder)

    def _deliver(self, events: list) -> None:
        self._deliver_events(events)

    def _fail(self, exc: BaseException) -> None:
        from websockets.frames import CloseCode

        protocol = self.protocol
        if isinstance(exc, PayloadTooBig):
            if hasattr(exc, "set_current_size"):
                exc.set_current_size(_renamed(protocol, "current_size"))
            protocol.fail(CloseCode.MESSAGE_TOO_BIG, str(exc))
        elif isinstance(exc, ProtocolError):
            protocol.fail(CloseCode.PROTOCOL_ERROR, str(exc))
        else:
            protocol.logger.error("parser failed", exc_info=exc)
            protocol.fail(CloseCode.INTERNAL_ERROR)
        protocol.parser_exc = exc
        self._failed()


#: Attributes websockets 16 renamed: {name in 16+: name in 14 and 15}.
_RENAMED = {
    "max_message_size": "max_size",  # the protocol's limit on a message
    "current_size": "cur_size",  # the size of the message being read
    "send_in_progress": "fragmented_send_waiter",  # the future a fragmented send holds
}


def _renamed(obj: Any, name: str) -> Any:
    """``obj``'s attribute ``name`` (websockets 16+), or what 14 and 15 called it
    (``_RENAMED``); None if it has neither."""
    if hasattr(obj, name):
        return getattr(obj, name)
    return getattr(obj, _RENAMED[name], None)


def _inbox_of(owner: Any, make: Callable[[], _ParserInbox]) -> _ParserInbox:
    inbox = owner.__dict__.get("_fastdeflate_inbox")
    if inbox is None:
        inbox = owner._fastdeflate_inbox = make()
    return inbox


def _held_while_decoding(stock: Callable[..., Any]) -> Callable[..., Any]:
    """An inbound callback (``eof_received``, ``connection_lost``) held while the
    connection's large message is decompressed, replayed after it."""
    @functools.wraps(stock)
    def callback(self: Any, *args: Any) -> Any:
        inbox = self.__dict__.get("_fastdeflate_inbox")
        if inbox is not None and inbox.holding:
            inbox.hold(getattr(self, stock.__name__), *args)
            return None
        return stock(self, *args)

    return callback


def _asyncio_data_received(stock: Callable[..., Any]) -> Callable[..., Any]:
    """``websockets.asyncio.connection.Connection.data_received``: a large compressed
    message decompressed off the loop; the events of the bytes parsed with it, and the
    inbound calls after them, wait for it."""
    @functools.wraps(stock)
    def data_received(self: Any, data: bytes) -> None:
        inbox = self.__dict__.get("_fastdeflate_inbox")
        if inbox is not None and inbox.holding:
            inbox.hold(self.data_received, data)
            return
        extension = _decoder(self.protocol)
        if extension is None:
            return stock(self, data)
        if inbox is None:
            inbox = _inbox_of(self, lambda: _ParserInbox(
                self.protocol, lambda events: _process(self, events),
                lambda: _after_failure(self), lambda: _collect(self, inbox)))
        extension._inbox = inbox
        try:
            stock(self, data)  # (stock's own steps; at a deferral, its events collected)
        finally:
            extension._inbox = None
        if inbox.deferring:
            self.__dict__.pop("process_event", None)
            events, inbox.events = inbox.events, []
            inbox.start(events)

    return data_received


def _collect(connection: Any, inbox: _ParserInbox) -> None:
    """At a deferral: the connection's events of this run go to the inbox (the parser
    runs before they are processed)."""
    connection.process_event = inbox.events.append


def _process(connection: Any, events: list) -> None:
    for event in events:
        type(connection).process_event(connection, event)


def _after_failure(connection: Any) -> None:
    """What ``Connection.data_received`` does after its protocol failed."""
    try:
        connection.send_data()
    except Exception as exc:
        connection.set_connection_exc(exc)
    if (connection.protocol.close_expected() and connection.close_deadline is None
            and connection.close_timeout is not None):
        connection.close_deadline = connection.loop.time() + connection.close_timeout


def _uvicorn_sansio_data_received(stock: Callable[..., Any]) -> Callable[..., Any]:
    """uvicorn's ``websockets-sansio`` ``data_received``: as `_asyncio_data_received`."""
    @functools.wraps(stock)
    def data_received(self: Any, data: bytes) -> None:
        inbox = self.__dict__.get("_fastdeflate_inbox")
        if inbox is not None and inbox.holding:
            inbox.hold(self.data_received, data)
            return
        extension = _decoder(self.conn)
        if extension is None:
            return stock(self, data)
        conn = self.conn
        if inbox is None:
            def deliver(events: list) -> None:
                conn.events[:0] = events
                self.handle_events()
                if conn.parser_exc is not None and not self.close_sent:
                    self.handle_parser_exception()  # (a frame after the large one)

            inbox = _inbox_of(self, lambda: _ParserInbox(
                conn, deliver, self.handle_parser_exception))
        extension._inbox = inbox
        try:
            conn.receive_data(data)
        finally:
            extension._inbox = None
        if inbox.deferring:
            inbox.start(conn.events_received())
        elif conn.parser_exc is not None:
            self.handle_parser_exception()
        else:
            self.handle_events()

    return data_received


#: The send paths that compress large messages off the loop, put in place by enable().
_SENDS = (
    _outbox.LatePatch("websockets.asyncio.connection:Connection", "send", _asyncio_send),
    _outbox.LatePatch("websockets.legacy.protocol:WebSocketCommonProtocol", "send",
                      _legacy_send),
    _outbox.LatePatch("websockets.legacy.protocol:WebSocketCommonProtocol", "read_frame",
                      _legacy_read_frame),
    _outbox.LatePatch("uvicorn.protocols.websockets.websockets_sansio_impl:"
                      "WebSocketsSansIOProtocol", "send", _uvicorn_sansio_send),
    # receiving
    _outbox.LatePatch("websockets.asyncio.connection:Connection", "data_received",
                      _asyncio_data_received),
    _outbox.LatePatch("websockets.asyncio.connection:Connection", "eof_received",
                      _held_while_decoding),
    _outbox.LatePatch("websockets.asyncio.connection:Connection", "connection_lost",
                      _held_while_decoding),
    _outbox.LatePatch("uvicorn.protocols.websockets.websockets_sansio_impl:"
                      "WebSocketsSansIOProtocol", "data_received",
                      _uvicorn_sansio_data_received),
    _outbox.LatePatch("uvicorn.protocols.websockets.websockets_sansio_impl:"
                      "WebSocketsSansIOProtocol", "connection_lost", _held_while_decoding),
)


def _fast(extension: Any) -> PerMessageDeflate:
    """The fastdeflate extension for what a stock factory negotiated."""
    if _marks.made_by_ours(extension):
        return extension
    return PerMessageDeflate(
        extension.remote_no_context_takeover,
        extension.local_no_context_takeover,
        extension.remote_max_window_bits,
        extension.local_max_window_bits,
        extension.compress_settings,
    )


class ClientPerMessageDeflateFactory(_pmd.ClientPerMessageDeflateFactory):
    """websockets' client factory (same arguments and negotiation) on fastdeflate."""

    def process_response_params(
        self,
        params: Sequence[ExtensionParameter],
        accepted_extensions: Sequence[Any],
    ) -> PerMessageDeflate:
        return _fast(super().process_response_params(params, accepted_extensions))


class ServerPerMessageDeflateFactory(_pmd.ServerPerMessageDeflateFactory):
    """websockets' server factory (same arguments and negotiation) on fastdeflate."""

    def process_request_params(
        self,
        params: Sequence[ExtensionParameter],
        accepted_extensions: Sequence[Any],
    ) -> tuple[list[ExtensionParameter], PerMessageDeflate]:
        response, extension = super().process_request_params(params, accepted_extensions)
        return response, _fast(extension)


def enable() -> None:
    """Make every websockets connection negotiated from now on use fastdeflate.

    Idempotent. Connections already open keep the codec they started with.
    """
    _pmd.PerMessageDeflate = PerMessageDeflate
    for patch in _SENDS:
        patch.apply()


def disable() -> None:
    """Undo `enable()` exactly (no-op if not enabled): new connections only.

    Connections opened while enabled keep fastdeflate's codec until they close
    (``fastdeflate.status()["libraries"]["websockets"]["connections"]`` counts them).
    """
    if _pmd.PerMessageDeflate is PerMessageDeflate:
        _pmd.PerMessageDeflate = _StockPerMessageDeflate
    for patch in _SENDS:
        patch.remove()


def is_enabled() -> bool:
    """True if `enable()` is in effect."""
    return _pmd.PerMessageDeflate is PerMessageDeflate
