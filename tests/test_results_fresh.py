"""The committed results name the engines this build bundles.

Every results file (``benchmarks/results/*.md``) records the engines it ran on (its
machine table, its legends), and the README's and docs' generated blocks repeat some of
it (``tools/render_docs.py``). A file that names a zlib-ng or ISA-L version other than the
one the build bundles (``buildtools/zlib_ng.py``, ``buildtools/isal.py``) measured another
build: regenerate it (``python benchmarks/sizes.py`` is bytes only, seconds) or rerun its
benchmark (the command on its first line) and ``python tools/render_docs.py``.

A timing result that cannot be rerun at once goes in `KNOWN_STALE`, with the command that
regenerates it; an entry that is no longer stale fails too, so the list stays short.
"""

from __future__ import annotations

import functools
import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

sys.path.insert(0, str(ROOT))
try:
    _isal = importlib.import_module("buildtools.isal")
    _zlib_ng = importlib.import_module("buildtools.zlib_ng")
finally:
    sys.path.remove(str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
try:
    render_docs = importlib.import_module("render_docs")
finally:
    sys.path.remove(str(ROOT / "tools"))

#: The engine versions the build bundles.
BUNDLED = {"ISA-L": _isal.ISAL_VERSION, "zlib-ng": _zlib_ng.ZLIB_NG_VERSION}

#: Results files known to name another build's engines, each with the command that
#: regenerates it (a timing run, for a quiet machine). Keep it short: rerun and remove.
KNOWN_STALE: dict[str, str] = {}

ENGINE = re.compile(r"(?P<engine>ISA-L|zlib-ng) (?P<version>\d+(?:\.\d+)+)")
#: The peers' own builds, not fastdeflate's: the ``isal`` package's "isal 1.9.1 (ISA-L
#: 2.32.1)", and the peers' description lines ("- **zlib-ng**: zlib-ng persistent —
#: zlib-ng 2.3.3.").
PEER_LINE = re.compile(r"^- \*\*(?:zlib-ng|isal)\*\*:")
PEER_ISAL = re.compile(r"isal \d+(?:\.\d+)+ \($")


def engine_versions(text: str) -> list[tuple[str, str, int]]:
    """(engine, version, line number) of every zlib-ng / ISA-L version ``text`` names as
    fastdeflate's (the peers' builds left out)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if PEER_LINE.match(line):
            continue
        for m in ENGINE.finditer(line):
            if m.group("engine") == "ISA-L" and PEER_ISAL.search(line[:m.start()]):
                continue
            found.append((m.group("engine"), m.group("version"), number))
    return found


def stale(text: str) -> list[str]:
    return [f"line {number}: {engine} {version} (the build bundles {BUNDLED[engine]})"
            for engine, version, number in engine_versions(text)
            if version != BUNDLED[engine]]


def test_the_check_sees_another_build_and_only_fastdeflates() -> None:
    text = ("| fastdeflate | 0.1.0 (cython), zlib-ng 2.3.2 (zlib-compat) |\n"
            "| engines (window 15, memLevel 8) | level 1: ISA-L 2.31.1; others: zlib-ng "
            f"{BUNDLED['zlib-ng']} (zlib-compat) |\n"
            "- **isal**: isal persistent (ISA-L level 2, subprocess) — isal 1.9.1 "
            "(ISA-L 2.30.0); measured in subprocess\n"
            "- **zlib-ng**: zlib-ng persistent — zlib-ng 2.2.4.\n")
    assert [(e, v) for e, v, _ in engine_versions(text)] == [
        ("zlib-ng", "2.3.2"), ("ISA-L", "2.31.1"), ("zlib-ng", BUNDLED["zlib-ng"])]
    assert len(stale(text)) == 2 and "ISA-L 2.31.1" in stale(text)[1]


RESULT_FILES = sorted(RESULTS.glob("*.md"))


@pytest.mark.parametrize("path", RESULT_FILES, ids=lambda p: p.name)
def test_a_committed_result_names_the_bundled_engines(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert engine_versions(text), (
        f"{path.name} names no engine: the check cannot see which build it measured")
    problems = stale(text)
    if path.name in KNOWN_STALE:
        assert problems, (f"{path.name} names the bundled engines now: remove it from "
                          "KNOWN_STALE")
        pytest.xfail(f"known stale, to rerun: {KNOWN_STALE[path.name]}")
    assert not problems, (
        f"benchmarks/results/{path.name} measured another build ({'; '.join(problems)}): "
        "regenerate it (its command is on its first line), then python tools/render_docs.py")


@pytest.mark.parametrize("page", render_docs.pages(),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_generated_block_names_the_bundled_engines(page: Path) -> None:
    """The README's and docs' generated blocks (prose may tell the engines' history)."""
    problems = [f"block {m.group('name')}: {problem}"
                for m in render_docs.BLOCK.finditer(page.read_text(encoding="utf-8"))
                for problem in stale(m.group("body"))
                if not any(name in m.group("body") for name in KNOWN_STALE)]
    assert not problems, f"{page.relative_to(ROOT)}: {'; '.join(problems)}"


def test_known_stale_entries_are_results_files() -> None:
    assert set(KNOWN_STALE) <= {p.name for p in RESULT_FILES}


#: What ISA-L serves today (docs/explanation/engine.md): level 1 and whole-message inflate.
OLD_LEVELS = re.compile(r"levels? 1\s*(?:-|–|to)\s*3|levels 1, 2(?:,| and) 3", re.I)


@pytest.mark.parametrize("path", [
    ROOT / "pyproject.toml", ROOT / "setup.py", ROOT / "README.md",
    *sorted((ROOT / "LICENSES").glob("*")), *sorted((ROOT / "benchmarks" / "fdbench").glob("*.py")),
    *sorted((ROOT / "fastdeflate").glob("*.py")),
], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_file_says_isal_runs_levels_1_to_3(path: Path) -> None:
    """ISA-L's levels 2 and 3 went back to zlib-ng: it runs level 1 only."""
    text = path.read_text(encoding="utf-8")
    assert not [line for line in text.splitlines()
                if OLD_LEVELS.search(line) and "ISA-L" in line], (
        f"{path.relative_to(ROOT)} says ISA-L runs levels 1-3: it runs level 1 (and "
        "decompresses whole messages)")


def test_the_libraries_page_says_what_the_fanout_results_show() -> None:
    """docs/how-to/libraries.md's words on the broadcast helpers against the library's
    own loop (the figures are its generated block's): rerunning the fan-out benchmark
    must not leave them saying something else."""
    header = render_docs.fanout_part.HEADER
    cpu, size = header.index("CPU µs/delivery: stock"), header.index("bytes/delivery: stock")
    shared = header.index("shared: enabled")

    def number(cell: str) -> float:
        return float(cell.replace(",", "").rstrip("%"))

    rows = {}
    for name in render_docs.FANOUT_RESULTS:
        for r in render_docs.load(name).cells(*header[:3]):
            clients = r[1].split()[0]
            rows[(r[0], clients)] = {
                "cpu": (number(r[cpu + 1]), number(r[cpu + 2])),
                "bytes": (number(r[size + 1]), number(r[size + 2])),
                "shared": (number(r[shared]), number(r[shared + 1]))}
    libraries = ("aiohttp", "wsproto", "tornado", "autobahn")
    dearer = {n: {lib for lib in libraries if rows[(lib, n)]["cpu"][1] > rows[(lib, n)]["cpu"][0]}
              for n in ("100", "1,000")}
    # "at 100 and at 1,000 clients ... on at least three ... the fourth costs about the same"
    assert all(len(dearer[n]) >= 3 for n in dearer)
    assert all(r["cpu"][1] >= 0.9 * r["cpu"][0] for r in rows.values())
    assert all(r["shared"][1] < r["shared"][0] for r in rows.values())  # "shared fewer"
    assert all(rows[(lib, "100")]["bytes"][1] > rows[(lib, "100")]["bytes"][0]
               for lib in libraries)  # "at 100 clients sent more bytes"
    page = (ROOT / "docs" / "how-to" / "libraries.md").read_text(encoding="utf-8")
    assert ("At 100 and at 1,000 clients it took more CPU per delivery than the loop on at "
            "least\nthree of the four libraries") in page
    assert "<!-- generated: fanout-helper -->" in page


# -- figures measured after the last change to what they measure ---------------------

SOURCE = re.compile(r"From `[^`]*` at commit (?P<commit>[^,]+), .*?(?P<file>benchmarks/results/"
                    r"[\w.-]+\.md)", re.S)


@functools.cache
def figure_sources() -> dict[str, str]:
    """{results file: the commit it records} for every generated block's source line."""
    found: dict[str, str] = {}
    for page in render_docs.pages():
        for block in render_docs.BLOCK.finditer(page.read_text(encoding="utf-8")):
            for m in SOURCE.finditer(block.group("body")):
                found[Path(m.group("file")).name] = m.group("commit").split()[0]
    return found


def changes_since(commit: str) -> list[str]:
    """The commits after ``commit`` that changed the extension, the build or an
    integration (``render_docs.MEASURED_PATHS``)."""
    out = subprocess.run(
        ["git", "log", "--format=%h %s", f"{commit}..HEAD", "--",
         *render_docs.MEASURED_PATHS],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.fail(f"git log {commit}..HEAD failed: {out.stderr.strip()}")
    return out.stdout.splitlines()


def in_a_git_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    out = subprocess.run(["git", "rev-parse", "--is-inside-work-tree",
                          "--is-shallow-repository"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    return (out.returncode == 0 and out.stdout.split() == ["true", "false"]
            and (ROOT / ".git").exists())


def test_the_figures_name_their_sources() -> None:
    sources = figure_sources()
    assert {"full.md", "latency.md", "sizes.md"} <= set(sources), sources
    assert all(re.fullmatch(r"[0-9a-f]{7,40}", c) for c in sources.values()), sources


@pytest.mark.skipif(not in_a_git_checkout(),
                    reason="no git history here (not a checkout, or a shallow one)")
@pytest.mark.parametrize("name", sorted(figure_sources()))
def test_a_figure_comes_from_a_run_after_the_last_change_or_says_why_it_stands(
        name: str) -> None:
    commit = figure_sources()[name]
    changes = changes_since(commit)
    if name in render_docs.STANDS:
        assert changes, (f"{name} measured {commit}, after the last change to what it "
                         "measures: remove it from STANDS in tools/render_docs.py")
        return
    assert not changes, (
        f"benchmarks/results/{name} measured {commit}; since then {len(changes)} commits "
        f"changed the extension, the build or an integration (newest: {changes[0]}): "
        "rerun it (the command on its first line) and python tools/render_docs.py, or "
        "say in STANDS (tools/render_docs.py) why its figures stand")
