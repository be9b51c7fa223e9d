"""fastdeflate: fast permessage-deflate (RFC 7692) for Python websocket libraries.

The codec classes come from the compiled extension ``fastdeflate._fastdeflate``
when it can be imported, otherwise from the pure-Python fallback
``fastdeflate._pure``. Set ``FASTDEFLATE_PURE=1`` to force the fallback.
``IMPLEMENTATION`` says which one is in use ("cython" or "python"); ``ENGINE`` the
zlib it runs on (e.g. "zlib-ng 2.3.3 (zlib-compat)", "zlib 1.2.13", or for the
fallback "zlib 1.2.13 (stdlib)"), ``ZLIB_VERSION`` that zlib's ``zlibVersion()``.
``set_live_states(n)`` (or ``FASTDEFLATE_LIVE_STATES=n``) sets how many live zlib
streams the extension keeps per parameter set whatever happens; beyond that, codec objects
idle for ``set_park_after(seconds)`` (or ``FASTDEFLATE_PARK_AFTER``, default 10) keep
only their window. ``live_states()`` reports them. ``set_inflate("zlib")`` (or
``FASTDEFLATE_INFLATE=zlib``) has zlib decode every message instead of the bundled ISA-L's
whole messages; ``inflate_engine()`` says what decodes now.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Iterable, Optional, Union

from ._broadcast import broadcast, set_start_over_budget
from . import _status
from ._what_pays import set_min_size, set_skip_incompressible, uncompressed
from ._off_loop import set_off_loop_nice, set_off_loop_size
from ._status import status
from ._errors import DecompressionError, DeflateError, MessageTooBig
from ._version import __version__

from ._codec import IMPLEMENTATION
from ._forksafe import free_in_child

if IMPLEMENTATION == "cython":
    from ._fastdeflate import (ENGINE, INFLATE_ENGINE, ZLIB_VERSION, Compressor,
                               Decompressor, engines, inflate_engine, live_states,
                               set_inflate, set_live_states, set_park_after)
else:
    from ._pure import (ENGINE, INFLATE_ENGINE, ZLIB_VERSION, Compressor,  # type: ignore[assignment]
                        Decompressor, engines, inflate_engine, live_states, set_inflate,
                        set_live_states, set_park_after)

# What the names above are, for readers and the API reference (docs/reference/api.md). These
# annotations bind nothing: the values are the ones imported or set above.
IMPLEMENTATION: str
"""Which codec is in use: `"cython"` (the compiled extension, `fastdeflate._fastdeflate`)
or `"python"` (the pure-Python fallback, `fastdeflate._pure`: no extension for this
platform, or `FASTDEFLATE_PURE=1`)."""
ENGINE: str
"""The zlib the codec runs on: `"zlib-ng 2.3.3 (zlib-compat)"` (the bundled zlib-ng),
`"zlib 1.2.13"` (a build on the system zlib) or, for the fallback, `"zlib 1.2.13 (stdlib)"`.
Where the bundled ISA-L runs a level instead, [`engines()`][fastdeflate._fastdeflate.engines]
says so."""
INFLATE_ENGINE: str
"""What decompresses when [`set_inflate()`][fastdeflate._fastdeflate.set_inflate] is
`"auto"`: `"ISA-L 2.32.1 (whole messages), zlib-ng 2.3.3 (zlib-compat) (the rest)"` in a
build with ISA-L, otherwise `ENGINE`.
[`inflate_engine()`][fastdeflate._fastdeflate.inflate_engine] says what decompresses now."""
ZLIB_VERSION: str
"""`zlibVersion()` of the zlib in use: `"1.3.1.zlib-ng"` for the bundled zlib-ng, the
system zlib's version (`"1.2.13"`), or the stdlib `zlib` module's for the fallback."""



def _flag(value: str) -> bool:
    """"1"/"0" (also true/false, yes/no, on/off) as a bool; ValueError otherwise."""
    words = {"1": True, "true": True, "yes": True, "on": True,
             "0": False, "false": False, "no": False, "off": False}
    try:
        return words[value.strip().lower()]
    except KeyError:
        raise ValueError("expected 1 or 0") from None


def _settings_from_environment() -> None:
    """``FASTDEFLATE_LIVE_STATES=n``, ``FASTDEFLATE_PARK_AFTER=seconds``,
    ``FASTDEFLATE_INFLATE=auto|zlib``, ``FASTDEFLATE_MIN_SIZE=n`` and
    ``FASTDEFLATE_SKIP_INCOMPRESSIBLE=1|0``, ``FASTDEFLATE_START_OVER_BUDGET=share`` and
    ``FASTDEFLATE_OFF_LOOP_SIZE=n`` and ``FASTDEFLATE_OFF_LOOP_NICE=n`` set the live-state
    limit, the park-after delay, what decompresses, the size under which messages go out
    uncompressed, whether incompressible ones do, what a broadcast group may spend on
    starting over, the size from which messages are compressed off the event loop and
    the priority of the threads that do it, at import (a bad value is reported with a
    RuntimeWarning and the default kept)."""
    for name, setting, parse in (("FASTDEFLATE_LIVE_STATES", set_live_states, int),
                                 ("FASTDEFLATE_PARK_AFTER", set_park_after, float),
                                 ("FASTDEFLATE_INFLATE", set_inflate, str.strip),
                                 ("FASTDEFLATE_MIN_SIZE", set_min_size, int),
                                 ("FASTDEFLATE_SKIP_INCOMPRESSIBLE", set_skip_incompressible,
                                  _flag),
                                 ("FASTDEFLATE_START_OVER_BUDGET", set_start_over_budget,
                                  float),
                                 ("FASTDEFLATE_OFF_LOOP_SIZE", set_off_loop_size, int),
                                 ("FASTDEFLATE_OFF_LOOP_NICE", set_off_loop_nice, int)):
        value = os.environ.get(name, "")
        if not value:
            continue
        try:
            setting(parse(value))
        except (TypeError, ValueError) as exc:
            warnings.warn(f"{name}={value!r} ignored: {exc}", RuntimeWarning, stacklevel=3)


_settings_from_environment()

__all__ = [
    "Compressor",
    "Decompressor",
    "DeflateError",
    "DecompressionError",
    "MessageTooBig",
    "IMPLEMENTATION",
    "ENGINE",
    "INFLATE_ENGINE",
    "ZLIB_VERSION",
    "engines",
    "inflate_engine",
    "set_inflate",
    "__version__",
    "live_states",
    "set_live_states",
    "set_park_after",
    "set_min_size",
    "set_skip_incompressible",
    "set_off_loop_size",
    "set_off_loop_nice",
    "uncompressed",
    "broadcast",
    "set_start_over_budget",
    "status",
    "enable",
    "disable",
]


def enable(*, fallback: bool = False,
           libraries: Optional[Union[str, Iterable[str]]] = None,
           children: bool = True) -> list[str]:
    """Make every installed, supported websocket library use fastdeflate, importing none.

    One line for a whole application (websockets, aiohttp, wsproto — and so uvicorn and
    simple-websocket —, tornado, autobahn): a library the application has imported is
    patched at once, any other right after the application imports it (an import hook,
    until [`disable()`][fastdeflate.disable]). Returns the names of the installed
    libraries it covers, patched now or to be patched on import
    ([`fastdeflate.integrations.enabled(pending=False)`][fastdeflate.integrations.enabled]
    lists those patched now). A library in a version fastdeflate cannot drive stays stock,
    with a RuntimeWarning (at once, or when the application imports it); the others are
    enabled all the same. ``libraries`` limits it to those named (a list, or one name as a
    string: ``libraries="websockets"``); naming ``"daphne"`` also
    makes daphne (Django Channels) negotiate compression, which it never does stock
    (opt-in only: see
    [`fastdeflate.integrations.daphne`][fastdeflate.integrations.daphne]).

    ``children`` (default True): the processes this one starts later are enabled too —
    uvicorn's and hypercorn's workers and reloader, gunicorn's, ``multiprocessing``'s —
    through ``FASTDEFLATE_ENABLE``, set in this process's environment unless it is set
    already (read at their start-up: see `fastdeflate._autoenable`);
    [`disable()`][fastdeflate.disable] takes it back. ``children=False`` leaves the
    environment alone.

    Without the compiled extension the libraries keep their own codec (the fallback is
    no faster than they are) and a RuntimeWarning says so, unless ``fallback=True``.

    New connections only: a connection already open keeps the library's own codec until
    it closes.
    """
    from . import integrations
    from ._autoenable import ENV

    if IMPLEMENTATION != "cython" and not fallback:
        source_tree = _status.source_tree()
        warnings.warn(
            "fastdeflate's compiled extension is not available: websocket libraries "
            "keep their own codec (pass fallback=True to use the pure-Python one)"
            + (f". {source_tree}" if source_tree else ""),
            RuntimeWarning,
            stacklevel=2,
        )
        return []

    # (the names read once: ``libraries`` may be an iterator)
    chosen = integrations.SUPPORTED if libraries is None else integrations.check_supported(
        libraries)
    names = integrations.enable(chosen)
    global _set_for_children
    with _children_lock:
        if children and not os.environ.get(ENV):
            os.environ[ENV] = ("1" if set(chosen) == set(integrations.SUPPORTED)
                               else ",".join(chosen))
            _set_for_children = os.environ[ENV]
    return names


_set_for_children: Optional[str] = None  # the FASTDEFLATE_ENABLE that enable() set
# enable() and disable() read and write it in one step
_children_lock = free_in_child(threading.Lock())


def disable() -> list[str]:
    """Undo [`enable()`][fastdeflate.enable]: the import hook is removed and every
    library is back to its own codec; ``FASTDEFLATE_ENABLE`` is removed if
    [`enable()`][fastdeflate.enable] set it. Returns the libraries' names (those not
    imported yet included). Imports nothing.

    A library whose adapter fails is reported with a RuntimeWarning; the others are
    disabled all the same.

    New connections only: a connection opened while enabled keeps fastdeflate's codec
    until it closes. ``status()["libraries"][name]["connections"]`` counts those still
    open, and an INFO line on the ``fastdeflate`` logger says how many each library
    disabled leaves.
    """
    from . import integrations
    from ._autoenable import ENV

    global _set_for_children
    with _children_lock:
        if _set_for_children is not None and os.environ.get(ENV) == _set_for_children:
            del os.environ[ENV]
        _set_for_children = None
    return integrations.disable()
