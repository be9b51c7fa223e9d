"""Large messages compressed off the event loop, in order, for every integration.

A connection sending a message of at least ``fastdeflate.set_off_loop_size()`` bytes
compresses it in a worker thread (fastdeflate's own, ``_off_loop.run``; the codec
releases the GIL) while the event loop serves the other connections. Meanwhile the connection's
`Outbox` *holds* every frame its library tries to write (later messages, pings, pongs,
a close: whatever path they come by, a broadcast included), and writes them in order
after the large message. A second large message sent meanwhile takes its turn behind
the first. If the sender is cancelled while its message is compressed, the message is
never written and the compressor starts a new stream (``reset()``: the peer's window
never saw the message, and the next message refers to nothing before it), so the peer
never sees a message it cannot decode; if the connection closes meanwhile, the message
is dropped as any write to a closed connection is.

What differs per library is only where frames are held and how they are written:
subclasses give `_hold`, `_unhold`, `_write` and `_push`. `LatePatch` puts the send
paths in place when the library's module is imported, even after ``enable()``.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections import deque
from typing import Any, Callable, Optional

from fastdeflate import _off_loop
from fastdeflate._params import SHARE_MAX
from fastdeflate.integrations import _marks, _onimport
from fastdeflate._forksafe import free_in_child

__all__ = ["Outbox", "Inbox", "LatePatch", "large", "large_payload", "until_done"]


def large(data: Any) -> bool:
    """True if ``data`` (str, bytes-like) is to be compressed off the loop."""
    size = _off_loop.off_loop_size()
    try:
        return size > 0 and len(data) >= size
    except TypeError:
        return False


def large_payload(payload: Any) -> bool:
    """True if the compressed ``payload`` of a whole message is to be decompressed off
    the loop: a quarter of the off-loop size (text and JSON inflate to 4-10 times
    their payload)."""
    size = _off_loop.off_loop_size()
    return size > 0 and len(payload) * 4 >= size


async def until_done(job: "asyncio.Future[Any]") -> None:
    """Wait for ``job`` to finish, whatever its result, through any cancellation."""
    while not job.done():
        try:
            await asyncio.wait([job])
        except asyncio.CancelledError:
            continue


class _Turn:
    """A large message's place among the held frames: it is compressed when reached."""

    __slots__ = ("future",)

    def __init__(self, future: "asyncio.Future[None]") -> None:
        self.future = future


_threads = threading.local()


def _leaders() -> dict:
    """This thread's (its event loop's) messages being compressed off the loop for one
    connection while others wait to share the payload: id(message) -> (message, done).
    A message is kept in it while it is there, so its id cannot be reused meanwhile."""
    leaders = getattr(_threads, "leaders", None)
    if leaders is None:
        leaders = _threads.leaders = {}
    return leaders


class Outbox:
    """One connection's frames while one of its large messages is compressed off the
    loop: held (``_hold``: the library's write path now calls `keep`) and written in
    order after it (`_flush`)."""

    def __init__(self) -> None:
        self._held: Optional[deque] = None  # None: nothing held, frames go through

    # -- per library ------------------------------------------------------------------
    def _hold(self) -> None:
        """Route the connection's frame writes to `keep`."""
        raise NotImplementedError

    def _unhold(self) -> None:
        """Undo `_hold`: frames go through again."""
        raise NotImplementedError

    def _write(self, item: Any) -> None:
        """Write one held item through the library's own (unheld) path."""
        raise NotImplementedError

    def _push(self) -> None:
        """Hand what was written to the transport (if the library does not itself)."""

    # -- shared -----------------------------------------------------------------------
    @property
    def holding(self) -> bool:
        """True while a large message of this connection is being compressed."""
        return self._held is not None

    def keep(self, item: Any) -> None:
        """Hold ``item`` (a frame, as the library's write path gave it)."""
        assert self._held is not None
        self._held.append(item)

    async def send(self, compress: Callable[[], Any], write: Callable[[Any], None],
                   reset: Callable[[], None], message: Any = None) -> None:
        """Send one large message: ``compress()`` (its payload; run in a worker thread
        in a copy of this context) once the messages before it are written, then
        ``write(payload)`` on the loop, then the frames held meanwhile. ``reset()``
        starts the compressor over if the message is not sent (cancelled, failed).

        ``message`` (the object the application sent) lets one message sent to many
        connections at once be compressed off the loop once: the others wait for that
        one, then compress on the loop, where compress once gives them its payload
        (messages up to the size compress once shares; larger ones each go off the
        loop)."""
        loop = asyncio.get_running_loop()
        if self._held is not None:  # another large message first: wait for our place
            turn = _Turn(loop.create_future())
            self._held.append(turn)
            try:
                await turn.future
            except asyncio.CancelledError:
                if turn.future.done() and not turn.future.cancelled():
                    self._flush()  # given the turn as we were cancelled: pass it on
                raise
        else:
            self._held = deque()
            self._hold()
        try:
            leaders = _leaders()
            if message is not None and len(message) > SHARE_MAX:
                message = None  # compress once does not share it: each off the loop
            leader = leaders.get(id(message)) if message is not None else None
            if leader is not None and leader[0] is message:
                await asyncio.shield(leader[1])  # (cancelled: nothing compressed yet)
                try:
                    payload = compress()  # on the loop: the leader's payload, shared
                except BaseException:
                    reset()
                    raise
            else:
                done = loop.create_future()
                if message is not None:
                    leaders[id(message)] = (message, done)
                try:
                    payload = await self._off_loop(loop, compress, reset)
                finally:
                    if message is not None:
                        del leaders[id(message)]
                    done.set_result(None)
            write(payload)
        finally:
            self._flush()

    @staticmethod
    async def _off_loop(loop: asyncio.AbstractEventLoop, compress: Callable[[], Any],
                        reset: Callable[[], None]) -> Any:
        """``compress()`` in a worker thread; ``reset()`` if it is cancelled or fails."""
        job = _off_loop.run(loop, contextvars.copy_context().run, compress)
        try:
            payload = await asyncio.shield(job)
        except asyncio.CancelledError:
            await until_done(job)
            reset()  # the peer never gets this message: a new stream
            raise
        except BaseException:
            reset()
            raise
        _off_loop.counted(compressed=1)
        return payload

    def _flush(self) -> None:
        """Write the held frames in order, up to the next large message's turn (which
        then starts); with none left, stop holding."""
        held = self._held
        assert held is not None
        try:
            while held:
                item = held.popleft()
                if type(item) is _Turn:
                    if item.future.done():  # its sender was cancelled while waiting
                        continue
                    item.future.set_result(None)
                    return
                self._write(item)
            self._held = None
            self._unhold()
        finally:
            self._push()


class LatePatch:
    """Replace ``owner.attribute`` (``owner``: a class path ``"module:Class"``, or
    ``"module:"`` for a name of the module itself) with
    ``make(stock)`` while applied: at once if the module is loaded, else right after it
    is imported. The replacement is marked as fastdeflate's (``_marks``)."""

    _lock = free_in_child(threading.Lock())  # never held while waiting for an import
    _active: "list[LatePatch]" = []
    _watcher: Optional[_onimport.Watcher] = None

    def __init__(self, owner: str, attribute: str, make: Callable[[Any], Any]) -> None:
        self.module, self.cls = owner.split(":")
        self.attribute = attribute
        self.make = make
        self.stock: Any = None

    def _target(self, loading: Optional[str] = None) -> Any:
        """The class (or module), if its module is loaded (``loading``: it has just
        run)."""
        module = sys.modules.get(self.module)
        if module is None or (self.module != loading
                              and not _onimport.complete(self.module)):
            return None
        return getattr(module, self.cls, None) if self.cls else module

    def _put(self, loading: Optional[str] = None) -> None:
        """Under _lock: replace the attribute now if its class is loaded."""
        target = self._target(loading)
        if target is None:
            return
        current = target.__dict__.get(self.attribute)
        if current is None or _marks.is_ours(current):
            return
        self.stock = current
        replacement = self.make(current)
        _marks.mark(replacement)
        setattr(target, self.attribute, replacement)

    def apply(self) -> None:
        """Put the replacement in place now, or when its module has been imported."""
        with LatePatch._lock:
            if self not in LatePatch._active:
                LatePatch._active.append(self)
            self._put()
            watched = {patch.module for patch in LatePatch._active}
            watcher = LatePatch._watcher
            if watcher is None or watcher.names != frozenset(watched):
                if watcher is not None:
                    watcher.remove()
                watcher = LatePatch._watcher = _onimport.Watcher(watched, _late_loaded)
                watcher.install()

    def remove(self) -> None:
        """Put the stock attribute back (where the replacement still is)."""
        with LatePatch._lock:
            if self in LatePatch._active:
                LatePatch._active.remove(self)
            target = self._target()
            if (target is not None and self.stock is not None
                    and _marks.is_ours(target.__dict__.get(self.attribute))):
                setattr(target, self.attribute, self.stock)
            self.stock = None
            if not LatePatch._active and LatePatch._watcher is not None:
                LatePatch._watcher.remove()
                LatePatch._watcher = None

    def applied(self) -> bool:
        """True if the replacement is in place now."""
        target = self._target()
        return target is not None and _marks.is_ours(target.__dict__.get(self.attribute))


def _late_loaded(module: str) -> None:
    """The watcher's hook: ``module`` has just run; apply the patches waiting for it."""
    with LatePatch._lock:
        for patch in LatePatch._active:
            if patch.module == module:
                patch._put(module)


class Inbox:
    """One connection's received frames while one of its large messages is
    decompressed off the loop.

    Where a library decodes inside a parser that runs synchronously as bytes arrive
    (websockets' sans-I/O protocol, under websockets' asyncio API and uvicorn), the
    extension's ``decode`` *defers* a large compressed message (`defer`): it returns a
    placeholder frame and keeps the real decoding for later. Every data frame parsed
    after it is deferred too (the decompressor's stream is in order), and the
    connection's inbound calls (bytes received, end of stream, connection lost) are
    held (`hold`). `start` then decodes the deferred frames in order, the large one in
    a worker thread, hands the events to the library (`_deliver`) with the real frames
    in the placeholders' places (or, when a frame is refused, those before it and then
    `_fail`, as the parser would have), and replays the held calls in order."""

    def __init__(self) -> None:
        self._pending: list[tuple[Callable[[], Any], Any]] = []  # (decode, placeholder)
        self._calls: Optional[deque] = None  # held inbound calls; None: not holding
        self._task: Optional["asyncio.Task[None]"] = None
        self._replaying: Optional[asyncio.Handle] = None  # the replay, scheduled

    # -- per library ------------------------------------------------------------------
    def _deliver(self, events: list) -> None:
        """Hand the library the events parsed with the deferred frames."""
        raise NotImplementedError

    def _fail(self, exc: BaseException) -> None:
        """A deferred frame was refused (too big, corrupt): fail as the parser would."""
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------
    @property
    def holding(self) -> bool:
        """True while inbound calls wait for a large message's decompression."""
        return self._calls is not None

    @property
    def deferring(self) -> bool:
        """True once a frame was deferred by the parser's current run."""
        return bool(self._pending)

    def defer(self, decode: Callable[[], Any], placeholder: Any) -> Any:
        """Keep ``decode()`` (the real decoding of a frame) for `start`, in order, and
        return ``placeholder`` (the frame the parser gets meanwhile)."""
        self._pending.append((decode, placeholder))
        return placeholder

    def hold(self, call: Callable[..., Any], *args: Any) -> None:
        """Hold an inbound call (replayed in order once the events are delivered)."""
        assert self._calls is not None
        self._calls.append((call, args))

    def start(self, events: list) -> None:
        """The parser's run is over and deferred frames: decode them, then deliver."""
        self._calls = deque()
        pending, self._pending = self._pending, []
        self._task = asyncio.ensure_future(self._resolve(pending, events))
        self._task.add_done_callback(self._ended)

    def _ended(self, task: "asyncio.Task[None]") -> None:
        """The task is over: if it was cancelled before it ran its course (the loop
        shutting down), nothing was delivered; the held calls go through (the
        connection's loss among them: without it the library would wait for it)."""
        if task is not self._task:  # (an earlier task's end: a later one holds now)
            return
        self._task = None
        if self._calls is not None and self._replaying is None:
            self._replay()

    async def _resolve(self, pending: list[tuple[Callable[[], Any], Any]],
                       events: list) -> None:
        loop = asyncio.get_running_loop()
        real: dict[int, Any] = {}  # id(placeholder) -> frame (the placeholders live on)
        failure: Optional[BaseException] = None
        try:
            for index, (decode, placeholder) in enumerate(pending):
                if index == 0:  # the large message: off the loop
                    job = _off_loop.run(loop, decode)
                    try:
                        real[id(placeholder)] = await asyncio.shield(job)
                    finally:
                        await until_done(job)
                        _off_loop.counted(decompressed=1)
                else:
                    real[id(placeholder)] = decode()
        except Exception as exc:  # refused: the frames after it were never parsed
            failure = exc
        try:
            delivered = []
            for event in events:
                if id(event) in real:
                    delivered.append(real[id(event)])
                elif any(event is placeholder for _, placeholder in pending):
                    break  # the refused frame, and what came after it
                else:
                    delivered.append(event)
            self._deliver(delivered)
            if failure is not None:
                self._fail(failure)
        finally:
            # Replayed at the loop's next turn: the reader woken by these events takes
            # them first, as it would have before a connection loss held meanwhile.
            self._replaying = asyncio.get_running_loop().call_soon(self._replay)

    def _replay(self) -> None:
        """Replay the held calls in order; one that defers again holds the rest."""
        calls, self._calls = self._calls, None
        self._replaying = None
        while calls:
            call, args = calls.popleft()
            call(*args)
            if self._calls is not None:  # held again: the rest wait behind it
                self._calls.extend(calls)
                return
