"""Drop-in adapters for websocket libraries, one module per library.

Each module ``fastdeflate.integrations.<library>`` has ``enable()``, ``disable()`` and
``is_enabled()``, plus a public way to use fastdeflate through that library's own
extension mechanism. :func:`enable` here enables every supported library that is
installed.
"""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["SUPPORTED", "enable", "disable", "enabled"]

#: Library name (as imported) for each supported websocket library.
SUPPORTED: tuple[str, ...] = ("websockets", "aiohttp", "wsproto", "tornado", "autobahn")


def _adapter(name: str):
    return importlib.import_module(f"{__name__}.{name}")


def enable() -> list[str]:
    """Enable fastdeflate for every supported library that is installed.

    Returns the names of the libraries it enabled (already-enabled ones included).
    """
    done = []
    for name in SUPPORTED:
        if importlib.util.find_spec(name) is None:
            continue
        _adapter(name).enable()
        done.append(name)
    return done


def disable() -> list[str]:
    """Undo :func:`enable` for every library it patched; returns their names."""
    done = []
    for name in SUPPORTED:
        if importlib.util.find_spec(name) is None:
            continue
        adapter = _adapter(name)
        if adapter.is_enabled():
            adapter.disable()
            done.append(name)
    return done


def enabled() -> list[str]:
    """Names of the libraries that fastdeflate is currently enabled for."""
    return [
        name
        for name in SUPPORTED
        if importlib.util.find_spec(name) is not None and _adapter(name).is_enabled()
    ]
