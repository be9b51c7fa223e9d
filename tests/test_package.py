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
