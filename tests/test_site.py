"""The documentation site as a reader gets it: built with ``mkdocs build --strict`` (as CI
builds it: ``.ci/steps/38-docs.sh``), it says nothing but that it was built — no warning,
no note that something is missing —, its code is highlighted in the HTML (Pygments, at
build time) and it loads no script or stylesheet from another site, so that it reads the
same offline; the API pages' labels are small tags; the commands use no deprecated
module."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")

requires_docs_extra = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None
    or importlib.util.find_spec("mkdocstrings_handlers") is None
    or importlib.util.find_spec("pymdownx") is None
    or not any(importlib.util.find_spec(formatter) for formatter in ("ruff", "black")),
    reason="the docs extra (pip install '.[docs]') is not installed")

#: What a clean build says (stderr), and nothing else.
QUIET_BUILD = re.compile(r"INFO    -  (Cleaning site directory|Building documentation to "
                         r"directory: .*|Documentation built in [\d.]+ seconds)")

#: A script or stylesheet the page loads (not a link the reader may follow).
LOADED = re.compile(r"<script\b[^>]*\bsrc=\"([^\"]*)\"|<link\b[^>]*\bhref=\"([^\"]*)\"")
REMOTE = re.compile(r"^(?:https?:)?//", re.I)


# --- the configuration (no build needed) -------------------------------------------------

def test_the_config_highlights_at_build_time_not_with_a_script_from_a_cdn() -> None:
    assert re.search(r"^  highlightjs: false$", CONFIG, re.M), (
        "the mkdocs theme loads highlight.js from a CDN unless highlightjs: false")
    assert re.search(r"^  - pymdownx\.highlight:\n      use_pygments: true$", CONFIG, re.M)
    assert re.search(r"^  - pymdownx\.superfences$", CONFIG, re.M)
    assert "fenced_code" not in CONFIG, "superfences replaces fenced_code"
    for css in ("css/pygments.css", "css/site.css"):
        assert f"  - {css}\n" in CONFIG and (ROOT / "docs" / css).is_file()
    assert ".highlight .k " in (ROOT / "docs" / "css" / "pygments.css").read_text()


def test_the_docs_extra_has_what_the_build_uses() -> None:
    """Pygments through pymdownx.highlight, and a formatter for mkdocstrings' long
    signatures (without one the build says so)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    docs = pyproject["project"]["optional-dependencies"]["docs"]
    names = {re.match(r"[\w.-]+", r).group(0).lower() for r in docs}
    assert {"mkdocs", "mkdocstrings", "pymdown-extensions", "pygments"} <= names
    assert names & {"ruff", "black"}


def test_no_page_runs_uvicorns_deprecated_worker_class() -> None:
    """gunicorn's uvicorn worker is ``uvicorn_worker.UvicornWorker`` (the uvicorn-worker
    package): uvicorn deprecates ``uvicorn.workers``."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    used = [p.relative_to(ROOT).as_posix() for p in pages
            if "uvicorn.workers.UvicornWorker" in p.read_text(encoding="utf-8")]
    assert used == []
    gunicorn = (ROOT / "docs" / "how-to" / "gunicorn.md").read_text(encoding="utf-8")
    assert "-k uvicorn_worker.UvicornWorker" in gunicorn


# --- the built site ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The site, built strictly from the fastdeflate these tests import; and what the
    build said."""
    import fastdeflate

    env = dict(os.environ)
    home = str(Path(fastdeflate.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [home, env.get("PYTHONPATH")]))
    out = tmp_path_factory.mktemp("site") / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                          "--site-dir", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return out, run.stdout + run.stderr


@requires_docs_extra
def test_the_build_says_nothing_but_that_it_built(site: tuple[Path, str]) -> None:
    _, said = site
    extra = [line for line in said.splitlines()
             if line.strip() and not QUIET_BUILD.fullmatch(line)]
    assert extra == [], ("mkdocs build said more than that it built the site:\n"
                         + "\n".join(extra))


@requires_docs_extra
def test_no_page_loads_a_script_or_stylesheet_from_another_site(
        site: tuple[Path, str]) -> None:
    out, _ = site
    remote = sorted({f"{page.relative_to(out).as_posix()}: {url}"
                     for page in out.rglob("*.html")
                     for m in LOADED.finditer(page.read_text(encoding="utf-8"))
                     for url in m.groups() if url and REMOTE.match(url)})
    assert remote == []
    fetches = re.compile(r"@import|url\(\s*['\"]?(?:https?:)?//", re.I)
    imports = [css.relative_to(out).as_posix() for css in out.rglob("*.css")
               if fetches.search(css.read_text(encoding="utf-8"))]
    assert imports == []
    assert "hljs" not in (out / "index.html").read_text(encoding="utf-8")


@requires_docs_extra
@pytest.mark.parametrize("page", ["index.html", "getting-started/index.html",
                                  "reference/api/index.html"])
def test_code_is_highlighted_in_the_html(site: tuple[Path, str], page: str) -> None:
    """Pygments' spans are in the page itself: no script has to run for the colours."""
    html = (site[0] / page).read_text(encoding="utf-8")
    blocks = re.findall(r'<div class="[^"]*\bhighlight\b[^"]*">(.*?)</div>', html, re.S)
    assert blocks, f"{page}: no highlighted block"
    tokens = set(re.findall(r'<span class="(\w+)">', "".join(blocks)))
    assert tokens & {"k", "kn", "n", "nb", "nf", "s1", "s2", "o", "p"}, (page, tokens)
    assert '<link href="' in html and 'css/pygments.css" rel="stylesheet">' in html


@requires_docs_extra
def test_the_api_labels_are_small_tags(site: tuple[Path, str]) -> None:
    """mkdocstrings' labels (module-attribute ...) are there, styled by the site's CSS
    smaller than the heading they follow, without the theme's code box."""
    html = (site[0] / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert 'class="doc doc-label doc-label-module-attribute"' in html
    assert 'css/site.css" rel="stylesheet">' in html
    css = (site[0] / "css" / "site.css").read_text(encoding="utf-8")
    rule = re.search(r"\.doc-heading \.doc-label code \{([^}]*)\}", css)
    assert rule and "border: none" in rule.group(1) and "font-size: inherit" in rule.group(1)
    assert re.search(r"\.doc-heading \.doc-label \{[^}]*font-size: 0\.\d+rem", css)
