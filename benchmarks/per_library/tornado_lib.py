"""tornado: one message through its own permessage-deflate objects, no sockets.

The sending side is the compressor object ``WebSocketProtocol13._create_compressors``
builds (``compress(message)`` is all ``write_message`` does to the payload before framing
it), the receiving side the decompressor object (``_handle_message`` hands it the joined
payload of a message). Settings are tornado's defaults for ``compression_options={}``:
level 6 (``GZipContentEncoding.GZIP_LEVEL``), memLevel 8, window 15, max_message_size
10 MiB. ``enabled=False`` uses tornado's ``_PerMessageDeflateCompressor`` /
``_PerMessageDeflateDecompressor``, ``enabled=True`` fastdeflate's drop-ins
(``fastdeflate.integrations.tornado``).

Run ``python benchmarks/per_library/tornado_lib.py`` for stock vs enabled on 1 KB JSON
messages (interleaved runs, medians).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any, Callable

import tornado.websocket as tws

import fastdeflate
from fastdeflate.integrations import tornado as ft

NAME = "tornado"

WINDOW_BITS = 15  # what tornado agrees to with its own peers
MAX_MESSAGE_SIZE = tws._default_max_message_size
OPTIONS: dict[str, Any] = {}  # get_compression_options() returning {}: tornado's defaults


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: tornado's compressor, then its decompressor."""
    if enabled:
        compressor_cls, decompressor_cls = ft.FastDeflateCompressor, ft.FastDeflateDecompressor
    else:
        compressor_cls, decompressor_cls = ft.stock_classes()
    persistent = not no_context_takeover
    compress = compressor_cls(persistent, WINDOW_BITS, OPTIONS).compress
    decompress = decompressor_cls(persistent, WINDOW_BITS, MAX_MESSAGE_SIZE, OPTIONS).decompress

    def roundtrip(message: bytes) -> bytes:
        return decompress(compress(message))

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
    """Seconds for one pass over ``payloads``."""
    start = time.perf_counter()
    for message in payloads:
        roundtrip(message)
    return time.perf_counter() - start


def compare(payloads: list[bytes], no_context_takeover: bool, repeats: int) -> tuple[float, float]:
    """Median seconds per pass, stock and enabled, from interleaved runs (A B A B ...)."""
    check_stock = make_roundtrip(False, no_context_takeover)
    check_fast = make_roundtrip(True, no_context_takeover)
    for message in payloads[:100]:  # correctness, and warm-up
        assert check_stock(message) == message and check_fast(message) == message
    stock_times, fast_times = [], []
    for _ in range(repeats):
        # fresh objects per run, so every run starts from the same (empty) window
        stock_times.append(time_run(make_roundtrip(False, no_context_takeover), payloads))
        fast_times.append(time_run(make_roundtrip(True, no_context_takeover), payloads))
    return statistics.median(stock_times), statistics.median(fast_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import tornado

    print(f"tornado {tornado.version}, fastdeflate {fastdeflate.IMPLEMENTATION} "
          f"on {getattr(fastdeflate, 'ENGINE', fastdeflate.ZLIB_VERSION)}; {args.count} messages of ~{args.size} B; "
          f"median of {args.repeats} interleaved runs (stock, enabled, stock, ...)")
    print(f"{'workload':<14} {'context':<12} {'stock us/msg':>12} {'enabled us/msg':>14} "
          f"{'speedup':>8}")
    for vary in (True, False):
        payloads = json_messages(args.count, args.size, vary=vary)
        for no_context_takeover in (False, True):
            stock, fast = compare(payloads, no_context_takeover, args.repeats)
            print(f"{'varying JSON' if vary else 'repeated JSON':<14} "
                  f"{'no takeover' if no_context_takeover else 'takeover':<12} "
                  f"{stock / args.count * 1e6:>12.2f} {fast / args.count * 1e6:>14.2f} "
                  f"{stock / fast:>7.2f}x")


if __name__ == "__main__":
    main()
