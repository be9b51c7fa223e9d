"""Part 8, a mixed stream: chat-like JSON with already-compressed binary messages in it.

A stream of chat-like JSON updates (:func:`payloads.updates`, 128 B to 4 KB) with a
``binary_share`` (20%) of binary messages at seeded random places, in turn PNG-like (a
valid PNG: signature, IHDR, an IDAT of zlib-compressed noise, IEND), JPEG-like
(``FF D8 FF E0``, a JFIF header, random bytes, ``FF D9``), gzip (``gzip.compress`` of a
hex dump: real gzip output) and random bytes, each of a size between ``binary_sizes``
(log-uniform: 4 KB to 1 MB; 128 KB at most in the short run), is sent over each of the
plan's ``connections`` counts (1 and 1,000), each count a measurement of its own:

- one connection sends ``messages`` messages (1,000);
- N connections share a stream of max(``messages``, ``per_connection`` × N) messages
  (4,000 for 1,000 connections), dealt to them as a seeded shuffled deck
  (:func:`deal`): each connection gets an equal share of them (4 of the 4,000; one more
  for some where they do not divide) at random places in the stream, so the connection
  of one message is, nearly always, not that of the next: every call finds its
  connection's state cold, as on a server. Each connection keeps its own context
  takeover history.

Every side opens its own N connections (a compressor each), level 6, window 15,
memLevel 8 (the settings of wsproto, tornado and autobahn):

- ``stock``: a stdlib ``zlib.compressobj`` per connection, each message ``compress`` +
  ``flush(Z_SYNC_FLUSH)`` with the ``00 00 ff ff`` tail removed, as the libraries do;
- ``today``: a ``fastdeflate.Compressor`` per connection, ``compress`` on every message
  (fastdeflate lends live streams to busy connections and parks idle ones: with 1,000
  connections this is what it costs);
- ``skip``: ``Compressor.compress_or_skip``, the policy of fastdeflate/_what_pays.py at its
  defaults (pinned while the part runs); a message it answers None for goes out as it
  is (RSV1 clear), so its own length is what is sent;
- ``raw``: no compression at all (the floor: the bytes of the messages; its CPU is what
  the timing itself costs, nothing else).

Before anything is timed each side sends the stream once, and a stdlib decoder per
connection, at the same window, inflates every compressed payload of its connection in
order (skipping the raw ones, as a peer does) and must get each message back. Then the
sides are timed interleaved (:func:`measure.rotations`), each run N new connections
sending the whole stream. A run times each stretch of consecutive text messages and
each stretch of binary ones (whatever their connections) with
:func:`measure.time_calls`: the stretches add up to the text share's and the binary
share's figures. Every run keeps its payloads, and after it they are checked as the
first pass's were: they must inflate back, send the same messages raw, and, for stock
and raw, be the checked pass's bytes. fastdeflate's bytes may differ a little from run
to run (a new connection's output can depend on what other connections of its
parameter set sent before: compress-once's group start-over starts over a connection in
no group too): the legend says by how much.
"""

from __future__ import annotations

import gzip
import math
import random
import struct
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from . import payloads
from .engines import RoundTripError
from .measure import Progress, Run, Series, paired_median, rotations, tick, time_calls
from .report import engines_summary, fmt_ratio, fmt_size_ratio, fmt_us, markdown_table

__all__ = ["Plan", "QUICK", "FULL", "SIDES", "LABELS", "KINDS", "Message", "Case", "Result",
           "length", "deal", "stream", "stretches", "make_send", "connect", "decoder",
           "check", "measure", "runs", "table", "legend", "connections_label"]

TAIL = b"\x00\x00\xff\xff"
SIDES = ("stock", "today", "skip", "raw")
LABELS = {"stock": "stock (stdlib zlib)", "today": "fastdeflate today (compress)",
          "skip": "fastdeflate, skip (compress_or_skip)", "raw": "send uncompressed"}
SHARES = ("all", "binary", "text")
#: The binary kinds, sent in turn.
KINDS = ("png", "jpeg", "gzip", "random")


@dataclass(frozen=True)
class Plan:
    messages: int = 1000  # the stream's length (with one connection; at least, with N)
    connections: tuple[int, ...] = (1, 1000)  # a measurement for each
    per_connection: int = 4  # N connections: max(messages, per_connection * N) messages
    binary_share: float = 0.2
    text_sizes: tuple[int, int] = (128, 4096)  # log-uniform, bytes
    binary_sizes: tuple[int, int] = (4096, 1 << 20)  # log-uniform, bytes (about)
    repeats: int = 5
    level: int = 6
    window_bits: int = 15
    mem_level: int = 8
    seed: int = 0


#: The short run: binary messages up to 128 KB (about half a minute).
QUICK = Plan(binary_sizes=(4096, 128 << 10), repeats=7)
#: The full run: binary messages up to 1 MB.
FULL = Plan(repeats=7)


def connections_label(connections: int) -> str:
    """"one connection" or "1,000 connections, interleaved"."""
    return "one connection" if connections == 1 else f"{connections:,} connections, interleaved"


# --- the stream ---------------------------------------------------------------------------


def _log_uniform(rnd: random.Random, bounds: tuple[int, int]) -> int:
    low, high = bounds
    return int(math.exp(rnd.uniform(math.log(low), math.log(high))))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(kind + data))


def png_like(rnd: random.Random, size: int) -> bytes:
    """A valid PNG of about ``size`` bytes: an RGB image of noise (7 bits a byte, no row
    filters), its rows zlib-compressed into one IDAT."""
    width = 256
    height = max(1, size * 8 // 7 // (3 * width + 1))
    noise = rnd.randbytes(height * 3 * width).translate(_SEVEN_BITS)
    rows = b"".join(b"\x00" + noise[i:i + 3 * width] for i in range(0, len(noise), 3 * width))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows, 1)) + _chunk(b"IEND", b""))


_SEVEN_BITS = bytes(b >> 1 for b in range(256))


def jpeg_like(rnd: random.Random, size: int) -> bytes:
    """``size`` bytes: a JPEG's start (SOI, a JFIF APP0), random bytes, its end (EOI)."""
    head = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    return head + rnd.randbytes(max(0, size - len(head) - 2)) + b"\xff\xd9"


def gzip_of_text(rnd: random.Random, size: int) -> bytes:
    """Real gzip output of about ``size`` bytes: a hex dump of random bytes (text of 16
    characters, which deflate codes in a little more than 4 bits each)."""
    text = rnd.randbytes(size * 6 // 7).hex().encode("ascii")
    return gzip.compress(text, compresslevel=6, mtime=0)


def random_bytes(rnd: random.Random, size: int) -> bytes:
    return rnd.randbytes(size)


MAKERS: dict[str, Callable[[random.Random, int], bytes]] = {
    "png": png_like, "jpeg": jpeg_like, "gzip": gzip_of_text, "random": random_bytes,
}


@dataclass(frozen=True)
class Message:
    kind: str  # "text" or one of KINDS
    data: bytes
    connection: int = 0  # which of the stream's connections sends it

    @property
    def share(self) -> str:
        return "text" if self.kind == "text" else "binary"


def length(plan: Plan, connections: int) -> int:
    """Messages in the stream of ``connections`` connections: ``plan.messages``, or
    ``per_connection`` for each connection if that is more."""
    return max(plan.messages, plan.per_connection * connections)


def deal(plan: Plan, connections: int, count: int) -> list[int]:
    """The connection of each of ``count`` messages: a seeded shuffle of a deck holding
    each connection ``count // connections`` times (or once more), so that every
    connection gets its share of the stream at random places."""
    deck = [i % connections for i in range(count)]
    random.Random(f"fdbench-mixed-deal-{plan.seed}-{connections}").shuffle(deck)
    return deck


def stream(plan: Plan, connections: int = 1) -> list[Message]:
    """The stream of ``connections`` connections, each message with its connection
    (seeded: the same every time; with one connection, ``plan.messages`` messages)."""
    count = length(plan, connections)
    rnd = random.Random(f"fdbench-mixed-{plan.seed}")
    binaries = round(count * plan.binary_share)
    where = set(rnd.sample(range(count), binaries))
    text_sizes = [_log_uniform(rnd, plan.text_sizes) for _ in range(count - binaries)]
    texts = iter(payloads.updates(text_sizes, plan.seed))
    out: list[Message] = []
    sent = 0  # binary messages so far
    for i, connection in enumerate(deal(plan, connections, count)):
        if i in where:
            kind = KINDS[sent % len(KINDS)]
            sent += 1
            data = MAKERS[kind](rnd, _log_uniform(rnd, plan.binary_sizes))
            out.append(Message(kind, data, connection))
        else:
            out.append(Message("text", next(texts), connection))
    return out


def stretches(messages: list[Message]) -> list[tuple[str, list[Message]]]:
    """The stream as stretches of consecutive messages of one share ("text", "binary"),
    whatever their connections."""
    out: list[tuple[str, list[Message]]] = []
    for m in messages:
        if out and out[-1][0] == m.share:
            out[-1][1].append(m)
        else:
            out.append((m.share, [m]))
    return out


# --- the sides ----------------------------------------------------------------------------

Send = Callable[[bytes], bytes]


def make_send(side: str, plan: Plan) -> Send:
    """A new connection of ``side``: ``send(message)`` -> what goes on the wire as the
    message's payload (the message object itself when it goes out uncompressed)."""
    if side == "stock":
        c = zlib.compressobj(plan.level, zlib.DEFLATED, -plan.window_bits, plan.mem_level, 0)
        compress, flush, sync = c.compress, c.flush, zlib.Z_SYNC_FLUSH

        def stock(message: bytes) -> bytes:
            return (compress(message) + flush(sync))[:-4]

        return stock
    if side == "raw":
        def raw(message: bytes) -> bytes:
            return message

        return raw
    import fastdeflate

    compressor = fastdeflate.Compressor(level=plan.level, window_bits=plan.window_bits,
                                        mem_level=plan.mem_level)
    if side == "today":
        return compressor.compress  # type: ignore[no-any-return]
    if side == "skip":
        compress_or_skip = compressor.compress_or_skip

        def skip(message: bytes) -> bytes:
            payload = compress_or_skip(message)
            return message if payload is None else payload

        return skip
    raise ValueError(f"unknown side {side!r}; expected one of {SIDES}")


def connect(side: str, plan: Plan, connections: int) -> list[Send]:
    """``connections`` new connections of ``side``, each with a compressor of its own."""
    return [make_send(side, plan) for _ in range(connections)]


# --- measuring ----------------------------------------------------------------------------


@dataclass
class Checked:
    """One side's checked pass: payload bytes and messages sent raw, per share, the
    connections that compressed a message, and fastdeflate's live streams at the plan's
    settings at its end (its connections still open)."""

    bytes_out: dict[str, int] = field(default_factory=dict)
    raw: dict[str, int] = field(default_factory=dict)
    compressing: int = 0
    live: int = 0


def decoder(plan: Plan) -> "zlib._Decompress":
    """The peer's stdlib decoder of one connection."""
    return zlib.decompressobj(-plan.window_bits)


def live_streams(plan: Plan) -> int:
    """fastdeflate's live deflate streams at the plan's level, window and memLevel."""
    import fastdeflate

    settings = ("deflate", plan.level, plan.window_bits, plan.mem_level)
    return sum(live for key, (live, _) in fastdeflate.live_states().items()
               if tuple(key[:4]) == settings)


def inflates_back(peer: "zlib._Decompress", payload: bytes, message: bytes) -> bool:
    """Whether ``peer`` inflates ``payload`` to ``message`` (a payload that is no valid
    deflate data for its history: False)."""
    try:
        return peer.decompress(payload + TAIL) == message and not peer.unconsumed_tail
    except zlib.error:
        return False


def verify(side: str, plan: Plan, messages: list[Message], payloads: list[bytes],
           connections: int) -> Checked:
    """What a peer makes of ``payloads`` (the stream's, in order): a stdlib decoder per
    connection inflates every compressed payload of its connection in order (raw
    messages skipped) and must get each message back; the bytes and raw messages."""
    decoders = [decoder(plan) for _ in range(connections)]
    done = Checked({"binary": 0, "text": 0}, {"binary": 0, "text": 0})
    compressing: set[int] = set()
    for i, (m, out) in enumerate(zip(messages, payloads)):
        done.bytes_out[m.share] += len(out)
        if out is m.data:
            done.raw[m.share] += 1
            continue
        if not inflates_back(decoders[m.connection], out, m.data):
            raise RoundTripError(f"mixed stream, {connections_label(connections)}, {side}: "
                                 f"message {i} ({m.kind}, {len(m.data):,} bytes, connection "
                                 f"{m.connection}) did not inflate back")
        compressing.add(m.connection)
    done.compressing = len(compressing)
    return done


def check(side: str, plan: Plan, messages: list[Message], connections: int) -> Checked:
    """Send the stream once through ``connections`` new connections of ``side`` and
    :func:`verify` what they sent (and count fastdeflate's live streams at the end)."""
    sends = connect(side, plan, connections)
    done = verify(side, plan, messages, [sends[m.connection](m.data) for m in messages],
                  connections)
    if side in ("today", "skip"):
        done.live = live_streams(plan)
    return done


def recording(send: Send, payloads: list[bytes]) -> Send:
    """``send``, keeping what it sends in ``payloads``."""
    keep = payloads.append

    def sent(message: bytes) -> bytes:
        payload = send(message)
        keep(payload)
        return payload

    return sent


def _total(runs: list[Run]) -> Run:
    return Run(sum(r.cpu for r in runs), sum(r.wall for r in runs),
               sum(r.cycles for r in runs), sum(r.bytes_in for r in runs),
               sum(r.bytes_out for r in runs))


def timed_run(sends: list[Send], parts: list[tuple[str, list[Message]]]
              ) -> tuple[dict[str, Run], list[bytes]]:
    """One pass over the stream, each message through its connection's ``send``, each
    stretch timed on its own: a Run per share and their sum ("all"), and the payloads
    sent, in the stream's order (kept while timed, as every side's are)."""
    payloads: list[bytes] = []
    sends = [recording(send, payloads) for send in sends]
    by_share: dict[str, list[Run]] = {"binary": [], "text": []}
    for share, messages in parts:
        by_share[share].append(time_calls([(sends[m.connection], m.data) for m in messages]))
    out = {share: _total(runs) for share, runs in by_share.items()}
    out["all"] = _total([out["binary"], out["text"]])
    return out, payloads


@dataclass
class Case:
    """The measurement of one connection count."""

    connections: int
    series: dict[str, dict[str, Series]]  # side -> share -> runs
    checked: dict[str, Checked]
    counts: dict[str, int]  # messages per share
    kinds: dict[str, tuple[int, int]]  # binary kind -> (messages, bytes)
    reasons: dict[str, int]  # why the skip side sent messages raw (its checked pass)
    #: side -> each timed run's bytes against the checked pass's, minus 1 (0: the same)
    drift: dict[str, list[float]] = field(default_factory=dict)

    def us(self, side: str, share: str = "all") -> float:
        return self.series[side][share].cpu_us()

    def bytes(self, side: str, share: str = "all") -> float:
        return self.series[side][share].bytes_per_cycle()

    def speedup(self, side: str, share: str = "all") -> float:
        """Stock's CPU / ``side``'s, the median of the per-repeat paired ratios."""
        return paired_median(self.series["stock"][share].runs, self.series[side][share].runs,
                             lambda run: run.cpu)

    def size_ratio(self, side: str, share: str = "all") -> float:
        """``side``'s bytes / stock's, over the same messages."""
        return self.bytes(side, share) / self.bytes("stock", share)


@dataclass
class Result:
    plan: Plan
    cases: list[Case]  # one per connection count, in the plan's order
    shares: int  # compress-once shares during the part (0: every side compressed alone)
    notes: dict[str, str] = field(default_factory=dict)

    def case(self, connections: int) -> Case:
        return next(c for c in self.cases if c.connections == connections)


def runs(plan: Plan) -> int:
    """Progress units: a checked pass and the repeats, per side and connection count."""
    return len(plan.connections) * len(SIDES) * (plan.repeats + 1)


@contextmanager
def default_policy() -> Iterator[None]:
    """compress_or_skip's policy at its defaults (min size 0, skip incompressible on)
    while the part runs; the caller's given back after."""
    import fastdeflate

    previous = (fastdeflate.set_min_size(0), fastdeflate.set_skip_incompressible(True))
    try:
        yield
    finally:
        fastdeflate.set_min_size(previous[0])
        fastdeflate.set_skip_incompressible(previous[1])


def check_sides(plan: Plan, messages: list[Message], connections: int,
                progress: Optional[Progress]) -> tuple[dict[str, Checked], dict[str, int]]:
    """Every side's checked pass, and why the skip side sent messages raw."""
    from fastdeflate import _what_pays

    checked: dict[str, Checked] = {}
    reasons: dict[str, int] = {}
    for side in SIDES:
        before = _what_pays.skipped_counts()
        checked[side] = check(side, plan, messages, connections)
        if side == "skip":
            reasons = {why: n[0] - before.get(why, (0,))[0]
                       for why, n in _what_pays.skipped_counts().items()}
        tick(progress)
    return checked, {why: n for why, n in reasons.items() if n}


#: The sides whose bytes must be the checked pass's in every run. fastdeflate's can differ
#: (still inflating back): a new connection's output was seen to depend on which freed
#: stream of an earlier object it reuses.
EXACT = ("stock", "raw")


def compare(side: str, connections: int, checked: Checked, run: Checked) -> float:
    """A timed run's bytes against the checked pass's, minus 1; raises where they must be
    the same (an EXACT side, or messages sent raw)."""
    drift = sum(run.bytes_out.values()) / sum(checked.bytes_out.values()) - 1
    if run.raw != checked.raw or (side in EXACT and run.bytes_out != checked.bytes_out):
        raise RoundTripError(f"mixed stream, {connections_label(connections)}, {side}: a "
                             "timed run sent other bytes than the checked pass")
    return drift


def measure_case(plan: Plan, connections: int, progress: Optional[Progress] = None) -> Case:
    """The checked passes, then the sides' timed runs, interleaved, for one connection
    count."""
    messages = stream(plan, connections)
    parts = stretches(messages)
    checked, reasons = check_sides(plan, messages, connections, progress)
    series = {side: {share: Series([]) for share in SHARES} for side in SIDES}
    drift: dict[str, list[float]] = {side: [] for side in SIDES}
    for side in rotations(SIDES, plan.repeats):
        run, payloads = timed_run(connect(side, plan, connections), parts)
        done = verify(side, plan, messages, payloads, connections)
        drift[side].append(compare(side, connections, checked[side], done))
        for share in SHARES:
            series[side][share].runs.append(run[share])
        tick(progress)
    counts = {share: sum(m.share == share for m in messages) for share in ("binary", "text")}
    counts["all"] = len(messages)
    kinds = {kind: (sum(m.kind == kind for m in messages),
                    sum(len(m.data) for m in messages if m.kind == kind)) for kind in KINDS}
    return Case(connections, series, checked, counts, kinds, reasons, drift)


def measure(plan: Plan, progress: Optional[Progress] = None) -> Result:
    import fastdeflate

    shares_before = fastdeflate.status()["traffic"]["sent"]["compress_once_shares"]
    with default_policy():
        cases = [measure_case(plan, n, progress) for n in plan.connections]
    shares = fastdeflate.status()["traffic"]["sent"]["compress_once_shares"] - shares_before
    notes = {"fastdeflate": f"{fastdeflate.IMPLEMENTATION}; "
             + engines_summary(fastdeflate, plan.window_bits, plan.mem_level),
             "stdlib": f"zlib {zlib.ZLIB_RUNTIME_VERSION}"}
    return Result(plan, cases, shares, notes)


# --- output -------------------------------------------------------------------------------


def _row(case: Case, side: str) -> list[object]:
    row: list[object] = [LABELS[side], f"{case.connections:,}"]
    for share in SHARES:
        row += [fmt_us(case.us(side, share)), f"{case.bytes(side, share):,.0f}"]
    row.append("—" if side == "raw" else ", ".join(
        fmt_ratio(case.speedup(side, share)) for share in SHARES))
    row.append(", ".join(fmt_size_ratio(case.size_ratio(side, share)) for share in SHARES))
    raw = case.checked[side].raw
    row.append(f"{raw['binary']:,} of {case.counts['binary']:,}, "
               f"{raw['text']:,} of {case.counts['text']:,}")
    return row


def table(result: Result) -> str:
    """A row per side and connection count, grouped by connection count."""
    header = ["side", "connections", "µs/msg", "bytes/msg", "binary: µs/msg",
              "binary: bytes/msg", "text: µs/msg", "text: bytes/msg",
              "speed vs stock (all, binary, text)", "bytes vs stock (all, binary, text)",
              "sent raw (binary, text)"]
    return markdown_table(header, [_row(case, side) for case in result.cases
                                   for side in SIDES])


def _kinds(case: Case) -> str:
    return ", ".join(f"{kind} {n:,} ({size / n / 1024:,.0f} KB on average)"
                     for kind, (n, size) in case.kinds.items() if n)


def _stream_sentence(case: Case) -> str:
    """What the stream of one connection count holds, and how it is dealt."""
    what = (f"{case.counts['all']:,} messages ({case.counts['text']:,} text, "
            f"{case.counts['binary']:,} binary: {_kinds(case)})")
    if case.connections == 1:
        return f"with one connection, {what}"
    each, more = divmod(case.counts["all"], case.connections)
    return (f"with {case.connections:,} connections, {what}, dealt to them as a seeded "
            f"shuffled deck: each connection gets {each:,} messages"
            f"{' (or one more)' if more else ''} at random places in the stream, so that "
            "consecutive messages nearly always go to different connections and each call "
            "finds its connection's state cold")


def _live_sentence(result: Result) -> str:
    """fastdeflate's live streams at the end of the skip side's checked passes."""
    return "; ".join(f"{connections_label(case.connections)}: {skip.live:,}, for the "
                     f"{skip.compressing:,} that compressed a message"
                     for case in result.cases for skip in [case.checked["skip"]])


def _drift_sentence(result: Result) -> str:
    """Whether the timed runs sent the checked passes' bytes."""
    drifts = [d for case in result.cases for side in SIDES if side not in EXACT
              for d in case.drift.get(side, [])]
    if not any(drifts):
        return "every run sent the checked pass's bytes"
    moved = [d for d in drifts if d]
    spread = (f"{moved[0]:+.3%}" if min(moved) == max(moved)
              else f"{min(moved):+.3%} to {max(moved):+.3%}")
    return (f"stock's and the uncompressed side's bytes were the checked pass's in every "
            f"run; {len(moved)} of {len(drifts)} runs of fastdeflate's sides sent {spread} "
            "bytes against their checked pass, every payload inflating back: a new "
            "connection's output can depend on what other connections of its parameter "
            "set sent before (compress-once's group start-over also starts over a "
            "connection in no group)")


def legend(result: Result) -> str:
    plan = result.plan
    reasons = "; ".join(
        f"{connections_label(case.connections)}: "
        + (", ".join(f"{why} {n:,}" for why, n in sorted(case.reasons.items())) or "none")
        for case in result.cases)
    low, high = plan.binary_sizes
    shares = ("none: every side compressed alone" if result.shares == 0 else
              f"{result.shares:,} (a side took another's payload: the CPU figures are "
              "not each side's own)")
    streams = "; ".join(_stream_sentence(case) for case in result.cases)
    return (
        f"A stream of chat-like JSON updates ({plan.text_sizes[0]:,} B to "
        f"{payloads.size_label(plan.text_sizes[1])}) with {plan.binary_share:.0%} "
        f"already-compressed binary messages at seeded random places "
        f"({payloads.size_label(low)} to {payloads.size_label(high)}, log-uniform), "
        f"measured for each connection count on a stream of its own: {streams}. Every "
        "side opens its own connections, each with its own compressor and context "
        f"takeover history. Level {plan.level}, window {plan.window_bits}, memLevel "
        f"{plan.mem_level} (wsproto's, tornado's and autobahn's settings) for every side: "
        "**stock** a stdlib `zlib.compressobj` per connection, each message `compress` + "
        "`flush(Z_SYNC_FLUSH)` with the tail removed; **fastdeflate today** a "
        "`Compressor` per connection, `compress` on every message; **fastdeflate, skip** "
        "`Compressor.compress_or_skip` at the default policy (min size 0, skip "
        "incompressible on), a message it declines counted at its own length (it goes "
        "out uncompressed); **send uncompressed** no codec (its µs is what the timing "
        "itself costs). Each side first sent the stream once, checked: a stdlib decoder "
        "per connection inflated every compressed payload of its connection in order "
        "(raw ones skipped, as a peer does) and got each message back. Then per side and "
        f"connection count {plan.repeats} timed runs, interleaved (rotating order), each "
        "new connections sending the whole stream, its payloads kept and checked the same "
        f"way after the run ({_drift_sentence(result)}); each stretch of consecutive text or binary messages (whatever their "
        "connections) timed on its own (`time_calls`), the stretches adding up to the "
        "binary and text shares. Median process CPU µs per message; bytes = payload "
        "bytes per message; 'speed vs stock' = stock's CPU / the side's at the same "
        "connection count (median of the paired per-run ratios; > 1: faster), 'bytes vs "
        "stock' = the side's bytes / stock's. Why the skip side sent messages raw: "
        f"{reasons}. fastdeflate's live streams at the end of the skip side's checked "
        f"pass, its connections still open: "
        f"{_live_sentence(result)}. Compress-once shares: {shares}. fastdeflate: "
        f"{result.notes['fastdeflate']}; stock: {result.notes['stdlib']}."
    )
