"""The versions of the bundled engines: read from their sources, checked against minimums.

Each engine's module says the release it pins and the oldest release fastdeflate accepts
(``MINIMUM_VERSION``, with ``MINIMUM_REASON``: the known-bad releases below it). The build
reads the version from the sources it is about to compile (ISA-L's ``isal_api.h``,
zlib-ng's ``zlib-ng.h.in``), refuses one older than the minimum or other than the pin, and
says on stderr what it bundles. A refusal is a defect of the pinned sources, not of the
machine: it fails the build whatever ``FASTDEFLATE_ZLIB`` / ``FASTDEFLATE_ISAL`` ask
(``auto`` falls back only where an engine cannot be fetched or built here).
"""

from __future__ import annotations

import re
import sys


class PinnedSourcesDefect(RuntimeError):
    """The pinned sources cannot be used as they are (too old, another release than the
    pin, an edit that no longer applies): the build fails, never falls back."""


class TooOld(PinnedSourcesDefect):
    """An engine's release is older than the minimum fastdeflate accepts."""


def parse(version: str) -> tuple[int, ...]:
    """``"2.32.1"`` -> ``(2, 32, 1)``; anything else is refused."""
    if not re.fullmatch(r"\d+(\.\d+)*", version.strip()):
        raise ValueError(f"not a release number: {version!r}")
    return tuple(int(part) for part in version.strip().split("."))


def at_least(version: str, minimum: str) -> bool:
    have, need = parse(version), parse(minimum)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def check_minimum(engine: str, version: str, minimum: str, reason: str) -> str:
    """``version`` if it is at least ``minimum``, else :class:`TooOld` naming why."""
    if not at_least(version, minimum):
        raise TooOld(f"{engine} {version} is older than {minimum}, the oldest release "
                     f"fastdeflate bundles ({reason}); pin a newer source distribution "
                     "in buildtools/")
    return version


def check_pinned(engine: str, found: str, pinned: str, where: str) -> str:
    """``found`` (read from the sources) if it is the pinned release, else a defect."""
    if parse(found) != parse(pinned):
        raise PinnedSourcesDefect(f"{where} holds {engine} {found}, not the pinned {pinned}")
    return found


def announce(engine: str, version: str, minimum: str) -> None:
    print(f"fastdeflate: bundling {engine} {version} (minimum {minimum})",
          file=sys.stderr, flush=True)
