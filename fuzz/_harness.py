"""Shared pieces of the fuzz targets: the input format, the implementations, the runner.

Every target reads its input as a few parameter bytes followed by *records*::

    record = ctrl (1 byte) | length (1 byte) | data (length bytes, fewer at the end)

so that seed files are easy to write by hand and libFuzzer's mutations keep meaning.
Each target module defines ``test_one_input(data: bytes) -> None`` (plain Python, used
by the replay test in tests/test_hardening.py) and runs under atheris as a script.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Callable, Iterator, NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))


class Record(NamedTuple):
    """One step of a fuzz input: flag bits and the bytes that go with them."""

    ctrl: int
    data: bytes


def records(data: bytes, start: int) -> Iterator[Record]:
    """The records of ``data`` from offset ``start`` (a short last one is kept)."""
    pos = start
    while pos < len(data):
        ctrl = data[pos]
        length = data[pos + 1] if pos + 1 < len(data) else 0
        chunk = data[pos + 2: pos + 2 + length]
        pos += 2 + length
        yield Record(ctrl, chunk)


def byte(data: bytes, index: int) -> int:
    """``data[index]``, or 0 past the end."""
    return data[index] if index < len(data) else 0


def as_buffer(chunk: bytes, kind: int) -> object:
    """``chunk`` as bytes, bytearray or a memoryview slice (the extension reads all three)."""
    kind %= 3
    if kind == 1:
        return bytearray(chunk)
    if kind == 2:
        return memoryview(b"\xaa" + chunk + b"\xbb")[1:-1]
    return chunk


def implementations() -> dict[str, ModuleType]:
    """The codec implementations to fuzz: the compiled one (required) and the fallback."""
    from fastdeflate import _fastdeflate, _pure

    return {"cython": _fastdeflate, "python": _pure}


def instrument_package() -> None:
    """Import fastdeflate's Python modules with atheris's coverage instrumentation.

    Called by a target run as a script, before it imports fastdeflate itself. Only the
    package is instrumented: ``atheris.instrument_all()`` would take ~30 s at start-up.
    """
    import atheris

    with atheris.instrument_imports(include=["fastdeflate"]):
        import fastdeflate  # noqa: F401
        import fastdeflate._params  # noqa: F401
        import fastdeflate._pure  # noqa: F401
        import fastdeflate.negotiation  # noqa: F401


def main(test_one_input: Callable[[bytes], None]) -> None:
    """Run ``test_one_input`` under atheris (after :func:`instrument_package`).

    Arguments are libFuzzer's: corpus directories, files to replay, -max_total_time=N...
    """
    import atheris

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
