"""Part 6, broadcast: a websockets server sending each update to N clients at once.

A real websockets server (asyncio API) in one process and N stock websockets clients in
another (``fdbench.broadcast_peer``) on 127.0.0.1. The server sends ~1 KB varying JSON
updates with websockets' own ``broadcast()``; after every few broadcasts it sends a
private update to one client, and a few late joiners connect part-way through. Three
servers, interleaved (their order rotating from repeat to repeat): stock (websockets'
default compression, window 12 / memLevel 5), enabled (the same with
``fastdeflate.enable()`` called in the server process after its imports) and off
(``compression=None``, the floor). Figures per delivery (a message received by one
client): server CPU seconds (``time.process_time`` in the server) and the bytes the
clients read from their sockets after the handshake. Every client checks every message
it receives, and each run is checked: the clients received exactly what the server sent,
the server had N clients and the late joiners, and its connections held the codec the
run claims (found from inside the server process).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from .broadcast_peer import MODES, SIZE
from .measure import Progress, ask, paired_median, deadline, rotations, spawn, tell, tick
from .report import fmt_ratio, fmt_size_ratio, fmt_us, markdown_table

PEER = "fdbench.broadcast_peer"

__all__ = ["Plan", "Sample", "Row", "QUICK", "FULL", "MIXED", "one_run", "measure", "runs",
           "table", "legend"]

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
    repeats: int = 3
    timeout: float = 120.0  # per run, plus 0.05 s per client and 2 ms per delivery

    def broadcasts(self, clients: int) -> int:
        """Broadcasts per run with ``clients`` clients: ``deliveries`` / N, within bounds."""
        return min(self.max_broadcasts, max(self.min_broadcasts, self.deliveries // clients))

    def joiners(self, clients: int) -> int:
        return max(1, round(clients * self.late_fraction))


QUICK = Plan()
FULL = Plan(clients=(1, 10, 100, 1000), deliveries=100_000, max_broadcasts=20_000)
#: Many private messages: 400 broadcasts, 10% late joiners, and after every 10th a
#: private update to one client in 17 (about 6%): groups keep losing members.
MIXED = Plan(clients=(100, 1000), min_broadcasts=400, max_broadcasts=400,
             late_fraction=0.10, private_every=10, private_one_in=17)


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

    def problems(self) -> list[str]:
        """Why this run does not measure what it claims (empty if it does)."""
        out = []
        s, r = self.server, self.received
        if (r["broadcasts"], r["privates"]) != (s["broadcast_deliveries"], s["privates"]):
            out.append(f"clients received {r['broadcasts']} broadcast and {r['privates']} "
                       f"private messages, the server sent {s['broadcast_deliveries']} "
                       f"and {s['privates']}")
        if (s["initial"], s["joined"]) != (self.clients, self.joiners):
            out.append(f"the server had {s['initial']} clients and {s['joined']} late "
                       f"joiners, not {self.clients} and {self.joiners}")
        total = self.clients + self.joiners
        codec = CODEC[self.mode]
        codecs = s["codecs"]
        compressors = {k: v for k, v in codecs.items() if k.endswith("Compressor")
                       or k.endswith(".Compress")}
        if compressors != ({codec: total} if codec else {}):
            out.append(f"compressors of the server's connections: {codecs}")
        if ("websockets" in self.hello["enabled"]) != (self.mode == "enabled"):
            out.append(f"fastdeflate.enable() returned {self.hello['enabled']}")
        offered = set(self.ready["extensions"])
        if offered != ({""} if self.mode == "off" else {h for h in offered
                                                         if h.startswith("permessage-deflate")}):
            out.append(f"negotiated {sorted(offered)}")
        if not self.ready["handshake_exact"]:
            out.append("the clients' handshake bytes could not be told apart")
        return out


@dataclass
class Row:
    clients: int
    broadcasts: int
    joiners: int
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {mode: [] for mode in MODES})
    error: str = ""  # why a run failed (then the row has no figures)

    @property
    def measured(self) -> bool:
        return not self.error and all(self.samples[mode] for mode in MODES)

    def cpu_us(self, mode: str) -> float:
        return statistics.median(s.cpu_us() for s in self.samples[mode])

    def bytes(self, mode: str) -> float:
        return statistics.median(s.bytes() for s in self.samples[mode])

    def ratio(self, what: str) -> float:
        """Median of the paired ratios stock / enabled of ``what`` ("cpu_us" or "bytes")."""
        return paired_median(self.samples["stock"], self.samples["enabled"],
                             lambda s: getattr(s, what)())

    def deliveries(self) -> int:
        return self.samples["stock"][0].deliveries

    def problems(self) -> list[str]:
        if self.error:
            return [f"run failed: {self.error}"]
        return [f"{mode}: {p}" for mode in MODES for s in self.samples[mode]
                for p in s.problems()]


def one_run(mode: str, clients: int, plan: Plan) -> Sample:
    """One server process and one process of ``clients`` clients (and the late joiners);
    both are killed after the plan's timeout, or on any failure."""
    broadcasts, joiners = plan.broadcasts(clients), plan.joiners(clients)
    common = ["--clients", str(clients), "--broadcasts", str(broadcasts),
              "--joiners", str(joiners), "--ack-every", str(plan.ack_every)]
    with deadline(plan.timeout + 0.05 * clients + 0.002 * broadcasts * clients) as procs:
        server = spawn(PEER, ["server", "--mode", mode, "--private-every",
                              str(plan.private_every), "--private-one-in",
                              str(plan.private_one_in), *common])
        procs.append(server)
        hello = ask(server, None, "broadcast server")
        peers = spawn(PEER, ["clients", "--port", str(hello["port"]), *common])
        procs.append(peers)
        ready = ask(peers, None, "broadcast clients")
        tell(server, "go")
        received = ask(peers, None, "broadcast clients")
        report = ask(server, "stop", "broadcast server")
        tell(peers, "close")
        peers.wait(timeout=60)
        server.wait(timeout=60)
        return Sample(mode, clients, joiners, hello, ready, report, received)


def runs(plan: Plan) -> int:
    return len(plan.clients) * plan.repeats * len(MODES)


def measure(plan: Plan, progress: Optional[Progress] = None) -> list[Row]:
    """Stock, enabled and off runs interleaved, the first of them rotating by repeat."""
    rows = []
    for n in plan.clients:
        row = Row(n, plan.broadcasts(n), plan.joiners(n))
        for mode in rotations(MODES, plan.repeats):
            if not row.error:
                try:
                    row.samples[mode].append(one_run(mode, n, plan))
                except Exception as exc:  # reported in the table; the others go on
                    row.error = f"{mode}, {type(exc).__name__}: {exc}"
            tick(progress)
        rows.append(row)
    return rows


# --- output -----------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    """Server CPU µs and bytes per delivery, per N: stock, enabled, off."""
    header = ["clients", "broadcasts/run", "deliveries/run",
              "CPU µs/delivery: stock", "fastdeflate", "off", "stock / fastdeflate",
              "bytes/delivery: stock", "fastdeflate", "off", "stock / fastdeflate"]
    out = []
    for r in rows:
        line: list[object] = [f"{r.clients:,} (+{r.joiners} late)", f"{r.broadcasts:,}"]
        if not r.measured:
            out.append(line + ["run failed (below)"] + [""] * (len(header) - 3))
            continue
        line.append(f"{r.deliveries():,}")
        line += [fmt_us(r.cpu_us(m)) for m in MODES] + [fmt_ratio(r.ratio("cpu_us"))]
        line += [f"{r.bytes(m):,.0f}" for m in MODES] + [fmt_size_ratio(r.ratio("bytes"))]
        out.append(line)
    return markdown_table(header, out)


def legend(plan: Plan, rows: list[Row]) -> str:
    first = next((r for r in rows if r.measured), None)
    lines = [
        f"A websockets server (asyncio API) on 127.0.0.1 sends {SIZE}-byte varying JSON "
        "updates with websockets' own `broadcast()` to every client connected; after "
        f"every {plan.private_every} broadcasts it sends a private update to "
        + (f"one client in {plan.private_one_in} (rotating)" if plan.private_one_in
           else "one client (round-robin)")
        + f", and {plan.late_fraction:.0%} of N (at least 1) late joiners "
        "connect part-way through (spread evenly over the run). Clients: websockets' "
        "client, stock, its defaults, all in one process; each checks every message it "
        "receives, and the run checks that they received exactly what the server sent. "
        "Stock = websockets' default compression (window 12 / memLevel 5, context "
        "takeover); fastdeflate = the same server with `fastdeflate.enable()` called "
        "after its imports; off = `compression=None`. CPU µs/delivery = the server "
        "process's CPU time (`time.process_time`, from the first broadcast until every "
        "client has the last one) / messages delivered (broadcast deliveries + private "
        "messages); bytes/delivery = the bytes the clients read from their sockets "
        "after the handshake (frame headers and payloads) / messages delivered. "
        f"Broadcasts per run: {plan.deliveries:,} / N, within {plan.min_broadcasts:,}–"
        f"{plan.max_broadcasts:,}; the server stays at most {2 * plan.ack_every} "
        f"broadcasts ahead of client 0 (which acknowledges every {plan.ack_every}th), "
        "as `broadcast()` has no backpressure; keepalive pings off. Medians of "
        f"{plan.repeats} interleaved runs (stock, fastdeflate, off, the first rotating); "
        "ratios = medians of the per-repeat stock / fastdeflate ratios (> 1: "
        "fastdeflate is better).",
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
