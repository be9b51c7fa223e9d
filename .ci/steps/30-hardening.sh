#!/usr/bin/env bash
# Hardening, bounded (~10-12 min on 2 cores): each fuzz target for a short time, the
# codec tests and the fuzzers on an ASan+UBSan build (the codec tests again on the bundled,
# patched zlib-ng built with ASan too), and valgrind memcheck over a loop
# through every path of the codec. Runs after the main suite in .ci/run, with the CI
# venv active and the working directory at the repository root. Budgets can be changed
# with FUZZ_RUNS, FUZZ_SECONDS (a cap), SAN_FUZZ_RUNS, SAN_FUZZ_SECONDS and VALGRIND_ROUNDS.
#
# CI's fuzzing is a regression check: a fixed seed (FUZZ_SEED), a fixed number of inputs
# per target, a fresh work directory seeded from fuzz/corpus/, so it repeats (nearly:
# libFuzzer's path varies a little) what passed before the commit. Open-ended exploration
# is fuzz/run.sh run for longer with random seeds (fuzz/README.md); its findings, once
# fixed, go into the corpus.
# fuzz/run.sh fails a target that executed fewer inputs than its -runs (the time cap
# stopped it first) or none at all; the caps leave room for a busy machine (measured on
# 2 shared cores: 9-43 s for 80,000 inputs, 5-9 s for 60,000 on the sanitized build; with
# other work on both cores, 70 s for the decoder's and 122 s for the differential's 80,000).
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS

python -m pip install -q --upgrade atheris Cython setuptools  # fuzzing; building the sanitized copy
if ! command -v valgrind >/dev/null; then
    apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi

seed="${FUZZ_SEED:-7692}"
rm -rf /tmp/fastdeflate-ci-fuzz /tmp/fastdeflate-ci-fuzz-san

echo "--- fuzzers on the installed package (${FUZZ_RUNS:-80000} inputs each, seed $seed)"
(cd / && PYTHON=python FUZZ_WORK=/tmp/fastdeflate-ci-fuzz \
    FUZZ_FLAGS="-seed=$seed -runs=${FUZZ_RUNS:-80000}" \
    bash "$CI_ROOT/fuzz/run.sh" "${FUZZ_SECONDS:-240}")

echo "--- ASan + UBSan build: codec tests and fuzzers (${SAN_FUZZ_RUNS:-60000} inputs each)"
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san tools/sanitize.sh build
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san tools/sanitize.sh test
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san FUZZ_WORK=/tmp/fastdeflate-ci-fuzz-san \
    FUZZ_FLAGS="-seed=$seed -runs=${SAN_FUZZ_RUNS:-60000}" \
    tools/sanitize.sh fuzz "${SAN_FUZZ_SECONDS:-120}"

echo "--- ASan + UBSan build on the bundled, patched zlib-ng (buildtools/zlib_ng_patches.py): codec tests"
sdist_env=()  # the sources the main build fetched, if it left them here
sdist="$PWD/build/zlib-ng/$(python -c 'from buildtools import zlib_ng; print(zlib_ng.SDIST_FILE)')"
[[ -f $sdist ]] && sdist_env=("FASTDEFLATE_ZLIB_NG_SDIST=$sdist")
command -v cmake >/dev/null || python -m pip install -q cmake  # built outside pip's isolation
env PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san-ng FASTDEFLATE_ZLIB=bundled "${sdist_env[@]}" \
    tools/sanitize.sh build
PYTHON=python SAN_DIR=/tmp/fastdeflate-ci-san-ng tools/sanitize.sh test

echo "--- valgrind memcheck (${VALGRIND_ROUNDS:-10} rounds)"
(cd / && PYTHON=python bash "$CI_ROOT/tools/valgrind.sh" "${VALGRIND_ROUNDS:-10}")

echo "hardening step: OK in $((SECONDS - start))s"
