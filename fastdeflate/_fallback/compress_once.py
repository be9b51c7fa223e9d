"""Compress once: one whole message sent to many compressors is compressed by the first
(the leader) and taken by the others (followers) with the leader's zlib object.

The messages kept, per parameter set, with the state that decides when to keep one, when
a straggler rejoins by its window (its tail) and when a group starts over (at a group
message's second compressor); the Compressor's side is in ``compressor.py``
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
_START_OVER_EVERY = 32
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
    _start_over_costs.clear()
    _left_behind.clear()
    _start_over_led.clear()
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
_START_OVER_BUDGET = 0.02  # set_start_over_budget(); 0: never start over


class _StartOverCosts:
    """When a parameter set's group starts over, by what it costs (the extension keeps
    the same fields in its _RingBox and Ring)."""

    __slots__ = ("since_start_over", "average_payload", "start_over_extra", "alone_now",
                 "shared_now", "alone_share")

    def __init__(self) -> None:
        self.since_start_over = 0  # group messages since it last started over
        self.average_payload = 0.0  # their average payload / message size
        self.start_over_extra = 0.0  # what starting over cost then (same units)
        self.alone_now = 0  # stragglers' own compressions since the last group message
        self.shared_now = 0  # deliveries that took a shared payload since then
        self.alone_share = 0.0  # the stragglers' share of the deliveries lately (averaged)


_start_over_costs: dict[tuple, _StartOverCosts] = {}


def _costs(key: tuple) -> _StartOverCosts:
    """``key``'s costs (the lock held), made at first use."""
    costs = _start_over_costs.get(key)
    if costs is None:
        costs = _start_over_costs[key] = _StartOverCosts()
    return costs


# the histories the last start-over left behind, and started (its leader's after it)
_left_behind: dict[tuple, tuple[int, int]] = {}
_start_over_led: dict[tuple, "_Led"] = {}  # the message it started at (the catch-up's state)
# As in the extension: why a compressor compressed alone a message others were sent.
_ALONE_JOINED, _ALONE_DIVERGED, _ALONE_START_OVER = 1, 2, 3
# Counters since the process started, per parameter set: [group messages, alone: joined,
# diverged, start over, rejoined by window, start-overs, cohorts] (status()).
_once_counts: dict[tuple, list[int]] = {}
_COUNTS = 7


def set_start_over_budget(share: float) -> float:
    """See fastdeflate.set_start_over_budget (checked there); returns the previous."""
    global _START_OVER_BUDGET
    with _recent_lock:
        previous, _START_OVER_BUDGET = _START_OVER_BUDGET, float(share)
    return previous


def _start_over_budget() -> float:
    """The budget set_start_over_budget() set."""
    return _START_OVER_BUDGET


def _compress_once_counts() -> tuple:
    """As in the extension: (led, (alone joined, diverged, start over), rejoined,
    start overs, cohorts), all parameter sets."""
    with _recent_lock:
        totals = [sum(counts[i] for counts in _once_counts.values()) for i in range(_COUNTS)]
    return totals[0], tuple(totals[1:4]), totals[4], totals[5], totals[6]


def _tally(key: tuple, index: int) -> None:
    """Add one to counter ``index`` of ``_once_counts`` (lock held)."""
    _once_counts.setdefault(key, [0] * _COUNTS)[index] += 1


def _count_cohort(key: tuple) -> None:
    with _recent_lock:
        _tally(key, 6)


class _Led:
    """A whole message a compressor compressed, for others with the same history."""

    __slots__ = ("data", "before", "started_over", "payload", "leader", "after", "since",
                 "state", "first", "counted", "tail_history", "tail_bytes", "left_behind",
                 "cohort", "taken", "context")

    def __init__(self, data: object, before: int, started_over: bool, payload: bytes,
                 leader: "Compressor", after: int, since: int) -> None:
        self.data, self.before, self.payload = data, before, payload
        self.started_over = started_over
        self.leader = weakref.ref(leader)  # the cache keeps no codec alive
        self.after, self.since = after, since
        self.state: object = _UNSET  # a copy of the leader's zlib object, fetched once
        self.first = False  # nobody had compressed its message before (a group's)
        self.counted = False  # sent to several: a group's message (_start_over_due_now)
        self.tail_history, self.tail_bytes = 0, 0  # the leader's tail after it
        self.left_behind = 0  # a start-over's: its first compressor's history
        self.cohort = False  # a cohort's (started over too): for stragglers with an empty tail
        self.taken = False  # someone took it: its leader was in a group then
        self.context = 0  # the bytes the leader's window holds after it


def _count_group_message(key: tuple, led: _Led) -> None:
    """Another compressor was sent ``led``'s message (lock held): it went to several
    connections (a private message never does), so it counts towards starting over,
    and its compressed fraction towards the average."""
    led.counted = True
    _tally(key, 0)
    costs = _costs(key)
    costs.since_start_over += 1
    # what stragglers cost lately (stragglers that rejoined by their window no longer count)
    alone = costs.alone_now
    costs.alone_share += (alone / (alone + costs.shared_now + 1) - costs.alone_share) / 8
    costs.alone_now = costs.shared_now = 0
    if not led.started_over:
        size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
        costs.average_payload += ((size - costs.average_payload) / 16
                                  if costs.average_payload else size)


def _find_led(key: tuple, data: object, history: int, asking: "Compressor"
              ) -> tuple[Optional[_Led], bool, bool, Optional[_Led], bool]:
    """As in the extension: (the recent compression of ``data`` ``asking`` can take —
    from ``history``, from a window its tail matches, one that started over, or, with
    an empty tail, a cohort's — or None; whether ``data`` was compressed recently from
    any history; whether ``asking`` is a group message's second compressor and starts
    the group over; the newest entry of a group's, for a straggler's tail; whether
    ``asking`` starts a cohort). An entry of ``asking``'s own history comes first."""
    seen = straggling = False
    group = joinable = alone_by = None
    others_alone = 0  # stragglers that compressed it alone (two are enough to know)
    with _recent_lock:
        _at("claim locked")  # (tests only: stop a thread that holds the lock)
        for led in _recent.get(key, ()):
            if _same_message(led, data):
                seen = True
                if led.first and group is None:
                    group = led
                second = led.first and not led.counted
                if second:
                    _count_group_message(key, led)
                if (second and history == led.before and not led.started_over and not key[4]
                        and key in _stragglers and _start_over_due_now(key)):
                    _stragglers.discard(key)  # the first compressor stays behind
                    _tally(key, 5)
                    return None, True, True, led, False
                if led.cohort:
                    joinable = joinable or led
                    continue
                if history == led.before or led.started_over or _tail_matches(asking, led):
                    _in_use(key, led)
                    _grouped(asking, led)
                    return led, True, False, group, False
                leader = led.leader()
                if leader is not asking:  # (sent again to the same peer: no sign)
                    if not led.first and others_alone < 2 and leader is not alone_by:
                        alone_by = leader
                        others_alone += 1
                    # one a start-over left behind is no reason for another
                    if not (asking._straggler_cause == _ALONE_START_OVER
                            or history in _left_behind.get(key, ())):
                        straggling = True
                    _unfollowed[key] = 0  # one message to several: a group to make again
        if joinable is not None and _straggles(asking, history):
            _in_use(key, joinable)
            _grouped(asking, joinable)
            return joinable, True, False, group, False
        if straggling:
            _stragglers.add(key)
        cohort = (others_alone == 2 and group is not None and not group.started_over
                  and not key[4] and _straggles(asking, history) and _START_OVER_BUDGET > 0)
    return None, seen, False, group, cohort


def _same_message(led: _Led, data: object) -> bool:
    """As in the extension: ``data`` is ``led``'s message, the same object or equal
    bytes; the entry then holds ``data``, the object its sender holds (lock held)."""
    if led.data is data:
        return True
    if led.data != data:
        return False
    led.data = data
    return True


def _straggles(asking: "Compressor", history: int) -> bool:
    """As in the extension: ``asking`` left its group and has nothing of the group's in
    its window since (an empty tail), so it may start or take a cohort's entry; a member
    of a group (its last message shared) never does (lock held)."""
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


def _in_use(key: tuple, led: _Led) -> None:
    """An entry taken is the last to be pushed out (lock held)."""
    recent = _recent[key]
    if recent[0] is not led:
        recent.remove(led)
        recent.insert(0, led)


def _tail_matches(asking: "Compressor", led: _Led) -> bool:
    """As in the extension: ``asking``'s last window of bytes are those of ``led``'s
    history before it, and ``led``'s payload refers at most one window back."""
    return (asking._tail_history == led.before
            and asking._tail_bytes >= 1 << max(9, asking._window_bits))


def _holds_whole(led: _Led, tail_history: int, tail_bytes: int) -> bool:
    """As in the extension: ``led``'s leader's whole window after it is its tail, and a
    tail of (``tail_history``, ``tail_bytes``) holds all of it (lock held; no context
    takeover has its own parameter set, and no window)."""
    return (led.context != 0 and led.tail_history == tail_history
            and led.context <= led.tail_bytes and led.context <= tail_bytes)


def _count_alone(key: tuple, compressor: "Compressor") -> None:
    """A straggler compresses a group's message alone: count it by why it is out of the
    group, decided at its first such message (as in the extension)."""
    with _recent_lock:
        if not compressor._straggler_cause:
            compressor._straggler_cause = (
                _ALONE_JOINED if compressor._history == 0 or compressor._since_empty == 0
                else _ALONE_START_OVER if compressor._history in _left_behind.get(key, ())
                else _ALONE_DIVERGED)
        _tally(key, compressor._straggler_cause)
        _costs(key).alone_now += 1


def _start_over_for(key: tuple, history: int) -> Optional[_Led]:
    """The message a group started over at, if ``history`` is the one that start-over
    left behind (its first compressor's, after that message)."""
    with _recent_lock:
        led = _start_over_led.get(key)
    return led if led is not None and history and led.left_behind == history else None


def _count_rejoin(key: tuple) -> None:
    with _recent_lock:
        _tally(key, 4)


def _remember(key: tuple, led: _Led, first: bool) -> None:
    """Keep ``led``; ``first``: nobody compressed its message before (a new message for
    the parameter set, not a straggler's copy); if it started over, what that cost is
    measured."""
    led.first = first
    with _recent_lock:
        # only entries whose message someone else still holds (2: the entry's slot and
        # getrefcount's argument); groups' entries (first) before stragglers' copies, as
        # in the extension
        olds = [old for old in _recent.get(key, ()) if sys.getrefcount(old.data) > 2]
        firsts = _RECENT_MAX - 1
        room = firsts - sum(old.first for old in olds)
        kept = [led]
        for old in olds:
            if old.first and (firsts > 0 or old.data is led.data):
                kept.append(old)
                firsts -= 1
            elif not old.first and room > 0:
                kept.append(old)
                room -= 1
        kept, _recent[key] = _recent.get(key, []), kept  # evicted: released after the lock
        _unfollowed[key] = _unfollowed.get(key, 0) + 1
        if first and led.started_over:  # what starting over cost: this payload and the next few
            costs = _costs(key)
            costs.since_start_over = 0
            # who it left behind, and the state it offers them (as in the extension)
            _left_behind[key] = (led.left_behind, led.after)
            kept.append(_start_over_led.get(key))  # (released after the lock)
            _start_over_led[key] = led
            size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
            costs.start_over_extra = (2 * max(0.0, size - costs.average_payload)
                                      if costs.average_payload else 0.0)
    del kept


def _start_over_due_now(key: tuple) -> bool:
    """Whether a group of this parameter set should start over at its next message (the
    lock held; as in the extension): once its messages since it last did have cost its
    members enough bytes that what starting over costs them (measured the last time, or
    half a message at first) is a small share of them: _START_OVER_BUDGET in proportion to
    stragglers' own compressions' share of the latest deliveries (twice it from a
    quarter; none once they rejoined); costs as fractions of a message's size. A budget of 0 never starts over."""
    costs = _start_over_costs.get(key) or _StartOverCosts()
    since, average, extra = (costs.since_start_over, costs.average_payload,
                             costs.start_over_extra)
    if _START_OVER_BUDGET <= 0:
        return False
    if not average:
        return since >= _START_OVER_EVERY
    budget = _START_OVER_BUDGET * min(2.0, 8 * costs.alone_share)
    return since * average * budget >= (extra or average / 2)


def _tally_shared_delivery(key: tuple) -> None:
    """Count a delivery that took a shared payload (a follower's)."""
    with _recent_lock:
        _costs(key).shared_now += 1


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


def _start_over_state() -> dict[tuple, tuple[int, float, float, float]]:
    """Test hook (private), as in the extension's test build: per parameter set (level,
    window bits, memLevel, strategy), the inputs of _start_over_due_now()."""
    with _recent_lock:
        return {key[:4]: (c.since_start_over, c.average_payload, c.start_over_extra,
                          c.alone_share)
                for key, c in _start_over_costs.items() if not key[4]}


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
        _start_over_costs.clear()
        _left_behind.clear()
        _start_over_led.clear()
    del dropped


def _set_sharing(enabled: bool) -> bool:
    """Test hook (private), as in the extension: False makes every compressor compress
    every message itself; returns the previous setting."""
    global _sharing
    with _recent_lock:
        previous, _sharing = _sharing, bool(enabled)
    return previous
