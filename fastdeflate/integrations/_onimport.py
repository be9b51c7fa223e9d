"""Run a function right after a module is imported, without importing anything.

`Watcher` is a ``sys.meta_path`` finder that finds nothing itself: for a watched
name it asks the finders after it for the module's spec and wraps the spec's loader, so
that ``loaded(name)`` runs in the importing thread as soon as the module's code has run
(still inside that import, under its module lock). The module gets its real loader back
before its code runs. Only the standard import system is used: ``sys`` and ``_thread``
(both always loaded), and CPython's import locks to wait for an import in progress.
"""

from __future__ import annotations

import sys
from _thread import get_ident
from types import ModuleType
from typing import Any, Callable, Iterable, Optional

try:  # CPython's import system itself (always loaded there): its per-module locks
    import _frozen_importlib as _bootstrap
except ImportError:  # pragma: no cover - another Python
    _bootstrap = None

__all__ = ["Watcher", "complete", "find_spec", "wait_for_import"]


class Watcher:
    """A ``sys.meta_path`` finder that calls ``loaded(name)`` after each import of a
    module named in ``names`` (exceptions from ``loaded`` propagate into that import)."""

    def __init__(self, names: Iterable[str], loaded: Callable[[str], None]) -> None:
        self.names = frozenset(names)
        self.loaded = loaded
        self._finding: set[tuple[int, str]] = set()  # (thread, name) being looked up

    def install(self) -> None:
        """Put this finder first in ``sys.meta_path`` (if it is not there already)."""
        if not any(finder is self for finder in sys.meta_path):
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        """Take this finder out of ``sys.meta_path`` (modules being imported right now
        may still call ``loaded``)."""
        sys.meta_path[:] = [finder for finder in sys.meta_path if finder is not self]

    def find_spec(self, name: str, path: Any = None, target: Optional[ModuleType] = None
                  ) -> Any:
        if name not in self.names:
            return None
        key = (get_ident(), name)
        if key in self._finding:  # a finder after this one asked sys.meta_path again
            return None
        self._finding.add(key)
        try:
            spec = find_spec(name, path, target)
        finally:
            self._finding.discard(key)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, self.loaded)
        return spec


class _Loader:
    """``loader``, calling ``loaded(name)`` once the module's code has run."""

    def __init__(self, loader: Any, loaded: Callable[[str], None]) -> None:
        self._loader = loader
        self._loaded = loaded

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._loader, attribute)

    def create_module(self, spec: Any) -> Optional[ModuleType]:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        assert spec is not None
        if spec.loader is self:  # the module shows its real loader, as without us
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._loader.exec_module(module)
        self._loaded(spec.name)


def find_spec(name: str, path: Any = None, target: Optional[ModuleType] = None) -> Any:
    """The spec the finders in ``sys.meta_path`` other than `Watcher` give for
    ``name`` (what the import system would use), or None; imports nothing (for a
    submodule, ``path`` is its package's ``__path__``)."""
    for finder in list(sys.meta_path):
        if isinstance(finder, Watcher):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:  # a legacy finder (find_module only): not consulted
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec
    return None


def complete(name: str) -> bool:
    """True if module ``name`` is in ``sys.modules`` and its code has finished running."""
    module = sys.modules.get(name)
    if module is None:
        return False
    return not getattr(getattr(module, "__spec__", None), "_initializing", False)


def wait_for_import(name: str) -> None:
    """Wait until no other thread is importing module ``name`` (at once if none is, or
    if this thread is). Imports nothing: it takes and releases the lock the import
    system holds on ``name`` from the moment it starts looking for the module until the
    module's code has run."""
    manager = getattr(_bootstrap, "_ModuleLockManager", None)
    if manager is None:  # pragma: no cover - another Python
        return
    try:
        with manager(name):
            pass
    except RuntimeError:  # _DeadlockError: the importing thread waits for this one
        pass
