#!/usr/bin/env bash
# CI step: the same bytes on every x86-64 CPU (issue 29). ISA-L and zlib-ng pick their
# code at run time from the CPU's features (CPUID): a variant that finds other matches
# changes the bytes a level sends. This step runs the installed build under qemu's
# user-mode emulation as older and newer CPU models (the emulated CPUID is what the
# engines' dispatch sees) and checks, beside the native run (the main suite):
#  - every level -1..9 at windows 15/12/10, with and without context takeover, gives
#    byte for byte the payloads it gives natively (tools/cpu_models/digest.py);
#  - the committed bytes of benchmarks/results/sizes.md hold there too, for the rows
#    whose engines dispatch (the ISA-L levels at 15/8 and aiohttp's).
# Nehalem-v2: SSE4.2, no AVX; Haswell-v4: AVX2 (qemu 7.2's TCG has no AVX-512, so an
# AVX-512 host's own run is the only AVX-512 one). Runs with the CI venv active.
# Bounded: ~1.5 minutes on 2 cores.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS
if ! command -v qemu-x86_64 >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    (apt-get install -y -qq qemu-user >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq qemu-user >/dev/null; })
fi
models=(${FASTDEFLATE_CPU_MODELS:-Nehalem-v2 Haswell-v4})
python="$(python -c 'import sys; print(sys.executable)')"
root=$PWD
work=$(mktemp -d /tmp/fastdeflate-cpu-models-XXXXXX)
trap 'rm -rf "$work"' EXIT

# From another directory, so that the source tree does not shadow the installed build.
(cd "$work" && "$python" "$root/tools/cpu_models/digest.py" > native.json)
failed=0
for model in "${models[@]}"; do
    echo "--- $model"
    (cd "$work" && qemu-x86_64 -cpu "$model" "$python" "$root/tools/cpu_models/digest.py" \
        > "$model.json" 2> "$model.err") || { cat "$work/$model.err" >&2; exit 1; }
    "$python" tools/cpu_models/digest.py compare "$work/native.json" "$work/$model.json" \
        || { echo "FAIL: $model gives other bytes than this host" >&2; failed=1; }
    (cd "$work" && HYPOTHESIS_PROFILE=ci FASTDEFLATE_CHECK_SKIPS=1 qemu-x86_64 -cpu "$model" "$python" -m pytest -q \
        -p no:cacheprovider \
        "$root/tests/test_sizes.py::test_bytes_are_the_committed_ones[cython-aiohttp-1-15-8-False]" \
        "$root/tests/test_sizes.py::test_bytes_are_the_committed_ones[cython-aiohttp-1-15-8-True]" \
        "$root/tests/test_sizes.py::test_bytes_are_the_committed_ones[cython-level 1-1-15-8-False]" \
        "$root/tests/test_sizes.py::test_bytes_are_the_committed_ones[cython-level 2-2-15-8-False]" \
        "$root/tests/test_sizes.py::test_bytes_are_the_committed_ones[cython-level 3-3-15-8-False]" \
        2> >(grep -v "TCG doesn't support" >&2)) \
        || { echo "FAIL: $model: the committed bytes do not hold" >&2; failed=1; }
done
[ "$failed" = 0 ] || exit 1
echo "cpu-models step: OK (${models[*]}) in $((SECONDS - start))s"
