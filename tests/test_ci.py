"""CI's own checks can fail: fuzz/run.sh on a fuzzer that ran too little.

fuzz/run.sh is run as CI runs it, on stand-in targets (Python scripts that print what
libFuzzer prints, or nothing), so that no atheris is needed here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

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

