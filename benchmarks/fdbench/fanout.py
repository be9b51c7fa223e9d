"""Fan-out in the other libraries: the broadcast benchmark on aiohttp, wsproto, tornado and
autobahn (issue 33).

The same measurement as :mod:`fdbench.broadcast` (whose plan, samples and rows this
module extends): a server of one library in one process (``fdbench.fanout_peer``) and N
stock websockets clients in another (``fdbench.broadcast_peer clients``, unchanged) on
127.0.0.1. The server sends ~1 KB varying JSON updates to every connected client, a
private update to one client in K after every few broadcasts, and late joiners connect
part-way through. Four servers per library, interleaved (their order rotating from repeat
to repeat): stock (the library's own fan-out loop, its default compression), enabled (the
same code with ``fastdeflate.enable()``), enabled-helper (the same, fanning out with
``fastdeflate.integrations.<library>.broadcast``) and off (compression disabled, the
floor). Figures per delivery: server CPU (``time.process_time``) and the bytes the clients
read. Each run is checked as a broadcast run is: the clients received (and checked)
exactly what the server sent, the server had N clients and the late joiners, and its
connections held the codec the run claims.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from . import broadcast
from .broadcast_peer import SIZE
from .fanout_peer import ENABLED, LIBRARIES, MODES
from .measure import Progress, ask, deadline, paired_median, rotations, spawn, tell, tick
from .report import fmt_pct, fmt_ratio, fmt_size_ratio, fmt_us, markdown_table

SERVER = "fdbench.fanout_peer"
CLIENTS = "fdbench.broadcast_peer"  # its "clients" role, as the broadcast benchmark's

__all__ = ["Plan", "FanoutSample", "FanoutRow", "DEFAULT", "one_run", "measure", "runs",
           "table", "legend"]

FAST = "fastdeflate._fastdeflate.Compressor"
#: The compressor type each mode's connections must hold (None: no compression).
CODEC = {"stock": "zlib.Compress", "enabled": FAST, "enabled-helper": FAST, "off": None}
#: How each library's application code fans out (stock, enabled and off).
LOOPS = {
    "aiohttp": "`for ws in room: if not ws.closed: await ws.send_str(text)`",
    "wsproto": "`transport.write(conn.send(Message(data=text)))` per connection "
               "(an asyncio protocol)",
    "tornado": "`handler.write_message(text)` per handler, skipping "
               "`WebSocketClosedError` (tornado's chat demo)",
    "autobahn": "`protocol.sendMessage(text.encode('utf8'))` per protocol (autobahn's "
                "`BroadcastServerFactory` example)",
}


@dataclass(frozen=True)
class Plan(broadcast.Plan):
    """broadcast.MIXED's churn (400 broadcasts, 10% late joiners, after every 10th a
    private update to one client in 17) on each library."""

    libraries: tuple[str, ...] = tuple(LIBRARIES)
    clients: tuple[int, ...] = (100, 1000)
    min_broadcasts: int = 400
    max_broadcasts: int = 400
    late_fraction: float = 0.10
    private_every: int = 10
    private_one_in: int = 17


DEFAULT = Plan()


@dataclass
class FanoutSample(broadcast.Sample):
    """One server run of one library (what the server, and the clients, reported)."""

    library: str = ""

    def shared(self) -> float:
        """The share of broadcast deliveries that took another connection's payload
        (fastdeflate's compress-once; 0 for stock and off)."""
        return self.server["compress_once"]["shared"] / self.server["broadcast_deliveries"]

    def problems(self) -> list[str]:
        """Why this run does not measure what it claims (empty if it does): the checks
        of :meth:`fdbench.broadcast.Sample.problems`, for this library and mode."""
        s, r = self.server, self.received
        out = []
        if (r["broadcasts"], r["privates"]) != (s["broadcast_deliveries"], s["privates"]):
            out.append(f"clients received {r['broadcasts']} broadcast and {r['privates']} "
                       f"private messages, the server sent {s['broadcast_deliveries']} "
                       f"and {s['privates']}")
        if (s["initial"], s["joined"]) != (self.clients, self.joiners):
            out.append(f"the server had {s['initial']} clients and {s['joined']} late "
                       f"joiners, not {self.clients} and {self.joiners}")
        codec, total = CODEC[self.mode], self.clients + self.joiners
        compressors = {k: v for k, v in s["codecs"].items()
                       if k.endswith("Compressor") or k.endswith(".Compress")}
        if compressors != ({codec: total} if codec else {}):
            out.append(f"compressors of the server's connections: {s['codecs']}")
        if (self.library in self.hello["enabled"]) != (self.mode in ENABLED):
            out.append(f"fastdeflate.enable() returned {self.hello['enabled']}")
        offered = set(self.ready["extensions"])
        if offered != ({""} if self.mode == "off" else {h for h in offered
                                                         if h.startswith("permessage-deflate")}):
            out.append(f"negotiated {sorted(offered)}")
        if not self.ready["handshake_exact"]:
            out.append("the clients' handshake bytes could not be told apart")
        return out


def _no_samples() -> dict[str, list[FanoutSample]]:
    return {mode: [] for mode in MODES}


@dataclass
class FanoutRow(broadcast.Row):
    """One library at one client count: its runs in every mode."""

    samples: dict[str, list[Any]] = field(default_factory=_no_samples)
    library: str = ""
    seconds: float = 0.0  # wall time of this row's runs

    @property
    def measured(self) -> bool:
        return not self.error and all(self.samples[mode] for mode in MODES)

    def pair(self, slow: str, fast: str, what: str = "cpu_us") -> float:
        """Median of the paired ratios ``slow`` / ``fast`` (modes) of ``what``
        ("cpu_us" or "bytes")."""
        return paired_median(self.samples[slow], self.samples[fast],
                             lambda s: getattr(s, what)())

    def shared(self, mode: str) -> float:
        return statistics.median(s.shared() for s in self.samples[mode])

    def problems(self) -> list[str]:
        if self.error:
            return [f"run failed: {self.error}"]
        return [f"{mode}: {p}" for mode in MODES for s in self.samples[mode]
                for p in s.problems()]


def one_run(library: str, mode: str, clients: int, plan: Plan) -> FanoutSample:
    """One ``library`` server process in ``mode`` and one process of ``clients`` clients
    (and the late joiners); both are killed after the plan's timeout, or on any failure."""
    broadcasts, joiners = plan.broadcasts(clients), plan.joiners(clients)
    common = ["--clients", str(clients), "--broadcasts", str(broadcasts),
              "--joiners", str(joiners), "--ack-every", str(plan.ack_every)]
    with deadline(plan.timeout + 0.05 * clients + 0.002 * broadcasts * clients) as procs:
        server = spawn(SERVER, ["--library", library, "--mode", mode, "--private-every",
                                str(plan.private_every), "--private-one-in",
                                str(plan.private_one_in), *common])
        procs.append(server)
        hello = ask(server, None, f"{library} fan-out server")
        peers = spawn(CLIENTS, ["clients", "--port", str(hello["port"]), *common])
        procs.append(peers)
        ready = ask(peers, None, "broadcast clients")
        tell(server, "go")
        received = ask(peers, None, "broadcast clients")
        report = ask(server, "stop", f"{library} fan-out server")
        tell(peers, "close")
        peers.wait(timeout=60)
        server.wait(timeout=60)
        return FanoutSample(mode, clients, joiners, hello, ready, report, received,
                            library=library)


def runs(plan: Plan) -> int:
    return len(plan.libraries) * len(plan.clients) * plan.repeats * len(MODES)


def measure(plan: Plan, progress: Optional[Progress] = None) -> list[FanoutRow]:
    """Per library and client count: the four modes interleaved, the first of them
    rotating by repeat (as :func:`fdbench.broadcast.measure`)."""
    rows = []
    for library in plan.libraries:
        for n in plan.clients:
            row = FanoutRow(n, plan.broadcasts(n), plan.joiners(n), library=library)
            start = time.monotonic()
            for mode in rotations(MODES, plan.repeats):
                if not row.error:
                    try:
                        row.samples[mode].append(one_run(library, mode, n, plan))
                    except Exception as exc:  # reported in the table; the others go on
                        row.error = f"{mode}, {type(exc).__name__}: {exc}"
                tick(progress)
            row.seconds = time.monotonic() - start
            rows.append(row)
    return rows


# --- output -----------------------------------------------------------------------------

HEADER = ["library", "clients", "deliveries/run",
          "CPU µs/delivery: stock", "enabled", "enabled-helper", "off",
          "enabled / off", "stock / enabled", "stock / helper",
          "bytes/delivery: stock", "enabled", "enabled-helper", "off",
          "enabled / stock", "helper / stock", "shared: enabled", "enabled-helper"]


def _cells(r: FanoutRow) -> list[object]:
    line: list[object] = [r.library, f"{r.clients:,} (+{r.joiners} late)"]
    if not r.measured:
        return line + ["run failed (below)"] + [""] * (len(HEADER) - 3)
    line.append(f"{r.deliveries():,}")
    line += [fmt_us(r.cpu_us(m)) for m in MODES]
    line += [fmt_ratio(r.pair("enabled", "off")), fmt_ratio(r.pair("stock", "enabled")),
             fmt_ratio(r.pair("stock", "enabled-helper"))]
    line += [f"{r.bytes(m):,.0f}" for m in MODES]
    line += [fmt_size_ratio(r.pair("enabled", "stock", "bytes")),
             fmt_size_ratio(r.pair("enabled-helper", "stock", "bytes"))]
    line += [fmt_pct(r.shared(m)) for m in ENABLED]
    return line


def table(rows: list[FanoutRow]) -> str:
    """Server CPU µs and bytes per delivery, per library and N, in every mode."""
    return markdown_table(HEADER, [_cells(r) for r in rows])


def per_run_table(rows: list[FanoutRow]) -> str:
    """Each run's enabled / off CPU and enabled / stock bytes per delivery (the runs
    paired by repeat), and the worst of them."""
    def each(values: list[float]) -> str:
        return " / ".join(f"{v:.2f}" for v in values)

    lines = [[r.library, f"{r.clients:,}",
              each(r.run_ratios("cpu_us", "enabled", "off")),
              fmt_ratio(r.worst_off_ratio()),
              each(r.run_ratios("bytes", "enabled", "stock")),
              fmt_size_ratio(r.worst_bytes_ratio())]
             for r in rows if r.measured]
    return markdown_table(["library", "clients", "CPU enabled / off, each run", "worst",
                           "bytes enabled / stock, each run", "worst"], lines)


def _negotiated(rows: list[FanoutRow]) -> str:
    """What each library negotiated with the clients, and its connections' classes."""
    parts = []
    for library in dict.fromkeys(r.library for r in rows):
        first = next((r for r in rows if r.library == library and r.measured), None)
        if first is None:
            continue
        offer = "; ".join(f"`{h}`" for h in first.samples["stock"][0].ready["extensions"])
        kinds = {m: sorted(first.samples[m][0].server["extensions"]) for m in MODES}
        parts.append(f"{library}: {offer}; extension classes stock {kinds['stock']}, "
                     f"enabled {kinds['enabled']}, enabled-helper {kinds['enabled-helper']}, "
                     f"off {kinds['off'] or 'none'}")
    return "Negotiated: " + ". ".join(parts) + "." if parts else ""


def legend(plan: Plan, rows: list[FanoutRow]) -> str:
    loops = "; ".join(f"{lib} {LOOPS[lib]}" for lib in plan.libraries)
    lines = [
        f"A server of each library on 127.0.0.1 sends {SIZE}-byte varying JSON updates to "
        f"every client connected; after every {plan.private_every} broadcasts it sends a "
        "private update to "
        + (f"one client in {plan.private_one_in} (rotating)" if plan.private_one_in
           else "one client (round-robin)")
        + f", and {plan.late_fraction:.0%} of N (at least 1) late joiners connect part-way "
        "through, as in the websockets broadcast benchmark, against its clients (websockets' "
        "client, stock, its default offer; each checks every message it receives, and the "
        "run checks that they received exactly what the server sent). Stock = the "
        f"library's own fan-out, as its users write it ({loops}), with its default "
        "compression (aiohttp `compress=True`, tornado `get_compression_options()` "
        "returning `{}`, autobahn `PerMessageDeflateOfferAccept(offer)`, wsproto "
        "`PerMessageDeflate()`: window 15 and context takeover in all four, as "
        "websockets' client asks for no smaller server window); "
        "enabled = the same code with `fastdeflate.enable()` after its imports; "
        "enabled-helper = the same with the loop replaced by "
        "`fastdeflate.integrations.<library>.broadcast`; off = no compression. Private "
        "updates go through the library's ordinary send in every mode. CPU µs/delivery = "
        "the server process's CPU time (`time.process_time`, from the first broadcast "
        "until every client has the last one) / messages delivered (broadcast deliveries "
        "+ private messages); bytes/delivery = the bytes the clients read after the "
        f"handshake / messages delivered. {plan.min_broadcasts:,} broadcasts per run "
        f"(at most {plan.max_broadcasts:,}); the server stays at most "
        f"{2 * plan.ack_every} broadcasts ahead of client 0 (which acknowledges every "
        f"{plan.ack_every}th). Medians of {plan.repeats} interleaved runs (the four "
        "modes, the first rotating); ratios = medians of the per-repeat ratios "
        "(CPU stock / enabled > 1: fastdeflate is faster; bytes enabled / stock < 1: "
        "fastdeflate sends fewer). Shared = broadcast deliveries whose payload was another "
        "connection's (compressed once for its group: `fastdeflate.status()"
        "['compress_once']['shared']` in the server / broadcast deliveries).",
    ]
    negotiated = _negotiated(rows)
    if negotiated:
        lines.append(negotiated)
    checks = [f"- CHECK FAILED ({r.library}, {r.clients:,} clients): {problem}"
              for r in rows for problem in r.problems()]
    return "\n\n".join(lines + (["\n".join(checks)] if checks else []))

