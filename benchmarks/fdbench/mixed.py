"""Part 8, a mixed stream: chat-like JSON with already-compressed binary messages in it.

One connection sends ``messages`` messages (1,000): chat-like JSON updates
(:func:`payloads.updates`, 128 B to 4 KB) with a ``binary_share`` (20%) of binary
messages at seeded random places, in turn PNG-like (a valid PNG: signature, IHDR, an IDAT
of zlib-compressed noise, IEND), JPEG-like (``FF D8 FF E0``, a JFIF header, random
bytes, ``FF D9``), gzip (``gzip.compress`` of a hex dump: real gzip output) and random
bytes, each of a size between ``binary_sizes`` (log-uniform: 4 KB to 1 MB; 128 KB at most
in the short run). Every side sends the same stream through a connection of its own,
level 6, window 15, memLevel 8 (the settings of wsproto, tornado and autobahn):

- ``stock``: a stdlib ``zlib.compressobj`` per connection, each message ``compress`` +
  ``flush(Z_SYNC_FLUSH)`` with the ``00 00 ff ff`` tail removed, as the libraries do;
- ``today``: ``fastdeflate.Compressor.compress`` on every message;
- ``skip``: ``Compressor.compress_or_skip``, the policy of fastdeflate/_choice.py at its
  defaults (pinned while the part runs); a message it answers None for goes out as it
  is (RSV1 clear), so its own length is what is sent;
- ``raw``: no compression at all (the floor: the bytes of the messages; its CPU is what
  the timing itself costs, nothing else).

Before anything is timed each side sends the stream once, and a stdlib decoder at the
same window inflates every compressed payload in order (skipping the raw ones, as a
peer does) and must get each message back. Then the sides are timed interleaved
(:func:`measure.rotations`), each run a new connection sending the whole stream, every
run's bytes the checked pass's. A run times each stretch of consecutive text messages
and each stretch of binary ones with :func:`measure.time_calls`: the stretches add up
to the text share's and the binary share's figures.
"""

from __future__ import annotations

import dataclasses
import gzip
import math
import random
import struct
import zlib
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import payloads
from .engines import RoundTripError
from .measure import Progress, Run, Series, paired_median, rotations, tick, time_calls
from .report import engines_summary, fmt_ratio, fmt_size_ratio, fmt_us, markdown_table

__all__ = ["Plan", "QUICK", "FULL", "SIDES", "LABELS", "KINDS", "Result", "stream",
           "measure", "runs", "table", "legend"]

TAIL = b"\x00\x00\xff\xff"
SIDES = ("stock", "today", "skip", "raw")
LABELS = {"stock": "stock (stdlib zlib)", "today": "fastdeflate today (compress)",
          "skip": "fastdeflate, skip (compress_or_skip)", "raw": "send uncompressed"}
SHARES = ("all", "binary", "text")
#: The binary kinds, sent in turn.
KINDS = ("png", "jpeg", "gzip", "random")


@dataclass(frozen=True)
class Plan:
    messages: int = 1000
    binary_share: float = 0.2
    text_sizes: tuple[int, int] = (128, 4096)  # log-uniform, bytes
    binary_sizes: tuple[int, int] = (4096, 1 << 20)  # log-uniform, bytes (about)
    repeats: int = 5
    level: int = 6
    window_bits: int = 15
    mem_level: int = 8
    seed: int = 0


#: The short run: binary messages up to 128 KB (a few seconds).
QUICK = Plan(binary_sizes=(4096, 128 << 10), repeats=7)
#: The full run: binary messages up to 1 MB.
FULL = Plan(repeats=7)


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

    @property
    def share(self) -> str:
        return "text" if self.kind == "text" else "binary"


def stream(plan: Plan) -> list[Message]:
    """The plan's messages in order (seeded: the same every time)."""
    rnd = random.Random(f"fdbench-mixed-{plan.seed}")
    binaries = round(plan.messages * plan.binary_share)
    where = set(rnd.sample(range(plan.messages), binaries))
    text_sizes = [_log_uniform(rnd, plan.text_sizes)
                  for _ in range(plan.messages - binaries)]
    texts = iter(payloads.updates(text_sizes, plan.seed))
    out: list[Message] = []
    sent = 0  # binary messages so far
    for i in range(plan.messages):
        if i in where:
            kind = KINDS[sent % len(KINDS)]
            sent += 1
            out.append(Message(kind, MAKERS[kind](rnd, _log_uniform(rnd, plan.binary_sizes))))
        else:
            out.append(Message("text", next(texts)))
    return out


def stretches(messages: list[Message]) -> list[tuple[str, list[bytes]]]:
    """The stream as stretches of consecutive messages of one share ("text", "binary")."""
    out: list[tuple[str, list[bytes]]] = []
    for m in messages:
        if out and out[-1][0] == m.share:
            out[-1][1].append(m.data)
        else:
            out.append((m.share, [m.data]))
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


# --- measuring ----------------------------------------------------------------------------


@dataclass
class Checked:
    """One side's checked pass: payload bytes and messages sent raw, per share."""

    bytes_out: dict[str, int] = field(default_factory=dict)
    raw: dict[str, int] = field(default_factory=dict)


def check(side: str, plan: Plan, messages: list[Message]) -> Checked:
    """Send the stream once through a new connection of ``side``; a stdlib decoder
    inflates every compressed payload in order (raw messages skipped, as a peer does) and
    must get each message back."""
    send = make_send(side, plan)
    decoder = zlib.decompressobj(-plan.window_bits)
    done = Checked({"binary": 0, "text": 0}, {"binary": 0, "text": 0})
    for i, m in enumerate(messages):
        out = send(m.data)
        done.bytes_out[m.share] += len(out)
        if out is m.data:
            done.raw[m.share] += 1
            continue
        if decoder.decompress(out + TAIL) != m.data or decoder.unconsumed_tail:
            raise RoundTripError(f"mixed stream, {side}: message {i} ({m.kind}, "
                                 f"{len(m.data):,} bytes) did not inflate back")
    return done


def _total(runs: list[Run]) -> Run:
    return Run(sum(r.cpu for r in runs), sum(r.wall for r in runs),
               sum(r.cycles for r in runs), sum(r.bytes_in for r in runs),
               sum(r.bytes_out for r in runs))


def timed_run(send: Send, parts: list[tuple[str, list[bytes]]]) -> dict[str, Run]:
    """One pass over the stream, each stretch timed on its own: a Run per share, and
    their sum ("all")."""
    by_share: dict[str, list[Run]] = {"binary": [], "text": []}
    for share, messages in parts:
        by_share[share].append(time_calls([(send, m) for m in messages]))
    out = {share: _total(runs) for share, runs in by_share.items()}
    out["all"] = _total([out["binary"], out["text"]])
    return out


@dataclass
class Result:
    plan: Plan
    series: dict[str, dict[str, Series]]  # side -> share -> runs
    checked: dict[str, Checked]
    counts: dict[str, int]  # messages per share
    kinds: dict[str, tuple[int, int]]  # binary kind -> (messages, bytes)
    reasons: dict[str, int]  # why the skip side sent messages raw (its checked pass)
    shares: int  # compress-once shares during the part (0: every side compressed alone)
    notes: dict[str, str] = field(default_factory=dict)

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


def runs(plan: Plan) -> int:
    """Progress units: a checked pass and the repeats, per side."""
    return len(SIDES) * (plan.repeats + 1)


def measure(plan: Plan, progress: Optional[Progress] = None) -> Result:
    import fastdeflate
    from fastdeflate import _choice

    messages = stream(plan)
    parts = stretches(messages)
    previous = (fastdeflate.set_min_size(0), fastdeflate.set_skip_incompressible(True))
    shares_before = fastdeflate.status()["traffic"]["sent"]["compress_once_shares"]
    try:
        checked: dict[str, Checked] = {}
        reasons: dict[str, int] = {}
        for side in SIDES:
            before = _choice.skipped()
            checked[side] = check(side, plan, messages)
            if side == "skip":
                reasons = {why: n["messages"] - before.get(why, {}).get("messages", 0)
                           for why, n in _choice.skipped().items()}
            tick(progress)
        series = {side: {share: Series([]) for share in SHARES} for side in SIDES}
        for side in rotations(SIDES, plan.repeats):
            run = timed_run(make_send(side, plan), parts)
            for share in ("binary", "text"):
                if run[share].bytes_out != checked[side].bytes_out[share]:
                    raise RoundTripError(f"mixed stream, {side}: a timed run sent other "
                                         "bytes than the checked pass")
            for share in SHARES:
                series[side][share].runs.append(run[share])
            tick(progress)
    finally:
        fastdeflate.set_min_size(previous[0])
        fastdeflate.set_skip_incompressible(previous[1])
    shares = fastdeflate.status()["traffic"]["sent"]["compress_once_shares"] - shares_before
    counts = {share: sum(m.share == share for m in messages) for share in ("binary", "text")}
    counts["all"] = len(messages)
    kinds = {kind: (sum(m.kind == kind for m in messages),
                    sum(len(m.data) for m in messages if m.kind == kind)) for kind in KINDS}
    notes = {"fastdeflate": f"{fastdeflate.IMPLEMENTATION}; "
             + engines_summary(fastdeflate, plan.window_bits, plan.mem_level),
             "stdlib": f"zlib {zlib.ZLIB_RUNTIME_VERSION}"}
    return Result(plan, series, checked, counts, kinds,
                  {why: n for why, n in reasons.items() if n}, shares, notes)


# --- output -------------------------------------------------------------------------------


def table(result: Result) -> str:
    header = ["side", "µs/msg", "bytes/msg", "binary: µs/msg", "binary: bytes/msg",
              "text: µs/msg", "text: bytes/msg", "speed vs stock (all, binary, text)",
              "bytes vs stock (all, binary, text)", "sent raw (binary, text)"]
    rows = []
    for side in SIDES:
        row: list[object] = [LABELS[side]]
        for share in SHARES:
            row += [fmt_us(result.us(side, share)), f"{result.bytes(side, share):,.0f}"]
        row.append("—" if side == "raw" else ", ".join(
            fmt_ratio(result.speedup(side, share)) for share in SHARES))
        row.append(", ".join(fmt_size_ratio(result.size_ratio(side, share))
                             for share in SHARES))
        raw = result.checked[side].raw
        row.append(f"{raw['binary']:,} of {result.counts['binary']:,}, "
                   f"{raw['text']:,} of {result.counts['text']:,}")
        rows.append(row)
    return markdown_table(header, rows)


def legend(result: Result) -> str:
    plan = result.plan
    kinds = ", ".join(f"{kind} {n:,} ({size / n / 1024:,.0f} KB on average)"
                      for kind, (n, size) in result.kinds.items() if n)
    reasons = ", ".join(f"{why} {n:,}" for why, n in sorted(result.reasons.items())) or "none"
    low, high = plan.binary_sizes
    shares = ("none: every side compressed alone" if result.shares == 0 else
              f"{result.shares:,} (a side took another's payload: the CPU figures are "
              "not each side's own)")
    return (
        f"One connection sends {plan.messages:,} messages: chat-like JSON updates "
        f"({result.counts['text']:,}, {plan.text_sizes[0]:,} B to "
        f"{payloads.size_label(plan.text_sizes[1])}) with {result.counts['binary']:,} "
        f"already-compressed binary messages ({plan.binary_share:.0%}) at seeded random "
        f"places — {kinds}; {payloads.size_label(low)} to "
        f"{payloads.size_label(high)}, log-uniform. Level {plan.level}, window "
        f"{plan.window_bits}, memLevel {plan.mem_level} (wsproto's, tornado's and "
        "autobahn's settings) for every side: **stock** a stdlib `zlib.compressobj`, each "
        "message `compress` + `flush(Z_SYNC_FLUSH)` with the tail removed; **fastdeflate "
        "today** `Compressor.compress` on every message; **fastdeflate, skip** "
        "`Compressor.compress_or_skip` at the default policy (min size 0, skip "
        "incompressible on), a message it declines counted at its own length (it goes "
        "out uncompressed); **send uncompressed** no codec (its µs is what the timing "
        f"itself costs). Each side first sent the stream once, checked: a stdlib decoder "
        "inflated every compressed payload in order (raw ones skipped, as a peer does) "
        "and got each message back. Then per side "
        f"{plan.repeats} timed runs, interleaved (rotating order), each a new "
        "connection sending the whole stream (and the same bytes as the checked pass); "
        "each stretch of consecutive text or binary messages timed on its own "
        "(`time_calls`), the stretches adding up to the binary and text shares. Median "
        "process CPU µs per message; bytes = payload bytes per message; 'speed vs "
        "stock' = stock's CPU / the side's (median of the paired per-run ratios; > 1: "
        "faster), 'bytes vs stock' = the side's bytes / stock's. Why the skip side sent "
        f"messages raw: {reasons}. Compress-once shares: {shares}. fastdeflate: "
        f"{result.notes['fastdeflate']}; stock: {result.notes['stdlib']}."
    )
