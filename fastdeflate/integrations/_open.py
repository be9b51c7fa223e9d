"""Connections on fastdeflate's codec, per library: ``status()["libraries"][name]
["connections"]``.

A connection keeps the objects it was made with: `disable()` (and `enable()`) change new
connections only, so connections opened while enabled go on with fastdeflate's codec
until they close. Each adapter calls `track()` once for the per-connection object it
makes (never per message): websockets', wsproto's and autobahn's extension object,
tornado's compressor, aiohttp's compressor and decompressor (aiohttp makes a
connection's compressor at its first compressed message sent and its decompressor at
its first received: a connection is counted once it has one, by the more numerous of
the two). The count is of those objects still alive: a connection closed is counted
until the library drops it (at once, or at the garbage collector's next pass).

Thread safety without the GIL: every operation on the tables is a single call of a
built-in dict method (``setdefault``, item assignment, ``pop``, ``len``), atomic under
the GIL and under the per-object lock of a free-threaded build; the weak reference's
callback, which runs wherever the object dies, takes no lock of ours (it could otherwise
wait for one its own thread holds).
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

#: Per kind (a library, or "aiohttp compressor" / "aiohttp decompressor"): id -> weak
#: reference, the entry removed by the reference's callback when the object dies (before
#: its memory, hence its id, can be reused).
_live: dict[str, dict[int, "weakref.ref[Any]"]] = {}

#: What each library's count is made of (daphne's connections are autobahn's).
_KINDS = {"aiohttp": ("aiohttp compressor", "aiohttp decompressor")}


def track(kind: str, obj: Any) -> None:
    """Count ``obj`` under ``kind`` while it lives (again for the same object: once)."""
    table = _live.setdefault(kind, {})
    key = id(obj)
    table[key] = weakref.ref(obj, lambda _ref, table=table, key=key: table.pop(key, None))


def connections(library: str) -> Optional[int]:
    """The connections of ``library`` on fastdeflate's codec now (None for daphne: its
    connections are autobahn's, counted there)."""
    if library == "daphne":
        return None
    return max(len(_live.get(kind, ())) for kind in _KINDS.get(library, (library,)))
