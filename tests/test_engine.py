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
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
import zlib
from pathlib import Path
from types import ModuleType

import pytest

import fastdeflate
from _samezlib import same_zlib_as_stdlib

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


def test_the_locks_the_build_was_asked_for():
    """pthread mutexes where pthreads exist; CPython's PyThread locks on Windows and in
    a build with FASTDEFLATE_LOCKS=pythread (CI's system-engine wheel, which says so in
    FASTDEFLATE_EXPECT_LOCKS), so that branch runs the engine suite here too."""
    from fastdeflate import _fastdeflate

    default = "pythread" if sys.platform == "win32" else "pthread"
    assert _fastdeflate.LOCKS == os.environ.get("FASTDEFLATE_EXPECT_LOCKS", default)


#: What the stdlib's zlib says it is on CPython >= 3.14 for Windows: a zlib-ng build of
#: CPython's own (2.2.x, default hash table) in zlib-compat mode, which reports the same
#: string as fastdeflate's bundled zlib-ng (another release, a patched hash table size).
WINDOWS_STDLIB_ZLIB_NG = "1.3.1.zlib-ng"


def test_the_same_zlib_is_told_by_the_engine_not_by_the_version_string(
        impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Byte identity with the stdlib is checked only where the codec runs on the stdlib's
    very zlib: the fallback, or the extension built on the system zlib; never the bundled
    zlib-ng, even where the stdlib's zlib-ng reports the same version string (Windows)."""
    if impl.__name__ == "fastdeflate._pure":
        assert same_zlib_as_stdlib(impl)
    elif is_bundled(impl):
        assert impl.ZLIB_VERSION == WINDOWS_STDLIB_ZLIB_NG
        assert not same_zlib_as_stdlib(impl)
        monkeypatch.setattr(zlib, "ZLIB_RUNTIME_VERSION", WINDOWS_STDLIB_ZLIB_NG)
        assert not same_zlib_as_stdlib(impl)  # as on Windows: same string, other library
    else:
        assert same_zlib_as_stdlib(impl) == (impl.ZLIB_VERSION == zlib.ZLIB_RUNTIME_VERSION)


#: Byte-identity tests of each kind: the codec's, the adapters' against stock, the
#: differential fuzzer's corpus (on the compiled codec where the fallback is the same).
BYTE_IDENTITY_TESTS = (
    "compiled_column_is_byte_identical or fuzz_corpus_replays_clean or thread_stress_shared"
    " or (cython and (encoder_output_identical_to_stock or payloads_byte_identical_to_stock"
    " or payloads_identical_to_stock or encoder_matches_stock))")


@pytest.mark.test_build
@pytest.mark.timeout(600)
def test_byte_identity_tests_pass_where_the_stdlib_runs_its_own_zlib_ng(tmp_path: Path) -> None:
    """On CPython >= 3.14 for Windows (the stdlib's zlib says "1.3.1.zlib-ng", as the
    bundled zlib-ng does) the byte-identity tests must not take the bundled engine for the
    stdlib's: run here with the stdlib's version string made that one, they pass."""
    (tmp_path / "windows_stdlib_zlib.py").write_text(
        f"import zlib\nzlib.ZLIB_RUNTIME_VERSION = {WINDOWS_STDLIB_ZLIB_NG!r}\n")
    tests = ROOT / "tests"
    files = [tests / "test_benchmarks.py", tests / "test_hardening.py",
             *(tests / "integrations" / f"test_{name}.py"
               for name in ("websockets", "wsproto", "tornado", "autobahn"))]
    environ = {k: v for k, v in os.environ.items() if k != "FASTDEFLATE_CHECK_SKIPS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "windows_stdlib_zlib", "-k", BYTE_IDENTITY_TESTS, *map(str, files)],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=580)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b\d+ passed", done.stdout) and " failed" not in done.stdout


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


Z_HUFFMAN_ONLY = 2


def _fibonacci_bytes(symbols: int, seed: int) -> bytes:
    """Byte i appears fib(i + 2) times (1, 2, 3, 5...), shuffled. Coded Huffman-only in
    one block, with the end-of-block symbol (also once), the counts are Fibonacci's and
    the optimal code is as deep as there are symbols less one: 18 bits for 18 bytes
    (10,944 of them)."""
    counts, a, b = [], 1, 2
    for _ in range(symbols):
        counts.append(a)
        a, b = b, a + b
    data = bytearray()
    for symbol, count in enumerate(counts):
        data += bytes([symbol]) * count
    random.Random(seed).shuffle(data)
    return bytes(data)


HUFFMAN_SHAPES = {
    "one byte": b"x",
    "one symbol": b"a" * 5000,
    "two symbols": bytes(random.Random(1).choice(b"ab") for _ in range(5000)),
    "flat": random.Random(2).randbytes(20000),
    "text": b" ".join(json.dumps({"n": i, "v": i * i}).encode() for i in range(2000)),
    "fibonacci, 18 symbols": _fibonacci_bytes(18, 3),
    "fibonacci, 16 symbols": _fibonacci_bytes(16, 4),
    "fibonacci bytes and distances": b"".join(
        _fibonacci_bytes(18, 5)[: 300 + 7 * i] * 2 for i in range(60)),
}


@pytest.mark.parametrize("level,strategy", [(1, 0), (6, 0), (9, 0), (6, Z_HUFFMAN_ONLY)])
@pytest.mark.parametrize("shape", sorted(HUFFMAN_SHAPES))
def test_huffman_codes_of_every_shape_decode_and_cost_what_stdlibs_do(impl, shape, level,
                                                                      strategy):
    """The bundled zlib-ng builds its Huffman codes by sorting (``zlib_ng_build_tree.c``)
    and falls back to zlib's heap builder when a code would exceed 15 bits (7 for the
    code-length code): skewed frequencies (Fibonacci counts, coded as they are with
    Z_HUFFMAN_ONLY) take that path. Every shape decodes with stdlib zlib, in one message
    and in 4 KiB fragments, and costs within 2% of the stdlib's bytes (zlib-ng's level 1
    is another strategy: no size bound there)."""
    data = HUFFMAN_SHAPES[shape]
    whole = impl.Compressor(level=level, strategy=strategy).compress(data)
    assert zlib.decompressobj(-15).decompress(whole + b"\x00\x00\xff\xff") == data
    fragments = impl.Compressor(level=level, strategy=strategy)
    chunks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    payload = b"".join(fragments.compress(chunk, fin=i == len(chunks) - 1)
                       for i, chunk in enumerate(chunks))
    assert zlib.decompressobj(-15).decompress(payload + b"\x00\x00\xff\xff") == data
    ref = zlib.compressobj(level, zlib.DEFLATED, -15, 8, strategy)
    ref_size = len(ref.compress(data) + ref.flush(zlib.Z_SYNC_FLUSH)) - 4
    if level != 1:
        assert len(whole) <= ref_size * 1.02 + 8, (len(whole), ref_size)


def test_bundled_zlib_ng_symbols_stay_private():
    """Nothing of the bundled zlib-ng is exported: no clash with a zlib already loaded.
    (dlsym and GetProcAddress see only exported symbols, on Linux, macOS and Windows.)"""
    from fastdeflate import _fastdeflate

    library = ctypes.CDLL(_fastdeflate.__file__)
    assert hasattr(library, "PyInit__fastdeflate")  # the one export: lookups do work
    if not is_bundled(_fastdeflate):
        assert not hasattr(library, "fastdeflate_deflate")
        return
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
    import buildtools.isal
    import buildtools.versions
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


# --- the build's choices per platform (forced here: each branch runs on this machine) -------


def test_bundled_zlib_ng_link_args_keep_its_symbols_private_on_every_platform(buildtools):
    """Only the module's init function is exported: zlib-ng's prefixed symbols stay inside."""
    link_args = buildtools.engine.private_link_args
    assert link_args("linux") == ["-Wl,--exclude-libs,ALL"]
    assert link_args("darwin") == ["-Wl,-exported_symbol,_PyInit__fastdeflate"]
    assert link_args("win32") == []  # MSVC exports only PyInit (/EXPORT), never a static lib's
    assert link_args("freebsd14") == ["-Wl,--exclude-libs,ALL"]  # ELF, GNU-style linkers


def test_bundled_engine_uses_the_link_args_of_its_platform(buildtools, monkeypatch, tmp_path):
    """bundled_zlib_ng() asks private_link_args for sys.platform (forced to each here).
    The CMake build is not what is tested: it is replaced by a library path."""
    engine = buildtools.engine
    real = engine.zlib_ng.StaticZlibNg(tmp_path / "include", tmp_path / "lib" / "libz.a")
    monkeypatch.setattr(engine.zlib_ng, "build_static", lambda cache_dir: real)
    monkeypatch.setenv("FASTDEFLATE_ISAL", "off")
    for platform_ in ("linux", "darwin", "win32"):
        monkeypatch.setattr(sys, "platform", platform_)
        built = engine.bundled_zlib_ng(tmp_path)
        assert built.extra_link_args == engine.private_link_args(platform_)
        assert built.extra_objects == [str(real.library)]


def test_bundled_engine_adds_isal_as_asked(buildtools, monkeypatch, tmp_path, capsys):
    """FASTDEFLATE_ISAL: ``off`` leaves ISA-L out; ``auto`` links it beside zlib-ng, or
    warns and goes on without it if it cannot be built; ``bundled`` fails then. The
    builds themselves are replaced by library paths."""
    engine = buildtools.engine
    zlib_ng_lib = engine.zlib_ng.StaticZlibNg(tmp_path / "zi", tmp_path / "libz.a")
    isal_lib = engine.isal.StaticIsal(tmp_path / "ii", tmp_path / "isa-l.a")
    monkeypatch.setattr(engine.zlib_ng, "build_static", lambda cache_dir: zlib_ng_lib)
    monkeypatch.setattr(engine.isal, "build_static", lambda cache_dir: isal_lib)
    monkeypatch.setenv("FASTDEFLATE_ISAL", "off")
    assert engine.bundled_zlib_ng(tmp_path).extra_objects == [str(zlib_ng_lib.library)]
    monkeypatch.setenv("FASTDEFLATE_ISAL", "auto")
    both = engine.bundled_zlib_ng(tmp_path)
    assert both.extra_objects == [str(zlib_ng_lib.library), str(isal_lib.library)]
    assert str(isal_lib.include_dir) in both.include_dirs
    assert ("FASTDEFLATE_BUNDLED_ISAL", "1") in both.define_macros
    assert both.name.endswith(f"+ ISA-L {engine.isal.ISAL_VERSION}")
    assert ("FASTDEFLATE_ISAL_MINIMUM", engine.version_number(engine.isal.MINIMUM_VERSION)
            ) in both.define_macros

    def unavailable(cache_dir):
        raise engine.isal.IsalUnavailable("nasm is needed")

    monkeypatch.setattr(engine.isal, "build_static", unavailable)
    alone = engine.bundled_zlib_ng(tmp_path)
    assert alone.extra_objects == [str(zlib_ng_lib.library)]
    assert "bundled ISA-L unavailable (nasm is needed)" in capsys.readouterr().err
    monkeypatch.setenv("FASTDEFLATE_ISAL", "bundled")
    with pytest.raises(SystemExit, match="nasm is needed"):
        engine.bundled_zlib_ng(tmp_path)
    monkeypatch.setenv("FASTDEFLATE_ISAL", "sometimes")
    with pytest.raises(SystemExit, match="FASTDEFLATE_ISAL"):
        engine.bundled_zlib_ng(tmp_path)


def test_isal_make_command_of_each_platform(buildtools, monkeypatch):
    """ISA-L's own makefiles, with the flags variable its make.inc reads on each target
    (forced here): CFLAGS_ on x86-64 Linux, CFLAGS_aarch64 (arch=aarch64) on arm64
    Linux, CFLAGS_Darwin on macOS; nmake on Windows; nasm needed on x86-64 only."""
    isal = buildtools.isal
    monkeypatch.delenv("CFLAGS", raising=False)
    linux = isal.make_command("linux", "x86_64", 2, None)
    assert linux[:5] == ["make", "-j", "2", "-f", "Makefile.unx"]
    assert "host_cpu=x86_64" in linux and "units=igzip crc" in linux
    assert "CFLAGS_=-fPIC -O2 -fvisibility=hidden" in linux
    arm = isal.make_command("linux", "aarch64", 2, "aarch64-linux-gnu-gcc")
    assert "CFLAGS_aarch64=-fPIC -O2 -fvisibility=hidden" in arm
    assert "arch=aarch64" in arm and "CC=aarch64-linux-gnu-gcc" in arm
    mac = isal.make_command("darwin", "aarch64", 3, None)
    assert "CFLAGS_Darwin=-fPIC -O2 -fvisibility=hidden" in mac and "arch=Darwin" in mac
    assert isal.make_command("win32", "x86_64", 2, None)[:3] == ["nmake", "/f",
                                                                 "Makefile.nmake"]
    assert isal.needs_assembler("x86_64", "linux") == "nasm"
    assert isal.needs_assembler("aarch64", "linux") is None
    for platform_, cpu in (("linux-x86_64", "x86_64"), ("linux-aarch64", "aarch64"),
                           ("macosx-11.0-arm64", "aarch64"), ("win-amd64", "x86_64")):
        monkeypatch.setattr(isal.sysconfig, "get_platform", lambda p=platform_: p)
        assert isal.target_cpu() == cpu


# --- the engines' versions: read from their sources, checked against minimums --------------


def test_versions_compare_as_release_numbers(buildtools):
    versions = buildtools.versions
    assert versions.parse("2.32.1") == (2, 32, 1)
    assert versions.at_least("2.32.1", "2.32.1") and versions.at_least("2.32.10", "2.32.9")
    assert versions.at_least("2.33", "2.32.1") and versions.at_least("3.0.0", "2.32.1")
    assert not versions.at_least("2.31.1", "2.32.1") and not versions.at_least("2.32", "2.32.1")
    for bad in ("", "2.32.x", "v2.32.1", "2..1"):
        with pytest.raises(ValueError):
            versions.parse(bad)


def test_an_engine_older_than_its_minimum_is_refused(buildtools):
    """ISA-L 2.31.1 (isa-l#316's aarch64 inflate corruption) and zlib-ng 2.3.2 (deflate
    output not deterministic after deflateReset) are refused, naming the reason; the
    pinned releases pass."""
    isal, zlib_ng, versions = buildtools.isal, buildtools.zlib_ng, buildtools.versions
    with pytest.raises(versions.TooOld, match=r"ISA-L 2\.31\.1 is older than 2\.32\.1.*isa-l#316"):
        isal.check_version("2.31.1", "isal-1.7.2.tar.gz")
    with pytest.raises(versions.TooOld, match=r"zlib-ng 2\.3\.2 is older than 2\.3\.3.*#2102"):
        zlib_ng.check_version("2.3.2", "zlib_ng-1.0.0.tar.gz")
    assert isal.check_version(isal.ISAL_VERSION, "pinned") == isal.ISAL_VERSION
    assert zlib_ng.check_version(zlib_ng.ZLIB_NG_VERSION, "pinned") == zlib_ng.ZLIB_NG_VERSION
    assert versions.at_least(isal.ISAL_VERSION, isal.MINIMUM_VERSION)
    assert versions.at_least(zlib_ng.ZLIB_NG_VERSION, zlib_ng.MINIMUM_VERSION)
    # sources that are newer than the minimum but not the pinned release: refused too
    with pytest.raises(versions.PinnedSourcesDefect, match="not the pinned"):
        isal.check_version("2.40.0", "isal-9.9.tar.gz")


def test_engine_versions_are_read_from_their_sources(buildtools, tmp_path):
    """ISA-L's from its isal_api.h (>= 2.32) or its make.inc (older); zlib-ng's from
    ZLIBNG_VERSION in its header."""
    isal, zlib_ng = buildtools.isal, buildtools.zlib_ng
    (tmp_path / "include").mkdir()
    (tmp_path / "make.inc").write_text("# ...\nversion ?= 2.31.1\nhost_cpu ?= x\n")
    assert isal.version_in_sources(tmp_path) == "2.31.1"
    (tmp_path / "include" / "isal_api.h").write_text(
        "#ifndef ISAL_MAJOR_VERSION\n#define ISAL_MAJOR_VERSION 2\n#endif\n"
        "#define ISAL_MINOR_VERSION 32\n#define ISAL_PATCH_VERSION 1\n")
    assert isal.version_in_sources(tmp_path) == "2.32.1"
    with pytest.raises(isal.IsalUnavailable):
        isal.version_in_sources(tmp_path / "nothing")
    header = tmp_path / "zlib.h"
    header.write_text('#define ZLIBNG_VERSION "2.3.0.devel"\n#define ZLIBNG_VERNUM 0x0\n')
    assert zlib_ng.version_in(header) == "2.3.0"
    with pytest.raises(zlib_ng.ZlibNgUnavailable):
        zlib_ng.version_in(tmp_path / "missing.h")


def test_a_too_old_pin_fails_the_build_even_where_it_could_fall_back(buildtools, monkeypatch,
                                                                      tmp_path):
    """With FASTDEFLATE_ZLIB=auto / FASTDEFLATE_ISAL=auto, an engine that cannot be built
    here is left out with a warning; one pinned older than its minimum fails the build
    (SystemExit), before anything is fetched. The zlib-ng build is replaced by a library
    path where ISA-L's pin is the one under test."""
    engine = buildtools.engine
    monkeypatch.setenv("FASTDEFLATE_ZLIB", "auto")
    monkeypatch.setenv("FASTDEFLATE_ISAL", "auto")
    monkeypatch.delenv("FASTDEFLATE_ISAL_SDIST", raising=False)
    monkeypatch.setattr(engine.isal, "ISAL_VERSION", "2.31.1")
    real_zlib_ng = engine.zlib_ng.build_static
    monkeypatch.setattr(engine.zlib_ng, "build_static", lambda cache_dir: engine.zlib_ng.StaticZlibNg(
        tmp_path / "zi", tmp_path / "libz.a"))
    with pytest.raises(SystemExit, match=r"ISA-L 2\.31\.1 is older than 2\.32\.1"):
        engine.choose(tmp_path / "zlib-ng")
    assert not (tmp_path / "isal").exists()  # nothing fetched
    monkeypatch.setattr(engine.zlib_ng, "build_static", real_zlib_ng)
    monkeypatch.setattr(engine.zlib_ng, "ZLIB_NG_VERSION", "2.2.4")
    with pytest.raises(SystemExit, match=r"zlib-ng 2\.2\.4 is older than 2\.3\.3"):
        engine.choose(tmp_path / "zlib-ng")
    assert not (tmp_path / "zlib-ng").exists()


def test_isal_edits_change_no_file_unless_each_applies_once(buildtools, tmp_path):
    """buildtools/isal.py, PATCHES: if one edit's text is not found exactly once, no file
    is changed and the build fails (PatchFailed, a defect of the pinned sources: never a
    quiet fallback)."""
    isal = buildtools.isal
    texts: dict[str, list[str]] = {}
    for name, text, _ in isal.PATCHES:
        texts.setdefault(name, []).append(text)
    for name, parts in texts.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("\n/* ... */\n".join(parts))
    name, text, _ = isal.PATCHES[-1]
    (tmp_path / name).write_text((tmp_path / name).read_text().replace(text, "elsewhere"))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(isal.PatchFailed, match="0 times, not once"):
        isal.apply_patches(tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert issubclass(isal.PatchFailed, buildtools.versions.PinnedSourcesDefect)
    (tmp_path / name).write_text((tmp_path / name).read_text() + text)
    isal.apply_patches(tmp_path)
    for name, _, replacement in isal.PATCHES:
        assert replacement in (tmp_path / name).read_text()


def test_isal_build_key_names_the_sdist_and_the_release(buildtools, monkeypatch):
    """A build of another sdist or release is never taken for this one (build/isal)."""
    isal = buildtools.isal
    key = isal.build_key("x86_64")
    assert key.startswith(f"isal-{isal.ISAL_VERSION}-x86_64-")
    monkeypatch.setattr(isal, "SDIST_SHA256", "0" * 64)
    assert isal.build_key("x86_64") != key


def test_the_bundled_isal_is_the_pinned_release(buildtools) -> None:
    """What the extension says it runs is ISA-L's own version (isal_api.h): the pin."""
    from fastdeflate import _fastdeflate

    if not _fastdeflate.engines()[1].startswith("ISA-L "):
        pytest.skip(f"level 1 runs on {_fastdeflate.engines()[1]}")
    isal = buildtools.isal
    assert _fastdeflate._ISAL == f"ISA-L {isal.ISAL_VERSION}"
    assert buildtools.versions.at_least(isal.ISAL_VERSION, isal.MINIMUM_VERSION)
    assert _fastdeflate.INFLATE_ENGINE.startswith(f"ISA-L {isal.ISAL_VERSION} ")


@pytest.fixture
def target(buildtools, monkeypatch):
    """Describe the build's target: sysconfig's platform, libc and host type, all forced."""
    zlib_ng = buildtools.zlib_ng
    for name in zlib_ng.TOOLCHAIN_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def describe(platform_: str, libc: tuple[str, str] = ("", ""), host: str = "") -> str:
        monkeypatch.setattr(zlib_ng.sysconfig, "get_platform", lambda: platform_)
        monkeypatch.setattr(zlib_ng.platform, "libc_ver", lambda *a, **k: libc)
        config = {"HOST_GNU_TYPE": host, "MULTIARCH": "", "EXT_SUFFIX": ".so"}
        monkeypatch.setattr(zlib_ng.sysconfig, "get_config_var", config.get)
        return zlib_ng.build_key()

    return describe


def test_zlib_ng_cache_key_tells_glibc_from_musl(target):
    glibc = target("linux-x86_64", ("glibc", "2.28"), "x86_64-pc-linux-gnu")
    musl = target("linux-x86_64", ("", ""), "x86_64-pc-linux-musl")
    newer_glibc = target("linux-x86_64", ("glibc", "2.39"), "x86_64-pc-linux-gnu")
    assert "-glibc2.28-" in glibc and "-musl-" in musl and "-glibc2.39-" in newer_glibc
    assert len({glibc, musl, newer_glibc}) == 3


def test_zlib_ng_cache_key_tells_architectures_apart(target, monkeypatch):
    keys = {target(p, ("glibc", "2.28")) for p in ("linux-x86_64", "linux-aarch64")}
    keys |= {target(p) for p in ("macosx-11.0-arm64", "macosx-10.13-x86_64",
                                 "macosx-10.13-universal2", "win-amd64", "win-arm64")}
    assert len(keys) == 7
    # cross builds say their target in the environment (cibuildwheel: macOS arm64 on x86_64)
    base = target("macosx-10.13-x86_64")
    for name, value in [("ARCHFLAGS", "-arch arm64"),
                        ("_PYTHON_HOST_PLATFORM", "macosx-11.0-arm64"),
                        ("CMAKE_OSX_ARCHITECTURES", "arm64"), ("CMAKE_TOOLCHAIN_FILE", "/x.cmake"),
                        ("CMAKE_GENERATOR_PLATFORM", "ARM64"), ("CC", "clang"),
                        ("CFLAGS", "-O3"), ("MACOSX_DEPLOYMENT_TARGET", "12.0")]:
        monkeypatch.setenv(name, value)
        assert target("macosx-10.13-x86_64") != base, name
        monkeypatch.delenv(name)
    assert target("macosx-10.13-x86_64") == base


def test_zlib_ng_cache_key_on_this_machine(buildtools):
    """The real key names this platform and, on Linux, this C library."""
    import platform
    import sysconfig

    key = buildtools.zlib_ng.build_key()
    assert key.startswith(f"{buildtools.zlib_ng.ZLIB_NG_VERSION}-{sysconfig.get_platform()}-")
    if sys.platform.startswith("linux"):
        name, version = platform.libc_ver()
        assert f"-{name}{version}-" in key or "-musl-" in key


def test_build_requires_cmake_only_where_a_bundled_build_can_happen(buildtools, monkeypatch,
                                                                   tmp_path):
    """The backend's extra build requirements: cmake (when none is on PATH) for a bundled
    build, and for ``auto`` only where the cmake package has wheels; never for ``system``."""
    engine = buildtools.engine
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)  # no cmake on PATH
    monkeypatch.setenv("FASTDEFLATE_ZLIB_NG_SDIST", __file__)  # sources given: no pip needed
    cases = [
        ("bundled", "freebsd-14.1-amd64", True),  # asked for: needed wherever it is
        ("auto", "linux-x86_64", True),
        ("auto", "linux-aarch64", True),
        ("auto", "macosx-11.0-arm64", True),
        ("auto", "win-arm64", True),
        ("auto", "freebsd-14.1-amd64", False),  # no cmake wheel: auto falls back instead
        ("auto", "linux-loongarch64", False),
        ("system", "linux-x86_64", False),
        ("system", "win-amd64", False),
    ]
    for choice, platform_, wants_cmake in cases:
        monkeypatch.setenv("FASTDEFLATE_ZLIB", choice)
        monkeypatch.setattr(engine.sysconfig, "get_platform", lambda: platform_)
        needs = engine.bundling_needs(tmp_path)
        assert ("cmake>=3.18" in needs) == wants_cmake, (choice, platform_, needs)
    monkeypatch.setattr(engine.shutil, "which", lambda name: "/usr/bin/cmake")
    monkeypatch.setenv("FASTDEFLATE_ZLIB", "bundled")
    assert engine.bundling_needs(tmp_path) == []  # cmake on PATH, sources given


def test_build_asks_for_pip_only_to_fetch_zlib_ng_sources(buildtools, monkeypatch, tmp_path):
    engine = buildtools.engine
    monkeypatch.setattr(engine.shutil, "which", lambda name: "/usr/bin/cmake")
    monkeypatch.delenv("FASTDEFLATE_ZLIB_NG_SDIST", raising=False)
    monkeypatch.setitem(sys.modules, "pip", None)  # no pip in the build environment
    monkeypatch.setenv("FASTDEFLATE_ZLIB", "bundled")
    assert engine.bundling_needs(tmp_path) == ["pip"]  # no cached sdist in tmp_path
    (tmp_path / buildtools.zlib_ng.SDIST_FILE).write_bytes(b"")
    assert engine.bundling_needs(tmp_path) == []  # a cached one is checked at build time
    monkeypatch.setenv("FASTDEFLATE_ZLIB", "system")
    assert engine.bundling_needs(tmp_path / "elsewhere") == []


def test_cmake_arguments_for_windows_targets(buildtools, monkeypatch):
    zlib_ng = buildtools.zlib_ng
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.delenv("CMAKE_GENERATOR", raising=False)
    for platform_, cmake_platform in [("win-amd64", "x64"), ("win-arm64", "ARM64"),
                                      ("win32", "Win32")]:
        monkeypatch.setattr(zlib_ng.sysconfig, "get_platform", lambda: platform_)
        args = zlib_ng.cmake_arguments()
        assert args[args.index("-A") + 1] == cmake_platform, platform_
        assert "-DCMAKE_MSVC_RUNTIME_LIBRARY=MultiThreadedDLL" in args  # as Python's own
    monkeypatch.setenv("CMAKE_GENERATOR", "Ninja")  # no -A for a single-platform generator
    assert "-A" not in zlib_ng.cmake_arguments()
    monkeypatch.setenv("CMAKE_GENERATOR", "Visual Studio 17 2022")
    assert "-A" in zlib_ng.cmake_arguments()


def test_zlib_ng_inflate_loops_are_built_at_o3(buildtools, monkeypatch, tmp_path):
    """zlib-ng builds Release at -O2; its inflate loops (the chunkset_* sources) get -O3
    through a CMake file included after its project(), whose content is in the key."""
    zlib_ng = buildtools.zlib_ng
    args = zlib_ng.cmake_arguments()
    include = Path(next(a for a in args if a.startswith("-DCMAKE_PROJECT_INCLUDE="))
                   .split("=", 1)[1])
    text = include.read_text()
    assert "chunkset_*.c" in text and "COMPILE_OPTIONS -O3" in text and "NOT MSVC" in text
    key = zlib_ng.build_key()
    changed = tmp_path / include.name
    changed.write_text(text.replace("-O3", "-O2"))
    monkeypatch.setattr(zlib_ng, "INFLATE_FAST_FLAGS", changed)
    assert zlib_ng.build_key() != key  # another content, another build


def source_tree_for_edits(root: Path, edits) -> None:
    """A tree holding each edit's text once per file, between other lines."""
    texts: dict[str, list[str]] = {}
    for edit in edits:
        texts.setdefault(edit.path, ["/* head */\n"]).append(edit.old + "\n/* between */\n")
    for path, parts in texts.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes("".join(parts).encode())


def test_zlib_ng_edits_change_no_file_unless_each_applies_once(buildtools, tmp_path):
    """buildtools/zlib_ng_patches.py: every edit's text must be found exactly once; if one
    is not (other sources), no file is changed and the build says why."""
    patches = buildtools.zlib_ng.zlib_ng_patches
    source_tree_for_edits(tmp_path, patches.EDITS)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    last = patches.EDITS[-1]
    (tmp_path / last.path).write_bytes((tmp_path / last.path).read_bytes().replace(
        last.old.encode(), b"something else"))
    changed = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(patches.PatchFailed, match="found it 0 times"):
        patches.apply(tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == changed
    source_tree_for_edits(tmp_path, patches.EDITS)
    patches.apply(tmp_path)
    for edit in patches.EDITS:
        text = (tmp_path / edit.path).read_text()
        assert edit.new in text and (edit.old not in text or edit.old in edit.new)
    assert len(before) == len({e.path for e in patches.EDITS})


def test_zlib_ng_edits_are_part_of_the_build_key(buildtools, monkeypatch):
    zlib_ng = buildtools.zlib_ng
    patches = zlib_ng.zlib_ng_patches
    key, sources = zlib_ng.build_key(), zlib_ng.source_dir_name()
    first = patches.EDITS[0]
    monkeypatch.setattr(patches, "EDITS", (
        patches.Edit(first.path, first.old, first.new + "/* another edit */"),
        *patches.EDITS[1:]))
    assert zlib_ng.build_key() != key  # other edits: another build
    assert zlib_ng.source_dir_name() != sources  # and other sources


@pytest.mark.test_build
def test_the_bundled_engine_is_the_patched_one() -> None:
    """An unpatched zlib-ng decodes a window of 2^9 bytes in a fixed 32 KiB one; the
    patched one allocates 2^9 + 64 bytes of window (and about 9 KiB of state)."""
    import tracemalloc

    from fastdeflate import _fastdeflate

    if not is_bundled(_fastdeflate):
        pytest.skip("the patched engine is the bundled zlib-ng")
    stock = zlib.compressobj(6, zlib.DEFLATED, -9)
    payload = stock.compress(b"x" * 100) + stock.flush(zlib.Z_SYNC_FLUSH)
    isal_was = _fastdeflate._set_isal_inflate(False)  # zlib-ng's own window, alone
    first = _fastdeflate.Decompressor(window_bits=9)  # leaves its ring an output buffer
    assert first.decompress(payload[:-4]) == b"x" * 100
    tracemalloc.start()
    try:
        decompressor = _fastdeflate.Decompressor(window_bits=9)
        assert decompressor.decompress(payload[:-4]) == b"x" * 100
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        _fastdeflate._set_isal_inflate(isal_was)
    assert held < 12 * 1024, held


def test_cmake_arguments_for_macos_archflags(buildtools, monkeypatch):
    zlib_ng = buildtools.zlib_ng
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setenv("ARCHFLAGS", "-arch arm64 -arch x86_64")
    assert "-DCMAKE_OSX_ARCHITECTURES=arm64;x86_64" in zlib_ng.cmake_arguments()
    monkeypatch.delenv("ARCHFLAGS")
    assert not any("OSX_ARCHITECTURES" in a for a in zlib_ng.cmake_arguments())
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("ARCHFLAGS", "-arch arm64")
    assert not any("OSX" in a or a == "-A" for a in zlib_ng.cmake_arguments())


def test_static_library_found_under_each_platforms_name(buildtools, tmp_path):
    """libz.a (Unix), zlibstatic.lib (MSVC, zlib-compat), z.lib / zlib.lib (others)."""
    for name in ("libz.a", "zlibstatic.lib", "z.lib", "zlib.lib"):
        prefix = tmp_path / name
        (prefix / "lib").mkdir(parents=True)
        assert buildtools.zlib_ng.library_in(prefix) is None
        (prefix / "lib" / name).write_bytes(b"")
        assert buildtools.zlib_ng.library_in(prefix) == prefix / "lib" / name


def test_windows_never_falls_back_to_a_system_zlib(buildtools, monkeypatch, tmp_path):
    engine = buildtools.engine

    def unavailable(cache_dir):
        raise engine.zlib_ng.ZlibNgUnavailable("no network here")

    monkeypatch.setattr(engine.zlib_ng, "build_static", unavailable)
    monkeypatch.setattr(sys, "platform", "win32")
    for choice in ("auto", "bundled"):
        monkeypatch.setenv("FASTDEFLATE_ZLIB", choice)
        with pytest.raises(SystemExit, match="bundled zlib-ng is unavailable: no network"):
            engine.choose(tmp_path)
    monkeypatch.setenv("FASTDEFLATE_ZLIB", "system")
    with pytest.raises(SystemExit, match="Windows has no system zlib"):
        engine.choose(tmp_path)
    monkeypatch.setattr(sys, "platform", "linux")  # elsewhere auto falls back, with a warning
    monkeypatch.setenv("FASTDEFLATE_ZLIB", "auto")
    assert engine.choose(tmp_path) == engine.Engine(name="system zlib", libraries=["z"])


# --- the sdist, and a build from a tree with a stale generated file -------------------------


def python_build(source: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m build`` (isolated, as pip builds) on ``source``, on the system zlib: the
    engine does not matter here, and the system zlib builds in seconds."""
    environ = dict(os.environ, FASTDEFLATE_ZLIB="system")
    return subprocess.run([sys.executable, "-m", "build", *args, str(source)], env=environ,
                          capture_output=True, text=True, timeout=600)


def source_copy(destination: Path) -> Path:
    """A copy of the source tree, without build products (skips where there is none)."""
    if not all((ROOT / name).exists() for name in ("setup.py", "_fastdeflate.pyx",
                                                   "fastdeflate/__init__.py")):
        pytest.skip("needs the source tree (the wheel jobs test a copy of tests/ only)")
    pytest.importorskip("build", reason="the test extra's `build` builds the sdist")
    if sys.platform == "win32":
        pytest.skip("builds on the system zlib, which Windows has not")
    copy = destination / "src"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.so", "*.pyd", "__pycache__", "*.egg-info", ".venv*",
        ".hypothesis", ".pytest_cache", "_fastdeflate.c"))
    return copy


@pytest.fixture(scope="module")
def built_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree in which a wheel was built: it holds the generated C."""
    copy = source_copy(tmp_path_factory.mktemp("built"))
    done = python_build(copy, "--wheel", "--outdir", str(copy.parent / "wheel"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return copy


@pytest.mark.timeout(600)
def test_sdist_ships_the_pyx_never_the_generated_c(tmp_path: Path) -> None:
    copy = source_copy(tmp_path)
    (copy / "_fastdeflate.c").write_text("/* Generated by Cython 3.0.0 */\n")
    done = python_build(copy, "--sdist", "--outdir", str(tmp_path / "dist"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = (tmp_path / "dist").glob("fastdeflate-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    # the C the build splices into zlib-ng's sources ships; no generated or built file does
    patch_source = "buildtools/zlib_ng_build_tree.c"
    parts = {p.relative_to(ROOT).as_posix() for p in (ROOT / "extension").rglob("*.p*")}
    engines = {p.relative_to(ROOT).as_posix() for p in (ROOT / "extension").rglob("*.h")}
    assert len(parts) > 1 and len(engines) > 1  # the parts and the engines' C (seam.h, ...)
    parts |= engines
    assert {"_fastdeflate.pyx", "setup.py", "MANIFEST.in", "buildtools/zlib_ng.py",
            patch_source, *parts} <= names
    assert not [n for n in names if n.endswith((".c", ".so", ".pyd", ".o", ".a"))
                and n != patch_source], names


@pytest.mark.timeout(600)
def test_wheel_ships_every_module_of_the_package(built_source: Path) -> None:
    """Every module under fastdeflate/ is in the wheel, the fallback's parts
    (fastdeflate/_fallback/) too: a package missing from pyproject.toml's list is not."""
    (wheel,) = (built_source.parent / "wheel").glob("fastdeflate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {path.relative_to(built_source).as_posix()
               for path in (built_source / "fastdeflate").rglob("*.py")}
    assert any(name.startswith("fastdeflate/_fallback/") for name in modules)
    assert modules <= names, sorted(modules - names)


@pytest.mark.timeout(600)
def test_extension_declares_it_runs_without_the_gil(built_source: Path) -> None:
    """The generated C makes the module's Py_mod_gil slot Py_MOD_GIL_NOT_USED (Cython's
    freethreading_compatible directive): importing it keeps a free-threaded build's GIL
    off. Without the directive Cython's default there is Py_MOD_GIL_USED."""
    generated = (built_source / "_fastdeflate.c").read_text()
    assert "{Py_mod_gil, __Pyx_FREETHREADING_COMPATIBLE}" in generated
    default = re.search(r"#else\n#define __Pyx_FREETHREADING_COMPATIBLE (\w+)\n#endif\n"
                        r"#define __PYX_DEFAULT_STRING_ENCODING", generated)
    assert default is not None and default.group(1) == "Py_MOD_GIL_NOT_USED"


@pytest.mark.timeout(600)
def test_build_compiles_the_pyx_not_a_stale_generated_c(built_source: Path) -> None:
    """A _fastdeflate.c newer than the .pyx, marked as made by the very Cython the build
    uses (so Cython's own checks would keep it), is regenerated, never compiled."""
    generated = built_source / "_fastdeflate.c"
    header = generated.read_text().splitlines()[0]
    assert "Generated by Cython" in header
    generated.write_text(header + '\n#error "a stale _fastdeflate.c was compiled"\n')
    later = (built_source / "_fastdeflate.pyx").stat().st_mtime + 3600
    os.utime(generated, (later, later))
    done = python_build(built_source, "--wheel", "--outdir", str(built_source.parent / "two"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "a stale _fastdeflate.c" not in generated.read_text()


@pytest.mark.skipif(not sysconfig.get_config_var("Py_GIL_DISABLED"),
                    reason="not a free-threaded CPython: there is no GIL to keep off")
def test_importing_fastdeflate_keeps_the_gil_off() -> None:
    """On a free-threaded build an extension that does not declare Py_MOD_GIL_NOT_USED
    turns the GIL back on (with a RuntimeWarning) when imported."""
    code = ("import sys, fastdeflate, fastdeflate._fastdeflate; "
            "print(fastdeflate.IMPLEMENTATION, sys._is_gil_enabled())")
    environ = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code],
                          env=environ, capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cython", "False"], done.stdout
