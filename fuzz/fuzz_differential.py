#!/usr/bin/env python
"""Fuzz target 2: the compiled codec, the fallback and stdlib zlib must agree.

Input: 6 parameter bytes, then records (see ``_harness``)::

    byte 0: bit 0 mode: 0 compress random messages, 1 decode arbitrary bytes
            bit 1 no_context_takeover
    byte 1: level (-1..9)     byte 2: window bits (9..15; 8..15 when decoding)
    byte 3: mem_level (1..9)  byte 4: strategy (0..4)
    byte 5: max_size: 0 none, else (byte 5) * 97 bytes
    compress record ctrl: bit 0 fin | bit 1 sync-flush a fragment | bit 2 reset() first
                          bits 3-7: the data is repeated 1 + that many times
    decode record ctrl:   bit 0 fin | bit 1 reset() first | bits 2-3 buffer type

Compress mode: every call's output is byte-identical across the three (when the
extension and stdlib zlib run the same zlib), and each message decodes to itself with
both decompressors and with stdlib zlib. Decode mode: both decompressors return the
same bytes or raise the same exception type, call for call — except on data that refers
past the window, which zlib accepts or refuses by how much output room a call has.
"""

from __future__ import annotations

import os
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import as_buffer, byte, implementations, main, records, instrument_package  # noqa: E402

if __name__ == "__main__":
    instrument_package()

import fastdeflate  # noqa: E402
from fastdeflate import DecompressionError  # noqa: E402

TAIL = b"\x00\x00\xff\xff"
# The same bytes only on the stdlib's very zlib: a version string can't tell (zlib-ng in
# zlib-compat mode says "1.3.1.zlib-ng" in the bundled build and in CPython >= 3.14 for
# Windows alike), the engine can (tests/_samezlib.py).
SAME_ENGINE = fastdeflate.ENGINE in (f"zlib {zlib.ZLIB_RUNTIME_VERSION}",
                                     f"zlib {zlib.ZLIB_RUNTIME_VERSION} (stdlib)")


class StdlibCompressor:
    """The reference: what stdlib-based websocket libraries do for each call."""

    def __init__(self, level: int, wbits: int, mem_level: int, strategy: int,
                 no_context_takeover: bool) -> None:
        self.args = (level, zlib.DEFLATED, -wbits, mem_level, strategy)
        self.no_context_takeover = no_context_takeover
        self.reset()

    def reset(self) -> None:
        self.zobj = zlib.compressobj(*self.args)

    def compress(self, data: bytes, fin: bool, flush: bool) -> bytes:
        out = self.zobj.compress(data)
        if fin or flush:
            out += self.zobj.flush(zlib.Z_SYNC_FLUSH)
        if fin:
            if self.no_context_takeover:
                self.reset()
            if out.endswith(TAIL):
                out = out[:-4]
        return out


def outcome(call) -> object:
    """The result of ``call()``, or the type of the DeflateError it raised."""
    try:
        return call()
    except fastdeflate.DeflateError as exc:
        return type(exc)


def compress_mode(data: bytes, nct: bool, max_size: int | None) -> None:
    level = byte(data, 1) % 11 - 1
    wbits = 9 + byte(data, 2) % 7
    mem_level = 1 + byte(data, 3) % 9
    strategy = byte(data, 4) % 5
    impls = implementations()
    compressors = {name: m.Compressor(level, wbits, mem_level, strategy, nct)
                   for name, m in impls.items()}
    decompressors = {name: m.Decompressor(wbits, nct) for name, m in impls.items()}
    reference = StdlibCompressor(level, wbits, mem_level, strategy, nct)
    inflater = zlib.decompressobj(-wbits)
    message, payload = b"", b""
    for record in records(data, 6):
        if record.ctrl & 4:  # a reset starts a new message on both sides
            for c in compressors.values():
                c.reset()
            reference.reset()
            message, payload = b"", b""
            for d in decompressors.values():
                d.reset()
            inflater = zlib.decompressobj(-wbits)
        chunk = record.data * (1 + (record.ctrl >> 3))
        fin, flush = bool(record.ctrl & 1), bool(record.ctrl & 2)
        parts = {name: c.compress(chunk, fin=fin, flush=flush)
                 for name, c in compressors.items()}
        expected = reference.compress(chunk, fin, flush)
        if SAME_ENGINE:
            assert parts["cython"] == expected, (parts["cython"], expected)
        assert parts["python"] == expected
        message += chunk
        payload += parts["cython"]
        if not fin:
            continue
        for name, d in decompressors.items():
            got = outcome(lambda: d.decompress(payload, max_size=max_size))
            if max_size is not None and len(message) > max_size:
                assert got is fastdeflate.MessageTooBig, (name, got)
                d.reset()  # the window is lost with it: the next message starts empty
            else:
                assert got == message, (name, len(message))
        if max_size is not None and len(message) > max_size:
            reference.reset()
            for c in compressors.values():
                c.reset()
            inflater = zlib.decompressobj(-wbits)
        else:
            assert inflater.decompress(payload + TAIL) == message
            if nct:
                inflater = zlib.decompressobj(-wbits)
        message, payload = b"", b""


def refers_past_the_window(message: bytes, wbits: int) -> bool:
    """True if ``message`` (all read since the window was empty) refers back past the 2^w
    bytes of window. zlib lets such a reference through when the bytes it reaches were
    written in the same inflate() call, so its verdict on that data depends on how much
    output room each call had: the two decompressors, whose output buffers differ, may
    rightly disagree about it. Decoding one byte per call here makes zlib strict."""
    d = zlib.decompressobj(-wbits)
    history = b""
    data = message
    while True:  # each call reads input or writes a byte, until neither is left
        try:
            out = d.decompress(data, 1)
        except zlib.error as exc:
            return "too far back" in str(exc)
        history = (history + out)[-(1 << wbits):]
        data = d.unconsumed_tail
        if d.eof:  # a block with BFINAL set: decoding goes on over the same window
            data = d.unused_data
            d = zlib.decompressobj(-wbits, zdict=history) if history else \
                zlib.decompressobj(-wbits)
        if not data and not out:
            return False


def decode_mode(data: bytes, nct: bool, max_size: int | None) -> None:
    wbits = 8 + byte(data, 2) % 8
    decompressors = [m.Decompressor(wbits, nct) for m in implementations().values()]
    stream = b""  # what both have read since their window was last empty
    for record in records(data, 6):
        results = []
        if record.ctrl & 2:
            stream = b""
        stream += record.data + (TAIL if record.ctrl & 1 else b"")
        for d in decompressors:
            if record.ctrl & 2:
                d.reset()
            buffer = as_buffer(record.data, record.ctrl >> 2)
            results.append(outcome(
                lambda: d.decompress(buffer, fin=bool(record.ctrl & 1), max_size=max_size)))
        if results[0] != results[1] and DecompressionError in results and \
                refers_past_the_window(stream, wbits):
            return  # invalid data zlib judges by its output room: no single right answer
        assert results[0] == results[1], results
        if record.ctrl & 1 and nct:
            stream = b""


def test_one_input(data: bytes) -> None:
    head = byte(data, 0)
    max_size = byte(data, 5) * 97 if byte(data, 5) else None
    if head & 1:
        decode_mode(data, bool(head & 2), max_size)
    else:
        compress_mode(data, bool(head & 2), max_size)


if __name__ == "__main__":
    main(test_one_input)
