"""What the libraries' ``broadcast()`` helpers share: the message encoded once, and what
happens to a connection that could not take it (logged, or raised together at the end).

The helpers follow websockets' own ``broadcast()``: a message is encoded once and the
same ``bytes`` object goes through each connection's normal send path, so fastdeflate
compresses it once per group of connections with the same history (see the README, "One
message to many connections"); connections that are closed or closing are skipped; a
connection whose send fails is skipped with a warning on the ``fastdeflate`` logger, or,
with ``raise_exceptions=True``, reported in an ``ExceptionGroup`` raised after every other
connection was sent the message.
"""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Any, Optional, Union

#: What the helpers accept as a message (as websockets' ``broadcast()``).
Message = Union[str, bytes, bytearray, memoryview]

logger = logging.getLogger("fastdeflate")


def encode(message: Message, text: Optional[bool] = None) -> tuple[bytes, bool]:
    """``(payload, is_text)``: a ``str`` is encoded to UTF-8 once and sent as text,
    bytes-like as binary (``bytes`` itself is not copied); ``text`` forces the opcode.

    Raises ``TypeError`` for anything else.
    """
    if isinstance(message, str):
        return message.encode("utf-8"), text is not False
    if isinstance(message, (bytes, bytearray, memoryview)):
        return bytes(message), text is True
    raise TypeError(f"message must be str or bytes-like, not {type(message).__name__}")


class Failures:
    """The connections one broadcast could not send to."""

    def __init__(self, raise_exceptions: bool) -> None:
        if raise_exceptions and sys.version_info < (3, 11):
            raise ValueError("raise_exceptions=True needs Python 3.11 (ExceptionGroup)")
        self._raise = raise_exceptions
        self._errors: list[Exception] = []

    def add(self, reason: str, cause: Optional[BaseException] = None) -> None:
        """Note one connection skipped for ``reason`` (``cause``: what its send raised)."""
        if self._raise:
            error = RuntimeError(reason)
            error.__cause__ = cause
            self._errors.append(error)
        elif cause is None:
            logger.warning("skipped broadcast: %s", reason)
        else:
            logger.warning("skipped broadcast: %s: %s", reason,
                           traceback.format_exception_only(cause)[0].strip())

    def done(self) -> None:
        """Raise the ``ExceptionGroup`` if asked for and anything failed."""
        if self._errors:
            group: Any = ExceptionGroup  # noqa: F821 - Python >= 3.11, checked above
            raise group("skipped broadcast", self._errors)
