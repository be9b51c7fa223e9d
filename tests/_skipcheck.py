"""A pytest plugin that fails the run when a test module skipped wholesale.

A module whose every test skipped (or that skipped itself at import) tests nothing, and
a run that loses one that way looks green. With ``FASTDEFLATE_CHECK_SKIPS=1`` (CI, the
wheel jobs) tests/conftest.py registers :class:`WholesaleSkipCheck`, which makes the
session fail when that happens, unless every skip reason in the module is one of
:data:`EXPECTED` whose condition holds on this machine. A single skipped test, or a
module of which one test ran, is not its concern; deselected tests do not count.

It also names the one skip reason for an optional test peer that is not installed
(:func:`requires_peer`): a wheel target whose test set leaves some peer out (it has no
wheel there) lists it in ``FASTDEFLATE_ABSENT_PEERS``, and only those may be missing.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, Union

import pytest

ENV = "FASTDEFLATE_CHECK_SKIPS"
#: Optional test peers (module names, space-separated) this run is known to go without.
ABSENT_ENV = "FASTDEFLATE_ABSENT_PEERS"
PEER_MISSING = "optional test peer {} is not installed"
POSIX_SERVERS_ONLY = "worker-process servers (gunicorn, process groups) are tested on POSIX only"
NO_FORK = "no os.fork here"
NO_TEST_BUILD = ("needs the extension's test build (FASTDEFLATE_TEST_HOOKS=1): this one is "
                 "a default build, without test hooks")


@functools.cache
def default_build() -> bool:
    """True if the compiled extension imports and is a default build (no test hooks,
    as the wheels); False for the test build, or where it does not import."""
    try:
        extension = importlib.import_module("fastdeflate._fastdeflate")
    except ImportError:
        return False
    return not hasattr(extension, "_set_test_hook")


def peer_installed(module: str) -> bool:
    """True if ``module`` (a top-level name) can be imported; never imports it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def requires_peer(module: str) -> pytest.MarkDecorator:
    """Skip a test that needs the optional peer ``module`` where it is not installed."""
    return pytest.mark.skipif(not peer_installed(module), reason=PEER_MISSING.format(module))


def absent_peers() -> set[str]:
    return set(os.environ.get(ABSENT_ENV, "").split())


#: Put first on PYTHONPATH, makes the modules named in FASTDEFLATE_TEST_BLOCK unimportable
#: (``import`` raises ModuleNotFoundError, ``find_spec`` says None) in every process.
#:
#: On CPython 3.15 it also mends the traceback module (python/cpython#151631; its fix,
#: python/cpython#151835, is not in 3.15.2): formatting the error of
#: ``import autobahn.websocket`` with autobahn blocked ("'autobahn' is not a package",
#: name ``autobahn.websocket``) imports ``autobahn`` to look for an extension module
#: built for another Python (``_find_incompatible_extension_module``), and that import
#: raises out of ``traceback.format_exc()`` and out of pytest's report of a failure
#: (INTERNALERROR). As in that fix, a package that cannot be imported gives no such hint.
BLOCKER = """
import os, sys
blocked = os.environ.get("FASTDEFLATE_TEST_BLOCK", "").split()
for name in blocked:
    sys.modules[name] = None
if blocked and sys.version_info >= (3, 15):
    import traceback
    _find = getattr(traceback, "_find_incompatible_extension_module", None)
    if _find is not None:
        def _find_incompatible_extension_module(module_name, _find=_find):
            try:
                return _find(module_name)
            except ImportError:  # the package is blocked: no hint (cpython#151631)
                return None
        traceback._find_incompatible_extension_module = _find_incompatible_extension_module
"""


def pytest_without_peers(peers: list[str], workdir: os.PathLike[str], *args: str,
                         timeout: float = 300, absent: list[str] | None = None,
                         ) -> subprocess.CompletedProcess[str]:
    """Run pytest (``args``) in a subprocess as on a wheel target whose test set lacks
    ``peers``: they cannot be imported there or in its subprocesses, and the skip check
    is on with them listed as absent (or ``absent``, where the target lists others).
    ``workdir`` is the working directory (not the source tree: the installed package is
    tested), first on ``sys.path``: a plugin there is loaded with ``-p name``."""
    blocker = os.path.join(workdir, "peer-blocker")
    os.makedirs(blocker, exist_ok=True)
    with open(os.path.join(blocker, "sitecustomize.py"), "w") as file:
        file.write(BLOCKER)
    path = os.environ.get("PYTHONPATH")
    environ = dict(os.environ, FASTDEFLATE_TEST_BLOCK=" ".join(peers), **{
        ABSENT_ENV: " ".join(peers if absent is None else absent), ENV: "1",
        "PYTHONPATH": blocker + (os.pathsep + path if path else "")})
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=workdir, env=environ, capture_output=True, text=True,
                          timeout=timeout)


@dataclass(frozen=True)
class Expected:
    """A skip reason (a regular expression, matched in full) that may empty a module,
    and whether it may do so here."""

    reason: str
    applies: Union[bool, Callable[["re.Match[str]"], bool]]

    def matches(self, reason: str) -> bool:
        match = re.fullmatch(self.reason, reason)
        if match is None:
            return False
        return self.applies(match) if callable(self.applies) else self.applies


#: The reasons for which a whole module may skip, each only where it should.
EXPECTED: tuple[Expected, ...] = (
    # fastdeflate's autobahn adapter needs autobahn >= 26.10.1, which needs Python 3.11
    Expected(r"the autobahn that fastdeflate supports \(>= 26\.10\.1\) needs Python 3\.11",
             sys.version_info < (3, 11)),
    Expected(re.escape(POSIX_SERVERS_ONLY), os.name != "posix"),
    Expected(re.escape(NO_FORK), not hasattr(os, "fork")),  # Windows: tests/test_fork.py
    # the wheels' own test runs (a default build): tests of the extension's test hooks
    Expected(re.escape(NO_TEST_BUILD), lambda _match: default_build()),
    # a peer the wheel target's test set leaves out (pyproject.toml, cibuildwheel overrides)
    Expected(PEER_MISSING.format(r"(?P<peer>\S+)"), lambda m: m["peer"] in absent_peers()),
)


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason of a skip report (pytest stores ``(path, line, "Skipped: reason")``)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


@dataclass
class ModuleOutcome:
    """What happened to one module's tests: how many ran, the reasons of those skipped."""

    ran: set[str] = field(default_factory=set)
    skipped: dict[str, str] = field(default_factory=dict)  # test id -> reason


class WholesaleSkipCheck:
    """The plugin: records outcomes per module, judges them when the session ends."""

    def __init__(self, expected: tuple[Expected, ...] = EXPECTED) -> None:
        self.expected = expected
        self.modules: dict[str, ModuleOutcome] = {}

    def _module(self, nodeid: str) -> ModuleOutcome:
        return self.modules.setdefault(nodeid.split("::")[0], ModuleOutcome())

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped and "::" not in report.nodeid and report.nodeid.endswith(".py"):
            self._module(report.nodeid).skipped["<import>"] = skip_reason(report)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = self._module(report.nodeid)
        if report.skipped and not hasattr(report, "wasxfail"):
            module.skipped[report.nodeid] = skip_reason(report)
        elif report.when == "call" or report.failed:  # ran, or errored trying
            module.ran.add(report.nodeid)

    def problems(self) -> list[str]:
        """One line per module that skipped wholesale for an unexpected reason, and one
        per test skipped for lack of a peer this run does not list as absent."""
        found = []
        absent = absent_peers()
        for path, outcome in sorted(self.modules.items()):
            for test, reason in sorted(outcome.skipped.items()):
                peer = re.fullmatch(PEER_MISSING.format(r"(\S+)"), reason)
                if peer and peer[1] not in absent:
                    found.append(f"{test}: {reason}, and {ABSENT_ENV} does not list it")
            if outcome.ran or not outcome.skipped:
                continue
            reasons = sorted(set(outcome.skipped.values()))
            unexpected = [r for r in reasons if not any(e.matches(r) for e in self.expected)]
            if unexpected:
                found.append(f"{path}: all {len(outcome.skipped)} skipped: "
                             + "; ".join(unexpected))
        return found

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        problems = self.problems()
        if not problems:
            return
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = [f"{ENV}: tests skipped for reasons not expected here (tests/_skipcheck.py):",
                 *problems]
        if reporter is not None:
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line, red=True)
        else:
            print("\n".join(lines), file=sys.stderr)
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
