"""The processes of the broadcast benchmark: a websockets server, and its clients.

``python -m fdbench.broadcast_peer server --mode M --clients N --broadcasts B ...`` runs
a websockets server (asyncio API) on 127.0.0.1 and an ephemeral port: ``stock`` (its
default compression: window 12, memLevel 5), ``enabled`` (the same, with
``fastdeflate.enable()`` called after its imports) or ``off`` (``compression=None``).
It prints ``{"port": P, ...}``; on ``go`` it waits for the N clients, then sends B
~1 KB JSON updates with websockets' own ``broadcast()`` to every client connected, a
private update to one of them (or, with ``--private-one-in K``, to one client in K,
rotating) after every ``--private-every`` broadcasts, and waits at
the join points (:func:`join_points`) for each late joiner. A client that closes its
connection (a leaver, :func:`leavers`) leaves the server's members as soon as the server
reads its close frame. On ``stop`` it prints its CPU seconds since ``go``
(``time.process_time``), what it sent (in all, and to each client), the codec objects
its connections hold (found from inside this process), ``fastdeflate.status()``'s
compress-once counters and, with ``--mode enabled``, the cost of one compression and
of one shared delivery on this machine at that moment (:func:`operation_costs`), and
exits.

``python -m fdbench.broadcast_peer clients --port P --clients N --broadcasts B ...`` is
the other side: websockets' client, stock, with its defaults (it offers
permessage-deflate as browsers do). It connects N clients (path ``/<id>``), prints what
they negotiated, and receives: every client checks every message against the update
expected next (broadcast k is :func:`update` (k); a private one is one of the
:func:`private` updates) and counts the bytes it read from its socket after the handshake
(frame headers and payloads). With ``--processes P --process p`` it runs share p of the
clients (:func:`shares`; 10,000 clients are more than one process keeps up with). The
first client of each share (its leader) connects that share's late joiners of a join
point when it has received the broadcast before it, and acknowledges every
``--ack-every``-th broadcast, so that the server stays at most 2 x ``--ack-every``
broadcasts ahead of the slowest leader (websockets' ``broadcast()`` has no
backpressure). A leaver closes its connection when it has received the broadcast
before its leave point, and goes on checking what was already on its way until the
server's close frame. When every client has received the last broadcast (or left), it
prints the counts, in all and per client; on ``close`` it closes them and exits.

Both raise their open-file limit (one descriptor per connection).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import Counter
from typing import Any, Callable, Optional

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


def shares(clients: int, processes: int) -> list[range]:
    """The first clients' ids each client process runs: ``processes`` contiguous shares
    (the late joiners are dealt to them by :func:`joiner_share`)."""
    processes = max(1, min(processes, clients))
    return [range(p * clients // processes, (p + 1) * clients // processes)
            for p in range(processes)]


def leaders(clients: int, processes: int) -> list[int]:
    """The client of each share that acknowledges broadcasts and connects its late
    joiners: the share's first."""
    return [share.start for share in shares(clients, processes)]


def joiner_share(joiner: int, processes: int) -> int:
    """The share (client process) of late joiner number ``joiner`` (0, 1, ...)."""
    return joiner % max(1, processes)


def leavers(clients: int, count: int, processes: int = 1) -> dict[int, int]:
    """Client id -> the broadcast before which it closes its connection: ``count`` of the
    first clients, spread evenly over the ids and (like the join points) over the run's
    broadcasts; never a leader. The broadcast count is applied by the caller
    (:func:`leave_points`)."""
    taken = set(leaders(clients, processes))
    if count > clients - len(taken):
        raise ValueError(f"{count} leavers among {clients} clients, {len(taken)} of them leaders")
    chosen: list[int] = []
    for j in range(count):
        ident = (j + 1) * clients // (count + 1)
        while ident in taken or ident in chosen:
            ident = (ident + 1) % clients
        chosen.append(ident)
    return {ident: j for j, ident in enumerate(chosen)}


def leave_points(clients: int, broadcasts: int, count: int,
                 processes: int = 1) -> dict[int, int]:
    """Leaver id -> the broadcast before which it leaves (it has received the one
    before): spread evenly over the run, never 0."""
    return {ident: max(1, (j + 1) * broadcasts // (count + 1))
            for ident, j in leavers(clients, count, processes).items()}


# --- the server ----------------------------------------------------------------------------


def _closing_connection(on_close: Callable[[Any], None]) -> type:
    """A server connection that calls ``on_close(connection)`` once, as soon as it is
    closing (the server read the client's close frame, or lost the connection):
    from then on ``broadcast()`` skips it, so it leaves the members at once."""
    from websockets.asyncio.server import ServerConnection
    from websockets.protocol import State

    class Closing(ServerConnection):
        noted = False

        def _note(self) -> None:
            if not self.noted and self.protocol.state in (State.CLOSING, State.CLOSED):
                self.noted = True
                on_close(self)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._note()

        def connection_lost(self, exc: Optional[Exception]) -> None:
            super().connection_lost(exc)
            self._note()

    return Closing


def compressor_params(ws: Any) -> Optional[str]:
    """The parameters of a connection's fastdeflate compressor, as
    ``"level L window W memLevel M strategy S"`` (None for another codec, or none)."""
    for ext in ws.protocol.extensions:
        c = getattr(ext, "_compressor", None)
        if c is not None:
            return (f"level {c.level} window {c.window_bits} memLevel {c.mem_level} "
                    f"strategy {c.strategy}")
    return None


def _timed(run: Callable[[list[bytes]], None], messages: list[bytes]) -> float:
    """CPU seconds per message of ``run`` over ``messages``."""
    t0 = time.process_time()
    run(messages)
    return (time.process_time() - t0) / len(messages)


def operation_costs(params: str, group: int = 64, rounds: int = 9) -> dict[str, Any]:
    """What one compression and one shared delivery cost here and now (CPU µs), with
    fastdeflate compressors of ``params`` ("level L window W memLevel M strategy S"),
    each called as the websockets integration calls it (``compress_or_skip``), on fresh
    copies of the run's updates (objects no other compressor was given):

    - compress: one compressor, its window filled, compressing update after update;
    - follow: ``group`` compressors with the same history handed each update in turn
      (the first compresses, the others take its payload): (time per update - one
      compression) / (group - 1).

    Medians of ``rounds`` batches of 16 updates each, the two kinds interleaved (a
    parameter set that saw many messages without a follower keeps fewer for them).

    ``shared_ok``: every follower of the timed batches returned the leader's payload
    object."""
    import fastdeflate

    values = params.split()
    kwargs = {"level": int(values[1]), "window_bits": int(values[3]),
              "mem_level": int(values[5]), "strategy": int(values[7])}
    offset = [0]

    def updates(count: int) -> list[bytes]:
        """The next ``count`` updates, as new objects (copies no compressor was given)."""
        offset[0] += count
        return [BROADCASTS[(offset[0] - count + i) % POOL].encode() for i in range(count)]

    alone = fastdeflate.Compressor(**kwargs)
    members = [fastdeflate.Compressor(**kwargs) for _ in range(group)]
    shared_ok = True

    def compress(batch: list[bytes]) -> None:
        for data in batch:
            alone.compress_or_skip(data)

    def in_turn(batch: list[bytes]) -> None:
        nonlocal shared_ok
        for data in batch:
            first = members[0].compress_or_skip(data)
            for c in members[1:]:
                if c.compress_or_skip(data) is not first:
                    shared_ok = False

    in_turn(updates(16))  # windows filled; the group formed
    compress(updates(16))
    shared_ok = True  # from here on
    whole, one = [], []
    for _ in range(rounds):  # interleaved, so that the codec always sees followers
        whole.append(_timed(in_turn, updates(16)))
        one.append(_timed(compress, updates(16)))
    one_us, whole_us = statistics.median(one) * 1e6, statistics.median(whole) * 1e6
    return {"params": params, "group": group, "compress_us": one_us,
            "follow_us": max(0.0, (whole_us - one_us) / (group - 1)), "shared_ok": shared_ok}


def codec_status() -> dict[str, Any]:
    """``fastdeflate.status()``'s compress-once counters (``compress_once``: None where
    this codec does not report them) and its traffic sent."""
    import fastdeflate

    status = fastdeflate.status()
    return {"compress_once": status.get("compress_once"),
            "sent": status.get("traffic", {}).get("sent", {})}


class Members:
    """The server's connected clients (id -> connection, in the order they joined) and
    what each was sent: the broadcasts since it joined, until it left, and its private
    messages."""

    def __init__(self) -> None:
        self.open: dict[int, Any] = {}
        self.ident: dict[Any, int] = {}
        self.joined_at: dict[int, int] = {}  # id -> broadcasts done when it joined
        self.broadcasts: dict[int, int] = {}  # id -> broadcasts it was sent (once left)
        self.privates: Counter[int] = Counter()
        self.left = 0
        self.done = 0  # broadcasts sent so far

    def add(self, ident: int, ws: Any) -> None:
        self.open[ident], self.ident[ws] = ws, ident
        self.joined_at[ident] = self.done

    def remove(self, ws: Any) -> None:
        ident = self.ident.get(ws)
        if ident is not None and self.open.pop(ident, None) is not None:
            self.broadcasts[ident] = self.done - self.joined_at[ident]
            self.left += 1

    def per_client(self) -> dict[str, list[int]]:
        """Id -> [broadcasts, private messages] it was sent."""
        got = {i: self.done - start for i, start in self.joined_at.items()}
        got.update(self.broadcasts)
        return {str(i): [n, self.privates[i]] for i, n in sorted(got.items())}


async def serve(mode: str, clients: int, broadcasts: int, joiners: int, private_every: int,
                ack_every: int, private_one_in: int = 0, leaving: int = 0,
                processes: int = 1, turn: int = 0) -> None:
    limit = raise_fd_limit()
    from websockets.asyncio.server import broadcast, serve as ws_serve
    from websockets.exceptions import ConnectionClosed
    from websockets.protocol import State

    import fastdeflate

    enabled = fastdeflate.enable() if mode == "enabled" else []
    members = Members()
    arrived = asyncio.Event()
    heads = leaders(clients, processes)
    acked = {ident: -1 for ident in heads}
    ack_seen = asyncio.Event()
    kinds: Counter[str] = Counter()

    async def handler(ws: Any) -> None:
        ident = int(ws.request.path.strip("/"))
        kinds.update(f"{type(e).__module__}.{type(e).__qualname__}"
                     for e in ws.protocol.extensions)
        members.add(ident, ws)
        arrived.set()
        if ident in acked:  # a leader acknowledges broadcasts: "ack K"
            async for message in ws:
                acked[ident] = int(message.split()[1])
                ack_seen.set()
        else:
            await ws.wait_closed()

    async def until(condition: Any, event: asyncio.Event) -> None:
        while not condition():
            event.clear()
            await event.wait()

    compression = None if mode == "off" else "deflate"
    server = await ws_serve(handler, "127.0.0.1", 0, compression=compression,
                            ping_interval=None, max_size=None, backlog=4096,
                            create_connection=_closing_connection(members.remove))
    port = next(iter(server.sockets)).getsockname()[1]
    _say({"port": port, "pid": os.getpid(), "fd_limit": limit, "enabled": enabled,
          "implementation": fastdeflate.IMPLEMENTATION, "engine": fastdeflate.ENGINE})
    await _stdin_line()  # "go"
    await asyncio.wait_for(until(lambda: len(members.joined_at) >= clients, arrived), 600)
    initial = len(members.joined_at)
    points = Counter(join_points(broadcasts, joiners))
    expected = initial
    deliveries = sent_private = 0
    cpu0 = time.process_time()
    for k in range(broadcasts):
        if turn and k and k % turn == 0:  # side by side: the end of this server's turn,
            # once its clients have its last broadcast; the next "go" starts the next
            await asyncio.wait_for(until(lambda: min(acked.values()) >= k - 1, ack_seen), 120)
            _say({"turn": k})
            await _stdin_line()
        if k in points:  # late joiners: the leaders connect them once they have k - 1
            expected += points[k]
            await asyncio.wait_for(until(lambda: len(members.joined_at) >= expected, arrived),
                                   120)
        if k >= 2 * ack_every:
            await asyncio.wait_for(until(lambda: min(acked.values()) >= k - 2 * ack_every,
                                         ack_seen), 120)
        broadcast(members.open.values(), update(k))
        members.done += 1
        deliveries += len(members.open)
        if (k + 1) % private_every == 0 and k < broadcasts - 1:
            targets = list(members.open.items())
            if private_one_in:  # one client in K, rotating
                start = (k // private_every) % private_one_in
                chosen = targets[start::private_one_in]
            else:  # one client, round-robin
                chosen = [targets[sent_private % len(targets)]]
            for ident, target in chosen:
                if target.protocol.state is not State.OPEN:  # it left meanwhile
                    continue
                message = private(sent_private)
                sent_private += 1
                members.privates[ident] += 1
                try:  # written before send() awaits anything: on its way even if it closes
                    await target.send(message)
                except ConnectionClosed:
                    pass
    await _stdin_line()  # "stop": every client has every message
    cpu = time.process_time() - cpu0
    codec = codec_status()  # before operation_costs() adds its own traffic
    params = Counter(filter(None, map(compressor_params, members.open.values())))
    costs = operation_costs(params.most_common(1)[0][0]) if params else None
    _say({"cpu": cpu, "broadcasts": broadcasts, "deliveries": deliveries + sent_private,
          "broadcast_deliveries": deliveries, "privates": sent_private, "initial": initial,
          "connections": len(members.open), "joined": len(members.joined_at) - initial,
          "left": members.left, "per_client": members.per_client(),
          "codecs": _codecs(set(members.open.values()), lambda ws: ws.protocol.extensions),
          "extensions": dict(kinds), "compressor_params": dict(params), "codec": codec,
          "costs": costs})
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
    """One client: receives, checks and counts every message until the last broadcast,
    or (a leaver, ``leave_at``) until the server closes its connection."""

    def __init__(self, ident: int, ws: Any, start: int, leave_at: Optional[int] = None) -> None:
        self.ident, self.ws, self.next = ident, ws, start
        self.start, self.leave_at = start, leave_at
        self.handshake = len(ws.response.serialize())
        self.broadcasts = self.privates = 0
        self.bytes = 0
        self.left = False

    def take(self, data: bytes, expected: dict[str, Any]) -> bool:
        """Check and count one message; True if it is the next broadcast."""
        if data == expected["update"][self.next % POOL]:
            self.next += 1
            self.broadcasts += 1
            return True
        if data not in expected["private"]:
            raise AssertionError(f"client {self.ident}: a message that is neither "
                                 f"broadcast {self.next} nor a private update")
        self.privates += 1
        return False

    async def run(self, broadcasts: int, expected: dict[str, Any], on_broadcast: Any) -> None:
        ws = self.ws
        until = broadcasts if self.leave_at is None else self.leave_at
        while self.next < until:
            if self.take(await ws.recv(decode=False), expected):
                await on_broadcast(self)
        if self.leave_at is not None:
            await self.leave(expected)
        else:
            self.bytes = ws.wire - self.handshake

    async def leave(self, expected: dict[str, Any]) -> None:
        """Close the connection, and check and count what the server sent until it read
        the close frame (the bytes: all but its close frame)."""
        from websockets.exceptions import ConnectionClosed

        closing = asyncio.create_task(self.ws.close())
        try:
            while True:
                self.take(await self.ws.recv(decode=False), expected)
        except ConnectionClosed:
            pass
        await closing
        close = self.ws.protocol.close_rcvd
        self.bytes = self.ws.wire - self.handshake - (2 + len(close.serialize()) if close else 0)
        self.left = True


async def clients(port: int, count: int, broadcasts: int, joiners: int, ack_every: int,
                  leaving: int = 0, processes: int = 1, process: int = 0) -> None:
    from websockets.asyncio.client import connect

    raise_fd_limit()
    counting = _counting_connection()
    expected = {"update": [m.encode() for m in BROADCASTS],
                "private": {m.encode() for m in PRIVATES}}
    share = shares(count, processes)[process]
    leader = share.start
    leave_at = {i: k for i, k in leave_points(count, broadcasts, leaving, processes).items()
                if i in share}
    receivers: list[Receiver] = []
    tasks: list[asyncio.Task[None]] = []

    async def open_one(ident: int, start: int) -> Receiver:
        ws = await connect(f"ws://127.0.0.1:{port}/{ident}", ping_interval=None,
                           open_timeout=600, max_size=None, create_connection=counting)
        return Receiver(ident, ws, start, leave_at.get(ident))

    def launch(found: list[Receiver]) -> None:
        for r in found:
            receivers.append(r)
            tasks.append(asyncio.create_task(r.run(broadcasts, expected, on_broadcast)))

    mine = [(point, count + j) for j, point in enumerate(join_points(broadcasts, joiners))
            if joiner_share(j, processes) == process]  # (join point, id) of this share
    pending: list[asyncio.Task[None]] = []

    async def join(point: int, idents: list[int]) -> None:
        launch(list(await asyncio.gather(*(open_one(i, point) for i in idents))))

    async def on_broadcast(r: Receiver) -> None:
        if r.ident != leader:
            return
        due = [ident for point, ident in mine if point == r.next]
        if due:
            pending.append(asyncio.create_task(join(r.next, due)))
        if r.next % ack_every == 0:
            await r.ws.send(f"ack {r.next - 1}")

    first: list[Receiver] = []
    for i in range(share.start, share.stop, BATCH):
        first += await asyncio.gather(*(open_one(ident, 0)
                                        for ident in range(i, min(share.stop, i + BATCH))))
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
    if len(receivers) != len(share) + len(mine):
        raise AssertionError(f"{len(receivers)} clients took part, not "
                             f"{len(share) + len(mine)}")
    _say({"cpu": cpu, "clients": len(receivers),
          "broadcasts": sum(r.broadcasts for r in receivers),
          "privates": sum(r.privates for r in receivers),
          "bytes": sum(r.bytes for r in receivers),
          "per_client": {str(r.ident): [r.broadcasts, r.privates]
                         for r in sorted(receivers, key=lambda r: r.ident)},
          "late": [[r.start, r.broadcasts, r.privates] for r in receivers if r.start],
          "first": [[r.broadcasts, r.privates] for r in receivers if not r.start],
          "left": [[r.ident, r.leave_at, r.broadcasts, r.privates] for r in receivers
                   if r.left]})
    await _stdin_line()  # "close"
    staying = [r for r in receivers if not r.left]
    for i in range(0, len(staying), BATCH):
        await asyncio.gather(*(r.ws.close() for r in staying[i : i + BATCH]))


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
    parser.add_argument("--leavers", type=int, default=0)
    parser.add_argument("--processes", type=int, default=1, help="client processes")
    parser.add_argument("--process", type=int, default=0, help="this client process's share")
    parser.add_argument("--turn", type=int, default=0,
                        help="broadcasts per turn, side by side with other servers (0: all)")
    args = parser.parse_args(argv)
    if args.role == "server":
        asyncio.run(serve(args.mode, args.clients, args.broadcasts, args.joiners,
                          args.private_every, args.ack_every, args.private_one_in,
                          args.leavers, args.processes, args.turn))
    else:
        asyncio.run(clients(args.port, args.clients, args.broadcasts, args.joiners,
                            args.ack_every, args.leavers, args.processes, args.process))


if __name__ == "__main__":
    sys.exit(main())
