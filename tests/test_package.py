"""The package as a whole: which implementation is used, and the one-line enable()."""

from __future__ import annotations

import importlib.machinery
import os
import shutil
from pathlib import Path

import pytest

import fastdeflate
from _subprocess import run_python


def test_implementation_choice():
    assert fastdeflate.IMPLEMENTATION in ("cython", "python")
    assert isinstance(fastdeflate.ZLIB_VERSION, str) and fastdeflate.ENGINE
    assert isinstance(fastdeflate.__version__, str)


def test_compiled_extension_required_in_ci():
    """In CI (FASTDEFLATE_REQUIRE_EXTENSION=1) the compiled codec must be the one used."""
    if os.environ.get("FASTDEFLATE_REQUIRE_EXTENSION") == "1":
        assert fastdeflate.IMPLEMENTATION == "cython"


# Run in a subprocess: which codec the package chose, and that it works.
CHOSEN_CODEC = """
import zlib, fastdeflate
from fastdeflate import _pure
c, d = fastdeflate.Compressor(), fastdeflate.Decompressor()
message = b"which codec? " * 100
payload = c.compress(message)
assert d.decompress(payload) == message
assert zlib.decompressobj(-15).decompress(payload + b"\\x00\\x00\\xff\\xff") == message
is_pure = fastdeflate.Compressor is _pure.Compressor and fastdeflate.ENGINE == _pure.ENGINE
assert is_pure == (fastdeflate.IMPLEMENTATION == "python"), fastdeflate.IMPLEMENTATION
print(fastdeflate.IMPLEMENTATION, fastdeflate.__file__)
"""

# Makes the extension not found, as when it is not installed: the import system asks
# this finder first, and it answers as the import system does when no finder has it.
NO_EXTENSION = """
import sys
class NoExtension:
    def find_spec(self, name, path=None, target=None):
        if name == "fastdeflate._fastdeflate":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoExtension())
"""


def chosen_codec(cwd: str, prelude: str = "", **env: str) -> tuple[str, str]:
    """IMPLEMENTATION and the package's file, in a new interpreter run in ``cwd`` that
    imports the package this one tested (unless ``env`` sets PYTHONPATH)."""
    out = run_python(prelude + CHOSEN_CODEC, cwd=cwd, timeout=60, **env)
    assert out.returncode == 0, out.stderr
    implementation, path = out.stdout.split()
    return implementation, path


@pytest.mark.parametrize("value, expected", [("1", "python"), ("yes", "python"),
                                             ("0", "cython"), ("", "cython")])
def test_environment_variable_forces_the_fallback(tmp_path, value, expected):
    if expected == "cython" and fastdeflate.IMPLEMENTATION != "cython":
        pytest.skip("the compiled extension is not installed here")
    assert chosen_codec(str(tmp_path), FASTDEFLATE_PURE=value)[0] == expected


def test_fallback_when_the_extension_is_missing(tmp_path):
    """``fastdeflate._fastdeflate`` not found (an install where it did not build): the
    pure-Python codec is used."""
    implementation, path = chosen_codec(str(tmp_path), NO_EXTENSION)
    assert Path(path) == Path(fastdeflate.__file__)
    assert implementation == "python"


def test_fallback_when_the_extension_cannot_be_loaded(tmp_path):
    """A copy of the package whose extension cannot be loaded (a file for another
    platform): the import fails for real, and the pure-Python codec is used."""
    source = Path(fastdeflate.__file__).parent
    shutil.copytree(source, tmp_path / "fastdeflate",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / "fastdeflate" / f"_fastdeflate{suffix}").write_bytes(b"not a library")
    implementation, path = chosen_codec(str(tmp_path), PYTHONPATH=str(tmp_path))
    assert Path(path).parent == tmp_path / "fastdeflate"  # the copy was imported
    assert implementation == "python"


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
    out = run_python(code, FASTDEFLATE_PURE="1")
    assert out.stdout.strip() == "ok", out.stderr


def test_enable_leaves_an_unsupported_library_version_stock(tmp_path):
    """An installed library in a version the adapter cannot drive (here an autobahn
    without ``PayloadCorruptError``, like autobahn 24.4 — the last one for Python 3.10 —
    or 26.7) is left stock with a RuntimeWarning when the application imports it (enable()
    imports no library); the application's import goes on, every other library is still
    enabled."""
    package = tmp_path / "autobahn"
    (package / "websocket").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '24.4.2'\n")
    (package / "exception.py").write_text("class PayloadExceededError(RuntimeError):\n    pass\n")
    (package / "websocket" / "__init__.py").write_text("")
    (package / "websocket" / "compress.py").write_text(
        "PERMESSAGE_COMPRESSION_EXTENSION = {'permessage-deflate': {'PMCE': None}}\n")
    code = (
        "import sys, warnings, fastdeflate\n"
        "from fastdeflate import integrations\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    names = fastdeflate.enable(fallback=True)\n"
        "    assert 'autobahn' in names and 'websockets' in names, names\n"
        "    assert not caught, [str(w.message) for w in caught]\n"
        "    import autobahn.websocket.compress\n"
        "assert autobahn.websocket.compress.PERMESSAGE_COMPRESSION_EXTENSION[\n"
        "    'permessage-deflate']['PMCE'] is None  # stock\n"
        "assert 'fastdeflate.integrations.autobahn' not in sys.modules\n"
        "messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]\n"
        "assert any('autobahn left stock' in m and '26.10.1' in m for m in messages), messages\n"
        "assert 'autobahn' not in integrations.enabled()\n"
        "assert set(fastdeflate.disable()) == set(names) - {'autobahn'}\n"
        "assert integrations.enabled() == []\n"
        "print('ok')\n"
    )
    out = run_python(code, cwd=str(tmp_path), first_on_path=[str(tmp_path)])
    assert out.stdout.strip() == "ok", out.stderr
