"""Part 4, end to end: a websockets server sending JSON updates to N clients.

Server and clients run in two subprocesses (``fdbench.e2e_peer``) on 127.0.0.1 with
an ephemeral port; each reports its own CPU seconds from the start signal to the end,
so the figures are per process. Stock and enabled runs alternate (A B, B A, ...).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from .measure import Progress, ask, paired_median, deadline, rotations, spawn, tick
from .report import fmt_ratio, markdown_table

__all__ = ["Plan", "Point", "QUICK", "FULL", "measure", "one_run", "table"]

PEER = "fdbench.e2e_peer"
PER = 10_000  # figures are CPU seconds per this many messages delivered


@dataclass(frozen=True)
class Plan:
    clients: tuple[int, ...] = (1, 10, 100)
    messages: int = 10_000  # delivered per run, spread over the clients
    size: int = 1024
    repeats: int = 3
    timeout: float = 120.0  # per run


QUICK = Plan(messages=2_000, repeats=2)
FULL = Plan()


@dataclass
class Run:
    server_cpu: float
    client_cpu: float
    delivered: int
    server_extensions: list[Any]
    client_extensions: list[Any]


@dataclass
class Point:
    clients: int
    runs: dict[str, list[Run]] = field(default_factory=lambda: {"stock": [], "enabled": []})

    def per(self, mode: str, side: str) -> float:
        """Median CPU seconds per 10,000 messages delivered, ``side`` 'server'/'client'."""
        return statistics.median(
            getattr(r, f"{side}_cpu") / r.delivered * PER for r in self.runs[mode]
        )

    def ratio(self, side: str) -> float:
        """Median of the paired ratios stock/enabled."""
        return paired_median(self.runs["stock"], self.runs["enabled"],
                             lambda r: getattr(r, f"{side}_cpu") / r.delivered)


def one_run(clients: int, enabled: bool, plan: Plan) -> Run:
    """One server process and one process of ``clients`` clients; both CPU times."""
    per_client = max(1, plan.messages // clients)
    flags = ["--enabled"] if enabled else []
    common = ["--messages", str(per_client), "--size", str(plan.size), *flags]
    with deadline(plan.timeout) as procs:
        server = spawn(PEER, ["server", *common])
        procs.append(server)
        port = ask(server, None, "end-to-end server")["port"]
        client = spawn(PEER, ["clients", "--port", str(port), "--clients", str(clients),
                              *common])
        procs.append(client)
        ready = ask(client, None, "end-to-end clients")
        done = ask(client, "go", "end-to-end clients")
        report = ask(server, "stop", "end-to-end server")
        if done["received"] != per_client * clients:
            raise RuntimeError(f"clients received {done['received']} of {per_client * clients}")
        client.wait(timeout=30)
        server.wait(timeout=30)
        return Run(report["cpu"], done["cpu"], done["received"],
                   report["extensions"], ready["extensions"])


def measure(plan: Plan, progress: Optional[Progress] = None) -> list[Point]:
    """Stock and enabled runs interleaved, the first of them alternating by repeat."""
    points = []
    for n in plan.clients:
        point = Point(n)
        for mode in rotations(("stock", "enabled"), plan.repeats):
            point.runs[mode].append(one_run(n, mode == "enabled", plan))
            tick(progress)
        points.append(point)
    return points


def runs(plan: Plan) -> int:
    return len(plan.clients) * plan.repeats * 2


def table(points: list[Point]) -> str:
    header = ["clients", "server stock", "server enabled", "server speedup",
              "clients stock", "clients enabled", "clients speedup"]
    rows = [
        [p.clients,
         f"{p.per('stock', 'server'):.2f}", f"{p.per('enabled', 'server'):.2f}",
         fmt_ratio(p.ratio("server")),
         f"{p.per('stock', 'client'):.2f}", f"{p.per('enabled', 'client'):.2f}",
         fmt_ratio(p.ratio("client"))]
        for p in points
    ]
    return markdown_table(header, rows)


def legend(plan: Plan, points: list[Point]) -> str:
    kinds = {mode: sorted({name for p in points for r in p.runs[mode]
                           for name, _ in r.server_extensions}) for mode in ("stock", "enabled")}
    return (
        f"CPU seconds per {PER:,} messages delivered (median of {plan.repeats} alternating "
        f"stock/enabled runs), server process and client process measured separately. "
        f"A websockets server on 127.0.0.1 sends {plan.size}-byte JSON updates (varying "
        f"values) to N clients, about {plan.messages:,} messages per run in total, each "
        f"checked by the client; websockets' default compression (window 12, memLevel 5, "
        f"context takeover). Enabled = `fastdeflate.integrations.websockets.enable()` in both "
        f"processes. Extension classes the server used: stock {kinds['stock']}, enabled "
        f"{kinds['enabled']}."
    )
