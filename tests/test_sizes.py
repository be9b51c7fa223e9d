"""The committed bytes-on-the-wire results (benchmarks/results/sizes.md) hold.

``python benchmarks/sizes.py`` measures payload bytes, stock zlib against fastdeflate, at
each library's settings and every level (no timings, so the same bytes every run with
the same engines). Here each row is measured again on each implementation: with the
engines the file names, the bytes must be the file's exactly (so a change of engine,
level mapping or patch that changes a row's bytes fails until the results are
regenerated, and the docs built from them with it); on other engines, fastdeflate may
not send more, relative to stock, than the file says. The fallback's bytes are stock's.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path
from types import ModuleType

import pytest

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import payloads, report, sizes  # noqa: E402
from fdbench.results import Results  # noqa: E402

RESULTS = Results.load(BENCH_DIR / "results" / "sizes.md")
ROWS = RESULTS.table("what", "window / memLevel")  # both tables have this header


def committed_groups() -> dict[tuple[str, int, int, int, bool], dict[int, tuple[int, int]]]:
    """(what, level, window, memLevel, no context takeover) -> {size: (stock, fastdeflate)}."""
    sizes_by_label = {payloads.size_label(s): s for s in payloads.SIZES}
    groups: dict[tuple[str, int, int, int, bool], dict[int, tuple[int, int]]] = {}
    for row in ROWS:
        window, mem_level = (int(x) for x in row["window / memLevel"].split(" / "))
        key = (row["what"], int(row["level"]), window, mem_level,
               row["context takeover"] == "no")
        groups.setdefault(key, {})[sizes_by_label[row["size"]]] = (
            int(row["stock bytes"].replace(",", "")),
            int(row["fastdeflate bytes"].replace(",", "")))
    return groups


GROUPS = committed_groups()


def test_the_file_covers_every_library_and_level() -> None:
    libraries = {name for key in GROUPS for name in key[0].split(", ")}
    assert libraries >= set(sizes.LIBRARIES)
    levels = {(k[1], k[2], k[3]) for k in GROUPS if k[0].startswith("level ")}
    assert levels == {(lv, w, m) for w, m in ((15, 8), (12, 5)) for lv in range(1, 10)}
    assert all(set(v) == set(payloads.SIZES) for v in GROUPS.values())


@pytest.mark.parametrize("key", sorted(GROUPS), ids=lambda k: "-".join(map(str, k)))
def test_bytes_are_the_committed_ones(key: tuple[str, int, int, int, bool],
                                      use_impl: ModuleType) -> None:
    what, level, window, mem_level, nct = key
    same_engines = (use_impl.ENGINE == RESULTS.engine
                    and report.engines_summary(use_impl) == RESULTS.engines
                    and zlib.ZLIB_RUNTIME_VERSION == RESULTS.stdlib_zlib)
    for size, (stock, fast) in GROUPS[key].items():
        row = sizes.measure(what, sizes.Settings(level, window, mem_level), nct, size)
        where = f"{what}, {payloads.size_label(size)}"
        if use_impl.__name__ == "fastdeflate._pure":
            assert row.fastdeflate == row.stock, f"{where}: the fallback sends stock's bytes"
        elif same_engines:
            assert (row.stock, row.fastdeflate) == (stock, fast), (
                f"{where}: bytes changed from the committed results; run "
                "`python benchmarks/sizes.py` and `python tools/render_docs.py`")
        else:
            assert row.ratio <= max(fast / stock, 1.0) * 1.01, where
        if zlib.ZLIB_RUNTIME_VERSION == RESULTS.stdlib_zlib:
            assert row.stock == stock, f"{where}: stock's bytes"


#: Messages per size in the grid below: enough that a row's bytes are not a few bytes'
#: accident (window 9 / memLevel 3 without context takeover is 2.0% over stock on four
#: 1 KB messages, 1.5% on sixteen).
GRID_SAMPLE = {1024: 16, 4096: 16, 16384: 8, 65536: 4}
GRID_LIMIT = 1.02


@pytest.mark.parametrize("level", range(-1, 10))
def test_no_level_window_or_mem_level_sends_more_than_stock(level: int,
                                                            use_impl: ModuleType) -> None:
    """Issue 22, goal 1: at every level, window 9-15 and memLevel 1-9, with and without
    context takeover, fastdeflate's bytes are at most 1.02x stock zlib's at the same
    settings — the level a user picks stays what goes on the wire."""
    pools = {size: payloads.messages("varying", size)[:n] for size, n in GRID_SAMPLE.items()}
    fallback = use_impl.__name__ == "fastdeflate._pure"
    worst = (0.0, "")
    for window, mem_level in (fallback_grid(level) if fallback else full_grid()):
        settings = sizes.Settings(level, window, mem_level)
        for nct in (False, True):
            for size, messages in pools.items():
                ratio = (sizes._fastdeflate_bytes(settings, nct, messages)
                         / sizes._stock_bytes(settings, nct, messages))
                where = (f"window {window}, memLevel {mem_level}, "
                         f"{'no ' if nct else ''}context takeover, "
                         f"{payloads.size_label(size)}")
                worst = max(worst, (ratio, where))
                if fallback:
                    assert ratio == 1.0, f"the fallback sends stock's bytes: {where}"
    assert worst[0] <= GRID_LIMIT, f"level {level}: {worst[0]:.4f}x stock's bytes at {worst[1]}"


def full_grid() -> list[tuple[int, int]]:
    """Every window 9-15 with every memLevel 1-9."""
    return [(window, mem_level) for window in range(9, 16) for mem_level in range(1, 10)]


def fallback_grid(level: int) -> list[tuple[int, int]]:
    """Every window and every memLevel, not every pair: the fallback hands level, window
    and memLevel to the stdlib's ``zlib.compressobj`` as they are, with no branch on their
    values, so the other pairs would run the stdlib's zlib, not the fallback's code, which
    must send stock's bytes exactly. Each level pairs them differently: over levels -1..9
    every one of the 63 pairs runs once."""
    return [(9 + (mem_level + level) % 7, mem_level) for mem_level in range(1, 10)]


def test_the_fallback_grid_runs_every_window_and_mem_level() -> None:
    for level in range(-1, 10):
        grid = fallback_grid(level)
        assert {w for w, _ in grid} == set(range(9, 16))
        assert {m for _, m in grid} == set(range(1, 10))
    assert {p for level in range(-1, 10) for p in fallback_grid(level)} == set(full_grid())


#: Issue 45: the bound on more than the project's own JSON. On the wider corpus of
#: benchmarks/fdbench/levels.py (the shapes of fdbench/corpus.py: compact ticker JSON, the
#: built-in updates, indented JSON, text, HTML, CSV, logs, protobuf-like records; 1-64 KB;
#: windows 9-15, memLevel 8; with and without context takeover), fastdeflate's bytes stay
#: within WIDE_LIMIT of stock's in every cell, at every level: where zlib-ng runs the level.
WIDE_LIMIT = 1.02
#: Where ISA-L runs level 1 (windows 14-15 at memLevel 8), its one probe per position
#: (no hash chain) sends up to 1.032x stock's bytes on 1 KB indented JSON with context
#: takeover; zlib-ng there would hold WIDE_LIMIT in 2.4x the time
#: (benchmarks/results/levels.md, level 1).
ISAL_LIMIT = 1.035


@pytest.mark.parametrize("level", range(-1, 10))
def test_no_level_sends_more_than_stock_on_other_shapes(level: int,
                                                        use_impl: ModuleType) -> None:
    from fdbench import levels

    worst = (0.0, 0.0, "")
    for shape, size, window, nct, messages in levels.cells():
        settings = sizes.Settings(level, window, levels.MEM_LEVEL)
        ratio = (sizes._fastdeflate_bytes(settings, nct, messages)
                 / sizes._stock_bytes(settings, nct, messages))
        engine = use_impl.engines(window, levels.MEM_LEVEL)[level]
        limit = ISAL_LIMIT if "ISA-L" in engine else WIDE_LIMIT
        where = (f"{shape}, {payloads.size_label(size)}, window {window}, "
                 f"{'no ' if nct else ''}context takeover, {engine}")
        worst = max(worst, (ratio / limit, ratio, where))
    if use_impl.__name__ == "fastdeflate._pure":
        assert worst[1] == 1.0, worst
    assert worst[0] <= 1.0, f"level {level}: {worst[1]:.4f}x stock's bytes at {worst[2]}"
