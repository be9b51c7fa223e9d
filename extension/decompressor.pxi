# The Decompressor class: permessage-deflate payloads back into messages.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef class Decompressor:
    """Decompresses permessage-deflate payloads (whole messages or fragments).

    Decompressor(window_bits=15, no_context_takeover=False)
    """

    # Its stream (while it has one), parked window and output buffer: memory of its own,
    # which its ring's idle list points into while it is linked (_release_holder)
    cdef Holder *_h
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef fd_lock_t _mutex  # in _lock_cell (a PyThread lock's: allocated)
    cdef fd_lock_cell _lock_cell
    cdef bint _in_message  # a fragment was decompressed, the message is not finished
    cdef int _window_bits
    cdef bint _no_context_takeover
    cdef size_t _message_size  # output of the current message so far
    # Where zlib's output blocks end in this call, as the stdlib's (see _next_block)
    cdef size_t _call_out      # output of this call (or since a stream restarted in it)
    cdef size_t _block_end     # where the current block ends in it
    cdef int _block            # the current block's index in OUTPUT_BLOCKS, -1: none yet
    cdef int _streams          # deflate streams ended (BFINAL) in the current message
    cdef object _error         # None, or why the decompressor is unusable
    cdef uInt _last_size       # the last message's size, at most 4 GiB - 1 (ISA-L's room)
    cdef unsigned char _unsettled  # the stream may not be between blocks with no bit
                                   # pending (zlib ended a message elsewhere): no ISA-L
    # The token of the ISA-L work whose buffer holds this object's window (given by the
    # ring when this object's last message was decoded there), 0 if none: the only proof
    # that those bytes are its own (an address is not: see "who owns what" in ownership.pxi).
    cdef unsigned long long _window_token

    def __cinit__(self, *args, **kwargs):
        self._h = _new_holder()
        self._mutex = fd_lock_in(&self._lock_cell)
        if self._mutex == NULL:
            raise MemoryError("cannot allocate a lock")

    def __init__(self, window_bits=15, no_context_takeover=False):
        args = decompressor_args(window_bits, no_context_takeover)
        _lock(self._mutex)
        try:
            _refuse_second_init(self._initialised, self)
            self._window_bits, self._no_context_takeover = args
            self._h.inflating = True
            self._h.ring = _ring_for(("inflate", self._window_bits))
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
    def window_bits(self):
        """LZ77 window (8..15)."""
        return self._window_bits

    @property
    def no_context_takeover(self):
        """True if the peer starts every message with an empty window."""
        return self._no_context_takeover

    def decompress(self, data, bint fin=True, max_size=None, *, bint has_tail=False):
        """Decompress a whole message's payload, or one fragment when ``fin`` is False.

        ``max_size`` bounds the size of the whole message across its fragments:
        decompression stops as soon as it would be passed, with MessageTooBig.
        Corrupt data raises DecompressionError. After either (or a MemoryError) the
        decompressor refuses data until reset(). ``has_tail``: ``data`` is the end of
        a message followed by ``00 00 ff ff`` already (ValueError if not, or if
        ``fin`` is False), inflated as it is. After any exception but those of bad
        arguments, the decompressor refuses data until reset().
        """
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef int rc
        cdef Py_ssize_t limit = -1
        cdef bint release
        cdef bint clean = False
        cdef Traffic traffic = Traffic(0, 0, False, False, 0)
        if max_size is not None:
            if type(max_size) is not int or max_size < 0:
                max_size_arg(max_size)  # raises the documented TypeError / ValueError
            limit = min(max_size, PY_SSIZE_T_MAX // 2)
        release = _open_input(data, &view, &ptr, &size)
        try:
            if has_tail and (not fin or size < 4 or memcmp(ptr + size - 4, SYNC_TAIL, 4)):
                tail_arg(fin)  # raises the documented ValueError
            _lock(self._mutex)
            try:
                if self._error is not None:
                    raise DecompressionError(
                        f"decompressor unusable after an earlier error ({self._error}); "
                        "call reset()")
                try:
                    _start_inflate(self)
                    whole = fin and not self._in_message
                    self._in_message = True  # until the message ends well
                    _new_call(self)
                    rc = WHOLE_DECLINED
                    if whole and _whole_may_decode(self, size):
                        result = _inflate_whole(self, ptr, size, has_tail, limit, &rc)
                    if rc == WHOLE_DECLINED:
                        result = _inflate_zlib(self, ptr, size, fin, has_tail, limit, &rc)
                    self._in_message = rc == DONE and not fin
                    if rc == DONE:
                        traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(result), fin, False, 0)
                        self._last_size = <uInt>min(PyBytes_GET_SIZE(result), UINT_MAX)
                        if fin:
                            self._message_size = 0
                            self._streams = 0
                            if self._no_context_takeover:
                                inflateReset(self._h.strm)
                                self._unsettled = False
                                clean = True
                        return result
                    self._refuse_after(rc, max_size)
                except BaseException as exc:  # whatever failed, the window is in doubt
                    self._in_message = False
                    self._window_token = 0
                    if self._error is None:
                        self._error = "out of memory" if isinstance(exc, MemoryError) \
                            else "interrupted"
                    raise
            finally:
                # (a refusing object's state is dropped at reset(): it may be parked)
                self._h.pinned = self._unsettled and self._error is None
                _settle(self._h, self._in_message, clean, &traffic)
                _unlock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    cdef int _refuse_after(self, int rc, object max_size) except -1:
        """Raise what ``rc`` (a call's failure) means; the object refuses data from now
        until reset()."""
        if rc == NO_MEMORY or rc == Z_MEM_ERROR:
            self._error = "out of memory"
            raise MemoryError("out of memory while decompressing")
        if rc == TOO_BIG:
            self._error = f"message exceeds max_size={max_size}"
            raise MessageTooBig(self._error)
        if rc == TOO_MANY_STREAMS:
            self._error = TOO_MANY_STREAMS_MESSAGE
            raise DecompressionError(self._error)
        self._error = "invalid compressed data: " + _zlib_message(
            rc, self._h.strm, "decompressing data")
        raise DecompressionError(self._error)

    def reset(self):
        """Forget the window, any unfinished message and any earlier error."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                _claim(self._h, False)
                if self._h.strm != NULL:
                    inflateReset(self._h.strm)
                PyMem_RawFree(self._h.window)
                self._h.window = NULL
                self._h.window_size = 0
                self._in_message = False
                self._h.pinned = False
                _settle(self._h, False, True)
            self._message_size = 0
            self._streams = 0
            self._error = None
            self._unsettled = False
            self._window_token = 0
        finally:
            _unlock(self._mutex)
