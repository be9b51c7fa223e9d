# The Decompressor class: permessage-deflate payloads back into messages.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef class Decompressor:
    """Decompresses permessage-deflate payloads (whole messages or fragments).

    Decompressor(window_bits=15, no_context_takeover=False)
    """

    cdef Holder _h  # its stream (while it has one), parked window and output buffer
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef PyThread_type_lock _mutex
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
    # that those bytes are its own (an address is not: see "who owns what" in rings.pxi).
    cdef unsigned long long _window_token

    def __cinit__(self, *args, **kwargs):
        self._mutex = PyThread_allocate_lock()
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
            PyThread_release_lock(self._mutex)

    def __dealloc__(self):
        _release_holder(&self._h)
        if self._mutex != NULL:
            PyThread_free_lock(self._mutex)

    @property
    def window_bits(self):
        """LZ77 window (8..15)."""
        return self._window_bits

    @property
    def no_context_takeover(self):
        """True if the peer starts every message with an empty window."""
        return self._no_context_takeover

    cdef int _start(self) except -1:
        """Claim a stream (its own, another idle object's or a new one), put this
        object's parked window, if any, back into it and lend it its scratch."""
        cdef int rc
        cdef int outcome
        if self._h.ring == NULL:
            raise ValueError("Decompressor.__init__ was not called")
        outcome = _claim(&self._h, True)
        if outcome == NEED_NEW:
            self._h.strm = _new_stream()
            if self._h.strm == NULL:
                _uncount(self._h.ring)
                raise MemoryError("cannot allocate the inflate state")
            rc = inflateInit2(self._h.strm, -self._window_bits)
            if rc != Z_OK:
                message = _zlib_message(rc, self._h.strm, "initializing decompressor")
                PyMem_RawFree(self._h.strm)
                self._h.strm = NULL
                _uncount(self._h.ring)
                if rc == Z_MEM_ERROR:
                    raise MemoryError("cannot allocate the inflate state")
                raise ValueError(message)
        elif outcome == STOLEN:
            inflateReset(self._h.strm)
        if self._h.window != NULL:
            rc = inflateSetDictionary(self._h.strm, self._h.window, self._h.window_size)
            if rc == Z_MEM_ERROR:  # (zlib allocates the window here) it stays parked
                raise MemoryError("cannot allocate the inflate window")
            if rc != Z_OK:
                raise ValueError(_zlib_message(rc, self._h.strm, "restoring the window"))
            PyMem_RawFree(self._h.window)
            self._h.window = NULL
            self._h.window_size = 0
        return _lend_scratch(&self._h)

    cdef int _restart(self) noexcept nogil:
        """After a block with BFINAL set: a new stream over the same window.

        inflateResetKeep() keeps the window in place (O(1)); the number of streams in
        one message is bounded all the same, as the fallback must copy its window.
        """
        self._streams += 1
        if self._streams > MAX_STREAMS_PER_MESSAGE:
            return TOO_MANY_STREAMS
        self._new_call()  # (the fallback decodes the rest in a call of its own)
        rc = inflateResetKeep(self._h.strm)
        return DONE if rc == Z_OK else rc

    cdef inline void _new_call(self) noexcept nogil:
        self._call_out = 0
        self._block_end = 0
        self._block = -1

    cdef inline size_t _block_room(self) noexcept nogil:
        """The output room of the next inflate() call: up to the end of the current
        output block of this call, starting the next block if it is full. The blocks are
        the stdlib zlib module's (CPython's blocks output buffer: 32 KiB, 64 KiB, 256 KiB,
        ...), one inflate() call each, because zlib's verdict on a back-reference past
        2^window_bits (RFC 7692 forbids them) depends on where its calls begin: it takes
        one that stays within the output of the same call. So a peer's message that has
        one is refused or taken exactly as the stock libraries' stdlib zlib does. (With
        a window of 2^15 no distance passes it: calls may end anywhere.)"""
        if self._call_out >= self._block_end:
            if self._block < OUTPUT_BLOCKS_COUNT - 1:
                self._block += 1
            self._block_end = self._call_out + OUTPUT_BLOCKS[self._block]
        return self._block_end - self._call_out

    cdef int _inflate(self, const unsigned char *data, size_t size,
                      Py_ssize_t limit) noexcept nogil:
        """Inflate ``data`` into the output buffer; ``limit`` < 0 means no limit.

        Output never grows past what the limit allows plus one byte: that byte is
        how an oversized message is detected without inflating it further. Each inflate()
        call ends where the stdlib's would (_block_room).
        """
        cdef z_stream *strm = self._h.strm
        cdef size_t slice_size, room, allowed, produced
        cdef int rc
        if limit >= 0 and self._message_size > <size_t>limit:
            return TOO_BIG  # an earlier fragment already passed this (tighter) limit
        while True:
            slice_size = size if size < _max_slice else _max_slice
            strm.next_in = data
            strm.avail_in = <uInt>slice_size
            data += slice_size
            size -= slice_size
            while True:
                allowed = SIZE_MAX
                if limit >= 0:
                    allowed = <size_t>limit - self._message_size + 1
                if self._window_bits < 15:  # the stdlib's output blocks (_block_room)
                    room = self._block_room()
                    if room > allowed:
                        room = allowed
                    if self._h.out.capacity - self._h.out.size < room:
                        rc = _reserve(&self._h.out, room,
                                      SIZE_MAX if limit < 0 else self._h.out.size + allowed)
                        if rc != DONE:
                            return rc
                elif self._h.out.size == self._h.out.capacity:  # no reference can pass
                    room = self._h.out.capacity if self._h.out.capacity else 4 * slice_size + 64
                    if room > allowed:
                        room = allowed
                    rc = _reserve(&self._h.out, room,
                                  SIZE_MAX if limit < 0 else self._h.out.size + allowed)
                    if rc != DONE:
                        return rc
                room = self._h.out.capacity - self._h.out.size
                if room > allowed:
                    room = allowed
                if self._window_bits < 15 and room > self._block_end - self._call_out:
                    room = self._block_end - self._call_out
                if room > _max_slice:
                    room = _max_slice
                strm.next_out = self._h.out.data + self._h.out.size
                strm.avail_out = <uInt>room
                rc = inflate(strm, Z_SYNC_FLUSH)
                produced = room - strm.avail_out
                self._h.out.size += produced
                self._message_size += produced
                self._call_out += produced
                if _inflate_failed(rc):
                    return rc  # corrupt data found in the same call wins, as in stdlib zlib
                if limit >= 0 and self._message_size > <size_t>limit:
                    if rc != Z_STREAM_END and strm.avail_in == 0:
                        return self._read_on_without_output(data, size)
                    return TOO_BIG
                if rc == Z_STREAM_END:
                    rc = self._restart()
                    if rc != DONE:
                        return rc
                    if strm.avail_in == 0:
                        break
                    continue
                if rc == Z_BUF_ERROR and strm.avail_in == 0:
                    break  # all input consumed, nothing more to write
                if strm.avail_in == 0 and strm.avail_out != 0:
                    break
            if size == 0:
                break
        strm.next_in = NULL
        strm.avail_in = 0
        return DONE

    cdef size_t _isal_room(self, size_t size, Py_ssize_t limit) noexcept:
        """The output room ISA-L first gets for a message of ``size`` bytes (then 4x as
        much until it is enough): 4x the input or what the last message took, whichever
        is more. 0 if that reaches ``limit``: zlib alone decodes messages that may pass
        max_size (it stops at the limit, ISA-L's buffer would take the window too)."""
        cdef size_t room = 4 * size + 1024
        cdef size_t last = self._last_size
        if room < last + (last >> 3) + 64:
            room = last + (last >> 3) + 64
        if room > ISAL_MAX_ROOM or (limit >= 0 and room >= <size_t>limit):
            return 0
        return room

    cdef int _isal_message(self, IsalWork *work, const unsigned char *data, size_t size,
                           bint has_tail, Py_ssize_t limit, size_t room,
                           size_t *start, size_t *produced) noexcept nogil:
        """A whole message decoded by ISA-L into ``work.buf``, at ``start``, right after
        the window: the stream's, copied there, or already there when this object's
        window token is the work's (its last message was ISA-L's, in this work, and
        nothing used the work since; then history moves down only when the buffer is
        full). The stream's window then takes the output, as zlib's inflate() would.
        DONE, or ISAL_DECLINED with the stream untouched, and zlib decodes the message:
        ISA-L met what it does not decode as zlib does (corrupt data, a final block, a
        message ending elsewhere than between blocks, a back-reference past
        2^window_bits), the output would pass ``limit``, or memory ran out."""
        cdef z_stream *strm = self._h.strm
        cdef uInt have = 0
        cdef size_t needed, end = 0
        cdef unsigned char *buf
        cdef int rc
        cdef bint kept = self._window_token != 0 and work.token == self._window_token
        work.token = 0  # (nobody's until _give_isal_work says whose)
        if kept:
            end = work.history
            have = <uInt>min(end, (<size_t>1) << self._window_bits)
        elif fd_inflate_get_dictionary(strm, NULL, &have) != Z_OK:
            return ISAL_DECLINED
        while True:
            if kept and end + room > work.capacity and end > have:
                memmove(work.buf, work.buf + end - have, have)  # the window, down
                end = have
            needed = (end if kept else have) + room
            # Room for the messages after this one too, where a buffer is kept that large:
            # the window then moves down once per 2^w bytes of output, not at every
            # message (a buffer first grown while the window was empty had none).
            if (needed + ((<size_t>1) << self._window_bits) <= KEEP_ISAL_BUFFER_MAX
                    and work.capacity < needed + ((<size_t>1) << self._window_bits)):
                needed += (<size_t>1) << self._window_bits
            if work.capacity < needed:
                buf = <unsigned char *>PyMem_RawRealloc(work.buf, needed)
                if buf == NULL:
                    return ISAL_DECLINED
                work.buf = buf
                work.capacity = needed
            if not kept:
                if have and fd_inflate_get_dictionary(strm, work.buf, &have) != Z_OK:
                    return ISAL_DECLINED
                end = have
                kept = True  # (a retry finds it there)
            rc = fd_isal_inflate(work.inflater, data, size, has_tail, work.buf + end - have,
                                 have, room, self._window_bits, produced)
            if rc == 0:
                break
            room *= 4
            if rc != 1 or room > ISAL_MAX_ROOM or (limit >= 0 and room >= <size_t>limit):
                return ISAL_DECLINED
        if (not self._no_context_takeover and produced[0] != 0
                and inflateSetDictionary(strm, work.buf + end, <uInt>produced[0]) != Z_OK):
            return ISAL_DECLINED
        start[0] = end
        work.history = end + produced[0]
        return DONE

    cdef int _inflate_input(self, const unsigned char *data, size_t size, bint fin,
                            bint has_tail, Py_ssize_t limit) noexcept nogil:
        """Inflate one call's input, then the sync tail if ``fin`` (unless the input
        ends with it already: ``has_tail``): a small payload and the tail joined on the
        stack (one inflate() call instead of two), a large one's tail after it (the
        payload is never copied)."""
        cdef unsigned char joined[2052]  # JOIN_MAX + 4
        cdef int rc
        if has_tail:
            rc = self._inflate(data, size, limit)
            return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc
        if fin and size <= JOIN_MAX:
            memcpy(joined, data, size)
            memcpy(joined + size, SYNC_TAIL, 4)
            rc = self._inflate(joined, size + 4, limit)
            return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc
        rc = self._inflate(data, size, limit)
        if fin and rc == DONE:
            rc = self._inflate(SYNC_TAIL, 4, limit)
        elif fin and rc == TOO_BIG_INPUT_READ:
            rc = self._read_on_without_output(SYNC_TAIL, 4)
        return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc

    cdef int _read_on_without_output(self, const unsigned char *data,
                                     size_t size) noexcept nogil:
        """The message passed max_size as zlib's input ran out: read the rest of the
        input (the next slices, or the tail) with no room for output. After its output
        is full zlib parses on until it would write, so this finds what one pass over
        payload + tail finds (the fallback's way, and the stock libraries'): a corrupt
        block header there is DecompressionError. TOO_BIG_INPUT_READ if all was read.
        """
        cdef z_stream *strm = self._h.strm
        cdef unsigned char nowhere
        cdef size_t part
        cdef int rc = TOO_BIG_INPUT_READ
        while size != 0:
            part = size if size < _max_slice else _max_slice
            strm.next_in = data
            strm.avail_in = <uInt>part
            strm.next_out = &nowhere
            strm.avail_out = 0
            rc = inflate(strm, Z_SYNC_FLUSH)
            if _inflate_failed(rc):
                break
            if rc == Z_STREAM_END or strm.avail_in != 0:
                rc = TOO_BIG  # zlib stopped where it would write (or at a stream's end)
                break
            rc = TOO_BIG_INPUT_READ
            data += part
            size -= part
        strm.next_in = NULL
        strm.avail_in = 0
        strm.next_out = NULL
        return rc

    cdef object _decompress_isal(self, const unsigned char *data, size_t size,
                                 bint has_tail, Py_ssize_t limit, int *outcome):
        """_isal_message() with a work of the ring's: the message if ``outcome`` is
        DONE."""
        cdef size_t room = self._isal_room(size, limit)
        cdef IsalWork *work = NULL
        cdef size_t start = 0, produced = 0
        cdef int rc = ISAL_DECLINED
        result = None
        if room != 0:
            work = _take_isal_work(self._h.ring)
            _at_quietly("isal work")  # (tests only: hold a work while others decode)
        if work == NULL:
            outcome[0] = rc
            return None
        try:
            if size >= _decompress_nogil_min:
                with nogil:
                    rc = self._isal_message(work, data, size, has_tail, limit, room,
                                            &start, &produced)
            else:
                rc = self._isal_message(work, data, size, has_tail, limit, room, &start,
                                        &produced)
            if rc == DONE:
                try:
                    result = PyBytes_FromStringAndSize(
                        <char *>work.buf + start, <Py_ssize_t>produced)
                except MemoryError:
                    rc = NO_MEMORY  # the output is lost: refused until reset()
        finally:
            self._window_token = _give_isal_work(
                self._h.ring, work, rc == DONE, rc == DONE and not self._no_context_takeover)
            outcome[0] = rc
        return result

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
        cdef Traffic traffic = Traffic(0, 0, False, False)
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
                    self._start()
                    whole = fin and not self._in_message
                    self._in_message = True  # until the message ends well
                    self._new_call()
                    rc = ISAL_DECLINED
                    if (whole and _isal_inflating and not self._unsettled
                            and size <= ISAL_MAX_ROOM and _max_slice == MAX_SLICE):
                        result = self._decompress_isal(ptr, size, has_tail, limit, &rc)
                    if rc == ISAL_DECLINED:
                        if size >= _decompress_nogil_min:
                            with nogil:
                                rc = self._inflate_input(ptr, size, fin, has_tail, limit)
                        else:
                            rc = self._inflate_input(ptr, size, fin, has_tail, limit)
                        try:
                            if rc == DONE:
                                result = PyBytes_FromStringAndSize(
                                    <char *>self._h.out.data, <Py_ssize_t>self._h.out.size)
                        except MemoryError:
                            rc = NO_MEMORY  # the output is lost: refused until reset() below
                        finally:
                            _trim(&self._h.out, KEEP_INFLATE_BUFFER_MAX)
                        # zlib stopped between blocks with no bit pending (mode TYPE):
                        # where ISA-L starts a message
                        self._unsettled = self._h.strm.data_type != 128
                        self._window_token = 0
                    self._in_message = rc == DONE and not fin
                    if rc == DONE:
                        traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(result), fin, False)
                        self._last_size = <uInt>min(PyBytes_GET_SIZE(result), UINT_MAX)
                        if fin:
                            self._message_size = 0
                            self._streams = 0
                            if self._no_context_takeover:
                                inflateReset(self._h.strm)
                                self._unsettled = False
                                clean = True
                        return result
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
                _settle(&self._h, self._in_message, clean, &traffic)
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    def reset(self):
        """Forget the window, any unfinished message and any earlier error."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                _claim(&self._h, False)
                if self._h.strm != NULL:
                    inflateReset(self._h.strm)
                PyMem_RawFree(self._h.window)
                self._h.window = NULL
                self._h.window_size = 0
                self._in_message = False
                self._h.pinned = False
                _settle(&self._h, False, True)
            self._message_size = 0
            self._streams = 0
            self._error = None
            self._unsettled = False
            self._window_token = 0
        finally:
            PyThread_release_lock(self._mutex)
