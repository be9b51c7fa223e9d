#!/usr/bin/env python3
"""The level frontier, bytes against time per level on the wider corpus:
``python benchmarks/levels.py``.

Writes ``levels.md`` and ``levels.png`` (``--name``) to the results folder (see ``fdbench/levels.py``):
for each level and window class, the build's own tuning of the bundled zlib-ng and the
fastest candidate within 1.02x of stock's bytes in every cell; with ``--before DIR``
(a folder holding an earlier build's ``fastdeflate`` package) the earlier build's bytes
and time beside this one's. Trying candidates needs the test build
(``FASTDEFLATE_TEST_HOOKS=1``); ``--candidates 0`` measures the build's own levels only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import levels, report  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results",
                        help="results folder (default: benchmarks/results)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each job (median)")
    parser.add_argument("--levels", default="1,2,3,4,5,6,7,8,9",
                        help="comma-separated levels (default: 1-9)")
    parser.add_argument("--candidates", type=int, default=1,
                        help="1: try each level's candidate tunings (test build); 0: none")
    parser.add_argument("--before", type=Path, default=None,
                        help="folder holding an earlier build's fastdeflate package")
    parser.add_argument("--name", default="levels",
                        help="stem of the results files (default: levels)")
    args = parser.parse_args(argv)
    chosen = [int(x) for x in args.levels.split(",")]
    jobs: list[tuple] = []
    for level in chosen:
        jobs.append((level, None, None))
        if args.before is not None:
            jobs.append((level, None, args.before.resolve()))
        if args.candidates:
            jobs += [(level, c, None) for c in levels.CANDIDATES.get(level, ())]
    done = [0]

    def progress() -> None:
        done[0] += 1
        print(f"\r{done[0]}/{len(jobs) * args.rounds} runs", end="", file=sys.stderr,
              flush=True)

    results = levels.rounds(jobs, args.rounds, progress)
    print(file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    cells_text = (
        f"Cells: {len(levels.corpus.SHAPES)} shapes of `fdbench/corpus.py` x message sizes "
        f"{', '.join(f'{s // 1024} KB' for s in levels.SAMPLE)} x windows "
        f"{levels.WINDOWS[0]}-{levels.WINDOWS[-1]} (memLevel {levels.MEM_LEVEL}) x with and "
        "without context takeover. A tuning's bytes: its worst cell, fastdeflate's payload "
        "bytes over stock zlib's at the same level and settings; its time: compressing "
        f"every cell's messages (the fastest of {levels.PASSES} passes per cell), the median "
        f"of {args.rounds} runs in separate processes, interleaved.")
    sections = []
    if args.candidates:
        chart = levels.chart(results, args.out / f"{args.name}.png")
        sections += ["## The fastest tuning within the bound, per level and window class",
                     levels.frontier_table(results), cells_text, f"![levels]({chart.name})"]
    if args.before is not None:
        sections += ["## Before and after", levels.before_after_table(results, args.before),
                     f"Before: the build in `{args.before}` ({levels.checkout_of(args.before)}); "
                     "after: this build. Same cells, same runs, interleaved.",
                     *([] if args.candidates else [cells_text])]
    command = "python benchmarks/levels.py " + " ".join(argv if argv is not None
                                                        else sys.argv[1:])
    path = args.out / f"{args.name}.md"
    report.write_results(path, "the level frontier", command.strip(), sections)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
