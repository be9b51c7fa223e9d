"""Compress once: one bytes object sent as a whole message to many compressors in a row.

This is what websockets' broadcast() and any ``for connection in room: send(message)``
loop do. Compressors of one parameter set with the same history since their window was
last empty share the first one's payload and the state it reached; the others compress
alone. Every test checks, for every peer, that a stock zlib decompressor that has seen
exactly that peer's messages decodes each one — on both implementations.
"""

from __future__ import annotations

import gc
import json
import threading
import zlib

import pytest

pytestmark = pytest.mark.test_build  # the compiled runs use its test hooks

TAIL = b"\x00\x00\xff\xff"


def message(i: int) -> bytes:
    return json.dumps({"seq": i, "room": "lobby", "data": [i * j % 97 for j in range(80)]}
                      ).encode()


class Peer:
    def __init__(self, impl, window_bits: int = 12, no_context_takeover: bool = False):
        self.compressor = impl.Compressor(6, window_bits, 5 if window_bits == 12 else 8,
                                          no_context_takeover=no_context_takeover)
        self.window_bits = window_bits
        self.no_context_takeover = no_context_takeover
        self.inflater = zlib.decompressobj(-window_bits)

    def send(self, data) -> bytes:
        payload = self.compressor.compress(data)
        if self.no_context_takeover:
            self.inflater = zlib.decompressobj(-self.window_bits)
        assert self.inflater.decompress(payload + TAIL) == bytes(data)
        return payload


def fan_out(peers: list[Peer], data) -> int:
    """Send ``data`` to every peer in a loop; the number of distinct payloads made."""
    payloads = [peer.send(data) for peer in peers]  # kept alive: their ids stay distinct
    return len({id(p) for p in payloads})


def fan_out_copies(peers: list[Peer], k: int) -> int:
    payloads = [peer.send(message(k)) for peer in peers]
    return len({id(p) for p in payloads})


@pytest.fixture(autouse=True)
def sharing_on(impl):
    previous = impl._set_sharing(True)
    yield
    impl._set_sharing(previous)


def test_a_loop_over_peers_compresses_once(impl):
    peers = [Peer(impl) for _ in range(50)]
    assert [fan_out(peers, message(k)) for k in range(10)] == [1] * 10


def test_without_sharing_every_peer_compresses(impl):
    impl._set_sharing(False)
    peers = [Peer(impl) for _ in range(10)]
    assert fan_out(peers, message(0)) == 10


def test_equal_bytes_in_other_objects_are_shared_and_mutable_buffers_are_not(impl):
    """A library that encodes a str for each connection hands each compressor other
    bytes objects of equal bytes: one message, compressed once. A bytearray may change
    between two sends: never shared."""
    peers = [Peer(impl) for _ in range(6)]
    fan_out(peers, message(0))
    assert fan_out_copies(peers, 1) == 1  # a new object each time, the same bytes
    assert fan_out_copies(peers, 2) == 1
    data = bytearray(message(2))
    assert fan_out(peers, data) == 6
    # they diverged: the first to get the next message leads, two compress it alone and
    # the fourth starts a cohort the last two take (test_rejoin.py); one group again
    # once starting over pays (its bytes, half a message to each before any was
    # measured, within 2-4% of theirs)
    counts = [fan_out(peers, message(3 + k)) for k in range(40)]
    assert counts[0] == 4 and counts[-1] == 1 and counts.index(1) <= 33


def test_private_messages_and_late_joiners(impl):
    peers = [Peer(impl) for _ in range(40)]
    counts = []
    for k in range(120):
        if k % 7 == 3:
            peers[k % len(peers)].send(b"private %d" % k)
        if k in (20, 21, 60):
            peers.append(Peer(impl))
        counts.append(fan_out(peers, message(k)))
    assert max(counts) <= 12
    # the group starts over when that costs little in bytes (_start_over_due_now): until then
    # each peer sent a private message since compresses alone (one every 7 messages)
    assert counts[-1] <= 8
    assert sum(counts) / len(counts) < 6  # not one compression per peer (43)


def test_a_late_joiner_joins_within_a_sync_period(impl):
    """A newcomer joins when the group next starts over: once that pays (about 25
    messages before any start-over was measured)."""
    peers = [Peer(impl) for _ in range(20)]
    for k in range(40):  # the group is past the messages starting over needs
        fan_out(peers, message(k))
    peers.append(Peer(impl))
    counts = [fan_out(peers, message(100 + k)) for k in range(34)]
    assert counts[0] == 2  # the newcomer alone
    joined = counts.index(1)  # when the group starts over
    assert joined <= 33 and set(counts[joined:]) == {1}


def test_tiny_messages_are_not_shared(impl):
    """CPython shares b"" and one-byte bytes objects between unrelated senders: messages
    under 64 bytes are compressed by each compressor, as it would alone."""
    peers = [Peer(impl) for _ in range(5)]
    for data in (b"", b"x", b"y" * 63):
        for peer in peers:
            peer.send(data)
        # each compressed alone: five histories (payloads may be CPython's cached objects)
        assert len({peer.compressor._group()[1] for peer in peers}) == 5


def test_fragments_are_not_shared(impl):
    peers = [Peer(impl) for _ in range(4)]
    data = message(1)
    parts = [p.compressor.compress(data, fin=False) for p in peers]
    ends = [p.compressor.compress(b"!", fin=True) for p in peers]
    for peer, part, end in zip(peers, parts, ends):
        assert peer.inflater.decompress(part + end + TAIL) == data + b"!"
    assert fan_out(peers, message(2)) == 4  # each diverged: alone until a start over


def test_without_context_takeover_all_share(impl):
    peers = [Peer(impl, 15, no_context_takeover=True) for _ in range(30)]
    for k in range(5):
        peers[k].send(b"private")
        assert fan_out(peers, message(k)) == 1


def test_window_and_takeover_settings_never_mix(impl):
    peers = ([Peer(impl, 12) for _ in range(5)] + [Peer(impl, 15) for _ in range(5)]
             + [Peer(impl, 15, no_context_takeover=True) for _ in range(5)])
    for k in range(5):
        assert fan_out(peers, message(k)) == 3


def test_a_leader_that_moved_on_is_not_followed(impl):
    """The first compressor sends something else before the others take its state:
    they compress alone (its window no longer is theirs), and everything decodes."""
    peers = [Peer(impl) for _ in range(5)]
    fan_out(peers, message(0))
    data = message(1)
    first = peers[0].send(data)
    peers[0].send(b"private, before the others send")
    rest = [p.send(data) for p in peers[1:]]
    assert all(r is not first for r in rest)  # (first is alive: identity is meaningful)
    assert fan_out(peers[1:], message(2)) == 1


def test_followers_hold_no_stream(impl, parks_at_once):
    if not impl.__name__.endswith("_fastdeflate"):
        pytest.skip("the fallback keeps one stdlib zlib object per compressor")
    previous = impl.set_live_states(4)
    try:
        peers = [Peer(impl, 15) for _ in range(300)]
        for k in range(3):
            fan_out(peers, message(k))
        live, _ = impl.live_states()[("deflate", 6, 15, 8, 0)]
        assert live <= 4
        peers[5].send(b"a private message after: its window comes back")
    finally:
        impl.set_live_states(previous)


def test_threads_fan_out_to_their_own_rooms(impl):
    errors: list[BaseException] = []

    def room(seed: int) -> None:
        try:
            peers = [Peer(impl) for _ in range(20)]
            for k in range(100):
                if k % 9 == seed:
                    peers[k % 20].send(b"private %d" % k)
                data = message(seed * 1000 + k)
                for peer in peers:
                    peer.send(data)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=room, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[0]


def test_threads_send_one_object_to_shared_peers(impl):
    """Two threads send the same messages to the same peers (their own order each); the
    payloads each compressor produced, in each thread's order, fit one serial order."""
    from test_threads_memory import serial_order_exists

    compressors = [impl.Compressor(6, 15, 8) for _ in range(8)]
    logs = [[[], []] for _ in compressors]
    messages = [message(k) for k in range(40)]

    def run(thread: int) -> None:
        for data in messages:
            for i, c in enumerate(compressors):
                logs[i][thread].append((data, c.compress(data) + TAIL))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for per_thread in logs:
        assert serial_order_exists(per_thread)


def test_only_messages_someone_still_holds_are_kept(impl):
    """A message the application no longer holds can't be sent again: it is not kept
    (at most 8 per parameter set in any case)."""
    import os

    c = impl.Compressor(6, 15, 8)
    c.compress(os.urandom(1000))  # dropped at once by the caller
    held = [os.urandom(1000) for _ in range(20)]
    c.compress(held[0])
    assert impl._kept_messages() == 1
    for data in held[1:]:
        c.compress(data)
    assert impl._kept_messages() == 8
    del held, data
    c.compress(os.urandom(1000))
    assert impl._kept_messages() == 1


def test_recent_messages_do_not_accumulate(impl):
    """Only the last few whole messages are kept: sending many large messages to one
    compressor keeps memory flat."""
    import tracemalloc

    c = impl.Compressor(6, 15, 8)
    gc.collect()
    tracemalloc.start()
    try:
        for k in range(20):
            c.compress(bytes(100_000) + b"%d" % k)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for k in range(200):
            c.compress(bytes(100_000) + b"%d" % k)
        gc.collect()
        assert tracemalloc.get_traced_memory()[0] - before < 200_000
    finally:
        tracemalloc.stop()


# --- a parameter set where nothing is shared keeps few messages ---------------------------

QUIET_AFTER, QUIET_SAMPLE = 64, 16


def test_one_connection_alone_makes_its_parameter_set_quiet(impl):
    """A connection sending messages nobody else is sent (a single client, every message
    new): after 64 kept with no follower, only one in 16 is kept — a keep costs time —
    and every message still decodes."""
    alone = Peer(impl)
    held = [message(k) for k in range(QUIET_AFTER + 40)]  # still referenced: keepable
    for k, data in enumerate(held):
        assert impl._quiet_sets() == (1 if k >= QUIET_AFTER else 0)
        alone.send(data)
    assert impl._quiet_sets() == 1


def test_with_and_without_context_takeover_one_parameter_set_is_quiet_once(impl):
    """A parameter set is level, window, memLevel and strategy: its compressors with and
    without context takeover share its compress-once state. Private messages from one
    of each, half the quiet threshold from each, make that one set quiet, in both
    implementations; and neither takes the other's payloads (a payload made without
    context takeover refers to nothing earlier, one made with it may)."""
    keeps = Peer(impl)
    resets = Peer(impl, no_context_takeover=True)
    held = [message(2000 + k) for k in range(QUIET_AFTER)]
    for k, data in enumerate(held):
        assert impl._quiet_sets() == 0
        (keeps if k % 2 else resets).send(data)
    assert impl._quiet_sets() == 1
    peers = [Peer(impl) for _ in range(3)]
    bare = [Peer(impl, no_context_takeover=True) for _ in range(3)]
    for k in range(QUIET_SAMPLE + 4):  # past the sample: a fan-out is shared again
        with_takeover = fan_out(peers, message(k))
        without = fan_out(bare, message(k))
    assert with_takeover == 1 and without == 1
    mixed = [Peer(impl), Peer(impl, no_context_takeover=True)]
    assert fan_out(mixed, message(999)) == 2


def test_a_broadcast_in_a_quiet_parameter_set_is_shared_again_at_once(impl):
    """After a quiet stretch, a fan-out to 40 connections compresses at most 16 times
    before a follower finds a kept message; from then on every message is kept and the
    next fan-outs compress once; every peer decodes all it was sent."""
    peers = [Peer(impl) for _ in range(40)]
    held = [message(1000 + k) for k in range(QUIET_AFTER)]
    for data in held:
        peers[0].send(data)  # private messages: nobody follows
    assert impl._quiet_sets() == 1
    first = fan_out(peers, message(0))
    assert 2 <= first <= QUIET_SAMPLE + 1  # the 39 others diverged from peer 0 anyway
    assert impl._quiet_sets() == 0
    counts = [fan_out(peers, message(k)) for k in range(1, 40)]
    assert counts[-1] == 1 and max(counts[-5:]) == 1, counts

