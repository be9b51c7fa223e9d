"""The engine: the stdlib's zlib at every level, and engines() saying so.

(Part of the fallback: imported by ``fastdeflate/_pure.py``, which lists the parts;
the compiled codec's counterpart is ``extension/engines.pxi``.)
"""

from __future__ import annotations

import zlib

from .._params import compressor_args

ZLIB_VERSION: str = zlib.ZLIB_RUNTIME_VERSION
ENGINE: str = f"zlib {ZLIB_VERSION} (stdlib)"
INFLATE_ENGINE: str = ENGINE


def engines(window_bits: int = 15, mem_level: int = 8, strategy: int = 0) -> dict[int, str]:
    """Which engine compresses at each level (-1..9) with these parameters: here the
    stdlib's zlib at every level."""
    compressor_args(6, window_bits, mem_level, strategy, False)
    return {level: ENGINE for level in range(-1, 10)}
