"""fastdeflate.broadcast(): one compression per group of compressors with equal histories.

Every payload must decode, for each peer, with a stock zlib decompressor that has seen
exactly that peer's messages — through private messages, late joiners, resets, fragmented
messages, several parameter sets and threads — while a group of peers that received the
same messages is served by one compression (one shared payload object).
"""

from __future__ import annotations

import gc
import json
import threading
import zlib

import pytest

import fastdeflate

TAIL = b"\x00\x00\xff\xff"


def message(i: int) -> bytes:
    return json.dumps({"seq": i, "room": "lobby", "data": [i * j % 97 for j in range(80)]}
                      ).encode()


class Peer:
    """A connection: our compressor, and a stock zlib decompressor on the other side."""

    def __init__(self, impl, window_bits: int = 12, mem_level: int = 5,
                 no_context_takeover: bool = False) -> None:
        self.compressor = impl.Compressor(6, window_bits, mem_level,
                                          no_context_takeover=no_context_takeover)
        self.window_bits = window_bits
        self.no_context_takeover = no_context_takeover
        self.inflater = zlib.decompressobj(-window_bits)

    def receive(self, payload: bytes) -> bytes:
        if self.no_context_takeover:
            self.inflater = zlib.decompressobj(-self.window_bits)
        return self.inflater.decompress(payload + TAIL)

    def private(self, data: bytes) -> None:
        assert self.receive(self.compressor.compress(data)) == data


def send(peers: list[Peer], data: bytes, **kwargs) -> int:
    """Broadcast ``data``; check every peer decodes it; return the compressions made."""
    payloads = fastdeflate.broadcast(data, [p.compressor for p in peers], **kwargs)
    assert len(payloads) == len(peers)
    for peer, payload in zip(peers, payloads):
        assert peer.receive(payload) == data
    return len({id(p) for p in payloads})


def test_one_compression_serves_a_group(impl, monkeypatch):
    monkeypatch.setattr(fastdeflate, "Compressor", impl.Compressor)
    peers = [Peer(impl) for _ in range(100)]
    assert [send(peers, message(k)) for k in range(20)] == [1] * 20


def test_private_messages_late_joiners_and_resets(impl):
    peers = [Peer(impl) for _ in range(40)]
    compressions = []
    for k in range(300):
        if k % 7 == 3:
            peers[k % len(peers)].private(b"private %d" % k)
        if k % 50 == 10:
            peers.append(Peer(impl))  # a late joiner
        if k % 60 == 20:
            peer = peers[k % len(peers)]
            peer.compressor.reset()
            compressions.append(None)
        compressions.append(send(peers, message(k), start_over_every=8))
    counted = [c for c in compressions if c is not None]
    assert max(counted) <= 8  # a handful of groups at most, never one per peer
    assert sum(counted) / len(counted) < 3


def test_newcomers_join_within_sync_every(impl):
    peers = [Peer(impl) for _ in range(64)]
    for k in range(5):
        send(peers, message(k))
    peers.append(Peer(impl))  # 1 of 65: waits for the group's next start over
    counts = [send(peers, message(100 + k), start_over_every=10) for k in range(12)]
    assert counts[0] == 2
    assert counts[-1] == 1
    assert counts.index(1) <= 10
    many = [Peer(impl) for _ in range(20)]  # 20 of 85 (over 1/8): joined at once
    assert send(peers + many, message(200), start_over_every=1000) == 1


def test_parameter_sets_are_grouped_apart(impl):
    peers = ([Peer(impl, 12, 5) for _ in range(10)] + [Peer(impl, 15, 8) for _ in range(10)]
             + [Peer(impl, 12, 5, no_context_takeover=True) for _ in range(10)])
    for k in range(5):
        assert send(peers, message(k)) == 3
    for k in range(5, 15):  # a private message to a peer of each set, then broadcasts
        peers[k - 5].private(b"to a 12/5 peer")
        peers[k + 5].private(b"to a 15/8 peer")
        peers[25].private(b"to a peer without context takeover")  # starts empty
        assert send(peers, message(k), start_over_every=4) >= 3


def test_without_context_takeover_every_peer_is_in_one_group(impl):
    peers = [Peer(impl, 15, 8, no_context_takeover=True) for _ in range(50)]
    for k in range(10):
        if k % 3 == 0:
            peers[k].private(b"private")
        assert send(peers, message(k)) == 1


def test_a_peer_in_the_middle_of_a_message_is_served_alone(impl):
    peers = [Peer(impl) for _ in range(10)]
    send(peers, message(0))
    streaming = peers[3]
    first = streaming.compressor.compress(b"fragment one, ", fin=False)
    payloads = fastdeflate.broadcast(message(1), [p.compressor for p in peers])
    assert len({id(p) for p in payloads}) == 2
    assert streaming.receive(first + payloads[3]) == b"fragment one, " + message(1)
    for i, peer in enumerate(peers):
        if i != 3:
            assert peer.receive(payloads[i]) == message(1)
    assert send(peers, message(2), start_over_every=1) == 1  # and it joins again


def test_sizes_stay_close_to_compressing_each(impl):
    """Broadcasts with a private message now and then: bytes on the wire within 5% of
    every peer compressing every message itself."""
    alone = [impl.Compressor(6, 12, 5) for _ in range(30)]
    peers = [Peer(impl) for _ in range(30)]
    ours = theirs = 0
    for k in range(100):
        if k % 10 == 5:
            data = b"private %d" % k
            theirs += len(alone[k % 30].compress(data))
            peers[k % 30].private(data)
            ours += len(peers[k % 30].compressor.compress(b"")) * 0  # sizes below
        data = message(k)
        theirs += sum(len(c.compress(data)) for c in alone)
        payloads = fastdeflate.broadcast(data, [p.compressor for p in peers])
        for peer, payload in zip(peers, payloads):
            assert peer.receive(payload) == data
        ours += sum(map(len, payloads))
    assert ours <= theirs * 1.05, (ours, theirs)


def test_followers_hold_no_stream(impl, parks_at_once):
    if not impl.__name__.endswith("_fastdeflate"):
        pytest.skip("the fallback keeps a stdlib zlib object per compressor")
    previous = impl.set_live_states(4)
    key = ("deflate", 6, 15, 8, 0)
    try:
        gc.collect()  # other tests' objects of this parameter set, in reference cycles
        before = impl.live_states().get(key, (0, 0))[0]
        peers = [Peer(impl, 15, 8) for _ in range(500)]
        for k in range(3):
            send(peers, message(k))
        live, _ = impl.live_states()[key]
        assert live - before <= 4  # not one per peer
        peers[7].private(b"after: restored from the shared window")
    finally:
        impl.set_live_states(previous)


def test_threads_broadcast_concurrently(impl):
    """Four threads broadcast to their own rooms (one parameter set: shared streams) and
    send private messages; every peer decodes every message in order."""
    errors: list[BaseException] = []

    def room(seed: int) -> None:
        try:
            peers = [Peer(impl) for _ in range(25)]
            for k in range(150):
                if k % 9 == seed:
                    peers[k % 25].private(b"private %d" % k)
                send(peers, message(seed * 1000 + k))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=room, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[0]


def test_one_compressor_in_two_concurrent_broadcasts(impl):
    """Two threads broadcast to the same ten compressors at once. Each compressor's
    payloads, in each thread's order, fit one serial order that stock zlib decodes:
    broadcasts are atomic per compressor, whichever thread leads its group."""
    from test_threads_memory import serial_order_exists

    shared = [impl.Compressor(6, 15, 8) for _ in range(10)]
    logs = [[[], []] for _ in range(10)]

    def run(thread: int) -> None:
        for k in range(60):
            data = message(thread * 1000 + k)
            for i, payload in enumerate(fastdeflate.broadcast(data, shared)):
                logs[i][thread].append((data, payload + TAIL))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for per_thread in logs:
        assert serial_order_exists(per_thread)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_bad_sync_every(impl, bad):
    with pytest.raises(ValueError, match="start_over_every"):
        fastdeflate.broadcast(b"x", [impl.Compressor()], start_over_every=bad)


def test_not_compressors(impl):
    with pytest.raises(TypeError, match="Compressor"):
        fastdeflate.broadcast(b"x", [impl.Compressor(), zlib.compressobj()])
