#!/usr/bin/env bash
# CI helper: the path of a wheel of this checkout on ENGINE (bundled | system), built once
# per CI run into $CI_WHEELS/ENGINE/ and reused by every step that needs it (each build
# compiles the extension, and zlib-ng for the bundled engine: minutes on 2 cores): the
# test build where FASTDEFLATE_TEST_HOOKS=1 (.ci/run sets it), else the default build
# (into $CI_WHEELS/ENGINE-default/).
#
#   wheel=$(bash .ci/wheel.sh bundled)
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/..}"
engine="$1"
dir="${CI_WHEELS:-/tmp/fastdeflate-ci-wheels}/$engine"
[ "${FASTDEFLATE_TEST_HOOKS:-0}" = 1 ] || dir="$dir-default"
if ! ls "$dir"/fastdeflate-*.whl >/dev/null 2>&1; then
    mkdir -p "$dir"
    # The system-engine wheel also takes Windows' kind of lock (CPython's PyThread locks,
    # extension/lock.h), so the engines step tests that branch too.
    locks=auto
    [ "$engine" = system ] && locks=pythread
    FASTDEFLATE_ZLIB=$engine FASTDEFLATE_LOCKS=$locks timeout 900 \
        python -m pip wheel -q --no-deps -w "$dir" . >&2
fi
ls "$dir"/fastdeflate-*.whl
