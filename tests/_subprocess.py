"""Run Python in a fresh interpreter on the package under test (installed or built in
place), never on a source tree that happens to be the working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional, Sequence

import fastdeflate

#: The directory that holds the package this process tests.
PACKAGE_PARENT = str(Path(fastdeflate.__file__).resolve().parents[1])


def run_python(code: str, *argv: str, impl: Optional[ModuleType] = None,
               cwd: Optional[str] = None, first_on_path: Sequence[str] = (),
               warnings: bool = False, timeout: float = 120,
               **env: str) -> subprocess.CompletedProcess:
    """``python -c code argv...`` in ``cwd`` (default: the package's parent), with
    ``first_on_path`` and then the tested package first on the path. ``impl`` picks the
    implementation (the fallback via FASTDEFLATE_PURE=1, else the default choice);
    ``warnings`` shows every warning; ``env`` is added to the environment last (it may
    override PYTHONPATH)."""
    environ = {k: v for k, v in os.environ.items() if k != "FASTDEFLATE_PURE"}
    environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [*first_on_path, PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))
    if impl is not None and impl.__name__.endswith("_pure"):
        environ["FASTDEFLATE_PURE"] = "1"
    environ.update(env)
    command = [sys.executable, *(["-W", "always"] if warnings else []), "-c", code, *argv]
    return subprocess.run(command, env=environ, cwd=cwd or PACKAGE_PARENT,
                          capture_output=True, text=True, timeout=timeout)
