# Test hooks (private, included from _fastdeflate.pyx): named points where a test runs its
# own code in the middle of a call, and allocation failures injected at a chosen request.
# Both cost one comparison per use when unused. The pure-Python fallback has the same two
# hooks where it has the same paths (fastdeflate/_pure.py).

cdef object _test_hook = None


def _set_test_hook(hook):
    """Test hook (private): call ``hook(point)`` at the named points of the shared-state
    machinery (``"claim"``, ``"settle"``, ``"park"``, ``"live_states"`` just before a ring
    lock is taken, ``"claim locked"`` just after; ``"isal work"`` once a decompressor's
    call holds one of ISA-L's work buffers; ``"follow"``, ``"adopt"``, ``"give_window"``,
    ``"committed"`` on the compress-once and broadcast paths), from whichever thread is there; ``None`` removes
    it. Returns the previous hook. What the hook raises propagates from the points a call
    can fail at (``"follow"``, ``"adopt"``, ``"give_window"``, ``"committed"``) and is
    reported as unraisable from the others."""
    global _test_hook
    previous, _test_hook = _test_hook, hook
    return previous


cdef inline int _at(str point) except -1:
    """A test hook point where the hook's exception propagates."""
    if _test_hook is not None:
        _test_hook(point)
    return 0


cdef void _at_quietly(str point) noexcept:
    """A test hook point inside code that cannot fail (Cython reports what the hook
    raises as unraisable)."""
    if _test_hook is not None:
        _test_hook(point)


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
