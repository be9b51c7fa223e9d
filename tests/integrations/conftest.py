"""Fixtures shared by the integrations' tests."""

from __future__ import annotations

from typing import Iterator

import pytest

from ._what_pays import choice


@pytest.fixture
def default_what_pays() -> Iterator[None]:
    """Compress what pays at its defaults (skip on, no minimum size), counters from zero;
    the settings before are back afterwards."""
    with choice():
        yield
