"""A pytest plugin that fails the run when a test module skipped wholesale.

A module whose every test skipped (or that skipped itself at import) tests nothing, and
a run that loses one that way looks green. With ``FASTDEFLATE_CHECK_SKIPS=1`` (CI, the
wheel jobs) tests/conftest.py registers :class:`WholesaleSkipCheck`, which makes the
session fail when that happens, unless every skip reason in the module is one of
:data:`EXPECTED` whose condition holds on this machine. A single skipped test, or a
module of which one test ran, is not its concern; deselected tests do not count.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

import pytest

ENV = "FASTDEFLATE_CHECK_SKIPS"


@dataclass(frozen=True)
class Expected:
    """A skip reason (a regular expression, matched in full) that may empty a module,
    and whether it may do so here."""

    reason: str
    applies: bool

    def matches(self, reason: str) -> bool:
        return self.applies and re.fullmatch(self.reason, reason) is not None


#: The reasons for which a whole module may skip, each only where it should.
EXPECTED: tuple[Expected, ...] = (
    # fastdeflate's autobahn adapter needs autobahn >= 26.10.1, which needs Python 3.11
    Expected(r"the autobahn that fastdeflate supports \(>= 26\.10\.1\) needs Python 3\.11",
             sys.version_info < (3, 11)),
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
        """One line per module that skipped wholesale for an unexpected reason."""
        found = []
        for path, outcome in sorted(self.modules.items()):
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
        lines = [f"{ENV}: test modules skipped wholesale (no test ran), for reasons not "
                 "expected here (tests/_skipcheck.py EXPECTED):", *problems]
        if reporter is not None:
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line, red=True)
        else:
            print("\n".join(lines), file=sys.stderr)
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
