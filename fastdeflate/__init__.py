"""fastdeflate: fast permessage-deflate (RFC 7692) for Python websocket libraries.

The codec classes come from the compiled extension ``fastdeflate._fastdeflate``
when it can be imported, otherwise from the pure-Python fallback
``fastdeflate._pure``. Set ``FASTDEFLATE_PURE=1`` to force the fallback.
``IMPLEMENTATION`` says which one is in use ("cython" or "python").
"""

from __future__ import annotations

import os

from ._errors import DecompressionError, DeflateError, MessageTooBig
from ._version import __version__

IMPLEMENTATION: str
if os.environ.get("FASTDEFLATE_PURE", "") not in ("", "0"):
    from ._pure import ZLIB_VERSION, Compressor, Decompressor

    IMPLEMENTATION = "python"
else:
    try:
        from ._fastdeflate import ZLIB_VERSION, Compressor, Decompressor
    except ImportError:
        from ._pure import ZLIB_VERSION, Compressor, Decompressor

        IMPLEMENTATION = "python"
    else:
        IMPLEMENTATION = "cython"

__all__ = [
    "Compressor",
    "Decompressor",
    "DeflateError",
    "DecompressionError",
    "MessageTooBig",
    "IMPLEMENTATION",
    "ZLIB_VERSION",
    "__version__",
]
