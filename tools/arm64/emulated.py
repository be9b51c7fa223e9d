#!/usr/bin/env python3
"""fastdeflate on aarch64, here: cross-built, run under qemu's user-mode emulation.

The wheels for arm64 compile code nothing here runs otherwise: zlib-ng's NEON and ARMv8
code (``slide_hash_neon.c`` among the files the build patches) and the extension for an
aarch64 CPython. With Debian's packages this builds both and runs them:

    python tools/arm64/emulated.py sysroot ROOT   # Debian's arm64 CPython 3.11 into ROOT
    python tools/arm64/emulated.py build ROOT OUT # zlib-ng + extension -> OUT/fastdeflate
    python tools/arm64/emulated.py digest         # payload digests (run on both machines)
    python tools/arm64/emulated.py compare A B    # zlib-ng's levels: the same on both

``sysroot`` needs ``dpkg --add-architecture arm64`` and ``apt-get update`` done;
``build`` needs ``gcc-aarch64-linux-gnu``, CMake and Cython; running the result needs
``qemu-user`` (``QEMU_LD_PREFIX=ROOT ROOT/usr/bin/python3.11``, with binfmt_misc, or
``qemu-aarch64 -L ROOT ROOT/usr/bin/python3.11``). ``.ci/steps/45-arm64.sh`` does it all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
TOOLCHAIN = Path(__file__).resolve().parent / "toolchain.cmake"
CC = "aarch64-linux-gnu-gcc"
PYTHON = "python3.11"
#: Debian's packages of CPython 3.11 for arm64 and the libraries it loads.
PACKAGES = (
    "python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib",
    "libpython3.11-dev", "libc6", "libexpat1", "zlib1g", "libffi8", "libssl3",
    "libbz2-1.0", "liblzma5", "libgcc-s1", "libstdc++6", "libsqlite3-0", "libncursesw6",
    "libtinfo6", "libreadline8", "libuuid1", "libdb5.3", "libgdbm6", "libnsl2",
    "libtirpc3", "libcrypt1", "libgssapi-krb5-2", "libkrb5-3", "libk5crypto3",
    "libkrb5support0", "libcom-err2", "libkeyutils1",
)


def sysroot(root: Path) -> None:
    """Download Debian's arm64 CPython 3.11 (and what it loads) and unpack it in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as debs:
        subprocess.run(["apt-get", "download", *(f"{p}:arm64" for p in PACKAGES)],
                       cwd=debs, check=True, stdout=subprocess.DEVNULL)
        for deb in sorted(Path(debs).glob("*.deb")):
            subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
    if not (root / "usr" / "bin" / PYTHON).exists():
        raise SystemExit(f"no {PYTHON} in {root}")


def build(root: Path, out: Path) -> Path:
    """Cross-build the bundled zlib-ng (patched as for the wheels) and the extension for
    aarch64 against ``root``'s CPython; ``out/fastdeflate`` is the package, ready to
    import there. Returns the extension's path."""
    sys.path.insert(0, str(ROOT))
    from Cython.Build import cythonize

    from buildtools import isal, test_build, zlib_ng
    from buildtools.engine import private_link_args, version_number

    os.environ["CMAKE_TOOLCHAIN_FILE"] = str(TOOLCHAIN)  # also part of the cache key
    built = zlib_ng.build_static(ROOT / "build" / "zlib-ng-aarch64")
    # ISA-L's aarch64 code (NEON, and its C and .S files) with the cross compiler
    os.environ.update(CC=CC, AR="aarch64-linux-gnu-ar", FASTDEFLATE_ISAL_HOST_CPU="aarch64")
    with_isal = isal.build_static(ROOT / "build" / "isal-aarch64")
    package = out / "fastdeflate"
    shutil.rmtree(package, ignore_errors=True)
    shutil.copytree(ROOT / "fastdeflate", package,
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "_fastdeflate.pyx"
        shutil.copy(ROOT / "_fastdeflate.pyx", source)
        shutil.copytree(ROOT / "extension", Path(tmp) / "extension")  # its parts
        (Path(tmp) / "fastdeflate").mkdir()  # and the compress-once policy it includes
        shutil.copy(ROOT / "fastdeflate" / "_compress_once_policy.py", Path(tmp) / "fastdeflate")
        cythonize([str(source)], force=True, quiet=True,
                  include_path=[str(test_build.include_dir(Path(tmp) / "extension"))],
                  compiler_directives={"language_level": "3"})
        extension = package / "_fastdeflate.cpython-311-aarch64-linux-gnu.so"
        include = root / "usr" / "include"
        subprocess.run([
            CC, "-shared", "-fPIC", "-O2", "-fno-strict-overflow", "-DNDEBUG",
            "-DZLIB_CONST", "-DFASTDEFLATE_BUNDLED_ZLIB_NG=1", "-DFASTDEFLATE_BUNDLED_ISAL=1",
            f'-DFASTDEFLATE_ISAL_VERSION="{with_isal.version}"',
            f"-DFASTDEFLATE_ISAL_VERSION_NUM={version_number(with_isal.version)}",
            f"-DFASTDEFLATE_ISAL_MINIMUM={version_number(isal.MINIMUM_VERSION)}",
            *(f"-D{name}={value}" for name, value in test_build.define_macros()),
            f"-I{built.include_dir}", f"-I{with_isal.include_dir}", f"-I{include / PYTHON}",
            "-idirafter", str(include),
            str(source.with_suffix(".c")), str(built.library), str(with_isal.library),
            *private_link_args("linux"), "-o", str(extension),
        ], check=True)
    return extension


def digest() -> dict[str, str]:
    """sha256 of the payloads fastdeflate makes of the built-in JSON messages at every
    level and window, memLevels 1, 5, 8 and 9, with and without context takeover, each
    decompressed again and checked: the same engine must give the same bytes on every
    machine."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fastdeflate
    from fdbench import payloads

    messages = [m for size in (1024, 16384) for m in payloads.messages("varying", size)[:4]]
    result = {"machine": os.uname().machine, "engine": fastdeflate.ENGINE,
              "engines": " / ".join(sorted(set(fastdeflate.engines().values()))),
              "isal levels": " ".join(str(level) for level, name
                                      in fastdeflate.engines().items()
                                      if name.startswith("ISA-L"))}
    for level in range(-1, 10):
        h = hashlib.sha256()
        for window in range(9, 16):
            for mem_level in (1, 5, 8, 9):
                for nct in (False, True):
                    c = fastdeflate.Compressor(level=level, window_bits=window,
                                               mem_level=mem_level, no_context_takeover=nct)
                    d = fastdeflate.Decompressor(window_bits=window, no_context_takeover=nct)
                    for message in messages:
                        payload = c.compress(message)
                        if d.decompress(payload) != message:
                            raise SystemExit(f"level {level} window {window}: round trip")
                        h.update(payload)
        result[f"level {level}"] = h.hexdigest()
    return result


def compare(arm: dict[str, str], x86: dict[str, str]) -> int:
    """0 if every zlib-ng level gives the same payloads on both machines. ISA-L's levels
    differ: its aarch64 code is another implementation (other matches, same format);
    tests/test_isal.py checks there that they are python-isal's aarch64 bytes."""
    failed = 0
    isal_levels = {int(level) for level in arm.get("isal levels", "").split()}
    for key in sorted(k for k in x86 if k.startswith("level ")):
        same = arm.get(key) == x86[key]
        isal = int(key.split()[1]) in isal_levels
        print(f"{key}: {'the same' if same else 'differ'}"
              + (" (ISA-L: its own aarch64 code)" if isal else ""))
        failed += not same and not isal
    if arm.get("engines") != x86.get("engines"):
        print(f"engines differ: {arm.get('engines')} / {x86.get('engines')}")
        failed += 1
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["sysroot"] and len(argv) == 2:
        sysroot(Path(argv[1]))
    elif argv[:1] == ["build"] and len(argv) == 3:
        print(build(Path(argv[1]), Path(argv[2])))
    elif argv == ["digest"]:
        print(json.dumps(digest(), indent=1))
    elif argv[:1] == ["compare"] and len(argv) == 3:
        return compare(json.loads(Path(argv[1]).read_text()),
                       json.loads(Path(argv[2]).read_text()))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
