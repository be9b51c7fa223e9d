"""Basics every part uses: the sync flush's tail, the GIL knob, input as buffers, and the
lock that makes ``__init__`` run once.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/basics.pxi``.)
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from .._params import not_a_buffer

_TAIL = b"\x00\x00\xff\xff"


def _set_release_gil_always(always: bool) -> bool:
    """Test hook (private), as in the extension. The stdlib zlib module releases the GIL
    around every zlib call already, so this implementation always does: returns True."""
    return True


def _as_buffer(data: object) -> "bytes | memoryview":
    """Return ``data`` as bytes or a byte view; ``str`` and others are TypeError."""
    if type(data) is bytes:
        return data
    if isinstance(data, str):
        raise not_a_buffer(data)
    try:
        view = memoryview(data)  # type: ignore[arg-type]
    except TypeError:
        raise not_a_buffer(data) from None
    if not view.c_contiguous:
        raise not_a_buffer(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


@contextlib.contextmanager
def _init_lock(obj: object) -> Iterator[None]:
    """Hold ``obj``'s lock for ``__init__``, which runs once: parameters never change
    under a live stream (as in the extension)."""
    lock = obj.__dict__.setdefault("_lock", threading.Lock())
    with lock:
        if "_window_bits" in obj.__dict__:
            raise RuntimeError(f"{type(obj).__name__} is already initialised; create a new one")
        yield
