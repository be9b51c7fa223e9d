"""``python -m fastdeflate`` cannot mislead: run from a source tree without the compiled
extension it says so and what to do (and ``enable()``'s warning too), it names the engines
this build has and what a build without ISA-L costs, ``pending`` says what it means, and
the command line fails like argparse (one line, status 2) with plain-text help. Every
check runs a real interpreter."""

from __future__ import annotations

import importlib.machinery
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fastdeflate
import fastdeflate.integrations
from _subprocess import PACKAGE_PARENT, run_python

MAIN = "import runpy, sys; sys.argv[0] = 'fastdeflate'; runpy.run_module('fastdeflate', run_name='__main__')"


def source_tree(tmp_path: Path) -> Path:
    """A checkout's root as ``git clone`` leaves it: the package's Python files, no
    compiled extension, and ``setup.py`` and ``_fastdeflate.pyx`` beside the package."""
    root = tmp_path / "checkout"
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    shutil.copytree(Path(fastdeflate.__file__).parent, root / "fastdeflate",
                    ignore=lambda _, names: [n for n in names
                                             if n.endswith(suffixes) or n == "__pycache__"])
    (root / "setup.py").write_text("# the checkout's setup.py\n")
    (root / "_fastdeflate.pyx").write_text("# the extension's source\n")
    return root


def python_in(cwd: Path, *args: str, path: str) -> subprocess.CompletedProcess:
    """``python -S args`` in ``cwd``, with only ``path`` past the current directory on
    sys.path (-S: no site-packages, so no editable install's import hook either: the
    installed copy is ``path``, as a non-editable install in site-packages would be)."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("FASTDEFLATE_PURE", "FASTDEFLATE_ENABLE")}
    environ["PYTHONPATH"] = path
    return subprocess.run([sys.executable, "-S", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=60)


needs_extension = pytest.mark.skipif(
    fastdeflate.IMPLEMENTATION != "cython",
    reason="the package under test has no compiled extension")


@needs_extension
def test_from_a_checkouts_root_it_says_the_installed_copy_is_not_the_one_running(tmp_path):
    root = source_tree(tmp_path)
    out = python_in(root, "-m", "fastdeflate", path=PACKAGE_PARENT)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()[:2]
    assert first.startswith(f"WARNING: fastdeflate was imported from the source tree {root} "
                            "(the current directory), which has no compiled extension")
    installed = Path(PACKAGE_PARENT, "fastdeflate").resolve()
    assert f"not the installed copy in {installed}" in first
    assert "run from another directory" in first and "build_ext --inplace" in first
    assert second.startswith(f"fastdeflate {fastdeflate.__version__}: python codec")

    # enable() says the same in its warning, beside returning []
    out = python_in(root, "-W", "always", "-c",
                    "import fastdeflate; print(fastdeflate.enable())", path=PACKAGE_PARENT)
    assert out.stdout.strip() == "[]"
    assert "RuntimeWarning" in out.stderr and "compiled extension is not available" in out.stderr
    assert f"not the installed copy in {installed}" in out.stderr

    # ... and from elsewhere, with the tree first on the path, it says to take it off
    out = python_in(tmp_path, "-m", "fastdeflate", path=os.pathsep.join([str(root), PACKAGE_PARENT]))
    assert f"take {root} off sys.path" in out.stdout.splitlines()[0]

    # run from any other directory, the installed copy (with the extension) runs
    out = python_in(tmp_path, "-m", "fastdeflate", path=PACKAGE_PARENT)
    assert not out.stdout.startswith("WARNING"), out.stdout
    assert out.stdout.startswith(f"fastdeflate {fastdeflate.__version__}: cython codec")


def test_from_a_source_tree_never_built_it_says_to_build(tmp_path):
    root = source_tree(tmp_path)
    out = python_in(root, "-m", "fastdeflate", path="")
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith(f"WARNING: fastdeflate was imported from the source tree {root}")
    assert "no installed copy has the extension either" in first
    assert "pip install ." in first and "build_ext --inplace" in first
    status = python_in(root, "-c", "import fastdeflate; print(fastdeflate.status()"
                                   "['source_tree'] is not None)", path="")
    assert status.stdout.strip() == "True", status.stderr


def test_the_fallback_asked_for_is_no_source_tree_mistake(tmp_path):
    out = run_python("import fastdeflate; print(fastdeflate.status()['source_tree'])",
                     FASTDEFLATE_PURE="1")
    assert out.stdout.strip() == "None", out.stderr


@needs_extension
def test_it_names_the_engines_of_this_build():
    from fastdeflate import _fastdeflate

    out = run_python(MAIN)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    engines = next(line for line in lines if line.startswith("engines in this build: "))
    assert fastdeflate.ENGINE in engines
    cpu = platform.machine().lower()
    if _fastdeflate._ISAL:
        assert f"{_fastdeflate._ISAL} (level 1, whole-message inflate)" in engines
        assert not any("without ISA-L" in line for line in lines)
    else:
        assert engines.endswith("no ISA-L")
        if cpu in ("x86_64", "amd64", "aarch64", "arm64"):
            cost = lines[lines.index(engines) + 1]
            assert "without ISA-L, level 1" in cost and "slower" in cost
            assert "FASTDEFLATE_ISAL=bundled" in cost or "FASTDEFLATE_ZLIB=bundled" in cost
            if cpu in ("x86_64", "amd64") and not fastdeflate.ENGINE.startswith("zlib "):
                assert "nasm" in cost


def test_a_bad_library_list_is_a_one_line_usage_error():
    out = run_python(MAIN, "run", "--libraries", "bogus", "--", "true")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.splitlines()[-1] == (
        "python -m fastdeflate run: error: --libraries bogus: not a supported library: "
        "bogus (supported: websockets, aiohttp, wsproto, tornado, autobahn, daphne); "
        "or 1 for all")
    out = run_python(MAIN, "run")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines()[-1].endswith("error: no command given (run -- CMD ARGS...)")


def test_a_command_not_found_is_named_as_a_shell_names_it():
    """Exit status 127 and the command's name, not the path ``execvp`` tried last."""
    out = run_python(MAIN, "run", "--", "fastdeflate-no-such-command", "arg")
    assert out.returncode == 127
    assert "Traceback" not in out.stderr and "b'" not in out.stderr
    assert out.stderr.splitlines()[-1] == (
        "python -m fastdeflate run: fastdeflate-no-such-command: command not found")


@pytest.mark.parametrize("value", ["", " ", ","])
def test_a_library_list_naming_none_is_a_usage_error(value):
    """An empty ``--libraries`` (an unset shell variable, say) would enable nothing."""
    out = run_python(MAIN, "run", "--libraries", value, "--", "true")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines()[-1] == (
        f"python -m fastdeflate run: error: --libraries {value!r} names no library "
        "(a comma-separated list, 1 for all, or 0 to run with fastdeflate off)")


def test_a_library_list_turning_it_off_says_so_and_runs():
    out = run_python(MAIN, "run", "--libraries", "0", "--", sys.executable, "-c",
                     "import os; print(os.environ['FASTDEFLATE_ENABLE'])")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "0\n"
    assert ("fastdeflate: --libraries 0: fastdeflate stays off in the command's "
            "processes") in out.stderr


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]])
def test_help_is_plain_text(argv):
    out = run_python(MAIN, *argv)
    assert out.returncode == 0, out.stderr
    assert "``" not in out.stdout and ":func:" not in out.stdout and ":mod:" not in out.stdout
    assert "python -m fastdeflate" in out.stdout


def test_pending_says_what_it_means():
    """``import websockets`` does not load the module that compresses: websockets stays
    pending until the application imports its server or client."""
    pytest.importorskip("websockets")
    library = "websockets"
    module = fastdeflate.integrations._MODULES[library][0]
    code = ("import sys, warnings, fastdeflate\n"
            "warnings.simplefilter('ignore')\n"
            f"fastdeflate.enable(libraries=[{library!r}], fallback=True)\n"
            f"import {library}\n"
            f"assert {module!r} not in sys.modules\n"
            "from fastdeflate.__main__ import status_lines\n"
            "print('\\n'.join(status_lines()))\n"
            f"print(fastdeflate.status()['libraries'][{library!r}]['why'])\n")
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines()
                if line.strip().startswith(f"{library} "))
    assert ": pending (enabled; patched when the application imports " in line
    assert module in line and "before its first connection" in line
    assert module in out.stdout.splitlines()[-1]


def test_it_shows_what_compress_what_pays_is_set_to():
    """The settings as the environment sets them at import, and the messages sent
    uncompressed so far (none in a fresh interpreter)."""
    out = run_python(MAIN)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == (
        "compress what pays: min size 0 bytes, skip incompressible on; "
        "sent uncompressed: none")
    out = run_python(MAIN, FASTDEFLATE_MIN_SIZE="300", FASTDEFLATE_SKIP_INCOMPRESSIBLE="0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].startswith(
        "compress what pays: min size 300 bytes, skip incompressible off;")
