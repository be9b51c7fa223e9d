"""websockets: one message through its own permessage-deflate extension objects, no sockets.

The sending side is a ``PerMessageDeflate`` extension's ``encode`` (what websockets calls
for every outgoing frame), the receiving side another one's ``decode``; parameters are
what two websockets peers negotiate with the default ``compression="deflate"``: window
12 bits both ways, memLevel 5. ``enabled=False`` uses websockets' own class,
``enabled=True`` fastdeflate's (``fastdeflate.integrations.websockets``).

Run ``python benchmarks/per_library/websockets_lib.py`` for stock vs enabled on 1 KB
JSON messages (interleaved runs, medians).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Callable

from websockets.extensions import permessage_deflate as pmd
from websockets.frames import Frame, Opcode

import fastdeflate
from fastdeflate.integrations import websockets as fw

NAME = "websockets"

WINDOW_BITS = 12  # websockets' default server_max_window_bits / client_max_window_bits
COMPRESS_SETTINGS = {"memLevel": 5}  # websockets' default


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: encode with one extension object, decode with its peer's."""
    cls = fw.PerMessageDeflate if enabled else pmd.PerMessageDeflate
    nct = no_context_takeover
    sender = cls(nct, nct, WINDOW_BITS, WINDOW_BITS, dict(COMPRESS_SETTINGS))
    receiver = cls(nct, nct, WINDOW_BITS, WINDOW_BITS, dict(COMPRESS_SETTINGS))
    encode, decode = sender.encode, receiver.decode
    binary = Opcode.BINARY

    def roundtrip(message: bytes) -> bytes:
        frame = encode(Frame(binary, message))
        return bytes(decode(frame, max_size=None).data)

    return roundtrip


def json_messages(count: int, size: int = 1024, vary: bool = True, seed: int = 0) -> list[bytes]:
    """``count`` JSON documents of about ``size`` bytes; identical ones if not ``vary``."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    for i in range(count):
        r = rnd if vary else random.Random(seed)
        items = []
        doc = {"type": "ticker", "seq": i if vary else 0, "items": items}
        while len(json.dumps(doc)) < size:
            items.append(
                {"symbol": f"SYM{r.randrange(500)}", "price": round(r.uniform(1, 1000), 4),
                 "volume": r.randrange(10**7), "side": r.choice(("buy", "sell"))}
            )
        out.append(json.dumps(doc).encode())
    return out


def time_run(roundtrip: Callable[[bytes], bytes], payloads: list[bytes]) -> float:
    """Seconds for one pass over ``payloads`` (each result checked once, outside timing)."""
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
        stock_times.append(time_run(make_roundtrip(False, no_context_takeover), payloads))
        fast_times.append(time_run(make_roundtrip(True, no_context_takeover), payloads))
    return statistics.median(stock_times), statistics.median(fast_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import websockets.version

    print(
        f"websockets {websockets.version.version}, fastdeflate {fastdeflate.__version__} "
        f"({fastdeflate.IMPLEMENTATION}, {getattr(fastdeflate, 'ENGINE', 'zlib ' + fastdeflate.ZLIB_VERSION)}); "
        f"window {WINDOW_BITS}, memLevel 5; {args.messages} x ~1 KB JSON, "
        f"{args.repeats} interleaved repeats, medians"
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
