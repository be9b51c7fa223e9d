"""PNG charts (matplotlib, Agg backend): one per part of the report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import payloads  # noqa: E402

if TYPE_CHECKING:
    from .codec_table import Cell

__all__ = ["codec_chart", "grouped_bars"]


def grouped_bars(
    ax: "plt.Axes",
    groups: Sequence[str],
    series: dict[str, Sequence[float]],
    ylabel: str,
    title: str,
) -> None:
    """Bars for each series side by side in each group."""
    n = max(1, len(series))
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, values, width, label=name)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


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
            f"{WORKLOAD_LABELS[workload]}, context {MODE_LABELS[nct]}",
        )
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("permessage-deflate compress+decompress cycles (higher is better)"
                 + (f"\n{subtitle}" if subtitle else ""), fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
