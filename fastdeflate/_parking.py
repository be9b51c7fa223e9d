"""Waiting until idle objects are parked: for benchmarks, tools and tests."""

from __future__ import annotations

import time


def wait_until_parked(timeout: float, poll: float = 0.05) -> bool:
    """Wait until no parameter set of the compiled extension holds more live streams than
    its limit (``set_park_after()`` after their last use, the sweeper parks idle objects
    beyond it); False if ``timeout`` seconds passed first. The fallback keeps no streams
    between calls: True at once."""
    try:
        from . import _fastdeflate as ext
    except ImportError:
        return True
    deadline = time.monotonic() + timeout
    while ext._sets_over_limit():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True
