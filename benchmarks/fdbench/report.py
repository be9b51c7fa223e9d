"""Markdown output: the machine and versions, and tables."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import sys
import zlib
from typing import Sequence

__all__ = ["markdown_table", "machine_info", "machine_markdown", "fmt_us", "fmt_ratio", "fmt_pct"]

LIBRARIES = ("websockets", "aiohttp", "wsproto", "tornado", "autobahn", "zlib-ng", "isal",
             "Cython", "tqdm", "matplotlib", "psutil")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table; the first column left-aligned, others right."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    for row in cells:
        if len(row) != len(header):
            raise ValueError(f"row {row!r} has {len(row)} cells, header has {len(header)}")
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        parts = [
            row[i].ljust(widths[i]) if i == 0 else row[i].rjust(widths[i])
            for i in range(len(row))
        ]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 1) + "-") if i == 0 else ("-" * (w + 1) + ":") for i, w in enumerate(widths)
    ) + "|"
    return "\n".join([line(cells[0]), rule] + [line(row) for row in cells[1:]])


def fmt_us(us: float) -> str:
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}" if us >= 10 else f"{us:.2f}"


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.2f}x"


def fmt_pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, str]:
    """Where and with what the benchmark ran (nothing is imported that would skew it)."""
    import fastdeflate

    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    info = {
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": f"{_cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} "
        f"{platform.release()}",
        "load average (1, 5, 15 min) at start": load,
        "Python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "fastdeflate": f"{fastdeflate.__version__} ({fastdeflate.IMPLEMENTATION}), "
        f"{getattr(fastdeflate, 'ENGINE', 'zlib ' + fastdeflate.ZLIB_VERSION)}",
        "stdlib zlib": f"{zlib.ZLIB_RUNTIME_VERSION} (built against {zlib.ZLIB_VERSION})",
    }
    for dist in LIBRARIES:
        info[dist] = _version(dist)
    return info


def machine_markdown(info: dict[str, str], load_end: str = "") -> str:
    rows = [(k, v) for k, v in info.items()]
    if load_end:
        rows.append(("load average at end", load_end))
    return markdown_table(("", "value"), rows)


def load_now() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"
