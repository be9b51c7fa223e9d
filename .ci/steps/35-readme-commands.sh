#!/usr/bin/env bash
# CI step: the README's main command as a newcomer runs it. The main run already ran the
# README's test command (`pip install ".[test,all]" && pytest -n auto`) in a fresh virtual
# environment; this step takes the other one, the benchmark on the built-in payloads, from
# the README's "Two commands" section as it is written, and runs it in a fresh virtual
# environment of its own (the short run). Fails if the command fails, prints a traceback,
# or reports a part that failed. Bounded: ~3 minutes on 2 cores.
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
timeout 1200 bash -c "$command" >"$work/bench.log" 2>&1
rc=$?
set -e
tail -40 "$work/bench.log"
[ $rc -eq 0 ] || { echo "FAIL: the README's benchmark command exited with $rc" >&2; exit 1; }
if grep -nE "Traceback|CHECK FAILED|run failed|Error:" "$work/bench.log"; then
    echo "FAIL: the README's benchmark command printed a traceback or a failed part" >&2
    exit 1
fi
echo "README commands step: OK in $((SECONDS - start))s"
