"""Write the seed corpora (fuzz/corpus/<target>/) from the RFC 7692 §7.2.3 vectors.

Run from anywhere: ``python fuzz/make_seeds.py``. The files are committed; rerun this
after changing the input format of a target.
"""

from __future__ import annotations

import os
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))

# RFC 7692 §7.2.3, trailing 00 00 ff ff removed: name -> frames of one message.
RFC_VECTORS = {
    "one-block": [bytes.fromhex("f248cdc9c90700")],
    "two-frames": [bytes.fromhex("f248cd"), bytes.fromhex("c9c90700")],
    "stored-block": [bytes.fromhex("000500faff48656c6c6f00")],
    "bfinal": [bytes.fromhex("f348cdc9c9070000")],
    "two-blocks": [bytes.fromhex("f24805000000ffffcac9c90700")],
    "empty": [bytes.fromhex("00")],
}
SHARED_WINDOW = bytes.fromhex("f200110000")  # "Hello" again against the previous window


def record(ctrl: int, data: bytes) -> bytes:
    assert len(data) < 256
    return bytes([ctrl, len(data)]) + data


def message(frames: list[bytes], ctrl: int = 0) -> bytes:
    """Records for one message: every frame but the last with fin clear."""
    return b"".join(record(ctrl | (i == len(frames) - 1), f) for i, f in enumerate(frames))


def bomb_payload() -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return (c.compress(b"\0" * 200_000) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]


def decompress_seeds() -> dict[str, bytes]:
    seeds = {}
    for name, frames in RFC_VECTORS.items():
        # window 15, no limit; then the same message followed by the shared-window one.
        seeds[f"rfc-{name}"] = b"\x07\x00\x00" + message(frames)
        seeds[f"rfc-{name}-then-shared"] = (b"\x07\x00\x00" + message(frames)
                                            + record(1, SHARED_WINDOW))
        # no context takeover, max_size 5 (exactly "Hello"), bytearray/memoryview frames
        seeds[f"rfc-{name}-nct-max5"] = b"\x1f\x05\x00" + message(frames, ctrl=4)
        seeds[f"rfc-{name}-python"] = b"\x47\x00\x00" + message(frames, ctrl=8)
    seeds["corrupt-then-reset"] = (b"\x07\x00\x00" + record(1, b"\xff\xff\xff")
                                   + record(1, b"\x00") + record(3, RFC_VECTORS["one-block"][0]))
    payload = bomb_payload()  # a 200 KB message of zeros against max_size 1000
    seeds["bomb-max1000"] = b"\x27\x03\xe8" + b"".join(
        record(0, payload[i:i + 200]) for i in range(0, len(payload), 200)) + record(1, b"")
    return seeds


def differential_seeds() -> dict[str, bytes]:
    hello, text = b"Hello", b'{"type": "tick", "price": 101.25, "seq": 42}'
    seeds = {
        "hello-twice": b"\x00\x07\x06\x07\x00\x00" + record(1, hello) + record(1, hello),
        "hello-nct-w9-mem1": b"\x02\x0a\x00\x00\x00\x00" + record(1, hello) * 2,
        "fragments-flushed": b"\x00\x07\x06\x07\x00\x00" + record(2, text) + record(1, text),
        "fragments-unflushed": b"\x00\x07\x06\x07\x00\x00" + record(0, text) + record(1, text),
        "repeated-huffman-only": b"\x00\x07\x06\x07\x02\x00" + record(0xf9, text),
        "max-size-exceeded": b"\x00\x07\x06\x07\x00\x05" + record(0xf9, text) + record(1, hello),
        "reset-between": b"\x00\x03\x06\x07\x01\x00" + record(1, text) + record(5, text),
        "level0-rle": b"\x00\x01\x06\x07\x03\x00" + record(0x79, text) + record(1, b""),
    }
    for name, frames in RFC_VECTORS.items():
        seeds[f"decode-rfc-{name}"] = (b"\x01\x00\x07\x00\x00\x00" + message(frames)
                                       + record(1, SHARED_WINDOW))
        seeds[f"decode-rfc-{name}-max3"] = (b"\x03\x00\x0f\x00\x00\x01" + message(frames, 4))
    return seeds


def negotiation_seeds() -> dict[str, bytes]:
    headers = {
        "plain": "permessage-deflate",
        "client-bits": "permessage-deflate; client_max_window_bits",
        "browser": "permessage-deflate; client_max_window_bits, x-webkit-deflate-frame",
        "all-params": ("permessage-deflate; server_no_context_takeover; "
                       "client_no_context_takeover; server_max_window_bits=10; "
                       "client_max_window_bits=12"),
        "two-offers": ('permessage-deflate; server_max_window_bits=8, permessage-deflate; '
                       'client_max_window_bits="10"'),
        "duplicate": "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "two-lines": "foo; bar=1\npermessage-deflate; client_max_window_bits=9",
        "bad-value": "permessage-deflate; server_max_window_bits=16",
    }
    seeds = {}
    for name, header in headers.items():
        seeds[f"offer-{name}"] = b"\x00\x00" + header.encode()
        seeds[f"offer-{name}-limits"] = b"\x07\xcc" + header.encode()
    for name, header in {
        "response-plain": "permessage-deflate",
        "response-limits": "permessage-deflate; server_max_window_bits=9; client_max_window_bits=10",
        "response-nct": "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
        "response-window8": "permessage-deflate; client_max_window_bits=8",
    }.items():
        seeds[name] = b"\x08\x00" + header.encode()
    return seeds


def connections_seeds() -> dict[str, bytes]:
    """Four slots on windows 15/15/14/15 (or 9/9/9/15), ISA-L on, the GIL released on every
    call; records: ctrl = slot | op << 2 | a << 5 (see fuzz_connections.py)."""
    text = b'{"type": "tick", "price": 101.25, "seq": 42}'

    def rec(slot: int, op: int, a: int, data: bytes = b"") -> bytes:
        return record(slot | op << 2 | a << 5, data)

    busy = b"".join(rec(0, 2, k % 6, text[k:] + text[:k]) for k in range(6))
    # issue 29 (defect 1): a connection decodes while another thread decodes a large
    # message on its window, then alone, then while the other decodes again
    stale = (rec(0, 2, 4, text) + rec(0, 3, 2, text[3:]) + rec(0, 2, 2, text[7:])
             + rec(0, 3, 3, text[11:]) + rec(0, 3, 2, text[5:]))
    seeds = {
        "valid-messages": b"\x0e\x60" + busy,
        "valid-then-garbage": b"\x0e\x60" + busy + rec(0, 0, 0, b"\xf2\x00\x11\x00\x00")
                              + rec(0, 2, 0, text),
        "fragments": b"\x0e\x00" + rec(1, 2, 1, text) + rec(1, 1, 0, bytes.fromhex("f248cd"))
                     + rec(1, 0, 0, bytes.fromhex("c9c90700")),
        "free-and-recreate": b"\x0e\x00" + busy + rec(0, 4, 0) + busy + rec(0, 4, 1) + busy,
        "reset-and-park": b"\x8e\x00" + busy + rec(0, 5, 1) + rec(0, 6, 1) + busy
                          + rec(2, 6, 0) + rec(2, 2, 3, text),
        "sends-and-broadcast": b"\x0e\x00" + rec(0, 7, 0, text) + rec(1, 7, 1, text)
                               + rec(2, 7, 3, text) + rec(3, 7, 4, text),
        "stale-isal-work": b"\x0e\x00" + stale * 3,
        "stale-isal-work-w9": b"\x08\x00" + stale * 3,
        "stale-after-free-w9": b"\x08\x00" + stale + rec(0, 4, 0) + stale,
        "isal-off-gil": b"\x1e\x00" + stale * 2,
        "rfc-vectors": b"\x06\x00" + b"".join(
            rec(3, 1, 0, frames[0]) + rec(3, 0, 0, b"".join(frames[1:]))
            for frames in RFC_VECTORS.values()),
    }
    return seeds


def write(target: str, seeds: dict[str, bytes]) -> None:
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("decompress", decompress_seeds())
    write("differential", differential_seeds())
    write("negotiation", negotiation_seeds())
    write("connections", connections_seeds())
