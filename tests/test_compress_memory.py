"""Compression memory follows the output, not the input (as the stdlib's does).

The compressor's output buffer grows in CPython's blocks as zlib produces output, so a
large, very compressible message — whole, or streamed in fragments with ``flush=False``
— never costs much more than its compressed size beyond the input the caller holds.
Measured with tracemalloc, which sees the extension's buffers (``PyMem_Raw*``) and the
stdlib zlib's state alike.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
import zlib
from typing import Callable

import pytest

MiB = 1 << 20
TAIL = b"\x00\x00\xff\xff"
# What any compressor may hold beyond its output: its zlib state (up to ~0.3 MiB at
# window 15 / memLevel 8, traced for the stdlib) and one output block.
SLACK = 1 * MiB
# CPython's output blocks (the stdlib's and the extension's) grow 32 KiB, 64 KiB, 256 KiB,
# 1 MiB, 4 MiB...: the last may be nearly empty, and the result is copied out once.
GROWTH = 4


def zeros(size: int) -> bytes:
    return bytes(size)


def records(size: int) -> bytes:
    """JSON-like records: compress about 5x, so reserving for the input shows."""
    rnd = random.Random(size)
    out = b"".join(
        b'{"seq": %d, "price": %d, "side": "%s"}\n'
        % (i, rnd.randrange(10_000), rnd.choice([b"buy", b"sell"]))
        for i in range(size // 30)
    )
    return out[:size]


def traced_peak(work: Callable[[], bytes]) -> tuple[int, bytes]:
    """Peak bytes allocated while ``work`` runs, beyond what was allocated before."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = work()
        return tracemalloc.get_traced_memory()[1] - before, out
    finally:
        tracemalloc.stop()


def inflate(payload: bytes) -> bytes:
    return zlib.decompressobj(-15).decompress(payload + TAIL)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("make", [zeros, records], ids=["zeros", "records"])
def test_one_large_message_costs_about_its_output(impl, make):
    """16 MiB in one call: the peak is a few times the *output* (as the stdlib's), not the input (the
    extension used to reserve deflateBound of the input: 32 MiB for 16 MiB of zeros)."""
    data = make(16 * MiB)
    compressor = impl.Compressor()
    compressor.compress(b"warm up")  # the zlib state exists before measuring
    peak, payload = traced_peak(lambda: compressor.compress(data))
    assert peak <= GROWTH * len(payload) + SLACK, (peak / MiB, len(payload) / MiB)
    assert zlib.decompressobj(-15).decompress(
        impl.Compressor().compress(b"warm up") + TAIL + payload + TAIL
    ).endswith(data)


@pytest.mark.timeout(120)
def test_message_streamed_in_fragments_without_flush_costs_about_its_output(impl):
    """16 fragments of 4 MiB of zeros with ``flush=False`` (wsproto's way): the peak
    follows the output (the extension used to reserve for all unflushed input: 128 MiB)."""
    fragment = zeros(4 * MiB)
    compressor = impl.Compressor()

    def stream() -> bytes:
        parts = [compressor.compress(fragment, fin=False, flush=False) for _ in range(15)]
        parts.append(compressor.compress(fragment, fin=True))
        return b"".join(parts)

    peak, payload = traced_peak(stream)
    assert peak <= GROWTH * len(payload) + SLACK, (peak / MiB, len(payload) / MiB)
    assert inflate(payload) == fragment * 16


@pytest.mark.timeout(120)
@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_buffer_kept_between_messages_follows_the_output(impl, level):
    """After a large message, a small one still decodes, and the memory the compressor
    keeps between messages is bounded by the large message's output, not its input."""
    data = records(8 * MiB)
    compressor = impl.Compressor(level=level)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        big = compressor.compress(data)
        kept = tracemalloc.get_traced_memory()[0] - before - len(big)
    finally:
        tracemalloc.stop()
    assert kept <= len(big) + SLACK, (kept / MiB, len(big) / MiB)
    small = compressor.compress(b'{"seq": 1}')
    stock = zlib.decompressobj(-15)
    assert stock.decompress(big + TAIL) == data
    assert stock.decompress(small + TAIL) == b'{"seq": 1}'
