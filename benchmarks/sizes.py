#!/usr/bin/env python3
"""Bytes on the wire, fastdeflate against stock zlib: ``python benchmarks/sizes.py``.

Writes ``sizes.md`` to the results folder: each library at its own settings, and every
level at windows 15 and 12 (see ``fdbench/sizes.py``). No timings: a few seconds, and the
same bytes on every run with the same engines (``tests/test_sizes.py`` checks it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import report, sizes  # noqa: E402


def document(info: dict[str, str]) -> str:
    return "\n\n".join([
        "# fastdeflate benchmarks — bytes on the wire",
        "`python benchmarks/sizes.py`. Machine and versions:",
        report.machine_markdown(info),
        "## Each library at its own settings",
        sizes.table(sizes.library_rows()),
        f"Payload bytes of the first {sizes.MESSAGES_PER_ROW} varying JSON messages of each "
        "size (the built-in payloads; 16 of 64 KB) through one compressor, as each library's server "
        "compresses by default; stock = stdlib zlib as the libraries use it (a sync "
        "flush per message, its 00 00 ff ff removed), fastdeflate = "
        "`fastdeflate.Compressor` at the same settings. Ratio > 1: fastdeflate sends more.",
        "## Every level, context takeover",
        sizes.table(sizes.level_rows()),
        "## aiohttp's drop-in backends",
        backends_table(sizes.backend_rows()),
        "`aiohttp.set_zlib_backend(module)` makes aiohttp compress with that module at its "
        "own `Z_BEST_SPEED` (ISA-L's is level 0); stock = stdlib zlib at level 1, as aiohttp "
        "runs by default; window 15, context takeover. Ratio > 1: the backend sends more.",
    ]) + "\n"


def backends_table(rows: list[sizes.Row]) -> str:
    if not rows:
        return "(neither zlib-ng nor isal is installed)"
    return report.markdown_table(
        ["backend", "level", "size", "message bytes", "stock bytes", "backend bytes",
         "backend / stock"],
        [[r.what, str(r.settings.level), sizes.payloads.size_label(r.size), f"{r.original:,}",
          f"{r.stock:,}", f"{r.fastdeflate:,}", f"{r.ratio:.3f}"] for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results",
                        help="results folder (default: benchmarks/results)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    text = document(report.machine_info())
    path = args.out / "sizes.md"
    path.write_text(text, encoding="utf-8")
    print(text)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
