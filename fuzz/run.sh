#!/usr/bin/env bash
# Run the atheris fuzz targets for a chosen time each, starting from the seed corpora.
#
#   fuzz/run.sh [SECONDS] [TARGET...]        TARGET: decompress differential negotiation
#
# SECONDS (default 60) is per target. New inputs go to $FUZZ_WORK/<target>/ (default
# /tmp/fastdeflate-fuzz), crashes to $FUZZ_WORK/artifacts/; each run's log is
# $FUZZ_WORK/<target>.log and a one-line summary (executions, corpus size) is printed.
# $PYTHON (default: python) must have atheris and fastdeflate (with the compiled codec).
# Extra libFuzzer flags can be passed in $FUZZ_FLAGS (e.g. "-seed=7692 -runs=80000", as
# CI does; SECONDS is then a cap). Exits non-zero if a target fails.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decompress differential negotiation)
work="${FUZZ_WORK:-/tmp/fastdeflate-fuzz}"
python="${PYTHON:-python}"
mkdir -p "$work/artifacts"

status=0
for target in "${targets[@]}"; do
    corpus="$work/$target"
    mkdir -p "$corpus"
    cp -n "$here/corpus/$target/"* "$corpus/" 2>/dev/null || true
    log="$work/$target.log"
    started=$SECONDS
    # -timeout: one input taking longer than this is a finding (CPU amplification);
    # -rss_limit_mb: so is memory far beyond max_size (a 1 MiB limit needs far less).
    # shellcheck disable=SC2086
    "$python" "$here/fuzz_$target.py" "$corpus" \
        -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="$work/artifacts/$target-" \
        ${FUZZ_FLAGS:-} >"$log" 2>&1
    rc=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
    units=$(ls "$corpus" | wc -l)
    if [ $rc -eq 0 ]; then
        echo "fuzz $target: ${runs:-?} executions in $((SECONDS - started))s, corpus $units inputs: OK"
    else
        status=1
        echo "fuzz $target: FAILED (exit $rc) after ${runs:-?} executions; log $log:" >&2
        grep -v '^#' "$log" | tail -40 >&2
    fi
done
exit $status
