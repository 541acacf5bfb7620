#!/usr/bin/env bash
# Builds everything under AddressSanitizer + UndefinedBehaviorSanitizer (CMakePresets.json
# `sanitize`: clang-19, host backend, tests, CLI and benchmarks, into build-asan/) and runs every
# test tier (docs/architecture.md §10) under them, the C API and linkage checks included.
# A leak, a memory error or any UBSan report fails the test it happens in.
# Usage: scripts/sanitize.sh [extra ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
cmake --preset sanitize >/dev/null
start=$SECONDS
cmake --build --preset sanitize -j "${ROPEJIT_JOBS:-$(nproc)}"
echo "sanitize: build took $((SECONDS - start)) s"
# The test preset sets these too; here for running a test binary by hand after this script.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$repo/tests/sanitize/ubsan.supp"
export ROPEJIT_CACHE_DIR="$repo/build-asan/test-cache"
# Every test but those labelled uninstrumented_consumer (tests/CMakeLists.txt): python's ctypes,
# the peers and gpu-check scripts, an installed-package build load the ASan library uninstrumented.
start=$SECONDS
status=0
ctest --preset sanitize -LE uninstrumented_consumer -j "${ROPEJIT_TEST_JOBS:-$(nproc)}" "$@" || status=$?
echo "sanitize: tests took $((SECONDS - start)) s"
exit $status
