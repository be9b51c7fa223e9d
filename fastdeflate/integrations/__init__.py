"""Drop-in adapters for websocket libraries, one module per library.

Each module ``fastdeflate.integrations.<library>`` has ``enable()``, ``disable()`` and
``is_enabled()``, plus a public way to use fastdeflate through that library's own
extension mechanism. :func:`enable` here enables every supported library that is
installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from types import ModuleType
from typing import Optional

__all__ = ["SUPPORTED", "enable", "disable", "enabled"]

#: Library name (as imported) for each supported websocket library.
SUPPORTED: tuple[str, ...] = ("websockets", "aiohttp", "wsproto", "tornado", "autobahn")


def _adapter(name: str, warn: bool = False) -> Optional[ModuleType]:
    """The adapter for library ``name``; None if the library is not installed, or if its
    installed version is one the adapter does not support (with a RuntimeWarning when
    ``warn``: that library stays stock)."""
    if importlib.util.find_spec(name) is None:
        return None
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ImportError as exc:
        if warn:
            warnings.warn(f"fastdeflate: {name} left stock: {exc}", RuntimeWarning, stacklevel=3)
        return None


def enable() -> list[str]:
    """Enable fastdeflate for every supported library that is installed.

    Returns the names of the libraries it enabled (already-enabled ones included). An
    installed library in a version fastdeflate does not support is left stock, with a
    RuntimeWarning.
    """
    done = []
    for name in SUPPORTED:
        adapter = _adapter(name, warn=True)
        if adapter is not None:
            adapter.enable()
            done.append(name)
    return done


def disable() -> list[str]:
    """Undo :func:`enable` for every library it patched; returns their names."""
    done = []
    for name in SUPPORTED:
        adapter = _adapter(name)
        if adapter is not None and adapter.is_enabled():
            adapter.disable()
            done.append(name)
    return done


def enabled() -> list[str]:
    """Names of the libraries that fastdeflate is currently enabled for."""
    return [name for name in SUPPORTED
            if (adapter := _adapter(name)) is not None and adapter.is_enabled()]
