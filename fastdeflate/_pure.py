"""Pure-Python fallback: the RFC 7692 codec over the stdlib `zlib` module.

Same classes, parameters, results and exceptions as the compiled
``fastdeflate._fastdeflate``; used when the extension is missing or
``FASTDEFLATE_PURE=1`` is set.
"""

from __future__ import annotations

# The parts, in reading order (fastdeflate/_fallback/, named as extension/'s parts):
#   engines.py        the stdlib's zlib at every level; engines()
#   basics.py         the sync flush's tail, the GIL knob, input as buffers, __init__'s lock
#   testing.py        test hooks: named points (private)
#   rings.py          no rings here: the settings, validated and kept; the history ids
#   parking.py        nothing parked here: live_states() (empty), the traffic counters
#   compress_once.py  one message to many compressors: the policy (_compress_once_policy.py)
#                     run as Python, its lock, host functions and counters
#   compressor.py     class Compressor
#   decompressor.py   class Decompressor
#   test_entries.py   compress once's switches and counts for tests (private)
# Exported: the public names (__all__), and the private hooks tests and status() call.
from ._fallback.engines import ENGINE, INFLATE_ENGINE, ZLIB_VERSION, engines
from ._fallback.basics import _set_release_gil_always as _set_release_gil_always
from ._fallback.testing import _set_test_hook as _set_test_hook
from ._fallback.rings import (
    _inflate_choice_now as _inflate_choice_now,
    inflate_engine,
    set_inflate,
    set_live_states,
    set_park_after,
)
from ._fallback.parking import _traffic as _traffic, live_states
from ._fallback.compress_once import (
    _compress_once_counts as _compress_once_counts,
    _forget_kept as _forget_kept,
    _start_over_budget as _start_over_budget,
    set_start_over_budget as set_start_over_budget,
)
from ._fallback.compressor import Compressor
from ._fallback.decompressor import Decompressor
from ._fallback.test_entries import (
    _kept_messages as _kept_messages,
    _quiet_sets as _quiet_sets,
    _set_sharing as _set_sharing,
    _start_over_state as _start_over_state,
)

# The classes' home is this module, as before the parts (their repr, and tools that find
# fastdeflate's codec objects by module name: benchmarks/fdbench/library_table.py).
Compressor.__module__ = Decompressor.__module__ = __name__

__all__ = ["Compressor", "Decompressor", "ENGINE", "INFLATE_ENGINE", "ZLIB_VERSION", "engines", "live_states",
           "set_live_states", "set_park_after", "set_inflate", "inflate_engine"]
