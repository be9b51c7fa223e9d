"""The latency benchmark (``benchmarks/fdbench/latency.py``) measures what it says: a tiny
plan end to end on websockets and aiohttp, both directions, every mode, and its checks
(no timing assertions beyond "a positive number"); and the control with the big connection
idle.

A mode that measured something else — compression negotiated with it off, stock's codec
where fastdeflate's should run or the reverse, echoes or snapshots that did not come back
intact, too few snapshots — fails its run's checks, and this test with it.
"""

from __future__ import annotations

import asyncio
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from _skipcheck import peer_installed  # noqa: E402
from fdbench import latency, latency_peer  # noqa: E402

INSTALLED = tuple(lib for lib in ("websockets", "aiohttp") if peer_installed(lib))
TINY = latency.Plan(libraries=INSTALLED, repeats=1, seconds=1.0, warmup=0.5, size=200_000,
                    clients=3, pool=3, timeout=60)


@pytest.fixture(scope="module")
def rows() -> list[latency.Row]:
    return latency.measure(TINY)


@pytest.mark.timeout(240)
@pytest.mark.skipif(not INSTALLED, reason="neither websockets nor aiohttp")
def test_every_mode_measures_what_it_claims(rows: list[latency.Row]) -> None:
    assert [(r.library, r.direction) for r in rows] == [
        (lib, d) for lib in INSTALLED for d in ("send", "receive", "idle")]
    for row in rows:
        assert row.error == "" and row.problems(TINY) == [], (row.library, row.problems(TINY))
        for mode in TINY.modes:
            (sample,) = row.samples[mode]
            for what in ("p50", "p99", "max"):
                assert math.isfinite(sample.ms(what)) and sample.ms(what) > 0
            assert sample.ms("p50") <= sample.ms("p99") <= sample.ms("max")
            assert sample.small["samples"] > 0 and sample.window > 0
            # the window's CPU is read from outside in clock ticks (10 ms): a quiet server
            # (compression off, 1 s) may use less than one; its whole run uses more
            assert 0 <= sample.cpu < sample.server["cpu"]
            assert 0 < sample.small["cpu"] < sample.window * 4
            offers = {sample.big["extensions"], *sample.small["extensions"]}
            if mode == "off":
                assert offers == {""}
            else:
                assert all(o.startswith("permessage-deflate") for o in offers), offers
            if row.direction == "idle":  # (a close frame)
                assert sample.big["messages"] == 0 and sample.big_bytes() < 100
            elif mode == "off":
                assert sample.big_bytes() > TINY.size  # sent as it is, headers on top
            else:
                assert sample.big_bytes() < TINY.size / 2  # JSON compresses
            traffic = sample.server["traffic"]
            ran = traffic["sent"]["messages"] + traffic["received"]["messages"]
            assert (ran > 0) == (mode == "fastdeflate"), (row.library, mode, traffic)
            assert (row.library in sample.hello["enabled"]) == (mode == "fastdeflate")
            if mode == "fastdeflate" and row.direction == "idle":  # no call is a snapshot's
                assert sample.server["codec"] == {"calls": 0, "seconds": 0.0}
            elif mode == "fastdeflate":  # every snapshot's codec calls timed, wherever they ran
                assert sample.server["codec"]["calls"] >= sample.big_messages()
                assert 0 < sample.server["codec"]["seconds"] < sample.server["cpu"]
                assert sample.codec_ms() > 0
            else:
                assert sample.codec_ms() is None
            stats = sample.server["stats"]
            assert stats["small_connections"] == TINY.clients and stats["big_connections"] == 1
            if row.direction == "send":
                assert stats["big_sent"] >= sample.big["messages"] >= 3
            elif row.direction == "idle":
                assert stats["big_sent"] == stats["big_received"] == 0
            else:
                assert sample.big["messages"] >= stats["big_received"] >= 3
                assert stats["big_bad"] == 0


@pytest.mark.timeout(120)
@pytest.mark.skipif(not INSTALLED, reason="neither websockets nor aiohttp")
def test_the_window_cpu_is_read(rows: list[latency.Row]) -> None:
    """Some run's server used CPU over its window (a compressing one, 200 KB a time)."""
    assert max(s.cpu for r in rows for runs in r.samples.values() for s in runs) > 0


@pytest.mark.timeout(120)
@pytest.mark.skipif(not INSTALLED, reason="neither websockets nor aiohttp")
def test_tables_and_chart(rows: list[latency.Row], tmp_path: Path) -> None:
    lines = latency.table(rows, TINY).splitlines()
    assert len(lines) == 2 + len(rows) * len(TINY.modes)
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]]
    assert [c[2] for c in cells] == list(TINY.modes) * len(rows)
    p99 = {(r.library, r.direction, m): r.median(m, "p99") for r in rows for m in TINY.modes}
    col = latency.HEADER.index
    for c in cells:
        assert all(float(x) > 0 for x in c[3:6])
        if c[2] == "off":
            assert c[col("p99 x of off")] == "1.00x"
        if c[1] == "idle":  # the control: against itself, nothing
            assert c[col("p99 x of idle")] == ""
            assert c[col("codec CPU ms per snapshot")] == "—"
            assert c[col("MB per snapshot on the wire")] == "—"
        else:  # against the same mode's p99 with the big connection idle
            assert c[col("p99 x of idle")] == (
                f"{p99[c[0], c[1], c[2]] / p99[c[0], 'idle', c[2]]:.2f}x"), c
    verdicts = latency.verdicts(rows, TINY).splitlines()
    assert len(verdicts) == 2 + len(rows) and "fastdeflate p99 x of off" in verdicts[0]
    assert "fastdeflate p99 x of idle" in verdicts[0]
    assert len(latency.runs_table(rows, TINY).splitlines()) == 2 + len(rows) * len(TINY.modes)
    legend = latency.legend(TINY, rows)
    assert "CHECK FAILED" not in legend and "Negotiated" in legend
    if peer_installed("matplotlib"):
        from fdbench import charts

        png = charts.latency_chart(rows, TINY, tmp_path / "latency.png")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _sample(mode: str, **changes: object) -> latency.Sample:
    deflate = "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"
    offer = "" if mode == "off" else deflate
    fast = mode == "fastdeflate"
    traffic = {"sent": {"messages": 40 if fast else 0, "bytes": 10 * TINY.size if fast else 0},
               "received": {"messages": 30 if fast else 0, "bytes": 100 if fast else 0}}
    fields = dict(
        library="websockets", direction="send", mode=mode,
        hello={"enabled": ["websockets"] if fast else [], "off_loop_setting": False},
        big={"extensions": offer, "messages": 10, "wrong": 0, "error": "", "wire": 1000},
        small={"extensions": {offer: TINY.clients}, "samples": 100, "wrong": 0, "cpu": 0.05,
               "p50": 1.0, "p99": 2.0, "max": 3.0},
        server={"traffic": traffic, "state": "enabled" if fast else "stock",
                "codec": {"calls": 10, "seconds": 0.1} if fast else None,
                "stats": {"small_connections": TINY.clients, "big_connections": 1,
                          "big_bad": 0, "big_sent": 10, "big_received": 0}},
        cpu=0.1, window=1.0)
    fields.update(changes)
    return latency.Sample(**fields)  # type: ignore[arg-type]


def test_the_checks_catch_a_mode_that_measured_something_else() -> None:
    for mode in TINY.modes:
        assert _sample(mode).problems(TINY) == [], mode
    deflate = _sample("stock").big["extensions"]
    # compression negotiated with it off, and not negotiated with it on
    off = _sample("off", big={**_sample("off").big, "extensions": deflate})
    assert any("compression off" in p for p in off.problems(TINY))
    stock = _sample("stock", small={**_sample("stock").small, "extensions": {"": 3}})
    assert any("not permessage-deflate" in p for p in stock.problems(TINY))
    # fastdeflate's codec in a stock run; stock's codec (fastdeflate idle) in a fastdeflate run
    assert any("codec ran" in p for p in _sample(
        "stock", server=_sample("fastdeflate").server).problems(TINY))
    idle = _sample("fastdeflate", server={**_sample("fastdeflate").server,
                                          "traffic": _sample("stock").server["traffic"]})
    assert any("less than the 10 snapshots" in p for p in idle.problems(TINY))
    assert any("enable() returned" in p for p in _sample(
        "fastdeflate", hello={"enabled": [], "off_loop_setting": False}).problems(TINY))
    # a snapshot whose codec calls were not timed (its CPU per snapshot would be short)
    untimed = {**_sample("fastdeflate").server, "codec": {"calls": 9, "seconds": 0.1}}
    assert any("codec calls timed" in p for p in _sample(
        "fastdeflate", server=untimed).problems(TINY))
    # damaged echoes, too few snapshots
    assert any("wrong messages" in p for p in _sample(
        "off", small={**_sample("off").small, "wrong": 1}).problems(TINY))
    assert any("snapshots went through" in p for p in _sample(
        "off", big={**_sample("off").big, "messages": 1}).problems(TINY))
    # the control: the big connection idle, and a snapshot that went through all the same
    quiet = {**_sample("fastdeflate").server, "codec": {"calls": 0, "seconds": 0.0},
             "stats": {**_sample("fastdeflate").server["stats"], "big_sent": 0}}
    assert _sample("fastdeflate", direction="idle", server=quiet,
                   big={**_sample("fastdeflate").big, "messages": 0}).problems(TINY) == []
    assert any("with the big connection idle" in p for p in _sample(
        "fastdeflate", direction="idle", server=quiet).problems(TINY))
    assert any("with the big connection idle" in p for p in _sample(
        "off", direction="idle", big={**_sample("off").big, "messages": 0}).problems(TINY))
    # small messages sent whose echo never came back
    assert any("never echoed" in p for p in _sample(
        "off", small={**_sample("off").small, "unanswered": 2}).problems(TINY))


def test_the_servers_connections_send_small_messages_at_once() -> None:
    """The servers' listening socket is made as a server binding a host and port makes
    its own, so asyncio turns Nagle's algorithm off on its connections: with it on, an
    open-loop client's echoes stay one message behind after any stall."""

    async def accepted_nodelay() -> int:
        sock = latency_peer._socket()
        answer: "asyncio.Future[int]" = asyncio.get_running_loop().create_future()

        def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("socket")
            answer.set_result(peer.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=sock)
        try:
            _, writer = await asyncio.open_connection(*sock.getsockname())
            result = await asyncio.wait_for(answer, 10)
            writer.close()
            return result
        finally:
            server.close()

    assert asyncio.run(accepted_nodelay()) == 1


def test_the_cli_rejects_what_it_does_not_know(tmp_path: Path) -> None:
    script = BENCH_DIR / "latency.py"
    for bad in (["--libraries", "websockets,nonsense"], ["--modes", "fast"],
                ["--server-env", "NOEQUALS"]):
        done = subprocess.run([sys.executable, str(script), *bad, "--out",
                               str(tmp_path / "x.md")], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2, (bad, done.stderr)
    assert set(latency_peer.LIBRARIES) == {
        "websockets", "uvicorn-websockets", "uvicorn-websockets-sansio", "uvicorn-wsproto",
        "aiohttp", "hypercorn", "tornado"}
    assert latency_peer.MODES["fastdeflate-on-loop"] == {"FASTDEFLATE_OFF_LOOP_SIZE": "0"}


def test_the_codec_clock_times_big_calls_and_changes_no_byte() -> None:
    """The server's codec clock (latency_peer.time_large_codec_calls) times a snapshot's
    calls, compressing and decompressing, not a small message's, and the subclasses it
    puts in place give the codec's own bytes."""
    import os

    import fastdeflate

    classes = fastdeflate.Compressor, fastdeflate.Decompressor
    data = os.urandom(100_000).hex().encode()  # 200 KB that compress to about half
    try:
        timings = latency_peer.time_large_codec_calls(fastdeflate, 10_000)
        timed, plain = fastdeflate.Compressor(level=6), classes[0](level=6)
        assert isinstance(timed, classes[0])
        assert timed.compress(b"x" * 200) == plain.compress(b"x" * 200)
        assert timings == []  # a small message: not timed
        payload = timed.compress_or_skip(data)
        assert payload == plain.compress_or_skip(data) and len(payload) > 10_000
        assert len(timings) == 1 and timings[0] > 0
        assert fastdeflate.Decompressor().decompress(payload) == data
        assert len(timings) == 2 and timings[1] > 0
    finally:
        fastdeflate.Compressor, fastdeflate.Decompressor = classes
