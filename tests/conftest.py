"""Shared fixtures: every codec test runs on both implementations.

``impl`` is the module of one implementation (``fastdeflate._fastdeflate`` or
``fastdeflate._pure``). The compiled one is never skipped: if it did not build, its
tests fail loudly. ``use_impl`` additionally makes it the one that
``fastdeflate.Compressor`` / ``fastdeflate.Decompressor`` name for the duration of
the test, so integrations (which look the classes up there) run on it too.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Iterator

import pytest

# The shared checks of the integration tests: their asserts show values too.
pytest.register_assert_rewrite("integrations._what_pays", "integrations._mixed_driver")
from hypothesis import settings

import fastdeflate
from _skipcheck import ENV as CHECK_SKIPS, NO_TEST_BUILD, WholesaleSkipCheck, default_build

# CI runs the property tests on a fixed seed, so that its run is reproducible; anywhere
# else every run explores new examples. HYPOTHESIS_PROFILE=ci selects it (.ci/run does).
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config: pytest.Config) -> None:
    # CI (FASTDEFLATE_CHECK_SKIPS=1) fails a run in which a test module skipped wholesale.
    # Under pytest-xdist the main process judges (it gets every worker's reports; a worker
    # sees only its share of a module).
    if os.environ.get(CHECK_SKIPS) == "1" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(WholesaleSkipCheck(), "fastdeflate-skip-check")
    config.addinivalue_line(
        "markers", "test_build(also_fallback=False): uses the compiled extension's test "
        "hooks (its test build, FASTDEFLATE_TEST_HOOKS=1); on a default build its compiled "
        "runs skip, and its fallback runs too with also_fallback=True")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``test_build`` skips its runs on the compiled extension where that
    is a default build; its runs on the fallback go on (its hooks are plain Python),
    unless marked ``test_build(also_fallback=True)``: they use the extension's hooks
    too (its fault injection, its GIL knob)."""
    mark = item.get_closest_marker("test_build")
    if mark is None or not default_build():
        return
    callspec = getattr(item, "callspec", None)
    on = callspec.params.get("impl", "cython") if callspec is not None else "cython"
    if on == "cython" or mark.kwargs.get("also_fallback", False):
        pytest.skip(NO_TEST_BUILD)


IMPLEMENTATIONS = {"cython": "fastdeflate._fastdeflate", "python": "fastdeflate._pure"}


def load_implementation(name: str) -> ModuleType:
    """Import one implementation by name; fails (never skips) when it is missing."""
    try:
        return importlib.import_module(IMPLEMENTATIONS[name])
    except ImportError as exc:  # pragma: no cover - a broken build must be loud
        pytest.fail(f"the compiled extension did not build or import: {exc}")


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return load_implementation(request.param)


@pytest.fixture
def parks_at_once(impl: ModuleType) -> Iterator[ModuleType]:
    """Idle objects beyond the live-state limit are parked as soon as they go idle
    (``set_park_after(0)``), restored after the test: parking at every message."""
    previous = impl.set_park_after(0)
    yield impl
    impl.set_park_after(previous)


@pytest.fixture
def use_impl(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(fastdeflate, "Compressor", impl.Compressor)
    monkeypatch.setattr(fastdeflate, "Decompressor", impl.Decompressor)
    return impl


@pytest.fixture(autouse=True)
def no_enable_passed_on() -> Iterator[None]:
    """fastdeflate.enable() sets FASTDEFLATE_ENABLE for the processes started after it
    (fastdeflate/_autoenable.py); a test's must not reach the subprocesses of the next.
    (Not through monkeypatch: that would make every test's monkeypatch undo after the
    test module's own fixtures have torn down.)"""
    saved = os.environ.pop("FASTDEFLATE_ENABLE", None)
    yield
    os.environ.pop("FASTDEFLATE_ENABLE", None)
    if saved is not None:
        os.environ["FASTDEFLATE_ENABLE"] = saved


@pytest.fixture(autouse=True)
def no_messages_kept_from_other_tests() -> None:
    """Compress once keeps the last few whole messages per parameter set, process-wide;
    a test's compressors must not share with another test's (the same cached message
    objects are sent in many tests)."""
    for name in IMPLEMENTATIONS:
        load_implementation(name)._forget_kept()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker: hand the run's counts to the main process."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        from _tally import export

        workeroutput["fastdeflate_tally"] = export()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # type: ignore[no-untyped-def]
    """In the main process of a pytest-xdist run: add a worker's counts."""
    from _tally import merge

    merge(getattr(node, "workeroutput", {}).get("fastdeflate_tally", {}))


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """What the run's stress, fault and interleaving tests checked (tests/_tally.py)."""
    try:
        from _tally import summary
    except ImportError:  # a copy of this file elsewhere (tests/test_ci.py)
        return
    lines = summary()
    if lines:
        terminalreporter.section("fastdeflate: what was checked")
        for line in lines:
            terminalreporter.write_line(line)
