"""The mixed-stream test every integration runs (issue 44): _what_pays.mixed_stream with
its echoes, sent from the fastdeflate side through a library's own glue (the
``exchange``) to a stock peer, and checked alike (_what_pays.check_stream)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ._what_pays import Item, check_stream, mixed_stream, with_echoes


class Exchanged(NamedTuple):
    """What an exchange gives back: the messages the stock peer received (text as str,
    binary as bytes), each one's frames' RSV1 bits as on the wire, and the fastdeflate
    side's extension (None where the test does not look at it)."""

    received: list
    rsv1: list[list[bool]]
    extension: Any = None


#: Sends every item from the fastdeflate side (the opted-out inside uncompressed()).
Exchange = Callable[[list[Item]], Exchanged]


def mixed_items(seed: int, count: int = 58, *, whole: bool = False,
                wide: bool = False) -> list[Item]:
    """mixed_stream(seed, count) with its echoes; ``whole``: without the fragmented
    messages (for a library that sends none); ``wide``: mixed_stream's wider sizes."""
    items = with_echoes(mixed_stream(seed, count, wide=wide))
    return [item for item in items if len(item.parts) == 1] if whole else items


def drive_mixed_stream(seed: int, exchange: Exchange, count: int = 58, *,
                       whole: bool = False, wide: bool = False) -> Exchanged:
    """Sends mixed_items(seed, count, ...) through ``exchange``; every message arrived
    exactly, with RSV1 and status() counts as it had to (check_stream). Returns the
    exchange."""
    items = mixed_items(seed, count, whole=whole, wide=wide)
    exchanged = exchange(items)
    check_stream(items, exchanged.received, exchanged.rsv1)
    return exchanged


def window_params(bits: int, nct: bool) -> dict[str, Any]:
    """Window bits both ways and, if ``nct``, no context takeover both ways (the
    parameters websockets' factories and wsproto's extension share)."""
    params: dict[str, Any] = dict(client_max_window_bits=bits, server_max_window_bits=bits)
    if nct:
        params.update(client_no_context_takeover=True, server_no_context_takeover=True)
    return params


def check_sender_extension(extension: Any, extension_type: type, compressor_type: type,
                           nct: bool) -> None:
    """The sender's extension is ``extension_type``; after the stream it holds no
    compressor without context takeover (none made for a skipped message), else one of
    ``compressor_type``."""
    assert type(extension) is extension_type
    assert (extension._compressor is None) == nct
    if not nct:
        assert type(extension._compressor) is compressor_type
