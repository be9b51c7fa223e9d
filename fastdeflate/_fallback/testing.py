"""Test hooks (private): named points where a test runs its own code in the middle of a
call, at the points of the compress-once and broadcast paths the fallback has.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/test_build/test_hooks.pxi``, in its test
build only. The fallback injects no allocation failures.)
"""

from __future__ import annotations

import threading
from .._forksafe import free_in_child

_test_hook = None
_hook_lock = free_in_child(threading.Lock())


def _set_test_hook(hook):  # type: ignore[no-untyped-def]
    """Test hook (private), as in the extension: call ``hook(point)`` at the points of
    the compress-once and broadcast paths this implementation has (``"follow"``,
    ``"adopt"``, ``"give_window"``, ``"committed"``, and ``"claim locked"`` with the
    lock of the messages kept held); returns the previous hook."""
    global _test_hook
    with _hook_lock:
        previous, _test_hook = _test_hook, hook
    return previous


def _at(point: str) -> None:
    hook = _test_hook  # (read once: another thread may set or clear it meanwhile)
    if hook is not None:
        hook(point)
