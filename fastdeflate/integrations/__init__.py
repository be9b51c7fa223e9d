"""Drop-in adapters for websocket libraries, one module per library.

Each module ``fastdeflate.integrations.<library>`` has ``enable()``, ``disable()`` and
``is_enabled()``, plus a public way to use fastdeflate through that library's own
extension mechanism (importing it imports its library). `enable()` here covers every
supported library without importing any: it patches those the application has imported
already, and each other one right after the application imports it (a ``sys.meta_path``
hook, see `fastdeflate.integrations._onimport`). The libraries of `OPT_IN`
change what goes on the wire when enabled: `enable()` covers them only when named.
"""

from __future__ import annotations

import sys
import warnings
from _thread import RLock
from types import FrameType, ModuleType
from typing import Iterable, Optional, Union

from . import _onimport
from .._forksafe import free_in_child

__all__ = ["SUPPORTED", "OPT_IN", "check_supported", "enable", "disable", "enabled", "states"]

#: Library name (as imported) for each supported websocket library.
SUPPORTED: tuple[str, ...] = ("websockets", "aiohttp", "wsproto", "tornado", "autobahn")
#: Libraries enabled only when named: daphne compresses nothing stock, and enabling it
#: makes it accept permessage-deflate (fastdeflate.integrations.daphne).
OPT_IN: tuple[str, ...] = ("daphne",)
#: Every library an adapter covers, in the order they are reported.
_LIBRARIES = SUPPORTED + OPT_IN
#: Why a library that is not enabled does not compress, where stock never does.
_STOCK_WHY = {"daphne": "daphne does not negotiate permessage-deflate; opt in with "
                        "enable(libraries=[..., 'daphne']) or FASTDEFLATE_ENABLE=daphne"}

#: For each library: first the module holding what its adapter replaces (the library is
#: patched once the application has imported it), then the library's other modules the
#: adapter imports, and their packages. Patching waits until every one of these that is
#: loaded has finished loading, so that the adapter sees whole modules and imports none.
_MODULES: dict[str, tuple[str, ...]] = {
    "websockets": ("websockets.extensions.permessage_deflate", "websockets",
                   "websockets.version", "websockets.exceptions", "websockets.extensions",
                   "websockets.frames", "websockets.typing", "websockets.protocol",
                   "websockets.legacy", "websockets.legacy.framing"),
    "aiohttp": ("aiohttp._websocket.writer", "aiohttp", "aiohttp.compression_utils",
                "aiohttp._websocket", "aiohttp._websocket.models",
                "aiohttp._websocket.reader_c", "aiohttp._websocket.reader_py",
                "aiohttp._websocket.helpers"),
    "wsproto": ("wsproto.extensions", "wsproto", "wsproto.frame_protocol",
                "wsproto.connection", "wsproto.events", "wsproto.utilities"),
    "tornado": ("tornado.websocket", "tornado", "tornado.web", "tornado.httpclient",
                "tornado.httputil", "tornado.escape", "tornado.iostream"),
    "autobahn": ("autobahn.websocket.compress", "autobahn", "autobahn.exception",
                 "autobahn.websocket", "autobahn.websocket.compress_deflate"),
    # (daphne.ws_protocol has loaded autobahn's modules the adapter imports)
    "daphne": ("daphne.ws_protocol", "daphne"),
}


def _adapter_name(library: str) -> str:
    return f"{__name__}.{library}"


#: Library of each watched module (the adapters included: one imported by the
#: application after enable() patches its library once it has loaded).
_LIBRARY_OF = {module: library for library, modules in _MODULES.items()
               for module in (*modules, _adapter_name(library))}

# _lock guards _waiting, the hook, and every adapter's enable()/disable() called from
# here. Whoever holds it never waits for an import: the hook runs inside imports, under
# their module locks, and waits for _lock. So an adapter is imported, and asked
# is_enabled() (which loads what it looks at: aiohttp's pure-Python reader), before
# _lock is taken; under _lock its calls find every module they use loaded.
_lock = free_in_child(RLock())
#: The libraries enable() is to patch and has not patched yet.
_waiting: set[str] = set()
#: Why each library enable() could not patch was left stock (its adapter's exception).
_left_stock: dict[str, str] = {}


def _loaded(module: str) -> None:
    """The hook: ``module`` has just run. Patch its library if it is waiting and ready."""
    library = _LIBRARY_OF[module]
    if library in _waiting and _ready(library, module):
        _patch(library, module)


_watcher = _onimport.Watcher(_LIBRARY_OF, _loaded)


def _ready(library: str, loading: Optional[str] = None) -> bool:
    """True if ``library``'s adapter can run now: the module it patches is loaded and
    no module it imports is half-loaded (``loading`` has just finished running)."""
    first, *others = _MODULES[library]
    if first != loading and not _onimport.complete(first):
        return False
    return all(name == loading or sys.modules.get(name) is None or _onimport.complete(name)
               for name in (*others, _adapter_name(library)))


def _patch(library: str, loading: Optional[str] = None) -> None:
    """Enable ``library``'s adapter if ``library`` is still waiting (``loading``: the
    module that has just run). An adapter that fails (an unsupported version) leaves its
    library stock, with a RuntimeWarning."""
    failure: Optional[Exception] = None
    try:
        adapter = _import(_adapter_name(library))
        adapter.is_enabled()  # outside _lock: see there
    except Exception as exc:  # ImportError, or whatever a changed library layout raises
        adapter, failure = None, exc
    if adapter is not None and adapter.__name__ != loading and not _onimport.complete(
            adapter.__name__):
        return  # half-imported, by an import that patches once it has loaded
    with _lock:
        if library not in _waiting:  # disable() since, or another thread patched it
            return
        _waiting.discard(library)
        if adapter is not None:
            try:
                adapter.enable()
                _left_stock.pop(library, None)
                failure = None
            except Exception as exc:
                try:  # undo whatever it did before failing
                    adapter.disable()
                except Exception:
                    pass
                failure = exc
        if failure is not None:
            _left_stock[library] = f"{type(failure).__name__}: {failure}"
    # (logged and warned outside _lock: logging may be imported by the first message)
    if failure is None:
        _log().info("fastdeflate enabled for %s %s", library, _version(library))
        return
    _log().warning("fastdeflate: %s %s left stock: %s", library, _version(library), failure)
    _warn(f"{library} left stock", failure, library)


def _log():  # type: ignore[no-untyped-def]
    """The ``fastdeflate`` logger (logging is imported on first use, not by enable())."""
    import logging

    return logging.getLogger("fastdeflate")


def _version(library: str) -> str:
    """The installed version of ``library`` (from its distribution's metadata), or "?"."""
    try:
        from importlib.metadata import version

        return version(library)
    except Exception:
        return "?"


def _require(library: str, found: str, oldest: str) -> None:
    """ImportError if ``found``, the version of ``library`` installed, is older than
    ``oldest``, the oldest its adapter is tested with: raised by an adapter as it is
    imported, which `enable()` reports as for any adapter that fails (the library left
    stock, a RuntimeWarning, a WARNING on the ``fastdeflate`` logger, the reason in
    ``status()``)."""
    def release(version: str) -> tuple[int, ...]:  # "6.4": (6, 4, 0); "1.2.0rc1": (1, 2, 0)
        numbers = []
        for part in version.split("."):
            digits = part[:len(part) - len(part.lstrip("0123456789"))]
            if not digits:
                break
            numbers.append(int(digits))
            if digits != part:
                break
        return tuple(numbers + [0] * (3 - len(numbers)))

    if release(found) < release(oldest):
        raise ImportError(f"fastdeflate.integrations.{library} needs {library} >= {oldest}, "
                          f"found {found} (pip install '{library}>={oldest}')")


def states() -> dict[str, tuple[str, Optional[str]]]:
    """For each supported library (the opt-in ones last): (state, why), state one of
    "enabled" (patched now), "pending" (enable() patches it when the application imports
    it), "stock" (why: the adapter's exception, if enable() tried; for daphne, that it
    does not compress unless opted in), "not installed". Imports no adapter."""
    with _lock:
        waiting, left = set(_waiting), dict(_left_stock)
    result: dict[str, tuple[str, Optional[str]]] = {}
    for library in _LIBRARIES:
        patched, failure = _patched(library)
        if patched:
            result[library] = ("enabled", None)
        elif not _installed(library):
            result[library] = ("not installed", None)
        elif library in waiting:
            result[library] = ("pending", None)
        else:
            why = left.get(library) or (f"{type(failure).__name__}: {failure}"
                                        if failure is not None else _STOCK_WHY.get(library))
            result[library] = ("stock", why)
    return result


def _import(name: str) -> ModuleType:
    __import__(name)
    return sys.modules[name]


def _warn(what: str, exc: Optional[Exception], library: Optional[str] = None) -> None:
    """A RuntimeWarning attributed to the first caller outside fastdeflate, ``library``
    and the import system: the application's call, or its import of ``library``."""
    frame = sys._getframe(1)
    while frame.f_back is not None and _internal(frame, library):
        frame = frame.f_back
    caller = frame.f_globals
    warnings.warn_explicit(
        f"fastdeflate: {what}: {exc}", RuntimeWarning, frame.f_code.co_filename,
        frame.f_lineno, module=caller.get("__name__", "<string>"),
        registry=caller.setdefault("__warningregistry__", {}))


def _internal(frame: FrameType, library: Optional[str]) -> bool:
    filename = frame.f_code.co_filename
    if "importlib" in filename and "_bootstrap" in filename:
        return True
    package = str(frame.f_globals.get("__name__", "")).partition(".")[0]
    return package == "fastdeflate" or package == library


def _installed(library: str) -> bool:
    """True if ``library`` can be imported (never imports it)."""
    if library in sys.modules:  # None there: imports of it are blocked
        return sys.modules[library] is not None
    try:
        return _onimport.find_spec(library) is not None
    except (ImportError, ValueError):
        return False


def _patched(library: str) -> tuple[bool, Optional[Exception]]:
    """(whether ``library`` is patched, the exception its adapter raised telling it);
    never imports the adapter: an adapter not imported has patched nothing."""
    adapter = sys.modules.get(_adapter_name(library))
    if adapter is None or not _onimport.complete(adapter.__name__):
        return False, None
    try:
        return bool(adapter.is_enabled()), None
    except Exception as exc:
        return False, exc


def check_supported(libraries: Union[str, Iterable[str]]) -> tuple[str, ...]:
    """``libraries`` as a tuple (a single ``str`` is one library's name, not its
    letters); ValueError naming any that fastdeflate does not support (the opt-in ones
    are supported)."""
    names = (libraries,) if isinstance(libraries, str) else tuple(libraries)
    unknown = [name for name in names if name not in _LIBRARIES]
    if unknown:
        raise ValueError(f"not a supported library: {', '.join(unknown)} "
                         f"(supported: {', '.join(_LIBRARIES)})")
    return names


def enable(libraries: Optional[Union[str, Iterable[str]]] = None) -> list[str]:
    """Enable fastdeflate for every supported library that is installed (or those of
    ``libraries``, names or a single name, the only way to name an `OPT_IN` one;
    ValueError for an unsupported name), importing none.

    A library the application has imported is patched at once; any other one right after
    the application imports it (until `disable()`). Returns the names of the libraries
    covered: patched now (already-enabled ones included) or to be patched on import. An
    installed library in a version fastdeflate does not support (its adapter fails to
    import or to enable) is left stock with a RuntimeWarning — at once if it is imported,
    else when the application imports it (the import itself goes on) —; the others are
    enabled all the same. Idempotent and thread-safe.

    New connections only: a connection already open keeps the library's own codec until
    it closes.
    """
    chosen = SUPPORTED if libraries is None else check_supported(libraries)
    with _lock:
        _waiting.update(chosen)
        _watcher.install()
    for library in chosen:
        # An import begun before the hook was installed runs without it: wait for it.
        for name in (*_MODULES[library], _adapter_name(library)):
            if not _onimport.complete(name):
                _onimport.wait_for_import(name)
        if library in _waiting and _ready(library):
            _patch(library)
    return enabled()


def disable() -> list[str]:
    """Undo `enable()`: remove the import hook and put back every patched library's
    own objects. Returns the names of the libraries it disabled (and of those not
    imported yet that enable() was to patch).

    New connections only: a connection opened while enabled keeps fastdeflate's codec
    until it closes (``status()["libraries"][name]["connections"]`` counts them; an INFO
    line on the ``fastdeflate`` logger says how many each library disabled leaves).

    A library whose adapter fails is skipped with a RuntimeWarning; the others are
    still disabled. Idempotent and thread-safe; imports no adapter (so no library).
    """
    done, failures = [], []
    for library in _LIBRARIES:
        _patched(library)  # outside _lock: see there
    with _lock:
        _watcher.remove()
        waiting = set(_waiting)
        _waiting.clear()
        for library in _LIBRARIES:
            patched, failure = _patched(library)
            if failure is not None:
                failures.append((f"could not tell whether {library} is enabled", failure))
            elif patched:
                try:
                    sys.modules[_adapter_name(library)].disable()
                except Exception as exc:
                    failures.append((f"{library} could not be disabled", exc))
                    continue
                done.append(library)
            elif library in waiting and _installed(library):
                done.append(library)
    for what, exc in failures:
        _warn(what, exc)
    # (logged outside _lock: see _patch) Connections keep the codec they were made with.
    from . import _open

    for library in done:
        still = _open.connections(library)  # (None for daphne: autobahn's connections)
        if still:
            _log().info("fastdeflate disabled for %s: new connections use its own codec; "
                        "%d open connection(s) keep fastdeflate's until they close",
                        library, still)
    return done


def enabled(*, pending: bool = True) -> list[str]:
    """Names of the libraries fastdeflate is enabled for: those patched now and, unless
    ``pending=False``, the installed ones not imported yet that `enable()` will patch
    when the application imports them. Imports no adapter (so no library). A library
    whose adapter fails to tell is left out, with a RuntimeWarning."""
    with _lock:
        waiting = set(_waiting) if pending else set()
    names = []
    for library in _LIBRARIES:
        patched, failure = _patched(library)
        if failure is not None:
            _warn(f"cannot tell whether {library} is enabled", failure)
        elif patched or (library in waiting and _installed(library)):
            names.append(library)
    return names
