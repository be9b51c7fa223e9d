#!/usr/bin/env bash
# Hardening, bounded (~7-9 min on 2 cores): each fuzz target for a short time, the
# codec tests, ISA-L's inflate tests and the fuzzers on an ASan+UBSan build of the shipped
# engines (the bundled, patched zlib-ng and ISA-L, built with the sanitizers' flags too;
# ISA-L's assembly is not instrumented), the codec tests again on an ASan+UBSan build
# against the system zlib, and valgrind memcheck over a loop
# through every path of the codec. Runs after the main suite in .ci/run, with the CI
# venv active and the working directory at the repository root. Budgets can be changed
# with FUZZ_SECONDS, SAN_FUZZ_SECONDS (per target) and VALGRIND_ROUNDS.
#
# CI's fuzzing is a regression check sized by time, so that a slow machine makes it
# shorter, not the run longer: a fixed seed (FUZZ_SEED), a fresh work directory seeded
# from fuzz/corpus/ (every committed input runs first), then mutations until the time is
# up; a target that executed fewer than FUZZ_MIN_RUNS inputs fails (it never got going).
# Open-ended exploration is fuzz/run.sh run for longer with random seeds
# (fuzz/README.md); its findings, once fixed, go into the corpus.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS

python -m pip install -q --upgrade atheris Cython setuptools  # fuzzing; building the sanitized copy
if ! command -v valgrind >/dev/null; then
    apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi

seed="${FUZZ_SEED:-7692}"
rm -rf /tmp/fastdeflate-ci-fuzz /tmp/fastdeflate-ci-fuzz-san
logs=$(mktemp -d /tmp/fastdeflate-ci-hardening-XXXXXX)
trap 'rm -rf "$logs"' EXIT

# The fuzzers (one target at a time) and valgrind each keep one core busy: on CI's two
# cores each of them runs beside a job of its own, with its output kept until it is over.
# Neither budget changes: the fuzzers run for their time, valgrind its rounds.
pids=() names=()
start_job() {  # start_job NAME COMMAND...: in the background, output to $logs/NAME.log
    local name="$1"
    shift
    "$@" >"$logs/$name.log" 2>&1 &
    pids+=($!) names+=("$name")
}
wait_jobs() {  # wait for every job started, print each one's output; fail if one failed
    local i failed=0
    for i in "${!pids[@]}"; do
        if wait "${pids[$i]}"; then
            cat "$logs/${names[$i]}.log"
        else
            cat "$logs/${names[$i]}.log"
            echo "FAIL: ${names[$i]}" >&2
            failed=1
        fi
    done
    pids=() names=()
    [ "$failed" = 0 ] || exit 1
}

echo "--- fuzzers on the installed package (${FUZZ_SECONDS:-14} s each, seed $seed), beside valgrind memcheck (${VALGRIND_ROUNDS:-10} rounds)"
start_job fuzz bash -c 'cd / && PYTHON=python FUZZ_WORK=/tmp/fastdeflate-ci-fuzz FUZZ_MIN_RUNS=1000 \
    FUZZ_FLAGS="-seed=$1" bash "$CI_ROOT/fuzz/run.sh" "$2"' _ "$seed" "${FUZZ_SECONDS:-14}"
start_job valgrind bash -c 'cd / && PYTHON=python bash "$CI_ROOT/tools/valgrind.sh" "$1"' _ \
    "${VALGRIND_ROUNDS:-10}"
wait_jobs

echo "--- ASan + UBSan builds: the bundled zlib-ng + ISA-L (as shipped), beside the system zlib"
command -v cmake >/dev/null || python -m pip install -q cmake  # zlib-ng's build, outside pip
start_job build-bundled env PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san FASTDEFLATE_ZLIB=bundled \
    FASTDEFLATE_ISAL=bundled tools/sanitize.sh build
start_job build-system env PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san-sys FASTDEFLATE_ZLIB=system \
    tools/sanitize.sh build
wait_jobs

echo "--- ASan + UBSan, bundled zlib-ng + ISA-L: codec tests, ISA-L inflate tests"
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san tools/sanitize.sh test

echo "--- ASan + UBSan: the fuzzers on the bundled build (${SAN_FUZZ_SECONDS:-7} s each), beside the codec tests on the system zlib"
start_job fuzz-san env PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san FUZZ_WORK=/tmp/fastdeflate-ci-fuzz-san \
    FUZZ_MIN_RUNS=100 FUZZ_FLAGS="-seed=$seed" \
    tools/sanitize.sh fuzz "${SAN_FUZZ_SECONDS:-7}"
start_job test-system env PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san-sys tools/sanitize.sh test
wait_jobs

echo "hardening step: OK in $((SECONDS - start))s"
