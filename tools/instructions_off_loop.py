"""Instructions a websockets server spends sending M large snapshots, off the event loop
or on it, for callgrind (deterministic: the CPU time of the latency benchmark moves by
several percent from run to run on a shared machine; this count does not). Run it with
M and with 1, in each mode, and divide the difference by M - 1:

    PYTHONHASHSEED=0 FASTDEFLATE_OFF_LOOP_SIZE=0 valgrind --tool=callgrind \\
        --callgrind-out-file=/dev/null python tools/instructions_off_loop.py M

(``FASTDEFLATE_OFF_LOOP_SIZE=0``: on the loop; leave it out for the default, off the
loop.) The server is websockets' asyncio ``serve`` with its defaults, fastdeflate
enabled, sending ``fdbench.payloads.varying`` snapshots of 4 MB as str, the scenario of
``benchmarks/latency.py``; the client, stock websockets, runs in a child process, which
callgrind does not follow. callgrind runs one thread at a time and counts every thread:
what it gives is the work of the hand-off to the worker thread, not what running two
threads at once costs a machine. stderr gets fastdeflate's off-loop counts, to check
that the mode is the one asked for.
"""
import asyncio
import sys
from pathlib import Path

import fastdeflate
from websockets.asyncio.server import serve

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from fdbench import payloads  # noqa: E402

SIZE = 4_000_000
CLIENT = r"""
import asyncio, sys
from websockets.asyncio.client import connect
async def main():
    async with connect(sys.argv[1], max_size=None) as ws:
        for _ in range(int(sys.argv[2])):
            await ws.recv()
asyncio.run(main())
"""


async def main(count: int) -> None:
    snapshots = [s.decode() for s in payloads.varying(SIZE, 4)]

    async def handler(ws) -> None:
        for i in range(count):
            await ws.send(snapshots[i % len(snapshots)])
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        client = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, f"ws://127.0.0.1:{port}", str(count))
        if await client.wait():
            raise SystemExit("the client failed")


if __name__ == "__main__":
    enabled = fastdeflate.enable()
    if "websockets" not in enabled:
        raise SystemExit(f"fastdeflate.enable() returned {enabled}")
    asyncio.run(main(int(sys.argv[1])))
    print(fastdeflate.status()["off_loop"], file=sys.stderr)
