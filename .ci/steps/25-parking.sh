#!/usr/bin/env bash
# Parking at every message (~1 min on 2 cores): the tests whose codec objects exchange
# messages (the codec, its shared state, compress once and broadcasts, allocation
# failures, and a round trip through every pair of libraries) again with one live z_stream
# per parameter set (FASTDEFLATE_LIVE_STATES=1) and idle objects parked at once
# (FASTDEFLATE_PARK_AFTER=0), so that any connection that is not the last one used has
# its window saved and restored before it speaks. Runs after the main suite in .ci/run,
# with the CI venv active and the working directory at the repository root. As in the main
# run, a module that skips wholesale fails it (FASTDEFLATE_CHECK_SKIPS=1).
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
FASTDEFLATE_CHECK_SKIPS=1 FASTDEFLATE_LIVE_STATES=1 FASTDEFLATE_PARK_AFTER=0 pytest -n auto -q -p no:cacheprovider \
    tests/test_codec.py tests/test_live_states.py tests/test_compress_once.py \
    tests/test_broadcast.py tests/test_faults.py tests/test_rejoin.py \
    tests/integrations/test_matrix.py
