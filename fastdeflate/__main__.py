"""``python -m fastdeflate``: what this environment runs; ``python -m fastdeflate run``
runs a command with fastdeflate enabled in every Python process it starts.

    python -m fastdeflate                       the status of this environment
    python -m fastdeflate run [--libraries websockets,aiohttp] -- CMD [ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from ._autoenable import ENV, libraries_from

STARTUP_HOOK = "fastdeflate-enable.pth"


def startup_hook() -> Optional[Path]:
    """The start-up hook (.pth) that reads FASTDEFLATE_ENABLE, if a site-packages
    directory of this interpreter has it (an editable install or a source tree has none)."""
    import site

    directories = [*site.getsitepackages(), site.getusersitepackages()]
    for directory in directories:
        path = Path(directory) / STARTUP_HOOK
        if path.is_file():
            return path
    return None


def status_lines() -> list[str]:
    """The status of this environment, one line each: implementation and engine, the
    start-up hook, and each supported library (version, and what enable() does to it)."""
    import importlib.metadata

    import fastdeflate
    from fastdeflate import integrations

    hook = startup_hook()
    lines = [
        f"fastdeflate {fastdeflate.__version__}: {fastdeflate.IMPLEMENTATION} codec on "
        f"{fastdeflate.ENGINE}",
        f"start-up hook: {hook if hook else 'not installed (editable install or source tree)'}"
        f"; {ENV}={os.environ.get(ENV, '')!r}",
    ]
    patched = set(integrations.enabled(pending=False))
    for library in integrations.SUPPORTED:
        try:
            version = importlib.metadata.version(library)
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"  {library}: not installed")
            continue
        state = "enabled" if library in patched else "stock"
        lines.append(f"  {library} {version}: {state}")
    for key, (live, idle) in sorted(fastdeflate.live_states().items(), key=str):
        lines.append(f"  streams {key}: {live} live, {idle} idle")
    return lines


def run(command: Sequence[str], libraries: str) -> int:
    """Run ``command`` with FASTDEFLATE_ENABLE set (every Python process it starts in an
    environment where fastdeflate is installed enables it at start-up). Replaces this
    process where the system allows it."""
    if not command:
        raise SystemExit("python -m fastdeflate run: no command given (run -- CMD ARGS...)")
    libraries_from(libraries)  # a bad list fails here, not in every process
    if startup_hook() is None:
        print(f"fastdeflate: warning: no {STARTUP_HOOK} beside the package here: "
              f"{ENV} is not read at start-up (an editable install?)", file=sys.stderr)
    env = dict(os.environ, **{ENV: libraries})
    if os.name == "posix":
        try:
            os.execvpe(command[0], list(command), env)
        except OSError as exc:
            raise SystemExit(f"python -m fastdeflate run: {command[0]}: {exc}")
    return subprocess.call(list(command), env=env)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastdeflate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command")
    runner = commands.add_parser("run", help="run a command with fastdeflate enabled")
    runner.add_argument("--libraries", default="1",
                        help="comma-separated libraries to enable (default: all)")
    runner.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    args = parser.parse_args(argv)
    if args.command == "run":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        return run(command, args.libraries)
    print("\n".join(status_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
