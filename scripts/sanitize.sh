#!/usr/bin/env bash
# Builds everything under AddressSanitizer + UndefinedBehaviorSanitizer (CMakePresets.json
# `sanitize`: clang-19, host backend, tests, CLI and benchmarks, into build-asan/) and runs under
# them the unit tier and a sample of the conformance tier (docs/architecture.md §10), the C API
# and linkage checks included; of the compile tier only the suites declared `compile+sanitize`
# (the host JIT's, host collectives' and NVRTC loader's), the rest being NVRTC's work
# (uninstrumented) on source the other tiers generate too.
# A leak, a memory error or any UBSan report fails the test it happens in.
# Usage: scripts/sanitize.sh [extra ctest arguments]
#   ROPEJIT_CONFORMANCE_SAMPLE=1 checks every conformance kernel (default 4: one kernel of each
#   op x io form x rope type, then every 4th; tests/support/conformance_sample.h).
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
export ROPEJIT_CONFORMANCE_SAMPLE="${ROPEJIT_CONFORMANCE_SAMPLE:-4}"
jobs="${ROPEJIT_TEST_JOBS:-$(nproc)}"
# Never those labelled uninstrumented_consumer (tests/CMakeLists.txt): python's ctypes, the
# peers and gpu-check scripts, an installed-package build load the ASan library uninstrumented.
start=$SECONDS
status=0
# The tiers of ROPEJIT_SANITIZED_TIERS (cmake/RopejitTestTiers.cmake: unit and conformance), and
# the suites of other tiers whose work is instrumented code (the JIT, fibers and their ASan
# annotations, the NVRTC loader), declared where they are defined: `// ropejit-tier:
# compile+sanitize` labels them `sanitize`. The configure writes the label pattern.
labels=$(cat "$repo/build-asan/sanitize_labels.txt")
ctest --preset sanitize -L "$labels" -LE uninstrumented_consumer -j "$jobs" "$@" || status=$?
echo "sanitize: tests took $((SECONDS - start)) s"
exit $status
