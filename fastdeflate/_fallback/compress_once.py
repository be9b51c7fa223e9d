"""Compress once: one whole message sent to many compressors is compressed by the first
(the leader) and taken by the others (followers) with the leader's zlib object.

The messages kept, per parameter set, with the state that decides when to keep one and
when a group starts over; the Compressor's side is in ``compressor.py``
(``_compress_to_share``, ``_adopt``, ``_give_state``), as in the extension.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/compress_once.pxi``.)
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Optional

from .testing import _at

if TYPE_CHECKING:
    from .compressor import Compressor


_SHARE_MAX = 262144
_SHARE_MIN = 64  # as in the extension: CPython shares tiny bytes objects between senders
_RECENT_MAX = 8
_SYNC_EVERY = 32
_UNSET = object()
_sharing = True
_recent: dict[tuple, list["_Led"]] = {}
_recent_lock = threading.Lock()
_stragglers: set[tuple] = set()


def _after_fork_in_child() -> None:
    """The child starts with the lock free and no message kept: a kept message's leader
    is the parent's, whose lock another thread of the parent may have held at the fork."""
    _recent.clear()
    _stragglers.clear()
    _unfollowed.clear()
    _skipped.clear()
    _reform.clear()
    _recent_lock.release()


if hasattr(os, "register_at_fork"):  # a child never starts with the lock held elsewhere
    os.register_at_fork(before=_recent_lock.acquire, after_in_parent=_recent_lock.release,
                        after_in_child=_after_fork_in_child)
# As in the extension: a parameter set where the last _QUIET_AFTER messages kept found no
# follower keeps one in _QUIET_SAMPLE until a follower finds one (keeping costs a little).
_QUIET_AFTER = 64
_QUIET_SAMPLE = 16
_unfollowed: dict[tuple, int] = {}  # messages kept since a follower last found one
_skipped: dict[tuple, int] = {}  # messages not kept since the last one kept, while quiet
# As in the extension: when a group starts over, by what it costs. Per parameter set:
# [group messages since it last started over, their average payload / message size,
# what starting over cost then (same units), stragglers' own compressions since,
# deliveries that took a shared one since].
_REFORM_BUDGET = 0.02
_reform: dict[tuple, list[float]] = {}


class _Led:
    """A whole message a compressor compressed, for others with the same history."""

    __slots__ = ("data", "before", "sync", "payload", "leader", "after", "since",
                 "state", "first", "counted")

    def __init__(self, data: object, before: int, sync: bool, payload: bytes,
                 leader: "Compressor", after: int, since: int) -> None:
        self.data, self.before, self.sync, self.payload = data, before, sync, payload
        self.leader = weakref.ref(leader)  # the cache keeps no codec alive
        self.after, self.since = after, since
        self.state: object = _UNSET  # a copy of the leader's zlib object, fetched once
        self.first = False  # nobody had compressed its message before (a group's)
        self.counted = False  # sent to several: a group's message (_reform_due)


def _count_group_message(key: tuple, led: _Led) -> None:
    """Another compressor was sent ``led``'s message (lock held): it went to several
    connections (a private message never does), so it counts towards starting over,
    and its compressed fraction towards the average."""
    led.counted = True
    reform = _reform.setdefault(key, [0, 0.0, 0.0, 0, 0])
    reform[0] += 1
    if not led.sync:
        size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
        reform[1] += (size - reform[1]) / 16 if reform[1] else size


def _find_led(key: tuple, data: object, history: int,
              asking: object) -> tuple[Optional[_Led], bool]:
    """The recent compression of ``data`` from ``history`` (or one that started over),
    if any, and whether ``data`` was compressed recently from any history."""
    seen = False
    with _recent_lock:
        _at("claim locked")  # (tests only: stop a thread that holds the lock)
        for led in _recent.get(key, ()):
            if led.data is data:
                seen = True
                if led.first and not led.counted:
                    _count_group_message(key, led)
                if history == led.before or led.sync:
                    return led, True
                if led.leader() is not asking:  # (sent again to the same peer: no sign)
                    _stragglers.add(key)
                    _unfollowed[key] = 0  # one message to several: a group to make again
    return None, seen


def _remember(key: tuple, led: _Led, first: bool) -> None:
    """Keep ``led``; ``first``: nobody compressed its message before (a new message for
    the parameter set, not a straggler's copy); if it started over, what that cost is
    measured."""
    led.first = first
    with _recent_lock:
        # only entries whose message someone else still holds (2: the entry's slot and
        # getrefcount's argument); a straggler's copy never pushes out its group's entry
        # of the same message
        olds = [old for old in _recent.get(key, ()) if sys.getrefcount(old.data) > 2]
        room = _RECENT_MAX - 1 - sum(old.data is led.data and old.first for old in olds)
        kept = [led]
        for old in olds:
            if old.data is led.data and old.first:
                kept.append(old)
            elif room > 0:
                kept.append(old)
                room -= 1
        kept, _recent[key] = _recent.get(key, []), kept  # evicted: released after the lock
        _unfollowed[key] = _unfollowed.get(key, 0) + 1
        if first and led.sync:  # what starting over cost: this payload and the next few
            reform = _reform.setdefault(key, [0, 0.0, 0.0, 0, 0])
            reform[0] = reform[3] = reform[4] = 0
            size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
            reform[2] = 2 * max(0.0, size - reform[1]) if reform[1] else 0.0
    del kept


def _reform_due(key: tuple) -> bool:
    """Whether a group of this parameter set should start over at its next message (as
    in the extension): once its messages since it last did have cost its members enough
    bytes that what starting over costs them (measured the last time, or half a
    message at first) is a small share of them: _REFORM_BUDGET, up to twice that as
    stragglers' own compressions near a quarter of the deliveries (costs as fractions of
    a message's size)."""
    with _recent_lock:
        since, average, extra, alone, shared = _reform.get(key, (0, 0.0, 0.0, 0, 0))
    if not average:
        return since >= _SYNC_EVERY
    budget = _REFORM_BUDGET * (1 + min(1.0, 4 * alone / (alone + shared + 1)))
    return since * average * budget >= (extra or average / 2)


def _tally_reform(key: tuple, index: int) -> None:
    """Count a straggler's own compression (3) or a shared delivery (4)."""
    with _recent_lock:
        _reform.setdefault(key, [0, 0.0, 0.0, 0, 0])[index] += 1


def _keep_next(key: tuple) -> bool:
    """Whether to keep the next whole message for sharing (see _QUIET_AFTER)."""
    with _recent_lock:
        if _unfollowed.get(key, 0) < _QUIET_AFTER:
            return True
        skipped = _skipped.get(key, 0) + 1
        _skipped[key] = 0 if skipped >= _QUIET_SAMPLE else skipped
        return skipped >= _QUIET_SAMPLE


def _quiet_sets() -> int:
    """Test hook (private), as in the extension: how many parameter sets are quiet."""
    with _recent_lock:
        return sum(count >= _QUIET_AFTER for count in _unfollowed.values())


def _kept_messages() -> int:
    """Test hook (private): how many messages are kept for sharing, all sets together."""
    with _recent_lock:
        return sum(map(len, _recent.values()))


def _forget_recent() -> None:
    """Test hook (private): forget every message kept for sharing (test isolation)."""
    with _recent_lock:
        dropped = list(_recent.values())
        _recent.clear()
        _stragglers.clear()
        _unfollowed.clear()
        _skipped.clear()
        _reform.clear()
    del dropped


def _set_sharing(enabled: bool) -> bool:
    """Test hook (private), as in the extension: False makes every compressor compress
    every message itself; returns the previous setting."""
    global _sharing
    previous, _sharing = _sharing, bool(enabled)
    return previous
