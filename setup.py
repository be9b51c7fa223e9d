"""Build the Cython extension ``fastdeflate._fastdeflate``.

The zlib engine is chosen at build time by ``FASTDEFLATE_ZLIB`` (see
``buildtools/engine.py``): ``auto`` (default) links a bundled, static zlib-ng in
zlib-compat mode when its pinned sources can be fetched and built, else the system zlib;
``bundled`` insists on zlib-ng (the wheels); ``system`` uses ``-lz``.
``FASTDEFLATE_LOCKS=pythread`` builds with CPython's PyThread locks, as on Windows,
instead of pthread mutexes (``extension/lock.h``), so that branch is tested here.
``FASTDEFLATE_TEST_HOOKS=1`` builds the test build, with the test hooks, fault injection
and test entry points the test suite uses (``buildtools/test_build.py``); the default
build (the wheels) has none.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from buildtools import test_build  # noqa: E402
from buildtools.engine import choose  # noqa: E402

# Rewritten when the engine (or the locks) change, so that switching recompiles.
ENGINE_STAMP = ROOT / "build" / "fastdeflate-engine.txt"


def lock_choice() -> str:
    """``FASTDEFLATE_LOCKS``: ``auto`` (pthread mutexes where pthreads exist) or
    ``pythread`` (CPython's locks, Windows' kind)."""
    choice = os.environ.get("FASTDEFLATE_LOCKS", "auto").strip().lower() or "auto"
    if choice not in ("auto", "pythread"):
        raise SystemExit(f"FASTDEFLATE_LOCKS={choice!r}: expected auto or pythread")
    return choice


class BuildWithEngine(build_ext):
    """build_ext that compiles and links the extension against the chosen zlib."""

    def run(self) -> None:
        # Always from the .pyx: a _fastdeflate.c left in the tree (or shipped by an old
        # sdist) is never compiled as it is, whatever its date or Cython version.
        # The build's test_hooks.pxi and test_entries.pxi: the test build's, or none.
        hooks = test_build.requested()
        generated = cythonize(self.extensions, force=True,
                              include_path=[str(test_build.include_dir(ROOT / "extension"))],
                              compiler_directives={"language_level": "3"})
        for ext, cythonized in zip(self.extensions, generated):
            ext.sources = cythonized.sources
        engine = choose(ROOT / "build" / "zlib-ng")
        locks = lock_choice()
        print(f"fastdeflate: building against {engine.name}", file=sys.stderr, flush=True)
        stamp = (engine.name + ("" if locks == "auto" else f" ({locks} locks)")
                 + (" (test build)" if hooks else ""))
        ENGINE_STAMP.parent.mkdir(parents=True, exist_ok=True)
        if not ENGINE_STAMP.exists() or ENGINE_STAMP.read_text() != stamp:
            ENGINE_STAMP.write_text(stamp)
        for ext in self.extensions:
            ext.include_dirs[:0] = engine.include_dirs
            ext.libraries += engine.libraries
            ext.extra_objects += engine.extra_objects
            ext.extra_link_args += engine.extra_link_args
            ext.define_macros += engine.define_macros
            if locks == "pythread":
                ext.define_macros.append(("FD_LOCKS_PYTHREAD", "1"))
            ext.define_macros += test_build.define_macros()
            ext.depends += [str(ENGINE_STAMP), *engine.extra_objects]
        super().run()


# One line run at every interpreter start-up that only reads FASTDEFLATE_ENABLE
# (fastdeflate/_autoenable.py): it must sit in site-packages itself, so it goes at the
# root of the wheel, beside the package.
STARTUP_HOOK = "fastdeflate-enable.pth"


class BuildPyWithStartupHook(build_py):
    """build_py that also puts the start-up hook at the root of the build."""

    def run(self) -> None:
        super().run()
        self.copy_file(str(ROOT / STARTUP_HOOK), str(Path(self.build_lib) / STARTUP_HOOK))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode),
                str(Path(self.build_lib) / STARTUP_HOOK)]


extension = Extension(
    "fastdeflate._fastdeflate",
    sources=["_fastdeflate.pyx"],
    define_macros=[("ZLIB_CONST", None)],
    # its parts (.pxi), the engines' C (extension/engine/*.h) and the compress-once policy
    # it includes: a change rebuilds it
    depends=[*sorted(str(p) for p in Path("extension").rglob("*") if p.is_file()),
             "fastdeflate/_compress_once_policy.py"],
)

setup(ext_modules=[extension],
      cmdclass={"build_ext": BuildWithEngine, "build_py": BuildPyWithStartupHook})
