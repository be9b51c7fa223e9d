"""Pure-Python fallback: the RFC 7692 codec over the stdlib :mod:`zlib` module.

Same classes, parameters, results and exceptions as the compiled
``fastdeflate._fastdeflate``; used when the extension is missing or
``FASTDEFLATE_PURE=1`` is set.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import weakref
import zlib
from typing import Iterator, Optional

from ._errors import DecompressionError, DeflateError, MessageTooBig
from ._params import (
    MAX_STREAMS_PER_MESSAGE,
    TOO_MANY_STREAMS_MESSAGE,
    DEFAULT_LIVE_STATES,
    DEFAULT_PARK_AFTER,
    compressor_args,
    decompressor_args,
    inflate_arg,
    live_states_arg,
    max_size_arg,
    not_a_buffer,
    park_after_arg,
    tail_arg,
)

__all__ = ["Compressor", "Decompressor", "ENGINE", "INFLATE_ENGINE", "ZLIB_VERSION", "engines", "live_states",
           "set_live_states", "set_park_after", "set_inflate", "inflate_engine"]

ZLIB_VERSION: str = zlib.ZLIB_RUNTIME_VERSION
ENGINE: str = f"zlib {ZLIB_VERSION} (stdlib)"
INFLATE_ENGINE: str = ENGINE


def engines(window_bits: int = 15, mem_level: int = 8, strategy: int = 0) -> dict[int, str]:
    """Which engine compresses at each level (-1..9) with these parameters: here the
    stdlib's zlib at every level."""
    compressor_args(6, window_bits, mem_level, strategy, False)
    return {level: ENGINE for level in range(-1, 10)}

_TAIL = b"\x00\x00\xff\xff"
_histories = itertools.count(1)  # history ids for broadcast(): 0 is an empty window
_live_limit = DEFAULT_LIVE_STATES
_park_after = DEFAULT_PARK_AFTER
_test_hook = None
# The extension's traffic counters, per direction only (the extension keeps them per
# parameter set, in its rings; here that would be a dict entry per set ever used):
# kind -> [messages, bytes in, bytes out, shared]
_counts: dict[str, list[int]] = {"deflate": [0, 0, 0, 0], "inflate": [0, 0, 0, 0]}
_counts_lock = threading.Lock()


def _count(kind: str, size: int, out: int, fin: bool, shared: bool) -> None:
    with _counts_lock:
        counts = _counts[kind]
        counts[0] += fin
        counts[1] += size
        counts[2] += out
        counts[3] += shared


def _traffic() -> dict[tuple, tuple[int, int, int, int]]:
    """As the extension's, but per direction: ``{(kind,): (messages, bytes in, bytes
    out, shared)}`` since the process started."""
    with _counts_lock:
        return {(kind,): tuple(counts) for kind, counts in _counts.items()}  # type: ignore[misc]


def _set_test_hook(hook):  # type: ignore[no-untyped-def]
    """Test hook (private), as in the extension: call ``hook(point)`` at the points of
    the compress-once and broadcast paths this implementation has (``"follow"``,
    ``"adopt"``, ``"give_window"``, ``"committed"``, and ``"claim locked"`` with the
    lock of the messages kept held); returns the previous hook."""
    global _test_hook
    previous, _test_hook = _test_hook, hook
    return previous


def _set_release_gil_always(always: bool) -> bool:
    """Test hook (private), as in the extension. The stdlib zlib module releases the GIL
    around every zlib call already, so this implementation always does: returns True."""
    return True


def _at(point: str) -> None:
    if _test_hook is not None:
        _test_hook(point)


# --- compress once (as in the extension): one whole message sent to many compressors ---

_SHARE_MAX = 262144
_SHARE_MIN = 64  # as in the extension: CPython shares tiny bytes objects between senders
_RECENT_MAX = 8
_SYNC_EVERY = 32
_UNSET = object()
_sharing = True
_recent: dict[tuple, list["_Led"]] = {}
_recent_lock = threading.Lock()
_stragglers: set[tuple] = set()


def _after_fork_in_child() -> None:
    """The child starts with the lock free and no message kept: a kept message's leader
    is the parent's, whose lock another thread of the parent may have held at the fork."""
    _recent.clear()
    _stragglers.clear()
    _unfollowed.clear()
    _skipped.clear()
    _reform.clear()
    _recent_lock.release()


if hasattr(os, "register_at_fork"):  # a child never starts with the lock held elsewhere
    os.register_at_fork(before=_recent_lock.acquire, after_in_parent=_recent_lock.release,
                        after_in_child=_after_fork_in_child)
# As in the extension: a parameter set where the last _QUIET_AFTER messages kept found no
# follower keeps one in _QUIET_SAMPLE until a follower finds one (keeping costs a little).
_QUIET_AFTER = 64
_QUIET_SAMPLE = 16
_unfollowed: dict[tuple, int] = {}  # messages kept since a follower last found one
_skipped: dict[tuple, int] = {}  # messages not kept since the last one kept, while quiet
# As in the extension: when a group starts over, by what it costs. Per parameter set:
# [group messages since it last started over, their average payload / message size,
# what starting over cost then (same units), stragglers' own compressions since,
# deliveries that took a shared one since].
_REFORM_BUDGET = 0.02
_reform: dict[tuple, list[float]] = {}


class _Led:
    """A whole message a compressor compressed, for others with the same history."""

    __slots__ = ("data", "before", "sync", "payload", "leader", "after", "since",
                 "state", "first", "counted")

    def __init__(self, data: object, before: int, sync: bool, payload: bytes,
                 leader: "Compressor", after: int, since: int) -> None:
        self.data, self.before, self.sync, self.payload = data, before, sync, payload
        self.leader = weakref.ref(leader)  # the cache keeps no codec alive
        self.after, self.since = after, since
        self.state: object = _UNSET  # a copy of the leader's zlib object, fetched once
        self.first = False  # nobody had compressed its message before (a group's)
        self.counted = False  # sent to several: a group's message (_reform_due)


def _count_group_message(key: tuple, led: _Led) -> None:
    """Another compressor was sent ``led``'s message (lock held): it went to several
    connections (a private message never does), so it counts towards starting over,
    and its compressed fraction towards the average."""
    led.counted = True
    reform = _reform.setdefault(key, [0, 0.0, 0.0, 0, 0])
    reform[0] += 1
    if not led.sync:
        size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
        reform[1] += (size - reform[1]) / 16 if reform[1] else size


def _find_led(key: tuple, data: object, history: int,
              asking: object) -> tuple[Optional[_Led], bool]:
    """The recent compression of ``data`` from ``history`` (or one that started over),
    if any, and whether ``data`` was compressed recently from any history."""
    seen = False
    with _recent_lock:
        _at("claim locked")  # (tests only: stop a thread that holds the lock)
        for led in _recent.get(key, ()):
            if led.data is data:
                seen = True
                if led.first and not led.counted:
                    _count_group_message(key, led)
                if history == led.before or led.sync:
                    return led, True
                if led.leader() is not asking:  # (sent again to the same peer: no sign)
                    _stragglers.add(key)
                    _unfollowed[key] = 0  # one message to several: a group to make again
    return None, seen


def _remember(key: tuple, led: _Led, first: bool) -> None:
    """Keep ``led``; ``first``: nobody compressed its message before (a new message for
    the parameter set, not a straggler's copy); if it started over, what that cost is
    measured."""
    led.first = first
    with _recent_lock:
        # only entries whose message someone else still holds (2: the entry's slot and
        # getrefcount's argument); a straggler's copy never pushes out its group's entry
        # of the same message
        olds = [old for old in _recent.get(key, ()) if sys.getrefcount(old.data) > 2]
        room = _RECENT_MAX - 1 - sum(old.data is led.data and old.first for old in olds)
        kept = [led]
        for old in olds:
            if old.data is led.data and old.first:
                kept.append(old)
            elif room > 0:
                kept.append(old)
                room -= 1
        kept, _recent[key] = _recent.get(key, []), kept  # evicted: released after the lock
        _unfollowed[key] = _unfollowed.get(key, 0) + 1
        if first and led.sync:  # what starting over cost: this payload and the next few
            reform = _reform.setdefault(key, [0, 0.0, 0.0, 0, 0])
            reform[0] = reform[3] = reform[4] = 0
            size = len(led.payload) / max(1, len(led.data))  # type: ignore[arg-type]
            reform[2] = 2 * max(0.0, size - reform[1]) if reform[1] else 0.0
    del kept


def _reform_due(key: tuple) -> bool:
    """Whether a group of this parameter set should start over at its next message (as
    in the extension): once its messages since it last did have cost its members enough
    bytes that what starting over costs them (measured the last time, or half a
    message at first) is a small share of them: _REFORM_BUDGET, up to twice that as
    stragglers' own compressions near a quarter of the deliveries (costs as fractions of
    a message's size)."""
    with _recent_lock:
        since, average, extra, alone, shared = _reform.get(key, (0, 0.0, 0.0, 0, 0))
    if not average:
        return since >= _SYNC_EVERY
    budget = _REFORM_BUDGET * (1 + min(1.0, 4 * alone / (alone + shared + 1)))
    return since * average * budget >= (extra or average / 2)


def _tally_reform(key: tuple, index: int) -> None:
    """Count a straggler's own compression (3) or a shared delivery (4)."""
    with _recent_lock:
        _reform.setdefault(key, [0, 0.0, 0.0, 0, 0])[index] += 1


def _keep_next(key: tuple) -> bool:
    """Whether to keep the next whole message for sharing (see _QUIET_AFTER)."""
    with _recent_lock:
        if _unfollowed.get(key, 0) < _QUIET_AFTER:
            return True
        skipped = _skipped.get(key, 0) + 1
        _skipped[key] = 0 if skipped >= _QUIET_SAMPLE else skipped
        return skipped >= _QUIET_SAMPLE


def _quiet_sets() -> int:
    """Test hook (private), as in the extension: how many parameter sets are quiet."""
    with _recent_lock:
        return sum(count >= _QUIET_AFTER for count in _unfollowed.values())


def _kept_messages() -> int:
    """Test hook (private): how many messages are kept for sharing, all sets together."""
    with _recent_lock:
        return sum(map(len, _recent.values()))


def _forget_recent() -> None:
    """Test hook (private): forget every message kept for sharing (test isolation)."""
    with _recent_lock:
        dropped = list(_recent.values())
        _recent.clear()
        _stragglers.clear()
        _unfollowed.clear()
        _skipped.clear()
        _reform.clear()
    del dropped


def _set_sharing(enabled: bool) -> bool:
    """Test hook (private), as in the extension: False makes every compressor compress
    every message itself; returns the previous setting."""
    global _sharing
    previous, _sharing = _sharing, bool(enabled)
    return previous


def set_live_states(limit: int) -> int:
    """Same interface as the extension's (validated, returns the previous limit); the
    fallback keeps one stdlib zlib object per codec object, so the limit changes
    nothing here."""
    global _live_limit
    live_states_arg(limit)
    previous, _live_limit = _live_limit, limit
    return previous


def set_park_after(seconds: float) -> float:
    """Same interface as the extension's (validated, returns the previous delay); the
    fallback never parks, so the delay changes nothing here."""
    global _park_after
    value = park_after_arg(seconds)
    previous, _park_after = _park_after, value
    return previous


_inflate_choice = "auto"


def set_inflate(engine: str) -> str:
    """Same interface as the extension's (validated, returns the previous choice): the
    fallback decodes every message with the stdlib's zlib, whatever the choice."""
    global _inflate_choice
    inflate_arg(engine)
    previous, _inflate_choice = _inflate_choice, engine
    return previous


def inflate_engine() -> str:
    """What decompresses now: the stdlib's zlib."""
    return INFLATE_ENGINE


def _inflate_choice_now() -> str:
    """set_inflate()'s choice now (for status())."""
    return _inflate_choice


def live_states() -> dict[tuple, tuple[int, int]]:
    """The extension's streams shared per parameter set: none in the fallback."""
    return {}


def _as_buffer(data: object) -> "bytes | memoryview":
    """Return ``data`` as bytes or a byte view; ``str`` and others are TypeError."""
    if type(data) is bytes:
        return data
    if isinstance(data, str):
        raise not_a_buffer(data)
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise not_a_buffer(data) from None
    if not view.c_contiguous:
        raise not_a_buffer(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


@contextlib.contextmanager
def _init_lock(obj: object) -> Iterator[None]:
    """Hold ``obj``'s lock for ``__init__``, which runs once: parameters never change
    under a live stream (as in the extension)."""
    lock = obj.__dict__.setdefault("_lock", threading.Lock())
    with lock:
        if "_window_bits" in obj.__dict__:
            raise RuntimeError(f"{type(obj).__name__} is already initialised; create a new one")
        yield


class Compressor:
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
            self._zobj: Optional["zlib._Compress"] = None  # created on first use
            # for broadcast(): what the peer's window holds (0: empty), see the extension
            self._history = 0
            self._since_sync = 0
            self._fragmenting = False
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

        If a call raises (:exc:`MemoryError`, say), its data never reaches the peer: the
        next message starts from an empty window. After a failure in the middle of a
        fragmented message the compressor refuses data (:exc:`DeflateError`) until
        :meth:`reset`.
        """
        shareable = (fin and _sharing and type(data) is bytes
                     and _SHARE_MIN <= len(data) <= _SHARE_MAX)  # type: ignore[arg-type]
        led, seen = (_find_led(self._params(), data, self._history, self) if shareable
                     else (None, False))
        state = None
        if led is not None and not self._no_context_takeover:
            state = led.state
            if state is _UNSET:
                leader = led.leader()
                _at("follow")
                state = (_UNSET if leader is None or leader is self
                         else leader._give_state(led))
                if state is _UNSET:
                    led = None
        if led is not None:
            _at("adopt")
        view = _as_buffer(data)
        with self._lock:
            self._refuse_if_broken()
            mid_message = self._fragmenting
            try:
                if led is not None and self._adopt(led, state):
                    self._count(view, led.payload, True, True)
                    return led.payload
                if shareable and _keep_next(self._params()):
                    result = self._compress_to_share(data, view, seen)
                else:
                    result = self._compress_locked(view, fin, flush)
                self._count(view, result, fin, False)
                return result
            except BaseException:
                self._abandon(mid_message)
                raise

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
        self._zobj = None
        self._forget_history()
        self._broken = self._broken or refuse

    def _abandon_last(self, refuse: bool) -> None:
        """broadcast(), when it raises: the payload last returned never reaches the peer."""
        with self._lock:
            self._abandon(refuse)

    def _params(self) -> tuple:
        return (self._level, self._window_bits, self._mem_level, self._strategy,
                self._no_context_takeover)

    def _compress_to_share(self, data: object, view: memoryview, seen: bool) -> bytes:
        """Compress a whole message and keep it for others with the same history (see
        the extension's compress once), starting over first if it is time to (only the
        first compressor of a message may: ``seen`` is False)."""
        key = self._params()
        led = _Led(data, self._history, False, b"", self, 0, 0)  # made before it can commit
        if seen:  # a straggler's own compression of a message others share
            _tally_reform(key, 3)
        if (key in _stragglers and not seen and not self._no_context_takeover
                and not self._fragmenting and _reform_due(key)):
            self._zobj = None
            self._forget_history()
            led.before, led.sync = 0, True
            _stragglers.discard(key)
        led.payload = self._compress_locked(view, True, True)
        _at("committed")
        led.after, led.since = self._history, self._since_sync
        _remember(key, led, not seen)
        return led.payload

    def _adopt(self, led: "_Led", state: object) -> bool:
        """Take the state ``led``'s leader reached (``state``, a zlib object or None)
        instead of compressing its message."""
        if (self._history != led.before and not led.sync) or self._fragmenting:
            return False
        self._zobj = None if state is _UNSET or state is None else state.copy()  # type: ignore[attr-defined]
        _unfollowed[self._params()] = 0  # sharing pays here: keep every message again
        self._history, self._since_sync = led.after, led.since
        _tally_reform(self._params(), 4)
        return True

    def _give_state(self, led: "_Led") -> object:
        """A copy of this leader's zlib object after ``led``'s message (None: no object
        yet), stored in ``led`` by the first follower to ask and never replaced; _UNSET
        if the leader has moved on."""
        with self._lock:
            if self._history != led.after:
                return _UNSET
            if led.state is not _UNSET:  # another follower asked first
                return led.state
            _at("give_window")
            state = None if self._zobj is None else self._zobj.copy()
            with _recent_lock:
                if led.state is _UNSET:
                    led.state = state
                return led.state

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
            self._zobj = None  # stdlib objects can't be reset: a new one next time
            self._forget_history()
        else:
            self._history = next(_histories)
            self._since_sync += fin
            self._fragmenting = not fin
        return out

    def _forget_history(self) -> None:
        self._history = 0
        self._since_sync = 0
        self._fragmenting = False

    def _group(self) -> tuple[object, int, int, bool, bool]:
        """broadcast(): (parameter set, history, messages since the window was empty, in
        the middle of a message, holds a zlib object)."""
        return ((self._level, self._window_bits, self._mem_level, self._strategy,
                 self._no_context_takeover), self._history, self._since_sync,
                self._fragmenting, self._zobj is not None)

    def _lead(self, data: object, expected: int) -> Optional[tuple]:
        """broadcast(): compress a whole message for a group whose history is
        ``expected``; (payload, state, history, since_sync), or None if this object's
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
                return payload, state, self._history, self._since_sync
            except BaseException:
                self._abandon(False)
                raise

    def _follow(self, expected: int, state: object, history: int, since_sync: int,
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
            self._history, self._since_sync = history, since_sync
            _count("deflate", size, len(payload), True, True)
            return True

    def reset(self) -> None:
        """Forget the window and any unfinished message (and any earlier error): the next
        message starts empty."""
        with self._lock:
            self._zobj = None
            self._forget_history()
            self._broken = False


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
        decompression stops as soon as it would be passed, with :exc:`MessageTooBig`.
        Corrupt data raises :exc:`DecompressionError`. After either (or a
        :exc:`MemoryError`) the decompressor refuses data until :meth:`reset`.
        ``has_tail``: ``data`` is the end of a message followed by ``00 00 ff ff``
        already (:exc:`ValueError` if not, or if ``fin`` is False), inflated as it is.
        After any exception but those of bad arguments, the decompressor refuses data
        until :meth:`reset`.
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
