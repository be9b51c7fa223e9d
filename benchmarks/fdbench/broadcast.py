"""Part 6, broadcast: a websockets server sending each update to N clients at once.

A real websockets server (asyncio API) in one process and N stock websockets clients in
another (``fdbench.broadcast_peer``) on 127.0.0.1. The server sends ~1 KB varying JSON
updates with websockets' own ``broadcast()``; after every few broadcasts it sends a
private update to one client, a few late joiners connect part-way through and (in the
mixed plan) a few clients close their connections part-way through. Three
servers, interleaved (their order rotating from repeat to repeat; in the mixed plan side
by side, taking turns of a few broadcasts: :func:`one_round`): stock (websockets'
default compression, window 12 / memLevel 5), enabled (the same with
``fastdeflate.enable()`` called in the server process after its imports) and off
(``compression=None``, the floor). Figures per delivery (a message received by one
client): server CPU seconds (``time.process_time`` in the server) and the bytes the
clients read from their sockets after the handshake. Every client checks every message
it receives, and each run is checked: each client received exactly what the server sent
it (leavers too, until they left), the server had N clients, the late joiners and the
leavers, and its connections held the codec the run claims (found from inside the server
process). For the mixed plan, a second table splits the enabled server's CPU per
delivery (:func:`breakdown_table`): compression off's path, shared deliveries, the
compressions of group leaders, of members alone (by why) and of private messages, from
``fastdeflate.status()``'s counters and the per-operation costs the server process
measures after its run.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from .broadcast_peer import MODES, SIZE
from .measure import Progress, ask, paired_median, deadline, rotations, spawn, tell, tick
from .report import fmt_ratio, fmt_size_ratio, fmt_us, markdown_table

PEER = "fdbench.broadcast_peer"

__all__ = ["Plan", "Sample", "Row", "QUICK", "FULL", "MIXED", "MIXED_QUICK", "PARTS",
           "one_run", "measure", "runs", "table", "legend", "breakdown_table",
           "breakdown_legend"]

#: The compressor type each server's connections must hold (None: no compression).
CODEC = {"stock": "zlib.Compress", "enabled": "fastdeflate._fastdeflate.Compressor",
         "off": None}


@dataclass(frozen=True)
class Plan:
    clients: tuple[int, ...] = (10, 100)
    deliveries: int = 30_000  # broadcast deliveries per run, about (see broadcasts())
    min_broadcasts: int = 100
    max_broadcasts: int = 5_000
    late_fraction: float = 0.02  # late joiners: this fraction of N, at least 1
    private_every: int = 5  # a private update after every this many broadcasts
    private_one_in: int = 0  # to one client in this many (rotating); 0: to one client
    ack_every: int = 16  # the server stays at most twice this many broadcasts ahead
    leave_fraction: float = 0.0  # leavers: this fraction of N close part-way through
    clients_per_process: int = 5_000  # more clients: several client processes
    repeats: int = 3
    # Side by side: the three servers (and their clients) run at once, taking turns of
    # this many broadcasts (a multiple of ack_every; each turn ends once its clients
    # have its last broadcast), so that the machine's speed, which drifts within a run
    # on a shared host, weighs alike on the three. 0: one server after the other.
    turn: int = 0
    timeout: float = 120.0  # per run, plus 0.05 s per client and 2 ms per delivery

    def broadcasts(self, clients: int) -> int:
        """Broadcasts per run with ``clients`` clients: ``deliveries`` / N, within bounds."""
        return min(self.max_broadcasts, max(self.min_broadcasts, self.deliveries // clients))

    def joiners(self, clients: int) -> int:
        return max(1, round(clients * self.late_fraction))

    def leavers(self, clients: int) -> int:
        """Clients that close their connection part-way (none without a fraction; never
        a client process's first, which stays)."""
        return min(clients - self.processes(clients), round(clients * self.leave_fraction))

    def processes(self, clients: int) -> int:
        """Client processes for ``clients`` clients (each runs a share of them)."""
        return max(1, math.ceil(clients / self.clients_per_process))


QUICK = Plan()
FULL = Plan(clients=(1, 10, 100, 1000), deliveries=100_000, max_broadcasts=20_000)
#: Churn: 400 broadcasts, 10% late joiners, 5% leavers, and after every 10th a private
#: update to one client in 17 (about 6%): groups keep losing members. 5 repeats, so
#: that "in every run" can be read off the worst-run columns.
MIXED = Plan(clients=(100, 1000), min_broadcasts=400, max_broadcasts=400,
             late_fraction=0.10, private_every=10, private_one_in=17, leave_fraction=0.05,
             repeats=5, turn=64)
#: The short run's mix: the same at 100 clients, 3 repeats.
MIXED_QUICK = dataclasses.replace(MIXED, clients=(100,), repeats=3)


#: The parts of the enabled server's CPU per delivery (:meth:`Sample.breakdown`): key,
#: label, and the compress-once counter (``status()["compress_once"]``) each counts.
PARTS = (
    ("off", "the library's own path (compression off's CPU per delivery)"),
    ("shared", "shared deliveries (took another compressor's payload) x one follow"),
    ("led", "group leaders' compressions (once per group message) x one compression"),
    ("joined", "alone, joined (new or empty window) x one compression"),
    ("diverged", "alone, diverged (was sent a private message) x one compression"),
    ("start_over", "alone, its group started over without it x one compression"),
    ("private", "private messages (compressed by their one recipient) x one compression"),
    ("remainder", "remainder: bookkeeping and everything else (fastdeflate - the above)"),
)
COMPRESSIONS = ("led", "joined", "diverged", "start_over", "private")


@dataclass
class Sample:
    """One server run: what the server, and the clients, reported."""

    mode: str
    clients: int
    joiners: int
    hello: dict[str, Any]  # the server's first line (pid, implementation, enabled...)
    ready: dict[str, Any]  # the clients' first line (negotiated extensions...)
    server: dict[str, Any]  # CPU, what it sent, its connections and codecs
    received: dict[str, Any]  # what the clients received, and the bytes they read
    leavers: int = 0

    @property
    def deliveries(self) -> int:
        """Messages the server sent to one client each: broadcast deliveries + privates."""
        return int(self.server["deliveries"])

    def cpu_us(self) -> float:
        """Server CPU µs per delivery."""
        return self.server["cpu"] / self.deliveries * 1e6

    def bytes(self) -> float:
        """Bytes on the wire per delivery (frame headers and payloads, server to clients)."""
        return self.received["bytes"] / (self.received["broadcasts"] + self.received["privates"])

    def counts(self) -> dict[str, Optional[int]]:
        """How many times each part of :data:`PARTS` happened in this (enabled) run: from
        the server's ``status()`` at the end of the run (None: not reported by this
        codec; ``shared`` then from its traffic's ``compress_once_shares``)."""
        codec = self.server.get("codec") or {}
        once = codec.get("compress_once") or {}
        alone = once.get("alone") or {}
        shared = once.get("shared", (codec.get("sent") or {}).get("compress_once_shares"))
        return {"shared": shared, "led": once.get("led"), "joined": alone.get("joined"),
                "diverged": alone.get("diverged"), "start_over": alone.get("start_over"),
                "private": self.server["privates"], "rejoined": once.get("rejoined"),
                "start_overs": once.get("start_overs"), "cohorts": once.get("cohorts")}

    def breakdown(self, off: "Sample") -> dict[str, Optional[float]]:
        """This enabled run's CPU µs per delivery, split as :data:`PARTS` says: ``off``
        is the compression-off run of the same repeat; a part whose count this codec does
        not report is None (and is in the remainder)."""
        costs = self.server.get("costs") or {}
        one, follow = costs.get("compress_us"), costs.get("follow_us")
        counts = self.counts()
        parts: dict[str, Optional[float]] = {"off": off.cpu_us()}
        for key in ("shared", *COMPRESSIONS):
            count, cost = counts[key], follow if key == "shared" else one
            parts[key] = None if count is None or cost is None else count * cost / self.deliveries
        parts["remainder"] = self.cpu_us() - sum(v for v in parts.values() if v is not None)
        return parts

    def problems(self) -> list[str]:
        """Why this run does not measure what it claims (empty if it does)."""
        out = []
        s, r = self.server, self.received
        if (r["broadcasts"], r["privates"]) != (s["broadcast_deliveries"], s["privates"]):
            out.append(f"clients received {r['broadcasts']} broadcast and {r['privates']} "
                       f"private messages, the server sent {s['broadcast_deliveries']} "
                       f"and {s['privates']}")
        if "per_client" in s or "per_client" in r:
            wrong = _differences(s.get("per_client", {}), r.get("per_client", {}))
            if wrong:
                out.append(f"{len(wrong)} clients received other counts than the server "
                           f"sent them (id: [broadcasts, privates] sent / received): "
                           f"{'; '.join(wrong[:5])}")
        if (s["initial"], s["joined"], s.get("left", 0)) != (self.clients, self.joiners,
                                                             self.leavers):
            out.append(f"the server had {s['initial']} clients and {s['joined']} late joiners "
                       f"({s.get('left', 0)} leavers), not {self.clients} and "
                       f"{self.joiners} ({self.leavers})")
        if len(r.get("left", [])) != self.leavers:
            out.append(f"{len(r.get('left', []))} clients left, not {self.leavers}")
        total = self.clients + self.joiners - self.leavers
        codec = CODEC[self.mode]
        codecs = s["codecs"]
        compressors = {k: v for k, v in codecs.items() if k.endswith("Compressor")
                       or k.endswith(".Compress")}
        if compressors != ({codec: total} if codec else {}):
            out.append(f"compressors of the server's connections: {codecs}")
        if ("websockets" in self.hello["enabled"]) != (self.mode == "enabled"):
            out.append(f"fastdeflate.enable() returned {self.hello['enabled']}")
        costs = s.get("costs")
        if costs is not None and not costs["shared_ok"]:
            out.append("the measured followers did not take the leader's payload")
        offered = set(self.ready["extensions"])
        if offered != ({""} if self.mode == "off" else {h for h in offered
                                                         if h.startswith("permessage-deflate")}):
            out.append(f"negotiated {sorted(offered)}")
        if not self.ready.get("handshake_exact", True):
            out.append("the clients' handshake bytes could not be told apart")
        return out


def _differences(sent: dict[str, list[int]], got: dict[str, list[int]]) -> list[str]:
    """The clients whose counts differ: "id: sent / received"."""
    return [f"{i}: {sent.get(i)} / {got.get(i)}" for i in sorted(set(sent) | set(got), key=int)
            if sent.get(i) != got.get(i)]


@dataclass
class Row:
    clients: int
    broadcasts: int
    joiners: int
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {mode: [] for mode in MODES})
    error: str = ""  # why a run failed (then the row has no figures)
    leavers: int = 0
    processes: int = 1  # client processes

    @property
    def measured(self) -> bool:
        return not self.error and all(self.samples[mode] for mode in MODES)

    def label(self) -> str:
        """"100 (+10 late, -5 leaving)"."""
        churn = f"+{self.joiners} late" + (f", −{self.leavers} leaving" if self.leavers else "")
        return f"{self.clients:,} ({churn})"

    def cpu_us(self, mode: str) -> float:
        return statistics.median(s.cpu_us() for s in self.samples[mode])

    def bytes(self, mode: str) -> float:
        return statistics.median(s.bytes() for s in self.samples[mode])

    def ratio(self, what: str) -> float:
        """Median of the paired ratios stock / enabled of ``what`` ("cpu_us" or "bytes")."""
        return paired_median(self.samples["stock"], self.samples["enabled"],
                             lambda s: getattr(s, what)())

    def per_run(self, what: str, mode: str) -> list[float]:
        """``what`` ("cpu_us" or "bytes") of each run of ``mode``, in repeat order."""
        return [getattr(s, what)() for s in self.samples[mode]]

    def run_ratios(self, what: str, mode: str, base: str) -> list[float]:
        """Per repeat: ``what`` of ``mode`` / ``what`` of ``base`` (the same repeat)."""
        return [a / b for a, b in zip(self.per_run(what, mode), self.per_run(what, base))]

    def off_ratio(self) -> float:
        """Median of the paired ratios fastdeflate / off of CPU per delivery."""
        return statistics.median(self.run_ratios("cpu_us", "enabled", "off"))

    def worst_off_ratio(self) -> float:
        """The highest per-repeat fastdeflate / off CPU per delivery."""
        return max(self.run_ratios("cpu_us", "enabled", "off"))

    def worst_bytes_ratio(self) -> float:
        """The highest per-repeat fastdeflate / stock bytes per delivery."""
        return max(self.run_ratios("bytes", "enabled", "stock"))

    def deliveries(self) -> int:
        return self.samples["stock"][0].deliveries

    def breakdown(self) -> dict[str, Optional[float]]:
        """The enabled server's CPU µs per delivery by part (:data:`PARTS`): the median
        over repeats of each part (each enabled run with the off run of its repeat), the
        remainder = the median enabled CPU - the other parts' medians (so that they add
        up to the fastdeflate column); None where the codec reports no count."""
        runs = [e.breakdown(o) for e, o in zip(self.samples["enabled"], self.samples["off"])]
        parts: dict[str, Optional[float]] = {}
        for key, _ in PARTS[:-1]:
            values = [run[key] for run in runs]
            parts[key] = None if None in values else statistics.median(values)  # type: ignore
        parts["remainder"] = self.cpu_us("enabled") - sum(
            v for v in parts.values() if v is not None)
        return parts

    def counts(self) -> dict[str, Optional[float]]:
        """Median per enabled run of each compress-once count (None: not reported)."""
        runs = [s.counts() for s in self.samples["enabled"]]
        return {key: None if any(r[key] is None for r in runs)
                else statistics.median(r[key] for r in runs)  # type: ignore[misc]
                for key in runs[0]}

    def costs(self, key: str) -> float:
        """Median over the enabled runs of a per-operation cost (``compress_us``,
        ``follow_us``), measured in the server process after its run."""
        return statistics.median(s.server["costs"][key] for s in self.samples["enabled"])

    def problems(self) -> list[str]:
        if self.error:
            return [f"run failed: {self.error}"]
        return [f"{mode}: {p}" for mode in MODES for s in self.samples[mode]
                for p in s.problems()]


def one_run(mode: str, clients: int, plan: Plan) -> Sample:
    """One server process and the client processes of ``clients`` clients (and the late
    joiners and leavers); all are killed after the plan's timeout, or on any failure."""
    with deadline(plan.timeout + 0.05 * clients
                  + 0.002 * plan.broadcasts(clients) * clients) as procs:
        run = _Run(mode, clients, plan, procs)
        tell(run.server, "go")
        return run.finish()


def one_round(modes: list[str], clients: int, plan: Plan) -> list[Sample]:
    """The servers of ``modes`` side by side, each with its own client processes,
    taking turns of ``plan.turn`` broadcasts in that order: a server broadcasts while the
    others wait, between two of their broadcasts, with their clients up to date."""
    broadcasts = plan.broadcasts(clients)
    if plan.turn <= 0 or plan.turn % plan.ack_every:
        raise ValueError(f"turn {plan.turn}: a positive multiple of ack_every")
    with deadline(len(modes) * (plan.timeout + 0.05 * clients
                                + 0.002 * broadcasts * clients)) as procs:
        runs = [_Run(mode, clients, plan, procs) for mode in modes]
        for start in range(0, broadcasts, plan.turn):
            last = start + plan.turn >= broadcasts
            for run in runs:
                tell(run.server, "go")
                if last:  # its clients report once they have every message
                    run.collect()
                else:
                    turn = ask(run.server, None, "broadcast server")
                    if turn != {"turn": start + plan.turn}:
                        raise RuntimeError(f"{run.mode} server: {turn}, not at "
                                           f"{start + plan.turn}")
        return [run.finish() for run in runs]


class _Run:
    """One server process and its client processes, started (the clients connected);
    the caller says "go" to the server (once, or at each of its turns)."""

    def __init__(self, mode: str, clients: int, plan: Plan, procs: list[Any]) -> None:
        self.mode, self.clients = mode, clients
        self.joiners, self.leavers = plan.joiners(clients), plan.leavers(clients)
        processes = plan.processes(clients)
        common = ["--clients", str(clients), "--broadcasts", str(plan.broadcasts(clients)),
                  "--joiners", str(self.joiners), "--ack-every", str(plan.ack_every),
                  "--leavers", str(self.leavers), "--processes", str(processes)]
        self.server = spawn(PEER, ["server", "--mode", mode, "--private-every",
                                   str(plan.private_every), "--private-one-in",
                                   str(plan.private_one_in), "--turn", str(plan.turn),
                                   *common])
        procs.append(self.server)
        self.hello = ask(self.server, None, "broadcast server")
        self.peers = []
        for p in range(processes):
            self.peers.append(spawn(PEER, ["clients", "--port", str(self.hello["port"]),
                                           "--process", str(p), *common]))
            procs.append(self.peers[-1])
        self.ready = merge([ask(peer, None, "broadcast clients") for peer in self.peers])
        self.received: Optional[dict[str, Any]] = None

    def collect(self) -> None:
        """What the clients received (they say it once they have every message)."""
        self.received = merge([ask(peer, None, "broadcast clients") for peer in self.peers])

    def finish(self) -> Sample:
        """The server's report, and every process of this run ended."""
        if self.received is None:
            self.collect()
        assert self.received is not None
        report = ask(self.server, "stop", "broadcast server")
        for peer in self.peers:
            tell(peer, "close")
        for peer in self.peers:
            peer.wait(timeout=120)
        self.server.wait(timeout=60)
        return Sample(self.mode, self.clients, self.joiners, self.hello, self.ready, report,
                      self.received, self.leavers)


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The reports of several client processes as one: numbers added, lists joined,
    dicts merged (counts of the same key added), flags and-ed."""
    out: dict[str, Any] = {}
    for report in reports:
        for key, value in report.items():
            if key not in out:
                out[key] = dict(value) if isinstance(value, dict) else (
                    list(value) if isinstance(value, list) else value)
            elif isinstance(value, bool):
                out[key] = out[key] and value
            elif isinstance(value, (int, float)):
                out[key] += value
            elif isinstance(value, list):
                out[key] += value
            elif isinstance(value, dict):
                for k, v in value.items():
                    out[key][k] = out[key][k] + v if (
                        k in out[key] and isinstance(v, (int, float))) else v
    return out


def runs(plan: Plan) -> int:
    return len(plan.clients) * plan.repeats * len(MODES)


def measure(plan: Plan, progress: Optional[Progress] = None) -> list[Row]:
    """Stock, enabled and off runs interleaved, the first of them rotating by repeat
    (with ``plan.turn``, side by side in turns, in that order)."""
    rows = []
    for n in plan.clients:
        row = Row(n, plan.broadcasts(n), plan.joiners(n), leavers=plan.leavers(n),
                  processes=plan.processes(n))
        order = list(rotations(MODES, plan.repeats))
        for repeat in range(plan.repeats):
            modes = order[repeat * len(MODES):(repeat + 1) * len(MODES)]
            if plan.turn:
                if not row.error:
                    try:
                        for sample in one_round(modes, n, plan):
                            row.samples[sample.mode].append(sample)
                    except Exception as exc:  # reported in the table; the others go on
                        row.error = f"side by side, {type(exc).__name__}: {exc}"
                for _ in modes:
                    tick(progress)
                continue
            for mode in modes:
                if not row.error:
                    try:
                        row.samples[mode].append(one_run(mode, n, plan))
                    except Exception as exc:  # reported in the table; the others go on
                        row.error = f"{mode}, {type(exc).__name__}: {exc}"
                tick(progress)
        rows.append(row)
    return rows


# --- output -----------------------------------------------------------------------------

HEADER = ["clients", "broadcasts/run", "deliveries/run",
          "CPU µs/delivery: stock", "fastdeflate", "off", "stock / fastdeflate",
          "fastdeflate / off", "worst run: fastdeflate / off",
          "bytes/delivery: stock", "fastdeflate", "off", "stock / fastdeflate",
          "worst run: fastdeflate / stock"]


def table(rows: list[Row]) -> str:
    """Server CPU µs and bytes per delivery, per N: stock, enabled, off; the ratios, and
    the worst run's fastdeflate / off CPU and fastdeflate / stock bytes."""
    out = []
    for r in rows:
        line: list[object] = [r.label(), f"{r.broadcasts:,}"]
        if not r.measured:
            out.append(line + ["run failed (below)"] + [""] * (len(HEADER) - 3))
            continue
        line.append(f"{r.deliveries():,}")
        line += [fmt_us(r.cpu_us(m)) for m in MODES] + [fmt_ratio(r.ratio("cpu_us"))]
        line += [fmt_ratio(r.off_ratio()), fmt_ratio(r.worst_off_ratio())]
        line += [f"{r.bytes(m):,.0f}" for m in MODES] + [fmt_size_ratio(r.ratio("bytes"))]
        line.append(fmt_size_ratio(r.worst_bytes_ratio()))
        out.append(line)
    return markdown_table(HEADER, out)


def _count(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def breakdown_table(rows: list[Row]) -> str:
    """The enabled server's CPU µs per delivery by part (:data:`PARTS`), a pair of
    columns (count per run, µs per delivery) per client count."""
    rows = [r for r in rows if r.measured]
    header = ["fastdeflate's CPU per delivery"]
    for r in rows:
        header += [f"{r.clients:,} clients: count/run", "µs/delivery"]
    counts = {r.clients: r.counts() for r in rows}
    parts = {r.clients: r.breakdown() for r in rows}
    body = []
    for key, label in PARTS:
        line: list[object] = [label]
        for r in rows:
            count = (r.deliveries() if key == "off" else None if key == "remainder"
                     else counts[r.clients][key])
            value = parts[r.clients][key]
            line += ["—" if key == "remainder" else _count(count),
                     "n/a" if value is None else fmt_us(value)]
        body.append(line)
    total: list[object] = ["fastdeflate (all of the above)"]
    info: dict[str, list[object]] = {"rejoined": ["rejoined (diverged, then took a group's "
                                                  "payload again; no CPU of its own)"],
                                     "start_overs": ["group start-overs"],
                                     "cohorts": ["stragglers' cohorts (left together, "
                                                 "caught up as one)"]}
    for r in rows:
        total += [f"{r.deliveries():,}", fmt_us(r.cpu_us("enabled"))]
        for key, line in info.items():
            line += [_count(counts[r.clients][key]), "—"]
    return markdown_table(header, body + [total, *info.values()])


def breakdown_legend(rows: list[Row]) -> str:
    """How each part of :func:`breakdown_table` is derived, and the costs it used."""
    measured = [r for r in rows if r.measured]
    costs = "; ".join(
        f"{r.clients:,} clients: one compression {fmt_us(r.costs('compress_us'))} µs, one "
        f"follow {fmt_us(r.costs('follow_us'))} µs"
        for r in measured if all(s.server.get("costs") for s in r.samples["enabled"]))
    params = sorted({p for r in measured for s in r.samples["enabled"]
                     for p in s.server.get("compressor_params", {})})
    reported = all(s.server.get("codec", {}).get("compress_once") is not None
                   for r in measured for s in r.samples["enabled"])
    text = (
        "The fastdeflate server's CPU per delivery above, split. Counts: the server "
        "process's `fastdeflate.status()[\"compress_once\"]` read when the run ends (shared: "
        "deliveries that took another compressor's payload; led: group messages compressed "
        "once for others; alone: a compressor's own compression of a message others of its "
        "parameter set were also sent, by why it was not in their group), and the private "
        "messages the server sent. Costs: measured in the same server process right after "
        "its run, with fastdeflate compressors of its connections' parameters "
        f"({', '.join(f'`{p}`' for p in params) or 'none found'}), each called as the "
        "websockets integration calls it (`compress_or_skip`) on fresh copies of the run's "
        "updates: one compression = CPU per update of one compressor, its window filled, "
        "compressing update after update (a tight loop, so its state is warm in cache, "
        "unlike a server's); one follow = (CPU per update of 64 compressors with one "
        "history handed each update in turn − one compression) / 63 (every follower took "
        "the leader's payload object, checked); medians of 9 batches of 16 updates each, "
        "the two interleaved. Each part = count × its cost / the run's deliveries; the library's own "
        "path = the compression-off server's CPU per delivery in the same repeat; medians "
        "over the repeats; remainder = the fastdeflate column's median − the other parts' "
        "medians (bookkeeping, cold caches, and everything else).")
    if costs:
        text += f" Costs measured: {costs}."
    if not reported:
        text += (" This codec reports no `compress_once` counts: the parts marked n/a are "
                 "in the remainder (shared deliveries from its traffic's "
                 "`compress_once_shares`).")
    return text


def legend(plan: Plan, rows: list[Row]) -> str:
    first = next((r for r in rows if r.measured), None)
    leaving = (f", {plan.leave_fraction:.0%} of N leavers close their connection part-way "
               "through (spread evenly over the run and over the first clients; the server "
               "drops a leaver from its members when it reads its close frame, the leaver "
               "checks what was already on its way until the server's close frame)"
               if plan.leave_fraction else "")
    split = sorted({(r.clients, r.processes) for r in rows if r.processes > 1})
    where = ("all in one process" if not split else
             "in one process up to " f"{plan.clients_per_process:,} clients, else split "
             "over several (" + ", ".join(f"{n:,} clients: {p} processes" for n, p in split)
             + "; the first client of each acknowledges and connects its share's joiners)")
    lines = [
        f"A websockets server (asyncio API) on 127.0.0.1 sends {SIZE}-byte varying JSON "
        "updates with websockets' own `broadcast()` to every client connected; after "
        f"every {plan.private_every} broadcasts it sends a private update to "
        + (f"one client in {plan.private_one_in} (rotating)" if plan.private_one_in
           else "one client (round-robin)")
        + f", {plan.late_fraction:.0%} of N (at least 1) late joiners "
        f"connect part-way through (spread evenly over the run){leaving}. Clients: "
        f"websockets' client, stock, its defaults, {where}; each checks every message it "
        "receives, and the run checks that each client received exactly what the server "
        "sent it (counted per client on both sides). "
        "Stock = websockets' default compression (window 12 / memLevel 5, context "
        "takeover); fastdeflate = the same server with `fastdeflate.enable()` called "
        "after its imports; off = `compression=None`. CPU µs/delivery = the server "
        "process's CPU time (`time.process_time`, from the first broadcast until every "
        "client has the last one) / messages delivered (broadcast deliveries + private "
        "messages); bytes/delivery = the bytes the clients read from their sockets "
        "after the handshake (frame headers and payloads; a leaver's without the "
        "server's close frame) / messages delivered. "
        f"Broadcasts per run: {plan.deliveries:,} / N, within {plan.min_broadcasts:,}–"
        f"{plan.max_broadcasts:,}; the server stays at most {2 * plan.ack_every} "
        f"broadcasts ahead of client 0 (which acknowledges every {plan.ack_every}th; "
        "and of the first client of each other client process), "
        "as `broadcast()` has no backpressure; keepalive pings off. Medians of "
        + (f"{plan.repeats} runs, each with the three servers side by side (each with its "
           f"own client process), taking turns of {plan.turn} broadcasts (a server's turn "
           "ends when its clients have its last broadcast; the order rotating from run to "
           "run), so that the machine's speed, which drifts within seconds on this shared "
           "host, weighs alike on the three; " if plan.turn else
           f"{plan.repeats} interleaved runs (stock, fastdeflate, off, the first "
           "rotating); ")
        +
        "stock / fastdeflate = medians of the per-repeat ratios (> 1: fastdeflate is "
        "better); fastdeflate / off = the median of the per-repeat ratios of CPU per "
        "delivery (what compressing costs over not compressing; 1.30x: 30% more); worst "
        "run = the highest per-repeat ratio of the repeats (fastdeflate / off CPU, "
        "fastdeflate / stock bytes): a bound that held in every run.",
    ]
    if first is not None:
        kinds = {m: sorted(first.samples[m][0].server["extensions"]) for m in MODES}
        negotiated = "; ".join(f"`{h}`" for h in first.samples["stock"][0].ready["extensions"])
        lines.append(f"Negotiated: {negotiated}. Extension classes of the server's "
                     f"connections: stock {kinds['stock']}, fastdeflate {kinds['enabled']}, "
                     f"off {kinds['off'] or 'none'}.")
    checks = [f"- CHECK FAILED ({r.clients:,} clients): {problem}"
              for r in rows for problem in r.problems()]
    return "\n\n".join(lines + (["\n".join(checks)] if checks else []))
