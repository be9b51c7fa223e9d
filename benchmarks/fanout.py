#!/usr/bin/env python3
"""Fan-out in aiohttp, wsproto, tornado and autobahn: ``python benchmarks/fanout.py``.

Runs :mod:`fdbench.fanout` (the broadcast benchmark's server on each library, stock,
enabled, enabled with fastdeflate's broadcast helper, and compression off) and prints
the Markdown table and its legend, after the machine and versions; ``--out FILE`` writes
the same document to FILE. Progress goes to stderr, one line per run. Exits 1 if a run
failed its checks.
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

from fdbench import fanout, report  # noqa: E402


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
    parser.add_argument("--out", type=Path, help="also write the document to this file")
    args = parser.parse_args(argv)
    plan = dataclasses.replace(fanout.DEFAULT, libraries=args.libraries, clients=args.clients,
                               repeats=args.repeats, min_broadcasts=args.broadcasts,
                               max_broadcasts=args.broadcasts)
    info = report.machine_info()
    start = time.monotonic()
    rows = fanout.measure(plan, StderrProgress(fanout.runs(plan)))
    text = document(plan, rows, info, time.monotonic() - start, argv)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 1 if any(r.problems() for r in rows) else 0


def document(plan: fanout.Plan, rows: list[fanout.FanoutRow], info: dict[str, str],
             seconds: float, argv: list[str] | None) -> str:
    """The machine, the table, its legend, each run's ratios and the wall time of
    each row's runs."""
    command = " ".join(["python benchmarks/fanout.py", *(sys.argv[1:] if argv is None
                                                          else argv)])
    times = ", ".join(f"{r.library} {r.clients:,} clients {r.seconds:.0f} s" for r in rows)
    return "\n\n".join([
        "# Fan-out in aiohttp, wsproto, tornado and autobahn",
        f"`{command.strip()}`. Machine and versions:",
        report.machine_markdown(info),
        fanout.table(rows),
        fanout.legend(plan, rows),
        "Each run (enabled and off, enabled and stock, paired by repeat):",
        fanout.per_run_table(rows),
        f"Wall time of each row's runs: {times}; total {seconds:.0f} s.",
    ]) + "\n"


if __name__ == "__main__":
    sys.exit(main())
