"""The test build: ``FASTDEFLATE_TEST_HOOKS=1`` compiles the extension's test hooks, fault
injection and test entry points (``extension/test_build/``) in; the default build (``0``
or unset: the wheels, ``pip install .``) has none (``extension/default_build/``).

``_fastdeflate.pyx`` includes ``test_hooks.pxi`` and ``test_entries.pxi`` by name; the
build puts one of the two directories on Cython's include path (`include_dir()`), and
the test build defines ``FD_TEST_BUILD`` for the C (`define_macros()`: the engines' level
table and ISA-L's choice become settable).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "FASTDEFLATE_TEST_HOOKS"


def requested() -> bool:
    """``FASTDEFLATE_TEST_HOOKS``: ``1`` for the test build, ``0`` (default) for none."""
    choice = os.environ.get(ENV, "0").strip() or "0"
    if choice not in ("0", "1"):
        raise SystemExit(f"{ENV}={choice!r}: expected 0 or 1")
    return choice == "1"


def include_dir(extension: Path) -> Path:
    """Of ``extension`` (the parts' directory), the one with this build's two files."""
    return extension / ("test_build" if requested() else "default_build")


def define_macros() -> list[tuple[str, str]]:
    """The C macros of this build: ``FD_TEST_BUILD`` in the test build, none otherwise."""
    return [("FD_TEST_BUILD", "1")] if requested() else []
