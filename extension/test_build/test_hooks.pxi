# Test hooks (private, included from _fastdeflate.pyx): named points where a test runs its
# own code in the middle of a call, and allocation failures injected at a chosen request.
# Both cost one comparison per use when unused. The pure-Python fallback has the same two
# hooks where it has the same paths (fastdeflate/_fallback/testing.py).

# The hook is read and swapped under a lock of its own (a thread calling it must never
# take a reference to one another thread has just dropped); _hooked, a C value, spares
# every point the lock while no hook is set. Code runs under that lock only to copy a
# reference, so any thread may wait for it, a ring lock's holder included.
cdef list _hook_slot = [None]  # [the hook or None]; the list is never rebound
cdef bint _hooked = False
cdef fd_lock_t _hook_mutex = fd_lock_new()
if _hook_mutex == NULL:
    raise MemoryError("cannot allocate a lock")


def _set_test_hook(hook):
    """Test hook (private): call ``hook(point)`` at the named points of the shared-state
    machinery (``"claim"``, ``"settle"``, ``"park"``, ``"live_states"`` just before a ring
    lock is taken, ``"claim locked"`` just after; ``"isal work"`` once a decompressor's
    call holds one of ISA-L's work buffers; ``"follow"``, ``"adopt"``, ``"give_window"``,
    ``"committed"`` on the compress-once and broadcast paths, ``"leader held"`` where a
    follower holds its leader under the ring lock), from whichever thread is there;
    ``None`` removes it. Returns the previous hook. What the hook raises propagates from
    the points a call can fail at (``"follow"``, ``"adopt"``, ``"give_window"``,
    ``"committed"``) and is reported as unraisable from the others."""
    global _hooked
    _lock(_hook_mutex)
    previous = _hook_slot[0]  # (held past the swap: the slot's is never the last)
    _hook_slot[0] = hook
    _hooked = hook is not None
    _unlock(_hook_mutex)
    return previous


cdef object _hook_now():
    """The hook set now, or None (a reference of the caller's own)."""
    _lock(_hook_mutex)
    hook = _hook_slot[0]
    _unlock(_hook_mutex)
    return hook


cdef inline int _at(str point) except -1:
    """A test hook point where the hook's exception propagates."""
    if _hooked:
        hook = _hook_now()
        if hook is not None:
            hook(point)
    return 0


cdef void _at_quietly(str point) noexcept:
    """A test hook point inside code that cannot fail (Cython reports what the hook
    raises as unraisable)."""
    if _hooked:
        hook = _hook_now()
        if hook is not None:
            hook(point)


# A gate at a named point inside a section that runs without the GIL: while armed, the
# first call to reach it waits there (up to a timeout) until another thread opens it
# from Python code, which that thread can run only if the waiting call released the
# GIL. Its state is read and written under _hook_mutex; the wait is on a semaphore
# (a PyThread lock, which another thread may release), held closed while none waits.
cdef extern from "pythread.h":
    ctypedef void *PyThread_type_lock
    ctypedef enum PyLockStatus:
        PY_LOCK_FAILURE, PY_LOCK_ACQUIRED, PY_LOCK_INTR
    PyThread_type_lock PyThread_allocate_lock() noexcept
    int PyThread_acquire_lock(PyThread_type_lock, int) noexcept nogil
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock, long long, int) noexcept nogil
    void PyThread_release_lock(PyThread_type_lock) noexcept nogil

cdef enum:
    GATE_OUTPUT_COPY = 1  # the named points inside sections without the GIL
cdef dict _GATE_POINTS = {"output copy": GATE_OUTPUT_COPY}
cdef tuple _GATE_STATES = ("unarmed", "armed", "waiting", "opened", "timed out")
cdef enum:
    GATE_UNARMED, GATE_ARMED, GATE_WAITING, GATE_OPENED, GATE_TIMED_OUT
cdef int _gate_point = 0
cdef int _gate_state = GATE_UNARMED
cdef long long _gate_timeout_us = 0
cdef PyThread_type_lock _gate_semaphore = PyThread_allocate_lock()
if _gate_semaphore == NULL:
    raise MemoryError("cannot allocate a lock")
PyThread_acquire_lock(_gate_semaphore, 1)  # (closed)


cdef void _at_nogil(int point) noexcept nogil:
    """The gate's point ``point``: wait there if the gate is armed for it."""
    global _gate_state
    cdef bint waits
    cdef PyLockStatus status
    fd_lock_wait(_hook_mutex)
    waits = _gate_point == point and _gate_state == GATE_ARMED
    if waits:
        _gate_state = GATE_WAITING
    fd_unlock(_hook_mutex)
    if not waits:
        return
    status = PyThread_acquire_lock_timed(_gate_semaphore, _gate_timeout_us, 0)
    fd_lock_wait(_hook_mutex)
    _gate_state = GATE_OPENED if status == PY_LOCK_ACQUIRED else GATE_TIMED_OUT
    fd_unlock(_hook_mutex)


def _arm_nogil_gate(point, double timeout=0.0):
    """Test gate (private): the next call to reach ``point`` (``"output copy"``: a large
    output about to be copied into its bytes object, with the GIL released) waits there
    until _open_nogil_gate() or ``timeout`` seconds; ``None`` disarms. Re-arming resets
    it."""
    global _gate_point, _gate_state, _gate_timeout_us
    cdef int which = 0 if point is None else _GATE_POINTS[point]
    _lock(_hook_mutex)
    PyThread_acquire_lock(_gate_semaphore, 0)  # (closed again, if an opening came late)
    _gate_point = which
    _gate_state = GATE_UNARMED if point is None else GATE_ARMED
    _gate_timeout_us = <long long>(timeout * 1e6)
    _unlock(_hook_mutex)


def _open_nogil_gate():
    """Test gate (private): let the call waiting at the gate go on; False if none waits."""
    global _gate_state
    cdef bint opens
    _lock(_hook_mutex)
    opens = _gate_state == GATE_WAITING
    if opens:
        _gate_state = GATE_OPENED
        PyThread_release_lock(_gate_semaphore)
    _unlock(_hook_mutex)
    return opens


def _nogil_gate_state():
    """Test gate (private): "unarmed", "armed", "waiting", "opened" or "timed out"."""
    return _GATE_STATES[_gate_state]


cdef extern from *:
    """
    /* Allocation failures on request, for tests: while armed, the n-th memory request of
       the arming thread (malloc, calloc or realloc, in any of Python's three allocator
       domains: objects, PyMem and PyMem_Raw, which zlib's allocations go through here)
       returns NULL; every other request goes to the allocator that was in place. Other
       threads are not counted. The hooks are put in place at the first arming and stay
       (passing every request through): they are swapped in once, without a lock, as
       tracemalloc does, and never read their context pointer, so a thread that sees the
       swap half done still reaches a working allocator. */
    static PyMemAllocatorEx fd_fault_previous[3];
    static unsigned long fd_fault_thread = 0;
    static Py_ssize_t fd_fault_target = 0;  /* the request that fails (1-based); 0: none */
    static Py_ssize_t fd_fault_count = 0;   /* requests counted so far */
    static int fd_fault_fired = 0;

    static int fd_fault_now(void) {
        if (fd_fault_target == 0 || PyThread_get_thread_ident() != fd_fault_thread)
            return 0;
        if (++fd_fault_count != fd_fault_target)
            return 0;
        fd_fault_fired = 1;
        return 1;
    }
    #define FD_FAULT_HOOKS(i) \
        static void *fd_fault_malloc_##i(void *ctx, size_t size) { \
            PyMemAllocatorEx *p = &fd_fault_previous[i]; \
            return fd_fault_now() ? NULL : p->malloc(p->ctx, size); } \
        static void *fd_fault_calloc_##i(void *ctx, size_t n, size_t size) { \
            PyMemAllocatorEx *p = &fd_fault_previous[i]; \
            return fd_fault_now() ? NULL : p->calloc(p->ctx, n, size); } \
        static void *fd_fault_realloc_##i(void *ctx, void *ptr, size_t size) { \
            PyMemAllocatorEx *p = &fd_fault_previous[i]; \
            return fd_fault_now() ? NULL : p->realloc(p->ctx, ptr, size); } \
        static void fd_fault_free_##i(void *ctx, void *ptr) { \
            PyMemAllocatorEx *p = &fd_fault_previous[i]; \
            p->free(p->ctx, ptr); }
    FD_FAULT_HOOKS(0)
    FD_FAULT_HOOKS(1)
    FD_FAULT_HOOKS(2)

    static int fd_fault_installed = 0;

    /* 0, or -1 if the hooks put in place earlier were replaced since (tracemalloc
       started after them and stopped before the arming, say): arming would do nothing. */
    static int fd_fault_arm(Py_ssize_t target) {
        static const PyMemAllocatorDomain domains[3] = {
            PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};
        PyMemAllocatorEx hooks[3] = {
            {NULL, fd_fault_malloc_0, fd_fault_calloc_0, fd_fault_realloc_0, fd_fault_free_0},
            {NULL, fd_fault_malloc_1, fd_fault_calloc_1, fd_fault_realloc_1, fd_fault_free_1},
            {NULL, fd_fault_malloc_2, fd_fault_calloc_2, fd_fault_realloc_2, fd_fault_free_2}};
        PyMemAllocatorEx current;
        int i;
        fd_fault_target = 0;
        for (i = 0; i < 3; i++) {
            PyMem_GetAllocator(domains[i], &current);
            if (current.malloc == hooks[i].malloc)
                continue;
            if (fd_fault_installed)
                return -1;
            fd_fault_previous[i] = current;
            PyMem_SetAllocator(domains[i], &hooks[i]);
        }
        fd_fault_installed = 1;
        fd_fault_thread = PyThread_get_thread_ident();
        fd_fault_count = 0;
        fd_fault_fired = 0;
        fd_fault_target = target;
        return 0;
    }
    static void fd_fault_disarm(void) { fd_fault_target = 0; }
    """
    int fd_fault_arm(Py_ssize_t target) nogil
    void fd_fault_disarm() nogil
    Py_ssize_t fd_fault_count
    bint fd_fault_fired


def _fail_allocation(Py_ssize_t n):
    """Test hook (private): make the ``n``-th memory request of this thread from now on
    (1-based; Python objects, PyMem and PyMem_Raw, zlib's allocations included) fail,
    as if the system were out of memory; every other request succeeds. ``0`` disarms
    and returns ``(requests counted, whether the n-th failed)``, else returns None.
    Other threads' requests are not counted. Works for the fallback too (the stdlib's
    zlib allocates through PyMem_Raw)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    if n == 0:
        fd_fault_disarm()
        return fd_fault_count, fd_fault_fired
    if fd_fault_arm(n) != 0:
        raise RuntimeError("the allocation hooks were replaced since they were put in place "
                           "(tracemalloc started before and stopped after?)")


# --- ISA-L's own stateful inflate, output taken in small chunks (tests/test_isal_inflate.py) --

cdef extern from *:
    """
    /* Test hook: a whole stream through ISA-L's stateful isal_inflate(), the output room
       handed over out_chunk bytes at a time, as a caller with a small buffer would. Each
       chunk's end is where the decoder's output can run out, inside a block or just
       before its end (intel/isa-l#316, fixed in 2.32.0: on aarch64 a block ending as the
       output ran out was taken for the final one when crc_flag was set). Returns ISA-L's
       error code (< 0), 0 at the stream's end (ISAL_BLOCK_FINISH), 1 if a call took no
       input and gave no output before it (the input ended early), 2 if the output would
       pass out_cap. FD_ISAL 0: nothing to call (-100). */
    #if FD_ISAL
    static int fd_test_isal_inflate_chunked(const unsigned char *in, size_t in_size,
                                            int crc_flag, int hist_bits, unsigned char *out,
                                            size_t out_cap, size_t out_chunk,
                                            size_t *produced, size_t *calls) {
        struct inflate_state *s = (struct inflate_state *)PyMem_RawMalloc(sizeof(*s));
        size_t total = 0, room, got;
        uint32_t in_before;
        int rc = 0;
        *calls = 0;
        if (s == NULL)
            return -101;
        isal_inflate_init(s);
        s->crc_flag = (uint32_t)crc_flag;
        s->hist_bits = (uint32_t)hist_bits;
        s->next_in = (uint8_t *)in;
        s->avail_in = (uint32_t)in_size;
        for (;;) {
            room = out_cap - total < out_chunk ? out_cap - total : out_chunk;
            s->next_out = out + total;
            s->avail_out = (uint32_t)room;
            in_before = s->avail_in;
            rc = isal_inflate(s);
            fd_after_isal();
            ++*calls;
            got = room - s->avail_out;
            total += got;
            if (rc < 0)
                break;
            if (s->block_state == ISAL_BLOCK_FINISH) {
                rc = 0;
                break;
            }
            if (got == 0 && s->avail_in == in_before) {
                rc = room == 0 ? 2 : 1;
                break;
            }
        }
        *produced = total;
        PyMem_RawFree(s);
        return rc;
    }
    #else
    static int fd_test_isal_inflate_chunked(const unsigned char *in, size_t in_size,
                                            int crc_flag, int hist_bits, unsigned char *out,
                                            size_t out_cap, size_t out_chunk,
                                            size_t *produced, size_t *calls) {
        (void)in; (void)in_size; (void)crc_flag; (void)hist_bits; (void)out;
        (void)out_cap; (void)out_chunk;
        *produced = *calls = 0;
        return -100;
    }
    #endif
    """
    int fd_test_isal_inflate_chunked(const unsigned char *data, size_t size, int crc_flag,
                                     int hist_bits, unsigned char *out, size_t out_cap,
                                     size_t out_chunk, size_t *produced, size_t *calls)


def _isal_inflate_chunked(data, Py_ssize_t out_chunk, int wbits=-15,
                          Py_ssize_t max_size=1 << 24):
    """Test hook (private, extension only): ``data`` decoded by ISA-L's own stateful
    ``isal_inflate()`` (not fastdeflate's message path), given ``out_chunk`` bytes of
    output room per call. ``wbits`` as zlib's: -8..-15 raw deflate, 8..15 a zlib stream
    (ISA-L checks its Adler-32). Returns ``(output, calls)``; ``RuntimeError`` if ISA-L
    refuses the data (its code in the message), the input ends before the stream does, the
    output would pass ``max_size``, or the build has no ISA-L."""
    cdef const unsigned char[::1] view = memoryview(data).cast("B")
    cdef int crc_flag, hist_bits, rc
    cdef size_t produced = 0, calls = 0
    if out_chunk < 1 or max_size < 0:
        raise ValueError("out_chunk must be >= 1 and max_size >= 0")
    if -15 <= wbits <= -8:
        crc_flag, hist_bits = 0, -wbits  # ISAL_DEFLATE
    elif 8 <= wbits <= 15:
        crc_flag, hist_bits = 3, wbits  # ISAL_ZLIB
    else:
        raise ValueError(f"wbits {wbits}: -8..-15 (raw) or 8..15 (zlib)")
    out = bytearray(max_size)
    cdef unsigned char[::1] room = out
    cdef const unsigned char *src = &view[0] if view.shape[0] else NULL
    cdef unsigned char *dst = &room[0] if max_size else NULL
    rc = fd_test_isal_inflate_chunked(src, <size_t>view.shape[0], crc_flag, hist_bits, dst,
                                      <size_t>max_size, <size_t>out_chunk, &produced, &calls)
    if rc == -100:
        raise RuntimeError("this build has no ISA-L")
    if rc == -101:
        raise MemoryError()
    if rc != 0:
        what = {1: "the input ended before the stream did",
                2: f"the output would pass max_size ({max_size})"}.get(
                    rc, f"isal_inflate returned {rc}")
        raise RuntimeError(f"ISA-L: {what}, after {produced} bytes of output in {calls} "
                           f"calls of {out_chunk} bytes")
    return bytes(room[:produced]), calls
