"""Print what a connection costs per window / memLevel: stock, busy, quiet (README table).

A connection is one compressor and one decompressor after one ~1 KB message each way
(``tests/test_live_states.py``'s messages and its ``traced_per_pair``, level 6), measured
with tracemalloc over 1,000 pairs alive at once: stock (stdlib ``zlib`` objects),
fastdeflate busy (every pair keeps its live stream) and quiet (parked: each keeps only its
window).

    python tools/connection_costs.py
"""

from __future__ import annotations

import math
import sys
import zlib
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_live_states import traced_per_pair  # noqa: E402

from fastdeflate import _fastdeflate as ext  # noqa: E402
from fastdeflate._parking import wait_until_parked  # noqa: E402

PAIRS = 1000
SETTINGS = ((12, 5), (15, 8), (9, 1), (10, 4), (15, 9))
Pair = tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]


def park_all() -> None:
    """Park every idle object beyond the limit now (park-after 0), and wait for it."""
    ext.set_park_after(0)
    if not wait_until_parked(60):
        raise RuntimeError(f"not parked after 60 s: {ext.live_states()}")


def main() -> None:
    print("| window / memLevel | stock | busy | quiet | stock / quiet |")
    print("|---|--:|--:|--:|--:|")
    previous = ext.set_park_after(math.inf)
    try:
        for w, m in SETTINGS:
            def stock() -> Pair:
                c = zlib.compressobj(6, zlib.DEFLATED, -w, m)
                d = zlib.decompressobj(-w)
                return (lambda data: c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)), d.decompress

            def ours() -> Pair:
                c, d = ext.Compressor(6, w, m), ext.Decompressor(w)
                return c.compress, d.decompress

            theirs = traced_per_pair(stock, PAIRS)
            busy = traced_per_pair(ours, PAIRS)
            quiet = traced_per_pair(ours, PAIRS, settle=park_all)
            ext.set_park_after(math.inf)
            print(f"| {w} / {m} | {theirs / 1024:.1f} KiB | {busy / 1024:.1f} KiB | "
                  f"{quiet / 1024:.1f} KiB | {theirs / quiet:.1f}x |", flush=True)
    finally:
        ext.set_park_after(previous)


if __name__ == "__main__":
    main()
