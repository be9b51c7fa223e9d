"""Built-in payloads: seeded, deterministic JSON ticker/chat updates of an exact size.

``varying(size, count)`` is a realistic stream: every message has the same shape
(ticker quotes and chat lines) but the values change from one message to the next
(prices walk, volumes, users and texts vary). ``repeated(size, count)`` is the "same
payload every time" workload of the original measurement: the first message of the
varying stream, ``count`` times.
"""

from __future__ import annotations

import json
import random

__all__ = ["SIZES", "WORKLOADS", "varying", "repeated", "messages", "pool_size", "size_label",
           "updates"]

#: Message sizes of the original table (bytes).
SIZES: tuple[int, ...] = (1024, 4096, 16384, 65536)
#: Workload names, as used in tables: "varying" (realistic), "repeated" (original).
WORKLOADS: tuple[str, ...] = ("varying", "repeated")

_WORDS = (
    "the price is moving fast today anyone buying more of this dip I think "
    "support holds near the open volume looks thin on the bid side watch out "
    "for the close news at noon sold half my position long term still bullish "
    "ok lol thanks good call what about the rate decision"
).split()
_NOTE_OVERHEAD = len(',"note":""')


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _text(rnd: random.Random, length: int) -> str:
    words: list[str] = []
    total = -1
    while total < length:
        word = rnd.choice(_WORDS)
        words.append(word)
        total += len(word) + 1
    return " ".join(words)[:length]


class _Market:
    """State of the simulated feed: prices random-walk from message to message."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.symbols = [
            "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rnd.randint(3, 4)))
            for _ in range(200)
        ]
        self.prices = {s: round(rnd.uniform(5, 900), 2) for s in self.symbols}
        self.users = [f"user{rnd.randrange(10**5)}" for _ in range(60)]
        self.clock = 1_764_460_800_000  # ms

    def tick(self) -> dict[str, object]:
        rnd = self.rnd
        sym = rnd.choice(self.symbols)
        price = max(0.01, round(self.prices[sym] * (1 + rnd.gauss(0, 0.002)), 2))
        self.prices[sym] = price
        spread = round(price * 0.0005 + 0.01, 2)
        return {
            "s": sym,
            "p": price,
            "b": round(price - spread, 2),
            "a": round(price + spread, 2),
            "v": rnd.randrange(1, 50_000),
            "t": self.clock + rnd.randrange(1000),
        }

    def chat(self) -> dict[str, object]:
        rnd = self.rnd
        return {
            "u": rnd.choice(self.users),
            "m": _text(rnd, rnd.randint(12, 90)),
            "t": self.clock + rnd.randrange(1000),
        }

    def message(self, seq: int, size: int) -> bytes:
        """One update of exactly ``size`` bytes (compact JSON, ASCII)."""
        self.clock += self.rnd.randrange(50, 400)
        ticks: list[object] = []
        chat: list[object] = []
        doc = {"type": "update", "seq": seq, "ts": self.clock, "ticks": ticks, "chat": chat}
        length = len(_dumps(doc))
        budget = size - _NOTE_OVERHEAD
        if length > budget:
            raise ValueError(f"size {size} is too small for one update")
        while True:
            is_chat = self.rnd.random() < 0.2
            item = self.chat() if is_chat else self.tick()
            target = chat if is_chat else ticks
            grow = len(_dumps(item)) + (1 if target else 0)
            if length + grow > budget:
                break
            target.append(item)
            length += grow
        doc["note"] = _text(self.rnd, budget - length)
        data = _dumps(doc).encode("ascii")
        assert len(data) == size, (len(data), size)
        return data


def size_label(size: int) -> str:
    """``1024`` -> ``"1 KB"``."""
    return f"{size // 1024} KB" if size % 1024 == 0 else f"{size} B"


def pool_size(size: int) -> int:
    """How many distinct messages a varying stream cycles through (about 1 MiB of them)."""
    return max(16, (1 << 20) // size)


def varying(size: int, count: int, seed: int = 0) -> list[bytes]:
    """``count`` successive updates of exactly ``size`` bytes, all different."""
    market = _Market(random.Random(f"fastdeflate-bench-{seed}-{size}"))
    return [market.message(seq, size) for seq in range(count)]


def updates(sizes: "list[int] | tuple[int, ...]", seed: int = 0) -> list[bytes]:
    """Successive updates of one feed, message i of exactly ``sizes[i]`` bytes (at least
    about 80: one empty update)."""
    market = _Market(random.Random(f"fastdeflate-bench-updates-{seed}"))
    return [market.message(seq, size) for seq, size in enumerate(sizes)]


def repeated(size: int, count: int, seed: int = 0) -> list[bytes]:
    """The first update of :func:`varying`, ``count`` times (one object)."""
    return varying(size, 1, seed) * count


def messages(workload: str, size: int, seed: int = 0) -> list[bytes]:
    """The message pool a benchmark cycles through for ``workload`` at ``size``."""
    if workload == "varying":
        return varying(size, pool_size(size), seed)
    if workload == "repeated":
        return repeated(size, 1, seed)
    raise ValueError(f"unknown workload {workload!r}; expected one of {WORKLOADS}")
