#!/usr/bin/env bash
# CI step: the newest CPythons. The main suite runs on the host's CPython; this step
# builds fastdeflate as .ci/run builds it (bundled zlib-ng and ISA-L, the compiled
# extension required) on the two newest CPythons that Debian packages, in a minimal root
# filesystem of Debian unstable (debootstrap --variant=minbase sid, entered with chroot;
# its gcc, cmake and nasm are sid's too), and runs there:
#  - on CPython 3.15 (FULL): the README's test command, the whole suite;
#  - on CPython 3.14 (PART): the codec, the integrations, the stress, thread, fork,
#    no-GIL and allocation-failure tests, in the same time (both runs share the two cores).
# pip in the root reaches the package index the host's pip does: the host's pip
# configuration files, the local files and indexes they name (copied, or bound read-only)
# and its PIP_*, proxy and certificate variables. Node.js's ws and Chromium, which are no
# Python packages (.ci/install-foreign-peers.sh installs them for the main suite), are
# not installed in the root: their tests skip there, listed in FASTDEFLATE_ABSENT_PEERS.
# Everything is mounted under a fresh /tmp directory, unmounted and removed on exit, on
# failure too. Prints each interpreter's test counts; fails if a build or a test fails.
# Runs after the main suite in .ci/run, as root. Bounded: ~8 minutes on 2 cores.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
full="${FASTDEFLATE_NEWEST_FULL:-3.15}"
part="${FASTDEFLATE_NEWEST_PART:-3.14}"
mirror="${FASTDEFLATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The optional test peers that are no Python packages (not in the root).
absent="chromium node-ws"
part_tests=(tests/test_codec.py tests/integrations tests/test_stress.py
            tests/test_connections_stress.py tests/test_interleavings.py
            tests/test_threads_memory.py tests/test_fork.py tests/test_faults.py
            tests/test_rejoin.py tests/test_autoenable.py tests/test_package.py
            tests/test_no_gil.py)

if ! command -v debootstrap >/dev/null && [ ! -x /usr/sbin/debootstrap ]; then
    # (a step beside this one may hold dpkg's lock for a while)
    apt=(apt-get -o DPkg::Lock::Timeout=300)
    ("${apt[@]}" install -y -qq debootstrap >/dev/null 2>&1 \
        || { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq debootstrap >/dev/null; })
fi

work=$(mktemp -d /tmp/fastdeflate-newest-XXXXXX)
root="$work/root"
cleanup() {
    local rc=$? proc mount
    set +e
    # Whatever still runs inside the root (a test run cut short, a server a test left):
    # every process whose root directory is ours was started by this step.
    for proc in /proc/[0-9]*; do
        [ "$(readlink "$proc/root" 2>/dev/null)" = "$root" ] && kill -9 "${proc#/proc/}" 2>/dev/null
    done
    wait 2>/dev/null
    # Deepest first; a busy mount is detached lazily.
    findmnt -rn -o TARGET | grep -F "$root/" | sort -r | while read -r mount; do
        umount "$mount" 2>/dev/null || umount -l "$mount"
    done
    if findmnt -rn -o TARGET | grep -qF "$root/"; then
        echo "WARNING: $work is still mounted on; not removed" >&2
    else
        rm -rf --one-file-system "$work"
    fi
    return $rc
}
trap cleanup EXIT

phase=$SECONDS
packages="ca-certificates,gcc,make,nasm,cmake"
for version in "$full" "$part"; do
    packages+=",python$version,python$version-dev,python$version-venv"
done
echo "--- Debian unstable (minbase) in $root, with $packages"
if ! debootstrap --variant=minbase --include="$packages" sid "$root" "$mirror" \
        > "$work/debootstrap.log" 2>&1; then
    tail -40 "$work/debootstrap.log"
    echo "FAIL: debootstrap of Debian unstable failed" >&2
    exit 1
fi
echo "root filesystem: $(du -sh "$root" | cut -f1) in $((SECONDS - phase))s"

# The kernel's file systems: processes, fork, loopback sockets, multiprocessing's
# semaphores (/dev/shm), pseudo-terminals. Slaves: unmounting them here never reaches
# the host's own mounts.
mount -t proc proc "$root/proc"
for dir in /sys /dev; do
    mount --rbind "$dir" "$root$dir"
    mount --make-rslave "$root$dir"
done

# The host's pip configuration, and the local files and directories it names (find-links,
# file:// indexes, constraints, certificates): files copied to the same paths, directories
# bound read-only where the root has none (an index's "simple" directory with its parent,
# which holds the files it links to). Certificate bundles named by the environment too.
# The root's own CA bundle is replaced by the host's: TLS trusts what the host trusts.
mapfile -t host_dirs < <(python3 - "$root" <<'PY'
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

root = Path(sys.argv[1])
debug = subprocess.run([sys.executable, "-m", "pip", "config", "debug"],
                       capture_output=True, text=True, check=True).stdout
configs = [Path(m[1]) for m in re.finditer(r"^\s+(/\S.*), exists: True$", debug, re.M)]
values = [m[1] for m in re.finditer(r"^\s{4}\S+?: (.*)$", debug, re.M)]
names = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
values += [v for k, v in os.environ.items() if k.startswith("PIP_") or k in names]
paths = dict.fromkeys(configs)
for value in values:
    for word in value.split():
        if word.startswith("file:"):
            word = unquote(urlparse(word).path)
        if word.startswith("/") and os.path.exists(word):
            paths[Path(word)] = None
dirs = set()
for path in paths:
    if path.is_dir():
        dirs.add(path.parent if path.name == "simple" else path)
    elif path.is_file():
        (root / path.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, root / path.relative_to("/"))
        print(f"copied {path}", file=sys.stderr)
for path in sorted(dirs):
    inside = root / path.relative_to("/")
    if inside.exists() and any(inside.iterdir()):
        print(f"kept the root's own {path}", file=sys.stderr)
    else:
        print(path)
PY
)
for dir in "${host_dirs[@]}"; do
    mkdir -p "$root$dir"
    mount --bind -o ro "$dir" "$root$dir"
    echo "bound read-only: $dir"
done

# The environment in the root: its own PATH and HOME, and the host's pip, proxy and
# certificate variables (their files copied above), nothing else.
env_in_root=(HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
             "HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}")
while IFS= read -r name; do
    env_in_root+=("$name=${!name}")
done < <(compgen -e | grep -E '^(PIP_.*|CI|(https?|ftp|no|all)_proxy|(HTTPS?|FTP|NO|ALL)_PROXY|SSL_CERT_(FILE|DIR)|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE)$' || true)
in_root() {  # in_root DIR COMMAND...: COMMAND in the root, from DIR
    local dir="$1"
    shift
    env -i "${env_in_root[@]}" chroot "$root" /usr/bin/env -C "$dir" "$@"
}
pip_noise() {  # the host's extra indexes list a few packages only: pip says so, per package
    grep -v "is ignored: it is neither a file nor a directory" || true
}

# This checkout's files as they are in the working tree (tracked and new, not ignored).
mkdir "$root/src"
git ls-files -z --cached --others --exclude-standard --deduplicate \
    | while IFS= read -r -d '' file; do
        if [ -e "$file" ] || [ -L "$file" ]; then printf '%s\0' "$file"; fi
    done \
    | tar --null -T - -cf - | tar -C "$root/src" -xf -

# One virtual environment per interpreter, built into as .ci/run builds (the engines'
# pinned sources fetched and built in the first build, into the tree's build/ cache, and
# reused by the second).
declare -A described
build() {
    local version="$1" began=$SECONDS
    echo "--- CPython $version: fastdeflate built and installed with [test,all]"
    in_root / "python$version" -m venv "/venv$version"
    in_root / "/venv$version/bin/python" -m pip install -q --upgrade pip 2>&1 | pip_noise
    in_root /src env FASTDEFLATE_ZLIB=bundled FASTDEFLATE_ISAL=bundled FASTDEFLATE_TEST_HOOKS=1 \
        timeout 900 "/venv$version/bin/python" -m pip install -q ".[test,all]" 2>&1 | pip_noise
    described[$version]=$(in_root / "/venv$version/bin/python" -c "
import platform, sys, fastdeflate
print('CPython', platform.python_version(), '| fastdeflate', fastdeflate.__version__,
      fastdeflate.IMPLEMENTATION, 'on', fastdeflate.ENGINE, '+', fastdeflate.engines()[1],
      '| from', fastdeflate.__file__)
sys.exit(fastdeflate.IMPLEMENTATION != 'cython')") \
        || { echo "FAIL: CPython $version: the compiled extension did not build or import" >&2; exit 1; }
    echo "${described[$version]} ($((SECONDS - began))s)"
}
echo "sid: $(in_root / gcc --version | head -1), $(in_root / cmake --version | head -1), $(in_root / nasm -v)"
build "$full"

# The two runs at once, each with the README's -n auto: the whole suite alone leaves
# about a third of the two cores idle (servers, subprocesses, waits). The second build
# goes on meanwhile: it writes only build products (build/, *.egg-info, _fastdeflate.c),
# which the tests that copy the tree leave out. As in .ci/run, `pytest` (not
# `python -m pytest`) from the checkout: the installed package is tested.
phase=$SECONDS
echo "--- CPython $full: the whole suite (in the background)"
full_rc=0 part_rc=0
in_root /src env FASTDEFLATE_CHECK_SKIPS=1 FASTDEFLATE_REQUIRE_EXTENSION=1 \
    FASTDEFLATE_EXPECT_ENGINE=zlib-ng FASTDEFLATE_EXPECT_ISAL=1 FASTDEFLATE_ABSENT_PEERS="$absent" \
    timeout 1500 "/venv$full/bin/pytest" -n auto -q -p no:cacheprovider -rs \
    --basetemp=/tmp/pytest-full > "$work/full.log" 2>&1 &
full_pid=$!
build "$part"
echo "--- CPython $part: ${part_tests[*]}"
in_root /src env FASTDEFLATE_CHECK_SKIPS=1 FASTDEFLATE_REQUIRE_EXTENSION=1 \
    FASTDEFLATE_EXPECT_ENGINE=zlib-ng FASTDEFLATE_EXPECT_ISAL=1 FASTDEFLATE_ABSENT_PEERS="$absent" \
    timeout 1200 "/venv$part/bin/pytest" -n auto -q -p no:cacheprovider -rs \
    --basetemp=/tmp/pytest-part "${part_tests[@]}" > "$work/part.log" 2>&1 || part_rc=$?
wait "$full_pid" || full_rc=$?
tests_time=$((SECONDS - phase))

summary() {  # the closing line of a run's log, "=" stripped
    grep -E '^=* ?[0-9]+ (passed|failed|errors?|skipped|deselected)' "$1" | tail -1 | sed -E 's/^=+ //; s/ =+$//'
}
echo "=== CPython $full: the whole suite (exit $full_rc)"
cat "$work/full.log"
echo "=== CPython $part: ${part_tests[*]} (exit $part_rc)"
cat "$work/part.log"
echo "=== newest CPythons: test counts (the two runs together: ${tests_time}s)"
echo "  ${described[$full]%% |*} (the whole suite): $(summary "$work/full.log")"
echo "  ${described[$part]%% |*} (codec, integrations, stress, threads, fork, faults): $(summary "$work/part.log")"
if [ "$full_rc" != 0 ] || [ "$part_rc" != 0 ]; then
    echo "FAIL: the tests failed on CPython $full (exit $full_rc) or $part (exit $part_rc)" >&2
    exit 1
fi
echo "newest-cpythons step: OK in $((SECONDS - start))s"
