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
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from . import isal, versions, zlib_ng

CHOICES = ("auto", "bundled", "system")

#: ``sysconfig.get_platform()`` values for which the cmake package has wheels: where
#: ``auto`` can have cmake from the package index (elsewhere it falls back without it).
CMAKE_WHEEL_PLATFORMS = re.compile(
    r"linux-(x86_64|i686|aarch64|armv7l|ppc64le|s390x|riscv64)"
    r"|macosx-.+|win32|win-(amd64|arm64)")


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


def bundling_needs(cache_dir: Path) -> list[str]:
    """Extra build requirements where a bundled zlib-ng build is asked for or possible:
    cmake when none is on PATH, and pip to fetch the sources when they are not at hand.

    ``auto`` asks for cmake only where the cmake package has wheels; elsewhere (no cmake
    on PATH) it falls back to the system zlib, so requiring cmake would only break it.
    Windows has no system zlib: ``auto`` there is ``bundled``.
    """
    choice = requested()
    if choice == "system":
        return []
    platform = sysconfig.get_platform()
    has_cmake = shutil.which("cmake") is not None
    can_fall_back = choice == "auto" and not platform.startswith("win")
    if not has_cmake and can_fall_back and not CMAKE_WHEEL_PLATFORMS.fullmatch(platform):
        return []
    needs = [] if has_cmake else ["cmake>=3.18"]
    has_sources = os.environ.get("FASTDEFLATE_ZLIB_NG_SDIST") or (
        cache_dir / zlib_ng.SDIST_FILE).exists()
    if not has_sources:
        try:
            import pip  # noqa: F401
        except ImportError:
            needs.append("pip")
    return needs


def private_link_args(platform: str) -> list[str]:
    """Linker flags that keep the static zlib-ng's symbols out of the extension's exports
    (``platform`` is a ``sys.platform`` value): only ``PyInit__fastdeflate`` is exported."""
    if platform == "darwin":
        return ["-Wl,-exported_symbol,_PyInit__fastdeflate"]
    if platform == "win32":
        return []  # MSVC exports what is declared (PyInit, by /EXPORT), never a static lib's
    return ["-Wl,--exclude-libs,ALL"]  # ELF (GNU ld, gold, lld)


def bundled_isal(cache_dir: Path) -> isal.StaticIsal | None:
    """ISA-L beside the bundled zlib-ng (``FASTDEFLATE_ISAL``), or None without it."""
    choice = isal.requested()
    if choice == "off":
        return None
    try:
        return isal.build_static(cache_dir)
    except isal.IsalUnavailable as exc:
        if choice == "bundled":
            raise SystemExit(f"fastdeflate: the bundled ISA-L is unavailable: {exc}")
        print(f"fastdeflate: WARNING: bundled ISA-L unavailable ({exc}); "
              "every level runs on zlib-ng", file=sys.stderr)
        return None


def bundled_zlib_ng(cache_dir: Path) -> Engine:
    built = zlib_ng.build_static(cache_dir)
    engine = Engine(
        name=f"bundled zlib-ng {built.version}",
        include_dirs=[str(built.include_dir)],
        extra_objects=[str(built.library)],
        extra_link_args=private_link_args(sys.platform),
        define_macros=[("FASTDEFLATE_BUNDLED_ZLIB_NG", "1")],
    )
    with_isal = bundled_isal(cache_dir.parent / "isal")
    if with_isal is None:
        return engine
    return Engine(
        name=f"{engine.name} + ISA-L {with_isal.version}",
        include_dirs=[*engine.include_dirs, str(with_isal.include_dir)],
        extra_objects=[*engine.extra_objects, str(with_isal.library)],
        extra_link_args=engine.extra_link_args,
        define_macros=[*engine.define_macros, ("FASTDEFLATE_BUNDLED_ISAL", "1"),
                       ("FASTDEFLATE_ISAL_VERSION", f'"{with_isal.version}"'),
                       ("FASTDEFLATE_ISAL_VERSION_NUM", version_number(with_isal.version)),
                       ("FASTDEFLATE_ISAL_MINIMUM", version_number(isal.MINIMUM_VERSION))],
    )


def version_number(version: str) -> str:
    """ISA-L's ISAL_MAKE_VERSION of ``version``, for the C preprocessor: ``"0x022001"``."""
    major, minor, patch = (versions.parse(version) + (0, 0))[:3]
    return f"0x{major:02x}{minor:02x}{patch:02x}"


def choose(cache_dir: Path) -> Engine:
    """The engine ``FASTDEFLATE_ZLIB`` asks for (building zlib-ng if needed). Pinned
    sources that are too old, or that an edit no longer applies to, fail the build
    whatever is asked: a fallback would hide what the pin got wrong."""
    choice = requested()
    if choice == "system":
        return system_zlib()
    try:
        return bundled_zlib_ng(cache_dir)
    except versions.PinnedSourcesDefect as exc:
        raise SystemExit(f"fastdeflate: {exc}") from exc
    except zlib_ng.ZlibNgUnavailable as exc:
        if choice == "bundled" or sys.platform == "win32":
            raise SystemExit(f"fastdeflate: the bundled zlib-ng is unavailable: {exc}")
        print(f"fastdeflate: WARNING: bundled zlib-ng unavailable ({exc}); "
              "building against the system zlib", file=sys.stderr)
        return system_zlib()
