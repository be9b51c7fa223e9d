"""Fetch, check and build the bundled zlib-ng (static, zlib-compat mode).

The C sources come from the package index's ``zlib-ng`` source distribution (the Python
binding, which vendors the zlib-ng C library), pinned by version and sha256, fetched with
``pip download`` at build time and never committed. They are built with CMake as a static,
position-independent library in zlib-compat mode, with every public symbol prefixed
(``fastdeflate_deflate`` ...) so that it can never be confused with a system zlib that is
loaded in the same process.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import versions, zlib_ng_patches

# The sdist of the Python binding `zlib-ng` 1.1.0 vendors the zlib-ng C library 2.3.3.
SDIST_NAME = "zlib-ng"
SDIST_VERSION = "1.1.0"
SDIST_FILE = "zlib_ng-1.1.0.tar.gz"
SDIST_SHA256 = "08a3a8468d4f130e3dc80d28ec42fcc7a878a57dfed616233e791066327d78a3"
SOURCES_IN_SDIST = "zlib_ng-1.1.0/src/zlib_ng/zlib-ng/"
ZLIB_NG_VERSION = "2.3.3"
#: The oldest zlib-ng the build accepts (checked against its headers: ``version_in``).
MINIMUM_VERSION = "2.3.3"
MINIMUM_REASON = (
    "2.3.3 made deflate's output deterministic when a stream is reused after "
    "deflateReset (zlib-ng#2102), which fastdeflate does between messages and on which "
    "its byte-identity and compress-once results rest; 2.2.2 fixed an inflateBack "
    "corruption (#1773), 2.1.5 a checksum failure on inflate with Z_FINISH and no "
    "window (#1602)")
SYMBOL_PREFIX = "fastdeflate_"

FETCH_TIMEOUT = 600  # seconds
BUILD_TIMEOUT = 1800


class ZlibNgUnavailable(RuntimeError):
    """The bundled zlib-ng could not be fetched, checked or built."""


def version_in(header: Path) -> str:
    """The release a zlib-ng header says (``ZLIBNG_VERSION``): its ``zlib.h`` installed, or
    ``zlib.h.in`` / ``zlib-ng.h.in`` in the sources. A suffix (``"2.3.0.devel"``) is cut."""
    text = header.read_text(encoding="utf-8", errors="replace") if header.exists() else ""
    match = re.search(r'#define\s+ZLIBNG_VERSION\s+"(\d+(?:\.\d+)*)', text)
    if not match:
        raise ZlibNgUnavailable(f"no ZLIBNG_VERSION in {header}")
    return match.group(1)


def check_version(version: str, where: str) -> str:
    """``version`` (read at ``where``) if it is the pinned release and not older than
    ``MINIMUM_VERSION``; else the build fails."""
    versions.check_minimum("zlib-ng", version, MINIMUM_VERSION, MINIMUM_REASON)
    return versions.check_pinned("zlib-ng", version, ZLIB_NG_VERSION, where)


@dataclass(frozen=True)
class StaticZlibNg:
    """A built static zlib-ng: headers to include and the library to link in."""

    include_dir: Path
    library: Path
    version: str = ZLIB_NG_VERSION


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sdist(path: Path, file: str = SDIST_FILE, sha256: str = SDIST_SHA256) -> Path:
    """Return ``path`` if it is the pinned sdist ``file`` (by sha256), else raise."""
    actual = sha256_of(path)
    if actual != sha256:
        raise ZlibNgUnavailable(f"{path}: sha256 {actual} is not the pinned {file} ({sha256})")
    return path


def nested_pip_env() -> dict[str, str]:
    """This environment, less what the running PEP 517 frontend set for our own backend
    (else the nested pip would look for zlib-ng's build backend in our backend path)."""
    return {key: value for key, value in os.environ.items()
            if not key.startswith(("_PYPROJECT_HOOKS_", "PEP517_"))}


def fetch_sdist(cache_dir: Path) -> Path:
    """The pinned sdist: from ``FASTDEFLATE_ZLIB_NG_SDIST``, the cache, or ``pip download``."""
    return fetch_pinned(cache_dir, SDIST_NAME, SDIST_VERSION, SDIST_FILE, SDIST_SHA256,
                        os.environ.get("FASTDEFLATE_ZLIB_NG_SDIST"))


def fetch_pinned(cache_dir: Path, name: str, version: str, file: str, sha256: str,
                 given: str | None) -> Path:
    """A pinned sdist (``name==version``, ``file``, by ``sha256``): ``given`` (a local
    copy), the cache, or ``pip download`` into the cache."""
    if given:
        return check_sdist(Path(given), file, sha256)
    cached = cache_dir / file
    if cached.exists():
        return check_sdist(cached, file, sha256)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        requirements = Path(tmp, "requirements.txt")
        requirements.write_text(f"{name}=={version} --hash=sha256:{sha256}\n")
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", name,
            "--require-hashes", "-r", str(requirements), "-d", tmp,
            "--disable-pip-version-check",
        ]
        try:
            subprocess.run(command, check=True, timeout=FETCH_TIMEOUT, env=nested_pip_env())
        except (OSError, subprocess.SubprocessError) as exc:
            raise ZlibNgUnavailable(f"cannot download {file}: {exc}") from exc
        downloaded = Path(tmp, file)
        if not downloaded.exists():
            raise ZlibNgUnavailable(f"pip download did not produce {file}")
        check_sdist(downloaded, file, sha256)
        os.replace(downloaded, cached)
    return cached


def unpack(sdist: Path, prefix: str, root: Path) -> None:
    """Unpack the files under ``prefix`` in ``sdist`` (a .tar.gz) into ``root``, afresh
    (never outside it; executable bits kept)."""
    shutil.rmtree(root, ignore_errors=True)
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            if not member.name.startswith(prefix) or not (member.isfile() or member.isdir()):
                continue
            relative = member.name[len(prefix):]
            if not relative or ".." in Path(relative).parts:
                continue
            target = root / relative
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            assert source is not None
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
            if member.mode & 0o111:
                target.chmod(0o755)


def extract_sources(sdist: Path, dest: Path) -> Path:
    """Unpack only the vendored C library from ``sdist`` into ``dest``, make fastdeflate's
    edits (``zlib_ng_patches``); return its root."""
    root = dest / "zlib-ng"
    done = dest / "patched"
    if done.exists() and (root / "CMakeLists.txt").exists():
        return root
    unpack(sdist, SOURCES_IN_SDIST, root)
    if not (root / "CMakeLists.txt").exists():
        raise ZlibNgUnavailable(f"{sdist} holds no zlib-ng sources under {SOURCES_IN_SDIST}")
    check_version(version_in(root / "zlib.h.in"), sdist.name)
    try:
        zlib_ng_patches.apply(root)
    except (OSError, zlib_ng_patches.PatchFailed) as exc:
        raise ZlibNgUnavailable(f"cannot patch zlib-ng: {exc}") from exc
    done.write_text(zlib_ng_patches.digest())
    return root


def find_cmake() -> str:
    """The cmake program: on PATH, or from the ``cmake`` package of the build environment."""
    found = shutil.which("cmake")
    if found:
        return found
    try:
        import cmake  # type: ignore[import-not-found]
    except ImportError:
        raise ZlibNgUnavailable("cmake is needed to build zlib-ng and was not found") from None
    return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")


#: Compiles zlib-ng's inflate loops at -O3 (the rest at zlib-ng's -O2); see the file.
INFLATE_FAST_FLAGS = Path(__file__).resolve().parent / "zlib_ng_inflate_fast.cmake"


def cmake_arguments() -> list[str]:
    """Configure options: static, PIC, zlib-compat, prefixed symbols, portable SIMD."""
    args = [
        "-DCMAKE_BUILD_TYPE=Release",
        # zlib-ng's own option: zlib's 4 bytes per pending symbol instead of 5 (LIT_MEM:
        # 16 KiB more per compressor at memLevel 8 for "1% to 2%" of speed). Its other
        # settings (HASH_SIZE, gz buffers) are unused: zlib_ng_patches sizes the table.
        "-DWITH_REDUCED_MEM=ON",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DZLIB_COMPAT=ON",
        f"-DZLIB_SYMBOL_PREFIX={SYMBOL_PREFIX}",
        "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
        "-DBUILD_TESTING=OFF",
        "-DWITH_GTEST=OFF",
        "-DWITH_GZFILEOP=OFF",
        "-DWITH_NATIVE_INSTRUCTIONS=OFF",  # wheels run on other CPUs: runtime dispatch
        "-DWITH_RUNTIME_CPU_DETECTION=ON",
        "-DCMAKE_INSTALL_LIBDIR=lib",
        "-DCMAKE_INSTALL_INCLUDEDIR=include",
        f"-DCMAKE_PROJECT_INCLUDE={INFLATE_FAST_FLAGS.as_posix()}",
        # names the included file's content in the build key too
        f"-DFASTDEFLATE_INFLATE_FAST_FLAGS={sha256_of(INFLATE_FAST_FLAGS)[:10]}",
    ]
    if sys.platform == "darwin":
        archs = os.environ.get("ARCHFLAGS", "").split("-arch")[1:]
        if archs:
            args.append("-DCMAKE_OSX_ARCHITECTURES=" + ";".join(a.strip() for a in archs))
    if sys.platform == "win32":
        generator = os.environ.get("CMAKE_GENERATOR", "")
        platform = {"win-amd64": "x64", "win-arm64": "ARM64", "win32": "Win32"}.get(
            sysconfig.get_platform())
        if platform and (not generator or "Visual Studio" in generator):
            args += ["-A", platform]
        args.append("-DCMAKE_MSVC_RUNTIME_LIBRARY=MultiThreadedDLL")  # as Python's own
    return args


#: Environment variables that change what the build produces or for which target
#: (CMake and the compiler read them; cibuildwheel sets some for cross builds).
TOOLCHAIN_VARIABLES = (
    "CC", "CFLAGS", "ARCHFLAGS", "_PYTHON_HOST_PLATFORM", "MACOSX_DEPLOYMENT_TARGET",
    "SDKROOT", "CMAKE_GENERATOR", "CMAKE_GENERATOR_PLATFORM", "CMAKE_GENERATOR_TOOLSET",
    "CMAKE_TOOLCHAIN_FILE", "CMAKE_OSX_ARCHITECTURES",
)


def target_libc() -> str:
    """The C library of the target: ``glibc2.28``, ``musl`` (musllinux), or ``""`` off
    Linux. A glibc build must not be linked into a musl wheel, nor a newer glibc's into
    an older manylinux one."""
    if not sysconfig.get_platform().startswith("linux"):
        return ""
    host = " ".join(str(sysconfig.get_config_var(name) or "")
                    for name in ("HOST_GNU_TYPE", "MULTIARCH", "EXT_SUFFIX"))
    if "musl" in host:
        return "musl"
    name, version = platform.libc_ver()
    return f"{name}{version}" if name else "libc-unknown"


def source_dir_name() -> str:
    """Where the patched sources are unpacked: one directory per set of edits."""
    return f"src-{SDIST_VERSION}-{zlib_ng_patches.digest()}"


def build_key() -> str:
    """Names a build for this target and these options (a cache key): the platform (with
    its architecture), the C library, the configure options and the toolchain's
    environment."""
    target = [sysconfig.get_platform(), target_libc()]
    toolchain = [f"{name}={os.environ.get(name, '')}" for name in TOOLCHAIN_VARIABLES]
    host = str(sysconfig.get_config_var("HOST_GNU_TYPE") or "")
    options = "\0".join(cmake_arguments() + toolchain + [host, zlib_ng_patches.digest()])
    digest = hashlib.sha256(options.encode()).hexdigest()[:10]
    return "-".join([ZLIB_NG_VERSION, *filter(None, target), digest])


def library_in(prefix: Path) -> Path | None:
    for name in ("libz.a", "zlibstatic.lib", "z.lib", "zlib.lib"):
        candidate = prefix / "lib" / name
        if candidate.exists():
            return candidate
    return None


def build_static(cache_dir: Path) -> StaticZlibNg:
    """Fetch (if needed), check, build and install zlib-ng under ``cache_dir``; reused."""
    # The pin itself first: a zlib-ng known to be bad is never fetched nor built.
    versions.check_minimum("zlib-ng", ZLIB_NG_VERSION, MINIMUM_VERSION, MINIMUM_REASON)
    work = cache_dir / build_key()
    prefix = work / "install"
    library = library_in(prefix)
    if library is not None and (prefix / "include" / "zlib.h").exists():
        return installed(prefix, library)
    sources = extract_sources(fetch_sdist(cache_dir), cache_dir / source_dir_name())
    cmake = find_cmake()
    build_dir = work / "build"
    shutil.rmtree(build_dir, ignore_errors=True)
    jobs = str(os.cpu_count() or 2)
    steps = [
        [cmake, "-S", str(sources), "-B", str(build_dir), *cmake_arguments(),
         f"-DCMAKE_INSTALL_PREFIX={prefix}"],
        [cmake, "--build", str(build_dir), "--config", "Release", "--parallel", jobs],
        [cmake, "--install", str(build_dir), "--config", "Release", "--prefix", str(prefix)],
    ]
    for step in steps:
        print("fastdeflate: " + " ".join(step), file=sys.stderr, flush=True)
        try:
            subprocess.run(step, check=True, timeout=BUILD_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ZlibNgUnavailable(f"building zlib-ng failed: {exc}") from exc
    library = library_in(prefix)
    if library is None or not (prefix / "include" / "zlib.h").exists():
        raise ZlibNgUnavailable(f"zlib-ng built, but no static library in {prefix / 'lib'}")
    return installed(prefix, library)


def installed(prefix: Path, library: Path) -> StaticZlibNg:
    """The installed build, its release read from the header the extension includes."""
    version = check_version(version_in(prefix / "include" / "zlib.h"), str(prefix))
    versions.announce("zlib-ng", version, MINIMUM_VERSION)
    return StaticZlibNg(prefix / "include", library, version)
