"""Compress once's decisions as a digest: the same traffic (broadcasts through a loop and
through fastdeflate.broadcast(), private messages, late joiners, leavers) through the
fastdeflate this interpreter imports, every payload hashed, with the compress-once
counters. Two builds that make the same decisions print the same lines; a change to
the policy that moves any start-over, cohort or rejoin changes them. Compare a build
before and after a change:

    PYTHONPATH=<checkout A> python tools/compress_once_replay.py > a.txt
    PYTHONPATH=<checkout B> python tools/compress_once_replay.py > b.txt && diff a.txt b.txt

(FASTDEFLATE_PURE=1 replays the fallback. The counters add up over the lines.)
"""

from __future__ import annotations

import hashlib
import json
import random

import fastdeflate

#: (level, window bits, memLevel, start-over budget): websockets' 12/5, the 15/8 of the
#: others (level 6, and aiohttp's 1), a large budget (start-overs) and none (cohorts off).
CASES = [(6, 12, 5, 0.02), (6, 12, 5, 0.5), (6, 15, 8, 0.02), (1, 15, 8, 0.02), (6, 12, 5, 0.0)]


def replay(level: int, window_bits: int, mem_level: int, budget: float, members: int = 40,
           messages: int = 300, seed: int = 7) -> str:
    """The digest of every payload of one run."""
    previous = fastdeflate.set_start_over_budget(budget)
    rng = random.Random(seed)
    digest = hashlib.sha256()
    new = lambda: fastdeflate.Compressor(level, window_bits, mem_level)  # noqa: E731
    conns = [new() for _ in range(members)]
    try:
        for k in range(messages):
            data = json.dumps({"k": k, "px": [rng.randrange(1000) for _ in range(40)],
                               "room": "lobby"}).encode()
            r = rng.random()
            if r < 0.05:
                conns.append(new())  # a late joiner
            elif r < 0.08 and len(conns) > 5:
                del conns[rng.randrange(len(conns))]  # a leaver
            if k % 5 == 4:  # private messages to three
                for i in rng.sample(range(len(conns)), 3):
                    digest.update(conns[i].compress(json.dumps({"to": i, "k": k}).encode() * 3))
            payloads = (fastdeflate.broadcast(data, conns) if k % 7 == 0
                        else [c.compress(data) for c in conns])
            for payload in payloads:
                digest.update(payload)
    finally:
        fastdeflate.set_start_over_budget(previous)
    return digest.hexdigest()[:16]


if __name__ == "__main__":
    print(fastdeflate.IMPLEMENTATION, fastdeflate.ENGINE)
    for case in CASES:
        print(case, replay(*case), fastdeflate.status()["compress_once"])
