"""Markdown output: the machine and versions, and tables."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Protocol, Sequence

__all__ = ["markdown_table", "machine_info", "machine_markdown", "fmt_us", "fmt_ratio", "fmt_pct",
           "fmt_size_ratio", "fmt_us_size", "clock_label", "checkout_commit", "write_results"]

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
    return f"{ratio:.0f}x" if ratio >= 100 else f"{ratio:.2f}x"


def fmt_pct(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


def fmt_size_ratio(ratio: float) -> str:
    """A ratio of bytes (closer to 1 than speeds are): three decimals."""
    return f"{ratio:.3f}x"


class _Measured(Protocol):
    def us(self, attr: str = "cpu") -> float: ...

    def size_fraction(self) -> float: ...


def fmt_us_size(series: _Measured, attr: str = "cpu") -> str:
    """A codec cell: median µs per cycle, compressed size as a fraction in parentheses."""
    return f"{fmt_us(series.us(attr))} ({fmt_pct(series.size_fraction())})"


def clock_label(attr: str) -> str:
    """What ``attr`` ("cpu" or "wall") measures, for a legend."""
    return "process CPU" if attr == "cpu" else "wall-clock"


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

    info = {
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": f"{_cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} "
        f"{platform.release()}",
        "load average (1, 5, 15 min) at start": load_now(),
        "Python": f"{platform.python_implementation()} {sys.version.split()[0]}",
        "commit": checkout_commit(),
        "fastdeflate": f"{fastdeflate.__version__} ({fastdeflate.IMPLEMENTATION}), "
        f"{getattr(fastdeflate, 'ENGINE', 'zlib ' + fastdeflate.ZLIB_VERSION)}",
        "engines (window 15, memLevel 8)": engines_summary(fastdeflate),
        "stdlib zlib": f"{zlib.ZLIB_RUNTIME_VERSION} (built against {zlib.ZLIB_VERSION})",
    }
    for dist in LIBRARIES:
        info[dist] = _version(dist)
    generated = _generated_by()
    if generated:
        installed = info["Cython"]
        info["Cython"] = (f"{installed} here; " if installed != "not installed" else "") + (
            f"the checkout's _fastdeflate.c: {generated}"
        )
    return info


def engines_summary(module: object, window_bits: int = 15, mem_level: int = 8) -> str:
    """Which engine runs which level in ``module`` (fastdeflate or an implementation) with
    these parameters: "level 1: ISA-L 2.32.1; others: zlib-ng 2.3.3 (zlib-compat)"
    (several levels on one engine: "levels 1, 2: ...")."""
    main = getattr(module, "ENGINE", "?")
    engines = getattr(module, "engines", None)
    by_engine: dict[str, list[int]] = {}
    for level, name in (engines(window_bits, mem_level) if engines else {}).items():
        if name != main:
            by_engine.setdefault(name.rsplit(" level ", 1)[0], []).append(level)
    parts = [f"level{'s' if len(levels) > 1 else ''} {', '.join(map(str, levels))}: {name}"
             for name, levels in by_engine.items()]
    return "; ".join([*parts, f"{'others' if parts else 'every level'}: {main}"])


def checkout_commit() -> str:
    """The commit of the checkout the benchmarks run from ("+ changes" if its tracked files
    differ from it, results and docs aside: a run written while another runs), or "not a
    git checkout"."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()

    try:
        commit = git("rev-parse", "--short=7", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                      ":!benchmarks/results", ":!docs", ":!README.md")
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    return commit + (" + changes" if changed else "")


def _generated_by() -> str:
    """'Generated by Cython X' from the checkout's _fastdeflate.c, if there is one."""
    source = Path(__file__).resolve().parents[2] / "_fastdeflate.c"
    try:
        with open(source, encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        return ""
    return first.strip().strip("/* ").strip() if "Cython" in first else ""


def machine_markdown(info: dict[str, str], load_end: str = "") -> str:
    rows = [(k, v) for k, v in info.items()]
    if load_end:
        rows.append(("load average at end", load_end))
    return markdown_table(("", "value"), rows)


def load_now() -> str:
    """The 1, 5 and 15 minute load averages, or "n/a" where there are none (Windows has
    no ``os.getloadavg``; elsewhere it raises OSError when unobtainable)."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


def write_results(path: Path, title: str, command: str, sections: Sequence[str]) -> str:
    """Write a results file as ``run.py`` does: the title, the command that made it, the
    machine and versions (with the commit), then ``sections``; returns the text."""
    text = "\n\n".join([f"# fastdeflate benchmarks — {title}",
                        f"`{command}`. Machine and versions:",
                        machine_markdown(machine_info(), load_now()), *sections]) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
