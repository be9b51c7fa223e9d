"""The test site's consumers: an echo, and the host of tests/peers/peer.js clients."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any, Optional, Union

from channels.generic.websocket import AsyncWebsocketConsumer

import fastdeflate

Message = Union[str, bytes]
WORDS = ["user", "price", "qty", "ok", "héllo", "名前", "lobby", "x"]


def facts() -> dict[str, Any]:
    """What this serving process runs: the codec, daphne's and autobahn's states, and
    the traffic of fastdeflate's codec objects (none unless fastdeflate's codec ran)."""
    info = fastdeflate.status()
    return {"pid": os.getpid(), "implementation": info["implementation"],
            "libraries": {name: info["libraries"][name] for name in ("autobahn", "daphne")},
            "traffic": info["traffic"], "sent_uncompressed": info["sent_uncompressed"]}


def peer_messages() -> list[Message]:
    """What a peer.js client is sent: JSON updates, binary, and a ~300 KB JSON message."""
    rng = random.Random(7)

    def update(seq: int, items: int) -> str:
        return json.dumps({"seq": seq, "room": "lobby", "items": [
            {"id": rng.randrange(10 ** rng.randint(1, 9)), "name": rng.choice(WORDS)}
            for _ in range(items)]}, ensure_ascii=False)

    return [*(update(seq, 5 + seq * 7) for seq in range(10)),
            rng.randbytes(1000) + b"compressible " * 200, update(10, 10_000), update(11, 3)]


def record(message: Message) -> list[Any]:
    """What a peer.js client reports of a message it received: [kind, size, SHA-256]."""
    data = message.encode() if isinstance(message, str) else message
    return ["text" if isinstance(message, str) else "binary", len(data),
            hashlib.sha256(data).hexdigest()]


class EchoConsumer(AsyncWebsocketConsumer):
    """Echoes every message as it came (text or binary); ``__facts__`` is answered with
    :func:`facts`."""

    async def receive(self, text_data: Optional[str] = None,
                      bytes_data: Optional[bytes] = None) -> None:
        if text_data == "__facts__":
            await self.send(text_data=json.dumps(facts()))
        elif text_data is not None:
            await self.send(text_data=text_data)
        else:
            await self.send(bytes_data=bytes_data)


class PeerConsumer(AsyncWebsocketConsumer):
    """A connection of a tests/peers/peer.js client (Chromium's page): it is sent
    :func:`peer_messages` and ``__report__``; its report, what it was sent, its offer and
    :func:`facts` go to ``$CHANNELS_REPORTS/<name>.json``; then the server closes it."""

    async def connect(self) -> None:
        await self.accept()
        self.sent = []
        for message in [*peer_messages(), "__report__"]:
            if isinstance(message, str):
                await self.send(text_data=message)
            else:
                await self.send(bytes_data=message)
            self.sent.append(record(message))

    async def receive(self, text_data: Optional[str] = None,
                      bytes_data: Optional[bytes] = None) -> None:
        report = json.loads(text_data or "{}")
        headers = dict(self.scope["headers"])
        offer = headers.get(b"sec-websocket-extensions", b"").decode()
        path = Path(os.environ["CHANNELS_REPORTS"]) / f"{report.get('name')}.json"
        path.with_suffix(".tmp").write_text(json.dumps(
            {"sent": self.sent, "report": report, "offer": offer, "facts": facts()}))
        path.with_suffix(".tmp").rename(path)  # whole when the test sees it
        await self.close(1000)
