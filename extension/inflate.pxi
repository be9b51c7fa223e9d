# zlib's inflate driven as the stdlib drives it: a decompressor's stream claimed and its
# window restored, output in CPython's blocks, max_size, BFINAL restarts, the sync tail.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)


cdef enum:
    JOIN_MAX = 2048  # a whole message's payload up to this is inflated with its tail in one call

cdef int _start_inflate(Decompressor self) except -1:
    """Claim a stream (its own, another idle object's or a new one), put this
    object's parked window, if any, back into it and lend it its scratch."""
    cdef int rc
    cdef int outcome
    if self._h.ring == NULL:
        raise ValueError("Decompressor.__init__ was not called")
    outcome = _claim(self._h, True)
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
    return _lend_scratch(self._h)


cdef inline void _new_call(Decompressor self) noexcept nogil:
    self._call_out = 0
    self._block_end = 0
    self._block = -1


cdef inline size_t _block_room(Decompressor self) noexcept nogil:
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


cdef int _restart(Decompressor self) noexcept nogil:
    """After a block with BFINAL set: a new stream over the same window.

    inflateResetKeep() keeps the window in place (O(1)); the number of streams in
    one message is bounded all the same, as the fallback must copy its window.
    """
    self._streams += 1
    if self._streams > MAX_STREAMS_PER_MESSAGE:
        return TOO_MANY_STREAMS
    _new_call(self)  # (the fallback decodes the rest in a call of its own)
    rc = inflateResetKeep(self._h.strm)
    return DONE if rc == Z_OK else rc


cdef int _inflate(Decompressor self, const unsigned char *data, size_t size,
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
                room = _block_room(self)
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
                    return _read_on_without_output(self, data, size)
                return TOO_BIG
            if rc == Z_STREAM_END:
                rc = _restart(self)
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


cdef int _inflate_input(Decompressor self, const unsigned char *data, size_t size, bint fin,
                        bint has_tail, Py_ssize_t limit) noexcept nogil:
    """Inflate one call's input, then the sync tail if ``fin`` (unless the input
    ends with it already: ``has_tail``): a small payload and the tail joined on the
    stack (one inflate() call instead of two), a large one's tail after it (the
    payload is never copied)."""
    cdef unsigned char joined[2052]  # JOIN_MAX + 4
    cdef int rc
    if has_tail:
        rc = _inflate(self, data, size, limit)
        return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc
    if fin and size <= JOIN_MAX:
        memcpy(joined, data, size)
        memcpy(joined + size, SYNC_TAIL, 4)
        rc = _inflate(self, joined, size + 4, limit)
        return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc
    rc = _inflate(self, data, size, limit)
    if fin and rc == DONE:
        rc = _inflate(self, SYNC_TAIL, 4, limit)
    elif fin and rc == TOO_BIG_INPUT_READ:
        rc = _read_on_without_output(self, SYNC_TAIL, 4)
    return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc


cdef int _read_on_without_output(Decompressor self, const unsigned char *data,
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


cdef object _inflate_zlib(Decompressor self, const unsigned char *ptr, size_t size,
                          bint fin, bint has_tail, Py_ssize_t limit, int *outcome):
    """One call's input through zlib (the GIL released for a large one): the output if
    ``outcome`` is DONE."""
    cdef int rc
    result = None
    if size >= _decompress_nogil_min:
        with nogil:
            rc = _inflate_input(self, ptr, size, fin, has_tail, limit)
    else:
        rc = _inflate_input(self, ptr, size, fin, has_tail, limit)
    try:
        if rc == DONE:
            result = _bytes_from(self._h.out.data, self._h.out.size)
    except MemoryError:
        rc = NO_MEMORY  # the output is lost: refused until reset()
    finally:
        _trim(&self._h.out, KEEP_INFLATE_BUFFER_MAX)
        outcome[0] = rc
    # zlib stopped between blocks with no bit pending (mode TYPE): where the message
    # engine (ISA-L) starts a message
    self._unsettled = self._h.strm.data_type != 128
    self._window_token = 0
    return result
