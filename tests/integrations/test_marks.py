"""The one way the integrations mark what they put in a library's place (``_marks``), and
find the library's own behind what an earlier import of an integration left there."""

from __future__ import annotations

import functools

from fastdeflate.integrations import _marks


class Stock:
    """A library's own class."""


def stock_send() -> str:
    return "stock"


def test_a_marked_class_leads_back_to_the_class_it_extends() -> None:
    @_marks.mark
    class Ours(Stock):
        pass

    @_marks.mark
    class OursAgain(Ours):  # an integration imported again, extending the first copy's
        pass

    assert _marks.is_ours(Ours) and _marks.is_ours(OursAgain)
    assert _marks.stock(OursAgain) is Stock and _marks.stock(Ours) is Stock
    assert _marks.stock(Stock) is Stock and not _marks.is_ours(Stock)


def test_a_users_subclass_of_ours_is_not_ours_but_its_instances_are_made_by_ours() -> None:
    @_marks.mark
    class Ours(Stock):
        pass

    class Users(Ours):
        pass

    assert not _marks.is_ours(Users)
    assert _marks.stock(Users) is Users  # the application's class stays where it is
    assert _marks.made_by_ours(Users()) and _marks.made_by_ours(Ours())
    assert not _marks.made_by_ours(Stock())


def test_a_marked_function_leads_back_through_what_it_wraps() -> None:
    @functools.wraps(stock_send)
    def ours() -> str:
        return "ours"

    @functools.wraps(ours)
    def ours_again() -> str:
        return "ours again"

    _marks.mark(ours)
    _marks.mark(ours_again)
    assert _marks.stock(ours_again) is stock_send
    assert not _marks.is_ours(stock_send)


def test_what_a_replacement_names_comes_first() -> None:
    class Elsewhere:
        pass

    @_marks.mark(replaces=Elsewhere)
    class Standalone:  # neither subclasses nor wraps what it replaces (tornado's codec)
        pass

    @_marks.mark(replaces=Standalone)
    class Later(Stock):
        pass

    assert _marks.stock(Later) is Elsewhere
    assert _marks.stock(_marks.mark(lambda: None, replaces=stock_send)) is stock_send
