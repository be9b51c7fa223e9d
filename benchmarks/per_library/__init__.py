"""One module per websocket library: its own encode/decode path, stock or enabled.

Each module defines ``NAME`` and ``make_roundtrip(enabled, no_context_takeover=False)``
returning ``f(message: bytes) -> bytes`` that compresses ``message`` through the
library's sending side and decompresses it through its receiving side.
"""
