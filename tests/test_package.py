"""The package as a whole: which implementation is used, and the one-line enable()."""

from __future__ import annotations

import os
import subprocess
import sys

import fastdeflate


def test_implementation_choice():
    assert fastdeflate.IMPLEMENTATION in ("cython", "python")
    assert isinstance(fastdeflate.ZLIB_VERSION, str) and fastdeflate.ENGINE
    assert isinstance(fastdeflate.__version__, str)


def test_compiled_extension_required_in_ci():
    """In CI (FASTDEFLATE_REQUIRE_EXTENSION=1) the compiled codec must be the one used."""
    if os.environ.get("FASTDEFLATE_REQUIRE_EXTENSION") == "1":
        assert fastdeflate.IMPLEMENTATION == "cython"


def test_environment_variable_forces_the_fallback():
    code = "import fastdeflate; print(fastdeflate.IMPLEMENTATION)"
    env = dict(os.environ, FASTDEFLATE_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == "python"


def test_enable_without_the_extension_keeps_the_libraries_stock():
    code = (
        "import warnings, fastdeflate\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    assert fastdeflate.enable() == []\n"
        "assert any(issubclass(w.category, RuntimeWarning) for w in caught)\n"
        "from fastdeflate import integrations\n"
        "assert integrations.enabled() == []\n"
        "assert 'websockets' in fastdeflate.enable(fallback=True)\n"
        "fastdeflate.disable()\n"
        "print('ok')\n"
    )
    env = dict(os.environ, FASTDEFLATE_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_enable_leaves_an_unsupported_library_version_stock(tmp_path):
    """An installed library in a version the adapter cannot drive (here an autobahn
    without ``PayloadCorruptError``, like autobahn 24.4 — the last one for Python 3.10 —
    or 26.7) is left stock with a RuntimeWarning; every other library is still enabled."""
    package = tmp_path / "autobahn"
    package.mkdir()
    (package / "__init__.py").write_text("__version__ = '24.4.2'\n")
    (package / "exception.py").write_text("class PayloadExceededError(RuntimeError):\n    pass\n")
    code = (
        "import warnings, fastdeflate\n"
        "from fastdeflate import integrations\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    names = fastdeflate.enable(fallback=True)\n"
        "assert 'autobahn' not in names and 'websockets' in names, names\n"
        "messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]\n"
        "assert any('autobahn left stock' in m and '26.10.1' in m for m in messages), messages\n"
        "assert 'autobahn' not in integrations.enabled()\n"
        "assert set(fastdeflate.disable()) == set(names)\n"
        "assert integrations.enabled() == []\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.stdout.strip() == "ok", out.stderr
