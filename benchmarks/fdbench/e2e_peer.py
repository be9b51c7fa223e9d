"""The processes of the end-to-end benchmark: a websockets server, and N clients.

``python -m fdbench.e2e_peer server [--enabled]`` prints ``{"port": P}``, then serves:
each connection waits for ``go``, then receives ``--messages`` JSON updates. The server
reads its own CPU time at the first ``go`` and again when ``stop`` arrives on stdin,
and prints ``{"cpu": seconds, "extensions": [...]}``.

``python -m fdbench.e2e_peer clients --port P --clients N [--enabled]`` connects N
clients, prints ``{"ready": ..., "extensions": [...]}``, waits for ``go`` on stdin, then
has every client say ``go`` and receive its messages (each checked against the
expected one), and prints ``{"cpu": seconds, "received": count}``.

``--enabled`` turns fastdeflate on with ``fastdeflate.integrations.websockets.enable()``
before anything connects; websockets' defaults (``compression="deflate"``) otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter

from . import payloads

POOL = 256  # distinct updates the server cycles through


def _updates(size: int) -> list[str]:
    return [m.decode("ascii") for m in payloads.varying(size, POOL)]


def _say(obj: object) -> None:
    print(json.dumps(obj), flush=True)


async def _stdin_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


def _extension_names(connection: object) -> list[str]:
    extensions = connection.protocol.extensions  # type: ignore[attr-defined]
    return [f"{type(e).__module__}.{type(e).__qualname__}" for e in extensions]


async def serve(messages: int, size: int) -> None:
    from websockets.asyncio.server import serve as ws_serve

    updates = _updates(size)
    started: list[float] = []
    kinds: Counter[str] = Counter()

    async def handler(ws) -> None:  # type: ignore[no-untyped-def]
        kinds.update(_extension_names(ws))
        await ws.recv()
        if not started:
            started.append(time.process_time())
        for i in range(messages):
            await ws.send(updates[i % POOL])
        await ws.wait_closed()

    async with ws_serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        _say({"port": port})
        await _stdin_line()  # "stop"
        cpu = time.process_time() - started[0] if started else 0.0
        _say({"cpu": cpu, "extensions": sorted(kinds.items())})


async def clients(port: int, count: int, messages: int, size: int) -> None:
    from websockets.asyncio.client import connect

    updates = _updates(size)
    conns = await asyncio.gather(
        *(connect(f"ws://127.0.0.1:{port}", max_size=None, open_timeout=60) for _ in range(count))
    )
    kinds = Counter(name for c in conns for name in _extension_names(c))
    _say({"ready": count, "extensions": sorted(kinds.items())})
    await _stdin_line()  # "go"

    async def one(ws) -> int:  # type: ignore[no-untyped-def]
        await ws.send("go")
        for i in range(messages):
            if await ws.recv() != updates[i % POOL]:
                raise AssertionError(f"message {i} differs from what the server sent")
        return messages

    cpu0 = time.process_time()
    received = sum(await asyncio.gather(*(one(ws) for ws in conns)))
    cpu = time.process_time() - cpu0
    _say({"cpu": cpu, "received": received})
    await asyncio.gather(*(ws.close() for ws in conns))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("role", choices=("server", "clients"))
    parser.add_argument("--enabled", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--messages", type=int, default=1000, help="messages per client")
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args(argv)
    if args.enabled:
        from fastdeflate.integrations import websockets as fw

        fw.enable()
    if args.role == "server":
        asyncio.run(serve(args.messages, args.size))
    else:
        asyncio.run(clients(args.port, args.clients, args.messages, args.size))


if __name__ == "__main__":
    main()
