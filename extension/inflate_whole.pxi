# Whole messages on the message engine (ISA-L where bundled): decoded after the window in
# a work buffer of the ring's, trusted only by its token; zlib's stream takes the output.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef struct WholeWork:
    # What the message engine needs for one message (_inflate_whole_into): its state and a
    # buffer for the window followed by the output. Lent by a ring to one call at a time
    # (shelf Ring.works, with the token of the decompressor whose window ends at
    # buf + history): O(threads), not per object.
    void *inflater
    unsigned char *buf
    size_t capacity
    size_t history


cdef enum:
    # A work buffer (window and output) is kept up to this size between messages.
    KEEP_WHOLE_BUFFER_MAX = 131072


# Whole messages decoded by the message engine where one is bundled and zlib can give a
# stream's window to it (inflateGetDictionary: every zlib since 1.2.7.1).
cdef bint _whole_inflating = FD_WHOLE_MESSAGES and FD_CAN_PARK
# set_inflate()'s choice: a C value ("auto" or "zlib": no string object is rebound),
# both settings changed under one lock so that a setter returns the one it replaced
cdef bint _inflate_auto = True
_inflate_lock = free_in_child(threading.Lock())


def set_inflate(engine):
    """Choose what decompresses, for the whole process: ``"auto"`` (the default: the
    bundled ISA-L decodes whole messages where it decodes them as zlib does, zlib the
    rest) or ``"zlib"`` (zlib decodes every message: an operator's way to rule ISA-L
    out). Returns the previous choice. It is read at each whole message.
    ``FASTDEFLATE_INFLATE`` sets it at import."""
    inflate_arg(engine)
    with _inflate_lock:
        previous = _inflate_choice_now()
        _set_inflate_choice(engine == "auto")
    return previous


def inflate_engine():
    """What decompresses now (after ``set_inflate()``): ``INFLATE_ENGINE`` with
    ``"auto"``, ``ENGINE`` with ``"zlib"`` or in a build without ISA-L."""
    return INFLATE_ENGINE if _whole_inflating else ENGINE


def _inflate_choice_now():
    """set_inflate()'s choice now: "auto" or "zlib" (for status())."""
    return "auto" if _inflate_auto else "zlib"


cdef void _set_inflate_choice(bint auto) noexcept:
    global _inflate_auto, _whole_inflating
    _inflate_auto = auto
    _whole_inflating = auto and FD_WHOLE_MESSAGES and FD_CAN_PARK


cdef WholeWork *_take_whole_work(Ring *ring, unsigned long long *token) noexcept:
    """A spare work of the ring's and the token of whose window it holds, or a new one
    (token 0); NULL if out of memory."""
    cdef WholeWork *work
    _lock(ring.mutex)
    work = <WholeWork *>_unshelve(&ring.works, NULL, token)
    _unlock(ring.mutex)
    if work != NULL:
        return work
    token[0] = 0
    work = <WholeWork *>PyMem_RawMalloc(sizeof(WholeWork))
    if work == NULL:
        return NULL
    work.inflater = PyMem_RawMalloc(fd_whole_inflater_size())
    work.buf = NULL
    work.capacity = 0
    work.history = 0
    if work.inflater == NULL:
        PyMem_RawFree(work)
        return NULL
    return work


cdef unsigned long long _give_whole_work(Ring *ring, WholeWork *work, bint decoded,
                                         bint keep) noexcept:
    """Back to the ring after the call (its buffer freed if a large message grew it);
    ``decoded``: the engine decoded the message (counted); ``keep``: the caller's window
    now ends in it. Returns the token that proves that to the caller, 0 if nothing is
    kept."""
    cdef unsigned long long token = 0
    if work.capacity > KEEP_WHOLE_BUFFER_MAX:
        PyMem_RawFree(work.buf)
        work.buf = NULL
        work.capacity = 0
        keep = False
    _lock(ring.mutex)
    ring.whole_messages += decoded
    if keep:
        token = _new_token_locked(ring)
    if _shelve(&ring.works, work, work.capacity, token):
        work = NULL
    _unlock(ring.mutex)
    if work != NULL:
        _free_whole_work(work)
        token = 0
    return token


cdef void _free_whole_work(void *item) noexcept nogil:
    cdef WholeWork *work = <WholeWork *>item
    PyMem_RawFree(work.buf)
    PyMem_RawFree(work.inflater)
    PyMem_RawFree(work)


cdef inline bint _whole_may_decode(Decompressor self, size_t size) noexcept:
    """Which engine decodes a whole message: the message engine may (it declines what it
    does not decode as zlib does), where one is bundled and chosen (set_inflate), the
    stream is between blocks with no bit pending and the input is not cut in slices
    (a test knob); zlib otherwise."""
    return (_whole_inflating and not self._unsettled and size <= WHOLE_MAX_ROOM
            and _max_slice == MAX_SLICE)


cdef size_t _whole_room(Decompressor self, size_t size, Py_ssize_t limit) noexcept:
    """The output room ISA-L first gets for a message of ``size`` bytes (then 4x as
    much until it is enough): 4x the input or what the last message took, whichever
    is more. 0 if that reaches ``limit``: zlib alone decodes messages that may pass
    max_size (it stops at the limit, ISA-L's buffer would take the window too)."""
    cdef size_t room = 4 * size + 1024
    cdef size_t last = self._last_size
    if room < last + (last >> 3) + 64:
        room = last + (last >> 3) + 64
    if room > WHOLE_MAX_ROOM or (limit >= 0 and room >= <size_t>limit):
        return 0
    return room


cdef int _inflate_whole_into(Decompressor self, WholeWork *work, unsigned long long token,
                             const unsigned char *data, size_t size,
                       bint has_tail, Py_ssize_t limit, size_t room,
                       size_t *start, size_t *produced) noexcept nogil:
    """A whole message decoded by ISA-L into ``work.buf``, at ``start``, right after
    the window: the stream's, copied there, or already there when this object's
    window token is the work's (its last message was ISA-L's, in this work, and
    nothing used the work since; then history moves down only when the buffer is
    full). The stream's window then takes the output, as zlib's inflate() would.
    DONE, or WHOLE_DECLINED with the stream untouched, and zlib decodes the message:
    ISA-L met what it does not decode as zlib does (corrupt data, a final block, a
    message ending elsewhere than between blocks, a back-reference past
    2^window_bits), the output would pass ``limit``, or memory ran out."""
    cdef z_stream *strm = self._h.strm
    cdef uInt have = 0
    cdef size_t needed, end = 0
    cdef unsigned char *buf
    cdef int rc
    cdef bint kept = _is_own(token, self._window_token)
    if kept:
        end = work.history
        have = <uInt>min(end, (<size_t>1) << self._window_bits)
    elif fd_inflate_get_dictionary(strm, NULL, &have) != Z_OK:
        return WHOLE_DECLINED
    while True:
        if kept and end + room > work.capacity and end > have:
            memmove(work.buf, work.buf + end - have, have)  # the window, down
            end = have
        needed = (end if kept else have) + room
        # Room for the messages after this one too, where a buffer is kept that large:
        # the window then moves down once per 2^w bytes of output, not at every
        # message (a buffer first grown while the window was empty had none).
        if (needed + ((<size_t>1) << self._window_bits) <= KEEP_WHOLE_BUFFER_MAX
                and work.capacity < needed + ((<size_t>1) << self._window_bits)):
            needed += (<size_t>1) << self._window_bits
        if work.capacity < needed:
            buf = <unsigned char *>PyMem_RawRealloc(work.buf, needed)
            if buf == NULL:
                return WHOLE_DECLINED
            work.buf = buf
            work.capacity = needed
        if not kept:
            if have and fd_inflate_get_dictionary(strm, work.buf, &have) != Z_OK:
                return WHOLE_DECLINED
            end = have
            kept = True  # (a retry finds it there)
        rc = fd_inflate_whole(work.inflater, data, size, has_tail, work.buf + end - have,
                              have, room, self._window_bits, produced)
        if rc == 0:
            break
        room *= 4
        if rc != 1 or room > WHOLE_MAX_ROOM or (limit >= 0 and room >= <size_t>limit):
            return WHOLE_DECLINED
    if (not self._no_context_takeover and produced[0] != 0
            and inflateSetDictionary(strm, work.buf + end, <uInt>produced[0]) != Z_OK):
        return WHOLE_DECLINED
    start[0] = end
    work.history = end + produced[0]
    return DONE


cdef object _inflate_whole(Decompressor self, const unsigned char *data, size_t size,
                           bint has_tail, Py_ssize_t limit, int *outcome):
    """_inflate_whole_into() with a work of the ring's: the message if ``outcome`` is
    DONE."""
    cdef size_t room = _whole_room(self, size, limit)
    cdef WholeWork *work = NULL
    cdef size_t start = 0, produced = 0
    cdef unsigned long long token = 0
    cdef int rc = WHOLE_DECLINED
    result = None
    if room != 0:
        work = _take_whole_work(self._h.ring, &token)
        _at_quietly("isal work")  # (tests only: hold a work while others decode)
    if work == NULL:
        outcome[0] = rc
        return None
    try:
        if size >= _decompress_nogil_min:
            with nogil:
                rc = _inflate_whole_into(self, work, token, data, size, has_tail, limit, room,
                                         &start, &produced)
        else:
            rc = _inflate_whole_into(self, work, token, data, size, has_tail, limit, room, &start,
                                     &produced)
        if rc == DONE:
            try:
                result = _bytes_from(work.buf + start, produced)
            except MemoryError:
                rc = NO_MEMORY  # the output is lost: refused until reset()
    finally:
        self._window_token = _give_whole_work(
            self._h.ring, work, rc == DONE, rc == DONE and not self._no_context_takeover)
        outcome[0] = rc
    return result
