#!/usr/bin/env bash
# Parking at every message (~2-3 min on 2 cores): the codec, negotiation and every
# library's integration tests again with one live z_stream per parameter set
# (FASTDEFLATE_LIVE_STATES=1) and idle objects parked at once (FASTDEFLATE_PARK_AFTER=0),
# so that any connection that is not the last one used has its window saved and restored
# before it speaks. Runs after the main suite in .ci/run,
# with the CI venv active and the working directory at the repository root. As in the main
# run, a module that skips wholesale fails it (FASTDEFLATE_CHECK_SKIPS=1).
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
FASTDEFLATE_CHECK_SKIPS=1 FASTDEFLATE_LIVE_STATES=1 FASTDEFLATE_PARK_AFTER=0 pytest -q -p no:cacheprovider \
    tests/test_codec.py tests/test_negotiation.py tests/test_live_states.py tests/integrations
