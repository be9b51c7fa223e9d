"""Zero-code activation: FASTDEFLATE_ENABLE read at interpreter start-up by the installed
``fastdeflate-enable.pth``, ``python -m fastdeflate run``, ``enable(children=...)``, and
``python -m fastdeflate``'s status. Every process here is a real interpreter started the
way users start theirs (the servers' worker processes: integrations/test_workers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import fastdeflate
from fastdeflate import _autoenable
from fastdeflate._status import startup_hook
from fastdeflate.integrations import SUPPORTED

REPORT = ("import sys, fastdeflate.integrations as i; "
          "print('imported' if 'fastdeflate' in sys.modules else 'not imported', "
          "i._waiting and sorted(i._waiting) or '-')")

needs_hook = pytest.mark.skipif(
    startup_hook() is None,
    reason="no fastdeflate-enable.pth in site-packages (an editable install)")


def python(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("FASTDEFLATE_ENABLE", "FASTDEFLATE_PURE")}
    environ.update(env)
    return subprocess.run([sys.executable, *args], env=environ, capture_output=True,
                          text=True, timeout=60, cwd="/")


def at_startup(value: str, *flags: str, **env: str) -> str:
    """What a new interpreter started with FASTDEFLATE_ENABLE=value has done by the time
    its first line runs (before it imports fastdeflate itself)."""
    code = ("import sys; print('enabled at start-up' if 'fastdeflate' in sys.modules "
            "else 'not enabled')\n"
            "try:\n import fastdeflate.integrations as i\n"
            "except ImportError:\n pass  # python -S: no site-packages at all\n"
            "else:\n print(','.join(sorted(i._waiting)))")
    out = python(*flags, "-c", code, env=dict(env, FASTDEFLATE_ENABLE=value))
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


@pytest.mark.parametrize(("value", "expected"), [
    ("1", list(SUPPORTED)), ("true", list(SUPPORTED)), ("ALL", list(SUPPORTED)),
    ("0", None), ("", None), ("off", None),
    ("websockets,aiohttp", ["websockets", "aiohttp"]), (" wsproto ", ["wsproto"]),
    ("1,daphne", [*SUPPORTED, "daphne"]), ("all,websockets", list(SUPPORTED)),
])
def test_values_of_the_variable(value, expected):
    assert _autoenable.libraries_from(value) == expected


def test_an_unknown_library_is_refused_by_name():
    with pytest.raises(ValueError, match="not a supported library: flask"):
        _autoenable.libraries_from("websockets,flask")


@needs_hook
def test_the_variable_enables_fastdeflate_at_start_up():
    out = at_startup("1")
    assert "enabled at start-up" in out
    assert out.splitlines()[1] == ",".join(sorted(SUPPORTED))  # all to patch on import


@needs_hook
def test_a_list_enables_only_those_libraries():
    assert at_startup("websockets,tornado").splitlines()[1] == "tornado,websockets"


@needs_hook
@pytest.mark.parametrize("value", ["", "0"])
def test_unset_or_off_imports_nothing(value):
    assert at_startup(value).splitlines()[0] == "not enabled"


@needs_hook
@pytest.mark.parametrize("flag", ["-E", "-I", "-S"])
def test_not_read_when_the_environment_or_site_is_ignored(flag):
    """-E and -I ignore the environment; -S processes no site-packages .pth."""
    assert at_startup("1", flag).splitlines()[0] == "not enabled"


@needs_hook
def test_a_bad_value_warns_and_the_interpreter_goes_on():
    out = at_startup("websockets,flask")
    assert out.splitlines()[0] == "enabled at start-up"  # fastdeflate was imported to read it
    assert "FASTDEFLATE_ENABLE ignored" in out and "flask" in out


def test_a_rejected_value_is_a_cause_troubleshooting_names(clean_environment, monkeypatch):
    """The warning a rejected FASTDEFLATE_ENABLE gives at start-up is the one the
    troubleshooting page quotes, and nothing is enabled (the valid names neither)."""
    monkeypatch.setenv("FASTDEFLATE_ENABLE", "websockets,flask")
    with pytest.warns(RuntimeWarning) as caught:
        _autoenable.at_startup()
    assert fastdeflate.integrations._waiting == set()
    message = str(caught[0].message)
    page = (Path(__file__).resolve().parents[1] / "docs" / "how-to" / "troubleshoot.md")
    assert f"RuntimeWarning: {message}\n" in page.read_text(encoding="utf-8")


@needs_hook
def test_without_the_compiled_extension_libraries_stay_stock_and_it_says_so():
    out = at_startup("1", FASTDEFLATE_PURE="1")
    assert "compiled extension is not available" in out
    assert out.splitlines()[1] == ""  # nothing to patch


@needs_hook
def test_run_sets_the_variable_for_the_command():
    code = ("import os, sys; print(os.environ['FASTDEFLATE_ENABLE']); "
            "import fastdeflate.integrations as i; print(','.join(sorted(i._waiting)))")
    out = python("-m", "fastdeflate", "run", "--libraries", "aiohttp", "--",
                 sys.executable, "-c", code, env={})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["aiohttp", "aiohttp"]


def test_run_refuses_a_bad_list_and_a_missing_command():
    out = python("-m", "fastdeflate", "run", "--libraries", "flask", "--", "true", env={})
    assert out.returncode != 0 and "not a supported library: flask" in out.stderr
    out = python("-m", "fastdeflate", "run", env={})
    assert out.returncode != 0 and "no command given" in out.stderr


def test_run_passes_on_the_command_exit_status():
    out = python("-m", "fastdeflate", "run", "--", sys.executable, "-c",
                 "raise SystemExit(7)", env={})
    assert out.returncode == 7


def test_the_status_of_this_environment():
    out = python("-m", "fastdeflate", env={})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"fastdeflate {fastdeflate.__version__}: ")
    assert any(line.startswith("start-up hook:") for line in lines[1:3])
    for library in SUPPORTED:
        assert any(line.strip().startswith(library) for line in lines[2:]), library


# --- enable() passes itself on to the processes started after it --------------------------


@pytest.fixture
def clean_environment(monkeypatch):
    monkeypatch.delenv("FASTDEFLATE_ENABLE", raising=False)
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fastdeflate.disable()


def test_enable_sets_the_variable_for_children_and_disable_takes_it_back(clean_environment):
    if fastdeflate.IMPLEMENTATION != "cython":
        pytest.skip("enable() without the compiled extension enables nothing")
    fastdeflate.enable()
    assert os.environ["FASTDEFLATE_ENABLE"] == "1"
    fastdeflate.disable()
    assert "FASTDEFLATE_ENABLE" not in os.environ
    fastdeflate.disable()
    fastdeflate.enable(libraries=iter(["wsproto", "tornado"]))  # any iterable, read once
    assert os.environ["FASTDEFLATE_ENABLE"] == "wsproto,tornado"


def test_enable_leaves_a_variable_set_by_the_user_and_children_false_sets_none(
        clean_environment, monkeypatch):
    if fastdeflate.IMPLEMENTATION != "cython":
        pytest.skip("enable() without the compiled extension enables nothing")
    monkeypatch.setenv("FASTDEFLATE_ENABLE", "websockets")
    fastdeflate.enable()
    fastdeflate.disable()
    assert os.environ["FASTDEFLATE_ENABLE"] == "websockets"
    monkeypatch.delenv("FASTDEFLATE_ENABLE")
    fastdeflate.enable(children=False)
    assert "FASTDEFLATE_ENABLE" not in os.environ


def test_enable_takes_a_single_name_as_one_library(clean_environment):
    """``libraries="websockets"`` is one library, not ten letters."""
    if fastdeflate.IMPLEMENTATION != "cython":
        pytest.skip("enable() without the compiled extension enables nothing")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a library in a version it cannot drive)
        fastdeflate.enable(libraries="wsproto")
    assert os.environ["FASTDEFLATE_ENABLE"] == "wsproto"
    assert fastdeflate.integrations._waiting <= {"wsproto"}
    with pytest.raises(ValueError, match=r"not a supported library: flask \("):
        fastdeflate.enable(libraries="flask")
    assert fastdeflate.integrations.check_supported("tornado") == ("tornado",)


def test_enable_refuses_an_unknown_library(clean_environment):
    if fastdeflate.IMPLEMENTATION != "cython":
        pytest.skip("enable() without the compiled extension enables nothing")
    with pytest.raises(ValueError, match="not a supported library: flask"):
        fastdeflate.enable(libraries=["flask"])
