"""The processes of the broadcast benchmark: a websockets server, and its clients.

``python -m fdbench.broadcast_peer server --mode M --clients N --broadcasts B ...`` runs
a websockets server (asyncio API) on 127.0.0.1 and an ephemeral port: ``stock`` (its
default compression: window 12, memLevel 5), ``enabled`` (the same, with
``fastdeflate.enable()`` called after its imports) or ``off`` (``compression=None``).
It prints ``{"port": P, ...}``; on ``go`` it waits for the N clients, then sends B
~1 KB JSON updates with websockets' own ``broadcast()`` to every client connected, a
private update to one of them (or, with ``--private-one-in K``, to one client in K,
rotating) after every ``--private-every`` broadcasts, and waits at
the join points (:func:`join_points`) for each late joiner. On ``stop`` it prints its
CPU seconds since ``go`` (``time.process_time``), what it sent, and the codec objects
its connections hold (found from inside this process), and exits.

``python -m fdbench.broadcast_peer clients --port P --clients N --broadcasts B ...`` is
the other side: websockets' client, stock, with its defaults (it offers
permessage-deflate as browsers do). It connects N clients (path ``/<id>``), prints what
they negotiated, and receives: every client checks every message against the update
expected next (broadcast k is :func:`update` (k); a private one is one of the
:func:`private` updates) and counts the bytes it read from its socket after the handshake
(frame headers and payloads). Client 0 connects the late joiners of a join point when it
has received the broadcast before it, and acknowledges every ``--ack-every``-th
broadcast, so that the server stays at most 2 x ``--ack-every`` broadcasts ahead of
it (websockets' ``broadcast()`` has no backpressure). When every client has received
the last broadcast, it prints the counts; on ``close`` it closes them and exits.

Both raise their open-file limit (one descriptor per connection).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import Counter
from typing import Any, Optional

from . import payloads
from .server_peer import _codecs, _stdin_line, raise_fd_limit

MODES = ("stock", "enabled", "off")
POOL = 256  # distinct broadcast updates, cycled through (far more than a 4 KiB window)
PRIVATE_POOL = 64
SIZE = 1024
BATCH = 50  # clients connecting at once


def _say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


def _pool(count: int, seed: int) -> list[str]:
    return [m.decode("ascii") for m in payloads.varying(SIZE, count, seed=seed)]


BROADCASTS = _pool(POOL, 11)
PRIVATES = _pool(PRIVATE_POOL, 12)


def update(k: int) -> str:
    """Broadcast number ``k``."""
    return BROADCASTS[k % POOL]


def private(j: int) -> str:
    """Private message number ``j``."""
    return PRIVATES[j % PRIVATE_POOL]


def join_points(broadcasts: int, joiners: int) -> list[int]:
    """The broadcast before which each late joiner is in: spread evenly, never 0."""
    return [max(1, (j + 1) * broadcasts // (joiners + 1)) for j in range(joiners)]


# --- the server ----------------------------------------------------------------------------


async def serve(mode: str, clients: int, broadcasts: int, joiners: int, private_every: int,
                ack_every: int, private_one_in: int = 0) -> None:
    limit = raise_fd_limit()
    from websockets.asyncio.server import broadcast, serve as ws_serve

    import fastdeflate

    enabled = fastdeflate.enable() if mode == "enabled" else []
    members: dict[int, Any] = {}  # id -> connection, in the order they joined
    arrived = asyncio.Event()
    acked = [-1]
    ack_seen = asyncio.Event()
    kinds: Counter[str] = Counter()

    async def handler(ws: Any) -> None:
        ident = int(ws.request.path.strip("/"))
        kinds.update(f"{type(e).__module__}.{type(e).__qualname__}"
                     for e in ws.protocol.extensions)
        members[ident] = ws
        arrived.set()
        if ident == 0:  # client 0 acknowledges broadcasts: "ack K"
            async for message in ws:
                acked[0] = int(message.split()[1])
                ack_seen.set()
        else:
            await ws.wait_closed()

    async def until(condition: Any, event: asyncio.Event) -> None:
        while not condition():
            event.clear()
            await event.wait()

    compression = None if mode == "off" else "deflate"
    server = await ws_serve(handler, "127.0.0.1", 0, compression=compression,
                            ping_interval=None, max_size=None)
    port = next(iter(server.sockets)).getsockname()[1]
    _say({"port": port, "pid": os.getpid(), "fd_limit": limit, "enabled": enabled,
          "implementation": fastdeflate.IMPLEMENTATION, "engine": fastdeflate.ENGINE})
    await _stdin_line()  # "go"
    await asyncio.wait_for(until(lambda: len(members) >= clients, arrived), 120)
    initial = len(members)
    points = Counter(join_points(broadcasts, joiners))
    expected = initial
    deliveries = sent_private = 0
    cpu0 = time.process_time()
    for k in range(broadcasts):
        if k in points:  # late joiners: client 0 connects them once it has k - 1
            expected += points[k]
            await asyncio.wait_for(until(lambda: len(members) >= expected, arrived), 120)
        if k >= 2 * ack_every:
            await asyncio.wait_for(until(lambda: acked[0] >= k - 2 * ack_every, ack_seen), 120)
        broadcast(members.values(), update(k))
        deliveries += len(members)
        if (k + 1) % private_every == 0 and k < broadcasts - 1:
            targets = list(members.values())
            if private_one_in:  # one client in K, rotating
                start = (k // private_every) % private_one_in
                chosen = targets[start::private_one_in]
            else:  # one client, round-robin
                chosen = [targets[sent_private % len(targets)]]
            for target in chosen:
                await target.send(private(sent_private))
                sent_private += 1
    await _stdin_line()  # "stop": every client has every message
    cpu = time.process_time() - cpu0
    _say({"cpu": cpu, "broadcasts": broadcasts, "deliveries": deliveries + sent_private,
          "broadcast_deliveries": deliveries, "privates": sent_private, "initial": initial,
          "connections": len(members), "joined": len(members) - initial,
          "codecs": _codecs(set(members.values()), lambda ws: ws.protocol.extensions),
          "extensions": dict(kinds)})
    server.close()
    await asyncio.wait_for(server.wait_closed(), 60)


# --- the clients ---------------------------------------------------------------------------


def _counting_connection() -> type:
    from websockets.asyncio.client import ClientConnection

    class Counting(ClientConnection):
        """A client connection that counts the bytes it reads from its socket."""

        wire = 0

        def data_received(self, data: bytes) -> None:
            self.wire += len(data)
            super().data_received(data)

    return Counting


class Receiver:
    """One client: receives, checks and counts every message until the last broadcast."""

    def __init__(self, ident: int, ws: Any, start: int) -> None:
        self.ident, self.ws, self.next = ident, ws, start
        self.start = start
        self.handshake = len(ws.response.serialize())
        self.broadcasts = self.privates = 0
        self.bytes = 0

    async def run(self, broadcasts: int, expected: dict[str, Any], on_broadcast: Any) -> None:
        ws = self.ws
        while self.next < broadcasts:
            data = await ws.recv(decode=False)
            if data == expected["update"][self.next % POOL]:
                self.next += 1
                self.broadcasts += 1
                await on_broadcast(self)
                continue
            if data not in expected["private"]:
                raise AssertionError(f"client {self.ident}: a message that is neither "
                                     f"broadcast {self.next} nor a private update")
            self.privates += 1
        self.bytes = ws.wire - self.handshake


async def clients(port: int, count: int, broadcasts: int, joiners: int,
                  ack_every: int) -> None:
    from websockets.asyncio.client import connect

    raise_fd_limit()
    counting = _counting_connection()
    expected = {"update": [m.encode() for m in BROADCASTS],
                "private": {m.encode() for m in PRIVATES}}
    receivers: list[Receiver] = []
    tasks: list[asyncio.Task[None]] = []

    async def open_one(ident: int, start: int) -> Receiver:
        ws = await connect(f"ws://127.0.0.1:{port}/{ident}", ping_interval=None,
                           open_timeout=120, max_size=None, create_connection=counting)
        return Receiver(ident, ws, start)

    def launch(found: list[Receiver]) -> None:
        for r in found:
            receivers.append(r)
            tasks.append(asyncio.create_task(r.run(broadcasts, expected, on_broadcast)))

    points = join_points(broadcasts, joiners)
    next_joiner = [count]
    pending: list[asyncio.Task[None]] = []

    async def join(point: int, idents: list[int]) -> None:
        launch(list(await asyncio.gather(*(open_one(i, point) for i in idents))))

    async def on_broadcast(r: Receiver) -> None:
        if r.ident != 0:
            return
        due = [p for p in points if p == r.next]
        if due:
            idents = list(range(next_joiner[0], next_joiner[0] + len(due)))
            next_joiner[0] += len(due)
            pending.append(asyncio.create_task(join(r.next, idents)))
        if r.next % ack_every == 0:
            await r.ws.send(f"ack {r.next - 1}")

    first: list[Receiver] = []
    for i in range(0, count, BATCH):
        first += await asyncio.gather(*(open_one(ident, 0)
                                        for ident in range(i, min(count, i + BATCH))))
    offers = Counter(r.ws.response.headers.get("Sec-WebSocket-Extensions", "") for r in first)
    exact = all(r.ws.wire == r.handshake for r in first)  # nothing but the handshake yet
    launch(first)
    _say({"ready": len(first), "extensions": dict(offers), "handshake_exact": exact})
    cpu0 = time.process_time()
    while True:  # joiners add tasks as they come
        waiting = [*tasks, *pending]
        await asyncio.gather(*waiting)
        if len(tasks) + len(pending) == len(waiting):
            break
    cpu = time.process_time() - cpu0
    if len(receivers) != count + joiners:
        raise AssertionError(f"{len(receivers)} clients took part, not {count + joiners}")
    _say({"cpu": cpu, "clients": len(receivers),
          "broadcasts": sum(r.broadcasts for r in receivers),
          "privates": sum(r.privates for r in receivers),
          "bytes": sum(r.bytes for r in receivers),
          "late": [[r.start, r.broadcasts, r.privates] for r in receivers if r.start],
          "first": [[r.broadcasts, r.privates] for r in receivers if not r.start]})
    await _stdin_line()  # "close"
    for i in range(0, len(receivers), BATCH):
        await asyncio.gather(*(r.ws.close() for r in receivers[i : i + BATCH]))


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("role", choices=("server", "clients"))
    parser.add_argument("--mode", choices=MODES, default="stock")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--broadcasts", type=int, required=True)
    parser.add_argument("--joiners", type=int, default=1)
    parser.add_argument("--private-every", type=int, default=5)
    parser.add_argument("--private-one-in", type=int, default=0)
    parser.add_argument("--ack-every", type=int, default=16)
    args = parser.parse_args(argv)
    if args.role == "server":
        asyncio.run(serve(args.mode, args.clients, args.broadcasts, args.joiners,
                          args.private_every, args.ack_every, args.private_one_in))
    else:
        asyncio.run(clients(args.port, args.clients, args.broadcasts, args.joiners,
                            args.ack_every))


if __name__ == "__main__":
    sys.exit(main())
