"""Negotiation of permessage-deflate (RFC 7692 §7.1), independent of any websocket library.

Parse ``Sec-WebSocket-Extensions`` values, check the four permessage-deflate parameters,
choose a response (server) or validate one (client). The outcome is an `Agreement`,
which builds the codec objects of either side.

Client::

    offer = client_offer()                               # header value to send
    agreement = accept_response(response_header, offer)  # NegotiationError: fail it
    compressor, decompressor = agreement.compressor("client"), agreement.decompressor("client")

Server::

    selected = server_select(request_header, server_max_window_bits=12, client_max_window_bits=12)
    if selected is not None:                             # None: no compression
        response_header, agreement = selected
        compressor = agreement.compressor("server", mem_level=5)
        decompressor = agreement.decompressor("server")

zlib cannot compress raw deflate with an 8-bit window, so this module never agrees to
*compress* with window 8: a client neither offers nor accepts ``client_max_window_bits=8``,
and a server declines offers that would limit its own window to 8. Inflating with 8 works.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence

if TYPE_CHECKING:  # fastdeflate/__init__.py imports this module: import the codec lazily
    from fastdeflate import Compressor, Decompressor

__all__ = [
    "EXTENSION_NAME", "NegotiationError", "parse_extensions", "DeflateParameters",
    "Agreement", "client_offer", "accept_response", "server_select",
]

EXTENSION_NAME = "permessage-deflate"

Param = tuple[str, str | None]  # a parameter's name and value (None: no value)
Extension = tuple[str, list[Param]]  # an extension's name and its parameters, in order
Side = Literal["server", "client"]


class NegotiationError(ValueError):
    """A header is malformed, or a permessage-deflate offer or response is invalid."""


# -- Header syntax: RFC 6455 §9.1 with RFC 7230 tokens, quoted strings and lists ----------
_OWS = re.compile(r"[ \t]*")
_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
_QUOTED = re.compile(r'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"')
_QUOTED_PAIR = re.compile(r"\\(.)", re.DOTALL)


def parse_extensions(header: str | Sequence[str]) -> list[Extension]:
    """Parse a ``Sec-WebSocket-Extensions`` value into ``(name, params)`` pairs.

    ``header`` is one value, or the list of values of several header lines (their
    extensions are concatenated in order). Whitespace around separators is optional,
    empty list elements are ignored, quoted values are unquoted (and must be tokens).

    >>> parse_extensions('permessage-deflate; client_max_window_bits="10", x-foo')
    [('permessage-deflate', [('client_max_window_bits', '10')]), ('x-foo', [])]

    Raises NegotiationError if a value is malformed or holds no extension at all.
    """
    values = [header] if isinstance(header, str) else list(header)
    return [extension for value in values for extension in _parse_value(value)]


def _parse_value(header: str) -> list[Extension]:
    extensions: list[Extension] = []
    pos = _skip_ows(header, 0)
    while pos < len(header):
        if header[pos] == ",":  # an empty list element
            pos = _skip_ows(header, pos + 1)
            continue
        name, pos = _token(header, pos, "an extension name")
        params: list[Param] = []
        while header.startswith(";", pos):
            param, pos = _token(header, _skip_ows(header, pos + 1), "a parameter name")
            value = None
            if header.startswith("=", pos):
                value, pos = _param_value(header, _skip_ows(header, pos + 1), param)
            params.append((param, value))
        extensions.append((name, params))
        if pos < len(header) and header[pos] != ",":
            raise NegotiationError(f"unexpected {header[pos]!r} at position {pos} in {header!r}")
    if not extensions:
        raise NegotiationError(f"no extension in header value {header!r}")
    return extensions


def _skip_ows(header: str, pos: int) -> int:
    match = _OWS.match(header, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _token(header: str, pos: int, what: str) -> tuple[str, int]:
    """The token at ``pos`` and the position after it and any whitespace that follows."""
    match = _TOKEN.match(header, pos)
    if match is None:
        raise NegotiationError(f"expected {what} at position {pos} in {header!r}")
    return match.group(), _skip_ows(header, match.end())


def _param_value(header: str, pos: int, param: str) -> tuple[str, int]:
    if not header.startswith('"', pos):
        return _token(header, pos, f"a value for {param}")
    match = _QUOTED.match(header, pos)
    if match is None:
        raise NegotiationError(f"malformed quoted value for {param} in {header!r}")
    value = _QUOTED_PAIR.sub(r"\1", match.group()[1:-1])
    if _TOKEN.fullmatch(value) is None:
        raise NegotiationError(f"quoted value of {param} is not a token: {match.group()}")
    return value, _skip_ows(header, match.end())


def _deflate_elements(header: str | Sequence[str]) -> list[list[Param]]:
    """The parameter lists of the permessage-deflate elements of a header, in order."""
    return [params for name, params in parse_extensions(header) if name == EXTENSION_NAME]


# -- The parameters of one offer or response ---------------------------------------------
_WINDOW_BITS_VALUES = {str(bits): bits for bits in range(8, 16)}  # plain decimals only
_FLAGS = ("server_no_context_takeover", "client_no_context_takeover")
_WINDOWS = ("server_max_window_bits", "client_max_window_bits")


def _check_window(name: str, value: object, *, low: int = 8, none: bool = True,
                  true: bool = False) -> None:
    """Raise ValueError unless ``value`` is low..15 (or None, or True, where allowed)."""
    if (none and value is None) or (true and value is True) or (
        isinstance(value, int) and not isinstance(value, bool) and low <= value <= 15
    ):
        return
    allowed = " or ".join([f"{low}..15"] + ["True"] * true + ["None"] * none)
    reason = " (8 is not supported: zlib cannot compress with an 8-bit window)" * (low == 9)
    raise ValueError(f"{name} must be {allowed}, got {value!r}{reason}")


@dataclass(frozen=True)
class DeflateParameters:
    """The parameters of one permessage-deflate offer or response, as written.

    None means absent. ``client_max_window_bits=True`` means present without a value,
    which only a client offer may do: "I support this parameter".
    """

    server_no_context_takeover: bool = False
    client_no_context_takeover: bool = False
    server_max_window_bits: int | None = None
    client_max_window_bits: int | bool | None = None

    def __post_init__(self) -> None:
        _check_window("server_max_window_bits", self.server_max_window_bits)
        _check_window("client_max_window_bits", self.client_max_window_bits, true=True)

    @classmethod
    def from_params(cls, params: Iterable[Param], *, is_offer: bool) -> DeflateParameters:
        """Check and convert the parameters of one permessage-deflate element.

        ``is_offer`` is True for a client offer, where ``client_max_window_bits`` may
        have no value, and False for a server response. Raises NegotiationError for an
        unknown or duplicate parameter, a value where none is allowed, a missing value,
        or a window size other than the plain decimals 8..15.
        """
        found: dict[str, Any] = {}
        for name, value in params:
            if name in found:
                raise NegotiationError(f"duplicate parameter {name}")
            if name in _FLAGS:
                if value is not None:
                    raise NegotiationError(f"parameter {name} takes no value, got {value!r}")
                found[name] = True
            elif name not in _WINDOWS:
                raise NegotiationError(f"unknown parameter {name!r} in {EXTENSION_NAME}")
            elif value is None and name == "client_max_window_bits" and is_offer:
                found[name] = True
            elif value is None:
                where = " in a response" if name == "client_max_window_bits" else ""
                raise NegotiationError(f"parameter {name} requires a value{where}")
            elif value in _WINDOW_BITS_VALUES:
                found[name] = _WINDOW_BITS_VALUES[value]
            else:
                raise NegotiationError(f"invalid value for {name}: {value!r} (expected 8..15)")
        return cls(**found)

    def to_header(self) -> str:
        """Format as one header element, parameters in a fixed order.

        >>> DeflateParameters(True, client_max_window_bits=12).to_header()
        'permessage-deflate; server_no_context_takeover; client_max_window_bits=12'
        """
        parts = [EXTENSION_NAME] + [name for name in _FLAGS if getattr(self, name)]
        for name in _WINDOWS:
            value = getattr(self, name)
            if value is not None:
                parts.append(name if value is True else f"{name}={value}")
        return "; ".join(parts)


# -- The outcome of a negotiation ---------------------------------------------------------
@dataclass(frozen=True)
class Agreement:
    """The parameters in effect once negotiation has succeeded (15: window not limited).

    The ``server_*`` values apply to the messages that the server sends (it compresses
    them, the client decompresses them), the ``client_*`` values to the client's.
    """

    server_no_context_takeover: bool = False
    client_no_context_takeover: bool = False
    server_max_window_bits: int = 15
    client_max_window_bits: int = 15

    def __post_init__(self) -> None:
        for name in _WINDOWS:
            _check_window(name, getattr(self, name), none=False)

    def _direction(self, side: Side, *, sending: bool) -> tuple[int, bool]:
        """Window bits and no-context-takeover of the messages that ``side`` sends/receives."""
        if side not in ("server", "client"):
            raise ValueError(f"side must be 'server' or 'client', got {side!r}")
        if (side == "server") == sending:  # the server's messages
            return self.server_max_window_bits, self.server_no_context_takeover
        return self.client_max_window_bits, self.client_no_context_takeover

    def compressor(self, side: Side, *, level: int = 6, mem_level: int = 8,
                   strategy: int = 0) -> Compressor:
        """A [`fastdeflate.Compressor`][fastdeflate._fastdeflate.Compressor] for the messages that
        ``side`` sends."""
        from fastdeflate import Compressor

        window_bits, no_context_takeover = self._direction(side, sending=True)
        return Compressor(level=level, window_bits=window_bits, mem_level=mem_level,
                          strategy=strategy, no_context_takeover=no_context_takeover)

    def decompressor(self, side: Side) -> Decompressor:
        """A [`fastdeflate.Decompressor`][fastdeflate._fastdeflate.Decompressor] for the messages that
        ``side`` receives."""
        from fastdeflate import Decompressor

        window_bits, no_context_takeover = self._direction(side, sending=False)
        return Decompressor(window_bits=window_bits, no_context_takeover=no_context_takeover)


# -- Client side --------------------------------------------------------------------------
def client_offer(*, server_no_context_takeover: bool = False,
                 client_no_context_takeover: bool = False,
                 server_max_window_bits: int | None = None,
                 client_max_window_bits: int | bool | None = True) -> str:
    """The ``Sec-WebSocket-Extensions`` value that offers permessage-deflate.

    ``server_max_window_bits`` (8..15) limits the server's window.
    ``client_max_window_bits`` is True ("I support the parameter": the server may then
    limit our window), None (not sent) or 9..15 (our window is at most that). Raises
    ValueError on a bad argument.
    """
    _check_window("server_max_window_bits", server_max_window_bits)
    _check_window("client_max_window_bits", client_max_window_bits, low=9, true=True)
    return DeflateParameters(server_no_context_takeover, client_no_context_takeover,
                             server_max_window_bits, client_max_window_bits).to_header()


def accept_response(header: str | Sequence[str], offer: DeflateParameters | str) -> Agreement:
    """Validate the server's response against the client's offer; return the agreement.

    ``header`` is the response's ``Sec-WebSocket-Extensions`` value: it must hold exactly
    one permessage-deflate element (other extensions are ignored). ``offer`` is what was
    sent, as `DeflateParameters` or as the header value; when that value holds
    several permessage-deflate offers, the response may answer any of them. Raises
    NegotiationError, upon which the client must fail the WebSocket connection.
    """
    elements = _deflate_elements(header)
    if len(elements) != 1:
        raise NegotiationError(
            f"expected one {EXTENSION_NAME} in the response, got {len(elements)}")
    response = DeflateParameters.from_params(elements[0], is_offer=False)
    if isinstance(offer, DeflateParameters):
        offers = [offer]
    else:
        offers = [DeflateParameters.from_params(p, is_offer=True) for p in _deflate_elements(offer)]
        if not offers:
            raise ValueError(f"the offer {offer!r} contains no {EXTENSION_NAME}")
    errors: list[str] = []
    for candidate in offers:
        try:
            return _check_response(response, candidate)
        except NegotiationError as exc:
            errors.append(str(exc))
    raise NegotiationError(errors[0] if len(errors) == 1 else
                           "the response matches none of the offers: " + "; ".join(errors))


def _check_response(response: DeflateParameters, offer: DeflateParameters) -> Agreement:
    # server_no_context_takeover: the server may add it, but must not drop it when asked.
    if offer.server_no_context_takeover and not response.server_no_context_takeover:
        raise NegotiationError("server_no_context_takeover was offered but not accepted")

    # server_max_window_bits: an offered limit is accepted by repeating it or a smaller
    # value; without a limit in the offer the server may send any (we only inflate).
    offered, server_bits = offer.server_max_window_bits, response.server_max_window_bits
    if offered is not None and (server_bits is None or server_bits > offered):
        raise NegotiationError(f"server_max_window_bits={server_bits} in the response "
                               f"does not accept the offered limit {offered}")

    # client_max_window_bits: in the response only if offered, never above an offered value.
    offered_client, client_bits = offer.client_max_window_bits, response.client_max_window_bits
    if client_bits is not None and offered_client is None:
        raise NegotiationError(
            f"client_max_window_bits={client_bits} in the response was not offered")
    if client_bits is not None and offered_client is not None and offered_client is not True:
        if client_bits > offered_client:
            raise NegotiationError(f"client_max_window_bits={client_bits} in the response "
                                   f"exceeds the offered {offered_client}")

    agreement = _agreement(offer, response)
    if agreement.client_max_window_bits == 8:
        raise NegotiationError("client_max_window_bits=8 is not supported: "
                               "zlib cannot compress with an 8-bit window")
    return agreement


def _agreement(offer: DeflateParameters, response: DeflateParameters) -> Agreement:
    """What a valid offer and the response to it put in effect."""
    client_bits = response.client_max_window_bits
    if client_bits is None:  # the client keeps to the limit it offered, if any
        client_bits = offer.client_max_window_bits
    return Agreement(
        server_no_context_takeover=response.server_no_context_takeover,
        client_no_context_takeover=(offer.client_no_context_takeover
                                    or response.client_no_context_takeover),
        server_max_window_bits=response.server_max_window_bits or 15,
        client_max_window_bits=15 if client_bits is None or client_bits is True else client_bits,
    )


# -- Server side --------------------------------------------------------------------------
def server_select(
    header: str | Sequence[str],
    *,
    server_no_context_takeover: bool = False,
    client_no_context_takeover: bool = False,
    server_max_window_bits: int | None = None,
    client_max_window_bits: int | None = None,
    require_client_max_window_bits: bool = False,
) -> tuple[str, Agreement] | None:
    """Choose the first acceptable permessage-deflate offer in a client's header.

    Returns the element to send in the response's ``Sec-WebSocket-Extensions`` and the
    agreement, or None when no offer is acceptable (respond without compression).
    Invalid offers are declined, not fatal; other extensions are ignored. Raises
    NegotiationError only when the header is not syntactically valid.

    The keywords configure this server: no context takeover on either side, a limit on
    our window (9..15) and on the client's (8..15; sent only to clients that offer
    ``client_max_window_bits``, and with ``require_client_max_window_bits`` the others
    are declined; zlib-based clients refuse 8). Raises ValueError on a bad setting.
    """
    _check_window("server_max_window_bits", server_max_window_bits, low=9)
    _check_window("client_max_window_bits", client_max_window_bits)
    if require_client_max_window_bits and client_max_window_bits is None:
        raise ValueError("require_client_max_window_bits needs client_max_window_bits")
    config = DeflateParameters(server_no_context_takeover, client_no_context_takeover,
                               server_max_window_bits, client_max_window_bits)
    for params in _deflate_elements(header):
        try:
            offer = DeflateParameters.from_params(params, is_offer=True)
        except NegotiationError:
            continue  # an invalid offer is declined
        selected = _answer(offer, config, require_client_max_window_bits)
        if selected is not None:
            return selected
    return None


def _answer(offer: DeflateParameters, config: DeflateParameters,
            require_client_bits: bool) -> tuple[str, Agreement] | None:
    """The response to one valid offer under the server's ``config``, or None to decline."""
    # Our window: the smaller of the client's limit and ours. We can't compress with 8.
    server_bits = offer.server_max_window_bits
    if config.server_max_window_bits is not None:
        server_bits = min(server_bits or 15, config.server_max_window_bits)
    if server_bits == 8:
        return None

    # The client's window: only a client that offered the parameter may be limited; a
    # limit it offered itself is repeated (allowed, and it makes the response explicit).
    client_bits = offer.client_max_window_bits
    if client_bits is None and require_client_bits:
        return None
    if client_bits is True:
        client_bits = config.client_max_window_bits
    elif client_bits is not None and config.client_max_window_bits is not None:
        client_bits = min(client_bits, config.client_max_window_bits)

    response = DeflateParameters(
        server_no_context_takeover=(offer.server_no_context_takeover
                                    or config.server_no_context_takeover),
        client_no_context_takeover=config.client_no_context_takeover,
        server_max_window_bits=server_bits,
        client_max_window_bits=client_bits,
    )
    return response.to_header(), _agreement(offer, response)
