"""websockets: one message through its own permessage-deflate extension objects, no sockets.

The sending side is a ``PerMessageDeflate`` extension's ``encode`` (what websockets calls
for every outgoing frame), the receiving side another one's ``decode``; parameters are
what two websockets peers negotiate with the default ``compression="deflate"``: window
12 bits both ways, memLevel 5. ``enabled=False`` uses websockets' own class,
``enabled=True`` fastdeflate's (``fastdeflate.integrations.websockets``).

Measured by ``python benchmarks/run.py --parts libraries`` (stock vs enabled,
interleaved, medians).
"""

from __future__ import annotations

from typing import Callable

from websockets.extensions import permessage_deflate as pmd
from websockets.frames import Frame, Opcode

from fastdeflate.integrations import websockets as fw

NAME = "websockets"

WINDOW_BITS = 12  # websockets' default server_max_window_bits / client_max_window_bits
COMPRESS_SETTINGS = {"memLevel": 5}  # websockets' default


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: encode with one extension object, decode with its peer's."""
    cls = fw.PerMessageDeflate if enabled else pmd.PerMessageDeflate
    nct = no_context_takeover
    sender = cls(nct, nct, WINDOW_BITS, WINDOW_BITS, dict(COMPRESS_SETTINGS))
    receiver = cls(nct, nct, WINDOW_BITS, WINDOW_BITS, dict(COMPRESS_SETTINGS))
    encode, decode = sender.encode, receiver.decode
    binary = Opcode.BINARY

    def roundtrip(message: bytes) -> bytes:
        frame = encode(Frame(binary, message))
        return bytes(decode(frame, max_size=None).data)

    return roundtrip
