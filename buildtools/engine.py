"""Which zlib the extension is compiled against: the bundled zlib-ng or the system zlib.

``FASTDEFLATE_ZLIB`` chooses:

- ``auto`` (default): the bundled zlib-ng when its sources can be had (and built),
  else the system zlib, with a warning;
- ``bundled``: the bundled zlib-ng, or the build fails (what the wheels use);
- ``system``: the system zlib (``-lz`` and its ``zlib.h``); not on Windows, which has none.

``FASTDEFLATE_ZLIB_NG_SDIST`` may name a local copy of the pinned ``zlib-ng`` sdist
(checked by sha256) for builds without access to the package index.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import zlib_ng

CHOICES = ("auto", "bundled", "system")


@dataclass(frozen=True)
class Engine:
    """Compiler and linker settings for one engine, and a name for it."""

    name: str
    include_dirs: list[str] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    extra_objects: list[str] = field(default_factory=list)
    extra_link_args: list[str] = field(default_factory=list)
    define_macros: list[tuple[str, str | None]] = field(default_factory=list)


def requested() -> str:
    choice = os.environ.get("FASTDEFLATE_ZLIB", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise SystemExit(f"FASTDEFLATE_ZLIB={choice!r}: expected one of {', '.join(CHOICES)}")
    return choice


def system_zlib() -> Engine:
    if sys.platform == "win32":
        raise SystemExit("FASTDEFLATE_ZLIB=system: Windows has no system zlib; use bundled")
    return Engine(name="system zlib", libraries=["z"])


def bundled_zlib_ng(cache_dir: Path) -> Engine:
    built = zlib_ng.build_static(cache_dir)
    link_args = []
    if sys.platform.startswith("linux"):
        link_args.append("-Wl,--exclude-libs,ALL")  # keep zlib-ng's internals private
    return Engine(
        name=f"bundled zlib-ng {built.version}",
        include_dirs=[str(built.include_dir)],
        extra_objects=[str(built.library)],
        extra_link_args=link_args,
        define_macros=[("FASTDEFLATE_BUNDLED_ZLIB_NG", "1")],
    )


def choose(cache_dir: Path) -> Engine:
    """The engine ``FASTDEFLATE_ZLIB`` asks for (building zlib-ng if needed)."""
    choice = requested()
    if choice == "system":
        return system_zlib()
    try:
        return bundled_zlib_ng(cache_dir)
    except zlib_ng.ZlibNgUnavailable as exc:
        if choice == "bundled" or sys.platform == "win32":
            raise SystemExit(f"fastdeflate: the bundled zlib-ng is unavailable: {exc}")
        print(f"fastdeflate: WARNING: bundled zlib-ng unavailable ({exc}); "
              "building against the system zlib", file=sys.stderr)
        return system_zlib()
