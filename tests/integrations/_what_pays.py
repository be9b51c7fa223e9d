"""Helpers for the integrations' "compress what pays" tests (issue 31): the settings,
a mixed stream of messages and what a frame on the wire says."""

from __future__ import annotations

import contextlib
import json
import random
import struct
from typing import Iterator, NamedTuple

import fastdeflate
from fastdeflate import _what_pays

from _mixed import grows

#: PNG's signature, then an IHDR chunk and random bytes: what an image upload looks like.
PNG_HEAD = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x01\x00\x00\x00\x01\x00\x08\x06"


@contextlib.contextmanager
def choice(min_size: int = 0, skip_incompressible: bool = True) -> Iterator[None]:
    """These settings and fresh counters inside; the previous settings after."""
    size = fastdeflate.set_min_size(min_size)
    skip = fastdeflate.set_skip_incompressible(skip_incompressible)
    _what_pays._forget_counts()
    try:
        yield
    finally:
        fastdeflate.set_min_size(size)
        fastdeflate.set_skip_incompressible(skip)
        _what_pays._forget_counts()


def sent_uncompressed(what: str = "messages") -> dict[str, int]:
    """Messages (or with ``what="bytes"`` their bytes) sent uncompressed so far, by
    reason, as status() shows them."""
    return {reason: entry[what]
            for reason, entry in fastdeflate.status()["sent_uncompressed"].items()}


def chat(rng: random.Random, i: int) -> str:
    """A chat-like JSON message that repeats earlier ones' words (context takeover pays)."""
    return json.dumps({"seq": i, "user": f"user{rng.randrange(20)}", "room": "lobby",
                       "text": " ".join(rng.choice(["hello", "world", "price", "up",
                                                    "down", "ok", "again"])
                                        for _ in range(rng.randrange(8, 40)))})


class Item(NamedTuple):
    """One message of the mixed stream: ``parts`` (one, or the fragments it is sent in),
    and why the sender must send it uncompressed: None (compressed), a reason of
    ``status()["sent_uncompressed"]``."""

    parts: list
    reason: "str | None"

    @property
    def message(self) -> "str | bytes":
        return self.parts[0][:0].join(self.parts)

    @property
    def opt_out(self) -> bool:
        return self.reason == "opt-out"


def mixed_stream(seed: int, count: int = 58, *, wide: bool = False) -> list[Item]:
    """Chat JSON (compressed) between random blobs and PNG-like blobs (sent as they are),
    messages neither text nor random that grow (_mixed.grows: sent as they are, the
    compressor put back), a chat message the caller opts out of, and fragmented messages: a first
    fragment of random bytes (the whole message as it is, its later fragments chat text)
    or of chat text (the whole message compressed, its later fragments random); the
    last is one of the former. ``wide``: wider sizes (whole chat messages in batches of
    up to 39 lines, random blobs from 300 bytes, PNG-like ones up to 50 KB)."""
    rng = random.Random(seed)

    def text(i: int) -> str:
        if not wide:
            return chat(rng, i)
        return ", ".join(chat(rng, i) for _ in range(rng.randrange(1, 40)))

    items: list[Item] = []
    for i in range(count):
        kind = i % 10
        if kind == 1:
            size = rng.randrange(300 if wide else 1000, 20000)
            items.append(Item([rng.randbytes(size)], "incompressible"))
        elif kind == 3:
            size = rng.randrange(*((1000, 50000) if wide else (200, 5000)))
            items.append(Item([PNG_HEAD + rng.randbytes(size)], "compressed format"))
        elif kind == 5:
            items.append(Item([grows(rng, rng.randrange(300, 1200))], "grew"))
        elif kind == 6:
            items.append(Item([text(i)], "opt-out"))
        elif kind == 7:
            fragment = chat(rng, i).encode()
            items.append(Item([rng.randbytes(2000), fragment, fragment[::-1]],
                              "incompressible"))
        elif kind == 9:
            items.append(Item([chat(rng, i).encode() * 3, rng.randbytes(3000),
                               chat(rng, i + 1).encode()], None))
        else:
            items.append(Item([text(i)], None))
    return items


def with_echoes(items: list[Item], size: int = 96) -> list[Item]:
    """``items`` with, after each message that grows, a binary message of its last
    ``size`` bytes twice (compressed: shorter than _what_pays.MIN_JUDGED). A compressor
    that kept the grown message in its window matches them there, and the peer, whose
    window never saw them, decodes something else: at every window size, where zlib
    reaches back at most 2**bits - 262 bytes (250 at window 9: less than any message
    that grows, so the messages before it are out of reach)."""
    out: list[Item] = []
    for item in items:
        out.append(item)
        if item.reason == "grew":
            out.append(Item([item.message[-size:] * 2], None))
    return out


class WireFrame(NamedTuple):
    fin: bool
    rsv1: bool
    opcode: int
    payload: bytes  # unmasked


def wire_frames(data: bytes) -> list[WireFrame]:
    """The frames in ``data`` (whole frames, from a frame boundary), unmasked."""
    frames: list[WireFrame] = []
    i = 0
    while i < len(data):
        b0, b1 = data[i], data[i + 1]
        n, i = b1 & 0x7F, i + 2
        if n == 126:
            (n,), i = struct.unpack_from("!H", data, i), i + 2
        elif n == 127:
            (n,), i = struct.unpack_from("!Q", data, i), i + 8
        key = b""
        if b1 & 0x80:
            key, i = data[i:i + 4], i + 4
        payload = data[i:i + n]
        assert len(payload) == n, "a frame cut short"
        if key:
            payload = bytes(b ^ key[j % 4] for j, b in enumerate(payload))
        frames.append(WireFrame(bool(b0 & 0x80), bool(b0 & 0x40), b0 & 0x0F, payload))
        i += n
    return frames


def messages_rsv1(frames: list) -> list[list[bool]]:
    """Data frames grouped into messages (control frames left out): each message's
    frames' RSV1 bits. ``frames`` have ``fin``, ``rsv1`` and ``opcode``."""
    out: list[list[bool]] = []
    current: list[bool] = []
    for frame in frames:
        if int(frame.opcode) >= 8:
            continue
        current.append(bool(frame.rsv1))
        if frame.fin:
            out.append(current)
            current = []
    assert not current, "a message without its last frame"
    return out


def uncompressed_by_reason(items: list[Item], rsv1: list[list[bool]]) -> dict[str, int]:
    """Each item went out compressed (RSV1 on its first frame only) or as it is (RSV1
    clear on every frame) as it had to; those sent as they are, counted by reason."""
    assert len(rsv1) == len(items)
    expected: dict[str, int] = {}
    for k, (item, bits) in enumerate(zip(items, rsv1)):
        assert len(bits) >= len(item.parts), k
        assert not any(bits[1:]), (k, bits)  # never on a continuation frame
        reason = item.reason
        assert bits[0] == (reason is None), (k, item.reason, bits)
        if reason is not None:
            expected[reason] = expected.get(reason, 0) + 1
    return expected


def uncompressed_bytes_by_reason(items: list[Item]) -> dict[str, int]:
    """The bytes of the items sent as they are (every fragment's), by reason."""
    out: dict[str, int] = {}
    for item in items:
        if item.reason is not None:
            message = item.message
            size = len(message.encode() if isinstance(message, str) else message)
            out[item.reason] = out.get(item.reason, 0) + size
    return out


def check_stream(items: list[Item], received: list, rsv1: list[list[bool]]) -> None:
    """Every message arrived exactly; each went out compressed (RSV1 on its first frame
    only) or as it is (RSV1 clear on every frame) as it had to; status() counts those
    sent as they are, by reason (messages, and bytes: every fragment's)."""
    assert len(received) == len(items)
    for k, (item, got) in enumerate(zip(items, received)):
        assert got == item.message, k
    expected = uncompressed_by_reason(items, rsv1)
    assert sent_uncompressed() == expected
    assert sent_uncompressed("bytes") == uncompressed_bytes_by_reason(items)
    assert expected["grew"] >= 1
