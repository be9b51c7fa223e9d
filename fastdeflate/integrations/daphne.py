"""fastdeflate for daphne (Django Channels' server): permessage-deflate, opt-in.

Stock daphne never compresses: it serves WebSockets with autobahn but never sets
autobahn's ``perMessageCompressionAccept``, so every client's permessage-deflate offer
is declined. `enable()` makes daphne accept it — a change to what goes on the wire,
so ``fastdeflate.enable()`` does it only when ``"daphne"`` is named::

    fastdeflate.enable(libraries=["daphne"])       # or FASTDEFLATE_ENABLE=daphne

Every ``daphne.ws_protocol.WebSocketFactory`` made afterwards (daphne's ``Server.run()``
makes one: the ``daphne`` command, ``Server(...)`` in code, Django's ``runserver`` with
daphne in ``INSTALLED_APPS``) gets autobahn's ``perMessageCompressionAccept`` set to
[`fastdeflate.integrations.autobahn.accept_offers()`][fastdeflate.integrations.autobahn.accept_offers]:
the same parameter rules as an autobahn server given that callback. `enable()` also
enables the autobahn adapter, so the connections compress with fastdeflate's codec.
`disable()` puts daphne's factory back as it was (new factories accept nothing again)
and leaves the autobahn adapter as it is.

Tested with daphne 4.2 and channels 4.3 (autobahn 26.10+, Python 3.11+), and with daphne
4.1.0, the oldest it supports (.ci/steps/15-oldest-libraries.sh); needs daphne >= 4.1:
an older one is refused (ImportError; ``fastdeflate.enable(libraries=["daphne"])``
leaves it stock with a RuntimeWarning).
"""

from __future__ import annotations

import threading
from typing import Any

from fastdeflate._forksafe import free_in_child
from fastdeflate.integrations import _marks
from fastdeflate.integrations import autobahn as _autobahn

try:
    import daphne
    from daphne.ws_protocol import WebSocketFactory
except ImportError as exc:  # pragma: no cover - daphne is installed in CI
    raise ImportError(f"fastdeflate.integrations.daphne needs daphne (pip install daphne): "
                      f"{exc}") from exc

from fastdeflate.integrations import _require  # noqa: E402

#: The oldest daphne this adapter is tested with (.ci/steps/15-oldest-libraries.sh);
#: an older one is refused (ImportError: `fastdeflate.enable()` leaves it stock).
MIN_DAPHNE = "4.1"
_require("daphne", daphne.__version__, MIN_DAPHNE)

__all__ = ["enable", "disable", "is_enabled"]


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    """daphne's ``WebSocketFactory.__init__``, then autobahn's accept callback set."""
    _init.__wrapped__(self, *args, **kwargs)
    self.setProtocolOptions(perMessageCompressionAccept=_autobahn.accept_offers)


_marks.mark(_init)
_init.__wrapped__ = _marks.stock(WebSocketFactory.__init__)  # type: ignore[attr-defined]
_lock = free_in_child(threading.Lock())


def enable() -> None:
    """Make daphne's WebSocket factories made from now on accept permessage-deflate,
    compressed by fastdeflate (the autobahn adapter is enabled too). Idempotent and
    thread-safe."""
    _autobahn.enable()
    with _lock:
        if WebSocketFactory.__init__ is not _init:
            _init.__wrapped__ = _marks.stock(WebSocketFactory.__init__)  # type: ignore[attr-defined]
            WebSocketFactory.__init__ = _init  # type: ignore[method-assign]


def disable() -> None:
    """Put back the ``__init__`` `enable()` replaced: factories made afterwards
    accept no compression, as stock daphne. Idempotent and thread-safe; leaves the
    autobahn adapter and running factories alone (their connections, counted under
    autobahn in ``fastdeflate.status()``, keep compressing until they close)."""
    with _lock:
        if WebSocketFactory.__init__ is _init:
            WebSocketFactory.__init__ = _init.__wrapped__  # type: ignore[attr-defined]


def is_enabled() -> bool:
    """True if daphne's WebSocket factories are made to accept permessage-deflate."""
    return WebSocketFactory.__init__ is _init
