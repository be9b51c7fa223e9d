# Parking: idle objects beyond the live-state limit keep only their window; the sweeper,
# fork handling, live_states() and the traffic counters.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef inline bint _idle_long(Holder *h, PyTime_t now) noexcept nogil:
    """Whether linked ``h`` has been idle long enough to be parked."""
    return now - h.used >= _park_after


cdef extern from *:
    """
    /* glibc keeps the pages of freed heap chunks in the process (a zlib state at
       memLevel 5 is ~38 KiB, below its mmap threshold): malloc_trim() hands the whole
       free pages back to the system. Other C libraries' allocators give memory back by
       themselves or not at all; there, nothing to do. */
    #if defined(__GLIBC__) && !defined(FD_NO_MALLOC_TRIM)
    #include <malloc.h>
    static int fd_release_free_memory(void) { return malloc_trim(0); }
    #define FD_CAN_TRIM 1
    #else
    static int fd_release_free_memory(void) { return 0; }
    #define FD_CAN_TRIM 0
    #endif
    """
    int fd_release_free_memory() nogil
    bint FD_CAN_TRIM


cdef bint _trimming = FD_CAN_TRIM


def _release_free_memory():
    """If streams were parked since the last call: hand the freed pages back to the
    system (glibc's malloc_trim, without the GIL); returns whether it ran. The sweeper
    calls it after each round."""
    cdef Ring *ring
    cdef Py_ssize_t parked = 0
    if not _trimming:
        return False
    for pset in list(_sets.values()):
        ring = &(<_ParameterSet>pset).ring
        _lock(ring.mutex)
        parked += ring.parked_since_trim
        ring.parked_since_trim = 0
        _unlock(ring.mutex)
    if not parked:
        return False
    with nogil:
        fd_release_free_memory()
    return True


cdef Py_ssize_t _park_idle_in(Ring *ring, PyTime_t now, Py_ssize_t most) noexcept nogil:
    """Park up to ``most`` objects idle for ``_park_after``, least recently used first,
    while ``ring`` has more streams than its limit (ring lock held); returns how many."""
    cdef Holder *victim
    cdef Py_ssize_t parked = 0
    while (parked < most and ring.live > _live_limit and ring.tail != NULL
           and _idle_long(ring.tail, now) and _save_window(ring.tail)):
        victim = ring.tail
        _unlink(victim)
        _end_stream(victim)
        _free_buffer(&victim.out)
        ring.live -= 1
        parked += 1
    ring.parked_since_trim += parked
    return parked


def _park_idle(Py_ssize_t most=64):
    """Park the objects idle for ``set_park_after()`` beyond each ring's limit, up to
    ``most`` per ring; returns (parked, rings still over their limit). The sweeper calls
    it; tests call it to park at once."""
    cdef Ring *ring
    cdef Py_ssize_t parked = 0, over = 0
    cdef PyTime_t now = PyTime_MonotonicRaw()
    for pset in list(_sets.values()):
        ring = &(<_ParameterSet>pset).ring
        _at_quietly("park")
        _lock(ring.mutex)
        _release_orphans(ring)
        parked += _park_idle_in(ring, now, most)
        over += ring.live > _live_limit
        _unlock(ring.mutex)
    return parked, over


def _sets_over_limit():
    """How many parameter sets hold more live streams than the limit (idle objects there
    are parked after ``set_park_after()``; busy ones keep their streams)."""
    return _park_idle(0)[1]  # parks none


def _sweep_forever():
    """The sweeper thread: park idle objects every quarter of park_after (0.05 s to
    2.5 s), in batches so that the GIL is never held for long, then give the memory
    freed back to the system."""
    while True:
        try:
            _sweeper_wake.wait(min(max(_park_after_seconds / 4, 0.05), 2.5))
            _sweeper_wake.clear()
            while _park_idle(64)[0]:
                pass
            _release_free_memory()
        except Exception:  # out of memory in a round: objects stay live until the next
            pass


cdef void _start_sweeper() noexcept:
    """Start the sweeper thread once per process (again in a forked child)."""
    global _sweeper_started
    try:
        with _sweeper_lock:
            if not _sweeper_started:
                threading.Thread(target=_sweep_forever, name="fastdeflate-sweeper",
                                 daemon=True).start()
                _sweeper_started = True
    except BaseException:  # no thread (interpreter shutting down): calls still park
        pass


cdef list _held_for_fork = []


def _before_fork():
    """Take every ring's lock (and the lock that makes rings) before fork(), so that
    the child never starts with a lock held by a thread it does not have, nor with a
    ring half updated. Others hold a ring lock only for a few pointer updates, and wait
    for one without the GIL. Until the locks are released after the fork, a codec object
    freed (here, in another fork hook, or in a thread that holds the import lock, which
    fork() takes next) is left to the rings' orphans: _release_holder never waits."""
    _sets_lock.acquire()
    try:
        psets = list(_sets.values())  # allocated before any ring lock is taken
        _held_for_fork.append(psets)
    except BaseException:
        _sets_lock.release()
        raise
    for pset in psets:
        _lock((<_ParameterSet>pset).ring.mutex)


cdef void _release_fork_locks():
    cdef Ring *ring
    if not _held_for_fork:  # _before_fork failed: nothing held
        return
    for pset in _held_for_fork.pop():
        ring = &(<_ParameterSet>pset).ring
        _release_orphans(ring)
        _unlock(ring.mutex)
    _sets_lock.release()


def _after_fork_in_parent():
    _release_fork_locks()


def _after_fork_in_child():
    """The child starts with its rings' locks free, no sweeper yet, no message kept
    for compress once, nor a start-over to catch up with (a kept message's leader is the
    parent's, whose lock another thread of the parent may have held at the fork) and no ISA-L work buffer (they hold
    the parent's decoded messages)."""
    global _sweeper_started, _sweeper_lock, _sweeper_wake
    cdef Ring *ring
    cdef fd_lock_t fresh
    for pset in list(_held_for_fork[len(_held_for_fork) - 1] if _held_for_fork else ()):
        # a thread of the parent's may have held an orphans lock at the fork (only for
        # a push: the list itself is whole either way): the child's is a new one
        ring = &(<_ParameterSet>pset).ring
        fresh = fd_lock_new()
        if fresh != NULL:
            ring.orphans_mutex = fresh  # (the old one is left: it may be locked)
    _release_fork_locks()
    for pset in list(_sets.values()):
        ring = &(<_ParameterSet>pset).ring
        _empty_shelf(&ring.works, _free_whole_work)
        (<_ParameterSet>pset).clear([])  # (a kept leader is the parent's too)
    _sweeper_started = False
    _sweeper_lock = threading.Lock()
    _sweeper_wake = threading.Event()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def live_states():
    """``{(kind, parameters...): (live streams, idle objects holding one)}``: for tests
    and monitoring."""
    cdef Ring *ring
    cdef Holder *h
    cdef Py_ssize_t idle, live
    report = {}
    for key, pset in list(_sets.items()):
        ring = &(<_ParameterSet>pset).ring
        _at_quietly("live_states")
        # Nothing is allocated while a ring lock is held: an allocation can run a
        # collection, and a finalizer then anything (a codec object's __dealloc__ would
        # leave its holder to the orphans, released here only at the next report).
        _lock(ring.mutex)
        _release_orphans(ring)
        idle = 0
        h = ring.head
        while h != NULL:
            idle += 1
            h = h.next
        live = ring.live
        _unlock(ring.mutex)
        report[key] = (live, idle)
    return report


def _traffic():
    """``{(kind, parameters...): (messages, bytes in, bytes out, shared)}``: what the
    objects of each parameter set have done since the process started (a call's counts
    are added when it ends, those of a message in fragments by its last call at the
    latest). For ``fastdeflate.status()``."""
    cdef Ring *ring
    cdef unsigned long long counts[COUNTS]
    report = {}
    for key, pset in list(_sets.items()):
        ring = &(<_ParameterSet>pset).ring
        _lock(ring.mutex)
        memcpy(counts, ring.counts, sizeof(counts))
        _unlock(ring.mutex)
        report[key] = (counts[COUNT_MESSAGES], counts[COUNT_IN], counts[COUNT_OUT],
                       counts[COUNT_SHARED])
    return report
