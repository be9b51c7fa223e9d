"""fastdeflate for autobahn: permessage-deflate through fastdeflate's codec.

One-line use (before or after autobahn is imported; affects connections whose
handshake completes afterwards)::

    import fastdeflate.integrations.autobahn; fastdeflate.integrations.autobahn.enable()

autobahn picks the class that compresses a connection from its PMCE registry,
``autobahn.websocket.compress.PERMESSAGE_COMPRESSION_EXTENSION``, keyed by
extension name: for ``"permessage-deflate"`` its ``"PMCE"`` entry is
``PerMessageDeflate``, whose ``create_from_offer_accept`` /
``create_from_response_accept`` build the per-connection object when the
handshake completes. `PerMessageDeflate` here is a subclass of autobahn's
that does the same with
[`fastdeflate.Compressor`][fastdeflate._fastdeflate.Compressor] /
[`fastdeflate.Decompressor`][fastdeflate._fastdeflate.Decompressor];
it can be registered by hand
(``registry["permessage-deflate"]["PMCE"] = PerMessageDeflate``) or by
`enable()`, which does just that and nothing else; `disable()` puts
autobahn's class back. Offers, responses, accept callbacks
(``setProtocolOptions(perMessageCompressionOffers=..., perMessageCompressionAccept=...)``),
``maxMessagePayloadSize`` (close 1009), corrupt data (close 1007), fragmentation
and the streaming API are autobahn's own, unchanged; (de)compression runs inline
on the event loop, as in stock autobahn.

autobahn has no per-connection choice of class: it reads the registry right after
calling a factory's ``perMessageCompressionAccept`` callback, so a callback that
calls `enable()` or `disable()` before returning picks the class for that
connection (the tests use this to run stock and fastdeflate peers in one process).

A server accepts nothing unless told: `accept_offers()` is the accept callback
that accepts the client's first permessage-deflate offer on autobahn's own terms
(``factory.setProtocolOptions(perMessageCompressionAccept=accept_offers)``); daphne's
opt-in ([`fastdeflate.integrations.daphne`][fastdeflate.integrations.daphne]) sets it on
daphne's factories.

Compress what pays (which messages go out uncompressed, and why: ``fastdeflate._what_pays``):
``sendMessage`` asks ``Compressor.compress_or_skip`` before autobahn compresses, and a
message it declines goes out with autobahn's own ``doNotCompress=True`` (RSV1 clear). A
streamed message (``beginMessage`` + ``sendMessageFrame`` ... ``endMessage``) decides on
its first ``sendMessageFrame``: if that one is passed over, every frame of the message
goes out uncompressed. (Frames written with ``beginMessageFrame`` + ``sendMessageFrameData`` are
never compressed by autobahn; they are sent as given.) These two methods of autobahn's
``WebSocketProtocol`` (all flavours derive from it) are wrapped when a fastdeflate
`PerMessageDeflate` is made for a connection (or by `enable()`, once
autobahn's protocol module is imported); the wrappers pass every other connection's
calls straight on, and `disable()` unwraps them (connections still open then
compress every message, as before). Per message, on the reactor's or event loop's thread::

    with fastdeflate.uncompressed():
        protocol.sendMessage(blob, isBinary=True)

The opt-out is a context variable: it covers what runs inside the block in this task or
thread (autobahn compresses inside ``sendMessage``, before it returns), not other tasks
sending meanwhile. For a streamed message the block must cover its first
``sendMessageFrame``; ``sendPreparedMessage`` decides per connection, as it calls
``sendMessage``.

One message to many connections: autobahn's own ``factory.prepareMessage(payload,
isBinary)`` + ``protocol.sendPreparedMessage(prepared)`` gives every compressed
connection the same payload object, so fastdeflate compresses it once per group;
`broadcast()` does the same from a ``str`` or bytes.

Needs autobahn >= 26.10.1 (so Python 3.11+). Tested with autobahn 26.11.1 (asyncio
flavour) on Python 3.11, and with 26.10.1, the oldest it supports
(.ci/steps/15-oldest-libraries.sh).
"""

from __future__ import annotations

import sys
import threading
import zlib
from typing import Any, Iterable, Optional, Sequence

import fastdeflate
from fastdeflate.integrations import _marks, _open
from fastdeflate.integrations._fanout import Failures, Message, encode
from fastdeflate._forksafe import free_in_child

#: The first autobahn with the decompression interface this adapter implements
#: (``max_output_len`` and ``PayloadCorruptError``); it needs Python 3.11.
MIN_AUTOBAHN = "26.10.1"

try:
    from autobahn.exception import Disconnected, PayloadCorruptError, PayloadExceededError
    from autobahn.websocket import compress as _compress
    from autobahn.websocket.compress_deflate import (
        PerMessageDeflate as _StockPerMessageDeflate,
    )
    from autobahn.websocket.compress_deflate import (
        PerMessageDeflateOffer,
        PerMessageDeflateOfferAccept,
    )
except ImportError as exc:  # pragma: no cover - autobahn is installed in CI
    raise ImportError(
        f"fastdeflate.integrations.autobahn needs autobahn >= {MIN_AUTOBAHN} (Python 3.11+; "
        f"pip install 'autobahn>={MIN_AUTOBAHN}'): {exc}"
    ) from exc

__all__ = ["PerMessageDeflate", "EXTENSION_NAME", "accept_offers", "broadcast", "enable",
           "disable", "is_enabled", "hooks_installed"]

EXTENSION_NAME = "permessage-deflate"
_REGISTRY = _compress.PERMESSAGE_COMPRESSION_EXTENSION


# enable() and disable() read and write the entry and _replaced
_lock = free_in_child(threading.Lock())
#: What `disable()` puts back: the class `enable()` replaced last, the one
#: registered when this module was imported (autobahn's own) until then.
_replaced: type = _marks.stock(_REGISTRY[EXTENSION_NAME]["PMCE"])

#: autobahn's compressor level: it always uses zlib's default (6).
LEVEL = zlib.Z_DEFAULT_COMPRESSION


@_marks.mark
class PerMessageDeflate(_StockPerMessageDeflate):
    """autobahn's ``PerMessageDeflate`` with the codec of fastdeflate.

    Same negotiated attributes, constructors and method contract as autobahn's
    class; only the six (de)compress methods differ. The codec objects are made
    on first use with the parameters autobahn would give zlib.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # a connection compressed by this class: sendMessage may leave messages out
        with _lock:
            _install_hooks()
        _open.track("autobahn", self)  # status(): connections on fastdeflate's codec

    def _send_params(self) -> tuple[int, bool]:
        if self._is_server:
            return self.server_max_window_bits, self.server_no_context_takeover
        return self.client_max_window_bits, self.client_no_context_takeover

    def _receive_params(self) -> tuple[int, bool]:
        if self._is_server:
            return self.client_max_window_bits, self.client_no_context_takeover
        return self.server_max_window_bits, self.server_no_context_takeover

    #: A message's first data, kept (``bytes``) until the message ends or goes on: a
    #: whole message is compressed in one call, which is what lets the same bytes sent
    #: to many connections be compressed once (compress once).
    _pending: Optional[bytes] = None

    #: ``(data, payload, whole)``: a message (``whole``) or a streamed message's first
    #: fragment that `skips()` compressed while deciding, handed to autobahn when it
    #: asks for ``data``'s payload.
    _decided: Optional[tuple[bytes, bytes, bool]] = None
    #: Set when the payload just handed over was the whole message: its end adds nothing.
    _ended = False
    #: Set while a streamed message that `skips()` passed over goes on: its frames are
    #: counted (`skipped_frame()`), and the next message ends it.
    _skipping = False

    def _make_compressor(self) -> Any:
        if self._compressor is None:
            window_bits, no_context_takeover = self._send_params()
            self._compressor = fastdeflate.Compressor(
                level=LEVEL,
                window_bits=window_bits,
                mem_level=self.mem_level,
                no_context_takeover=no_context_takeover,
            )
        return self._compressor

    def skips(self, data: bytes, whole: bool = True) -> bool:
        """Whether ``data`` (a whole message, or a streamed one's first fragment) goes
        out uncompressed: ``Compressor.compress_or_skip`` decides, and the compressor is
        left untouched; otherwise the payload is kept until autobahn asks for it."""
        self._end_skipped()
        payload = self._make_compressor().compress_or_skip(data, whole, flush=whole)
        if payload is None:
            self._skipping = not whole
            return True
        self._decided = (data, payload, whole)
        return False

    def skipped_frame(self, data: bytes) -> None:
        """A later frame of a streamed message sent as it is: counted with the first."""
        self._compressor.compress_or_skip(data, False)

    def _end_skipped(self) -> None:
        """The streamed message sent as it is, if any, has ended (autobahn's
        ``endMessage`` sends its last frame, empty, without the compressor)."""
        if self._skipping:
            self._skipping = False
            self._compressor.compress_or_skip(b"", True)

    def start_compress_message(self) -> None:
        self._end_skipped()
        self._make_compressor()
        self._pending = None
        self._ended = False

    def compress_message_data(self, data: bytes) -> bytes:
        decided = self._decided
        if decided is not None:
            self._decided = None
            if decided[0] is data:
                self._ended = decided[2]
                return decided[1]
        if type(data) is bytes and self._pending is None:
            self._pending = data
            return b""
        pending, self._pending = self._pending, None
        out = b"" if pending is None else self._compressor.compress(pending, False, flush=False)
        return out + self._compressor.compress(data, fin=False, flush=False)

    def end_compress_message(self) -> bytes:
        if self._ended:
            self._ended = False
            return b""
        data, self._pending = self._pending, None
        return self._compressor.compress(b"" if data is None else data, fin=True)

    #: Set once a message went over the size limit. autobahn then fails the
    #: connection but may still feed the rest of the message; its zlib object would
    #: go on inflating quietly, while fastdeflate's refuses after an error, so the
    #: rest is dropped here rather than turned into a second error (which would
    #: stall autobahn's closing handshake).
    _over_limit = False

    def start_decompress_message(self) -> None:
        if self._decompressor is None:
            window_bits, no_context_takeover = self._receive_params()
            self._decompressor = fastdeflate.Decompressor(
                window_bits=window_bits, no_context_takeover=no_context_takeover
            )
        self._decompress_message_size = 0

    def decompress_message_data(
        self, data: bytes, max_output_len: Optional[int] = None
    ) -> bytes:
        if self._over_limit:
            return b""
        # autobahn bounds each call by the smaller of the remaining budgets; the
        # codec bounds the whole message, so add what this message already gave.
        limits = []
        if self.max_message_size is not None:
            limits.append(self.max_message_size - self._decompress_message_size)
        if max_output_len is not None:
            limits.append(max_output_len)
        max_size = (
            self._decompress_message_size + max(0, min(limits)) if limits else None
        )
        try:
            out = self._decompressor.decompress(data, fin=False, max_size=max_size)
        except fastdeflate.MessageTooBig as exc:
            self._over_limit = True
            raise PayloadExceededError(
                "WebSocket message exceeds decompression limit "
                f"(max_message_size={self.max_message_size}, "
                f"max_output_len={max_output_len})"
            ) from exc
        except fastdeflate.DecompressionError as exc:
            raise PayloadCorruptError(f"invalid permessage-deflate data: {exc}") from exc
        self._decompress_message_size += len(out)
        return out

    def end_decompress_message(self) -> None:
        # Like autobahn: the 00 00 ff ff trailer is fed, its (empty) output dropped.
        if self._over_limit:
            return
        try:
            self._decompressor.decompress(b"", fin=True)
        except fastdeflate.DeflateError as exc:
            raise PayloadCorruptError(f"invalid permessage-deflate data: {exc}") from exc


# --- sending: the choice to compress, made before autobahn sets RSV1 ---------------------

def _send_message(self: Any, payload: bytes, isBinary: bool = False,  # noqa: N803
                  fragmentSize: Optional[int] = None, sync: bool = False,
                  doNotCompress: bool = False) -> None:
    """autobahn's ``WebSocketProtocol.sendMessage``, sending a message fastdeflate's
    compressor passes over with its own ``doNotCompress=True`` (RSV1 clear)."""
    pmce = self._perMessageCompress
    if (not doNotCompress and isinstance(pmce, PerMessageDeflate)
            and type(payload) is bytes and type(isBinary) is bool and type(sync) is bool
            and (fragmentSize is None or type(fragmentSize) is int)
            and self.state == self.STATE_OPEN):  # else autobahn raises before compressing
        doNotCompress = pmce.skips(payload)
    return _send_message.__wrapped__(  # type: ignore[attr-defined, no-any-return]
        self, payload, isBinary, fragmentSize, sync, doNotCompress)


def _send_message_frame(self: Any, payload: bytes, sync: bool = False) -> Any:
    """autobahn's ``WebSocketProtocol.sendMessageFrame``: a streamed message whose first
    frame fastdeflate's compressor passes over goes out uncompressed, every frame (each
    counted with it)."""
    pmce = self._perMessageCompress
    if (isinstance(pmce, PerMessageDeflate) and pmce._skipping
            and self.state == self.STATE_OPEN and type(payload) is bytes):
        if self.send_state == self.SEND_STATE_MESSAGE_BEGIN:
            pmce._end_skipped()  # another message: the one sent as it is has ended
        elif not self.send_compressed:
            pmce.skipped_frame(payload)
    if (self.send_state == self.SEND_STATE_MESSAGE_BEGIN and self.send_compressed
            and self.state == self.STATE_OPEN and type(payload) is bytes
            and isinstance(self._perMessageCompress, PerMessageDeflate)
            and self._perMessageCompress.skips(payload, whole=False)):
        self.send_compressed = False  # autobahn's own flag for this message: RSV1 clear
    return _send_message_frame.__wrapped__(self, payload, sync)  # type: ignore[attr-defined]


#: The methods of autobahn's ``WebSocketProtocol`` (the base of every flavour's protocol
#: classes) that are wrapped while fastdeflate's class may compress a connection.
_HOOKS = {"sendMessage": _send_message, "sendMessageFrame": _send_message_frame}
for _hook in _HOOKS.values():
    _marks.mark(_hook)
_PROTOCOL_MODULE = "autobahn.websocket.protocol"  # imported by autobahn, not here


def _protocol_class() -> Optional[type]:
    """autobahn's ``WebSocketProtocol``, or None before its module has defined it."""
    return getattr(sys.modules.get(_PROTOCOL_MODULE), "WebSocketProtocol", None)


def _install_hooks() -> None:
    """Wrap the two methods (under ``_lock``); only once autobahn's protocol module is
    imported (it imports the registry's module half-way, where enabling on import runs):
    a connection makes a `PerMessageDeflate` afterwards, which installs them."""
    protocol = _protocol_class()
    if protocol is None:
        return
    for name, hook in _HOOKS.items():
        current = vars(protocol)[name]
        if current is not hook:
            hook.__wrapped__ = _marks.stock(current)  # type: ignore[attr-defined]
            setattr(protocol, name, hook)


def _remove_hooks() -> None:
    """Put autobahn's own two methods back (under ``_lock``), where ours still are."""
    protocol = _protocol_class()
    if protocol is None:
        return
    for name, hook in _HOOKS.items():
        if vars(protocol).get(name) is hook:
            setattr(protocol, name, hook.__wrapped__)  # type: ignore[attr-defined]


def hooks_installed() -> bool:
    """True while autobahn's ``WebSocketProtocol.sendMessage`` and ``sendMessageFrame``
    are fastdeflate's wrappers (which send what the compressor passes over uncompressed)."""
    protocol = _protocol_class()
    return protocol is not None and all(
        vars(protocol).get(name) is hook for name, hook in _HOOKS.items())


def accept_offers(offers: Sequence[Any]) -> Optional[PerMessageDeflateOfferAccept]:
    """A server's ``perMessageCompressionAccept``: accept the client's first
    permessage-deflate offer on autobahn's own terms, or None (no compression).

    ``PerMessageDeflateOfferAccept(offer)`` with its defaults: the server's window and
    context takeover as the client asked (``server_max_window_bits``,
    ``server_no_context_takeover`` repeated in the response), the client's left as the
    client offered them, memory level 8. Other extensions' offers are passed over.
    """
    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(offer)
    return None


def broadcast(protocols: Iterable[Any], message: Message, *,
              raise_exceptions: bool = False, text: Optional[bool] = None) -> None:
    """Send ``message`` to every open connection, compressed once per group.

    A ``str`` is encoded once and sent as text, bytes-like as binary (``text`` forces
    one or the other); each protocol (asyncio or Twisted) gets the same ``bytes`` object
    through its own ``sendMessage()``, as ``sendPreparedMessage()`` does for compressed
    connections, so framing, ``autoFragmentSize`` and limits stay autobahn's. Protocols
    not open are skipped; so is one in the middle of a streamed message (``beginMessage``),
    which would otherwise be corrupted, and one whose ``sendMessage`` raises: either with
    a warning on the ``fastdeflate`` logger or, with ``raise_exceptions=True``, in an
    ``ExceptionGroup`` raised after the others were sent the message. Like any autobahn
    send, call it from the reactor's or event loop's thread; it never waits for a client.
    """
    data, is_text = encode(message, text)
    failures = Failures(raise_exceptions)
    for protocol in protocols:
        if protocol.state != protocol.STATE_OPEN:
            continue
        if protocol.send_state != protocol.SEND_STATE_GROUND:
            failures.add("sending a fragmented message")
            continue
        try:
            protocol.sendMessage(data, not is_text)
        except Disconnected:
            continue
        except Exception as exc:
            failures.add("failed to write message", exc)
    failures.done()


def enable() -> None:
    """Make autobahn build fastdeflate's `PerMessageDeflate` for new connections.

    Replaces the ``"PMCE"`` entry for ``permessage-deflate`` in autobahn's registry
    and wraps ``WebSocketProtocol.sendMessage`` / ``sendMessageFrame`` if autobahn's
    protocol module is imported (otherwise the first connection does): they let a
    message fastdeflate's compressor passes over go out uncompressed and change
    nothing for connections compressed by another class. Idempotent and thread-safe.
    Connections already open keep autobahn's codec.
    """
    global _replaced
    with _lock:
        _install_hooks()
        entry = _REGISTRY[EXTENSION_NAME]
        if entry["PMCE"] is not PerMessageDeflate:
            _replaced = _marks.stock(entry["PMCE"])
            entry["PMCE"] = PerMessageDeflate


def disable() -> None:
    """Put back exactly the class `enable()` replaced (autobahn's own, unless the
    application registered another); idempotent and thread-safe.

    The two ``WebSocketProtocol`` methods go back to autobahn's own too (unless
    wrapped again since), so connections opened while enabled compress every message
    from then on. Only if fastdeflate's class is still registered: a class registered
    over it since (a wrapper, say) is left as it is. Connections opened while enabled keep their
    fastdeflate objects until closed
    (``fastdeflate.status()["libraries"]["autobahn"]["connections"]`` counts them).
    """
    with _lock:
        entry = _REGISTRY[EXTENSION_NAME]
        if entry["PMCE"] is PerMessageDeflate:
            entry["PMCE"] = _replaced
        _remove_hooks()


def is_enabled() -> bool:
    """True if autobahn's registry currently names fastdeflate's class."""
    return _REGISTRY[EXTENSION_NAME]["PMCE"] is PerMessageDeflate
