"""Test hooks (private): compress once's switches and counts for tests.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/test_build/test_entries.pxi``, in its
test build only.)
"""

from __future__ import annotations

from . import compress_once
from .compress_once import _lock, _sets, policy


def _set_sharing(enabled: bool) -> bool:
    """Test hook (private): False makes every compressor compress every message itself;
    returns the previous setting."""
    with _lock:
        previous, compress_once._sharing = compress_once._sharing, bool(enabled)
    return previous


def _quiet_sets() -> int:
    """Test hook (private): how many parameter sets are quiet."""
    with _lock:
        return sum(pset.unfollowed >= policy.QUIET_AFTER for pset in _sets.values())


def _start_over_state() -> dict[tuple, tuple[int, float, float, float]]:
    """Test hook (private): per parameter set (level, window bits, memLevel, strategy),
    the inputs of the policy's _start_over_due_now()."""
    with _lock:
        return {key: (s.since_start_over, s.average_payload, s.start_over_extra,
                      s.alone_share) for key, s in _sets.items()}


def _kept_messages() -> int:
    """Test hook (private): how many messages are kept for sharing, all sets together."""
    with _lock:
        return sum(len(pset.kept or ()) for pset in _sets.values())
