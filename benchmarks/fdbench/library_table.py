"""Part 3, per library: each library's own encode/decode path, stock vs fastdeflate.

The libraries are the modules ``benchmarks/per_library/*_lib.py`` (found with a glob,
imported as ``per_library.<name>``), each with ``NAME`` and
``make_roundtrip(enabled, no_context_takeover=False) -> f(message) -> message``, and
maybe ``ALTERNATIVES``, {label: ``f(no_context_takeover) -> roundtrip``}: other ways to
run the stock library (aiohttp's zlib-ng backend), measured in the same interleaved runs.
Every timed call's result is checked against the message it was given.

Then a server's view (``Plan.connections``): the same round trips, N connections of each
library at once, message i through connection i mod N (1 KB varying JSON), so that every
call finds its connection's state cold, as on a busy server. Each connection gets
``Plan.fill`` messages before anything is timed (1 KB messages fill a 32 KiB window).
"""

from __future__ import annotations

import gc
import importlib
import itertools
import traceback
import types
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

from . import payloads
from .engines import RoundTripError
from .measure import Progress, Series, cycles_for, interleave, paired_ratio, warmup_for
from .report import clock_label, fmt_ratio, fmt_us, markdown_table

__all__ = ["Plan", "Library", "Row", "QUICK", "FULL", "discover", "measure", "table",
           "alternatives_table", "measure_fleets", "fleet_table"]

PER_LIBRARY_DIR = Path(__file__).resolve().parent.parent / "per_library"


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...] = payloads.SIZES
    workloads: tuple[str, ...] = payloads.WORKLOADS
    no_context_takeover: bool = False  # the libraries' default is context takeover
    max_cycles: int = 10_000
    max_bytes: int = 6 << 20
    full_cycles_up_to: int = 1024  # sizes up to this always get max_cycles
    repeats: int = 3
    libraries: Optional[tuple[str, ...]] = None  # None: every module found
    connections: tuple[int, ...] = ()  # a server's view: this many connections round-robin
    fill: int = 32  # messages each of those connections gets before anything is timed


QUICK = Plan(max_cycles=1_000, max_bytes=1 << 20, connections=(100,))
FULL = Plan(connections=(100, 1000))
STRIDE = 389  # connection c fills its window from message c * STRIDE of the pool on


@dataclass
class Library:
    """One ``*_lib.py`` module, or why it could not be used."""

    name: str
    path: Path
    module: Optional[ModuleType] = None
    error: str = ""

    @property
    def summary(self) -> str:
        doc = (self.module.__doc__ or "").strip() if self.module else ""
        return doc.split("\n\n")[0].replace("\n", " ") if doc else ""


@dataclass
class Row:
    library: str
    workload: str
    size: int
    cycles: int
    series: dict[str, Series] = field(default_factory=dict)
    connections: int = 1

    def speedup(self, attr: str = "cpu") -> float:
        """stock / enabled, median of the paired per-repeat ratios."""
        return paired_ratio(self.series["stock"], self.series["enabled"], attr)


def discover(directory: Path = PER_LIBRARY_DIR) -> list[Library]:
    """Every ``*_lib.py`` there, imported; a module that fails to import or lacks the
    interface is returned with its error (and is reported, not measured)."""
    found = []
    for path in sorted(directory.glob("*_lib.py")):
        lib = Library(path.stem.removesuffix("_lib"), path)
        try:
            module = importlib.import_module(f"per_library.{path.stem}")
            lib.name = getattr(module, "NAME")
            if not callable(getattr(module, "make_roundtrip", None)):
                raise TypeError("no make_roundtrip()")
            lib.module = module
        except Exception as exc:  # a broken module is reported, not fatal
            lib.error = f"{type(exc).__name__}: {exc}".strip()
            lib.error += " | " + traceback.format_exc(limit=-1).strip().splitlines()[-3].strip()
        found.append(lib)
    return found


def checked(roundtrip: Callable[[bytes], bytes], name: str) -> Callable[[bytes], bytes]:
    """``roundtrip`` that raises :exc:`RoundTripError` unless it returns its input."""

    def cycle(message: bytes) -> bytes:
        out = roundtrip(message)
        if out != message:
            raise RoundTripError(f"{name}: the round trip changed a {len(message)}-byte message")
        return out

    return cycle


def codec_types(root: object, limit: int = 100_000, depth: Optional[int] = None) -> set[str]:
    """Names of the codec object types reachable from ``root`` (e.g. a round-trip function).

    Follows closures, defaults and ``gc.get_referents`` (not module globals or classes),
    at most ``depth`` references away from ``root`` if given, and keeps the public types
    from ``zlib``-like modules and ``fastdeflate._fastdeflate`` / ``fastdeflate._pure``.
    """
    seen: set[int] = set()
    queue: deque[tuple[object, int]] = deque([(root, 0)])  # breadth first
    found: set[str] = set()
    while queue and len(seen) < limit:
        obj, level = queue.popleft()
        if id(obj) in seen or isinstance(obj, (types.ModuleType, type)):
            continue
        seen.add(id(obj))
        kind = type(obj)
        if kind.__module__ in CODEC_MODULES and not kind.__qualname__.startswith("_"):
            found.add(f"{kind.__module__}.{kind.__qualname__}")
        if depth is not None and level >= depth:
            continue
        if isinstance(obj, types.FunctionType):
            refs: list[object] = list(obj.__defaults__ or ())
            for cell in obj.__closure__ or ():
                try:
                    refs.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
        else:
            refs = gc.get_referents(obj)
        queue.extend((ref, level + 1) for ref in refs)
    return found


CODEC_MODULES = {"zlib", "zlib_ng.zlib_ng", "isal.isal_zlib",
                 "fastdeflate._fastdeflate", "fastdeflate._pure"}
FAST = {"fastdeflate._fastdeflate.Compressor", "fastdeflate._fastdeflate.Decompressor"}
STOCK = {"zlib.Compress", "zlib.Decompress"}


def check_codecs(module: ModuleType, no_context_takeover: bool) -> None:
    """Stock must use stdlib zlib objects only, enabled the compiled fastdeflate ones only.

    (Without context takeover some libraries create their codec objects per message,
    so only the enabled side's absence of stdlib objects is checked there.)
    """
    for enabled in (False, True):
        roundtrip = module.make_roundtrip(enabled, no_context_takeover)
        roundtrip(b'{"check": "codec objects"}' * 20)
        found = codec_types(roundtrip)
        want, unwanted = (FAST, STOCK) if enabled else (STOCK, FAST)
        if (not no_context_takeover and not want <= found) or found & unwanted:
            side = "enabled" if enabled else "stock"
            raise RoundTripError(
                f"{module.__name__}: the {side} round trip uses {sorted(found)}, "
                f"expected {sorted(want)}"
            )


def alternatives(module: ModuleType) -> dict[str, Callable[[bool], Callable[[bytes], bytes]]]:
    return dict(getattr(module, "ALTERNATIVES", {}))


def runs(plan: Plan, libraries: list[Library]) -> int:
    series = sum(2 + len(alternatives(lib.module)) for lib in libraries if lib.module)
    cells = len(plan.sizes) * len(plan.workloads) + len(plan.connections)
    return series * cells * (plan.repeats + 1)


def fleet(make: Callable[[], Callable[[bytes], bytes]], n: int, pool: list[bytes],
          fill: int) -> Callable[[bytes], bytes]:
    """``n`` connections made by ``make``, each given ``fill`` messages of ``pool`` (from
    its own starting point); the round trip returned sends message i through connection
    i mod n."""
    trips = [make() for _ in range(n)]
    for c, trip in enumerate(trips):
        for j in range(fill):
            message = pool[(c * STRIDE + j) % len(pool)]
            if trip(message) != message:
                raise RoundTripError(f"connection {c} changed a message while filling")
    turn = itertools.cycle(trips)

    def roundtrip(message: bytes) -> bytes:
        return next(turn)(message)

    return roundtrip


def measure_fleets(
    plan: Plan, libraries: list[Library], progress: Optional[Progress] = None
) -> list[Row]:
    """Stock vs enabled (and the alternatives) with ``plan.connections`` connections of
    each usable library at once (run :func:`measure` first: it sets aside the broken)."""
    rows = []
    nct = plan.no_context_takeover
    pool = payloads.messages("varying", 1024)
    for n in plan.connections:
        cycles = max(plan.max_cycles, 2 * n)
        for lib in libraries:
            module = lib.module
            if module is None:
                continue
            makers = {"stock": lambda m=module: m.make_roundtrip(False, nct),
                      "enabled": lambda m=module: m.make_roundtrip(True, nct)}
            for alt, make in alternatives(module).items():
                makers[alt] = lambda f=make: f(nct)
            factories = {
                name: lambda mk=mk, label=f"{lib.name} ({name}, {n} connections)": checked(
                    fleet(mk, n, pool, plan.fill), label)
                for name, mk in makers.items()
            }
            series = interleave(factories, pool, cycles, plan.repeats, warmup_for(cycles),
                                progress)
            rows.append(Row(lib.name, "varying", 1024, cycles, series, n))
    return rows


def fleet_table(rows: list[Row], attr: str = "cpu") -> str:
    """One line per library and connection count: stock, enabled and alternatives."""
    alts = sorted({k for r in rows for k in r.series if k not in ("stock", "enabled")})
    header = (["library", "connections", "messages/run", "stock µs", "enabled µs", "speedup"]
              + [f"{a} µs" for a in alts] + [f"fastdeflate vs {a}" for a in alts])
    out = []
    for r in sorted(rows, key=lambda r: (r.library, r.connections)):
        line = [r.library, f"{r.connections:,}", f"{r.cycles:,}",
                fmt_us(r.series["stock"].us(attr)), fmt_us(r.series["enabled"].us(attr)),
                fmt_ratio(r.speedup(attr))]
        line += [fmt_us(r.series[a].us(attr)) if a in r.series else "" for a in alts]
        line += [fmt_ratio(paired_ratio(r.series[a], r.series["enabled"], attr))
                 if a in r.series else "" for a in alts]
        out.append(line)
    return markdown_table(header, out) if out else ""


def measure(
    plan: Plan, libraries: list[Library], progress: Optional[Progress] = None
) -> list[Row]:
    """Stock vs enabled for every usable library, size and workload (interleaved)."""
    rows = []
    nct = plan.no_context_takeover
    for lib in libraries:
        if lib.module is not None:
            try:
                check_codecs(lib.module, nct)
            except Exception as exc:  # reported, not measured
                lib.error = f"{type(exc).__name__}: {exc}"
                lib.module = None
    for workload in plan.workloads:
        for size in plan.sizes:
            pool = payloads.messages(workload, size)
            cycles = cycles_for(plan, size)
            for lib in libraries:
                module = lib.module
                if module is None:
                    continue
                label = lib.name
                factories = {
                    "stock": lambda m=module, n=label: checked(m.make_roundtrip(False, nct), n),
                    "enabled": lambda m=module, n=label: checked(m.make_roundtrip(True, nct), n),
                }
                for alt, make in alternatives(module).items():
                    factories[alt] = lambda f=make, n=f"{label} ({alt})": checked(f(nct), n)
                try:
                    series = interleave(
                        factories, pool, cycles, plan.repeats, warmup_for(cycles), progress
                    )
                except RoundTripError:
                    raise
                except Exception as exc:  # a library module broken at run time
                    lib.error = f"{type(exc).__name__} while measuring: {exc}"
                    lib.module = None
                    continue
                rows.append(Row(lib.name, workload, size, cycles, series))
    return rows


def table(rows: list[Row], attr: str = "cpu") -> str:
    from .codec_table import WORKLOAD_LABELS
    header = ["library", "workload", "size", "messages", "stock µs", "enabled µs", "speedup"]
    out = []
    for r in sorted(rows, key=lambda r: (r.library, payloads.WORKLOADS.index(r.workload), r.size)):
        stock, enabled = r.series["stock"], r.series["enabled"]
        out.append([
            r.library, WORKLOAD_LABELS[r.workload], payloads.size_label(r.size), r.cycles,
            fmt_us(stock.us(attr)), fmt_us(enabled.us(attr)), fmt_ratio(r.speedup(attr)),
        ])
    return markdown_table(header, out)


def alternatives_table(rows: list[Row], attr: str = "cpu") -> str:
    """fastdeflate against the other ways a library offers (empty if none measured)."""
    from .codec_table import WORKLOAD_LABELS
    header = ["library", "alternative", "workload", "size", "alternative µs",
              "enabled µs", "fastdeflate vs alternative"]
    out = []
    for r in sorted(rows, key=lambda r: (r.library, payloads.WORKLOADS.index(r.workload), r.size)):
        for alt in (k for k in r.series if k not in ("stock", "enabled")):
            out.append([r.library, alt, WORKLOAD_LABELS[r.workload],
                        payloads.size_label(r.size), fmt_us(r.series[alt].us(attr)),
                        fmt_us(r.series["enabled"].us(attr)),
                        fmt_ratio(paired_ratio(r.series[alt], r.series["enabled"], attr))])
    return markdown_table(header, out) if out else ""


def legend(plan: Plan, libraries: list[Library], attr: str = "cpu") -> str:
    what = clock_label(attr)
    mode = "no context takeover" if plan.no_context_takeover else "context takeover"
    lines = [
        f"Median {what} µs per message through each library's own sending and receiving "
        f"code (no sockets), {mode}, the result checked every time; stock (checked to use "
        f"stdlib zlib objects) vs fastdeflate enabled (checked to use the compiled "
        f"fastdeflate objects), interleaved, {plan.repeats} repeats after a warm-up; speedup "
        f"= median of paired per-repeat ratios stock/enabled. {plan.max_cycles:,} messages "
        f"per run, fewer for messages over {payloads.size_label(plan.full_cycles_up_to)}: "
        f"at most {plan.max_bytes / (1 << 20):g} MiB per run.",
        "",
    ]
    for lib in libraries:
        if lib.module is not None:
            lines.append(f"- **{lib.name}** (`{lib.path.name}`): {lib.summary}")
        else:
            lines.append(f"- **{lib.name}** (`{lib.path.name}`): NOT MEASURED — {lib.error}")
    return "\n".join(lines)
