#!/usr/bin/env bash
# CI step: the oldest aiohttp fastdeflate supports. The main suite ran on the newest
# aiohttp that `pip install ".[all]"` resolved; aiohttp's WebSocket writer and reader
# changed since the oldest one (its writer's send lock only arrived in 3.13.2, its
# decompressor's handling of deflate streams in 3.14). So this step takes the run's wheel
# of this checkout (.ci/wheel.sh), installs it with the oldest aiohttp that
# pyproject.toml accepts into a fresh virtual environment, and runs the aiohttp tests and
# the cross-library matrix's aiohttp pairs there. Runs after the main suite, with the CI
# venv active and the working directory at the repository root. Bounded: ~3 minutes.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS

# "aiohttp>=3.12" in pyproject.toml -> aiohttp==3.12.0
oldest=$(python - <<'EOF'
import re
spec = re.search(r'"aiohttp>=([0-9.]+)"', open("pyproject.toml").read())
if spec is None:
    raise SystemExit("FAIL: no aiohttp>=X.Y requirement in pyproject.toml")
parts = spec.group(1).split(".")
print(".".join(parts + ["0"] * (3 - len(parts))))
EOF
)
echo "oldest supported aiohttp: $oldest"

work=$(mktemp -d /tmp/fastdeflate-aiohttp-oldest-XXXXXX)
trap 'rm -rf "$work"' EXIT

wheel=$(bash .ci/wheel.sh bundled)

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
timeout 600 "$work/venv/bin/python" -m pip install -q "$wheel[test,all]" "aiohttp==$oldest"
(cd / && "$work/venv/bin/python" - "$oldest" <<'EOF'
import sys
import aiohttp
import fastdeflate
print("aiohttp", aiohttp.__version__, "| fastdeflate", fastdeflate.IMPLEMENTATION,
      "from", fastdeflate.__file__)
if aiohttp.__version__ != sys.argv[1]:
    sys.exit(f"FAIL: aiohttp {aiohttp.__version__} installed, {sys.argv[1]} wanted")
if fastdeflate.IMPLEMENTATION != "cython":
    sys.exit("FAIL: the wheel's compiled extension did not import")
EOF
)

# `pytest` from the venv's bin (not `python -m pytest`): the installed wheel is tested.
# FASTDEFLATE_CHECK_SKIPS=1: a module whose selected tests all skip on this aiohttp fails.
FASTDEFLATE_CHECK_SKIPS=1 timeout 600 "$work/venv/bin/pytest" -q -p no:cacheprovider -rs \
    tests/integrations/test_aiohttp.py tests/integrations/test_matrix.py \
    tests/integrations/test_fanout.py -k aiohttp \
    | tee "$work/pytest.log"
grep -Eq '^[0-9]+ passed' "$work/pytest.log" || { echo "FAIL: no aiohttp test ran" >&2; exit 1; }

echo "aiohttp-oldest step: OK in $((SECONDS - start))s"
