"""aiohttp: one message through its own WebSocket writer and reader objects, no sockets.

The sending side is a ``WebSocketWriter`` (``aiohttp._websocket.writer``) compressing with
aiohttp's settings (level 1 = ``Z_BEST_SPEED``, window 15, memLevel 8; no context
takeover means its ``Z_FULL_FLUSH`` per message) and writing the frame to an in-memory
transport; the receiving side is aiohttp's (compiled) ``WebSocketReader`` parsing that
frame, decompressing it and queueing the message, read back through its
``WebSocketDataQueue``. ``enabled=False`` uses aiohttp's own codec objects,
``enabled=True`` fastdeflate's (``fastdeflate.integrations.aiohttp``).

Run ``python benchmarks/per_library/aiohttp_lib.py`` for stock vs enabled on 1 KB JSON
messages (interleaved runs, medians).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import time
from typing import Any, Callable

from aiohttp import compression_utils
from aiohttp._websocket.reader import WebSocketDataQueue, WebSocketReader
from aiohttp._websocket.writer import WebSocketWriter
from aiohttp.http_websocket import WSMsgType

import fastdeflate
from fastdeflate.integrations import aiohttp as fa

NAME = "aiohttp"

WINDOW_BITS = 15  # aiohttp's default (compress=True / compress=15)
MAX_MSG_SIZE = 4 * 1024 * 1024  # aiohttp's default max_msg_size


class _MemoryTransport(asyncio.Transport):
    """Collects what the writer writes."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []

    def write(self, data: Any) -> None:
        self.chunks.append(data)

    def is_closing(self) -> bool:
        return False


class _Protocol:
    """The few attributes aiohttp's writer and data queue read from a protocol."""

    _paused = False
    _reading_paused = False

    def pause_reading(self) -> None:
        self._reading_paused = True

    def resume_reading(self) -> None:
        self._reading_paused = False


def _read_now(queue: WebSocketDataQueue) -> Any:
    """``await queue.read()`` for a queue that already holds a message (no event loop)."""
    coro = queue.read()
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the reader queued no message")


def _codec_types(writer: WebSocketWriter, reader: WebSocketReader) -> set[type]:
    return {type(writer._compressobj)} | {
        type(o) for o in gc.get_referents(reader) if "ompressor" in type(o).__name__
    }


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: aiohttp's writer compresses, its reader decompresses."""
    protocol = _Protocol()
    transport = _MemoryTransport()
    writer = WebSocketWriter(
        protocol, transport, compress=WINDOW_BITS, notakeover=no_context_takeover  # type: ignore[arg-type]
    )
    queue = WebSocketDataQueue(protocol, 2**16, loop=None)  # type: ignore[arg-type]
    reader = WebSocketReader(queue, MAX_MSG_SIZE, compress=True, decode_text=False)
    send = writer._send_compressed_frame_sync  # what send_frame runs for messages <= 16 KiB
    chunks, binary = transport.chunks, WSMsgType.BINARY

    def roundtrip(message: bytes) -> bytes:
        send(message, binary, None)
        frame = b"".join(chunks)
        chunks.clear()
        reader.feed_data(frame)
        return _read_now(queue).data

    # aiohttp creates its codec objects at the first compressed message: create them now,
    # with fastdeflate's enabled or not as asked, then leave the global switch as it was.
    was_enabled = fa.is_enabled()
    fa.enable() if enabled else fa.disable()
    try:
        assert roundtrip(b"") == b""
    finally:
        fa.enable() if was_enabled else fa.disable()
    if enabled:
        expected = {fa.WebSocketCompressor, fa.WebSocketDecompressor}
    else:
        expected = {compression_utils.ZLibCompressor, compression_utils.ZLibDecompressor}
    assert _codec_types(writer, reader) == expected, _codec_types(writer, reader)
    return roundtrip


def json_messages(count: int, size: int = 1024, vary: bool = True, seed: int = 0) -> list[bytes]:
    """``count`` JSON documents of about ``size`` bytes; identical ones if not ``vary``."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    for i in range(count):
        r = rnd if vary else random.Random(seed)
        items: list[dict[str, Any]] = []
        doc = {"type": "ticker", "seq": i if vary else 0, "items": items}
        while len(json.dumps(doc)) < size:
            items.append(
                {"symbol": f"SYM{r.randrange(500)}", "price": round(r.uniform(1, 1000), 4),
                 "volume": r.randrange(10**7), "side": r.choice(("buy", "sell"))}
            )
        out.append(json.dumps(doc).encode())
    return out


def time_run(roundtrip: Callable[[bytes], bytes], payloads: list[bytes]) -> float:
    """CPU seconds of this process for one pass over ``payloads``.

    CPU time rather than wall time: on a shared, busy machine it does not count the
    time slices other processes take.
    """
    start = time.process_time()
    for message in payloads:
        roundtrip(message)
    return time.process_time() - start


def compare(payloads: list[bytes], no_context_takeover: bool, repeats: int) -> tuple[float, float]:
    """Median seconds per pass, stock and enabled, from interleaved runs (A B A B ...)."""
    check_stock = make_roundtrip(False, no_context_takeover)
    check_fast = make_roundtrip(True, no_context_takeover)
    for message in payloads[:100]:  # correctness, and warm-up
        assert check_stock(message) == message and check_fast(message) == message
    stock_times, fast_times = [], []
    for _ in range(repeats):
        stock_times.append(time_run(make_roundtrip(False, no_context_takeover), payloads))
        fast_times.append(time_run(make_roundtrip(True, no_context_takeover), payloads))
    return statistics.median(stock_times), statistics.median(fast_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import aiohttp

    print(
        f"aiohttp {aiohttp.__version__}, fastdeflate {fastdeflate.__version__} "
        f"({fastdeflate.IMPLEMENTATION}, {getattr(fastdeflate, 'ENGINE', fastdeflate.ZLIB_VERSION)}); "
        f"level 1, window {WINDOW_BITS}, memLevel 8; {args.messages} x ~1 KB JSON, "
        f"{args.repeats} interleaved repeats, medians of CPU time"
    )
    print(f"{'workload':<16}{'context':<14}{'stock us/msg':>14}{'fast us/msg':>13}{'ratio':>8}")
    for vary in (True, False):
        payloads = json_messages(args.messages, vary=vary)
        for nct in (False, True):
            stock, fast = compare(payloads, nct, args.repeats)
            n = len(payloads)
            print(
                f"{'varying JSON' if vary else 'repeated JSON':<16}"
                f"{'no takeover' if nct else 'takeover':<14}"
                f"{stock / n * 1e6:>14.2f}{fast / n * 1e6:>13.2f}{stock / fast:>7.2f}x"
            )


if __name__ == "__main__":
    main()
