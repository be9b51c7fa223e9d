"""Print what a connection costs per window / memLevel: stock, busy, quiet (README table).

A connection is one compressor and one decompressor after one ~1 KB message each way
(``tests/test_live_states.py``'s messages and its ``traced_per_pair``, level 6), measured
with tracemalloc over 1,000 pairs alive at once: stock (stdlib ``zlib`` objects),
fastdeflate busy (every pair keeps its live stream) and quiet (parked: each keeps only its
window).

    python tools/connection_costs.py [--out benchmarks/results]

With ``--out`` it writes the table to ``connection-costs.md`` there too (the docs take
the figures from it).
"""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_live_states import traced_per_pair  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from fdbench import report  # noqa: E402

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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="results folder to write connection-costs.md to")
    args = parser.parse_args()
    print("| window / memLevel | stock | busy | quiet | stock / quiet |")
    print("|---|--:|--:|--:|--:|")
    rows = []
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
            rows.append([f"{w} / {m}", f"{theirs / 1024:.1f} KiB", f"{busy / 1024:.1f} KiB",
                         f"{quiet / 1024:.1f} KiB", f"{theirs / quiet:.1f}x"])
            print("| " + " | ".join(rows[-1]) + " |", flush=True)
    finally:
        ext.set_park_after(previous)
    if args.out:
        table = report.markdown_table(
            ["window / memLevel", "stock", "busy", "quiet", "stock / quiet"], rows)
        legend = (f"Traced memory (tracemalloc) per connection — a compressor and a "
                  f"decompressor after one ~1 KB message each way, level 6 — over {PAIRS:,} "
                  "pairs alive at once: stock = stdlib zlib objects; busy = fastdeflate, "
                  "every pair keeping its live stream; quiet = fastdeflate, every pair parked "
                  "(its window only).")
        report.write_results(args.out / "connection-costs.md", "memory per connection",
                             f"python tools/connection_costs.py --out {args.out}",
                             ["## Per window / memLevel", table, legend])
        print(f"results: {args.out / 'connection-costs.md'}")


if __name__ == "__main__":
    main()
