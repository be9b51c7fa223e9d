"""Large messages compressed off the event loop (issue 43) on tornado's server.

A tornado ``WebSocketHandler`` (compression on, fastdeflate enabled) runs a script
against a stock websockets client (websockets' own zlib extension, recording the
compressed payloads): large and small messages written concurrently from several
tasks and back to back with pings in between, on two connections at once. Every
message must arrive exactly and in the order written; the large ones must have gone off
the loop, and the payloads must be those of the same script on the loop
(``set_off_loop_size(0)``) and of one ``fastdeflate.Compressor`` run over the messages.
A write cancelled while its message is compressed is never delivered and what follows
decodes; ``close()`` while a message is compressed delivers it first; a peer gone
meanwhile fails the write's future with ``WebSocketClosedError`` and hangs nothing.
"""

from __future__ import annotations

import asyncio
import logging
from types import ModuleType
from typing import Any, Iterator

import pytest

import fastdeflate
from fastdeflate import _off_loop

tornado = pytest.importorskip("tornado")
pytest.importorskip("websockets")
import tornado.httpserver  # noqa: E402
import tornado.netutil  # noqa: E402
import tornado.web  # noqa: E402
import tornado.websocket  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

import fastdeflate.integrations.tornado as ft  # noqa: E402

from .test_off_loop import SENT, describe, snapshot  # noqa: E402
from .test_off_loop_wsproto import (  # noqa: E402
    BIG, BIG_BYTES, HOST, IN_ORDER, SIZE, _RecordingFactory, receive_all, run,
)

#: What the handlers saw go wrong (outside what a script expects): nothing, ever.
handler_errors: list[BaseException] = []
#: How each "gone" script's write ended: "written" or the exception's class name.
gone_outcomes: list[str] = []


class ScriptHandler(tornado.websocket.WebSocketHandler):
    """Runs the script its client names in the first message."""

    def get_compression_options(self) -> dict:
        return {}

    def send(self, message: Any) -> "asyncio.Future[None]":
        return self.write_message(message, binary=isinstance(message, bytes))

    echoing = False

    async def on_message(self, message: Any) -> None:
        if self.echoing:  # ("echo sizes": each message's type, length and hash back)
            await self.send(describe(message))
            return
        if message == "echo sizes":
            self.echoing = True
            return
        if not isinstance(self.ws_connection, ft.FastDeflateWebSocketProtocol13):
            handler_errors.append(TypeError(f"not fastdeflate's: {self.ws_connection}"))
        try:
            await getattr(self, "script_" + message.replace(" ", "_"))()
        except BaseException as exc:
            handler_errors.append(exc)
            raise

    async def script_in_order(self) -> None:
        """Concurrent tasks, started in this order (as in the wsproto tests)."""
        async def send(message: Any) -> None:
            await self.send(message)

        tasks = [asyncio.ensure_future(send(BIG[0])), asyncio.ensure_future(send("small 0"))]
        await asyncio.sleep(0)
        tasks += [asyncio.ensure_future(send(BIG_BYTES)),
                  asyncio.ensure_future(send("small 1")),
                  asyncio.ensure_future(send(BIG[1])), asyncio.ensure_future(send("small 2"))]
        await asyncio.gather(*tasks)

    async def script_back_to_back(self) -> None:
        """write_message() calls in a row, pings between them, awaited together."""
        futures = []
        for message in IN_ORDER:
            futures.append(self.send(message))
            self.ping(b"p")
        await asyncio.gather(*futures)

    async def script_cancelled(self) -> None:
        future = self.send(BIG[2])
        for _ in range(3):
            await asyncio.sleep(0)
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future
        await self.send("after")
        await self.send(BIG[2])

    async def script_closing(self) -> None:
        future = self.send(BIG[2])
        for _ in range(3):
            await asyncio.sleep(0)
        self.close(1000)
        await future

    async def script_opt_out(self) -> None:
        """A message sent uncompressed on purpose while a large one is compressed."""
        future = self.send(BIG[0])
        with fastdeflate.uncompressed():
            later = self.send("small 2" * 50)
        await asyncio.gather(future, later)

    async def script_aborted(self) -> None:
        """The TCP connection lost while the message is compressed."""
        future = self.send(BIG[2])
        for _ in range(3):
            await asyncio.sleep(0)
        self.ws_connection.stream.close()
        try:
            await future
            gone_outcomes.append("written")
        except tornado.websocket.WebSocketClosedError as exc:
            gone_outcomes.append(type(exc).__name__)

    async def script_gone(self) -> None:
        gone_outcomes.append("started")
        try:
            await self.send(BIG[2])
            gone_outcomes.append("written")
        except tornado.websocket.WebSocketClosedError as exc:
            gone_outcomes.append(type(exc).__name__)


class TornadoServer:
    def __init__(self, max_size: int = 1 << 26) -> None:
        self.max_size = max_size

    async def __aenter__(self) -> "TornadoServer":
        sockets = tornado.netutil.bind_sockets(0, HOST)
        self.port = sockets[0].getsockname()[1]
        app = tornado.web.Application([("/", ScriptHandler)],
                                      websocket_max_message_size=self.max_size)
        self.server = tornado.httpserver.HTTPServer(app)
        self.server.add_sockets(sockets)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.stop()
        await asyncio.wait_for(self.server.close_all_connections(), 30)


@pytest.fixture
def enabled(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The adapter enabled, the off-loop size SIZE; after the test, nothing went wrong
    in the handlers and nothing was logged as an error (an exception in tornado, a
    future's exception never retrieved)."""
    caplog.set_level(logging.WARNING)
    previous = fastdeflate.set_off_loop_size(SIZE)
    was = ft.is_enabled()
    ft.enable()
    handler_errors.clear()
    try:
        yield
    finally:
        if not was:
            ft.disable()
        fastdeflate.set_off_loop_size(previous)
    errors, handler_errors[:] = list(handler_errors), []
    assert errors == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def compressed_on_its_own(messages: list[Any]) -> list[bytes]:
    """tornado's payloads for ``messages`` on one fresh compressor (level 6, 15 window
    bits, memLevel 8, flushed per message), those sent as they are left out."""
    compressor = fastdeflate.Compressor(level=6, window_bits=15, mem_level=8)
    payloads = []
    for message in messages:
        data = message.encode() if isinstance(message, str) else message
        payload = compressor.compress_or_skip(data)
        if payload is not None:
            payloads.append(payload)
    return payloads


async def receive(port: int, script: str, payloads: list[bytes]) -> list[Any]:
    """What a stock client receives after asking for ``script``, up to "small 2"."""
    received: list[Any] = []
    async with connect(f"ws://{HOST}:{port}", compression=None, max_size=None,
                       extensions=[_RecordingFactory(payloads)]) as client:
        await client.send(script)
        while not received or received[-1] != "small 2":
            received.append(await client.recv())
    return received


# -- the tests ----------------------------------------------------------------------

@pytest.mark.parametrize("script", ["in order", "back to back"])
def test_large_and_small_messages_arrive_exactly_and_in_order(
        script: str, use_impl: ModuleType, enabled: None, own_workers: int) -> None:
    """Two connections at once, each: large and small messages (from concurrent tasks,
    or written back to back with pings between) arrive exactly, in order; the large
    ones went off the loop."""
    before = _off_loop.counts()[0]

    async def main() -> list[list[Any]]:
        async with TornadoServer() as running:
            return list(await asyncio.gather(receive(running.port, script, []),
                                             receive(running.port, script, [])))

    for received in run(main()):
        assert received == IN_ORDER
    assert _off_loop.counts()[0] - before == 6  # 3 large messages x 2 connections


@pytest.mark.parametrize("script", ["in order", "back to back"])
def test_the_same_bytes_as_on_the_loop(script: str, use_impl: ModuleType,
                                       enabled: None) -> None:
    """The payloads a peer receives are those of the same script run on the loop, and
    those of one compressor run over the messages in order."""
    def payloads(size: int) -> list[bytes]:
        fastdeflate.set_off_loop_size(size)
        recorded: list[bytes] = []

        async def main() -> None:
            async with TornadoServer() as running:
                assert await receive(running.port, script, recorded) == IN_ORDER
        run(main())
        return recorded

    before = _off_loop.counts()[0]
    on_the_loop = payloads(0)
    assert _off_loop.counts()[0] == before
    off_the_loop = payloads(SIZE)
    assert _off_loop.counts()[0] - before == 3
    assert len(off_the_loop) >= 3
    assert off_the_loop == on_the_loop
    assert off_the_loop == compressed_on_its_own(IN_ORDER)


def test_a_write_cancelled_while_compressed_is_never_seen(
        use_impl: ModuleType, enabled: None) -> None:
    """The cancelled message never arrives; the same message written next decodes (the
    compressor started a new stream)."""
    before = _off_loop.counts()[0]

    async def main() -> list[Any]:
        async with TornadoServer() as running:
            return await receive_all(running.port, "cancelled", [])

    assert run(main()) == ["after", BIG[2]]
    assert _off_loop.counts()[0] - before == 1


def test_close_while_compressed_sends_the_message_first(
        use_impl: ModuleType, enabled: None) -> None:
    """close() while the message is compressed: the message, then a clean close."""
    codes: list[Any] = []

    async def main() -> list[Any]:
        async with TornadoServer() as running:
            received: list[Any] = []
            async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                await client.send("closing")
                try:
                    while True:
                        received.append(await client.recv())
                except ConnectionClosed as exc:
                    codes.append(exc.rcvd.code if exc.rcvd else None)
            return received

    assert run(main()) == [BIG[2]]
    assert codes == [1000]


@pytest.mark.parametrize("script", ["gone", "aborted"])
def test_a_connection_lost_while_compressed_hangs_nothing(
        script: str, use_impl: ModuleType, enabled: None) -> None:
    """The client drops its TCP connection ("gone": the write may still reach the
    socket) or the server loses it ("aborted") while a large message is compressed: the
    write's future ends (written, or WebSocketClosedError as tornado's), nothing leaks,
    nothing hangs, and a new connection is served as before."""
    gone_outcomes.clear()

    async def main() -> list[Any]:
        async with TornadoServer() as running:
            async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                await client.send(script)
                if script == "gone":
                    await asyncio.sleep(0.002)
                    client.transport.abort()
                else:
                    with pytest.raises(ConnectionClosed):
                        await client.recv()
            received = await receive(running.port, "in order", [])
            for _ in range(200):
                if gone_outcomes and gone_outcomes[-1] != "started":
                    break
                await asyncio.sleep(0.01)
            return received

    assert run(main()) == IN_ORDER
    if script == "gone":
        # (the reset may also have discarded the script's name before it was read)
        assert gone_outcomes in ([], ["started", "written"],
                                 ["started", "WebSocketClosedError"])
    else:
        assert gone_outcomes == ["WebSocketClosedError"]


def test_an_opt_out_held_behind_a_large_message_holds(
        use_impl: ModuleType, enabled: None) -> None:
    """fastdeflate.uncompressed() around a write held behind a large message: it goes
    out uncompressed (compressed later, in its writer's context)."""
    recorded: list[bytes] = []

    async def main() -> list[Any]:
        async with TornadoServer() as running:
            async with connect(f"ws://{HOST}:{running.port}", compression=None,
                               max_size=None,
                               extensions=[_RecordingFactory(recorded)]) as client:
                await client.send("opt out")
                return [await client.recv(), await client.recv()]

    assert run(main()) == [BIG[0], "small 2" * 50]
    assert len(recorded) == 1  # the large message only


def test_under_the_size_stays_on_the_loop(use_impl: ModuleType, enabled: None) -> None:
    """Only messages of at least the size go off the loop."""
    size = sorted(len(m) for m in IN_ORDER)[-2]  # the two largest messages
    before = _off_loop.counts()[0]
    fastdeflate.set_off_loop_size(size)

    async def main() -> list[Any]:
        async with TornadoServer() as running:
            return await receive(running.port, "in order", [])

    assert run(main()) == IN_ORDER
    assert _off_loop.counts()[0] - before == 2


def test_large_messages_received_exactly_and_in_order(use_impl: ModuleType,
                                                      enabled: None, own_workers: int) -> None:
    """A stock client sends large and small messages back to back; the handler answers
    each with its length and hash, in order; the large ones were decompressed in a
    worker thread while tornado's frame loop waited for them."""
    before = _off_loop.counts()[1]

    async def main() -> list[str]:
        async with TornadoServer() as running:
            async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                await client.send("echo sizes")
                for message in SENT:
                    await client.send(message)
                return [await client.recv() for _ in SENT]

    assert run(main()) == [describe(message) for message in SENT]
    assert _off_loop.counts()[1] - before == 4


def test_an_oversized_message_is_refused_as_stock_refuses_it(use_impl: ModuleType) -> None:
    """A message that inflates beyond ``websocket_max_message_size`` (its payload
    within it), large enough to be decompressed off the loop: 1009, as stock."""
    limit = 1 << 20
    too_big = snapshot(7, 2 * limit)  # ~200 KiB compressed

    async def close_code(enable: bool) -> int | None:
        previous = fastdeflate.set_off_loop_size(SIZE)
        (ft.enable if enable else ft.disable)()
        try:
            async with TornadoServer(limit) as running:
                async with connect(f"ws://{HOST}:{running.port}", max_size=None) as client:
                    await client.send("echo sizes")
                    await client.send(too_big)
                    with pytest.raises(ConnectionClosed):
                        await client.recv()
                    return client.protocol.close_rcvd and client.protocol.close_rcvd.code
        finally:
            ft.disable()
            fastdeflate.set_off_loop_size(previous)

    assert run(close_code(False)) == 1009
    before = _off_loop.counts()[1]
    assert run(close_code(True)) == 1009
    assert _off_loop.counts()[1] - before == 1
