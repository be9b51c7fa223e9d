#!/usr/bin/env bash
# CI: install the test peers that are not Python packages, for
# tests/integrations/test_foreign_peers.py, before the main pytest run (without them its
# tests skip, and the skip check fails the run): Chromium (Debian's `chromium` package,
# unless FASTDEFLATE_CHROMIUM or one of the names the test looks for is on PATH), Node.js
# and npm if missing, and the `ws` package (npm ci in tests/peers, from its lock file).
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/..}"

sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
packages=()
browser="${FASTDEFLATE_CHROMIUM:-}"
if [ -z "$browser" ]; then
    for name in chromium google-chrome google-chrome-stable chromium-browser; do
        if command -v "$name" >/dev/null; then browser=$name; break; fi
    done
fi
[ -n "$browser" ] || packages+=(chromium)
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
if [ ${#packages[@]} -gt 0 ]; then
    echo "installing ${packages[*]}"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
fi
(cd tests/peers && npm ci --no-audit --no-fund --loglevel=error)
echo "foreign test peers: node $(node --version), ws $(node -p 'require("./tests/peers/node_modules/ws/package.json").version'), ${browser:-chromium}"
