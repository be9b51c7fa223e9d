"""The README and docs/ say only what committed results and tests show.

Every measured figure sits in a block that ``tools/render_docs.py`` writes from a results
file (``benchmarks/results/*.md``: the command, commit and date that made it): the blocks
must be what their results give today, and no measured figure — a ratio, a percentage, a
time, a fractional size — may stand outside one. Links between the pages must lead
somewhere. (CI builds the site with ``mkdocs build --strict`` as well:
``.ci/steps/38-docs.sh``.)
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("render_docs", ROOT / "tools" / "render_docs.py")
assert spec is not None and spec.loader is not None
render_docs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(render_docs)

PAGES = render_docs.pages()

#: What a measurement looks like: 1.5x, 2x, 16%, 3.2 µs, 0.19 ms, 36.3 KiB, 620,000
#: instructions. (Sizes of messages and settings — 1 KB, window 15, 256 KiB, 10 seconds —
#: are not measurements.)
FIGURE = re.compile(
    r"(?<![\w.])[+−-]?\d[\d,]*(?:\.\d+)?\s?(?:x|×|%)(?!\w)"
    r"|(?<![\w.])[+−-]?\d[\d,]*(?:\.\d+)?\s?(?:µs|us|ms)\b"
    r"|(?<![\w.])\d[\d,]*\.\d+\s?(?:KiB|MiB|GiB)\b"
    r"|(?<![\w.])\d{1,3}(?:,\d{3})+\s+instructions\b")


def prose(text: str) -> str:
    """``text`` without its generated blocks, code blocks and code spans."""
    text = render_docs.BLOCK.sub("", text)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def figures(text: str) -> list[str]:
    return [m.group(0) for m in FIGURE.finditer(prose(text))]


def test_the_figure_check_sees_figures_and_only_figures() -> None:
    found = figures("It is 1.5x faster, 16% smaller, takes 3.2 µs and +0.19 ms, holds "
                    "36.3 KiB and 620,000 instructions; 2x.\n")
    assert found == ["1.5x", "16%", "3.2 µs", "+0.19 ms", "36.3 KiB", "620,000 instructions",
                     "2x"]
    assert figures("1 KB messages, window 15, level 6, 256 KiB, 10 seconds, x86_64, "
                   "RFC 7692 §7.2.3.4, `1.5x` in code, 0x1f\n") == []
    block = "<!-- generated: headline -->\n| 1.5x |\n<!-- /generated -->\n"
    assert figures(block) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_measured_figure_outside_a_generated_block(page: Path) -> None:
    assert figures(page.read_text(encoding="utf-8")) == [], (
        f"{page.name}: measured figures belong in a block rendered from a results file "
        "(tools/render_docs.py)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_generated_blocks_are_what_the_committed_results_give(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert render_docs.render(page, text) == text, (
        f"{page.name} is out of date with benchmarks/results: run python tools/render_docs.py")


def test_every_block_has_a_renderer_and_names_its_source() -> None:
    names = [m.group("name") for page in PAGES
             for m in render_docs.BLOCK.finditer(page.read_text(encoding="utf-8"))]
    assert "headline" in names and "support-matrix" in names
    assert set(names) <= set(render_docs.RENDERERS)
    for page in PAGES:
        for m in render_docs.BLOCK.finditer(page.read_text(encoding="utf-8")):
            assert "at commit " in m.group("body") and "UTC" in m.group("body"), (
                page.name, m.group("name"))


def test_the_readme_links_lead_to_files() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?:)([^)#]+)(?:#[^)]*)?\)", readme)
    assert targets, "the README links to the docs"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert missing == []


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists (paths under docs/), in order."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    nav = nav.split("\n\n", 1)[0].split("\nvalidation:", 1)[0]
    return re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, re.M)


def test_every_docs_page_is_in_the_site() -> None:
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    listed = nav_pages()
    assert sorted(listed) == sorted(set(listed)), "a page is listed twice"
    assert pages == set(listed)


def test_the_site_is_laid_out_for_tasks() -> None:
    """The nav's sections, in order: Get started, How-to, Explanations, Reference,
    Changelog; How-to has a page per server."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    sections = re.findall(r"^  - ([^:]+):", config.split("\nnav:\n", 1)[1], re.M)
    assert sections[:5] == ["Get started", "How-to", "Explanations", "Reference",
                            "Changelog"]
    listed = nav_pages()
    assert listed[:2] == ["index.md", "getting-started.md"]
    for server in ("uvicorn", "gunicorn", "hypercorn", "aiohttp", "channels", "tornado",
                   "flask-sock"):
        assert f"how-to/{server}.md" in listed


# --- charts -------------------------------------------------------------------------

def test_the_site_shows_the_benchmark_charts() -> None:
    referenced = render_docs.charts_referenced()
    assert "full-server-memory.png" in referenced and "full-frontier.png" in referenced
    assert "index.md" in referenced["full-server-memory.png"]


def test_every_chart_a_page_shows_is_its_results_file() -> None:
    """Each chart a docs page shows is in docs/charts/ and byte for byte the benchmark's
    file in benchmarks/results/; docs/charts/ holds nothing else
    (``python tools/render_docs.py`` copies them)."""
    assert render_docs.chart_problems(render_docs.charts_referenced()) == []


def test_the_chart_check_sees_a_missing_a_changed_and_a_stray_chart(tmp_path: Path) -> None:
    results, charts = tmp_path / "results", tmp_path / "charts"
    results.mkdir()
    charts.mkdir()
    for name in ("a.png", "b.png", "c.png"):
        (results / name).write_bytes(b"\x89PNG " + name.encode())
    (charts / "a.png").write_bytes((results / "a.png").read_bytes())  # as it should be
    (charts / "b.png").write_bytes(b"\x89PNG older")                   # changed
    (charts / "stray.png").write_bytes(b"\x89PNG")                      # shown by no page
    referenced = {"a.png": ["index.md"], "b.png": ["x.md"], "c.png": ["y.md"],
                  "gone.png": ["z.md"]}
    assert render_docs.chart_problems(referenced, results, charts) == [
        "docs/charts/b.png differs from benchmarks/results/b.png",
        "docs/charts/c.png is missing",
        "z.md: gone.png is not in benchmarks/results/",
        "docs/charts/stray.png is shown by no page",
    ]


def test_the_chart_pattern_reads_images_only() -> None:
    text = ("![a](charts/full-codec.png) ![b](../charts/full-memory.png) "
            "[link](charts/x.png) `charts/quick-frontier.png`\n")
    assert [m.group("name") for m in render_docs.CHART.finditer(text)] == [
        "full-codec.png", "full-memory.png"]


# --- Get started, as CI follows it ----------------------------------------------------

#: The blocks of docs/getting-started.md that .ci/steps/37-newcomer.sh runs, in order.
NEWCOMER_BLOCKS = ["clone", "install", "check-install", "app.py", "serve", "check",
                   "message"]


def newcomer_blocks() -> dict[str, tuple[str, str]]:
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    return {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(
        r"^<!-- newcomer: ([\w.-]+) -->\n```(\w+)\n(.*?)^```", text, re.S | re.M)}


def test_get_started_marks_the_blocks_ci_runs() -> None:
    blocks = newcomer_blocks()
    assert list(blocks) == NEWCOMER_BLOCKS
    assert blocks["app.py"][0] == "python"
    assert all(kind == "sh" for name, (kind, _) in blocks.items() if name != "app.py")
    serve = blocks["serve"][1]
    assert "FASTDEFLATE_ENABLE=1 uvicorn app:app" in serve and "--port 8000" in serve
    assert "pip install" in blocks["install"][1] and "./fastdeflate[" in blocks["install"][1]
    assert "127.0.0.1:8000/health/fastdeflate" in blocks["check"][1]
    step = (ROOT / ".ci" / "steps" / "37-newcomer.sh").read_text(encoding="utf-8")
    assert "newcomer" in step and "getting-started.md" in step


def test_ci_builds_the_site_strictly() -> None:
    """A broken link or reference fails the build: strict mode, link checks on."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^strict: true$", config, re.M)
    assert re.search(r"^  links:\n(    \w+: warn\n)+", config, re.M)
    step = (ROOT / ".ci" / "steps" / "38-docs.sh").read_text(encoding="utf-8")
    assert "mkdocs build --strict" in step
