#!/usr/bin/env python3
"""fastdeflate benchmarks: ``python benchmarks/run.py`` (short) or ``--full``.

The short run measures the original table (compress+decompress cycles of built-in
JSON messages, 1-64 KB, two workloads, with and without context takeover) on every
engine installed, prints it as Markdown and writes it with a PNG chart to the results
folder. ``--full`` runs all four parts: the original table at full length, each
websocket library's own codec path stock vs enabled, a websockets server over loopback
with 1, 10 and 100 clients, and memory per connection.
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

from fdbench import codec_table, report  # noqa: E402

PARTS = ("codec", "libraries", "end-to-end", "memory")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Results go to --out as Markdown (quick.md / full.md) and PNG charts.",
    )
    parser.add_argument("--full", action="store_true", help="run all four parts, full length")
    parser.add_argument("--parts", default=None,
                        help=f"comma-separated subset of {','.join(PARTS)} "
                        "(default: codec; all with --full)")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results",
                        help="results folder (default: benchmarks/results)")
    parser.add_argument("--sizes", default=None,
                        help="comma-separated message sizes in bytes (default 1024,4096,16384,65536)")
    parser.add_argument("--cycles", type=int, default=None,
                        help="cycles (messages) per run, at most (default 2000; 10000 with --full)")
    parser.add_argument("--repeats", type=int, default=None, help="repeats per column (default 3)")
    parser.add_argument("--engines", default=None,
                        help="comma-separated codec columns (default: all installed)")
    parser.add_argument("--clients", default=None,
                        help="end-to-end client counts (default 1,10,100)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    parts = args.parts.split(",") if args.parts else list(PARTS if args.full else ("codec",))
    for part in parts:
        if part not in PARTS:
            parser.error(f"unknown part {part!r}; expected some of {', '.join(PARTS)}")
    args.parts = parts
    return args


def codec_plan(args: argparse.Namespace) -> codec_table.Plan:
    plan = codec_table.FULL if args.full else codec_table.QUICK
    changes: dict[str, object] = {}
    if args.sizes:
        changes["sizes"] = tuple(int(s) for s in args.sizes.split(","))
    if args.cycles:
        changes["max_cycles"] = args.cycles
    if args.repeats:
        changes["repeats"] = args.repeats
    if args.engines:
        changes["engines"] = tuple(args.engines.split(","))
    return dataclasses.replace(plan, **changes)


def progress_bar(total: int, desc: str, disable: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="run", disable=disable, file=sys.stderr,
                leave=False, dynamic_ncols=True)


def run_codec(args: argparse.Namespace, stem: str) -> tuple[str, list[Path]]:
    from fdbench import charts, engines

    plan = codec_plan(args)
    try:
        engines.ENGINES["fastdeflate"].module()
    except ImportError as exc:
        sys.exit(f"the compiled fastdeflate extension is not importable ({exc}); "
                 "install the package with a C compiler available")
    local, isolated, missing = codec_table.plan_engines(plan)
    total = codec_table.runs_in_process(plan, local + isolated)
    with progress_bar(total, "original table", args.no_progress) as bar:
        cells, notes = codec_table.measure(plan, bar)
    chart = charts.codec_chart(cells, args.out / f"{stem}-codec.png",
                               subtitle="process CPU time, median of interleaved repeats")
    text = "\n\n".join([
        "## The original table (CPU)",
        codec_table.table(cells, "cpu"),
        codec_table.legend(cells, notes, plan, "cpu"),
        "## The original table (wall clock)",
        codec_table.table(cells, "wall"),
        f"![codec chart]({chart.name})",
    ])
    return text, [chart]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "full" if args.full else "quick"
    info = report.machine_info()
    started = time.monotonic()
    sections: list[str] = []
    charts: list[Path] = []
    runners = {"codec": run_codec}
    for part in args.parts:
        if part not in runners:
            from fdbench import parts as extra  # the other three parts

            runner = extra.RUNNERS[part]
        else:
            runner = runners[part]
        text, paths = runner(args, stem)
        sections.append(text)
        charts.extend(paths)
        print(text.split("\n\n", 2)[1] if part == "codec" else text, flush=True)
        print(flush=True)
    elapsed = time.monotonic() - started
    title = "full run" if args.full else "short run"
    document = "\n\n".join([
        f"# fastdeflate benchmarks — {title}",
        f"Command: `python benchmarks/run.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
        f" — {elapsed:.0f} s.",
        report.machine_markdown(info, report.load_now()),
        *sections,
    ]) + "\n"
    results = args.out / f"{stem}.md"
    results.write_text(document, encoding="utf-8")
    print(f"results: {results}")
    for path in charts:
        print(f"chart: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
