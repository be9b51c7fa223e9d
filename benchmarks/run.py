#!/usr/bin/env python3
"""fastdeflate benchmarks: ``python benchmarks/run.py`` (short) or ``--full``.

The short run measures the original table (compress+decompress cycles of built-in
JSON messages, 1-64 KB, two workloads, with and without context takeover) on every
engine installed, a server's view: the codec with 1, 100 and 1,000 connections
served round-robin, and the memory per connection of a real server of each library
with 1,000 clients, a websockets server broadcasting to 10 and 100 clients (server
CPU and bytes per delivery, stock vs enabled vs compression off; and to 100 clients with
churn: private messages, late joiners and leavers), the speed/size
frontier (every level, stock and fastdeflate and aiohttp's backends, with each library's
settings), and a mixed stream (chat JSON with 20% already-compressed binary: stock,
fastdeflate, fastdeflate with compress_or_skip, uncompressed; one connection, and 1,000
with the messages dealt to them interleaved). It prints them as Markdown
and writes them with PNG charts to the results folder. ``--full`` runs all nine parts
at full length: those five (up to 10,000
connections, 1 to 1,000 broadcast clients, and broadcasts with churn at 100 and 1,000),
each websocket library's own codec path stock vs enabled, a websockets server over
loopback with 1, 10 and 100 clients, the traced memory of codec objects, and the
latency of 20 small connections while one gets (or sends) a 4 MB JSON snapshot every
250 ms on a real server of each library (``benchmarks/latency.py`` runs that part alone).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import parts, report, summary  # noqa: E402
from fdbench.latency_peer import DIRECTIONS as LATENCY_DIRECTIONS  # noqa: E402
from fdbench.latency_peer import LIBRARIES as LATENCY_LIBRARIES  # noqa: E402
from fdbench.server_peer import LIBRARIES, OFFERS  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0] if __doc__ else None,
        epilog="Results go to --out as Markdown (quick.md or full.md) and PNG charts.",
    )
    parser.add_argument("--full", action="store_true", help="all nine parts, full length")
    parser.add_argument("--parts", default=None,
                        help=f"comma-separated subset of {','.join(parts.PARTS)} "
                        f"(default: {','.join(parts.DEFAULT_PARTS)}; all of them with --full)")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results",
                        help="results folder (default: benchmarks/results)")
    parser.add_argument("--sizes", default=None,
                        help="message sizes in bytes, comma-separated "
                        "(default 1024,4096,16384,65536)")
    parser.add_argument("--cycles", type=int, default=None,
                        help="messages per run, at most (default 2,000; 10,000 with --full); the "
                        "many-connection codec: at least; broadcast: deliveries per run, about")
    parser.add_argument("--repeats", type=int, default=None,
                        help="repeats (default 3; 5 for the many-connection codec)")
    parser.add_argument("--engines", default=None,
                        help="codec columns, comma-separated (default: every one installed)")
    parser.add_argument("--clients", default=None,
                        help="end-to-end client counts, comma-separated (default 1,10,100)")
    parser.add_argument("--connections", default=None,
                        help="connection counts of the many-connection codec, comma-separated "
                        "(default 1,100,1000; 1,100,1000,10000 with --full)")
    parser.add_argument("--library-connections", default=None,
                        help="connection counts of the per-library part's many-connection "
                        "runs, comma-separated (default 100; 100,1000 with --full)")
    parser.add_argument("--server-connections", default=None,
                        help="connection counts of the server memory runs, comma-separated "
                        "(default 1000; 1000,10000 with --full)")
    parser.add_argument("--broadcast-clients", default=None,
                        help="client counts of the broadcast part, comma-separated "
                        "(default 10,100; 1,10,100,1000 with --full)")
    parser.add_argument("--mixed-broadcast-clients", default=None,
                        help="client counts of the broadcast part's churn mix (private "
                        "messages, late joiners, leavers), comma-separated (default 100; "
                        "100,1000 with --full; the developers' run adds 10000)")
    parser.add_argument("--stem", default=None,
                        help="name of the results file and prefix of its charts (default: "
                        "quick, or full with --full); e.g. broadcast for the docs' "
                        "benchmarks/results/broadcast.md")
    parser.add_argument("--mixed-connections", default=None,
                        help="connection counts of the mixed stream, comma-separated, its "
                        "messages dealt to them interleaved (default 1,1000)")
    parser.add_argument("--servers", default=None,
                        help="libraries whose server memory is measured, comma-separated "
                        "(default: every one installed)")
    parser.add_argument("--server-offers", default=None,
                        help="what the server memory runs' clients offer, comma-separated: "
                        "default, no-takeover (default: default; both with --full)")
    parser.add_argument("--latency-libraries", default=None,
                        help="servers of the latency part, comma-separated (default "
                        "websockets,aiohttp; all seven with --full: "
                        + ",".join(LATENCY_LIBRARIES) + ")")
    parser.add_argument("--latency-directions", default=None,
                        help="directions of the latency part: send, receive, idle (default: all)")
    parser.add_argument("--latency-seconds", type=float, default=None,
                        help="measured seconds per latency run (default 3; 8 with --full)")
    parser.add_argument("--latency-size", type=int, default=None,
                        help="bytes of the latency part's snapshots (default 4000000)")
    parser.add_argument("--latency-clients", type=int, default=None,
                        help="small connections of the latency part (default 20)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--note", default="",
                        help="a line of context written with the results (e.g. the load)")
    args = parser.parse_args(argv)
    default = parts.PARTS if args.full else parts.DEFAULT_PARTS
    chosen = args.parts.split(",") if args.parts else list(default)
    for part in chosen:
        if part not in parts.PARTS:
            parser.error(f"unknown part {part!r}; expected some of {', '.join(parts.PARTS)}")
    for server in args.servers.split(",") if args.servers else ():
        if server not in LIBRARIES:
            parser.error(f"unknown server {server!r}; expected some of {', '.join(LIBRARIES)}")
    for offer in args.server_offers.split(",") if args.server_offers else ():
        if offer not in OFFERS:
            parser.error(f"unknown offer {offer!r}; expected some of {', '.join(OFFERS)}")
    for server in args.latency_libraries.split(",") if args.latency_libraries else ():
        if server not in LATENCY_LIBRARIES:
            parser.error(f"unknown latency server {server!r}; expected some of "
                         f"{', '.join(LATENCY_LIBRARIES)}")
    for direction in args.latency_directions.split(",") if args.latency_directions else ():
        if direction not in LATENCY_DIRECTIONS:
            parser.error(f"unknown direction {direction!r}; expected "
                         f"{', '.join(LATENCY_DIRECTIONS)}")
    args.parts = chosen
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.stem or ("full" if args.full else "quick")
    info = report.machine_info()
    load = info["load average (1, 5, 15 min) at start"]
    print(f"fastdeflate {info['fastdeflate']}; {info['machine']}; load {load}", flush=True)
    started = time.monotonic()
    sections: list[str] = []
    charts: list[Path] = []
    headline: list[list[str]] = []
    for part in args.parts:
        text, paths, rows = parts.RUNNERS[part](args, stem)
        sections.append(text)
        charts.extend(paths)
        headline.extend(rows)
        print(f"\n{text}\n", flush=True)
    elapsed = time.monotonic() - started
    given = list(sys.argv[1:] if argv is None else argv)
    if "--note" in given:  # the note is written on its own line
        del given[given.index("--note"):given.index("--note") + 2]
    command = " ".join(["python benchmarks/run.py", *given])
    document = "\n\n".join([
        f"# fastdeflate benchmarks — {'full run' if args.full else 'short run'}",
        f"`{command}`, {elapsed:.0f} s. Machine and versions:",
        report.machine_markdown(info, report.load_now()),
        *([f"Note: {args.note}"] if args.note else []),
        "## Summary",
        summary.table(headline),
        "CPU time (medians of interleaved runs); ratio = stock / fastdeflate (> 1: "
        "fastdeflate is better). 'stock' is stdlib zlib as the libraries use it today; "
        "details and every other column below.",
        *sections,
    ]) + "\n"
    results = args.out / f"{stem}.md"
    results.write_text(document, encoding="utf-8")
    if args.full:
        print("## Summary\n\n" + summary.table(headline) + "\n")
    print(f"results: {results}")
    for path in charts:
        print(f"chart: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
