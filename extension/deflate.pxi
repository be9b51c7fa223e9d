# zlib's deflate driven as the stdlib drives it: a compressor's stream claimed and its
# window restored, output in CPython's blocks, then a sync flush; the stream reset or
# dropped when the compressor forgets its window or abandons a call that raised.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef int _start_deflate(Compressor self) except -1:
    """Claim a stream (its own, another idle object's or a new one), put this
    object's parked window, if any, back into it and lend it its scratch."""
    cdef int rc
    cdef int outcome
    if self._h.ring == NULL:
        raise ValueError("Compressor.__init__ was not called")
    outcome = _claim(self._h, True)
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
        rc = fd_deflate_restore(self._h.strm, self._level, self._window_bits,
                                self._mem_level, self._h.window, self._h.window_size)
    elif outcome == STOLEN:
        rc = fd_deflate_reset(self._h.strm, self._level, self._window_bits, self._mem_level)
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
    return _lend_scratch(self._h)


cdef int _drain(Compressor self, int flush, OutputBlocks *blocks, size_t bound) noexcept nogil:
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


cdef int _deflate(Compressor self, const unsigned char *data, size_t size,
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
        rc = _drain(self, Z_NO_FLUSH, &blocks, bound)
        if size == 0:
            break
    if rc == DONE and sync:
        blocks = OutputBlocks(0, 0)
        rc = _drain(self, Z_SYNC_FLUSH, &blocks, bound)
        if rc == DONE:
            self._unflushed = 0
    self._h.strm.next_in = NULL
    self._h.strm.avail_in = 0
    return rc


cdef void _forget(Compressor self) noexcept:
    """Reset the stream (claimed) and drop any parked window. With input not yet
    sync-flushed, end the stream instead (another is made on next use): zlib-ng
    2.3.3 at level 1 keeps its open block across deflateReset(), and the next
    message would start without a block header."""
    if self._h.strm != NULL and self._unflushed:
        _drop_stream(self._h)
    elif self._h.strm != NULL:
        fd_deflate_reset(self._h.strm, self._level, self._window_bits, self._mem_level)
    PyMem_RawFree(self._h.window)
    self._h.window = NULL
    self._h.window_size = 0
    self._unflushed = 0
    self._shared = None
    self._history = 0
    self._since_empty = 0
    self._context = 0
    self._tail_bytes = 0
    self._straggler_cause = 0
    self._fragmenting = False
    self._skipping = CHOICE_COMPRESS


cdef void _abandon(Compressor self, bint refuse) noexcept:
    """After a call that raised (the object's lock held): the stream may hold input
    whose output the peer never gets, in any state (a failed flush leaves an open
    block). End it; the next message starts from an empty window, which the peer
    decodes whatever it saw before. ``refuse``: the peer is in the middle of a
    fragmented message this object can no longer finish: refuse until reset()."""
    _claim(self._h, False)
    if self._h.strm != NULL:
        _drop_stream(self._h)
    _forget(self)
    self._in_message = False
    self._broken = self._broken or refuse
