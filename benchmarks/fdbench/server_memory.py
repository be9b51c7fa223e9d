"""Part 2, memory per connection as a server process sees it: RSS of a real server.

For each library, a server process (``fdbench.server_peer server``, stock or with
``fastdeflate.enable()``) and a process of clients (websockets' client, stock, its
defaults: it offers permessage-deflate as browsers do). After one warm-up connection
(opened, one message each way, closed) the server's RSS is the baseline; then N clients
connect (RSS idle), then each sends one ~1 KB JSON update and gets it echoed (RSS after
one message each way), then the server waits until fastdeflate has parked the connections
that went quiet (its park-after delay, 10 s by default; stock has nothing to wait for)
and measures again (RSS quiet). Per connection = (RSS - baseline) / N. The server itself reads
its RSS, after a garbage collection, and reports how many connections it has open and
which codec objects they hold, so every row is checked to have N connections on stdlib
zlib (stock) or on fastdeflate's compiled codec (enabled).

Unlike the traced bytes of part 5, RSS counts only the pages a process has touched
(zlib's window and hash arrays fill up as messages pass), plus the library's own
per-connection objects, buffers and the allocator's overhead.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .measure import Progress, ask, deadline, rotations, spawn, tell, tick
from .server_peer import LIBRARIES, OFFERS
from .report import fmt_ratio, markdown_table

__all__ = ["Plan", "Sample", "Row", "QUICK", "FULL", "available_libraries", "one_run",
           "measure", "runs", "table", "legend", "rows_from_results"]

PEER = "fdbench.server_peer"
MODES = ("stock", "enabled")
STATES = ("idle", "used", "quiet")
STATE_LABELS = {"idle": "idle", "used": "after 1 msg", "quiet": "quiet after 1 msg"}
#: The codec settings each library's server uses with its defaults (see per_library/).
SETTINGS = {
    "websockets": "window 12, memLevel 5, level 6",
    "aiohttp": "window 15, memLevel 8, level 1",
    "wsproto": "window 15, memLevel 8, level 6",
    "tornado": "window 15, memLevel 8, level 6",
    "autobahn": "window 15, memLevel 8, level 6",
}
FAST = {"fastdeflate._fastdeflate.Compressor", "fastdeflate._fastdeflate.Decompressor"}
STOCK = {"zlib.Compress", "zlib.Decompress"}


@dataclass(frozen=True)
class Plan:
    connections: tuple[int, ...] = (1000,)
    libraries: Optional[tuple[str, ...]] = None  # None: every one installed
    repeats: int = 1
    timeout: float = 120.0  # per run, plus 0.05 s per connection
    offers: tuple[str, ...] = ("default",)  # what the clients offer (server_peer.OFFERS)


QUICK = Plan()
FULL = Plan(connections=(1000, 10_000), offers=OFFERS)


@dataclass
class Sample:
    """One server run: its RSS with 0 and N connections, and what it reported."""

    connections: int
    rss: dict[str, int]  # "base", "idle", "used", "quiet" -> bytes
    counts: dict[str, int]  # connections the server had open at "idle", "used", "quiet"
    codecs: dict[str, dict[str, int]]  # state -> codec type -> connections holding one
    extensions: dict[str, int]  # Sec-WebSocket-Extensions the clients got -> how many
    hello: dict[str, Any]  # the server's first line (pid, implementation, enabled...)
    waited: float = 0.0  # seconds the server waited for fastdeflate to park, before quiet

    def per_connection(self, state: str) -> float:
        """Bytes of RSS per connection in ``state`` (one of STATES)."""
        return (self.rss[state] - self.rss["base"]) / self.connections

    def problems(self, enabled: bool, offer: str = "default") -> list[str]:
        """Why this run does not measure what it claims (empty if it does)."""
        out = []
        for state in STATES:
            if self.counts[state] != self.connections:
                out.append(f"{self.counts[state]} connections open {state}, "
                           f"not {self.connections}")
        want, unwanted = (FAST, STOCK) if enabled else (STOCK, FAST)
        used = self.codecs["used"]
        # without context takeover a stock library may hold no codec between messages
        complete = offer != "default" or all(used.get(n) == self.connections for n in want)
        if not complete or set(used) & unwanted:
            out.append(f"codec objects after one message: {used}")
        if offer == "no-takeover" and not all(
                "server_no_context_takeover" in header for header in self.extensions):
            out.append(f"negotiated {sorted(self.extensions)}, not server_no_context_takeover")
        return out


@dataclass
class Row:
    library: str
    connections: int
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {mode: [] for mode in MODES})
    error: str = ""  # why a run failed (then the row has no figures)
    offer: str = "default"  # what the clients offered

    @property
    def label(self) -> str:
        """The library, and the offer where it is not the default."""
        return self.library if self.offer == "default" else f"{self.library}, no takeover"

    @property
    def measured(self) -> bool:
        return not self.error and all(self.samples[mode] for mode in MODES)

    def kib(self, mode: str, state: str) -> float:
        """Median KiB of RSS per connection."""
        return statistics.median(s.per_connection(state) for s in self.samples[mode]) / 1024

    def ratio(self, state: str) -> float:
        """stock / enabled (> 1: fastdeflate uses less; inf: fastdeflate's connections
        grew the RSS by less than a page, as with a handful of them)."""
        enabled = self.kib("enabled", state)
        return self.kib("stock", state) / enabled if enabled else float("inf")

    def problems(self) -> list[str]:
        if self.error:
            return [f"run failed: {self.error}"]
        return [f"{mode}: {p}" for mode in MODES for s in self.samples[mode]
                for p in s.problems(mode == "enabled", self.offer)]


def available_libraries() -> list[str]:
    """The libraries installed here (autobahn only on Python >= 3.11, as fastdeflate)."""
    out = []
    for name in LIBRARIES:
        if name == "autobahn" and sys.version_info < (3, 11):
            continue
        if importlib.util.find_spec(name) is not None:
            out.append(name)
    return out


def one_run(library: str, enabled: bool, connections: int, timeout: float,
            offer: str = "default") -> Sample:
    """One server process and one process of ``connections`` clients; both are killed
    after ``timeout`` seconds, or on any failure."""
    with deadline(timeout) as procs:
        server = spawn(PEER, ["server", "--library", library,
                              *(["--enabled"] if enabled else [])])
        procs.append(server)
        hello = ask(server, None, f"{library} server")
        clients = spawn(PEER, ["clients", "--port", str(hello["port"]), "--offer", offer])
        procs.append(clients)
        ask(clients, "warm", "clients")
        base = ask(server, "measure 0", f"{library} server")
        connected = ask(clients, f"connect {connections}", "clients")
        idle = ask(server, f"measure {connections}", f"{library} server")
        ask(clients, "exchange", "clients")
        used = ask(server, f"measure {connections}", f"{library} server")
        quiet = ask(server, f"quiet {connections}", f"{library} server")
        ask(clients, "close", "clients")
        tell(server, "stop")
        clients.wait(timeout=60)
        server.wait(timeout=60)
        states = {"idle": idle, "used": used, "quiet": quiet}
        return Sample(
            connections,
            {"base": base["rss"], **{k: v["rss"] for k, v in states.items()}},
            {k: v["connections"] for k, v in states.items()},
            {k: v["codecs"] for k, v in states.items()},
            connected["extensions"],
            hello,
            quiet["waited"],
        )


def runs(plan: Plan, libraries: list[str]) -> int:
    return (len(libraries) * len(plan.connections) * len(plan.offers) * plan.repeats
            * len(MODES))


def measure(plan: Plan, progress: Optional[Progress] = None) -> list[Row]:
    """Stock and enabled runs, alternating (which goes first alternates too)."""
    libraries = list(plan.libraries) if plan.libraries else available_libraries()
    rows = []
    for offer in plan.offers:
        for n in plan.connections:
            for library in libraries:
                rows.append(_row(library, n, offer, plan, progress))
    return rows


#: Why a library's server cannot be measured with an offer.
UNSERVED = {("tornado", "no-takeover"): "tornado's header parser drops parameters without a "
            "value, so it answers without server_no_context_takeover and the client fails "
            "the connection (RFC 7692 section 7.1.1.1)"}


def _row(library: str, n: int, offer: str, plan: Plan, progress: Optional[Progress]) -> Row:
    row = Row(library, n, offer=offer, error=UNSERVED.get((library, offer), ""))
    for mode in rotations(MODES, plan.repeats):
        if not row.error:
            try:
                row.samples[mode].append(one_run(
                    library, mode == "enabled", n, plan.timeout + 0.05 * n, offer))
            except Exception as exc:  # reported in the table; the others go on
                row.error = f"{mode}, {type(exc).__name__}: {exc}"
        tick(progress)
    return row


# --- output -----------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    """KiB of server RSS per connection, idle and after one message, stock vs enabled."""
    header = ["library", "connections"]
    for state in STATES:
        header += [f"{STATE_LABELS[state]}: {what}" for what in ("stock", "fastdeflate", "ratio")]
    header += ["RSS at 0 connections: stock / fastdeflate"]
    out = []
    for r in rows:
        line: list[object] = [r.label, f"{r.connections:,}"]
        if not r.measured:
            out.append(line + ["run failed (below)"] + [""] * (len(header) - 3))
            continue
        for state in STATES:
            line += [f"{r.kib('stock', state):,.1f} KiB", f"{r.kib('enabled', state):,.1f} KiB",
                     fmt_ratio(r.ratio(state))]
        base = {m: statistics.median(s.rss["base"] for s in r.samples[m]) / (1 << 20)
                for m in MODES}
        line.append(f"{base['stock']:.1f} / {base['enabled']:.1f} MiB")
        out.append(line)
    return markdown_table(header, out)


def rows_from_results(path: Path) -> list[Row]:
    """The rows of a results file's server-memory table (``table``), rebuilt to redraw its
    chart without measuring again (``python -m fdbench.charts server-memory
    results/full.md``): one sample per mode, with the table's KiB per connection (rounded
    to 0.1 KiB) over a baseline of 0; a row the run could not measure keeps its error."""
    from .results import Results

    rows = []
    for cells in Results.load(path).table("library", "connections", "idle: stock"):
        library, _, offer = cells["library"].partition(", ")
        if offer not in ("", "no takeover"):
            raise ValueError(f"{path.name}: {cells['library']!r} is no library and offer")
        n = int(cells["connections"].replace(",", ""))
        row = Row(library, n, offer="no-takeover" if offer else "default")
        if not cells["idle: stock"].endswith(" KiB"):
            row.error = cells["idle: stock"] or "not measured"
        else:
            for mode, column in (("stock", "stock"), ("enabled", "fastdeflate")):
                kib = {state: float(cells[f"{STATE_LABELS[state]}: {column}"]
                                    .removesuffix(" KiB").replace(",", ""))
                       for state in STATES}
                rss = {"base": 0, **{s: round(k * 1024 * n) for s, k in kib.items()}}
                row.samples[mode].append(Sample(n, rss, {s: n for s in STATES}, {}, {}, {}))
        rows.append(row)
    return rows


def _waited(rows: list[Row]) -> str:
    """The range of seconds the enabled servers waited before 'quiet'."""
    waits = [s.waited for r in rows if r.measured for s in r.samples["enabled"]]
    return f"{min(waits):.1f}-{max(waits):.1f} s" if waits else "no run"


def legend(plan: Plan, rows: list[Row]) -> str:
    lines = [
        "Server RSS per connection = (RSS with N connections - RSS with none) / N, read by "
        "the server process itself (VmRSS) after a garbage collection; 'ratio' = stock / "
        "fastdeflate (> 1: fastdeflate uses less); idle = after the handshake, after 1 msg = "
        "after one message each way (fastdeflate keeps a live stream for every connection "
        "that is busy), quiet after 1 msg = once fastdeflate has parked the connections "
        "idle for its park-after delay (default 10 s; the server waited for it: "
        f"{_waited(rows)}). Stock = the library as installed, "
        "fastdeflate = `fastdeflate.enable()` called in the server process after its "
        "imports. Clients: websockets' client with its defaults (in the 'no takeover' rows "
        "it also asks for server_no_context_takeover and client_no_context_takeover), in "
        "a process of their own; "
        "each sends one ~1 KB JSON update, which the server echoes. RSS counts the pages "
        "touched: zlib's arrays are touched as its window fills, so a connection that has "
        f"carried more messages costs more than 'after one message'. {plan.repeats} run(s) "
        "per cell (median).",
        "",
    ]
    for label in dict.fromkeys(r.label for r in rows):
        mine = [r for r in rows if r.label == label]
        library = mine[0].library
        first = next((r for r in mine if r.measured), None)
        unserved = UNSERVED.get((library, mine[0].offer))
        if unserved:
            lines.append(f"- **{label}**: not measured: {unserved}.")
            continue
        if first is None:
            lines.append(f"- **{label}** ({SETTINGS.get(library, '?')}): not measured.")
        else:
            sample = first.samples["stock"][0]
            negotiated = "; ".join(f"`{h}`" if h else "(none)" for h in sample.extensions)
            codecs = {mode: sorted(first.samples[mode][0].codecs["used"]) for mode in MODES}
            lines.append(f"- **{label}** ({SETTINGS.get(library, '?')}): negotiated "
                         f"{negotiated}; codec objects the server's connections held after "
                         f"one message: stock {codecs['stock']}, enabled {codecs['enabled']}.")
        for r in mine:
            for problem in r.problems():
                lines.append(f"  - CHECK FAILED ({r.connections:,} connections): {problem}")
    return "\n".join(lines)
