#!/usr/bin/env bash
# The test command: set-up, build, then every test tier (unit, compile, conformance on the
# host backend; the gpu tier runs only where a GPU is usable and prints SKIPPED otherwise), then
# the Python package's tests, a short fuzzing run and the sanitizer tier.
# Each tier's wall time is printed at the end (also when one fails).
set -euo pipefail
cd "$(dirname "$0")/.."
times=()
tier() {
  local name="$1" start=$SECONDS
  shift
  "$@"
  times+=("$(printf '%-12s %5d s' "$name" $((SECONDS - start)))")
}
total_start=$SECONDS
trap 'echo "== tier wall times"; for t in "${times[@]}"; do echo "  $t"; done; echo "  total        $((SECONDS - total_start)) s"' EXIT
tier build bash scripts/build.sh
BUILD_DIR="${ROPEJIT_BUILD_DIR:-build}"
# The repository stands alone: a copy with no sibling folders builds and passes the unit tier.
# ROPEJIT_SKIP_STANDALONE=1 skips it while iterating (CI never sets it).
if [ "${ROPEJIT_SKIP_STANDALONE:-0}" = 1 ]; then
  echo "standalone check: SKIPPED (ROPEJIT_SKIP_STANDALONE=1)"
else
  tier standalone bash scripts/check-standalone.sh
fi
# Tests write their kernel caches under the build folder, never the user's cache.
export ROPEJIT_CACHE_DIR="$PWD/$BUILD_DIR/test-cache"
tier ctest ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${ROPEJIT_TEST_JOBS:-$(nproc)}" "$@"
# The Python package: pip install ., then pytest (scripts/python-test.sh).
tier python bash scripts/python-test.sh
# The reliability tiers (docs/RELIABILITY.md), each a clang-19 build in its own folder: every
# fuzz target for 12 s on its corpus (scripts/fuzz.sh), then every test under ASan + UBSan
# (scripts/sanitize.sh). ROPEJIT_SKIP_FUZZ=1 / ROPEJIT_SKIP_SANITIZE=1 skip them while iterating
# (CI never sets them).
if [ "${ROPEJIT_SKIP_FUZZ:-0}" = 1 ]; then echo "fuzz tier: SKIPPED (ROPEJIT_SKIP_FUZZ=1)"; else tier fuzz bash scripts/fuzz.sh; fi
if [ "${ROPEJIT_SKIP_SANITIZE:-0}" = 1 ]; then
  echo "sanitizer tier: SKIPPED (ROPEJIT_SKIP_SANITIZE=1)"
else
  tier sanitize bash scripts/sanitize.sh
fi
