# Compress once's policy: which group a message joins, who leads and who follows, when a
# straggler rejoins, when a group starts over, what is kept. Written once, in Cython's
# pure-Python syntax, for both implementations: the extension includes this file
# (_fastdeflate.pyx, after extension/policy_host.pxi) and compiles it with the C types
# below; the fallback runs it as Python (fastdeflate/_fallback/compress_once.py, with a
# stand-in for `cython`). Not imported by name. What stays per implementation is the
# mechanics: the locks, and how a stream's state is copied and taken. The host defines
# (the extension's in policy_host.pxi, and after this file in compress_once.pxi where
# they need its classes):
# - _Plan (a struct of bints: follow, seen, start_over, cohort; the extension's also
#   holds references), _hold(plan, obj) (keep obj alive until the lock is released) and
#   _release_held(plan) (after it), Traffic (a call's counters; the fallback has none);
# - _set_of(member) (its _OnceState), _lock_set/_unlock_set(pset) (the set's lock: the
#   extension makes no object under it), _lock_member/_unlock_member (the
#   compressor's), _busy(member) (in the middle of a message: takes no state);
# - _take_stream(member, state, adoption, traffic) (drop its own stream, take
#   ``state``; counts an adoption as _adopted does), _current_state(member) (its state
#   now, for followers; None if its engine cannot give it), _start_empty(member) (forget
#   its window), _compress_whole(member, data) (a whole message's payload);
# - _held_elsewhere(led) (someone besides the entry holds its message), _weak(obj) (a
#   weak reference), _at and _at_quietly(point) (the tests' hooks).
# Every decision here runs with its parameter set's lock held, unless its docstring says
# otherwise; the flows at the end take the locks themselves.
#
# A server that sends one message to many connections hands the same bytes to each
# connection's compressor, one after the other (websockets' broadcast(), or a loop; the
# same object, or equal bytes where the library encodes a str per connection). The
# compressors of one parameter set that have sent the same messages since their window
# was last empty (the same history) leave their peers with the same window, so the
# first one's payload is right for all: the others take it, and the state the first one
# reached (its window, fetched once). Each parameter set keeps the last few whole
# messages compressed for that. Compressors that have diverged (a private message, a
# late joiner) compress alone, and rejoin in one of two ways:
# - by their window: once a straggler has compressed alone the group's last messages
#   and they fill a window (its tail: _tail_history, _tail_bytes), its peer holds the
#   same last window of bytes as the group's peers, and no payload reaches further back:
#   it takes the group's next payload (costs no bytes; a few own compressions each);
# - by a start-over: the second compressor of a group's message starts over from an
#   empty window instead of following, when that pays (_start_over_due_now weighs the
#   bytes a start-over costs every member against stragglers' own compressions: the
#   operator's budget, set_start_over_budget()), and everyone sent that message joins
#   it. The first compressor of a message never starts over: it cannot tell a private
#   message from a broadcast, and a connection in no group keeps its own bytes.
# Stragglers that left their group together (a private message to several, late
# joiners) and so have nothing of the group's since in their window (an empty tail),
# form a cohort while they catch up: the first two compress the group's message alone
# (no cost in bytes); the third, seeing two such copies by others, compresses it from an
# empty window, a payload right for any peer, kept as the cohort's entry (_Led.cohort),
# which the next ones take (a cohort of one would cost bytes for nothing: the third is
# the sign there are more); the cohort then shares its messages as a group does (the
# same history) and rejoins the group by its window. Only with a budget above 0 (it
# costs the cohort some bytes). Keeping a message costs a little (~0.25 us); a parameter
# set where the last QUIET_AFTER messages kept found no follower (one connection, or
# every message different) keeps only one in QUIET_SAMPLE, until a follower finds one:
# a broadcast then compresses at most QUIET_SAMPLE times before it is shared again.

from typing import Optional

import fastdeflate._params as _constants

# The constants (what each means: fastdeflate/_params.py)
SHARE_MAX = cython.declare(cython.Py_ssize_t, _constants.SHARE_MAX)
SHARE_MIN = cython.declare(cython.Py_ssize_t, _constants.SHARE_MIN)
KEPT_MAX = cython.declare(cython.Py_ssize_t, _constants.KEPT_MAX)
START_OVER_EVERY = cython.declare(cython.Py_ssize_t, _constants.START_OVER_EVERY)
QUIET_AFTER = cython.declare(cython.Py_ssize_t, _constants.QUIET_AFTER)
QUIET_SAMPLE = cython.declare(cython.Py_ssize_t, _constants.QUIET_SAMPLE)
# What starting over may cost a group's members: this fraction of their bytes (set by
# the host's set_start_over_budget(), under its lock; 0: never start over).
START_OVER_BUDGET = cython.declare(cython.double, _constants.DEFAULT_START_OVER_BUDGET)

# Why a compressor compressed alone a message others of its parameter set were sent
# (_Member._straggler_cause; 0: not decided since it last took part in a group).
ALONE_JOINED = cython.declare(cython.int, 1)  # its window was empty: never in the group
ALONE_DIVERGED = cython.declare(cython.int, 2)  # it was sent what the group was not
ALONE_START_OVER = cython.declare(cython.int, 3)  # it led the message its group started over at

# How a follower took its leader's state (_take: counted by the host's _adopted call)
ADOPTED = cython.declare(cython.int, 1)  # from its own history
ADOPTED_BY_TAIL = cython.declare(cython.int, 2)  # by its tail (a straggler rejoined by its window)


@cython.cclass
class _Member:
    """A compressor as compress once sees it (the base of both Compressor classes)."""

    # What its peer's window holds: 0 is empty (new, reset, or no context takeover);
    # compressors of one parameter set with the same history have sent the same bytes
    _history = cython.declare(cython.ulonglong)
    _since_empty = cython.declare(cython.ulonglong)  # messages since the window was empty
    _context = cython.declare(cython.size_t)  # the bytes its window holds (at most a window)
    # A straggler's tail: its last _tail_bytes bytes are those of history _tail_history
    # (a group's), from group messages it compressed alone
    _tail_history = cython.declare(cython.ulonglong)
    _tail_bytes = cython.declare(cython.size_t)
    _straggler_cause = cython.declare(cython.int)  # why it is out of its group (ALONE_*)
    # Its history when it last shared a message with another compressor (took one's
    # payload, or had its own taken): while it is still that, it is in a group, not a
    # straggler, and takes no cohort's entry (the lock)
    _grouped_history = cython.declare(cython.ulonglong)
    _window_bits = cython.declare(cython.int)
    _no_context_takeover = cython.declare(cython.bint)


@cython.cclass
class _Led:
    """A whole message a compressor compressed, for others with the same history."""

    data = cython.declare(bytes)  # the bytes object compressed
    nct = cython.declare(cython.bint)  # no context takeover: serves only its own kind
    before = cython.declare(cython.ulonglong)  # the history it was compressed from
    started_over = cython.declare(cython.bint)  # its leader started over: anyone may join
    payload = cython.declare(bytes)
    leader = cython.declare(object)  # a weak reference: the cache keeps no codec alive
    after = cython.declare(cython.ulonglong)  # the leader's history after it
    since = cython.declare(cython.ulonglong)  # and its messages since empty
    window = cython.declare(object)  # the leader's state after it, fetched once (the host's;
                                     # None: not yet)
    first = cython.declare(cython.bint)  # nobody had compressed its message before (a group's)
    counted = cython.declare(cython.bint)  # sent to several: a group's (_start_over_due_now)
    tail_history = cython.declare(cython.ulonglong)  # the leader's tail after it
    tail_bytes = cython.declare(cython.size_t)
    left_behind = cython.declare(cython.ulonglong)  # a start-over's: its first compressor's history
    cohort = cython.declare(cython.bint)  # a cohort's (started over too): for stragglers
    taken = cython.declare(cython.bint)  # someone took it: its leader was in a group then
    context = cython.declare(cython.size_t)  # the bytes the leader's window holds after it
    # (made by _new_entry alone)


@cython.cclass
class _OnceState:
    """Compress once's state of one parameter set (level, window bits, memLevel,
    strategy): the messages kept, when to keep one, when a group starts over, and the
    counters of status(). Guarded by the host's lock of the set."""

    kept = cython.declare(list)  # _Led entries, newest first (None: none yet)
    stragglers = cython.declare(cython.bint)  # a compressor met a kept message from another history
    unfollowed = cython.declare(cython.Py_ssize_t)  # messages kept since a follower last took one
    skipped = cython.declare(cython.Py_ssize_t)  # messages not kept since the last kept, while quiet
    since_start_over = cython.declare(cython.Py_ssize_t)  # group messages since a start-over
    average_payload = cython.declare(cython.double)  # their payload / message size (moving average)
    start_over_extra = cython.declare(cython.double)  # what starting over cost last time (same units)
    alone_now = cython.declare(cython.Py_ssize_t)  # stragglers' own compressions since the
    shared_now = cython.declare(cython.Py_ssize_t)  # last group message, and deliveries shared
    alone_share = cython.declare(cython.double)  # the stragglers' share of deliveries lately
    left_behind = cython.declare(cython.ulonglong)  # the history the last start-over left behind
    start_over_history = cython.declare(cython.ulonglong)  # and the one it started
    start_over_led = cython.declare(object)  # the _Led it started at, for the one left behind
    # counters since the process started (status())
    led = cython.declare(cython.ulonglong)  # group messages (compressed once for others)
    alone = cython.declare(cython.ulonglong[4])  # stragglers' own compressions, by ALONE_* cause
    rejoined = cython.declare(cython.ulonglong)  # stragglers that rejoined by their window
    start_overs = cython.declare(cython.ulonglong)  # group start-overs
    cohorts = cython.declare(cython.ulonglong)  # stragglers' cohorts started

    def __init__(self):
        self.kept, self.start_over_led = None, None
        self.alone = [0, 0, 0, 0]  # (a C array compiled: nothing allocated under the lock)
        self.clear([])
        self.led = self.rejoined = self.start_overs = self.cohorts = 0

    def clear(self, dropped: list) -> None:
        """Forget the messages kept and what decides sharing (not the counters); what it
        kept goes on ``dropped``, to be released after the lock."""
        dropped.append(self.kept)
        dropped.append(self.start_over_led)
        self.kept, self.start_over_led = None, None  # (no list made under the lock)
        self.stragglers = False
        self.unfollowed = self.skipped = self.since_start_over = 0
        self.alone_now = self.shared_now = 0
        self.average_payload = self.start_over_extra = self.alone_share = 0.0
        self.left_behind = self.start_over_history = 0
        return dropped


@cython.cfunc
def _count_group_message(pset: _OnceState, led: _Led) -> cython.void:
    """Another compressor was sent ``led``'s message: it went to several connections (a
    private message never does), so it counts towards starting over, and its compressed
    fraction towards the average."""
    # (cast: Cython divides C integers as C does)
    size: cython.double = cython.cast(cython.double, len(led.payload)) / max(1, len(led.data))
    alone: cython.double = pset.alone_now
    led.counted = True
    pset.led += 1
    pset.since_start_over += 1
    # what stragglers cost lately (the previous message's deliveries, mostly): stragglers
    # that rejoined by their window no longer count towards starting over
    pset.alone_share += (alone / (alone + pset.shared_now + 1) - pset.alone_share) / 8
    pset.alone_now = pset.shared_now = 0
    if not led.started_over:
        pset.average_payload += ((size - pset.average_payload) / 16
                                 if pset.average_payload else size)


@cython.cfunc
def _find_led(pset: _OnceState, data: bytes, history: cython.ulonglong, asking: _Member,
              plan: cython.pointer(_Plan)) -> Optional[_Led]:
    """The kept compression of ``data`` that ``asking`` (history ``history``) can take
    (plan.follow): from the same history, from a window its tail matches, one that
    started over, or, with an empty tail, a cohort's (after an entry of its own
    history). Else (noting stragglers) the newest entry of a group's (nobody had
    compressed its message before), for a straggler's tail, or None. plan.seen: ``data``
    was compressed lately, from any history; plan.start_over: ``asking`` is the second
    compressor of a group's message and starts the group over (_start_over_due_now);
    plan.cohort: ``asking`` is the third straggler with an empty tail and starts a
    cohort (compresses ``data`` from an empty window for the next ones). An entry made
    without context takeover serves only a compressor without it, and the reverse. The
    leaders it looks at go on ``plan`` (_hold), released after the lock."""
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
    """``asking`` takes ``led``: the entry is the last to be pushed out, and both it and
    ``led``'s leader shared a message, so are in a group at the history after it (the
    leader goes on ``plan``)."""
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
    """``data`` is ``led``'s message: the same object, or equal bytes (a library that
    encodes a str for each connection, or a loop that does: the peers see the same
    message). The entry then holds ``data``, the object its sender still holds, so it
    is kept while the loop goes on (_remember keeps only messages someone holds); the
    bytes object it held may be freed here, which runs no code."""
    if led.data is data:
        return True
    if led.data != data:
        return False
    led.data = data
    return True


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _straggles(asking: _Member, history: cython.ulonglong) -> cython.bint:
    """``asking`` (history ``history``) left its group and has nothing of the group's in
    its window since (an empty tail): it may start or take a cohort's entry. A member of
    a group (its last message shared) never does: its own context is worth keeping."""
    return asking._tail_bytes == 0 and (history == 0 or asking._grouped_history != history)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _window_size(asking: _Member) -> cython.size_t:
    """The bytes of history a payload of ``asking``'s parameter set may refer to (no lock)."""
    return cython.cast(cython.size_t, 1) << max(9, asking._window_bits)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _tail_matches(asking: _Member, led: _Led) -> cython.bint:
    """``asking``'s last window of bytes are those of ``led``'s history before it (its
    tail: the group messages it compressed alone fill a window), so ``led``'s payload,
    which refers at most one window back, is right for its peer too."""
    return asking._tail_history == led.before and asking._tail_bytes >= _window_size(asking)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _holds_whole(led: _Led, tail_history: cython.ulonglong,
                 tail_bytes: cython.size_t) -> cython.bint:
    """``led``'s leader's whole window after it is its tail, and a tail of
    (``tail_history``, ``tail_bytes``) holds all of it: the same last bytes of one group
    history (a cohort's: it started from an empty window at a message of that group)."""
    return (led.context != 0 and not led.nct and led.tail_history == tail_history
            and led.context <= led.tail_bytes and led.context <= tail_bytes)


@cython.cfunc
def _younger_group(pset: _OnceState, asking: _Member) -> Optional[_Led]:
    """A kept message whose leader's whole window ``asking``'s tail holds (a younger
    group's, a cohort's), if ``asking`` is not in a group at its history. A straggler
    takes that group's state before its next message: the group's payloads refer only
    to bytes its peer has last; then it shares them instead of compressing alone until
    its tail is a whole window."""
    led: _Led
    if asking._grouped_history == asking._history:
        return None
    for led in pset.kept or ():
        if led.after != asking._history and _holds_whole(led, asking._tail_history,
                                                         asking._tail_bytes):
            return led
    return None


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _joins_younger(asking: _Member) -> cython.bint:
    """Whether ``asking``, about to compress a whole message it may share, should look
    for a younger group (_younger_group): a straggler with a tail short of a window (a
    whole window's tail rejoins its group by it instead: _tail_matches). No lock."""
    return (0 < asking._tail_bytes < _window_size(asking) and not asking._no_context_takeover
            and asking._grouped_history != asking._history)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
def _shareable(data: object) -> cython.bint:
    """Whether a whole message may be shared: bytes of a size worth keeping. No lock."""
    return type(data) is bytes and SHARE_MIN <= len(cython.cast(bytes, data)) <= SHARE_MAX


@cython.cfunc
@cython.exceptval(check=False)
def _count_alone(asking: _Member) -> cython.void:
    """A straggler compresses a group's message alone: count it by why it is out of the
    group, decided at its first such message (takes the set's lock)."""
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
@cython.inline
@cython.exceptval(check=False)
def _left_behind(pset: _OnceState, history: cython.ulonglong) -> cython.bint:
    """``history`` is the one the last start-over left behind (no lock: a hint; the
    start-over's entry, _start_over_for, is read under it)."""
    return history != 0 and history == pset.left_behind


@cython.cfunc
def _start_over_for(pset: _OnceState, history: cython.ulonglong) -> Optional[_Led]:
    """The message a group started over at, if ``history`` is the one that start-over
    left behind (its first compressor's, after that message: it sent the message with
    its own context, so its peer's history ends with it, and the group's window after
    it is that message alone; it takes the group's state instead of staying behind)."""
    led: Optional[_Led] = pset.start_over_led
    return led if led is not None and history != 0 and led.left_behind == history else None


@cython.cfunc
def _new_entry(asking: _Member, data: bytes, start_over: cython.bint, cohort: cython.bint,
               group: Optional[_Led]) -> _Led:
    """The entry for a whole message ``asking`` is about to compress for others (no
    lock): from an empty window with ``start_over`` (a group message's second
    compressor starts the group over; the host forgets its window) or ``cohort`` (the
    third straggler with an empty tail starts a cohort)."""
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
    """After ``asking`` compressed ``led``'s message (``size`` bytes; its tail before was
    ``tail_history``, ``tail_bytes``; the object's lock held, not the set's): its tail
    and the entry's state after it; whether the entry is a group's (``first``: nobody
    compressed its message before, or it started over)."""
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
    """After compressing ``group``'s message alone (the object's lock held; its tail
    before was ``tail_history``, ``tail_bytes``): its last ``size`` bytes are those of
    the group's history after it, and the ones before them too while it followed the
    group's messages one by one."""
    if group is None or group.started_over:
        return
    asking._tail_bytes = size + (tail_bytes if tail_history == group.before else 0)
    asking._tail_history = group.after


@cython.cfunc
def _remember(pset: _OnceState, kept: list, first: cython.bint, dropped: list) -> cython.void:
    """Keep ``kept``'s one entry (newest first), and only entries whose message someone
    else still holds (nobody can send a message again that only this cache holds).
    Groups' entries (``first``) come before stragglers' copies: a copy never pushes out a
    group's entry, of its message or another's (several rooms broadcasting at once; their
    groups have the most members to serve). If it started over, what that cost is
    measured. What it drops goes on ``dropped``, to be released after the lock (the
    caller makes both lists: appending allocates no object, so no collection runs under
    the lock)."""
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
    if first and led.started_over:  # what starting over cost: this payload and the next few
        # who it left behind, and the state it offers them; both here, once the message
        # is committed and kept, never one without the other
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
    """Whether a group of this parameter set should start over at its next message:
    once its messages since it last did have cost its members enough bytes that what
    starting over costs them (measured the last time, or half a message at first) is a
    small share of them: START_OVER_BUDGET in proportion to the CPU stragglers cost
    now, their own compressions' share of the latest deliveries (alone_share: an eighth
    of them, the budget; a quarter or more, twice it; none once they rejoined by their
    window). Until then stragglers compress alone (and rejoin by their window). Costs
    are fractions of a message's size (payload / message), so a few large messages
    among small ones weigh as much as the others. A budget of 0 never starts over."""
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
    """Add the set's counters since the process started to ``into`` (7 of them: led,
    alone joined, diverged and start over, rejoined, start overs, cohorts), under its
    lock (takes it)."""
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
    """A delivery took a shared payload (a follower's): sharing pays here, keep every
    message again; ``by_tail``: a straggler rejoined by its window."""
    pset.unfollowed = 0
    pset.shared_now += 1
    pset.rejoined += by_tail


@cython.cfunc
@cython.exceptval(check=False)
def _keep_next(pset: _OnceState) -> cython.bint:
    """Whether to keep the next whole message for sharing (see QUIET_AFTER; takes the
    set's lock)."""
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


# --- The flows around the decisions: each takes the locks it needs through the host
# (_lock_set, _lock_member), and a state is taken or a message compressed by the host's
# functions (how a stream is driven and its state copied stays the host's)


@cython.cfunc
def _before_message(asking: _Member, data: object, fin: cython.bint, shareable: cython.bint,
                    plan: cython.pointer(_Plan)) -> Optional[_Led]:
    """Before ``asking`` compresses a message (no lock held): a straggler first takes a
    group's state where one suits its peer (_rejoin); for a whole message it may share
    (``shareable``: _shareable), the kept entry _find_led found, ``plan`` saying what
    to do with it (follow it, or compress alone: _compress_alone)."""
    pset: Optional[_OnceState] = _set_of(asking)
    if fin and pset is not None and _left_behind(pset, asking._history):
        _rejoin(asking, True)  # (a hint, checked again under the lock)
    elif shareable and _joins_younger(asking):
        _rejoin(asking, False)
    return _find(asking, cython.cast(bytes, data), plan) if shareable else None


@cython.cfunc
def _compress_alone(asking: _Member, data: object, plan: cython.pointer(_Plan),
                    group: Optional[_Led], shareable: cython.bint) -> object:
    """``asking`` compresses a message itself, no leader's payload taken (the object's
    lock held): a straggler's is counted; a start-over's, a cohort's or a message worth
    keeping is compressed for others (_compress_to_share); a group's message compressed
    alone extends the straggler's tail (``group``: its entry). None: any other message,
    which the host compresses as it is."""
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
def _find(asking: _Member, data: bytes, plan: cython.pointer(_Plan)) -> Optional[_Led]:
    """_find_led for ``asking``'s next message, under its set's lock (the leaders the
    search held are released after it)."""
    pset: _OnceState = _set_of(asking)
    _lock_set(pset)
    try:
        return _find_led(pset, data, asking._history, asking, plan)
    finally:
        _unlock_set(pset)
        _release_held(plan)


@cython.cfunc
def _compress_to_share(asking: _Member, data: bytes, seen: cython.bint,
                       start_over: cython.bint, group: Optional[_Led],
                       cohort: cython.bint) -> bytes:
    """Compress a whole message and keep it for others with the same history (the
    object's lock held): from an empty window with ``start_over`` or ``cohort``
    (_new_entry); ``seen``: others compressed it before, ``group``'s entry the group's,
    which extends this straggler's tail (_entry_made). What can fail is made before the
    message goes into the stream (the lists: no object is made under the set's lock)."""
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
    """The state ``asking`` takes to follow ``led``: its leader's after it, fetched once
    (_give_state); None without context takeover; False if it cannot follow it."""
    state: object = None
    if not led.nct:
        state = _led_state(_set_of(asking), led)
        if state is None:
            leader = led.leader()
            _at("follow")
            state = (None if leader is None or leader is asking
                     else _give_state(cython.cast(_Member, leader), led))
            if state is None:
                return False
    _at("adopt")
    return state


@cython.cfunc
def _give_state(leader: _Member, led: _Led) -> object:
    """``leader``'s state after ``led``'s message, stored in ``led`` by the first
    follower to ask (never replaced: every follower reads the same object); None if the
    leader has moved on or its engine cannot give it. The caller holds no lock (the
    order is one object's, then a set's)."""
    pset: _OnceState = _set_of(leader)
    _lock_member(leader)
    try:
        if leader._history != led.after:
            return None
        state = _led_state(pset, led)
        if state is None:  # (else another follower asked first)
            state = _current_state(leader)
            if state is not None:
                _lock_set(pset)
                try:
                    if led.window is None:
                        led.window = state
                    state = led.window
                finally:
                    _unlock_set(pset)
        return state
    finally:
        _unlock_member(leader)


@cython.cfunc
def _led_state(pset: _OnceState, led: _Led) -> object:
    """``led``'s state (None: not fetched yet), read under its set's lock."""
    _lock_set(pset)
    try:
        return led.window
    finally:
        _unlock_set(pset)


@cython.cfunc
@cython.exceptval(check=False)
def _adopt(asking: _Member, led: _Led, state: object,
           traffic: cython.pointer(Traffic)) -> cython.bint:
    """Take the state ``led``'s leader reached (``state``: _state_to_follow) instead of
    compressing its message: from its history, or by a tail that matches (the object's
    lock held; ``traffic``: the host's counters of the call, or NULL). False if
    ``asking`` moved on meanwhile."""
    by_tail: cython.bint = asking._history != led.before and not led.started_over
    if (by_tail and not _tail_matches(asking, led)) or _busy(asking):
        return False
    _take(asking, state, led, True, ADOPTED_BY_TAIL if by_tail else ADOPTED, traffic)
    return True


@cython.cfunc
@cython.exceptval(check=False)
def _take(asking: _Member, state: object, led: _Led, keep_tail: cython.bint,
          adoption: cython.int, traffic: cython.pointer(Traffic)) -> cython.void:
    """``asking`` takes ``state`` and the history after ``led`` (the object's lock held);
    its tail the entry's with ``keep_tail``, else none; ``adoption`` (ADOPTED_*, or 0):
    counted by the host under the set's lock, as _adopted says."""
    _take_stream(asking, state, adoption, traffic)
    asking._history, asking._since_empty, asking._context = led.after, led.since, led.context
    asking._tail_bytes = 0
    if keep_tail:
        asking._tail_history, asking._tail_bytes = led.tail_history, led.tail_bytes
    asking._straggler_cause = 0


@cython.cfunc
@cython.exceptval(-1)
def _rejoin(asking: _Member, left_behind: cython.bint) -> cython.int:
    """Before its next message, a compressor out of its group takes a group's state
    instead: the start-over that left it behind (``left_behind``: _start_over_for), or
    a younger group its tail holds all of (_younger_group); unless it moved on meanwhile."""
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
