"""The fan-out benchmark (``benchmarks/fdbench/fanout.py``) measures what it says: one tiny
plan end to end on every library installed, and its run checks (no timing assertions).

The server of each library runs in a process of its own against the broadcast benchmark's
client process, which checks every message it receives: a server that sends a wrong
message makes that process fail, and the run with it (``row.error``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from _skipcheck import peer_installed  # noqa: E402
from fdbench import broadcast_peer, fanout, fanout_peer  # noqa: E402
from fdbench.report import fmt_ratio  # noqa: E402
from integrations._support import autobahn_unusable  # noqa: E402

#: The libraries this environment can serve (autobahn only where fastdeflate supports it).
INSTALLED = tuple(lib for lib in fanout_peer.LIBRARIES if peer_installed(lib)
                  and (lib != "autobahn" or not autobahn_unusable()))
#: 5 clients and 1 late joiner, 20 broadcasts, 1 private message (after the 10th).
TINY = fanout.Plan(libraries=INSTALLED, clients=(5,), min_broadcasts=20, max_broadcasts=20,
                   repeats=1, timeout=100)
FAST = "fastdeflate._fastdeflate.Compressor"


@pytest.mark.timeout(240)
@pytest.mark.skipif(not INSTALLED, reason="none of aiohttp, wsproto, tornado, autobahn")
def test_fanout_every_library_every_mode_delivers_what_it_claims() -> None:
    """Every library, in every mode: the clients received (and checked) exactly what the
    server sent, the late joiner came, the connections held the claimed compressor, and
    fastdeflate's helper compressed broadcasts once for several connections."""
    rows = fanout.measure(TINY)
    assert [r.library for r in rows] == list(INSTALLED)
    (point,) = broadcast_peer.join_points(20, 1)
    for row in rows:
        assert row.error == "" and row.problems() == [], (row.library, row.problems())
        for mode in fanout_peer.MODES:
            (sample,) = row.samples[mode]
            server, received = sample.server, sample.received
            assert sample.hello["library"] == row.library
            assert server["broadcast_deliveries"] == received["broadcasts"] == 5 * 20 + 20 - point
            assert server["privates"] == received["privates"] == 1
            assert received["clients"] == server["connections"] == 6
            compressors = {k: v for k, v in server["codecs"].items() if "ompress" in k
                           and "ecompress" not in k}
            assert compressors == {"stock": {"zlib.Compress": 6}, "off": {}}.get(mode, {FAST: 6})
            assert sample.cpu_us() > 0
            assert sample.ready["handshake_exact"]
        assert row.bytes("off") == 1024 + 4
        assert row.shared("stock") == row.shared("off") == 0
        assert row.shared("enabled-helper") > 0.5, row.library  # compressed once per group
        # the library's own loop too: a str encoded for each connection is equal bytes
        assert row.shared("enabled") > 0.5, row.library
    lines = fanout.table(rows).splitlines()
    assert len(lines) == 2 + len(INSTALLED)
    assert [line.split("|")[1].strip() for line in lines[2:]] == list(INSTALLED)
    assert all("x" in line and "%" in line for line in lines[2:])
    each = fanout.per_run_table(rows).splitlines()
    assert len(each) == 2 + len(INSTALLED)
    for line, row in zip(each[2:], rows):  # the one run's ratios, and the worst is it
        cells = [c.strip() for c in line.split("|")[1:-1]]
        ratio = row.samples["enabled"][0].cpu_us() / row.samples["off"][0].cpu_us()
        assert cells[2] == f"{ratio:.2f}" and cells[3] == fmt_ratio(ratio)
    legend = fanout.legend(TINY, rows)
    assert "CHECK FAILED" not in legend and "Negotiated:" in legend


def _sample(mode: str, **server: object) -> fanout.FanoutSample:
    report = {"cpu": 0.01, "deliveries": 22, "broadcast_deliveries": 20, "privates": 2,
              "initial": 3, "joined": 1, "codecs": {FAST: 4},
              "compress_once": {"shared": 15}, **server}
    received = {"broadcasts": 20, "privates": 2, "bytes": 22 * 300}
    ready = {"extensions": {"permessage-deflate": 3}, "handshake_exact": True}
    return fanout.FanoutSample(mode, 3, 1, {"enabled": ["aiohttp", "tornado"]}, ready,
                               report, received, library="tornado")


def test_fanout_reports_a_run_that_misses_its_claim() -> None:
    good = _sample("enabled-helper")
    assert good.problems() == [] and good.bytes() == 300 and good.shared() == 0.75
    stock_codec = _sample("enabled", codecs={"zlib.Compress": 4})
    assert stock_codec.problems() == [
        "compressors of the server's connections: {'zlib.Compress': 4}"]
    not_enabled = fanout.FanoutSample("stock", 3, 1, {"enabled": ["tornado"]}, good.ready,
                                      dict(good.server, codecs={"zlib.Compress": 4}),
                                      good.received, library="tornado")
    assert not_enabled.problems() == ["fastdeflate.enable() returned ['tornado']"]
    lost = _sample("enabled", privates=3, joined=0)
    assert len(lost.problems()) == 2
