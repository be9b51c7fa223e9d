"""The floor both implementations stand on: argument checks (so both raise the same
errors) and the settings and constants they share."""

from __future__ import annotations

from typing import Optional

__all__ = ["compressor_args", "decompressor_args", "max_size_arg"]

#: A block with BFINAL set ends a deflate stream; decoding goes on with a new stream over
#: the same window (RFC 7692 §7.2.3.4). Real peers end at most one or two streams per
#: message; more is refused, so that a flood of tiny final blocks can't make the
#: decoder restart (and, in the fallback, copy its window) for every two input bytes.
MAX_STREAMS_PER_MESSAGE = 16
TOO_MANY_STREAMS_MESSAGE = (
    f"invalid compressed data: more than {MAX_STREAMS_PER_MESSAGE} deflate streams "
    "(blocks with BFINAL set) in one message"
)


def _int_in(name: str, value: object, low: int, high: int, extra: tuple = ()) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not (low <= value <= high or value in extra):
        raise ValueError(f"{name} must be in {low}..{high}, got {value}")
    return value


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def compressor_args(
    level: object, window_bits: object, mem_level: object, strategy: object,
    no_context_takeover: object,
) -> tuple[int, int, int, int, bool]:
    """Validate Compressor arguments; window 8 is refused (zlib can't raw-deflate it)."""
    _int_in("level", level, 0, 9, extra=(-1,))
    if window_bits == 8 and not isinstance(window_bits, bool):
        raise ValueError(
            "window_bits=8 is not supported for compression: zlib cannot produce raw "
            "deflate with an 8-bit window; use 9..15"
        )
    _int_in("window_bits", window_bits, 9, 15)
    _int_in("mem_level", mem_level, 1, 9)
    _int_in("strategy", strategy, 0, 4)
    _bool("no_context_takeover", no_context_takeover)
    return level, window_bits, mem_level, strategy, no_context_takeover  # type: ignore[return-value]


def decompressor_args(window_bits: object, no_context_takeover: object) -> tuple[int, bool]:
    """Validate Decompressor arguments (any window from 8 to 15 inflates)."""
    _int_in("window_bits", window_bits, 8, 15)
    _bool("no_context_takeover", no_context_takeover)
    return window_bits, no_context_takeover  # type: ignore[return-value]


def max_size_arg(max_size: object) -> Optional[int]:
    """Validate ``max_size``: None (no limit) or an int >= 0."""
    if max_size is None:
        return None
    if not isinstance(max_size, int) or isinstance(max_size, bool):
        raise TypeError(f"max_size must be an int or None, not {type(max_size).__name__}")
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, got {max_size}")
    return max_size


def tail_arg(fin: object) -> None:
    """Raise the ValueError for ``has_tail=True`` with data that does not end a message
    with ``00 00 ff ff`` (or with ``fin`` False: only a message's end has the tail)."""
    if not fin:
        raise ValueError("has_tail=True needs fin=True: only a whole message's end has the tail")
    raise ValueError("has_tail=True: data must end with 00 00 ff ff")


#: Live zlib streams kept per parameter set by default (see set_live_states).
DEFAULT_LIVE_STATES = 16
#: The most set_live_states accepts (a C Py_ssize_t, and far more than any server needs).
MAX_LIVE_STATES = 1 << 30


def live_states_arg(limit: object) -> int:
    """Validate a live-state limit: an int from 1 to 2**30."""
    return _int_in("limit", limit, 1, MAX_LIVE_STATES)


#: Seconds an idle object beyond the live-state limit keeps its stream (set_park_after).
DEFAULT_PARK_AFTER = 10.0


def park_after_arg(seconds: object) -> float:
    """Validate a park-after delay: an int or float of seconds, >= 0 (inf: never)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"seconds must be an int or float, not {type(seconds).__name__}")
    if not seconds >= 0:  # also refuses NaN
        raise ValueError(f"seconds must be >= 0, got {seconds!r}")
    return float(seconds)


#: What set_inflate() / FASTDEFLATE_INFLATE accept: "auto" (the bundled ISA-L decodes
#: whole messages where it can, zlib the rest) or "zlib" (zlib decodes every message).
INFLATE_CHOICES = ("auto", "zlib")


def inflate_arg(engine: object) -> str:
    """Validate an inflate engine choice: "auto" or "zlib"."""
    if not isinstance(engine, str):
        raise TypeError(f"engine must be a str, not {type(engine).__name__}")
    if engine not in INFLATE_CHOICES:
        raise ValueError(f"engine must be one of {', '.join(map(repr, INFLATE_CHOICES))}, "
                         f"got {engine!r}")
    return engine


def not_a_buffer(data: object) -> TypeError:
    """The TypeError for input that is not a C-contiguous bytes-like object."""
    if isinstance(data, str):
        return TypeError("expected a bytes-like object, not str (encode it first)")
    return TypeError(f"expected a C-contiguous bytes-like object, not {type(data).__name__}")


# --- compress once: one whole message sent to many compressors (both implementations,
# broadcast(); the policy is explained in extension/compress_once.pxi's header) --------

#: Whole messages of this many bytes are kept for followers; larger ones are not,
SHARE_MAX = 262144
#: nor smaller ones: little to save, and CPython shares tiny bytes objects (b"", single
#: bytes) between unrelated senders.
SHARE_MIN = 64
#: Whole messages kept per parameter set.
KEPT_MAX = 8
#: Group messages before a group may start over, until it has measured what that costs;
#: broadcast()'s default start_over_every.
START_OVER_EVERY = 32
#: Messages kept that nobody followed: the parameter set is quiet,
QUIET_AFTER = 64
#: and keeps one message in this many until someone follows one.
QUIET_SAMPLE = 16
#: What starting over may cost a group, as a share of its bytes (set_start_over_budget).
DEFAULT_START_OVER_BUDGET = 0.02
