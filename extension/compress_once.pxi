# Compress once's mechanics in the extension: the host functions the policy
# (fastdeflate/_compress_once_policy.py) names in its header, for this module's classes
# (a set's lock is its ring's; a follower takes its leader's window, fetched once, and
# gives its stream back to the pool), the counters and settings.
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
    cdef unsigned long long counts[7]
    memset(counts, 0, sizeof(counts))
    for pset in list(_sets.values()):
        _add_counts(pset, counts)  # (C values only: nothing is allocated under the lock)
    return counts[0], (counts[1], counts[2], counts[3]), counts[4], counts[5], counts[6]


cdef bint _sharing = True


# --- the host functions ----------------------------------------------------------------

cdef inline bint _held_elsewhere(_Led led) noexcept:
    """Someone besides ``led`` holds its message (ring lock held; for the policy's
    _remember): 2 is the entry's reference and the one Cython takes to read it."""
    return Py_REFCNT(led.data) > 2


cdef inline _OnceState _set_of(_Member member):
    return (<Compressor>member)._set


cdef inline void _lock_set(_OnceState pset) noexcept:
    _lock((<_ParameterSet>pset).ring.mutex)


cdef inline void _unlock_set(_OnceState pset) noexcept:
    _unlock((<_ParameterSet>pset).ring.mutex)


cdef inline void _lock_member(_Member member) noexcept:
    _lock((<Compressor>member)._mutex)


cdef inline void _unlock_member(_Member member) noexcept:
    _unlock((<Compressor>member)._mutex)


cdef inline bint _busy(_Member member) noexcept:
    """In the middle of a message (or not initialised): it takes no state now."""
    cdef Compressor self = <Compressor>member
    return self._fragmenting or self._in_message or self._h.ring == NULL


cdef void _take_stream(_Member member, object window, int adoption,
                       Traffic *traffic) noexcept:
    """Give the compressor's stream back to its ring and take ``window`` (a leader's,
    shared; None: nothing to keep), the object's lock held; ``traffic``: the call's,
    counted under the ring lock taken here, with the ``adoption`` (ADOPTED_*)."""
    cdef Compressor self = <Compressor>member
    cdef Traffic adopted = Traffic(0, 0, False, False, 0)
    if adoption and traffic == NULL:  # (the call counts its traffic later, or not at all)
        traffic = &adopted
    if traffic != NULL:
        traffic.adopted = adoption
    _claim(self._h, False, traffic)
    if traffic != NULL:
        traffic.adopted = 0  # counted once
    if self._h.strm != NULL:
        _give_back_stream(self._h)
    PyMem_RawFree(self._h.window)
    self._h.window = NULL
    self._h.window_size = 0
    self._unflushed = 0
    self._shared = window


cdef object _current_state(_Member member):
    """A leader's window now, for its followers (the object's lock held), or None if
    this zlib cannot give it."""
    cdef Compressor self = <Compressor>member
    _claim(self._h, False)
    try:
        _at("give_window")
        return _current_window(self)
    finally:
        _settle(self._h, self._in_message, self._clean())


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

cdef inline object _compress_whole(_Member member, bytes data):
    """A whole message's payload (the object's lock held; ``data``'s own bytes read)."""
    return (<Compressor>member)._compress_locked(
        <const unsigned char *>PyBytes_AS_STRING(data), <size_t>PyBytes_GET_SIZE(data),
        True, True)


cdef inline void _start_empty(_Member member) noexcept:
    """Forget the window (claimed: the object's lock held): the next message refers to
    nothing earlier."""
    _claim((<Compressor>member)._h, False)
    _forget(<Compressor>member)


cdef void _take_state(Compressor self, object window, unsigned long long history,
                      unsigned long long since_empty, size_t context,
                      Traffic *traffic=NULL) noexcept:
    """Follow a leader without an entry (broadcast(), an undone message: the object's
    lock held): take ``window`` (_take_stream), ``history``, messages since the window
    was empty and ``context``; no tail."""
    _take_stream(self, window, 0, traffic)
    self._history = history
    self._since_empty = since_empty
    self._context = context
    self._tail_bytes = 0
    self._straggler_cause = 0


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
