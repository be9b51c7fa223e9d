"""The Decompressor class: permessage-deflate payloads back into messages.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/decompressor.pxi``.)
"""

from __future__ import annotations

import sys
import zlib
from typing import Optional

from .._errors import DecompressionError, MessageTooBig
from .._params import (
    MAX_STREAMS_PER_MESSAGE,
    TOO_MANY_STREAMS_MESSAGE,
    decompressor_args,
    max_size_arg,
    tail_arg,
)
from .basics import _TAIL, _as_buffer, _init_lock
from .parking import _count


class Decompressor:
    """Decompresses permessage-deflate payloads (whole messages or fragments)."""

    def __init__(self, window_bits: int = 15, no_context_takeover: bool = False) -> None:
        args = decompressor_args(window_bits, no_context_takeover)
        with _init_lock(self):
            self._window_bits, self._no_context_takeover = args
            self._zobj: Optional["zlib._Decompress"] = None  # created on first use
            self._history: list[bytes] = []  # recent output, to rebuild the window
            self._history_size = 0
            self._message_size = 0
            self._streams = 0  # deflate streams ended (BFINAL) in the current message
            self._error: Optional[str] = None

    window_bits = property(lambda self: self._window_bits, doc="LZ77 window (8..15).")
    no_context_takeover = property(
        lambda self: self._no_context_takeover,
        doc="True if the peer starts every message with an empty window.",
    )

    def _new(self, zdict: bytes = b"") -> "zlib._Decompress":
        if zdict:
            return zlib.decompressobj(-self._window_bits, zdict=zdict)
        return zlib.decompressobj(-self._window_bits)

    def _remember(self, out: bytes) -> None:
        """Keep the latest output, enough to rebuild the window (trimmed now and then)."""
        self._history.append(out)
        self._history_size += len(out)
        if self._history_size > 2 << self._window_bits:
            window = self._window()  # one copy per window of output: amortised O(1)
            self._history = [window]
            self._history_size = len(window)

    def _window(self) -> bytes:
        return b"".join(self._history)[-(1 << self._window_bits):]

    def _inflate(self, data: object, limit: Optional[int], parts: list) -> None:
        """Inflate ``data``, appending output to ``parts``; restart after BFINAL."""
        while True:
            zobj = self._zobj
            assert zobj is not None
            try:
                if limit is None:
                    out = zobj.decompress(data)
                else:
                    # One byte past the limit detects an oversized message; zlib takes
                    # at most sys.maxsize, which no output can reach anyway.
                    remaining = limit - self._message_size
                    out = zobj.decompress(data, min(remaining + 1, sys.maxsize))
            except zlib.error as exc:
                if str(exc).startswith("Error -4 "):  # Z_MEM_ERROR: as in the extension
                    raise MemoryError("out of memory while decompressing") from None
                self._fail(f"invalid compressed data: {exc}")
                raise DecompressionError(self._error) from None
            if limit is not None and len(out) > limit - self._message_size:
                self._fail(f"message exceeds max_size={limit}")
                raise MessageTooBig(self._error)
            if out:
                self._message_size += len(out)
                parts.append(out)
                self._remember(out)
            if not zobj.eof:
                return
            # A block with BFINAL set ended the deflate stream: start a new stream
            # over the same window and go on with whatever input is left.
            self._streams += 1
            if self._streams > MAX_STREAMS_PER_MESSAGE:
                self._fail(TOO_MANY_STREAMS_MESSAGE)
                raise DecompressionError(self._error)
            data = zobj.unused_data
            self._zobj = self._new(self._window())
            if not data:
                return

    def _fail(self, message: str) -> None:
        self._error = message
        self._zobj = None
        self._history.clear()
        self._history_size = 0

    def decompress(
        self, data: object, fin: bool = True, max_size: Optional[int] = None, *,
        has_tail: bool = False,
    ) -> bytes:
        """Decompress a whole message's payload, or one fragment when ``fin`` is False.

        ``max_size`` bounds the size of the whole message across its fragments:
        decompression stops as soon as it would be passed, with `MessageTooBig`.
        Corrupt data raises `DecompressionError`. After either (or a
        `MemoryError`) the decompressor refuses data until `reset()`.
        ``has_tail``: ``data`` is the end of a message followed by ``00 00 ff ff``
        already (`ValueError` if not, or if ``fin`` is False), inflated as it is.
        After any exception but those of bad arguments, the decompressor refuses data
        until `reset()`.
        """
        view = _as_buffer(data)
        limit = max_size_arg(max_size)
        if has_tail and (not fin or view[-4:] != _TAIL):
            tail_arg(fin)
        with self._lock:
            if self._error is not None:
                raise DecompressionError(
                    f"decompressor unusable after an earlier error ({self._error}); "
                    "call reset()"
                )
            if limit is not None and self._message_size > limit:  # a tighter limit now
                self._fail(f"message exceeds max_size={limit}")
                raise MessageTooBig(self._error)
            parts: list[bytes] = []
            try:
                if self._zobj is None:
                    self._zobj = self._new()
                if has_tail:
                    self._inflate(view, limit, parts)
                elif fin:  # payload and tail in one pass (one copy; fewer calls)
                    joined = view + _TAIL if type(view) is bytes else b"".join((view, _TAIL))
                    self._inflate(joined, limit, parts)
                elif view:
                    self._inflate(view, limit, parts)
                result = parts[0] if len(parts) == 1 else b"".join(parts)
                _count("inflate", view.nbytes if type(view) is not bytes else len(view),
                       len(result), fin, False)
                if fin:
                    self._message_size = 0
                    self._streams = 0
                    if self._no_context_takeover:
                        self._zobj = None
                        self._history.clear()
                        self._history_size = 0
                return result
            except BaseException as exc:  # whatever failed, the window is in doubt
                if self._error is None:
                    self._fail("out of memory" if isinstance(exc, MemoryError)
                               else "interrupted")
                raise

    def reset(self) -> None:
        """Forget the window, any unfinished message and any earlier error."""
        with self._lock:
            self._zobj = None
            self._history.clear()
            self._history_size = 0
            self._message_size = 0
            self._streams = 0
            self._error = None
