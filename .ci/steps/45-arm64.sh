#!/usr/bin/env bash
# CI step: aarch64, emulated (issue 22, goal 5). The arm64 wheels compile code nothing
# else here runs: zlib-ng's NEON and ARMv8 code (slide_hash_neon.c is patched by the
# build), ISA-L's aarch64 deflate and the extension for an aarch64 CPython. With
# Debian's packages this step cross-builds them (gcc-aarch64-linux-gnu,
# tools/arm64/toolchain.cmake), runs Debian's arm64 CPython 3.11 under qemu's user-mode
# emulation, runs the codec, conformance, parking and ISA-L tests there, and checks that
# every level gives byte for byte the payloads it gives on x86-64
# (tools/arm64/emulated.py digest). Runs with the CI venv
# active (the x86-64 side is the installed bundled build). Bounded: ~2.5 minutes.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive

packages=()
command -v qemu-aarch64 >/dev/null || packages+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || packages+=(gcc-aarch64-linux-gnu)
dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
apt-get update -qq  # (the arm64 package lists, for the sysroot)
[ ${#packages[@]} -eq 0 ] || apt-get install -y -qq "${packages[@]}" >/dev/null

work=$(mktemp -d /tmp/fastdeflate-arm64-XXXXXX)
registered=""
cleanup() {
    [ -z "$registered" ] || echo -1 > /proc/sys/fs/binfmt_misc/qemu-aarch64 || true
    rm -rf "$work"
}
trap cleanup EXIT

python tools/arm64/emulated.py sysroot "$work/root"
python tools/arm64/emulated.py build "$work/root" "$work/out" 2>&1 | grep -v "Wdiscarded-qualifiers\|__pyx_v_strm->msg\|^ *|\|In function" || true
[ -f "$work/out/fastdeflate/_fastdeflate.cpython-311-aarch64-linux-gnu.so" ] \
    || { echo "FAIL: the aarch64 extension did not build" >&2; exit 1; }
# The test tools (pure Python) for the emulated interpreter.
# python-isal's aarch64 wheel: its ISA-L, built by others, to compare ISA-L's levels with.
tools=(pytest pytest-timeout pytest-xdist hypothesis typing_extensions isal)
python -m pip install -q --target "$work/pylib" --platform manylinux2014_aarch64 \
    --python-version 3.11 --implementation cp --only-binary=:all: "${tools[@]}"

# binfmt_misc runs aarch64 programs under qemu, so that the tests' subprocesses
# (sys.executable) run too; QEMU_LD_PREFIX is where qemu finds their libraries.
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    printf '%s' ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$(command -v qemu-aarch64)"':' \
        > /proc/sys/fs/binfmt_misc/register
    registered=1
fi
export QEMU_LD_PREFIX="$work/root"
arm_python="$work/root/usr/bin/python3.11"

(cd "$work" && PYTHONPATH="$work/out" "$arm_python" -c "
import platform, fastdeflate
print('emulated:', platform.machine(), fastdeflate.IMPLEMENTATION, fastdeflate.ENGINE)
assert platform.machine() == 'aarch64' and fastdeflate.IMPLEMENTATION == 'cython'
assert fastdeflate.ENGINE.startswith('zlib-ng')
assert fastdeflate.engines()[1].startswith('ISA-L'), fastdeflate.engines()
assert fastdeflate.INFLATE_ENGINE.startswith('ISA-L'), fastdeflate.INFLATE_ENGINE")

# The codec and the RFC 7692 vectors (tests/test_codec.py), parking (tests/
# test_live_states.py), ISA-L's levels (tests/test_isal.py) and its inflate (tests/
# test_isal_inflate.py, 400 runs of mutated messages). Not fork(): qemu-user
# cannot fork a threaded process; not the leak loop that drops thousands of objects
# (100 s emulated; the main suite runs it).
# From another directory, so that the source tree does not shadow the build; on two
# emulated workers (xdist's workers run under qemu too, through binfmt_misc).
root=$PWD
(cd "$work" && PYTHONPATH="$work/out:$work/pylib" HYPOTHESIS_PROFILE=ci FASTDEFLATE_CHECK_SKIPS=1 \
    FASTDEFLATE_MUTATED_RUNS=400 \
    "$arm_python" -m pytest -q -p no:cacheprovider -n 2 -k "not fork and not frees_everything" \
    "$root/tests/test_codec.py" "$root/tests/test_live_states.py" "$root/tests/test_isal.py" \
    "$root/tests/test_isal_inflate.py")

# The same payloads on both machines at every level zlib-ng runs (ISA-L's aarch64 code
# is its own: tests/test_isal.py checked it against python-isal's aarch64 wheel above).
PYTHONPATH="$work/out" "$arm_python" tools/arm64/emulated.py digest > "$work/aarch64.json"
python tools/arm64/emulated.py digest > "$work/x86_64.json"
python tools/arm64/emulated.py compare "$work/aarch64.json" "$work/x86_64.json" \
    || { echo "FAIL: aarch64 and x86-64 give different payloads on zlib-ng" >&2; exit 1; }
echo "arm64 step: OK in $((SECONDS - start))s"
