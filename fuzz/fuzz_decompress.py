#!/usr/bin/env python
"""Fuzz target 1: the decoder on arbitrary bytes, in random fragments and settings.

Input: 3 parameter bytes, then records (see ``_harness``)::

    byte 0: bits 0-2 window bits - 8 (8..15) | bit 3 no_context_takeover
            bits 4-5 max_size: 0 none, 1 byte 1, 2 bytes 1-2 (big endian), 3 that * 64
            bit 6 use the pure-Python fallback instead of the compiled codec
    bytes 1-2: the max_size value
    record ctrl: bit 0 fin | bit 1 reset() first | bits 2-3 buffer type

Checks: only DecompressionError / MessageTooBig escape; a message's output never passes
max_size; after an error the decompressor refuses data until reset(), then works again.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import as_buffer, byte, implementations, main, records, instrument_package  # noqa: E402

if __name__ == "__main__":
    instrument_package()

import fastdeflate  # noqa: E402

HELLO_PAYLOAD = bytes.fromhex("f248cdc9c90700")


def settings(data: bytes) -> tuple[int, bool, int | None, str]:
    """Window bits, no_context_takeover, max_size and implementation from the header."""
    head = byte(data, 0)
    mode = (head >> 4) & 3
    value = (byte(data, 1) << 8) | byte(data, 2)
    max_size = [None, byte(data, 1), value, value * 64][mode]
    return 8 + (head & 7), bool(head & 8), max_size, "python" if head & 64 else "cython"


def test_one_input(data: bytes) -> None:
    window_bits, no_context_takeover, max_size, name = settings(data)
    d = implementations()[name].Decompressor(window_bits, no_context_takeover)
    failed = False  # the last call raised: the next one must be refused
    message_size = 0
    for record in records(data, 3):
        if record.ctrl & 2:
            d.reset()
            failed, message_size = False, 0
        fin = bool(record.ctrl & 1)
        try:
            out = d.decompress(as_buffer(record.data, record.ctrl >> 2), fin=fin,
                               max_size=max_size)
        except fastdeflate.MessageTooBig:
            assert not failed, "MessageTooBig from a decompressor that should refuse data"
            assert max_size is not None, "MessageTooBig without max_size"
            failed = True
            continue
        except fastdeflate.DecompressionError:
            failed = True
            continue
        assert not failed, "a decompressor accepted data after an error without reset()"
        assert type(out) is bytes
        message_size += len(out)
        if max_size is not None:
            assert message_size <= max_size, (message_size, max_size)
        if fin:
            message_size = 0
    # Whatever happened, a reset decompressor decodes a fresh message.
    d.reset()
    assert d.decompress(HELLO_PAYLOAD, max_size=max_size if max_size and max_size >= 5 else None) == b"Hello"


if __name__ == "__main__":
    main(test_one_input)
