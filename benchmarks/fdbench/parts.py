"""The nine parts of the report, as run.py runs them: each returns Markdown and charts."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

from . import (
    broadcast,
    codec_table,
    connections,
    end_to_end,
    engines,
    frontier,
    latency,
    library_table,
    memory_table,
    mixed,
    server_memory,
    summary,
)

__all__ = ["RUNNERS", "PARTS", "progress_bar"]

#: (Markdown section, chart paths, summary rows)
Result = tuple[str, list[Path], list[list[str]]]



def _level_engine(level: int) -> str:
    """The engine fastdeflate runs ``level`` on in this build (fastdeflate.engines())."""
    import fastdeflate

    return fastdeflate.engines().get(level, fastdeflate.ENGINE)

def chart_module():  # type: ignore[no-untyped-def]
    """The chart module, imported when a part draws (matplotlib is needed only then)."""
    from . import charts

    return charts


def progress_bar(total: int, desc: str, disable: bool):  # type: ignore[no-untyped-def]
    """A tqdm bar on stderr (left behind only while it runs)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="run", disable=disable, file=sys.stderr,
                leave=False, dynamic_ncols=True)


Plan = TypeVar("Plan")


def ints(text: str) -> tuple[int, ...]:
    """A comma-separated option's numbers."""
    return tuple(int(n) for n in text.split(","))


def names(text: str) -> tuple[str, ...]:
    """A comma-separated option's names."""
    return tuple(text.split(","))


def given(value: Any) -> Any:
    return value


def plan_for(args: argparse.Namespace, quick: Plan, full: Plan,
             **fields: tuple[str, Callable[[Any], Any]]) -> Plan:
    """The short or the full plan (``--full``), with ``field=(option, convert)`` taken from
    each option given on the command line."""
    changes = {field: convert(getattr(args, option))
               for field, (option, convert) in fields.items() if getattr(args, option)}
    return dataclasses.replace(full if args.full else quick, **changes)  # type: ignore


def codec_plan(args: argparse.Namespace) -> codec_table.Plan:
    return plan_for(args, codec_table.QUICK, codec_table.FULL, sizes=("sizes", ints),
                    max_cycles=("cycles", given), repeats=("repeats", given),
                    engines=("engines", names))


def run_codec(args: argparse.Namespace, stem: str) -> Result:
    plan = codec_plan(args)
    try:
        engines.ENGINES["fastdeflate"].module()
    except ImportError as exc:
        sys.exit(f"the compiled fastdeflate extension is not importable ({exc}); "
                 "reinstall the package where a C compiler is available")
    local, isolated, _ = codec_table.plan_engines(plan)
    total = codec_table.runs_in_process(plan, local + isolated)
    with progress_bar(total, "1/9 original table", args.no_progress) as bar:
        cells, notes = codec_table.measure(plan, bar)
    chart = chart_module().codec_chart(cells, args.out / f"{stem}-codec.png",
                               subtitle="process CPU time, medians of interleaved repeats")
    return "\n\n".join([
        "## 1. The original table",
        codec_table.table(cells, "cpu"),
        codec_table.legend(cells, notes, plan, "cpu"),
        "Wall-clock time, same runs:",
        codec_table.table(cells, "wall"),
        f"![original table]({chart.name})",
    ]), [chart], summary.codec_rows(cells)


def connections_plan(args: argparse.Namespace) -> connections.Plan:
    plan = plan_for(args, connections.QUICK, connections.FULL,
                    connections=("connections", ints), messages=("cycles", given),
                    repeats=("repeats", given))
    # the codec columns asked for that this part has
    chosen = tuple(e for e in names(args.engines) if e in plan.engines) if args.engines else ()
    return dataclasses.replace(plan, engines=chosen) if chosen else plan


def server_memory_plan(args: argparse.Namespace) -> server_memory.Plan:
    return plan_for(args, server_memory.QUICK, server_memory.FULL,
                    connections=("server_connections", ints), libraries=("servers", names),
                    offers=("server_offers", names))


def run_connections(args: argparse.Namespace, stem: str) -> Result:
    codec = connections_plan(args)
    memory = server_memory_plan(args)
    local, isolated, _ = connections.plan_engines(codec)
    libraries = list(memory.libraries or server_memory.available_libraries())
    memory = dataclasses.replace(memory, libraries=tuple(libraries))
    total = connections.runs(codec, local + isolated) + server_memory.runs(memory, libraries)
    with progress_bar(total, "2/9 many connections", args.no_progress) as bar:
        cells, notes = connections.measure(codec, bar)
        rows = server_memory.measure(memory, bar)
    draw = chart_module()
    speed = draw.connections_chart(cells, args.out / f"{stem}-connections.png")
    rss = draw.server_memory_chart(rows, args.out / f"{stem}-server-memory.png")
    return "\n\n".join([
        "## 2. Many connections: a server's view",
        "### The codec with N connections served round-robin",
        connections.table(cells, "cpu"),
        connections.legend(cells, notes, codec, "cpu"),
        f"![many connections]({speed.name})",
        "### Server memory per connection (RSS of a real server process)",
        server_memory.table(rows),
        server_memory.legend(memory, rows),
        f"![server memory]({rss.name})",
    ]), [speed, rss], summary.connections_rows(cells) + summary.server_memory_rows(rows)


def run_libraries(args: argparse.Namespace, stem: str) -> Result:
    plan = plan_for(args, library_table.QUICK, library_table.FULL, sizes=("sizes", ints),
                    max_cycles=("cycles", given), repeats=("repeats", given),
                    connections=("library_connections", ints))
    libraries = library_table.discover()
    with progress_bar(library_table.runs(plan, libraries), "3/9 per library",
                      args.no_progress) as bar:
        rows = library_table.measure(plan, libraries, bar)
        fleets = library_table.measure_fleets(plan, libraries, bar)
    parts = ["## 3. Per library", library_table.table(rows, "cpu"),
             library_table.legend(plan, libraries, "cpu")]
    other = library_table.alternatives_table(rows, "cpu")
    if other:
        parts += ["### Against what a library offers itself", other,
                  "Same runs, interleaved with the two above: the stock library set up "
                  "its own faster way ('fastdeflate vs alternative' > 1: fastdeflate is "
                  "faster). aiohttp's zlib-ng backend is `aiohttp.set_zlib_backend("
                  "zlib_ng.zlib_ng)` (zlib-ng's Python binding), which runs zlib-ng's "
                  "level 1; fastdeflate runs aiohttp's level 1 on "
                  f"{_level_engine(1)} in this build."]
    if fleets:
        parts += ["### Many connections", library_table.fleet_table(fleets, "cpu"),
                  f"The same round trips with N connections of each library at once, as "
                  f"a server holds them: message i goes through connection i mod N, so "
                  f"each call finds its connection's state cold. 1 KB varying JSON; each "
                  f"connection got {plan.fill} messages before anything was timed (its "
                  f"window filled); at least 2 messages per connection per run; the "
                  f"columns interleaved, {plan.repeats} repeats after a warm-up, medians "
                  f"of process CPU µs per message; ratios are medians of paired "
                  f"per-repeat ratios."]
    paths = []
    if rows:
        chart = chart_module().library_chart(rows, args.out / f"{stem}-libraries.png")
        parts.append(f"![per library]({chart.name})")
        paths.append(chart)
    return "\n\n".join(parts), paths, summary.library_rows(rows + fleets)


def run_end_to_end(args: argparse.Namespace, stem: str) -> Result:
    plan = plan_for(args, end_to_end.QUICK, end_to_end.FULL, clients=("clients", ints),
                    messages=("cycles", given), repeats=("repeats", given))
    with progress_bar(end_to_end.runs(plan), "4/9 end to end", args.no_progress) as bar:
        points = end_to_end.measure(plan, bar)
    chart = chart_module().end_to_end_chart(points, args.out / f"{stem}-end-to-end.png")
    return "\n\n".join([
        "## 4. End to end (websockets, loopback)",
        end_to_end.table(points),
        end_to_end.legend(plan, points),
        f"![end to end]({chart.name})",
    ]), [chart], summary.end_to_end_rows(points)


def run_memory(args: argparse.Namespace, stem: str) -> Result:
    count = 1000
    with progress_bar(memory_table.runs(), "5/9 memory", args.no_progress) as bar:
        rows = memory_table.measure(count, bar)
    chart = chart_module().memory_chart(rows, args.out / f"{stem}-memory.png")
    return "\n\n".join([
        "## 5. Memory per connection (codec objects, traced)",
        memory_table.table(rows),
        memory_table.legend(count),
        f"![memory]({chart.name})",
    ]), [chart], summary.memory_rows(rows)


def broadcast_plan(args: argparse.Namespace) -> broadcast.Plan:
    return plan_for(args, broadcast.QUICK, broadcast.FULL, clients=("broadcast_clients", ints),
                    deliveries=("cycles", given), repeats=("repeats", given))


def mixed_broadcast_plan(args: argparse.Namespace) -> broadcast.Plan:
    """The churn mix (``broadcast.MIXED``; the short run: ``MIXED_QUICK``, 100 clients):
    its client counts from --mixed-broadcast-clients, else --broadcast-clients; --cycles
    caps its broadcasts (20-400)."""
    broadcasts = ("cycles", lambda cycles: max(20, min(400, cycles)))
    option = "mixed_broadcast_clients" if args.mixed_broadcast_clients else "broadcast_clients"
    return plan_for(args, broadcast.MIXED_QUICK, broadcast.MIXED,
                    clients=(option, ints), min_broadcasts=broadcasts,
                    max_broadcasts=broadcasts, repeats=("repeats", given))


def run_broadcast(args: argparse.Namespace, stem: str) -> Result:
    plan = broadcast_plan(args)
    mixed = mixed_broadcast_plan(args)  # churn: private messages, joiners and leavers
    total = broadcast.runs(plan) + broadcast.runs(mixed)
    with progress_bar(total, "6/9 broadcast", args.no_progress) as bar:
        rows = broadcast.measure(plan, bar)
        mixed_rows = broadcast.measure(mixed, bar)
    parts = ["## 6. Broadcast: one message to N clients (websockets `broadcast()`)",
             broadcast.table(rows), broadcast.legend(plan, rows)]
    paths = []
    draw = chart_module() if any(r.measured for r in rows + mixed_rows) else None
    if draw and any(r.measured for r in rows):
        chart = draw.broadcast_chart(rows, args.out / f"{stem}-broadcast.png")
        parts.append(f"![broadcast]({chart.name})")
        paths.append(chart)
    parts += ["### With churn: private messages, late joiners and leavers",
              broadcast.table(mixed_rows), broadcast.legend(mixed, mixed_rows)]
    if draw and any(r.measured for r in mixed_rows):
        parts += ["#### Where fastdeflate's CPU goes", broadcast.breakdown_table(mixed_rows),
                  broadcast.breakdown_legend(mixed_rows)]
        chart = draw.broadcast_mixed_chart(mixed_rows, args.out / f"{stem}-broadcast-mixed.png")
        parts.append(f"![broadcast with churn]({chart.name})")
        paths.append(chart)
    rows_out = summary.broadcast_rows(rows) + summary.broadcast_rows(mixed_rows, "mixed")
    return "\n\n".join(parts), paths, rows_out


def run_frontier(args: argparse.Namespace, stem: str) -> Result:
    plan = plan_for(args, frontier.QUICK, frontier.FULL, cycles=("cycles", given),
                    repeats=("repeats", given))
    with progress_bar(frontier.runs(plan), "7/9 frontier", args.no_progress) as bar:
        result = frontier.measure(plan, bar)
    chart = chart_module().frontier_chart(result, args.out / f"{stem}-frontier.png")
    return "\n\n".join([
        "## 7. Speed against size at every level (each library's settings)",
        frontier.table(result), frontier.legend(plan, result), f"![frontier]({chart.name})",
    ]), [chart], []


def run_mixed(args: argparse.Namespace, stem: str) -> Result:
    plan = plan_for(args, mixed.QUICK, mixed.FULL, messages=("cycles", given),
                    repeats=("repeats", given), connections=("mixed_connections", ints))
    with progress_bar(mixed.runs(plan), "8/9 mixed stream", args.no_progress) as bar:
        result = mixed.measure(plan, bar)
    chart = chart_module().mixed_chart(result, args.out / f"{stem}-mixed.png")
    return "\n\n".join([
        "## 8. A mixed stream: JSON with already-compressed binary (compress what pays)",
        mixed.table(result), mixed.legend(result), f"![mixed stream]({chart.name})",
    ]), [chart], summary.mixed_rows(result)


def latency_plan(args: argparse.Namespace) -> latency.Plan:
    """The short plan (``--parts latency``: websockets and aiohttp, one round of 3 s) or
    the full one (every server, 3 rounds of 8 s); --repeats sets the rounds."""
    return plan_for(args, latency.QUICK, latency.FULL,
                    libraries=("latency_libraries", names),
                    directions=("latency_directions", names),
                    seconds=("latency_seconds", given), size=("latency_size", given),
                    clients=("latency_clients", given), repeats=("repeats", given))


def run_latency(args: argparse.Namespace, stem: str) -> Result:
    plan = latency_plan(args)
    with progress_bar(latency.runs(plan), "9/9 latency", args.no_progress) as bar:
        rows = latency.measure(plan, bar)
    parts = ["## 9. Latency of the other connections (one large message at a time)",
             latency.table(rows, plan), latency.legend(plan, rows)]
    paths = []
    if any(r.measured(plan.modes) for r in rows):
        chart = chart_module().latency_chart(rows, plan, args.out / f"{stem}-latency.png")
        parts.append(f"![latency]({chart.name})")
        paths.append(chart)
    verdicts = latency.verdicts(rows, plan)
    if verdicts:
        parts += ["fastdeflate against the floor and against stock:", verdicts]
    parts += ["Each round:", latency.runs_table(rows, plan)]
    return "\n\n".join(parts), paths, summary_latency_rows(rows, plan)


def summary_latency_rows(rows: list[latency.Row], plan: latency.Plan) -> list[list[str]]:
    """p99 of the small connections, stock against fastdeflate (ratio stock /
    fastdeflate), per server and direction."""
    out = []
    if not {"stock", "fastdeflate"} <= set(plan.modes):
        return out
    for r in rows:
        if r.measured(plan.modes):
            stock, fast = r.median("stock", "p99"), r.median("fastdeflate", "p99")
            out.append([f"{r.library} server {'sending' if r.direction == 'send' else 'receiving'}"
                        f" {plan.size / 1e6:g} MB snapshots, p99 echo of {plan.clients} "
                        "other connections (ms)", f"{stock:.1f}", f"{fast:.1f}",
                        f"{stock / fast:.2f}x"])
    return out


RUNNERS: dict[str, Callable[[argparse.Namespace, str], Result]] = {
    "codec": run_codec,
    "connections": run_connections,
    "libraries": run_libraries,
    "end-to-end": run_end_to_end,
    "memory": run_memory,
    "broadcast": run_broadcast,
    "frontier": run_frontier,
    "mixed": run_mixed,
    "latency": run_latency,
}
PARTS = tuple(RUNNERS)
#: What ``python benchmarks/run.py`` runs without --parts or --full (short versions).
DEFAULT_PARTS = ("codec", "connections", "broadcast", "frontier", "mixed")
