"""PEP 517 backend: setuptools', plus what the bundled zlib-ng build needs, only if needed.

A wheel build that will bundle zlib-ng needs ``cmake`` (added from the package index when
none is on PATH, where the cmake package has wheels) and ``pip`` (to fetch the pinned
zlib-ng sdist, when no local copy is given or cached): see ``engine.bundling_needs``.
``FASTDEFLATE_ZLIB=system`` builds need neither.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - the rest of the backend interface

from .engine import bundling_needs

ROOT = Path(__file__).resolve().parent.parent


def _bundling_needs() -> list[str]:
    return bundling_needs(ROOT / "build" / "zlib-ng")


def get_requires_for_build_wheel(config_settings=None):  # noqa: F811
    return _setuptools.get_requires_for_build_wheel(config_settings) + _bundling_needs()


def get_requires_for_build_editable(config_settings=None):  # noqa: F811
    return _setuptools.get_requires_for_build_editable(config_settings) + _bundling_needs()
