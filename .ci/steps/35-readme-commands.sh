#!/usr/bin/env bash
# CI step: the README's main command as a newcomer runs it. The main run already ran the
# README's test command (`FASTDEFLATE_TEST_HOOKS=1 pip install ".[test,all]" && pytest
# -n auto`) in a fresh virtual environment; this step takes the other one, the benchmark
# on the built-in payloads, from the README's "Two commands" section as it is written, and
# runs it in a fresh virtual environment of its own (the short run). Fails if the command
# fails, prints a traceback, or reports a part that failed. That install is the default build (the wheels'): the step
# then checks that it exposes no test hook and runs a share of the suite on it.
# Bounded: ~3 minutes on 2 cores.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS

# The first ```sh block of the "Two commands" section that runs benchmarks/run.py.
command=$(python - <<'PY'
import re
text = open("README.md").read()
section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```sh\n(.*?)\n```", section, re.S)
bench = [b for b in blocks if "benchmarks/run.py" in b]
if len(bench) != 1:
    raise SystemExit(f"FAIL: expected one benchmark command in the README, found {bench}")
print(bench[0].strip())
PY
)
echo "README's benchmark command: $command"

work=$(mktemp -d /tmp/fastdeflate-readme-XXXXXX)
trap 'rm -rf "$work"' EXIT
# A copy of the checkout's files, as a newcomer's clone: the extension is built afresh,
# and the results it writes stay out of this checkout. The engines' pinned sdists and
# builds come from the main run's build cache (build/zlib-ng, build/isal), which .ci/run's
# `pip install ".[test,all]"` filled from scratch on this fresh clone: the fetch and
# build a newcomer's first install runs, already run once. ISA-L's static library is
# reused (its cache key: release, sdist hash, target, edits, toolchain variables);
# zlib-ng's key names the checkout's path, so zlib-ng is built again here, from the
# cached sdist and unpacked sources.
git ls-files -z | tar --null -T - -cf - | tar -C "$work" -xf -
for cache in build/zlib-ng build/isal; do
    if [ -d "$cache" ]; then
        mkdir -p "$work/build"
        cp -a "$cache" "$work/build/"
    fi
done
cd "$work"
set +e
timeout 1200 env -u FASTDEFLATE_TEST_HOOKS bash -c "$command" >"$work/bench.log" 2>&1
rc=$?
set -e
tail -40 "$work/bench.log"
[ $rc -eq 0 ] || { echo "FAIL: the README's benchmark command exited with $rc" >&2; exit 1; }
if grep -nE "Traceback|CHECK FAILED|run failed|Error:" "$work/bench.log"; then
    echo "FAIL: the README's benchmark command printed a traceback or a failed part" >&2
    exit 1
fi

# The README's install is the default build (the wheels'): none of the test build's entry
# points (extension/test_build/*.pxi) is there, and the tests that need none pass on it
# (those that need the test build skip for that one reason, which the skip check knows).
hooks=$(sed -nE 's/^def (_[a-z_]+)\(.*/\1/p' "$work"/extension/test_build/*.pxi | sort -u)
[ "$(echo "$hooks" | wc -l)" -ge 15 ] \
    || { echo "FAIL: test build entry points not found: $hooks" >&2; exit 1; }
exposed=$(cd / && "$work/.venv/bin/python" -c "
import sys, fastdeflate._fastdeflate as m
print(' '.join(n for n in sys.argv[1:] if hasattr(m, n)))" $hooks)
[ -z "$exposed" ] || { echo "FAIL: the default build exposes test hooks: $exposed" >&2; exit 1; }
echo "the default build exposes none of the test build's $(echo "$hooks" | wc -l) entry points"
tools=(pytest pytest-timeout pytest-xdist hypothesis psutil)  # what these modules need
"$work/.venv/bin/python" -m pip install -q "${tools[@]}"
(cd "$work" && FASTDEFLATE_CHECK_SKIPS=1 FASTDEFLATE_REQUIRE_EXTENSION=1 timeout 600 \
    "$work/.venv/bin/pytest" -q -p no:cacheprovider -n 2 -rs tests/test_codec.py \
    tests/test_live_states.py tests/test_broadcast.py tests/test_what_pays.py \
    tests/test_compress_once.py tests/test_status.py 2>&1 | tail -15) \
    || { echo "FAIL: tests on the default build" >&2; exit 1; }
echo "README commands step: OK in $((SECONDS - start))s"
