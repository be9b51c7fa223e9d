"""The benchmark code measures what it says (no timing assertions).

``benchmarks/`` is not a package on sys.path when the installed package is tested, so
this module adds that folder itself; run.py is run as a subprocess, as a user runs it.
The peers it compares against (zlib-ng, isal, matplotlib for the charts, autobahn) are
optional: where a wheel target has none, their tests skip (``requires_peer``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path
from typing import Callable

import pytest

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from _skipcheck import peer_installed, pytest_without_peers, requires_peer  # noqa: E402
from _samezlib import same_zlib_as_stdlib  # noqa: E402
from fdbench import (  # noqa: E402
    broadcast,
    broadcast_peer,
    codec_table,
    connections,
    end_to_end,
    engines,
    frontier,
    library_table,
    measure,
    memory_table,
    mixed,
    parts,
    payloads,
    report,
    server_memory,
    summary,
)

import fastdeflate  # noqa: E402
from integrations._support import AUTOBAHN_SUPPORTED, requires_autobahn  # noqa: E402
import fastdeflate._fastdeflate  # noqa: E402  (the compiled column must exist)
import fastdeflate._pure  # noqa: E402

TAIL = b"\x00\x00\xff\xff"
ZLIB_NG = pytest.param("zlib-ng", marks=requires_peer("zlib_ng"))
IN_PROCESS = ["naive", "stdlib", "fallback", "fastdeflate", ZLIB_NG]
MODES = [False, True]
#: autobahn's per-library module is measured where fastdeflate supports autobahn and the
#: test set has it (some wheel targets have no autobahn wheel).
AUTOBAHN_USABLE = AUTOBAHN_SUPPORTED and peer_installed("autobahn")


def inflate(payloads_: list[bytes], window_bits: int = 15, takeover: bool = True) -> list[bytes]:
    """Decode RFC 7692 payloads with plain stdlib zlib (an independent decoder)."""
    d = zlib.decompressobj(-window_bits)
    out = []
    for p in payloads_:
        if not takeover:
            d = zlib.decompressobj(-window_bits)
        out.append(d.decompress(p + TAIL))
    return out


class CountingBytes(bytes):
    """A message that counts how often it is compared for inequality."""

    comparisons = 0

    def __ne__(self, other: object) -> bool:
        type(self).comparisons += 1
        return bytes.__ne__(self, other)

    __hash__ = bytes.__hash__


class NeverEqual(bytes):
    """A message no round trip can reproduce (it is unequal to everything)."""

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = bytes.__hash__


# --- payloads ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", payloads.SIZES)
def test_varying_payloads_exact_size_valid_json_all_different(size: int) -> None:
    messages = payloads.varying(size, 20)
    assert all(len(m) == size for m in messages)
    assert len(set(messages)) == 20
    docs = [json.loads(m) for m in messages]
    assert [d["seq"] for d in docs] == list(range(20))
    assert all(d["ticks"] for d in docs)  # ticker updates...
    assert sum(len(d["chat"]) for d in docs) > 0  # ...and chat lines


def test_payloads_are_deterministic() -> None:
    assert payloads.varying(4096, 5) == payloads.varying(4096, 5)
    assert payloads.varying(4096, 5, seed=1) != payloads.varying(4096, 5)
    assert payloads.messages("varying", 65536) == payloads.messages("varying", 65536)


def test_varying_values_change_but_shape_stays() -> None:
    a, b = (json.loads(m) for m in payloads.varying(1024, 2))
    assert set(a) == set(b)
    assert a["ticks"][0] != b["ticks"][0]


def test_repeated_workload_is_one_payload() -> None:
    pool = payloads.messages("repeated", 1024)
    assert pool == [payloads.varying(1024, 1)[0]]
    assert payloads.repeated(1024, 3) == pool * 3


def test_varying_pool_sizes() -> None:
    for size in payloads.SIZES:
        pool = payloads.messages("varying", size)
        assert len(pool) == payloads.pool_size(size) >= 16
        # the stream never repeats within the 32 KiB window
        assert len(pool) * size > 2 * 32768
    with pytest.raises(ValueError):
        payloads.messages("other", 1024)
    with pytest.raises(ValueError):
        payloads.varying(40, 1)


def test_size_labels() -> None:
    assert [payloads.size_label(s) for s in payloads.SIZES] == ["1 KB", "4 KB", "16 KB", "64 KB"]


# --- engines: every column round-trips and measures what it says ------------------------------


@pytest.mark.parametrize("nct", MODES, ids=["takeover", "no_takeover"])
@pytest.mark.parametrize("name", IN_PROCESS)
def test_each_column_round_trips_real_rfc7692_payloads(name: str, nct: bool) -> None:
    settings = engines.Settings(no_context_takeover=nct)
    cycle = engines.engine(name).make_cycle(settings)
    messages = payloads.varying(1024, 8) + payloads.repeated(4096, 3)
    out = [cycle(m) for m in messages]
    assert all(not p.endswith(TAIL) for p in out)
    # An independent decoder gets the messages back: real permessage-deflate payloads.
    takeover = not nct and name != "naive"
    assert inflate(out, takeover=takeover) == messages


@pytest.mark.parametrize("name", IN_PROCESS)
def test_every_cycle_verifies_its_round_trip(name: str) -> None:
    cycle = engines.engine(name).make_cycle(engines.Settings())
    pool = [CountingBytes(m) for m in payloads.varying(1024, 4)]
    CountingBytes.comparisons = 0
    run = measure.run_cycles(cycle, pool, 10)
    assert CountingBytes.comparisons == 10
    assert run.cycles == 10
    with pytest.raises(engines.RoundTripError):
        cycle(NeverEqual(b"x" * 100))


def test_column_codec_objects_are_the_advertised_ones() -> None:
    s = engines.Settings()
    fd = engines.engine("fastdeflate").make_cycle(s).codec
    assert type(fd[0]) is fastdeflate._fastdeflate.Compressor
    assert type(fd[1]) is fastdeflate._fastdeflate.Decompressor
    fb = engines.engine("fallback").make_cycle(s).codec
    assert type(fb[0]) is fastdeflate._pure.Compressor
    assert type(fb[1]) is fastdeflate._pure.Decompressor
    std = engines.engine("stdlib").make_cycle(s).codec
    assert type(std[0]) is type(zlib.compressobj()) and type(std[1]) is type(zlib.decompressobj())
    assert engines.engine("naive").make_cycle(s).codec is None
    # without context takeover stdlib objects can't be reset: new ones per message
    nct = engines.Settings(no_context_takeover=True)
    assert engines.engine("stdlib").make_cycle(nct).codec is None


@requires_peer("zlib_ng")
def test_zlib_ng_column_uses_zlib_ng() -> None:
    from zlib_ng import zlib_ng

    ng = engines.engine("zlib-ng").make_cycle(engines.Settings()).codec
    assert type(ng[0]) is type(zlib_ng.compressobj())
    assert type(ng[1]) is type(zlib_ng.decompressobj())


def test_naive_uses_new_objects_for_every_message() -> None:
    message = payloads.varying(1024, 1)[0]
    cycle = engines.engine("naive").make_cycle(engines.Settings())
    fresh = zlib.compressobj(6, zlib.DEFLATED, -15, 8, 0)
    expected = (fresh.compress(message) + fresh.flush(zlib.Z_SYNC_FLUSH))[:-4]
    assert cycle(message) == cycle(message) == expected


@pytest.mark.parametrize("name", ["stdlib", "fallback", "fastdeflate", ZLIB_NG])
def test_persistent_columns_take_over_context_or_not(name: str) -> None:
    message = payloads.varying(1024, 1)[0]
    keep = engines.engine(name).make_cycle(engines.Settings())
    first, second = keep(message), keep(message)
    assert len(second) < len(first) // 5  # the window was kept
    forget = engines.engine(name).make_cycle(engines.Settings(no_context_takeover=True))
    assert forget(message) == forget(message)  # every message from an empty window


def test_stdlib_and_fallback_are_byte_identical() -> None:
    messages = payloads.varying(4096, 5)
    for nct in MODES:
        s = engines.Settings(no_context_takeover=nct)
        a = engines.engine("stdlib").make_cycle(s)
        b = engines.engine("fallback").make_cycle(s)
        assert [a(m) for m in messages] == [b(m) for m in messages]


def test_compiled_column_is_byte_identical_to_stdlib_on_the_same_zlib() -> None:
    messages = payloads.varying(4096, 5)
    s = engines.Settings()
    fd = engines.engine("fastdeflate").make_cycle(s)
    std = engines.engine("stdlib").make_cycle(s)
    ours, theirs = [fd(m) for m in messages], [std(m) for m in messages]
    if same_zlib_as_stdlib(fastdeflate._fastdeflate):
        assert ours == theirs
    else:  # another zlib build: the same messages, maybe other bytes
        assert inflate(ours) == messages


def _subprocess_pid(note: str) -> int:
    """The pid a note says an engine was measured in ("... subprocess pid N"): the whole
    number (a pid's digits may be part of another's: 604 of 3604)."""
    return int(note.split("subprocess pid")[1].split()[0].rstrip(";,)"))


@requires_peer("isal")
def test_isal_runs_only_in_a_subprocess_and_round_trips() -> None:
    isal_loaded = "isal.isal_zlib" in sys.modules
    plan = codec_table.Plan(sizes=(1024,), engines=("fastdeflate", "isal"),
                            max_cycles=20, repeats=2)
    local, isolated, missing = codec_table.plan_engines(plan)
    assert (local, isolated, missing) == (["fastdeflate"], ["isal"], [])
    cells, notes = codec_table.measure(plan)
    assert ("isal.isal_zlib" in sys.modules) == isal_loaded  # not imported here
    assert "subprocess pid" in notes["isal"]
    assert _subprocess_pid(notes["isal"]) != os.getpid()
    assert len(cells) == 4  # 2 workloads x 2 modes
    for cell in cells:
        assert cell.isolated == {"isal"}
        runs = cell.series["isal"].runs
        assert len(runs) == 2 and all(r.cycles == 20 for r in runs)
        assert runs[0].bytes_in == 20 * 1024
        assert 0 < cell.series["isal"].size_fraction() < 1


def test_unknown_engine() -> None:
    with pytest.raises(ValueError):
        engines.engine("brotli")


# --- measure -------------------------------------------------------------------------------


def test_run_cycles_counts_bytes_and_wraps_around() -> None:
    pool = [b"a" * 10, b"b" * 20, b"c" * 30]
    seen: list[bytes] = []

    def cycle(message: bytes) -> bytes:
        seen.append(message)
        return message[:1]

    run = measure.run_cycles(cycle, pool, 7)
    assert seen == (pool * 3)[:7]
    assert (run.cycles, run.bytes_in, run.bytes_out) == (7, 10 + 20 + 30 + 10 + 20 + 30 + 10, 7)
    assert run.cpu >= 0 and run.wall >= 0


def test_interleave_warms_up_then_rotates_columns() -> None:
    order: list[str] = []

    def factory(name: str):
        def make():
            order.append(name)
            return lambda m: m

        return make

    bar_updates: list[int] = []

    class Bar:
        def update(self, n: int = 1) -> None:
            bar_updates.append(n)

    result = measure.interleave(
        {"A": factory("A"), "B": factory("B"), "C": factory("C")}, [b"x"], 5, 3, 2, Bar()
    )
    assert order == ["A", "B", "C", "A", "B", "C", "B", "C", "A", "C", "A", "B"]
    assert len(bar_updates) == 12
    assert all(len(s.runs) == 3 and s.cycles == 5 for s in result.values())


def test_paired_ratio_and_medians() -> None:
    a = measure.Series([measure.Run(c, 2 * c, 10, 100, 10) for c in (1.0, 3.0, 2.0)])
    b = measure.Series([measure.Run(c, c, 10, 100, 10) for c in (1.0, 1.0, 0.5)])
    assert measure.paired_ratio(a, b) == 3.0  # ratios 1, 3, 4
    assert a.cpu == 2.0 and a.wall == 4.0
    assert a.cpu_us() == pytest.approx(2e5) and a.size_fraction() == 0.1
    assert a.us("cpu") == a.cpu_us() and a.us("wall") == a.wall_us()
    assert measure.paired_median([2, 9], [1, 3], float) == 2.5  # ratios 2, 3


def test_rotations_run_every_name_once_a_round_the_first_one_rotating() -> None:
    assert list(measure.rotations(["A", "B", "C"], 4)) == list("ABC" "BCA" "CAB" "ABC")
    assert list(measure.rotations(("stock", "enabled"), 3)) == [
        "stock", "enabled", "enabled", "stock", "stock", "enabled"]


def test_interleave_without_fresh_keeps_each_cycle_and_goes_on_through_the_messages() -> None:
    """The steady-state mode: one cycle per column, made once, its runs continuing the
    message stream where the warm-up and the previous run stopped; column j starts at
    message j, so two columns never send the same message at once."""
    pool = [bytes([i]) * (i + 1) for i in range(5)]
    made: list[str] = []
    seen: dict[str, list[bytes]] = {"A": [], "B": []}

    def factory(name: str):
        def make():
            made.append(name)
            return lambda m: seen[name].append(m) or m[:1]

        return make

    result = measure.interleave({"A": factory("A"), "B": factory("B")}, pool, 3, 2, 2,
                                fresh=False)
    assert made == ["A", "B"]
    for first, name in enumerate(("A", "B")):
        assert seen[name] == [pool[(first + i) % 5] for i in range(2 + 3 * 2)]
        assert result[name].bytes_per_cycle() == 1.0
    assert [r.bytes_in for r in result["A"].runs] == [3 + 4 + 5, 1 + 2 + 3]
    assert [r.bytes_in for r in result["B"].runs] == [4 + 5 + 1, 2 + 3 + 4]


def test_time_calls_times_each_pair_in_order() -> None:
    calls: list[tuple[str, bytes]] = []

    def named(name: str):
        return lambda m: calls.append((name, m)) or m + m

    run = measure.time_calls([(named("x"), b"a"), (named("y"), b"bc"), (named("x"), b"d")])
    assert calls == [("x", b"a"), ("y", b"bc"), ("x", b"d")]
    assert (run.cycles, run.bytes_in, run.bytes_out) == (3, 4, 8)


def test_deadline_kills_a_process_that_overruns_it() -> None:
    with pytest.raises(RuntimeError, match="sleeper process exited early"):
        with measure.deadline(0.5) as procs:
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(proc)
            measure.ask(proc, None, "sleeper")
    assert proc.returncode is not None and proc.returncode < 0


def test_plan_for_takes_the_options_given_over_the_short_or_full_plan() -> None:
    args = argparse.Namespace(full=False, cycles=None, repeats=4, sizes="1024,4096")
    fields = {"sizes": ("sizes", parts.ints), "max_cycles": ("cycles", parts.given),
              "repeats": ("repeats", parts.given)}
    quick = parts.plan_for(args, codec_table.QUICK, codec_table.FULL, **fields)
    assert quick == dataclasses.replace(codec_table.QUICK, sizes=(1024, 4096), repeats=4)
    args.full, args.cycles = True, 50
    full = parts.plan_for(args, codec_table.QUICK, codec_table.FULL, **fields)
    assert full == dataclasses.replace(codec_table.FULL, sizes=(1024, 4096), repeats=4,
                                       max_cycles=50)


def test_frontier_measures_every_point_in_one_schedule() -> None:
    """Every level of every library's settings, stock and fastdeflate, one progress tick
    per run as ``runs`` counts them, and the figures come from the runs."""
    plan = frontier.Plan(cycles=3, repeats=2, levels=(1, 5, 6))  # 1: aiohttp's
    ticks: list[int] = []

    class Bar:
        def update(self, n: int = 1) -> None:
            ticks.append(n)

    result = frontier.measure(plan, Bar())
    assert sum(ticks) == frontier.runs(plan)
    keys = {(p.path, p.engine, p.level) for p in result.points}
    assert keys >= {(path, engine, level) for path, *_ in frontier.PATHS
                    for engine in ("stock", "fastdeflate") for level in (1, 5, 6)}
    assert all(p.us > 0 and p.bytes > 0 for p in result.points)
    if peer_installed("zlib_ng"):
        assert "interleaved" in result.notes["zlib-ng backend"]
    table = frontier.table(result)
    assert "| websockets " in table and "6 (its level)" in table


def test_frontier_names_the_level_a_backend_runs() -> None:
    """aiohttp asks its backend for ``Z_BEST_SPEED``: isal's is ISA-L's level 0, not 1."""
    points = [frontier.Point("aiohttp", engine, 1, 10.0, 100.0, True)
              for engine in ("stock", "fastdeflate")]
    points += [frontier.Point("aiohttp", label, level, 8.0, 120.0, True)
               for label, _, level, _ in frontier.BACKENDS]
    levels = {cells[0]: cells[1] for line in frontier.table(frontier.Result(points))
              .splitlines() if (cells := [c.strip() for c in line.strip("|").split("|")])}
    assert levels["aiohttp: isal backend"] == "1 (its level; the module's level 0)"
    assert levels["aiohttp: zlib-ng backend"] == "1 (its level)"


#: A tiny mixed stream: with one connection 60 messages, 12 of them binary (3 of each
#: kind), up to 16 KB; with 20 connections 80 (4 each), 16 of them binary.
TINY_MIXED = mixed.Plan(messages=60, connections=(1, 20), binary_sizes=(4096, 16384),
                        repeats=2)


def test_mixed_stream_is_seeded_and_its_binary_messages_are_what_they_say() -> None:
    messages = mixed.stream(TINY_MIXED)
    assert messages == mixed.stream(TINY_MIXED)  # deterministic
    assert len(messages) == 60 and {m.connection for m in messages} == {0}
    binary = [m for m in messages if m.share == "binary"]
    assert len(binary) == 12 and [m.kind for m in binary] == list(mixed.KINDS) * 3
    for m in messages:
        if m.kind == "text":
            json.loads(m.data)
            assert 128 <= len(m.data) <= 4096
        else:
            assert 4096 * 0.9 <= len(m.data) <= 16384 * 1.1, (m.kind, len(m.data))
    for m in binary:
        if m.kind == "png":  # a valid PNG: signature, chunks, an IDAT that inflates
            assert m.data.startswith(b"\x89PNG\r\n\x1a\n") and m.data.endswith(
                b"IEND\xaeB`\x82")
            idat = m.data[8 + 25 + 8:-12 - 4]
            assert zlib.decompress(idat)
        elif m.kind == "jpeg":
            assert m.data.startswith(b"\xff\xd8\xff") and m.data.endswith(b"\xff\xd9")
        elif m.kind == "gzip":  # real gzip output, of a hex dump
            bytes.fromhex(__import__("gzip").decompress(m.data).decode("ascii"))
    # the stretches are the stream in order, each of one share
    parts_ = mixed.stretches(messages)
    assert [m for _, ms in parts_ for m in ms] == messages
    assert all(a[0] != b[0] for a, b in zip(parts_, parts_[1:]))
    assert all(m.share == share for share, ms in parts_ for m in ms)


def test_mixed_connections_get_their_share_interleaved() -> None:
    """N connections: per_connection messages each (the stream grows to hold them), at
    seeded random places: neither in blocks nor round-robin; each connection mixes text
    and binary as the stream does."""
    assert mixed.length(TINY_MIXED, 1) == 60 and mixed.length(TINY_MIXED, 20) == 80
    assert mixed.length(TINY_MIXED, 3) == 60  # messages is a floor
    messages = mixed.stream(TINY_MIXED, 20)
    assert messages == mixed.stream(TINY_MIXED, 20)  # deterministic
    assert len(messages) == 80 and sum(m.share == "binary" for m in messages) == 16
    to = [m.connection for m in messages]
    assert to == mixed.deal(TINY_MIXED, 20, 80)
    assert sorted(to) == sorted(list(range(20)) * 4)  # 4 each
    assert to != sorted(to) and to != [i % 20 for i in range(80)]  # not blocks, not in turn
    assert sum(a == b for a, b in zip(to, to[1:])) <= 8  # the next message: another connection
    firsts = [to.index(k) for k in range(20)]
    assert firsts != sorted(firsts)  # connections start in a shuffled order
    assert to != mixed.deal(dataclasses.replace(TINY_MIXED, seed=1), 20, 80)
    deck = mixed.deal(TINY_MIXED, 7, 60)  # uneven: 60 = 7 * 8 + 4
    assert sorted(deck.count(k) for k in range(7)) == [8, 8, 8, 9, 9, 9, 9]


def recording_decoders(monkeypatch: pytest.MonkeyPatch) -> list[list[bytes]]:
    """Make mixed.decoder record what each decoder it makes inflates, in order."""
    seen: list[list[bytes]] = []
    real = mixed.decoder

    class Recording:
        def __init__(self, plan: mixed.Plan) -> None:
            self.inner = real(plan)
            self.out = []
            seen.append(self.out)

        def decompress(self, data: bytes) -> bytes:
            message = self.inner.decompress(data)
            self.out.append(message)
            return message

        @property
        def unconsumed_tail(self) -> bytes:
            return self.inner.unconsumed_tail

    monkeypatch.setattr(mixed, "decoder", Recording)
    return seen


@pytest.mark.parametrize("side", ["stock", "today", "skip"])
def test_mixed_each_connections_decoder_gets_its_own_messages(
        side: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checked pass opens a connection per message's connection and a decoder per
    connection; decoder k inflates connection k's compressed messages, in order."""
    made: list[str] = []
    real = mixed.make_send

    def counted(side_: str, plan: mixed.Plan):  # type: ignore[no-untyped-def]
        made.append(side_)
        return real(side_, plan)

    monkeypatch.setattr(mixed, "make_send", counted)
    seen = recording_decoders(monkeypatch)
    messages = mixed.stream(TINY_MIXED, 20)
    with mixed.default_policy():
        checked = mixed.check(side, TINY_MIXED, messages, 20)
    assert made == [side] * 20 and len(seen) == 20
    for k in range(20):
        own = [m.data for m in messages if m.connection == k
               and (side != "skip" or m.share == "text")]  # skip: binary goes out raw
        assert seen[k] == own, k
    assert checked.compressing == len({m.connection for m in messages if m.share == "text"
                                       or side != "skip"})
    if side == "skip":
        assert checked.live >= checked.compressing  # each busy connection kept its stream


def test_mixed_the_check_catches_connections_that_share_a_history(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A side whose connections share one compressor (one history for all) does not
    decode with a decoder per connection."""
    real = mixed.make_send
    shared: dict[str, mixed.Send] = {}

    def one_for_all(side: str, plan: mixed.Plan):  # type: ignore[no-untyped-def]
        if side != "today":
            return real(side, plan)
        return shared.setdefault(side, real(side, plan))

    monkeypatch.setattr(mixed, "make_send", one_for_all)
    messages = mixed.stream(TINY_MIXED, 20)
    mixed.check("today", TINY_MIXED, messages[:1], 20)  # one message: no history yet
    shared.clear()
    with pytest.raises(engines.RoundTripError, match=r"20 connections, interleaved, today: "
                       r"message \d+ \(\w+, [\d,]+ bytes, connection \d+\)"):
        mixed.check("today", TINY_MIXED, messages, 20)


def test_mixed_tiny_run_table_and_bytes() -> None:
    """Every side measured for each connection count (a checked pass and the repeats,
    as ``runs`` counts them); the table has a row per side and count; the skip sends
    every binary message raw and no more bytes than stock (no timing assertions)."""
    ticks: list[int] = []

    class Bar:
        def update(self, n: int = 1) -> None:
            ticks.append(n)

    result = mixed.measure(TINY_MIXED, Bar())
    assert sum(ticks) == mixed.runs(TINY_MIXED) == 2 * 4 * 3
    assert [case.connections for case in result.cases] == [1, 20]
    for case, count, binaries in zip(result.cases, (60, 80), (12, 16)):
        messages = mixed.stream(TINY_MIXED, case.connections)
        assert case.counts == {"all": count, "binary": binaries, "text": count - binaries}
        for side in mixed.SIDES:
            for share in mixed.SHARES:
                assert len(case.series[side][share].runs) == TINY_MIXED.repeats
            assert case.series[side]["all"].cycles == count
            assert case.series[side]["binary"].cycles == binaries
        assert case.bytes("skip") <= case.bytes("stock")
        assert case.bytes("skip", "binary") <= case.bytes("stock", "binary")
        assert case.bytes("raw") == sum(len(m.data) for m in messages) / count
        assert case.checked["skip"].raw == {"binary": binaries, "text": 0}
        assert case.checked["stock"].raw == case.checked["today"].raw == {"binary": 0,
                                                                          "text": 0}
        assert sum(case.reasons.values()) == binaries
        assert {side: len(runs) for side, runs in case.drift.items()} == {
            side: TINY_MIXED.repeats for side in mixed.SIDES}
        assert case.drift["stock"] == case.drift["raw"] == [0.0] * TINY_MIXED.repeats
    assert result.case(1).reasons == {"compressed format": 9, "incompressible": 3}
    assert result.case(20).checked["today"].compressing == 20
    assert result.shares == 0
    lines = mixed.table(result).splitlines()
    assert len(lines) == 2 + 2 * len(mixed.SIDES)
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:4] == ["side", "connections", "µs/msg", "bytes/msg"] and len(header) == 11
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [(row[0], row[1]) for row in rows] == [
        (mixed.LABELS[side], n) for n in ("1", "20") for side in mixed.SIDES]
    assert all(len(row) == 11 for row in rows)
    assert rows[mixed.SIDES.index("raw")][-1] == "12 of 12, 48 of 48"
    assert rows[4 + mixed.SIDES.index("raw")][-1] == "16 of 16, 64 of 64"
    legend = mixed.legend(result)
    assert "one connection: compressed format 9, incompressible 3" in legend
    assert "with 20 connections, 80 messages" in legend and "shuffled deck" in legend
    assert "each connection gets 4 messages at random places" in legend
    rows = summary.mixed_rows(result)
    assert len(rows) == 4 and all(len(row) == 4 for row in rows)
    assert "20 connections, interleaved" in rows[2][0]


def test_mixed_the_checked_pass_catches_wrong_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A side whose payloads do not inflate back to the messages fails the part."""
    real = mixed.make_send

    def broken(side: str, plan: mixed.Plan):  # type: ignore[no-untyped-def]
        send = real(side, plan)
        if side != "today":
            return send
        return lambda message: send(message[:-1] + b" ")

    monkeypatch.setattr(mixed, "make_send", broken)
    with pytest.raises(engines.RoundTripError, match="one connection, today: message 0"):
        mixed.measure(dataclasses.replace(TINY_MIXED, repeats=1))


def test_mixed_timed_runs_are_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timed run whose messages do not go through their own connections (here: all
    through the first one) sends payloads the per-connection decoders refuse."""
    real = mixed.timed_run

    def first_only(sends, parts_):  # type: ignore[no-untyped-def]
        return real([sends[0]] * len(sends), parts_)

    monkeypatch.setattr(mixed, "timed_run", first_only)
    with pytest.raises(engines.RoundTripError, match="20 connections, interleaved, stock: "
                       "message"):
        mixed.measure(dataclasses.replace(TINY_MIXED, repeats=1))


def test_mixed_timed_runs_bytes_against_the_checked_pass() -> None:
    """stock's and raw's bytes must be the checked pass's, and every side's raw messages;
    fastdeflate's bytes may drift (reported in the legend)."""
    checked = mixed.Checked({"binary": 100, "text": 100}, {"binary": 1, "text": 0})
    more = mixed.Checked({"binary": 100, "text": 101}, {"binary": 1, "text": 0})
    assert mixed.compare("today", 1, checked, checked) == 0.0
    assert mixed.compare("skip", 3, checked, more) == pytest.approx(0.005)
    for side in mixed.EXACT:
        with pytest.raises(engines.RoundTripError, match=f"3 connections, interleaved, "
                           f"{side}: a timed run sent other bytes"):
            mixed.compare(side, 3, checked, more)
    raw_other = mixed.Checked({"binary": 100, "text": 100}, {"binary": 0, "text": 0})
    with pytest.raises(engines.RoundTripError, match="skip: a timed run sent other bytes"):
        mixed.compare("skip", 3, checked, raw_other)


def test_mixed_settings_are_pinned_and_given_back() -> None:
    previous = fastdeflate.set_min_size(1 << 20)
    try:
        result = mixed.measure(dataclasses.replace(TINY_MIXED, messages=20, connections=(1,),
                                                   repeats=1))
        assert result.case(1).checked["skip"].raw["text"] == 0  # min size 0 while it ran
        assert fastdeflate.set_min_size(1 << 20) == 1 << 20  # given back
    finally:
        fastdeflate.set_min_size(previous)


def test_mixed_is_in_the_short_run() -> None:
    assert "mixed" in parts.DEFAULT_PARTS and "mixed" in parts.PARTS
    args = argparse.Namespace(full=False, cycles=30, repeats=None, mixed_connections=None)
    plan = parts.plan_for(args, mixed.QUICK, mixed.FULL, messages=("cycles", parts.given),
                          repeats=("repeats", parts.given),
                          connections=("mixed_connections", parts.ints))
    assert plan == dataclasses.replace(mixed.QUICK, messages=30)
    assert mixed.QUICK.binary_sizes[1] < mixed.FULL.binary_sizes[1] == 1 << 20
    # one connection and 1,000 interleaved, each of them with several messages
    assert mixed.QUICK.connections == mixed.FULL.connections == (1, 1000)
    assert mixed.length(mixed.QUICK, 1000) >= 4 * 1000
    args.mixed_connections = "1,3"
    assert parts.plan_for(args, mixed.QUICK, mixed.FULL,
                          connections=("mixed_connections", parts.ints)).connections == (1, 3)


# --- tables --------------------------------------------------------------------------------


def test_markdown_table() -> None:
    text = report.markdown_table(["name", "x"], [["a", 1], ["bbb", 22]])
    assert text.splitlines() == [
        "| name |  x |",
        "|------|---:|",
        "| a    |  1 |",
        "| bbb  | 22 |",
    ]
    with pytest.raises(ValueError):
        report.markdown_table(["a", "b"], [[1]])


def test_codec_table_has_every_column_and_row() -> None:
    plan = codec_table.Plan(sizes=(1024, 4096), engines=("naive", "stdlib", "fastdeflate"),
                            max_cycles=10, repeats=1)
    cells, notes = codec_table.measure(plan)
    assert [(c.workload, c.no_context_takeover, c.size) for c in cells] == [
        (w, m, s) for w in ("varying", "repeated") for m in MODES for s in (1024, 4096)
    ]
    text = codec_table.table(cells)
    lines = text.splitlines()
    assert len(lines) == 2 + 8
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    assert header == ["workload", "mode", "size", "cycles", "naive µs", "stdlib µs",
                      "fastdeflate µs", "fastdeflate vs naive", "fastdeflate vs stdlib"]
    assert "same payload" in text and "no context takeover" in text
    row = [c.strip() for c in lines[2].strip("|").split("|")]
    assert row[:4] == ["varying JSON", "context takeover", "1 KB", "10"]
    assert all(cell.endswith("%)") for cell in row[4:7])
    assert all(cell.endswith("x") for cell in row[7:])
    legend = codec_table.legend(cells, notes, plan)
    assert "**fastdeflate**" in legend and "zlib" in legend
    assert codec_table.cycles_for(codec_table.FULL, 1024) == 10_000
    assert codec_table.cycles_for(codec_table.FULL, 65536) * 65536 <= codec_table.FULL.max_bytes


@pytest.mark.parametrize("system", ["here", "windows"])
def test_machine_info_without_getloadavg(system: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has no os.getloadavg (AttributeError, not OSError): the load is "n/a".
    Where there is one it is reported: a stand-in's, so that this test also passes on
    Windows (the "windows" case: none to begin with)."""
    if system == "windows":
        monkeypatch.delattr(os, "getloadavg", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 0.25, 2.0), raising=False)
    assert report.machine_info()["load average (1, 5, 15 min) at start"] == "1.50, 0.25, 2.00"
    monkeypatch.delattr(os, "getloadavg")
    assert report.machine_info()["load average (1, 5, 15 min) at start"] == "n/a"
    assert report.load_now() == "n/a"


def test_machine_info_where_getloadavg_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("load average unobtainable")

    monkeypatch.setattr(os, "getloadavg", unavailable, raising=False)  # (none on Windows)
    assert report.machine_info()["load average (1, 5, 15 min) at start"] == "n/a"
    assert report.load_now() == "n/a"


def test_machine_info_without_proc_cpuinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and Windows have no /proc/cpuinfo: the CPU is named by the platform module."""
    import builtins
    import platform

    real_open = builtins.open

    def no_proc(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path) == "/proc/cpuinfo":
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setattr(platform, "processor", lambda: "Example CPU")
    assert report.machine_info()["machine"].startswith("Example CPU, ")
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert report.machine_info()["machine"].startswith(f"{platform.machine()}, ")


# --- per library ---------------------------------------------------------------------------


def usable_libraries() -> list[library_table.Library]:
    """The per-library modules, less autobahn where fastdeflate cannot support it."""
    return [lib for lib in library_table.discover()
            if lib.name != "autobahn" or AUTOBAHN_USABLE]


def test_every_per_library_module_is_found_and_usable() -> None:
    found = library_table.discover()
    by_name = {lib.name: lib for lib in found}
    assert set(by_name) >= {"websockets", "aiohttp", "wsproto", "tornado", "autobahn"}
    errors = {n: lib.error for n, lib in by_name.items() if lib.error}
    if not AUTOBAHN_USABLE:
        errors.pop("autobahn", None)  # absent or too old there, reported and not measured
    assert errors == {}


@pytest.mark.parametrize("enabled", [False, True], ids=["stock", "enabled"])
def test_library_round_trips_are_checked(enabled: bool) -> None:
    for lib in usable_libraries():
        assert lib.module is not None
        cycle = library_table.checked(lib.module.make_roundtrip(enabled), lib.name)
        for message in payloads.varying(1024, 3) + payloads.repeated(16384, 2):
            assert cycle(message) == message
        with pytest.raises(engines.RoundTripError):
            cycle(NeverEqual(b"y" * 50))


@pytest.mark.parametrize("nct", MODES, ids=["takeover", "no_takeover"])
def test_library_columns_use_the_codec_they_claim(nct: bool) -> None:
    for lib in usable_libraries():
        assert lib.module is not None
        library_table.check_codecs(lib.module, nct)  # raises if not
        stock, fast = lib.module.make_roundtrip(False), lib.module.make_roundtrip(True)
        message = payloads.varying(1024, 1)[0]
        assert stock(message) == fast(message) == message  # codec objects exist by now
        stock, fast = library_table.codec_types(stock), library_table.codec_types(fast)
        assert "fastdeflate._fastdeflate.Compressor" in fast, lib.name
        assert not any(name.startswith("fastdeflate.") for name in stock), lib.name


def test_codec_types_sees_through_closures() -> None:
    assert library_table.codec_types(lambda: zlib.compressobj()) == set()  # nothing held
    held = [fastdeflate._fastdeflate.Compressor(), {"d": zlib.decompressobj()}]
    assert library_table.codec_types(lambda: held) == {
        "fastdeflate._fastdeflate.Compressor", "zlib.Decompress"
    }


def test_library_table_tiny_run() -> None:
    libraries = [lib for lib in library_table.discover() if lib.name == "websockets"]
    plan = library_table.Plan(sizes=(1024,), max_cycles=10, repeats=1)
    rows = library_table.measure(plan, libraries)
    assert [(r.library, r.workload, r.size, r.cycles) for r in rows] == [
        ("websockets", "varying", 1024, 10), ("websockets", "repeated", 1024, 10)
    ]
    assert len(library_table.table(rows).splitlines()) == 4


def test_fleet_fills_each_connection_then_sends_message_i_through_connection_i_mod_n() -> None:
    received: list[list[bytes]] = []

    def make() -> Callable[[bytes], bytes]:
        mine: list[bytes] = []
        received.append(mine)

        def roundtrip(message: bytes) -> bytes:
            mine.append(message)
            return message
        return roundtrip

    pool = [b"%d" % i for i in range(1000)]
    roundtrip = library_table.fleet(make, 3, pool, fill=2)
    stride = library_table.STRIDE
    assert received == [pool[0:2], pool[stride:stride + 2], pool[2 * stride:2 * stride + 2]]
    for i in range(7):
        assert roundtrip(b"m%d" % i) == b"m%d" % i
    assert [r[2:] for r in received] == [[b"m0", b"m3", b"m6"], [b"m1", b"m4"], [b"m2", b"m5"]]


def test_library_fleets_tiny_run() -> None:
    """Each column's N connections are real library round trips, checked every message;
    a row per library and connection count, in a table of its own."""
    libraries = [lib for lib in library_table.discover() if lib.name in ("aiohttp", "wsproto")]
    plan = library_table.Plan(max_cycles=10, repeats=1, connections=(3,), fill=2)
    rows = library_table.measure_fleets(plan, libraries)
    assert [(r.library, r.connections, r.cycles) for r in rows] == [
        ("aiohttp", 3, 10), ("wsproto", 3, 10)]
    assert {"stock", "enabled"} <= set(rows[0].series) and set(rows[1].series) == {
        "stock", "enabled"}
    assert all(len(series.runs) == 1 for r in rows for series in r.series.values())
    lines = library_table.fleet_table(rows).splitlines()
    assert len(lines) == 4 and lines[2].replace(" ", "").startswith("|aiohttp|3|10|")


@requires_peer("zlib_ng")
def test_aiohttps_zlib_ng_backend_is_measured_beside_stock_and_enabled() -> None:
    """aiohttp's own faster way (its zlib-ng backend) runs in the same interleaved runs,
    on zlib-ng's objects, and gets a table of its own; the others have no alternative."""
    from zlib_ng import zlib_ng

    (aiohttp_lib,) = [lib for lib in library_table.discover() if lib.name == "aiohttp"]
    assert list(library_table.alternatives(aiohttp_lib.module)) == ["zlib-ng backend"]
    roundtrip = aiohttp_lib.module.make_zlib_ng_roundtrip()  # checks its objects' type
    assert roundtrip(b"hello " * 100) == b"hello " * 100
    with pytest.raises(AssertionError):  # that check: stock objects made on stdlib zlib
        aiohttp_lib.module.make_roundtrip(False, False, zlib_ng)
    plan = library_table.Plan(sizes=(1024,), workloads=("varying",), max_cycles=10, repeats=1)
    (row,) = library_table.measure(plan, [aiohttp_lib])
    assert set(row.series) == {"stock", "enabled", "zlib-ng backend"}
    lines = library_table.alternatives_table([row]).splitlines()
    assert len(lines) == 3 and "| aiohttp | zlib-ng backend |" in lines[2].replace("  ", "")
    others = [lib for lib in library_table.discover() if lib.name != "aiohttp"]
    assert all(not library_table.alternatives(lib.module) for lib in others if lib.module)


# --- end to end ----------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("enabled", [False, True], ids=["stock", "enabled"])
def test_end_to_end_run_delivers_every_message_with_the_right_codec(enabled: bool) -> None:
    plan = end_to_end.Plan(clients=(3,), messages=30, repeats=1, timeout=90)
    run = end_to_end.one_run(3, enabled, plan)
    assert run.delivered == 30
    expected = ("fastdeflate.integrations.websockets.PerMessageDeflate" if enabled
                else "websockets.extensions.permessage_deflate.PerMessageDeflate")
    assert run.server_extensions == [[expected, 3]]
    assert run.client_extensions == [[expected, 3]]
    assert run.server_cpu > 0 and run.client_cpu > 0


# --- broadcast -----------------------------------------------------------------------------

#: A tiny broadcast plan: 3 clients and 1 late joiner, 40 broadcasts, 7 private messages.
TINY_BROADCAST = broadcast.Plan(clients=(3,), deliveries=0, min_broadcasts=40, repeats=1,
                                timeout=100)
BROADCAST_COMPRESSORS = {"stock": {"zlib.Compress": 4, "zlib.Decompress": 4},
                         "enabled": {"fastdeflate._fastdeflate.Compressor": 4},
                         "off": {}}


@pytest.mark.timeout(300)
def test_broadcast_every_client_gets_every_message_on_the_claimed_codec() -> None:
    """Stock, enabled and off servers, each in a process of its own: the clients received
    (and checked) every broadcast and private message the server sent, the late joiner
    every broadcast from its join point on, and the server's connections held the codec
    each run claims (found from inside the server process)."""
    (row,) = broadcast.measure(TINY_BROADCAST)
    assert row.error == "" and row.problems() == []
    assert (row.clients, row.broadcasts, row.joiners) == (3, 40, 1)
    (point,) = broadcast_peer.join_points(40, 1)
    assert point == 20
    for mode in broadcast.MODES:
        (sample,) = row.samples[mode]
        server, received = sample.server, sample.received
        assert sample.hello["pid"] != os.getpid()
        assert sample.hello["implementation"] == "cython"
        assert ("websockets" in sample.hello["enabled"]) == (mode == "enabled")
        codecs = {k: v for k, v in server["codecs"].items() if k != (
            "fastdeflate._fastdeflate.Decompressor")}  # made on first use
        assert codecs == BROADCAST_COMPRESSORS[mode]
        # every message, counted on both sides
        assert server["broadcast_deliveries"] == received["broadcasts"] == 3 * 40 + 20
        assert server["privates"] == received["privates"] == 7  # after 5, 10, ... 35
        assert server["deliveries"] == sample.deliveries == 3 * 40 + 20 + 7
        assert received["clients"] == server["connections"] == 4
        # the mix: every first client got private messages, the joiner came at 20
        assert [b for b, _ in received["first"]] == [40, 40, 40]
        assert all(p >= 1 for _, p in received["first"])
        ((start, got, private),) = received["late"]
        assert (start, got) == (20, 20) and server["joined"] == 1
        assert sum(p for _, p in received["first"]) + private == 7
        assert server["cpu"] > 0 and sample.cpu_us() > 0
        assert sample.ready["handshake_exact"]
    # bytes on the wire: a 1024-byte payload has a 4-byte frame header; compressed less
    assert row.bytes("off") == 1024 + 4
    for mode in ("stock", "enabled"):
        assert 100 < row.bytes(mode) < 600
    assert [set(s.ready["extensions"]) for s in (row.samples["stock"] + row.samples["off"])] == [
        {"permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"}, {""}]
    lines = broadcast.table([row]).splitlines()
    assert len(lines) == 3
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == broadcast.HEADER == [
        "clients", "broadcasts/run", "deliveries/run", "CPU µs/delivery: stock", "fastdeflate",
        "off", "stock / fastdeflate", "fastdeflate / off", "worst run: fastdeflate / off",
        "bytes/delivery: stock", "fastdeflate", "off", "stock / fastdeflate",
        "worst run: fastdeflate / stock"]
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:3] == ["3 (+1 late)", "40", "147"] and cells[11] == "1,028"
    assert all(cells[i].endswith("x") for i in (6, 7, 8, 12, 13))
    legend = broadcast.legend(TINY_BROADCAST, [row])
    assert "CHECK FAILED" not in legend
    assert "fastdeflate.integrations.websockets.PerMessageDeflate" in legend
    (cpu, wire) = summary.broadcast_rows([row])
    assert cpu[0] == "websockets broadcast() of ~1 KB JSON to 3 clients, server CPU per " \
        "delivery (µs)" and wire[0].endswith("bytes on the wire per delivery")


@pytest.mark.timeout(300)
def test_broadcast_servers_side_by_side_take_turns_and_lose_nothing() -> None:
    """With a turn, the three servers run at once and broadcast in turns of that many
    (each says where its turn ended, checked by one_round, which fails on a server that
    does not stop there), and every client still gets exactly what its server sent."""
    plan = dataclasses.replace(TINY_BROADCAST, min_broadcasts=48, turn=16)
    (row,) = broadcast.measure(plan)
    assert row.error == "" and row.problems() == []
    for mode in broadcast.MODES:
        (sample,) = row.samples[mode]
        assert sample.server["broadcast_deliveries"] == sample.received["broadcasts"]
        assert sample.received["broadcasts"] == 3 * 48 + 24  # the joiner from 24 on
        assert sample.server["privates"] == sample.received["privates"] == 9
    assert "side by side" in broadcast.legend(plan, [row])
    with pytest.raises(ValueError, match="multiple of ack_every"):
        broadcast.one_round(["off"], 3, dataclasses.replace(plan, turn=10))


@pytest.mark.timeout(300)
def test_broadcast_client_count_reaches_the_server() -> None:
    plan = dataclasses.replace(TINY_BROADCAST, min_broadcasts=12, late_fraction=0.1)
    for n, joiners in ((2, 1), (25, 2)):
        sample = broadcast.one_run("stock", n, plan)
        assert (sample.server["initial"], sample.server["joined"]) == (n, joiners)
        assert sample.server["codecs"] == {"zlib.Compress": n + joiners,
                                           "zlib.Decompress": n + joiners}
        assert sample.received["broadcasts"] == sample.server["broadcast_deliveries"]
        assert len(sample.received["first"]) == n and len(sample.received["late"]) == joiners
        assert sample.problems() == []


def test_broadcast_reports_a_run_that_misses_its_claim() -> None:
    server = {"cpu": 0.01, "deliveries": 22, "broadcast_deliveries": 20, "privates": 2,
              "initial": 3, "joined": 1, "codecs": {"zlib.Compress": 4}}
    received = {"broadcasts": 20, "privates": 2, "bytes": 22 * 300}
    ready = {"extensions": {"permessage-deflate; server_max_window_bits=12": 3},
             "handshake_exact": True}
    good = broadcast.Sample("stock", 3, 1, {"enabled": []}, ready, server, received)
    assert good.problems() == [] and good.bytes() == 300
    bad = broadcast.Sample("enabled", 4, 1, {"enabled": []}, dict(ready, handshake_exact=False),
                           server, dict(received, privates=1))
    problems = bad.problems()
    assert len(problems) == 5, problems
    for needle in ("1 private messages, the server sent 20 and 2", "had 3 clients and 1 late",
                   "compressors",
                   "enable() returned []", "handshake"):
        assert any(needle in p for p in problems), (needle, problems)
    off = broadcast.Sample("off", 3, 1, {"enabled": []}, ready, dict(server, codecs={}),
                           received)
    assert off.problems() == ["negotiated ['permessage-deflate; server_max_window_bits=12']"]


def _clients_against(messages: list[str], broadcasts: int) -> subprocess.CompletedProcess[str]:
    """The benchmark's client process, one client and no late joiner, against a websockets
    server that sends ``messages`` then waits for the client to go."""
    import asyncio

    from websockets.asyncio.server import serve

    async def main() -> subprocess.CompletedProcess[str]:
        async def handler(ws):  # type: ignore[no-untyped-def]
            for message in messages:
                await ws.send(message)
            await ws.wait_closed()

        async with serve(handler, "127.0.0.1", 0) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "fdbench.broadcast_peer", "clients", "--port", str(port),
                "--clients", "1", "--broadcasts", str(broadcasts), "--joiners", "0",
                cwd=BENCH_DIR, env=measure.bench_environ(), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(b"close\n"), 60)
            assert proc.returncode is not None
            return subprocess.CompletedProcess([], proc.returncode, out.decode(), err.decode())

    return asyncio.run(main())


@pytest.mark.timeout(120)
def test_broadcast_clients_check_every_message() -> None:
    """The clients accept the broadcasts in order with private updates between them, and
    fail on a broadcast missing, and on a message that is neither."""
    update, private = broadcast_peer.update, broadcast_peer.private
    done = _clients_against([update(0), private(5), update(1), update(2)], 3)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[1])
    assert (result["broadcasts"], result["privates"]) == (3, 1)
    for wrong in ([update(0), update(2), update(1)],
                  [update(0), private(5)[:-1] + " ", update(1), update(2)]):
        done = _clients_against(wrong, 3)
        assert done.returncode != 0 and "AssertionError" in done.stderr, done.stderr


#: Churn in a tiny run: 6 clients, 2 late joiners, 2 leavers, 40 broadcasts.
TINY_CHURN = dataclasses.replace(broadcast.MIXED, clients=(6,), min_broadcasts=40,
                                 max_broadcasts=40, late_fraction=0.34, leave_fraction=0.34,
                                 repeats=1, timeout=100)


def test_broadcast_leavers_are_spread_and_never_a_leader() -> None:
    for clients, count, processes in ((6, 2, 1), (100, 5, 1), (10_000, 500, 2), (7, 4, 3)):
        points = broadcast_peer.leave_points(clients, 400, count, processes)
        heads = broadcast_peer.leaders(clients, processes)
        assert len(points) == count and not set(points) & set(heads)
        assert all(0 < k < 400 for k in points.values())
        assert sorted(points.values()) == list(points.values())  # spread over the run
    assert broadcast_peer.leaders(10, 3) == [0, 3, 6]
    assert [len(s) for s in broadcast_peer.shares(10, 3)] == [3, 3, 4]
    assert TINY_CHURN.leavers(6) == 2 and broadcast.QUICK.leavers(100) == 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("per_process", [5_000, 3])
def test_broadcast_leavers_get_exactly_what_was_sent_them(per_process: int) -> None:
    """Two of six clients close part-way (one, or two client processes): each client,
    leavers included, received exactly what the server sent it (counted on both sides),
    the server dropped the leavers, and the enabled server reported its compress-once
    counts and the costs of one compression and one follow at its connections'
    parameters (websockets' defaults)."""
    plan = dataclasses.replace(TINY_CHURN, clients_per_process=per_process)
    sample = broadcast.one_run("enabled", 6, plan)
    assert sample.problems() == []
    server, received = sample.server, sample.received
    assert (server["initial"], server["joined"], server["left"]) == (6, 2, 2)
    assert server["per_client"] == received["per_client"] and len(received["per_client"]) == 8
    points = broadcast_peer.leave_points(6, 40, 2, plan.processes(6))
    assert {ident: at for ident, at, _, _ in received["left"]} == points
    for ident, at, got, _ in received["left"]:
        # what was on its way when it closed, checked too: up to all 40, as the server
        # paces itself by the leaders' acknowledgements alone (at most 2 x ack_every
        # broadcasts ahead) and may have sent the rest before a slow leaver's close
        # reached it (seen on a loaded machine: got == 40)
        assert at <= got <= 40
    assert sample.ready["ready"] == 6 and received["clients"] == 8
    assert server["compressor_params"] == {"level 6 window 12 memLevel 5 strategy 0": 6}
    costs = server["costs"]
    assert costs["shared_ok"] and costs["compress_us"] > 0 and costs["follow_us"] >= 0
    assert server["codec"]["sent"]["compress_once_shares"] > 0
    assert sample.counts()["shared"] is not None and sample.counts()["private"] == \
        server["privates"]


def _fake_sample(mode: str, cpu_us: float, wire: float, **server: object) -> broadcast.Sample:
    """A Sample of 100 deliveries (no processes) with ``cpu_us`` and ``wire`` bytes each."""
    report = {"cpu": cpu_us * 100 / 1e6, "deliveries": 100, "broadcast_deliveries": 90,
              "privates": 10, "initial": 3, "joined": 1, "left": 1,
              "per_client": {"0": [40, 5], "1": [20, 5]}, "codecs": {}, **server}
    received = {"broadcasts": 90, "privates": 10, "bytes": 100 * wire,
                "per_client": {"0": [40, 5], "1": [20, 5]}, "left": [[1, 20, 20, 5]]}
    return broadcast.Sample(mode, 3, 1, {"enabled": []}, {"extensions": {}}, report, received,
                            1)


def test_broadcast_checks_each_client_and_the_leavers() -> None:
    good = _fake_sample("stock", 10, 300)
    assert not [p for p in good.problems() if "client" in p or "leav" in p]
    bad = _fake_sample("stock", 10, 300, left=0, per_client={"0": [40, 5], "1": [21, 5]})
    problems = bad.problems()
    assert any("1 clients received other counts" in p and "1: [21, 5] / [20, 5]" in p
               for p in problems), problems
    assert any("(0 leavers), not 3 and 1 (1)" in p for p in problems), problems


def _fake_row(runs: list[tuple[float, float, float, float, float]],
              once: dict[str, object] | None) -> broadcast.Row:
    """A Row of runs (stock µs, fastdeflate µs, off µs, stock bytes, fastdeflate bytes)."""
    row = broadcast.Row(3, 40, 1, leavers=1)
    for stock, fast, off, stock_bytes, fast_bytes in runs:
        row.samples["stock"].append(_fake_sample("stock", stock, stock_bytes))
        row.samples["off"].append(_fake_sample("off", off, 1028))
        row.samples["enabled"].append(_fake_sample(
            "enabled", fast, fast_bytes, codec={"compress_once": once,
                                                "sent": {"compress_once_shares": 60}},
            costs={"compress_us": 20.0, "follow_us": 0.5, "shared_ok": True},
            compressor_params={"level 6 window 12 memLevel 5 strategy 0": 3}))
    return row


COMPRESS_ONCE = {"shared": 60, "led": 10, "alone": {"joined": 5, "diverged": 3,
                                                   "start_over": 2},
                 "rejoined": 4, "start_overs": 1, "cohorts": 1}


def test_broadcast_columns_give_the_worst_run() -> None:
    row = _fake_row([(40, 12, 10, 360, 370), (40, 15, 10, 360, 360), (40, 11, 10, 360, 380)],
                    COMPRESS_ONCE)
    assert row.off_ratio() == pytest.approx(1.2)
    assert row.worst_off_ratio() == pytest.approx(1.5)
    assert row.worst_bytes_ratio() == pytest.approx(380 / 360)
    cells = [c.strip() for c in broadcast.table([row]).splitlines()[2].strip("|").split("|")]
    assert cells[0] == "3 (+1 late, −1 leaving)"
    assert cells[7:9] == ["1.20x", "1.50x"] and cells[13] == "1.056x"
    rows = summary.broadcast_rows([row], "mixed")
    off, wire = rows[2], rows[3]
    assert "in each run: compression off, fastdeflate" in off[0]
    assert off[1:] == ["10.0 / 10.0 / 10.0", "12.0 / 15.0 / 11.0", "1.20x / 1.50x / 1.10x"]
    assert wire[3] == "1.028x / 1.000x / 1.056x"


def test_broadcast_breakdown_adds_up_to_the_fastdeflate_column() -> None:
    """Each part = count x cost / deliveries (100 here), the library's path = off's CPU,
    the remainder what is left of the fastdeflate column; without the codec's
    compress_once counts, those parts are n/a and in the remainder."""
    row = _fake_row([(40, 12, 10, 360, 370)] * 3, COMPRESS_ONCE)
    parts = row.breakdown()
    assert parts["off"] == pytest.approx(10)
    assert parts["shared"] == pytest.approx(60 * 0.5 / 100)
    for key, count in (("led", 10), ("joined", 5), ("diverged", 3), ("start_over", 2),
                       ("private", 10)):
        assert parts[key] == pytest.approx(count * 20 / 100)
    assert sum(parts.values()) == pytest.approx(12)  # type: ignore[arg-type]
    text = broadcast.breakdown_table([row])
    assert "| rejoined" in text and "| stragglers' cohorts" in text and "n/a" not in text
    assert "fastdeflate (all of the above)" in text
    legend = broadcast.breakdown_legend([row])
    assert "one compression 20.0 µs, one follow 0.50 µs" in legend
    assert "level 6 window 12 memLevel 5 strategy 0" in legend
    before = _fake_row([(40, 12, 10, 360, 370)], None)  # the codec reports no counts yet
    parts = before.breakdown()
    assert parts["led"] is None and parts["shared"] == pytest.approx(0.3)
    assert parts["remainder"] == pytest.approx(12 - 10 - 0.3 - 2)  # private messages known
    assert "n/a" in broadcast.breakdown_table([before])
    assert "reports no `compress_once` counts" in broadcast.breakdown_legend([before])


def test_broadcast_merges_client_processes() -> None:
    merged = broadcast.merge([
        {"ready": 3, "extensions": {"a": 3}, "handshake_exact": True, "late": [[1, 2, 3]],
         "per_client": {"0": [1, 2]}},
        {"ready": 4, "extensions": {"a": 4, "b": 1}, "handshake_exact": False,
         "late": [[4, 5, 6]], "per_client": {"3": [7, 8]}}])
    assert merged == {"ready": 7, "extensions": {"a": 7, "b": 1}, "handshake_exact": False,
                      "late": [[1, 2, 3], [4, 5, 6]], "per_client": {"0": [1, 2], "3": [7, 8]}}


# --- memory --------------------------------------------------------------------------------


def test_memory_sees_zlib_state() -> None:
    messages = payloads.varying(1024, 50)
    cfg = memory_table.CONFIGS[1]  # websockets' defaults
    stock = memory_table.measure_pairs(*memory_table.COLUMNS["stock (stdlib zlib)"](cfg),
                                       messages, 50)
    fast = memory_table.measure_pairs(*memory_table.COLUMNS["fastdeflate (compiled)"](cfg),
                                      messages, 50)
    # deflate state for window 12, memLevel 5 ~ 2**14 + 2**14 bytes: tracemalloc sees it
    assert stock[0] > 32 * 1024
    assert fast[0] < 4 * 1024  # fastdeflate allocates on first use
    assert stock[1] >= stock[0]
    # each pair sent its own message holds its own busy streams (one message sent to all
    # would be compressed once and shared: a few KiB per pair, which this table once
    # reported as a connection's cost)
    assert fast[1] > stock[1] / 2, (fast, stock)
    # one pair after a message holds live zlib streams (many share a few: see
    # tests/test_live_states.py), and tracemalloc sees them
    import fastdeflate._fastdeflate as ext

    ext._forget_kept()  # no spare stream (given back by the 50 pairs) to reuse
    previous = ext.set_live_states(1 << 30)  # its own streams, none taken from others
    try:
        one = memory_table.measure_pairs(
            *memory_table.COLUMNS["fastdeflate (compiled)"](cfg), messages, 1)
    finally:
        ext.set_live_states(previous)
    assert one[1] > 32 * 1024


# --- many connections: the codec -----------------------------------------------------------

#: A tiny plan of the many-connection codec (the in-process engines only).
TINY_CONNECTIONS = connections.Plan(connections=(1, 3), engines=("stdlib", "fastdeflate"),
                                    messages=12, repeats=2)


def test_connections_fleet_serves_round_robin_and_each_stream_goes_on() -> None:
    pool = payloads.varying(1024, 40)
    fleet = connections.Fleet(engines.engine("stdlib"), engines.Settings(), 3, pool)
    first, second = fleet.schedule(7), fleet.schedule(5)
    order = [fleet.cycles.index(cycle) for cycle, _ in first + second]
    assert order == [0, 1, 2] * 4
    starts = [(c * connections.STRIDE) % len(pool) for c in range(3)]
    for c in range(3):  # each connection walks its own stream, where it stopped last time
        mine = [m for (cycle, m), i in zip(first + second, order) if i == c]
        assert mine == [pool[(starts[c] + k) % len(pool)] for k in range(4)]
    assert fleet.positions == [starts[c] + 4 for c in range(3)]


def test_connections_fleet_streams_are_real_rfc7692_streams() -> None:
    """Each connection's payloads decode with an independent decoder of its own."""
    pool = payloads.varying(1024, 64)
    settings = engines.Settings(window_bits=12, mem_level=5)
    fleet = connections.Fleet(engines.engine("fastdeflate"), settings, 4, pool)
    sent: dict[int, list[bytes]] = {c: [] for c in range(4)}
    payload_of: dict[int, list[bytes]] = {c: [] for c in range(4)}
    for cycle, message in fleet.schedule(40):
        c = fleet.cycles.index(cycle)
        sent[c].append(message)
        payload_of[c].append(cycle(message))
    for c in range(4):
        assert inflate(payload_of[c], window_bits=12) == sent[c]


def test_connections_columns_run_busy_and_parked() -> None:
    """The in-process fastdeflate column keeps every connection busy (a park-after
    longer than any wait between its messages); the 'parked' column sets park-after 0 in
    its own process, and its 20 connections (more than 16 live streams) are parked and
    restored between messages, yet decode like the others."""
    from fastdeflate import _fastdeflate as ext

    previous = ext.set_park_after(7)
    try:
        with connections.busy_connections(["stdlib", "fastdeflate"]):
            assert ext.set_park_after(connections.BUSY_PARK_AFTER) == connections.BUSY_PARK_AFTER
        assert ext.set_park_after(7) == 7  # restored
        engines.engine("fastdeflate-parked").make_cycle(engines.Settings())
        assert ext.set_park_after(7) == 0.0  # what the parked column's process runs with
    finally:
        ext.set_park_after(previous)
    plan = dataclasses.replace(TINY_CONNECTIONS, connections=(20,), settings=((12, 5),),
                               engines=("stdlib", "fastdeflate", "fastdeflate-parked"))
    (cell,), notes = connections.measure(plan)
    assert set(cell.series) == {"stdlib", "fastdeflate", "fastdeflate-parked"}
    assert cell.isolated == {"fastdeflate-parked"} and "subprocess" in notes["fastdeflate-parked"]
    assert 0.95 < cell.size_ratio("fastdeflate-parked") < 1.05
    assert "parked" in connections.table([cell])


def test_connections_table_tiny_run() -> None:
    cells, notes = connections.measure(TINY_CONNECTIONS)
    assert [c.key() for c in cells] == [(12, 5, 1), (12, 5, 3), (15, 8, 1), (15, 8, 3)]
    for cell in cells:
        assert set(cell.series) == {"stdlib", "fastdeflate"} and not cell.missing
        assert cell.messages == 12 and not cell.sequential
        assert cell.warmup == (6 if cell.window_bits == 12 else 34)
        for series in cell.series.values():
            assert [r.cycles for r in series.runs] == [12, 12]
            assert all(r.bytes_in == 12 * 1024 and 0 < r.bytes_out < r.bytes_in
                       for r in series.runs)
        assert cell.speedup("fastdeflate") > 0
        assert 0.9 < cell.size_ratio("fastdeflate") < 1.1
    lines = connections.table(cells).splitlines()
    assert len(lines) == 2 + 4
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    assert header == ["settings", "connections", "messages/run", "stock µs", "fastdeflate µs",
                      "fastdeflate vs stock: speed, size"]
    row = [c.strip() for c in lines[3].strip("|").split("|")]
    assert row[:3] == ["window 12 / memLevel 5", "3", "12"]
    assert row[3].endswith("%)") and row[4].endswith("%)")
    speed, size = row[5].split(", ")
    assert speed.endswith("x") and float(size) > 0
    legend = connections.legend(cells, notes, TINY_CONNECTIONS)
    assert "**stock**" in legend and "**fastdeflate**" in legend and "zlib" in legend


def test_connections_count_reaches_the_codec() -> None:
    """N connections hold N compressor+decompressor states at once (traced bytes of
    stdlib zlib, whose state per connection is fixed): the connection count is not just
    a label."""
    plan = dataclasses.replace(TINY_CONNECTIONS, settings=((15, 8),), engines=("stdlib",),
                               repeats=1)
    peaks = {}
    tracemalloc.start()
    try:
        for n in (1, 40):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            (cell,), _ = connections.measure(dataclasses.replace(plan, connections=(n,)))
            assert cell.connections == n and cell.messages == max(12, 2 * n)
            peaks[n] = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # window 15 / memLevel 8: over 256 KiB of zlib state per connection; both peaks hold
    # the 8 connections per_connection_bytes samples first
    assert peaks[40] - peaks[1] > (40 - 8 - 7) * 256 * 1024, peaks


def test_connections_memory_guard_runs_engines_apart_or_leaves_them_out() -> None:
    plan = dataclasses.replace(TINY_CONNECTIONS, connections=(3,), settings=((12, 5),),
                               repeats=1)
    pool = payloads.varying(1024, payloads.pool_size(1024))
    settings = plan.codec_settings(12, 5)
    per = {name: connections.per_connection_bytes(engines.engine(name), settings, pool,
                                                  plan.warmup(12)) for name in plan.engines}
    assert all(b > 10 * 1024 for b in per.values()), per
    # room for 3 connections of either engine, not for both at once
    room = 3 * (max(per.values()) + min(per.values()) / 2)
    (cell,), _ = connections.measure(dataclasses.replace(plan, max_memory=int(room)))
    assert cell.sequential and set(cell.series) == set(plan.engines) and not cell.missing
    assert "(not interleaved)" in connections.table([cell])
    (cell,), _ = connections.measure(dataclasses.replace(plan, max_memory=1))
    assert cell.series == {} and set(cell.missing) == set(plan.engines)
    assert all("left out" in reason for reason in cell.missing.values())
    text = connections.table([cell])
    assert "— [1]" in text and "[1] left out" in connections.legend([cell], {}, plan)


class _WideWindow:
    """An engine that compresses with window 15 whatever it is asked for."""

    def make_cycle(self, settings: engines.Settings) -> engines.Cycle:
        wide = dataclasses.replace(settings, window_bits=15)
        return engines.engine("stdlib").make_cycle(wide)


class _Broken:
    def make_cycle(self, settings: engines.Settings) -> engines.Cycle:
        raise ValueError("memLevel not supported")


def test_connections_an_engine_that_cannot_serve_the_settings_is_reported() -> None:
    pool = payloads.varying(1024, 64)
    narrow = engines.Settings(window_bits=9, mem_level=1)
    for name in ("stdlib", "fastdeflate"):
        assert connections.check_window(engines.engine(name), narrow, pool) is None
    reason = connections.check_window(_WideWindow(), narrow, pool)  # type: ignore[arg-type]
    assert reason is not None and "error" in reason.lower()
    assert connections.check_window(_Broken(), narrow, pool) == (  # type: ignore[arg-type]
        "ValueError: memLevel not supported")


@requires_peer("isal")
def test_connections_isal_runs_only_in_a_subprocess() -> None:
    isal_loaded = "isal.isal_zlib" in sys.modules
    plan = dataclasses.replace(TINY_CONNECTIONS, engines=("stdlib", "isal"), connections=(2,),
                               repeats=1)
    cells, notes = connections.measure(plan)
    assert ("isal.isal_zlib" in sys.modules) == isal_loaded  # not imported here
    assert "subprocess pid" in notes["isal"]
    assert _subprocess_pid(notes["isal"]) != os.getpid()
    for cell in cells:
        assert cell.isolated == {"isal"} and not cell.missing, cell.missing
        assert [r.cycles for r in cell.series["isal"].runs] == [12]
        assert 0 < cell.series["isal"].size_fraction() < 1
    assert "isal vs stock: speed, size" in connections.table(cells)


# --- many connections: a real server's memory ----------------------------------------------

# One mark with one reason: the Python version first (below 3.11 no test set lists autobahn
# absent, so its peer reason there would fail the skip check), then the peer.
SERVER_LIBRARIES = [pytest.param(lib, marks=requires_autobahn()) if lib == "autobahn" else lib
                    for lib in server_memory.LIBRARIES]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("library", SERVER_LIBRARIES)
def test_server_memory_is_measured_in_a_real_server_on_the_claimed_codec(library: str) -> None:
    """A real server of each library, stock and enabled: the server itself reports N
    connections open and the codec objects they hold (stdlib zlib or fastdeflate's
    compiled codec), and RSS per connection after one message is positive."""
    plan = server_memory.Plan(connections=(24,), libraries=(library,), timeout=200)
    (row,) = server_memory.measure(plan)
    assert row.problems() == []
    for mode, codec in (("stock", server_memory.STOCK), ("enabled", server_memory.FAST)):
        (sample,) = row.samples[mode]
        assert sample.hello["pid"] != os.getpid()
        assert sample.hello["implementation"] == "cython"
        assert (library in sample.hello["enabled"]) == (mode == "enabled")
        assert sample.counts == {"idle": 24, "used": 24, "quiet": 24}
        assert sample.codecs["used"] == {name: 24 for name in codec}
        assert sample.codecs["quiet"] == {name: 24 for name in codec}
        assert sum(sample.extensions.values()) == 24
        assert all(h.startswith("permessage-deflate") for h in sample.extensions)
        assert sample.per_connection("used") > 0
    # 24 connections, 16 live streams per parameter set: quiet, 8 of them are parked
    # (the server waited for that; stock has nothing to wait for)
    enabled, stock = row.samples["enabled"][0], row.samples["stock"][0]
    assert 9 < enabled.waited < 60 and stock.waited < 1
    assert enabled.per_connection("quiet") < enabled.per_connection("used")
    lines = server_memory.table([row]).splitlines()
    assert len(lines) == 3
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cells[:2] == [library, "24"] and all(c.endswith(" KiB") for c in cells[2:4])
    assert "CHECK FAILED" not in server_memory.legend(plan, [row])


@pytest.mark.timeout(240)
@pytest.mark.parametrize("library", ["aiohttp", "wsproto"])
def test_server_memory_without_context_takeover_is_negotiated(library: str) -> None:
    """The 'no-takeover' offer reaches the server: every connection negotiates
    server_no_context_takeover, and enabled connections hold fastdeflate's codec."""
    plan = server_memory.Plan(connections=(12,), libraries=(library,), timeout=200,
                              offers=("no-takeover",))
    (row,) = server_memory.measure(plan)
    assert row.problems() == [] and row.label == f"{library}, no takeover"
    for mode in server_memory.MODES:
        (sample,) = row.samples[mode]
        assert sum(sample.extensions.values()) == 12
        assert all("server_no_context_takeover" in h for h in sample.extensions)
    # between messages aiohttp keeps its codec objects; wsproto (both directions without
    # context takeover here) makes one per message, stock or enabled
    held = {"aiohttp": 12, "wsproto": 0}[library]
    for mode, codecs in (("enabled", server_memory.FAST), ("stock", server_memory.STOCK)):
        used = row.samples[mode][0].codecs["used"]
        assert used == ({name: held for name in codecs} if held else {}), (mode, used)


def test_server_memory_says_why_tornado_cannot_serve_the_no_takeover_offer() -> None:
    plan = server_memory.Plan(connections=(5,), libraries=("tornado",), offers=("no-takeover",))
    (row,) = server_memory.measure(plan)
    assert not row.measured and all(not s for s in row.samples.values())
    assert "not measured: tornado's header parser" in server_memory.legend(plan, [row])


@pytest.mark.timeout(240)
def test_server_memory_connection_count_reaches_the_server() -> None:
    for n in (3, 11):
        sample = server_memory.one_run("websockets", False, n, timeout=200)
        assert sample.connections == n
        assert sample.counts == {"idle": n, "used": n, "quiet": n}
        assert sample.codecs["idle"] == {"zlib.Compress": n, "zlib.Decompress": n}


def test_server_memory_reports_a_run_that_misses_its_claim() -> None:
    sample = server_memory.Sample(
        5, {"base": 0, "idle": 5 << 10, "used": 50 << 10, "quiet": 50 << 10},
        {"idle": 5, "used": 4, "quiet": 5},
        {"idle": {}, "used": {"zlib.Compress": 5, "zlib.Decompress": 5}, "quiet": {}}, {}, {})
    assert sample.per_connection("used") == 10 << 10
    problems = sample.problems(enabled=True)
    assert any("4 connections open used" in p for p in problems)
    assert any("codec objects" in p for p in problems)
    assert sample.problems(enabled=False) == ["4 connections open used, not 5"]


@pytest.mark.timeout(120)
def test_server_memory_a_server_that_fails_is_reported_and_the_others_go_on() -> None:
    plan = server_memory.Plan(connections=(2,), libraries=("nonexistent", "websockets"),
                              timeout=100)
    broken, working = server_memory.measure(plan)
    assert not broken.measured and "exited early" in broken.error
    assert broken.samples["enabled"] == []  # not tried again after the first failure
    assert working.measured and working.problems() == []
    text = server_memory.table([broken, working])
    assert "| nonexistent |           2 | run failed (below) |" in text
    assert "CHECK FAILED (2 connections): run failed: stock, RuntimeError" in (
        server_memory.legend(plan, [broken, working]))
    assert [r[0].split()[0] for r in summary.server_memory_rows([broken, working])] == [
        "websockets"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a finite hard limit (Linux)")
def test_server_peer_raises_the_open_file_limit_as_far_as_it_may() -> None:
    """Here (Linux): up to the hard limit, in a process of its own."""
    code = ("import resource; from fdbench import server_peer as p; "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit("
            "resource.RLIMIT_NOFILE)[1])); new = p.raise_fd_limit(); "
            "print(new, *resource.getrlimit(resource.RLIMIT_NOFILE))")
    done = subprocess.run([sys.executable, "-c", code], cwd=BENCH_DIR, env=dict(
        os.environ, PYTHONPATH=str(BENCH_DIR)), capture_output=True, text=True, timeout=60)
    new, soft, hard = done.stdout.split()
    assert new == soft == hard and int(hard) > 64, done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="Windows has no resource module")
def test_server_peer_fd_limit_where_the_hard_limit_is_infinite(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS: no finite hard limit, and the kernel refuses more than OPEN_MAX (10,240)."""
    import resource

    from fdbench import server_peer

    calls: list[tuple[int, int]] = []

    def setrlimit(kind: int, limits: tuple[int, int]) -> None:
        assert kind == resource.RLIMIT_NOFILE
        calls.append(limits)
        if limits[0] > 10240:
            raise ValueError("current limit exceeds maximum limit")

    monkeypatch.setattr(resource, "getrlimit", lambda kind: (256, resource.RLIM_INFINITY))
    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    assert server_peer.raise_fd_limit() == 10240
    assert calls == [(65536, resource.RLIM_INFINITY), (10240, resource.RLIM_INFINITY)]
    calls.clear()  # already above OPEN_MAX: kept as it is
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (20000, resource.RLIM_INFINITY))
    assert server_peer.raise_fd_limit() == 20000 and calls == [(65536, resource.RLIM_INFINITY)]


def test_server_peer_without_resource_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has no ``resource`` module: nothing to raise."""
    from fdbench import server_peer

    monkeypatch.setitem(sys.modules, "resource", None)
    assert server_peer.raise_fd_limit() is None


def test_server_peer_rss_without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS and Windows have no /proc: RSS comes from psutil, and without psutil the
    error says what to install."""
    import builtins

    import psutil

    from fdbench import server_peer

    on_proc = server_peer.rss_bytes()
    real_open = builtins.open

    def no_proc(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path) == "/proc/self/status":  # (psutil reads /proc/<pid>/ on Linux)
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    from_psutil = server_peer.rss_bytes()
    assert abs(from_psutil - psutil.Process().memory_info().rss) < 8 << 20
    assert abs(from_psutil - on_proc) < 64 << 20
    monkeypatch.setitem(sys.modules, "psutil", None)
    with pytest.raises(RuntimeError, match="pip install psutil"):
        server_peer.rss_bytes()


def test_codec_types_stops_at_the_depth_asked() -> None:
    nested = [[[zlib.compressobj()]]]
    assert library_table.codec_types(nested, depth=2) == set()
    assert library_table.codec_types(nested, depth=3) == {"zlib.Compress"}
    assert library_table.codec_types(nested) == {"zlib.Compress"}


# --- run.py, as a user runs it ---------------------------------------------------------------


def run_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH_DIR / "run.py"), "--out", str(tmp_path), "--no-progress",
         "--sizes", "1024", "--cycles", "20", "--repeats", "1", "--connections", "1,3",
         "--server-connections", "6", "--servers", "websockets,wsproto",
         "--broadcast-clients", "3", "--mixed-connections", "1,3", *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )


@requires_peer("matplotlib")
@pytest.mark.timeout(300)
def test_run_py_short(tmp_path: Path) -> None:
    done = run_script(tmp_path)
    assert done.returncode == 0, done.stderr
    md, png = tmp_path / "quick.md", tmp_path / "quick-codec.png"
    assert f"results: {md}" in done.stdout and f"chart: {png}" in done.stdout
    for chart in (png, tmp_path / "quick-connections.png", tmp_path / "quick-server-memory.png",
                  tmp_path / "quick-broadcast.png", tmp_path / "quick-broadcast-mixed.png",
                  tmp_path / "quick-frontier.png",
                  tmp_path / "quick-mixed.png"):
        assert f"chart: {chart}" in done.stdout
        assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| workload " in done.stdout and "fastdeflate µs" in done.stdout
    text = md.read_text(encoding="utf-8")
    for needle in ("## 1. The original table", "Python", "stdlib zlib", "Cython",
                   "isal", "load average", "## 2. Many connections",
                   "| window 12 / memLevel 5 |           3 |",
                   "window 15 / memLevel 8, 3 connections round-robin (µs/msg)",
                   "websockets server, 6 connections, RSS per connection",
                   "wsproto server, 6 connections, RSS per connection",
                   "## 6. Broadcast", "| 3 (+1 late) |            100 |",
                   "websockets broadcast() of ~1 KB JSON to 3 clients, server CPU per "
                   "delivery (µs)", "## 8. A mixed stream",
                   "| send uncompressed                    |           3 |",
                   "3 connections, interleaved, compress_or_skip (µs/msg)"):
        assert needle in text
    assert "## 3." not in text and "CHECK FAILED" not in text
    if peer_installed("isal"):
        assert "subprocess" in text  # isal's column, measured in a process of its own


@requires_peer("matplotlib")
@pytest.mark.timeout(300)
def test_run_py_full_writes_every_part(tmp_path: Path) -> None:
    # Part 3's many-connection runs on 2 and 3 connections, not --full's 100 and 1,000
    # (each of those connections is filled with 32 messages per library and column first:
    # most of this test's time, for the same code).
    # Part 9 on one server, one direction, 1 s runs of 200 KB snapshots and 3 clients.
    done = run_script(tmp_path, "--full", "--clients", "2", "--engines", "stdlib,fastdeflate",
                      "--library-connections", "2,3", "--latency-libraries", "websockets",
                      "--latency-directions", "send", "--latency-seconds", "1",
                      "--latency-size", "200000", "--latency-clients", "3")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "full.md").read_text(encoding="utf-8")
    assert "## Summary" in done.stdout
    for heading in ("## Summary", "## 1.", "## 2.", "## 3.", "### Many connections", "## 4.",
                    "## 5.", "## 6.", "### With churn: private messages, late joiners and leavers", "#### Where fastdeflate's CPU goes", "## 7.", "## 8.", "## 9."):
        assert heading in text
    assert "CHECK FAILED" not in text
    for part in ("codec", "connections", "server-memory", "libraries", "end-to-end", "memory",
                 "broadcast", "broadcast-mixed", "frontier", "mixed", "latency"):
        assert (tmp_path / f"full-{part}.png").read_bytes()[:4] == b"\x89PNG"


def test_run_py_rejects_unknown_part(tmp_path: Path) -> None:
    done = run_script(tmp_path, "--parts", "nonsense")
    assert done.returncode == 2 and "unknown part" in done.stderr


def test_run_py_rejects_unknown_server(tmp_path: Path) -> None:
    done = run_script(tmp_path, "--servers", "websockets,nonsense")
    assert done.returncode == 2 and "unknown server 'nonsense'" in done.stderr


def test_run_py_rejects_unknown_latency_server(tmp_path: Path) -> None:
    done = run_script(tmp_path, "--latency-libraries", "websockets,nonsense")
    assert done.returncode == 2 and "unknown latency server 'nonsense'" in done.stderr


def test_the_short_run_leaves_the_latency_part_out() -> None:
    assert "latency" in parts.PARTS and "latency" not in parts.DEFAULT_PARTS


# --- without the optional peers (as on wheel targets that have no wheel of them) ------------


@pytest.mark.timeout(400)
def test_benchmark_tests_skip_cleanly_without_the_optional_peers(tmp_path: Path) -> None:
    """zlib-ng, isal, matplotlib and autobahn made unimportable (here and in subprocesses):
    the tests that need one skip with the peer's reason, the others pass (run.py still
    checks its arguments; the per-library tests run without autobahn); nothing errors."""
    done = pytest_without_peers(
        ["zlib_ng", "isal", "matplotlib", "autobahn"], tmp_path, __file__, "-v", "-rs",
        "-k", "zlib or isal or run_py or codec_objects or per_library or library_round",
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    outcomes = {line.split("::")[1].split()[0]: line.split()[1]
                for line in done.stdout.splitlines()
                if "::" in line and line.split()[1:2] in (["PASSED"], ["SKIPPED"])}
    assert {name for name, outcome in outcomes.items() if outcome == "SKIPPED"} == {
        "test_each_column_round_trips_real_rfc7692_payloads[zlib-ng-takeover]",
        "test_each_column_round_trips_real_rfc7692_payloads[zlib-ng-no_takeover]",
        "test_every_cycle_verifies_its_round_trip[zlib-ng]",
        "test_zlib_ng_column_uses_zlib_ng",
        "test_aiohttps_zlib_ng_backend_is_measured_beside_stock_and_enabled",
        "test_persistent_columns_take_over_context_or_not[zlib-ng]",
        "test_isal_runs_only_in_a_subprocess_and_round_trips",
        "test_connections_isal_runs_only_in_a_subprocess",
        "test_run_py_short",
        "test_run_py_full_writes_every_part",
    }, done.stdout[-4000:]
    assert {name for name, outcome in outcomes.items() if outcome == "PASSED"} >= {
        "test_column_codec_objects_are_the_advertised_ones",
        "test_every_per_library_module_is_found_and_usable",
        "test_library_round_trips_are_checked[stock]",
        "test_library_round_trips_are_checked[enabled]",
        "test_run_py_rejects_unknown_part",
        "test_run_py_rejects_unknown_server",
    }, done.stdout[-4000:]
    for peer in ("zlib_ng", "isal", "matplotlib"):
        assert f"optional test peer {peer} is not installed" in done.stdout
