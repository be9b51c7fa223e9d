#!/usr/bin/env bash
# CI step: Get started (docs/getting-started.md) as a newcomer follows it, from a fresh
# directory to "status() says enabled inside my uvicorn server". The commands are the
# page's own: its blocks marked <!-- newcomer: NAME --> (clone, install, check-install,
# app.py, serve, check, message; tests/test_docs.py checks the marks), run in that order
# in one shell, in a fresh virtual environment. Only these differ from the page:
#
# - clone: `git clone <repository-url> fastdeflate` becomes a copy of this checkout's
#   files (git ls-files), as the newcomer's clone;
# - install: `./fastdeflate[...]` becomes the wheel of this checkout that CI builds once
#   per run (FASTDEFLATE_TEST_HOOKS=0 .ci/wheel.sh bundled: the default build, as a user's
#   install, not the run's test build): `pip install ./fastdeflate` builds exactly that
#   wheel (`pip wheel` of the same tree, bundled engines) and installs it, so the step
#   does not compile the engines a second time. The rest of the line
#   (the extras, uvicorn, starlette) is the page's. FASTDEFLATE_NEWCOMER_BUILD=1 runs
#   the page's line as written (a source build: minutes more);
# - serve, check, message: `--port 8000` becomes `--port 0` (an ephemeral port, on
#   127.0.0.1 as the page says), and the clients use the port uvicorn reports.
#
# Fails if a block fails, if `python -m fastdeflate` does not report the compiled codec,
# if the server's status() does not say websockets is enabled, or if the echo did not go
# through fastdeflate's compressor (status()'s traffic). Bounded: under a minute after
# the install (the server has 30 s to start; each check is time-limited).
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
root=$PWD
start=$SECONDS
work=$(mktemp -d /tmp/fastdeflate-newcomer-XXXXXX)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# The page's marked blocks, one file each.
python3 - "$root/docs/getting-started.md" "$work/blocks" <<'PY'
import re, sys
from pathlib import Path
text = Path(sys.argv[1]).read_text(encoding="utf-8")
out = Path(sys.argv[2])
out.mkdir()
wanted = ["clone", "install", "check-install", "app.py", "serve", "check", "message"]
found = {m.group(1): m.group(2) for m in re.finditer(
    r"^<!-- newcomer: ([\w.-]+) -->\n```\w+\n(.*?)^```", text, re.S | re.M)}
if list(found) != wanted:
    raise SystemExit(f"FAIL: getting-started.md's newcomer blocks are {list(found)}, "
                     f"expected {wanted}")
for name, body in found.items():
    (out / name).write_text(body, encoding="utf-8")
PY
blocks="$work/blocks"

clone_line='git clone <repository-url> fastdeflate'
grep -qxF "$clone_line" "$blocks/clone" \
    || { echo "FAIL: the clone block has no line '$clone_line'" >&2; exit 1; }
grep -q '"./fastdeflate\[' "$blocks/install" \
    || { echo "FAIL: the install block does not install \"./fastdeflate[...]\"" >&2; exit 1; }
grep -q -- '--port 8000' "$blocks/serve" \
    || { echo "FAIL: the serve block has no --port 8000" >&2; exit 1; }

export FASTDEFLATE_TEST_HOOKS=0  # a user's build, whichever way it is installed
if [ "${FASTDEFLATE_NEWCOMER_BUILD:-0}" = 1 ]; then
    install_from='./fastdeflate'
    echo "newcomer: the install block as written (a source build)"
else
    wheel=$(bash .ci/wheel.sh bundled)
    install_from="$wheel"
    echo "newcomer: ./fastdeflate installed from this checkout's wheel, $wheel"
fi

# The page's blocks, in order, in one shell (cd and the activated venv carry over).
{
    echo 'set -euo pipefail'
    echo "cd '$work'"
    # clone: this checkout's files, as the clone
    sed "s|^$clone_line\$|mkdir fastdeflate \&\& (cd '$root' \&\& git ls-files -z \| tar --null -T - -cf -) \| tar -C fastdeflate -xf -|" \
        "$blocks/clone"
    sed "s|\"\\./fastdeflate\\[|\"$install_from[|" "$blocks/install"
    echo 'echo "--- check-install"'
    echo "timeout 60 bash -euo pipefail '$blocks/check-install' | tee '$work/check-install.out'"
    echo "cp '$blocks/app.py' app.py"
    echo 'echo "--- serve"'
    # serve, in the background, on an ephemeral port; its log says which
    echo "$(sed 's/--port 8000/--port 0/' "$blocks/serve") > '$work/server.log' 2>&1 &"
    echo "echo \$! > '$work/server.pid'"
    echo "for _ in \$(seq 300); do grep -q 'Uvicorn running on' '$work/server.log' && break; sleep 0.1; done"
    echo "port=\$(grep -o 'Uvicorn running on http://127.0.0.1:[0-9]*' '$work/server.log' | grep -o '[0-9]*\$')"
    echo "[ -n \"\$port\" ] || { cat '$work/server.log' >&2; echo 'FAIL: uvicorn did not start' >&2; exit 1; }"
    echo 'echo "--- check"'
    echo "sed \"s/127.0.0.1:8000/127.0.0.1:\$port/g\" '$blocks/check' > '$work/check.sh'"
    echo "timeout 30 bash -euo pipefail '$work/check.sh' | tee '$work/check.out'"
    echo 'echo "--- message"'
    echo "sed \"s/127.0.0.1:8000/127.0.0.1:\$port/g\" '$blocks/message' > '$work/message.sh'"
    echo "timeout 30 bash -euo pipefail '$work/message.sh' | tee '$work/message.out'"
} > "$work/follow.sh"

set +e
timeout 1500 bash "$work/follow.sh"
rc=$?
set -e
[ -f "$work/server.pid" ] && server_pid=$(cat "$work/server.pid")
if [ $rc -ne 0 ]; then
    [ -f "$work/server.log" ] && { echo "--- server log"; cat "$work/server.log"; }
    echo "FAIL: following Get started failed (exit $rc)" >&2
    exit 1
fi

grep -q "cython codec" "$work/check-install.out" \
    || { echo "FAIL: python -m fastdeflate does not report the compiled codec" >&2; exit 1; }
grep -q "'state': 'enabled'" "$work/check.out" \
    || { echo "FAIL: the server's status() does not say websockets is enabled" >&2; exit 1; }
grep -qE "'sent': \{'messages': [1-9]" "$work/message.out" \
    || { echo "FAIL: the echo did not go through fastdeflate's compressor" >&2; exit 1; }
if grep -nE "Traceback|Error" "$work/server.log"; then
    echo "FAIL: the server logged an error" >&2
    exit 1
fi
echo "newcomer step: OK in $((SECONDS - start))s"
