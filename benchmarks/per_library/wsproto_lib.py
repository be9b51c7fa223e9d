"""wsproto: one message through its own frame protocol and permessage-deflate objects, no sockets.

The sending side is a server-side ``wsproto.frame_protocol.FrameProtocol`` with a
``PerMessageDeflate`` extension (``send_data``: the extension's ``frame_outbound`` plus
wsproto's framing, unmasked), the receiving side a client-side one
(``receive_bytes`` + ``received_frames``: header parsing, the extension's inbound hooks,
the message decoder). Parameters are negotiated by the extension objects themselves
(``offer`` -> ``accept`` -> ``finalize``): wsproto's defaults, window 15 both ways,
level 6 (Z_DEFAULT_COMPRESSION), memLevel 8. ``enabled=False`` uses wsproto's own
class, ``enabled=True`` fastdeflate's (``fastdeflate.integrations.wsproto``).

Run ``python benchmarks/per_library/wsproto_lib.py`` for stock vs enabled on 1 KB JSON
messages (interleaved runs, medians).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Callable

from wsproto.extensions import PerMessageDeflate as StockPerMessageDeflate
from wsproto.frame_protocol import FrameProtocol

import fastdeflate
from fastdeflate.integrations.wsproto import PerMessageDeflate as FastPerMessageDeflate

NAME = "wsproto"


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: server-side frame encoder, then client-side decoder."""
    cls = FastPerMessageDeflate if enabled else StockPerMessageDeflate
    nct = no_context_takeover
    client_ext = cls(client_no_context_takeover=nct, server_no_context_takeover=nct)
    server_ext = cls()
    response = server_ext.accept("permessage-deflate; " + str(client_ext.offer()))
    client_ext.finalize("permessage-deflate; " + str(response))
    sender = FrameProtocol(client=False, extensions=[server_ext])
    receiver = FrameProtocol(client=True, extensions=[client_ext])
    send_data, receive_bytes, received_frames = (
        sender.send_data, receiver.receive_bytes, receiver.received_frames
    )

    def roundtrip(message: bytes) -> bytes:
        receive_bytes(send_data(message))
        (frame,) = received_frames()
        return frame.payload  # type: ignore[return-value]

    return roundtrip


def json_messages(count: int, size: int = 1024, vary: bool = True, seed: int = 0) -> list[bytes]:
    """``count`` JSON documents of about ``size`` bytes; identical ones if not ``vary``."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    for i in range(count):
        r = rnd if vary else random.Random(seed)
        items: list[dict] = []
        doc = {"type": "ticker", "seq": i if vary else 0, "items": items}
        while len(json.dumps(doc)) < size:
            items.append(
                {"symbol": f"SYM{r.randrange(500)}", "price": round(r.uniform(1, 1000), 4),
                 "volume": r.randrange(10**7), "side": r.choice(("buy", "sell"))}
            )
        out.append(json.dumps(doc).encode())
    return out


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def time_run(
    roundtrip: Callable[[bytes], bytes], payloads: list[bytes], clock: str = "cpu"
) -> float:
    """Seconds for one pass over ``payloads``, by this process's CPU time or wall time."""
    now = CLOCKS[clock]
    start = now()
    for message in payloads:
        roundtrip(message)
    return now() - start


def compare(
    payloads: list[bytes], no_context_takeover: bool, repeats: int, clock: str = "cpu"
) -> tuple[float, float]:
    """Median seconds per pass, stock and enabled, from interleaved runs (A B A B ...)."""
    check_stock = make_roundtrip(False, no_context_takeover)
    check_fast = make_roundtrip(True, no_context_takeover)
    for message in payloads[:200]:  # correctness, and warm-up
        assert check_stock(message) == message and check_fast(message) == message
    stock_times, fast_times = [], []
    for _ in range(repeats):
        stock_times.append(time_run(make_roundtrip(False, no_context_takeover), payloads, clock))
        fast_times.append(time_run(make_roundtrip(True, no_context_takeover), payloads, clock))
    return statistics.median(stock_times), statistics.median(fast_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="cpu",
        help="cpu: this process's CPU time (steadier on a shared machine); wall: perf_counter",
    )
    args = parser.parse_args()
    import wsproto

    print(
        f"wsproto {wsproto.__version__}, fastdeflate {fastdeflate.__version__} "
        f"({fastdeflate.IMPLEMENTATION}, zlib {fastdeflate.ZLIB_VERSION}); "
        f"window 15, level 6, memLevel 8; {args.messages} x ~1 KB JSON, "
        f"{args.repeats} interleaved repeats, medians, {args.clock} time; "
        "includes wsproto's framing"
    )
    print(f"{'workload':<16}{'context':<14}{'stock us/msg':>14}{'fast us/msg':>13}{'ratio':>8}")
    for vary in (True, False):
        payloads = json_messages(args.messages, vary=vary)
        for nct in (False, True):
            stock, fast = compare(payloads, nct, args.repeats, args.clock)
            n = len(payloads)
            print(
                f"{'varying JSON' if vary else 'repeated JSON':<16}"
                f"{'no takeover' if nct else 'takeover':<14}"
                f"{stock / n * 1e6:>14.2f}{fast / n * 1e6:>13.2f}{stock / fast:>7.2f}x"
            )


if __name__ == "__main__":
    main()
