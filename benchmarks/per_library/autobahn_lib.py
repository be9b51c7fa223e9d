"""autobahn: one message through its own permessage-deflate objects, no sockets.

The sending side is what ``WebSocketProtocol.sendMessage`` does to a payload when
compression is on (``start_compress_message``, ``compress_message_data``,
``end_compress_message`` of the connection's PMCE object, outputs joined); the receiving
side what ``onFrameBegin`` / ``onFrameData`` / ``onFrameEnd`` do for a single-frame
compressed message (``start_decompress_message``, ``decompress_message_data``,
``end_decompress_message``). Settings are autobahn's defaults: window 15, memLevel 8,
zlib's default level, no ``maxMessagePayloadSize`` (so ``max_output_len=None``).
``enabled=False`` uses autobahn's ``PerMessageDeflate``, ``enabled=True`` fastdeflate's
subclass (``fastdeflate.integrations.autobahn.PerMessageDeflate``).

Measured by ``python benchmarks/run.py --parts libraries`` (stock vs enabled,
interleaved, medians).
"""

from __future__ import annotations

from typing import Callable

from autobahn.websocket.compress_deflate import PerMessageDeflate as StockPerMessageDeflate

from fastdeflate.integrations.autobahn import PerMessageDeflate as FastPerMessageDeflate

NAME = "autobahn"

WINDOW_BITS = 15  # autobahn's default when the peers ask for nothing smaller
MEM_LEVEL = 8  # autobahn's default (accept objects with mem_level=None)


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: a server's PMCE compresses, a client's decompresses."""
    cls = FastPerMessageDeflate if enabled else StockPerMessageDeflate
    # server -> client direction; server_no_context_takeover is what governs it
    args = (no_context_takeover, False, WINDOW_BITS, WINDOW_BITS, MEM_LEVEL)
    sender, receiver = cls(True, *args), cls(False, *args)

    def roundtrip(message: bytes) -> bytes:
        sender.start_compress_message()
        payload = b"".join(
            [sender.compress_message_data(message), sender.end_compress_message()]
        )
        receiver.start_decompress_message()
        out = receiver.decompress_message_data(payload, max_output_len=None)
        receiver.end_decompress_message()
        return out

    return roundtrip
