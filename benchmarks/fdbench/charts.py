"""PNG charts (matplotlib, Agg backend): one per part of the report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import payloads  # noqa: E402
from .report import fmt_size_ratio  # noqa: E402

if TYPE_CHECKING:
    from .codec_table import Cell

__all__ = ["save", "codec_chart", "grouped_bars", "connections_chart", "server_memory_chart",
           "broadcast_chart", "broadcast_mixed_chart", "mixed_chart"]


def save(fig: "plt.Figure", path: Path, title: str, fontsize: int = 11) -> Path:
    """Title ``fig``, write it to ``path`` as PNG and close it: every chart ends here."""
    fig.suptitle(title, fontsize=fontsize)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def grouped_bars(
    ax: "plt.Axes",
    groups: Sequence[str],
    series: dict[str, Sequence[float]],
    ylabel: str,
    title: str,
) -> list:
    """Bars for each series side by side in each group; their containers, a series each."""
    n = max(1, len(series))
    width = 0.8 / n
    bars = []
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        bars.append(ax.bar(xs, values, width, label=name))
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return bars


def codec_chart(cells: "list[Cell]", path: Path, subtitle: str = "") -> Path:
    """Throughput (input MB per CPU second) per column, one panel per workload and mode."""
    from .codec_table import MODE_LABELS, WORKLOAD_LABELS, columns

    names = columns(cells)
    panels = sorted({(c.workload, c.no_context_takeover) for c in cells},
                    key=lambda p: (payloads.WORKLOADS.index(p[0]), p[1]))
    cols = 2 if len(panels) > 1 else 1
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4 * rows), squeeze=False)
    for ax, (workload, nct) in zip(axes.flat, panels):
        row_cells = sorted(
            (c for c in cells if (c.workload, c.no_context_takeover) == (workload, nct)),
            key=lambda c: c.size,
        )
        data = {
            n: [c.series[n].runs[0].bytes_in / c.series[n].cpu / 1e6 for c in row_cells]
            for n in names
        }
        grouped_bars(
            ax,
            [payloads.size_label(c.size) for c in row_cells],
            data,
            "MB of messages per CPU second",
            f"{WORKLOAD_LABELS[workload]}, {MODE_LABELS[nct]}",
        )
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    return save(fig, path, "permessage-deflate compress+decompress cycles (higher is better)"
                + (f"\n{subtitle}" if subtitle else ""))


def library_chart(rows: list, path: Path) -> Path:
    """Speedup (stock / enabled CPU) per library and size, one panel per workload."""
    from .codec_table import WORKLOAD_LABELS

    workloads = [w for w in payloads.WORKLOADS if any(r.workload == w for r in rows)]
    libraries = sorted({r.library for r in rows})
    fig, axes = plt.subplots(1, len(workloads), figsize=(6.5 * len(workloads), 4), squeeze=False)
    for ax, workload in zip(axes.flat, workloads):
        sizes = sorted({r.size for r in rows if r.workload == workload})
        data = {}
        for size in sizes:
            by_lib = {r.library: r.speedup() for r in rows
                      if r.workload == workload and r.size == size}
            data[payloads.size_label(size)] = [by_lib.get(lib, 0.0) for lib in libraries]
        grouped_bars(ax, libraries, data, "speedup (stock CPU / enabled CPU)",
                     f"{WORKLOAD_LABELS[workload]}, context takeover")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.legend(fontsize=8, title="message size", title_fontsize=8)
    return save(fig, path, "Each library's own codec path: fastdeflate enabled vs stock "
                "(higher is better)")


def end_to_end_chart(points: list, path: Path) -> Path:
    """CPU seconds per 10,000 messages vs number of clients, server and client side."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), squeeze=False)
    groups = [f"{p.clients} client{'s' if p.clients > 1 else ''}" for p in points]
    for ax, side in zip(axes.flat, ("server", "client")):
        data = {mode: [p.per(mode, side) for p in points] for mode in ("stock", "enabled")}
        grouped_bars(ax, groups, data, "CPU s per 10,000 messages",
                     f"{side} process (lower is better)")
        ax.legend(fontsize=8)
    return save(fig, path, "websockets server → N clients over loopback, 1 KB JSON updates")


def memory_chart(rows: list, path: Path) -> Path:
    """KiB per connection, idle and after one message, per settings."""
    from .memory_table import COLUMNS, CONFIGS

    fig, axes = plt.subplots(1, len(CONFIGS), figsize=(6.5 * len(CONFIGS), 4), squeeze=False)
    for ax, cfg in zip(axes.flat, CONFIGS):
        cells = {r.column: r for r in rows if r.config == cfg}
        data = {c: [cells[c].idle / 1024, cells[c].used / 1024] for c in COLUMNS if c in cells}
        grouped_bars(ax, ["idle (never used)", "after one message"], data,
                     "KiB per connection", cfg.label)
        ax.legend(fontsize=8)
    return save(fig, path, "Memory per connection (compressor + decompressor), lower is better")


def connections_chart(cells: list, path: Path) -> Path:
    """µs per message and speed relative to stock vs connections, one column per settings."""
    from .connections import BASE, LABELS, columns, settings_label

    names = columns(cells)
    settings = list(dict.fromkeys((c.window_bits, c.mem_level) for c in cells))
    fig, axes = plt.subplots(2, len(settings), figsize=(6.5 * len(settings), 8), squeeze=False)
    for col, (w, m) in enumerate(settings):
        row_cells = sorted((c for c in cells if (c.window_bits, c.mem_level) == (w, m)),
                           key=lambda c: c.connections)
        groups = [f"{c.connections:,}" for c in row_cells]
        us = {LABELS[n]: [c.series[n].cpu_us() if n in c.series else 0.0 for c in row_cells]
              for n in names}
        grouped_bars(axes[0][col], groups, us, "CPU µs per message (lower is better)",
                     f"{settings_label(w, m)}: µs per compress+decompress")
        speed = {LABELS[n]: [(1.0 if n == BASE else c.speedup(n))
                             if n in c.series and BASE in c.series else 0.0
                             for c in row_cells] for n in names}
        grouped_bars(axes[1][col], groups, speed, "stock time / engine time (higher is better)",
                     f"{settings_label(w, m)}: speed relative to stock")
        axes[1][col].axhline(1.0, color="black", linewidth=0.8)
        for ax in axes[:, col]:
            ax.set_xlabel("connections, messages round-robin")
            ax.legend(fontsize=8)
    return save(fig, path, "1 KB varying JSON, each connection with its own compressor and "
                "decompressor (context takeover)")


def server_memory_chart(rows: list, path: Path) -> Path:
    """Server RSS per connection per library, idle and after one message, one panel per N,
    the panels one above the other (each as wide as the page that shows it: the landing
    page does), the labels of the 'no takeover' rows on two lines and the legend beside
    the first panel, so that no label runs into another and no bar hides behind it."""
    from .server_memory import MODES, STATE_LABELS, STATES

    rows = [r for r in rows if r.measured]
    counts = list(dict.fromkeys(r.connections for r in rows)) or [0]
    fig, axes = plt.subplots(len(counts), 1, figsize=(11, 0.6 + 3.4 * len(counts)),
                             squeeze=False)
    for ax, n in zip(axes.flat, counts):
        mine = [r for r in rows if r.connections == n]
        data = {f"{STATE_LABELS[state]}, {'fastdeflate' if mode == 'enabled' else mode}":
                [r.kib(mode, state) for r in mine] for state in STATES for mode in MODES}
        grouped_bars(ax, [r.label.replace(", ", "\n") for r in mine], data,
                     "KiB of RSS per connection", f"{n:,} connections (lower is better)")
        ax.tick_params(axis="x", labelsize=9)
        ax.set_xlim(-0.5, max(1, len(mine)) - 0.5)
    axes.flat[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, path, "Memory per connection of a real server process (RSS), stock vs "
                "fastdeflate.enable()")


def broadcast_chart(rows: list, path: Path) -> Path:
    """Server CPU µs and bytes per delivery vs number of clients (log x), per server."""
    from .broadcast import MODES

    rows = [r for r in rows if r.measured]
    labels = {"stock": "stock", "enabled": "fastdeflate.enable()", "off": "compression off"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), squeeze=False)
    counts = [r.clients for r in rows]
    for ax, what, ylabel in ((axes[0][0], "cpu_us", "server CPU µs per delivery"),
                             (axes[0][1], "bytes", "bytes on the wire per delivery")):
        for mode in MODES:
            ax.plot(counts, [getattr(r, what)(mode) for r in rows], marker="o",
                    label=labels[mode])
        ax.set_xscale("log")
        ax.set_xticks(counts, [f"{n:,}" for n in counts])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("clients")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{ylabel} (lower is better)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save(fig, path, "websockets broadcast() of ~1 KB varying JSON to N clients, "
                "with private messages and late joiners")


def frontier_chart(result, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """µs per message (x) against bytes per message (y), one panel per library's
    settings: stock's and fastdeflate's levels 1-9 as lines, backends as markers, each
    library's own level ringed. Down and to the left is better."""
    from .frontier import PATHS, points_for_chart

    by_path = points_for_chart(result)
    fig, axes = plt.subplots(1, len(PATHS), figsize=(5.2 * len(PATHS), 4.4), squeeze=False)
    for ax, (name, level, window, mem_level) in zip(axes[0], PATHS):
        points = by_path.get(name, [])
        for engine, style in (("stock", "o-"), ("fastdeflate", "s-")):
            line = sorted((p for p in points if p.engine == engine), key=lambda p: p.level)
            if not line:
                continue
            ax.plot([p.us for p in line], [p.bytes for p in line], style, label=engine,
                    markersize=4)
            for p in line:
                ax.annotate(str(p.level), (p.us, p.bytes), fontsize=7,
                            textcoords="offset points", xytext=(3, 3))
                if p.default:
                    ax.plot([p.us], [p.bytes], "o", markersize=12, fillstyle="none",
                            color="black")
        for p in points:
            if p.engine not in ("stock", "fastdeflate"):
                ax.plot([p.us], [p.bytes], "^", markersize=8, label=p.engine)
        ax.set_xlabel("CPU µs per message (compress + decompress)")
        ax.set_ylabel("bytes per message")
        ax.set_title(f"{name}: level {level}, window {window}, memLevel {mem_level}",
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save(fig, path, "Speed against size, levels 1-9, 4 KB varying JSON (ringed: the "
                "library's own level; down and left is better)", fontsize=10)


def mixed_chart(result, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """CPU µs per message of each side (log scale) for the whole stream, its binary share
    and its text share, one panel per connection count (the y axes shared); over each
    bar, its bytes against stock's on the same messages."""
    from .mixed import LABELS, SHARES, SIDES, connections_label

    groups = {"all": "whole stream", "binary": "binary share", "text": "text share"}
    cases = result.cases
    fig, axes = plt.subplots(1, len(cases), figsize=(6.5 * len(cases), 4.8), squeeze=False,
                             sharey=True)
    top = max(case.us(side, share) for case in cases for side in SIDES for share in SHARES)
    for ax, case in zip(axes[0], cases):
        data = {LABELS[side]: [case.us(side, share) for share in SHARES] for side in SIDES}
        bars = grouped_bars(ax, [groups[share] for share in SHARES], data,
                            "CPU µs per message (log scale)",
                            f"{connections_label(case.connections)}, "
                            f"{case.counts['all']:,} messages")
        for side, container in zip(SIDES, bars):
            ax.bar_label(container, [fmt_size_ratio(case.size_ratio(side, share))
                                     for share in SHARES], rotation=90, fontsize=7,
                         padding=2)
        ax.set_yscale("log")
        ax.set_ylim(top=top * 120)  # room above the bars for their labels and the legend
        ax.legend(loc="upper center", ncol=2, fontsize=7,
                  title="over each bar: its bytes / stock's", title_fontsize=7)
    plan = result.plan
    return save(fig, path, f"Chat JSON with {plan.binary_share:.0%} already-compressed binary "
                f"(level {plan.level}, window {plan.window_bits}): CPU per message (lower is "
                "better), and bytes against stock's",
                fontsize=10)


def broadcast_mixed_chart(rows: list, path: Path) -> Path:
    """The churn mix: server CPU per delivery of stock, fastdeflate and off per client
    count (each fastdeflate bar labelled with its bytes against stock's and its CPU
    against off's), and fastdeflate's CPU per delivery stacked by part."""
    from .broadcast import MODES, PARTS

    rows = [r for r in rows if r.measured]
    labels = {"stock": "stock", "enabled": "fastdeflate.enable()", "off": "compression off"}
    groups = [f"{r.clients:,} clients" for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), squeeze=False)
    ax = axes[0][0]
    bars = grouped_bars(ax, groups, {labels[m]: [r.cpu_us(m) for r in rows] for m in MODES},
                        "server CPU µs per delivery", "CPU per delivery (lower is better)")
    ax.bar_label(bars[MODES.index("enabled")],
                 [f"bytes {r.ratio('bytes') ** -1:.3f}x stock\nCPU {r.off_ratio():.2f}x off"
                  for r in rows], fontsize=7, padding=2)
    ax.set_ylim(top=max(r.cpu_us(m) for r in rows for m in MODES) * 1.25)
    ax.legend(fontsize=8, loc="upper right")
    ax = axes[0][1]
    bottom = [0.0] * len(rows)
    parts = [r.breakdown() for r in rows]
    for key, label in PARTS:
        values = [max(0.0, p[key] or 0.0) for p in parts]
        ax.bar(groups, values, 0.5, bottom=bottom, label=label.split(" x ")[0].split(" (")[0])
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_ylabel("fastdeflate's server CPU µs per delivery")
    ax.set_title("fastdeflate's CPU per delivery, by part (medians)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save(fig, path, "websockets broadcast() of ~1 KB varying JSON with churn: private "
                "messages, late joiners and leavers", fontsize=10)


def latency_chart(rows: list, plan, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """Per direction (a column each): the p99 echo latency of each mode per library (log
    scale; dotted over each group, off's p99 times the target), and below it the server's
    CPU seconds over the measured window."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from .latency import TARGET

    rows = [r for r in rows if r.measured(plan.modes)]
    directions = [d for d in plan.directions if any(r.direction == d for r in rows)]
    width = max(6.0, 1.1 * max(sum(r.direction == d for r in rows) for d in directions) + 1.5)
    fig, axes = plt.subplots(2, len(directions), figsize=(width * len(directions), 8.5),
                             squeeze=False, gridspec_kw={"height_ratios": [3, 2]})
    what = {"send": "the server sends one connection", "receive": "one connection sends "
            "the server"}
    snapshot = f"a {plan.size / 1e6:g} MB snapshot every {plan.interval * 1000:g} ms"
    for col, direction in enumerate(directions):
        mine = [r for r in rows if r.direction == direction]
        groups = [r.library.replace("-", "-\n", 1) for r in mine]
        ax = axes[0][col]
        bars = grouped_bars(ax, groups, {m: [r.median(m, "p99") for r in mine]
                                         for m in plan.modes},
                            "p99 echo round trip, ms (log scale)",
                            (f"{direction}: {what[direction]} {snapshot}"
                             if direction in what else
                             f"{direction}: no snapshot (the small messages alone)")
                            + f"\n(lower is better; dotted: {TARGET}x off's p99)")
        for container in bars:
            ax.bar_label(container, [f"{b.get_height():.0f}" if b.get_height() >= 10 else
                                     f"{b.get_height():.1f}" for b in container],
                         fontsize=6, padding=1)
        if "off" in plan.modes:
            for i, r in enumerate(mine):
                ax.hlines(TARGET * r.median("off", "p99"), i - 0.42, i + 0.42,
                          colors="black", linestyles="dotted", linewidth=1)
        ax.set_yscale("log")
        top = max(max(r.median(m, "p99") for m in plan.modes) for r in mine)
        if "off" in plan.modes:
            top = max(top, TARGET * max(r.median("off", "p99") for r in mine))
        ax.set_ylim(top=top * 2.2)  # room for the legend
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.legend(fontsize=8, ncol=len(plan.modes))
        low = axes[1][col]
        grouped_bars(low, groups, {m: [r.median(m, "cpu") for r in mine]
                                   for m in plan.modes},
                     f"server CPU s in {plan.seconds:g} s",
                     f"{direction}: server process CPU (user + system) over the window")
        low.legend(fontsize=8, ncol=len(plan.modes))
        for a in (ax, low):
            a.tick_params(axis="x", labelsize=8)
    return save(fig, path, f"Latency of {plan.clients} other connections echoing a small "
                f"message every {plan.period * 1000:g} ms while large snapshots go "
                f"through the server; medians of {plan.repeats} round(s)", fontsize=10)


#: The charts that can be drawn again from a committed results file, without measuring:
#: name -> (rows from ``results/STEM.md``, chart function); the chart is ``STEM-NAME.png``.
REDRAW = {"server-memory": ("server_memory", "server_memory_chart")}


def redraw(name: str, results: Path) -> Path:
    """Draw chart ``name`` again from ``results`` (``benchmarks/results/STEM.md``) into
    ``STEM-NAME.png`` beside it: the same figures, the chart's current layout."""
    import importlib

    module, chart = REDRAW[name]
    rows = importlib.import_module(f"{__package__}.{module}").rows_from_results(results)
    return globals()[chart](rows, results.with_name(f"{results.stem}-{name}.png"))


def main(argv: "list[str] | None" = None) -> None:
    """``python -m fdbench.charts server-memory results/full.md [results/quick.md ...]``
    (from benchmarks/); then ``python tools/render_docs.py`` copies the docs' charts."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fdbench.charts",
                                     description=redraw.__doc__)
    parser.add_argument("chart", choices=sorted(REDRAW))
    parser.add_argument("results", type=Path, nargs="+")
    args = parser.parse_args(argv)
    for results in args.results:
        print(redraw(args.chart, results))


if __name__ == "__main__":
    main()
