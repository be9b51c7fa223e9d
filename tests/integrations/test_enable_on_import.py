"""``fastdeflate.enable()`` imports no websocket library: it patches those already imported
at once and each other one right after the application imports it.

Every test runs a fresh interpreter (only there is a library not imported yet), on the
implementation under test (``impl_environ``), from outside the checkout (``-c`` puts the
working directory first on ``sys.path``). The libraries are the real ones; the echoes run
the real servers and clients of tests/integrations/test_matrix.py on 127.0.0.1, imported
only after ``enable()``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

import fastdeflate
import fastdeflate.integrations as integrations

from _skipcheck import peer_installed

from ._support import AUTOBAHN_SUPPORTED, impl_environ

pytestmark = pytest.mark.timeout(180)

#: The supported libraries installed here (all of them where autobahn can be and the
#: test set has it).
LIBRARIES = [n for n in integrations.SUPPORTED
             if n != "autobahn" or (AUTOBAHN_SUPPORTED and peer_installed("autobahn"))]

#: Where the fastdeflate under test lives (the source tree, or site-packages in CI): the
#: subprocesses run there, so that they import it and not a checkout without the extension.
PACKAGE_PARENT = str(Path(fastdeflate.__file__).resolve().parents[1])
TESTS = str(Path(__file__).resolve().parents[1])

#: The libraries and the heavy packages they bring in: none may be imported by enable().
LIBRARY_PACKAGES = {"websockets", "aiohttp", "wsproto", "simple_websocket", "tornado",
                    "autobahn", "uvicorn", "h11", "txaio", "twisted", "multidict", "yarl",
                    "aiosignal", "frozenlist", "propcache", "aiohappyeyeballs", "cbor2"}

#: What an application of each library imports (after enable(), in the tests below).
APP_IMPORT = {
    "websockets": "import websockets\nwebsockets.serve, websockets.connect  # lazy imports",
    "aiohttp": "import aiohttp\nfrom aiohttp import web",
    "wsproto": "import simple_websocket  # on wsproto",
    "tornado": "import tornado.web, tornado.websocket",
    "autobahn": "import autobahn.asyncio.websocket",
}

#: For each library, ``hooks()``: the objects its adapter replaces, read from the library;
#: ``ours()``: the adapter's objects that enable() puts there (the adapter must have been
#: imported: importing it here would patch the library).
HOOKS = {
    "websockets": """
        def hooks():
            from websockets.extensions import permessage_deflate as m
            return (m.PerMessageDeflate,)
        def ours():
            a = sys.modules["fastdeflate.integrations.websockets"]
            return (a.PerMessageDeflate,)
    """,
    "aiohttp": """
        def readers():  # the pure-Python reader only where it was imported (by the adapter)
            names = ("aiohttp._websocket.reader_c", "aiohttp._websocket.reader_py")
            return [sys.modules[name] for name in names if name in sys.modules]
        def hooks():
            from aiohttp._websocket import writer
            return (writer.ZLibCompressor, *(m.ZLibDecompressor for m in readers()))
        def ours():
            a = sys.modules["fastdeflate.integrations.aiohttp"]
            return (a.WebSocketCompressor, *(a.WebSocketDecompressor for m in readers()))
    """,
    "wsproto": """
        def hooks():
            import wsproto.extensions as m
            return (m.PerMessageDeflate.__dict__.get("__new__"),)
        def ours():
            a = sys.modules["fastdeflate.integrations.wsproto"]
            return (a._fastdeflate_new,)
    """,
    "tornado": """
        def hooks():
            import tornado.websocket as m
            return (m._PerMessageDeflateCompressor, m._PerMessageDeflateDecompressor)
        def ours():
            a = sys.modules["fastdeflate.integrations.tornado"]
            return (a.FastDeflateCompressor, a.FastDeflateDecompressor)
    """,
    "autobahn": """
        def hooks():
            from autobahn.websocket.compress import PERMESSAGE_COMPRESSION_EXTENSION as m
            return (m["permessage-deflate"]["PMCE"],)
        def ours():
            a = sys.modules["fastdeflate.integrations.autobahn"]
            return (a.PerMessageDeflate,)
    """,
}

PRELUDE = """
import sys, warnings
import fastdeflate
from fastdeflate import integrations
LIBRARY_PACKAGES = {packages!r}
def imported():
    loaded = {{name.partition(".")[0] for name, m in sys.modules.items() if m is not None}}
    return sorted(loaded & LIBRARY_PACKAGES)
def patched(name):
    if "fastdeflate.integrations." + name not in sys.modules:
        return False  # an adapter not imported has patched nothing
    hooks, ours = HOOKS[name]
    return all(h is o for h, o in zip(hooks(), ours()))
def stock(name):
    return all(not is_ours(h) for h in HOOKS[name][0]())
def is_ours(hook):  # (wsproto's __new__ after disable() is the stock-like _stock_new)
    return (getattr(hook, "__module__", None) or "").startswith("fastdeflate") and (
        getattr(hook, "__qualname__", "") != "_stock_new")
def finders():
    return [f for f in sys.meta_path if type(f).__module__.startswith("fastdeflate")]
HOOKS = {{}}
"""


def hooks_code(names: list[str]) -> str:
    """Defines ``HOOKS[name] = (hooks, ours)`` for each library in ``names``."""
    code = []
    for name in names:
        code.append(textwrap.dedent(HOOKS[name]))
        code.append(f"HOOKS[{name!r}] = (hooks, ours)\n")
    return "".join(code)


def run(code: list[str], impl: ModuleType, libraries: list[str] = LIBRARIES,
        timeout: float = 120) -> list[str]:
    """Run the parts of ``code`` (each dedented), after the prelude, in a new interpreter
    on ``impl``; its output lines (it must end by printing "ok")."""
    script = (PRELUDE.format(packages=LIBRARY_PACKAGES) + hooks_code(libraries)
              + "\n".join(textwrap.dedent(part) for part in code))
    out = subprocess.run([sys.executable, "-c", script], env=impl_environ(impl),
                         cwd=PACKAGE_PARENT, capture_output=True, text=True, timeout=timeout)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines[-1:] == ["ok"], (out.stdout, out.stderr)
    return lines


def implementation(impl: ModuleType) -> str:
    return "python" if impl.__name__.endswith("_pure") else "cython"


# ------------------------------------------------------------------ nothing imported


def test_import_and_enable_import_no_library(impl: ModuleType) -> None:
    """``import fastdeflate`` and ``enable()`` import none of the libraries (nor what
    they bring in): enable() adds fastdeflate's own modules only (a sys.modules count,
    the start-up cost that matters). It returns the installed libraries, which are
    reported as pending, none of them patched yet."""
    code = textwrap.dedent(f"""
        import json, sys
        start = set(sys.modules)
        import fastdeflate
        package = set(sys.modules)
        names = fastdeflate.enable(fallback=True)
        enabled = set(sys.modules)
        from fastdeflate import integrations
        finders = [f for f in sys.meta_path if type(f).__module__.startswith("fastdeflate")]
        print(json.dumps({{
            "package": sorted(package - start), "enable": sorted(enabled - package),
            "names": names, "enabled": integrations.enabled(),
            "patched": integrations.enabled(pending=False), "finders": len(finders),
            "implementation": fastdeflate.IMPLEMENTATION}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], env=impl_environ(impl),
                         cwd=PACKAGE_PARENT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["implementation"] == implementation(impl)
    for step in ("package", "enable"):
        libraries = {m.partition(".")[0] for m in result[step]} & LIBRARY_PACKAGES
        assert libraries == set(), (step, sorted(libraries))
    assert result["enable"], "enable() imported nothing at all?"
    assert all(m.startswith("fastdeflate.") for m in result["enable"]), result["enable"]
    assert result["names"] == result["enabled"] == LIBRARIES, result
    assert result["patched"] == [] and result["finders"] == 1, result


# ------------------------------------------------------------------ imported afterwards


@pytest.mark.parametrize("library", LIBRARIES)
def test_library_imported_after_enable_is_patched_on_import(
    impl: ModuleType, library: str
) -> None:
    """After enable(), the application's own import of the library patches it (and only
    it); a real echo of that library's server and client, imported afterwards, then
    runs on fastdeflate's codec objects at both ends."""
    run([f"""
        names = fastdeflate.enable(fallback=True)
        assert imported() == [] and {library!r} in names, (imported(), names)
    """, APP_IMPORT[library], f"""
        others = [n for n in integrations.SUPPORTED if n != {library!r} and sys.modules.get(n)]
        assert others == [], others
        assert patched({library!r}), HOOKS[{library!r}][0]()
        assert integrations.enabled(pending=False) == [{library!r}]
        assert integrations.enabled() == names
        sys.path.append({TESTS!r})
        from integrations import test_matrix as m  # every library, imported now
        assert all(patched(name) for name in names), [n for n in names if not patched(n)]
        extensions, server, client, code = m.run_pair({library!r}, {library!r}, (1024, 65536))
        both = {{fastdeflate.Compressor, fastdeflate.Decompressor}}
        assert extensions.startswith("permessage-deflate"), extensions
        assert m.codec_types(server, fastdeflate) == both, server
        assert m.codec_types(client, fastdeflate) == both, client
        assert code == 1000
        assert fastdeflate.IMPLEMENTATION == {implementation(impl)!r}
        assert fastdeflate.disable() == names
        assert all(stock(name) for name in names)
        print("ok")
    """], impl)


#: What an application imports from each library before calling enable(), and how to
#: see (after enable()) that those names reach fastdeflate: ``m`` is test_matrix, whose
#: servers and clients the echo runs.
FROM_IMPORTS = {
    "websockets": ("from websockets.asyncio.server import serve\n"
                   "from websockets.asyncio.client import connect",
                   "serve is m.websockets.asyncio.server.serve and "
                   "connect is m.websockets.asyncio.client.connect"),
    "aiohttp": ("from aiohttp import ClientSession, web",
                "ClientSession is m.aiohttp.ClientSession and web is m.web"),
    "wsproto": ("from wsproto.extensions import PerMessageDeflate",
                "type(PerMessageDeflate()).__module__ == 'fastdeflate.integrations.wsproto'"),
    "tornado": ("from tornado.websocket import WebSocketHandler, websocket_connect",
                "issubclass(m.TornadoEcho, WebSocketHandler) and "
                "websocket_connect is m.tornado.websocket.websocket_connect"),
    "autobahn": ("from autobahn.asyncio.websocket import WebSocketClientFactory, "
                 "WebSocketServerFactory",
                 "WebSocketServerFactory is m.WebSocketServerFactory and "
                 "WebSocketClientFactory is m.WebSocketClientFactory"),
}


@pytest.mark.parametrize("library", LIBRARIES)
def test_library_imported_before_enable_is_patched_at_once(
    impl: ModuleType, library: str
) -> None:
    """Names the application imported before enable() use fastdeflate afterwards (the
    adapters replace what those names look up), through a real echo."""
    run([FROM_IMPORTS[library][0], f"""
        names = fastdeflate.enable(fallback=True)
        assert integrations.enabled(pending=False) == [{library!r}], names
        assert patched({library!r})
        sys.path.append({TESTS!r})
        from integrations import test_matrix as m
        assert {FROM_IMPORTS[library][1]}
        extensions, server, client, code = m.run_pair({library!r}, {library!r}, (1024,))
        both = {{fastdeflate.Compressor, fastdeflate.Decompressor}}
        assert m.codec_types(server, fastdeflate) == both, server
        assert m.codec_types(client, fastdeflate) == both, client
        assert fastdeflate.IMPLEMENTATION == {implementation(impl)!r}
        print("ok")
    """], impl)


# ------------------------------------------------------------------ disable()


def test_disable_removes_the_hook(impl: ModuleType) -> None:
    """A library imported after disable() stays stock and its adapter is never imported;
    enable() twice installs one hook; enable() after disable() works again."""
    app_imports = "\n".join(APP_IMPORT[name] for name in LIBRARIES)
    run([f"""
        assert fastdeflate.enable(fallback=True) == fastdeflate.enable(fallback=True)
        assert len(finders()) == 1, sys.meta_path
        assert fastdeflate.disable() == {LIBRARIES!r}
        assert finders() == [] and integrations.enabled() == []
        assert fastdeflate.disable() == []
    """, app_imports, f"""
        assert imported(), "the libraries were not imported"
        assert [n for n in {LIBRARIES!r} if not stock(n)] == []
        adapters = [n for n in {LIBRARIES!r} if "fastdeflate.integrations." + n in sys.modules]
        assert adapters == [], adapters
        assert integrations.enabled() == []
        assert fastdeflate.enable(fallback=True) == {LIBRARIES!r}  # all imported: at once
        assert [n for n in {LIBRARIES!r} if not patched(n)] == []
        assert fastdeflate.disable() == {LIBRARIES!r}
        assert [n for n in {LIBRARIES!r} if not stock(n)] == []
        print("ok")
    """], impl)


# ------------------------------------------------------------------ another thread


#: Where the importing thread is held while another thread calls enable(): the watched
#: module's own lookup (before it is in sys.modules), or a module looked up while the
#: library is being run (the named module of the library is then half imported).
PAUSES = {
    ("websockets", "before"): ("websockets.extensions.permessage_deflate", None),
    ("aiohttp", "before"): ("aiohttp._websocket.writer", None),
    ("aiohttp", "inside"): ("aiohttp.payload", "aiohttp"),
    ("wsproto", "before"): ("wsproto.extensions", None),
    ("wsproto", "inside"): ("h11", "wsproto"),
    ("tornado", "before"): ("tornado.websocket", None),
    ("tornado", "inside"): ("tornado.httpclient", "tornado.websocket"),
    ("autobahn", "before"): ("autobahn.websocket.compress", None),
    ("autobahn", "inside"): ("autobahn.websocket.compress_deflate",
                             "autobahn.websocket.compress"),
}
PAUSE_CASES = [key for key in PAUSES if key[0] in LIBRARIES]


@pytest.mark.parametrize("library,where", PAUSE_CASES,
                         ids=[f"{lib}-{where}" for lib, where in PAUSE_CASES])
def test_enable_while_another_thread_imports(impl: ModuleType, library: str,
                                             where: str) -> None:
    """A thread imports the library and is held in the middle of that import (a finder
    of the test waits there); another thread calls enable() meanwhile, then the import
    goes on. enable() neither deadlocks nor misses the library: it ends up patched
    once, exactly (disable() puts the library's own objects back)."""
    pause_at, half_imported = PAUSES[(library, where)]
    run([f"""
        import threading
        paused, go, seen = threading.Event(), threading.Event(), []
        class Hold:
            def find_spec(self, name, path=None, target=None):
                if name == {pause_at!r} and not paused.is_set():
                    module = sys.modules.get({half_imported!r})
                    seen.append(module is not None and module.__spec__._initializing)
                    paused.set()
                    go.wait(60)
                return None
        sys.meta_path.insert(0, Hold())
    """, "def application():\n" + textwrap.indent(APP_IMPORT[library], "    "), f"""
        importer = threading.Thread(target=application)
        importer.start()
        assert paused.wait(60), "the import did not reach the pause"
        names = []
        enabler = threading.Thread(target=lambda: names.extend(fastdeflate.enable(fallback=True)))
        enabler.start()
        enabler.join(0.5)  # enable() waits for the import in progress, or is done
        go.set()
        importer.join(60)
        enabler.join(60)
        assert not importer.is_alive() and not enabler.is_alive(), "deadlock"
        assert seen == [{half_imported is not None!r}], seen
        assert {library!r} in names, names
        assert patched({library!r}), HOOKS[{library!r}][0]()
        assert integrations.enabled(pending=False) == [{library!r}], integrations.enabled()
        fastdeflate.disable()
        assert stock({library!r}), HOOKS[{library!r}][0]()
        print("ok")
    """], impl, timeout=150)


def test_enable_races_imports_of_every_library(impl: ModuleType) -> None:
    """One thread imports every library while another calls enable(), with thread
    switches as often as the interpreter allows: every library ends up patched, with
    no warning, and disable() restores each exactly."""
    app_imports = "\n".join(APP_IMPORT[name] for name in LIBRARIES)
    run(["""
        import threading
        sys.setswitchinterval(1e-6)
        started = threading.Event()
    """, "def application():\n    started.set()\n" + textwrap.indent(app_imports, "    "),
         f"""
        importer = threading.Thread(target=application)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            importer.start()
            started.wait(60)
            names = fastdeflate.enable(fallback=True)
            importer.join(60)
        assert not importer.is_alive(), "deadlock"
        assert names == {LIBRARIES!r}, names
        assert [str(w.message) for w in caught] == []
        assert all(patched(name) for name in names), [n for n in names if not patched(n)]
        assert integrations.enabled(pending=False) == names
        assert fastdeflate.disable() == names
        assert all(stock(name) for name in names)
        print("ok")
    """], impl, timeout=150)


# ------------------------------------------------------------------ unsupported version


def test_unsupported_version_warns_at_import_and_stays_stock(impl: ModuleType) -> None:
    """websockets saying it is 13.1 (the adapter needs >= 14), imported after enable():
    a RuntimeWarning pointing at the application's import, websockets stays stock, the
    import itself succeeds, the other libraries are still patched."""
    lines = run(["""
        names = fastdeflate.enable(fallback=True)
        assert "websockets" in names
        import websockets.version
        websockets.version.version = "13.1"  # what websockets 13.1 says
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = sys._getframe().f_lineno; import websockets.asyncio.server
        import tornado.websocket
        assert stock("websockets") and patched("tornado")
        assert "fastdeflate.integrations.websockets" not in sys.modules
        assert websockets.asyncio.server.serve  # the import worked
        assert "websockets" not in integrations.enabled()
        assert "tornado" in integrations.enabled(pending=False)
        for w in caught:
            where = "the import" if (w.filename, w.lineno) == ("<string>", line) else "elsewhere"
            print(w.category.__name__, where, w.message)
        print("ok")
    """], impl)
    warned = [line for line in lines[:-1] if "websockets left stock" in line]
    assert len(warned) == 1, lines
    assert warned[0].startswith("RuntimeWarning the import "), warned
    assert "websockets >= 14" in warned[0], warned


# ------------------------------------------------------------------ the table of modules


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_module_an_adapter_imports_is_watched(library: str) -> None:
    """Each module of the library that its adapter imports (and their packages) is one
    the hook waits for: the adapter never runs on a half-imported module."""
    source = Path(integrations.__file__).with_name(f"{library}.py").read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):  # imports for type checkers only never run
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            node.body = []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names
                      if is_module(f"{node.module}.{alias.name}")}
    if library == "aiohttp":
        import fastdeflate.integrations.aiohttp as fd_aiohttp

        names |= set(fd_aiohttp._READER_MODULES)
    parts = [name.split(".") for name in names if name.partition(".")[0] == library]
    modules = {".".join(p[:i]) for p in parts for i in range(1, len(p) + 1)}
    assert library in modules and len(modules) > 2, modules
    assert modules <= set(integrations._MODULES[library]), sorted(
        modules - set(integrations._MODULES[library]))


def is_module(name: str) -> bool:
    """True if ``name`` is a module, not a name imported from one (the library is
    imported here)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
