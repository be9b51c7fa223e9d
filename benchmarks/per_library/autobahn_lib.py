"""autobahn: one message through its own permessage-deflate objects, no sockets.

The sending side is what ``WebSocketProtocol.sendMessage`` does to a payload when
compression is on (``start_compress_message``, ``compress_message_data``,
``end_compress_message`` of the connection's PMCE object, outputs joined); the receiving
side what ``onFrameBegin`` / ``onFrameData`` / ``onFrameEnd`` do for a single-frame
compressed message (``start_decompress_message``, ``decompress_message_data``,
``end_decompress_message``). Settings are autobahn's defaults: window 15, memLevel 8,
zlib's default level, no ``maxMessagePayloadSize`` (so ``max_output_len=None``).
``enabled=False`` uses autobahn's ``PerMessageDeflate``, ``enabled=True`` fastdeflate's
subclass (``fastdeflate.integrations.autobahn.PerMessageDeflate``).

Run ``python benchmarks/per_library/autobahn_lib.py`` for stock vs enabled on 1 KB JSON
messages (interleaved runs, medians of process CPU time).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any, Callable

from autobahn.websocket.compress_deflate import PerMessageDeflate as StockPerMessageDeflate

import fastdeflate
from fastdeflate.integrations.autobahn import PerMessageDeflate as FastPerMessageDeflate

NAME = "autobahn"

WINDOW_BITS = 15  # autobahn's default when the peers ask for nothing smaller
MEM_LEVEL = 8  # autobahn's default (accept objects with mem_level=None)


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: a server's PMCE compresses, a client's decompresses."""
    cls = FastPerMessageDeflate if enabled else StockPerMessageDeflate
    # server -> client direction; server_no_context_takeover is what governs it
    args = (no_context_takeover, False, WINDOW_BITS, WINDOW_BITS, MEM_LEVEL)
    sender, receiver = cls(True, *args), cls(False, *args)

    def roundtrip(message: bytes) -> bytes:
        sender.start_compress_message()
        payload = b"".join(
            [sender.compress_message_data(message), sender.end_compress_message()]
        )
        receiver.start_decompress_message()
        out = receiver.decompress_message_data(payload, max_output_len=None)
        receiver.end_decompress_message()
        return out

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
    """CPU seconds of this process for one pass over ``payloads`` (CPU is what the
    package saves, and on a shared machine it is steadier than wall time)."""
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
    import autobahn

    print(f"autobahn {autobahn.__version__}, fastdeflate {fastdeflate.IMPLEMENTATION} "
          f"on {fastdeflate.ENGINE}; {args.count} messages of ~{args.size} B; "
          f"median CPU time of {args.repeats} interleaved runs (stock, enabled, stock, ...)")
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
