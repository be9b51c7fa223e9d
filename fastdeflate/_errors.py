"""Exceptions raised by both implementations of the codec."""

from __future__ import annotations

__all__ = ["DeflateError", "DecompressionError", "MessageTooBig"]


class DeflateError(Exception):
    """Base class of every error raised by the fastdeflate codec."""


class DecompressionError(DeflateError):
    """The compressed data is corrupt or truncated (zlib's message is in the text).

    The decompressor refuses further data until
    [`Decompressor.reset()`][fastdeflate._fastdeflate.Decompressor] is called.
    """


class MessageTooBig(DeflateError):
    """The decompressed message would exceed ``max_size``.

    Decompression stops as soon as the limit would be passed; the decompressor refuses
    further data until
    [`Decompressor.reset()`][fastdeflate._fastdeflate.Decompressor] is called.
    """
