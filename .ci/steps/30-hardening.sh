#!/usr/bin/env bash
# Hardening, bounded (~8-10 min on 2 cores): each fuzz target for a short time, the
# codec tests and the fuzzers on an ASan+UBSan build, and valgrind memcheck over a loop
# through every path of the codec. Runs after the main suite in .ci/run, with the CI
# venv active and the working directory at the repository root. Budgets can be changed
# with FUZZ_SECONDS, SAN_FUZZ_SECONDS and VALGRIND_ROUNDS.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS

python -m pip install -q --upgrade atheris Cython setuptools  # fuzzing; building the sanitized copy
if ! command -v valgrind >/dev/null; then
    apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi

echo "--- fuzzers on the installed package (${FUZZ_SECONDS:-60}s each)"
(cd / && PYTHON=python FUZZ_WORK=/tmp/fastdeflate-ci-fuzz bash "$CI_ROOT/fuzz/run.sh" "${FUZZ_SECONDS:-60}")

echo "--- ASan + UBSan build: codec tests and fuzzers (${SAN_FUZZ_SECONDS:-30}s each)"
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san tools/sanitize.sh build
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san tools/sanitize.sh test
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san FUZZ_WORK=/tmp/fastdeflate-ci-fuzz-san \
    tools/sanitize.sh fuzz "${SAN_FUZZ_SECONDS:-30}"

echo "--- valgrind memcheck (${VALGRIND_ROUNDS:-10} rounds)"
(cd / && PYTHON=python bash "$CI_ROOT/tools/valgrind.sh" "${VALGRIND_ROUNDS:-10}")

echo "hardening step: OK in $((SECONDS - start))s"
