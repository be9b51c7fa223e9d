"""Part 7, the frontier: speed against size at every level, with each library's settings.

For each library's compression settings (its window and memLevel; websockets' differ from
the others') one compress+decompress cycle of 4 KB varying JSON with context takeover, at
levels 1 to 9: stock zlib and fastdeflate (whichever engine ``fastdeflate.engines()``
gives the level), and where the library offers drop-in backends (aiohttp's
``set_zlib_backend``: the ``zlib-ng`` and ``isal`` modules at their ``Z_BEST_SPEED``),
those. A point is µs per message and bytes per message; the better points are down and
to the left, and a speedup bought with bytes shows as a point that moved right *and* up.
ISA-L's Python module runs in a subprocess of its own (it slows stock zlib down in the
process that ran it, see docs/explanation/performance.md); everything else is interleaved in this one.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import payloads
from .engines import ENGINES, Settings, _zlib_like_persistent
from .measure import LineProgress, Progress, Series, interleave, run_worker, worker_main
from .report import engines_summary, fmt_ratio, fmt_size_ratio, fmt_us, markdown_table

__all__ = ["Plan", "QUICK", "FULL", "PATHS", "Point", "measure", "runs", "table", "legend"]

#: Each library's settings: (libraries, the level it runs, window, memLevel).
PATHS = (
    ("websockets", 6, 12, 5),
    ("aiohttp", 1, 15, 8),
    ("wsproto, tornado, autobahn", 6, 15, 8),
)
MESSAGES = 64  # the pool of varying JSON messages every point goes through
#: aiohttp's drop-in backends: (label, module, the level its Z_BEST_SPEED is, isolated).
BACKENDS = (
    ("zlib-ng backend", "zlib_ng.zlib_ng", 1, False),
    ("isal backend", "isal.isal_zlib", 0, True),
)


@dataclass(frozen=True)
class Plan:
    size: int = 4096
    cycles: int = 32
    repeats: int = 24
    levels: tuple[int, ...] = tuple(range(1, 10))


#: Many short runs rather than a few long ones: every point is sampled across the whole
#: part, so a noisy few seconds cannot make one level look slower than its twin. The
#: timed messages are whole passes over the pool (MESSAGES): every point compresses
#: each message as often, after the same ones.
QUICK = Plan(cycles=32, repeats=24)
FULL = Plan(cycles=128, repeats=32)


@dataclass
class Point:
    path: str
    engine: str  # "stock", "fastdeflate" or a backend's label
    level: int
    us: float  # median CPU µs per message (compress + decompress)
    bytes: float  # payload bytes per message
    default: bool  # the level the library runs
    note: str = ""


@dataclass
class Result:
    points: list[Point] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)


def warmup(plan: Plan) -> int:
    """Messages each point gets before it is timed: enough to fill a 32 KiB window."""
    return max(1, -(-(32 << 10) // plan.size))


def runs(plan: Plan) -> int:
    in_process = len(PATHS) * len(plan.levels) * 2 + sum(not iso for *_, iso in BACKENDS)
    return in_process * (plan.repeats + 1) + sum(iso for *_, iso in BACKENDS)


Factory = Callable[[], Callable[[bytes], bytes]]


def _series_point(path: str, engine: str, level: int, default: bool, series: Series) -> Point:
    return Point(path, engine, level, series.cpu_us(), series.bytes_per_cycle(), default)


def _factories(plan: Plan) -> dict[tuple[str, str, int], Factory]:
    """Every in-process point, keyed (path, engine, level): stock and fastdeflate at every
    level of every path, and the in-process backends at aiohttp's."""
    factories: dict[tuple[str, str, int], Factory] = {}
    for path, _, window, mem_level in PATHS:
        for level in plan.levels:
            settings = Settings(level, window, mem_level)
            for engine, column in (("stock", "stdlib"), ("fastdeflate", "fastdeflate")):
                factories[(path, engine, level)] = (
                    lambda e=ENGINES[column], s=settings: e.make_cycle(s))
        if path != "aiohttp":
            continue
        for label, module, level, isolated in BACKENDS:
            if not isolated and importlib.util.find_spec(module.split(".")[0]) is not None:
                factories[(path, label, level)] = (
                    lambda m=module, s=Settings(level, window, mem_level), lv=level:
                    _zlib_like_persistent(importlib.import_module(m), m, s, lv))
    return factories


def measure(plan: Plan, progress: Optional[Progress] = None) -> Result:
    """Every in-process point in one interleaved schedule (each repeat runs every point
    once, so a slow second on the shared machine touches all of them alike, and two
    levels that run the same configuration read alike); isolated backends apart."""
    factories = _factories(plan)
    series = interleave(factories, payloads.varying(plan.size, MESSAGES), plan.cycles,
                        plan.repeats, warmup(plan), progress, fresh=False)
    result = Result()
    defaults = {path: level for path, level, _, _ in PATHS}
    for (path, engine, level), s in series.items():
        backend = engine not in ("stock", "fastdeflate")
        point = _series_point(path, engine, level, backend or level == defaults[path], s)
        if backend:
            point.note = f"level {level}, interleaved with the other points in this process"
            result.notes[engine] = point.note
        result.points.append(point)
    _, _, window, mem_level = next(p for p in PATHS if p[0] == "aiohttp")
    for label, module, level, isolated in BACKENDS:
        if label in result.notes:  # measured above, in this process
            continue
        point = (_backend(plan, "aiohttp", label, module, level, window, mem_level, progress)
                 if isolated else None)
        if point is None:
            result.notes[label] = f"{module.split('.')[0]} not installed: left out"
        else:
            result.points.append(point)
            result.notes[label] = point.note
    import fastdeflate

    for path, _, window, mem_level in PATHS:
        result.notes[path] = engines_summary(fastdeflate, window, mem_level)
    return result


def _backend(plan: Plan, path: str, label: str, module: str, level: int, window: int,
             mem_level: int, progress: Optional[Progress]) -> Optional[Point]:
    """A backend measured in a subprocess of its own (None: it is not installed)."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return None
    request = {"module": module, "level": level, "window": window, "mem_level": mem_level,
               "size": plan.size, "cycles": plan.cycles, "repeats": plan.repeats,
               "warmup": warmup(plan)}
    data = run_worker("fdbench.frontier", request, progress)
    note = f"level {level}; measured in subprocess pid {data['pid']}"
    return Point(path, label, level, data["us"], data["bytes"], True, note)


def _one_backend(request: dict[str, Any]) -> dict[str, Any]:
    """Median CPU µs and bytes per message of one backend module (its own loop)."""
    zlib_like = importlib.import_module(request["module"])
    settings = Settings(request["level"], request["window"], request["mem_level"])
    messages = payloads.varying(request["size"], MESSAGES)
    series = interleave(
        {"backend": lambda: _zlib_like_persistent(zlib_like, request["module"], settings,
                                                  request["level"])},
        messages, request["cycles"], request["repeats"], request["warmup"], fresh=False)
    return {"us": series["backend"].cpu_us(), "bytes": series["backend"].bytes_per_cycle(),
            "pid": os.getpid()}


def _work(request: dict[str, Any]) -> dict[str, Any]:
    LineProgress().update(1)
    return _one_backend(request)


if __name__ == "__main__":
    worker_main("fdbench.frontier", _work)


# --- output -----------------------------------------------------------------------------


def table(result: Result) -> str:
    header = ["settings", "level", "stock µs", "stock bytes", "fastdeflate µs",
              "fastdeflate bytes", "speed: stock / fastdeflate", "bytes: fastdeflate / stock"]
    rows = []
    by_key = {(p.path, p.engine, p.level): p for p in result.points}
    for path, default_level, _, _ in PATHS:
        for level in sorted({p.level for p in result.points
                             if p.path == path and p.engine == "stock"}):
            stock, fast = by_key[(path, "stock", level)], by_key[(path, "fastdeflate", level)]
            mark = " (its level)" if level == default_level else ""
            rows.append([path, f"{level}{mark}", fmt_us(stock.us), f"{stock.bytes:,.0f}",
                         fmt_us(fast.us), f"{fast.bytes:,.0f}", fmt_ratio(stock.us / fast.us),
                         fmt_size_ratio(fast.bytes / stock.bytes)])
        for p in result.points:
            if p.path == path and p.engine not in ("stock", "fastdeflate"):
                stock = by_key[(path, "stock", default_level)]
                # aiohttp asks for Z_BEST_SPEED: the backend module's own level (isal's 0)
                runs = "" if p.level == default_level else f"; the module's level {p.level}"
                rows.append([f"{path}: {p.engine}", f"{default_level} (its level{runs})",
                             fmt_us(stock.us), f"{stock.bytes:,.0f}", fmt_us(p.us),
                             f"{p.bytes:,.0f}", fmt_ratio(stock.us / p.us),
                             fmt_size_ratio(p.bytes / stock.bytes)])
    return markdown_table(header, rows)


def legend(plan: Plan, result: Result) -> str:
    engines = "; ".join(f"{path}: {result.notes.get(path, '')}" for path, *_ in PATHS)
    backends = "; ".join(f"{label}: {result.notes[label]}" for label, *_ in BACKENDS
                         if label in result.notes)
    return (
        f"One compress+decompress cycle of {plan.size // 1024} KB varying JSON with context "
        "takeover (sync flush, tail removed, decompressed and checked), with each library's "
        "window and memLevel, at every level: stock zlib (the stdlib's) and fastdeflate; for "
        "aiohttp also its drop-in backends at the level its `Z_BEST_SPEED` is (aiohttp's "
        "WebSocket writer asks for `Z_BEST_SPEED`), each through its own persistent "
        f"compressobj/decompressobj loop. Median CPU µs of {plan.repeats} runs of "
        f"{plan.cycles:,} messages per point, every point of every setting interleaved in "
        "one schedule (each repeat runs each point once, so that levels running the same "
        "configuration read alike), each point's compressor and decompressor kept from "
        f"its warm-up ({warmup(plan)} messages) on, through the pool of {MESSAGES} "
        "messages from a starting message of its own (points with the same parameters are "
        "two conversations, not a broadcast whose work compress-once would share); bytes "
        "= payload bytes per message over all its runs. Rows in the "
        "backends' lines compare them with stock at aiohttp's level. fastdeflate's engine "
        f"per level — {engines}. Backends — {backends}. The speed of each library's own "
        "sending and receiving code at its level is part 3's."
    )


def points_for_chart(result: Result) -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = {}
    for p in result.points:
        out.setdefault(p.path, []).append(p)
    return out
