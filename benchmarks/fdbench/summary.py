"""The summary table: a few headline rows from each part (for the top-level README).

Each row is (what, stock, fastdeflate, ratio) — "stock" being what the user runs today.
"""

from __future__ import annotations

from typing import Callable

from . import payloads
from .broadcast import Row as BroadcastRow
from .codec_table import Cell
from .connections import BASE
from .connections import Cell as ConnectionsCell
from .end_to_end import Point
from .library_table import Row as LibraryRow
from .memory_table import Row as MemoryRow
from .mixed import Result as MixedResult
from .mixed import connections_label
from .report import fmt_ratio, fmt_size_ratio, fmt_us, markdown_table
from .server_memory import STATES
from .server_memory import Row as ServerMemoryRow

__all__ = ["codec_rows", "connections_rows", "server_memory_rows", "library_rows",
           "end_to_end_rows", "memory_rows", "broadcast_rows", "broadcast_run_rows", "mixed_rows",
           "table"]

SummaryRow = list[str]


def codec_rows(cells: list[Cell]) -> list[SummaryRow]:
    """Codec cycles at 1 KB and 16 KB: stdlib persistent (and naive) vs fastdeflate."""
    rows = []
    for c in cells:
        if c.size not in (1024, 16384) or c.no_context_takeover or "fastdeflate" not in c.series:
            continue
        label = "varying JSON" if c.workload == "varying" else "same payload"
        fd = c.series["fastdeflate"]
        for base, name in (("stdlib", "stdlib persistent"), ("naive", "naive")):
            if base not in c.series or (base == "naive" and c.workload == "varying"):
                continue
            rows.append([
                f"codec, {label} {payloads.size_label(c.size)}, vs {name} (µs/msg)",
                fmt_us(c.series[base].cpu_us()), fmt_us(fd.cpu_us()),
                fmt_ratio(c.ratio(base, "fastdeflate")),
            ])
    return rows


def connections_rows(cells: list[ConnectionsCell]) -> list[SummaryRow]:
    """The codec with N connections served round-robin: stock vs fastdeflate."""
    return [
        [f"codec, varying JSON 1 KB, window {c.window_bits} / memLevel {c.mem_level}, "
         f"{c.connections:,} connection{'s' if c.connections > 1 else ''} round-robin (µs/msg)",
         fmt_us(c.series[BASE].cpu_us()), fmt_us(c.series["fastdeflate"].cpu_us()),
         fmt_ratio(c.speedup("fastdeflate"))]
        for c in cells if BASE in c.series and "fastdeflate" in c.series
    ]


def server_memory_rows(rows: list[ServerMemoryRow]) -> list[SummaryRow]:
    """Server RSS per connection, idle / after one message each way / quiet after it."""
    return [
        [f"{r.label} server, {r.connections:,} connections, RSS per connection, "
         "idle / after one message each way / quiet after it (KiB)",
         " / ".join(f"{r.kib('stock', state):,.1f}" for state in STATES),
         " / ".join(f"{r.kib('enabled', state):,.1f}" for state in STATES),
         " / ".join(fmt_ratio(r.ratio(state)) for state in STATES)]
        for r in rows if r.measured
    ]


def library_rows(rows: list[LibraryRow]) -> list[SummaryRow]:
    """Each library's own path, varying JSON 1 KB: one connection, then N round-robin."""
    return [
        [f"{r.library}, varying JSON 1 KB"
         + (f", {r.connections:,} connections" if r.connections > 1 else "") + " (µs/msg)",
         fmt_us(r.series["stock"].cpu_us()), fmt_us(r.series["enabled"].cpu_us()),
         fmt_ratio(r.speedup())]
        for r in sorted(rows, key=lambda r: (r.library, r.connections))
        if r.workload == "varying" and r.size == 1024
    ]


def end_to_end_rows(points: list[Point]) -> list[SummaryRow]:
    return [
        [f"websockets server → {p.clients} client{'s' if p.clients > 1 else ''}, "
         "server CPU s per 10,000 msgs",
         f"{p.per('stock', 'server'):.2f}", f"{p.per('enabled', 'server'):.2f}",
         fmt_ratio(p.ratio("server"))]
        for p in points
    ]


def memory_rows(rows: list[MemoryRow]) -> list[SummaryRow]:
    out = []
    for r in rows:
        if r.column != "fastdeflate (compiled)":
            continue
        stock = next(s for s in rows if s.config == r.config and s.column.startswith("stock"))
        settings = f"window {r.config.window_bits}, memLevel {r.config.mem_level}"
        for state, a, b in (("idle", stock.idle, r.idle), ("after 1 msg", stock.used, r.used)):
            out.append([f"memory per connection, {settings}, {state} (KiB)",
                        f"{a / 1024:,.1f}", f"{b / 1024:,.1f}", fmt_ratio(a / b)])
    return out


def broadcast_rows(rows: list[BroadcastRow], mix: str = "") -> list[SummaryRow]:
    """websockets' broadcast() to 100 and 1,000 clients (else the most measured): server
    CPU and bytes on the wire per delivery (``mix``: "mixed", with churn: private
    messages, late joiners and leavers; then every client count, and each run's figures
    too: :func:`broadcast_run_rows`)."""
    measured = [r for r in rows if r.measured]
    chosen = measured if mix else (
        [r for r in measured if r.clients in (100, 1000)] or measured[-1:])
    out = []
    for r in chosen:
        what = f"websockets broadcast() of ~1 KB JSON to {r.clients:,} clients"
        if mix:
            what += ", with churn (private messages, late joiners, leavers)"
        out.append([f"{what}, server CPU per delivery (µs)", fmt_us(r.cpu_us("stock")),
                    fmt_us(r.cpu_us("enabled")), fmt_ratio(r.ratio("cpu_us"))])
        out.append([f"{what}, bytes on the wire per delivery", f"{r.bytes('stock'):,.0f}",
                    f"{r.bytes('enabled'):,.0f}", fmt_size_ratio(r.ratio("bytes"))])
        if mix:
            out += broadcast_run_rows(r, what)
    return out


def broadcast_run_rows(r: BroadcastRow, what: str) -> list[SummaryRow]:
    """Each run of a broadcast row, in repeat order (" / "-separated): CPU per delivery
    of compression off (in the stock column) and fastdeflate, their ratio fastdeflate /
    off; bytes per delivery of stock and fastdeflate, their ratio fastdeflate / stock."""
    def each(values: list[float], fmt: Callable[[float], str]) -> str:
        return " / ".join(fmt(v) for v in values)

    return [
        [f"{what}, server CPU per delivery in each run: compression off, fastdeflate "
         "(µs; ratio: fastdeflate / off)", each(r.per_run("cpu_us", "off"), fmt_us),
         each(r.per_run("cpu_us", "enabled"), fmt_us),
         each(r.run_ratios("cpu_us", "enabled", "off"), fmt_ratio)],
        [f"{what}, bytes on the wire per delivery in each run (ratio: fastdeflate / stock)",
         each(r.per_run("bytes", "stock"), lambda v: f"{v:,.0f}"),
         each(r.per_run("bytes", "enabled"), lambda v: f"{v:,.0f}"),
         each(r.run_ratios("bytes", "enabled", "stock"), fmt_size_ratio)],
    ]


def mixed_rows(result: MixedResult) -> list[SummaryRow]:
    """The mixed stream, for each connection count: stock against fastdeflate with the
    skip, CPU and bytes per message (ratio: stock / fastdeflate, > 1 better)."""
    rows = []
    for case in result.cases:
        what = (f"mixed stream, chat JSON with {result.plan.binary_share:.0%} "
                f"already-compressed binary, {connections_label(case.connections)}, "
                "compress_or_skip")
        rows += [
            [f"{what} (µs/msg)", fmt_us(case.us("stock")), fmt_us(case.us("skip")),
             fmt_ratio(case.speedup("skip"))],
            [f"{what} (bytes/msg)", f"{case.bytes('stock'):,.0f}",
             f"{case.bytes('skip'):,.0f}", fmt_size_ratio(1 / case.size_ratio("skip"))],
        ]
    return rows


def table(rows: list[SummaryRow]) -> str:
    return markdown_table(["measurement", "stock", "fastdeflate", "ratio"], rows)
