"""Latency of the other connections: how long the small connections of a real server wait
while one large message goes through its event loop.

As a dashboard runs (``fdbench.latency_peer``, three processes on 127.0.0.1): a server of
one library; one "big" client connection that the server sends a ~4 MB JSON snapshot
every 250 ms (direction ``send``), or that sends the server one every 250 ms (direction
``receive``, the mirror: the server receives and counts them); and 20 "small" client
connections, in a process of their own, each sending a ~200-byte JSON update every 10 ms
that the server echoes, timing each round trip. The clients are websockets' asyncio
client, stock, with its default offer (permessage-deflate; none in mode ``off``); the big
client has a process of its own, so that its inflating or deflating never delays the
small clients' clocks. The snapshots are a pool of successive updates of one dashboard
(:func:`fdbench.payloads.varying`: quotes whose prices walk, and chat lines), the same
bytes in every mode, cycled through in order; nothing in them repeats within a
compression window.

Modes, each in a fresh server process (``latency_peer.MODES``): ``stock`` (the library's
own zlib permessage-deflate), ``fastdeflate`` (the same server with
``fastdeflate.enable()`` after its imports), ``off`` (the clients offer no compression,
the floor), and, when asked for, ``fastdeflate-on-loop`` (as ``fastdeflate`` with
``FASTDEFLATE_OFF_LOOP_SIZE=0`` in the server's environment: no off-the-event-loop path
for large messages, where fastdeflate has one). The modes are interleaved, their order
rotating from round to round; per run, after a warm-up (1 s), the round trips of the
messages sent in the measured window (sent on schedule, open loop) give p50 / p99 /
max, and the server process's CPU time (user + system, read from outside it:
``psutil``, or ``/proc/<pid>/stat``) over the same window, beside the small clients'
own (read inside their process: the same work in every mode, a control). Each
run is checked: every client negotiated what its mode claims, the server's
fastdeflate traffic counts say its codec ran (fastdeflate modes) or did not (the others),
every echo and every snapshot came back intact, and enough snapshots went through.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from .latency_peer import DIRECTIONS, LIBRARIES, MODES, enabled_mode, write_pool
from .measure import BENCH_DIR, Progress, ask, bench_environ, deadline, rotations, tell, tick
from .report import markdown_table

__all__ = ["Plan", "QUICK", "FULL", "DEFAULT_MODES", "Sample", "Row", "measure", "runs",
           "table", "runs_table", "legend", "server_cpu"]

PEER = "fdbench.latency_peer"
DEFAULT_MODES = ("stock", "fastdeflate", "off")
#: The acceptance line: fastdeflate's p99 at most this many times off's.
TARGET = 1.5


@dataclass(frozen=True)
class Plan:
    libraries: tuple[str, ...] = tuple(LIBRARIES)
    directions: tuple[str, ...] = DIRECTIONS
    modes: tuple[str, ...] = DEFAULT_MODES
    repeats: int = 3  # rounds
    seconds: float = 8.0  # measured window per run
    warmup: float = 1.0
    size: int = 4_000_000  # bytes of a snapshot
    interval: float = 0.25  # seconds between snapshots
    clients: int = 20  # small connections
    period: float = 0.010  # seconds between a small client's messages
    pool: int = 8  # distinct snapshots, cycled through
    server_env: tuple[tuple[str, str], ...] = ()  # added to every server's environment
    timeout: float = 90.0  # per run, beyond warm-up and measured window


#: ``python benchmarks/run.py --parts latency`` (short): two servers, one round.
QUICK = Plan(libraries=("websockets", "aiohttp"), repeats=1, seconds=3.0)
#: The full run (``--full``) and ``benchmarks/latency.py``.
FULL = Plan()


@dataclass
class Sample:
    """One run: what the server, the big client and the small clients reported."""

    library: str
    direction: str
    mode: str
    hello: dict[str, Any]  # the server's first line
    big: dict[str, Any]  # the big client's extensions and report
    small: dict[str, Any]  # the small clients' extensions and latencies
    server: dict[str, Any]  # the server's report
    cpu: float  # server CPU seconds over the measured window
    window: float  # wall seconds of that window, as the parent saw it
    stuck: list[str] = field(default_factory=list)  # processes that did not exit when done

    def ms(self, what: str) -> float:
        """p50, p99, max (...) of the echo round trips, ms."""
        return float(self.small[what])

    def big_messages(self) -> int:
        """Snapshots the server sent or received, the whole run."""
        stats = self.server["stats"]
        return stats["big_sent"] if self.direction == "send" else stats["big_received"]

    def codec_ms(self) -> Optional[float]:
        """CPU ms of fastdeflate's codec per snapshot in the server (None: not timed, as in
        modes stock and off), wherever it ran: the calls given a snapshot or its payload
        (``latency_peer.time_large_codec_calls``), over the whole run."""
        codec = self.server.get("codec")
        return None if codec is None else codec["seconds"] * 1000 / max(1, self.big_messages())

    def big_bytes(self) -> float:
        """Bytes on the wire per big message (frame headers and payloads, read or
        written by the big client)."""
        return self.big["wire"] / max(1, self.big["messages"])

    def problems(self, plan: Plan) -> list[str]:
        """Why this run does not measure what it claims (empty if it does)."""
        out = []
        compressed = self.mode != "off"
        offers = set(self.small["extensions"]) | {self.big["extensions"]}
        if compressed and not all(o.startswith("permessage-deflate") for o in offers):
            out.append(f"negotiated {sorted(offers)}, not permessage-deflate everywhere")
        if not compressed and offers != {""}:
            out.append(f"negotiated {sorted(offers)} with compression off")
        integration = LIBRARIES[self.library]
        if enabled_mode(self.mode) != (integration in self.hello["enabled"]):
            out.append(f"fastdeflate.enable() returned {self.hello['enabled']}")
        traffic = self.server["traffic"]
        used = traffic["sent"]["messages"] + traffic["received"]["messages"]
        if enabled_mode(self.mode):  # (idle: no snapshot, so the bytes check holds)
            big_side = "sent" if self.direction == "send" else "received"
            # (the last snapshot the big client sent may still be on its way)
            if traffic[big_side]["bytes"] < (self.big["messages"] - 1) * plan.size:
                out.append(f"fastdeflate {big_side} {traffic[big_side]['bytes']:,} "
                           f"bytes, less than the {self.big['messages']} snapshots")
            if self.server["state"] != "enabled":
                out.append(f"{integration} is {self.server['state']!r} in the server")
            codec = self.server.get("codec")
            if codec is not None and codec["calls"] < self.big_messages():
                out.append(f"{codec['calls']} codec calls timed for {self.big_messages()} "
                           "snapshots")
        elif used:
            out.append(f"fastdeflate's codec ran {used} messages in mode {self.mode}")
        stats = self.server["stats"]
        if (stats["small_connections"], stats["big_connections"]) != (plan.clients, 1):
            out.append(f"the server had {stats['small_connections']} small and "
                       f"{stats['big_connections']} big connections")
        if self.small["wrong"] or self.big["wrong"] or stats["big_bad"] or self.big["error"]:
            out.append(f"wrong messages: {self.small['wrong']} echoes, {self.big['wrong']} "
                       f"snapshots at the big client, {stats['big_bad']} at the server"
                       + (f"; big client: {self.big['error']}" if self.big["error"] else ""))
        expected = (plan.warmup + plan.seconds) / plan.interval
        if self.direction == "idle":
            if self.big["messages"] or stats["big_sent"] or stats["big_received"]:
                out.append("snapshots went through with the big connection idle")
        elif self.big["messages"] < expected / 2:
            out.append(f"only {self.big['messages']} snapshots went through in "
                       f"{plan.warmup + plan.seconds:.0f} s (one every {plan.interval} s "
                       "asked for)")
        if self.stuck:
            out.append(f"{', '.join(self.stuck)} did not exit within 30 s of being told "
                       "to stop (killed; the figures were taken before)")
        if self.small.get("unanswered"):
            out.append(f"{self.small['unanswered']} small messages never echoed")
        if self.small["samples"] < plan.clients * plan.seconds / plan.period / 10:
            out.append(f"only {self.small['samples']} round trips timed")
        return out


def _no_samples() -> dict[str, list[Sample]]:
    return {}


@dataclass
class Row:
    """One library in one direction: its runs in every mode."""

    library: str
    direction: str
    samples: dict[str, list[Sample]] = field(default_factory=_no_samples)
    error: str = ""
    seconds: float = 0.0  # wall time of the row's runs

    def measured(self, modes: Sequence[str]) -> bool:
        return not self.error and all(self.samples.get(m) for m in modes)

    def median(self, mode: str, what: str) -> float:
        """Median over rounds of p50 / p99 / max (ms), "cpu" (s), "clients cpu" (s: the
        small clients' process), "codec ms" (per snapshot: `Sample.codec_ms`), "bytes" or
        "round trips" (the echoes timed)."""
        runs = self.samples[mode]
        if what == "round trips":
            return statistics.median(s.small["samples"] for s in runs)
        if what == "cpu":
            return statistics.median(s.cpu for s in runs)
        if what == "clients cpu":
            return statistics.median(s.small["cpu"] for s in runs)
        if what == "codec ms":
            return statistics.median(s.codec_ms() or 0.0 for s in runs)
        if what == "bytes":
            return statistics.median(s.big_bytes() for s in runs)
        return statistics.median(s.ms(what) for s in runs)

    def each(self, mode: str, what: str) -> list[float]:
        return [s.cpu if what == "cpu" else s.ms(what) for s in self.samples[mode]]

    def problems(self, plan: Plan) -> list[str]:
        if self.error:
            return [f"run failed: {self.error}"]
        return [f"{mode}: {p}" for mode, runs in self.samples.items() for s in runs
                for p in s.problems(plan)]


# --- running ---------------------------------------------------------------------------------


def _spawn(args: list[str], env: Optional[dict[str, str]] = None) -> "subprocess.Popen[str]":
    """``python -m fdbench.latency_peer <args>``, spoken to in lines (as measure.spawn,
    with ``env`` added to the environment)."""
    environ = bench_environ()
    environ.update(env or {})
    return subprocess.Popen([sys.executable, "-m", PEER, *args], cwd=BENCH_DIR, env=environ,
                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def server_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    try:
        import psutil
    except ImportError:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def one_run(library: str, direction: str, mode: str, plan: Plan, pool: str) -> Sample:
    """One server process of ``library`` in ``mode``, the big client and the small
    clients; all killed after the plan's timeout, or on any failure."""
    common = ["--direction", direction, "--pool", pool, "--size", str(plan.size),
              "--interval", str(plan.interval)]
    off = ["--no-compression"] if mode == "off" else []
    env = {**dict(plan.server_env), **MODES[mode]}
    with deadline(plan.timeout + plan.warmup + plan.seconds) as procs:
        server = _spawn(["server", "--library", library, "--mode", mode, *common], env)
        procs.append(server)
        hello = ask(server, None, f"{library} latency server")
        port = ["--port", str(hello["port"])]
        big = _spawn(["big", *port, *common, *off])
        procs.append(big)
        big_hello = ask(big, None, "big client")
        small = _spawn(["small", *port, "--clients", str(plan.clients), *off])
        procs.append(small)
        small_hello = ask(small, None, "small clients")
        tell(big, "go")
        tell(small, f"go {plan.warmup} {plan.seconds} {plan.period}")
        ask(small, None, "small clients")  # {"measuring": true}
        cpu0, wall0 = server_cpu(server.pid), time.monotonic()
        ask(small, None, "small clients")  # {"ended": true}
        cpu, window = server_cpu(server.pid) - cpu0, time.monotonic() - wall0
        latencies = ask(small, None, "small clients")
        big_report = ask(big, "stop", "big client")
        tell(small, "close")
        report = ask(server, "stop", f"{library} latency server")
        stuck = []
        for name, proc in (("big client", big), ("small clients", small),
                           ("server", server)):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # measured already: kill it, say so
                proc.kill()
                stuck.append(name)
    return Sample(library, direction, mode, hello, {**big_hello, **big_report},
                  {**small_hello, **latencies}, report, cpu, window, stuck)


def runs(plan: Plan) -> int:
    return len(plan.libraries) * len(plan.directions) * len(plan.modes) * plan.repeats


def measure(plan: Plan, progress: Optional[Progress] = None) -> list[Row]:
    """Per library and direction: the modes interleaved, ``plan.repeats`` rounds, the
    first mode rotating from round to round."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="fdbench-latency-") as tmp:
        pool = str(Path(tmp) / "snapshots.json")
        write_pool(pool, plan.size, plan.pool)
        for library in plan.libraries:
            for direction in plan.directions:
                row = Row(library, direction, {m: [] for m in plan.modes})
                start = time.monotonic()
                for mode in rotations(plan.modes, plan.repeats):
                    if not row.error:
                        try:
                            row.samples[mode].append(one_run(library, direction, mode,
                                                             plan, pool))
                        except Exception as exc:  # reported; the other rows go on
                            row.error = f"{mode}, {type(exc).__name__}: {exc}"
                    tick(progress)
                row.seconds = time.monotonic() - start
                rows.append(row)
    return rows


# --- output ------------------------------------------------------------------------------------


def _f(ms: float) -> str:
    return f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


HEADER = ["library", "direction", "mode", "p50 ms", "p99 ms", "max ms", "p99 x of off",
          "p99 x of idle", "server CPU s", "CPU x of stock", "codec CPU ms per snapshot",
          "small clients' CPU s", "MB per snapshot on the wire", "round trips", "runs"]


def table(rows: list[Row], plan: Plan) -> str:
    """Medians over rounds, a line per library, direction and mode."""
    lines = []
    for r in rows:
        if not r.measured(plan.modes):
            lines.append([r.library, r.direction, "run failed (below)"]
                         + [""] * (len(HEADER) - 3))
            continue
        off = r.median("off", "p99") if "off" in plan.modes else None
        idle = idle_row(rows, r, plan)
        stock_cpu = r.median("stock", "cpu") if "stock" in plan.modes else None
        snapshots = r.direction != "idle"
        for mode in plan.modes:
            p99 = r.median(mode, "p99")
            cpu = r.median(mode, "cpu")
            lines.append([
                r.library, r.direction, mode, _f(r.median(mode, "p50")), _f(p99),
                _f(r.median(mode, "max")),
                f"{p99 / off:.2f}x" if off else "",
                f"{p99 / idle.median(mode, 'p99'):.2f}x" if idle else "",
                f"{cpu:.2f}",
                f"{cpu / stock_cpu:.2f}x" if stock_cpu else "",
                f"{r.median(mode, 'codec ms'):.1f}" if enabled_mode(mode) and snapshots
                else "—",
                f"{r.median(mode, 'clients cpu'):.2f}",
                f"{r.median(mode, 'bytes') / 1e6:.3f}" if snapshots else "—",
                f"{r.median(mode, 'round trips'):,.0f}",
                str(len(r.samples[mode])),
            ])
    return markdown_table(HEADER, lines)


def idle_row(rows: list[Row], row: Row, plan: Plan) -> Optional[Row]:
    """The same library's row with the big connection idle (what its small messages
    cost alone, mode by mode), for a row with snapshots; None if there is none."""
    if row.direction == "idle":
        return None
    return next((r for r in rows if r.library == row.library and r.direction == "idle"
                 and r.measured(plan.modes)), None)


def runs_table(rows: list[Row], plan: Plan) -> str:
    """Every run's p50 / p99 / max and server CPU, in the order of the rounds."""
    def each(values: list[float], digits: str = "ms") -> str:
        return " / ".join(_f(v) if digits == "ms" else f"{v:.2f}" for v in values)

    def off_loop(s: Sample) -> str:
        counts = s.server.get("off_loop")
        if not counts or not enabled_mode(s.mode):
            return "—"
        return f"{counts['compressed']}/{counts['decompressed']}"

    lines = [[r.library, r.direction, mode, each(r.each(mode, "p50")),
              each(r.each(mode, "p99")), each(r.each(mode, "max")),
              each(r.each(mode, "cpu"), "s"),
              " / ".join(f"{s.codec_ms():.1f}" if enabled_mode(s.mode) else "—"
                         for s in r.samples[mode]),
              " / ".join(off_loop(s) for s in r.samples[mode])]
             for r in rows if r.measured(plan.modes) for mode in plan.modes]
    return markdown_table(["library", "direction", "mode", "p50 ms, each round",
                           "p99 ms, each round", "max ms, each round",
                           "server CPU s, each round",
                           "codec CPU ms per snapshot, each round",
                           "fastdeflate off the loop: compressed/decompressed"], lines)


def verdicts(rows: list[Row], plan: Plan) -> str:
    """fastdeflate's p99 against off's (the target: at most TARGET times) and against
    its own with the big connection idle (what the snapshots cost the others), and its
    server CPU against stock's, per row."""
    if not {"fastdeflate", "off", "stock"} <= set(plan.modes):
        return ""
    on_loop = "fastdeflate-on-loop" in plan.modes
    lines = []
    for r in rows:
        if not r.measured(plan.modes):
            continue
        p99 = r.median("fastdeflate", "p99")
        ratio = p99 / r.median("off", "p99")
        stock = r.median("stock", "p99") / r.median("off", "p99")
        cpu = r.median("fastdeflate", "cpu") / r.median("stock", "cpu")
        idle = idle_row(rows, r, plan)
        line = [r.library, r.direction, f"{stock:.2f}x", f"{ratio:.2f}x",
                "yes" if ratio <= TARGET else "no",
                f"{p99 / idle.median('fastdeflate', 'p99'):.2f}x" if idle else "—",
                f"{cpu:.2f}x"]
        if on_loop:  # (the server's CPU against the same code on the loop; the control)
            line += [f"{r.median('fastdeflate', what) / r.median('fastdeflate-on-loop', what):.2f}x"
                     for what in ("cpu", "clients cpu")]
        lines.append(line)
    return markdown_table(["library", "direction", "stock p99 x of off",
                           "fastdeflate p99 x of off", f"within {TARGET}x of off",
                           "fastdeflate p99 x of idle", "fastdeflate CPU x of stock"]
                          + ["fastdeflate CPU x of on-loop",
                             "small clients' CPU, the same"] * on_loop, lines)


def _negotiated(rows: list[Row], plan: Plan) -> str:
    parts = []
    for r in rows:
        if r.measured(plan.modes) and r.direction == rows[0].direction and "stock" in r.samples:
            first = r.samples["stock"][0]
            parts.append(f"{r.library} `{first.big['extensions']}`")
    return ("Negotiated (stock and fastdeflate modes; none in off): " + "; ".join(parts)
            + ".") if parts else ""


def legend(plan: Plan, rows: list[Row]) -> str:
    lines = [
        f"A server on 127.0.0.1 with one big connection and {plan.clients} small ones. "
        f"Direction send: the server sends the big client a {plan.size / 1e6:g} MB JSON "
        f"snapshot every {plan.interval * 1000:g} ms; receive: the big client sends the "
        "server one (the server receives and counts it). Every small client sends a "
        f"{payloads_size()}-byte JSON update every {plan.period * 1000:g} ms, which the "
        "server echoes; direction idle: neither (the big connection open and quiet: "
        "what the small messages cost alone, compressed or not, the control for the "
        "other two). p50 / p99 / max are of the small messages' round trips (send to "
        "echo received, timed by the client; open loop: a client sends on its schedule "
        "whether or not its earlier echoes are back, so every message sent during a "
        "stall is timed), "
        f"after a {plan.warmup:g} s warm-up, over {plan.seconds:g} s per run, "
        f"medians over {plan.repeats} round(s) (each round's figures below). Snapshots: "
        f"{plan.pool} successive updates of one dashboard (quotes and chat lines, "
        "`fdbench.payloads.varying`), the same bytes in every mode, cycled through in "
        "order. Clients: websockets' asyncio client, stock, default offer "
        "(permessage-deflate, client window 12 asked for); the big client in a process "
        "of its own, the small ones in another. Receiving, the big client's compressor "
        "makes the payloads of two cycles of snapshots before the run, and the client "
        "sends those: the first cycle's, then the second's for every later cycle, the "
        "bytes it would send compressing live (from the second cycle on, a message "
        "follows the same one), without the CPU that would take: the peer's, on another "
        "machine in a deployment, here taken from the two CPUs the server and the small "
        "clients share. Servers: websockets "
        "`websockets.asyncio.server.serve` (defaults: window 12, memLevel 5, level 6); "
        "uvicorn (`ws=` websockets, websockets-sansio, wsproto) and hypercorn (wsproto) "
        "with a raw ASGI app; aiohttp `WebSocketResponse()` (`compress=True`: level 1; "
        "aiohttp compresses messages above its 16 KiB threshold in a thread: stock in the "
        "loop's default executor, fastdeflate in its own workers); tornado "
        "with `get_compression_options()` returning `{}` (level 6, memLevel 8) and "
        "`set_nodelay(True)` in `open()` (Nagle's algorithm off, as on the others); message "
        "size limits raised to 64 MiB, pings off. Modes, each run a fresh server process, "
        "interleaved, the first rotating by round: stock = the library's own zlib; "
        "fastdeflate = `fastdeflate.enable()` in the server after its imports; off = the "
        "clients offer no compression (the floor); fastdeflate-on-loop (when run) = "
        "fastdeflate with `FASTDEFLATE_OFF_LOOP_SIZE=0` in the server's environment. "
        "p99 x of off: this mode's median p99 / off's; p99 x of idle: against the same "
        "mode's with the big connection idle (what the snapshots cost the other "
        "connections, apart from what compressing their own messages costs them). "
        "Server CPU s: user + system CPU "
        "seconds of the server process (all threads) over the measured window, read from "
        "outside it; CPU x of stock: against stock's. Codec CPU ms per snapshot "
        "(fastdeflate's modes): the CPU time of the server's fastdeflate calls given a "
        "snapshot or its payload, in whichever thread ran them (each timed on its "
        "thread's clock by subclasses of fastdeflate's Compressor and Decompressor put "
        "in place in the server before `enable()`), over the whole run, per snapshot: "
        "the compression itself, apart from the rest of the server's work. Small "
        "clients' CPU s: the same "
        "for the small clients' process, read inside it (the same code and the same "
        "messages in every mode: what it moves by is the machine and the timing, not "
        "the server's code). MB per snapshot on the wire: the "
        "bytes the big client read (send) or wrote (receive) from its socket per "
        "snapshot, frame headers included. Round trips: the echoes timed per run (the "
        "same work in every mode: the clients do not wait for the echoes).",
    ]
    if plan.server_env:
        lines.append("Server environment added: "
                     + ", ".join(f"`{k}={v}`" for k, v in plan.server_env) + ".")
    hellos = [s.hello for r in rows for runs_ in r.samples.values() for s in runs_]
    if hellos and any(enabled_mode(m) for m in plan.modes):
        first = hellos[0]
        lines.append(f"fastdeflate {first['implementation']}, engine {first['engine']}; "
                     + ("it has an off-the-event-loop setting (`set_off_loop_size`)."
                        if any(h["off_loop_setting"] for h in hellos) else
                        "this build has no off-the-event-loop path for large messages "
                        "(no `set_off_loop_size`), so `FASTDEFLATE_OFF_LOOP_SIZE` changes "
                        "nothing."))
    negotiated = _negotiated(rows, plan)
    if negotiated:
        lines.append(negotiated)
    checks = [f"- CHECK FAILED ({r.library}, {r.direction}): {p}" for r in rows
              for p in r.problems(plan)]
    return "\n\n".join(lines + (["\n".join(checks)] if checks else []))


def payloads_size() -> int:
    from .latency_peer import SMALL

    return SMALL


def replace(plan: Plan, **changes: Any) -> Plan:
    return dataclasses.replace(plan, **changes)


# --- the docs ------------------------------------------------------------------------------

#: The columns of the results table the docs show (``tools/render_docs.py``).
DOCS_COLUMNS = ["library", "direction", "mode", "p50 ms", "p99 ms", "max ms", "p99 x of off",
                "p99 x of idle", "server CPU s", "CPU x of stock", "codec CPU ms per snapshot",
                "small clients' CPU s", "MB per snapshot on the wire", "round trips"]


def docs_block(results: Any) -> tuple[str, str]:
    """The docs' table and legend from a committed ``results/latency.md``
    (a :class:`fdbench.results.Results`)."""
    rows = results.table(*DOCS_COLUMNS[:4])
    if not rows:
        raise KeyError(f"{results.path.name}: no latency table")
    table = markdown_table(DOCS_COLUMNS, [[r[c] for c in DOCS_COLUMNS] for r in rows])
    command = results.command
    legend = (
        "One connection of a real server gets a JSON snapshot of "
        f"{_option(command, '--size', '4000000')} bytes every "
        f"{_option(command, '--interval', '0.25')} s (send) or sends the server one "
        f"(receive) or stays idle (idle), while {_option(command, '--clients', '20')} "
        "other connections each "
        f"send a {payloads_size()}-byte JSON update every "
        f"{float(_option(command, '--period', '0.01')) * 1000:g} ms that the server "
        "echoes: p50 / p99 / max "
        "of those round trips, medians over rounds; p99 x of off: against the same "
        "server with compression off (the floor); p99 x of idle: against the same mode "
        "with the big connection idle (what the snapshots cost the others, apart from "
        "compressing their own messages); server CPU: user + system seconds of "
        "the server process over the measured window, and against stock's; codec CPU: "
        "the CPU time of fastdeflate's calls given a snapshot (or its payload), in "
        "whichever thread ran them, per snapshot over the whole run; small "
        "clients' CPU: the same for their process (the same work in every mode); MB per "
        "snapshot: on the wire, frame headers included; round trips: the echoes timed "
        "per run (open loop: the clients send on schedule whatever the echoes do, so a "
        "stall delays every message sent during it, all timed). Stock: the library's own zlib; "
        "fastdeflate: `fastdeflate.enable()` in the server. The results file has every "
        "round's figures and how each server is set up.")
    return table, legend


def _option(command: str, name: str, default: str) -> str:
    words = command.split()
    return words[words.index(name) + 1] if name in words[:-1] else default
