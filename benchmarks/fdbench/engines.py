"""The codec columns of the original table: one compress+decompress cycle each.

Every engine builds a *cycle*: ``cycle(message) -> payload`` compresses ``message`` the
RFC 7692 way (sync flush, ``00 00 ff ff`` removed), decompresses the payload (tail
appended) and raises :exc:`RoundTripError` unless the result equals ``message``. The
check is part of every timed cycle, for every column alike. ``cycle.codec`` is the
(compressor, decompressor) pair it uses, or None for the naive column, which creates
new objects for every message.

Columns:

- ``naive``: new stdlib ``zlib`` objects for every message (the "previous" approach).
- ``stdlib``: stdlib ``zlib`` objects kept across messages (what the pure-Python
  libraries do today). Without context takeover stdlib objects can't be reset, so it
  creates new ones per message, exactly as those libraries do.
- ``fallback``: ``fastdeflate._pure`` (fastdeflate's pure-Python fallback).
- ``fastdeflate``: ``fastdeflate._fastdeflate`` (the compiled extension).
- ``fastdeflate-parked``: the same with ``set_park_after(0)``: beyond the 16 live
  streams per parameter set, every connection is parked as soon as it goes idle (as one
  that speaks less often than its park-after delay is); run in a subprocess, since the
  setting is the process's.
- ``zlib-ng``: the ``stdlib`` loop on ``zlib_ng.zlib_ng`` (if installed).
- ``isal``: the ``stdlib`` loop on ``isal.isal_zlib`` at ISA-L's own levels (0-3), if
  installed. Importing it slows stdlib zlib down in the same process, so
  :mod:`fdbench.codec_table` only ever runs it in a subprocess.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Optional, Sequence

from .measure import Progress, run_worker

__all__ = [
    "Settings",
    "Engine",
    "ENGINES",
    "ISOLATED",
    "RoundTripError",
    "available",
    "engine",
    "split",
    "column_notes",
    "measure_apart",
    "worker_answer",
]

TAIL = b"\x00\x00\xff\xff"
Cycle = Callable[[bytes], bytes]


class RoundTripError(AssertionError):
    """A cycle decompressed something other than the message it compressed."""


@dataclass(frozen=True)
class Settings:
    """Codec parameters of one measurement."""

    level: int = 6
    window_bits: int = 15
    mem_level: int = 8
    no_context_takeover: bool = False


def _mismatch(name: str, message: bytes, out: bytes) -> RoundTripError:
    return RoundTripError(
        f"{name}: round trip of a {len(message)}-byte message gave {len(out)} other bytes"
    )


def _zlib_like_naive(zlib: Any, name: str, s: Settings, level: int) -> Cycle:
    compressobj, decompressobj = zlib.compressobj, zlib.decompressobj
    deflated, sync, wbits, mem = zlib.DEFLATED, zlib.Z_SYNC_FLUSH, s.window_bits, s.mem_level

    def cycle(message: bytes) -> bytes:
        c = compressobj(level, deflated, -wbits, mem, 0)
        payload = (c.compress(message) + c.flush(sync))[:-4]
        out = decompressobj(-wbits).decompress(payload + TAIL)
        if out != message:
            raise _mismatch(name, message, out)
        return payload

    cycle.codec = None  # type: ignore[attr-defined]
    return cycle


def _zlib_like_persistent(zlib: Any, name: str, s: Settings, level: int) -> Cycle:
    if s.no_context_takeover:  # stdlib objects can't be reset: new ones per message
        return _zlib_like_naive(zlib, name, s, level)
    c = zlib.compressobj(level, zlib.DEFLATED, -s.window_bits, s.mem_level, 0)
    d = zlib.decompressobj(-s.window_bits)
    compress, flush, decompress, sync = c.compress, c.flush, d.decompress, zlib.Z_SYNC_FLUSH

    def cycle(message: bytes) -> bytes:
        payload = (compress(message) + flush(sync))[:-4]
        out = decompress(payload + TAIL)
        if out != message:
            raise _mismatch(name, message, out)
        return payload

    cycle.codec = (c, d)  # type: ignore[attr-defined]
    return cycle


def _fastdeflate_like(module: ModuleType, name: str, s: Settings) -> Cycle:
    c = module.Compressor(
        level=s.level,
        window_bits=s.window_bits,
        mem_level=s.mem_level,
        no_context_takeover=s.no_context_takeover,
    )
    d = module.Decompressor(window_bits=s.window_bits, no_context_takeover=s.no_context_takeover)
    compress, decompress = c.compress, d.decompress

    def cycle(message: bytes) -> bytes:
        payload = compress(message)
        out = decompress(payload)
        if out != message:
            raise _mismatch(name, message, out)
        return payload

    cycle.codec = (c, d)  # type: ignore[attr-defined]
    return cycle


@dataclass(frozen=True)
class Engine:
    """One column: how to import its module, and how to build a cycle on it."""

    name: str
    label: str
    module_name: str
    kind: str  # "naive", "persistent" or "fastdeflate"
    #: ISA-L has its own levels: zlib level 6 is run at this one (None: same level).
    own_level: Optional[int] = None
    note: str = ""
    #: fastdeflate's set_park_after() for this engine's process (None: left as it is).
    park_after: Optional[float] = None

    def module(self) -> ModuleType:
        return importlib.import_module(self.module_name)

    def level(self, settings: Settings) -> int:
        return settings.level if self.own_level is None else self.own_level

    def make_cycle(self, settings: Settings) -> Cycle:
        """A fresh cycle (new codec objects) for ``settings``."""
        module = self.module()
        if self.kind == "fastdeflate":
            if self.park_after is not None:
                module.set_park_after(self.park_after)
            return _fastdeflate_like(module, self.name, settings)
        if self.kind == "naive":
            return _zlib_like_naive(module, self.name, settings, self.level(settings))
        return _zlib_like_persistent(module, self.name, settings, self.level(settings))

    def version(self) -> str:
        module = self.module()
        if self.kind == "fastdeflate":
            return str(getattr(module, "ENGINE", f"zlib {module.ZLIB_VERSION}"))
        if self.module_name == "zlib_ng.zlib_ng":
            return f"zlib-ng {module.ZLIBNG_VERSION}"
        if self.module_name == "isal.isal_zlib":
            isal = importlib.import_module("isal")
            return f"isal {isal.__version__} (ISA-L {isal.ISAL_VERSION})"
        return f"zlib {module.ZLIB_RUNTIME_VERSION}"


ENGINES: dict[str, Engine] = {
    e.name: e
    for e in (
        Engine("naive", "naive (stdlib, new objects per message)", "zlib", "naive"),
        Engine("stdlib", "stdlib persistent", "zlib", "persistent"),
        Engine("fallback", "fastdeflate fallback (_pure)", "fastdeflate._pure", "fastdeflate"),
        Engine("fastdeflate", "fastdeflate (compiled)", "fastdeflate._fastdeflate", "fastdeflate"),
        Engine(
            "fastdeflate-parked",
            "fastdeflate (compiled), idle connections parked at once (subprocess)",
            "fastdeflate._fastdeflate",
            "fastdeflate",
            park_after=0.0,
            note="set_park_after(0): every connection but the 16 most recent per parameter "
                 "set is parked between its messages and restored (its window re-hashed) "
                 "at its next one, which is what a connection that speaks less often than "
                 "its park-after delay (default 10 s) costs",
        ),
        Engine("zlib-ng", "zlib-ng persistent", "zlib_ng.zlib_ng", "persistent"),
        Engine(
            "isal",
            "isal persistent (ISA-L level 2, subprocess)",
            "isal.isal_zlib",
            "persistent",
            own_level=2,
            note="ISA-L has levels 0-3 of its own; run at its default, 2, in a subprocess",
        ),
    )
}

#: Engines that must run in a process of their own (see docs/benchmarking notes).
ISOLATED: frozenset[str] = frozenset({"isal", "fastdeflate-parked"})


def engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; expected one of {list(ENGINES)}") from None


def available(name: str) -> bool:
    """True if the engine's module is installed (without importing it)."""
    top = engine(name).module_name.split(".")[0]  # never import isal here
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def split(names: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """(in-process engines, isolated engines, missing engines) among ``names``; an
    unknown name is an error."""
    local, isolated, missing = [], [], []
    for name in names:
        engine(name)
        if not available(name):
            missing.append(name)
        elif name in ISOLATED:
            isolated.append(name)
        else:
            local.append(name)
    return local, isolated, missing


def column_notes(local: Sequence[str], missing: Sequence[str]) -> dict[str, str]:
    """The legend's note on each column measured here (its version) or missing."""
    notes = {name: engine(name).version() for name in local}
    notes.update({name: "not installed: column left out" for name in missing})
    return notes


def measure_apart(module: str, plan: Any, name: str,
                  progress: Optional[Progress]) -> tuple[list[dict[str, Any]], str]:
    """Measure the isolated column ``name`` in ``python -m <module> --worker`` (``plan``, a
    dataclass, sent as JSON): its cells (as the worker sent them, see
    :func:`worker_answer`) and the legend's note on it."""
    result = run_worker(module, {"plan": dataclasses.asdict(plan), "engine": name}, progress)
    info = result["info"]
    return result["cells"], f"{info['version']}; measured in subprocess pid {info['pid']}"


def worker_answer(name: str, cells: list[dict[str, Any]]) -> dict[str, Any]:
    """What a worker measuring column ``name`` sends back: its cells, its version and pid."""
    return {"cells": cells, "info": {"version": engine(name).version(), "pid": os.getpid()}}
