"""Tests of fastdeflate.negotiation: one test (or parametrised case) per RFC 7692 §7.1 rule."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fastdeflate.negotiation import (
    Agreement,
    DeflateParameters,
    NegotiationError,
    accept_response,
    client_offer,
    parse_extensions,
    server_select,
)

PMD = "permessage-deflate"
BAD_WINDOW_VALUES = ["7", "16", "0", "abc", "010", "08", "+9", "-9", "1e1", "9.0", "0x9", "", "９"]


# -- parse_extensions ---------------------------------------------------------------------


def test_parse_single_extension_without_params():
    assert parse_extensions(PMD) == [(PMD, [])]


def test_parse_params_in_order_with_and_without_values():
    header = "permessage-deflate; client_no_context_takeover; server_max_window_bits=10"
    assert parse_extensions(header) == [
        (PMD, [("client_no_context_takeover", None), ("server_max_window_bits", "10")])
    ]


def test_parse_several_extensions_in_order():
    header = "x-foo; a=1, permessage-deflate, permessage-deflate; client_max_window_bits"
    assert parse_extensions(header) == [
        ("x-foo", [("a", "1")]),
        (PMD, []),
        (PMD, [("client_max_window_bits", None)]),
    ]


@pytest.mark.parametrize(
    "header",
    [
        "permessage-deflate;server_max_window_bits=10,x-foo",
        "  permessage-deflate ;\tserver_max_window_bits = 10 ,  x-foo  ",
        "permessage-deflate; server_max_window_bits=\"10\", x-foo",
        ", permessage-deflate; server_max_window_bits=10,, x-foo,",
    ],
)
def test_parse_optional_whitespace_quotes_and_empty_elements(header):
    assert parse_extensions(header) == [
        (PMD, [("server_max_window_bits", "10")]),
        ("x-foo", []),
    ]


def test_parse_quoted_value_with_quoted_pair_is_unescaped():
    assert parse_extensions('x; a="1\\0"') == [("x", [("a", "10")])]


def test_parse_list_of_header_lines_concatenates_in_order():
    lines = ["x-foo", "permessage-deflate; client_max_window_bits, permessage-deflate"]
    assert parse_extensions(lines) == [
        ("x-foo", []),
        (PMD, [("client_max_window_bits", None)]),
        (PMD, []),
    ]
    assert parse_extensions([]) == []


def test_parse_header_lines_are_parsed_separately():
    # An unterminated quoted string must not swallow the next header line.
    with pytest.raises(NegotiationError):
        parse_extensions(['x; a="1', '2"'])


@pytest.mark.parametrize(
    "header",
    [
        "",
        "   ",
        ",",
        " , ,",
        "permessage-deflate;",
        "permessage-deflate; ;",
        "permessage-deflate;; a",
        "permessage-deflate; =10",
        "permessage-deflate; a=",
        "permessage-deflate; a= ,x",
        "permessage-deflate; a=1 2",
        "permessage-deflate a",
        "permessage deflate",
        "per(message)-deflate",
        "permessage-deflate; a=b=c",
        'permessage-deflate; a="unterminated',
        'permessage-deflate; a=""',
        'permessage-deflate; a="not a token"',
        'permessage-deflate; a="1,2"',
        'permessage-deflate; a=x"y"',
        "permessage-deflate\r\n",
        "permessage-deflate; a=1\n",
        "permessage-déflate",
        ";permessage-deflate",
    ],
)
def test_parse_malformed_headers_raise(header):
    with pytest.raises(NegotiationError):
        parse_extensions(header)


tokens = st.text(alphabet="!#$%&'*+-.^_`|~0123456789abcXYZ", min_size=1, max_size=8)
values = st.none() | tokens
extensions = st.lists(
    st.tuples(tokens, st.lists(st.tuples(tokens, values), max_size=4)), min_size=1, max_size=4
)


def format_header(items, *, quote):
    def param(name, value):
        if value is None:
            return name
        return f'{name}="{value}"' if quote else f"{name}={value}"

    return ", ".join("; ".join([name] + [param(*p) for p in params]) for name, params in items)


@given(extensions, st.booleans())
def test_parse_round_trips_formatted_extensions(items, quote):
    assert parse_extensions(format_header(items, quote=quote)) == [
        (name, list(params)) for name, params in items
    ]


@given(st.text(max_size=60) | st.text(alphabet=' \t,;="\\abc-_19', max_size=40))
def test_parse_arbitrary_text_raises_only_negotiation_error(header):
    try:
        result = parse_extensions(header)
    except NegotiationError:
        return
    assert result and all(isinstance(name, str) for name, _ in result)


# -- DeflateParameters --------------------------------------------------------------------


def params_of(header):
    [(name, params)] = parse_extensions(header)
    assert name == PMD
    return params


@pytest.mark.parametrize("is_offer", [True, False])
def test_from_params_empty_means_defaults(is_offer):
    assert DeflateParameters.from_params([], is_offer=is_offer) == DeflateParameters()


def test_from_params_all_parameters():
    params = params_of(
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
        "server_max_window_bits=9; client_max_window_bits=14"
    )
    for is_offer in (True, False):
        assert DeflateParameters.from_params(params, is_offer=is_offer) == DeflateParameters(
            True, True, 9, 14
        )


@pytest.mark.parametrize("bits", range(8, 16))
@pytest.mark.parametrize("name", ["server_max_window_bits", "client_max_window_bits"])
def test_from_params_accepts_every_window_from_8_to_15(name, bits):
    parsed = DeflateParameters.from_params([(name, str(bits))], is_offer=False)
    assert getattr(parsed, name) == bits


@pytest.mark.parametrize("is_offer", [True, False])
@pytest.mark.parametrize(
    "name",
    [
        "server_no_context_takeover",
        "client_no_context_takeover",
        "server_max_window_bits",
        "client_max_window_bits",
    ],
)
def test_from_params_duplicate_parameter_is_invalid(name, is_offer):
    value = None if "context" in name else "10"
    with pytest.raises(NegotiationError, match=f"duplicate parameter {name}"):
        DeflateParameters.from_params([(name, value), (name, value)], is_offer=is_offer)


def test_from_params_duplicate_with_different_values_is_invalid():
    with pytest.raises(NegotiationError, match="duplicate"):
        DeflateParameters.from_params(
            [("server_max_window_bits", "10"), ("server_max_window_bits", "11")], is_offer=True
        )


@pytest.mark.parametrize(
    "name", ["x", "server_max_window", "Server_No_Context_Takeover", "client_max_window_bits "]
)
@pytest.mark.parametrize("is_offer", [True, False])
def test_from_params_unknown_parameter_is_invalid(name, is_offer):
    with pytest.raises(NegotiationError, match="unknown parameter"):
        DeflateParameters.from_params([(name, None)], is_offer=is_offer)


@pytest.mark.parametrize("value", ["1", "", "true"])
@pytest.mark.parametrize("name", ["server_no_context_takeover", "client_no_context_takeover"])
def test_from_params_no_context_takeover_takes_no_value(name, value):
    with pytest.raises(NegotiationError, match=f"{name} takes no value"):
        DeflateParameters.from_params([(name, value)], is_offer=True)


@pytest.mark.parametrize("is_offer", [True, False])
def test_from_params_server_max_window_bits_requires_a_value(is_offer):
    with pytest.raises(NegotiationError, match="server_max_window_bits requires a value"):
        DeflateParameters.from_params([("server_max_window_bits", None)], is_offer=is_offer)


def test_from_params_valueless_client_max_window_bits_only_in_an_offer():
    offer = DeflateParameters.from_params([("client_max_window_bits", None)], is_offer=True)
    assert offer.client_max_window_bits is True
    with pytest.raises(NegotiationError, match="client_max_window_bits requires a value"):
        DeflateParameters.from_params([("client_max_window_bits", None)], is_offer=False)


@pytest.mark.parametrize("value", BAD_WINDOW_VALUES)
@pytest.mark.parametrize("name", ["server_max_window_bits", "client_max_window_bits"])
@pytest.mark.parametrize("is_offer", [True, False])
def test_from_params_bad_window_values_are_invalid(name, value, is_offer):
    with pytest.raises(NegotiationError, match=re.escape(f"invalid value for {name}: {value!r}")):
        DeflateParameters.from_params([(name, value)], is_offer=is_offer)


def test_from_params_quoted_window_value_is_unquoted_first():
    params = params_of(
        'permessage-deflate; server_max_window_bits="10"; client_max_window_bits="12"'
    )
    assert DeflateParameters.from_params(params, is_offer=False) == DeflateParameters(
        server_max_window_bits=10, client_max_window_bits=12
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"server_max_window_bits": 7},
        {"server_max_window_bits": 16},
        {"server_max_window_bits": True},
        {"server_max_window_bits": "10"},
        {"client_max_window_bits": 16},
        {"client_max_window_bits": False},
        {"client_max_window_bits": 10.0},
    ],
)
def test_deflate_parameters_rejects_bad_windows(kwargs):
    with pytest.raises(ValueError):
        DeflateParameters(**kwargs)


@pytest.mark.parametrize(
    ("parameters", "header"),
    [
        (DeflateParameters(), "permessage-deflate"),
        (
            DeflateParameters(client_max_window_bits=True),
            "permessage-deflate; client_max_window_bits",
        ),
        (
            DeflateParameters(True, True, 10, 12),
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
            "server_max_window_bits=10; client_max_window_bits=12",
        ),
        (
            DeflateParameters(client_max_window_bits=9, client_no_context_takeover=True),
            "permessage-deflate; client_no_context_takeover; client_max_window_bits=9",
        ),
    ],
)
def test_to_header_uses_a_stable_order(parameters, header):
    assert parameters.to_header() == header


deflate_parameters = st.builds(
    DeflateParameters,
    st.booleans(),
    st.booleans(),
    st.none() | st.integers(8, 15),
    st.none() | st.just(True) | st.integers(8, 15),
)


@given(deflate_parameters)
def test_to_header_round_trips_through_parsing(parameters):
    parsed = DeflateParameters.from_params(params_of(parameters.to_header()), is_offer=True)
    assert parsed == parameters


# -- Agreement ----------------------------------------------------------------------------


def test_agreement_defaults_are_unlimited_with_context_takeover():
    assert Agreement() == Agreement(False, False, 15, 15)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"server_max_window_bits": 7},
        {"client_max_window_bits": 16},
        {"server_max_window_bits": None},
        {"client_max_window_bits": True},
    ],
)
def test_agreement_rejects_bad_windows(kwargs):
    with pytest.raises(ValueError):
        Agreement(**kwargs)


# Different values in the two directions, so that a swap is caught.
ASYMMETRIC = Agreement(
    server_no_context_takeover=True,
    client_no_context_takeover=False,
    server_max_window_bits=11,
    client_max_window_bits=13,
)


def test_server_compresses_with_server_parameters():
    compressor = ASYMMETRIC.compressor("server")
    assert (compressor.window_bits, compressor.no_context_takeover) == (11, True)


def test_server_decompresses_with_client_parameters():
    decompressor = ASYMMETRIC.decompressor("server")
    assert (decompressor.window_bits, decompressor.no_context_takeover) == (13, False)


def test_client_compresses_with_client_parameters():
    compressor = ASYMMETRIC.compressor("client")
    assert (compressor.window_bits, compressor.no_context_takeover) == (13, False)


def test_client_decompresses_with_server_parameters():
    decompressor = ASYMMETRIC.decompressor("client")
    assert (decompressor.window_bits, decompressor.no_context_takeover) == (11, True)


def test_mirrored_agreement_mirrors_the_codecs():
    mirrored = Agreement(False, True, 13, 11)
    compressor = mirrored.compressor("client")
    decompressor = mirrored.decompressor("server")
    assert (compressor.window_bits, compressor.no_context_takeover) == (11, True)
    assert (decompressor.window_bits, decompressor.no_context_takeover) == (11, True)


def test_compressor_options_reach_the_codec():
    data = bytes(range(256)) * 64
    stored = Agreement().compressor("server", level=0).compress(data)
    deflated = Agreement().compressor("server", level=9, mem_level=9, strategy=0).compress(data)
    assert len(stored) > len(data) > 10 * len(deflated)


@pytest.mark.parametrize(("sender", "receiver"), [("server", "client"), ("client", "server")])
def test_agreement_codecs_interoperate_across_messages(sender, receiver):
    compressor = ASYMMETRIC.compressor(sender)
    decompressor = ASYMMETRIC.decompressor(receiver)
    for message in [b"Hello", b"Hello", b"", b"x" * 5000, b"Hello"]:
        assert decompressor.decompress(compressor.compress(message)) == message


def test_window_8_agreement_decompresses_but_cannot_compress():
    agreement = Agreement(server_max_window_bits=8, client_max_window_bits=8)
    assert agreement.decompressor("client").window_bits == 8
    assert agreement.decompressor("server").window_bits == 8
    for side in ("server", "client"):
        with pytest.raises(ValueError):
            agreement.compressor(side)


@pytest.mark.parametrize("side", ["Server", "", "both", None, 0])
def test_agreement_rejects_unknown_side(side):
    with pytest.raises(ValueError, match="side"):
        Agreement().compressor(side)
    with pytest.raises(ValueError, match="side"):
        Agreement().decompressor(side)


# -- client_offer -------------------------------------------------------------------------


def test_client_offer_default_supports_client_max_window_bits():
    assert client_offer() == "permessage-deflate; client_max_window_bits"


def test_client_offer_with_every_parameter():
    assert client_offer(
        server_no_context_takeover=True,
        client_no_context_takeover=True,
        server_max_window_bits=8,
        client_max_window_bits=9,
    ) == (
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
        "server_max_window_bits=8; client_max_window_bits=9"
    )


def test_client_offer_without_client_max_window_bits():
    assert client_offer(client_max_window_bits=None) == "permessage-deflate"


@pytest.mark.parametrize("bits", [7, 16, True, "10"])
def test_client_offer_rejects_bad_server_max_window_bits(bits):
    with pytest.raises(ValueError, match="server_max_window_bits"):
        client_offer(server_max_window_bits=bits)


@pytest.mark.parametrize("bits", [16, False, "10", 0])
def test_client_offer_rejects_bad_client_max_window_bits(bits):
    with pytest.raises(ValueError, match="client_max_window_bits"):
        client_offer(client_max_window_bits=bits)


def test_client_offer_refuses_a_window_of_8_it_cannot_compress_with():
    with pytest.raises(ValueError, match="8 is not supported"):
        client_offer(client_max_window_bits=8)


# -- accept_response ----------------------------------------------------------------------


def test_accept_plain_response():
    assert accept_response(PMD, PMD) == Agreement()
    assert accept_response(PMD, client_offer()) == Agreement()


def test_accept_response_offer_as_parameters_or_header():
    offer = DeflateParameters(server_max_window_bits=12, client_max_window_bits=True)
    response = "permessage-deflate; server_max_window_bits=10; client_max_window_bits=11"
    expected = Agreement(server_max_window_bits=10, client_max_window_bits=11)
    assert accept_response(response, offer) == expected
    assert accept_response(response, offer.to_header()) == expected


def test_accept_response_ignores_other_extensions_and_accepts_header_lines():
    assert accept_response(["x-foo; a=1", "permessage-deflate, x-bar"], PMD) == Agreement()


@pytest.mark.parametrize("header", ["x-foo", "permessage-deflate, permessage-deflate", []])
def test_accept_response_needs_exactly_one_permessage_deflate(header):
    with pytest.raises(NegotiationError, match="expected one permessage-deflate"):
        accept_response(header, client_offer())


@pytest.mark.parametrize(
    "response",
    [
        "permessage-deflate; x",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=010",
        "permessage-deflate; client_no_context_takeover=1",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; =",
    ],
)
def test_accept_invalid_response_fails(response):
    with pytest.raises(NegotiationError):
        accept_response(response, client_offer())


def test_accept_response_valueless_client_max_window_bits_fails():
    message = "client_max_window_bits requires a value in a response"
    with pytest.raises(NegotiationError, match=message):
        accept_response("permessage-deflate; client_max_window_bits", client_offer())


def test_accept_response_client_max_window_bits_only_if_offered():
    offer = client_offer(client_max_window_bits=None)
    with pytest.raises(NegotiationError, match="was not offered"):
        accept_response("permessage-deflate; client_max_window_bits=10", offer)


def test_accept_response_client_max_window_bits_not_above_the_offered_value():
    offer = client_offer(client_max_window_bits=10)
    with pytest.raises(NegotiationError, match="exceeds the offered 10"):
        accept_response("permessage-deflate; client_max_window_bits=11", offer)
    assert accept_response("permessage-deflate; client_max_window_bits=9", offer) == Agreement(
        client_max_window_bits=9
    )


def test_accept_response_silent_on_offered_client_window_keeps_it():
    offer = client_offer(client_max_window_bits=10)
    assert accept_response(PMD, offer).client_max_window_bits == 10
    assert accept_response(PMD, client_offer()).client_max_window_bits == 15


def test_accept_response_refuses_client_window_8():
    with pytest.raises(NegotiationError, match="client_max_window_bits=8 is not supported"):
        accept_response("permessage-deflate; client_max_window_bits=8", client_offer())
    # Also when an offer built by hand announced 8 and the server kept it.
    with pytest.raises(NegotiationError, match="client_max_window_bits=8 is not supported"):
        accept_response(PMD, DeflateParameters(client_max_window_bits=8))


def test_accept_response_server_window_8_is_fine_for_decompressing():
    agreement = accept_response("permessage-deflate; server_max_window_bits=8", client_offer())
    assert agreement.server_max_window_bits == 8


def test_accept_response_server_max_window_bits_not_above_the_offered_limit():
    offer = client_offer(server_max_window_bits=10)
    with pytest.raises(NegotiationError, match="server_max_window_bits=11"):
        accept_response("permessage-deflate; server_max_window_bits=11", offer)
    for bits in (8, 9, 10):
        response = f"permessage-deflate; server_max_window_bits={bits}"
        assert accept_response(response, offer).server_max_window_bits == bits


def test_accept_response_must_accept_the_offered_server_limit():
    with pytest.raises(NegotiationError, match="server_max_window_bits"):
        accept_response(PMD, client_offer(server_max_window_bits=10))


def test_accept_response_server_may_limit_its_window_unasked():
    response = "permessage-deflate; server_max_window_bits=12"
    assert accept_response(response, client_offer()).server_max_window_bits == 12


def test_accept_response_must_keep_offered_server_no_context_takeover():
    offer = client_offer(server_no_context_takeover=True)
    with pytest.raises(NegotiationError, match="server_no_context_takeover"):
        accept_response(PMD, offer)
    response = "permessage-deflate; server_no_context_takeover"
    assert accept_response(response, offer) == Agreement(server_no_context_takeover=True)


def test_accept_response_server_no_context_takeover_unasked():
    response = "permessage-deflate; server_no_context_takeover"
    assert accept_response(response, client_offer()).server_no_context_takeover is True


def test_accept_response_client_no_context_takeover_offered_or_requested():
    offered = client_offer(client_no_context_takeover=True)
    assert accept_response(PMD, offered).client_no_context_takeover is True
    requested = "permessage-deflate; client_no_context_takeover"
    assert accept_response(requested, client_offer()).client_no_context_takeover is True
    assert accept_response(PMD, client_offer()).client_no_context_takeover is False


def test_accept_response_to_one_of_several_offers():
    offers = "permessage-deflate; server_max_window_bits=10, permessage-deflate"
    assert accept_response(PMD, offers) == Agreement()
    response = "permessage-deflate; server_max_window_bits=9"
    assert accept_response(response, offers).server_max_window_bits == 9
    with pytest.raises(NegotiationError, match="none of the offers"):
        accept_response("permessage-deflate; client_max_window_bits=9", offers)


def test_accept_response_offer_without_permessage_deflate_is_a_usage_error():
    with pytest.raises(ValueError, match="contains no permessage-deflate"):
        accept_response(PMD, "x-foo")


# Headers for the property tests: any text, text of header characters, and sequences of
# the words of a permessage-deflate element (often valid, often one step from it).
near_valid_headers = st.lists(st.sampled_from([
    "permessage-deflate", "server_no_context_takeover", "client_no_context_takeover",
    "server_max_window_bits", "client_max_window_bits", "=", "8", "9", "10", "15", "16", "08",
    ";", ",", " ", '"', "x",
]), max_size=12).map("".join)
parameters = st.lists(st.tuples(
    st.sampled_from(["server_no_context_takeover", "client_no_context_takeover",
                     "server_max_window_bits", "client_max_window_bits", "x_unknown"]),
    st.sampled_from([None, "8", "9", "10", "15", "16", "08", '"10"'])), max_size=3)
elements = st.tuples(st.sampled_from([PMD, PMD, PMD, "x-other"]), parameters).map(
    lambda e: "; ".join([e[0]] + [n if v is None else f"{n}={v}" for n, v in e[1]]))
element_lists = st.lists(elements, min_size=1, max_size=3).map(", ".join)
arbitrary_headers = st.one_of(st.text(max_size=80),
                              st.text(alphabet=' \t,;="\\abc-_189', max_size=50),
                              near_valid_headers, element_lists, elements, elements)

FLAGS = ("server_no_context_takeover", "client_no_context_takeover")
WINDOW_BITS = {str(bits): bits for bits in range(8, 16)}  # RFC 7692: no leading zeros


def rfc_parameters(params: list, *, is_offer: bool) -> dict | None:
    """The parameters of one permessage-deflate element by RFC 7692 §7.1, written out
    here independently of the module: a dict, or None if the element is invalid."""
    found: dict = {}
    for name, value in params:
        if name in found:
            return None  # a duplicate
        if name in FLAGS and value is None:
            found[name] = True
        elif name in ("server_max_window_bits", "client_max_window_bits") and value in WINDOW_BITS:
            found[name] = WINDOW_BITS[value]
        elif name == "client_max_window_bits" and value is None and is_offer:
            found[name] = True
        else:
            return None  # unknown, a value on a flag, a missing or bad value
    return found


def pmd_elements(header: str) -> list | None:
    """The parameter lists of the header's permessage-deflate elements (None: bad syntax)."""
    try:
        return [params for name, params in parse_extensions(header) if name == PMD]
    except NegotiationError:
        return None


@settings(max_examples=600)
@given(arbitrary_headers)
@example("permessage-deflate; client_max_window_bits=8")
@example("permessage-deflate; server_max_window_bits=10; server_max_window_bits=10")
@example("permessage-deflate; server_no_context_takeover, permessage-deflate")
@example('x-foo, permessage-deflate; client_no_context_takeover; server_max_window_bits="9"')
def test_accept_arbitrary_response_as_the_rfc_says(header):
    """Any response to the default offer ("client_max_window_bits", no limit asked):
    accepted, with the agreement the RFC gives, exactly when it is one valid element
    that does not limit the client to 8; otherwise NegotiationError."""
    elements = pmd_elements(header)
    response = None
    if elements is not None and len(elements) == 1:
        response = rfc_parameters(elements[0], is_offer=False)
    if response is None or response.get("client_max_window_bits") == 8:
        with pytest.raises(NegotiationError):
            accept_response(header, client_offer())
        return
    assert accept_response(header, client_offer()) == Agreement(
        server_no_context_takeover="server_no_context_takeover" in response,
        client_no_context_takeover="client_no_context_takeover" in response,
        server_max_window_bits=response.get("server_max_window_bits", 15),
        client_max_window_bits=response.get("client_max_window_bits", 15),
    )


# -- server_select ------------------------------------------------------------------------


def test_server_select_plain_offer():
    assert server_select(PMD) == (PMD, Agreement())


@pytest.mark.parametrize("header", ["x-foo", "x-foo; a=1, x-bar", ["x-foo"], []])
def test_server_select_without_offer_returns_none(header):
    assert server_select(header) is None


def test_server_select_ignores_other_extensions_and_accepts_header_lines():
    assert server_select(["x-foo", "x-bar, permessage-deflate"]) == (PMD, Agreement())


def test_server_select_malformed_header_raises():
    with pytest.raises(NegotiationError):
        server_select("permessage-deflate; a=")


@pytest.mark.parametrize(
    "invalid",
    [
        "permessage-deflate; unknown",
        "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=010",
        "permessage-deflate; client_max_window_bits=16",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_no_context_takeover=1",
    ],
)
def test_server_select_declines_invalid_offer_and_falls_back_to_the_next(invalid):
    assert server_select(invalid) is None
    header = f"{invalid}, permessage-deflate; client_no_context_takeover"
    assert server_select(header) == (PMD, Agreement(client_no_context_takeover=True))


def test_server_select_picks_the_first_acceptable_offer():
    header = "permessage-deflate; server_max_window_bits=10, permessage-deflate"
    response, agreement = server_select(header)
    assert response == "permessage-deflate; server_max_window_bits=10"
    assert agreement == Agreement(server_max_window_bits=10)


def test_server_select_honours_offered_server_no_context_takeover():
    header = "permessage-deflate; server_no_context_takeover"
    assert server_select(header) == (header, Agreement(server_no_context_takeover=True))


def test_server_select_configured_server_no_context_takeover():
    response, agreement = server_select(PMD, server_no_context_takeover=True)
    assert response == "permessage-deflate; server_no_context_takeover"
    assert agreement == Agreement(server_no_context_takeover=True)


def test_server_select_configured_client_no_context_takeover_is_always_sent():
    response, agreement = server_select(PMD, client_no_context_takeover=True)
    assert response == "permessage-deflate; client_no_context_takeover"
    assert agreement == Agreement(client_no_context_takeover=True)


def test_server_select_records_offered_client_no_context_takeover():
    response, agreement = server_select("permessage-deflate; client_no_context_takeover")
    assert response == PMD
    assert agreement.client_no_context_takeover is True


@pytest.mark.parametrize(
    ("offered", "configured", "agreed"),
    [(10, None, 10), (10, 12, 10), (12, 10, 10), (15, 9, 9), (None, 11, 11), (9, 9, 9)],
)
def test_server_select_server_max_window_bits(offered, configured, agreed):
    header = PMD if offered is None else f"permessage-deflate; server_max_window_bits={offered}"
    response, agreement = server_select(header, server_max_window_bits=configured)
    assert response == f"permessage-deflate; server_max_window_bits={agreed}"
    assert agreement == Agreement(server_max_window_bits=agreed)


def test_server_select_unlimited_server_window_is_not_sent():
    assert server_select(PMD) == (PMD, Agreement(server_max_window_bits=15))


def test_server_select_declines_server_window_8_and_falls_back():
    offer8 = "permessage-deflate; server_max_window_bits=8"
    assert server_select(offer8) is None
    assert server_select(offer8, server_max_window_bits=9) is None
    response, agreement = server_select(f"{offer8}, permessage-deflate; server_max_window_bits=9")
    assert response == "permessage-deflate; server_max_window_bits=9"
    assert agreement.server_max_window_bits == 9


@pytest.mark.parametrize(
    ("offered", "configured", "sent"),
    [
        ("", None, None),
        ("", 10, None),
        ("; client_max_window_bits", None, None),
        ("; client_max_window_bits", 10, 10),
        ("; client_max_window_bits", 8, 8),
        ("; client_max_window_bits=12", None, 12),
        ("; client_max_window_bits=12", 10, 10),
        ("; client_max_window_bits=9", 10, 9),
        ("; client_max_window_bits=8", None, 8),
    ],
)
def test_server_select_client_max_window_bits(offered, configured, sent):
    response, agreement = server_select(PMD + offered, client_max_window_bits=configured)
    expected = PMD if sent is None else f"permessage-deflate; client_max_window_bits={sent}"
    assert response == expected
    assert agreement == Agreement(client_max_window_bits=sent or 15)


def test_server_select_require_client_max_window_bits_declines_and_falls_back():
    options = {"client_max_window_bits": 10, "require_client_max_window_bits": True}
    assert server_select(PMD, **options) is None
    response, agreement = server_select(
        "permessage-deflate, permessage-deflate; client_max_window_bits", **options
    )
    assert response == "permessage-deflate; client_max_window_bits=10"
    assert agreement.client_max_window_bits == 10


def test_server_select_all_parameters_together():
    header = (
        "permessage-deflate; client_no_context_takeover; server_max_window_bits=12; "
        "client_max_window_bits=13"
    )
    response, agreement = server_select(
        header,
        server_no_context_takeover=True,
        server_max_window_bits=11,
        client_max_window_bits=14,
    )
    assert response == (
        "permessage-deflate; server_no_context_takeover; server_max_window_bits=11; "
        "client_max_window_bits=13"
    )
    assert agreement == Agreement(True, True, 11, 13)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"server_max_window_bits": 8},
        {"server_max_window_bits": 16},
        {"server_max_window_bits": True},
        {"client_max_window_bits": 7},
        {"client_max_window_bits": 16},
        {"client_max_window_bits": True},
        {"require_client_max_window_bits": True},
    ],
)
def test_server_select_rejects_bad_configuration(kwargs):
    with pytest.raises(ValueError):
        server_select(PMD, **kwargs)


@settings(max_examples=600)
@given(arbitrary_headers)
@example("permessage-deflate; server_max_window_bits=8, "
         "permessage-deflate; client_max_window_bits=9")
@example("permessage-deflate; client_max_window_bits; client_max_window_bits, permessage-deflate")
@example("permessage-deflate; server_max_window_bits=14; client_max_window_bits=9")
@example("x-foo; permessage-deflate")
def test_server_select_arbitrary_header_as_the_rfc_says(header):
    """Any offer header, for a server limiting its window to 12 and the client's to 10:
    NegotiationError only for bad syntax; otherwise the first valid offer that does not
    limit the server to 8 is answered, with the response and agreement the RFC gives."""
    elements = pmd_elements(header)
    if elements is None:
        with pytest.raises(NegotiationError):
            server_select(header, server_max_window_bits=12, client_max_window_bits=10)
        return
    selected = server_select(header, server_max_window_bits=12, client_max_window_bits=10)
    offers = [o for o in (rfc_parameters(e, is_offer=True) for e in elements)
              if o is not None and o.get("server_max_window_bits") != 8]
    if not offers:
        assert selected is None
        return
    offer = offers[0]
    client_bits = offer.get("client_max_window_bits")
    if client_bits is not None:
        client_bits = 10 if client_bits is True else min(client_bits, 10)
    expected = Agreement(
        server_no_context_takeover="server_no_context_takeover" in offer,
        client_no_context_takeover="client_no_context_takeover" in offer,
        server_max_window_bits=min(offer.get("server_max_window_bits", 15), 12),
        client_max_window_bits=client_bits or 15,
    )
    assert selected is not None
    response, agreement = selected
    assert agreement == expected
    assert rfc_parameters(parse_extensions(response)[0][1], is_offer=False) == {
        **({"server_no_context_takeover": True} if expected.server_no_context_takeover else {}),
        "server_max_window_bits": expected.server_max_window_bits,
        **({"client_max_window_bits": client_bits} if client_bits is not None else {}),
    }


# -- Both sides together ------------------------------------------------------------------

client_configs = st.fixed_dictionaries(
    {
        "server_no_context_takeover": st.booleans(),
        "client_no_context_takeover": st.booleans(),
        "server_max_window_bits": st.none() | st.integers(8, 15),
        "client_max_window_bits": st.none() | st.just(True) | st.integers(9, 15),
    }
)
server_configs = st.fixed_dictionaries(
    {
        "server_no_context_takeover": st.booleans(),
        "client_no_context_takeover": st.booleans(),
        "server_max_window_bits": st.none() | st.integers(9, 15),
        "client_max_window_bits": st.none() | st.integers(8, 15),
    }
)


@given(client_configs, server_configs)
def test_client_accepts_what_the_server_selects_and_both_agree(client, server):
    offer = client_offer(**client)
    selected = server_select(offer, **server)
    if selected is None:  # only an offered server window of 8 is declined here
        assert client["server_max_window_bits"] == 8
        return
    response, server_agreement = selected
    if server["client_max_window_bits"] == 8 and client["client_max_window_bits"] is not None:
        # A server may limit the client to 8; a zlib-based client must refuse that.
        with pytest.raises(NegotiationError, match="client_max_window_bits=8"):
            accept_response(response, offer)
        return
    assert accept_response(response, offer) == server_agreement
    assert server_agreement.server_max_window_bits >= 9
    assert server_agreement.client_max_window_bits >= 9
