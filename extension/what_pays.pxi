# Compress what pays: the checks fastdeflate/_what_pays.py describes, in C (the same
# decisions: tests/test_what_pays.py), and Compressor.compress_or_skip's work.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

from cpython.contextvars cimport get_value

from fastdeflate import _what_pays as _what_pays_py

cdef enum:
    CHOICE_COMPRESS = 0    # compress as compress() does
    CHOICE_UNCERTAIN = 1   # compress from a snapshot; keep the payload only if smaller
    CHOICE_OPT_OUT = 2
    CHOICE_SMALL = 3
    CHOICE_FORMAT = 4
    CHOICE_RANDOM = 5
    CHOICE_GREW = 6
    MAGIC_MAX = 16

cdef tuple CHOICE_REASONS = (None, "uncertain", "opt-out", "small", "compressed format",
                             "incompressible", "grew")
cdef object _opt_out = _what_pays_py._opt_out  # the context variable fastdeflate.uncompressed() sets
cdef size_t _min_size = 0
cdef bint _skip_incompressible = True
cdef size_t SAMPLE = _what_pays_py.SAMPLE
cdef size_t RUN = _what_pays_py.RUN
cdef int RUNS = _what_pays_py.RUNS
cdef size_t KEY = _what_pays_py.KEY
cdef size_t REACH = _what_pays_py.REACH
cdef int EARLY = _what_pays_py.EARLY
cdef int INCOMPRESSIBLE = _what_pays_py.INCOMPRESSIBLE
cdef int UNCERTAIN = _what_pays_py.UNCERTAIN
cdef size_t MIN_JUDGED = _what_pays_py.MIN_JUDGED
# The magic numbers (_what_pays.MAGIC), kept alive by _magic
cdef tuple _magic = _what_pays_py.MAGIC
cdef const unsigned char *_magic_at[MAGIC_MAX]
cdef size_t _magic_size[MAGIC_MAX]
cdef int _magic_count = 0
cdef unsigned char _magic_first[256]  # 1: a magic number starts with this byte
memset(_magic_first, 0, sizeof(_magic_first))
cdef bytes _magic_at_4 = _what_pays_py.MAGIC_AT_4[0]
cdef bytes _riff = _what_pays_py.RIFF_WEBP[0]
cdef bytes _webp = _what_pays_py.RIFF_WEBP[1]
for _m in _magic[:MAGIC_MAX]:
    _magic_at[_magic_count] = <const unsigned char *>PyBytes_AS_STRING(_m)
    _magic_size[_magic_count] = <size_t>PyBytes_GET_SIZE(_m)
    _magic_first[_magic_at[_magic_count][0]] = 1
    _magic_count += 1
if (len(_what_pays_py.MAGIC_AT_4) != 1 or len(_magic) > MAGIC_MAX
        or _what_pays_py.MIN_JUDGED < _what_pays_py.SAMPLE):
    raise ImportError("fastdeflate._what_pays's tables changed: update extension/what_pays.pxi")


def _set_what_pays(size_t min_size, bint skip_incompressible):
    """_what_pays's settings, as they change (it calls this)."""
    global _min_size, _skip_incompressible
    _min_size, _skip_incompressible = min_size, skip_incompressible


_set_what_pays(*_what_pays_py.settings())
_what_pays_py._listeners.append(_set_what_pays)


cdef inline bint _starts(const unsigned char *p, size_t n, size_t at, bytes magic) noexcept:
    cdef size_t m = <size_t>PyBytes_GET_SIZE(magic)
    return n >= at + m and memcmp(p + at, PyBytes_AS_STRING(magic), m) == 0


cdef bint _compressed_format(const unsigned char *p, size_t n) noexcept:
    cdef int i
    if not _magic_first[p[0]]:
        return _starts(p, n, 4, _magic_at_4) or (_starts(p, n, 0, _riff)
                                                 and _starts(p, n, 8, _webp))
    for i in range(_magic_count):
        if n >= _magic_size[i] and memcmp(p, _magic_at[i], _magic_size[i]) == 0:
            return True
    return _starts(p, n, 4, _magic_at_4) or (_starts(p, n, 0, _riff)
                                             and _starts(p, n, 8, _webp))


cdef inline size_t _run_start(size_t n, int k) noexcept nogil:
    """As _what_pays.sample_runs: run ``k`` starts at the message's start (0), its end (1),
    or at (k - 1) sevenths (k >= 2); n >= SAMPLE."""
    if k == 0:
        return 0
    if k == 1:
        return n - RUN
    return <size_t>(k - 1) * ((n - RUN) // <size_t>(RUNS - 1))


cdef int _sample_distinct(const unsigned char *p, size_t n, unsigned char *seen,
                          int first, int last) noexcept nogil:
    """As _what_pays.sample_distinct: distinct byte values, not yet in ``seen`` (256 flags,
    updated), in runs ``first`` to ``last`` - 1 of the sample."""
    cdef size_t i, start
    cdef int k, distinct = 0
    for k in range(first, last):
        start = _run_start(n, k)
        for i in range(start, start + RUN):
            if not seen[p[i]]:
                seen[p[i]] = 1
                distinct += 1
    return distinct


cdef bint _sample_repeats(const unsigned char *p, size_t n) noexcept nogil:
    """As _what_pays.sample_repeats: a sampled run (after the first) whose first KEY bytes
    stand earlier in the message, at most REACH bytes before it (found by memchr on the
    first byte, then memcmp)."""
    cdef const unsigned char *key
    cdef const unsigned char *at
    cdef const unsigned char *end
    cdef size_t start
    cdef int k
    for k in range(1, RUNS):
        start = _run_start(n, k)
        key = p + start
        at = p + start - REACH if start > REACH else p
        end = p + start  # an occurrence must start before the run itself
        while at < end:
            at = <const unsigned char *>memchr(at, key[0], <size_t>(end - at))
            if at == NULL:
                break
            if memcmp(at, key, KEY) == 0:
                return True
            at += 1
    return False


cdef int _classify(const unsigned char *p, size_t n) noexcept:
    """As _what_pays.classify (the opt-out is the caller's)."""
    cdef unsigned char seen[256]
    cdef int distinct
    if n < _min_size:
        return CHOICE_SMALL
    if not _skip_incompressible or n < MIN_JUDGED:
        return CHOICE_COMPRESS
    if _compressed_format(p, n):
        return CHOICE_FORMAT
    memset(seen, 0, sizeof(seen))
    distinct = _sample_distinct(p, n, seen, 0, 2)
    if distinct < EARLY:
        return CHOICE_COMPRESS
    distinct += _sample_distinct(p, n, seen, 2, RUNS)
    if distinct >= INCOMPRESSIBLE:
        return CHOICE_UNCERTAIN if _sample_repeats(p, n) else CHOICE_RANDOM
    if distinct >= UNCERTAIN:
        return CHOICE_UNCERTAIN
    return CHOICE_COMPRESS


cdef object _compress_or_skip(Compressor self, object data, bint fin, bint flush):
    """Compressor.compress_or_skip()'s work (see there)."""
    cdef Py_buffer view
    cdef const unsigned char *ptr
    cdef size_t size
    cdef int choice
    cdef bint release
    cdef Py_ssize_t over = 0
    cdef int skipping
    _lock(self._mutex)
    skipping = self._skipping
    if skipping != CHOICE_COMPRESS and fin:
        self._skipping = CHOICE_COMPRESS  # this fragment ends the message sent as it is
    _unlock(self._mutex)
    if skipping == CHOICE_COMPRESS and self._fragmenting:  # the first fragment decided
        return _compress_message(self, data, fin, flush)
    release = _open_input(data, &view, &ptr, &size)
    try:
        if skipping != CHOICE_COMPRESS:  # a message sent as it is, fragment by fragment
            _what_pays_py.count(CHOICE_REASONS[skipping], size, self._level, 0, False)
            return None
        choice = CHOICE_OPT_OUT if get_value(_opt_out, False) else _classify(ptr, size)
    finally:
        if release:
            PyBuffer_Release(&view)
    if choice == CHOICE_COMPRESS:
        return _compress_message(self, data, fin, flush)
    if choice == CHOICE_UNCERTAIN:
        payload = _compress_message(self, data, fin, flush, True)
        if type(payload) is bytes:
            return payload
        choice, over = CHOICE_GREW, <Py_ssize_t>payload - <Py_ssize_t>size
    _what_pays_py.count(CHOICE_REASONS[choice], size, self._level, over)
    if not fin:
        _lock(self._mutex)
        self._skipping = choice
        _unlock(self._mutex)
    return None


cdef object _snapshot(Compressor self):
    """(window, history, messages since it was empty) to put back (the object's lock
    held; claims it), or None where this zlib (or the stream now) cannot give its window
    back: then the payload is sent whatever its size, as compress() would."""
    if not _can_park:
        return None
    _claim(self._h, False)
    window = _current_window(self)
    return None if window is None else (window, self._history, self._since_empty,
                                        self._tail_history, self._tail_bytes,
                                        self._straggler_cause, self._context)


cdef void _restore(Compressor self, tuple before) noexcept:
    """Put back what _snapshot() took: the stream goes back to the ring, and the next
    message restores the window from it (as a follower starts from its leader's)."""
    window, history, since_empty, self._tail_history, tail_bytes, straggler_cause, context = before
    _take_state(self, window or None, history, since_empty, context)
    self._tail_bytes, self._straggler_cause = tail_bytes, straggler_cause
    self._fragmenting = False
    self._in_message = False
