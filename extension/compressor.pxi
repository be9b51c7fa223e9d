# The Compressor class: messages (or fragments) into permessage-deflate payloads.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef class Compressor:
    """Compresses messages (or fragments of one) into permessage-deflate payloads.

    Compressor(level=6, window_bits=15, mem_level=8, strategy=0,
               no_context_takeover=False)
    """

    cdef Holder _h  # its stream (while it has one), parked window and output buffer
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef PyThread_type_lock _mutex
    cdef size_t _unflushed  # input since the last sync flush
    cdef bint _in_message  # input of an unfinished message is not flushed yet
    cdef bint _fragmenting  # the last call was a fragment (fin=False) of a message
    cdef bint _broken  # a call failed in the middle of a fragmented message: refuse
    # What the peer's window holds, for broadcast(): 0 is empty (new, reset, or no context
    # takeover); compressors of one ring with the same id have sent the same bytes since.
    cdef unsigned long long _history
    cdef unsigned long long _since_sync  # messages since the window was last empty
    cdef object _shared  # bytes: the window shared with a broadcast group (no stream)
    cdef _RingBox _box   # its ring's owner
    cdef object __weakref__
    cdef int _level, _window_bits, _mem_level, _strategy
    cdef bint _no_context_takeover

    def __cinit__(self, *args, **kwargs):
        self._mutex = PyThread_allocate_lock()
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
            self._box = _box_for(("deflate",) + args[:4])
            self._h.ring = &self._box.ring
            self._initialised = True
        finally:
            PyThread_release_lock(self._mutex)

    def __dealloc__(self):
        _release_holder(&self._h)
        if self._mutex != NULL:
            PyThread_free_lock(self._mutex)

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

    cdef int _start(self) except -1:
        """Claim a stream (its own, another idle object's or a new one), put this
        object's parked window, if any, back into it and lend it its scratch."""
        cdef int rc
        cdef int outcome
        if self._h.ring == NULL:
            raise ValueError("Compressor.__init__ was not called")
        outcome = _claim(&self._h, True)
        if outcome == NEED_NEW:
            self._h.strm = _new_stream()
            if self._h.strm == NULL:
                _uncount(self._h.ring)
                raise MemoryError("cannot allocate the deflate state")
            rc = fd_deflate_init(self._h.strm, self._level, -self._window_bits,
                                 self._mem_level, self._strategy)
            if rc != Z_OK:
                message = _zlib_message(rc, self._h.strm, "initializing compressor")
                PyMem_RawFree(self._h.strm)
                self._h.strm = NULL
                _uncount(self._h.ring)
                if rc == Z_MEM_ERROR:
                    raise MemoryError("cannot allocate the deflate state")
                raise ValueError(message)
        rc = Z_OK
        if outcome == STOLEN and self._h.window != NULL:
            rc = fd_deflate_restore(self._h.strm, self._level, self._mem_level,
                                    self._h.window, self._h.window_size,
                                    1U << self._window_bits)
        elif outcome == STOLEN:
            rc = fd_deflate_reset(self._h.strm, self._level, self._mem_level)
        elif self._h.window != NULL:
            rc = fd_deflate_set_dictionary(self._h.strm, self._h.window,
                                           self._h.window_size)
        elif outcome == HAS_STREAM and self._h.cold:
            fd_warm_deflate(self._h.strm)
        if rc == Z_OK and self._h.window != NULL:
            PyMem_RawFree(self._h.window)
            self._h.window = NULL
            self._h.window_size = 0
        elif rc == Z_OK and self._shared is not None:
            rc = fd_deflate_set_dictionary(
                self._h.strm, <const Bytef *>PyBytes_AS_STRING(self._shared),
                <uInt>PyBytes_GET_SIZE(self._shared))
            if rc == Z_OK:
                self._shared = None
        if rc != Z_OK:  # the window stays parked (the caller abandons the stream)
            raise ValueError(_zlib_message(rc, self._h.strm, "restoring the window"))
        return _lend_scratch(&self._h)

    cdef int _drain(self, int flush, OutputBlocks *blocks, size_t bound) noexcept nogil:
        """Call deflate() until it leaves output space unused, growing the buffer.

        Each call gets the room left in the current block of CPython's output
        buffer schedule (``blocks``): zlib's output depends on where its output
        space runs out (a sync flush that fills it is repeated; level 0 sizes its
        stored blocks by it), so this is what keeps the bytes identical to the
        stdlib's. Where all the output zlib can still produce (``bound``) fits in
        less than that block, only ``bound`` is reserved: zlib cannot run out of
        space, so the bytes are the same, and a small message keeps a small buffer.
        The buffer grows one block at a time, so its size follows the output, not
        the input (a large, very compressible message costs one block).
        """
        cdef size_t room, wanted
        cdef int rc
        while True:
            if blocks.left == 0:
                blocks.left = CPYTHON_BLOCK_SIZES[blocks.index]
                if blocks.index < CPYTHON_BLOCK_COUNT - 1:
                    blocks.index += 1
            wanted = blocks.left if blocks.left < bound else bound
            if self._h.out.capacity - self._h.out.size < wanted:
                # exactly that: blocks already grow geometrically
                rc = _reserve(&self._h.out, wanted, self._h.out.size + wanted)
                if rc != DONE:
                    return rc
            room = self._h.out.capacity - self._h.out.size
            if room > blocks.left:
                room = blocks.left
            self._h.strm.next_out = self._h.out.data + self._h.out.size
            self._h.strm.avail_out = <uInt>room
            rc = fd_deflate(self._h.strm, flush)
            room -= self._h.strm.avail_out
            self._h.out.size += room
            blocks.left -= room
            if rc != Z_OK and rc != Z_BUF_ERROR:
                return rc
            if self._h.strm.avail_out != 0:
                return DONE

    cdef int _deflate(self, const unsigned char *data, size_t size,
                      bint sync) noexcept nogil:
        """Compress ``data`` (then sync-flush, if asked) into the output buffer.

        Mirrors the stdlib's compress() + flush(Z_SYNC_FLUSH) call for call, so the
        bytes are the same: Z_NO_FLUSH over all input (at least one call, even for
        no input), then Z_SYNC_FLUSH, each with CPython's output block schedule.
        zlib only ever runs out of space where CPython's blocks end (see _drain).
        """
        cdef size_t part, bound = SIZE_MAX
        cdef OutputBlocks blocks = OutputBlocks(0, 0)
        cdef int rc = DONE
        self._unflushed += size
        if self._unflushed < _max_slice:  # else the output space is CPython's blocks
            # all the output still to come, up to the end of the next sync flush
            bound = fd_deflate_bound(self._h.strm, self._unflushed) + 64
        while rc == DONE:
            part = size if size < _max_slice else _max_slice
            self._h.strm.next_in = data
            self._h.strm.avail_in = <uInt>part
            data += part
            size -= part
            rc = self._drain(Z_NO_FLUSH, &blocks, bound)
            if size == 0:
                break
        if rc == DONE and sync:
            blocks = OutputBlocks(0, 0)
            rc = self._drain(Z_SYNC_FLUSH, &blocks, bound)
            if rc == DONE:
                self._unflushed = 0
        self._h.strm.next_in = NULL
        self._h.strm.avail_in = 0
        return rc

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
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef bint release
        cdef bint mid_message
        cdef bint shareable = (fin and _sharing and type(data) is bytes
                               and SHARE_MIN <= PyBytes_GET_SIZE(data) <= SHARE_MAX
                               and self._box is not None)
        cdef _Led led = None
        cdef object window = None
        cdef Compressor leader
        cdef Traffic traffic = Traffic(0, 0, False, False)
        cdef Traffic followed
        cdef bint seen = False
        if shareable:
            led = _find_led(self._box, data, self._no_context_takeover, self._history, self,
                            &seen)
            if led is not None and not led.nct:
                window = _led_window(self._box, led)
                if window is None:
                    leader = led.leader()
                    _at("follow")
                    window = (None if leader is None or leader is self
                              else leader._give_window(led))
                    if window is None:
                        led = None
            if led is not None:
                _at("adopt")
        release = _open_input(data, &view, &ptr, &size)
        try:
            _lock(self._mutex)
            try:
                self._refuse_if_broken()
                mid_message = self._fragmenting
                try:
                    if led is not None:
                        followed = Traffic(size, <size_t>PyBytes_GET_SIZE(led.payload),
                                           True, True)
                        if self._adopt(led, window, &followed):
                            return led.payload
                    if shareable and _keep_next(self._box):
                        result = self._compress_to_share(data, ptr, size, seen)
                    else:
                        result = self._compress_locked(ptr, size, fin, fin or flush)
                    traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(result), fin, False)
                    return result
                except BaseException:
                    self._abandon(mid_message)
                    raise
            finally:
                _settle(&self._h, self._in_message, self._clean(), &traffic)
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    cdef int _refuse_if_broken(self) except -1:
        if self._broken:
            raise DeflateError("compressor unusable after an error in the middle of a "
                               "fragmented message; call reset()")
        return 0

    cdef object _compress_to_share(self, object data, const unsigned char *ptr, size_t size,
                                   bint seen):
        """Compress a whole message and keep it for others with the same history
        (starting over first if that pays, with stragglers about: only the first
        compressor of a message may, ``seen`` False). Everything that can fail is made
        before the message goes into the stream."""
        cdef _Led led = _Led()
        led.leader = PyWeakref_NewRef(self, None)
        led.data = data
        led.nct = self._no_context_takeover
        led.before = self._history
        kept = [led]
        if seen:  # a straggler's own compression of a message others share
            self._box.alone_since += 1
        if (self._box.stragglers and not seen and not self._no_context_takeover
                and not self._fragmenting and not self._in_message
                and _reform_due(self._box)):
            _claim(&self._h, False)
            self._forget()  # the peer sees a message that refers to nothing earlier
            led.before = 0
            led.sync = True
            self._box.stragglers = False
        led.payload = self._compress_locked(ptr, size, True, True)
        _at("committed")
        led.after = self._history
        led.since = self._since_sync
        _remember(self._box, kept, not seen)
        return led.payload

    cdef bint _adopt(self, _Led led, object window, Traffic *traffic) except -1:
        """Take the state ``led``'s leader reached (``window`` after it) instead of
        compressing its message (the object's lock held; ``traffic`` counted then);
        False if this object moved on meanwhile."""
        if (self._history != led.before and not led.sync) or \
                self._fragmenting or self._in_message:
            return False
        self._take_state(window, led.after, led.since, traffic)
        self._box.unfollowed = 0  # sharing pays here: keep every message again
        self._box.shared_since += 1
        return True

    cdef void _take_state(self, object window, unsigned long long history,
                          unsigned long long since_sync, Traffic *traffic=NULL) noexcept:
        """Follow a leader (the object's lock held): give this object's stream back to
        the ring and take the leader's window (None without context takeover: nothing
        to keep), history and messages since its window was empty; ``traffic``: the
        message taken, counted under the ring lock taken here."""
        _claim(&self._h, False, traffic)
        if self._h.strm != NULL:
            _give_back_stream(&self._h)
        PyMem_RawFree(self._h.window)
        self._h.window = NULL
        self._h.window_size = 0
        self._unflushed = 0
        self._shared = window
        self._history = history
        self._since_sync = since_sync

    cdef object _give_window(self, _Led led):
        """This leader's window after ``led``'s message, stored in ``led`` by the first
        follower to ask (never replaced: every follower reads the same object); None if
        the leader has moved on or this zlib cannot give it. The caller holds no codec
        lock (lock order is one object's)."""
        cdef object window = None
        _lock(self._mutex)
        try:
            if self._history != led.after:
                return None
            window = _led_window(self._box, led)
            if window is not None:  # another follower asked first
                return window
            _claim(&self._h, False)
            try:
                _at("give_window")
                if self._h.strm != NULL:
                    window = self._window_bytes()
                elif self._h.window != NULL:
                    window = PyBytes_FromStringAndSize(<char *>self._h.window,
                                                       self._h.window_size)
                elif self._shared is not None:
                    window = self._shared
                else:
                    window = b""  # nothing yet: an empty history
            finally:
                _settle(&self._h, self._in_message, self._clean())
            if window is None:
                return None
            return _store_led_window(self._box, led, window)
        finally:
            PyThread_release_lock(self._mutex)

    cdef object _compress_locked(self, const unsigned char *ptr, size_t size, bint fin,
                                 bint sync):
        """compress()'s work, with the object's lock held (the caller settles, and
        abandons the stream if this raises)."""
        cdef int rc
        cdef Py_ssize_t length
        self._start()
        if size >= _compress_nogil_min:
            with nogil:
                rc = self._deflate(ptr, size, sync)
        else:
            rc = self._deflate(ptr, size, sync)
        length = <Py_ssize_t>self._h.out.size
        try:
            if rc == DONE:
                if fin and length >= 4 and memcmp(
                        self._h.out.data + length - 4, SYNC_TAIL, 4) == 0:
                    length -= 4
                result = PyBytes_FromStringAndSize(<char *>self._h.out.data, length)
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
            self._forget()
        else:
            self._history = _new_history(self._h.ring)
            self._since_sync += fin
            self._fragmenting = not fin
        return result

    cdef object _window_bytes(self):
        """The stream's window as bytes (the object holds its stream), or None if this
        zlib can't give it (then nobody can share it)."""
        cdef uInt size = 0
        if not _can_park or fd_deflate_window(self._h.strm, NULL, &size) != Z_OK:
            return None
        window = PyBytes_FromStringAndSize(NULL, size)
        fd_deflate_window(self._h.strm, <Bytef *>PyBytes_AS_STRING(window), &size)
        return window

    def _lead(self, data, unsigned long long expected):
        """broadcast(): compress a whole message for a group whose history is
        ``expected``; returns (payload, window, history, since_sync), or None if this
        object's history is no longer ``expected`` (another thread used it). If it
        raises, the message never reaches the peer (as compress())."""
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef Traffic traffic = Traffic(0, 0, False, False)
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
                    window = None if self._no_context_takeover else self._window_bytes()
                    result = payload, window, self._history, self._since_sync
                    traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(payload), True, False)
                    return result
                except BaseException:
                    self._abandon(False)
                    raise
            finally:
                _settle(&self._h, self._in_message, self._clean(), &traffic)
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    def _follow(self, unsigned long long expected, window, unsigned long long history,
                unsigned long long since_sync, size_t size=0, bytes payload=b""):
        """broadcast(): take the state a group's leader reached (``window``, ``history``)
        instead of compressing the same message (``size`` bytes, ``payload`` the
        leader's, for the traffic counters); False if this object's history is no
        longer ``expected``. Its stream goes back to the ring; it keeps a reference to
        the shared window until it needs a stream of its own."""
        cdef Traffic traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(payload), True, True)
        _lock(self._mutex)
        try:
            if self._h.ring == NULL or self._history != expected or self._fragmenting:
                return False
            if not self._no_context_takeover and window is None:
                return False
            self._take_state(window, history, since_sync, &traffic)
            return True
        finally:
            PyThread_release_lock(self._mutex)

    def _abandon_last(self, bint refuse):
        """broadcast(), when it raises: the payload this object last returned never
        reaches its peer. Its next message starts from an empty window; with ``refuse``
        (it was in the middle of a fragmented message) it refuses data until reset()."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                self._abandon(refuse)
                _settle(&self._h, False, self._clean())
        finally:
            PyThread_release_lock(self._mutex)

    def _group(self):
        """broadcast(): (parameter set id, history, messages since the window was empty,
        in the middle of a message, holds a live stream) of this object."""
        return ((<size_t>self._h.ring, self._no_context_takeover), self._history,
                self._since_sync, self._fragmenting or self._in_message,
                self._h.strm != NULL)

    def reset(self):
        """Forget the window and any unfinished message (and any earlier error): the
        next message starts empty."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                _claim(&self._h, False)
                self._forget()
                self._in_message = False
                self._broken = False
                _settle(&self._h, False, True)
        finally:
            PyThread_release_lock(self._mutex)

    cdef inline bint _clean(self) noexcept:
        """Between messages with an empty window (after a message without context
        takeover, or a reset): the stream is freshly reset and holds nothing to keep."""
        return (self._history == 0 and not self._in_message and not self._fragmenting
                and self._h.window == NULL and self._shared is None)

    cdef void _forget(self) noexcept:
        """Reset the stream (claimed) and drop any parked window. With input not yet
        sync-flushed, end the stream instead (another is made on next use): zlib-ng
        2.3.3 at level 1 keeps its open block across deflateReset(), and the next
        message would start without a block header."""
        if self._h.strm != NULL and self._unflushed:
            _drop_stream(&self._h)
        elif self._h.strm != NULL:
            fd_deflate_reset(self._h.strm, self._level, self._mem_level)
        PyMem_RawFree(self._h.window)
        self._h.window = NULL
        self._h.window_size = 0
        self._unflushed = 0
        self._shared = None
        self._history = 0
        self._since_sync = 0
        self._fragmenting = False

    cdef void _abandon(self, bint refuse) noexcept:
        """After a call that raised (the object's lock held): the stream may hold input
        whose output the peer never gets, in any state (a failed flush leaves an open
        block). End it; the next message starts from an empty window, which the peer
        decodes whatever it saw before. ``refuse``: the peer is in the middle of a
        fragmented message this object can no longer finish: refuse until reset()."""
        _claim(&self._h, False)
        if self._h.strm != NULL:
            _drop_stream(&self._h)
        self._forget()
        self._in_message = False
        self._broken = self._broken or refuse
