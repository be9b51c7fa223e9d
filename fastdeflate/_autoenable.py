"""Zero-code activation: ``FASTDEFLATE_ENABLE`` in the environment enables fastdeflate in
every Python process started with it, in an environment where fastdeflate is installed.

The wheel puts ``fastdeflate-enable.pth`` in site-packages. Its one line runs at every
interpreter start-up and only reads the variable (a dictionary lookup: see the README for
the start-up cost); when it is set, `at_startup()` imports fastdeflate and calls
`fastdeflate.enable()` for the libraries it names. So the worker processes of uvicorn
``--workers``/``--reload``, gunicorn and hypercorn, which are new interpreters or forks,
are enabled without a line of code. ``python -m fastdeflate run -- CMD`` sets the variable
for a command. Not read under ``python -S`` (no site-packages processing) nor ``-E``/``-I``
(the environment is ignored).

Values: ``1``/``true``/``yes``/``on``/``all`` enable every supported library;
``0``/``false``/``no``/``off`` or empty enable nothing; otherwise a comma-separated list
of library names (``websockets,aiohttp``).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Optional

__all__ = ["ENV", "libraries_from", "at_startup"]

ENV = "FASTDEFLATE_ENABLE"
_ALL = {"1", "true", "yes", "on", "all"}
_NONE = {"", "0", "false", "no", "off"}  # (the .pth line imports nothing for these)


def libraries_from(value: str) -> Optional[list[str]]:
    """The libraries a value of ``FASTDEFLATE_ENABLE`` names: None for none, every
    supported one for "1" (and its synonyms), else those listed ("1" in a list stands
    for every supported one: "1,daphne" adds the opt-in daphne). ValueError for a name
    fastdeflate does not support."""
    from .integrations import SUPPORTED, check_supported

    value = value.strip().lower()
    if value in _NONE:
        return None
    if value in _ALL:
        return list(SUPPORTED)
    names = [name.strip() for name in value.replace(" ", ",").split(",") if name.strip()]
    # "1,daphne": every supported library and an opt-in one
    names = [n for name in names for n in (SUPPORTED if name in _ALL else (name,))]
    try:
        return list(dict.fromkeys(check_supported(names)))
    except ValueError as exc:
        raise ValueError(f"{ENV}={value!r}: {exc}; or 1 for all") from None


def at_startup() -> None:
    """Enable what ``FASTDEFLATE_ENABLE`` names (the .pth line calls this when it is set).
    Never raises: a bad value or a failure is a RuntimeWarning, and the process goes on
    with the stock libraries."""
    if sys.flags.ignore_environment:
        return
    try:
        libraries = libraries_from(os.environ.get(ENV, ""))
        if libraries is None:
            return
        import fastdeflate

        fastdeflate.enable(libraries=libraries)
    except Exception as exc:  # the interpreter must start whatever happens here
        warnings.warn(f"fastdeflate: {ENV} ignored: {exc}", RuntimeWarning, stacklevel=2)
