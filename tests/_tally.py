"""Counts that tests add up over a run (calls with injected failures, messages checked,
seeds), printed in pytest's summary (conftest.py) so that a run says what it checked."""

from __future__ import annotations

import threading
from collections import Counter

_counts: Counter[str] = Counter()
_notes: list[str] = []
_lock = threading.Lock()


def tally(what: str, count: int = 1) -> None:
    """Add ``count`` to the run's total of ``what``."""
    with _lock:
        _counts[what] += count


def note(line: str) -> None:
    """A line for the run's summary (a seed, say)."""
    with _lock:
        _notes.append(line)


def export() -> dict:
    """This process's counts and notes (a pytest-xdist worker sends them to the main
    process, conftest.py)."""
    with _lock:
        return {"counts": dict(_counts), "notes": list(_notes)}


def merge(exported: dict) -> None:
    with _lock:
        _counts.update(exported.get("counts", {}))
        _notes.extend(exported.get("notes", []))


def summary() -> list[str]:
    with _lock:
        return [f"{count:>10,}  {what}" for what, count in sorted(_counts.items())] + _notes
