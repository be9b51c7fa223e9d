"""fastdeflate for wsproto (and what runs on it: uvicorn ``--ws wsproto``, simple-websocket).

One-line use, for every wsproto user in the process (uvicorn, simple-websocket, your code)::

    import fastdeflate.integrations.wsproto; fastdeflate.integrations.wsproto.enable()

or per connection, through wsproto's own extension mechanism (same constructor as
``wsproto.extensions.PerMessageDeflate``)::

    from fastdeflate.integrations.wsproto import PerMessageDeflate
    WSConnection(...).send(Request(..., extensions=[PerMessageDeflate()]))

Only the payload transformation changes: negotiation (``offer``/``accept``/``finalize``),
window bits, both no-context-takeover flags, wsproto's compression level (zlib's
default, 6) and memLevel (8), close codes (corrupt data -> 1007) and the frames on the
wire (byte-identical on the same zlib, but for the messages sent uncompressed, below)
stay wsproto's. wsproto itself has no message size limit; the limits of uvicorn
(``ws_max_size``) and simple-websocket (``max_message_size``) apply after
decompression exactly as before.

`enable()` sets one attribute, ``wsproto.extensions.PerMessageDeflate.__new__``:
asked for a stock object, it makes one of this module's `PerMessageDeflate`,
which the stock ``__init__`` then sets up. (Made so from the start: changing an object's
class after ``__init__`` gives it a dict of its own, 64 bytes more per object.) Objects
are therefore fastdeflate or stock for their whole life: connections opened before
`enable()` (or after `disable()`) keep stock zlib, and vice versa. Subclasses
of the stock class are left alone. The stock class has no ``__new__`` of its own, and
CPython cannot take one away again cleanly (the class would keep calling
``object.__new__`` with its arguments, which raises), so `disable()` leaves
`_stock_new()` there, which makes stock objects exactly as before.

Compress what pays (which messages go out uncompressed, and why: ``fastdeflate._what_pays``):
a message `fastdeflate.Compressor.compress_or_skip()` declines goes out as it is, RSV1
clear; every other message's frames are stock's. A fragmented message
(``Message(..., message_finished=False)`` events) is decided on its first fragment and
the whole message follows. To send messages uncompressed on purpose, wrap the call that
sends them::

    with fastdeflate.uncompressed():
        data = connection.send(BytesMessage(data=blob))        # wsproto itself
        await websocket.send_bytes(blob)       # uvicorn --ws wsproto (Starlette, FastAPI)
        ws.send(blob)                          # simple-websocket

It is a context variable, read when the frame is made, which wsproto does inside
``send()``, in the caller's thread or asyncio task (uvicorn's ASGI ``send`` runs
``send()`` in the application's task): other tasks or threads sending meanwhile
compress as usual.

One deliberate difference: a message containing a deflate block with BFINAL set (valid,
RFC 7692 section 7.2.3.4) makes stock wsproto fail the next message with 1007;
fastdeflate decodes it. Like stock, a control frame between the fragments of a
compressed message makes wsproto treat the rest as uncompressed (kept as is).

One message to many connections: wsproto copies every payload on its way to the
extension (and encodes a ``str`` per connection), so nothing is shared by itself.
`broadcast()` returns the bytes to write to each connection, compressed once per
group; `broadcasting()` does the same for servers that call ``send()`` themselves
(uvicorn, simple-websocket).

Large messages: while enabled, uvicorn ``--ws wsproto`` and hypercorn (asyncio) compress
a message of at least ``fastdeflate.set_off_loop_size()`` bytes in a worker thread; the
connection's later frames wait behind it, in order (the end of this module). They
decompress a peer's compressed message whose payload is at least a quarter of that size
in a worker thread too, the bytes after it held until it is done, with the servers'
limits and close codes. wsproto itself (sans-I/O, called synchronously) has no place
for either: other wsproto users (simple-websocket, your own code) do both on the spot.

Tested with wsproto 1.3.2, uvicorn 0.54.0, simple-websocket 1.1.0 (Python 3.11), and with
wsproto 1.2.0, the oldest it supports (.ci/steps/15-oldest-libraries.sh); needs wsproto
>= 1.2: an older one is refused (ImportError; `fastdeflate.enable()` leaves it stock
with a RuntimeWarning).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import logging
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, Optional, Union

try:
    import wsproto
    import wsproto.extensions as _wsproto_extensions
    from wsproto.connection import Connection, ConnectionState
    from wsproto.events import BytesMessage, CloseConnection, Ping, Pong, TextMessage
    from wsproto.events import Event as _WSEvent
    from wsproto.events import Message as _WSMessage
    from wsproto.utilities import LocalProtocolError
    from wsproto.frame_protocol import CloseReason, FrameDecoder, FrameProtocol, Opcode, RsvBits
except ImportError as exc:  # pragma: no cover - wsproto is installed in CI
    raise ImportError(
        "fastdeflate.integrations.wsproto needs the wsproto package "
        "(pip install wsproto)"
    ) from exc

import fastdeflate
from fastdeflate.integrations import _open, _outbox, _require
from fastdeflate.integrations._fanout import Failures, Message, encode
from fastdeflate._forksafe import free_in_child

#: The oldest wsproto this adapter is tested with (.ci/steps/15-oldest-libraries.sh);
#: an older one is refused (ImportError: `fastdeflate.enable()` leaves it stock).
MIN_WSPROTO = "1.2"
_require("wsproto", wsproto.__version__, MIN_WSPROTO)

_logger = logging.getLogger("fastdeflate")

__all__ = ["PerMessageDeflate", "broadcast", "broadcasting", "enable", "disable",
           "is_enabled"]

_StockPerMessageDeflate = _wsproto_extensions.PerMessageDeflate
_lock = free_in_child(threading.Lock())

#: wsproto compresses with zlib.Z_DEFAULT_COMPRESSION, which zlib maps to level 6,
#: and compressobj's default memLevel (DEF_MEM_LEVEL = 8).
_LEVEL = 6
_MEM_LEVEL = 8

_Proto = Union[FrameDecoder, FrameProtocol]

_TEXT, _BINARY, _CONTINUATION = Opcode.TEXT, Opcode.BINARY, Opcode.CONTINUATION
_RSV1 = RsvBits(True, False, False)  # a compressed message's first frame, no other bits


class PerMessageDeflate(_StockPerMessageDeflate):
    """wsproto's ``PerMessageDeflate`` with the payload (de)compression done by fastdeflate.

    Negotiation and parameters are inherited unchanged; only the four frame hooks
    differ. ``_compressor`` / ``_decompressor`` hold ``fastdeflate`` codec objects,
    created on first use with the negotiated window and context-takeover setting.
    """

    def _no_context_takeover(self, proto: _Proto, outbound: bool) -> bool:
        """The no-context-takeover flag of the side that compresses in this direction."""
        client_compresses = proto.client == outbound
        if client_compresses:
            return self.client_no_context_takeover
        return self.server_no_context_takeover

    def _window_bits(self, proto: _Proto, outbound: bool) -> int:
        """The window of the side that compresses in this direction."""
        if proto.client == outbound:
            return int(self.client_max_window_bits)
        return int(self.server_max_window_bits)

    def frame_inbound_header(
        self, proto: _Proto, opcode: Opcode, rsv: RsvBits, payload_length: int
    ) -> Union[CloseReason, RsvBits]:
        if self._decompressor is None and rsv.rsv1:
            # Created here so the stock method (which does the checks and keeps the
            # message state) never creates a zlib object of its own.
            self._decompressor = fastdeflate.Decompressor(
                window_bits=self._window_bits(proto, outbound=False),
                no_context_takeover=self._no_context_takeover(proto, outbound=False),
            )
            _open.track("wsproto", self)  # status(): connections on fastdeflate's codec
        return super().frame_inbound_header(proto, opcode, rsv, payload_length)

    def frame_inbound_payload_data(
        self, proto: _Proto, data: bytes
    ) -> Union[bytes, CloseReason]:
        if not self._inbound_compressed or not self._inbound_is_compressible:
            return data
        assert self._decompressor is not None
        try:
            return self._decompressor.decompress(data, fin=False)
        except fastdeflate.DeflateError:
            return CloseReason.INVALID_FRAME_PAYLOAD_DATA

    def frame_inbound_complete(
        self, proto: _Proto, fin: bool
    ) -> Union[bytes, CloseReason, None]:
        if not fin:
            return None
        if not self._inbound_is_compressible or not self._inbound_compressed:
            self._inbound_compressed = None  # as stock wsproto does
            return None
        assert self._decompressor is not None
        try:
            data = self._decompressor.decompress(b"", fin=True)
        except fastdeflate.DeflateError as exc:
            # (a message decompressed off the loop may fail otherwise: see _Ready)
            return getattr(exc, "reason", CloseReason.INVALID_FRAME_PAYLOAD_DATA)
        self._inbound_compressed = None
        if self._no_context_takeover(proto, outbound=False):
            self._decompressor = None  # as stock wsproto: one per message
        return data

    def _outbound_compressor(self, proto: _Proto) -> Any:
        """The compressor for this direction, created with the negotiated parameters."""
        compressor = self._compressor
        if compressor is None:
            compressor = self._compressor = fastdeflate.Compressor(
                level=_LEVEL,
                window_bits=self._window_bits(proto, outbound=True),
                mem_level=_MEM_LEVEL,
                no_context_takeover=self._no_context_takeover(proto, outbound=True),
            )
            _open.track("wsproto", self)  # (the same object: counted once)
        return compressor

    def frame_outbound(
        self, proto: _Proto, opcode: Opcode, rsv: RsvBits, data: bytes, fin: bool
    ) -> tuple[RsvBits, bytes]:
        # (runs for every frame sent: the common case tested first, by identity)
        if (opcode is not _TEXT and opcode is not _BINARY and opcode is not _CONTINUATION
                and not self._compressible_opcode(opcode)):
            return (rsv, data)
        compressor = self._compressor
        if compressor is None:
            compressor = self._outbound_compressor(proto)
        if fin and opcode is not _CONTINUATION:
            shared = _shared.get()
            if shared is not None and data == shared:
                data = shared  # the same bytes: one object for every compressor
        # Like wsproto: fragments are not flushed, the end of the message is.
        # Decided on a message's first frame, and every frame of it follows (a
        # message sent as it is: None for each, its bytes counted). (A message
        # compressed off the loop: a `_Prepared` compressor gives its payload.)
        payload = compressor.compress_or_skip(data, fin, flush=False)
        if fin and compressor.no_context_takeover:
            self._compressor = None  # as stock wsproto: one per message
        if payload is None:  # sent as it is (RSV1 clear), the compressor untouched
            return (rsv, data)
        if opcode is not _CONTINUATION:
            rsv = _RSV1 if not (rsv[1] or rsv[2]) else RsvBits(True, rsv[1], rsv[2])
        return (rsv, payload)


#: The encoded message of the broadcast under way in this thread or task, if any.
_shared: contextvars.ContextVar[Optional[bytes]] = contextvars.ContextVar(
    "fastdeflate_wsproto_shared", default=None
)


@contextlib.contextmanager
def broadcasting(message: Message) -> Iterator[bytes]:
    """Inside, a whole message equal to ``message`` that a wsproto connection of this
    thread (or asyncio task) sends is compressed once per group of connections.

    For servers that call wsproto's ``send()`` themselves; only the compression is
    shared, the bytes on the wire are unchanged::

        with broadcasting(text):          # simple-websocket
            for client in clients:
                client.send(text)

        with broadcasting(text):          # uvicorn --ws wsproto (Starlette, FastAPI)
            for websocket in room:
                await websocket.send_text(text)

    Yields ``message`` encoded (UTF-8 for a ``str``).
    """
    data, _ = encode(message)
    token = _shared.set(data)
    try:
        yield data
    finally:
        _shared.reset(token)


def _sending_fragments(connection: Union[wsproto.WSConnection, Connection]) -> bool:
    """True while a connection is in the middle of a fragmented message of its own."""
    inner = getattr(connection, "connection", connection)  # a WSConnection's Connection
    return getattr(getattr(inner, "_proto", None), "_outbound_opcode", None) is not None


def broadcast(
    connections: Iterable[Union[wsproto.WSConnection, Connection]],
    message: Message,
    *,
    text: Optional[bool] = None,
) -> list[bytes]:
    """What each connection's ``send()`` of ``message`` gives, compressed once per group.

    Returns one ``bytes`` per connection, in order, for the caller to write to that
    connection's socket (all of them: each compressor has moved on). A ``str`` is sent
    as a ``TextMessage``, bytes-like as a ``BytesMessage`` (``text`` forces one or the
    other). A connection not open, or in the middle of a fragmented message of its own
    (it would be corrupted), gets ``b""``; so does one whose ``send()`` raises, with a
    warning on the ``fastdeflate`` logger.
    """
    data, is_text = encode(message, text)
    if is_text:
        event: Union[TextMessage, BytesMessage] = TextMessage(
            data=message if isinstance(message, str) else data.decode("utf-8"))
    else:
        event = BytesMessage(data=data)
    failures = Failures(False)
    out: list[bytes] = []
    token = _shared.set(data)
    try:
        for connection in connections:
            if connection.state is not ConnectionState.OPEN:
                out.append(b"")
            elif _sending_fragments(connection):
                failures.add("sending a fragmented message")
                out.append(b"")
            else:
                try:
                    out.append(connection.send(event))
                except Exception as exc:
                    failures.add("failed to write message", exc)
                    out.append(b"")
    finally:
        _shared.reset(token)
    return out


# -- Large messages off the event loop (fastdeflate.set_off_loop_size) -----------------
#
# uvicorn ``--ws wsproto`` (``WSProtocol.send``) and hypercorn (``WSStream.app_send``)
# send a message of at least ``fastdeflate.set_off_loop_size()`` bytes compressed in a
# worker thread (fastdeflate/integrations/_outbox.py). Meanwhile every frame of that
# connection is held where wsproto makes it, at the connection's ``send(event)`` (an
# instance attribute returning b"", which both servers write as nothing): later
# messages, ping replies, keepalive pings, close frames. They are made and written
# after the large message, in order.


def _inner(connection: Any) -> Any:
    """A ``WSConnection``'s ``Connection`` (None before the handshake), or ``connection``."""
    if isinstance(connection, wsproto.WSConnection):
        return connection.connection
    return connection


def _ours(connection: Any) -> Optional[PerMessageDeflate]:
    """The connection's fastdeflate extension, if it is its only one and the connection
    is open and between messages (not in a fragmented message of its own)."""
    inner = _inner(connection)
    proto = getattr(inner, "_proto", None)
    if proto is None or inner.state is not ConnectionState.OPEN:
        return None
    extensions = proto.extensions
    if (len(extensions) != 1 or type(extensions[0]) is not PerMessageDeflate
            or proto._outbound_opcode is not None):
        return None
    return extensions[0]


def _sendable(connection: Any, event: Any) -> bool:
    """True if wsproto's ``send(event)`` makes frames in the connection's state now."""
    state = connection.state
    if isinstance(event, (_WSMessage, Ping, Pong)):
        return state is ConnectionState.OPEN
    if isinstance(event, CloseConnection):
        return state is ConnectionState.OPEN or state is ConnectionState.REMOTE_CLOSING
    return False


class _InContext:
    """A held message and its sender's context."""

    __slots__ = ("event", "context")

    def __init__(self, event: Any, context: contextvars.Context) -> None:
        self.event = event
        self.context = context


class _ConnectionOutbox(_outbox.Outbox):
    """A wsproto connection's frames, held at its ``send(event)``; the bytes made when
    they are written collect in `out` for `_push` to hand to the transport."""

    def __init__(self, connection: Any) -> None:
        super().__init__()
        self._connection = connection
        self.out: list[bytes] = []

    def _hold(self) -> None:
        self._connection.send = self._keep_event

    def _unhold(self) -> None:
        self._connection.__dict__.pop("send", None)

    def _keep_event(self, event: Any) -> bytes:
        """The held ``send(event)``: what wsproto would refuse now it refuses (it
        raises), and the reply to the peer's close goes at once (nothing held can follow
        it: data frames need an open connection; servers close the TCP connection right
        after it); the rest waits its turn (a mutable payload copied)."""
        connection = self._connection
        if not _sendable(connection, event) or (
                connection.state is ConnectionState.REMOTE_CLOSING
                and isinstance(event, CloseConnection)):
            return type(connection).send(connection, event)
        if isinstance(event, _WSMessage):
            if not isinstance(event.data, (bytes, str)):
                event = dataclasses.replace(event, data=bytes(event.data))
            # compressed when written, in the sender's context (uncompressed(), a
            # broadcasting() block)
            event = _InContext(event, contextvars.copy_context())
        self.keep(event)
        return b""

    def _write(self, event: Any) -> None:
        connection = self._connection
        try:
            if type(event) is _InContext:
                data = event.context.run(type(connection).send, connection, event.event)
            else:
                data = type(connection).send(connection, event)
        except LocalProtocolError:
            return  # the connection's state moved on (closed meanwhile): dropped
        except Exception:  # never leave the connection held
            _logger.warning("fastdeflate: could not write a held frame", exc_info=True)
            return
        if data:
            self.out.append(data)

    def take(self) -> bytes:
        """The bytes written since the last call."""
        out = b"".join(self.out)
        self.out.clear()
        return out


class _Prepared:
    """The extension's compressor while wsproto frames a message compressed off the
    loop (see `_send_large`): the whole message of ``size`` bytes it is given gets
    ``payload`` (None: sent as it is); anything else goes to the real ``codec``."""

    __slots__ = ("size", "payload", "codec", "no_context_takeover")

    def __init__(self, size: int, payload: Optional[bytes], codec: Any) -> None:
        self.size = size
        self.payload = payload
        self.codec = codec
        self.no_context_takeover = codec.no_context_takeover

    def compress_or_skip(self, data: Any, fin: bool = True,
                         flush: bool = False) -> Optional[bytes]:
        if fin and len(data) == self.size:
            self.size = -1  # once: while its connection is held, it is the only one
            return self.payload
        return self.codec.compress_or_skip(data, fin, flush=flush)


async def _send_large(outbox: _ConnectionOutbox, extension: PerMessageDeflate,
                      data: Union[str, bytes], after: Optional[Any] = None,
                      gone: Optional[Any] = None) -> bool:
    """Compress ``data`` (a whole message) off the loop, then write it through the
    connection's own ``send`` (frame_outbound() takes the payload), if the connection
    is still open (and not ``gone()``). ``after()``: called right after it is written.
    False if it was not (closed meanwhile)."""
    connection = outbox._connection
    compressor = extension._outbound_compressor(_inner(connection)._proto)
    size = 0
    written = False

    def compress() -> Optional[bytes]:
        nonlocal size
        raw = data.encode("utf-8") if isinstance(data, str) else data
        shared = _shared.get()
        if shared is not None and raw == shared:
            raw = shared  # a broadcast: the same object for every compressor
        size = len(raw)
        return compressor.compress_or_skip(raw, True, flush=False)

    def write(payload: Optional[bytes]) -> None:
        nonlocal written
        if _ours(connection) is not extension or (gone is not None and gone()):
            return  # closed meanwhile: dropped, as a write to a closed connection
        written = True
        text = isinstance(data, str)
        if payload is None:  # sent as it is (RSV1 clear): wsproto frames the data
            event: _WSMessage = TextMessage(data=data) if text else BytesMessage(data=data)
            prepared = _Prepared(size, None, compressor)
        else:  # an empty message wsproto frames with this payload, copying nothing big
            event = TextMessage(data="") if text else BytesMessage(data=b"")
            prepared = _Prepared(0, payload, compressor)
        # (not an attribute added to the extension: its objects keep sharing their
        # attribute table, and an idle one carries nothing more)
        extension._compressor = prepared
        try:
            outbox._write(event)
        finally:
            if extension._compressor is prepared:  # (None: no context takeover)
                extension._compressor = compressor
        if after is not None:
            after()

    await outbox.send(compress, write, compressor.reset)
    return written


def _outbox_of(owner: Any, make: Any) -> Any:
    outbox = owner.__dict__.get("_fastdeflate_outbox")
    if outbox is None:
        outbox = owner._fastdeflate_outbox = make()
    return outbox


def _payload(message: Any) -> Any:
    """An ASGI ``websocket.send``'s message: str, bytes (a mutable buffer copied), or
    None if it has neither."""
    body = message.get("bytes")
    if body is not None:
        return body if type(body) is bytes else bytes(body)
    text = message.get("text")
    return text if isinstance(text, str) else None


class _UvicornOutbox(_ConnectionOutbox):
    """uvicorn ``--ws wsproto``: the bytes go to the transport (if not closing)."""

    def __init__(self, protocol: Any) -> None:
        super().__init__(protocol.conn)
        self._transport = protocol.transport

    def _push(self) -> None:
        out = self.take()
        if out and not self._transport.is_closing():
            self._transport.write(out)


def _uvicorn_send(stock: Any) -> Any:
    """uvicorn's ``wsproto`` ASGI ``send``, large messages off the loop."""

    @functools.wraps(stock)
    async def send(self: Any, message: Any) -> None:
        if (message.get("type") != "websocket.send" or not self.handshake_complete
                or self.close_sent or self.response_started or self.disconnected):
            return await stock(self, message)
        data = _payload(message)
        extension = _ours(self.conn)
        if extension is None or data is None or not _outbox.large(data):
            return await stock(self, message)
        await self.writable.wait()  # (returns at once when writable: nothing overtakes)
        if self.disconnected or self.close_sent or _ours(self.conn) is not extension:
            return await stock(self, message)  # (raises or drops as stock does)
        outbox = _outbox_of(self, lambda: _UvicornOutbox(self))
        if not await _send_large(outbox, extension, data, gone=lambda: self.disconnected):
            # closed meanwhile: what stock's send raises then (the peer's close came
            # first: wsproto's LocalProtocolError; the connection lost: disconnected)
            from uvicorn.protocols.utils import ClientDisconnected

            raise ClientDisconnected()

    return send


class _HypercornOutbox(_ConnectionOutbox):
    """hypercorn's ``WSStream``: its ``send`` (to the HTTP protocol) is a coroutine, so
    what is written goes into a queue that a task sends in order. The stream's ``send``
    is held too, from the hold until that queue is empty: the ends of the stream
    (``EndData``, ``StreamClosed``) keep their place after held frames, and nothing
    written meanwhile overtakes the queue."""

    def __init__(self, stream: Any, data_event: type) -> None:
        super().__init__(stream.connection)
        self._data = data_event  # hypercorn.protocol.events.Data
        self._stream = stream
        self._stream_send = stream.__dict__["send"]  # hypercorn's, per stream
        self._queue: deque = deque()  # events for hypercorn's send, and markers
        self._sender: Optional[asyncio.Task] = None

    def _hold(self) -> None:
        super()._hold()
        self._stream.send = self._held_send

    async def _held_send(self, event: Any) -> None:
        if type(event) is self._data and not event.data:
            return  # the nothing a held wsproto send() gave
        if self.holding:
            self.keep(event)
        else:
            self._queue.append(event)
            self._send_soon()

    def _write(self, item: Any) -> None:
        if isinstance(item, (_WSEvent, _InContext)):
            super()._write(item)
        else:  # one of hypercorn's own events, after the bytes before it
            self._queue_out()
            self._queue.append(item)

    def _queue_out(self) -> None:
        out = self.take()
        if out:
            self._queue.append(self._data(stream_id=self._stream.stream_id, data=out))

    def mark(self) -> "asyncio.Future[None]":
        """A future done when what was written so far has been sent."""
        self._queue_out()
        marker = asyncio.get_running_loop().create_future()
        self._queue.append(marker)
        return marker

    def _push(self) -> None:
        self._queue_out()
        self._send_soon()

    def _send_soon(self) -> None:
        if self._sender is None and self._queue:
            self._sender = asyncio.get_running_loop().create_task(self._send_queue())

    async def _send_queue(self) -> None:
        queue = self._queue
        try:
            while queue:
                item = queue.popleft()
                if isinstance(item, asyncio.Future):
                    if not item.done():
                        item.set_result(None)
                    continue
                try:
                    await self._stream_send(item)
                except Exception:
                    _logger.warning("fastdeflate: could not send a held frame",
                                    exc_info=True)
        except asyncio.CancelledError:  # (the loop is going away: nothing more is sent)
            for item in queue:
                if isinstance(item, asyncio.Future) and not item.done():
                    item.set_result(None)
            queue.clear()
            raise
        finally:
            self._sender = None
            if (not queue and not self.holding
                    and self._stream.__dict__.get("send") == self._held_send):
                self._stream.send = self._stream_send


def _hypercorn_app_send(stock: Any) -> Any:
    """hypercorn's ``WSStream.app_send`` (the ASGI ``send``), large messages off the
    loop (on asyncio; on trio as stock)."""
    from hypercorn.protocol.events import Data
    from hypercorn.protocol.ws_stream import ASGIWebsocketState

    connected = ASGIWebsocketState.CONNECTED

    @functools.wraps(stock)
    async def app_send(self: Any, message: Any) -> None:
        if (self.closed or message is None or message.get("type") != "websocket.send"
                or self.state is not connected):
            return await stock(self, message)
        data = _payload(message)
        extension = _ours(self.connection)
        if extension is None or data is None or not _outbox.large(data):
            return await stock(self, message)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # trio
            return await stock(self, message)
        outbox = _outbox_of(self, lambda: _HypercornOutbox(self, Data))
        marker: list[asyncio.Future[None]] = []
        await _send_large(outbox, extension, data, lambda: marker.append(outbox.mark()))
        if marker:  # sent on (or the stream gone): as stock's send returns
            await marker[0]

    return app_send


#: The ASGI send paths that compress large messages off the loop, put in place by
#: enable() (when uvicorn's or hypercorn's module is imported, if later).
_SENDS = (
    _outbox.LatePatch("uvicorn.protocols.websockets.wsproto_impl:WSProtocol", "send",
                      _uvicorn_send),
    _outbox.LatePatch("hypercorn.protocol.ws_stream:WSStream", "app_send",
                      _hypercorn_app_send),
)


# -- Large received messages off the event loop ----------------------------------------
#
# uvicorn ``--ws wsproto`` (``WSProtocol.data_received``, which feeds wsproto and handles
# every event it parses at once) and hypercorn (``WSStream.handle``, awaited per event,
# in order) give wsproto a connection's bytes, and wsproto decompresses as it parses, on
# the loop. enable() puts a `_frames.Gate` in front of them once the connection is open
# with this module's extension: a large compressed message and the bytes after it are
# held while a worker thread unmasks, joins and decompresses it with the connection's own
# codec, started only once wsproto has parsed everything before it (nothing else uses
# the codec meanwhile: the bytes that would are held). wsproto then gets, in the
# message's place, one empty frame with its opcode and RSV1 (the stand-in), for which
# the extension returns the decompressed data (its decompressor is a `_Ready` meanwhile), and
# then the bytes after it. So wsproto never copies nor unmasks the compressed bytes on
# the loop; frames, events, their order and the servers' handling stay the same. A
# message whose frames wsproto would refuse or treat otherwise (other reserved bits, a
# control frame between its fragments, an unmasked frame, a length not minimally
# encoded) is declined: wsproto gets it as it is and refuses it as stock does.
#
# Limits and close codes stay the servers'. Both count a message after decompression
# (uvicorn ``ws_max_size``, UTF-8 bytes; hypercorn ``websocket_max_message_size``,
# characters of a text message); the thread stops at the limit (four times it for a
# text message: its characters are 1 to 4 bytes each), and a message over it gets a
# stand-in of as many spaces as the limit plus one, which the server refuses as it
# refuses the message (1009); corrupt data fails with wsproto's close code (1007).

from fastdeflate import _off_loop  # noqa: E402
from fastdeflate.integrations import _frames  # noqa: E402

try:  # wsproto's own masker: translate() at C speed, 1 ms per MB
    from wsproto.frame_protocol import XorMaskerSimple as _Masker
except ImportError:  # pragma: no cover - in every wsproto 1.x
    _Masker = None

_NONE: Any = object()  # no outcome waiting for its stand-in


class _Refused(fastdeflate.DeflateError):
    """How a message decompressed off the loop fails, where the extension expects its
    codec's error: with the close reason to fail the connection with."""

    def __init__(self, reason: CloseReason) -> None:
        super().__init__(reason.name)
        self.reason = reason


class _Ready:
    """The extension's decompressor while wsproto parses a stand-in frame: it gives the
    outcome of the message decompressed off the loop (no instance attribute is added
    to the extension: its objects keep sharing their attribute table)."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome

    def decompress(self, data: Any, fin: bool = False) -> bytes:
        if not fin:
            return b""
        if isinstance(self.outcome, CloseReason):
            raise _Refused(self.outcome)
        return self.outcome


def _parsing_stand_in(extension: PerMessageDeflate, outcome: Any) -> Any:
    """Give ``extension`` a `_Ready` for ``outcome``; returns what puts its codec back."""
    codec = extension._decompressor
    ready = extension._decompressor = _Ready(outcome)

    def restore() -> None:
        if extension._decompressor is ready:  # (None: no context takeover, as stock)
            extension._decompressor = codec

    return restore


def _unmasked(data: memoryview, mask: Optional[bytes]) -> Any:
    if mask is None:
        return data
    if _Masker is not None:
        return _Masker(mask).process(data)
    out = bytearray(data)
    _frames.unmask(out, mask)
    return out


def _inflate(decompress: Any, frames: list[tuple[memoryview, Optional[bytes]]],
             max_size: int) -> Any:
    """In a worker thread: one message's frames unmasked, joined and decompressed; the
    data, or what decompressing it raised."""
    payload = _frames.joined(frames, _unmasked)
    try:
        return decompress(payload, True, max_size)
    except Exception as exc:  # turned into the server's answer on the loop
        return exc


def _plain_opcode(frames: list[tuple[memoryview, Optional[bytes]]]) -> Optional[int]:
    """The opcode of a held message (its data frames' payloads, views of the gate's
    copy of the message from its first header) if wsproto would take its frames as
    they are from a client: masked, RSV1 on the first frame only and no other reserved
    bit, continuations after it, lengths minimally encoded, no control frame between
    them; else None."""
    message = frames[0][0].obj
    if not isinstance(message, (bytes, bytearray)):
        return None
    pos = 0
    for index, (payload, mask) in enumerate(frames):
        if mask is None or pos + 2 > len(message):
            return None
        first, second = message[pos], message[pos + 1]
        opcode = first & 0x0F
        if index == 0:
            if first & 0x70 != 0x40 or opcode not in (1, 2):
                return None
        elif first & 0x70 or opcode != 0:
            return None
        length, short = len(payload), second & 0x7F
        if short == 126:
            head = 4 if length > 125 else 0
        elif short == 127:
            head = 10 if length > 0xFFFF else 0
        else:
            head = 2 if short == length else 0
        if not head or message[pos + head:pos + head + 4] != mask:
            return None
        pos += head + 4 + length
    if pos != len(message):
        return None
    return message[0] & 0x0F


def _inbound_ours(connection: Any) -> Optional[PerMessageDeflate]:
    """The open connection's fastdeflate extension, if it is its only one."""
    proto = getattr(connection, "_proto", None)
    if proto is None or connection.state is not ConnectionState.OPEN:
        return None
    extensions = proto.extensions
    if len(extensions) != 1 or type(extensions[0]) is not PerMessageDeflate:
        return None
    return extensions[0]


def _between_messages(connection: Any, extension: PerMessageDeflate) -> bool:
    """True if wsproto has parsed every byte it was given, ended every message, can
    parse more, and the connection is open with ``extension``."""
    try:
        proto = connection._proto
        decoder = proto._frame_decoder
        return (_inbound_ours(connection) is extension
                and decoder.header is None and not len(decoder.buffer)
                and proto._message_decoder.opcode is None
                and extension._inbound_compressed is None
                and proto._parse_more.gi_frame is not None)  # (not failed)
    except AttributeError:  # pragma: no cover - another wsproto
        return False


class _Receiver:
    """A server connection's inbound bytes behind a `_frames.Gate`, for wsproto
    ``connection`` with ``extension``; ``limit``: the server's message size limit."""

    def __init__(self, connection: Any, extension: PerMessageDeflate, limit: int) -> None:
        self.connection = connection
        self.extension = extension
        self.limit = limit
        self.outcome: Any = _NONE  # the held message's, for its stand-in
        self.stand_in = b""  # the held message's stand-in frame
        self.gate = _frames.Gate(self._forward, self._start, self._ready,
                                 limit=4 * limit)

    def _forward(self, data: bytes) -> Any:
        raise NotImplementedError

    def _start(self, frames: list[tuple[memoryview, Optional[bytes]]]) -> Any:
        raise NotImplementedError

    def prepare(self, frames: list[tuple[memoryview, Optional[bytes]]]) -> Optional[int]:
        """The bound to decompress the held message to, if it can be decompressed off
        the loop (its stand-in made); else None."""
        opcode = _plain_opcode(frames)
        if opcode is None:
            return None
        self.stand_in = bytes((0xC0 | opcode, 0x80, 0, 0, 0, 0))  # FIN RSV1, masked, 0
        return 4 * self.limit if opcode == 1 else self.limit

    def job(self, frames: list[tuple[memoryview, Optional[bytes]]],
            max_size: int) -> "Optional[asyncio.Future[Any]]":
        """The held message decompressed in a worker thread, if wsproto is between
        messages (else None: it gets the message as it is)."""
        connection, extension = self.connection, self.extension
        if not _between_messages(connection, extension):
            return None
        codec = extension._decompressor
        if codec is None:
            proto = connection._proto
            codec = extension._decompressor = fastdeflate.Decompressor(
                window_bits=extension._window_bits(proto, outbound=False),
                no_context_takeover=extension._no_context_takeover(proto, outbound=False),
            )
            _open.track("wsproto", extension)  # (as frame_inbound_header() does)
        elif not isinstance(codec, fastdeflate.Decompressor):  # pragma: no cover
            return None
        return _off_loop.run(asyncio.get_running_loop(), _inflate, codec.decompress, frames,
                             max_size)

    def _ready(self, job: "asyncio.Future[Any]") -> None:
        """The job's outcome, for the stand-in the gate lets through next."""
        if job.cancelled():
            self.outcome = CloseReason.INTERNAL_ERROR  # (the codec may be in use)
            return
        result = job.result()
        if result is None:  # declined (hypercorn): wsproto gets the message as it is
            return
        _off_loop.counted(decompressed=1)
        if isinstance(result, fastdeflate.MessageTooBig):
            result = b" " * (self.limit + 1)  # refused by the server, as it is
        elif isinstance(result, fastdeflate.DeflateError):
            result = CloseReason.INVALID_FRAME_PAYLOAD_DATA  # as stock
        elif isinstance(result, BaseException):
            result = CloseReason.INTERNAL_ERROR  # (a MemoryError, say)
        self.outcome = result

    def take(self, data: bytes) -> tuple[bytes, Any]:
        """What to give wsproto for ``data`` the gate lets through: the stand-in and
        the outcome for the message decompressed, else ``data`` (and _NONE)."""
        outcome = self.outcome
        if outcome is _NONE:
            return data, outcome
        self.outcome = _NONE
        return self.stand_in, outcome


class _UvicornReceiver(_Receiver):
    """uvicorn's ``WSProtocol``: its ``data_received`` parses and handles every event
    of the bytes it is given at once, so wsproto is between messages when a large one
    begins (checked); the transport is paused while the message is decompressed."""

    def __init__(self, protocol: Any, stock: Any, connection: Any,
                 extension: PerMessageDeflate, limit: int) -> None:
        super().__init__(connection, extension, limit)
        self._protocol = protocol
        self._stock = stock  # uvicorn's data_received
        self._paused = False

    def _forward(self, data: bytes) -> Any:
        data, outcome = self.take(data)
        if outcome is _NONE:
            return self._stock(self._protocol, data)
        restore = _parsing_stand_in(self.extension, outcome)
        try:
            return self._stock(self._protocol, data)
        finally:
            restore()

    def _start(self, frames: list[tuple[memoryview, Optional[bytes]]]) -> Any:
        protocol = self._protocol
        if protocol.close_sent or protocol.disconnected:
            return None  # (stock parses it only to drop it)
        max_size = self.prepare(frames)
        job = None if max_size is None else self.job(frames, max_size)
        if job is not None and not protocol.read_paused:
            transport = protocol.transport
            if not transport.is_closing():  # hold no more than what is here already
                transport.pause_reading()
                self._paused = True
        return job

    def _ready(self, job: "asyncio.Future[Any]") -> None:
        super()._ready(job)
        if self._paused:
            self._paused = False
            protocol = self._protocol
            if not protocol.read_paused and not protocol.transport.is_closing():
                protocol.transport.resume_reading()


def _uvicorn_receiver(protocol: Any, stock: Any) -> Any:
    """The connection's receiver; False if it has none (the peer's bytes go to uvicorn
    as they come); None before the handshake."""
    connection = _inner(protocol.conn)
    if connection is None:
        return None  # (the handshake)
    extension = _inbound_ours(connection)
    limit = getattr(getattr(protocol, "config", None), "ws_max_size", 0)
    receiver: Any = False
    if (extension is not None and type(limit) is int and limit > 0
            and _between_messages(connection, extension)):
        receiver = _UvicornReceiver(protocol, stock, connection, extension, limit)
    protocol._fastdeflate_receiver = receiver
    return receiver


def _uvicorn_data_received(stock: Any) -> Any:
    """uvicorn's ``wsproto`` ``data_received``: large messages decompressed off the
    loop."""

    @functools.wraps(stock)
    def data_received(self: Any, data: bytes) -> None:
        receiver = self.__dict__.get("_fastdeflate_receiver")
        if receiver is None:
            receiver = _uvicorn_receiver(self, stock)
        if not receiver:
            return stock(self, data)
        receiver.gate.feed(data)
        return None

    return data_received


def _uvicorn_connection_lost(stock: Any) -> Any:
    """uvicorn's ``wsproto`` ``connection_lost``: after a message held by the gate."""

    @functools.wraps(stock)
    def connection_lost(self: Any, exc: Optional[BaseException]) -> None:
        receiver = self.__dict__.get("_fastdeflate_receiver")
        if not receiver:
            return stock(self, exc)
        receiver.gate.feed_eof(functools.partial(stock, self, exc))
        return None

    return connection_lost


class _HypercornReceiver(_Receiver):
    """hypercorn's ``WSStream``: its ``handle`` awaits the handling of each event, so
    the bytes the gate lets through queue up and `handle` gives them to hypercorn in
    order, and it starts a held message's job only after those before it: the gate's
    job is a future `handle` resolves (None when wsproto is not between messages then:
    it gets the message as it is). Meanwhile hypercorn reads nothing more."""

    def __init__(self, stream: Any, connection: Any, extension: PerMessageDeflate,
                 limit: int) -> None:
        super().__init__(connection, extension, limit)
        self._stream = stream
        self._pending: deque = deque()  # (bytes, outcome) for hypercorn, in order
        self._waiting: Optional[tuple[asyncio.Future, list, int]] = None

    def _forward(self, data: bytes) -> None:
        self._pending.append(self.take(data))

    def _start(self, frames: list[tuple[memoryview, Optional[bytes]]]) -> Any:
        max_size = self.prepare(frames)
        if max_size is None:
            return None
        job = asyncio.get_running_loop().create_future()
        self._waiting = (job, frames, max_size)
        return job

    async def handle(self, stock: Any, event: Any) -> None:
        loop = asyncio.get_running_loop()
        self.gate.feed(event.data)
        pending = self._pending
        while True:
            while pending:
                data, outcome = pending.popleft()
                part = dataclasses.replace(event, data=data)
                if outcome is _NONE:
                    await stock(self._stream, part)
                    continue
                restore = _parsing_stand_in(self.extension, outcome)
                try:
                    await stock(self._stream, part)
                finally:
                    restore()
            waiting, self._waiting = self._waiting, None
            if waiting is None:
                return
            job, frames, max_size = waiting
            result = None
            work = self.job(frames, max_size)
            if work is not None:
                try:
                    result = await work
                except BaseException:
                    job.cancel()  # (hypercorn goes away: the stand-in fails with 1011)
                    raise
            passed = loop.create_future()  # after the gate's callback, which forwards
            job.add_done_callback(lambda _: passed.done() or passed.set_result(None))
            job.set_result(result)
            await passed


def _hypercorn_receiver(stream: Any) -> Any:
    """The stream's receiver; False if it has none; None before the handshake."""
    handshake = getattr(stream, "handshake", None)
    if stream.closed or handshake is None or not handshake.accepted:
        return None
    receiver: Any = False
    connection = getattr(stream, "connection", None)
    extension = None if connection is None else _inbound_ours(connection)
    buffer = getattr(stream, "buffer", None)
    limit = getattr(buffer, "max_length", 0)
    if extension is not None and type(limit) is int and limit > 0:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # trio: as stock
            extension = None
        if extension is not None and _between_messages(connection, extension):
            receiver = _HypercornReceiver(stream, connection, extension, limit)
    stream._fastdeflate_receiver = receiver
    return receiver


def _hypercorn_handle(stock: Any) -> Any:
    """hypercorn's ``WSStream.handle``, large messages decompressed off the loop (on
    asyncio; on trio as stock)."""
    from hypercorn.protocol.events import Body, Data

    @functools.wraps(stock)
    async def handle(self: Any, event: Any) -> None:
        if type(event) is not Data and type(event) is not Body:
            return await stock(self, event)
        receiver = self.__dict__.get("_fastdeflate_receiver")
        if receiver is None:
            receiver = _hypercorn_receiver(self)
        if not receiver:
            return await stock(self, event)
        await receiver.handle(stock, event)

    return handle


#: The receive paths that decompress large messages off the loop, put in place by
#: enable() (when uvicorn's or hypercorn's module is imported, if later).
_RECEIVES = (
    _outbox.LatePatch("uvicorn.protocols.websockets.wsproto_impl:WSProtocol",
                      "data_received", _uvicorn_data_received),
    _outbox.LatePatch("uvicorn.protocols.websockets.wsproto_impl:WSProtocol",
                      "connection_lost", _uvicorn_connection_lost),
    _outbox.LatePatch("hypercorn.protocol.ws_stream:WSStream", "handle",
                      _hypercorn_handle),
)


def _fastdeflate_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``PerMessageDeflate.__new__`` while enabled: a fastdeflate object where a stock
    one is asked for (the stock ``__init__`` then runs on it, as on any object)."""
    return object.__new__(PerMessageDeflate if cls is _StockPerMessageDeflate else cls)


def _stock_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``PerMessageDeflate.__new__`` after `disable()`: what the stock class does
    without one (``object.__new__``; the arguments go to ``__init__``)."""
    return object.__new__(cls)


def _own_new() -> Any:
    """The ``__new__`` in the stock class's own dict (`_stock_new()` for none); the
    functions of an earlier import of this module count as this one's."""
    current = _StockPerMessageDeflate.__dict__.get("__new__", _stock_new)
    if getattr(current, "__module__", None) == __name__:
        return globals().get(current.__qualname__, current)
    return current


#: What `disable()` puts back: the ``__new__`` `enable()` replaced last
#: (`_stock_new()` for none; never this adapter's).
_replaced: Any = _stock_new


def enable() -> None:
    """Make every ``wsproto.extensions.PerMessageDeflate()`` created from now on use fastdeflate.

    Idempotent and thread-safe; works whether or not wsproto (or uvicorn,
    simple-websocket) was imported before. Objects that already exist are not changed:
    connections already open keep wsproto's own codec.
    """
    global _replaced
    with _lock:
        current = _own_new()
        if current is not _fastdeflate_new:
            _replaced = current
            _StockPerMessageDeflate.__new__ = _fastdeflate_new  # type: ignore[method-assign]
    for patch in _SENDS + _RECEIVES:  # (large messages off the loop: uvicorn, hypercorn)
        patch.apply()


def disable() -> None:
    """Undo `enable()`: the ``__new__`` it replaced is put back (`_stock_new()`
    where the stock class had none). Idempotent. New connections only: connections
    opened while enabled keep fastdeflate's codec until they close
    (``fastdeflate.status()["libraries"]["wsproto"]["connections"]`` counts them).

    Only if fastdeflate's ``__new__`` is still in place: one installed over it since
    (a wrapper, say) is left as it is.
    """
    with _lock:
        if _own_new() is _fastdeflate_new:
            _StockPerMessageDeflate.__new__ = _replaced  # type: ignore[method-assign]
    for patch in _SENDS + _RECEIVES:
        patch.remove()


def is_enabled() -> bool:
    """True between `enable()` and `disable()`."""
    return _own_new() is _fastdeflate_new
