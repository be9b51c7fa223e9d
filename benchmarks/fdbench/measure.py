"""Timing: runs of N cycles, interleaved A B A B in one process, medians, paired ratios."""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Sequence

__all__ = ["Run", "Series", "run_cycles", "interleave", "paired_ratio", "bench_environ",
           "run_worker", "LineProgress"]

BENCH_DIR = Path(__file__).resolve().parent.parent


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...


@dataclass(frozen=True)
class Run:
    """One timed run: ``cycles`` calls, process CPU and wall seconds, bytes in and out."""

    cpu: float
    wall: float
    cycles: int
    bytes_in: int
    bytes_out: int

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass
class Series:
    """The repeated runs of one column for one configuration."""

    runs: list[Run]

    @property
    def cpu(self) -> float:
        """Median CPU seconds per run."""
        return statistics.median(r.cpu for r in self.runs)

    @property
    def wall(self) -> float:
        """Median wall seconds per run."""
        return statistics.median(r.wall for r in self.runs)

    @property
    def cycles(self) -> int:
        return self.runs[0].cycles

    def cpu_us(self) -> float:
        """Median CPU microseconds per cycle."""
        return self.cpu / self.cycles * 1e6

    def wall_us(self) -> float:
        """Median wall microseconds per cycle."""
        return self.wall / self.cycles * 1e6

    def size_fraction(self) -> float:
        """Compressed bytes / input bytes (identical in every run of a series)."""
        run = self.runs[0]
        return run.bytes_out / run.bytes_in


def run_cycles(cycle: Callable[[bytes], bytes], messages: Sequence[bytes], cycles: int) -> Run:
    """Time ``cycles`` calls of ``cycle`` over ``messages`` in order (wrapping around)."""
    rounds = -(-cycles // len(messages))
    sequence = (list(messages) * rounds)[:cycles]
    bytes_in = sum(map(len, sequence))
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        bytes_out = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for message in sequence:
            bytes_out += len(cycle(message))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        if gc_was_enabled:
            gc.enable()
    return Run(cpu, wall, cycles, bytes_in, bytes_out)


def interleave(
    factories: dict[str, Callable[[], Callable[[bytes], bytes]]],
    messages: Sequence[bytes],
    cycles: int,
    repeats: int,
    warmup_cycles: int,
    progress: Optional[Progress] = None,
) -> dict[str, Series]:
    """Run every column ``repeats`` times, interleaved, after one warm-up run each.

    Each run gets a fresh cycle (new codec objects, empty window). The order of the
    columns rotates from one repeat to the next, so none is always first.
    """
    names = list(factories)
    for name in names:
        run_cycles(factories[name](), messages, max(1, warmup_cycles))
        if progress is not None:
            progress.update(1)
    series = {name: Series([]) for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            series[name].runs.append(run_cycles(factories[name](), messages, cycles))
            if progress is not None:
                progress.update(1)
    return series


def paired_ratio(slow: Series, fast: Series, attr: str = "cpu") -> float:
    """Median over repeats of slow/fast (runs paired by repeat, from one process)."""
    return statistics.median(
        getattr(a, attr) / getattr(b, attr) for a, b in zip(slow.runs, fast.runs)
    )


def bench_environ() -> dict[str, str]:
    """This environment with ``benchmarks/`` on PYTHONPATH (for ``python -m fdbench.*``),
    without ``FASTDEFLATE_ENABLE``: a worker's stock side must stay stock (each worker
    enables fastdeflate itself where it measures it)."""
    env = dict(os.environ)
    env.pop("FASTDEFLATE_ENABLE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), env.get("PYTHONPATH")]))
    return env


class LineProgress:
    """Worker side of :func:`run_worker`: progress as JSON lines on stdout."""

    def update(self, n: int = 1) -> None:
        print(json.dumps({"progress": n}), flush=True)


def run_worker(module: str, request: dict[str, Any],
               progress: Optional[Progress] = None) -> dict[str, Any]:
    """Run ``python -m <module> --worker`` (``request`` as JSON on stdin) in a process of
    its own; passes its ``{"progress": n}`` lines on to ``progress`` and returns the last
    other line it prints (a JSON object)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--worker"], cwd=BENCH_DIR, env=bench_environ(),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(request))
        proc.stdin.close()
        result: Optional[dict[str, Any]] = None
        for line in proc.stdout:
            message = json.loads(line)
            if "progress" in message:
                if progress is not None:
                    progress.update(message["progress"])
            else:
                result = message
        if proc.wait() != 0 or result is None:
            raise RuntimeError(f"the {module} worker subprocess failed (exit {proc.returncode})")
        return result
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
