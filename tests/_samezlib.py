"""Whether a codec implementation runs on the very zlib the stdlib's ``zlib`` module uses,
and so must produce its bytes exactly (the byte-identity tests check that only there).

A version string cannot tell. zlib-ng built in zlib-compat mode reports zlib's version
with a suffix ("1.3.1.zlib-ng") whatever zlib-ng release it is: fastdeflate's bundled
zlib-ng does, and so does the stdlib on CPython >= 3.14 for Windows, which links a
zlib-ng build of its own (another release, another hash table size: other bytes). The
engine names the library: "zlib X" for the extension built on the system zlib, "zlib X
(stdlib)" for the fallback, "zlib-ng V (...)" for the bundled zlib-ng, never the same.
"""

from __future__ import annotations

import zlib
from typing import Any


def same_zlib_as_stdlib(impl: Any) -> bool:
    """True if ``impl`` (an implementation module, or ``fastdeflate``) compresses with
    the stdlib's own zlib, so that its output is the stdlib's byte for byte."""
    version = zlib.ZLIB_RUNTIME_VERSION
    return getattr(impl, "ENGINE", "") in (f"zlib {version}", f"zlib {version} (stdlib)")
