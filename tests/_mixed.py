"""Messages for the compress-what-pays tests (fastdeflate/_what_pays.py), shared by the
codec's and the integrations' tests."""

from __future__ import annotations

import random

from fastdeflate import _what_pays


def grows(rng: random.Random, n: int) -> bytes:
    """``n`` (>= 256) random bytes but for the sampled runs, 76 distinct values (64 in the
    first two runs): the sample looks neither like text nor like random bytes
    ("uncertain"), and the message comes out larger than it went in ("grew")."""
    data = bytearray(rng.randbytes(n))
    values = rng.sample(range(256), 76)
    sample = bytes(values + rng.choices(values, k=_what_pays.SAMPLE - 76))
    for k, start in enumerate(_what_pays.sample_runs(n)):
        data[start:start + _what_pays.RUN] = sample[k * _what_pays.RUN:(k + 1) * _what_pays.RUN]
    return bytes(data)
