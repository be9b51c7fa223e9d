"""Part 7, the frontier: speed against size at every level, with each library's settings.

For each library's compression settings (its window and memLevel; websockets' differ from
the others') one compress+decompress cycle of 4 KB varying JSON with context takeover, at
levels 1 to 9: stock zlib and fastdeflate (whichever engine ``fastdeflate.engines()``
gives the level), and where the library offers drop-in backends (aiohttp's
``set_zlib_backend``: the ``zlib-ng`` and ``isal`` modules at their ``Z_BEST_SPEED``),
those. A point is µs per message and bytes per message; the better points are down and
to the left, and a speedup bought with bytes shows as a point that moved right *and* up.
ISA-L's Python module runs in a subprocess of its own (it slows stock zlib down in the
process that ran it, see docs/benchmarks.md); everything else is interleaved in this one.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import payloads
from .engines import ENGINES, Settings, _zlib_like_persistent
from .measure import LineProgress, Progress, interleave, run_worker
from .report import engines_summary

__all__ = ["Plan", "QUICK", "FULL", "PATHS", "Point", "measure", "runs", "table", "legend"]

#: Each library's settings: (libraries, the level it runs, window, memLevel).
PATHS = (
    ("websockets", 6, 12, 5),
    ("aiohttp", 1, 15, 8),
    ("wsproto, tornado, autobahn", 6, 15, 8),
)
#: aiohttp's drop-in backends: (label, module, the level its Z_BEST_SPEED is, isolated).
BACKENDS = (
    ("zlib-ng backend", "zlib_ng.zlib_ng", 1, False),
    ("isal backend", "isal.isal_zlib", 0, True),
)


@dataclass(frozen=True)
class Plan:
    size: int = 4096
    cycles: int = 300
    repeats: int = 3
    levels: tuple[int, ...] = tuple(range(1, 10))


QUICK = Plan()
FULL = Plan(cycles=1000, repeats=5)


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


def runs(plan: Plan) -> int:
    return len(PATHS) * len(plan.levels) * 2 * (plan.repeats + 1) + len(BACKENDS)


def _series_point(path: str, engine: str, level: int, default: bool, series: Any) -> Point:
    run = series.runs[0]
    return Point(path, engine, level, series.cpu_us(), run.bytes_out / run.cycles, default)


def measure(plan: Plan, progress: Optional[Progress] = None) -> Result:
    messages = payloads.varying(plan.size, 64)
    result = Result()
    for path, default_level, window, mem_level in PATHS:
        for level in plan.levels:
            settings = Settings(level, window, mem_level)
            factories: dict[str, Callable[[], Callable[[bytes], bytes]]] = {
                "stock": lambda s=settings: ENGINES["stdlib"].make_cycle(s),
                "fastdeflate": lambda s=settings: ENGINES["fastdeflate"].make_cycle(s),
            }
            series = interleave(factories, messages, plan.cycles, plan.repeats,
                                max(1, plan.cycles // 4), progress)
            for name in factories:
                result.points.append(_series_point(path, name, level, level == default_level,
                                                   series[name]))
        if path == "aiohttp":
            for label, module, level, isolated in BACKENDS:
                point = _backend(plan, path, label, module, level, window, mem_level,
                                 isolated, progress)
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
             mem_level: int, isolated: bool, progress: Optional[Progress]) -> Optional[Point]:
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return None
    request = {"module": module, "level": level, "window": window, "mem_level": mem_level,
               "size": plan.size, "cycles": plan.cycles, "repeats": plan.repeats}
    if isolated:
        data = run_worker("fdbench.frontier", request, progress)
        note = f"level {level}; measured in subprocess pid {data['pid']}"
    else:
        data = _one_backend(request)
        note = f"level {level}, in this process"
        if progress is not None:
            progress.update(1)
    return Point(path, label, level, data["us"], data["bytes"], True, note)


def _one_backend(request: dict[str, Any]) -> dict[str, Any]:
    """Median CPU µs and bytes per message of one backend module (its own loop)."""
    zlib_like = importlib.import_module(request["module"])
    settings = Settings(request["level"], request["window"], request["mem_level"])
    messages = payloads.varying(request["size"], 64)
    series = interleave(
        {"backend": lambda: _zlib_like_persistent(zlib_like, request["module"], settings,
                                                  request["level"])},
        messages, request["cycles"], request["repeats"], max(1, request["cycles"] // 4))
    run = series["backend"].runs[0]
    return {"us": series["backend"].cpu_us(), "bytes": run.bytes_out / run.cycles,
            "pid": os.getpid()}


def _worker() -> None:
    import json

    request = json.load(sys.stdin)
    LineProgress().update(1)
    print(json.dumps(_one_backend(request)), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker()
    else:
        sys.exit("usage: python -m fdbench.frontier --worker  (request as JSON on stdin)")


# --- output -----------------------------------------------------------------------------


def table(result: Result) -> str:
    from .report import fmt_ratio, fmt_us, markdown_table

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
                         f"{fast.bytes / stock.bytes:.3f}x"])
        for p in result.points:
            if p.path == path and p.engine not in ("stock", "fastdeflate"):
                stock = by_key[(path, "stock", default_level)]
                rows.append([f"{path}: {p.engine}", f"{default_level} (its level)",
                             fmt_us(stock.us), f"{stock.bytes:,.0f}", fmt_us(p.us),
                             f"{p.bytes:,.0f}", fmt_ratio(stock.us / p.us),
                             f"{p.bytes / stock.bytes:.3f}x"])
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
        f"compressobj/decompressobj loop. Median CPU µs of {plan.repeats} interleaved runs "
        f"of {plan.cycles:,} messages; bytes = payload bytes per message. Rows in the "
        "backends' lines compare them with stock at aiohttp's level. fastdeflate's engine "
        f"per level — {engines}. Backends — {backends}. The speed of each library's own "
        "sending and receiving code at its level is part 3's."
    )


def points_for_chart(result: Result) -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = {}
    for p in result.points:
        out.setdefault(p.path, []).append(p)
    return out
