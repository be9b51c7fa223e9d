"""The package-level ``fastdeflate.enable()`` / ``disable()`` over every adapter, and each
adapter's ``enable()`` / ``disable()`` called from many threads at once.

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
import threading
import time
import logging
import types
from pathlib import Path
from typing import Callable, Iterator

import pytest

import fastdeflate
import fastdeflate.integrations as integrations

from _skipcheck import peer_installed

from ._support import AUTOBAHN_SUPPORTED

pytestmark = pytest.mark.timeout(120)

#: The supported libraries installed here (all of them where autobahn can be and the
#: test set has it).
LIBRARIES = [n for n in integrations.SUPPORTED
             if n != "autobahn" or (AUTOBAHN_SUPPORTED and peer_installed("autobahn"))]


def enable_everything() -> list[str]:
    """``fastdeflate.enable()``, asking for the fallback where only it was imported."""
    return fastdeflate.enable(fallback=fastdeflate.IMPLEMENTATION != "cython")


@pytest.fixture(autouse=True)
def all_stock() -> Iterator[None]:
    """Each test starts and ends with every library stock (and no import hook)."""
    assert integrations.enabled() == []
    yield
    fastdeflate.disable()
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
    assert any("aiohttp left stock" in m and "ZLibCompressor" in m
               for m in messages), messages
    assert not fd_aiohttp.is_enabled()
    assert not hasattr(writer, "ZLibCompressor")
    assert reader_py.ZLibDecompressor is stock_decompressor
    assert fastdeflate.disable() == others


def test_status_and_the_log_say_which_library_is_stock_and_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """The same failing aiohttp: fastdeflate.status() says aiohttp is stock and why,
    the others enabled, with their versions; the ``fastdeflate`` logger has a WARNING
    for aiohttp and an INFO for each library enabled (a RuntimeWarning can be hidden by
    -W ignore or a server's logging; these cannot)."""
    from importlib.metadata import version

    from aiohttp._websocket import writer

    monkeypatch.delattr(writer, "ZLibCompressor")
    with caplog.at_level(logging.INFO, logger="fastdeflate"):
        with pytest.warns(RuntimeWarning):
            enable_everything()
    libraries = fastdeflate.status()["libraries"]
    assert libraries["aiohttp"]["state"] == "stock"
    assert "ZLibCompressor" in libraries["aiohttp"]["why"]
    for name in LIBRARIES:
        assert libraries[name]["version"] == version(name)
        if name != "aiohttp":
            facts = dict(libraries[name])
            assert isinstance(facts.pop("connections"), int)  # (test_open_connections.py)
            assert facts == {"version": version(name), "state": "enabled", "why": None}
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "fastdeflate"]
    assert (logging.WARNING, f"fastdeflate: aiohttp {version('aiohttp')} left stock: "
            f"{libraries['aiohttp']['why'].partition(': ')[2]}") in records
    for name in LIBRARIES:
        if name != "aiohttp":
            assert (logging.INFO, f"fastdeflate enabled for {name} {version(name)}") in records
    fastdeflate.disable()
    assert {facts["state"] for facts in fastdeflate.status()["libraries"].values()} <= {
        "stock", "not installed"}


def test_disable_and_enabled_go_on_past_a_library_that_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tornado's hook points vanishing while enabled make its is_enabled() raise:
    enabled() and disable() warn about tornado and still handle autobahn, after it."""
    import tornado.websocket as tws

    import fastdeflate.integrations.tornado as fd_tornado

    assert enable_everything() == LIBRARIES
    monkeypatch.delattr(tws, "_PerMessageDeflateCompressor")
    monkeypatch.delattr(tws, "_PerMessageDeflateDecompressor")
    others = [n for n in LIBRARIES if n != "tornado"]
    with pytest.warns(RuntimeWarning, match="tornado"):
        assert integrations.enabled() == others
    with pytest.warns(RuntimeWarning, match="tornado"):
        assert fastdeflate.disable() == others
    monkeypatch.undo()  # tornado as it was: still enabled, as disable() could not tell
    assert fd_tornado.is_enabled() and integrations.enabled() == ["tornado"]
    assert fastdeflate.disable() == ["tornado"]


class RefusingModule(types.ModuleType):
    """A library module whose decompressor hook point cannot be rebound (a read-only
    attribute, say): an adapter's enable() fails after its first write."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "_PerMessageDeflateDecompressor":
            raise AttributeError(f"{name} is read-only")
        super().__setattr__(name, value)


def test_enable_undoes_a_library_that_fails_half_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """tornado's adapter replaces the compressor class, then fails to replace the
    decompressor: enable() puts the compressor back (no library is left half-enabled),
    warns, and enables the others."""
    import tornado.websocket as tws

    stock = tws._PerMessageDeflateCompressor, tws._PerMessageDeflateDecompressor
    monkeypatch.setattr(tws, "__class__", RefusingModule)
    others = [n for n in LIBRARIES if n != "tornado"]
    with pytest.warns(RuntimeWarning, match="tornado left stock.*read-only"):
        assert enable_everything() == others
    assert (tws._PerMessageDeflateCompressor, tws._PerMessageDeflateDecompressor) == stock
    assert integrations.enabled() == others
    assert fastdeflate.disable() == others


def test_disable_goes_on_past_an_adapter_whose_disable_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiohttp's pure-Python reader losing ``ZLibDecompressor`` while enabled: aiohttp
    still reports enabled (its writer is patched) but its disable() raises; disable()
    warns about aiohttp and still disables the others, aiohttp included once it can."""
    from aiohttp._websocket import reader_py

    import fastdeflate.integrations.aiohttp as fd_aiohttp

    assert enable_everything() == LIBRARIES
    monkeypatch.delattr(reader_py, "ZLibDecompressor")
    others = [n for n in LIBRARIES if n != "aiohttp"]
    with pytest.warns(RuntimeWarning, match="aiohttp could not be disabled"):
        assert fastdeflate.disable() == others
    assert integrations.enabled() == ["aiohttp"]
    monkeypatch.undo()
    assert fd_aiohttp.is_enabled()
    assert fastdeflate.disable() == ["aiohttp"]


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
    """enable() covers that tornado too (it imports no library to find out); when the
    application imports ``tornado.websocket``, the adapter fails: a RuntimeWarning, that
    tornado is left stock and the application's import goes on."""
    for filename, text in FAKE_TORNADO.items():
        (tmp_path / "tornado").mkdir(exist_ok=True)
        (tmp_path / "tornado" / filename).write_text(text)
    code = textwrap.dedent("""
        import warnings, fastdeflate
        from fastdeflate import integrations
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            print(",".join(fastdeflate.enable(fallback=True)))
            import tornado.websocket
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
    assert lines[:3] == [",".join(LIBRARIES), others, others]
    assert any(line.startswith("RuntimeWarning fastdeflate: tornado left stock")
               and ("has no attribute" in line or "needs tornado" in line)
               for line in lines[3:]), lines


# ------------------------------------------------------- many threads at once


class GilYieldingModule(types.ModuleType):
    """A library module that lets other threads run whenever one of its hook points is
    read or written. Under the GIL an adapter's enable() otherwise has no point where
    another thread can get in (free-threaded CPython needs none); this only widens the
    window of a race the adapter may have, it changes no value."""

    def __getattribute__(self, name: str) -> object:
        if name in HOOK_NAMES:
            time.sleep(0)
        return super().__getattribute__(name)

    def __setattr__(self, name: str, value: object) -> None:
        if name in HOOK_NAMES:
            time.sleep(0)
        super().__setattr__(name, value)


class GilYieldingDict(dict):  # type: ignore[type-arg]
    """The same for autobahn's registry entry (a dict)."""

    def __getitem__(self, key: object) -> object:
        time.sleep(0)
        return super().__getitem__(key)

    def __setitem__(self, key: object, value: object) -> None:
        time.sleep(0)
        super().__setitem__(key, value)


HOOK_NAMES = {"PerMessageDeflate", "ZLibCompressor", "ZLibDecompressor",
              "_PerMessageDeflateCompressor", "_PerMessageDeflateDecompressor"}


def hook_points(name: str) -> tuple[Callable[[], tuple[object, ...]], list[types.ModuleType]]:
    """How to read the objects library ``name``'s adapter replaces, and the modules that
    hold them (wsproto's hook is a class attribute: no module to slow down there)."""
    if name == "websockets":
        from websockets.extensions import permessage_deflate

        return lambda: (permessage_deflate.PerMessageDeflate,), [permessage_deflate]
    if name == "aiohttp":
        from aiohttp._websocket import reader_c, reader_py, writer

        return (lambda: (writer.ZLibCompressor, reader_c.ZLibDecompressor,
                         reader_py.ZLibDecompressor)), [writer, reader_c, reader_py]
    if name == "wsproto":
        import wsproto.extensions

        import fastdeflate.integrations.wsproto as adapter

        # no __new__ of its own and, after disable(), the stock-like one: both stock
        return lambda: (wsproto.extensions.PerMessageDeflate.__dict__.get(
            "__new__", adapter._stock_new),), []
    if name == "tornado":
        import tornado.websocket as tws

        return (lambda: (tws._PerMessageDeflateCompressor,
                         tws._PerMessageDeflateDecompressor)), [tws]
    assert name == "autobahn"
    from autobahn.websocket.compress import PERMESSAGE_COMPRESSION_EXTENSION as registry

    return lambda: (registry["permessage-deflate"]["PMCE"],), []


@pytest.fixture
def gil_yielding(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Make library ``name`` let other threads in at its hook points (undone after the
    test), and switch threads as often as the interpreter allows."""

    def slow_down(name: str) -> None:
        for module in hook_points(name)[1]:
            monkeypatch.setattr(module, "__class__", GilYieldingModule)
        if name == "autobahn":
            from autobahn.websocket.compress import PERMESSAGE_COMPRESSION_EXTENSION as registry

            entry = registry["permessage-deflate"]
            monkeypatch.setitem(registry, "permessage-deflate", GilYieldingDict(entry))
        sys.setswitchinterval(1e-6)

    interval = sys.getswitchinterval()
    yield slow_down
    sys.setswitchinterval(interval)


THREADS = 8
ROUNDS = 60
MIXED_CALLS = 20


@pytest.mark.parametrize("name", LIBRARIES)
def test_concurrent_enable_disable_is_exact(
    name: str, gil_yielding: Callable[[str], None]
) -> None:
    """8 threads enable together, disable together, then each alternates enable() and
    disable(), then all disable, many rounds: after each step every hook point holds
    exactly the stock object or exactly the adapter's, all of them the same way, matching
    is_enabled() — enabled after the enables, stock after the disables."""
    adapter = importlib.import_module(f"fastdeflate.integrations.{name}")
    hooks = hook_points(name)[0]
    stock = hooks()
    adapter.enable()
    ours = hooks()
    adapter.disable()
    assert all(a is b for a, b in zip(hooks(), stock))
    assert all(a is not b for a, b in zip(ours, stock))
    gil_yielding(name)

    bad: list[str] = []

    def check(expected: bool | None) -> None:  # run by one thread while the others wait
        now, enabled = hooks(), adapter.is_enabled()
        want = {True: [ours], False: [stock], None: [ours, stock]}[expected]
        exact = any(all(a is b for a, b in zip(now, w)) for w in want)
        if not exact or enabled != all(a is b for a, b in zip(now, ours)):
            bad.append(f"expected enabled={expected}: {now!r}, is_enabled()={enabled}")

    after_enable = threading.Barrier(THREADS, action=lambda: check(True), timeout=60)
    after_disable = threading.Barrier(THREADS, action=lambda: check(False), timeout=60)
    after_mixed = threading.Barrier(THREADS, action=lambda: check(None), timeout=60)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            for _ in range(ROUNDS):
                adapter.enable()
                after_enable.wait()
                adapter.disable()
                after_disable.wait()
                for call in range(MIXED_CALLS):
                    adapter.enable() if (index + call) % 2 else adapter.disable()
                after_mixed.wait()
                adapter.disable()
                after_disable.wait()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            for barrier in (after_enable, after_disable, after_mixed):
                barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    assert not bad, (len(bad), bad[:3])
    assert all(a is b for a, b in zip(hooks(), stock))
    assert not adapter.is_enabled()


# ------------------------------------------------------- the adapter imported twice

#: Code reading each library's hook points into ``hooks()``, for a fresh interpreter.
READ_HOOKS = {
    "websockets": "from websockets.extensions import permessage_deflate as m\n"
                  "hooks = lambda: (m.PerMessageDeflate,)",
    "wsproto": "import wsproto.extensions as m\n"
               "hooks = lambda: (getattr(m.PerMessageDeflate.__dict__.get('__new__'),\n"
               "                         '__qualname__', '_stock_new'),)",
    "tornado": "import tornado.websocket as m\n"
               "hooks = lambda: (m._PerMessageDeflateCompressor,\n"
               "                 m._PerMessageDeflateDecompressor)",
    "autobahn": "from autobahn.websocket.compress import PERMESSAGE_COMPRESSION_EXTENSION as m\n"
                "hooks = lambda: (m['permessage-deflate']['PMCE'],)",
}


@pytest.mark.parametrize("name", [n for n in READ_HOOKS if n in LIBRARIES])
def test_adapter_reimported_while_enabled_still_restores_stock(name: str) -> None:
    """The adapter module imported again (``importlib.reload``) while enabled finds the
    library's own objects behind its earlier self: disable() puts those back."""
    code = READ_HOOKS[name] + textwrap.dedent(f"""
        import importlib
        adapter = importlib.import_module("fastdeflate.integrations.{name}")
        stock = hooks()
        adapter.enable()
        adapter = importlib.reload(adapter)
        adapter.enable()
        assert adapter.is_enabled()
        adapter.disable()
        assert all(a == b for a, b in zip(hooks(), stock)), (hooks(), stock)
        assert not adapter.is_enabled()
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=Path(fastdeflate.__file__).parent.parent)
    assert out.stdout.strip() == "ok", out.stderr
