"""Django Channels behind daphne (issue 23): stock daphne negotiates no compression; the
opt-in (``enable(libraries=["daphne"])``, ``FASTDEFLATE_ENABLE=daphne``, ``python -m
fastdeflate run --libraries daphne``) makes it accept permessage-deflate on autobahn's
rules (:func:`fastdeflate.integrations.autobahn.accept_offers`), with fastdeflate's codec.

A real Channels site (tests/channels_site: Django settings, an echo consumer and a host
for tests/peers/peer.js) is served by a real daphne in a subprocess on 127.0.0.1: with
``Server(...)`` in code (both codec implementations), the ``daphne`` command and Django's
``runserver``. Clients: a stock websockets client and headless Chromium. Proof that
fastdeflate's codec ran comes from the serving process itself: its ``status()`` (the
implementation, daphne's and autobahn's states, and the traffic counters, which only
fastdeflate's codec objects move).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

import fastdeflate
from fastdeflate import integrations
from fastdeflate._autoenable import libraries_from
from fastdeflate._status import STARTUP_HOOK, startup_hook
from fastdeflate.negotiation import accept_response, parse_extensions

from _skipcheck import PEER_MISSING, peer_installed
from _subprocess import PACKAGE_PARENT, run_python

from ._support import make_binary, make_text, skip_module_without_autobahn

skip_module_without_autobahn()
for _peer in ("daphne", "channels", "django"):  # installed with autobahn: fastdeflate[all]
    if not peer_installed(_peer):
        pytest.skip(PEER_MISSING.format(_peer), allow_module_level=True)

from websockets.extensions.permessage_deflate import (  # noqa: E402
    ClientPerMessageDeflateFactory,
)
from websockets.frames import Opcode  # noqa: E402
from websockets.sync.client import ClientConnection, connect  # noqa: E402

from .test_foreign_peers import chromium_clients, needs_chromium, start, stop  # noqa: E402

pytestmark = pytest.mark.timeout(120)

TESTS = Path(__file__).resolve().parent.parent
DEADLINE = 60.0  # seconds for daphne to come up
#: Messages a client sends to the echo consumer: varied JSON, ~300 KB of JSON, binary.
MESSAGES: list[str | bytes] = [
    *(json.dumps({"i": i, "text": make_text(40 * i + 5, i)}) for i in range(12)),
    json.dumps({"rows": [make_text(3000, seed) for seed in range(100)]}),  # ~300 KB
    make_binary(50_000, 1),  # (no empty message: daphne sends none, stock or not)
]
#: Offers of a stock websockets client (its factory's arguments), each parameter alone
#: and all of them at once.
OFFERS: dict[str, dict[str, Any]] = {
    "default": {},
    "server_max_window_bits": {"server_max_window_bits": 10},
    "client_max_window_bits": {"client_max_window_bits": 11},
    "server_no_context_takeover": {"server_no_context_takeover": True},
    "client_no_context_takeover": {"client_no_context_takeover": True},
    "all": {"server_max_window_bits": 9, "client_max_window_bits": 12,
            "server_no_context_takeover": True, "client_no_context_takeover": True},
}


def autobahn_answer(offer: str) -> str:
    """What :func:`fastdeflate.integrations.autobahn.accept_offers` answers ``offer``
    with, as autobahn itself parses and formats it."""
    from autobahn.websocket.compress_deflate import PerMessageDeflateOffer

    from fastdeflate.integrations.autobahn import accept_offers

    offers = [PerMessageDeflateOffer.parse({name: [True if value is None else value]
                                            for name, value in params})
              for _, params in parse_extensions(offer)]
    accept = accept_offers(offers)
    assert accept is not None
    return accept.get_extension_string()


# ------------------------------------------------------------------------------ daphne


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def daphne_command(launcher: str, port: int, enable: str) -> tuple[list[str], dict[str, str]]:
    """(argv, extra environment) of daphne serving the site on ``port``. ``server``:
    ``Server(...)`` in code after ``fastdeflate.enable`` (``enable``: see
    channels_site/serve.py); ``command``: the ``daphne`` command under ``python -m
    fastdeflate run --libraries daphne``; ``runserver``: Django's, with daphne in
    INSTALLED_APPS, under ``FASTDEFLATE_ENABLE=daphne``."""
    python = sys.executable
    if launcher == "server":
        return [python, "-m", "channels_site.serve", str(port), enable], {}
    if launcher == "command":
        return [python, "-m", "fastdeflate", "run", "--libraries", "daphne", "--", python,
                "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                "channels_site.asgi:application"], {}
    assert launcher == "runserver"
    return ([python, "-m", "django", "runserver", "--noreload", f"127.0.0.1:{port}"],
            {"DJANGO_SETTINGS_MODULE": "channels_site.settings",
             "FASTDEFLATE_ENABLE": "daphne"})


class Daphne:
    """A daphne subprocess serving the test site; :meth:`stop` ends it."""

    def __init__(self, launcher: str, workdir: Path, *, enable: str = "daphne",
                 implementation: str = "cython") -> None:
        self.port = free_port()
        self.reports = workdir / "reports"
        self.reports.mkdir(parents=True, exist_ok=True)
        argv, extra = daphne_command(launcher, self.port, enable)
        env = {k: v for k, v in os.environ.items()
               if k not in ("FASTDEFLATE_ENABLE", "FASTDEFLATE_PURE")}
        env.update(extra, CHANNELS_REPORTS=str(self.reports), PYTHONPATH=os.pathsep.join(
            filter(None, [str(TESTS), PACKAGE_PARENT, os.environ.get("PYTHONPATH")])))
        if implementation == "python":
            env["FASTDEFLATE_PURE"] = "1"
        self.proc = subprocess.Popen(argv, cwd=workdir, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     start_new_session=os.name == "posix")
        deadline = time.monotonic() + DEADLINE
        while not self._listening():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{' '.join(argv)}: daphne did not come up:\n{self.stop()}")
            time.sleep(0.05)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def connect(self, path: str = "/echo", **kwargs: Any) -> ClientConnection:
        return connect(f"ws://127.0.0.1:{self.port}{path}", open_timeout=20, **kwargs)

    def stop(self) -> str:
        """End daphne (its process group); its output."""
        if self.proc.poll() is None:
            if os.name == "posix":
                os.killpg(self.proc.pid, signal.SIGTERM)
            else:
                self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        return self.proc.stdout.read() if self.proc.stdout else ""


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Daphne]]:
    servers: list[Daphne] = []

    def start_daphne(launcher: str, **kwargs: Any) -> Daphne:
        servers.append(Daphne(launcher, tmp_path / str(len(servers)), **kwargs))
        return servers[-1]

    yield start_daphne
    for server in servers:
        server.stop()


@pytest.fixture(scope="module", params=["cython", "python"])
def opted_in(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daphne]:
    """daphne opted in by ``enable(libraries=["daphne"])`` in code, on each codec
    implementation (shared by the tests that only connect to it)."""
    server = Daphne("server", tmp_path_factory.mktemp(f"daphne-{request.param}"),
                    implementation=request.param)
    server.implementation = request.param  # type: ignore[attr-defined]
    yield server
    server.stop()


def facts(ws: ClientConnection) -> dict[str, Any]:
    """What the serving process runs (channels_site.consumers.facts)."""
    ws.send("__facts__")
    return json.loads(ws.recv(timeout=20))


def echo_all(ws: ClientConnection, messages: list[str | bytes]) -> None:
    """Each message comes back byte-exact; the last text one is also sent fragmented."""
    for message in messages:
        ws.send(message)
        assert ws.recv(timeout=20) == message
    text = MESSAGES[12]
    ws.send([text[:1000], text[1000:150_000], text[150_000:]])
    assert ws.recv(timeout=20) == text


def answer_of(ws: ClientConnection) -> Optional[str]:
    return ws.response.headers.get("Sec-WebSocket-Extensions")


# ------------------------------------------------------------------------------ the tests


def test_opted_in_daphne_compresses_with_fastdeflate(opted_in: Daphne) -> None:
    """A stock websockets client's default offer is accepted as autobahn's rules say;
    every message round-trips byte-exact, compressed both ways by fastdeflate's codec in
    daphne's process (its counters moved: autobahn's own codec moves none)."""
    with opted_in.connect(compression="deflate") as ws:
        before = facts(ws)
        offer = ws.request.headers["Sec-WebSocket-Extensions"]
        assert offer == "permessage-deflate; client_max_window_bits"
        assert answer_of(ws) == autobahn_answer(offer) == "permessage-deflate"
        echo_all(ws, MESSAGES)
        after = facts(ws)
    assert after["implementation"] == opted_in.implementation  # type: ignore[attr-defined]
    for library in ("autobahn", "daphne"):
        assert after["libraries"][library]["state"] == "enabled", after
    sent = after["traffic"]["sent"]["messages"] - before["traffic"]["sent"]["messages"]
    received = (after["traffic"]["received"]["messages"]
                - before["traffic"]["received"]["messages"])
    # compress what pays (autobahn's sendMessage, which daphne uses as it is): what the
    # compressor passes over goes out as it is (the messages that do not pay are
    # test_opted_in_daphne_sends_what_does_not_pay_uncompressed's; these all compress)
    uncompressed = sum(counts["messages"] - before["sent_uncompressed"].get(
        reason, {"messages": 0})["messages"]
        for reason, counts in after["sent_uncompressed"].items())
    # the echoes, the fragmented one and the facts
    assert sent + uncompressed == len(MESSAGES) + 2
    assert received >= len(MESSAGES) + 2


@pytest.mark.parametrize("offer", [{}, {"server_no_context_takeover": True,
                                    "server_max_window_bits": 10}], ids=["default", "nct-w10"])
def test_opted_in_daphne_sends_what_does_not_pay_uncompressed(opted_in: Daphne,
                                                              offer: dict[str, Any]) -> None:
    """daphne sends through autobahn's sendMessage, so it follows along unchanged: its
    echoes of random and PNG-like messages come back uncompressed (RSV1 clear on the
    wire, as the stock websockets client's extension sees each frame), chat compressed,
    every one exact; daphne's process counts them in status()["sent_uncompressed"]."""
    rng = random.Random(31)
    chat = [json.dumps({"i": i, "rows": [make_text(300, i * 10 + j) for j in range(5)]})
            for i in range(6)]
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + rng.randbytes(30_000)
    stream: list[str | bytes] = [chat[0], rng.randbytes(20_000), chat[1], png, chat[2],
                                 rng.randbytes(5_000), chat[3], png[:5000], chat[4]]
    factory = ClientPerMessageDeflateFactory(**offer)
    with opted_in.connect(compression=None, extensions=[factory]) as ws:
        before = facts(ws)
        (extension,) = ws.protocol.extensions
        rsv1: list[bool] = []
        decode = extension.decode

        def recording(frame: Any, **kwargs: Any) -> Any:  # what the wire said, then stock
            if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                rsv1.append(frame.rsv1)
            return decode(frame, **kwargs)

        extension.decode = recording  # type: ignore[method-assign]
        for message in stream:
            ws.send(message)
            assert ws.recv(timeout=20) == message
        assert rsv1 == [isinstance(message, str) for message in stream]
        after = facts(ws)
    grown = {reason: counts["messages"] - before["sent_uncompressed"].get(
        reason, {"messages": 0})["messages"]
        for reason, counts in after["sent_uncompressed"].items()}
    assert grown.pop("compressed format") == 2
    assert sum(grown.values()) == 2  # the random ones: by their sample, or grown


@pytest.mark.parametrize("offer", OFFERS.values(), ids=OFFERS.keys())
def test_parameters_are_answered_as_autobahns_accept_does(opted_in: Daphne,
                                                          offer: dict[str, Any]) -> None:
    """Each parameter a client may offer: daphne answers what ``accept_offers`` answers
    (autobahn's parsing and formatting), a response valid for the offer (RFC 7692, as
    fastdeflate.negotiation checks it and the websockets client accepted it); messages
    round-trip under the agreed windows and context takeover."""
    factory = ClientPerMessageDeflateFactory(**offer)
    with opted_in.connect(compression=None, extensions=[factory]) as ws:
        sent = ws.request.headers["Sec-WebSocket-Extensions"]
        answer = answer_of(ws)
        assert answer is not None and answer == autobahn_answer(sent), (sent, answer)
        accept_response(answer, sent)
        for name in ("server_max_window_bits", "server_no_context_takeover"):
            assert (name in answer) == (name in offer)  # the client's requests honoured
        echo_all(ws, MESSAGES[:4] + MESSAGES[12:14] + MESSAGES[:4])


def test_stock_daphne_compresses_nothing_and_status_says_why(serve: Callable[..., Daphne],
                                                              ) -> None:
    """``fastdeflate.enable()`` without the opt-in: autobahn is enabled, daphne still
    declines every offer (stock behaviour), and status() says daphne is stock and why.
    Messages still round-trip; fastdeflate's codec never ran."""
    server = serve("server", enable="default")
    with server.connect(compression="deflate") as ws:
        assert "permessage-deflate" in ws.request.headers["Sec-WebSocket-Extensions"]
        assert answer_of(ws) is None
        echo_all(ws, MESSAGES[:3] + MESSAGES[12:13])
        info = facts(ws)
    assert info["libraries"]["autobahn"]["state"] == "enabled"
    daphne = info["libraries"]["daphne"]
    assert daphne["state"] == "stock"
    assert "does not negotiate permessage-deflate" in daphne["why"]
    assert "'daphne'" in daphne["why"] and "FASTDEFLATE_ENABLE=daphne" in daphne["why"]
    assert info["traffic"]["sent"]["messages"] == info["traffic"]["received"]["messages"] == 0


@pytest.mark.parametrize("launcher", ["command", "runserver"])
def test_the_daphne_command_and_runserver_opt_in_from_the_environment(
        serve: Callable[..., Daphne], launcher: str) -> None:
    """``python -m fastdeflate run --libraries daphne -- daphne ...`` and Django's
    ``runserver`` under ``FASTDEFLATE_ENABLE=daphne``: compression is negotiated and
    fastdeflate's codec runs in the serving process."""
    if startup_hook() is None:
        pytest.skip(f"no {STARTUP_HOOK} in site-packages (an editable install): "
                    "FASTDEFLATE_ENABLE is not read at start-up here")
    server = serve(launcher)
    with server.connect(compression="deflate") as ws:
        assert answer_of(ws) == "permessage-deflate"
        echo_all(ws, MESSAGES[:3] + MESSAGES[12:13])
        info = facts(ws)
    assert info["libraries"]["daphne"]["state"] == "enabled"
    assert info["implementation"] == "cython"
    assert info["traffic"]["sent"]["messages"] >= 5
    assert info["traffic"]["received"]["messages"] >= 5


@needs_chromium
def test_chromium_clients(opted_in: Daphne, tmp_path: Path) -> None:
    """Two WebSockets of a headless Chromium page served by the Channels site: each gets
    JSON, binary and ~300 KB messages compressed by daphne's fastdeflate codec, and
    reports what it received (compressed by Chromium, decoded by fastdeflate)."""
    clients = chromium_clients(2)
    reports = {name: opted_in.reports / f"{name}.json" for name in clients.names}

    async def run() -> None:
        process = await start(clients, opted_in.port, tmp_path)
        try:
            while not all(path.exists() for path in reports.values()):
                assert process.returncode is None, "Chromium exited"
                await asyncio.sleep(0.05)
        finally:
            await stop(process)

    try:
        asyncio.run(asyncio.wait_for(run(), 90))
    except BaseException:
        print((tmp_path / "stderr.txt").read_text(errors="replace")[-3000:])
        raise
    for name, path in reports.items():
        result = json.loads(path.read_text())
        path.unlink()  # (the server is shared with the other implementation's run)
        assert result["offer"] == clients.offer
        assert result["report"]["name"] == name
        assert result["report"]["extensions"] == autobahn_answer(clients.offer)
        assert result["report"]["messages"] == result["sent"]
        assert len(result["sent"]) == 14 and max(size for _, size, _ in result["sent"]) > 300_000
        info = result["facts"]
        assert info["implementation"] == opted_in.implementation  # type: ignore[attr-defined]
        assert info["libraries"]["daphne"]["state"] == "enabled"
        assert info["traffic"]["sent"]["messages"] >= 14
        assert info["traffic"]["received"]["messages"] >= 1  # the report


# ------------------------------------------------------------------- opting in, status


def test_daphne_is_opt_in_and_status_says_so() -> None:
    """enable() and FASTDEFLATE_ENABLE=1 leave daphne out; naming it opts in (pending
    here: this process never imports daphne); until then status() says why it is stock."""
    stock = integrations.states()["daphne"]
    assert stock[0] == "stock" and "opt in" in stock[1]
    assert "daphne" not in libraries_from("1")
    assert libraries_from("websockets, daphne") == ["websockets", "daphne"]
    assert "daphne" in integrations.check_supported(["daphne"])
    try:
        assert "daphne" not in fastdeflate.enable(fallback=True)
        assert fastdeflate.status()["libraries"]["daphne"]["state"] == "stock"
        fastdeflate.disable()
        assert "daphne" in fastdeflate.enable(fallback=True, libraries=["daphne"])
        assert os.environ["FASTDEFLATE_ENABLE"] == "daphne"  # for the children
        assert fastdeflate.status()["libraries"]["daphne"] == {
            "version": integrations._version("daphne"), "state": "pending",
            "why": "enabled; patched when the application imports daphne.ws_protocol, before "
                   "its first connection (a bare import daphne may not load it; its server "
                   "and client modules do)",
            "connections": None}  # (its connections are autobahn's, counted there)
    finally:
        fastdeflate.disable()
    assert integrations.states()["daphne"] == stock


PATCH_AND_UNDO = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s %(message)s")
import daphne.server  # imported before enable(): patched at once
from daphne.ws_protocol import WebSocketFactory
import fastdeflate
from fastdeflate.integrations import autobahn, states

def accept():
    return WebSocketFactory(None, server="daphne").perMessageCompressionAccept

stock = accept()
print(fastdeflate.enable(fallback=True, libraries=["daphne"]))
print(accept() is autobahn.accept_offers, states()["daphne"], states()["autobahn"])
fastdeflate.disable()
print(accept() is autobahn.accept_offers, states()["daphne"][0], states()["autobahn"][0])
print(type(accept()) is type(stock) and accept()([]) is None)
"""


def test_enable_patches_an_imported_daphne_and_disable_undoes_it() -> None:
    """In a process that imported daphne first: enable(libraries=["daphne"]) makes new
    factories accept with accept_offers (autobahn's codec adapter enabled too), logs it
    on the ``fastdeflate`` logger; disable() gives stock factories back."""
    from importlib.metadata import version

    done = run_python(PATCH_AND_UNDO, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"fastdeflate fastdeflate enabled for daphne {version('daphne')}" in lines
    assert [line for line in lines if not line.startswith("fastdeflate ")] == [
        "['autobahn', 'daphne']",
        "True ('enabled', None) ('enabled', None)",
        "False stock stock",
        "True",
    ]
