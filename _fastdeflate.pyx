# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: auto_pickle=False, embedsignature=True
# cython: freethreading_compatible=True
"""The permessage-deflate (RFC 7692) codec over its engines' C APIs (zlib or zlib-ng,
and ISA-L where bundled).

A busy object keeps a live stream, reset (never re-created) between messages; an idle
one keeps only its window. Output buffers and scratch are shared per parameter set.
Input is read in place through the buffer protocol; the GIL is released around engine
calls on large inputs; a lock per object serialises threads sharing it. The parts
below, one concern each, are listed in reading order; docs/explanation/contributing.md maps them.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_CheckExact,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.mem cimport PyMem_RawCalloc, PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from cpython.ref cimport PyObject, Py_INCREF, Py_REFCNT, Py_XDECREF
from cpython.time cimport PyTime_MonotonicRaw, PyTime_t
from cpython.weakref cimport PyWeakref_NewRef
from libc.string cimport memchr, memcmp, memcpy, memmove, memset
from libc.limits cimport UINT_MAX
from libc.stdint cimport SIZE_MAX

cdef extern from "Python.h":
    Py_ssize_t PY_SSIZE_T_MAX

from fastdeflate._errors import DecompressionError, DeflateError, MessageTooBig
from fastdeflate._forksafe import free_in_child
import os
import threading

import fastdeflate._params as _floor  # (compress once's constants: compress_once.pxi)
from fastdeflate._params import (
    MAX_STREAMS_PER_MESSAGE as _MAX_STREAMS,
    TOO_MANY_STREAMS_MESSAGE,
    compressor_args,
    DEFAULT_LIVE_STATES,
    DEFAULT_PARK_AFTER,
    decompressor_args,
    inflate_arg,
    live_states_arg,
    max_size_arg,
    not_a_buffer,
    park_after_arg,
    tail_arg,
)


# The parts, in reading order (extension/):
#   engines.pxi        the engines as the codec sees them: zlib's API and the engine seam
#                      (its C: engine/seam.h, zlib_ng.h, isal_deflate.h, isal_inflate.h)
#   basics.pxi         sizes, result codes, knobs, output buffers, locks, input, errors
#   test_hooks.pxi     test hooks: named points and allocation failures, in the test
#                      build only (test_build/; default_build/: none, see setup.py)
#   policy_host.pxi    what compress once's policy needs from the extension (its plan)
#   ../fastdeflate/_compress_once_policy.py
#                      compress once's policy, both implementations' (pure-Python syntax)
#   ownership.pxi      who owns what: tokens that never repeat, shelves of spares
#   rings.pxi          rings of live streams per parameter set; claim, settle, lending
#   parking.pxi        idle objects parked, the sweeper, fork, live_states(), traffic
#   compress_once.pxi  one message to many compressors: the locks and states around the policy
#   what_pays.pxi      compress what pays: which messages go out uncompressed
#   deflate.pxi        a compressor's stream driven as the stdlib drives zlib's deflate
#   inflate.pxi        a decompressor's stream driven as the stdlib drives zlib's inflate
#   inflate_whole.pxi  whole messages on the message engine (ISA-L), its work buffers
#   compressor.pxi     class Compressor
#   decompressor.pxi   class Decompressor
#   test_entries.pxi   the test build's entry points (switches and counts for tests)
include "extension/engines.pxi"
include "extension/basics.pxi"
include "test_hooks.pxi"  # (test_build/ or default_build/)
include "extension/policy_host.pxi"
include "fastdeflate/_compress_once_policy.py"
include "extension/ownership.pxi"
include "extension/rings.pxi"
include "extension/parking.pxi"
include "extension/compress_once.pxi"
include "extension/what_pays.pxi"
include "extension/deflate.pxi"
include "extension/inflate.pxi"
include "extension/inflate_whole.pxi"
include "extension/compressor.pxi"
include "extension/decompressor.pxi"
include "test_entries.pxi"  # (test_build/ or default_build/)
