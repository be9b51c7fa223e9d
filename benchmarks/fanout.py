#!/usr/bin/env python3
"""Fan-out in aiohttp, wsproto, tornado and autobahn: ``python benchmarks/fanout.py``.

Runs :mod:`fdbench.fanout` (the broadcast benchmark's server on each library, stock,
enabled, enabled with fastdeflate's broadcast helper, and compression off) and prints
the Markdown table and its legend. Progress goes to stderr, one line per run.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import fanout  # noqa: E402


class StderrProgress:
    """One line per run on stderr: runs done, of how many, and the seconds so far."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()

    def update(self, n: int = 1) -> None:
        self.done += n
        print(f"fanout: {self.done}/{self.total} runs, {time.monotonic() - self.start:.0f} s",
              file=sys.stderr, flush=True)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _names(text: str) -> tuple[str, ...]:
    names = tuple(text.split(","))
    unknown = set(names) - set(fanout.LIBRARIES)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown libraries: {', '.join(sorted(unknown))}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--libraries", type=_names, default=fanout.DEFAULT.libraries,
                        help="comma-separated (default: %(default)s)")
    parser.add_argument("--clients", type=_ints, default=fanout.DEFAULT.clients,
                        help="comma-separated client counts (default: 100,1000)")
    parser.add_argument("--repeats", type=int, default=fanout.DEFAULT.repeats)
    parser.add_argument("--broadcasts", type=int, default=fanout.DEFAULT.min_broadcasts,
                        help="broadcasts per run (default: %(default)s)")
    args = parser.parse_args(argv)
    plan = dataclasses.replace(fanout.DEFAULT, libraries=args.libraries, clients=args.clients,
                               repeats=args.repeats, min_broadcasts=args.broadcasts,
                               max_broadcasts=args.broadcasts)
    start = time.monotonic()
    rows = fanout.measure(plan, StderrProgress(fanout.runs(plan)))
    print(fanout.table(rows))
    print()
    print(fanout.legend(plan, rows))
    print()
    print("Wall time: " + ", ".join(f"{r.library} {r.clients:,} clients {r.seconds:.0f} s"
                                    for r in rows)
          + f"; total {time.monotonic() - start:.0f} s.")
    return 1 if any(r.problems() for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
