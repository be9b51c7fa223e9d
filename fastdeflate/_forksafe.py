"""Module locks that a forked child gets free.

A lock that another thread holds at ``fork()`` stays held in the child, where that
thread does not exist: the child's first call that takes it would wait forever (a
preforking server's worker, at its first message, ``status()`` or ``enable()``).
``free_in_child(lock)`` makes the lock anew in every child, as the stdlib does with its
own (``_at_fork_reinit``). It suits the package's module locks that guard settings,
counters and lists of patches: the child keeps what the parent's threads had written,
each value whole. Locks whose state must not be seen half updated are taken before the
fork instead (compress once's, the extension's rings, the off-loop counters).
"""

from __future__ import annotations

import os
from typing import TypeVar

Lock = TypeVar("Lock")


def free_in_child(lock: Lock) -> Lock:
    """``lock``, made anew (free) in every child this process forks from now on."""
    if hasattr(os, "register_at_fork"):  # (no fork() where it is missing: Windows)
        os.register_at_fork(after_in_child=lock._at_fork_reinit)  # type: ignore[attr-defined]
    return lock
