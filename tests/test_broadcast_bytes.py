"""Broadcasts mixed with per-user messages keep stock's bytes, and still compress once.

websockets' ``broadcast()`` hands every connection's compressor the same bytes object;
fastdeflate's compressors with the same history share one compression (compress once).
Private messages and late joiners make stragglers, and a group that starts over to take
them back sends a message with no history to every member: more bytes. Started over
by what it costs (``_start_over_due_now``), the bytes stay close to stock zlib's while most
deliveries are still shared. Bytes and counts only (``fdbench.broadcast_mix``); the
server CPU and bytes on the wire are the broadcast benchmark's (``benchmarks/run.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from fdbench.broadcast_mix import Mix, run  # noqa: E402


@pytest.mark.parametrize("mix, shared", [
    # websockets' settings, 10% late joiners, a private message to 1 in 17 every 10
    (Mix(clients=100), 0.85),
    # a private message to 1 in 5 every 5: groups dissolve faster than starting over
    # pays in bytes; most stragglers compress alone then
    (Mix(clients=60, private_every=5, private_one_in=5, late=0.3), 0.05),
    (Mix(clients=40, window_bits=15, mem_level=8, size=4096, broadcasts=150), 0.75),
], ids=["websockets-100", "many-stragglers", "window-15-4k"])
def test_broadcast_with_private_messages_keeps_stocks_bytes(impl: ModuleType, mix: Mix,
                                                            shared: float) -> None:
    outcome = run(impl, mix)
    broadcast_deliveries = outcome.deliveries - outcome.privates
    # (the benchmark's bound is 1.05x on the wire; starting over at every message of
    # websockets-100 would still come within 1.05x here: this bound catches it)
    assert outcome.ratio <= 1.035, (
        f"fastdeflate sent {outcome.ratio:.3f}x stock's bytes "
        f"({outcome.compressions} compressions for {broadcast_deliveries} deliveries)")
    # and compress once still pays: at least this share of deliveries took a shared one
    assert outcome.compressions <= (1 - shared) * broadcast_deliveries, outcome


def test_without_stragglers_a_group_never_starts_over(impl: ModuleType) -> None:
    """No private message, no late joiner: one compression per broadcast, and bytes as
    one connection's."""
    outcome = run(impl, Mix(clients=30, broadcasts=120, late=0.0, private_every=10**9))
    assert outcome.compressions == 120, outcome
    assert outcome.ratio <= 1.01, outcome
