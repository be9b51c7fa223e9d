"""The settings the extension keeps beside its rings (set_live_states, set_park_after,
set_inflate, inflate_engine) and the history ids; the fallback has no rings.

The extension's rings share live zlib streams between the codec objects of one
parameter set; here each codec object keeps its own stdlib zlib object, so the settings
are validated and kept, and change nothing.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/rings.pxi``.)
"""

from __future__ import annotations

import itertools
import threading

from .._params import (
    DEFAULT_LIVE_STATES,
    DEFAULT_PARK_AFTER,
    inflate_arg,
    live_states_arg,
    park_after_arg,
)
from .engines import INFLATE_ENGINE
from .._forksafe import free_in_child

# What a compressor's peer's window holds, for compress once and broadcast(): a history
# id, never repeated (the extension's are tokens of its rings, Ring.tokens; here one
# counter for the process); 0 is an empty window.
_histories = itertools.count(1)
_live_limit = DEFAULT_LIVE_STATES
_park_after = DEFAULT_PARK_AFTER
_inflate_choice = "auto"
# a setter reads and replaces its setting in one step
_settings_lock = free_in_child(threading.Lock())


def set_live_states(limit: int) -> int:
    """Same interface as the extension's (validated, returns the previous limit); the
    fallback keeps one stdlib zlib object per codec object, so the limit changes
    nothing here."""
    global _live_limit
    live_states_arg(limit)
    with _settings_lock:
        previous, _live_limit = _live_limit, limit
    return previous


def set_park_after(seconds: float) -> float:
    """Same interface as the extension's (validated, returns the previous delay); the
    fallback never parks, so the delay changes nothing here."""
    global _park_after
    value = park_after_arg(seconds)
    with _settings_lock:
        previous, _park_after = _park_after, value
    return previous


def set_inflate(engine: str) -> str:
    """Same interface as the extension's (validated, returns the previous choice): the
    fallback decodes every message with the stdlib's zlib, whatever the choice."""
    global _inflate_choice
    inflate_arg(engine)
    with _settings_lock:
        previous, _inflate_choice = _inflate_choice, engine
    return previous


def inflate_engine() -> str:
    """What decompresses now: the stdlib's zlib."""
    return INFLATE_ENGINE


def _inflate_choice_now() -> str:
    """set_inflate()'s choice now (for status())."""
    return _inflate_choice
