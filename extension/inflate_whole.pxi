# Whole messages on the message engine (ISA-L where bundled): decoded after the window in
# a work buffer of the ring's, trusted only by its token; zlib's stream takes the output.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef size_t _whole_room(Decompressor self, size_t size, Py_ssize_t limit) noexcept:
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


cdef int _inflate_whole_into(Decompressor self, IsalWork *work, const unsigned char *data, size_t size,
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


cdef object _inflate_whole(Decompressor self, const unsigned char *data, size_t size,
                             bint has_tail, Py_ssize_t limit, int *outcome):
    """_isal_message() with a work of the ring's: the message if ``outcome`` is
    DONE."""
    cdef size_t room = _whole_room(self, size, limit)
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
                rc = _inflate_whole_into(self, work, data, size, has_tail, limit, room,
                                        &start, &produced)
        else:
            rc = _inflate_whole_into(self, work, data, size, has_tail, limit, room, &start,
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
