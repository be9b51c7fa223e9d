#!/usr/bin/env bash
# CI step: the other zlib engine. The main suite ran on whatever the default build chose
# (the bundled zlib-ng when its pinned sources can be fetched, else the system zlib); this
# step takes the run's wheel on each engine (.ci/wheel.sh), checks both wheels' contents,
# installs the one on the other engine into a second fresh virtual environment and runs
# the engine-dependent tests there, so both engines are always built and tested.
# `FASTDEFLATE_EXPECT_ENGINE` makes the suite fail if a build silently used another engine
# than the one asked for. Bounded: ~4 minutes.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"

main_engine=$(cd / && python -c "import fastdeflate._fastdeflate as f; print(f.ENGINE)")
echo "main suite ran on: $main_engine"
case "$main_engine" in
    zlib-ng\ *) other=system; expect=zlib ;;
    zlib\ *) other=bundled; expect=zlib-ng ;;
    *) echo "FAIL: unexpected ENGINE '$main_engine'" >&2; exit 1 ;;
esac

work=$(mktemp -d /tmp/fastdeflate-engine-XXXXXX)
trap 'rm -rf "$work"' EXIT

# A wheel holds the package, the extension, the stubs and the licences; no sources, no
# build helpers. A bundled-engine wheel also carries zlib-ng's and ISA-L's licences.
check_wheel() {
    python - "$1" "$2" <<'EOF'
import sys
import zipfile

wheel, engine = sys.argv[1:]
names = zipfile.ZipFile(wheel).namelist()
print(f"--- {wheel} ({engine} engine)")
print("\n".join(names))
problems = [n for n in names if n.endswith((".c", ".h", ".pyx", ".pxi", ".a", ".lib", ".o"))
            or n.startswith(("buildtools/", "tests/", "build/")) or "zlib-ng/" in n
            or "isa-l/" in n]
needed = ["fastdeflate/_fastdeflate.pyi", "fastdeflate/py.typed", "licenses/LICENSE"]
if engine == "bundled":
    needed += ["licenses/LICENSES/zlib-ng.md", "licenses/LICENSES/isa-l.md"]
for name in needed:
    if not any(n == name or n.endswith(".dist-info/" + name) for n in names):
        problems.append("missing " + name)
if not any(n.startswith("fastdeflate/_fastdeflate.") and n.endswith((".so", ".pyd"))
           for n in names):
    problems.append("missing the compiled extension")
if problems:
    sys.exit("FAIL: wheel contents: " + ", ".join(problems))
EOF
}

for engine in system bundled; do
    echo "=== the $engine-engine wheel"
    check_wheel "$(bash .ci/wheel.sh $engine)" $engine
done
wheel=$(bash .ci/wheel.sh $other)

# The tests whose outcome depends on the engine: the codec, its shared state and memory,
# the hardening, and one round trip per library pair. The rest (negotiation, adapters,
# packaging, benchmarks' code) ran in the main suite and reads no engine.
echo "=== testing the $other-engine wheel in a fresh virtual environment"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q "$wheel[test,all]"
(cd / && "$work/venv/bin/python" -c "import fastdeflate as f; print('engine:', f.ENGINE, '| zlibVersion:', f.ZLIB_VERSION)")
# The system-engine wheel is built with PyThread locks (Windows' kind; .ci/wheel.sh).
locks=pthread
[ "$other" = system ] && locks=pythread
FASTDEFLATE_CHECK_SKIPS=1 FASTDEFLATE_REQUIRE_EXTENSION=1 FASTDEFLATE_EXPECT_ENGINE=$expect \
    FASTDEFLATE_EXPECT_LOCKS=$locks \
    timeout 900 "$work/venv/bin/pytest" -n auto -q -p no:cacheprovider \
    tests/test_codec.py tests/test_engine.py tests/test_live_states.py \
    tests/test_park_after.py tests/test_compress_once.py tests/test_broadcast.py \
    tests/test_compress_memory.py tests/test_state_size.py tests/test_threads_memory.py \
    tests/test_hardening.py tests/test_faults.py tests/test_interleavings.py \
    tests/test_stress.py tests/test_fork.py tests/test_rejoin.py \
    tests/integrations/test_matrix.py
