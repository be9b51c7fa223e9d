"""Compress once: one whole message sent to many compressors is compressed by the first
(the leader) and taken by the others (followers) with a copy of the leader's zlib object.

The policy is ``fastdeflate/_compress_once_policy.py``, which the extension compiles:
run here as Python, with a stand-in for Cython's ``cython`` module. What is left here
is the mechanics: the host functions the policy's header lists (one lock for every
parameter set's state; a state is a copy of a leader's zlib object), the fork handler
and the counters (the tests' switches: ``test_entries.py``).

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/compress_once.pxi``.)
"""

from __future__ import annotations

import os
import sys
import threading
import types
import weakref
from pathlib import Path
from typing import Any

from .testing import _at

_sharing = True


class _Cython:
    """The part of Cython's pure-Python ``cython`` module the policy uses, as Python: its
    C types (``cython.bint``, ``cython.ulonglong[4]``...) and decorators do nothing."""

    compiled = False
    NULL = None
    declare = staticmethod(lambda kind, value=None: value)
    cast = staticmethod(lambda kind, value: value)
    pointer = staticmethod(lambda kind: kind)
    cclass = cfunc = staticmethod(lambda f: f)
    exceptval = staticmethod(lambda *args, **kwargs: lambda f: f)

    def __getattr__(self, name: str) -> "_Cython":  # a C type
        return self

    def __getitem__(self, size: int) -> "_Cython":  # an array type
        return self


class _Plan:
    """What the policy's _find_led decided (the extension's is a C struct)."""

    __slots__ = ("follow", "seen", "start_over", "cohort")

    def __init__(self) -> None:
        self.follow = self.seen = self.start_over = self.cohort = False


def _held_elsewhere(led: Any) -> bool:
    """Someone besides ``led`` holds its message (2: the entry's and getrefcount's)."""
    return sys.getrefcount(led.data) > 2


def _take_stream(member: Any, state: object, adoption: int, traffic: None) -> None:
    """``member`` takes ``state`` (a copy of a leader's zlib object; None: nothing to
    keep), the object's lock held; an adoption is counted (the policy's _adopted)."""
    member._zobj = None if state is None else state.copy()  # type: ignore[attr-defined]
    if adoption:
        with _lock:
            policy._adopted(member._set, adoption == policy.ADOPTED_BY_TAIL)


def _current_state(member: Any) -> object:
    """A copy of a leader's zlib object now, for its followers (its lock held); None if
    it has none."""
    _at("give_window")
    return None if member._zobj is None else member._zobj.copy()


def _lock_set(pset: Any) -> None:
    """Take the lock of every parameter set's state (and call the tests' hook there)."""
    _lock.acquire()
    try:
        _at("claim locked")  # (tests only: stop a thread that holds the lock)
    except BaseException:
        _lock.release()
        raise


def _load_policy() -> types.ModuleType:
    """The policy module, run from its source with this host's names (its header lists
    them)."""
    path = Path(__file__).resolve().parent.parent / "_compress_once_policy.py"
    module = types.ModuleType("fastdeflate._fallback.policy")
    module.__file__ = str(path)
    module.__dict__.update(
        cython=_Cython(), _Plan=_Plan, Traffic=None, _hold=lambda plan, obj: None,
        _release_held=lambda plan: None, _set_of=lambda member: member._set,
        _lock_set=_lock_set, _unlock_set=lambda pset: _lock.release(),
        _lock_member=lambda member: member._lock.acquire(),
        _unlock_member=lambda member: member._lock.release(),
        _busy=lambda member: member._fragmenting, _take_stream=_take_stream,
        _current_state=_current_state, _start_empty=lambda member: member._forget(),
        _compress_whole=lambda member, data: member._compress_locked(data, True, True),
        _held_elsewhere=_held_elsewhere, _weak=weakref.ref,
        _at=_at, _at_quietly=_at)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    return module


policy = _load_policy()
sys.modules.setdefault(policy.__name__, policy)
_Member, _Led = policy._Member, policy._Led


class _ParameterSet(policy._OnceState):
    """Compress once's state of one parameter set (the policy's _OnceState), guarded by
    _lock."""


_sets: dict[tuple, _ParameterSet] = {}  # parameter set -> its state; only ever added to
_lock = threading.Lock()


def _set_for(level: int, window_bits: int, mem_level: int, strategy: int) -> _ParameterSet:
    """The state of a parameter set, made at first use."""
    key = (level, window_bits, mem_level, strategy)
    found = _sets.get(key)
    if found is None:
        with _lock:
            found = _sets.setdefault(key, _ParameterSet())
    return found


def _after_fork_in_child() -> None:
    """The child starts with the lock free and no message kept: a kept message's leader
    is the parent's, whose lock another thread of the parent may have held at the fork."""
    for pset in _sets.values():
        pset.clear([])
    _lock.release()


if hasattr(os, "register_at_fork"):  # a child never starts with the lock held elsewhere
    os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                        after_in_child=_after_fork_in_child)


def set_start_over_budget(share: float) -> float:
    """See fastdeflate.set_start_over_budget (checked there); returns the previous."""
    with _lock:
        previous, policy.START_OVER_BUDGET = policy.START_OVER_BUDGET, float(share)
    return previous


def _start_over_budget() -> float:
    """The budget set_start_over_budget() set."""
    return policy.START_OVER_BUDGET


def _compress_once_counts() -> tuple:
    """(led, (alone joined, diverged, start over), rejoined, start overs, cohorts),
    all parameter sets, since the process started."""
    counts = [0] * 7
    with _lock:  # (the sets are added to under it)
        psets = list(_sets.values())
    for pset in psets:
        policy._add_counts(pset, counts)
    return counts[0], tuple(counts[1:4]), *counts[4:]


def _forget_kept() -> None:
    """Test hook (private): forget every message kept for sharing (test isolation)."""
    dropped: list = []
    with _lock:
        for pset in _sets.values():
            pset.clear(dropped)
    del dropped
