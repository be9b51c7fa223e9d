#!/usr/bin/env bash
# valgrind memcheck over tools/codec_loop.py (every path of the compiled codec, errors
# included). Fails if memcheck reports an invalid access, a use of uninitialised memory
# or a "definitely lost" block whose allocation stack passes through the extension or
# zlib. The interpreter's own blocks kept at exit are listed by valgrind but not counted.
#
#   tools/valgrind.sh [ROUNDS]        (default 20; about 4 s per round under valgrind)
#
# $PYTHON (default: python) must import fastdeflate with the compiled codec.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python}"
rounds="${1:-20}"
log="${VALGRIND_LOG:-/tmp/fastdeflate-valgrind.log}"
supp=()
for f in /usr/lib/valgrind/python3.supp /usr/lib/x86_64-linux-gnu/valgrind/python3.supp; do
    [ -e "$f" ] && supp=(--suppressions="$f") && break
done

set +e
PYTHONMALLOC=malloc valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
    --num-callers=40 --track-origins=no "${supp[@]}" --log-file="$log" \
    "$python" "$root/tools/codec_loop.py" "$rounds"
rc=$?
set -e
[ $rc -eq 0 ] || { echo "valgrind: the codec loop failed (exit $rc); see $log" >&2; exit 1; }

# Split the report into records and keep those whose innermost frames are ours: the
# interpreter's own reports (its start-up, blocks it keeps at exit) are not counted,
# since they would show whether or not the extension was loaded.
problems=$(sed -E 's/^==[0-9]+== ?//' "$log" | awk -v RS= '
    /Invalid (read|write|free)|uninitialised|Mismatched free|definitely lost in/ {
        n = split($0, line, "\n"); top = ""; frames = 0
        for (i = 1; i <= n && frames < 4; i++)
            if (line[i] ~ /^ +(at|by) /) { top = top line[i] "\n"; frames++ }
        if (top ~ /_fastdeflate|libz\.so|(in|de)flate[A-Za-z0-9_]* \(/) print $0 "\n"
    }')
summary=$(grep -E "ERROR SUMMARY|definitely lost:|indirectly lost:" "$log" | sed 's/^==[0-9]*== //')
echo "valgrind memcheck, $rounds rounds of tools/codec_loop.py:"
echo "$summary" | sed 's/^/    /'
if [ -n "$problems" ]; then
    echo "valgrind: reports that involve the extension or zlib (full log: $log):" >&2
    echo "$problems" >&2
    exit 1
fi
echo "valgrind: no invalid access, uninitialised use or definite leak in the extension or zlib"
