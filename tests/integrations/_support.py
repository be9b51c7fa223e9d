"""Helpers shared by the integration tests: test messages, autobahn's requirements and
subprocesses on the implementation under test."""

from __future__ import annotations

import functools
import os
import random
import sys
import zlib
from types import ModuleType

import pytest

from _skipcheck import PEER_MISSING, peer_installed

#: The autobahn fastdeflate supports (>= 26.10.1) needs Python 3.11.
AUTOBAHN_SUPPORTED = sys.version_info >= (3, 11)
AUTOBAHN_NEEDS = "the autobahn that fastdeflate supports (>= 26.10.1) needs Python 3.11"


def autobahn_unusable() -> str:
    """Why a test of autobahn cannot run here ("" if it can): first the Python version
    (below 3.11 autobahn is no test peer, so no test set lists it absent: its own reason,
    which the skip check expects there), then a test set without autobahn (a wheel target
    without an autobahn wheel, which lists it in FASTDEFLATE_ABSENT_PEERS)."""
    if not AUTOBAHN_SUPPORTED:
        return AUTOBAHN_NEEDS
    if not peer_installed("autobahn"):
        return PEER_MISSING.format("autobahn")
    return ""


def requires_autobahn() -> pytest.MarkDecorator:
    """Skip a test of autobahn, with :func:`autobahn_unusable`'s reason, where it can't run."""
    return pytest.mark.skipif(bool(autobahn_unusable()), reason=autobahn_unusable())


def skip_module_without_autobahn() -> None:
    """Skip the calling test module where fastdeflate cannot support autobahn, or where
    the test set has no autobahn (a wheel target without an autobahn wheel)."""
    if autobahn_unusable():
        pytest.skip(autobahn_unusable(), allow_module_level=True)


def impl_environ(impl: ModuleType, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a subprocess that must import implementation ``impl`` of the codec
    (``FASTDEFLATE_PURE=1`` selects the fallback)."""
    environ = dict(os.environ if base is None else base)
    if impl.__name__.endswith("_pure"):
        environ["FASTDEFLATE_PURE"] = "1"
    else:
        environ.pop("FASTDEFLATE_PURE", None)
    return environ


def autobahn_patience(seconds: float) -> dict[str, float]:
    """autobahn protocol options for its handshake timeouts: its own 1 s for the closing
    handshake is too short on a loaded CI machine (an unclean close then fails a test for
    no fault of the codec)."""
    return {"openHandshakeTimeout": seconds, "closeHandshakeTimeout": seconds}


@functools.lru_cache(maxsize=None)
def make_text(size: int, seed: int = 0) -> str:
    """JSON-like text of ``size`` characters (a few non-ASCII), varying with ``seed``."""
    rng = random.Random(seed)
    words = ["user", "id", "price", "qty", "ok", "true", "null", "héllo", "名前", "x"]
    parts: list[str] = []
    total = 0
    while total < size:
        part = f'{{"{rng.choice(words)}": {rng.randint(0, 10 ** rng.randint(1, 9))}}}, '
        parts.append(part)
        total += len(part)
    return "".join(parts)[:size]


@functools.lru_cache(maxsize=None)
def make_binary(size: int, seed: int = 0) -> bytes:
    """Compressible text and random bytes, in 256-byte runs chosen at random."""
    rng = random.Random(seed)
    text = make_text(size, seed).encode()
    out = bytearray()
    while len(out) < size:
        run = rng.randbytes(256) if rng.random() < 0.5 else text[len(out) : len(out) + 256]
        out += run or rng.randbytes(256)
    return bytes(out[:size])


#: "Hello" sync-flushed, 00 00 ff ff removed: a message payload of one deflate stream.
HELLO_PAYLOAD = bytes.fromhex("f248cdc9c90700")


def deflate_streams(count: int) -> bytes:
    """A message payload of ``count`` deflate streams ``m0;``, ``m1;``..., each ending
    with BFINAL set, then ``00`` as in RFC 7692 section 7.2.3.4."""
    out = b""
    for i in range(count):
        c = zlib.compressobj(wbits=-15)
        out += c.compress(b"m%d;" % i) + c.flush(zlib.Z_FINISH)
    return out + b"\x00"
