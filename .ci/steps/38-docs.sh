#!/usr/bin/env bash
# CI step: the documentation site builds with MkDocs in strict mode (a broken link, a
# missing page or a reference mkdocstrings cannot resolve fails it), from the installed
# package (the API reference reads the compiled extension's docstrings and the .pyi).
# The docs' figures are checked against the results files by tests/test_docs.py in the
# main suite. Runs with the CI venv active. Bounded: ~30 s.
set -euo pipefail
cd "${CI_ROOT:-$(dirname "$0")/../..}"
start=$SECONDS
# the [docs] extra's requirements, without reinstalling fastdeflate itself
mapfile -t requirements < <(python - <<'PY'
import tomllib
for requirement in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"]:
    print(requirement)
PY
)
python -m pip install -q "${requirements[@]}"
site=$(mktemp -d /tmp/fastdeflate-site-XXXXXX)
trap 'rm -rf "$site"' EXIT
mkdocs build --strict --site-dir "$site"
[ -s "$site/reference/api/index.html" ] && grep -q "max_size" "$site/reference/api/index.html" \
    || { echo "FAIL: the API reference has no codec docstrings" >&2; exit 1; }
# the site as a reader gets it (the main suite skips these without the docs extra): the
# build says nothing but that it built, the code is highlighted in the HTML, no page loads
# a script or stylesheet from another site, the API labels are small tags
FASTDEFLATE_CHECK_SKIPS=1 pytest -q -p no:cacheprovider tests/test_site.py
echo "docs step: OK in $((SECONDS - start))s"
