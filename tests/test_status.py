"""fastdeflate.status()'s traffic counters: messages and bytes per direction and the
compress-once shares, counted by both implementations, through the codec and through a
real websockets server and client."""

from __future__ import annotations

import asyncio
import gc
import json
import zlib

import pytest

import fastdeflate

TAIL = b"\x00\x00\xff\xff"
SEND_KEY = ("deflate", 3, 11, 4, 0)  # a parameter set no other test uses
RECEIVE_KEY = ("inflate", 11)


def traffic(impl, key: tuple) -> tuple[int, int, int, int]:
    """The counters of ``key``'s parameter set (the fallback counts per direction only:
    within one test, only that test's objects add to them)."""
    if impl.__name__.endswith("_pure"):
        key = key[:1]
    return impl._traffic().get(key, (0, 0, 0, 0))


def delta(after: tuple, before: tuple) -> tuple:
    return tuple(a - b for a, b in zip(after, before))


def test_whole_messages_and_fragments_are_counted(impl):
    before = traffic(impl, SEND_KEY), traffic(impl, RECEIVE_KEY)
    c = impl.Compressor(3, 11, 4)
    d = impl.Decompressor(11)
    stock = zlib.decompressobj(-11)
    sent_in = sent_out = received_in = received_out = 0
    for i in range(5):
        data = json.dumps({"i": i, "v": list(range(i * 40))}).encode()
        payload = c.compress(data)
        assert stock.decompress(payload + TAIL) == data
        assert d.decompress(payload) == data
        sent_in += len(data)
        sent_out += len(payload)
        received_in += len(payload)
        received_out += len(data)
    parts = [b"first part " * 30, b"second " * 50, b"last"]
    payloads = [c.compress(parts[0], False), c.compress(parts[1], False, flush=False),
                c.compress(parts[2])]
    whole = b"".join(payloads)
    assert d.decompress(whole[:10], False) + d.decompress(whole[10:]) == b"".join(parts)
    sent_in += sum(map(len, parts))
    sent_out += len(whole)
    received_in += len(whole)
    received_out += len(b"".join(parts))
    assert delta(traffic(impl, SEND_KEY), before[0]) == (6, sent_in, sent_out, 0)
    assert delta(traffic(impl, RECEIVE_KEY), before[1]) == (6, received_in, received_out, 0)


@pytest.mark.test_build
def test_compress_once_shares_are_counted(impl):
    previous = impl._set_sharing(True)
    try:
        before = traffic(impl, SEND_KEY)
        room = [impl.Compressor(3, 11, 4) for _ in range(4)]
        data = json.dumps({"to": "everyone", "v": list(range(100))}).encode()
        payloads = fastdeflate.broadcast(data, room)
        assert len({id(p) for p in payloads}) == 1  # compressed once
        loop = [c.compress(data) for c in [impl.Compressor(3, 11, 4) for _ in range(3)]]
        assert len({id(p) for p in loop}) == 1
        shared = 3 + 2  # every compressor but the first of each group took the payload
        assert delta(traffic(impl, SEND_KEY), before) == (
            7, 7 * len(data), 7 * len(payloads[0]), shared)
    finally:
        impl._set_sharing(previous)


def test_failed_calls_are_not_counted(impl):
    before = traffic(impl, RECEIVE_KEY)
    d = impl.Decompressor(11)
    with pytest.raises(fastdeflate.DecompressionError):
        d.decompress(b"\xff\xff\xff\xff")
    assert traffic(impl, RECEIVE_KEY) == before


def messages_by_direction(counts: dict) -> tuple[int, int]:
    return (sum(v[0] for k, v in counts.items() if k[0] == "deflate"),
            sum(v[0] for k, v in counts.items() if k[0] == "inflate"))


@pytest.mark.timeout(60)
def test_a_real_servers_traffic_is_counted(use_impl):
    """A websockets server and client on loopback, both on fastdeflate's codec in this
    process: 20 messages each way, each compressed once and decompressed once per end."""
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import serve

    import fastdeflate.integrations.websockets as fd_websockets

    async def echo(ws):
        async for message in ws:
            await ws.send(message)

    async def exchange() -> None:
        async with serve(echo, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                for i in range(20):
                    await ws.send(json.dumps({"i": i, "data": "x" * 500}))
                    assert json.loads(await ws.recv())["i"] == i

    before = messages_by_direction(use_impl._traffic())
    fd_websockets.enable()
    try:
        asyncio.run(exchange())
    finally:
        fd_websockets.disable()
    after = messages_by_direction(use_impl._traffic())
    assert delta(after, before) == (40, 40)
    gc.collect()  # the connections' codec objects (in cycles): later tests count streams


def test_status_reports_the_counters_of_the_implementation_in_use():
    """status()["traffic"] adds up the counters of every parameter set by direction
    (less what compress what pays' estimates sent to measure: fastdeflate/_savings.py)."""
    from fastdeflate import _savings

    codec = fastdeflate._fastdeflate if fastdeflate.IMPLEMENTATION == "cython" \
        else fastdeflate._pure
    fastdeflate.status()  # any measurement due is made first
    c, d = fastdeflate.Compressor(3, 11, 4), fastdeflate.Decompressor(11)
    assert d.decompress(c.compress(b"counted " * 40)) == b"counted " * 40
    counts = codec._traffic()
    traffic = fastdeflate.status()["traffic"]
    measured_messages, measured_bytes, _ = _savings.measured_traffic
    sent, received = messages_by_direction(counts)
    assert traffic["sent"]["messages"] == sent - measured_messages
    assert traffic["received"]["messages"] == received
    assert traffic["sent"]["bytes"] == sum(
        v[1] for k, v in counts.items() if k[0] == "deflate") - measured_bytes
    assert traffic["received"]["bytes"] == sum(v[2] for k, v in counts.items()
                                               if k[0] == "inflate")


def test_status_says_whether_the_extension_is_the_test_build():
    """status()["build"]["test_build"]: True where every entry point of the test build
    (extension/test_build/*.pxi) is compiled in, False where none is (a default build,
    the wheels'; the fallback); never some of them."""
    import pathlib
    import re

    parts = pathlib.Path(__file__).resolve().parents[1] / "extension" / "test_build"
    names = {name for part in parts.glob("*.pxi")
             for name in re.findall(r"^def (\w+)\(", part.read_text(), re.M)}
    assert len(names) >= 15, names
    said = fastdeflate.status()["build"]["test_build"]
    if fastdeflate.IMPLEMENTATION != "cython":
        assert said is False
        return
    present = {n for n in names if hasattr(fastdeflate._fastdeflate, n)}
    assert present in (set(), names)
    assert said is (present == names)
