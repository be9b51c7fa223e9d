"""CI's own checks can fail: fuzz/run.sh on a fuzzer that ran too little, and the
skip check (tests/_skipcheck.py) on a test module that skipped wholesale.

fuzz/run.sh is run as CI runs it, on stand-in targets (Python scripts that print what
libFuzzer prints, or nothing), so that no atheris is needed here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["pytester"]

# --- fuzz/run.sh ---------------------------------------------------------------------------

#: A stand-in fuzz target: reports FAKE_RUNS executions (or the -runs=N it was given) the
#: way libFuzzer does, or prints nothing at all when FAKE_RUNS is "none".
FAKE_TARGET = """
import os, re, sys
runs = os.environ.get("FAKE_RUNS", "asked")
if runs == "asked":
    runs = [a for a in sys.argv if a.startswith("-runs=")][-1].split("=")[1]
if runs != "none":
    print(f"#{runs}\\tDONE cov: 1 ft: 1 corp: 1/1b exec/s: 0 rss: 30Mb")
    print(f"Done {runs} runs in 0 second(s)")
    if os.environ.get("FAKE_STATS", "1") == "1":
        print(f"stat::number_of_executed_units: {runs}")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


def run_fuzz(tmp_path: Path, flags: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """fuzz/run.sh (a copy, beside a stand-in target "fake") for one second."""
    if sys.platform == "win32":
        pytest.skip("fuzz/run.sh is a bash script for the fuzzers (atheris: Linux, macOS)")
    fuzz = tmp_path / "fuzz"
    if not fuzz.exists():
        fuzz.mkdir()
        shutil.copy(ROOT / "fuzz" / "run.sh", fuzz / "run.sh")
        (fuzz / "fuzz_fake.py").write_text(FAKE_TARGET)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("FUZZ_", "FAKE_"))}
    environ.update(PYTHON=sys.executable, FUZZ_WORK=str(tmp_path / "work"), FUZZ_FLAGS=flags,
                   **env)
    return subprocess.run(["bash", str(fuzz / "run.sh"), "1", "fake"], env=environ,
                          capture_output=True, text=True, timeout=60)


def test_fuzz_run_fails_when_a_target_executes_nothing(tmp_path: Path) -> None:
    done = run_fuzz(tmp_path, FAKE_RUNS="none")  # exit 0, never reached libFuzzer
    assert done.returncode != 0
    assert "fuzz fake: FAILED: no executions reported" in done.stderr
    assert "OK" not in done.stdout


def test_fuzz_run_fails_when_a_target_executes_fewer_inputs_than_asked(tmp_path: Path) -> None:
    done = run_fuzz(tmp_path, "-seed=1 -runs=80000", FAKE_RUNS="1200")  # the cap hit first
    assert done.returncode != 0
    assert "1200 executions reported, expected at least 80000" in done.stderr
    done = run_fuzz(tmp_path, FAKE_RUNS="3", FUZZ_MIN_RUNS="4")
    assert done.returncode != 0 and "expected at least 4" in done.stderr


def test_fuzz_run_passes_with_the_executions_asked_for(tmp_path: Path) -> None:
    done = run_fuzz(tmp_path, "-seed=1 -runs=500")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fuzz fake: 500 executions in ")
    assert done.stdout.rstrip().endswith("OK")
    # "Done N runs" alone is read too (without -print_final_stats' lines)
    done = run_fuzz(tmp_path, "-runs=0", FAKE_RUNS="7", FAKE_STATS="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fuzz fake: 7 executions")


def test_fuzz_run_fails_when_a_target_fails(tmp_path: Path) -> None:
    done = run_fuzz(tmp_path, "-runs=10", FAKE_EXIT="1")
    assert done.returncode != 0 and "FAILED (exit 1) after 10 executions" in done.stderr


# --- the skip check ------------------------------------------------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _skipcheck import (  # noqa: E402
    ABSENT_ENV,
    ENV,
    EXPECTED,
    NO_TEST_BUILD,
    PEER_MISSING,
    Expected,
    WholesaleSkipCheck,
    peer_installed,
    pytest_without_peers,
)

ALL_SKIP_AT_RUN_TIME = """
import pytest

@pytest.mark.skipif(True, reason="peer missing")
def test_a(): pass

def test_b(): pytest.skip("peer missing too")
"""
ALL_SKIP_AT_IMPORT = """
import pytest
pytest.skip("no such library", allow_module_level=True)
def test_a(): pass
"""
ONE_RUNS = """
import pytest

@pytest.mark.skip(reason="peer missing")
def test_a(): pass

def test_b(): assert True
"""
XFAIL_ONLY = """
import pytest

@pytest.mark.xfail(reason="known", strict=True)
def test_a(): assert False
"""


def run_checked(pytester: pytest.Pytester, *expected: Expected,
                **modules: str) -> pytest.RunResult:
    if modules:
        pytester.makepyfile(**modules)
    return pytester.runpytest("-p", "no:cacheprovider", plugins=[WholesaleSkipCheck(expected)])


@pytest.mark.parametrize("module", [ALL_SKIP_AT_RUN_TIME, ALL_SKIP_AT_IMPORT],
                         ids=["at-run-time", "at-import"])
def test_a_module_that_skips_wholesale_fails_the_run(pytester: pytest.Pytester,
                                                     module: str) -> None:
    result = run_checked(pytester, test_empty=module, test_fine=ONE_RUNS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"{ENV}: tests skipped for reasons not expected here*",
                                 "test_empty.py: all * skipped: *"])
    assert "test_fine.py" not in result.stdout.str().split(ENV)[1]
    # without the check the same run is green: what CI used to see
    unchecked = pytester.runpytest("-p", "no:cacheprovider")
    assert unchecked.ret == pytest.ExitCode.OK


def test_a_module_with_one_test_run_or_xfailed_passes(pytester: pytest.Pytester) -> None:
    result = run_checked(pytester, test_one=ONE_RUNS, test_xfail=XFAIL_ONLY)
    assert result.ret == pytest.ExitCode.OK
    assert ENV not in result.stdout.str()


def test_an_expected_reason_may_empty_a_module_only_where_it_applies(
        pytester: pytest.Pytester) -> None:
    here = Expected(r"no such library", applies=True)
    result = run_checked(pytester, here, test_empty=ALL_SKIP_AT_IMPORT, test_fine=ONE_RUNS)
    assert result.ret == pytest.ExitCode.OK
    elsewhere = Expected(r"no such library", applies=False)
    assert run_checked(pytester, elsewhere).ret == pytest.ExitCode.TESTS_FAILED
    partial = Expected(r"no such", applies=True)  # matched in full, not as a prefix
    assert run_checked(pytester, partial).ret == pytest.ExitCode.TESTS_FAILED


def test_the_autobahn_reason_is_expected_only_before_python_3_11() -> None:
    reason = "the autobahn that fastdeflate supports (>= 26.10.1) needs Python 3.11"
    (autobahn,) = [e for e in EXPECTED if re.fullmatch(e.reason, reason)]
    assert autobahn.applies == (sys.version_info < (3, 11))


def test_the_default_build_reason_is_expected_only_on_a_default_build(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A module of test-build tests may skip wholesale on a default build (the wheels'
    own test runs), never where the extension is the test build (CI's main run)."""
    import _skipcheck

    import fastdeflate

    (default,) = [e for e in EXPECTED if re.fullmatch(e.reason, NO_TEST_BUILD)]
    for hooked in (True, False):
        monkeypatch.setattr(_skipcheck, "default_build", lambda: not hooked)
        assert default.matches(NO_TEST_BUILD) is (not hooked)
    monkeypatch.undo()
    assert default.matches(NO_TEST_BUILD) is (
        fastdeflate.IMPLEMENTATION == "cython"
        and not fastdeflate.status()["build"]["test_build"])


#: Makes this run take Python for 3.10 where autobahn is concerned (fastdeflate supports
#: no autobahn there): loaded with -p before the test modules import the flag.
AUTOBAHN_UNSUPPORTED = """
import sys
sys.path.insert(0, {tests!r})
import integrations._support as support
support.AUTOBAHN_SUPPORTED = False
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("python", ["3.10", "3.11+"])
def test_autobahn_tests_skip_cleanly_where_autobahn_is_not_installed(
        python: str, tmp_path: Path) -> None:
    """Every test of autobahn outside test_autobahn.py (the broadcast helpers, the server
    memory benchmark) skips where the test set has no autobahn: with the peer's reason on
    3.11+ (a target that lists it absent), with the Python reason on 3.10 (where no target
    lists it: its peer reason would fail the skip check). Nothing errors."""
    # (and a test of each module that runs, as in a whole run: no module skips wholesale)
    args = ["-rs", "-k", "autobahn or test_encode or getloadavg_fails",
            str(ROOT / "tests" / "integrations" / "test_fanout.py"),
            str(ROOT / "tests" / "test_benchmarks.py")]
    if python == "3.10":
        (tmp_path / "autobahn_unsupported.py").write_text(
            AUTOBAHN_UNSUPPORTED.format(tests=str(ROOT / "tests")))
        done = pytest_without_peers(["autobahn"], tmp_path, "-p", "autobahn_unsupported",
                                    *args, absent=["chromium", "node-ws"])
        reason = "the autobahn that fastdeflate supports (>= 26.10.1) needs Python 3.11"
    else:
        done = pytest_without_peers(["autobahn"], tmp_path, *args)
        reason = PEER_MISSING.format("autobahn")
    output = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, output
    skipped = re.findall(r"^SKIPPED \[(\d+)\] \S+: (.*)$", done.stdout, re.MULTILINE)
    assert {why for _, why in skipped} == {reason}, output
    assert sum(int(n) for n, _ in skipped) >= 15, output  # 14 broadcast, 1 server memory
    assert re.search(r"\b\d+ passed", done.stdout) and " failed" not in done.stdout, output


def load_wheel_test_sets() -> ModuleType:
    """.ci/wheel_test_sets.py (its workflow check needs no cibuildwheel)."""
    import importlib.util

    path = ROOT / ".ci" / "wheel_test_sets.py"
    if not (path.is_file() and (ROOT / ".github" / "workflows" / "wheels.yml").is_file()):
        pytest.skip("needs the source tree (the wheel jobs test a copy of tests/ only)")
    spec = importlib.util.spec_from_file_location("wheel_test_sets", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_workflow_run_with_the_skip_check_lists_the_foreign_peers_absent() -> None:
    """The sdist job tests with the skip check on, outside cibuildwheel: Node.js's ws
    (no tests/peers/node_modules in the sdist) and Chromium skip there as missing peers,
    so its FASTDEFLATE_ABSENT_PEERS must name them, or the job fails."""
    sets = load_wheel_test_sets()
    workflow = (ROOT / ".github" / "workflows" / "wheels.yml").read_text()
    checked = [v for _, v in sets.env_blocks(workflow) if v.get("FASTDEFLATE_CHECK_SKIPS")]
    assert len(checked) == 1, checked  # the sdist job's test step
    assert sets.workflow_problems(workflow) == []
    without = re.sub(r"\n *FASTDEFLATE_ABSENT_PEERS:[^\n]*", "", workflow)
    (problem,) = sets.workflow_problems(without)
    assert "not the foreign peers ['chromium', 'node-ws']" in problem


def test_conftest_turns_the_check_on_with_the_environment_variable(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real wiring: this suite's conftest.py, the variable set, a module all skipped."""
    tests = Path(__file__).resolve().parent
    pytester.makeconftest((tests / "conftest.py").read_text())
    for helper in ("_skipcheck.py", "_tally.py"):
        shutil.copy(tests / helper, pytester.path / helper)
    pytester.makepyfile(test_empty=ALL_SKIP_AT_RUN_TIME)
    monkeypatch.delenv(ENV, raising=False)
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == pytest.ExitCode.OK
    monkeypatch.setenv(ENV, "1")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_empty.py: all 2 skipped: peer missing; peer missing too"])


PEER_TESTS = """
import pytest
from _skipcheck import requires_peer

@requires_peer("no_such_peer_module")
def test_needs_the_peer(): pass

def test_other(): pass
"""


def test_a_missing_peer_is_allowed_only_where_the_run_lists_it_absent(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent))  # for _skipcheck
    monkeypatch.delenv(ABSENT_ENV, raising=False)
    result = run_checked(pytester, *EXPECTED, test_peer=PEER_TESTS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["test_peer.py::test_needs_the_peer: optional test peer "
                                 f"no_such_peer_module is not installed, and {ABSENT_ENV} *"])
    monkeypatch.setenv(ABSENT_ENV, "isal no_such_peer_module")
    assert run_checked(pytester, *EXPECTED).ret == pytest.ExitCode.OK


def test_a_module_may_skip_wholesale_for_a_peer_listed_absent(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    module = ALL_SKIP_AT_IMPORT.replace('"no such library"',
                                        f'"{PEER_MISSING.format("autobahn")}"')
    monkeypatch.setenv(ABSENT_ENV, "isal")
    result = run_checked(pytester, *EXPECTED, test_empty=module, test_fine=ONE_RUNS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    monkeypatch.setenv(ABSENT_ENV, "isal autobahn")
    assert run_checked(pytester, *EXPECTED).ret == pytest.ExitCode.OK


def test_peer_installed_never_imports_the_peer(monkeypatch: pytest.MonkeyPatch) -> None:
    assert peer_installed("json") and not peer_installed("no_such_peer_module")
    monkeypatch.setitem(sys.modules, "json", None)  # blocked: find_spec says None
    assert not peer_installed("json")
    monkeypatch.delitem(sys.modules, "zipapp", raising=False)
    assert peer_installed("zipapp") and "zipapp" not in sys.modules


#: A submodule of a blocked peer imported, its error formatted, as
#: benchmarks/fdbench/library_table.discover() formats it; then a failure to report.
BLOCKED_SUBMODULE = """
import traceback

def test_the_error_of_a_blocked_packages_submodule_formats():
    try:
        import no_such_peer_package.websocket  # noqa: F401
    except ImportError:
        text = traceback.format_exc()
    assert "no_such_peer_package" in text

def test_a_failure_after_it_is_reported():
    try:
        import no_such_peer_package.websocket  # noqa: F401
    except ImportError:
        raise AssertionError("reported with the import error as its context")
"""


def test_the_blocker_leaves_tracebacks_formattable(tmp_path: Path) -> None:
    """CPython 3.15's traceback raised while formatting the error of a blocked package's
    submodule (python/cpython#151631): pytest ended in INTERNALERROR, the benchmark
    module table raised out of its except clause. The blocker mends it (BLOCKER)."""
    (tmp_path / "test_blocked.py").write_text(BLOCKED_SUBMODULE)
    done = pytest_without_peers(["no_such_peer_package"], tmp_path, "test_blocked.py")
    output = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "INTERNALERROR" not in output, output
    assert re.search(r"\b1 failed, 1 passed\b", done.stdout), output
    assert "reported with the import error as its context" in done.stdout, output


# --- every pytest run of .ci/run checks for wholesale skips --------------------------------

#: A command that runs pytest: ``pytest``, a venv's ``.../bin/pytest``, ``python -m pytest``.
PYTEST_COMMAND = re.compile(r'(?:^|[\s/"])pytest(?=["\s]|$)|-m\s+pytest\b')


def pytest_commands(script: Path) -> list[str]:
    """The commands of a shell script that run pytest (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", script.read_text())
    return [line.strip() for line in text.splitlines()
            if not line.lstrip().startswith("#") and PYTEST_COMMAND.search(line)]


def test_every_pytest_run_of_ci_checks_for_wholesale_skips() -> None:
    """The main run and each step's run: a module that skipped wholesale (say, every
    aiohttp test on the oldest aiohttp) fails CI, not only in the main run."""
    scripts = [ROOT / ".ci" / "run", *sorted((ROOT / ".ci" / "steps").glob("*.sh"))]
    commands = {f"{script.name}: {c}" for script in scripts for c in pytest_commands(script)}
    assert len(commands) >= 4, commands  # the main run, and at least three steps
    unchecked = sorted(c for c in commands if f"{ENV}=1 " not in c)
    assert unchecked == []


# --- the README's two commands are the ones CI runs ---------------------------------------


def readme_commands() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Two commands", 1)[1]
    return re.findall(r"```sh\n(.*?)\n```", section.split("\n## ", 1)[0], re.S)


def test_ci_runs_the_readmes_two_commands() -> None:
    """The test command: .ci/run installs the same extras of the same build (the test
    build) and runs pytest the same way;
    the benchmark command: .ci/steps/35-readme-commands.sh takes it from the README."""
    bench, tests = readme_commands()
    assert "benchmarks/run.py" in bench
    assert tests.endswith(
        'FASTDEFLATE_TEST_HOOKS=1 pip install ".[test,all]" && pytest -n auto'), tests
    run = (ROOT / ".ci" / "run").read_text()
    assert 'python -m pip install -q ".[test,all]"' in run
    # the test build, as the README's command builds it, set before the install
    exported = run.find("\nexport FASTDEFLATE_TEST_HOOKS=1\n")
    assert -1 < exported < run.find('pip install -q ".[test,all]"')
    assert "pytest -n auto" in " ".join(pytest_commands(ROOT / ".ci" / "run"))
    step = (ROOT / ".ci" / "steps" / "35-readme-commands.sh").read_text()
    assert '"## Two commands"' in step and "benchmarks/run.py" in step


def test_the_benchmark_command_installs_every_library_the_benchmark_runs() -> None:
    """The benchmark's parts run each library's own server: the README's command must
    bring them (a newcomer saw tracebacks with `pip install ".[bench]"` alone)."""
    bench, _ = readme_commands()
    assert 'pip install ".[bench,all]"' in bench, bench
