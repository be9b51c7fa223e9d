"""What the start-up hook costs an interpreter that does not use it.

``fastdeflate-enable.pth`` runs one line at every start-up of every interpreter of the
environment it is installed in; with ``FASTDEFLATE_ENABLE`` unset it only reads the
variable. This measures ``python -c pass`` in two fresh virtual environments of this
Python, one without fastdeflate and one with only the hook in its site-packages, runs
interleaved (A B A B ...), and prints the medians and their difference; with ``--out``
it writes them to ``startup.md`` there too (the docs take the figures from it).

    python benchmarks/startup_hook.py [RUNS] [--out benchmarks/results]   (default 60 pairs)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from fdbench import report  # noqa: E402

HOOK = Path(__file__).resolve().parent.parent / "fastdeflate-enable.pth"


def interpreter(root: Path, with_hook: bool) -> str:
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if with_hook:
        site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        shutil.copy(HOOK, site)
    return str(python)


def start_once(python: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([python, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("runs", nargs="?", type=int, default=60, help="pairs (default 60)")
    parser.add_argument("--out", type=Path, help="results folder to write startup.md to")
    args = parser.parse_args()
    runs = args.runs
    env = {k: v for k, v in os.environ.items() if k != "FASTDEFLATE_ENABLE"}
    with tempfile.TemporaryDirectory() as tmp:
        without = interpreter(Path(tmp) / "without", False)
        with_hook = interpreter(Path(tmp) / "with-hook", True)
        for python in (without, with_hook):  # warm the file cache
            start_once(python, env)
        times: dict[str, list[float]] = {"without": [], "with-hook": []}
        for _ in range(runs):
            times["without"].append(start_once(without, env))
            times["with-hook"].append(start_once(with_hook, env))
    a, b = (statistics.median(times[k]) * 1e3 for k in ("without", "with-hook"))
    paired = statistics.median(y - x for x, y in zip(times["without"], times["with-hook"]))
    print(f"python -c pass, {runs} interleaved pairs, FASTDEFLATE_ENABLE unset "
          f"({sys.version.split()[0]}):")
    print(f"  fastdeflate not installed:  {a:.2f} ms (median)")
    print(f"  start-up hook installed:    {b:.2f} ms (median)")
    print(f"  difference (median of pairs): {paired * 1e3:+.3f} ms")
    if args.out:
        table = report.markdown_table(["interpreter", "python -c pass (ms)"], [
            ["fastdeflate not installed (median)", f"{a:.2f}"],
            ["start-up hook installed, FASTDEFLATE_ENABLE unset (median)", f"{b:.2f}"],
            ["difference (median of the pairs)", f"{paired * 1e3:+.2f}"],
        ])
        legend = (f"Wall-clock time of `python -c pass`, {runs} pairs run interleaved, in two "
                  "fresh virtual environments of this Python: one without fastdeflate, one "
                  "with only `fastdeflate-enable.pth` in its site-packages.")
        command = " ".join(["python benchmarks/startup_hook.py", str(runs), "--out",
                            str(args.out)])
        report.write_results(args.out / "startup.md", "start-up hook", command,
                             ["## Start-up", table, legend])
        print(f"results: {args.out / 'startup.md'}")


if __name__ == "__main__":
    main()
