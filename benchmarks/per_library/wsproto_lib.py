"""wsproto: one message through its own frame protocol and permessage-deflate objects, no sockets.

The sending side is a server-side ``wsproto.frame_protocol.FrameProtocol`` with a
``PerMessageDeflate`` extension (``send_data``: the extension's ``frame_outbound`` plus
wsproto's framing, unmasked), the receiving side a client-side one
(``receive_bytes`` + ``received_frames``: header parsing, the extension's inbound hooks,
the message decoder). Parameters are negotiated by the extension objects themselves
(``offer`` -> ``accept`` -> ``finalize``): wsproto's defaults, window 15 both ways,
level 6 (Z_DEFAULT_COMPRESSION), memLevel 8. ``enabled=False`` uses wsproto's own
class, ``enabled=True`` fastdeflate's (``fastdeflate.integrations.wsproto``).

Measured by ``python benchmarks/run.py --parts libraries`` (stock vs enabled,
interleaved, medians).
"""

from __future__ import annotations

from typing import Callable

from wsproto.extensions import PerMessageDeflate as StockPerMessageDeflate
from wsproto.frame_protocol import FrameProtocol

from fastdeflate.integrations.wsproto import PerMessageDeflate as FastPerMessageDeflate

NAME = "wsproto"


def make_roundtrip(enabled: bool, no_context_takeover: bool = False) -> Callable[[bytes], bytes]:
    """``f(message) -> message``: server-side frame encoder, then client-side decoder."""
    cls = FastPerMessageDeflate if enabled else StockPerMessageDeflate
    nct = no_context_takeover
    client_ext = cls(client_no_context_takeover=nct, server_no_context_takeover=nct)
    server_ext = cls()
    response = server_ext.accept("permessage-deflate; " + str(client_ext.offer()))
    client_ext.finalize("permessage-deflate; " + str(response))
    sender = FrameProtocol(client=False, extensions=[server_ext])
    receiver = FrameProtocol(client=True, extensions=[client_ext])
    send_data, receive_bytes, received_frames = (
        sender.send_data, receiver.receive_bytes, receiver.received_frames
    )

    def roundtrip(message: bytes) -> bytes:
        receive_bytes(send_data(message))
        (frame,) = received_frames()
        return frame.payload  # type: ignore[return-value]

    return roundtrip
