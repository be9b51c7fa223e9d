# Test hooks, default build: none (included from _fastdeflate.pyx, found on the include
# path setup.py sets; FASTDEFLATE_TEST_HOOKS=1 builds extension/test_build/test_hooks.pxi
# instead). The named points the parts call cost nothing here: the C compiler drops them.


cdef inline int _at(str point) except -1:
    """A test hook point (the test build's): nothing in this build."""
    return 0


cdef inline void _at_quietly(str point) noexcept:
    """A test hook point that cannot fail (the test build's): nothing in this build."""
    pass


cdef enum:
    GATE_OUTPUT_COPY = 1  # the named points inside sections without the GIL


cdef inline void _at_nogil(int point) noexcept nogil:
    """A test gate inside a section without the GIL (the test build's): nothing here."""
    pass
