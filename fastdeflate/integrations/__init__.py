"""Drop-in adapters for websocket libraries, one module per library.

Each module ``fastdeflate.integrations.<library>`` has ``enable()``, ``disable()`` and
``is_enabled()``, plus a public way to use fastdeflate through that library's own
extension mechanism. :func:`enable` here enables every supported library that is
installed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import warnings
from types import ModuleType
from typing import Optional

__all__ = ["SUPPORTED", "enable", "disable", "enabled"]

#: Library name (as imported) for each supported websocket library.
SUPPORTED: tuple[str, ...] = ("websockets", "aiohttp", "wsproto", "tornado", "autobahn")


def _adapter(name: str, warn: bool = False) -> Optional[ModuleType]:
    """The adapter for library ``name``; None if the library is not installed, or if the
    adapter cannot be imported for the installed version (with a RuntimeWarning when
    ``warn``: that library stays stock)."""
    if importlib.util.find_spec(name) is None:
        return None
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except Exception as exc:  # ImportError, or whatever a changed library layout raises
        if warn:
            _warn(f"{name} left stock", exc, stacklevel=4)
        return None


def _warn(what: str, exc: Exception, stacklevel: int = 3) -> None:
    """A RuntimeWarning, by default at the caller of the function that calls this."""
    warnings.warn(f"fastdeflate: {what}: {exc}", RuntimeWarning, stacklevel=stacklevel)


def _is_enabled(name: str, adapter: ModuleType) -> bool:
    """``adapter.is_enabled()``; False, with a RuntimeWarning, if it raises."""
    try:
        return bool(adapter.is_enabled())
    except Exception as exc:
        _warn(f"cannot tell whether {name} is enabled", exc, stacklevel=4)
        return False


def enable() -> list[str]:
    """Enable fastdeflate for every supported library that is installed.

    Returns the names of the libraries it enabled (already-enabled ones included). An
    installed library in a version fastdeflate does not support (its adapter fails to
    import or to enable) is left stock, with a RuntimeWarning; the others are enabled.
    """
    done = []
    for name in SUPPORTED:
        adapter = _adapter(name, warn=True)
        if adapter is None:
            continue
        try:
            adapter.enable()
        except Exception as exc:
            with contextlib.suppress(Exception):  # undo whatever it did before failing
                adapter.disable()
            _warn(f"{name} left stock", exc)
        else:
            done.append(name)
    return done


def disable() -> list[str]:
    """Undo :func:`enable` for every library it patched; returns their names.

    A library whose adapter fails is skipped with a RuntimeWarning; the others are
    still disabled.
    """
    done = []
    for name in SUPPORTED:
        adapter = _adapter(name)
        if adapter is None or not _is_enabled(name, adapter):
            continue
        try:
            adapter.disable()
        except Exception as exc:
            _warn(f"{name} could not be disabled", exc)
        else:
            done.append(name)
    return done


def enabled() -> list[str]:
    """Names of the libraries that fastdeflate is currently enabled for (a library whose
    adapter fails to tell is left out, with a RuntimeWarning)."""
    names = []
    for name in SUPPORTED:
        adapter = _adapter(name)
        if adapter is not None and _is_enabled(name, adapter):
            names.append(name)
    return names
