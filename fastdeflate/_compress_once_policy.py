# Compress once's policy: which group a message joins, who leads and who follows, when a
# straggler rejoins, when a group starts over, what is kept. The design is
# docs/explanation/compress-once.md, its words the glossary (docs/explanation/
# contributing.md, "Words"). Written once, in Cython's pure-Python syntax: the extension
# includes this file (_fastdeflate.pyx, after extension/policy_host.pxi) and compiles it;
# the fallback runs it as Python (fastdeflate/_fallback/compress_once.py, with a stand-in
# for `cython`). What each host defines is the mechanics:
# - _Plan (follow, seen, start_over, cohort), _hold(plan, obj) (keep obj alive while the
#   set's lock is held), _release_held(plan) (after it), Traffic (a call's counters);
# - _set_of(member), _lock_set/_unlock_set(pset) (no object is made under it),
#   _lock_member/_unlock_member, _busy(member) (in the middle of a message);
# - _take_stream(member, state, adoption, traffic), _current_state(member) (None: its
#   engine cannot give it), _start_empty(member), _compress_whole(member, data);
# - _held_elsewhere(led), _weak(obj), _at and _at_quietly(point) (the tests' hooks).
# A decision runs with its set's lock held unless its docstring says otherwise; the
# flows at the end take the locks themselves (the order: a compressor's, then a set's).

from typing import Optional

import fastdeflate._params as _constants

# The constants (what each means: fastdeflate/_params.py)
SHARE_MAX = cython.declare(cython.Py_ssize_t, _constants.SHARE_MAX)
SHARE_MIN = cython.declare(cython.Py_ssize_t, _constants.SHARE_MIN)
KEPT_MAX = cython.declare(cython.Py_ssize_t, _constants.KEPT_MAX)
START_OVER_EVERY = cython.declare(cython.Py_ssize_t, _constants.START_OVER_EVERY)
QUIET_AFTER = cython.declare(cython.Py_ssize_t, _constants.QUIET_AFTER)
QUIET_SAMPLE = cython.declare(cython.Py_ssize_t, _constants.QUIET_SAMPLE)
# set_start_over_budget()'s share (0: never start over)
START_OVER_BUDGET = cython.declare(cython.double, _constants.DEFAULT_START_OVER_BUDGET)

# A straggler's cause (_Member._straggler_cause; 0: none since it was last in a group)
ALONE_JOINED = cython.declare(cython.int, 1)  # its window was empty: never in the group
ALONE_DIVERGED = cython.declare(cython.int, 2)  # it was sent what the group was not
ALONE_START_OVER = cython.declare(cython.int, 3)  # it led the message its group started over at

# How a follower took its leader's state (counted by the host: _adopted)
ADOPTED = cython.declare(cython.int, 1)  # from its own history
ADOPTED_BY_TAIL = cython.declare(cython.int, 2)  # a straggler, by its tail


@cython.cclass
class _Member:
    """A compressor as compress once sees it (the base of both Compressor classes)."""

    _history = cython.declare(cython.ulonglong)  # its history id (0: an empty window)
    _since_empty = cython.declare(cython.ulonglong)  # messages since the window was empty
    _context = cython.declare(cython.size_t)  # the bytes its window holds
    # its tail: its last _tail_bytes bytes are those of the group history _tail_history
    _tail_history = cython.declare(cython.ulonglong)
    _tail_bytes = cython.declare(cython.size_t)
    _straggler_cause = cython.declare(cython.int)  # ALONE_*
    # its history when it last shared a message (while it is still that, it is in a group)
    _grouped_history = cython.declare(cython.ulonglong)
    _window_bits = cython.declare(cython.int)
    _no_context_takeover = cython.declare(cython.bint)


@cython.cclass
class _Led:
    """A kept message: a whole message a leader compressed, for its followers."""

    data = cython.declare(bytes)  # the message
    nct = cython.declare(cython.bint)  # no context takeover: serves only its own kind
    before = cython.declare(cython.ulonglong)  # the history it was compressed from
    started_over = cython.declare(cython.bint)  # from an empty window: anyone may take it
    payload = cython.declare(bytes)
    leader = cython.declare(object)  # a weak reference: keeps no codec alive
    after = cython.declare(cython.ulonglong)  # the leader's history after it
    since = cython.declare(cython.ulonglong)  # and its messages since empty
    window = cython.declare(object)  # the leader's state after it, fetched once (None: not yet)
    first = cython.declare(cython.bint)  # nobody had compressed its message before: a group's
    counted = cython.declare(cython.bint)  # sent to several (_count_group_message)
    tail_history = cython.declare(cython.ulonglong)  # the leader's tail after it
    tail_bytes = cython.declare(cython.size_t)
    left_behind = cython.declare(cython.ulonglong)  # a start-over's: its first compressor's history
    cohort = cython.declare(cython.bint)  # a cohort's (started over too)
    taken = cython.declare(cython.bint)  # followed: its leader was in a group then
    context = cython.declare(cython.size_t)  # the bytes the leader's window holds after it


@cython.cclass
class _OnceState:
    """Compress once's state of one parameter set: the kept messages, when to keep one,
    when a group starts over, and status()'s counters (guarded by the set's lock)."""

    kept = cython.declare(list)  # _Led entries, newest first (None: none yet)
    stragglers = cython.declare(cython.bint)  # a kept message met from another history
    unfollowed = cython.declare(cython.Py_ssize_t)  # kept since a follower last took one
    skipped = cython.declare(cython.Py_ssize_t)  # not kept since the last kept, while quiet
    since_start_over = cython.declare(cython.Py_ssize_t)  # group messages since a start-over
    average_payload = cython.declare(cython.double)  # their payload / message size, averaged
    start_over_extra = cython.declare(cython.double)  # what the last start-over cost (same units)
    alone_now = cython.declare(cython.Py_ssize_t)  # stragglers' compressions since the
    shared_now = cython.declare(cython.Py_ssize_t)  # last group message, and deliveries shared
    alone_share = cython.declare(cython.double)  # the stragglers' share of deliveries lately
    left_behind = cython.declare(cython.ulonglong)  # the history the last start-over left
    start_over_history = cython.declare(cython.ulonglong)  # and the one it started
    start_over_led = cython.declare(object)  # the _Led it started at
    # status()'s counters, since the process started
    led = cython.declare(cython.ulonglong)  # group messages
    alone = cython.declare(cython.ulonglong[4])  # stragglers' own compressions, by ALONE_*
    rejoined = cython.declare(cython.ulonglong)
    start_overs = cython.declare(cython.ulonglong)
    cohorts = cython.declare(cython.ulonglong)

    def __init__(self):
        self.kept, self.start_over_led = None, None
        self.alone = [0, 0, 0, 0]  # (a C array compiled: nothing allocated under the lock)
        self.clear([])
        self.led = self.rejoined = self.start_overs = self.cohorts = 0

    def clear(self, dropped: list) -> None:
        """Forget what it kept and what decides sharing, not the counters; the objects go
        on ``dropped``, released after the lock."""
        dropped.append(self.kept)
        dropped.append(self.start_over_led)
        self.kept, self.start_over_led = None, None
        self.stragglers = False
        self.unfollowed = self.skipped = self.since_start_over = 0
        self.alone_now = self.shared_now = 0
        self.average_payload = self.start_over_extra = self.alone_share = 0.0
        self.left_behind = self.start_over_history = 0
        return dropped


@cython.cfunc
def _count_group_message(pset: _OnceState, led: _Led) -> cython.void:
    """A second compressor was sent ``led``'s message: a group's (a private message never
    is), counted towards starting over and the average payload."""
    # (cast: Cython divides C integers as C does)
    size: cython.double = cython.cast(cython.double, len(led.payload)) / max(1, len(led.data))
    alone: cython.double = pset.alone_now
    led.counted = True
    pset.led += 1
    pset.since_start_over += 1
    # the stragglers' share of the last deliveries (those rejoined by their window no
    # longer count)
    pset.alone_share += (alone / (alone + pset.shared_now + 1) - pset.alone_share) / 8
    pset.alone_now = pset.shared_now = 0
    if not led.started_over:
        pset.average_payload += ((size - pset.average_payload) / 16
                                 if pset.average_payload else size)


@cython.cfunc
def _find_led(pset: _OnceState, data: bytes, history: cython.ulonglong, asking: _Member,
              plan: cython.pointer(_Plan)) -> Optional[_Led]:
    """The kept message ``asking`` (history ``history``) follows (plan.follow): from its
    history, one its tail matches, a start-over's, or with an empty tail a cohort's.
    Else the group's entry of ``data`` (for its tail), or None. It also sets plan.seen
    (``data`` is kept, from any history), plan.start_over (the second compressor of a
    group message starts the group over) and plan.cohort (the third straggler with an
    empty tail starts a cohort). The leaders it meets go on ``plan``."""
    led: _Led
    group: Optional[_Led] = None
    joinable: Optional[_Led] = None  # a cohort's entry
    nct: cython.bint = asking._no_context_takeover
    second: cython.bint
    straggling: cython.bint = False
    alone_by: object = None  # a straggler that compressed it alone
    others_alone: cython.int = 0  # how many did (two are enough to know)
    for led in pset.kept or ():
        if led.nct == nct and _same_message(led, data):
            plan.seen = True
            if led.first and group is None:
                group = led
            second = led.first and not led.counted
            if second:
                _count_group_message(pset, led)
            if (second and history == led.before and not led.started_over and not nct
                    and pset.stragglers and _start_over_due_now(pset)):
                pset.stragglers = False  # the first compressor stays behind (it catches up)
                pset.start_overs += 1
                plan.start_over = True
                return led
            if led.cohort:
                if joinable is None:
                    joinable = led
                continue
            if history == led.before or led.started_over or _tail_matches(asking, led):
                return _follow(pset, led, asking, plan)
            leader = led.leader()
            _hold(plan, leader)
            if leader is not asking:  # (sent again to the same peer: no sign)
                if not led.first and others_alone < 2 and leader is not alone_by:
                    alone_by = leader
                    others_alone += 1
                # one a start-over left behind is no reason for another
                if not (asking._straggler_cause == ALONE_START_OVER
                        or history == pset.left_behind or history == pset.start_over_history):
                    straggling = True
                pset.unfollowed = 0  # one message to several: a group to make again
    if joinable is not None and _straggles(asking, history):
        return _follow(pset, joinable, asking, plan)
    if straggling:
        pset.stragglers = True
    plan.cohort = (others_alone == 2 and group is not None and not group.started_over
                   and not nct and _straggles(asking, history) and START_OVER_BUDGET > 0)
    return group


@cython.cfunc
def _follow(pset: _OnceState, led: _Led, asking: _Member,
            plan: cython.pointer(_Plan)) -> _Led:
    """``asking`` follows ``led``: the entry moves to the front, and both it and the
    leader are in a group at the history after it (the leader goes on ``plan``)."""
    plan.follow = True
    if pset.kept[0] is not led:
        pset.kept.remove(led)
        pset.kept.insert(0, led)
    asking._grouped_history = led.after
    if not led.taken:
        led.taken = True
        leader = led.leader()
        _hold(plan, leader)
        _at_quietly("leader held")  # (tests only: drop the leader's other references)
        if leader is not None:
            cython.cast(_Member, leader)._grouped_history = led.after
    return led


@cython.cfunc
def _same_message(led: _Led, data: bytes) -> cython.bint:
    """``data`` is ``led``'s message: the same object, or equal bytes (a str encoded per
    connection). The entry then holds ``data``, which its sender still holds (_remember
    keeps only those); freeing the bytes it held runs no code."""
    if led.data is data:
        return True
    if led.data != data:
        return False
    led.data = data
    return True


@cython.cfunc
@cython.exceptval(check=False)
def _straggles(asking: _Member, history: cython.ulonglong) -> cython.bint:
    """Out of its group with an empty tail: it may start or take a cohort's entry (a
    group's member keeps its own context)."""
    return asking._tail_bytes == 0 and (history == 0 or asking._grouped_history != history)


@cython.cfunc
@cython.exceptval(check=False)
def _window_size(asking: _Member) -> cython.size_t:
    """The bytes of history a payload may refer to (no lock)."""
    return cython.cast(cython.size_t, 1) << max(9, asking._window_bits)


@cython.cfunc
@cython.exceptval(check=False)
def _tail_matches(asking: _Member, led: _Led) -> cython.bint:
    """``asking``'s last window of bytes are those of ``led``'s history before it, so
    ``led``'s payload is right for its peer too."""
    return asking._tail_history == led.before and asking._tail_bytes >= _window_size(asking)


@cython.cfunc
@cython.exceptval(check=False)
def _holds_whole(led: _Led, tail_history: cython.ulonglong,
                 tail_bytes: cython.size_t) -> cython.bint:
    """A tail of (``tail_history``, ``tail_bytes``) holds all of ``led``'s leader's
    window after it (which is its own tail: a cohort's, or a newcomer's)."""
    return (led.context != 0 and not led.nct and led.tail_history == tail_history
            and led.context <= led.tail_bytes and led.context <= tail_bytes)


@cython.cfunc
def _younger_group(pset: _OnceState, asking: _Member) -> Optional[_Led]:
    """A kept message whose leader's whole window ``asking``'s tail holds, unless
    ``asking`` is in a group: the younger group it joins before its next message."""
    led: _Led
    if asking._grouped_history == asking._history:
        return None
    for led in pset.kept or ():
        if led.after != asking._history and _holds_whole(led, asking._tail_history,
                                                         asking._tail_bytes):
            return led
    return None


@cython.cfunc
@cython.exceptval(check=False)
def _joins_younger(asking: _Member) -> cython.bint:
    """A straggler whose tail is short of a window looks for a younger group (a whole
    window's rejoins by its tail instead). No lock."""
    return (0 < asking._tail_bytes < _window_size(asking) and not asking._no_context_takeover
            and asking._grouped_history != asking._history)


@cython.cfunc
@cython.exceptval(check=False)
def _shareable(data: object) -> cython.bint:
    """A whole message may be shared: bytes of a size worth keeping. No lock."""
    return type(data) is bytes and SHARE_MIN <= len(cython.cast(bytes, data)) <= SHARE_MAX


@cython.cfunc
@cython.exceptval(check=False)
def _count_alone(asking: _Member) -> cython.void:
    """A straggler compresses a group's message alone: counted by its cause, decided at
    its first such message (takes the set's lock)."""
    pset: _OnceState = _set_of(asking)
    history: cython.ulonglong = asking._history
    _lock_set(pset)
    try:  # (the fallback's Python ints are allocated: a MemoryError leaves no lock held)
        if asking._straggler_cause == 0:
            asking._straggler_cause = (
                ALONE_JOINED if history == 0 or asking._since_empty == 0
                else ALONE_START_OVER if (history == pset.left_behind
                                          or history == pset.start_over_history)
                else ALONE_DIVERGED)
        pset.alone[asking._straggler_cause] += 1
        pset.alone_now += 1
    finally:
        _unlock_set(pset)


@cython.cfunc
def _start_over_for(pset: _OnceState, history: cython.ulonglong) -> Optional[_Led]:
    """The message a group started over at, if ``history`` is what that left behind:
    its first compressor's after it, whose peer's window then ends with the message,
    which is the group's whole window."""
    led: Optional[_Led] = pset.start_over_led
    return led if led is not None and history != 0 and led.left_behind == history else None


@cython.cfunc
def _new_entry(asking: _Member, data: bytes, start_over: cython.bint, cohort: cython.bint,
               group: Optional[_Led]) -> _Led:
    """The entry of a message ``asking`` compresses for others (no lock), from an empty
    window with ``start_over`` or ``cohort``."""
    led: _Led = _Led.__new__(_Led)  # (every field set here: no __init__ call to make)
    led.data, led.nct, led.payload = data, asking._no_context_takeover, b""
    led.leader, led.window = _weak(asking), None
    led.started_over, led.cohort = start_over or cohort, cohort
    led.before = 0 if led.started_over else asking._history
    led.left_behind = group.after if start_over and group is not None else 0
    led.first = led.counted = led.taken = False
    led.after = led.since = led.tail_history = led.tail_bytes = led.context = 0
    return led


@cython.cfunc
def _entry_made(asking: _Member, led: _Led, group: Optional[_Led], seen: cython.bint,
                size: cython.size_t, tail_history: cython.ulonglong,
                tail_bytes: cython.size_t) -> cython.bint:
    """After ``asking`` compressed ``led``'s message (``size`` bytes; its tail before
    ``tail_history``, ``tail_bytes``; the object's lock held): its tail and the entry's
    state after it; whether the entry is a group's (_remember's ``first``)."""
    if led.cohort:  # its window is the message alone: the group's last bytes
        _extend_tail(asking, group, size, 0, 0)
    elif seen and not led.started_over:
        _extend_tail(asking, group, size, tail_history, tail_bytes)
    elif not seen:
        asking._straggler_cause = 0  # it leads: in a group (or alone, until it straggles)
    led.after, led.since, led.context = asking._history, asking._since_empty, asking._context
    led.tail_history, led.tail_bytes = asking._tail_history, asking._tail_bytes
    return not seen or (led.started_over and not led.cohort)


@cython.cfunc
@cython.exceptval(check=False)
def _extend_tail(asking: _Member, group: Optional[_Led], size: cython.size_t,
                 tail_history: cython.ulonglong, tail_bytes: cython.size_t) -> cython.void:
    """After compressing ``group``'s message alone (its tail was ``tail_history``,
    ``tail_bytes``): its last ``size`` bytes are the group's, and the tail before them
    too if it followed the group's messages one by one."""
    if group is None or group.started_over:
        return
    asking._tail_bytes = size + (tail_bytes if tail_history == group.before else 0)
    asking._tail_history = group.after


@cython.cfunc
def _remember(pset: _OnceState, kept: list, first: cython.bint, dropped: list) -> cython.void:
    """Keep ``kept``'s one entry first, and the old entries whose message someone else
    still holds; a straggler's copy never pushes out a group's entry (``first``). A
    start-over's cost is measured here. What it drops goes on ``dropped`` (both lists
    made by the caller: no object is made under the lock)."""
    old: _Led
    led: _Led = kept[0]
    size: cython.double = len(led.payload)
    room: cython.Py_ssize_t = KEPT_MAX - 1
    firsts: cython.Py_ssize_t = KEPT_MAX - 1
    led.first = first
    for old in pset.kept or ():
        if old.first and _held_elsewhere(old):
            room -= 1
    for old in pset.kept or ():
        if not _held_elsewhere(old):
            continue
        if old.first and (firsts > 0 or old.data is led.data):
            kept.append(old)
            firsts -= 1
        elif not old.first and room > 0:
            kept.append(old)
            room -= 1
    dropped.append(pset.kept)
    pset.kept = kept
    pset.unfollowed += 1
    if first and led.started_over:
        # who it left behind and the state it offers them, set together
        pset.left_behind, pset.start_over_history = led.left_behind, led.after
        dropped.append(pset.start_over_led)
        pset.start_over_led = led
        size /= max(1, len(led.data))  # as a fraction of the message
        pset.since_start_over = 0
        pset.start_over_extra = (2 * max(0.0, size - pset.average_payload)
                                 if pset.average_payload else 0.0)


@cython.cfunc
@cython.exceptval(check=False)
def _start_over_due_now(pset: _OnceState) -> cython.bint:
    """A group starts over at its next message once the bytes its messages since the
    last start-over cost make that start-over's cost (or half a message at first) a
    share of them: the budget, scaled by the stragglers' share of deliveries (the
    budget at an eighth, twice it from a quarter). Costs are fractions of a message."""
    since: cython.Py_ssize_t = pset.since_start_over
    average: cython.double = pset.average_payload
    extra: cython.double = pset.start_over_extra
    if START_OVER_BUDGET <= 0:
        return False
    if average == 0:
        return since >= START_OVER_EVERY
    budget: cython.double = START_OVER_BUDGET * min(2.0, 8 * pset.alone_share)
    return since * average * budget >= (extra if extra > 0 else average / 2)


@cython.cfunc
@cython.exceptval(check=False)
def _add_counts(pset: _OnceState, into: cython.pointer(cython.ulonglong)) -> cython.void:
    """Add the set's counters to ``into`` (led, alone joined, diverged and start over,
    rejoined, start overs, cohorts); takes its lock."""
    _lock_set(pset)
    try:
        into[0] += pset.led
        into[1] += pset.alone[ALONE_JOINED]
        into[2] += pset.alone[ALONE_DIVERGED]
        into[3] += pset.alone[ALONE_START_OVER]
        into[4] += pset.rejoined
        into[5] += pset.start_overs
        into[6] += pset.cohorts
    finally:
        _unlock_set(pset)


@cython.cfunc
@cython.exceptval(check=False)
def _adopted(pset: _OnceState, by_tail: cython.bint) -> cython.void:
    """A follower took a payload: sharing pays, keep every message again."""
    pset.unfollowed = 0
    pset.shared_now += 1
    pset.rejoined += by_tail


@cython.cfunc
@cython.exceptval(check=False)
def _keep_next(pset: _OnceState) -> cython.bint:
    """Whether to keep the next message (one in QUIET_SAMPLE while quiet); takes the
    set's lock."""
    keep: cython.bint = True
    _lock_set(pset)
    try:
        if pset.unfollowed >= QUIET_AFTER:
            pset.skipped += 1
            keep = pset.skipped >= QUIET_SAMPLE
            if keep:
                pset.skipped = 0
    finally:
        _unlock_set(pset)
    return keep


# --- The flows around the decisions: each takes the locks it needs; the host drives the
# streams


@cython.cfunc
def _before_message(asking: _Member, data: object, fin: cython.bint, shareable: cython.bint,
                    plan: cython.pointer(_Plan)) -> Optional[_Led]:
    """Before ``asking`` compresses a message (no lock held): a straggler may rejoin
    first; then, for a message it may share, the entry _find_led found, and ``plan``."""
    pset: Optional[_OnceState] = _set_of(asking)
    history: cython.ulonglong = asking._history
    if fin and pset is not None and history != 0 and history == pset.left_behind:
        _rejoin(asking, True)  # (a hint read without the lock; checked again under it)
    elif shareable and _joins_younger(asking):
        _rejoin(asking, False)
    if not shareable:
        return None
    _lock_set(pset)
    try:
        return _find_led(pset, cython.cast(bytes, data), asking._history, asking, plan)
    finally:
        _unlock_set(pset)
        _release_held(plan)


@cython.cfunc
def _compress_alone(asking: _Member, data: object, plan: cython.pointer(_Plan),
                    group: Optional[_Led], shareable: cython.bint) -> object:
    """``asking`` compresses a message itself (the object's lock held): counted if a
    straggler's; compressed for others if a start-over's, a cohort's or one worth
    keeping; a group's message extends its tail. None: the host compresses it."""
    if plan.seen and not plan.start_over:
        _count_alone(asking)
    if plan.start_over or plan.cohort or (shareable and _keep_next(_set_of(asking))):
        return _compress_to_share(asking, cython.cast(bytes, data), plan.seen,
                                  plan.start_over, group, plan.cohort)
    if not plan.seen:
        return None
    tail_history: cython.ulonglong = asking._tail_history
    tail_bytes: cython.size_t = asking._tail_bytes
    payload: bytes = _compress_whole(asking, cython.cast(bytes, data))
    _extend_tail(asking, group, len(cython.cast(bytes, data)), tail_history, tail_bytes)
    return payload


@cython.cfunc
def _compress_to_share(asking: _Member, data: bytes, seen: cython.bint,
                       start_over: cython.bint, group: Optional[_Led],
                       cohort: cython.bint) -> bytes:
    """Compress a whole message and keep it (the object's lock held): from an empty
    window for a start-over or a cohort. What can fail is made before the message goes
    into the stream."""
    pset: _OnceState = _set_of(asking)
    led: _Led = _new_entry(asking, data, start_over, cohort, group)
    tail_history: cython.ulonglong = asking._tail_history
    tail_bytes: cython.size_t = asking._tail_bytes
    kept: list = [led]
    dropped: list = []  # (released after the lock)
    if led.started_over:
        _start_empty(asking)  # the peer sees a message that refers to nothing earlier
    led.payload = _compress_whole(asking, data)
    _at("committed")
    first: cython.bint = _entry_made(asking, led, group, seen, len(data), tail_history,
                                     tail_bytes)
    _lock_set(pset)
    try:
        pset.cohorts += cohort
        _remember(pset, kept, first, dropped)
    finally:
        _unlock_set(pset)
    return led.payload


@cython.cfunc
def _state_to_follow(asking: _Member, led: _Led) -> object:
    """The state ``asking`` takes to follow ``led`` (no lock held): its leader's after
    it, fetched once by the first follower; None without context takeover; False if it
    cannot be had (the leader moved on, or its engine cannot give it)."""
    state: object = None
    if not led.nct:
        pset: _OnceState = _set_of(asking)
        state = _fetched(pset, led, None)
        if state is None:
            leader = led.leader()
            _at("follow")
            if leader is None or leader is asking:
                return False
            member: _Member = cython.cast(_Member, leader)
            _lock_member(member)
            try:
                if member._history == led.after:
                    state = _fetched(pset, led, None)
                    if state is None:  # (else another follower fetched it meanwhile)
                        state = _fetched(pset, led, _current_state(member))
            finally:
                _unlock_member(member)
            if state is None:
                return False
    _at("adopt")
    return state


@cython.cfunc
def _fetched(pset: _OnceState, led: _Led, state: object) -> object:
    """``led``'s leader's state (None: not fetched yet), set to ``state`` if it was not
    (never replaced: every follower takes the same object); takes the set's lock."""
    _lock_set(pset)
    try:
        if led.window is None:
            led.window = state
        return led.window
    finally:
        _unlock_set(pset)


@cython.cfunc
@cython.exceptval(check=False)
def _adopt(asking: _Member, led: _Led, state: object,
           traffic: cython.pointer(Traffic)) -> cython.bint:
    """Take ``state`` (_state_to_follow) instead of compressing ``led``'s message, from
    its history or by a matching tail (the object's lock held). False if ``asking``
    moved on meanwhile."""
    by_tail: cython.bint = asking._history != led.before and not led.started_over
    if (by_tail and not _tail_matches(asking, led)) or _busy(asking):
        return False
    _take(asking, state, led, True, ADOPTED_BY_TAIL if by_tail else ADOPTED, traffic)
    return True


@cython.cfunc
@cython.exceptval(check=False)
def _take(asking: _Member, state: object, led: _Led, keep_tail: cython.bint,
          adoption: cython.int, traffic: cython.pointer(Traffic)) -> cython.void:
    """``asking`` takes ``state`` and the history after ``led`` (the object's lock held),
    with the entry's tail if ``keep_tail``; ``adoption`` (ADOPTED_*, or 0) is counted by
    the host."""
    _take_stream(asking, state, adoption, traffic)
    asking._history, asking._since_empty, asking._context = led.after, led.since, led.context
    asking._tail_bytes = 0
    if keep_tail:
        asking._tail_history, asking._tail_bytes = led.tail_history, led.tail_bytes
    asking._straggler_cause = 0


@cython.cfunc
@cython.exceptval(-1)
def _rejoin(asking: _Member, left_behind: cython.bint) -> cython.int:
    """A straggler takes a group's state before its next message: the start-over that
    left it behind (``left_behind``), or a younger group its tail holds; unless it moved
    on meanwhile."""
    pset: _OnceState = _set_of(asking)
    history: cython.ulonglong = asking._history
    led: _Led
    _lock_set(pset)
    try:
        found = _start_over_for(pset, history) if left_behind else _younger_group(pset, asking)
    finally:
        _unlock_set(pset)
    if found is None:
        return 0
    led = found
    state = _state_to_follow(asking, led)
    if state is False:
        return 0
    _lock_member(asking)
    try:
        if (asking._history == history and not _busy(asking) and (left_behind or _holds_whole(
                led, asking._tail_history, asking._tail_bytes))):
            _take(asking, state, led, not left_behind, 0, cython.NULL)  # (a start-over: no tail)
            _lock_set(pset)
            try:
                asking._grouped_history = led.after
                pset.rejoined += 1
            finally:
                _unlock_set(pset)
    finally:
        _unlock_member(asking)
    return 0
