"""How an integration marks what it puts in a library's place, and finds the library's own.

Every replacement (a class, a function, a method) carries ``_fastdeflate_adapter = True``
(`mark`). An integration imported again while enabled (a reload, a second copy of the
package) finds its earlier replacement in the library's place instead of the library's
own: `stock` follows it back, through what the replacement names (``replaces``), else a
class's first base or a function's ``__wrapped__``.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, overload

__all__ = ["MARK", "mark", "is_ours", "made_by_ours", "stock"]

T = TypeVar("T")

#: The attribute that marks fastdeflate's replacements (set on the object itself).
MARK = "_fastdeflate_adapter"
#: What a replacement stands in for, where it neither subclasses nor wraps it.
REPLACES = "_fastdeflate_replaces"


@overload
def mark(obj: T, *, replaces: Any = None) -> T: ...
@overload
def mark(obj: None = None, *, replaces: Any = None) -> Callable[[T], T]: ...
def mark(obj: Any = None, *, replaces: Any = None) -> Any:
    """Mark ``obj`` as fastdeflate's and return it (``replaces``: the library's own it
    stands in for, where ``obj`` neither subclasses it nor wraps it). Without ``obj``, a
    class decorator."""
    if obj is None:
        return lambda target: mark(target, replaces=replaces)
    setattr(obj, MARK, True)
    if replaces is not None:
        setattr(obj, REPLACES, replaces)
    return obj


def is_ours(obj: Any) -> bool:
    """Whether ``obj`` itself is marked: a class by its own namespace (a subclass of it,
    a user's say, is not), a function by its own attributes."""
    return bool(getattr(obj, "__dict__", {}).get(MARK, False))


def made_by_ours(instance: Any) -> bool:
    """Whether ``instance``'s class is one of fastdeflate's or derives from one."""
    return bool(getattr(type(instance), MARK, False))


def stock(obj: Any) -> Any:
    """``obj``, or, while it is fastdeflate's, what it stands in for: what it names
    (``replaces``), else a class's first base or a function's ``__wrapped__``."""
    while is_ours(obj):
        own = obj.__dict__
        if REPLACES in own:
            obj = own[REPLACES]
        elif isinstance(obj, type):
            obj = obj.__bases__[0]
        else:
            obj = obj.__wrapped__
    return obj
