"""The codec this process runs, chosen once at import: the compiled extension
(``fastdeflate._fastdeflate``) or, without it or with ``FASTDEFLATE_PURE=1``, the
pure-Python fallback (``fastdeflate._pure``).

The floor of the package: the face (``fastdeflate/__init__.py``), ``broadcast()`` and
the operator modules (``status()``, the savings' estimates) read the choice here; this
module imports nothing of theirs.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["codec", "IMPLEMENTATION"]


def _choose() -> tuple[ModuleType, str]:
    if os.environ.get("FASTDEFLATE_PURE", "") not in ("", "0"):
        from . import _pure

        return _pure, "python"
    try:
        from . import _fastdeflate
    except ImportError:
        from . import _pure

        return _pure, "python"
    return _fastdeflate, "cython"


#: The codec module in use: ``fastdeflate._fastdeflate`` or ``fastdeflate._pure``.
codec: ModuleType
#: "cython" or "python" (the same as ``fastdeflate.IMPLEMENTATION``).
IMPLEMENTATION: str
codec, IMPLEMENTATION = _choose()
