"""Broadcasts mixed with per-user messages, at the codec (no sockets): the bytes.

A server's view of websockets' ``broadcast()`` as fastdeflate's integration sees it:
each connection's compressor is given the same bytes object for a broadcast (websockets
encodes the message once), so compress-once groups form on their own. Every
``private_every`` broadcasts one client in ``private_one_in`` (rotating) gets a message
of its own, and ``late`` of the clients join part-way through (spread evenly). Each
connection's payloads are decoded by its own stock zlib peer and checked; the bytes are
compared with stock zlib's (one ``compressobj`` per connection, websockets' settings).
Used by ``tests/test_broadcast_bytes.py`` (bytes only, no timings).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import payloads

TAIL = b"\x00\x00\xff\xff"


@dataclass(frozen=True)
class Mix:
    clients: int = 100
    broadcasts: int = 400
    late: float = 0.10
    private_every: int = 10
    private_one_in: int = 17
    level: int = 6
    window_bits: int = 12  # websockets' defaults
    mem_level: int = 5
    size: int = 1024


@dataclass
class Outcome:
    deliveries: int  # messages delivered: broadcast deliveries and private messages
    privates: int
    stock_bytes: int
    fast_bytes: int
    compressions: int  # broadcast payloads fastdeflate made (the others were shared)

    @property
    def ratio(self) -> float:
        """fastdeflate's bytes / stock's."""
        return self.fast_bytes / self.stock_bytes


def _stock(mix: Mix) -> Any:
    obj = zlib.compressobj(mix.level, zlib.DEFLATED, -mix.window_bits, mix.mem_level)
    return lambda data: (obj.compress(data) + obj.flush(zlib.Z_SYNC_FLUSH))[:-4]


def run(codec: ModuleType, mix: Mix = Mix()) -> Outcome:
    """Send the mix through ``codec``'s compressors and stock zlib's side by side."""
    updates = payloads.varying(mix.size, 256, seed=11)
    privates = payloads.varying(mix.size, 64, seed=12)
    late = round(mix.clients * mix.late)
    joins = sorted(max(1, (j + 1) * mix.broadcasts // (late + 1)) for j in range(late))
    members: list[tuple[Any, Any, Any]] = []  # (fastdeflate, stock, the peer's decoder)

    def join() -> None:
        members.append((codec.Compressor(mix.level, mix.window_bits, mix.mem_level),
                        _stock(mix), zlib.decompressobj(-mix.window_bits)))

    for _ in range(mix.clients):
        join()
    outcome = Outcome(0, 0, 0, 0, 0)
    rotation = 0
    for k in range(mix.broadcasts):
        while joins and joins[0] == k:
            joins.pop(0)
            join()
        data = updates[k % len(updates)]
        made = {}  # the payload objects of this broadcast, each made once
        for fast, stock, peer in members:
            payload = fast.compress(data)
            made[id(payload)] = payload
            _count(outcome, payload, stock(data), peer, data)
        outcome.compressions += len(made)
        if (k + 1) % mix.private_every == 0:
            for index in range(rotation % mix.private_one_in, len(members),
                               mix.private_one_in):
                fast, stock, peer = members[index]
                message = privates[(k + index) % len(privates)]
                _count(outcome, fast.compress(message), stock(message), peer, message)
                outcome.privates += 1
            rotation += 1
    return outcome


def _count(outcome: Outcome, payload: bytes, stock: bytes, peer: Any, data: bytes) -> None:
    if peer.decompress(payload + TAIL) != data:
        raise AssertionError("a peer decoded other bytes")
    outcome.deliveries += 1
    outcome.fast_bytes += len(payload)
    outcome.stock_bytes += len(stock)
