"""python -m fastdeflate: what this environment runs (the status of a fresh interpreter:
call fastdeflate.status() in the serving process for what a server runs).
python -m fastdeflate run: runs a command with fastdeflate enabled in every Python process
it starts.

    python -m fastdeflate                       the status of this environment
    python -m fastdeflate run [--libraries websockets,aiohttp] -- CMD [ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Optional, Sequence

from ._autoenable import _NONE, ENV, libraries_from
from ._status import STARTUP_HOOK, startup_hook


def status_lines() -> list[str]:
    """`fastdeflate.status()`, one line each."""
    from ._status import status

    info = status()
    lines = []
    if info["source_tree"]:
        lines.append(f"WARNING: {info['source_tree']}")
    lines.append(
        f"fastdeflate {info['version']}: {info['implementation']} codec on {info['engine']}")
    build = info["build"]
    if info["implementation"] == "cython":
        lines.append(f"engines in this build: {build['zlib']}; " + (
            f"{build['isal']} (level 1, whole-message inflate)" if build["isal"]
            else "no ISA-L"))
        if build["without_isal"]:
            lines.append(f"  {build['without_isal']}")
    lines += [
        f"start-up hook: {info['startup_hook'] or 'not installed (editable install or source tree)'}"
        f"; {ENV}={info['environment'][ENV]!r}",
    ]
    others = {name for name in info["engines"].values() if name != info["engine"]}
    if others:  # levels run by another engine (window 15 / memLevel 8)
        lines.append("  " + "; ".join(f"level {level}: {name}"
                                      for level, name in info["engines"].items()
                                      if name in others))
    if info["inflate_engine"] != info["engine"] or info["inflate"] != "auto":
        chosen = f" (set_inflate / FASTDEFLATE_INFLATE: {info['inflate']!r})" \
            if info["inflate"] != "auto" else ""
        lines.append(f"  decompressing: {info['inflate_engine']}{chosen}")
    for library, facts in info["libraries"].items():
        version = f" {facts['version']}" if facts["version"] else ""
        why = f" ({facts['why']})" if facts["why"] else ""
        lines.append(f"  {library}{version}: {facts['state']}{why}")
    for key, streams in sorted(info["streams"].items(), key=str):
        lines.append(f"  streams {key}: {streams['live']} live, {streams['idle']} idle")
    sent, received = info["traffic"]["sent"], info["traffic"]["received"]
    lines.append(f"sent {sent['messages']:,} messages, {sent['bytes']:,} bytes in "
                 f"{sent['payload_bytes']:,} ({sent['compress_once_shares']:,} shared); "
                 f"received {received['messages']:,} messages, "
                 f"{received['payload_bytes']:,} bytes into {received['bytes']:,}")
    skipped = ", ".join(f"{reason} {entry['messages']:,}"
                        for reason, entry in sorted(info["sent_uncompressed"].items()))
    lines.append(f"compress what pays: min size {info['min_size']:,} bytes, skip "
                 f"incompressible {'on' if info['skip_incompressible'] else 'off'}; sent "
                 f"uncompressed: {skipped or 'none'}")
    return lines


#: The values of ``--libraries`` that turn fastdeflate off on purpose (an empty one is
#: a usage error: a shell variable left unset, say).
_OFF = _NONE - {""}


class _UsageError(Exception):
    """A command line fastdeflate cannot run: reported by argparse (usage, exit status 2)."""


def run(command: Sequence[str], libraries: str) -> int:
    """Run ``command`` with FASTDEFLATE_ENABLE set (every Python process it starts in an
    environment where fastdeflate is installed enables it at start-up). Replaces this
    process where the system allows it."""
    if not command:
        raise _UsageError("no command given (run -- CMD ARGS...)")
    try:
        chosen = libraries_from(libraries)  # a bad list fails here, not in every process
    except ValueError as exc:
        reason = str(exc).split(": ", 1)[-1]  # (without "FASTDEFLATE_ENABLE=...: ")
        raise _UsageError(f"--libraries {libraries}: {reason}") from None
    if not chosen:
        if libraries.strip().lower() not in _OFF:  # "", " ", ",": a mistake, not a choice
            raise _UsageError(f"--libraries {libraries!r} names no library (a "
                              "comma-separated list, 1 for all, or 0 to run with "
                              "fastdeflate off)")
        print(f"fastdeflate: --libraries {libraries}: fastdeflate stays off in the "
              "command's processes", file=sys.stderr)
    elif startup_hook() is None:
        print(f"fastdeflate: warning: no {STARTUP_HOOK} in site-packages here: "
              f"{ENV} is not read at start-up (an editable install?)", file=sys.stderr)
    env = dict(os.environ, **{ENV: libraries})
    try:
        if os.name == "posix":
            os.execvpe(command[0], list(command), env)
        return subprocess.call(list(command), env=env)
    except OSError as exc:  # as a shell says it, with its exit status (127, 126)
        what, status = (("command not found", 127) if isinstance(exc, FileNotFoundError)
                        else (exc.strerror or str(exc), 126))
        print(f"python -m fastdeflate run: {command[0]}: {what}", file=sys.stderr)
        return status


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastdeflate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command")
    runner = commands.add_parser(
        "run", help="run a command with fastdeflate enabled",
        description="Run CMD with FASTDEFLATE_ENABLE set: every Python process it starts, in "
                    "an environment where fastdeflate is installed (not an editable install), "
                    "enables fastdeflate at start-up.")
    runner.add_argument("--libraries", default="1",
                        help="comma-separated libraries to enable (default: all)")
    runner.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    args = parser.parse_args(argv)
    if args.command == "run":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        try:
            return run(command, args.libraries)
        except _UsageError as exc:
            runner.error(str(exc))  # exits with status 2
    print("\n".join(status_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
