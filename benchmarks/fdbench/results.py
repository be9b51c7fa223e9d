"""Reading a committed results file (``benchmarks/results/*.md``) back.

The docs take their figures from these files (``tools/render_docs.py``) and the tests
check them against fresh measurements (``tests/test_sizes.py``): both read them here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Results", "Table"]

Table = list[dict[str, str]]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tables(text: str) -> list[tuple[list[str], Table]]:
    """Every Markdown table: (header, rows as {column: cell})."""
    return [(header, [dict(zip(header, row)) for row in rows]) for header, rows in _grids(text)]


def _grids(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table: (header, rows as lists of cells)."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.fullmatch(r"\|[-:| ]+\|?", lines[i + 1].strip()):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            found.append((header, rows))
        else:
            i += 1
    return found


@dataclass
class Results:
    path: Path
    command: str
    machine: dict[str, str]
    tables: list[tuple[list[str], Table]] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # the charts it shows (file names)
    grids: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> "Results":
        text = path.read_text(encoding="utf-8")
        command = re.search(r"^`(python [^`]+)`", text, re.M)
        if command is None:
            raise ValueError(f"{path}: no command line")
        tables = _tables(text)
        machine = {row[""]: row["value"] for header, rows in tables if header == ["", "value"]
                   for row in rows}
        images = re.findall(r"!\[[^\]]*\]\(([\w.-]+\.png)\)", text)
        return cls(path, command.group(1), machine, tables, images, _grids(text))

    @property
    def date(self) -> str:
        return self.machine["date (UTC)"]

    @property
    def commit(self) -> str:
        return self.machine.get("commit", "not recorded")

    @property
    def engine(self) -> str:
        """fastdeflate's engine in the run, as ``fastdeflate.ENGINE`` says it."""
        return self.machine["fastdeflate"].split("), ", 1)[1]

    @property
    def engines(self) -> str:
        """Which engine ran which level (``report.engines_summary``), if recorded."""
        return self.machine.get("engines (window 15, memLevel 8)", "not recorded")

    @property
    def stdlib_zlib(self) -> str:
        return self.machine["stdlib zlib"].split()[0]

    def table(self, *columns: str) -> Table:
        """The rows of every table whose header starts with ``columns``."""
        return [row for header, rows in self.tables
                if tuple(header[:len(columns)]) == columns for row in rows]

    def cells(self, *columns: str) -> list[list[str]]:
        """The rows of every table whose header starts with ``columns``, as lists of
        cells in the header's order (for headers that repeat a name)."""
        return [row for header, rows in self.grids
                if tuple(header[:len(columns)]) == columns for row in rows]

    def summary(self, measurement: str) -> dict[str, str]:
        """The summary row of ``measurement`` (KeyError if the run has none)."""
        for row in self.table("measurement", "stock", "fastdeflate", "ratio"):
            if row["measurement"] == measurement:
                return row
        raise KeyError(f"{self.path.name}: no summary row {measurement!r}")
