"""Compress once: one whole message sent to many compressors is compressed by the first
(the leader) and taken by the others (followers) with the leader's zlib object.

Per parameter set (a _ParameterSet, the fields of the extension's _ParameterSet): the
messages kept, with the state that decides when to keep one, when a straggler rejoins by
its window (its tail) and when a group starts over (at a group message's second
compressor); the Compressor's side is in ``compressor.py`` (``_compress_to_share``,
``_adopt``, ``_give_state``). The policy is the extension's: its header
(``extension/compress_once.pxi``) explains it.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/compress_once.pxi``.)
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Optional

from .._params import (
    DEFAULT_START_OVER_BUDGET,
    KEPT_MAX,
    QUIET_AFTER,
    QUIET_SAMPLE,
    SHARE_MAX,
    SHARE_MIN,
    START_OVER_EVERY,
)
from .testing import _at

if TYPE_CHECKING:
    from .compressor import Compressor


_UNSET = object()
_sharing = True
_START_OVER_BUDGET = DEFAULT_START_OVER_BUDGET  # set_start_over_budget(); 0: never start over
# Why a compressor compressed alone a message others were sent (its _straggler_cause).
_ALONE_JOINED, _ALONE_DIVERGED, _ALONE_START_OVER = 1, 2, 3


class _ParameterSet:
    """Compress once's state of one parameter set (level, window bits, memLevel,
    strategy): the messages kept, when to keep one, when a group starts over, and the
    counters of status(); the fields of the extension's _ParameterSet. Guarded by _lock."""

    __slots__ = ("kept", "stragglers", "unfollowed", "skipped", "since_start_over",
                 "average_payload", "start_over_extra", "alone_now", "shared_now",
                 "alone_share", "left_behind", "start_over_history", "start_over_led",
                 "led", "alone", "rejoined", "start_overs", "cohorts")

    def __init__(self) -> None:
        self.kept: list[_Led] = []  # newest first
        self.start_over_led: Optional[_Led] = None  # the message a start-over began at
        self.clear()
        self.led = 0  # group messages (compressed once for others)
        self.alone = [0, 0, 0, 0]  # stragglers' own compressions, by _ALONE_* cause
        self.rejoined = 0  # stragglers that rejoined their group by their window
        self.start_overs = 0  # group start-overs
        self.cohorts = 0  # stragglers' cohorts started

    def clear(self) -> "list[_Led]":
        """Forget the messages kept and what decides sharing (not the counters); what
        it kept, to be released after the lock."""
        dropped = [*self.kept, self.start_over_led]
        self.kept = []
        self.stragglers = False  # a compressor met a kept message from another history
        self.unfollowed = 0  # messages kept since a follower last took one
        self.skipped = 0  # messages not kept since the last one kept, while quiet
        self.since_start_over = 0  # group messages since a group last started over
        self.average_payload = 0.0  # their payload / message size (a moving average)
        self.start_over_extra = 0.0  # what starting over cost the last time (same units)
        self.alone_now = 0  # stragglers' own compressions since the last group message
        self.shared_now = 0  # deliveries that took a shared payload since then
        self.alone_share = 0.0  # the stragglers' share of the deliveries lately
        self.left_behind = 0  # the history the last start-over left behind
        self.start_over_history = 0  # and the one it started (its leader's after it)
        self.start_over_led = None
        return dropped


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
        pset.clear()
    _lock.release()


if hasattr(os, "register_at_fork"):  # a child never starts with the lock held elsewhere
    os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                        after_in_child=_after_fork_in_child)


def set_start_over_budget(share: float) -> float:
    """See fastdeflate.set_start_over_budget (checked there); returns the previous."""
    global _START_OVER_BUDGET
    with _lock:
        previous, _START_OVER_BUDGET = _START_OVER_BUDGET, float(share)
    return previous


def _start_over_budget() -> float:
    """The budget set_start_over_budget() set."""
    return _START_OVER_BUDGET


def _compress_once_counts() -> tuple:
    """(led, (alone joined, diverged, start over), rejoined, start overs, cohorts),
    all parameter sets, since the process started."""
    led = rejoined = starts = cohorts = 0
    alone = [0, 0, 0, 0]
    with _lock:
        for pset in _sets.values():
            led += pset.led
            rejoined += pset.rejoined
            starts += pset.start_overs
            cohorts += pset.cohorts
            alone = [a + b for a, b in zip(alone, pset.alone)]
    return led, tuple(alone[1:]), rejoined, starts, cohorts


def _count_cohort(pset: _ParameterSet) -> None:
    with _lock:
        pset.cohorts += 1


class _Led:
    """A whole message a compressor compressed, for others with the same history."""

    __slots__ = ("data", "nct", "before", "started_over", "payload", "leader", "after",
                 "since", "state", "first", "counted", "tail_history", "tail_bytes",
                 "left_behind", "cohort", "taken", "context")

    def __init__(self, data: object, nct: bool, before: int, leader: "Compressor") -> None:
        self.data, self.nct, self.before = data, nct, before
        self.started_over = False  # the leader started over for it: anyone may join
        self.payload = b""
        self.leader = weakref.ref(leader)  # the cache keeps no codec alive
        self.after = self.since = 0  # the leader's history after it, and messages since empty
        self.state: object = _UNSET  # a copy of the leader's zlib object, fetched once
        self.first = False  # nobody had compressed its message before (a group's)
        self.counted = False  # sent to several: a group's message (_start_over_due_now)
        self.tail_history, self.tail_bytes = 0, 0  # the leader's tail after it
        self.left_behind = 0  # a start-over's: its first compressor's history
        self.cohort = False  # a cohort's (started over too): for stragglers with an empty tail
        self.taken = False  # someone took it: its leader was in a group then
        self.context = 0  # the bytes the leader's window holds after it


def _count_group_message(pset: _ParameterSet, led: _Led) -> None:
    """Another compressor was sent ``led``'s message (lock held): it went to several
    connections (a private message never does), so it counts towards starting over,
    and its compressed fraction towards the average."""
    led.counted = True
    pset.led += 1
    pset.since_start_over += 1
    # what stragglers cost lately (stragglers that rejoined by their window no longer count)
    alone = pset.alone_now
    pset.alone_share += (alone / (alone + pset.shared_now + 1) - pset.alone_share) / 8
    pset.alone_now = pset.shared_now = 0
    if not led.started_over:
        size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
        pset.average_payload += ((size - pset.average_payload) / 16
                                  if pset.average_payload else size)


def _find_led(pset: _ParameterSet, data: object, nct: bool, history: int,
              asking: "Compressor") -> tuple[Optional[_Led], bool, bool, Optional[_Led], bool]:
    """(the kept compression of ``data`` ``asking`` can take — from ``history``, from a
    window its tail matches, one that started over, or, with an empty tail, a
    cohort's — or None; whether ``data`` was compressed lately from any history;
    whether ``asking`` is a group message's second compressor and starts the group
    over; the newest entry of a group's, for a straggler's tail; whether ``asking``
    starts a cohort). An entry of ``asking``'s own history comes first; one made
    without context takeover serves only a compressor without it, and the reverse."""
    seen = straggling = False
    group = joinable = alone_by = None
    others_alone = 0  # stragglers that compressed it alone (two are enough to know)
    with _lock:
        _at("claim locked")  # (tests only: stop a thread that holds the lock)
        for led in pset.kept:
            if led.nct == nct and _same_message(led, data):
                seen = True
                if led.first and group is None:
                    group = led
                second = led.first and not led.counted
                if second:
                    _count_group_message(pset, led)
                if (second and history == led.before and not led.started_over and not nct
                        and pset.stragglers and _start_over_due_now(pset)):
                    pset.stragglers = False  # the first compressor stays behind
                    pset.start_overs += 1
                    return None, True, True, led, False
                if led.cohort:
                    joinable = joinable or led
                    continue
                if history == led.before or led.started_over or _tail_matches(asking, led):
                    _in_use(pset, led)
                    _grouped(asking, led)
                    return led, True, False, group, False
                leader = led.leader()
                if leader is not asking:  # (sent again to the same peer: no sign)
                    if not led.first and others_alone < 2 and leader is not alone_by:
                        alone_by = leader
                        others_alone += 1
                    # one a start-over left behind is no reason for another
                    if not (asking._straggler_cause == _ALONE_START_OVER
                            or history == pset.left_behind
                            or history == pset.start_over_history):
                        straggling = True
                    pset.unfollowed = 0  # one message to several: a group to make again
        if joinable is not None and _straggles(asking, history):
            _in_use(pset, joinable)
            _grouped(asking, joinable)
            return joinable, True, False, group, False
        if straggling:
            pset.stragglers = True
        cohort = (others_alone == 2 and group is not None and not group.started_over
                  and not nct and _straggles(asking, history) and _START_OVER_BUDGET > 0)
    return None, seen, False, group, cohort


def _same_message(led: _Led, data: object) -> bool:
    """``data`` is ``led``'s message, the same object or equal bytes; the entry then
    holds ``data``, the object its sender holds (lock held)."""
    if led.data is data:
        return True
    if led.data != data:
        return False
    led.data = data
    return True


def _straggles(asking: "Compressor", history: int) -> bool:
    """``asking`` left its group and has nothing of the group's in its window since (an
    empty tail), so it may start or take a cohort's entry; a member of a group (its
    last message shared) never does (lock held)."""
    return not asking._tail_bytes and (history == 0 or asking._grouped_history != history)


def _grouped(asking: "Compressor", led: _Led) -> None:
    """``asking`` takes ``led``: it and ``led``'s leader shared a message, and are in a
    group at the history after it (lock held)."""
    asking._grouped_history = led.after
    if not led.taken:
        led.taken = True
        leader = led.leader()
        _at("leader held")  # (tests only: drop the leader's other references here)
        if leader is not None:
            leader._grouped_history = led.after


def _in_use(pset: _ParameterSet, led: _Led) -> None:
    """An entry taken is the last to be pushed out (lock held)."""
    kept = pset.kept
    if kept[0] is not led:
        kept.remove(led)
        kept.insert(0, led)


def _tail_matches(asking: "Compressor", led: _Led) -> bool:
    """``asking``'s last window of bytes are those of ``led``'s history before it, and
    ``led``'s payload refers at most one window back."""
    return (asking._tail_history == led.before
            and asking._tail_bytes >= 1 << max(9, asking._window_bits))


def _holds_whole(led: _Led, tail_history: int, tail_bytes: int) -> bool:
    """``led``'s leader's whole window after it is its tail, and a tail of
    (``tail_history``, ``tail_bytes``) holds all of it (lock held)."""
    return (led.context != 0 and not led.nct and led.tail_history == tail_history
            and led.context <= led.tail_bytes and led.context <= tail_bytes)


def _younger_group(pset: _ParameterSet, asking: "Compressor") -> Optional[_Led]:
    """A kept message whose leader's whole window ``asking``'s tail holds (a younger
    group's, a cohort's), if ``asking`` is not in a group at its history."""
    history = asking._history
    with _lock:
        if asking._grouped_history == history:
            return None
        return next((led for led in pset.kept if led.after != history
                     and _holds_whole(led, asking._tail_history, asking._tail_bytes)),
                    None)


def _count_alone(pset: _ParameterSet, compressor: "Compressor") -> None:
    """A straggler compresses a group's message alone: count it by why it is out of the
    group, decided at its first such message."""
    with _lock:
        if not compressor._straggler_cause:
            history = compressor._history
            compressor._straggler_cause = (
                _ALONE_JOINED if history == 0 or compressor._since_empty == 0
                else _ALONE_START_OVER if history in (pset.left_behind,
                                                      pset.start_over_history)
                else _ALONE_DIVERGED)
        pset.alone[compressor._straggler_cause] += 1
        pset.alone_now += 1


def _left_behind(pset: _ParameterSet, history: int) -> bool:
    """``history`` is the one the last start-over left behind (no lock: a hint)."""
    return history != 0 and history == pset.left_behind


def _start_over_for(pset: _ParameterSet, history: int) -> Optional[_Led]:
    """The message a group started over at, if ``history`` is the one that start-over
    left behind (its first compressor's, after that message)."""
    with _lock:
        led = pset.start_over_led
    return led if led is not None and history and led.left_behind == history else None


def _count_rejoin(pset: _ParameterSet) -> None:
    with _lock:
        pset.rejoined += 1


def _remember(pset: _ParameterSet, led: _Led, first: bool) -> None:
    """Keep ``led``; ``first``: nobody compressed its message before (a new message for
    the parameter set, not a straggler's copy); if it started over, what that cost is
    measured."""
    led.first = first
    with _lock:
        # only entries whose message someone else still holds (2: the entry's slot and
        # getrefcount's argument); groups' entries (first) before stragglers' copies
        olds = [old for old in pset.kept if sys.getrefcount(old.data) > 2]
        firsts = KEPT_MAX - 1
        room = firsts - sum(old.first for old in olds)
        kept = [led]
        for old in olds:
            if old.first and (firsts > 0 or old.data is led.data):
                kept.append(old)
                firsts -= 1
            elif not old.first and room > 0:
                kept.append(old)
                room -= 1
        kept, pset.kept = pset.kept, kept  # evicted: released after the lock
        pset.unfollowed += 1
        if first and led.started_over:  # what starting over cost: this payload and the next few
            # who it left behind, and the state it offers them
            pset.left_behind, pset.start_over_history = led.left_behind, led.after
            kept.append(pset.start_over_led)  # (released after the lock)
            pset.start_over_led = led
            size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
            pset.since_start_over = 0
            pset.start_over_extra = (2 * max(0.0, size - pset.average_payload)
                                      if pset.average_payload else 0.0)
    del kept


def _start_over_due_now(pset: _ParameterSet) -> bool:
    """Whether a group of this parameter set should start over at its next message (the
    lock held): once its messages since it last did have cost its members enough bytes
    that what starting over costs them (measured the last time, or half a message at
    first) is a small share of them: _START_OVER_BUDGET in proportion to stragglers'
    own compressions' share of the latest deliveries (twice it from a quarter; none
    once they rejoined); costs as fractions of a message's size. A budget of 0 never
    starts over."""
    if _START_OVER_BUDGET <= 0:
        return False
    since, average = pset.since_start_over, pset.average_payload
    if not average:
        return since >= START_OVER_EVERY
    budget = _START_OVER_BUDGET * min(2.0, 8 * pset.alone_share)
    return since * average * budget >= (pset.start_over_extra or average / 2)


def _adopted(pset: _ParameterSet, by_tail: bool) -> None:
    """A delivery took a shared payload (a follower's): sharing pays here, keep every
    message again; ``by_tail``: a straggler rejoined by its window."""
    with _lock:
        pset.unfollowed = 0
        pset.shared_now += 1
        pset.rejoined += by_tail


def _keep_next(pset: _ParameterSet) -> bool:
    """Whether to keep the next whole message for sharing (see QUIET_AFTER)."""
    with _lock:
        if pset.unfollowed < QUIET_AFTER:
            return True
        pset.skipped += 1
        keep = pset.skipped >= QUIET_SAMPLE
        if keep:
            pset.skipped = 0
        return keep


def _quiet_sets() -> int:
    """Test hook (private): how many parameter sets are quiet."""
    with _lock:
        return sum(pset.unfollowed >= QUIET_AFTER for pset in _sets.values())


def _start_over_state() -> dict[tuple, tuple[int, float, float, float]]:
    """Test hook (private), as the extension's test build's: per parameter set (level,
    window bits, memLevel, strategy), the inputs of _start_over_due_now()."""
    with _lock:
        return {key: (s.since_start_over, s.average_payload, s.start_over_extra,
                      s.alone_share) for key, s in _sets.items()}


def _kept_messages() -> int:
    """Test hook (private): how many messages are kept for sharing, all sets together."""
    with _lock:
        return sum(len(pset.kept) for pset in _sets.values())


def _forget_kept() -> None:
    """Test hook (private): forget every message kept for sharing (test isolation)."""
    with _lock:
        dropped = [pset.clear() for pset in _sets.values()]
    del dropped


def _set_sharing(enabled: bool) -> bool:
    """Test hook (private): False makes every compressor compress every message itself;
    returns the previous setting."""
    global _sharing
    with _lock:
        previous, _sharing = _sharing, bool(enabled)
    return previous
