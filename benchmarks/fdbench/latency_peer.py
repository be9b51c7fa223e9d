"""The processes of the latency benchmark (:mod:`fdbench.latency`): a server, the big
client and the small clients, each spoken to in lines on stdin / stdout (JSON answers).

``python -m fdbench.latency_peer server --library L --mode M --direction D --pool FILE
--size N --interval S`` serves on 127.0.0.1 and an ephemeral port, on library L
(:data:`LIBRARIES`), two paths:

- ``/small``: echoes every text message (the other connections);
- ``/big``: direction ``send``: after the client's first message (``start``), sends the
  next snapshot of the pool every ``interval`` seconds (never two at once: when a send
  ends after the next tick, the next one follows at once, and the ticks missed are
  skipped) until the client closes; direction ``receive``: receives the client's
  snapshots and counts them (and those whose length is not ``size``); direction
  ``idle``: no snapshot either way (the control: the small connections alone).

It prints ``{"port": P, "pid": ..., "enabled": [...], ...}``, then on ``stop`` its report
(what it sent, received and echoed, ``fastdeflate.status()["traffic"]``, the state of
each library in ``fastdeflate.status()``) and exits. Mode ``stock`` and ``off`` run the
library as it is (``off``: the clients offer no compression); the fastdeflate modes call
``fastdeflate.enable()`` after the library's imports, as an application does.

``python -m fdbench.latency_peer big --port P --direction D --pool FILE --size N
--interval S [--no-compression]``: one websockets client (stock, asyncio API, its default
offer) on ``/big``; prints ``{"extensions": ...}`` once connected; on ``go`` it starts
(``send``: asks the server to start, then checks each snapshot it receives against the
pool; ``receive``: sends the pool's snapshots every ``interval`` seconds; ``idle``:
nothing); on ``stop``
prints what it received or sent and the bytes it read or wrote on its socket meanwhile
(frame headers and payloads), and closes.

``python -m fdbench.latency_peer small --port P --clients N [--no-compression]``: N
websockets clients on ``/small``; prints ``{"connected": N, "extensions": {...}}``; on
``go WARMUP SECONDS PERIOD`` each client sends a ~200-byte JSON update every PERIOD
seconds (the clients staggered over the period; open loop: on schedule, whether or not
the echoes of earlier ones have come back) and times each echo, checking it; after
WARMUP seconds it prints ``{"measuring": true}``, after SECONDS more ``{"ended": true}``,
then, once the echoes of the messages sent meanwhile are in, their round trips (p50,
p99, max, ...) and the clients' own CPU seconds over the window, and stops; ``close``
closes them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import math
import os
import socket
import threading
import time
import warnings
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Awaitable, Callable, Optional

from . import payloads
from .broadcast_peer import _say
from .server_peer import _stdin_line, aiohttp_site, raise_fd_limit

#: Server name -> the fastdeflate integration that serves its websocket protocol.
LIBRARIES: dict[str, str] = {
    "websockets": "websockets",
    "uvicorn-websockets": "websockets",
    "uvicorn-websockets-sansio": "websockets",
    "uvicorn-wsproto": "wsproto",
    "aiohttp": "aiohttp",
    "hypercorn": "wsproto",
    "tornado": "tornado",
}
#: What each server imports before ``fastdeflate.enable()`` (as an application that
#: enables it after its own imports).
IMPORTS: dict[str, tuple[str, ...]] = {
    "websockets": ("websockets.asyncio.server",),
    "uvicorn-websockets": ("uvicorn", "uvicorn.protocols.websockets.websockets_impl"),
    "uvicorn-websockets-sansio": ("uvicorn",
                                  "uvicorn.protocols.websockets.websockets_sansio_impl"),
    "uvicorn-wsproto": ("uvicorn", "uvicorn.protocols.websockets.wsproto_impl"),
    "aiohttp": ("aiohttp.web",),
    "hypercorn": ("hypercorn.asyncio", "hypercorn.config"),
    "tornado": ("tornado.httpserver", "tornado.web", "tornado.websocket"),
}
#: Modes, and the environment each adds to the server's (the fastdeflate modes call
#: ``fastdeflate.enable()``; "fastdeflate-on-loop" turns an off-the-event-loop path for
#: large messages off, where fastdeflate has one: FASTDEFLATE_OFF_LOOP_SIZE=0).
MODES: dict[str, dict[str, str]] = {
    "stock": {},
    "fastdeflate": {},
    "off": {},
    "fastdeflate-on-loop": {"FASTDEFLATE_OFF_LOOP_SIZE": "0"},
}
#: send: the server sends the big client snapshots; receive: the big client sends them;
#: idle: the big connection stays open and quiet (what the small messages cost alone)
DIRECTIONS = ("send", "receive", "idle")
MAX_SIZE = 64 << 20  # the servers' and clients' message size limit (bytes)
SMALL = 200  # bytes of a small client's message


def big_call(size: int) -> int:
    """The bytes from which a codec call is a snapshot's (of ``size`` bytes; its payload
    is a quarter of that or more, and a library may hand it over in parts): 1/64 of it,
    far above a small client's message."""
    return max(4096, size // 64)


def enabled_mode(mode: str) -> bool:
    return mode.startswith("fastdeflate")


def load_pool(path: str, size: int) -> list[str]:
    """The snapshots in ``path`` (each exactly ``size`` bytes of ASCII JSON, one after
    the other), as str."""
    with open(path, "rb") as f:
        data = f.read()
    if not data or len(data) % size:
        raise ValueError(f"{path}: {len(data)} bytes is not a whole number of {size}-byte "
                         "snapshots")
    return [data[i:i + size].decode("ascii") for i in range(0, len(data), size)]


def write_pool(path: str, size: int, count: int, seed: int = 0) -> None:
    """``count`` successive snapshots of one dashboard, each exactly ``size`` bytes
    (:func:`fdbench.payloads.varying`: quotes whose prices walk and chat lines, the values
    changing from one snapshot to the next), to ``path``."""
    with open(path, "wb") as f:
        for snapshot in payloads.varying(size, count, seed=seed):
            f.write(snapshot)


# --- the server ----------------------------------------------------------------------------


def time_large_codec_calls(fastdeflate: Any, at_least: int) -> list[float]:
    """Rebind ``fastdeflate.Compressor`` and ``Decompressor`` (in this server process
    only, before ``enable()``: the integrations look them up there when they make one)
    to subclasses that time each call given at least ``at_least`` bytes on the calling
    thread's CPU clock, in a worker thread or on the loop alike. Returns the list the
    seconds go to, one per such call. A call below that size costs one Python call more
    (well under a microsecond), in both fastdeflate modes alike."""
    timings: list[float] = []
    lock = threading.Lock()

    def timed(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
            if len(data) < at_least:
                return method(self, data, *args, **kwargs)
            start = time.thread_time()
            try:
                return method(self, data, *args, **kwargs)
            finally:
                spent = time.thread_time() - start
                with lock:
                    timings.append(spent)
        return call

    class Compressor(fastdeflate.Compressor):  # type: ignore[misc, name-defined]
        compress = timed(fastdeflate.Compressor.compress)
        compress_or_skip = timed(fastdeflate.Compressor.compress_or_skip)

    class Decompressor(fastdeflate.Decompressor):  # type: ignore[misc, name-defined]
        decompress = timed(fastdeflate.Decompressor.decompress)

    fastdeflate.Compressor, fastdeflate.Decompressor = Compressor, Decompressor
    return timings


@dataclass
class Stats:
    big_sent: int = 0
    big_received: int = 0
    big_bad: int = 0  # received snapshots of the wrong length
    big_late: int = 0  # ticks skipped because a send ended after the next tick
    small_echoes: int = 0
    small_connections: int = 0
    big_connections: int = 0


Recv = Callable[[], Awaitable[Optional[str]]]  # the next text message, None once closed
Send = Callable[[str], Awaitable[Any]]


class App:
    """What every library's server does with a connection, whatever the library."""

    def __init__(self, direction: str, pool: list[str], size: int, interval: float) -> None:
        self.direction, self.pool, self.size, self.interval = direction, pool, size, interval
        self.stats = Stats()

    async def small(self, send: Send, recv: Recv) -> None:
        self.stats.small_connections += 1
        while (message := await recv()) is not None:
            await send(message)
            self.stats.small_echoes += 1

    async def big(self, send: Send, recv: Recv) -> None:
        stats = self.stats
        stats.big_connections += 1
        if self.direction == "idle":
            while await recv() is not None:
                pass
            return
        if self.direction == "receive":
            while (message := await recv()) is not None:
                stats.big_received += 1
                if len(message) != self.size:
                    stats.big_bad += 1
            return
        if await recv() is None:  # "start"
            return
        closed = asyncio.Event()

        async def watch() -> None:
            while await recv() is not None:
                pass
            closed.set()

        watcher = asyncio.create_task(watch())
        loop = asyncio.get_running_loop()
        tick = loop.time()
        try:
            while not closed.is_set():
                await send(self.pool[stats.big_sent % len(self.pool)])
                stats.big_sent += 1
                tick += self.interval
                now = loop.time()
                if now > tick:  # the send ended after the next tick: go on from now
                    stats.big_late += math.floor((now - tick) / self.interval) + 1
                    tick = now
                else:
                    try:
                        await asyncio.wait_for(closed.wait(), tick - now)
                    except asyncio.TimeoutError:
                        pass
        except Exception:  # the client went away in the middle of a send
            pass
        finally:
            watcher.cancel()


Started = tuple[int, Callable[[], Awaitable[None]]]  # port, and how to stop the server


_SOCKETS: list[socket.socket] = []  # kept open for as long as the process serves


def _socket() -> socket.socket:
    """A listening socket on 127.0.0.1 and an ephemeral port (non-blocking, as the
    servers' own are), kept alive here: hypercorn's ``fd://`` wraps its descriptor
    without a reference to it. Made with protocol ``IPPROTO_TCP``, as ``getaddrinfo``
    gives a server binding a host and port itself: asyncio turns Nagle's algorithm off
    (``TCP_NODELAY``) only on connections of such a socket, and with it on, an echo
    written while the previous one is unacknowledged waits for the client's next
    message (open-loop clients then stay one message behind after any stall)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    sock.setblocking(False)
    sock.set_inheritable(True)
    _SOCKETS.append(sock)
    return sock


async def _websockets(app: App) -> Started:
    from websockets.asyncio.server import serve
    from websockets.exceptions import ConnectionClosed

    async def handler(ws: Any) -> None:
        async def recv() -> Optional[str]:
            try:
                return await ws.recv()
            except ConnectionClosed:
                return None

        session = app.big if ws.request.path == "/big" else app.small
        await session(ws.send, recv)

    # websockets' defaults (compression="deflate"), but messages up to MAX_SIZE, no pings
    server = await serve(handler, sock=_socket(), max_size=MAX_SIZE, ping_interval=None)

    async def stop() -> None:
        server.close()

    return server.sockets[0].getsockname()[1], stop  # type: ignore[index]


def _asgi(app: App) -> Callable[..., Awaitable[None]]:
    """A raw ASGI application (no framework)."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "websocket":
            return
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        closed = False

        async def recv() -> Optional[str]:
            nonlocal closed
            if closed:
                return None
            message = await receive()
            if message["type"] == "websocket.receive":
                return message.get("text") or (message.get("bytes") or b"").decode()
            closed = True
            return None

        async def send_text(text: str) -> None:
            await send({"type": "websocket.send", "text": text})

        session = app.big if scope["path"] == "/big" else app.small
        await session(send_text, recv)

    return asgi


def _uvicorn(ws: str) -> Callable[[App], Awaitable[Started]]:
    async def start(app: App) -> Started:
        import uvicorn

        config = uvicorn.Config(_asgi(app), ws=ws, ws_max_size=MAX_SIZE,
                                ws_ping_interval=None, ws_ping_timeout=None,
                                ws_per_message_deflate=True, lifespan="off",
                                log_level="error", access_log=False)
        server = uvicorn.Server(config)
        sock = _socket()
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)

        async def stop() -> None:
            server.should_exit = True
            await asyncio.wait_for(task, 10)

        return sock.getsockname()[1], stop

    return start


async def _hypercorn(app: App) -> Started:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    sock = _socket()
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.websocket_max_message_size = MAX_SIZE
    config.loglevel = "ERROR"
    stopping = asyncio.Event()
    task = asyncio.create_task(serve(_asgi(app), config,  # type: ignore[arg-type]
                                     shutdown_trigger=stopping.wait))  # type: ignore[arg-type]
    await asyncio.sleep(0.2)
    if task.done():
        task.result()

    async def stop() -> None:
        stopping.set()
        await asyncio.wait_for(task, 10)

    return sock.getsockname()[1], stop


async def _aiohttp(app: App) -> Started:
    from aiohttp import WSMsgType, web

    async def handler(request: Any) -> Any:
        ws = web.WebSocketResponse(max_msg_size=MAX_SIZE)  # compress=True: its default
        await ws.prepare(request)

        async def recv() -> Optional[str]:
            msg = await ws.receive()
            return msg.data if msg.type == WSMsgType.TEXT else None

        session = app.big if request.match_info["kind"] == "big" else app.small
        await session(ws.send_str, recv)
        return ws

    port, runner = await aiohttp_site(handler, "/{kind}")
    return port, runner.cleanup


async def _tornado(app: App) -> Started:
    import tornado.httpserver
    import tornado.web
    import tornado.websocket

    class Small(tornado.websocket.WebSocketHandler):
        """An echo as tornado's users write it, Nagle's algorithm off as tornado's docs
        advise for small messages (``set_nodelay``; the other servers have it off)."""

        def get_compression_options(self) -> dict[str, Any]:
            return {}  # compression on, tornado's defaults

        def open(self) -> None:
            self.set_nodelay(True)
            app.stats.small_connections += 1

        def on_message(self, message: Any) -> None:
            self.write_message(message)
            app.stats.small_echoes += 1

    class Big(tornado.websocket.WebSocketHandler):
        def get_compression_options(self) -> dict[str, Any]:
            return {}

        def open(self) -> None:
            self.set_nodelay(True)
            self.inbox: asyncio.Queue[Optional[str]] = asyncio.Queue()

            async def recv() -> Optional[str]:
                return await self.inbox.get()

            self.session = asyncio.create_task(app.big(self.write_message, recv))

        def on_message(self, message: Any) -> None:
            self.inbox.put_nowait(message)

        def on_close(self) -> None:
            self.inbox.put_nowait(None)

    web_app = tornado.web.Application([("/small", Small), ("/big", Big)],
                                      websocket_max_message_size=MAX_SIZE)
    sock = _socket()
    server = tornado.httpserver.HTTPServer(web_app, max_buffer_size=MAX_SIZE)
    server.add_sockets([sock])

    async def stop() -> None:
        server.stop()

    return sock.getsockname()[1], stop


SERVERS: dict[str, Callable[[App], Awaitable[Started]]] = {
    "websockets": _websockets,
    "uvicorn-websockets": _uvicorn("websockets"),
    "uvicorn-websockets-sansio": _uvicorn("websockets-sansio"),
    "uvicorn-wsproto": _uvicorn("wsproto"),
    "aiohttp": _aiohttp,
    "hypercorn": _hypercorn,
    "tornado": _tornado,
}


async def serve(library: str, mode: str, direction: str, pool_path: str, size: int,
                interval: float) -> None:
    warnings.simplefilter("ignore", DeprecationWarning)  # uvicorn's websockets_impl
    raise_fd_limit()
    pool = load_pool(pool_path, size)
    for module in IMPORTS[library]:
        importlib.import_module(module)
    import fastdeflate

    codec_calls = None
    if enabled_mode(mode):  # (the classes rebound before enable(): see the function)
        codec_calls = time_large_codec_calls(fastdeflate, big_call(size))
    enabled = fastdeflate.enable() if enabled_mode(mode) else []
    app = App(direction, pool, size, interval)
    port, stop = await SERVERS[library](app)
    _say({"port": port, "pid": os.getpid(), "library": library, "mode": mode,
          "enabled": enabled, "implementation": fastdeflate.IMPLEMENTATION,
          "engine": fastdeflate.ENGINE,
          "off_loop_setting": hasattr(fastdeflate, "set_off_loop_size"),
          "environment": {k: v for k, v in os.environ.items()
                          if k.startswith("FASTDEFLATE_")}})
    while True:
        command = (await _stdin_line()).split()
        if not command or command[0] == "stop":
            break
    status = fastdeflate.status()
    integration = LIBRARIES[library]
    _say({"stats": asdict(app.stats), "traffic": status["traffic"],
          "state": status["libraries"][integration]["state"],
          "off_loop": status.get("off_loop"),  # (where fastdeflate has that path)
          # CPU seconds of fastdeflate's codec calls on big messages, the whole run
          "codec": None if codec_calls is None else {"calls": len(codec_calls),
                                                     "seconds": sum(codec_calls)},
          "cpu": time.process_time()})
    try:
        await asyncio.wait_for(stop(), 10)
    except Exception:  # exiting anyway
        pass


# --- the clients ----------------------------------------------------------------------------


def _counting_connection() -> type:
    from websockets.asyncio.client import ClientConnection

    class Counting(ClientConnection):
        """A client connection that counts the bytes it reads from and writes to its
        socket."""

        read = 0
        written = 0

        def __init__(self, protocol: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(protocol, *args, **kwargs)
            data_to_send = protocol.data_to_send

            def counted() -> list[bytes]:
                out = data_to_send()
                self.written += sum(len(d) for d in out)
                return out

            protocol.data_to_send = counted

        def data_received(self, data: bytes) -> None:
            self.read += len(data)
            super().data_received(data)

    return Counting


def _options(compression: bool) -> dict[str, Any]:
    """The clients' options: websockets' defaults (compression="deflate") or none."""
    return {"ping_interval": None, "max_size": MAX_SIZE, "open_timeout": 60,
            **({} if compression else {"compression": None})}


def _negotiated(ws: Any) -> str:
    return ws.response.headers.get("Sec-WebSocket-Extensions", "")


def replay_payloads(ws: Any, pool: list[str]) -> None:
    """Make the big client's extension send, for message n of ``pool`` cycled through, the
    payload its own compressor made for it before the run: the first cycle's, then the
    second's for every later cycle (a payload refers back at most one window, which from
    the second cycle on always holds the end of the same message). The server receives
    what this client would send, but the client's CPU — the peer's, another machine's in
    a deployment — stays out of the CPUs the server and the small clients share."""
    extensions = ws.protocol.extensions
    if not extensions:
        return
    from websockets.frames import Frame, Opcode

    extension = extensions[0]
    made = [extension.encode(Frame(Opcode.TEXT, text.encode())).data for text in pool * 2]
    sent = 0

    def encode(frame: Frame) -> Frame:
        nonlocal sent
        if frame.opcode is not Opcode.TEXT:  # (the close frame, as it is)
            return frame
        n = sent if sent < len(pool) else len(pool) + sent % len(pool)
        sent += 1
        return dataclasses.replace(frame, data=made[n], rsv1=True)

    extension.encode = encode


async def big(port: int, direction: str, pool_path: str, size: int, interval: float,
              compression: bool) -> None:
    from websockets.asyncio.client import connect

    pool = load_pool(pool_path, size)
    ws = await connect(f"ws://127.0.0.1:{port}/big", create_connection=_counting_connection(),
                       **_options(compression))
    if direction == "receive":
        replay_payloads(ws, pool)
    _say({"extensions": _negotiated(ws)})
    if (await _stdin_line()).strip() != "go":
        await ws.close()
        return
    read0, written0 = ws.read, ws.written
    done = {"messages": 0, "wrong": 0}
    start = time.monotonic()

    async def receiving() -> None:
        await ws.send("start")
        while True:
            message = await ws.recv()
            if message != pool[done["messages"] % len(pool)]:
                done["wrong"] += 1
            done["messages"] += 1

    async def sending() -> None:
        loop = asyncio.get_running_loop()
        tick = loop.time()
        while True:
            await ws.send(pool[done["messages"] % len(pool)])
            done["messages"] += 1
            tick += interval
            tick = max(tick, loop.time())
            await asyncio.sleep(tick - loop.time())

    async def idle() -> None:
        await ws.wait_closed()

    run = {"send": receiving, "receive": sending, "idle": idle}[direction]
    task = asyncio.create_task(run())
    await _stdin_line()  # stop
    seconds = time.monotonic() - start
    failed = task.done() and task.exception()
    task.cancel()
    read, written = ws.read - read0, ws.written - written0
    _say({"messages": done["messages"], "wrong": done["wrong"], "seconds": seconds,
          "wire": read if direction == "send" else written,
          "error": repr(failed) if failed else ""})
    try:
        await asyncio.wait_for(ws.close(), 10)
    except Exception:  # exiting anyway
        pass


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process, all threads."""
    times = os.times()
    return times.user + times.system


def quantile(ordered: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of the sorted ``ordered``."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def small(port: int, count: int, compression: bool) -> None:
    from websockets.asyncio.client import connect

    raise_fd_limit()
    conns = await asyncio.gather(*(connect(f"ws://127.0.0.1:{port}/small",
                                           **_options(compression)) for _ in range(count)))
    offers: dict[str, int] = {}
    for ws in conns:
        offers[_negotiated(ws)] = offers.get(_negotiated(ws), 0) + 1
    _say({"connected": len(conns), "extensions": offers})
    command = (await _stdin_line()).split()
    if not command or command[0] != "go":
        return
    warmup, seconds, period = map(float, command[1:4])
    loop = asyncio.get_running_loop()
    begin = loop.time() + 0.05
    start, end = begin + warmup, begin + warmup + seconds
    samples: list[float] = []
    wrong = [0]
    skipped = [0]  # ticks a client missed (its own process late), never sent
    unanswered = [0]  # messages sent whose echo never came
    cpu = [0.0]  # this process's CPU seconds over the measured window

    async def one(i: int, ws: Any) -> None:
        """Send on the schedule whatever the echoes do (open loop: a message sent during
        a stall is timed too), and time each echo as it comes back, in order."""
        messages = [m.decode("ascii") for m in payloads.varying(SMALL, 64, seed=100 + i)]
        sent: deque[tuple[float, str, bool]] = deque()  # (sent at, message, timed)
        answered = asyncio.Event()

        async def echoes() -> None:
            while True:
                echo = await ws.recv()
                received = time.perf_counter()
                if not sent:
                    wrong[0] += 1
                    continue
                t0, message, timed = sent.popleft()
                if echo != message:
                    wrong[0] += 1
                if timed:
                    samples.append(received - t0)
                if not sent:
                    answered.set()

        reader = asyncio.create_task(echoes())
        tick = begin + period * i / count  # the clients spread over the period
        k = 0
        try:
            while True:
                delay = tick - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent_at = loop.time()
                if sent_at >= end:
                    break
                message = messages[k % len(messages)]
                answered.clear()
                sent.append((time.perf_counter(), message, sent_at >= start))
                await ws.send(message)
                k += 1
                tick += period
                now = loop.time()
                if now > tick + period:  # this client itself fell behind: no burst
                    missed = math.floor((now - tick) / period)
                    skipped[0] += missed
                    tick += missed * period
            if sent:
                try:
                    await asyncio.wait_for(answered.wait(), 30)
                except asyncio.TimeoutError:
                    unanswered[0] += len(sent)
        finally:
            reader.cancel()

    async def mark() -> None:
        await asyncio.sleep(max(0.0, start - loop.time()))
        cpu[0] = _cpu_seconds()
        _say({"measuring": True})
        await asyncio.sleep(max(0.0, end - loop.time()))
        cpu[0] = _cpu_seconds() - cpu[0]
        _say({"ended": True})  # (the last echoes may still be on their way)

    marker = asyncio.create_task(mark())
    await asyncio.gather(*(one(i, ws) for i, ws in enumerate(conns)))
    await marker
    ordered = sorted(samples)
    ms = [x * 1000 for x in ordered] or [0.0]
    _say({"samples": len(ordered), "wrong": wrong[0], "skipped": skipped[0],
          "unanswered": unanswered[0], "cpu": cpu[0],
          "p50": quantile(ms, 0.50), "p90": quantile(ms, 0.90), "p99": quantile(ms, 0.99),
          "p999": quantile(ms, 0.999), "max": ms[-1],
          "mean": sum(ms) / len(ms)})
    await _stdin_line()  # close
    await asyncio.gather(*(asyncio.wait_for(ws.close(), 10) for ws in conns),
                         return_exceptions=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("role", choices=("server", "big", "small"))
    parser.add_argument("--library", choices=tuple(LIBRARIES), default="websockets")
    parser.add_argument("--mode", choices=tuple(MODES), default="stock")
    parser.add_argument("--direction", choices=DIRECTIONS, default="send")
    parser.add_argument("--pool", default="")
    parser.add_argument("--size", type=int, default=4_000_000)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--no-compression", action="store_true")
    args = parser.parse_args(argv)
    if args.role == "server":
        asyncio.run(serve(args.library, args.mode, args.direction, args.pool, args.size,
                          args.interval))
    elif args.role == "big":
        asyncio.run(big(args.port, args.direction, args.pool, args.size, args.interval,
                        not args.no_compression))
    else:
        asyncio.run(small(args.port, args.clients, not args.no_compression))


if __name__ == "__main__":
    main()
