"""tornado: one message through its own permessage-deflate objects, no sockets.

The sending side is the compressor object ``WebSocketProtocol13._create_compressors``
builds (``compress(message)`` is all ``write_message`` does to the payload before framing
it), the receiving side the decompressor object (``_handle_message`` hands it the joined
payload of a message). Settings are tornado's defaults for ``compression_options={}``:
level 6 (``GZipContentEncoding.GZIP_LEVEL``), memLevel 8, window 15, max_message_size
10 MiB. ``enabled=False`` uses tornado's ``_PerMessageDeflateCompressor`` /
``_PerMessageDeflateDecompressor``, ``enabled=True`` fastdeflate's drop-ins
(``fastdeflate.integrations.tornado``).

Measured by ``python benchmarks/run.py --parts libraries`` (stock vs enabled,
interleaved, medians).
"""

from __future__ import annotations

from typing import Any, Callable

import tornado.websocket as tws

from fastdeflate.integrations import tornado as ft

NAME = "tornado"

WINDOW_BITS = 15  # what tornado agrees to with its own peers
MAX_MESSAGE_SIZE = tws._default_max_message_size
OPTIONS: dict[str, Any] = {}  # get_compression_options() returning {}: tornado's defaults


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: tornado's compressor, then its decompressor."""
    if enabled:
        compressor_cls, decompressor_cls = ft.FastDeflateCompressor, ft.FastDeflateDecompressor
    else:
        compressor_cls, decompressor_cls = ft.stock_classes()
    persistent = not no_context_takeover
    compress = compressor_cls(persistent, WINDOW_BITS, OPTIONS).compress
    decompress = decompressor_cls(persistent, WINDOW_BITS, MAX_MESSAGE_SIZE, OPTIONS).decompress

    def roundtrip(message: bytes) -> bytes:
        return decompress(compress(message))

    return roundtrip
