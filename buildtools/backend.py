"""PEP 517 backend: setuptools', plus what the bundled zlib-ng build needs, only if needed.

A wheel build that will bundle zlib-ng needs ``cmake`` (added from the package index when
none is on PATH) and ``pip`` (to fetch the pinned zlib-ng sdist, when no local copy is
given or cached). ``FASTDEFLATE_ZLIB=system`` builds need neither.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - the rest of the backend interface

from . import zlib_ng

ROOT = Path(__file__).resolve().parent.parent


def _bundling_needs() -> list[str]:
    if os.environ.get("FASTDEFLATE_ZLIB", "auto").strip().lower() == "system":
        return []
    needs = []
    if shutil.which("cmake") is None:
        needs.append("cmake>=3.18")
    has_sdist = os.environ.get("FASTDEFLATE_ZLIB_NG_SDIST") or (
        ROOT / "build" / "zlib-ng" / zlib_ng.SDIST_FILE).exists()
    if not has_sdist:
        try:
            import pip  # noqa: F401
        except ImportError:
            needs.append("pip")
    return needs


def get_requires_for_build_wheel(config_settings=None):  # noqa: F811
    return _setuptools.get_requires_for_build_wheel(config_settings) + _bundling_needs()


def get_requires_for_build_editable(config_settings=None):  # noqa: F811
    return _setuptools.get_requires_for_build_editable(config_settings) + _bundling_needs()
