#!/usr/bin/env python3
"""The same input, the same bytes, on every x86-64 CPU (issue 29).

Prints one JSON object: for each setting (level -1..9, window 15/12/10, with and without
context takeover) the sha256 of the payloads fastdeflate makes of 20 built-in JSON
messages (1 and 16 KB) and 24 of the wider corpus's shapes, each decompressed again and
checked. Run it natively and under
``qemu-x86_64 -cpu MODEL`` (user-mode emulation: ISA-L's and zlib-ng's dispatch see the
emulated CPU's CPUID) and compare the outputs:

    python tools/cpu_models/digest.py > native.json
    qemu-x86_64 -cpu Nehalem-v2 "$(command -v python)" tools/cpu_models/digest.py > n.json
    python tools/cpu_models/digest.py compare native.json n.json
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
WINDOWS = (15, 12, 10)


def messages() -> list[bytes]:
    """The built-in JSON updates (1 and 16 KB), then 1 and 8 KB of every shape of the
    wider corpus (text, HTML, CSV, logs, binary records...: tests/test_sizes.py's)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from fdbench import corpus, payloads

    pool = payloads.varying(1024, 16, seed=29) + payloads.varying(16384, 4, seed=29)
    for shape in corpus.SHAPES:
        pool += corpus.stream(shape, 1024, 2) + corpus.stream(shape, 8192, 1)
    return pool


def digest() -> dict[str, str]:
    import fastdeflate

    pool = messages()
    result = {"engines": " / ".join(sorted(set(fastdeflate.engines().values())))}
    for level in range(-1, 10):
        for window in WINDOWS:
            for nct in (False, True):
                c = fastdeflate.Compressor(level=level, window_bits=window,
                                           no_context_takeover=nct)
                d = fastdeflate.Decompressor(window_bits=window, no_context_takeover=nct)
                h = hashlib.sha256()
                for message in pool:
                    payload = c.compress(message)
                    if d.decompress(payload) != message:
                        raise SystemExit(f"level {level} window {window}: round trip")
                    h.update(payload)
                result[f"level {level} window {window}{' nct' if nct else ''}"] = (
                    h.hexdigest()[:16])
    return result


def compare(a: dict[str, str], b: dict[str, str]) -> int:
    differ = [k for k in a if a[k] != b.get(k)]
    for key in differ:
        print(f"differ: {key}")
    print(f"{len(a) - len(differ)} of {len(a)} the same")
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:
        sys.exit(compare(json.loads(Path(sys.argv[2]).read_text()),
                         json.loads(Path(sys.argv[3]).read_text())))
    print(json.dumps(digest(), indent=0))
