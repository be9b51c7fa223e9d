"""Part 2, many connections: the codec as a server runs it, N connections round-robin.

Each connection has its own compressor and decompressor (context takeover; one cycle of
:mod:`fdbench.engines` each) and its own stream of 1 KB varying JSON updates: it walks the
stream from a starting point of its own, and goes on where it stopped from one run to
the next. Message i goes to connection i mod N, so with many connections every call
finds its state cold in cache, as on a server. Before anything is timed each connection
gets enough messages to fill its window (a connection with an empty window does far
less work than one in its steady state); then runs of max(``messages``, ``touches`` x N)
messages are timed, the engines interleaved (A B C, B C A, ...) and their connections
kept from run to run. ISA-L runs in a subprocess of its own, like in part 1.

If the codec state of every engine's N connections would not fit in the memory allowed
(``max_memory``, and 60% of what the system has available), the engines run one after
the other instead (the table says so); an engine whose connections alone do not fit is
left out of that row with the reason.
"""

from __future__ import annotations

import gc
import tracemalloc
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from . import payloads
from .engines import (
    ENGINES, Cycle, Engine, Settings, column_notes, measure_apart, split, worker_answer,
)
from .measure import (
    LineProgress, Progress, Run, Series, paired_ratio, plan_from, rotations, tick,
    time_calls, worker_main,
)
from .report import clock_label, fmt_ratio, fmt_us_size, markdown_table

__all__ = ["Plan", "Cell", "Fleet", "QUICK", "FULL", "measure", "table", "legend", "runs"]

BASE = "stdlib"  # the "stock" column: stdlib zlib objects, as the libraries use them
STRIDE = 389  # connection c starts at message (c * STRIDE) mod the pool size
TAIL = b"\x00\x00\xff\xff"


@dataclass(frozen=True)
class Plan:
    """What to measure: connection counts x (window bits, memLevel), for the engines."""

    connections: tuple[int, ...] = (1, 100, 1000)
    settings: tuple[tuple[int, int], ...] = ((12, 5), (15, 8))  # websockets', the others'
    engines: tuple[str, ...] = (BASE, "fastdeflate", "fastdeflate-parked", "zlib-ng", "isal")
    size: int = 1024
    messages: int = 2000  # timed messages per run, at least...
    touches: int = 2  # ...and at least this many per connection
    repeats: int = 5
    level: int = 6
    max_memory: int = 12 << 30  # bytes of codec state held at once, at most

    def codec_settings(self, window_bits: int, mem_level: int) -> Settings:
        return Settings(self.level, window_bits, mem_level, no_context_takeover=False)

    def timed(self, connections: int) -> int:
        """Messages per timed run with ``connections`` connections."""
        return max(self.messages, self.touches * connections)

    def warmup(self, window_bits: int) -> int:
        """Messages per connection before timing: enough to fill its window, and two."""
        return -(-(1 << window_bits) // self.size) + 2


#: The short run (README's main command): up to 1,000 connections.
QUICK = Plan()
#: The full run: up to 10,000 connections.
FULL = Plan(connections=(1, 100, 1000, 10_000))


class Fleet:
    """N connections of one engine, and where each one is in its message stream."""

    def __init__(self, eng: Engine, settings: Settings, n: int, pool: list[bytes]) -> None:
        self.cycles: list[Cycle] = [eng.make_cycle(settings) for _ in range(n)]
        self.positions = [(c * STRIDE) % len(pool) for c in range(n)]
        self.pool = pool
        self.next = 0  # the connection the next message goes to

    def schedule(self, count: int) -> list[tuple[Cycle, bytes]]:
        """The next ``count`` (connection, message) pairs, round-robin; advances."""
        n, pool, positions, cycles = len(self.cycles), self.pool, self.positions, self.cycles
        out = []
        c = self.next
        for _ in range(count):
            out.append((cycles[c], pool[positions[c] % len(pool)]))
            positions[c] += 1
            c = c + 1 if c + 1 < n else 0
        self.next = c
        return out

    def run(self, count: int) -> Run:
        """Time the next ``count`` messages (every cycle checks its round trip)."""
        return time_calls(self.schedule(count))


@dataclass
class Cell:
    """One row: one (window bits, memLevel) and connection count, every engine."""

    window_bits: int
    mem_level: int
    connections: int
    messages: int  # per timed run
    warmup: int  # messages per connection before timing
    series: dict[str, Series] = field(default_factory=dict)
    isolated: set[str] = field(default_factory=set)  # engines measured in a subprocess
    missing: dict[str, str] = field(default_factory=dict)  # engine -> why no figure
    sequential: bool = False  # engines one after the other (memory), not interleaved

    def key(self) -> tuple[int, int, int]:
        return (self.window_bits, self.mem_level, self.connections)

    def speedup(self, name: str, attr: str = "cpu") -> float:
        """Stock's time / ``name``'s (> 1: ``name`` is faster): the median of the paired
        per-run ratios when they ran interleaved, else the ratio of the medians."""
        base, other = self.series[BASE], self.series[name]
        if self.sequential or BASE in self.isolated or name in self.isolated:
            return getattr(base, attr) / getattr(other, attr)
        return paired_ratio(base, other, attr)

    def size_ratio(self, name: str) -> float:
        """``name``'s compressed bytes / stock's, over the same messages."""
        return (sum(r.bytes_out for r in self.series[name].runs)
                / sum(r.bytes_out for r in self.series[BASE].runs))


def check_window(eng: Engine, settings: Settings, pool: list[bytes]) -> Optional[str]:
    """Why ``eng`` cannot serve a connection at ``settings`` (None if it can): it fails
    to set up, or its output needs a larger window than negotiated (a stdlib decoder at
    the negotiated window bits must decode 64 KiB of it)."""
    try:
        cycle = eng.make_cycle(settings)
        decoder = zlib.decompressobj(-settings.window_bits)
        for message in pool[: max(8, (64 << 10) // len(pool[0]))]:
            if decoder.decompress(cycle(message) + TAIL) != message:
                return "a stdlib decoder gets other bytes back"
    except Exception as exc:  # the reason goes in the table, nothing is faked
        return f"{type(exc).__name__}: {exc}"
    return None


def per_connection_bytes(eng: Engine, settings: Settings, pool: list[bytes],
                         warmup: int, sample: int = 8) -> float:
    """Traced bytes of one connection's codec state, in its steady state (tracemalloc is
    started for this and stopped again, unless it was already on)."""
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fleet = Fleet(eng, settings, sample, pool)
        fleet.run(sample * warmup)
        return (tracemalloc.get_traced_memory()[0] - before) / sample
    finally:
        if not was_tracing:
            tracemalloc.stop()


def memory_budget(plan: Plan) -> int:
    """Bytes of codec state a row may hold at once."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            info = {line.split(":")[0]: line.split()[1] for line in f}
        return min(plan.max_memory, int(info["MemAvailable"]) * 1024 * 6 // 10)
    except (OSError, KeyError, ValueError, IndexError):
        pass
    try:
        import psutil

        return min(plan.max_memory, psutil.virtual_memory().available * 6 // 10)
    except ImportError:
        return plan.max_memory


def plan_engines(plan: Plan) -> tuple[list[str], list[str], list[str]]:
    """(in-process engines, isolated engines, missing engines) among the plan's."""
    return split(plan.engines)


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def runs(plan: Plan, engines: list[str]) -> int:
    """Progress units: per engine and row, one warm-up and the repeats."""
    return len(plan.settings) * len(plan.connections) * len(engines) * (plan.repeats + 1)


#: fastdeflate's park-after delay (s) for the in-process column: longer than any
#: connection here waits between its messages (the other engines' runs and warm-ups
#: included), so every connection is a busy one, as on a server that sends each one a
#: message at least every 10 s (the default delay).
BUSY_PARK_AFTER = 3600.0


@contextmanager
def busy_connections(names: list[str]) -> Iterator[None]:
    """With the in-process fastdeflate column, set its park-after to BUSY_PARK_AFTER."""
    if "fastdeflate" not in names or ENGINES["fastdeflate"].park_after is not None:
        yield
        return
    module = ENGINES["fastdeflate"].module()
    previous = module.set_park_after(BUSY_PARK_AFTER)
    try:
        yield
    finally:
        module.set_park_after(previous)


def _measure_local(plan: Plan, names: list[str],
                   progress: Optional[Progress] = None) -> list[Cell]:
    with busy_connections(names):
        return _measure_rows(plan, names, progress)


def _measure_rows(plan: Plan, names: list[str], progress: Optional[Progress]) -> list[Cell]:
    pool = payloads.varying(plan.size, payloads.pool_size(plan.size))
    budget = memory_budget(plan)
    cells = []
    for window_bits, mem_level in plan.settings:
        settings = plan.codec_settings(window_bits, mem_level)
        warmup = plan.warmup(window_bits)
        usable: dict[str, float] = {}  # engine -> bytes per connection
        reasons: dict[str, str] = {}
        for name in names:
            reason = check_window(ENGINES[name], settings, pool)
            if reason is None:
                usable[name] = per_connection_bytes(ENGINES[name], settings, pool, warmup)
            else:
                reasons[name] = f"not supported at these settings ({reason})"
        for n in plan.connections:
            cell = Cell(window_bits, mem_level, n, plan.timed(n), warmup,
                        missing=dict(reasons))
            need = {name: per_conn * n for name, per_conn in usable.items()}
            for name, b in need.items():
                if b > budget:
                    cell.missing[name] = (f"left out: {n:,} connections need {_gib(b)} of "
                                          f"codec state, more than the {_gib(budget)} allowed")
            fits = [name for name in usable if name not in cell.missing]
            cell.sequential = sum(need[name] for name in fits) > budget
            groups = [[name] for name in fits] if cell.sequential else [fits] * bool(fits)
            for group in groups:
                _measure_group(cell, group, settings, pool, plan.repeats, progress)
            tick(progress, (len(names) - len(fits)) * (plan.repeats + 1))
            cells.append(cell)
    return cells


def _measure_group(cell: Cell, names: list[str], settings: Settings, pool: list[bytes],
                   repeats: int, progress: Optional[Progress]) -> None:
    """Warm up each engine's connections, then time them interleaved (A B C, B C A...)."""
    fleets: dict[str, Fleet] = {}
    try:
        for name in names:
            fleets[name] = Fleet(ENGINES[name], settings, cell.connections, pool)
            fleets[name].run(cell.connections * cell.warmup)
            tick(progress)
        gc.collect()
        for name in names:
            cell.series[name] = Series([])
        for name in rotations(names, repeats):
            cell.series[name].runs.append(fleets[name].run(cell.messages))
            tick(progress)
    finally:
        fleets.clear()
        gc.collect()


def measure(plan: Plan, progress: Optional[Progress] = None) -> tuple[list[Cell], dict[str, str]]:
    """Measure the plan; returns its rows and notes about the engines (versions etc.)."""
    local, isolated, missing = plan_engines(plan)
    cells = _measure_local(plan, local, progress)
    notes = column_notes(local, missing)
    for name in isolated:
        try:
            worker_cells, notes[name] = measure_apart("fdbench.connections", plan, name,
                                                      progress)
        except RuntimeError as exc:  # an optional peer: reported, the rest stands
            for cell in cells:
                cell.missing[name] = str(exc)
            notes[name] = "its subprocess failed"
            continue
        by_key = {cell.key(): cell for cell in cells}
        for data in worker_cells:
            cell = by_key[(data["window_bits"], data["mem_level"], data["connections"])]
            if data["missing"]:
                cell.missing[name] = data["missing"]
            else:
                cell.series[name] = Series.from_list(data["runs"])
                cell.isolated.add(name)
    return cells, notes


def _work(request: dict[str, Any]) -> dict[str, Any]:
    """Subprocess side: measure one isolated engine."""
    plan, name = plan_from(Plan, request["plan"]), request["engine"]
    cells = _measure_local(plan, [name], LineProgress())
    out = [{"window_bits": c.window_bits, "mem_level": c.mem_level,
            "connections": c.connections, "missing": c.missing.get(name, ""),
            "runs": c.series[name].to_list() if name in c.series else []}
           for c in cells]
    return worker_answer(name, out)


if __name__ == "__main__":
    worker_main("fdbench.connections", _work)


# --- output -----------------------------------------------------------------------------

LABELS = {BASE: "stock", "fastdeflate": "fastdeflate", "fastdeflate-parked": "parked",
          "zlib-ng": "zlib-ng", "isal": "isal"}


def columns(cells: list[Cell]) -> list[str]:
    """The engines in the rows (measured or not), in the canonical order."""
    present = set().union(*(set(c.series) | set(c.missing) for c in cells)) if cells else set()
    return [name for name in ENGINES if name in present]


def settings_label(window_bits: int, mem_level: int) -> str:
    return f"window {window_bits} / memLevel {mem_level}"


def _footnotes(cells: list[Cell]) -> dict[str, str]:
    """Each distinct reason for a missing figure -> its mark."""
    marks: dict[str, str] = {}
    for c in cells:
        for reason in c.missing.values():
            marks.setdefault(reason, f"[{len(marks) + 1}]")
    return marks


def table(cells: list[Cell], attr: str = "cpu") -> str:
    """µs per message (compressed size) per engine; speed and size vs stock."""
    names = columns(cells)
    others = [n for n in names if n != BASE]
    header = ["settings", "connections", "messages/run"]
    header += [f"{LABELS[n]} µs" for n in names]
    header += [f"{LABELS[n]} vs stock: speed, size" for n in others] if BASE in names else []
    marks = _footnotes(cells)
    rows = []
    for c in cells:
        row: list[object] = [settings_label(c.window_bits, c.mem_level)
                             + (" (not interleaved)" if c.sequential else ""),
                             f"{c.connections:,}", f"{c.messages:,}"]
        for n in names:
            if n in c.series:
                s = c.series[n]
                row.append(fmt_us_size(s, attr))
            else:
                row.append(f"— {marks.get(c.missing.get(n, ''), '')}".strip())
        if BASE in names:
            for n in others:
                if n in c.series and BASE in c.series:
                    row.append(f"{fmt_ratio(c.speedup(n, attr))}, {c.size_ratio(n):.3f}")
                else:
                    row.append("—")
        rows.append(row)
    return markdown_table(header, rows)


def legend(cells: list[Cell], notes: dict[str, str], plan: Plan, attr: str = "cpu") -> str:
    what = clock_label(attr)
    lines = [
        f"Median {what} µs per compress+decompress cycle of one {plan.size}-byte varying "
        f"JSON update (each cycle verifies the round trip), compressed size as a fraction of "
        f"the input in parentheses. N connections, each with its own compressor and "
        f"decompressor (context takeover), level {plan.level}; message i goes to connection "
        f"i mod N, each connection continuing its own stream of updates from run to run. "
        f"Each connection first gets enough messages to fill its window (the warm-up: "
        f"{', '.join(f'{plan.warmup(w)} at window {w}' for w, _ in plan.settings)}), then "
        f"{plan.repeats} timed runs of max({plan.messages:,}, {plan.touches} x N) messages "
        f"per engine, engines interleaved in one process. 'X vs stock: speed, size' = "
        f"stock's time / X's (median of the paired per-run ratios; > 1: X is faster), and "
        f"X's compressed bytes / stock's over the same messages. Window 12 / memLevel 5 are "
        f"websockets' defaults, window 15 / memLevel 8 the other libraries'. fastdeflate "
        f"keeps a live stream for every connection that is busy (idle for less than its "
        f"park-after delay, default 10 s); here each connection also waits for the other "
        f"engines' runs, which a busy server's would not, so the fastdeflate column runs "
        f"with set_park_after({BUSY_PARK_AFTER:g}): every connection busy. The 'parked' "
        f"column is the other end: every connection is parked between its messages.",
        "",
    ]
    for name in columns(cells) + [n for n in notes if n not in columns(cells)]:
        label = ("stdlib `zlib` objects kept per connection, as the libraries use them"
                 if name == BASE else ENGINES[name].label)
        extra = f" {ENGINES[name].note}." if ENGINES[name].note else ""
        if name == "isal":
            extra += (" python-isal takes memLevel as the size of ISA-L's level buffer, not "
                      "of a hash table; the window bits are honoured (checked: a stdlib "
                      "decoder at the negotiated window decodes its output).")
        lines.append(f"- **{LABELS.get(name, name)}**: {label} — {notes.get(name, '')}.{extra}")
    for reason, mark in _footnotes(cells).items():
        lines.append(f"- {mark} {reason}.")
    if any(c.isolated for c in cells):
        lines.append("- Engines measured in a subprocess are not interleaved with the others "
                     "(ISA-L slows stdlib zlib down in any process where it ran); their ratios "
                     "are ratios of medians across processes.")
    if any(c.sequential for c in cells):
        lines.append("- '(not interleaved)': the codec state of all engines' connections "
                     "would not fit in memory at once, so the engines ran one after the "
                     "other; ratios of medians.")
    return "\n".join(lines)

