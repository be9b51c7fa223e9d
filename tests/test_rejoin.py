"""Compress once under churn: how a connection that left its group gets back in.

A member sent a private message (or a late joiner) compresses each broadcast alone until
either its window holds only the group's messages again — then it takes the group's
payload, at no cost in bytes (rejoined by its window) — or the group starts over from an
empty window at a message's second compressor, when the start-over budget allows. A
connection in no group never starts over. Every payload is decoded by a stock zlib
decompressor that has seen exactly that peer's messages, on both implementations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest

import fastdeflate

pytestmark = pytest.mark.test_build  # the compiled runs use its test hooks

TAIL = b"\x00\x00\xff\xff"
SIZE = 1000


def message(k: int, tag: str = "news") -> bytes:
    """About SIZE bytes of JSON, different for every ``k`` and ``tag``."""
    body = json.dumps({"tag": tag, "seq": k, "data": [(k * 31 + j * 7) % 1000
                                                      for j in range(240)]}).encode()
    return body[:SIZE - 1] + b"}"


class Peer:
    """A compressor and the stock zlib decompressor of its peer."""

    def __init__(self, impl, window_bits: int = 12, level: int = 6):
        self.compressor = impl.Compressor(level, window_bits, 5)
        self.inflater = zlib.decompressobj(-window_bits)

    def send(self, data: bytes) -> bytes:
        payload = self.compressor.compress(data)
        assert self.inflater.decompress(payload + TAIL) == data
        return payload


def fan_out(peers: list[Peer], data: bytes) -> int:
    """Send ``data`` to every peer in a loop; the number of distinct payloads made."""
    payloads = [peer.send(data) for peer in peers]  # kept alive: their ids stay distinct
    return len({id(p) for p in payloads})


@pytest.fixture(autouse=True)
def fresh(impl):
    """Sharing on, nothing kept from other tests, the default budget afterwards."""
    sharing = impl._set_sharing(True)
    impl._forget_kept()
    budget = impl.set_start_over_budget(0.02)
    yield
    impl.set_start_over_budget(budget)
    impl._set_sharing(sharing)
    impl._forget_kept()


def counts(impl) -> dict:
    (led, (joined, diverged, start_over), rejoined, start_overs,
     cohorts) = impl._compress_once_counts()
    return {"led": led, "joined": joined, "diverged": diverged, "start_over": start_over,
            "rejoined": rejoined, "start_overs": start_overs, "cohorts": cohorts}


def since(impl, before: dict) -> dict:
    return {key: value - before[key] for key, value in counts(impl).items()}


def one_out(impl) -> tuple[list[Peer], dict]:
    """Ten peers in one group, past the messages the first start-over waits for, at a
    budget of 1.0, and one member (peer 5) just sent a private message. Returns the
    peers and the counts then."""
    impl.set_start_over_budget(1.0)
    peers = [Peer(impl) for _ in range(10)]
    for k in range(40):
        fan_out(peers, message(k))
    peers[5].send(message(0, "private"))
    return peers, counts(impl)


def started_over(impl) -> tuple[list[Peer], int]:
    """Ten peers whose group has just started over (one_out, then broadcasts until it
    does): its first compressor, peer 0, is left behind. Returns the peers and the next
    broadcast's number."""
    peers, before = one_out(impl)
    k = 100
    while since(impl, before)["start_overs"] == 0:
        fan_out(peers, message(k))
        k += 1
    return peers, k


@pytest.mark.parametrize("window_bits", [9, 12, 15])
def test_a_member_sent_a_private_message_rejoins_once_its_window_is_the_groups(
        impl, window_bits):
    """With no start-over allowed, the member compresses alone exactly until the
    group's messages fill its window, then takes the group's payload again."""
    impl.set_start_over_budget(0)
    peers = [Peer(impl, window_bits) for _ in range(8)]
    for k in range(3):
        assert fan_out(peers, message(k)) == 1
    before = counts(impl)
    peers[3].send(message(0, "private"))
    alone = -(-(1 << max(9, window_bits)) // SIZE)  # group messages that fill a window
    made = [fan_out(peers, message(10 + k)) for k in range(alone + 3)]
    assert made == [2] * alone + [1] * 3
    assert since(impl, before) == {"led": alone + 3, "joined": 0, "diverged": alone,
                                   "start_over": 0, "rejoined": 1, "start_overs": 0,
                                   "cohorts": 0}


def payloads(peers: list[Peer], data: bytes) -> list[int]:
    """Send ``data`` to every peer; which payload object each got (0, 1, ... in order of
    first appearance)."""
    made = [peer.send(data) for peer in peers]  # kept alive: their ids stay distinct
    order: dict[int, int] = {}
    return [order.setdefault(id(p), len(order)) for p in made]


@pytest.mark.parametrize("budget", [1e-9, 0.0])
def test_members_sent_private_messages_together_catch_up_as_a_cohort(impl, budget):
    """Five members sent private messages at once: the first two compress the next
    broadcast alone; the third starts a cohort (that broadcast from an empty window,
    right for any peer), which the other two take. At the next broadcast the first two
    join the cohort (their tails hold its whole window: the broadcast it started at),
    and the five share the cohort's payloads until its window is the group's. The rest
    of the group keeps its own payload. With a budget of 0 (no bytes for CPU) each
    compresses alone."""
    impl.set_start_over_budget(budget)
    peers = [Peer(impl) for _ in range(10)]
    for k in range(3):
        fan_out(peers, message(k))
    before = counts(impl)
    for j in (1, 3, 5, 7, 9):
        peers[j].send(message(j, "private"))
    got = [payloads(peers, message(10 + k)) for k in range(8)]
    group = [0, 2, 4, 6, 8]
    for each in got:
        assert len({each[i] for i in group}) == 1  # the group: one payload, its own
    if budget:
        # 1 and 3 alone; 5 starts the cohort, 7 and 9 take it; then 1 joins it and
        # compresses for it, and 3, 5, 7 and 9 take 1's payload
        assert got[0] == [0, 1, 0, 2, 0, 3, 0, 3, 0, 3]
        assert got[1:5] == [[0, 1, 0, 1, 0, 1, 0, 1, 0, 1]] * 4
        assert since(impl, before)["cohorts"] == 1
        assert since(impl, before)["diverged"] == 3 + 4  # 1's, 3's and 5's; then 1's
    else:
        assert got[:5] == [[0, 1, 0, 2, 0, 3, 0, 4, 0, 5]] * 5
        assert since(impl, before)["cohorts"] == 0
        assert since(impl, before)["diverged"] == 5 * 5
    assert got[5:] == [[0] * 10] * 3  # all back by their window (4,096 bytes: 5 messages)
    # (and 1 and 3 joined the cohort)
    assert since(impl, before)["rejoined"] == (5 + 2 if budget else 5)


def send_as_last_fragment(peer: Peer, first: bytes, data: bytes) -> None:
    """``first`` as an unfinished message (no flush: it stays in the stream), then
    ``data`` (equal bytes of a broadcast) as its last fragment; its peer decodes both."""
    payload = (peer.compressor.compress(first, False, flush=False)
               + peer.compressor.compress(data))
    assert peer.inflater.decompress(payload + TAIL) == first + data


@pytest.mark.parametrize("level", [1, 6])
@pytest.mark.parametrize("budget", [1e-9, 1.0, 0.0])
@pytest.mark.parametrize("member", range(10))
def test_a_broadcast_as_a_fragments_end_takes_nothing_and_starts_nothing(
        impl, budget, member, level):
    """A member in the middle of a message of its own sends a broadcast's bytes as that
    message's last fragment: its stream holds the first part, so it can neither take
    the group's payload, nor start the group over, nor start a cohort (each from an
    empty window: its peer would get the broadcast without the first part). Tried at
    every position in a loop of stragglers (the third starts a cohort) and at a group's
    start-over (a budget of 1.0: the second compressor starts over). Level 1 keeps the
    unflushed first part in its stream (ISA-L where bundled); level 6 may emit it."""
    impl.set_start_over_budget(budget)
    peers = [Peer(impl, level=level) for _ in range(10)]
    for k in range(40):
        fan_out(peers, message(k))
    for j in (1, 3, 5, 7, 9):
        peers[j].send(message(j, "private"))
    for k in range(8):
        data = message(100 + k)
        for j, peer in enumerate(peers):
            sent = bytes(bytearray(data))  # equal bytes, a new object each time
            if j == member and k % 3 == 0:
                send_as_last_fragment(peer, message(k, "first part")[:300], sent)
            else:
                peer.send(sent)


def test_a_straggler_joins_a_cohort_only_if_its_tail_holds_the_whole_window(impl):
    """Members 1, 3 and 5 sent private messages: at the next broadcast 5 starts a
    cohort, and at the one after 1 and 3 join it. Member 7, sent a private message then,
    has only that one broadcast in its tail while the cohort's window holds two: it
    compresses alone (its peer lacks the first one where the cohort's payloads would
    refer to it)."""
    impl.set_start_over_budget(1e-9)
    peers = [Peer(impl) for _ in range(10)]
    for k in range(3):
        fan_out(peers, message(k))
    for j in (1, 3, 5):
        peers[j].send(message(j, "private"))
    got = [payloads(peers, message(10))]
    peers[7].send(message(7, "private"))
    got += [payloads(peers, message(11 + k)) for k in range(3)]
    assert got[0] == [0, 1, 0, 2, 0, 3, 0, 0, 0, 0]  # 1, 3 alone; 5 starts the cohort
    assert got[1] == [0, 1, 0, 1, 0, 1, 0, 2, 0, 0]  # 1 leads the cohort; 7 alone
    assert got[2] == [0, 1, 0, 1, 0, 1, 0, 2, 0, 0]  # 7: two messages in the cohort's
    assert got[3] == [0, 1, 0, 1, 0, 1, 0, 2, 0, 0]  # window, one in its tail


def test_no_straggler_joins_one_whose_window_holds_more_than_its_tail(impl):
    """A newcomer sent a private message, then a broadcast alone: its tail is that
    broadcast, its window holds the private message too. A straggler whose tail holds
    more than the newcomer's window must still not take its state (its peer never got
    the newcomer's private message: stock zlib decodes each peer's payloads)."""
    impl.set_start_over_budget(0)
    peers = [Peer(impl) for _ in range(5)]
    for k in range(3):
        fan_out(peers, message(k))
    peers[1].send(message(1, "private"))
    for k in range(3):
        fan_out(peers, message(10 + k))  # 1 alone: a 3,000-byte tail
    newcomer = Peer(impl)
    newcomer.send(message(0, "hello")[:300])
    peers.insert(2, newcomer)  # after 1 in the loop: its state is there to take
    before = counts(impl)
    got = [payloads(peers, message(20 + k)) for k in range(2)]
    assert got == [[0, 1, 2, 0, 0, 0]] * 2  # 1 and the newcomer alone, each its own
    assert since(impl, before)["rejoined"] == 0


def test_a_cohort_needs_two_others_alone_not_one_sent_the_message_again(impl):
    """The same message object sent again to one peer is no sign of stragglers: a new
    compressor sent it afterwards compresses as it would alone (no cohort)."""
    data = message(0) * 5
    before = counts(impl)
    default = impl.Compressor()
    sent = [default.compress(data) for _ in range(3)]
    fresh = impl.Compressor()
    assert [fresh.compress(data) for _ in range(3)] == sent
    assert since(impl, before)["cohorts"] == 0


def test_group_members_after_a_cohort_keep_their_groups_payload(impl):
    """Stragglers that come first in the loop start a cohort before any member of the
    group has compressed the message: the members still make and share their own
    payload (with their context), not the cohort's empty-window one."""
    impl.set_start_over_budget(1e-9)
    stragglers = [Peer(impl) for _ in range(5)]
    group = [Peer(impl) for _ in range(10)]
    peers = stragglers + group
    for k in range(3):
        fan_out(peers, message(k))
    before = counts(impl)
    for j, peer in enumerate(stragglers):
        peer.send(message(j, "private"))
    data = message(10)
    made = [peer.send(data) for peer in peers]
    order: dict[int, int] = {}
    got = [order.setdefault(id(p), len(order)) for p in made]
    # 0 and 1 and 2 alone; 3 starts the cohort, 4 takes it; the group makes its own
    assert got == [0, 1, 2, 3, 3] + [4] * 10
    assert len(made[5]) < len(made[3])  # the group's context is worth bytes
    assert since(impl, before)["cohorts"] == 1


def test_a_message_to_several_groups_starts_no_cohort(impl):
    """One message to six groups (rooms with histories of their own), room after room:
    each room's first member compresses it from its room's context and the others take
    that; the rooms after the third are no cohort of stragglers."""
    impl.set_start_over_budget(1e-9)
    rooms = [[Peer(impl) for _ in range(3)] for _ in range(6)]
    for k in range(3):
        for r, room in enumerate(rooms):
            fan_out(room, message(k, f"room{r}"))
    before = counts(impl)
    got = payloads([peer for room in rooms for peer in room], message(0, "everyone"))
    assert got == [r for r in range(6) for _ in range(3)]
    assert since(impl, before)["cohorts"] == 0


def test_a_late_joiner_rejoins_by_its_window(impl):
    impl.set_start_over_budget(0)
    peers = [Peer(impl) for _ in range(6)]
    for k in range(6):
        fan_out(peers, message(k))
    before = counts(impl)
    peers += [Peer(impl), Peer(impl)]  # two newcomers: they follow one another
    made = [fan_out(peers, message(10 + k)) for k in range(8)]
    assert made == [2] * 5 + [1] * 3  # 4,096 bytes of window: five messages of 1,000
    assert since(impl, before)["joined"] == 5 and since(impl, before)["rejoined"] == 2


def test_a_private_message_after_a_full_tail_keeps_the_member_out(impl):
    """A member whose window the group's messages just filled is sent a private message
    before the next broadcast: its window ends with that message now, so taking the
    group's payload would be wrong (its peer would decode other bytes)."""
    impl.set_start_over_budget(0)
    peers = [Peer(impl, 9) for _ in range(4)]
    fan_out(peers, message(0))
    peers[1].send(message(0, "private"))
    assert fan_out(peers, message(1)) == 2  # alone: 1,000 bytes > the 512-byte window
    peers[1].send(message(1, "private"))  # and out again
    assert fan_out(peers, message(2)) == 2  # (decoded by its peer: checked in send)
    assert fan_out(peers, message(3)) == 1


def test_a_connection_in_no_group_keeps_its_own_bytes(impl):
    """Its messages are its own (private ones): whatever the groups of its parameter set
    do, it never starts over, so its payloads are those it makes with sharing off.
    (Its stream stays its own throughout: a parked and restored window is hashed afresh,
    which may change later bytes, so CI's parking step's settings are put aside here.)"""
    saved = impl.set_live_states(64), impl.set_park_after(10)
    try:
        lone = [message(k, "lone") for k in range(60)]
        impl._set_sharing(False)
        alone = impl.Compressor(6, 12, 5)
        expected = [alone.compress(data) for data in lone]
        impl._set_sharing(True)
        impl.set_start_over_budget(1.0)  # a start-over at every chance
        before = counts(impl)
        peers = [Peer(impl) for _ in range(10)]
        single = Peer(impl)
        got = []
        for k, data in enumerate(lone):
            got.append(single.send(data))
            peers[k % 10].send(message(k, "private"))  # a straggler at every broadcast
            fan_out(peers, message(k))
    finally:
        impl.set_live_states(saved[0])
        impl.set_park_after(saved[1])
    assert got == expected
    assert since(impl, before)["start_overs"] >= 5  # the groups did start over


def test_the_compressor_a_start_over_leaves_behind_catches_up(impl):
    """The group starts over at a message's second compressor; the first one had sent
    that message with its context, so its peer's history ends with it, and the group's
    window after it is that message alone: the first one takes the group's state before
    its next message, instead of compressing alone."""
    peers, before = one_out(impl)
    made = [fan_out(peers, message(100 + k)) for k in range(8)]
    got = since(impl, before)
    # one start-over (the member out alone before it: two compressions at most twice)
    assert got["start_overs"] == 1 and got["diverged"] <= 1
    assert got["start_over"] == 0 and got["rejoined"] == 1  # the first one caught up
    assert made[2:] == [1] * 6


def test_without_the_catch_up_the_first_compressor_would_stay_behind(impl):
    """(The case the catch-up is for, checked by breaking its condition: a compressor
    that sent something after the message the group started over at is not caught up,
    and compresses alone, counted as left behind, until its window is the group's.)"""
    peers, _ = started_over(impl)
    before = counts(impl)
    peers[0].send(message(1, "private"))  # the first one moves on: no catching up
    made = [fan_out(peers, message(300 + k)) for k in range(8)]
    got = since(impl, before)
    assert got["start_over"] >= 5 and made[0] == 2 and made[-1] == 1


def test_set_start_over_budget_checks_and_sets_the_codec_in_use():
    previous = fastdeflate.set_start_over_budget(0.5)
    try:
        assert fastdeflate.status()["compress_once"]["start_over_budget"] == 0.5
        assert fastdeflate.set_start_over_budget(0) == 0.5
        for bad in (-0.01, 1.5, float("nan")):
            with pytest.raises(ValueError, match="between 0 and 1"):
                fastdeflate.set_start_over_budget(bad)
        for bad in ("0.1", True, None):
            with pytest.raises(TypeError, match="number"):
                fastdeflate.set_start_over_budget(bad)  # type: ignore[arg-type]
        assert fastdeflate.status()["compress_once"]["start_over_budget"] == 0
    finally:
        fastdeflate.set_start_over_budget(previous)


@pytest.mark.parametrize("pure", ["0", "1"])
def test_the_budget_is_read_from_the_environment_at_import(pure, tmp_path):
    """In a new process (run outside the source tree: the installed package), for the
    codec in use: the compiled one, or the fallback with FASTDEFLATE_PURE=1."""
    code = ("import fastdeflate, json; s = fastdeflate.status(); print(json.dumps("
            "[s['implementation'], s['compress_once']['start_over_budget']]))")
    env = dict(os.environ, FASTDEFLATE_START_OVER_BUDGET="0.25", FASTDEFLATE_PURE=pure)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60, check=True, cwd=tmp_path).stdout
    assert json.loads(out) == [{"0": "cython", "1": "python"}[pure], 0.25]
    env["FASTDEFLATE_START_OVER_BUDGET"] = "2"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, check=True, cwd=tmp_path)
    assert json.loads(done.stdout)[1] == 0.02 and "ignored" in done.stderr


def test_status_counts_deliveries_by_how_they_were_made(impl):
    """The counters status() reports for the codec in use, here read from each
    implementation: shared deliveries, group messages, alone by cause, rejoins."""
    impl.set_start_over_budget(0)
    shared_before = sum(c[3] for key, c in impl._traffic().items() if key[0] == "deflate")
    before = counts(impl)
    peers = [Peer(impl) for _ in range(5)]
    for k in range(3):
        fan_out(peers, message(k))
    peers[2].send(message(0, "private"))
    peers.append(Peer(impl))
    for k in range(6):
        fan_out(peers, message(10 + k))
    got = since(impl, before)
    shared = sum(c[3] for key, c in impl._traffic().items() if key[0] == "deflate")
    # 9 group messages; the member sent a private message and the newcomer compress
    # the first one alone; then the member joins the newcomer (its tail holds the
    # newcomer's whole window, that message) and compresses for both, 4 more times
    # (4,096 bytes of window: five messages), and both rejoin
    assert got["led"] == 9 and got["start_overs"] == 0
    assert got["diverged"] == 5 and got["joined"] == 1 and got["rejoined"] == 3
    # every delivery but each message's first compression and the stragglers' own
    assert shared - shared_before == (3 * 5 + 6 * 6) - 9 - 6


class Failure(MemoryError):
    """What the test hook raises after a message went into a stream."""


def test_a_start_over_that_fails_leaves_no_one_a_stale_state_to_catch_up_with(impl):
    """The second compressor of a message decides to start its group over, and its call
    fails once the message is in its stream (as an allocation could): that start-over
    never happened, so the message's first compressor is not left behind by it, and must
    not take the state an earlier start-over offered (its peer would decode other bytes:
    checked by every peer's stock decompressor)."""
    rejoined = counts(impl)["rejoined"]
    peers, k = started_over(impl)
    fan_out(peers, message(k))  # a first start-over, and its catch-up
    assert counts(impl)["rejoined"] > rejoined
    starts = counts(impl)["start_overs"]
    peers[5].send(message(1, "private"))  # a member out again: the next start-over due
    failed = []

    def fail_second(point: str) -> None:
        if point == "committed" and not failed and counts(impl)["start_overs"] > starts:
            failed.append(point)
            raise Failure("injected")

    previous = impl._set_test_hook(fail_second)
    try:
        for j in range(60):
            data = message(300 + j)
            for index, peer in enumerate(peers):
                try:
                    peer.send(data)
                except Failure:
                    # its peer never got the message: a new connection in its place
                    peers[index] = Peer(impl)
            if failed:
                break
    finally:
        impl._set_test_hook(previous)
    assert failed, "no start-over was decided"
    for j in range(6):  # the first compressor's next messages decode at its peer
        fan_out(peers, message(400 + j))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_catch_up_with_the_parents_start_over(impl):
    """A start-over's state belongs to the parent (its leader's lock may be held by a
    parent's thread at the fork): the child forgets it, as it forgets kept messages, so
    the compressor it left behind compresses its next message itself."""
    peers, k = started_over(impl)  # member 0 led it: left behind
    rejoined = counts(impl)["rejoined"]
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        code = 1
        try:
            peers[0].send(message(999, "child"))  # decoded by its peer's copy
            code = 0 if counts(impl)["rejoined"] == rejoined else 2
        finally:
            os.write(writer, bytes([code]))
            os._exit(0)
    os.close(writer)
    got = os.read(reader, 1)
    os.waitpid(pid, 0)
    os.close(reader)
    assert got == b"\x00"  # the child compressed alone, and its peer decoded it
    fan_out(peers, message(k))  # the parent's left-behind compressor catches up
    assert counts(impl)["rejoined"] == rejoined + 1


def start_over_inputs(impl) -> tuple:
    """Ten peers at a budget of 0.5, stragglers every fourth broadcast: the inputs of
    _start_over_due_now for their parameter set and the counters, after 60 broadcasts."""
    impl._forget_kept()
    budget = impl.set_start_over_budget(0.5)
    try:
        peers = [Peer(impl) for _ in range(10)]
        for k in range(60):
            if k % 4 == 0:
                peers[k % 10].send(message(k, "private"))
            fan_out(peers, message(k))
        before = impl._compress_once_counts()
        return impl._start_over_state()[(6, 12, 5, 0)], before
    finally:
        impl.set_start_over_budget(budget)
        impl._forget_kept()


def test_starting_over_weighs_payloads_as_fractions_of_their_message(impl):
    """The inputs of starting over after broadcasts and private messages: the average
    payload is a fraction of a message (compressed JSON: neither 0 nor 1), and so are the
    stragglers' share and what starting over cost. A C integer division once made the
    compiled one's average 0 (the policy is Python syntax, compiled): it then started
    over by count alone, not by cost, and the broadcast benchmark's followers failed."""
    (since, average, extra, share), counted = start_over_inputs(impl)
    assert 0.05 < average < 0.95, average
    assert 0 < share < 1 and 0 <= extra < 2, (share, extra)
    assert counted[3] >= 1 and 0 < since < 60  # it started over, and counted since


def test_each_start_over_begins_the_count_towards_the_next(impl):
    """Whether a group starts over weighs the group messages sent since it last did
    (_start_over_due_now): a start-over begins that count again (1 once the message it
    started over at is followed) and every broadcast after it adds to it. A count not
    begun again would start the group over again early, costing its members bytes."""
    impl.set_start_over_budget(0.5)  # (start-overs within a short run)
    peers = [Peer(impl) for _ in range(10)]
    for k in range(40):  # past the first wait, a fixed number of messages
        fan_out(peers, message(k))
    key = (6, 12, 5, 0)  # Peer's parameter set
    starts = counts(impl)["start_overs"]
    previous = impl._start_over_state()[key][0]
    seen = []
    for k in range(100, 200):
        if k % 4 == 0:
            peers[k % 10].send(message(k, "private"))  # a straggler
        fan_out(peers, message(k))
        now, count = counts(impl)["start_overs"], impl._start_over_state()[key][0]
        if now > starts:
            seen.append(count)
            assert count == 1, f"broadcast {k}: {count} group messages after a start-over"
        else:
            assert count > previous, f"broadcast {k}: the count went {previous} -> {count}"
        starts, previous = now, count
    assert len(seen) >= 3, seen
