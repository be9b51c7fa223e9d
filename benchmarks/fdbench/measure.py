"""The one way to run a measurement: timed runs of calls (:func:`time_calls`), the
interleaved schedule of repeats (:func:`rotations`, :func:`interleave`), medians and
paired ratios (:class:`Series`, :func:`paired_ratio`), and the processes a part runs
apart (:func:`run_worker` for a worker, :func:`spawn` / :func:`ask` / :func:`deadline`
for a server and its clients)."""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import (
    Any, Callable, Hashable, Iterator, Optional, Protocol, Sequence, TypeVar,
)

__all__ = ["Run", "Series", "time_calls", "run_cycles", "rotations", "interleave", "tick",
           "paired_median", "paired_ratio", "bench_environ", "run_worker", "worker_main",
           "LineProgress", "spawn", "tell", "ask", "deadline", "cycles_for", "warmup_for", "plan_from"]

BENCH_DIR = Path(__file__).resolve().parent.parent
Key = TypeVar("Key", bound=Hashable)
Sample = TypeVar("Sample")
Cycle = Callable[[bytes], bytes]


class Progress(Protocol):
    def update(self, n: int = 1) -> object: ...


class RunLength(Protocol):
    """How long a part's runs are: the fields of its plan that say so."""

    max_cycles: int
    max_bytes: int  # input bytes per run: caps the cycles of large messages
    full_cycles_up_to: int  # sizes up to this always get max_cycles


def cycles_for(plan: RunLength, size: int) -> int:
    """Cycles per run for ``size``-byte messages: ``max_cycles``, fewer if that exceeds
    ``max_bytes`` (except for sizes up to ``full_cycles_up_to``), at least 10."""
    if size <= plan.full_cycles_up_to:
        return plan.max_cycles
    return max(10, min(plan.max_cycles, plan.max_bytes // size))


def plan_from(cls: Callable[..., Key], data: dict[str, Any]) -> Key:
    """The plan a worker was sent as JSON (``dataclasses.asdict``): its lists as tuples."""
    def tuples(value: Any) -> Any:
        return tuple(map(tuples, value)) if isinstance(value, list) else value

    return cls(**{k: tuples(v) for k, v in data.items()})


def warmup_for(cycles: int) -> int:
    """Cycles of the warm-up run before runs of ``cycles``."""
    return max(10, cycles // 10)


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Run":
        return cls(**data)


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

    def us(self, attr: str = "cpu") -> float:
        """Median microseconds per cycle of ``attr``: "cpu" or "wall"."""
        return self.cpu_us() if attr == "cpu" else self.wall_us()

    def to_list(self) -> list[dict[str, float]]:
        """The runs as JSON-able dicts (a worker process sends them so)."""
        return [r.to_dict() for r in self.runs]

    @classmethod
    def from_list(cls, runs: list[dict[str, Any]]) -> "Series":
        return cls([Run.from_dict(r) for r in runs])

    def size_fraction(self) -> float:
        """Compressed bytes / input bytes (identical in every run of a series)."""
        run = self.runs[0]
        return run.bytes_out / run.bytes_in

    def bytes_per_cycle(self) -> float:
        """Compressed bytes per cycle over all the runs."""
        return sum(r.bytes_out for r in self.runs) / sum(r.cycles for r in self.runs)


def time_calls(calls: Sequence[tuple[Cycle, bytes]]) -> Run:
    """Time ``cycle(message)`` for each pair in order, the garbage collector off."""
    bytes_in = sum(len(message) for _, message in calls)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        bytes_out = 0
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for cycle, message in calls:
            bytes_out += len(cycle(message))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        if gc_was_enabled:
            gc.enable()
    return Run(cpu, wall, len(calls), bytes_in, bytes_out)


def run_cycles(cycle: Cycle, messages: Sequence[bytes], cycles: int, start: int = 0) -> Run:
    """Time ``cycles`` calls of ``cycle`` over ``messages`` in order from message
    ``start`` (wrapping around)."""
    count = len(messages)
    return time_calls([(cycle, messages[(start + i) % count]) for i in range(cycles)])


def rotations(names: Sequence[Key], repeats: int) -> Iterator[Key]:
    """``repeats`` rounds over ``names``, each name once a round, the first one rotating
    from round to round (A B C, B C A, C A B, ...): the interleaved order of every part."""
    names = list(names)
    for repeat in range(repeats):
        shift = repeat % len(names)
        yield from names[shift:] + names[:shift]


def interleave(
    factories: dict[Key, Callable[[], Cycle]],
    messages: Sequence[bytes],
    cycles: int,
    repeats: int,
    warmup_cycles: int,
    progress: Optional[Progress] = None,
    fresh: bool = True,
) -> dict[Key, Series]:
    """Run every column ``repeats`` times, interleaved, after one warm-up run each.

    With ``fresh``, each run gets a fresh cycle (new codec objects, empty window) and
    starts at the first message. Without, each column keeps the cycle it warmed up and
    goes on through the messages where its last run stopped (its steady state), column
    j from message j on: two columns with the same parameters are two conversations,
    never the same message at once (fastdeflate's compress-once would share that work,
    as in a broadcast). The order of the columns rotates from one repeat to the next,
    so none is always first.
    """
    warmup_cycles = max(1, warmup_cycles)
    kept: dict[Key, Cycle] = {}  # without ``fresh``: each column's one cycle
    for j, (name, make) in enumerate(factories.items()):
        if fresh:
            run_cycles(make(), messages, warmup_cycles)  # freed before the next is made
        else:
            kept[name] = make()
            run_cycles(kept[name], messages, warmup_cycles, j)
        tick(progress)
    series: dict[Key, Series] = {name: Series([]) for name in factories}
    first = {name: j for j, name in enumerate(factories)}
    for name in rotations(list(factories), repeats):
        if fresh:
            run = run_cycles(factories[name](), messages, cycles)
        else:
            done = first[name] + warmup_cycles + len(series[name].runs) * cycles
            run = run_cycles(kept[name], messages, cycles, done)
        series[name].runs.append(run)
        tick(progress)
    return series


def tick(progress: Optional[Progress], n: int = 1) -> None:
    """Advance ``progress`` (if any) by ``n`` runs."""
    if progress is not None:
        progress.update(n)


def paired_median(slow: Sequence[Sample], fast: Sequence[Sample],
                  value: Callable[[Sample], float]) -> float:
    """Median over repeats of value(slow) / value(fast), samples paired by repeat (the
    one way every part takes a ratio of interleaved runs)."""
    return statistics.median(value(a) / value(b) for a, b in zip(slow, fast))


def paired_ratio(slow: Series, fast: Series, attr: str = "cpu") -> float:
    """Median over repeats of slow/fast (runs paired by repeat, from one process)."""
    return paired_median(slow.runs, fast.runs, lambda run: getattr(run, attr))


def bench_environ() -> dict[str, str]:
    """This environment with ``benchmarks/`` on PYTHONPATH (for ``python -m fdbench.*``),
    without ``FASTDEFLATE_ENABLE``: a worker's stock side must stay stock (each worker
    enables fastdeflate itself where it measures it)."""
    env = dict(os.environ)
    env.pop("FASTDEFLATE_ENABLE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), env.get("PYTHONPATH")]))
    return env


def worker_main(module: str, work: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """The ``python -m <module> --worker`` side of :func:`run_worker`: ``work`` gets the
    request read from stdin; what it returns is printed as the last JSON line."""
    if sys.argv[1:] != ["--worker"]:
        sys.exit(f"usage: python -m {module} --worker  (request as JSON on stdin)")
    print(json.dumps(work(json.load(sys.stdin))), flush=True)


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


def spawn(module: str, args: list[str]) -> "subprocess.Popen[str]":
    """``python -m <module> <args>`` in the benchmarks folder, spoken to in lines."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args], cwd=BENCH_DIR, env=bench_environ(),
        text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )


def tell(proc: "subprocess.Popen[str]", line: str) -> None:
    """Send ``line`` to ``proc``."""
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def ask(proc: "subprocess.Popen[str]", line: Optional[str], what: str) -> dict[str, Any]:
    """Send ``line`` to ``proc`` (if any), return the JSON line it answers; ``what`` names
    it in the error if it exits instead."""
    assert proc.stdout is not None
    if line is not None:
        tell(proc, line)
    answer = proc.stdout.readline()
    if not answer:
        raise RuntimeError(f"the {what} process exited early (code {proc.wait()})")
    return json.loads(answer)


@contextmanager
def deadline(seconds: float) -> Iterator[list["subprocess.Popen[str]"]]:
    """A list to put processes in: they are killed after ``seconds`` (a stuck run fails
    instead of hanging), and on leaving if they are still running."""
    procs: list[subprocess.Popen[str]] = []

    def kill() -> None:
        for p in procs:
            if p.poll() is None:
                p.kill()

    timer = threading.Timer(seconds, kill)
    timer.start()
    try:
        yield procs
    finally:
        timer.cancel()
        for p in reversed(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
