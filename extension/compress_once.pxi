# Compress once's mechanics: the ring locks around the policy's decisions, and how a
# compressor takes a leader's state (its window, fetched once; its stream goes back to
# the pool). The policy (which group a message joins, who leads, who follows, when a
# group starts over, what is kept) is fastdeflate/_compress_once_policy.py, which both
# implementations run; its header explains it.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

if not 1 <= KEPT_MAX < HELD_MAX:
    raise ImportError(f"fastdeflate: KEPT_MAX {KEPT_MAX} needs 1..{HELD_MAX - 1}")


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
    cdef unsigned long long led = 0, rejoined = 0, starts = 0, cohorts = 0
    cdef unsigned long long alone[4]
    cdef int i
    memset(alone, 0, sizeof(alone))
    for pset in list(_sets.values()):
        b = pset
        _lock(b.ring.mutex)  # (C values only: nothing is allocated under the ring lock)
        led += b.led
        for i in range(4):
            alone[i] += b.alone[i]
        rejoined += b.rejoined
        starts += b.start_overs
        cohorts += b.cohorts
        _unlock(b.ring.mutex)
    return (led, (alone[ALONE_JOINED], alone[ALONE_DIVERGED], alone[ALONE_START_OVER]),
            rejoined, starts, cohorts)


cdef bint _sharing = True


cdef inline bint _held_elsewhere(_Led led) noexcept:
    """Someone besides ``led`` holds its message (ring lock held; for the policy's
    _remember): 2 is the entry's reference and the one Cython takes to read it."""
    return Py_REFCNT(led.data) > 2


cdef _Led _find(Compressor self, object data, _Plan *plan):
    """The policy's _find_led under the ring lock (the leaders it held dropped after)."""
    cdef _ParameterSet pset = self._set
    _lock(pset.ring.mutex)
    try:
        return _find_led(pset, data, self._history, self, plan)
    finally:
        _unlock(pset.ring.mutex)
        _release_held(plan)


cdef int _rejoin(Compressor self, bint left_behind) except -1:
    """Before its next message, a compressor out of its group takes a group's state
    instead: the start-over that left it behind (``left_behind``: _start_over_for), or
    a younger group its tail holds all of (_younger_group); unless it moved on meanwhile."""
    cdef _ParameterSet pset = self._set
    cdef unsigned long long history = self._history
    cdef _Led led
    _lock(pset.ring.mutex)
    found = _start_over_for(pset, history) if left_behind else _younger_group(pset, self)
    _unlock(pset.ring.mutex)
    if found is None:
        return 0
    led = found
    window = _window_to_follow(self, led)
    if window is False:
        return 0
    _lock(self._mutex)
    try:
        if (self._history == history and not self._fragmenting and not self._in_message
                and self._h.ring != NULL and (left_behind or _holds_whole(
                    led, self._tail_history, self._tail_bytes))):
            _take_state(self, window, led.after, led.since, led.context)
            if not left_behind:  # its tail is the group's
                self._tail_history, self._tail_bytes = led.tail_history, led.tail_bytes
            _lock(pset.ring.mutex)
            self._grouped_history = led.after
            pset.rejoined += 1
            _unlock(pset.ring.mutex)
    finally:
        _unlock(self._mutex)
    return 0


cdef int _straggle(Compressor self) except -1:
    """The policy's _count_alone under the ring lock."""
    _lock(self._set.ring.mutex)
    try:
        _count_alone(self._set, self)
    finally:
        _unlock(self._set.ring.mutex)
    return 0


cdef bint _keep(_ParameterSet pset) except -1:
    """The policy's _keep_next under the ring lock."""
    _lock(pset.ring.mutex)
    try:
        return _keep_next(pset)
    finally:
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
            (<_ParameterSet>pset).clear(dropped)
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
    empty window with ``start_over`` or ``cohort``: _new_entry; ``seen``: others
    compressed it before, ``group``'s entry the group's one, which extends this
    straggler's tail). Everything that can fail is made before the message goes into
    the stream."""
    cdef _Led led = _new_entry(self, data, start_over, cohort, group, None)
    cdef unsigned long long tail_history = self._tail_history
    cdef size_t tail_bytes = self._tail_bytes
    cdef _ParameterSet pset = self._set
    kept, dropped = [led], []  # (made before the lock: _remember)
    if led.started_over:
        _claim(self._h, False)
        _forget(self)  # the peer sees a message that refers to nothing earlier
    led.payload = self._compress_locked(ptr, size, True, True)
    _at("committed")
    first = _entry_made(self, led, group, seen, size, tail_history, tail_bytes)
    _lock(pset.ring.mutex)
    try:
        pset.cohorts += cohort
        _remember(pset, kept, first, dropped)
    finally:
        _unlock(pset.ring.mutex)
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
