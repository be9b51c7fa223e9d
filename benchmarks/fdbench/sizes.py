"""Bytes on the wire, fastdeflate against stock zlib at the same settings (no timings).

Each library compresses with its own level, window and memLevel (``LIBRARIES``: a
server's defaults). For each, and for every level at the two windows the libraries use,
the built-in varying JSON stream (1-64 KB messages) goes through stdlib zlib as the
libraries use it (a raw deflate stream per connection, a sync flush per message, its
``00 00 ff ff`` removed) and through fastdeflate's :class:`~fastdeflate.Compressor`, with
and without context takeover; the table gives the payload bytes of each and their ratio.
The result depends only on the two engines, so a test recomputes it
(``tests/test_sizes.py``) and fails when the bytes of a row change.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterable

from . import payloads
from .report import markdown_table

__all__ = ["Settings", "LIBRARIES", "BACKENDS", "Row", "measure", "library_rows",
           "level_rows", "backend_rows", "library_groups", "table", "MESSAGES_PER_ROW"]

#: Messages per row and size: at 64 KB the stream passes 2 MiB, many times the window.
MESSAGES_PER_ROW = 32


@dataclass(frozen=True)
class Settings:
    level: int
    window_bits: int
    mem_level: int

    def label(self) -> str:
        return f"level {self.level}, window {self.window_bits}, memLevel {self.mem_level}"


#: What each library's server compresses with by default (its own settings, which
#: fastdeflate keeps): websockets asks for window 12 and memLevel 5; aiohttp compresses
#: at level 1 (``Z_BEST_SPEED``); the others run zlib's defaults.
LIBRARIES: dict[str, Settings] = {
    "websockets": Settings(6, 12, 5),
    "aiohttp": Settings(1, 15, 8),
    "wsproto": Settings(6, 15, 8),
    "tornado": Settings(6, 15, 8),
    "autobahn": Settings(6, 15, 8),
}


@dataclass(frozen=True)
class Row:
    what: str
    settings: Settings
    no_context_takeover: bool
    size: int
    stock: int  # payload bytes, stdlib zlib
    fastdeflate: int  # payload bytes, fastdeflate.Compressor
    original: int  # message bytes

    @property
    def ratio(self) -> float:
        """fastdeflate / stock (> 1: fastdeflate sends more)."""
        return self.fastdeflate / self.stock


def _module_bytes(module: object, settings: Settings, nct: bool,
                  messages: list[bytes]) -> int:
    """Payload bytes as the stdlib-based libraries make them, with a zlib-like module: a
    raw deflate stream per connection (per message without context takeover), a sync
    flush per message, its 00 00 ff ff removed."""
    total = 0
    c = None
    for message in messages:
        if c is None or nct:
            c = module.compressobj(settings.level, module.DEFLATED,  # type: ignore[attr-defined]
                                   -settings.window_bits, settings.mem_level)
        out = c.compress(message) + c.flush(module.Z_SYNC_FLUSH)  # type: ignore[attr-defined]
        total += len(out) - 4
    return total


def _stock_bytes(settings: Settings, nct: bool, messages: list[bytes]) -> int:
    return _module_bytes(zlib, settings, nct, messages)


def _fastdeflate_bytes(settings: Settings, nct: bool, messages: list[bytes]) -> int:
    import fastdeflate

    c = fastdeflate.Compressor(level=settings.level, window_bits=settings.window_bits,
                               mem_level=settings.mem_level, no_context_takeover=nct)
    return sum(len(c.compress(m)) for m in messages)


#: Drop-in zlib modules aiohttp can run on (``aiohttp.set_zlib_backend(module)``): its
#: writer compresses at the module's own ``Z_BEST_SPEED`` (ISA-L's is 0), window 15.
BACKENDS = {"zlib-ng backend": "zlib_ng.zlib_ng", "isal backend": "isal.isal_zlib"}


def backend_rows(sizes: Iterable[int] = payloads.SIZES) -> list[Row]:
    """aiohttp's drop-in backends that are installed, each at its own ``Z_BEST_SPEED``
    against stock zlib's ``Z_BEST_SPEED`` (what aiohttp runs by default), context
    takeover; the "fastdeflate" column holds the backend's bytes."""
    import importlib

    rows = []
    for label, name in BACKENDS.items():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        stock = Settings(zlib.Z_BEST_SPEED, 15, 8)
        for size in sizes:
            messages = payloads.messages("varying", size)[:MESSAGES_PER_ROW]
            theirs = Settings(module.Z_BEST_SPEED, 15, 8)  # type: ignore[attr-defined]
            rows.append(Row(label, theirs, False, size, _stock_bytes(stock, False, messages),
                            _module_bytes(module, theirs, False, messages),
                            sum(map(len, messages))))
    return rows


def measure(what: str, settings: Settings, nct: bool, size: int) -> Row:
    """One row: the first ``MESSAGES_PER_ROW`` varying JSON messages of ``size`` bytes
    (or the whole pool of that size, if smaller)."""
    messages = payloads.messages("varying", size)[:MESSAGES_PER_ROW]
    return Row(what, settings, nct, size, _stock_bytes(settings, nct, messages),
               _fastdeflate_bytes(settings, nct, messages), sum(map(len, messages)))


def library_groups() -> dict[Settings, str]:
    """The libraries' settings, each with the libraries that use it ("wsproto, tornado")."""
    groups: dict[Settings, list[str]] = {}
    for name, settings in LIBRARIES.items():
        groups.setdefault(settings, []).append(name)
    return {settings: ", ".join(names) for settings, names in groups.items()}


def library_rows(sizes: Iterable[int] = payloads.SIZES) -> list[Row]:
    """Each library's settings, with and without context takeover."""
    return [measure(names, s, nct, size) for s, names in library_groups().items()
            for nct in (False, True) for size in sizes]


def level_rows(sizes: Iterable[int] = payloads.SIZES) -> list[Row]:
    """Every level at window 15 / memLevel 8 and 12 / 5, context takeover."""
    return [measure(f"level {level}", Settings(level, w, m), False, size)
            for w, m in ((15, 8), (12, 5)) for level in range(1, 10) for size in sizes]


def table(rows: list[Row]) -> str:
    out = [[r.what, f"{r.settings.window_bits} / {r.settings.mem_level}",
            str(r.settings.level), "no" if r.no_context_takeover else "yes",
            payloads.size_label(r.size), f"{r.original:,}", f"{r.stock:,}",
            f"{r.fastdeflate:,}", f"{r.ratio:.3f}"] for r in rows]
    return markdown_table(["what", "window / memLevel", "level", "context takeover", "size",
                           "message bytes", "stock bytes", "fastdeflate bytes",
                           "fastdeflate / stock"], out)
