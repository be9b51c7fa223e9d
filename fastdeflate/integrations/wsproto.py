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

Compress what pays: a message that would not get smaller (a known compressed format, a
random-looking one, one that came out no smaller; and, with ``fastdeflate.set_min_size``,
a short one) goes out as it is, RSV1 clear, as RFC 7692 allows, the compressor untouched,
so with context takeover the peer's window never sees it and later messages decode
exactly (`fastdeflate.Compressor.compress_or_skip()`; the settings are
``fastdeflate.set_min_size`` and ``fastdeflate.set_skip_incompressible``, the counts
``fastdeflate.status()["sent_uncompressed"]``). Every other message's frames are
stock's. A fragmented message (``Message(..., message_finished=False)`` events) is
decided on its first fragment and the whole message follows. To send messages
uncompressed on purpose, wrap the call that sends them::

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

Tested with wsproto 1.3.2, uvicorn 0.54.0, simple-websocket 1.1.0 (Python 3.11).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Optional, Union

try:
    import wsproto
    import wsproto.extensions as _wsproto_extensions
    from wsproto.connection import Connection, ConnectionState
    from wsproto.events import BytesMessage, TextMessage
    from wsproto.frame_protocol import CloseReason, FrameDecoder, FrameProtocol, Opcode, RsvBits
except ImportError as exc:  # pragma: no cover - wsproto is installed in CI
    raise ImportError(
        "fastdeflate.integrations.wsproto needs the wsproto package "
        "(pip install wsproto)"
    ) from exc

import fastdeflate
from fastdeflate.integrations._fanout import Failures, Message, encode

__all__ = ["PerMessageDeflate", "broadcast", "broadcasting", "enable", "disable",
           "is_enabled"]

_StockPerMessageDeflate = _wsproto_extensions.PerMessageDeflate
_lock = threading.Lock()

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
        except fastdeflate.DeflateError:
            return CloseReason.INVALID_FRAME_PAYLOAD_DATA
        self._inbound_compressed = None
        if self._no_context_takeover(proto, outbound=False):
            self._decompressor = None  # as stock wsproto: one per message
        return data

    def frame_outbound(
        self, proto: _Proto, opcode: Opcode, rsv: RsvBits, data: bytes, fin: bool
    ) -> tuple[RsvBits, bytes]:
        # (runs for every frame sent: the common case tested first, by identity)
        if (opcode is not _TEXT and opcode is not _BINARY and opcode is not _CONTINUATION
                and not self._compressible_opcode(opcode)):
            return (rsv, data)
        compressor = self._compressor
        if compressor is None:
            compressor = self._compressor = fastdeflate.Compressor(
                level=_LEVEL,
                window_bits=self._window_bits(proto, outbound=True),
                mem_level=_MEM_LEVEL,
                no_context_takeover=self._no_context_takeover(proto, outbound=True),
            )
        if fin and opcode is not _CONTINUATION:
            shared = _shared.get()
            if shared is not None and data == shared:
                data = shared  # the same bytes: one object for every compressor
        # Like wsproto: fragments are not flushed, the end of the message is. Decided on
        # a message's first frame, and every frame of it follows (a message sent as it
        # is: None for each, its bytes counted).
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
    simple-websocket) was imported before. Objects that already exist are not changed.
    """
    global _replaced
    with _lock:
        current = _own_new()
        if current is not _fastdeflate_new:
            _replaced = current
            _StockPerMessageDeflate.__new__ = _fastdeflate_new  # type: ignore[method-assign]


def disable() -> None:
    """Undo `enable()`: the ``__new__`` it replaced is put back (`_stock_new()`
    where the stock class had none). Idempotent.

    Only if fastdeflate's ``__new__`` is still in place: one installed over it since
    (a wrapper, say) is left as it is.
    """
    with _lock:
        if _own_new() is _fastdeflate_new:
            _StockPerMessageDeflate.__new__ = _replaced  # type: ignore[method-assign]


def is_enabled() -> bool:
    """True between `enable()` and `disable()`."""
    return _own_new() is _fastdeflate_new
