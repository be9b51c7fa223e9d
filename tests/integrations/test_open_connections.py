"""`disable()` changes new connections only: a connection opened while enabled keeps
fastdeflate's codec until it closes, and ``status()["libraries"][name]["connections"]``
counts it (an INFO line on the ``fastdeflate`` logger says so when disable() runs).

Real servers and clients on 127.0.0.1 (tests/integrations/test_matrix.py's): each
library's server with fastdeflate, its client another library left stock, so that the
connection has one end on fastdeflate in this process.
"""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

import fastdeflate
from fastdeflate import integrations

from .test_matrix import CLIENTS, LIBRARIES, SERVERS, STEP, codec_types, make_binary, make_text

pytestmark = pytest.mark.timeout(120)


def connections(library: str) -> int:
    gc.collect()  # (a connection closed may wait in a reference cycle)
    count = fastdeflate.status()["libraries"][library]["connections"]
    assert isinstance(count, int)
    return count


async def session(library: str, client_name: str, caplog: pytest.LogCaptureFixture) -> None:
    before = connections(library)
    assert fastdeflate.enable(libraries=[library], children=False,
                              fallback=fastdeflate.IMPLEMENTATION != "cython") == [library]
    try:
        async with SERVERS[library]() as server:
            async with CLIENTS[client_name](server.port) as client:
                message = make_text(4000, 1)
                await asyncio.wait_for(client.send(message), STEP)
                assert await asyncio.wait_for(client.recv(), STEP) == message
                assert connections(library) == before + 1
                with caplog.at_level(logging.INFO, logger="fastdeflate"):
                    assert fastdeflate.disable() == [library]
                facts = fastdeflate.status()["libraries"][library]
                assert facts["state"] == "stock", facts
                assert connections(library) == before + 1  # still on fastdeflate
                logged = [r.getMessage() for r in caplog.records if r.name == "fastdeflate"]
                assert any(m.startswith(f"fastdeflate disabled for {library}:")
                           and f"{before + 1} open connection(s) keep fastdeflate's" in m
                           for m in logged), logged
                for message in (make_binary(5000, 2), make_text(3000, 3)):  # still works
                    await asyncio.wait_for(client.send(message), STEP)
                    assert await asyncio.wait_for(client.recv(), STEP) == message
                both = {fastdeflate.Compressor, fastdeflate.Decompressor}
                assert codec_types(server.codec_holders(), fastdeflate) == both
                assert await asyncio.wait_for(client.close(), STEP) == 1000
    finally:
        fastdeflate.disable()
    del server, client  # (the test's wrappers keep their connection objects)
    await asyncio.sleep(0.1)  # (the server's side of the close)
    assert connections(library) == before


@pytest.mark.parametrize("library", LIBRARIES)
def test_disable_leaves_open_connections_on_fastdeflate_and_counts_them(
        library: str, caplog: pytest.LogCaptureFixture) -> None:
    assert integrations.enabled() == []
    client = "websockets" if library != "websockets" else "aiohttp"
    asyncio.run(asyncio.wait_for(session(library, client, caplog), 60))


def test_daphne_has_no_count_of_its_own() -> None:
    """daphne's connections are autobahn's: counted there."""
    assert fastdeflate.status()["libraries"]["daphne"]["connections"] is None
