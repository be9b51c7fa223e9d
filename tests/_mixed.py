"""Messages for the compress-what-pays tests (fastdeflate/_choice.py), shared by the
codec's and the integrations' tests."""

from __future__ import annotations

import random

from fastdeflate import _choice


def grows(rng: random.Random, n: int) -> bytes:
    """``n`` (>= 256) random bytes but for the sampled runs, 76 distinct values (64 in the
    first two runs): the sample looks neither like text nor like random bytes
    ("uncertain"), and the message comes out larger than it went in ("grew")."""
    data = bytearray(rng.randbytes(n))
    values = rng.sample(range(256), 76)
    sample = bytes(values + rng.choices(values, k=_choice.SAMPLE - 76))
    for k, start in enumerate(_choice.sample_runs(n)):
        data[start:start + _choice.RUN] = sample[k * _choice.RUN:(k + 1) * _choice.RUN]
    return bytes(data)
