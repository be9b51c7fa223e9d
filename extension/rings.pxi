# The rings: live streams per parameter set, and how a call claims and settles its
# stream and lends scratch and buffers (the rules they keep: ownership.pxi).
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

# --- live streams: kept by the busy objects, the idle ones parked ------------------------
#
# A codec object holds a live z_stream only while it needs one. Between messages it stays
# linked, idle, in its parameter set's ring (most recently used first). A ring keeps up
# to ``_live_limit`` streams whatever happens; beyond that, an object that has been idle
# for ``_park_after`` is parked: its window (the last 2^w bytes of history, all the peer
# may refer to) is copied out and its stream ended, or handed over, reset, to an object
# that needs one. Objects used more often than that are busy and keep their streams, so
# a busy server runs every connection on a live stream. When a parked object is used
# again it gets a stream the same way and its window back (deflateSetDictionary /
# inflateSetDictionary). The peer never notices: a compressor's next message refers to
# the same history (or less), a decompressor's window holds the same bytes. So an idle
# connection costs its window, not a whole zlib state. Idle objects are parked when the
# ring is used (at most two per call) and by a daemon thread (the sweeper, started the
# first time a ring goes over its limit) when nothing is.
# While an object is linked, its ring's lock owns its stream, window and buffer.
#
# No GIL is assumed (the module declares itself free-threading compatible), so:
# - A finalizer never waits for a ring lock. A codec object can be freed in a thread
#   that holds its ring's lock already (its last reference dropped, or a collection run,
#   inside a locked region; a fork hook holding every ring lock), or that another ring
#   lock holder waits for (fork() takes the import lock after the fork hook took the
#   ring locks). Its holder is memory of its own (Holder, allocated with the object):
#   _release_holder releases it at once if the ring lock is free, and otherwise leaves
#   it on the ring's orphans, which the lock's next holder releases (_release_orphans:
#   every claim, settle, parking round and report).
# - No Python reference is dropped while a ring lock is held unless another one is
#   known to live on (compress once keeps the leaders it looks at until it unlocks).
# - Module-level objects are never rebound after import (settings are C values; the
#   test hook has a lock of its own); tests/test_no_gil.py checks the sources.
# - _sets only grows: a pset, once made, lives as long as the module (a ring's address
#   is held by every codec object of its parameter set), so a reference read from it
#   stays valid without its lock.

cdef struct Holder
cdef class Compressor


cdef enum:
    # Traffic counters (Ring.counts, added to under the ring lock the calls take anyway):
    # whole messages; bytes given to the calls; bytes they returned; messages a
    # compressor took from a leader (compress once)
    COUNT_MESSAGES = 0
    COUNT_IN = 1
    COUNT_OUT = 2
    COUNT_SHARED = 3
    COUNTS = 4


cdef struct FreeStream:
    z_stream *strm
    bint clean           # already reset: whoever takes it needs no reset
    bint inflating       # an inflate stream (else deflate)
    OutBuffer out        # the output buffer that came with a clean stream, or empty
    FreeStream *next


cdef struct Ring:
    fd_lock_t mutex
    Holder *head         # most recently used idle object
    Holder *tail         # least recently used: parked first
    FreeStream *free     # streams nobody holds, newest (warmest) first: given back
                         # by broadcast followers and by objects between messages
                         # that keep no window (no context takeover)
    Py_ssize_t live      # streams of this parameter set that exist (or are being made)
    unsigned long long tokens  # the last token handed out (_new_token; see ownership.pxi)
    Shelf spare          # empty output buffers of objects between messages (size: their
                         # capacity), taken by the next call of any object
    Shelf scratch        # streams' scratch (pending buffers or code tables) taken back
                         # at rest, lent to the next call (bundled zlib-ng)
    Holder *last         # the object of the last call (compared, never followed)
    unsigned long long counts[COUNTS]  # traffic of its objects so far (see COUNT_*)
    Shelf works          # the message engine's work (inflate rings; inflate_whole.pxi)
    unsigned long long whole_messages  # messages the message engine decoded (the rest: zlib)
    # compress once's counters that followers add to with their traffic: its
    # _ParameterSet's (_OnceState: unfollowed, shared_now, rejoined), set by its __cinit__
    Py_ssize_t *unfollowed
    Py_ssize_t *shared_now
    unsigned long long *rejoined
    Py_ssize_t parked_since_trim  # streams parked since the sweeper last trimmed
    Holder *orphans      # holders of objects freed while the ring lock was taken, for
                         # its next holder to release (_release_holder); fd_peek'd
    fd_lock_t orphans_mutex  # guards orphans alone, held only to push or take it: no
                             # code runs under it, so a finalizer may wait for it


cdef struct Holder:  # (pointers first, flags last: 88 bytes, allocated with its object)
    z_stream *strm       # the live stream, or NULL
    Ring *ring           # set by __init__
    Holder *prev
    Holder *next
    unsigned char *window  # the history kept while parked, or NULL
    OutBuffer out
    PyTime_t used        # when it was last linked (PyTime_MonotonicRaw, ns)
    Holder *orphan_next  # the next on its ring's orphans (its object is freed)
    uInt window_size
    unsigned char linked     # idle, in ring's list
    unsigned char inflating  # an inflate stream (else deflate)
    unsigned char cold   # another object of its ring was called after this one's last
                         # call (set by _claim): its state is likely out of cache
    unsigned char pinned  # its stream holds more than its window (a decompressor that
                          # ended a message inside a block): kept out of the idle list,
                          # as in a message, so never parked nor lent


cdef inline void _add_traffic(Ring *ring, Traffic *t) noexcept nogil:
    """Add a call's traffic to its ring's counters (ring lock held)."""
    if t == NULL:
        return
    ring.counts[COUNT_MESSAGES] += t.message
    ring.counts[COUNT_IN] += t.into
    ring.counts[COUNT_OUT] += t.out
    ring.counts[COUNT_SHARED] += t.shared
    if t.adopted:  # (compress once's, counted here: the call holds the lock anyway)
        ring.rejoined[0] += t.adopted == ADOPTED_BY_TAIL  # (as the policy's _adopted)
        ring.unfollowed[0] = 0  # sharing pays here: keep every message again
        ring.shared_now[0] += 1


cdef class _ParameterSet(_OnceState):
    """Owns one Ring (rings live as long as the module), and for compressors compress
    once's state (_OnceState, guarded by ring.mutex; see Compressor.compress)."""
    cdef Ring ring

    def __cinit__(self):
        self.ring.mutex = fd_lock_new()
        self.ring.orphans_mutex = fd_lock_new()
        if self.ring.mutex == NULL or self.ring.orphans_mutex == NULL:
            raise MemoryError("cannot allocate a lock")
        self.ring.unfollowed = &self.unfollowed
        self.ring.shared_now = &self.shared_now
        self.ring.rejoined = &self.rejoined


cdef dict _sets = {}  # key -> _ParameterSet; only ever added to (see "No GIL" above)
_sets_lock = threading.Lock()
cdef Py_ssize_t _live_limit = DEFAULT_LIVE_STATES
cdef PyTime_t _park_after = <PyTime_t>(DEFAULT_PARK_AFTER * 1e9)  # ns; 0: at once
cdef double _park_after_seconds = DEFAULT_PARK_AFTER
cdef bint _sweeper_started = False
_sweeper_lock = threading.Lock()
_sweeper_wake = threading.Event()
cdef bint _can_park = FD_CAN_PARK
cdef bint _pool_clean = True  # see _settle(); off only through _set_pooling() (tests)


def set_live_states(limit):
    """Set how many live zlib streams each parameter set keeps at most (default 16);
    returns the previous limit. Idle objects beyond it keep only their window."""
    global _live_limit
    live_states_arg(limit)
    previous, _live_limit = _live_limit, limit
    return previous


def set_park_after(seconds):
    """Set how long (seconds, default 10) an idle object keeps its stream once its
    parameter set has more than ``set_live_states()`` streams; returns the previous value.
    0 parks it as soon as it goes idle; ``math.inf`` never parks (every object keeps
    its stream, as stock zlib objects do)."""
    global _park_after, _park_after_seconds
    seconds = park_after_arg(seconds)
    previous = _park_after_seconds
    _park_after_seconds = seconds
    _park_after = <PyTime_t>(seconds * 1e9) if seconds < 1e9 else <PyTime_t>(1e18)
    _sweeper_wake.set()
    return previous


cdef _ParameterSet _set_for(object key):
    pset = _sets.get(key)
    if pset is None:
        with _sets_lock:
            pset = _sets.get(key)
            if pset is None:
                pset = _sets[key] = _ParameterSet()
    return <_ParameterSet>pset


cdef Ring *_ring_for(object key) except NULL:
    return &_set_for(key).ring


cdef inline void _unlink(Holder *h) noexcept nogil:
    cdef Ring *ring = h.ring
    if h.prev != NULL:
        h.prev.next = h.next
    else:
        ring.head = h.next
    if h.next != NULL:
        h.next.prev = h.prev
    else:
        ring.tail = h.prev
    h.prev = NULL
    h.next = NULL
    h.linked = False


cdef inline void _link_front(Holder *h) noexcept nogil:
    cdef Ring *ring = h.ring
    h.prev = NULL
    h.next = ring.head
    if ring.head != NULL:
        ring.head.prev = h
    else:
        ring.tail = h
    ring.head = h
    h.linked = True


cdef bint _save_window(Holder *h) noexcept nogil:
    """Copy ``h``'s window out of its stream into ``h.window``; False if it can't be
    (out of memory, a zlib without GetDictionary, or a stream ``pinned`` inside a
    block, whose state is more than its window): then ``h`` keeps its stream."""
    cdef uInt size = 0
    cdef int rc
    if not _can_park or h.pinned:
        return False
    rc = (fd_inflate_get_dictionary(h.strm, NULL, &size) if h.inflating
          else fd_deflate_window(h.strm, NULL, &size))
    if rc != Z_OK:
        return False
    PyMem_RawFree(h.window)
    h.window = NULL
    h.window_size = 0
    if size == 0:
        return True
    h.window = <unsigned char *>PyMem_RawMalloc(size)
    if h.window == NULL:
        return False
    if h.inflating:
        fd_inflate_get_dictionary(h.strm, h.window, &size)
    else:
        fd_deflate_window(h.strm, h.window, &size)
    h.window_size = size
    return True


cdef void _end_stream(Holder *h) noexcept nogil:
    """End and free ``h``'s stream (the ring's count is the caller's)."""
    _end_zstream(h.strm, h.inflating)
    PyMem_RawFree(h.strm)
    h.strm = NULL


cdef inline void _end_zstream(z_stream *strm, bint inflating) noexcept nogil:
    """inflateEnd() or deflateEnd(), and free the scratch lent to the stream, if any."""
    PyMem_RawFree(fd_scratch_of(strm, inflating))
    if inflating:
        inflateEnd(strm)
    else:
        fd_deflate_end(strm)


cdef inline void _free_buffer(OutBuffer *out) noexcept nogil:
    PyMem_RawFree(out.data)
    out.data = NULL
    out.size = 0
    out.capacity = 0


cdef enum:
    HAS_STREAM = 0    # the object's own stream, as it left it
    STOLEN = 1        # another object's stream: reset it, then restore the window
    NEED_NEW = 2      # none to take: create one (already counted in ring.live)
    CLEAN = 3         # a stream given back already reset: restore the window only


cdef int _claim(Holder *h, bint want, Traffic *traffic=NULL) noexcept:
    """Start of a call: take ``h`` out of its ring's idle list, so that its stream is its
    own until _settle(), and mark it cold if another object of the ring made the last
    call. If it has none and ``want``, lend it the least recently used
    idle object's (parking that one) when the ring is at its limit. If it has its own
    and ``want``, lend that a spare scratch of the ring's now, under the same lock
    (_lend_scratch() then has nothing to do). ``traffic``: a follower's message, counted
    under the same lock."""
    cdef Ring *ring = h.ring
    cdef Holder *victim
    cdef FreeStream *free
    cdef int outcome = HAS_STREAM
    _at_quietly("claim")
    _lock(ring.mutex)
    _release_orphans(ring)
    _at_quietly("claim locked")  # (tests only: stop a thread that holds a ring lock)
    _add_traffic(ring, traffic)
    h.cold = ring.last != h
    ring.last = h
    if h.linked:
        _unlink(h)
    if h.out.data == NULL and ring.spare.count > 0:
        h.out.data = <unsigned char *>_unshelve(&ring.spare, &h.out.capacity, NULL)
    if (h.strm != NULL and want and ring.scratch.count > 0
            and fd_scratch_of(h.strm, h.inflating) == NULL
            and fd_scratch_size(h.strm, h.inflating) != 0):
        fd_lend_scratch(h.strm, h.inflating,
                        <unsigned char *>_unshelve(&ring.scratch, NULL, NULL))
    elif h.strm == NULL and want and ring.free != NULL:
        free = ring.free
        ring.free = free.next
        h.strm = free.strm
        if h.out.data == NULL:
            h.out = free.out
        else:
            _free_buffer(&free.out)
        outcome = CLEAN if free.clean else STOLEN
        PyMem_RawFree(free)
    elif h.strm == NULL and want:
        victim = ring.tail
        if (ring.live >= _live_limit and victim != NULL
                and _idle_long(victim, PyTime_MonotonicRaw()) and _save_window(victim)):
            _unlink(victim)
            h.strm = victim.strm
            victim.strm = NULL
            _free_buffer(&victim.out)
            outcome = STOLEN
        else:
            ring.live += 1
            outcome = NEED_NEW
    _unlock(ring.mutex)
    return outcome


cdef void _settle(Holder *h, bint in_message, bint clean=False,
                  Traffic *traffic=NULL) noexcept:
    """End of a call: an object between messages goes back to its ring's idle list (most
    recently used first), and up to two objects idle for ``_park_after`` are parked if
    the ring has more streams than its limit; with ``_park_after`` 0 the object itself
    is parked at once then. One in a message, or ``pinned``, keeps its stream. A
    ``clean`` one (its stream just reset, no window to keep: no context takeover) gives
    its stream back to the ring at once, so the next caller of any object takes the
    warmest stream and a single thread needs only one, whatever the number of objects."""
    cdef Ring *ring = h.ring
    cdef bint over = False
    if ring == NULL:
        return
    if in_message or h.pinned:  # keeps its stream; a fragment's traffic is counted too
        if traffic != NULL and (traffic.into or traffic.out):
            _lock(ring.mutex)
            _add_traffic(ring, traffic)
            _unlock(ring.mutex)
        return
    _at_quietly("settle")
    _lock(ring.mutex)
    _release_orphans(ring)
    _add_traffic(ring, traffic)
    # Read under the lock only: an object this call did not claim (refused before that)
    # is linked, or was parked or lent its stream meanwhile by the sweeper or another
    # object's _claim (then it has none).
    if h.linked or h.strm == NULL:
        _unlock(ring.mutex)
        return
    _take_scratch(h)
    if clean and _pool_clean:
        if ring.live > _live_limit or not _push_free(h, True):
            _end_stream(h)
            ring.live -= 1
    elif ring.live > _live_limit and _park_after == 0 and _save_window(h):
        _end_stream(h)
        _free_buffer(&h.out)
        ring.live -= 1
    else:
        h.used = PyTime_MonotonicRaw()
        _link_front(h)
        _lend_buffer(h)
        if ring.live > _live_limit and _park_after > 0:
            _park_idle_in(ring, h.used, 2)
            over = ring.live > _live_limit
    _unlock(ring.mutex)
    if over and not _sweeper_started:
        _start_sweeper()


cdef inline void _take_scratch(Holder *h) noexcept nogil:
    """Take a stream's scratch back at rest, for its ring's next call (ring lock held);
    freed if the ring has enough."""
    cdef Ring *ring = h.ring
    cdef unsigned char *buf = fd_take_scratch(h.strm, h.inflating)
    if buf != NULL and not _shelve(&ring.scratch, buf, 0, 0):
        PyMem_RawFree(buf)


cdef int _lend_scratch(Holder *h) except -1:
    """Before a zlib call: lend a claimed object's stream its scratch if it needs one
    (bundled zlib-ng), a spare of its ring's or a new one."""
    cdef Ring *ring = h.ring
    cdef unsigned char *buf = NULL
    cdef size_t size = fd_scratch_size(h.strm, h.inflating)
    if size == 0 or fd_scratch_of(h.strm, h.inflating) != NULL:
        return 0
    _lock(ring.mutex)
    buf = <unsigned char *>_unshelve(&ring.scratch, NULL, NULL)
    _unlock(ring.mutex)
    if buf == NULL:
        buf = <unsigned char *>PyMem_RawMalloc(size)
        if buf == NULL:
            raise MemoryError("cannot allocate the " + (
                "inflate code tables" if h.inflating else "deflate pending buffer"))
    fd_lend_scratch(h.strm, h.inflating, buf)
    return 0


cdef inline void _lend_buffer(Holder *h) noexcept nogil:
    """Give an idle object's empty output buffer to its ring (ring lock held) for the
    next call of any object; freed if the ring has enough."""
    cdef Ring *ring = h.ring
    if h.out.data == NULL or h.out.size != 0:
        return
    if _shelve(&ring.spare, h.out.data, h.out.capacity, 0):
        h.out = OutBuffer(NULL, 0, 0)
    else:
        _free_buffer(&h.out)


cdef z_stream *_new_stream() noexcept nogil:
    """A zeroed z_stream on zlib's allocator hooks, or NULL if out of memory."""
    cdef z_stream *strm = <z_stream *>PyMem_RawMalloc(sizeof(z_stream))
    if strm != NULL:
        memset(strm, 0, sizeof(z_stream))
        strm.zalloc = _zalloc
        strm.zfree = _zfree
    return strm


cdef void _uncount(Ring *ring) noexcept:
    """Take back a stream counted by _claim() (NEED_NEW) that could not be made."""
    _lock(ring.mutex)
    ring.live -= 1
    _unlock(ring.mutex)


cdef bint _push_free(Holder *h, bint clean) noexcept nogil:
    """Put a claimed object's stream (with its output buffer, if ``clean``) at the
    front of its ring's free list (ring lock held); False if out of memory."""
    cdef Ring *ring = h.ring
    cdef FreeStream *free = <FreeStream *>PyMem_RawMalloc(sizeof(FreeStream))
    if free == NULL:
        return False
    free.strm = h.strm
    free.clean = clean
    free.inflating = h.inflating
    free.out = OutBuffer(NULL, 0, 0)
    if clean:
        free.out, h.out = h.out, free.out
    free.next = ring.free
    ring.free = free
    h.strm = NULL
    return True


cdef void _give_back_stream(Holder *h) noexcept:
    """Hand a claimed object's stream to its ring for anyone (its window is not needed:
    it is reset when taken), or end it if the ring already has more than its limit."""
    cdef Ring *ring = h.ring
    _lock(ring.mutex)
    if ring.live > _live_limit or not _push_free(h, False):
        _end_stream(h)
        ring.live -= 1
    _unlock(ring.mutex)
    _free_buffer(&h.out)


cdef void _drop_stream(Holder *h) noexcept:
    """End the stream of a claimed (unlinked) object, and count it out of its ring."""
    _end_stream(h)
    _lock(h.ring.mutex)
    h.ring.live -= 1
    _unlock(h.ring.mutex)


cdef Holder *_new_holder() except NULL:
    """A codec object's holder (zeroed: no ring, stream, window nor buffer yet)."""
    cdef Holder *h = <Holder *>PyMem_RawCalloc(1, sizeof(Holder))
    if h == NULL:
        raise MemoryError("cannot allocate a codec object")
    return h


cdef void _retire(Holder *h) noexcept nogil:
    """Unlink ``h``, end its stream and free it with its window and buffer (its ring's
    lock held, or no ring)."""
    cdef Ring *ring = h.ring
    if ring != NULL:
        if h.linked:
            _unlink(h)
        if h.strm != NULL:
            _end_stream(h)
            ring.live -= 1
    PyMem_RawFree(h.window)
    _free_buffer(&h.out)
    PyMem_RawFree(h)


cdef void _release_holder(Holder *h) noexcept:
    """For __dealloc__: release ``h`` (unlink, end the stream, free the window, the
    buffer and itself), at once if its ring's lock is free, else through the ring's
    orphans, which the lock's next holder releases. Never waits for the ring lock (see
    "No GIL" above): this thread may hold it, or be waited for by its holder."""
    cdef Ring *ring = h.ring
    if ring == NULL:
        _retire(h)
        return
    if fd_lock_try(ring.mutex):
        _retire(h)
        _release_orphans(ring)
        _unlock(ring.mutex)
        return
    _lock(ring.orphans_mutex)
    h.orphan_next = ring.orphans
    fd_poke(<void **>&ring.orphans, h)
    _unlock(ring.orphans_mutex)


cdef inline void _release_orphans(Ring *ring) noexcept:
    """Release the holders of objects freed while the ring lock was taken (ring lock
    held)."""
    if fd_peek(<void **>&ring.orphans) != NULL:
        _release_orphans_now(ring)


cdef void _release_orphans_now(Ring *ring) noexcept:
    cdef Holder *h
    cdef Holder *after
    _lock(ring.orphans_mutex)
    h = ring.orphans
    fd_poke(<void **>&ring.orphans, NULL)
    _unlock(ring.orphans_mutex)
    while h != NULL:
        after = h.orphan_next
        _retire(h)
        h = after
