#!/usr/bin/env bash
# Build the extension with AddressSanitizer + UndefinedBehaviorSanitizer (gcc) in a copy
# of the tree, then run the codec tests and/or the fuzzers against that build.
#
#   tools/sanitize.sh build              copy the tree to $SAN_DIR and build it there
#   tools/sanitize.sh test [PYTEST ARGS] run the codec tests on the sanitized build
#   tools/sanitize.sh fuzz [SECONDS] [TARGET...]  run the fuzz targets on it (default:
#                                        every one, 60 s each)
#   tools/sanitize.sh all [SECONDS]      all three
#
# $PYTHON (default: python) needs Cython, setuptools, pytest, pytest-timeout,
# hypothesis, psutil, pytest-xdist (the suites run on $SAN_WORKERS workers, default auto)
# (and atheris for `fuzz`). $SAN_DIR defaults to /tmp/fastdeflate-san.
# The build is the shipped one by default: the bundled zlib-ng with ISA-L
# (FASTDEFLATE_ZLIB=bundled, FASTDEFLATE_ISAL=bundled), both built with the sanitizers'
# flags (ISA-L's assembly is not instrumented; its C parts, zlib-ng and the extension
# are). FASTDEFLATE_ZLIB=system builds against the system zlib instead (no ISA-L there).
# The pinned sdists the main build fetched are reused from build/ when they are there.
# The interpreter is not instrumented: libasan is preloaded, Python's own allocator is
# switched off (PYTHONMALLOC=malloc) so every object is checked, and leak detection is
# left to valgrind (tools/valgrind.sh) since the interpreter keeps memory at exit.
# Any ASan or UBSan report aborts the process, so it fails the run.
# gcc's libasan also defines the coverage hooks that atheris's libFuzzer would receive, so
# under it the fuzzers lose coverage feedback: `fuzz` there replays the committed corpus
# (coverage-rich, from long unsanitized runs) and mutates it blindly. The corpus replay in
# `test` (tests/test_hardening.py) runs every committed input on the sanitized build too.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
san="${SAN_DIR:-/tmp/fastdeflate-san}"
python="${PYTHON:-python}"
cc="${CC:-gcc}"
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"

build() {
    rm -rf "$san"
    mkdir -p "$san"
    # The tree as it is (tracked and new files), without build products.
    (cd "$root" && tar --exclude=.git --exclude=build --exclude='*.so' --exclude=.hypothesis \
        --exclude=.pytest_cache --exclude=.mypy_cache --exclude=__pycache__ \
        --exclude=_fastdeflate.c --exclude='.venv*' -cf - .) | tar -C "$san" -xf -
    # The shipped engines by default (zlib-ng and ISA-L, whose inflate path through the
    # extension is what tests/test_isal_inflate.py walks); the sdists from the tree's
    # build/ if the main build left them there (else they are fetched).
    local zlib="${FASTDEFLATE_ZLIB:-bundled}" isal="${FASTDEFLATE_ISAL:-bundled}" sdists=()
    local sdist
    for sdist in "$root"/build/zlib-ng/zlib_ng-*.tar.gz; do
        [[ -f $sdist && -z ${FASTDEFLATE_ZLIB_NG_SDIST:-} ]] && sdists+=("FASTDEFLATE_ZLIB_NG_SDIST=$sdist")
    done
    for sdist in "$root"/build/isal/isal-*.tar.gz; do
        [[ -f $sdist && -z ${FASTDEFLATE_ISAL_SDIST:-} ]] && sdists+=("FASTDEFLATE_ISAL_SDIST=$sdist")
    done
    (cd "$san" && env "${sdists[@]}" FASTDEFLATE_ZLIB="$zlib" FASTDEFLATE_ISAL="$isal" \
        CC="$cc" CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
        "$python" setup.py -q build_ext --inplace --force >build.log 2>&1) \
        || { tail -30 "$san/build.log" >&2; exit 1; }
    # Not `ldd | grep -q`: under pipefail, grep -q exiting at the first match can kill ldd
    # with SIGPIPE and fail the pipeline although the library is there (CI saw it once).
    local libs
    libs="$(ldd "$san"/fastdeflate/_fastdeflate*.so)"
    [[ "$libs" == *libasan* ]] \
        || { echo "the extension is not linked with libasan:" >&2; echo "$libs" >&2; exit 1; }
    echo "sanitized build: $(ls "$san"/fastdeflate/_fastdeflate*.so)"
    if [[ $zlib == bundled && $isal == bundled ]]; then  # ISA-L must not be left out silently
        run "$python" -c "
import fastdeflate._fastdeflate as m, sys
print('inflate:', m.INFLATE_ENGINE)
sys.exit(not m.INFLATE_ENGINE.startswith('ISA-L '))" \
            || { echo "the sanitized build has no ISA-L inflate" >&2; exit 1; }
    fi
}

run() {  # run a command in $san with the sanitizer runtime loaded
    # libstdc++ preloaded too: else ASan's __cxa_throw interceptor finds no real one when
    # atheris (pybind11) throws for a Python exception in a fuzz target, and a finding (a
    # failed check) ends in "AddressSanitizer: CHECK failed" without its traceback.
    (cd "$san" && env LD_PRELOAD="$("$cc" -print-file-name=libasan.so) $("$cc" -print-file-name=libstdc++.so.6)" \
        PYTHONMALLOC=malloc PYTHONPATH="$san${PYTHONPATH:+:$PYTHONPATH}" \
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1${ASAN_EXTRA:+:$ASAN_EXTRA}" \
        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" "$@")
}

check_import() {
    run "$python" -c "
import fastdeflate, fastdeflate._fastdeflate as m, sys
assert m.__file__.startswith('$san'), m.__file__
assert fastdeflate.IMPLEMENTATION == 'cython'
print('importing the sanitized build from', m.__file__)"
}

test_suite() {
    check_import
    # The memory-growth tests measure RSS and peaks, which ASan's quarantine and shadow
    # memory inflate: they run in the normal suite; everything else runs here.
    run env FASTDEFLATE_STRESS_SECONDS="${FASTDEFLATE_STRESS_SECONDS:-4}" \
        "$python" -m pytest -q -p no:cacheprovider -n "${SAN_WORKERS:-auto}" -k "cython or fuzz_corpus" \
        tests/test_codec.py tests/test_threads_memory.py tests/test_hardening.py \
        tests/test_state_size.py tests/test_faults.py tests/test_interleavings.py \
        tests/test_stress.py \
        --deselect "tests/test_hardening.py::test_100k_mixed_operations_leave_memory_flat[cython]" \
        "$@"
    # ISA-L's inflate (where the build has it): its tests (most are the compiled codec's
    # alone, without "cython" in their names), and the many-connections stress and the
    # codec model, where connections share ISA-L's work buffers between threads.
    if run "$python" -c "import fastdeflate._fastdeflate as m, sys; sys.exit(not m.INFLATE_ENGINE.startswith('ISA-L '))"; then
        run env FASTDEFLATE_CONNECTIONS_SECONDS="${FASTDEFLATE_CONNECTIONS_SECONDS:-2}" \
            "$python" -m pytest -q -p no:cacheprovider -n "${SAN_WORKERS:-auto}" \
            -k "not python and not cython-zlib" \
            tests/test_isal_inflate.py tests/test_connections_stress.py tests/test_model.py "$@"
    fi
}

fuzz() {
    check_import
    run env PYTHON="$python" FUZZ_WORK="${FUZZ_WORK:-/tmp/fastdeflate-fuzz-san}" \
        bash "$san/fuzz/run.sh" "${1:-60}" "${@:2}"
}

case "${1:-all}" in
    build) build ;;
    test) shift; test_suite "$@" ;;
    fuzz) shift; fuzz "${1:-60}" "${@:2}" ;;
    all) build; test_suite; fuzz "${2:-60}" ;;
    *) echo "usage: $0 build | test [PYTEST ARGS] | fuzz [SECONDS] [TARGET...] | all [SECONDS]" >&2; exit 2 ;;
esac
