#!/usr/bin/env bash
# Run ON the GPU machine (device tool), after scripts/gpu-prepare.sh here, with carry
# ["gpu-bundle"]: the GPU test tier (conformance on the cuda backend, cuda backend, tuner),
# compute-sanitizer memcheck, the main job, the benchmarks (bench_gpu included) and the peer
# comparison (bench/peers.py). Results go to $OUT.
#
# Usage: bash scripts/gpu-check.sh [STAGE...]   stages: all (default), tests, bench, peers,
# counters, tune; several run in one call and pack together (`all` leaves out tune, which takes
# a lease of its own)
# A device command may run 10 minutes and a lease has 15: each stage runs under `timeout`
# (seconds: T_TESTS, T_SANITIZE, T_RUN, T_BENCH, T_PEERS) and the results are packed after each
# stage, so what ran comes back even when a later stage is cut. BENCHES names the benchmark
# programs, BENCH_FILTER narrows bench_gpu (a --benchmark_filter regex); PEERS_ARGS passes extra options to peers.py, e.g.
#   PEERS_ARGS="--shapes llama-3.1-8b,qwen2.5-7b-padded --dtypes bf16" bash scripts/gpu-check.sh peers
#
# FlashInfer: the GPU machine reaches no package registry, so its wheels travel in
# gpu-bundle/wheels (peers.py --wheels installs them with pip --no-index --find-links). Fetch them
# HERE before the call (gpu-prepare.sh can do this; the bundle must stay under 64 MiB):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
#     -d gpu-bundle/wheels flashinfer-python apache-tvm-ffi
#   (then `unzip -p gpu-bundle/wheels/flashinfer_python-*.whl '*/METADATA' | grep ^Requires-Dist`
#   lists its needs; add those the GPU image lacks). FlashInfer compiles its kernels with the
#   machine's nvcc on first use; without the wheels its columns read SKIPPED.
#   Seen 2026-11-28: flashinfer-python 0.7.2.post1 is a 62 MB wheel (427 MB unpacked, 17 MB as
#   tar.xz: a pure-Python wheel can be unpacked into a PYTHONPATH folder instead of installed),
#   which with the 12 MB bundle passes the carry limit only repacked; it also requires cuda-tile,
#   nccl4py, nccl-extensions, nvidia-cudnn-frontend and nvidia-cutlass-dsl, which the image lacks.
#
# The device tool returns at most 8 files from $OUT: everything is collected in $RES and packed
# into $OUT/results.tar.gz; the few files read first are copied beside it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
STAGES="${*:-all}"
for stage in $STAGES; do
  case "$stage" in all|tests|bench|peers|counters|tune) ;; *) echo "gpu-check: stage '$stage' is not allowed: all, tests, bench, peers, counters or tune" >&2; exit 2 ;; esac
done
# Whether stage $1 runs: named, or part of `all` (every stage but tune).
want() {
  local stage
  for stage in $STAGES; do
    if [ "$stage" = "$1" ] || { [ "$stage" = all ] && [ "$1" != tune ]; }; then return 0; fi
  done
  return 1
}
OUT="${OUT:-/tmp/ropejit-out}"
RES=/tmp/ropejit-gpu-results
rm -rf "$RES"
mkdir -p "$OUT" "$RES"
B="$PWD/gpu-bundle"
if [ ! -x "$B/bin/ropejit_tests" ] || [ ! -f "$B/gpu_tier_filter.txt" ]; then
  echo "gpu-check: gpu-bundle/ is missing or stale: run scripts/gpu-prepare.sh first and carry gpu-bundle" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export ROPEJIT_SOURCE_DIR="$PWD" ROPEJIT_CACHE_DIR=/tmp/ropejit-cache PYTHONUNBUFFERED=1
status=0
started=$(date +%s)
# Device label for file names: "NVIDIA H100 80GB HBM3" -> "h100".
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr '[:upper:]' '[:lower:]' |
         grep -oE '[a-z][0-9]{2,4}[a-z]?' | head -1)
device="${device:-gpu}"

# Packs everything so far into $OUT (the device tool returns at most 8 files).
pack() {
  tar czf "$OUT/results.tar.gz" -C "$RES" .
  for f in device.txt gpu-tests.log sanitize.log ropejit_bench_gpu.txt peers.log "peers-$device.md" counters.txt tune.txt "tuning-$device.json"; do
    [ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/"
  done
  echo "-- packed at $(( $(date +%s) - started )) s"
}
# Runs a command under a time limit; a cut stage says so and fails the run.
limited() {
  local seconds=$1; shift
  timeout --kill-after=10 "$seconds" "$@"
  local rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "gpu-check: CUT after ${seconds} s: $*" >&2; fi
  return $rc
}

{ nvidia-smi; nvcc --version; nvidia-smi -q -d CLOCK,POWER,PERFORMANCE; } > "$RES/device.txt" 2>&1
head -15 "$RES/device.txt"

if want tests; then
  echo "== gpu tier: $(cat "$B/gpu_tier_filter.txt")"
  limited "${T_TESTS:-360}" "$B/bin/ropejit_tests" --gtest_filter="$(cat "$B/gpu_tier_filter.txt")" \
    --gtest_output="json:$RES/gpu-tests.json" > "$RES/gpu-tests.log" 2>&1 || status=1
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST' "$RES/gpu-tests.log" | head -30
  pack

  echo "== compute-sanitizer (memcheck, racecheck, synccheck)"
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
    /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1 || true)
  if [ -n "$sanitizer" ]; then
    for run in "memcheck Backend/Conformance.FusedForms/cuda:Backend/Conformance.StridedSeparateTensors/cuda:Backend/QkNormAll.*/cuda:CooperativeCuda.*" \
               "racecheck CooperativeCuda.*:Backend/QkNormAll.*/cuda" "synccheck CooperativeCuda.*"; do
      tool=${run%% *} filter=${run#* }
      echo "--- $tool $filter" >> "$RES/sanitize.log"
      limited "${T_SANITIZE:-60}" "$sanitizer" --tool "$tool" --error-exitcode 3 "$B/bin/ropejit_tests" \
        --gtest_filter="$filter" >> "$RES/sanitize.log" 2>&1 || status=1
      echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$RES/sanitize.log" | tail -2 | tr '\n' ' ')"
    done
  else
    echo "SKIPPED: compute-sanitizer not found"
  fi
  pack

  echo "== main job"
  # The float64 check covers ~2^25 values (run's default --check-tokens); every run timed at 16384 tokens.
  for run in "llama-3.1-8b 16384" "qwen2.5-7b 16384" "deepseek-v3 16384"; do
    limited "${T_RUN:-30}" "$B/bin/ropejit" run "specs/${run% *}.json" --backend cuda --tokens "${run#* }" --json \
      >> "$RES/run.jsonl" 2>&1 || status=1
  done
  tail -c 1500 "$RES/run.jsonl"
  pack
fi

if want bench; then
  echo "== benchmarks (filter: ${BENCH_FILTER:-all})"
  for name in ${BENCHES:-ropejit_bench_generate ropejit_bench_runtime ropejit_bench_gpu}; do
    bench="$B/bin/$name"
    filter=()
    [ "$name" = ropejit_bench_gpu ] && [ -n "${BENCH_FILTER:-}" ] && filter=(--benchmark_filter="$BENCH_FILTER")
    limited "${T_BENCH:-300}" "$bench" "${filter[@]}" --benchmark_out="$RES/$name.json" --benchmark_out_format=json \
      > "$RES/$name.txt" 2>&1 || status=1
    tail -12 "$RES/$name.txt"
    pack
  done
  # Decode sizes again with programmatic dependent launch (sm_90+), against the rows above.
  ROPEJIT_BENCH_PDL=1 limited "${T_BENCH:-300}" "$B/bin/ropejit_bench_gpu" \
    --benchmark_filter="${PDL_FILTER:-rope/.*/T:(1|8|64)/}" \
    --benchmark_out="$RES/ropejit_bench_gpu_pdl.json" --benchmark_out_format=json \
    > "$RES/ropejit_bench_gpu_pdl.txt" 2>&1 || status=1
  tail -12 "$RES/ropejit_bench_gpu_pdl.txt"
  pack
fi

if want peers; then
  echo "== peers (bench/peers.py)"
  wheels=()
  [ -d "$B/wheels" ] && wheels=(--wheels "$B/wheels")
  # shellcheck disable=SC2086  # PEERS_ARGS is a list of options
  limited "${T_PEERS:-300}" python3 bench/peers.py --lib "$B/lib/libropejit.so.0" --device-name "$device" \
    --out-md "$RES/peers-$device.md" --out-png "$RES/perf-$device.png" "${wheels[@]}" ${PEERS_ARGS:-} \
    > "$RES/peers.log" 2>&1 || status=1
  grep -E '^  |SKIPPED: plot|configurations in|FAILED' "$RES/peers.log" | tail -40
  pack
fi

if want counters; then
  # DRAM bytes against bytes_moved for the kernels furthest under the copy ceiling (H200,
  # 2026-11-28: docs/PERF.md), llama-3.1-8b as the control; one profiled launch each.
  echo "== counters (ncu)"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  if [ -n "$ncu" ]; then
    for spec in ${COUNTER_SPECS:-llama-3.1-8b gpt-neox-20b phi-3.5-mini-rerotate llama-3.1-8b-context-shift olmo-2-7b deepseek-v3-mla-prefill deepseek-v4-output}; do
      echo "--- $spec" >> "$RES/counters.txt"
      limited "${T_COUNTERS:-60}" "$ncu" --clock-control none --kernel-name regex:ropejit --launch-skip 1 --launch-count 1 \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active \
        --csv --log-file "$RES/ncu-$spec.csv" "$B/bin/ropejit" run "specs/$spec.json" --backend cuda --tokens 16384 --repeats 3 --json \
        >> "$RES/counters.txt" 2>&1 || status=1
      cat "$RES/ncu-$spec.csv" >> "$RES/counters.txt" 2>/dev/null
    done
    grep -E '^---|dram__bytes|gpu__time|"bytes"' "$RES/counters.txt" | tail -40
  else
    echo "SKIPPED: ncu not found"
  fi
  pack
fi

if want tune; then
  # The tuner's best config and speed-up over the default per spec and token count (each
  # candidate checked against the float64 reference first); the database comes back to commit.
  echo "== tune"
  # shellcheck disable=SC2086  # TUNE_SPECS is a list of files
  limited "${T_TUNE:-420}" "$B/bin/ropejit" tune ${TUNE_SPECS:-specs/llama-3.1-8b.json specs/gpt-neox-20b.json specs/phi-3.5-mini-rerotate.json specs/olmo-2-7b.json specs/deepseek-v3-mla-prefill.json specs/deepseek-v4-main.json specs/deepseek-v4-output.json specs/llama-3.1-8b-nvfp4.json} \
    --tokens "${TUNE_TOKENS:-1,64,4096,65536}" --budget-ms "${TUNE_BUDGET_MS:-500}" --static-prune 2 \
    --db "$RES/tuning-$device.json" > "$RES/tune.txt" 2>&1 || status=1
  grep -A60 'device copy bandwidth' "$RES/tune.txt" | tail -45
  pack
fi

echo "gpu-check: stages $STAGES, status $status, $(( $(date +%s) - started )) s; $OUT holds: $(cd "$OUT" && echo *)"
exit $status
