#!/usr/bin/env python
"""Fuzz target 4: several connections of the compiled codec sharing window sizes.

One input drives four connection slots (each a compiled ``Decompressor`` and
``Compressor``) through decoding, freeing and re-creating, resets, parking and sends, so
that what a window size's connections share (live streams, parked windows, spare
buffers, ISA-L's work buffers) passes from one connection to another.

Input: 2 parameter bytes, then records (see ``_harness``)::

    byte 0: bits 0-2 base window (9 + n, at most 15) | bit 3 the GIL released on every
            call (``_set_release_gil_always``) | bit 4 ISA-L inflate off
            bits 5-6 live-state limit 1, 2, 4, 16 | bit 7 park after 0 s (else 10 s)
    byte 1: 2 bits per slot: its window is the base, the base, the base - 1, or 15
    record ctrl: bits 0-1 slot | bits 2-4 operation | bits 5-7 its argument a

    operation 0  the record's bytes as a whole message's payload (a: has_tail if 1)
              1  the bytes as a fragment (fin clear; the message goes on)
              2  a valid message: the bytes repeated (1, 2, 8, 64, 300, 600 times by
                 a & 7 ...), compressed by the slot's stdlib zlib peer; a & 1: in two
                 fragments at the first byte's offset
              3  as 2, decoded while another thread decodes a 64 KB message on a
                 connection of the same window (so the two take the window's ISA-L
                 work buffers and spare buffers at once)
              4  the slot's decompressor and compressor freed and new ones made (a & 1:
                 without context takeover), perhaps where the old ones were
              5  reset() of the slot's decompressor (a & 1: and compressor)
              6  park: ``set_park_after(0)`` and a parking round (a & 1: live-state limit
                 a >> 1 + 1 first)
              7  the bytes (repeated as in 2) sent by the slot's compressor (a & 1: by
                 ``fastdeflate.broadcast`` to every slot's compressor)

Checks, call by call: each decompressor returns what stdlib zlib returns for the same
stream (``fastdeflate._pure``, the fallback: stdlib zlib's decompressobj driven as RFC
7692 says, tail per message, a new deflate stream after a final block), or both raise the
same exception type; a valid message decodes to exactly the bytes stdlib zlib
compressed; every compressor's payload decodes, with a stdlib zlib decompressor, to the
message. The process-wide settings are restored after each input.
"""

from __future__ import annotations

import os
import sys
import threading
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import byte, main, records, instrument_package  # noqa: E402

if __name__ == "__main__":
    instrument_package()

import fastdeflate  # noqa: E402
from fastdeflate import _fastdeflate as ext, _pure  # noqa: E402

TAIL = b"\x00\x00\xff\xff"
SLOTS = 4
REPEATS = (1, 2, 8, 64, 300, 600, 1, 2)
BIG = b"".join(b'{"n":%d,"sq":%d}' % (i, i * i % 9973) for i in range(4500))[:65536]
_big_payloads: dict[int, bytes] = {}


def big_payload(window_bits: int) -> bytes:
    if window_bits not in _big_payloads:
        c = zlib.compressobj(1, zlib.DEFLATED, -window_bits)
        _big_payloads[window_bits] = (c.compress(BIG) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
    return _big_payloads[window_bits]


def outcome(call) -> object:  # type: ignore[no-untyped-def]
    """What a decompress() call returned, or the exception type it raised."""
    try:
        return call()
    except (fastdeflate.DecompressionError, fastdeflate.MessageTooBig, MemoryError) as exc:
        return type(exc).__name__


class Slot:
    """A connection pair: the compiled decompressor (its reference: the fallback on the
    same stream; its peer: a stdlib zlib compressor) and the compiled compressor (its
    peer: a stdlib zlib decompressor)."""

    def __init__(self, window_bits: int, nct: bool):
        self.window_bits, self.nct = window_bits, nct
        self.d = ext.Decompressor(window_bits, nct)
        self.reference = _pure.Decompressor(window_bits, nct)
        self.c = ext.Compressor(6, window_bits, 8, 0, nct)
        self.new_peers()
        self.clean = True  # only valid messages since the last reset: the peer is in step
        self.in_message = False

    def new_peers(self) -> None:
        self.peer = zlib.compressobj(6, zlib.DEFLATED, -self.window_bits)
        self.inflater = zlib.decompressobj(-self.window_bits)

    def reset(self) -> None:
        self.d.reset()
        self.reference.reset()
        self.peer = zlib.compressobj(6, zlib.DEFLATED, -self.window_bits)
        self.clean, self.in_message = True, False

    def decode(self, data: bytes, fin: bool, has_tail: bool = False) -> object:
        """``data`` to both decompressors: the same outcome, which is returned."""
        kwargs = {"fin": fin, "has_tail": has_tail and fin and data[-4:] == TAIL}
        got = outcome(lambda: self.d.decompress(data, **kwargs))
        expected = outcome(lambda: self.reference.decompress(data, **kwargs))
        assert got == expected, (self.window_bits, self.nct, data.hex(), got, expected)
        self.in_message = not fin and isinstance(got, bytes)
        return got

    def payload(self, message: bytes) -> bytes:
        """The peer's payload for ``message`` (the tail still on); the decompressors
        are reset first if their stream is not the peer's."""
        if not self.clean or self.in_message:
            self.reset()
        if self.nct:
            self.peer = zlib.compressobj(6, zlib.DEFLATED, -self.window_bits)
        return self.peer.compress(message) + self.peer.flush(zlib.Z_SYNC_FLUSH)

    def send(self, message: bytes) -> None:
        self.check_payload(self.c.compress(message), message)

    def check_payload(self, payload: bytes, message: bytes) -> None:
        if self.nct:
            self.inflater = zlib.decompressobj(-self.window_bits)
        assert self.inflater.decompress(payload + TAIL) == message, (self.window_bits,
                                                                       self.nct)


def during_a_big_decode(window_bits: int, helpers: dict, step):  # type: ignore[no-untyped-def]
    """``step()`` while another thread decodes a 64 KB message on a decompressor of the
    same window."""
    helper = helpers.get(window_bits)
    if helper is None:
        helper = helpers[window_bits] = ext.Decompressor(window_bits, True)
    started = threading.Event()
    result: list = []

    def big() -> None:
        started.set()
        result.append(outcome(lambda: helper.decompress(big_payload(window_bits))))

    thread = threading.Thread(target=big)
    thread.start()
    started.wait()
    try:
        return step()
    finally:
        thread.join()
        assert result == [BIG], "the other thread's message decoded to other bytes"


def windows(data: bytes) -> list[int]:
    base = min(15, 9 + (byte(data, 0) & 7))
    choices = (base, base, max(9, base - 1), 15)
    return [choices[(byte(data, 1) >> (2 * i)) & 3] for i in range(SLOTS)]


def test_one_input(data: bytes) -> None:
    head = byte(data, 0)
    saved = (ext._set_release_gil_always(bool(head & 8)),
             ext._set_isal_inflate(not head & 16),
             ext.set_live_states((1, 2, 4, 16)[(head >> 5) & 3]),
             ext.set_park_after(0 if head & 128 else 10))
    try:
        run(data)
    finally:
        ext._set_release_gil_always(saved[0])
        ext._set_isal_inflate(saved[1])
        ext.set_live_states(saved[2])
        ext.set_park_after(saved[3])


def run(data: bytes) -> None:
    slots = [Slot(w, False) for w in windows(data)]
    helpers: dict[int, object] = {}
    for record in records(data, 2):
        slot = slots[record.ctrl & 3]
        op, a = (record.ctrl >> 2) & 7, record.ctrl >> 5
        chunk = record.data
        if op == 0:
            slot.clean = False
            slot.decode(chunk, True, has_tail=a == 1)
        elif op == 1:
            slot.clean = False
            slot.decode(chunk, False)
        elif op in (2, 3):
            message = chunk * REPEATS[a]
            payload = slot.payload(message)[:-4]
            if op == 2 and a & 1 and payload:
                cut = (chunk[0] if chunk else 0) % (len(payload) + 1)
                first = slot.decode(payload[:cut], False)
                assert isinstance(first, bytes), first
                got = first + slot.decode(payload[cut:], True)  # type: ignore[operator]
            elif op == 3:
                got = during_a_big_decode(slot.window_bits, helpers,
                                          lambda: slot.decode(payload, True))
            else:
                got = slot.decode(payload, True)
            assert got == message, (slot.window_bits, slot.nct, len(message), got
                                    if not isinstance(got, bytes) else len(got))
        elif op == 4:
            index = record.ctrl & 3
            window_bits = slot.window_bits
            slots[index] = slot = None  # type: ignore[assignment]  # freed first
            slots[index] = Slot(window_bits, bool(a & 1))
        elif op == 5:
            slot.reset()
            if a & 1:
                slot.c.reset()
                slot.inflater = zlib.decompressobj(-slot.window_bits)
        elif op == 6:
            if a & 1:
                ext.set_live_states((a >> 1) + 1)
            ext.set_park_after(0)
            ext._park_idle()
        else:
            message = chunk * REPEATS[a & 6]
            if a & 1:
                payloads = fastdeflate.broadcast(message, [s.c for s in slots])
                for s, payload in zip(slots, payloads):
                    s.check_payload(payload, message)
            else:
                slot.send(message)


if __name__ == "__main__":
    main(test_one_input)
