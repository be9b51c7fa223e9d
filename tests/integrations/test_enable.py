"""The package-level ``fastdeflate.enable()`` / ``disable()`` over every adapter.

A library that fails (an unsupported version: a hook point missing, a layout changed) is
forced for real here by taking the hook point out of the installed library itself; no
fastdeflate code is replaced.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterator

import pytest

import fastdeflate
import fastdeflate.integrations as integrations

from ._support import AUTOBAHN_SUPPORTED

pytestmark = pytest.mark.timeout(120)

#: The supported libraries installed here (all of them where autobahn can be).
LIBRARIES = [n for n in integrations.SUPPORTED if n != "autobahn" or AUTOBAHN_SUPPORTED]


def enable_everything() -> list[str]:
    """``fastdeflate.enable()``, asking for the fallback where only it was imported."""
    return fastdeflate.enable(fallback=fastdeflate.IMPLEMENTATION != "cython")


@pytest.fixture(autouse=True)
def all_stock() -> Iterator[None]:
    """Each test starts and ends with every library stock."""
    assert integrations.enabled() == []
    yield
    for name in LIBRARIES:
        importlib.import_module(f"fastdeflate.integrations.{name}").disable()
    assert integrations.enabled() == []


def runtime_warnings(record: pytest.WarningsRecorder) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, RuntimeWarning)]


# ------------------------------------------------------- one library fails, the rest go on


def test_enable_leaves_a_library_that_fails_stock_and_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An aiohttp whose writer no longer has ``ZLibCompressor`` (what a future aiohttp
    that renamed it looks like): the adapter's enable() raises RuntimeError; enable()
    warns, leaves aiohttp stock, and still enables the libraries before and after it."""
    from aiohttp._websocket import reader_py, writer

    import fastdeflate.integrations.aiohttp as fd_aiohttp

    stock_decompressor = reader_py.ZLibDecompressor
    monkeypatch.delattr(writer, "ZLibCompressor")
    with pytest.warns(RuntimeWarning) as record:
        names = enable_everything()
    others = [n for n in LIBRARIES if n != "aiohttp"]
    assert names == others  # websockets before aiohttp, wsproto/tornado/autobahn after
    assert integrations.enabled() == others
    messages = runtime_warnings(record)
    assert any("aiohttp left stock" in m and "ZLibCompressor not found" in m
               for m in messages), messages
    assert not fd_aiohttp.is_enabled()
    assert not hasattr(writer, "ZLibCompressor")
    assert reader_py.ZLibDecompressor is stock_decompressor
    assert fastdeflate.disable() == others


def test_disable_and_enabled_go_on_past_a_library_that_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tornado's hook point vanishing while enabled makes its is_enabled() raise:
    enabled() and disable() warn about tornado and still handle autobahn, after it."""
    import tornado.websocket as tws

    import fastdeflate.integrations.tornado as fd_tornado

    assert enable_everything() == LIBRARIES
    monkeypatch.delattr(tws, "_PerMessageDeflateDecompressor")
    others = [n for n in LIBRARIES if n != "tornado"]
    with pytest.warns(RuntimeWarning, match="tornado"):
        assert integrations.enabled() == others
    with pytest.warns(RuntimeWarning, match="tornado"):
        assert fastdeflate.disable() == others
    monkeypatch.undo()  # tornado as it was: still enabled, as disable() could not tell
    assert fd_tornado.is_enabled() and integrations.enabled() == ["tornado"]
    assert fastdeflate.disable() == ["tornado"]


#: A tornado whose ``tornado.websocket`` was reorganised: importing the adapter fails
#: with AttributeError (not ImportError).
FAKE_TORNADO = {
    "__init__.py": "version = '99.0'\nversion_info = (99, 0, 0, 0)\n",
    "web.py": "class GZipContentEncoding:\n    GZIP_LEVEL = 6\n",
    "websocket.py": "",
    "httpclient.py": "",
    "httputil.py": "",
}


def test_enable_leaves_a_library_whose_adapter_cannot_import_stock(tmp_path: Path) -> None:
    for filename, text in FAKE_TORNADO.items():
        (tmp_path / "tornado").mkdir(exist_ok=True)
        (tmp_path / "tornado" / filename).write_text(text)
    code = textwrap.dedent("""
        import warnings, fastdeflate
        from fastdeflate import integrations
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            names = fastdeflate.enable(fallback=True)
        print(",".join(names))
        print(",".join(integrations.enabled()))
        print(",".join(fastdeflate.disable()))
        for w in caught:
            print(w.category.__name__, w.message)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    others = ",".join(n for n in LIBRARIES if n != "tornado")
    lines = out.stdout.splitlines()
    assert lines[:3] == [others] * 3
    assert any(line.startswith("RuntimeWarning fastdeflate: tornado left stock")
               and "has no attribute" in line for line in lines[3:]), lines
