"""The zlib engine: what ENGINE and ZLIB_VERSION say, and what holds on any engine.

The compiled extension runs on the bundled zlib-ng (zlib-compat) or on the system zlib;
the fallback on the stdlib's zlib. Output bytes may differ between engines, so these tests
check what must hold everywhere: streams interoperate both ways, in every mode, and
compress about as well. ``FASTDEFLATE_EXPECT_ENGINE`` ("zlib-ng" or "zlib"), set by CI,
makes a build that silently fell back to the other engine fail.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import random
import sys
import zlib
from pathlib import Path
from types import ModuleType

import pytest

import fastdeflate

ROOT = Path(__file__).resolve().parent.parent
TAIL = b"\x00\x00\xff\xff"


def json_messages(count: int, size: int, seed: int = 7) -> list[bytes]:
    """Varying JSON messages of about ``size`` bytes each (like a market-data feed)."""
    rng = random.Random(seed)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    messages = []
    for i in range(count):
        items, body = [], 2
        while body < size:
            item = {"id": i * 1000 + len(items), "sym": rng.choice(words) + str(rng.randrange(99)),
                    "px": round(rng.uniform(1, 1000), 2), "qty": rng.randrange(1, 10**6),
                    "side": rng.choice(["buy", "sell"]), "ok": rng.random() < 0.5}
            items.append(item)
            body += len(json.dumps(item)) + 2
        messages.append(json.dumps({"seq": i, "items": items}).encode())
    return messages


def is_bundled(impl: ModuleType) -> bool:
    return impl.ENGINE.startswith("zlib-ng ")


def test_engine_strings(impl):
    if impl.__name__ == "fastdeflate._pure":
        assert impl.ENGINE == f"zlib {zlib.ZLIB_RUNTIME_VERSION} (stdlib)"
        assert impl.ZLIB_VERSION == zlib.ZLIB_RUNTIME_VERSION
    elif is_bundled(impl):
        assert impl.ENGINE.endswith(" (zlib-compat)")
        version = impl.ENGINE.split()[1]
        assert version.count(".") == 2 and version.replace(".", "").isdigit()
        assert impl.ZLIB_VERSION.endswith(".zlib-ng")  # zlibVersion() in compat mode
    else:
        assert impl.ENGINE == f"zlib {impl.ZLIB_VERSION}"


def test_package_names_the_engine_of_its_implementation():
    module = importlib.import_module(
        "fastdeflate._pure" if fastdeflate.IMPLEMENTATION == "python" else "fastdeflate._fastdeflate")
    assert fastdeflate.ENGINE == module.ENGINE
    assert fastdeflate.ZLIB_VERSION == module.ZLIB_VERSION
    assert "ENGINE" in fastdeflate.__all__


def test_the_engine_ci_expects():
    from fastdeflate import _fastdeflate

    expected = os.environ.get("FASTDEFLATE_EXPECT_ENGINE")
    if not expected:
        return  # only CI builds say which engine they meant to build
    assert expected in ("zlib-ng", "zlib")
    assert _fastdeflate.ENGINE.split()[0] == expected, _fastdeflate.ENGINE


@pytest.mark.timeout(120)
@pytest.mark.parametrize("no_context_takeover", [False, True])
@pytest.mark.parametrize("window_bits", [9, 12, 15])
def test_interop_with_stdlib_both_ways(impl, window_bits, no_context_takeover):
    messages = json_messages(30, 3000) + [b"", b"x", b"ab" * 40_000]
    compressor = impl.Compressor(window_bits=window_bits, no_context_takeover=no_context_takeover)
    decompressor = impl.Decompressor(window_bits, no_context_takeover)
    stdlib_in = zlib.decompressobj(-window_bits)
    stdlib_out = zlib.compressobj(6, zlib.DEFLATED, -window_bits)
    for message in messages:
        if no_context_takeover:
            stdlib_in = zlib.decompressobj(-window_bits)
            stdlib_out = zlib.compressobj(6, zlib.DEFLATED, -window_bits)
        assert stdlib_in.decompress(compressor.compress(message) + TAIL) == message
        payload = (stdlib_out.compress(message) + stdlib_out.flush(zlib.Z_SYNC_FLUSH))[:-4]
        assert decompressor.decompress(payload) == message


@pytest.mark.timeout(120)
@pytest.mark.parametrize("flush", [True, False])
def test_interop_between_implementations_fragmented(flush):
    from fastdeflate import _fastdeflate, _pure

    messages = json_messages(20, 5000, seed=11)
    for sender, receiver in ((_fastdeflate, _pure), (_pure, _fastdeflate)):
        c, d = sender.Compressor(), receiver.Decompressor()
        for message in messages:
            cuts = [0, len(message) // 3, len(message) // 2, len(message)]
            parts = [message[a:b] for a, b in zip(cuts, cuts[1:])]
            payload = [c.compress(p, fin=False, flush=flush) for p in parts[:-1]]
            payload.append(c.compress(parts[-1]))
            received = [d.decompress(p, fin=False) for p in payload[:-1]]
            received.append(d.decompress(payload[-1]))
            assert b"".join(received) == message


@pytest.mark.parametrize("size", [1024, 4096, 16384])
@pytest.mark.parametrize("no_context_takeover", [False, True])
def test_compresses_about_as_well_as_stdlib(impl, no_context_takeover, size):
    """Level 6, same window: within 2% of the stdlib's size on varying JSON (zlib-ng's own
    level 6, its "medium" strategy, was 2-3% larger without context takeover)."""
    messages = json_messages(max(8, 160_000 // size), size, seed=3)
    ours = impl.Compressor(no_context_takeover=no_context_takeover)
    ref = zlib.compressobj(6, zlib.DEFLATED, -15)
    ours_size = ref_size = 0
    for message in messages:
        if no_context_takeover:
            ref = zlib.compressobj(6, zlib.DEFLATED, -15)
        ours_size += len(ours.compress(message))
        ref_size += len(ref.compress(message) + ref.flush(zlib.Z_SYNC_FLUSH)) - 4
    assert abs(ours_size - ref_size) <= 0.02 * ref_size, (ours_size, ref_size)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF symbol visibility")
def test_bundled_zlib_ng_symbols_stay_private():
    """Nothing of the bundled zlib-ng is exported: no clash with a zlib already loaded."""
    from fastdeflate import _fastdeflate

    if not is_bundled(_fastdeflate):
        assert not hasattr(ctypes.CDLL(_fastdeflate.__file__), "fastdeflate_deflate")
        return
    library = ctypes.CDLL(_fastdeflate.__file__)
    for name in ("deflate", "inflate", "fastdeflate_deflate", "fastdeflate_inflate",
                 "zlibVersion", "adler32_c"):
        assert not hasattr(library, name), name


def test_engines_side_by_side_in_one_process():
    """The stdlib zlib and the extension's engine interleave without mixing state."""
    from fastdeflate import _fastdeflate

    messages = json_messages(10, 2000, seed=5)
    c, d = _fastdeflate.Compressor(), _fastdeflate.Decompressor()
    ref_c, ref_d = zlib.compressobj(6, zlib.DEFLATED, -15), zlib.decompressobj(-15)
    for message in messages:
        ours = c.compress(message)
        theirs = (ref_c.compress(message) + ref_c.flush(zlib.Z_SYNC_FLUSH))[:-4]
        assert ref_d.decompress(ours + TAIL) == message
        assert d.decompress(theirs) == message
    assert zlib.decompress(zlib.compress(b"stdlib still works" * 100)) == (
        b"stdlib still works" * 100)


@pytest.fixture
def buildtools(monkeypatch):
    """The build helpers (buildtools/ beside tests/, in the repository and the sdist)."""
    monkeypatch.syspath_prepend(str(ROOT))
    import buildtools.engine
    import buildtools.zlib_ng

    return buildtools


def test_build_rejects_an_unpinned_zlib_ng_archive(buildtools, tmp_path):
    zlib_ng = buildtools.zlib_ng

    fake = tmp_path / zlib_ng.SDIST_FILE
    fake.write_bytes(b"not the pinned archive")
    with pytest.raises(zlib_ng.ZlibNgUnavailable, match="sha256"):
        zlib_ng.check_sdist(fake)


def test_build_engine_choice_is_validated(buildtools, monkeypatch):
    engine = buildtools.engine

    monkeypatch.setenv("FASTDEFLATE_ZLIB", "BUNDLED")
    assert engine.requested() == "bundled"
    monkeypatch.setenv("FASTDEFLATE_ZLIB", "zlib-rs")
    with pytest.raises(SystemExit, match="FASTDEFLATE_ZLIB"):
        engine.requested()
