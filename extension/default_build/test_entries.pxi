# Test entry points, default build: none (included last from _fastdeflate.pyx, found on
# the include path setup.py sets; FASTDEFLATE_TEST_HOOKS=1 builds
# extension/test_build/test_entries.pxi instead).
