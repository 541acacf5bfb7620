#!/usr/bin/env bash
# Builds the libFuzzer targets (CMakePresets.json `fuzz`: clang-19, libFuzzer + ASan + UBSan, no
# host backend, into build-fuzz/) and runs `ctest -L fuzz`: each target fuzzes its corpus copy for
# SECONDS_PER_TARGET seconds, then replays every corpus file once (tests/fuzz/README.md).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 12: the CI budget, 5 targets = 60 s of fuzzing, two at a time)
# A crash fails its test; the input is in build-fuzz/tests/fuzz/work/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${ROPEJIT_FUZZ_SECONDS:-12}}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET] (a whole number >= 1; got '$seconds')" >&2
  exit 2
fi
# libFuzzer's runtime comes with libclang-rt-19-dev, not with clang-19 itself: say so up front.
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    clang++-19 -fsanitize=fuzzer,address,undefined -x c++ - -o /dev/null 2>/dev/null; then
  echo "fuzz: clang++-19 cannot link a libFuzzer program; install clang-19 and libclang-rt-19-dev" >&2
  exit 1
fi
# The cache variable reaches every fuzz test's -max_total_time (tests/fuzz/CMakeLists.txt).
cmake --preset fuzz -DROPEJIT_FUZZ_SECONDS="$seconds" >/dev/null
start=$SECONDS
cmake --build --preset fuzz -j "${ROPEJIT_JOBS:-$(nproc)}"
echo "fuzz: build took $((SECONDS - start)) s"
status=0
# Targets side by side, one a core: each still fuzzes its full SECONDS_PER_TARGET.
ctest --preset fuzz -j "${ROPEJIT_TEST_JOBS:-$(nproc)}" || status=$?
# Executions and coverage per target, from libFuzzer's final lines (-print_final_stats=1) in
# ctest's log, which is kept as build-fuzz/fuzz-last.log (the next ctest overwrites LastTest.log).
log=build-fuzz/fuzz-last.log
cp build-fuzz/Testing/Temporary/LastTest.log "$log" 2>/dev/null || true
if [ -f "$log" ]; then
  awk '/^[0-9]+\/[0-9]+ Testing: /{name = $3; stats = ""}
       /\tDONE /{for (i = 1; i < NF; ++i) if ($i == "cov:" || $i == "corp:") stats = stats " " $i " " $(i + 1)}
       /stat::number_of_executed_units/{print "fuzz: " name ": " $2 " executions," stats; stats = ""}' "$log"
fi
# The clang-built libropejit.so needs no CUDA library either (tests/linkage/check_needed.sh).
ctest --test-dir build-fuzz --output-on-failure -R '^library_needs_no_cuda_library_clang$' || status=$?
exit $status
