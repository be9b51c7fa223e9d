#!/usr/bin/env python3
"""Latency of the other connections: ``python benchmarks/latency.py``.

Runs :mod:`fdbench.latency`: a real server of each library on 127.0.0.1, one connection
sent (or sending) a ~4 MB JSON snapshot every 250 ms, 20 connections echoing a small
message every 10 ms; p50 / p99 / max of the echoes and the server's CPU, stock beside
fastdeflate beside compression off, medians over rounds. Writes the Markdown (the machine
and versions, the table, each round's figures) and a chart to ``--out`` (default
``benchmarks/results/latency.md`` and ``latency.png``) and prints the Markdown. Progress
goes to stderr, one line per run. Exits 1 if a run failed its checks.

``--server-env KEY=VALUE`` (repeatable) adds to every server's environment, e.g.
``FASTDEFLATE_OFF_LOOP_SIZE=0``; ``--modes stock,fastdeflate,off,fastdeflate-on-loop``
adds a fastdeflate server with that variable set beside the others.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import latency, report  # noqa: E402
from fdbench.latency_peer import DIRECTIONS, LIBRARIES, MODES  # noqa: E402


class StderrProgress:
    """One line per run on stderr: runs done, of how many, and the seconds so far."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()

    def update(self, n: int = 1) -> None:
        self.done += n
        print(f"latency: {self.done}/{self.total} runs, {time.monotonic() - self.start:.0f} s",
              file=sys.stderr, flush=True)


def _choices(known: "tuple[str, ...]", what: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(text.split(","))
        unknown = [n for n in names if n not in known]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {what}: {', '.join(unknown)}; expected some of {', '.join(known)}")
        return names

    return parse


def _env(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    d = latency.FULL
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--libraries", type=_choices(tuple(LIBRARIES), "libraries"),
                        default=d.libraries, help="comma-separated (default: all seven)")
    parser.add_argument("--directions", type=_choices(DIRECTIONS, "directions"),
                        default=d.directions, help="send, receive, idle (default: all)")
    parser.add_argument("--modes", type=_choices(tuple(MODES), "modes"), default=d.modes,
                        help="comma-separated of " + ", ".join(MODES)
                        + " (default: stock,fastdeflate,off)")
    parser.add_argument("--rounds", type=int, default=d.repeats, help="default: 3")
    parser.add_argument("--seconds", type=float, default=d.seconds,
                        help="measured seconds per run (default: 8)")
    parser.add_argument("--warmup", type=float, default=d.warmup,
                        help="seconds before that (default: 1)")
    parser.add_argument("--size", type=int, default=d.size,
                        help="bytes of a snapshot (default: 4000000)")
    parser.add_argument("--interval", type=float, default=d.interval,
                        help="seconds between snapshots (default: 0.25)")
    parser.add_argument("--clients", type=int, default=d.clients,
                        help="small connections (default: 20)")
    parser.add_argument("--period", type=float, default=d.period,
                        help="seconds between a small client's messages (default: 0.01)")
    parser.add_argument("--server-env", type=_env, action="append", default=[],
                        metavar="KEY=VALUE", help="added to every server's environment "
                        "(repeatable), e.g. FASTDEFLATE_OFF_LOOP_SIZE=0")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "latency.md",
                        help="the Markdown file; the chart goes beside it as .png "
                        "(default: benchmarks/results/latency.md)")
    return parser.parse_args(argv)


def plan_of(args: argparse.Namespace) -> latency.Plan:
    return latency.replace(
        latency.FULL, libraries=args.libraries, directions=args.directions, modes=args.modes,
        repeats=args.rounds, seconds=args.seconds, warmup=args.warmup, size=args.size,
        interval=args.interval, clients=args.clients, period=args.period,
        server_env=tuple(args.server_env))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = plan_of(args)
    info = report.machine_info()
    start = time.monotonic()
    rows = latency.measure(plan, StderrProgress(latency.runs(plan)))
    seconds = time.monotonic() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    chart = None
    if any(r.measured(plan.modes) for r in rows):
        from fdbench import charts

        chart = charts.latency_chart(rows, plan, args.out.with_suffix(".png"))
    command = " ".join(["python benchmarks/latency.py",
                        *(sys.argv[1:] if argv is None else argv)]).strip()
    text = document(plan, rows, info, seconds, command, chart)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"results: {args.out}")
    if chart:
        print(f"chart: {chart}")
    return 1 if any(r.problems(plan) for r in rows) else 0


def document(plan: latency.Plan, rows: list[latency.Row], info: dict[str, str],
             seconds: float, command: str, chart: Path | None) -> str:
    times = ", ".join(f"{r.library} {r.direction} {r.seconds:.0f} s" for r in rows)
    verdicts = latency.verdicts(rows, plan)
    return "\n\n".join([
        "# Latency of the other connections",
        f"`{command}`. Machine and versions:",
        report.machine_markdown(info, report.load_now()),
        latency.table(rows, plan),
        latency.legend(plan, rows),
        *([f"![latency]({chart.name})"] if chart else []),
        *(["fastdeflate against the floor and against stock (medians over rounds):",
           verdicts] if verdicts else []),
        "Each round (in the order run):",
        latency.runs_table(rows, plan),
        f"Wall time of each row's runs: {times}; total {seconds:.0f} s.",
    ]) + "\n"


if __name__ == "__main__":
    sys.exit(main())
