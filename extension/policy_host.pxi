# What compress once's policy (fastdeflate/_compress_once_policy.py, included next by
# _fastdeflate.pyx) needs from the extension before it: its plan, the references it
# holds while a ring lock is taken, a call's traffic, how it makes a weak reference (the
# rest, which needs the policy's classes and the Compressor, is in compress_once.pxi).
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef enum:
    HELD_MAX = 33  # the entries a search meets (KEPT_MAX at most: _remember), and the one
                   # it takes (KEPT_MAX + 1 <= HELD_MAX: checked in compress_once.pxi)


cdef struct Traffic:  # one call's, for its ring's counters (see COUNT_*: rings.pxi)
    size_t into
    size_t out
    bint message
    bint shared
    int adopted  # compress once: a follower took its leader's state (the policy's ADOPTED_*)


cdef struct _Plan:  # what _find_led decided, and the leaders it looked at
    bint follow
    bint seen
    bint start_over
    bint cohort
    PyObject *held[HELD_MAX]  # strong references, dropped after the ring lock
    int count


cdef inline void _hold(_Plan *plan, object obj) noexcept:
    """Keep a reference to ``obj`` on ``plan`` (ring lock held): a reference dropped under
    the lock is never a leader's last (its finalizer would run there)."""
    if obj is not None and plan.count < HELD_MAX:
        Py_INCREF(obj)
        plan.held[plan.count] = <PyObject *>obj
        plan.count += 1


cdef inline void _release_held(_Plan *plan) noexcept:
    """Drop what ``plan`` holds (after the ring lock is released: a finalizer may run)."""
    cdef int i
    for i in range(plan.count):
        Py_XDECREF(plan.held[i])
    plan.count = 0


cdef inline object _weak(object obj):
    return PyWeakref_NewRef(obj, None)
