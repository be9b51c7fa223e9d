"""The Compressor class: messages (or fragments) into permessage-deflate payloads.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/compressor.pxi``.)
"""

from __future__ import annotations

import zlib
from typing import Optional

from .. import _what_pays
from .._errors import DeflateError
from .._params import compressor_args
from . import compress_once
from .basics import _TAIL, _as_buffer, _init_lock
from .compress_once import _Member, _Plan, _set_for
from .compress_once import policy as _policy
from .parking import _count
from .rings import _histories
from .testing import _at


def _size(view: "bytes | memoryview") -> int:
    return len(view) if type(view) is bytes else view.nbytes  # type: ignore[union-attr]


class Compressor(_Member):
    """Compresses messages (or fragments of one) into permessage-deflate payloads."""

    def __init__(
        self,
        level: int = 6,
        window_bits: int = 15,
        mem_level: int = 8,
        strategy: int = 0,
        no_context_takeover: bool = False,
    ) -> None:
        args = compressor_args(level, window_bits, mem_level, strategy, no_context_takeover)
        with _init_lock(self):
            (
                self._level,
                self._window_bits,
                self._mem_level,
                self._strategy,
                self._no_context_takeover,
            ) = args
            self._set = _set_for(*args[:4])  # its parameter set's compress-once state
            self._zobj: Optional["zlib._Compress"] = None  # created on first use
            # compress once's and broadcast()'s (what each is: _Member, the policy's)
            self._history = self._since_empty = self._context = 0
            self._tail_history = self._tail_bytes = self._straggler_cause = 0
            self._grouped_history = 0
            self._fragmenting = False
            self._skipping: Optional[str] = None  # why a fragmented message goes as it is
            self._broken = False  # a call failed in the middle of a fragmented message

    level = property(lambda self: self._level, doc="Compression level.")
    window_bits = property(lambda self: self._window_bits, doc="LZ77 window (9..15).")
    mem_level = property(lambda self: self._mem_level, doc="zlib memLevel (1..9).")
    strategy = property(lambda self: self._strategy, doc="zlib strategy.")
    no_context_takeover = property(
        lambda self: self._no_context_takeover,
        doc="True if every message starts with an empty window.",
    )

    def _new(self) -> "zlib._Compress":
        return zlib.compressobj(
            self._level, zlib.DEFLATED, -self._window_bits, self._mem_level, self._strategy
        )

    def compress(self, data: object, fin: bool = True, *, flush: bool = True) -> bytes:
        """Compress ``data``: a whole message, or one fragment of it when ``fin`` is False.

        A whole message (``fin=True``) ends with a sync flush whose trailing
        ``00 00 ff ff`` is removed. A fragment with ``flush=True`` (default) is
        sync-flushed so the peer can decode it at once; with ``flush=False`` zlib may
        keep its output for a later call. The outputs of all calls of one message,
        concatenated, form that message's payload.

        If a call raises (`MemoryError`, say), its data never reaches the peer: the
        next message starts from an empty window. After a failure in the middle of a
        fragmented message the compressor refuses data (`DeflateError`) until
        `reset()`.
        """
        result = self._compress(data, fin, flush)
        assert result is not None
        return result

    def _compress(self, data: object, fin: bool, flush: bool,
                  undo_if_larger: bool = False) -> Optional[bytes]:
        """compress()'s work. ``undo_if_larger``: if the payload (compressed here, or
        taken from the group's leader) is no smaller than ``data``, put the compressor
        back as it was and return the payload's length, an int (as the extension)."""
        # (a fragmented message's last part is that message's alone: its stream holds
        # the parts before it, which neither a group's payload nor an empty window has)
        shareable = (fin and compress_once._sharing and _policy._shareable(data)
                     and not self._fragmenting)
        plan, group, state = _Plan(), None, None
        led = _policy._before_message(self, data, fin, shareable, plan)
        if not plan.follow:
            group, led = led, None
        if led is not None:
            state = _policy._state_to_follow(self, led)
            if state is False:
                led = None
        view = _as_buffer(data)
        with self._lock:
            self._refuse_if_broken()
            mid_message = self._fragmenting
            if shareable and mid_message:  # another thread began one meanwhile (as above)
                shareable, plan, led, group = False, _Plan(), None, None
            try:
                before = self._snapshot() if undo_if_larger else None
                shared = led is not None and _policy._adopt(self, led, state, None)
                if shared:
                    result = led.payload  # type: ignore[union-attr]
                else:
                    result = _policy._compress_alone(self, data, plan, group, shareable)
                    if result is None:  # a message like any other
                        result = self._compress_locked(view, fin, flush)
                if before is not None and len(result) >= _size(view):
                    (self._zobj, self._history, self._since_empty, self._tail_history,
                     self._tail_bytes, self._straggler_cause, self._context) = before
                    self._fragmenting = False
                    return len(result)  # type: ignore[return-value]
                self._count(view, result, fin if not shared else True, shared)
                return result
            except BaseException:
                self._abandon(mid_message)
                raise

    def _snapshot(self) -> tuple:
        """What ``undo_if_larger`` puts back: a copy of the zlib object, the history and
        the messages since the window was empty (the lock held)."""
        return (None if self._zobj is None else self._zobj.copy(), self._history,
                self._since_empty, self._tail_history, self._tail_bytes, self._straggler_cause,
                self._context)

    def compress_or_skip(self, data: object, fin: bool = True, *,
                         flush: bool = True) -> Optional[bytes]:
        """Compress ``data`` as `compress()` does, or return None: send it uncompressed
        (RSV1 clear), the compressor untouched. Decided at the start of a message
        (fastdeflate/_what_pays.py says when), and the whole message follows: pass every
        fragment of a fragmented one here, and each returns what the first did (None:
        sent as it is; else its payload, as `compress()`)."""
        if self._skipping is not None:  # a message sent as it is, fragment by fragment
            _what_pays.count(self._skipping, _size(_as_buffer(data)), self._level,
                             message=False)
            if fin:
                self._skipping = None
            return None
        if self._fragmenting:
            return self._compress(data, fin, flush)
        view = _as_buffer(data)
        size = _size(view)
        reason = ("opt-out" if _what_pays.opted_out()
                  else _what_pays.classify(view, *_what_pays.settings()))
        if reason is None:
            return self._compress(data, fin, flush)
        over = 0
        if reason == "uncertain":
            payload = self._compress(data, fin, flush, undo_if_larger=True)
            if type(payload) is bytes:
                return payload
            reason, over = "grew", payload - size  # type: ignore[operator]
        _what_pays.count(reason, size, self._level, over)
        if not fin:
            self._skipping = reason
        return None

    def _count(self, view: "bytes | memoryview", payload: bytes, fin: bool,
               shared: bool) -> None:
        size = len(view) if type(view) is bytes else view.nbytes  # type: ignore[union-attr]
        _count("deflate", size, len(payload), fin, shared)

    def _refuse_if_broken(self) -> None:
        if self._broken:
            raise DeflateError("compressor unusable after an error in the middle of a "
                               "fragmented message; call reset()")

    def _abandon(self, refuse: bool) -> None:
        """After a call that raised: the zlib object may hold input whose output the
        peer never gets; drop it (the next message starts from an empty window) and, if
        the peer is in the middle of a fragmented message, refuse until reset()."""
        self._forget()
        self._broken = self._broken or refuse

    def _abandon_last(self, refuse: bool) -> None:
        """broadcast(), when it raises: the payload last returned never reaches the peer."""
        with self._lock:
            self._abandon(refuse)

    def _compress_locked(self, view: memoryview, fin: bool, flush: bool) -> bytes:
        """compress()'s work, with the lock held (the caller abandons the zlib object
        if this raises)."""
        zobj = self._zobj
        if zobj is None:
            zobj = self._zobj = self._new()
        out = zobj.compress(view)
        if fin or flush:
            out += zobj.flush(zlib.Z_SYNC_FLUSH)
        if fin and out.endswith(_TAIL):
            out = out[:-4]
        if fin and self._no_context_takeover:
            self._forget()  # stdlib objects can't be reset: a new one next time
        else:
            self._context = min(self._context + _size(view), _policy._window_size(self))
            self._history = next(_histories)
            self._tail_bytes = 0  # (a straggler's caller extends it: _extend_tail)
            self._since_empty += fin
            self._fragmenting = not fin
        return out

    def _forget(self) -> None:
        """Drop the zlib object and the history (the lock held): the next message starts
        from an empty window (as the extension's _forget)."""
        self._zobj = None
        self._history = 0
        self._since_empty = 0
        self._context = 0
        self._tail_bytes = 0
        self._straggler_cause = 0
        self._fragmenting = False
        self._skipping = None

    def _group(self) -> tuple[object, int, int, bool, bool]:
        """broadcast(): (parameter set, history, messages since the window was empty, in
        the middle of a message, holds a zlib object)."""
        return ((self._level, self._window_bits, self._mem_level, self._strategy,
                 self._no_context_takeover), self._history, self._since_empty,
                self._fragmenting, self._zobj is not None)

    def _lead(self, data: object, expected: int) -> Optional[tuple]:
        """broadcast(): compress a whole message for a group whose history is
        ``expected``; (payload, state, history, since_empty), or None if this object's
        history is no longer ``expected``. The state is a copy of the zlib object."""
        view = _as_buffer(data)
        with self._lock:
            if self._history != expected or self._fragmenting:
                return None
            self._refuse_if_broken()
            try:
                payload = self._compress_locked(view, True, True)
                _at("committed")
                state = None if self._zobj is None else self._zobj.copy()
                self._count(view, payload, True, False)
                return payload, state, self._history, self._since_empty
            except BaseException:
                self._abandon(False)
                raise

    def _follow(self, expected: int, state: object, history: int, since_empty: int,
                size: int = 0, payload: bytes = b"") -> bool:
        """broadcast(): take the state a group's leader reached instead of compressing
        the same message (``size`` bytes, ``payload`` the leader's, for the traffic
        counters); False if this object's history is no longer ``expected``."""
        with self._lock:
            if self._history != expected or self._fragmenting:
                return False
            if state is None and not self._no_context_takeover:
                return False
            self._zobj = None if state is None else state.copy()  # type: ignore[attr-defined]
            self._history, self._since_empty = history, since_empty
            # (how much of its window the group's messages fill is not known here: a
            # whole window, as far as _join_younger_group is concerned)
            self._context = _policy._window_size(self)
            self._tail_bytes = self._straggler_cause = 0
            _count("deflate", size, len(payload), True, True)
            return True

    def reset(self) -> None:
        """Forget the window and any unfinished message (and any earlier error): the next
        message starts empty."""
        with self._lock:
            self._forget()
            self._broken = False
