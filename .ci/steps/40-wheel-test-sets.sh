#!/usr/bin/env bash
# CI step: the wheel jobs' test sets are consistent. With the cibuildwheel version the
# wheel workflow uses, resolve [tool.cibuildwheel] (overrides included) for every wheel it
# would build, and check that FASTDEFLATE_ABSENT_PEERS names exactly the optional test
# peers that wheel's test run leaves out (.ci/wheel_test_sets.py). Bounded: ~20 s.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"

version=$(grep -oE 'pypa/cibuildwheel@v[0-9.]+' .github/workflows/wheels.yml | head -1 | cut -d@ -f2)
[ -n "$version" ] || { echo "FAIL: no cibuildwheel version in .github/workflows/wheels.yml" >&2; exit 1; }
work=$(mktemp -d /tmp/fastdeflate-cibw-XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "cibuildwheel==${version#v}"
"$work/venv/bin/python" .ci/wheel_test_sets.py --table
