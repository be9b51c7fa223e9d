# The Compressor class: messages (or fragments) into permessage-deflate payloads, and
# compress()'s work (_compress_message: compress once first, then the stream).
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef class Compressor(_Member):
    """Compresses messages (or fragments of one) into permessage-deflate payloads.

    Compressor(level=6, window_bits=15, mem_level=8, strategy=0,
               no_context_takeover=False)
    """

    # Its stream (while it has one), parked window and output buffer: memory of its own,
    # which its ring's idle list points into while it is linked (_release_holder)
    cdef Holder *_h
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef fd_lock_t _mutex  # in _lock_cell (a PyThread lock's: allocated)
    cdef fd_lock_cell _lock_cell
    cdef size_t _unflushed  # input since the last sync flush
    cdef bint _in_message  # input of an unfinished message is not flushed yet
    cdef bint _fragmenting  # the last call was a fragment (fin=False) of a message
    cdef bint _broken  # a call failed in the middle of a fragmented message: refuse
    cdef int _skipping  # why the fragmented message under way goes as it is (CHOICE_*),
                        # or CHOICE_COMPRESS (what_pays.pxi; the object's lock)
    # (its history, tail and group for compress once and broadcast(): _Member's fields)
    cdef object _shared  # bytes: the window shared with a broadcast group (no stream)
    cdef _ParameterSet _set   # its parameter set (its ring, its kept messages)
    cdef object __weakref__
    cdef int _level, _mem_level, _strategy  # (_window_bits, _no_context_takeover: _Member's)

    def __cinit__(self, *args, **kwargs):
        self._h = _new_holder()
        self._mutex = fd_lock_in(&self._lock_cell)
        if self._mutex == NULL:
            raise MemoryError("cannot allocate a lock")

    def __init__(self, level=6, window_bits=15, mem_level=8, strategy=0,
                 no_context_takeover=False):
        args = compressor_args(level, window_bits, mem_level, strategy, no_context_takeover)
        _lock(self._mutex)
        try:
            _refuse_second_init(self._initialised, self)
            (self._level, self._window_bits, self._mem_level, self._strategy,
             self._no_context_takeover) = args
            self._set = _set_for(("deflate",) + args[:4])
            self._h.ring = &self._set.ring
            self._initialised = True
        finally:
            _unlock(self._mutex)

    def __dealloc__(self):
        if self._h != NULL:
            _release_holder(self._h)  # (never waits for a ring lock: see there)
            self._h = NULL
        if self._mutex != NULL:
            fd_lock_out(self._mutex)

    @property
    def level(self):
        """Compression level."""
        return self._level

    @property
    def window_bits(self):
        """LZ77 window (9..15)."""
        return self._window_bits

    @property
    def mem_level(self):
        """zlib memLevel (1..9)."""
        return self._mem_level

    @property
    def strategy(self):
        """zlib strategy."""
        return self._strategy

    @property
    def no_context_takeover(self):
        """True if every message starts with an empty window."""
        return self._no_context_takeover

    def compress(self, data, bint fin=True, *, bint flush=True):
        """Compress ``data``: a whole message, or one fragment when ``fin`` is False.

        A whole message (``fin=True``) ends with a sync flush whose trailing
        ``00 00 ff ff`` is removed. A fragment with ``flush=True`` (default) is
        sync-flushed so the peer can decode it at once; with ``flush=False`` zlib may
        keep its output for a later call. The outputs of all calls of one message,
        concatenated, form that message's payload.

        If a call raises (MemoryError, say), its data never reaches the peer: the next
        message starts from an empty window. After a failure in the middle of a
        fragmented message the compressor refuses data (DeflateError) until reset().
        """
        return _compress_message(self, data, fin, flush)

    def compress_or_skip(self, data, bint fin=True, *, bint flush=True):
        """Compress ``data`` as compress() does, or return None: send it uncompressed
        (RSV1 clear), the compressor untouched. Decided at the start of a message
        (fastdeflate/_what_pays.py says when), and the whole message follows: pass every
        fragment of a fragmented one here, and each returns what the first did (None:
        sent as it is; else its payload, as compress())."""
        return _compress_or_skip(self, data, fin, flush)

    cdef int _refuse_if_broken(self) except -1:
        if self._broken:
            raise DeflateError("compressor unusable after an error in the middle of a "
                               "fragmented message; call reset()")
        return 0

    cdef object _compress_locked(self, const unsigned char *ptr, size_t size, bint fin,
                                 bint sync):
        """compress()'s work, with the object's lock held (the caller settles, and
        abandons the stream if this raises)."""
        cdef int rc
        cdef Py_ssize_t length
        _start_deflate(self)
        if size >= _compress_nogil_min:
            with nogil:
                rc = _deflate(self, ptr, size, sync)
        else:
            rc = _deflate(self, ptr, size, sync)
        length = <Py_ssize_t>self._h.out.size
        try:
            if rc == DONE:
                if fin and length >= 4 and memcmp(
                        self._h.out.data + length - 4, SYNC_TAIL, 4) == 0:
                    length -= 4
                result = _bytes_from(self._h.out.data, <size_t>length)
        finally:
            _trim(&self._h.out)
        if rc == NO_MEMORY or rc == Z_MEM_ERROR:
            raise MemoryError("out of memory while compressing")
        if rc != DONE:
            raise ValueError(_zlib_message(rc, self._h.strm, "compressing data"))
        # only input not yet flushed ties it to its stream: after a sync flush
        # the stream is at a block boundary, and a restored window goes on
        self._in_message = self._unflushed != 0
        if fin and self._no_context_takeover:
            _forget(self)
        else:
            self._context = min(self._context + size, _window_size(self))
            self._history = _new_token(self._h.ring)
            self._tail_bytes = 0  # (a straggler's caller extends it: _extend_tail)
            self._since_empty += fin
            self._fragmenting = not fin
        return result

    def _lead(self, data, unsigned long long expected):
        """broadcast(): compress a whole message for a group whose history is
        ``expected``; returns (payload, window, history, since_empty), or None if this
        object's history is no longer ``expected`` (another thread used it). If it
        raises, the message never reaches the peer (as compress())."""
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

    def _follow(self, unsigned long long expected, window, unsigned long long history,
                unsigned long long since_empty, size_t size=0, bytes payload=b""):
        """broadcast(): take the state a group's leader reached (``window``, ``history``)
        instead of compressing the same message (``size`` bytes, ``payload`` the
        leader's, for the traffic counters); False if this object's history is no
        longer ``expected``. Its stream goes back to the ring; it keeps a reference to
        the shared window until it needs a stream of its own."""
        cdef Traffic traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(payload), True, True, 0)
        _lock(self._mutex)
        try:
            if self._h.ring == NULL or self._history != expected or self._fragmenting:
                return False
            if not self._no_context_takeover and window is None:
                return False
            # (how much of its window the group's messages fill is not known here: a
            # whole window, as far as _younger_group is concerned)
            _take_state(self, window, history, since_empty, _window_size(self), &traffic)
            return True
        finally:
            _unlock(self._mutex)

    def _abandon_last(self, bint refuse):
        """broadcast(), when it raises: the payload this object last returned never
        reaches its peer. Its next message starts from an empty window; with ``refuse``
        (it was in the middle of a fragmented message) it refuses data until reset()."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                _abandon(self, refuse)
                _settle(self._h, False, self._clean())
        finally:
            _unlock(self._mutex)

    def _group(self):
        """broadcast(): (parameter set id, history, messages since the window was empty,
        in the middle of a message, holds a live stream) of this object."""
        return ((<size_t>self._h.ring, self._no_context_takeover), self._history,
                self._since_empty, self._fragmenting or self._in_message,
                self._h.strm != NULL)

    def reset(self):
        """Forget the window and any unfinished message (and any earlier error): the
        next message starts empty."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                _claim(self._h, False)
                _forget(self)
                self._in_message = False
                self._broken = False
                _settle(self._h, False, True)
        finally:
            _unlock(self._mutex)

    cdef inline bint _clean(self) noexcept:
        """Between messages with an empty window (after a message without context
        takeover, or a reset): the stream is freshly reset and holds nothing to keep."""
        return (self._history == 0 and not self._in_message and not self._fragmenting
                and self._h.window == NULL and self._shared is None)


cdef object _compress_message(Compressor self, object data, bint fin, bint flush,
                              bint undo_if_larger=False):
    """Compressor.compress()'s work (also compress_or_skip()'s, without a Python call).
    ``undo_if_larger``: if the payload (compressed here, or taken from the group's
    leader) is no smaller than ``data``, put the compressor back as it was (its window,
    history and messages since it was empty) and return the payload's length (an int):
    the message goes out as it is, for every member of a group alike."""
    cdef Py_buffer view
    cdef const unsigned char *ptr
    cdef size_t size
    cdef bint release
    cdef bint mid_message
    # (a fragmented message's last part is that message's alone: its stream holds the
    # parts before it, which neither a group's payload nor an empty window has)
    cdef bint shareable = (fin and _sharing and _shareable(data) and self._set is not None
                           and not self._fragmenting and not self._in_message)
    cdef _Led led = None
    cdef _Led group = None
    cdef object window = None
    cdef Traffic traffic = Traffic(0, 0, False, False, 0)
    cdef Traffic followed
    cdef _Plan plan
    cdef object before = None  # what undo_if_larger puts back
    plan.follow = plan.seen = plan.start_over = plan.cohort = False
    plan.count = 0
    led = _before_message(self, data, fin, shareable, &plan)  # (the policy's)
    if not plan.follow:
        group, led = led, None
    window = _state_to_follow(self, led) if led is not None else None
    if window is False:
        led = None
    release = _open_input(data, &view, &ptr, &size)
    try:
        _lock(self._mutex)
        try:
            self._refuse_if_broken()
            mid_message = self._fragmenting
            if shareable and (mid_message or self._in_message):
                # another thread began a fragmented message meanwhile (as above)
                shareable = plan.seen = plan.start_over = plan.cohort = False
                led = group = None
            try:
                if undo_if_larger:
                    before = _snapshot(self)
                result = None
                if led is not None:
                    followed = Traffic(size, <size_t>PyBytes_GET_SIZE(led.payload),
                                       True, True, 0)
                    if _adopt(self, led, window, NULL if before is not None else &followed):
                        if before is None:
                            return led.payload
                        result = led.payload
                        traffic = followed
                if result is None:
                    result = _compress_alone(self, data, &plan, group, shareable)
                    if result is None:  # a message like any other
                        result = self._compress_locked(ptr, size, fin, fin or flush)
                    traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(result), fin, False, 0)
                if before is not None and <size_t>PyBytes_GET_SIZE(result) >= size:
                    _restore(self, before)
                    traffic = Traffic(0, 0, False, False, 0)
                    return PyBytes_GET_SIZE(result)
                return result
            except BaseException:
                _abandon(self, mid_message)
                raise
        finally:
            _settle(self._h, self._in_message, self._clean(), &traffic)
            _unlock(self._mutex)
    finally:
        if release:
            PyBuffer_Release(&view)
