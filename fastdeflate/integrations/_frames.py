"""A connection's inbound WebSocket frames, followed by their headers only, to find the
large compressed messages worth decompressing off the event loop before the library's
own parser sees them (aiohttp's reader and wsproto decompress as they parse, on the
loop, and give no place to defer one message).

`Gate` sits in front of a parser: it passes bytes through as they come until a
compressed message whose first frame is large (`_outbox.large_payload`) begins; from
there it holds that message and everything after it, has the integration decompress
the message in a worker thread, then lets the held bytes through in order and goes on.
It reads nothing but headers, so a small message costs a few comparisons. A stream it
cannot follow (a reserved opcode, a continuation first) is passed through from then
on: the parser refuses it as stock does.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Optional

from fastdeflate import _off_loop

__all__ = ["Gate", "Frame", "header", "unmask", "joined"]

#: A parsed header: (fin, rsv1, opcode, header length, payload length, mask or None).
Frame = tuple[bool, bool, int, int, int, Optional[bytes]]

#: A held message in more data frames than this is let through as it is (the parser's
#: own limits apply): following it costs the loop per frame.
MAX_FRAMES = 1024
_DATA_OPCODES = (1, 2)
_KNOWN_OPCODES = frozenset((0, 1, 2, 8, 9, 10))


def header(buf: Any, pos: int) -> Optional[Frame]:
    """The frame header at ``buf[pos:]``, or None while it is incomplete."""
    end = len(buf)
    if end - pos < 2:
        return None
    first = buf[pos]
    second = buf[pos + 1]
    length = second & 0x7F
    size = 2
    if length == 126:
        if end - pos < 4:
            return None
        length = int.from_bytes(buf[pos + 2:pos + 4], "big")
        size = 4
    elif length == 127:
        if end - pos < 10:
            return None
        length = int.from_bytes(buf[pos + 2:pos + 10], "big")
        size = 10
    mask = None
    if second & 0x80:
        if end - pos < size + 4:
            return None
        mask = bytes(buf[pos + size:pos + size + 4])
        size += 4
    return bool(first & 0x80), bool(first & 0x40), first & 0x0F, size, length, mask


def unmask(data: bytearray, mask: bytes) -> None:
    """XOR ``data`` in place with the 4-byte ``mask`` (RFC 6455 5.3), at C speed."""
    if not data:
        return
    n = len(data)
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "little")
    data[:] = (int.from_bytes(data, "little") ^ key).to_bytes(n, "little")


def joined(frames: list[tuple[memoryview, Optional[bytes]]],
           unmasked: Callable[[memoryview, Optional[bytes]], Any]) -> Any:
    """A held message's data frames, each unmasked (``unmasked(payload, mask)``: the
    payload unmasked in a copy, or as it is without a mask) and joined: the one frame's
    as it is, or one buffer of their total size."""
    if len(frames) == 1:
        return unmasked(*frames[0])
    out = bytearray(sum(len(data) for data, _ in frames))
    end = 0
    for data, mask in frames:
        part = unmasked(data, mask)
        out[end:end + len(part)] = part
        end += len(part)
    return out


class Gate:
    """Lets a connection's inbound bytes through to ``forward`` and holds a large
    compressed message (and what follows it) while ``start(payload)`` decompresses it.

    ``forward(data)`` gives bytes to the library's parser and returns what it returns.
    ``start(parts)`` gets the message's data frames as ``(payload, mask)`` pairs (masks
    not yet applied) and returns a future (a worker thread's job) or None to decline;
    the gate lets the held bytes through once it is done, calling ``ready(job)`` first
    (the integration hands the result to its decompressor there). ``limit`` is the
    library's message size limit (0: none): a message declared larger than that is not
    held, so that the parser refuses it at its header, as stock does.
    """

    def __init__(self, forward: Callable[[bytes], Any],
                 start: Callable[[list[tuple[memoryview, Optional[bytes]]]], Any],
                 ready: Callable[[Any], None], limit: int = 0,
                 passed: Any = None) -> None:
        self.forward = forward  # (replaceable: the parser's own entry, once it is all it takes)
        self._start = start
        self._ready = ready
        self._limit = limit
        self._passed = passed  # what feed() returns while it holds the bytes
        self._skip = 0  # payload bytes of the current frame still to pass through
        self._head = b""  # an incomplete header, held until its next bytes come
        self._held: Optional[bytearray] = None  # a large message and what follows it
        self._end = 0  # nonzero once all of the held message is here
        self._message = b""  # the held message, while its job runs
        self._pos = 0  # how far _collect() followed the held message's frames
        self._total = 0  # the payload bytes of its data frames so far
        self._frames: list[tuple[int, int, Optional[bytes]]] = []  # (begin, end, mask)
        self._eof: Optional[Callable[[], Any]] = None  # the end of stream, held
        self._blind = False  # lost track of the frames: pass everything through
        #: a compressed message went through to the parser
        self.compressed = False

    @property
    def holding(self) -> bool:
        """True while a large message is held (being received or decompressed)."""
        return self._held is not None

    def feed(self, data: Any) -> Any:
        """Take bytes from the connection: pass them through, or hold them."""
        if self._held is not None:
            self._held += data
            if not self._end:
                self._collect()
            return self._passed
        if self._blind:
            return self.forward(data)
        if self._head:
            data = self._head + bytes(data)
            self._head = b""
        begins = self._scan(data)
        if begins is None:
            if self._head:  # an incomplete header waits for its next bytes
                kept = len(data) - len(self._head)
                return self.forward(data[:kept]) if kept else self._passed
            return self.forward(data)
        result = self.forward(data[:begins]) if begins else self._passed
        self._held = bytearray(data[begins:])
        self._collect()
        return result

    def feed_eof(self, eof: Callable[[], Any]) -> Any:
        """The end of the stream: ``eof()`` now, or after the held message (one not
        all here goes through as it is first: it never will be)."""
        if self._held is not None and not self._end:
            self._release(len(self._held), blind=True)
        if self._held is None:
            return eof()
        self._eof = eof
        return None

    def _scan(self, data: Any) -> Optional[int]:
        """Follow the headers in ``data``; the offset where a large compressed message
        begins, or None (an incomplete header at the end is kept in ``_head``)."""
        pos = 0
        end = len(data)
        if self._skip:
            if self._skip >= end:
                self._skip -= end
                return None
            pos = self._skip
            self._skip = 0
        size = _off_loop.off_loop_size()
        while pos < end:
            if end - pos < 14:  # perhaps an incomplete header: the careful way
                frame = header(data, pos)
                if frame is None:
                    self._head = bytes(data[pos:])
                    return None
                _, rsv1, opcode, head, length, _ = frame
            else:  # the header is all here (the way of most frames)
                first = data[pos]
                second = data[pos + 1]
                rsv1 = first & 0x40
                opcode = first & 0x0F
                length = second & 0x7F
                head = 6 if second & 0x80 else 2
                if length == 126:
                    length = (data[pos + 2] << 8) | data[pos + 3]
                    head += 2
                elif length == 127:
                    length = int.from_bytes(data[pos + 2:pos + 10], "big")
                    head += 8
            if opcode not in _KNOWN_OPCODES:
                self._blind = True
                return None
            if rsv1 and opcode in _DATA_OPCODES:
                if size and length * 4 >= size and (not self._limit or length < self._limit):
                    return pos
                self.compressed = True
            pos += head + length
        if pos > end:
            self._skip = pos - end
        return None

    def _collect(self) -> None:
        """Follow the held message's frames as they come (from where the last call
        stopped); once all of it is here, start its job."""
        held = self._held
        assert held is not None
        pos = self._pos
        frames = self._frames
        complete = False
        while True:
            frame = header(held, pos)
            if frame is None or pos + frame[3] + frame[4] > len(held):
                self._pos = pos
                return  # not all here yet
            fin, _, opcode, head, length, mask = frame
            begin = pos + head
            pos = begin + length
            if opcode >= 8:
                continue  # a control frame between fragments: held in its place
            if frames and opcode != 0 or len(frames) >= MAX_FRAMES:
                break  # not a message the parser takes, or one in too many pieces
            frames.append((begin, pos, mask))
            self._total += length
            if self._limit and self._total >= self._limit:
                break  # over the parser's limit: it refuses it at its header
            if fin:
                complete = True
                break
        self._frames = []
        self._pos = self._total = 0
        if not complete:
            self._release(len(held), blind=True)  # give up: let it all through
            return
        with memoryview(held) as whole:  # (one copy; the bytes that follow may come meanwhile)
            message = bytes(whole[:pos])
        del held[:pos]
        view = memoryview(message)
        job = self._start([(view[begin:end], mask) for begin, end, mask in frames])
        if job is None:
            self._held = bytearray(message) + held
            self._release(pos)
            return
        self._message = message
        self._end = pos
        job.add_done_callback(self._done)

    def _done(self, job: "asyncio.Future[Any]") -> None:
        self._ready(job)
        message, self._message = self._message, b""
        self.forward(message)
        self._release(0)

    def _release(self, end: int, blind: bool = False) -> None:
        """Let the held bytes up to ``end`` through, then feed the rest again."""
        held = self._held
        assert held is not None
        self._held = None
        self._end = 0
        self._frames = []
        self._pos = self._total = 0
        self._blind = self._blind or blind
        if end:
            self.forward(bytes(held[:end]))
        rest = bytes(held[end:])
        if rest:
            self.feed(rest)
        if self._eof is not None and self._held is None:
            eof, self._eof = self._eof, None
            eof()
