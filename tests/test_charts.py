"""The server-memory chart (the landing page's, ``docs/charts/full-server-memory.png``)
is readable — no x label runs into another, the legend hides no bar — and can be drawn
again from its committed results file without measuring (``python -m fdbench.charts
server-memory results/full.md``, from ``benchmarks/``)."""

from __future__ import annotations

import importlib.util
import struct
import sys
from itertools import combinations
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "benchmarks"
RESULTS = BENCH_DIR / "results"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import server_memory  # noqa: E402
from fdbench.results import Results  # noqa: E402

requires_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                         reason="matplotlib (the [bench] extra)")


def test_the_rows_rebuilt_from_a_results_file_are_its_table() -> None:
    path = RESULTS / "full.md"
    committed = Results.load(path).cells("library", "connections", "idle: stock")
    rows = server_memory.rows_from_results(path)
    assert len(rows) == len(committed) and any(not r.measured for r in rows)
    assert {r.offer for r in rows} == {"default", "no-takeover"}
    for row, cells in zip(rows, committed):
        assert [row.label, f"{row.connections:,}"] == cells[:2]
        if not row.measured:
            assert cells[2] == "run failed (below)"
            continue
        kib = [f"{row.kib(mode, state):,.1f} KiB" for state in server_memory.STATES
               for mode in server_memory.MODES]
        assert kib == [c for c in cells[2:] if c.endswith(" KiB")]


@requires_matplotlib
@pytest.mark.parametrize("results", ["full.md", "quick.md"])
def test_the_chart_labels_do_not_overlap(results: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from fdbench import charts

    drawn = []
    save = charts.save

    def keep(fig, path, title, fontsize=11):  # type: ignore[no-untyped-def]
        fig.suptitle(title, fontsize=fontsize)
        fig.tight_layout()
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            labels = [t.get_window_extent(renderer) for t in ax.get_xticklabels()
                      if t.get_text()]
            assert len(labels) >= 5
            crossed = [(a, b) for a, b in combinations(labels, 2) if a.overlaps(b)]
            assert crossed == [], f"{results}: x labels overlap"
            legend = ax.get_legend()
            if legend is not None:
                assert not legend.get_window_extent(renderer).overlaps(
                    ax.get_window_extent(renderer)), "the legend covers the bars"
            drawn.append(ax)
        return save(fig, path, title, fontsize)

    monkeypatch.setattr(charts, "save", keep)
    rows = server_memory.rows_from_results(RESULTS / results)
    png = charts.server_memory_chart(rows, tmp_path / "chart.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(drawn) == len({r.connections for r in rows if r.measured})


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@requires_matplotlib
def test_the_committed_chart_has_the_current_layout(tmp_path: Path) -> None:
    """The chart the landing page shows was drawn by today's chart code (its size is the
    layout's: a panel per number of connections, one above the other)."""
    from fdbench import charts

    copy = tmp_path / "full.md"
    copy.write_text((RESULTS / "full.md").read_text(encoding="utf-8"), encoding="utf-8")
    png = charts.redraw("server-memory", copy)
    assert png == tmp_path / "full-server-memory.png"
    assert png_size(RESULTS / "full-server-memory.png") == png_size(png)
    assert (ROOT / "docs" / "charts" / "full-server-memory.png").read_bytes() == (
        RESULTS / "full-server-memory.png").read_bytes()
