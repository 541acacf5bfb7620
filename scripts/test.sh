#!/usr/bin/env bash
# The test command: set-up, build, then every test tier (unit, compile, conformance on the
# host backend; the gpu tier runs only where a GPU is usable and prints SKIPPED otherwise), then
# the Python package's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR="${ROPEJIT_BUILD_DIR:-build}"
# The repository stands alone: a copy with no sibling folders builds and passes the unit tier.
# ROPEJIT_SKIP_STANDALONE=1 skips it while iterating (CI never sets it).
if [ "${ROPEJIT_SKIP_STANDALONE:-0}" = 1 ]; then
  echo "standalone check: SKIPPED (ROPEJIT_SKIP_STANDALONE=1)"
else
  bash scripts/check-standalone.sh
fi
# Tests write their kernel caches under the build folder, never the user's cache.
export ROPEJIT_CACHE_DIR="$PWD/$BUILD_DIR/test-cache"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${ROPEJIT_TEST_JOBS:-$(nproc)}" "$@"
# The Python package: pip install ., then pytest (scripts/python-test.sh).
bash scripts/python-test.sh
