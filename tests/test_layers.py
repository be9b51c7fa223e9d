"""The package's layers look down only: the floor (the codec chosen once, the settings
both implementations share, the fallback) imports nothing above it, ``broadcast()``
stands on the floor, and the operator modules (``status()``, the savings' estimates)
read the floor, never the face (``fastdeflate/__init__.py``), which imports them.

Every import counts, those inside functions too (the way a cycle hides)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fastdeflate"

#: Modules (relative to the package) that form the floor, and packages whose every
#: module does.
FLOOR = {"_codec", "_what_pays", "_off_loop", "_params", "_errors", "_version", "_parking",
         "_forksafe", "_pure", "_fastdeflate", "_fallback"}
#: Standing on the floor: they import only from it.
ON_THE_FLOOR = {"_broadcast"}
#: Read by the face: they never import it.
OPERATORS = {"_status", "_savings"}


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def _is_submodule(package: Path, dotted: str) -> bool:
    """Whether ``dotted`` (relative to the package) is a module or package of it."""
    path = package.joinpath(*dotted.split("."))
    return (path.with_suffix(".py").is_file() or path.is_dir()
            or any(package.glob(f"{dotted}.*.so")) or any(package.glob(f"{dotted}.*.pyd"))
            or dotted == "_fastdeflate")


def imports(path: Path, package: Path) -> set[str]:
    """What the module at ``path`` imports of the package, relative to it ("" for the face
    itself), wherever the import statement is."""
    name = _module_name(path, package)
    here = name.split(".") if name else []
    if path.name != "__init__.py":
        here = here[:-1]  # a module's relative imports start at its package
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "fastdeflate" or alias.name.startswith("fastdeflate."):
                    found.add(alias.name.partition(".")[2])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else list(here)
                module = ".".join(base + ([node.module] if node.module else []))
            elif node.module == "fastdeflate" or (node.module or "").startswith("fastdeflate."):
                module = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:
                dotted = f"{module}.{alias.name}" if module else alias.name
                found.add(dotted if _is_submodule(package, dotted) else module)
    return found


def _layer_of(dotted: str) -> str:
    return dotted.split(".")[0]


def violations(package: Path) -> list[str]:
    """Every import that looks up, as "importer -> imported"."""
    out = []
    for path in sorted(package.rglob("*.py")):
        name = _module_name(path, package)
        top = _layer_of(name)
        for target in sorted(imports(path, package)):
            if target == name:
                continue
            if top in FLOOR | ON_THE_FLOOR and _layer_of(target) not in FLOOR:
                out.append(f"{name or 'fastdeflate'} -> {target or 'fastdeflate (the face)'}")
            elif top in OPERATORS and target == "":
                out.append(f"{name} -> fastdeflate (the face)")
    return out


needs_sources = pytest.mark.skipif(not (PACKAGE / "__init__.py").is_file(),
                                   reason="the package's sources are not in this tree")


@needs_sources
def test_every_layer_looks_down() -> None:
    assert violations(PACKAGE) == []


@needs_sources
def test_the_check_sees_an_import_that_looks_up(tmp_path: Path) -> None:
    """A copy of the package with one lazy import up the layers in each kind of module:
    each is reported (so the check above can fail)."""
    copy = tmp_path / "fastdeflate"
    copy.mkdir()
    for path in PACKAGE.rglob("*.py"):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    up = {"_what_pays.py": "    from fastdeflate import _savings\n",
          "_fallback/compressor.py": "    from ... import _status\n",
          "_broadcast.py": "    import fastdeflate\n",
          "_status.py": "    from . import Compressor\n"}
    for relative, line in up.items():
        with (copy / relative).open("a", encoding="utf-8") as f:
            f.write(f"\n\ndef _look_up():\n{line}")
    assert sorted(violations(copy)) == sorted([
        "_what_pays -> _savings", "_fallback.compressor -> _status",
        "_broadcast -> fastdeflate (the face)", "_status -> fastdeflate (the face)"])


@pytest.mark.parametrize("pure", ["0", "1"])
def test_the_floor_imports_alone(pure: str, tmp_path: Path) -> None:
    """The floor's modules import in a fresh interpreter with nothing above them loaded
    (beyond the package's own ``__init__``, which Python runs first), and the codec it
    chose is the face's."""
    code = ("import sys, fastdeflate._codec as c, fastdeflate as f; "
            "assert c.IMPLEMENTATION == f.IMPLEMENTATION; "
            "assert c.codec.Compressor is f.Compressor, (c.codec, f.Compressor); "
            "print(c.IMPLEMENTATION)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "FASTDEFLATE_PURE": pure},
                         cwd=tmp_path, timeout=60)  # (not a source tree's package)
    assert out.returncode == 0, out.stderr
    built = importlib.util.find_spec("fastdeflate._fastdeflate") is not None
    assert out.stdout.strip() == ("cython" if pure == "0" and built else "python")
