"""The test site's ASGI application: /echo and /ws (peer.js) are consumers; HTTP serves
tests/peers/page.html and peer.js to Chromium."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "channels_site.settings")
django.setup()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from .consumers import EchoConsumer, PeerConsumer  # noqa: E402

PEERS = Path(__file__).resolve().parent.parent / "peers"
TYPES = {"/page.html": b"text/html; charset=utf-8", "/peer.js": b"text/javascript; charset=utf-8"}


async def peer_files(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """GET /page.html or /peer.js from tests/peers; anything else is 404."""
    kind = TYPES.get(scope["path"])
    body = (PEERS / scope["path"][1:]).read_bytes() if kind else b"not found\n"
    await send({"type": "http.response.start", "status": 200 if kind else 404,
                "headers": [(b"content-type", kind or b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


application = ProtocolTypeRouter({
    "http": peer_files,
    "websocket": URLRouter([path("echo", EchoConsumer.as_asgi()),
                            path("ws", PeerConsumer.as_asgi())]),
})
