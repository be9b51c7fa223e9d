#!/usr/bin/env bash
# CI step: the oldest version of each websocket library fastdeflate supports. The main
# suite ran on the newest releases that `pip install ".[all]"` resolved; the libraries'
# internals the adapters hook into changed since their oldest supported versions
# (aiohttp's writer got its send lock in 3.13.2; websockets 16 renamed the future its
# send() waits on, 15 added ws.close_code; wsproto's BytesMessage.data changed type...). For each library this step takes the run's wheel of this checkout
# (.ci/wheel.sh), installs it with `LIBRARY==oldest` (the lower bound of the library's
# extra in pyproject.toml) into a fresh virtual environment of its own, checks that
# fastdeflate enables that library there, and runs the library's integration tests and
# the cross-library matrix's pairs with it there (`-k LIBRARY`). Every library's oldest
# version installs from the package index on CPython 3.11 (autobahn's and daphne's
# extras need 3.11+, which the step's python is). Runs after the main suite, with the CI
# venv active and the working directory at the repository root. Bounded: ~5 minutes on
# 2 cores (the installs come from pip's cache: ~10 s a library).
#
#   bash .ci/steps/15-oldest-libraries.sh                  # every library
#   bash .ci/steps/15-oldest-libraries.sh tornado          # one (or a few)
#   bash .ci/steps/15-oldest-libraries.sh tornado==6.3.3   # another version, to try it
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS

# Each library's tests: its own modules (whole), then the modules run with -k LIBRARY.
declare -A own=(
    [websockets]="tests/integrations/test_websockets.py tests/integrations/test_off_loop.py"
    [aiohttp]="tests/integrations/test_aiohttp.py tests/integrations/test_off_loop_aiohttp.py"
    [wsproto]="tests/integrations/test_wsproto.py tests/integrations/test_off_loop_wsproto.py"
    [tornado]="tests/integrations/test_tornado.py tests/integrations/test_off_loop_tornado.py"
    [autobahn]="tests/integrations/test_autobahn.py"
    [daphne]="tests/integrations/test_channels.py"
)
shared="tests/integrations/test_matrix.py tests/integrations/test_fanout.py"

# "tornado>=6.4" in pyproject.toml -> "tornado 6.4.0"; one line per library (or per
# argument: LIBRARY, or LIBRARY==VERSION to try another version).
python - "$@" > "${TMPDIR:-/tmp}/fastdeflate-oldest-$$" <<'EOF'
import re
import sys
import tomllib

LIBRARIES = ("websockets", "aiohttp", "wsproto", "tornado", "autobahn", "daphne")
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
oldest = {}
for library in LIBRARIES:
    specs = [m.group(1) for req in extras.get(library, ())
             if (m := re.match(rf"{library}>=([0-9.]+)\s*(;|$)", req))]
    if len(specs) != 1:
        sys.exit(f"FAIL: no single {library}>=X.Y in the {library} extra of pyproject.toml")
    parts = specs[0].split(".")
    oldest[library] = ".".join(parts + ["0"] * (3 - len(parts)))
wanted = sys.argv[1:] or list(LIBRARIES)
for arg in wanted:
    library, _, version = arg.partition("==")
    if library not in oldest:
        sys.exit(f"FAIL: {library!r} is not one of {', '.join(LIBRARIES)}")
    print(library, version or oldest[library])
EOF
mapfile -t plan < "${TMPDIR:-/tmp}/fastdeflate-oldest-$$"
rm -f "${TMPDIR:-/tmp}/fastdeflate-oldest-$$"

work=$(mktemp -d /tmp/fastdeflate-oldest-XXXXXX)
trap 'rm -rf "$work"' EXIT
wheel=$(bash .ci/wheel.sh bundled)
times=()

for line in "${plan[@]}"; do
    read -r library version <<< "$line"
    lib_start=$SECONDS
    echo "--- $library==$version (oldest supported, from pyproject.toml, unless named)"
    venv="$work/$library"
    # No pip in the venv: the CI venv's pip installs into it (--python), without
    # compiling every module to bytecode first (the tests import a fraction of them).
    python3 -m venv --without-pip "$venv"
    timeout 600 python -m pip --python "$venv/bin/python" install -q --no-compile \
        "$wheel[test,all]" "$library==$version" 2>&1 | grep -v "is ignored: it is neither" || true
    (cd / && "$venv/bin/python" - "$library" "$version" <<'EOF'
import sys
import warnings
from importlib.metadata import version

import fastdeflate
from fastdeflate import integrations

library, wanted = sys.argv[1:]
installed = version(library)
print(library, installed, "| fastdeflate", fastdeflate.IMPLEMENTATION, "from",
      fastdeflate.__file__)
pad = lambda v: tuple(int(p) for p in v.split(".")) + (0,) * (3 - len(v.split(".")))
if pad(installed) != pad(wanted):
    sys.exit(f"FAIL: {library} {installed} installed, {wanted} wanted")
if fastdeflate.IMPLEMENTATION != "cython":
    sys.exit("FAIL: the wheel's compiled extension did not import")
__import__(integrations._MODULES[library][0])  # the module the adapter patches
with warnings.catch_warnings():
    warnings.simplefilter("error", RuntimeWarning)  # a refused version fails here
    enabled = fastdeflate.enable(libraries=[library])
state = fastdeflate.status()["libraries"][library]
if library not in enabled or state["state"] != "enabled":  # (daphne brings autobahn)
    sys.exit(f"FAIL: {library} {installed} not enabled: {state}")
fastdeflate.disable()
EOF
    )
    # `pytest` from the venv's bin (not `python -m pytest`): the installed wheel is tested.
    # FASTDEFLATE_CHECK_SKIPS=1: a module whose selected tests all skip on this version fails.
    FASTDEFLATE_CHECK_SKIPS=1 timeout 600 "$venv/bin/pytest" -n 2 -q -p no:cacheprovider -rs \
        ${own[$library]} \
        | tee "$work/$library-own.log"
    grep -Eq '^[0-9]+ passed' "$work/$library-own.log" \
        || { echo "FAIL: no $library test ran" >&2; exit 1; }
    if [ "$library" != daphne ]; then  # (daphne has no pair in the matrix nor fan-out)
        FASTDEFLATE_CHECK_SKIPS=1 timeout 600 "$venv/bin/pytest" -n 2 -q -p no:cacheprovider -rs \
            $shared -k "$library" \
            | tee "$work/$library-shared.log"
        grep -Eq '^[0-9]+ passed' "$work/$library-shared.log" \
            || { echo "FAIL: no $library pair of the matrix ran" >&2; exit 1; }
    fi
    rm -rf "$venv"
    times+=("$library $version: $((SECONDS - lib_start))s")
done

printf '  %s\n' "${times[@]}"
echo "oldest-libraries step: OK in $((SECONDS - start))s"
