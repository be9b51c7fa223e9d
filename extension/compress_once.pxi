# Compress once: one whole message sent to many compressors is compressed by the first
# (the leader) and taken by the others (followers) with its window.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

# --- compress once: one whole message sent to many compressors --------------------------
#
# A server that sends one message to many connections hands the same bytes to each
# connection's compressor, one after the other (websockets' broadcast(), or a loop; the
# same object, or equal bytes where the library encodes a str per connection). The
# compressors of one parameter set that have sent the same messages since their window
# was last empty (the same history id) leave their peers with the same window, so the
# first one's payload is right for all: the others take it, and the state the first one
# reached (its window, fetched once; their streams go back to the pool). Each ring keeps
# the last few whole messages it compressed for that. Compressors that have diverged
# (a private message, a late joiner) compress alone, and rejoin in one of two ways:
# - by their window: once a straggler has compressed alone the group's last messages
#   and they fill a window (its tail: _tail_history, _tail_bytes), its peer holds the
#   same last window of bytes as the group's peers, and no payload reaches further back:
#   it takes the group's next payload (costs no bytes; a few own compressions each);
# - by a start-over: the second compressor of a group's message starts over from an
#   empty window instead of following, when that pays (_start_over_due_now weighs the bytes a
#   start-over costs every member against stragglers' own compressions: the operator's
#   budget, set_start_over_budget()), and everyone sent that message joins it. The first
#   compressor of a message never starts over: it cannot tell a private message from a
#   broadcast, and a connection in no group keeps its own bytes.
# Stragglers that left their group together (a private message to several, late
# joiners) and so have nothing of the group's since in their window (an empty tail),
# form a cohort while they catch up: the first two compress the group's message alone
# (no cost in bytes); the third, seeing two such copies by others, compresses it from an
# empty window, a payload right for any peer, kept as the cohort's entry
# (_Led.cohort), which the next ones take (a cohort of one would cost bytes for
# nothing: the third is the sign there are more); the
# cohort then shares its messages as a group does (the same history) and rejoins the
# group by its window. Only with a budget above 0 (it costs the cohort some bytes).
# Keeping a message costs a little (~0.25 us); a parameter set where the last
# QUIET_AFTER messages kept found no follower (one connection, or every message
# different) keeps only one in QUIET_SAMPLE, until a follower finds one: a broadcast
# then compresses at most QUIET_SAMPLE times before it is shared again.

cdef enum:
    JOIN_MAX = 2048  # a whole message's payload up to this is inflated with its tail in one call

# The constants both implementations share, defined once in fastdeflate/_params.py (what
# each means is said there) and read at import.
cdef Py_ssize_t SHARE_MAX = _floor.SHARE_MAX
cdef Py_ssize_t SHARE_MIN = _floor.SHARE_MIN
cdef Py_ssize_t KEPT_MAX = _floor.KEPT_MAX
cdef Py_ssize_t START_OVER_EVERY = _floor.START_OVER_EVERY
cdef Py_ssize_t QUIET_AFTER = _floor.QUIET_AFTER
cdef Py_ssize_t QUIET_SAMPLE = _floor.QUIET_SAMPLE

# What starting over may cost a group's members: this fraction of their bytes
# (set_start_over_budget(); 0: never start over).
cdef double START_OVER_BUDGET = _floor.DEFAULT_START_OVER_BUDGET

# Why a compressor compressed alone a message others of its parameter set were sent
# (Compressor._straggler_cause; 0: not decided since it last took part in a group).
cdef enum:
    ALONE_JOINED = 1      # its window was empty (new, reset): it never was in the group
    ALONE_DIVERGED = 2    # it was sent something the group was not (a private message)
    ALONE_START_OVER = 3  # it led the message at which its group started over without it


def set_start_over_budget(double share):
    """See fastdeflate.set_start_over_budget (checked there); returns the previous."""
    global START_OVER_BUDGET
    previous, START_OVER_BUDGET = START_OVER_BUDGET, share
    return previous


def _start_over_budget():
    """The budget set_start_over_budget() set."""
    return START_OVER_BUDGET


def _compress_once_counts():
    """Compress once's counters since the process started, all parameter sets:
    (led, (alone joined, diverged, start over), rejoined, start overs, cohorts)."""
    cdef _ParameterSet b
    led = rejoined = starts = joined = diverged = left = cohorts = 0
    for pset in list(_sets.values()):
        b = pset
        _lock(b.ring.mutex)
        led += b.led
        joined += b.alone[ALONE_JOINED]
        diverged += b.alone[ALONE_DIVERGED]
        left += b.alone[ALONE_START_OVER]
        rejoined += b.ring.rejoined
        starts += b.start_overs
        cohorts += b.cohorts
        _unlock(b.ring.mutex)
    return led, (joined, diverged, left), rejoined, starts, cohorts

cdef bint _sharing = True


cdef class _Led:
    """A whole message a compressor compressed, for others with the same history."""
    cdef object data                 # the bytes object compressed
    cdef bint nct                    # no context takeover
    cdef unsigned long long before   # the history it was compressed from
    cdef bint started_over           # the leader started over for it: anyone may join
    cdef object payload
    cdef object leader               # a weak reference: the cache keeps no codec alive
    cdef unsigned long long after    # the leader's history after it
    cdef unsigned long long since
    cdef object window               # the leader's window after it (fetched once)
    cdef bint first                  # nobody had compressed its message before (a group's)
    cdef bint counted                # sent to several: a group's message (_start_over_due_now)
    cdef unsigned long long tail_history  # the leader's tail after it (_tail_matches)
    cdef size_t tail_bytes
    cdef unsigned long long left_behind  # a start-over's: its first compressor's history
    cdef bint cohort                 # a cohort's (started over too): for stragglers who cannot
                                     # take an entry of their own history
    cdef bint taken                  # someone took it: its leader was in a group then
    cdef size_t context              # the bytes the leader's window holds after it


cdef void _count_group_message(_ParameterSet pset, _Led led) noexcept:
    """Another compressor was sent ``led``'s message (ring lock held): it went to
    several connections (a private message never does), so it counts towards starting
    over, and its compressed fraction towards the average."""
    cdef double size = <double>PyBytes_GET_SIZE(led.payload) / max(1, PyBytes_GET_SIZE(led.data))
    cdef double alone = pset.alone_now
    led.counted = True
    pset.led += 1
    pset.since_start_over += 1
    # what stragglers cost lately (the previous message's deliveries, mostly): stragglers
    # that rejoined by their window no longer count towards starting over
    pset.alone_share += (alone / (alone + pset.ring.shared_now + 1) - pset.alone_share) / 8
    pset.alone_now = pset.ring.shared_now = 0
    if not led.started_over:
        pset.average_payload += ((size - pset.average_payload) / 16
                                if pset.average_payload else size)


cdef inline size_t _window_size(Compressor c) noexcept:
    """The bytes of history a payload of ``c``'s parameter set may refer to."""
    return (<size_t>1) << max(9, c._window_bits)


cdef _Led _find_led(_ParameterSet pset, object data, bint nct, unsigned long long history,
                    Compressor asking, bint *seen, bint *start_over, bint *follow,
                    bint *cohort):
    """The kept compression of ``data`` that ``asking`` (history ``history``) can take
    (``follow`` set): from the same history, from a window ``asking``'s tail matches, or
    one that started over. Else (noting stragglers) the newest entry of a group's
    (nobody had compressed its message before), for a straggler's tail, or None.
    ``seen``: ``data`` was compressed recently, from any history. ``start_over``:
    ``asking`` is the second compressor of a group's message and starts the group over
    (_start_over_due_now). ``cohort``: ``asking`` is the third straggler with an empty tail
    and starts a cohort (compresses ``data`` from an empty window for the next ones).
    An entry of ``asking``'s own history comes before a cohort's. The leaders it looks
    at are held (``held``) until the ring lock is released: a reference dropped under
    the lock is never a leader's last (its finalizer would run there)."""
    cdef _Led led
    cdef _Led group = None
    cdef _Led joinable = None  # a cohort's entry
    cdef bint second
    cdef bint straggling = False
    cdef object alone_by = None  # a straggler that compressed it alone
    cdef int others_alone = 0  # how many did (two are enough to know)
    cdef Held held  # every leader looked at, dropped after the lock (no allocation)
    held.count = 0
    if pset.kept is None:
        return None
    _lock(pset.ring.mutex)
    try:
        for led in pset.kept or ():
            if led.nct == nct and _same_message(led, data):
                seen[0] = True
                if led.first and group is None:
                    group = led
                second = led.first and not led.counted
                if second:
                    _count_group_message(pset, led)
                if (second and history == led.before and not led.started_over and not nct
                        and pset.stragglers and _start_over_due_now(pset)):
                    # the first compressor stays behind (led's leader: _catch_up)
                    pset.stragglers = False
                    pset.start_overs += 1
                    start_over[0] = True
                    return led
                if led.cohort:
                    if joinable is None:
                        joinable = led
                    continue
                if history == led.before or led.started_over or _tail_matches(asking, led):
                    follow[0] = True
                    _in_use(pset, led)
                    _grouped(asking, led, &held)
                    return led
                leader = led.leader()
                _hold(&held, leader)
                if leader is not asking:  # (sent again to the same peer)
                    if not led.first and others_alone < 2 and leader is not alone_by:
                        alone_by = leader
                        others_alone += 1
                    # one a start-over left behind is no reason for another
                    if not (asking._straggler_cause == ALONE_START_OVER
                            or history == pset.left_behind
                            or history == pset.start_over_history):
                        straggling = True
                    pset.ring.unfollowed = 0  # one message to several: a group to make again
        if joinable is not None and _straggles(asking, history):
            follow[0] = True
            _in_use(pset, joinable)
            _grouped(asking, joinable, &held)
            return joinable
        if straggling:
            pset.stragglers = True
        cohort[0] = (others_alone == 2 and group is not None and not group.started_over and not nct
                     and _straggles(asking, history) and START_OVER_BUDGET > 0)
    finally:
        _unlock(pset.ring.mutex)
        _release_held(&held)
    return group


cdef enum:
    HELD_MAX = 33  # the entries a search meets (KEPT_MAX at most: _remember), and the one
                   # it takes (KEPT_MAX + 1 <= HELD_MAX: checked below, at import)

if not 1 <= KEPT_MAX < HELD_MAX:
    raise ImportError(f"fastdeflate: KEPT_MAX {KEPT_MAX} needs 1..{HELD_MAX - 1}")


cdef struct Held:  # strong references a search holds until its ring lock is released
    PyObject *item[HELD_MAX]
    int count


cdef inline void _hold(Held *held, object obj) noexcept:
    """Keep a reference to ``obj`` in ``held`` (ring lock held)."""
    if obj is not None and held.count < HELD_MAX:
        Py_INCREF(obj)
        held.item[held.count] = <PyObject *>obj
        held.count += 1


cdef inline void _release_held(Held *held) noexcept:
    """Drop what ``held`` keeps (after the ring lock is released: a finalizer may run)."""
    cdef int i
    for i in range(held.count):
        Py_XDECREF(held.item[i])
    held.count = 0


cdef inline bint _same_message(_Led led, object data):
    """``data`` (bytes) is ``led``'s message: the same object, or equal bytes (a library
    that encodes a str for each connection, or a loop that does: the peers see the same
    message). The entry then holds ``data``, the object its sender still holds, so it
    is kept while the loop goes on (_remember keeps only messages someone holds). Ring
    lock held: the bytes object it held may be freed here, which runs no code."""
    cdef object kept = led.data
    if kept is data:
        return True
    if (PyBytes_GET_SIZE(kept) != PyBytes_GET_SIZE(data)
            or memcmp(PyBytes_AS_STRING(kept), PyBytes_AS_STRING(data),
                      PyBytes_GET_SIZE(data)) != 0):
        return False
    led.data = data
    return True


cdef inline bint _straggles(Compressor c, unsigned long long history) noexcept:
    """``c`` (history ``history``) left its group and has nothing of the group's in its
    window since (an empty tail): it may start or take a cohort's entry. A member of a
    group (its last message shared: a group's first compressor of a message, or another
    room's) never does: its own context is worth keeping (ring lock held)."""
    return c._tail_bytes == 0 and (history == 0 or c._grouped_history != history)


cdef inline void _grouped(Compressor asking, _Led led, Held *held):
    """``asking`` takes ``led``: both it and ``led``'s leader shared a message, and are
    in a group at the history after it (ring lock held; the leader goes on ``held``,
    which the caller drops after the lock)."""
    asking._grouped_history = led.after
    if not led.taken:
        led.taken = True
        leader = led.leader()
        _hold(held, leader)
        _at_quietly("leader held")  # (tests only: drop the leader's other references)
        if leader is not None:
            (<Compressor>leader)._grouped_history = led.after


cdef inline void _in_use(_ParameterSet pset, _Led led):
    """An entry taken is the last to be pushed out (ring lock held)."""
    if pset.kept[0] is not led:
        pset.kept.remove(led)
        pset.kept.insert(0, led)


cdef inline bint _tail_matches(Compressor c, _Led led) noexcept:
    """``c``'s last window of bytes are those of ``led``'s history before it (its tail:
    the group messages it compressed alone fill a window), so ``led``'s payload, which
    refers at most one window back, is right for ``c``'s peer too."""
    return c._tail_history == led.before and c._tail_bytes >= _window_size(c)


cdef void _extend_tail(Compressor self, _Led group, size_t size,
                       unsigned long long tail_history, size_t tail_bytes) noexcept:
    """After compressing ``group``'s message alone (the object's lock held; its tail
    before was ``tail_history``, ``tail_bytes``): its last ``size`` bytes are those of
    the group's history after it, and the ones before them too while it followed the
    group's messages one by one."""
    if group is None or group.started_over:
        return
    self._tail_bytes = size + (tail_bytes if tail_history == group.before else 0)
    self._tail_history = group.after


cdef int _catch_up(Compressor self) except -1:
    """The first compressor of the message a group started over at (``left_behind``)
    sent it with its own context: its peer's history ends with that message, and the
    group's window after it is that message alone, a suffix of it. Before its next
    message it takes the group's state instead of staying behind (a rejoin)."""
    cdef _ParameterSet pset = self._set
    cdef _Led led
    _lock(pset.ring.mutex)
    led = pset.start_over_led
    _unlock(pset.ring.mutex)
    if led is None or led.left_behind != self._history:
        return 0
    window = _window_to_follow(self, led)
    if window is False:
        return 0
    _lock(self._mutex)
    try:
        if (self._history == led.left_behind and not self._fragmenting
                and not self._in_message and self._h.ring != NULL):
            _take_state(self, window, led.after, led.since, led.context)
            _lock(pset.ring.mutex)
            self._grouped_history = led.after
            pset.ring.rejoined += 1
            _unlock(pset.ring.mutex)
    finally:
        _unlock(self._mutex)
    return 0


cdef inline bint _holds_whole(_Led led, unsigned long long tail_history,
                              size_t tail_bytes) noexcept:
    """``led``'s leader's whole window after it is its tail, and a tail of
    (``tail_history``, ``tail_bytes``) holds all of it: the same last bytes of one group
    history (a cohort's: it started from an empty window at a message of that group)."""
    return (led.context != 0 and not led.nct and led.tail_history == tail_history
            and led.context <= led.tail_bytes and led.context <= tail_bytes)


cdef int _join_younger_group(Compressor self) except -1:
    """A straggler (it compresses its group's messages alone, its tail growing) whose
    tail holds all of a younger group's window — a cohort that started from an empty
    window at one of those messages — takes that group's state before its next message:
    the group's payloads refer only to bytes its peer has last. Then it shares that
    group's payloads instead of compressing alone until its tail is a whole window.
    (Stragglers that left together: the two before a cohort's third join it at the
    next message.)"""
    cdef _ParameterSet pset = self._set
    cdef _Led led
    cdef _Led found = None
    cdef unsigned long long history = self._history
    _lock(pset.ring.mutex)
    try:
        if self._grouped_history == history:
            return 0
        for led in pset.kept or ():
            if led.after != history and _holds_whole(led, self._tail_history,
                                                     self._tail_bytes):
                found = led
                break
    finally:
        _unlock(pset.ring.mutex)
    if found is None:
        return 0
    window = _window_to_follow(self, found)
    if window is False:
        return 0
    _lock(self._mutex)
    try:
        if (self._history == history and not self._fragmenting and not self._in_message
                and self._h.ring != NULL
                and _holds_whole(found, self._tail_history, self._tail_bytes)):
            _take_state(self, window, found.after, found.since, found.context)
            self._tail_history, self._tail_bytes = found.tail_history, found.tail_bytes
            _lock(pset.ring.mutex)
            self._grouped_history = found.after
            pset.ring.rejoined += 1
            _unlock(pset.ring.mutex)
    finally:
        _unlock(self._mutex)
    return 0


cdef void _count_alone(Compressor self) noexcept:
    """A straggler compresses a group's message alone (the object's lock held): count it
    by why it is out of the group, decided at its first such message."""
    cdef _ParameterSet pset = self._set
    _lock(pset.ring.mutex)
    if self._straggler_cause == 0:
        self._straggler_cause = (ALONE_JOINED if self._history == 0 or self._since_empty == 0
                           else ALONE_START_OVER if (self._history == pset.left_behind
                                                   or self._history == pset.start_over_history)
                           else ALONE_DIVERGED)
    pset.alone[self._straggler_cause] += 1
    pset.alone_now += 1
    _unlock(pset.ring.mutex)


cdef object _led_window(_ParameterSet pset, _Led led):
    """``led``'s window, read under its ring's lock (a reference of the caller's own)."""
    _lock(pset.ring.mutex)
    window = led.window
    _unlock(pset.ring.mutex)
    return window


cdef object _store_led_window(_ParameterSet pset, _Led led, object window):
    """Store ``window`` in ``led`` unless a follower stored one first; returns the one
    stored. Written once: a follower that read it keeps reading the same object."""
    _lock(pset.ring.mutex)
    if led.window is None:
        led.window = window
    stored = led.window
    _unlock(pset.ring.mutex)
    return stored


cdef bint _keep_next(_ParameterSet pset) noexcept:
    """Whether to keep the next whole message for sharing (see QUIET_AFTER)."""
    cdef bint keep = True
    _lock(pset.ring.mutex)
    if pset.ring.unfollowed >= QUIET_AFTER:
        pset.skipped += 1
        keep = pset.skipped >= QUIET_SAMPLE
        if keep:
            pset.skipped = 0
    _unlock(pset.ring.mutex)
    return keep


cdef int _remember(_ParameterSet pset, list kept, bint first) except -1:
    """Keep ``kept``'s one entry (newest first), and only entries whose message someone
    else still holds (nobody can send a message again that only this cache holds).
    (Appending to a list allocates no object: no collection runs under the lock.)
    ``first``: nobody compressed its message before (a new message for the parameter
    set, not a straggler's copy); if it started over, what that cost is measured."""
    cdef _Led old
    cdef object superseded = None
    cdef _Led led = kept[0]
    cdef double size = <double>PyBytes_GET_SIZE(led.payload)
    cdef Py_ssize_t room, firsts
    led.first = first
    _lock(pset.ring.mutex)
    try:
        # Groups' entries (first) before stragglers' copies: a straggler's copy never
        # pushes out a group's entry, of its message or another's (several rooms
        # broadcasting at once; their groups have the most members to serve).
        room = firsts = KEPT_MAX - 1
        for old in pset.kept or ():
            if old.first and Py_REFCNT(old.data) > 2:
                room -= 1
        for old in pset.kept or ():
            # 2: the entry's reference and the one Cython takes to read it
            if Py_REFCNT(old.data) <= 2:
                continue
            if old.first and (firsts > 0 or old.data is led.data):
                kept.append(old)
                firsts -= 1
            elif not old.first and room > 0:
                kept.append(old)
                room -= 1
        kept, pset.kept = pset.kept, kept  # the evicted go after the lock is released
        pset.ring.unfollowed += 1
        if first and led.started_over:  # what starting over cost: this payload and the next few
            # who it left behind, and the state it offers them (_catch_up); both here,
            # once the message is committed and kept, never one without the other
            pset.left_behind, pset.start_over_history = led.left_behind, led.after
            superseded = pset.start_over_led  # (released after the lock, as the evicted)
            pset.start_over_led = led
            size /= max(1, PyBytes_GET_SIZE(led.data))  # as a fraction of the message
            pset.since_start_over = 0
            pset.start_over_extra = (2 * max(0.0, size - pset.average_payload)
                                if pset.average_payload else 0.0)
    finally:
        _unlock(pset.ring.mutex)
    return 0


cdef bint _start_over_due_now(_ParameterSet pset) noexcept:
    """Whether a group of this parameter set should start over at its next message (ring
    lock held): once its messages since it last did have cost its members enough bytes
    that what starting over costs them (measured the last time, or half a message at
    first) is a small share of them: START_OVER_BUDGET in proportion to the CPU stragglers
    cost now, their own compressions' share of the latest deliveries (alone_share: an
    eighth of them, the budget; a quarter or more, twice it; none once they rejoined by
    their window). Until then stragglers compress alone (and rejoin by
    their window). Costs are fractions of a message's size
    (payload / message), so a few large messages among small ones weigh as much as the
    others. A budget of 0 never starts over."""
    cdef Py_ssize_t since = pset.since_start_over
    cdef double average = pset.average_payload, extra = pset.start_over_extra
    cdef double budget
    if START_OVER_BUDGET <= 0:
        return False
    if average == 0:
        return since >= START_OVER_EVERY
    budget = START_OVER_BUDGET * min(2.0, 8 * pset.alone_share)
    return since * average * budget >= (extra if extra > 0 else average / 2)


def _forget_kept():
    """Forget every message kept for sharing, end the spare streams nobody holds and
    free the spare output buffers: every parameter set starts from nothing (private:
    the tests' isolation, in every build; a test starts from what it makes)."""
    cdef FreeStream *free
    cdef Ring *ring
    cdef list dropped = []  # what the rings kept, freed after their locks
    for pset in list(_sets.values()):
        ring = &(<_ParameterSet>pset).ring
        _lock(ring.mutex)
        try:
            _release_orphans(ring)
            dropped.append((<_ParameterSet>pset).kept)
            dropped.append((<_ParameterSet>pset).start_over_led)
            (<_ParameterSet>pset).kept = None
            (<_ParameterSet>pset).stragglers = False
            (<_ParameterSet>pset).left_behind = 0
            (<_ParameterSet>pset).start_over_history = 0
            (<_ParameterSet>pset).start_over_led = None
            (<_ParameterSet>pset).alone_now = 0
            (<_ParameterSet>pset).ring.shared_now = 0
            (<_ParameterSet>pset).alone_share = 0
            (<_ParameterSet>pset).ring.unfollowed = 0
            (<_ParameterSet>pset).since_start_over = 0
            (<_ParameterSet>pset).average_payload = 0
            (<_ParameterSet>pset).start_over_extra = 0
            (<_ParameterSet>pset).skipped = 0
            while ring.free != NULL:
                free = ring.free
                ring.free = free.next
                _end_zstream(free.strm, free.inflating)
                PyMem_RawFree(free.strm)
                _free_buffer(&free.out)
                PyMem_RawFree(free)
                ring.live -= 1
            _empty_shelf(&ring.spare, _raw_free)
            _empty_shelf(&ring.scratch, _raw_free)
            _empty_shelf(&ring.works, _free_whole_work)
        finally:
            _unlock(ring.mutex)


# --- a compressor's side of compress once -----------------------------------------------

cdef object _window_to_follow(Compressor self, _Led led):
    """The window this compressor takes to follow ``led`` (its leader's after it, fetched
    once; None without context takeover), or False if it cannot follow it."""
    cdef Compressor leader
    cdef object window = None
    if not led.nct:
        window = _led_window(self._set, led)
        if window is None:
            leader = led.leader()
            _at("follow")
            window = (None if leader is None or leader is self
                      else _give_window(leader, led))
            if window is None:
                return False
    _at("adopt")
    return window


cdef object _compress_to_share(Compressor self, object data, const unsigned char *ptr, size_t size,
                               bint seen, bint start_over, _Led group, bint cohort=False):
    """Compress a whole message and keep it for others with the same history (from an
    empty window with ``start_over``: the second compressor of a group's message starts
    the group over; ``seen``: others compressed it before, ``group``'s entry the group's
    one, which extends this straggler's tail). Everything that can fail is made before
    the message goes into the stream."""
    cdef _Led led = _Led()
    cdef unsigned long long tail_history = self._tail_history
    cdef size_t tail_bytes = self._tail_bytes
    led.leader = PyWeakref_NewRef(self, None)
    led.data = data
    led.nct = self._no_context_takeover
    led.before = self._history
    kept = [led]
    if start_over or cohort:
        if start_over:
            led.left_behind = group.after if group is not None else 0
        _claim(self._h, False)
        _forget(self)  # the peer sees a message that refers to nothing earlier
        led.before = 0
        led.started_over = True
        led.cohort = cohort
    led.payload = self._compress_locked(ptr, size, True, True)
    _at("committed")
    if cohort:  # its window is the message alone: the group's last bytes
        _extend_tail(self, group, size, 0, 0)
        _lock(self._set.ring.mutex)
        self._set.cohorts += 1
        _unlock(self._set.ring.mutex)
    elif seen and not start_over:
        _extend_tail(self, group, size, tail_history, tail_bytes)
    elif not seen:
        self._straggler_cause = 0  # it leads: in a group (or alone, until it straggles)
    led.after = self._history
    led.since = self._since_empty
    led.context = self._context
    led.tail_history, led.tail_bytes = self._tail_history, self._tail_bytes
    _remember(self._set, kept, not seen or start_over)
    return led.payload


cdef bint _adopt(Compressor self, _Led led, object window, Traffic *traffic) except -1:
    """Take the state ``led``'s leader reached (``window`` after it) instead of
    compressing its message (the object's lock held; ``traffic`` counted then, with
    the adoption, under the ring lock _take_state takes); False if this object moved on
    meanwhile."""
    cdef bint by_tail = self._history != led.before and not led.started_over
    cdef Traffic adoption = Traffic(0, 0, False, False, 0)
    if (by_tail and not _tail_matches(self, led)) or self._fragmenting or self._in_message:
        return False
    if traffic == NULL:  # (counted later, at its call's end, or not at all)
        traffic = &adoption
    traffic.adopted = ADOPTED_BY_TAIL if by_tail else ADOPTED
    _take_state(self, window, led.after, led.since, led.context, traffic)
    traffic.adopted = 0  # counted once
    self._tail_history, self._tail_bytes = led.tail_history, led.tail_bytes
    return True


cdef void _take_state(Compressor self, object window, unsigned long long history,
                      unsigned long long since_empty, size_t context,
                      Traffic *traffic=NULL) noexcept:
    """Follow a leader (the object's lock held): give this object's stream back to
    the ring and take the leader's window (None without context takeover: nothing
    to keep), history and messages since its window was empty; ``traffic``: the
    message taken, counted under the ring lock taken here."""
    _claim(self._h, False, traffic)
    if self._h.strm != NULL:
        _give_back_stream(self._h)
    PyMem_RawFree(self._h.window)
    self._h.window = NULL
    self._h.window_size = 0
    self._unflushed = 0
    self._shared = window
    self._history = history
    self._since_empty = since_empty
    self._context = context
    self._tail_bytes = 0
    self._straggler_cause = 0


cdef object _give_window(Compressor self, _Led led):
    """This leader's window after ``led``'s message, stored in ``led`` by the first
    follower to ask (never replaced: every follower reads the same object); None if
    the leader has moved on or this zlib cannot give it. The caller holds no codec
    lock (lock order is one object's)."""
    cdef object window = None
    _lock(self._mutex)
    try:
        if self._history != led.after:
            return None
        window = _led_window(self._set, led)
        if window is not None:  # another follower asked first
            return window
        _claim(self._h, False)
        try:
            _at("give_window")
            window = _current_window(self)
        finally:
            _settle(self._h, self._in_message, self._clean())
        if window is None:
            return None
        return _store_led_window(self._set, led, window)
    finally:
        _unlock(self._mutex)


cdef object _current_window(Compressor self):
    """The compressor's window as bytes (claimed: its stream's, its parked one, the one it
    shares, or b"" before any message), or None if this zlib cannot give it."""
    if self._h.strm != NULL:
        return _window_bytes(self)
    if self._h.window != NULL:
        return PyBytes_FromStringAndSize(<char *>self._h.window, self._h.window_size)
    if self._shared is not None:
        return self._shared
    return b""  # nothing yet: an empty history


cdef object _window_bytes(Compressor self):
    """The stream's window as bytes (the object holds its stream), or None if this
    zlib can't give it (then nobody can share it)."""
    cdef uInt size = 0
    if not _can_park or fd_deflate_window(self._h.strm, NULL, &size) != Z_OK:
        return None
    window = PyBytes_FromStringAndSize(NULL, size)
    fd_deflate_window(self._h.strm, <Bytef *>PyBytes_AS_STRING(window), &size)
    return window


# --- broadcast()'s calls on a compressor (fastdeflate/_broadcast.py) ---------------------

cdef object _lead_of(Compressor self, data, unsigned long long expected):
    """Compressor._lead()'s work (see there)."""
    cdef Py_buffer view
    cdef const unsigned char *ptr
    cdef size_t size
    cdef Traffic traffic = Traffic(0, 0, False, False, 0)
    cdef bint release = _open_input(data, &view, &ptr, &size)
    try:
        _lock(self._mutex)
        try:
            if self._h.ring == NULL or self._history != expected or self._fragmenting:
                return None
            self._refuse_if_broken()
            try:
                payload = self._compress_locked(ptr, size, True, True)
                _at("committed")
                window = None if self._no_context_takeover else _window_bytes(self)
                result = payload, window, self._history, self._since_empty
                traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(payload), True, False, 0)
                return result
            except BaseException:
                _abandon(self, False)
                raise
        finally:
            _settle(self._h, self._in_message, self._clean(), &traffic)
            _unlock(self._mutex)
    finally:
        if release:
            PyBuffer_Release(&view)


cdef object _follow_of(Compressor self, unsigned long long expected, window,
                       unsigned long long history, unsigned long long since_empty,
                       size_t size=0, bytes payload=b""):
    """Compressor._follow()'s work (see there)."""
    cdef Traffic traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(payload), True, True, 0)
    _lock(self._mutex)
    try:
        if self._h.ring == NULL or self._history != expected or self._fragmenting:
            return False
        if not self._no_context_takeover and window is None:
            return False
        # (how much of its window the group's messages fill is not known here: a
        # whole window, as far as _join_younger_group is concerned)
        _take_state(self, window, history, since_empty, _window_size(self), &traffic)
        return True
    finally:
        _unlock(self._mutex)


cdef object _abandon_last_of(Compressor self, bint refuse):
    """Compressor._abandon_last()'s work (see there)."""
    _lock(self._mutex)
    try:
        if self._h.ring != NULL:
            _abandon(self, refuse)
            _settle(self._h, False, self._clean())
    finally:
        _unlock(self._mutex)
