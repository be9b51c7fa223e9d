"""Fetch, check and build the bundled ISA-L (Intel's igzip), a static library.

fastdeflate runs ISA-L's deflate at the levels where it reaches stock zlib's bytes
fastest (level 1, see ``extension/engine/seam.h``), and its inflate for whole messages. The C and
assembly sources come from the package index's ``isal`` source distribution (the Python binding, which vendors ISA-L),
pinned by version and sha256, fetched with ``pip download`` at build time and never
committed, like zlib-ng's (``buildtools/zlib_ng.py``), and edited (``PATCHES``). Only
the ``igzip`` and ``crc`` units are built, with ISA-L's own ``Makefile.unx`` (``make``;
x86-64 needs ``nasm``, aarch64 builds its NEON code with the C compiler) or
``Makefile.nmake`` on Windows.

``FASTDEFLATE_ISAL`` chooses: ``auto`` (default) bundles it where it builds, else
every level runs on zlib-ng, with a warning; ``bundled`` insists (the wheels, CI);
``off`` leaves it out. ``FASTDEFLATE_ISAL_SDIST`` may name a local copy of the sdist.
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
from dataclasses import dataclass
from pathlib import Path

from . import versions, zlib_ng

SDIST_NAME = "isal"
# The sdist of the Python binding ``isal`` 1.9.1 vendors ISA-L 2.32.1.
SDIST_VERSION = "1.9.1"
SDIST_FILE = "isal-1.9.1.tar.gz"
SDIST_SHA256 = "d210dca02a689ef2af709d2c62d2daac2e36b5d2fa06e6dc0d023c83fee77e91"
SOURCES_IN_SDIST = "isal-1.9.1/src/isal/isa-l/"
ISAL_VERSION = "2.32.1"
#: The oldest ISA-L the build accepts (checked against the sources: ``version_in_sources``).
MINIMUM_VERSION = "2.32.1"
MINIMUM_REASON = (
    "2.32.0 fixed intel/isa-l#316: on aarch64 the assembly Huffman decoder tested BFINAL "
    "as 64 bits, taking crc_flag with it, and ended a stream at a non-final block whose "
    "end met a full output buffer (wrong output); 2.32.1 fixed a use-after-free in "
    "generate_custom_hufftables, an internal buffer overrun in igzip, inflate's "
    "next_in/avail_in left unreset after the final block and an integer overflow in "
    "isal_write_gzip_header")
CHOICES = ("auto", "bundled", "off")
#: What the library is made of: deflate (igzip) and the checksums it links to (crc).
UNITS = "igzip crc"
BUILD_TIMEOUT = 900


#: fastdeflate's edits to ISA-L, made on the unpacked sources: (file, text, replacement).
#: Each ``text`` must be found exactly once in its file, or no file is changed and the
#: build fails (``PatchFailed``, whatever ``FASTDEFLATE_ISAL`` says). Re-based onto ISA-L
#: 2.32.1 (isal 1.9.1): every text is found once there, in code that 2.32.x left as it
#: was (its edits nearby are casts and ``int`` -> ``uint32_t`` loop counters).
PATCHES = (
    # Level 1's x86-64 match finder (igzip_icf_body_h1_gr_bt.asm: every variant, SSE to
    # AVX-512) took the hash of position 2 of a stream's first message from a register it
    # had not loaded (``tmp2`` on the path for a stream's first byte, ``.write_first_byte``)
    # and wrote position 2 into that bucket: the entry of a random bucket was overwritten
    # and position 2 was never found. Which bucket depended on whatever the register held
    # (an address, say), so the same messages gave other (valid) bytes from one process
    # to the next: with context takeover from the second message on, without it every
    # message (each starts a stream). Found by tests/test_live_states.py failing about one
    # CI run in five. The hash is now taken from the data, as the C code does.
    ("igzip/igzip_icf_body_h1_gr_bt.asm",
     "\tmov\thash, hash2\n\tshr\ttmp2, 16\n\tcompute_hash\thash2, tmp2\n",
     "\tmov\thash, hash2\n\tmov\ttmp2, curr_data\n\tshr\ttmp2, 16\n"
     "\tcompute_hash\thash2, tmp2\n"),
    # Stateful deflate keeps its history at the start of its 64 KiB buffer: before taking
    # in more input it moved the last 32 KiB down *every call* once that much history
    # was there, a 32 KiB memmove per WebSocket message (a quarter of a 1 KB message's
    # instructions). It now moves it down only when the new input does not fit after
    # it. Matching is unchanged (lookback stays within the window; ISA-L's positions
    # do not depend on where the history sits): the same bytes (tests/test_isal.py).
    ("igzip/igzip.c",
     "                        if (state->b_bytes_processed > hist_size) {",
     "                        if (state->b_bytes_processed > hist_size &&\n"
     "                            stream->avail_in > sizeof(state->buffer) - state->b_bytes_valid) {"),
    # Inflate, a whole WebSocket message at a time (``fastdeflate_isal_inflate_message``,
    # added below): zlib refuses a dynamic block whose Huffman codes leave codes unused
    # (incomplete), but for a lone code of length 1 (lengths and distances); ISA-L
    # checked only for over-subscribed codes. Such a block is now refused here too, so
    # that zlib, which decodes every message ISA-L refuses, gives its verdict on it.
    ("igzip/igzip_inflate.c",
     "/* Reads data from the in_buffer and sets the huff code corresponding to that\n"
     " * data */\nstatic int inline setup_dynamic_header(",
     "/* fastdeflate: 1 if zlib refuses a code of these length counts (over-subscribed,\n"
     " * or incomplete but for a single code of length 1 where ``single`` allows it). */\n"
     "static int\nfastdeflate_refused_code(const uint16_t *count, int single)\n{\n"
     "        int left = 1, len, max = 0;\n\n"
     "        for (len = 1; len <= 15; len++) {\n"
     "                left = 2 * left - count[len];\n"
     "                if (left < 0)\n                        return 1;\n"
     "                if (count[len])\n                        max = len;\n"
     "        }\n"
     "        return max != 0 && left > 0 && !(single && max == 1);\n}\n\n"
     "/* Reads data from the in_buffer and sets the huff code corresponding to that\n"
     " * data */\nstatic int inline setup_dynamic_header("),
    # (The same concern.) The code-length code (HCLEN's 19 codes) is refused when zlib
    # would refuse it: over-subscribed or incomplete, a lone length-1 code included.
    ("igzip/igzip_inflate.c",
     "        if (!flag || set_codes(code_huff, CODE_LEN_CODES, code_count))\n",
     "        if (!flag || set_codes(code_huff, CODE_LEN_CODES, code_count) ||\n"
     "            fastdeflate_refused_code(code_count, 0))\n"),
    # (The same concern.) The literal/length and distance codes are refused as zlib's
    # inflate_table() does, a lone code of length 1 allowed in each.
    ("igzip/igzip_inflate.c",
     "        if (set_codes(&lit_and_dist_huff[LIT_LEN], DIST_LEN, dist_count))\n",
     "        if (fastdeflate_refused_code(lit_count, 1) || fastdeflate_refused_code(dist_count, 1))\n"
     "                return ISAL_INVALID_BLOCK;\n\n"
     "        if (set_codes(&lit_and_dist_huff[LIT_LEN], DIST_LEN, dist_count))\n"),
    # The decoder builds a table for a dynamic block that decodes up to three symbols per
    # lookup, and a lighter one (one or two symbols) when the compressed input left is
    # under 2 or 4 KiB, where building the full one costs more than it saves: a third
    # of a 1 KB message's inflate. ISA-L took the lighter one only for the final block
    # of a stream (BFINAL), whose input left is the block's; a whole message's input
    # left is the message's too, so the lighter table is taken on that alone here.
    ("igzip/igzip_inflate.c",
     "        if (state->bfinal && state->avail_in <= SINGLE_SYM_THRESH) {\n"
     "                multisym = SINGLE_SYM_FLAG;\n"
     "        } else if (state->bfinal && state->avail_in <= DOUBLE_SYM_THRESH) {\n",
     "        if (state->avail_in <= SINGLE_SYM_THRESH) {\n"
     "                multisym = SINGLE_SYM_FLAG;\n"
     "        } else if (state->avail_in <= DOUBLE_SYM_THRESH) {\n"),
    # One whole message of raw deflate decoded in one call after ``hist_len`` bytes of
    # history placed right before ``next_out`` (its back-references may reach into them,
    # as far as 2^hist_bits), like isal_inflate_stateless(). FASTDEFLATE_MESSAGE_DONE
    # only where zlib's inflate() would end, given the same input and then the sync tail
    # if ``has_tail`` is 0, between blocks with no bit left: with the tail, every bit
    # read at a block boundary; without it, inside a stored block's header (3 bits 000
    # and at most 7 of padding), which the tail's 00 00 ff ff completes (empty block).
    # Anything else (a final block, input ending elsewhere) returns another code and
    # fastdeflate lets zlib decode the message instead.
    ("igzip/igzip_inflate.c",
     "int\nisal_inflate_stateless(struct inflate_state *state)\n{",
     "#define FASTDEFLATE_MESSAGE_DONE 100\n"
     "#define FASTDEFLATE_NOT_BETWEEN_MESSAGES 101\n"
     "int\nfastdeflate_isal_inflate_message(struct inflate_state *state, uint32_t hist_len,\n"
     "                                 uint32_t hist_bits, int has_tail)\n{\n"
     "        uint8_t *start_out = state->next_out - hist_len;\n"
     "        int ret;\n\n"
     "        state->read_in = 0;\n"
     "        state->read_in_length = 0;\n"
     "        state->block_state = ISAL_BLOCK_NEW_HDR;\n"
     "        state->dict_length = 0;\n"
     "        state->bfinal = 0;\n"
     "        state->crc_flag = 0;\n"
     "        state->crc = 0;\n"
     "        state->total_out = 0;\n"
     "        state->hist_bits = hist_bits;\n"
     "        state->tmp_in_size = 0;\n"
     "        state->tmp_out_valid = 0;\n"
     "        state->tmp_out_processed = 0;\n"
     "        state->write_overflow_lits = 0;\n"
     "        state->write_overflow_len = 0;\n"
     "        state->copy_overflow_length = 0;\n"
     "        state->copy_overflow_distance = 0;\n\n"
     "        for (;;) {\n"
     "                if (state->block_state == ISAL_BLOCK_NEW_HDR) {\n"
     "                        if (state->avail_in == 0 && state->read_in_length <= 10) {\n"
     "                                if (has_tail ? state->read_in_length == 0\n"
     "                                             : state->read_in_length >= 3 &&\n"
     "                                                       (state->read_in & 7) == 0)\n"
     "                                        return FASTDEFLATE_MESSAGE_DONE;\n"
     "                                return FASTDEFLATE_NOT_BETWEEN_MESSAGES;\n"
     "                        }\n"
     "                        ret = read_header(state);\n"
     "                        if (ret)\n"
     "                                return ret;\n"
     "                }\n"
     "                if (state->block_state == ISAL_BLOCK_TYPE0)\n"
     "                        ret = decode_literal_block(state);\n"
     "                else\n"
     "                        ret = decode_huffman_code_block_stateless(state, start_out);\n"
     "                if (state->block_state == ISAL_BLOCK_INPUT_DONE)\n"
     "                        return FASTDEFLATE_NOT_BETWEEN_MESSAGES;\n"
     "                if (ret == ISAL_END_INPUT && state->block_state == ISAL_BLOCK_NEW_HDR)\n"
     "                        continue;\n"
     "                if (ret)\n"
     "                        return ret;\n"
     "        }\n"
     "}\n\n"
     "int\nisal_inflate_stateless(struct inflate_state *state)\n{"),
    # A back-reference past 2^hist_bits is refused in fixed-Huffman blocks too: ISA-L
    # applied the window (``max_dist``, the distance codes it decodes) to the tables it
    # builds for dynamic blocks, and copied a prebuilt table with all 30 distance codes
    # for fixed blocks. RFC 7692 forbids such references; where zlib takes one (within
    # the output of one inflate() call) fastdeflate follows zlib's verdict, so ISA-L
    # must leave every such message to zlib (tests/test_shared_state.py, far back).
    ("igzip/igzip_inflate.c",
     "        memcpy(&state->dist_huff_code, &static_dist_huff_code, sizeof(static_dist_huff_code));\n"
     "#else\n",
     "        memcpy(&state->dist_huff_code, &static_dist_huff_code, sizeof(static_dist_huff_code));\n"
     "        if (state->hist_bits && state->hist_bits < 15) {\n"
     "                /* fastdeflate: the fixed code's distances, but those past the window */\n"
     "                struct huff_code fd_dist_code[DIST_LEN + 2];\n"
     "                uint16_t fd_dist_count[16] = { 0, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };\n"
     "                int fd_i;\n\n"
     "                for (fd_i = 0; fd_i < DIST_LEN + 2; fd_i++)\n"
     "                        fd_dist_code[fd_i].length = 5;\n"
     "                set_codes(fd_dist_code, DIST_LEN + 2, fd_dist_count);\n"
     "                make_inflate_huff_code_dist(&state->dist_huff_code, fd_dist_code, DIST_LEN + 2,\n"
     "                                            fd_dist_count, 2 * state->hist_bits);\n"
     "        }\n"
     "#else\n"),
)


def patches_digest() -> str:
    return hashlib.sha256(repr(PATCHES).encode()).hexdigest()[:10]


class IsalUnavailable(RuntimeError):
    """The bundled ISA-L could not be fetched, checked or built."""


class PatchFailed(versions.PinnedSourcesDefect):
    """An edit of ``PATCHES`` does not apply to the pinned sources: the build fails."""


def version_in_sources(root: Path) -> str:
    """The release of the ISA-L sources at ``root``, from its own version macros
    (``include/isal_api.h``, ISA-L >= 2.32), else from its ``make.inc`` (older ones)."""
    api = root / "include" / "isal_api.h"
    if api.exists():
        text = api.read_text(encoding="utf-8", errors="replace")
        parts = [re.search(rf"#define\s+ISAL_{part}_VERSION\s+(\d+)", text)
                 for part in ("MAJOR", "MINOR", "PATCH")]
        if all(parts):
            return ".".join(match.group(1) for match in parts if match)
    make_inc = root / "make.inc"
    if make_inc.exists():
        match = re.search(r"^version\s*\?=\s*([\d.]+)\s*$",
                          make_inc.read_text(encoding="utf-8", errors="replace"), re.M)
        if match:
            return match.group(1)
    raise IsalUnavailable(f"no ISA-L version in {root} (include/isal_api.h, make.inc)")


def check_version(version: str, where: str) -> str:
    """``version`` (read from the sources at ``where``) if it is the pinned release and
    not older than ``MINIMUM_VERSION``; else the build fails."""
    versions.check_minimum("ISA-L", version, MINIMUM_VERSION, MINIMUM_REASON)
    return versions.check_pinned("ISA-L", version, ISAL_VERSION, where)


def apply_patches(root: Path) -> None:
    """Make every edit of ``PATCHES`` under ``root``, or none (``PatchFailed``)."""
    edited: dict[Path, str] = {}
    for name, text, replacement in PATCHES:
        path = root / name
        source = edited.get(path)
        if source is None:
            source = path.read_text(encoding="utf-8")
        found = source.count(text)
        if found != 1:
            raise PatchFailed(f"cannot patch ISA-L {ISAL_VERSION}: {name} holds "
                              f"{text.strip()!r} {found} times, not once (buildtools/isal.py"
                              ", PATCHES: re-base the edit onto these sources)")
        edited[path] = source.replace(text, replacement)
    for path, source in edited.items():
        path.write_text(source, encoding="utf-8")


@dataclass(frozen=True)
class StaticIsal:
    """A built static ISA-L: its headers and the library to link in."""

    include_dir: Path
    library: Path
    version: str = ISAL_VERSION


def requested() -> str:
    choice = os.environ.get("FASTDEFLATE_ISAL", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise SystemExit(f"FASTDEFLATE_ISAL={choice!r}: expected one of {', '.join(CHOICES)}")
    return choice


def fetch_sdist(cache_dir: Path) -> Path:
    """The pinned sdist: from ``FASTDEFLATE_ISAL_SDIST``, the cache, or ``pip download``."""
    try:
        return zlib_ng.fetch_pinned(cache_dir, SDIST_NAME, SDIST_VERSION, SDIST_FILE,
                                    SDIST_SHA256, os.environ.get("FASTDEFLATE_ISAL_SDIST"))
    except zlib_ng.ZlibNgUnavailable as exc:
        raise IsalUnavailable(str(exc)) from exc


def extract_sources(sdist: Path, dest: Path) -> Path:
    """Unpack only the vendored ISA-L from ``sdist`` into ``dest`` and make fastdeflate's
    edits (``PATCHES``); return its root."""
    root = dest / "isa-l"
    done = dest / "patched"
    if done.exists() and (root / "Makefile.unx").exists():
        return root
    zlib_ng.unpack(sdist, SOURCES_IN_SDIST, root)
    if not (root / "Makefile.unx").exists():
        raise IsalUnavailable(f"{sdist} holds no ISA-L sources under {SOURCES_IN_SDIST}")
    check_version(version_in_sources(root), sdist.name)
    apply_patches(root)
    done.write_text(patches_digest())
    return root


def target_cpu() -> str:
    """ISA-L's ``host_cpu`` for the target: ``x86_64``, ``aarch64`` or another."""
    forced = os.environ.get("FASTDEFLATE_ISAL_HOST_CPU")
    if forced:
        return forced
    plat = sysconfig.get_platform()
    if plat.endswith(("x86_64", "amd64")) or plat.startswith("macosx") and "x86_64" in plat:
        return "x86_64"
    if plat.endswith(("aarch64", "arm64")):
        return "aarch64"
    return platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")


def make_command(platform_name: str, cpu: str, jobs: int, cc: str | None) -> list[str]:
    """ISA-L's own build of ``bin/isa-l.a`` (static, position-independent, its symbols
    hidden) for ``platform_name`` (a ``sys.platform``) and ``cpu``."""
    if platform_name == "win32":
        return ["nmake", "/f", "Makefile.nmake", "isa-l_static.lib"]
    # ISA-L's make.inc reads its flags from CFLAGS_<arch>: "" on Linux x86-64,
    # "aarch64" on aarch64 Linux, "Darwin" on macOS.
    arch = "Darwin" if platform_name == "darwin" else ("aarch64" if cpu == "aarch64" else "")
    flags = "-fPIC -O2 -fvisibility=hidden " + os.environ.get("CFLAGS", "")
    command = ["gmake" if "bsd" in platform_name else "make", "-j", str(jobs),
               "-f", "Makefile.unx", "isa-l.h", "bin/isa-l.a", f"units={UNITS}",
               f"host_cpu={cpu}", f"CFLAGS_{arch}={flags.strip()}"]
    if arch:
        command.append(f"arch={arch}")
    if cc:
        command.append(f"CC={cc}")
    return command


def needs_assembler(cpu: str, platform_name: str) -> str | None:
    """The assembler ISA-L's x86-64 code needs (nasm), or None."""
    return "nasm" if cpu == "x86_64" else None


def build_key(cpu: str) -> str:
    """Names a build (a cache key): the ISA-L release and the sdist it came from (by
    sha256), the target, the units, the edits and the toolchain's environment."""
    options = "\0".join([sysconfig.get_platform(), zlib_ng.target_libc(), cpu, UNITS,
                         SDIST_FILE, SDIST_SHA256, patches_digest(),
                         *(f"{v}={os.environ.get(v, '')}" for v in zlib_ng.TOOLCHAIN_VARIABLES)])
    return f"isal-{ISAL_VERSION}-{cpu}-{hashlib.sha256(options.encode()).hexdigest()[:10]}"


def build_static(cache_dir: Path) -> StaticIsal:
    """Fetch (if needed), check and build ISA-L under ``cache_dir``; reused."""
    # The pin itself first: an ISA-L known to be bad is never fetched nor built.
    versions.check_minimum("ISA-L", ISAL_VERSION, MINIMUM_VERSION, MINIMUM_REASON)
    cpu = target_cpu()
    if cpu not in ("x86_64", "aarch64"):
        raise IsalUnavailable(f"ISA-L's deflate has no code for {cpu} here")
    work = cache_dir / build_key(cpu)
    library = work / ("isa-l_static.lib" if sys.platform == "win32" else "bin/isa-l.a")
    if library.exists() and (work / "include" / "igzip_lib.h").exists():
        return built(work, library)
    assembler = needs_assembler(cpu, sys.platform)
    if assembler and shutil.which(assembler) is None:
        raise IsalUnavailable(f"{assembler} is needed to build ISA-L for {cpu} and was "
                              "not found (Debian/Ubuntu: apt-get install nasm)")
    sources = extract_sources(fetch_sdist(cache_dir),
                              cache_dir / f"src-{SDIST_VERSION}-{patches_digest()}")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(sources, work)
    command = make_command(sys.platform, cpu, os.cpu_count() or 2, os.environ.get("CC"))
    print("fastdeflate: " + " ".join(command), file=sys.stderr, flush=True)
    try:
        subprocess.run(command, check=True, timeout=BUILD_TIMEOUT, cwd=work,
                       stdout=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        raise IsalUnavailable(f"building ISA-L failed: {exc}") from exc
    if not library.exists():
        raise IsalUnavailable(f"ISA-L built, but {library} is missing")
    return built(work, library)


def built(work: Path, library: Path) -> StaticIsal:
    """The build in ``work``, its release read again from the sources it was made of."""
    version = check_version(version_in_sources(work), str(work))
    versions.announce("ISA-L", version, MINIMUM_VERSION)
    return StaticIsal(work / "include", library, version)
