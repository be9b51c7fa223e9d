"""Part 1, the original table: compress+decompress cycles per size, workload and mode.

In-process columns are interleaved (A B A B) in this process; an isolated column
(ISA-L) runs in a subprocess of its own (``python -m fdbench.codec_table --worker``,
plan on stdin, JSON lines out), so its ratios to the others are across processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import payloads
from .engines import ENGINES, Settings, column_notes, measure_apart, split, worker_answer
from .measure import (
    LineProgress, Progress, Series, cycles_for, interleave, paired_ratio, plan_from,
    warmup_for, worker_main,
)
from .report import clock_label, fmt_ratio, fmt_us_size, markdown_table

__all__ = ["Plan", "Cell", "QUICK", "FULL", "plan_engines", "measure", "cycles_for"]


@dataclass(frozen=True)
class Plan:
    """What to measure: sizes x workloads x modes, for the given columns."""

    sizes: tuple[int, ...] = payloads.SIZES
    workloads: tuple[str, ...] = payloads.WORKLOADS
    modes: tuple[bool, ...] = (False, True)  # no_context_takeover
    engines: tuple[str, ...] = ("naive", "stdlib", "fastdeflate", "zlib-ng", "isal")
    max_cycles: int = 10_000
    max_bytes: int = 32 << 20  # input bytes per run: caps the cycles of large messages
    full_cycles_up_to: int = 1024  # sizes up to this always get max_cycles
    repeats: int = 3
    level: int = 6
    window_bits: int = 15
    mem_level: int = 8

    def settings(self, no_context_takeover: bool) -> Settings:
        return Settings(self.level, self.window_bits, self.mem_level, no_context_takeover)


#: The short run of the README's main command (well under a minute on 2 cores).
QUICK = Plan(max_cycles=2_000, max_bytes=2 << 20, repeats=3)
#: The full run: 10,000 cycles of 1 KB; larger messages capped at 6 MiB of input per run.
FULL = Plan(
    engines=("naive", "stdlib", "fallback", "fastdeflate", "zlib-ng", "isal"),
    max_cycles=10_000,
    max_bytes=6 << 20,
    repeats=3,
)


@dataclass
class Cell:
    """The measurements of one row: one workload, mode and size."""

    workload: str
    no_context_takeover: bool
    size: int
    cycles: int
    series: dict[str, Series] = field(default_factory=dict)
    isolated: set[str] = field(default_factory=set)  # columns measured in a subprocess

    def ratio(self, slow: str, fast: str, attr: str = "cpu") -> float:
        """slow/fast: paired medians when both ran here, else a ratio of medians."""
        a, b = self.series[slow], self.series[fast]
        if slow in self.isolated or fast in self.isolated:
            return getattr(a, attr) / getattr(b, attr)
        return paired_ratio(a, b, attr)


def plan_engines(plan: Plan) -> tuple[list[str], list[str], list[str]]:
    """(in-process engines, isolated engines, missing engines) among the plan's."""
    return split(plan.engines)


def _cells(plan: Plan) -> list[tuple[str, bool, int]]:
    return [(w, m, s) for w in plan.workloads for m in plan.modes for s in plan.sizes]


def runs_in_process(plan: Plan, engines: list[str]) -> int:
    """How many timed runs (warm-ups included) measuring ``engines`` takes."""
    return len(_cells(plan)) * len(engines) * (plan.repeats + 1)


def _measure_local(
    plan: Plan, engines: list[str], progress: Optional[Progress]
) -> list[Cell]:
    cells = []
    pools: dict[tuple[str, int], list[bytes]] = {}
    for workload, nct, size in _cells(plan):
        key = (workload, size)
        if key not in pools:
            pools[key] = payloads.messages(workload, size)
        settings = plan.settings(nct)
        factories: dict[str, Callable[[], Callable[[bytes], bytes]]] = {
            name: (lambda e=ENGINES[name]: e.make_cycle(settings)) for name in engines
        }
        cycles = cycles_for(plan, size)
        series = interleave(
            factories, pools[key], cycles, plan.repeats, warmup_for(cycles), progress
        )
        cells.append(Cell(workload, nct, size, cycles, series))
    return cells


def measure(
    plan: Plan, progress: Optional[Progress] = None
) -> tuple[list[Cell], dict[str, str]]:
    """Measure the plan; returns its cells and notes about the columns (versions etc.)."""
    local, isolated, missing = plan_engines(plan)
    cells = _measure_local(plan, local, progress)
    notes = column_notes(local, missing)
    for name in isolated:
        try:
            worker_cells, notes[name] = measure_apart("fdbench.codec_table", plan, name,
                                                      progress)
        except RuntimeError as exc:
            raise RuntimeError(f"the {name} column: {exc}") from None
        for cell, data in zip(cells, worker_cells):
            assert (cell.workload, cell.no_context_takeover, cell.size) == (
                data["workload"], data["no_context_takeover"], data["size"]
            )
            cell.series[name] = Series.from_list(data["runs"])
            cell.isolated.add(name)
    return cells, notes


def _work(request: dict[str, Any]) -> dict[str, Any]:
    """Subprocess side: measure one isolated column."""
    plan, name = plan_from(Plan, request["plan"]), request["engine"]
    cells = _measure_local(plan, [name], LineProgress())
    return worker_answer(name, [{"workload": c.workload,
                                 "no_context_takeover": c.no_context_takeover,
                                 "size": c.size, "runs": c.series[name].to_list()}
                                for c in cells])


if __name__ == "__main__":
    worker_main("fdbench.codec_table", _work)


# --- output -----------------------------------------------------------------------------

WORKLOAD_LABELS = {"varying": "varying JSON", "repeated": "same payload"}
MODE_LABELS = {False: "context takeover", True: "no context takeover"}


def columns(cells: list[Cell]) -> list[str]:
    """The engine columns present, in the canonical order."""
    present = set().union(*(c.series for c in cells)) if cells else set()
    return [name for name in ENGINES if name in present]


def table(cells: list[Cell], attr: str = "cpu") -> str:
    """The original table: µs per cycle (compressed size) per column, and the speedups."""
    names = columns(cells)
    header = ["workload", "mode", "size", "cycles"]
    header += [f"{n} µs" for n in names]
    speedups = [n for n in ("naive", "stdlib") if n in names and "fastdeflate" in names]
    header += [f"fastdeflate vs {n}" for n in speedups]
    rows = []
    for c in cells:
        row: list[object] = [
            WORKLOAD_LABELS[c.workload],
            MODE_LABELS[c.no_context_takeover],
            payloads.size_label(c.size),
            c.cycles,
        ]
        for n in names:
            s = c.series[n]
            row.append(fmt_us_size(s, attr))
        row += [fmt_ratio(c.ratio(n, "fastdeflate", attr)) for n in speedups]
        rows.append(row)
    return markdown_table(header, rows)


def legend(cells: list[Cell], notes: dict[str, str], plan: Plan, attr: str = "cpu") -> str:
    """What the table's columns are, in a few lines of Markdown."""
    what = clock_label(attr)
    lines = [
        f"Median {what} µs per compress+decompress cycle (each cycle verifies the round "
        f"trip), compressed size as a fraction of the input in parentheses. Level "
        f"{plan.level}, window {plan.window_bits}, memLevel {plan.mem_level}; "
        f"{plan.repeats} repeats after a warm-up, columns interleaved in one process; "
        f"'fastdeflate vs X' = median of the paired per-repeat ratios X/fastdeflate "
        f"(>1: fastdeflate is faster). {plan.max_cycles:,} cycles per run, fewer for "
        f"messages over {payloads.size_label(plan.full_cycles_up_to)}: at most "
        f"{plan.max_bytes / (1 << 20):g} MiB of input per run (the cycles column).",
        "",
    ]
    for name in columns(cells) + [n for n in notes if n not in columns(cells)]:
        e = ENGINES[name]
        extra = f" {e.note}." if e.note else ""
        lines.append(f"- **{name}**: {e.label} — {notes.get(name, '')}.{extra}")
    if any(c.isolated for c in cells):
        lines.append(
            "- Columns measured in a subprocess are not interleaved with the others "
            "(ISA-L slows stdlib zlib down in any process where it ran)."
        )
    return "\n".join(lines)
