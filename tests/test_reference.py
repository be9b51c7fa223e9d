"""The API reference (docs/reference/api.md) has an entry for every public name, and the
docstrings it renders are written for the site (Markdown, as MkDocs renders them), with no
Sphinx role (``:func:`x```), which the site would show raw.

Public names: ``fastdeflate.__all__``, ``fastdeflate.negotiation.__all__`` and the
``__all__`` of ``fastdeflate.integrations`` and of each of its public modules, read from
the sources (importing an adapter needs its library). When MkDocs is installed the site is
built as well, and every entry must come out with a docstring of its own.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fastdeflate"
REFERENCE = ROOT / "docs" / "reference" / "api.md"

#: A Sphinx role as reStructuredText writes it: :func:`x`, :py:meth:`x`, :mod:`x`...
ROLE = re.compile(r"(?<![\w:]):(?:[a-z]+:)?[a-z]+:`[^`\n]+`")


def _all(path: Path) -> list[str]:
    """The ``__all__`` a module's source assigns."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{path} has no __all__")


def public_names() -> dict[str, list[str]]:
    """Module path -> its public names."""
    modules = {"fastdeflate": PACKAGE / "__init__.py",
               "fastdeflate.negotiation": PACKAGE / "negotiation.py",
               "fastdeflate.integrations": PACKAGE / "integrations" / "__init__.py"}
    for path in sorted((PACKAGE / "integrations").glob("*.py")):
        if not path.name.startswith("_"):
            modules[f"fastdeflate.integrations.{path.stem}"] = path
    return {module: _all(path) for module, path in modules.items()}


def _from_extension() -> set[str]:
    """The names ``fastdeflate/__init__.py`` takes from the compiled extension, which the
    reference documents where they are defined (``fastdeflate._fastdeflate``)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    return {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1
            and node.module == "_fastdeflate" for alias in node.names}


def entries(text: str) -> set[str]:
    """The identifiers the reference renders: each ``::: path``, and for a directive with a
    ``members: [...]`` option, ``path.member`` for each member listed."""
    found: set[str] = set()
    for m in re.finditer(r"^::: ([\w.]+)[ \t]*\n((?:[ \t]+.*\n?|[ \t]*\n(?=[ \t]))*)", text, re.M):
        path, options = m.group(1), m.group(2)
        found.add(path)
        members = re.search(r"^\s+members:\s*\[([^\]]*)\]", options, re.M)
        if members:
            found.update(f"{path}.{name.strip()}" for name in members.group(1).split(",")
                         if name.strip())
    return found


def test_the_entry_reader_reads_directives_and_members() -> None:
    text = ("::: fastdeflate.enable\n\n::: fastdeflate.negotiation\n    options:\n"
            "      members: [server_select, Agreement]\n      show_source: false\n\n"
            "Prose ::: not.this\n")
    assert entries(text) == {"fastdeflate.enable", "fastdeflate.negotiation",
                             "fastdeflate.negotiation.server_select",
                             "fastdeflate.negotiation.Agreement"}


@pytest.mark.parametrize("module", sorted(public_names()))
def test_every_public_name_has_an_entry_in_the_reference(module: str) -> None:
    documented = entries(REFERENCE.read_text(encoding="utf-8"))
    extension = _from_extension() if module == "fastdeflate" else set()
    missing = [name for name in public_names()[module]
               if f"{module}.{name}" not in documented
               and not (name in extension and f"fastdeflate._fastdeflate.{name}" in documented)]
    assert missing == [], f"docs/reference/api.md has no entry for {module}: {missing}"


def _docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring in a module: the module's, each class's and
    function's, and the attribute docstrings (a string statement after an assignment)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            found.append((node.lineno, node.value.value))
    return found


SOURCES = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi")])


@pytest.mark.parametrize(
    "path",
    SOURCES,
    ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_docstring_has_a_sphinx_role(path: Path) -> None:
    roles = [f"line {line}: {role}" for line, text in _docstrings(path)
             for role in ROLE.findall(text)]
    assert roles == [], (
        f"{path.name}: the site renders docstrings as Markdown; write `name()` or a "
        f"cross-reference [`name()`][fastdeflate.name], not a Sphinx role: {roles}")


def test_the_role_pattern_sees_roles_and_only_roles() -> None:
    assert ROLE.findall("until :func:`disable`, :py:meth:`Decompressor.reset` and "
                        ":mod:`fastdeflate.integrations.daphne`") == [
        ":func:`disable`", ":py:meth:`Decompressor.reset`",
        ":mod:`fastdeflate.integrations.daphne`"]
    assert ROLE.findall("[`disable()`][fastdeflate.disable], ``x``, a: `b`, "
                        "http://x.y/`z`") == []


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None
                    or importlib.util.find_spec("mkdocstrings_handlers") is None,
                    reason="the docs extra (mkdocs, mkdocstrings[python]) is not installed")
def test_the_built_reference_renders_every_entry_with_its_own_docstring(tmp_path: Path) -> None:
    """Built as CI builds it (``.ci/steps/38-docs.sh``), from the fastdeflate these tests
    import: each entry is on the page, and no constant shows the docstring of its type
    (``str``'s, which is what inspecting the compiled extension gives its constants)."""
    import fastdeflate

    env = dict(os.environ)
    home = str(Path(fastdeflate.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [home, env.get("PYTHONPATH")]))
    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                          "--site-dir", str(site)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'id="(fastdeflate[\w.]*)"', page))
    assert entries(REFERENCE.read_text(encoding="utf-8")) <= ids
    assert "Create a new string object" not in page, "a constant shows str's docstring"
