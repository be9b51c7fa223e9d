"""A wider corpus than the JSON updates of :mod:`.payloads`: seeded, deterministic streams
of messages of several shapes, generated in code (issue 29, goal 3).

``stream(shape, size, count)`` gives ``count`` successive messages of ``shape`` of about
``size`` bytes (each cut or padded to exactly ``size``): what one connection would send,
message after message, with values that change and structure that repeats. Shapes:

- ``ticker``: compact JSON arrays of quotes (no spaces, numeric fields: the hardest on
  ISA-L's small hash, little text to match)
- ``payloads``: the built-in varying updates (compact JSON, ticks and chat)
- ``pretty``: indented JSON records (``indent=2``), nested, with strings
- ``text``: chat/prose lines
- ``html``: a table-and-list page fragment
- ``csv``: rows of mixed numeric and text columns
- ``logs``: access-log and application-log lines
- ``proto``: protobuf-like binary records (varints, tags, fixed64s, short strings)
"""

from __future__ import annotations

import json
import random
import struct

from . import payloads

__all__ = ["SHAPES", "stream"]

_WORDS = (
    "the a of to and in is for on that with as by at from it this be are was not or "
    "order price market user account session server request update status value error "
    "quick brown fox jumps over lazy dog lorem ipsum dolor sit amet consectetur alpha "
    "beta gamma delta stream message window level connection client data event time"
).split()
_PATHS = ("/api/v1/orders", "/api/v1/quotes", "/static/app.js", "/login", "/ws",
          "/api/v2/users/{}", "/img/{}.png", "/health")
_AGENTS = ("Mozilla/5.0 (X11; Linux x86_64)", "curl/8.5.0", "python-httpx/0.27",
           "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1)")


def _sentence(rnd: random.Random, lo: int = 4, hi: int = 16) -> str:
    return " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(lo, hi)))


def _ticker(rnd: random.Random, state: dict) -> bytes:
    syms = state.setdefault("syms", ["".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
                                             for _ in range(rnd.randint(3, 5)))
                                     for _ in range(300)])
    prices = state.setdefault("prices", {s: rnd.uniform(1, 2000) for s in syms})
    state["t"] = state.get("t", 1_764_460_800_000) + rnd.randrange(10, 200)
    out = []
    for _ in range(40):
        s = rnd.choice(syms)
        prices[s] *= 1 + rnd.gauss(0, 0.001)
        p = prices[s]
        out.append([s, round(p, 4), round(p * 0.9995, 4), round(p * 1.0005, 4),
                    rnd.randrange(1, 10**6), state["t"] + rnd.randrange(1000),
                    rnd.randrange(10**9)])
    return json.dumps(out, separators=(",", ":")).encode()


def _pretty(rnd: random.Random, state: dict) -> bytes:
    recs = [{"id": rnd.randrange(10**8), "user": {"name": rnd.choice(_WORDS).title(),
                                                  "email": f"{rnd.choice(_WORDS)}{rnd.randrange(999)}@example.org",
                                                  "roles": rnd.sample(_WORDS, 2)},
             "active": rnd.random() < 0.7, "score": round(rnd.uniform(0, 100), 3),
             "tags": [rnd.choice(_WORDS) for _ in range(rnd.randint(0, 4))],
             "note": _sentence(rnd, 2, 10)} for _ in range(20)]
    return json.dumps({"page": state.setdefault("page", 0), "items": recs},
                      indent=2).encode()


def _text(rnd: random.Random, state: dict) -> bytes:
    lines = []
    for _ in range(40):
        s = _sentence(rnd, 3, 25)
        lines.append(s[:1].upper() + s[1:] + rnd.choice(".!?"))
    return "\n".join(lines).encode()


def _html(rnd: random.Random, state: dict) -> bytes:
    rows = "".join(
        f'<tr class="{rnd.choice(("odd", "even"))}"><td>{rnd.randrange(10**6)}</td>'
        f'<td><a href="/item/{rnd.randrange(10**5)}">{_sentence(rnd, 1, 4)}</a></td>'
        f'<td class="num">{rnd.uniform(0, 1e4):.2f}</td></tr>\n' for _ in range(30))
    items = "".join(f"<li>{_sentence(rnd, 3, 12)}</li>\n" for _ in range(10))
    return (f'<div id="panel-{rnd.randrange(100)}"><h2>{_sentence(rnd, 2, 5)}</h2>\n'
            f'<table><thead><tr><th>id</th><th>name</th><th>value</th></tr></thead>\n'
            f"<tbody>\n{rows}</tbody></table>\n<ul>\n{items}</ul></div>\n").encode()


def _csv(rnd: random.Random, state: dict) -> bytes:
    return "".join(
        f"{rnd.randrange(10**9)},{rnd.choice(_WORDS)},{rnd.uniform(-1e3, 1e3):.5f},"
        f"{rnd.randrange(100)},{rnd.choice(('true', 'false'))},"
        f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T{rnd.randrange(24):02d}:"
        f"{rnd.randrange(60):02d}:{rnd.randrange(60):02d}Z\n" for _ in range(60)).encode()


def _logs(rnd: random.Random, state: dict) -> bytes:
    lines = []
    for _ in range(30):
        if rnd.random() < 0.6:
            path = rnd.choice(_PATHS).format(rnd.randrange(10**4))
            lines.append(
                f'10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(256)} - - '
                f'[03/Dec/2026:{rnd.randrange(24):02d}:{rnd.randrange(60):02d}:'
                f'{rnd.randrange(60):02d} +0000] "GET {path} HTTP/1.1" '
                f'{rnd.choice((200, 200, 200, 304, 404, 500))} {rnd.randrange(10**5)} '
                f'"-" "{rnd.choice(_AGENTS)}"')
        else:
            lines.append(
                f"2026-12-03 {rnd.randrange(24):02d}:{rnd.randrange(60):02d}:"
                f"{rnd.randrange(60):02d},{rnd.randrange(1000):03d} "
                f"{rnd.choice(('INFO', 'INFO', 'DEBUG', 'WARNING', 'ERROR'))} "
                f"[{rnd.choice(('app.db', 'app.http', 'app.ws', 'worker'))}] "
                f"{_sentence(rnd, 3, 12)} id={rnd.randrange(10**6)}")
    return ("\n".join(lines) + "\n").encode()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _proto(rnd: random.Random, state: dict) -> bytes:
    out = bytearray()
    for _ in range(40):
        rec = bytearray()
        rec += b"\x08" + _varint(rnd.randrange(10**9))          # 1: id
        rec += b"\x11" + struct.pack("<d", rnd.uniform(0, 1e4))  # 2: price
        rec += b"\x18" + _varint(rnd.randrange(10**6))          # 3: volume
        name = rnd.choice(_WORDS).encode()
        rec += b"\x22" + _varint(len(name)) + name              # 4: name
        rec += b"\x28" + _varint(rnd.randrange(4))              # 5: enum
        out += b"\x0a" + _varint(len(rec)) + rec                # repeated record
    return bytes(out)


_MAKERS = {"ticker": _ticker, "pretty": _pretty, "text": _text, "html": _html,
           "csv": _csv, "logs": _logs, "proto": _proto}
SHAPES: tuple[str, ...] = ("ticker", "payloads", *(s for s in _MAKERS if s != "ticker"))


def _fit(rnd: random.Random, maker, state: dict, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += maker(rnd, state)
    return data[:size]


def stream(shape: str, size: int, count: int, seed: int = 0) -> list[bytes]:
    """``count`` successive messages of ``shape``, ``size`` bytes each."""
    if shape == "payloads":
        return payloads.varying(size, count, seed)
    maker = _MAKERS[shape]
    rnd = random.Random(f"fastdeflate-corpus-{shape}-{seed}-{size}")
    state: dict = {}
    return [_fit(rnd, maker, state, size) for _ in range(count)]
