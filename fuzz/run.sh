#!/usr/bin/env bash
# Run the atheris fuzz targets for a chosen time each, starting from the seed corpora.
#
#   fuzz/run.sh [SECONDS] [TARGET...]        TARGET: decompress differential negotiation
#                                                   connections
#
# SECONDS (default 60) is per target. New inputs go to $FUZZ_WORK/<target>/ (default
# /tmp/fastdeflate-fuzz), crashes to $FUZZ_WORK/artifacts/; each run's log is
# $FUZZ_WORK/<target>.log and a one-line summary (executions, corpus size) is printed.
# $PYTHON (default: python) must have atheris and fastdeflate (with the compiled codec).
# Extra libFuzzer flags can be passed in $FUZZ_FLAGS (e.g. "-seed=7692 -runs=80000", as
# CI does; SECONDS is then a cap). Exits non-zero if a target fails, or if it executed
# fewer inputs than expected: $FUZZ_MIN_RUNS if set, else the N of a -runs=N flag (the
# cap stopped it first), else 1 (a target that never reached libFuzzer ran nothing).
# The count is libFuzzer's own (stat::number_of_executed_units, or "Done N runs").
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decompress differential negotiation connections)
work="${FUZZ_WORK:-/tmp/fastdeflate-fuzz}"
python="${PYTHON:-python}"
mkdir -p "$work/artifacts"

# The least number of executions a target must report: the last -runs=N of FUZZ_FLAGS.
min_runs="${FUZZ_MIN_RUNS:-}"
if [ -z "$min_runs" ]; then
    min_runs=$(grep -oE '(^|[[:space:]])-runs=[0-9]+' <<<"${FUZZ_FLAGS:-}" | tail -1 | grep -oE '[0-9]+$' || true)
    [ "${min_runs:-0}" -ge 1 ] || min_runs=1  # -runs=0 still runs the corpus
fi
[ "$min_runs" -ge 1 ] 2>/dev/null || { echo "FUZZ_MIN_RUNS=$min_runs: expected a number >= 1" >&2; exit 2; }

# The executions libFuzzer reported in log $1 (empty if it reported none).
executions() {
    local n
    n=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$1" | tail -1 | grep -oE '[0-9]+$')
    [ -n "$n" ] || n=$(grep -oE '^Done [0-9]+ runs' "$1" | tail -1 | grep -oE '[0-9]+')
    echo "$n"
}

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
    runs=$(executions "$log")
    units=$(ls "$corpus" | wc -l)
    if [ $rc -ne 0 ]; then
        status=1
        echo "fuzz $target: FAILED (exit $rc) after ${runs:-no} executions; log $log:" >&2
        grep -v '^#' "$log" | tail -40 >&2
    elif [ -z "$runs" ] || [ "$runs" -lt "$min_runs" ]; then
        status=1
        echo "fuzz $target: FAILED: ${runs:-no} executions reported, expected at least" \
            "$min_runs (did it reach libFuzzer? did the ${seconds}s cap stop it?); log $log:" >&2
        tail -20 "$log" >&2
    else
        echo "fuzz $target: $runs executions in $((SECONDS - started))s, corpus $units inputs: OK"
    fi
done
exit $status
