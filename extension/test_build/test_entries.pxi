# Test entry points (the test build only: FASTDEFLATE_TEST_HOOKS=1; included last from
# _fastdeflate.pyx, found on the include path setup.py sets): switches and counts over
# the state of the parts above, for tests. The default build includes
# extension/default_build/test_entries.pxi instead, which defines none of them.


# --- basics.pxi -----------------------------------------------------------------

def _set_release_gil_always(bint always):
    """Test hook (private): with True every compress and decompress call releases the
    GIL around its engine calls and its output's copy (not only those of large inputs
    and outputs), so that threads interleave inside the codec as they do on large
    messages; returns the previous setting."""
    global _compress_nogil_min, _decompress_nogil_min, _copy_nogil_min
    previous = _compress_nogil_min == 0
    _compress_nogil_min = 0 if always else COMPRESS_NOGIL_MIN
    _decompress_nogil_min = 0 if always else DECOMPRESS_NOGIL_MIN
    _copy_nogil_min = 0 if always else COPY_NOGIL_MIN
    return previous


def _set_max_slice(size_t size):
    """Test hook (private): cut inputs and outputs in slices of ``size`` bytes (1 to
    1 GiB, the default) instead of 1 GiB; returns the previous size. Affects every
    object; not to be changed while another thread is in a codec call."""
    global _max_slice
    if not 0 < size <= MAX_SLICE:
        raise ValueError(f"the slice size must be in 1..{MAX_SLICE}, got {size}")
    previous, _max_slice = _max_slice, size
    return previous


# --- rings.pxi ------------------------------------------------------------------

def _set_parking(bint enabled):
    """Test hook (private): with False, objects are never parked, as on a zlib older
    than 1.2.9; returns the previous setting. True only where the zlib allows it."""
    global _can_park
    previous, _can_park = _can_park, enabled and FD_CAN_PARK
    return previous


def _spare_output_held():
    """Test hook (private): bytes of the empty output buffers the rings keep for their
    next calls, whichever connection they are for (at most SPARE_BUFFERS per parameter
    set: O(threads), not per connection)."""
    cdef Ring *ring
    cdef size_t total = 0
    for pset in list(_sets.values()):
        ring = &(<_ParameterSet>pset).ring
        _lock(ring.mutex)
        total += _shelved_bytes(&ring.spare)
        _unlock(ring.mutex)
    return total


def _set_pooling(bint enabled):
    """Test hook (private): with False, an object that keeps no window (no context
    takeover) stays linked to its stream between messages, like any other; returns the
    previous setting."""
    global _pool_clean
    previous, _pool_clean = _pool_clean, enabled
    return previous


# --- parking.pxi ----------------------------------------------------------------

def _set_trimming(bint enabled):
    """Test hook (private): with False the sweeper never hands freed memory back to the
    system, as on a C library other than glibc; returns the previous setting."""
    global _trimming
    previous, _trimming = _trimming, enabled and FD_CAN_TRIM
    return previous


def _sweeper_running():
    """Test hook (private): whether this process has started its sweeper thread."""
    return _sweeper_started


# --- compress_once.pxi ----------------------------------------------------------

def _set_sharing(bint enabled):
    """Test hook (private): with False, every compressor compresses every message
    itself; returns the previous setting."""
    global _sharing
    previous, _sharing = _sharing, enabled
    return previous


def _quiet_sets():
    """Test hook (private): how many parameter sets keep only one message in
    QUIET_SAMPLE (nobody followed the last QUIET_AFTER kept)."""
    cdef _ParameterSet b
    cdef Py_ssize_t quiet = 0
    for pset in list(_sets.values()):
        b = pset
        _lock(b.ring.mutex)
        quiet += b.unfollowed >= QUIET_AFTER
        _unlock(b.ring.mutex)
    return quiet


def _start_over_state():
    """Test hook (private): per deflate parameter set, (level, window bits, memLevel,
    strategy): (group messages since its group last started over, their average payload
    as a fraction of the message, what starting over cost the last time, the stragglers'
    share of the deliveries lately), the inputs of _start_over_due_now()."""
    cdef _ParameterSet b
    cdef Py_ssize_t since
    cdef double average, extra, share
    costs = {}
    for key, pset in list(_sets.items()):
        if key[0] != "deflate":
            continue
        b = pset
        _lock(b.ring.mutex)  # (C values only: nothing is allocated under the ring lock)
        since, average = b.since_start_over, b.average_payload
        extra, share = b.start_over_extra, b.alone_share
        _unlock(b.ring.mutex)
        costs[key[1:]] = (since, average, extra, share)
    return costs


def _kept_messages():
    """Test hook (private): how many messages are kept for sharing, all rings together."""
    cdef _ParameterSet b
    cdef Py_ssize_t kept = 0
    for pset in list(_sets.values()):
        b = pset
        _lock(b.ring.mutex)
        kept += len(b.kept or ())
        _unlock(b.ring.mutex)
    return kept


# --- what_pays.pxi -----------------------------------------------------------------

def _classify_for_tests(data):
    """Test hook (private): _classify's reason for ``data`` (None: compress)."""
    cdef Py_buffer view
    cdef const unsigned char *ptr
    cdef size_t size
    cdef bint release = _open_input(data, &view, &ptr, &size)
    try:
        return CHOICE_REASONS[_classify(ptr, size)]
    finally:
        if release:
            PyBuffer_Release(&view)


# --- inflate_whole.pxi ----------------------------------------------------------

def _set_isal_inflate(bint enabled):
    """Test hook (private): let ISA-L inflate whole messages (where bundled), or leave
    every message to zlib, as set_inflate() does; returns the previous setting."""
    with _inflate_lock:
        previous = _whole_inflating
        _set_inflate_choice(enabled)
    return previous


def _isal_work_held():
    """Test hook (private): bytes the rings keep for ISA-L's inflate between messages
    (decoder state and window + output buffer; one per thread at most, per window)."""
    cdef Ring *ring
    cdef size_t total = 0
    for pset in list(_sets.values()):
        ring = &(<_ParameterSet>pset).ring
        _lock(ring.mutex)
        total += ring.works.count * (fd_whole_inflater_size() + sizeof(WholeWork))
        total += _shelved_bytes(&ring.works)
        _unlock(ring.mutex)
    return total


def _isal_inflated():
    """Test hook (private): messages ISA-L inflated so far, all rings together."""
    cdef unsigned long long total = 0
    for pset in list(_sets.values()):
        total += (<_ParameterSet>pset).ring.whole_messages
    return total


# --- engines.pxi (zlib_ng.h's level table) --------------------------------------

cdef extern from "extension/engine/seam.h":
    ctypedef struct fd_level_config:
        int engine_level, good, lazy, nice, chain, hash3
    fd_level_config FD_LEVELS[10][3]
    int fd_level_class(int window_bits, int mem_level)


def _level_config(int level, int window_bits=15, int mem_level=8):
    """Test hook (private): the bundled zlib-ng's tuning of ``level`` (0-9) at
    ``window_bits`` and ``mem_level``: (engine level, good, lazy, nice, chain, 3-byte
    hash)."""
    if not 0 <= level <= 9 or not 9 <= window_bits <= 15 or not 1 <= mem_level <= 9:
        raise ValueError(f"level must be in 0..9, window bits in 9..15 and memLevel in "
                         f"1..9, got {level}, {window_bits}, {mem_level}")
    c = FD_LEVELS[level][fd_level_class(window_bits, mem_level)]
    return (c.engine_level, c.good, c.lazy, c.nice, c.chain, c.hash3)


def _set_level_config(int level, tuple config):
    """Test hook (private): tune ``level`` (1-9) of the bundled zlib-ng with ``config``,
    as _level_config() gives it, at every window and memLevel, for the streams made from now on (the
    level frontier, benchmarks/levels.py); returns the previous one at window 15. Set
    before any compressor of that level exists: streams already made keep theirs."""
    if not 1 <= level <= 9:
        raise ValueError(f"level must be in 1..9, got {level}")
    previous = _level_config(level)
    engine_level, good, lazy, nice, chain, hash3 = config
    if not 1 <= engine_level <= 9:
        raise ValueError(f"engine level must be in 1..9, got {engine_level}")
    for c in range(3):
        FD_LEVELS[level][c].engine_level = engine_level
        FD_LEVELS[level][c].good = good
        FD_LEVELS[level][c].lazy = lazy
        FD_LEVELS[level][c].nice = nice
        FD_LEVELS[level][c].chain = chain
        FD_LEVELS[level][c].hash3 = 1 if hash3 else 0
    return previous


cdef extern from "extension/engine/seam.h":
    int fd_set_isal_deflating(int on)


def _set_isal_deflate(bint enabled):
    """Test hook (private): with False, zlib-ng compresses every level, ISA-L none (where
    ISA-L is bundled); returns the previous setting. Set before any compressor of an
    ISA-L level exists."""
    return bool(fd_set_isal_deflating(1 if enabled else 0)) and bool(FD_ISAL)
