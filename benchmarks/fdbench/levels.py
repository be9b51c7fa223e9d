"""The level frontier (issue 45): bytes and time of each level's candidate tunings of the
bundled zlib-ng on the wider corpus, side by side with stock zlib.

A cell is one shape of :mod:`.corpus` at one message size, window (9-15, memLevel 8) and
context setting; a level's bytes are judged by its worst cell (fastdeflate's bytes over
stock's), its time by the sum over the cells of the fastest of a few passes. Each
candidate runs in its own process (``python -m fdbench.levels``: engines and caches of one
do not disturb another), candidates interleaved, a few rounds, medians kept. Trying a
tuning needs the test build (``_set_level_config``); measuring a build's own levels
does not, so an earlier build can be timed the same way (``--before``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from . import corpus, sizes

#: Messages per size of each shape.
SAMPLE = {1024: 16, 4096: 8, 16384: 4, 65536: 2}
WINDOWS = tuple(range(9, 16))
MEM_LEVEL = 8
#: The bound of issue 45: at most this times stock's bytes in every cell.
LIMIT = 1.02
PASSES = 3

#: (engine level, good, lazy, nice, chain, 3-byte hash): zlib_ng.h's fd_level_config.
Config = tuple[int, int, int, int, int, int]


def _fast(lazy: int, nice: int, chain: int, hash3: int) -> Config:
    return (2, 4, lazy, nice, chain, hash3)


def _slow(good: int, lazy: int, nice: int, chain: int, hash3: int) -> Config:
    return (7, good, lazy, nice, chain, hash3)


_FAST = tuple(_fast(lazy, nice, chain, hash3) for hash3 in (0, 1) for lazy in (4, 6)
              for nice in (8, 16, 32) for chain in (2, 4, 8, 16, 32))

#: The tunings tried per level: zlib's strategy (fast: 1-3, lazy: 4-9) on zlib-ng's
#: 4-byte hash and on a 3-byte one, with zlib's limits and others near them. (Level 1's
#: are zlib-ng's, instead of ISA-L.)
CANDIDATES: dict[int, tuple[Config, ...]] = {
    1: _FAST,
    2: _FAST,
    3: _FAST,
    4: tuple(_slow(4, lazy, nice, chain, hash3) for hash3 in (0, 1) for lazy in (4, 8)
             for nice in (16, 32) for chain in (8, 16, 32)),
    5: tuple(_slow(8, 16, nice, chain, hash3) for hash3 in (0, 1) for nice in (32, 64)
             for chain in (16, 32, 64, 128)),
    6: tuple(_slow(good, lazy, nice, chain, hash3) for hash3 in (0, 1) for good in (4, 8)
             for lazy in (16, 32) for nice in (64, 128) for chain in (32, 48, 64, 128)),
    7: tuple(_slow(8, 32, nice, chain, hash3) for hash3 in (0, 1) for nice in (128, 258)
             for chain in (64, 128, 256, 512)),
    8: tuple(_slow(32, 128, 258, chain, hash3) for hash3 in (0, 1)
             for chain in (128, 256, 512, 1024)),
    9: (),
}


@dataclass(frozen=True)
class Window:
    """One level's tuning over the corpus's cells at one window."""

    worst: float    # fastdeflate / stock bytes, the worst cell
    where: str      # that cell
    seconds: float  # compress time over these cells


@dataclass(frozen=True)
class Point:
    """One run of one level's tuning over the corpus, window by window."""

    level: int
    config: Optional[Config]  # None: the build's own
    windows: dict[int, Window]

    @property
    def worst(self) -> float:
        return max(w.worst for w in self.windows.values())

    @property
    def seconds(self) -> float:
        return sum(w.seconds for w in self.windows.values())


def cells() -> list[tuple[str, int, int, bool, list[bytes]]]:
    """(shape, size, window, no context takeover, messages) of every cell."""
    out = []
    for shape in corpus.SHAPES:
        for size, count in SAMPLE.items():
            messages = corpus.stream(shape, size, count)
            out += [(shape, size, w, nct, messages) for w in WINDOWS for nct in (False, True)]
    return out


def measure(level: int, config: Optional[Config]) -> Point:
    """This process's fastdeflate at ``level`` (tuned to ``config`` if given) over the
    corpus."""
    import fastdeflate
    if config is not None:  # a tuning of zlib-ng's: zlib-ng runs the level
        from fastdeflate import _fastdeflate
        _fastdeflate._set_isal_deflate(False)
        _fastdeflate._set_level_config(level, tuple(config))
    worst = {w: (0.0, "") for w in WINDOWS}
    seconds = dict.fromkeys(WINDOWS, 0.0)
    for shape, size, window, nct, messages in cells():
        best = float("inf")
        for _ in range(PASSES):
            c = fastdeflate.Compressor(level=level, window_bits=window, mem_level=MEM_LEVEL,
                                       no_context_takeover=nct)
            start = time.perf_counter()
            sent = sum(len(c.compress(m)) for m in messages)
            best = min(best, time.perf_counter() - start)
        seconds[window] += best
        ratio = sent / sizes._stock_bytes(sizes.Settings(level, window, MEM_LEVEL), nct,
                                          messages)
        where = f"{shape} {size // 1024} KB, " + (
            "no context takeover" if nct else "context takeover")
        worst[window] = max(worst[window], (ratio, where))
    return Point(level, config, {w: Window(*worst[w], seconds[w]) for w in WINDOWS})


def _point(d: dict) -> Point:
    return Point(d["level"], tuple(d["config"]) if d["config"] else None,
                 {int(w): Window(**v) for w, v in d["windows"].items()})


def run(level: int, config: Optional[Config], path: Optional[Path] = None) -> Point:
    """:func:`measure` in a process of its own (``path``: where its fastdeflate is)."""
    env = dict(os.environ)
    bench = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(path)] * (path is not None) + [bench, env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-m", "fdbench.levels", str(level),
                          json.dumps(config)], env=env, cwd=bench, check=True,
                         capture_output=True, text=True, timeout=600).stdout
    return _point(json.loads(out))


def rounds(jobs: list[tuple[int, Optional[Config], Optional[Path]]], count: int,
           progress=lambda: None) -> dict[tuple, Point]:
    """Every job ``count`` times, in a new random order each round; each job's bytes
    (which do not vary) with the median time of each window."""
    runs: dict[tuple, list[Point]] = {job: [] for job in jobs}
    rnd = random.Random(45)
    for _ in range(count):
        order = list(jobs)
        rnd.shuffle(order)
        for job in order:
            runs[job].append(run(*job))
            progress()
    out = {}
    for job, points in runs.items():
        first = points[0]
        out[job] = Point(first.level, first.config, {
            w: dataclasses.replace(v, seconds=statistics.median(
                p.windows[w].seconds for p in points))
            for w, v in first.windows.items()})
    return out


#: The window classes a level is tuned for (zlib_ng.h's FD_LEVELS[level][class]): at
#: windows 9-11 binary records need matches of 3 bytes (the 3-byte hash); at 12-15 the
#: 4-byte hash with shorter searches holds the bound.
CLASSES: tuple[tuple[int, ...], ...] = ((9, 10, 11), (12, 13, 14, 15))


def class_worst(point: Point, windows: tuple[int, ...]) -> float:
    return max(point.windows[w].worst for w in windows)


def class_seconds(point: Point, windows: tuple[int, ...]) -> float:
    return sum(point.windows[w].seconds for w in windows)


def choose(points: list[Point], limit: float = LIMIT) -> list[Optional[Point]]:
    """For each window class, the fastest of ``points`` (one level's candidates) whose
    worst cell at those windows is within ``limit``; None where none is."""
    chosen: list[Optional[Point]] = []
    for windows in CLASSES:
        ok = [p for p in points if class_worst(p, windows) <= limit]
        chosen.append(min(ok, key=lambda p: class_seconds(p, windows)) if ok else None)
    return chosen


def _config_text(config: Optional[Config]) -> str:
    if config is None:
        return "the build's own"
    level, good, lazy, nice, chain, hash3 = config
    strategy = "fast" if level < 4 else "lazy"
    return (f"{strategy}, good {good}, lazy {lazy}, nice {nice}, chain {chain}, "
            f"{3 if hash3 else 4}-byte hash")


def frontier_table(results: dict[tuple, Point]) -> str:
    """Per level and window class: the build's own tuning and the fastest candidate
    within the bound (time relative to the build's own)."""
    from .report import markdown_table
    rows = []
    for level in sorted({job[0] for job in results}):
        own = results[(level, None, None)]
        candidates = [p for (lv, c, where), p in results.items()
                      if lv == level and c is not None and where is None]
        best = choose(candidates) if candidates else [None] * len(CLASSES)
        for windows, pick in zip(CLASSES, best):
            span = f"{windows[0]}-{windows[-1]}"
            row = [str(level), span, f"{class_worst(own, windows):.4f}"]
            if pick is None:
                row += ["—", "—", "—"]
            else:
                row += [_config_text(pick.config), f"{class_worst(pick, windows):.4f}",
                        f"{class_seconds(pick, windows) / class_seconds(own, windows):.3f}"]
            rows.append(row + [str(len(candidates))])
    return markdown_table(["level", "windows", "build's worst / stock", "fastest within 1.02x",
                           "its worst / stock", "its time / build's", "candidates"], rows)


def checkout_of(folder: Path) -> str:
    """Which commit a build folder is a checkout of ("commit 56a8536"), if it is one."""
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short=7", "HEAD"],
                             capture_output=True, text=True, timeout=30)
    except OSError:
        return "not a git checkout"
    return f"commit {out.stdout.strip()}" if out.returncode == 0 else "not a git checkout"


def _worst_text(point: Point) -> str:
    at = max(point.windows, key=lambda w: point.windows[w].worst)
    return f"{point.worst:.4f} ({point.windows[at].where}, window {at})"


def before_after_table(results: dict[tuple, Point], before: Path) -> str:
    """Per level: the earlier build's and this build's worst cell and time."""
    from .report import markdown_table
    rows = []
    for level in sorted({job[0] for job in results if job[2] is None}):
        now, then = results[(level, None, None)], results.get((level, None, before))
        if then is None:
            continue
        rows.append([str(level), _worst_text(then), _worst_text(now),
                     f"{then.seconds * 1e3:.1f}", f"{now.seconds * 1e3:.1f}",
                     f"{now.seconds / then.seconds:.3f}"])
    return markdown_table(["level", "before: worst cell / stock", "after: worst cell / stock",
                           "before ms", "after ms", "after / before"], rows)


def chart(results: dict[tuple, Point], path: Path) -> Path:
    """One panel per level: each candidate's worst cell against its time (relative to the
    build's own), the bound, the build's own tuning and the earlier build."""
    from .charts import plt, save
    levels = sorted({job[0] for job in results})
    cols = 3
    rows = -(-len(levels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.6 * rows), squeeze=False)
    for ax, level in zip(axes.flat, levels):
        own = results[(level, None, None)]
        for hash3, colour in ((0, "tab:blue"), (1, "tab:orange")):
            pts = [p for (lv, c, where), p in results.items()
                   if lv == level and c is not None and c[5] == hash3]
            ax.scatter([p.seconds / own.seconds for p in pts], [p.worst for p in pts],
                       s=12, c=colour, label=f"{4 - hash3}-byte hash")
        ax.scatter([1.0], [own.worst], marker="*", s=140, c="tab:green", label="this build")
        for (lv, c, where), p in results.items():
            if lv == level and where is not None:
                ax.scatter([p.seconds / own.seconds], [p.worst], marker="D", s=50,
                           c="tab:red", label="before")
        ax.axhline(LIMIT, color="grey", ls="--", lw=1)
        ax.set_title(f"level {level}", fontsize=10)
        ax.set_xlabel("time / this build's")
        ax.set_ylabel("worst cell / stock")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    for ax in list(axes.flat)[len(levels):]:
        ax.axis("off")
    return save(fig, path, "Bytes (worst cell of the wider corpus) against compress time, "
                           "per level")


def _main() -> None:
    level, config = int(sys.argv[1]), json.loads(sys.argv[2])
    point = measure(level, tuple(config) if config else None)
    print(json.dumps({"level": point.level, "config": point.config,
                      "windows": {w: v.__dict__ for w, v in point.windows.items()}}))


if __name__ == "__main__":
    _main()
