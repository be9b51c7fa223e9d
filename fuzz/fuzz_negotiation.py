#!/usr/bin/env python
"""Fuzz target 3: the negotiation parser and selector on arbitrary header values.

Input: 2 parameter bytes, then the header value (latin-1; each ``\\n`` starts another
header line)::

    byte 0: bit 0 server_no_context_takeover | bit 1 client_no_context_takeover
            bit 2 require_client_max_window_bits | bit 3 use the value as a *response*
    byte 1: bits 0-3 server_max_window_bits (9..15, else none)
            bits 4-7 client_max_window_bits (8..15, else none)

Checks: only NegotiationError escapes the parser, the selector and the client's check;
whatever the server selects, its response parses, the client accepts it with the same
agreement, neither side compresses with window 8, and the codec objects it builds
round-trip a message between server and client.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import byte, main, instrument_package  # noqa: E402

if __name__ == "__main__":
    instrument_package()

from fastdeflate import negotiation  # noqa: E402

MESSAGE = b'{"fuzz": "negotiation", "fuzz ": "negotiation"}'


def server_config(data: bytes) -> dict:
    flags, windows = byte(data, 0), byte(data, 1)
    server_bits, client_bits = windows & 15, windows >> 4
    config = dict(
        server_no_context_takeover=bool(flags & 1),
        client_no_context_takeover=bool(flags & 2),
        server_max_window_bits=server_bits if 9 <= server_bits <= 15 else None,
        client_max_window_bits=client_bits if client_bits >= 8 else None,
    )
    config["require_client_max_window_bits"] = bool(
        flags & 4 and config["client_max_window_bits"] is not None)
    return config


def check_agreement(agreement: negotiation.Agreement, *senders: str) -> None:
    """The senders' directions can be compressed (never window 8) and round-trip a message.

    A peer that is not fastdeflate may use window 8 (a client may offer it, a server may
    answer with it): we inflate with 8, and only our own sending direction is checked.
    """
    for sender in senders:
        receiver = "client" if sender == "server" else "server"
        compressor = agreement.compressor(sender)
        decompressor = agreement.decompressor(receiver)
        assert compressor.window_bits >= 9
        assert decompressor.window_bits == compressor.window_bits
        assert decompressor.no_context_takeover == compressor.no_context_takeover
        for _ in range(2):
            assert decompressor.decompress(compressor.compress(MESSAGE)) == MESSAGE


def test_one_input(data: bytes) -> None:
    header_text = data[2:].decode("latin-1")
    header: str | list[str] = header_text.split("\n") if "\n" in header_text else header_text
    try:
        parsed = negotiation.parse_extensions(header)
    except negotiation.NegotiationError:
        parsed = None
    valid_offers = []  # what a client that sent this header offered, in order
    for name, params in parsed or []:
        if name == negotiation.EXTENSION_NAME:
            try:
                offer = negotiation.DeflateParameters.from_params(params, is_offer=True)
            except negotiation.NegotiationError:
                continue
            valid_offers.append(offer.to_header())
            again = negotiation.parse_extensions(valid_offers[-1])  # formats back the same
            assert negotiation.DeflateParameters.from_params(
                again[0][1], is_offer=True) == offer

    if byte(data, 0) & 8:  # the value as a server's response to a default client offer
        offer = negotiation.client_offer()
        try:
            agreement = negotiation.accept_response(header, offer)
        except negotiation.NegotiationError:
            return
        assert agreement.client_max_window_bits >= 9
        check_agreement(agreement, "client")
        assert agreement.decompressor("client").window_bits == agreement.server_max_window_bits
        return

    try:
        selected = negotiation.server_select(header, **server_config(data))
    except negotiation.NegotiationError:
        assert parsed is None, "server_select refused a header that parses"
        return
    assert parsed is not None, "server_select accepted a header that does not parse"
    if selected is None:
        return
    response, agreement = selected
    assert agreement.server_max_window_bits >= 9
    if agreement.client_max_window_bits == 8:  # a client of ours would not have offered 8
        check_agreement(agreement, "server")
        return
    client_view = negotiation.accept_response(response, ", ".join(valid_offers))
    assert client_view == agreement, (header, response, client_view, agreement)
    check_agreement(agreement, "server", "client")


if __name__ == "__main__":
    main(test_one_input)
