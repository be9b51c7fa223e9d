"""Each level's tuning of the bundled zlib-ng (zlib_ng.h's FD_LEVELS, issue 45): per
window class and table size, a stream keeps its tuning through resets, the 3-byte hash
reaches the engine, and the level frontier (benchmarks/levels.py) picks per class the
fastest tuning within the bound.

The bytes themselves are tests/test_sizes.py's: at most 1.02x stock's on the wider corpus
and the grid of windows and memLevels.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from _subprocess import run_python

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import corpus, levels  # noqa: E402

#: A window of each class (9-11; 12-15 from memLevel 8; 12-15 on smaller tables), and the
#: smallest tables, where level 6 runs longer searches.
SETTINGS = [(11, 8), (12, 8), (12, 7), (9, 1), (15, 2)]


@pytest.mark.parametrize("window, mem_level", SETTINGS)
@pytest.mark.parametrize("level", range(1, 10))
def test_a_reset_stream_keeps_its_tuning(level: int, window: int, mem_level: int,
                                         use_impl: ModuleType) -> None:
    """Without context takeover every message after the first runs on a reset stream;
    each must be the bytes a new stream makes of it (a reset that tuned the stream for
    another window class or table size would not be)."""
    messages = corpus.stream("proto", 4096, 3) + corpus.stream("pretty", 4096, 3)

    def compressor():  # type: ignore[no-untyped-def]
        return use_impl.Compressor(level=level, window_bits=window, mem_level=mem_level,
                                   no_context_takeover=True)

    fresh = []
    for message in messages:
        use_impl._forget_kept()  # no spare stream: the next one is made anew
        fresh.append(compressor().compress(message))
    use_impl._forget_kept()
    c = compressor()
    assert [c.compress(m) for m in messages] == fresh


_HASH3_SCRIPT = """
import json, sys
sys.path.insert(0, {bench!r})
import fastdeflate
from fastdeflate import _fastdeflate
from fdbench import corpus
config = tuple(json.loads(sys.argv[1]))
_fastdeflate._set_level_config(2, config)
c = fastdeflate.Compressor(level=2, window_bits=11, mem_level=8)
sent = sum(len(c.compress(m)) for m in corpus.stream("proto", 1024, 16))
print(json.dumps([_fastdeflate._level_config(2, 11, 8), sent]))
"""


@pytest.mark.test_build
def test_the_3_byte_hash_reaches_the_engine() -> None:
    """A level set to hash 3 bytes finds the 3-byte matches of binary records (varints,
    tags) that the 4-byte hash misses: fewer bytes, same limits otherwise."""
    import fastdeflate

    if not fastdeflate.status()["build"]["zlib"].startswith("zlib-ng"):
        pytest.skip("the bundled zlib-ng's tuning (a build on a system zlib has none)")
    script = _HASH3_SCRIPT.format(bench=str(BENCH_DIR))
    sent = {}
    for hash3 in (0, 1):
        config = [2, 4, 6, 32, 4, hash3]
        out = run_python(script, json.dumps(config))
        applied, sent[hash3] = json.loads(out.stdout)
        assert applied == config
    assert sent[1] < sent[0] * 0.985, sent


@pytest.mark.test_build
def test_the_frontier_can_try_zlib_ng_where_isal_runs_level_1() -> None:
    """Level 1's candidates are zlib-ng's: _set_isal_deflate(False) hands the level to
    zlib-ng, which then sends its own bytes (not ISA-L's)."""
    import fastdeflate

    if "ISA-L" not in fastdeflate.engines(15, 8)[1]:
        pytest.skip("ISA-L does not run level 1 in this build")
    script = """
import json, sys
sys.path.insert(0, {bench!r})
import fastdeflate
from fastdeflate import _fastdeflate
from fdbench import corpus
_fastdeflate._set_isal_deflate(sys.argv[1] == "on")
c = fastdeflate.Compressor(level=1)
print(json.dumps([fastdeflate.engines(15, 8)[1],
                  sum(len(c.compress(m)) for m in corpus.stream("pretty", 1024, 16))]))
""".format(bench=str(BENCH_DIR))
    on = json.loads(run_python(script, "on").stdout)
    off = json.loads(run_python(script, "off").stdout)
    assert "ISA-L" in on[0] and off[0] == fastdeflate.ENGINE
    assert off[1] < on[1]


def _point(level: int, config: tuple, worst: dict[int, float],
           seconds: dict[int, float]) -> levels.Point:
    return levels.Point(level, config, {
        w: levels.Window(worst[w], "", seconds[w]) for w in levels.WINDOWS})


def test_the_frontier_picks_per_class_the_fastest_within_the_bound() -> None:
    small = levels.CLASSES[0]
    fast = _point(2, (2, 4, 4, 8, 2, 0), {w: 1.03 if w in small else 1.01 for w in levels.WINDOWS},
                  {w: 1.0 for w in levels.WINDOWS})
    careful = _point(2, (2, 4, 6, 32, 8, 1), {w: 1.005 for w in levels.WINDOWS},
                     {w: 2.0 for w in levels.WINDOWS})
    slow = _point(2, (2, 4, 6, 32, 32, 1), {w: 1.0 for w in levels.WINDOWS},
                  {w: 3.0 for w in levels.WINDOWS})
    assert levels.choose([slow, fast, careful]) == [careful, fast]
    assert levels.choose([fast], limit=1.0) == [None, None]


@pytest.mark.test_build
def test_the_frontier_writes_its_table_and_chart(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("levels_cli", BENCH_DIR / "levels.py")
    assert spec and spec.loader
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    monkeypatch.setitem(levels.CANDIDATES, 3, ((2, 4, 6, 32, 32, 1), (2, 4, 6, 32, 2, 0)))
    assert cli.main(["--levels", "3", "--rounds", "1", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "levels.md").read_text()
    assert (tmp_path / "levels.png").stat().st_size > 10_000
    rows = [line for line in text.splitlines() if line.startswith("| 3 ")]
    assert [row.split("|")[2].strip() for row in rows] == ["9-11", "12-15"]
    # zlib's limits on the 3-byte hash hold the bound at every window; one probe does not
    assert "chain 32, 3-byte hash" in rows[0]
