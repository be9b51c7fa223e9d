"""One message to many connections, compressed once per group of equal histories.

Compressors of one parameter set that have sent the same messages since their window was
last empty leave their peers with the same window, so one compression serves them all:
the first member (the *leader*) compresses the message and the others *follow* — they
take the state the leader reached (the extension: a reference to its window, and their
stream goes back to the shared pool; the fallback: a copy of its zlib object) instead of
compressing. A member that is then sent something else gets its own stream back from
that window, and leaves the group by doing so. New and diverged members join again when
the group starts over from an empty window: when they are at least 1/8 of the
recipients, or when the group has gone ``start_over_every`` messages without starting over,
every recipient is reset first (any compressor may reset between messages: the peer only
sees a message that refers to nothing earlier). Without context takeover every message
starts empty: all compressors of a parameter set are always one group.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ._codec import codec
from ._params import DEFAULT_START_OVER_BUDGET, START_OVER_EVERY

__all__ = ["broadcast", "DEFAULT_START_OVER_EVERY", "DEFAULT_START_OVER_BUDGET",
           "set_start_over_budget"]

#: How many broadcasts a group goes before starting over to take in new members.
DEFAULT_START_OVER_EVERY = START_OVER_EVERY


def set_start_over_budget(share: float) -> float:
    """Set how many bytes compress-once may spend to save CPU, when one message goes to
    many connections (a broadcast); returns the previous setting.

    A connection that was sent a message of its own (a private one), or joined late,
    has a window unlike its group's: it compresses each broadcast alone until either its
    window holds only the group's messages again (then it rejoins, at no cost in bytes:
    a few messages at window 12, a few dozen at window 15) or its group starts over from
    an empty window, which takes everyone back at once but makes that message larger
    for every member. Several sent private messages at once catch up as a cohort: one
    compression per broadcast for them all, started from an empty window. ``share`` is
    what starting over may cost the group, as a share of the bytes it sends: 0 never
    starts over and makes no cohort (the fewest bytes, the most CPU under churn); the
    default, 0.02, keeps a group's bytes within a few percent of stock zlib's; larger
    values start over sooner (less CPU, more bytes). Also
    ``FASTDEFLATE_START_OVER_BUDGET`` at import. ValueError unless 0 <= share <= 1.
    """
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise TypeError(f"share must be a number, got {type(share).__name__}")
    if not 0 <= share <= 1:  # (NaN fails too)
        raise ValueError(f"share must be between 0 and 1, got {share!r}")
    return float(codec.set_start_over_budget(float(share)))


def broadcast(data: Any, compressors: Iterable[Any], *,
              start_over_every: int = DEFAULT_START_OVER_EVERY) -> list[bytes]:
    """Compress ``data`` as one whole message for each compressor; returns the payloads
    in the same order (one ``bytes`` object shared by each group).

    Each compressor ends in the state its own ``compress(data)`` would leave, as far as
    its peer can tell. One in the middle of a fragmented message gets ``compress(data)``,
    as if called alone. ``start_over_every`` (>= 1) bounds how long a newcomer waits to join.

    If it raises (MemoryError, say), no payload reaches any peer: every compressor starts
    its next message from an empty window (one that was in the middle of a fragmented
    message and was given this one refuses data until ``reset()``, as after a failed
    ``compress()``).
    """
    if (not isinstance(start_over_every, int) or isinstance(start_over_every, bool)
            or start_over_every < 1):
        raise ValueError(f"start_over_every must be an int >= 1, got {start_over_every!r}")
    members = list(compressors)
    for compressor in members:
        if not hasattr(type(compressor), "_group"):
            raise TypeError("broadcast() needs fastdeflate Compressor objects, not "
                            f"{type(compressor).__name__}")
    payloads: list[Optional[bytes]] = [None] * len(members)
    busy = [False] * len(members)
    try:
        _broadcast(data, members, start_over_every, payloads, busy)
    except BaseException:
        # The payloads made are lost: none of their messages reaches a peer.
        for index, compressor in enumerate(members):
            if not busy[index] or payloads[index] is not None:
                compressor._abandon_last(busy[index])
        raise
    return payloads  # type: ignore[return-value]


def _broadcast(data: Any, members: list[Any], start_over_every: int,
               payloads: list[Optional[bytes]], busy: list[bool]) -> None:
    groups: dict[tuple, list[int]] = {}
    for index, compressor in enumerate(members):
        ring, history, _, busy[index], _ = compressor._group()
        key = (ring, history, index) if busy[index] else (ring, history)
        groups.setdefault(key, []).append(index)
    for ring_groups in _by_ring(groups).values():
        if len(ring_groups) > 1:
            _maybe_start_over(members, groups, ring_groups, start_over_every)
    for key, indexes in groups.items():
        if len(key) == 3:  # mid-message: alone
            payloads[indexes[0]] = members[indexes[0]].compress(data)
        else:
            _serve(data, members, indexes, key[1], payloads)


def _by_ring(groups: dict[tuple, list[int]]) -> dict[object, list[tuple]]:
    rings: dict[object, list[tuple]] = {}
    for key in groups:
        rings.setdefault(key[0], []).append(key)
    return rings


def _maybe_start_over(members: list[Any], groups: dict[tuple, list[int]],
                      keys: list[tuple], start_over_every: int) -> None:
    """Reset every idle member of one parameter set into one empty group, if enough of
    them are outside the largest group or that group has gone long enough."""
    idle = [key for key in keys if len(key) == 2]
    if len(idle) < 2:
        return
    largest = max(idle, key=lambda key: len(groups[key]))
    total = sum(len(groups[key]) for key in idle)
    outside = total - len(groups[largest])
    age = members[groups[largest][0]]._group()[2]
    if outside * 8 < total and age < start_over_every:
        return
    merged: list[int] = []
    for key in idle:
        for index in groups.pop(key):
            members[index].reset()
            merged.append(index)
    groups[(largest[0], 0)] = sorted(merged)


def _serve(data: Any, members: list[Any], indexes: list[int], expected: int,
           payloads: list[Optional[bytes]]) -> None:
    """One group: the first member that still has history ``expected`` leads (one with a
    live stream first); the others follow, or compress alone if they moved on."""
    order = sorted(indexes, key=lambda index: not members[index]._group()[4])
    led = None
    for position, index in enumerate(order):
        led = members[index]._lead(data, expected)
        if led is not None:
            payloads[index] = led[0]
            break
        payloads[index] = members[index].compress(data)  # used meanwhile: alone
    if led is None:
        return
    payload, state, history, since_empty = led
    size = memoryview(data).nbytes  # for the followers' traffic counters
    for index in order[position + 1:]:
        if members[index]._follow(expected, state, history, since_empty, size, payload):
            payloads[index] = payload
        else:
            payloads[index] = members[index].compress(data)
