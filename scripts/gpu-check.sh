#!/usr/bin/env bash
# Run ON the GPU machine (device tool), after scripts/gpu-prepare.sh here, with carry
# ["gpu-bundle"]. One call of at most 9 minutes runs, in order (issue 43 item 6):
#   tests     the GPU conformance tests of the changed kernels (GPU_TEST_FILTER; `tier` = the whole
#             gpu tier, about 265 s on the H200: a call of its own), then the main job
#             (ropejit run, 3 specs); SANITIZE=1 adds compute-sanitizer memcheck/racecheck/synccheck
#   bench     ropejit_bench_gpu for the changed kernels (BENCH_FILTER; BENCHES adds other programs;
#             PDL=1 adds the decode sizes with programmatic dependent launch)
#   peers     bench/peers.py, one run per shape of PEERS_SHAPES (a cut keeps the shapes done), every
#             system's output checked against the float64 reference before it is timed: ropejit,
#             torch eager, torch.compile, Liger-Kernel, FlashInfer (its rope kernels' carried
#             sources, built by gpu-prepare.sh and taken when this machine's nvcc is the same
#             version, else built here in about a minute), a copy of the same bytes
#   tune      ropejit tune, one spec at a time from TUNE_SPECS at T in TUNE_TOKENS (1,8,64,4096,
#             65536), into one database; the specs its budget did not reach are written to
#             tune-remaining.txt: the next call runs `TUNE_SPECS="$(cat tune-remaining.txt)"
#             bash scripts/gpu-check.sh tune` (every spec in specs/ takes about three calls)
#   counters  ncu's DRAM bytes against bytes_moved for COUNTER_SPECS
# Each stage has a budget in seconds (T_TESTS, T_BENCH, T_PEERS, T_TUNE, T_COUNTERS); its commands
# share it (a command that would start with under 5 s left is SKIPPED and named), and the
# default budgets of `all` sum to 540 s. Results are packed after each stage, so what ran comes back
# even when a later stage is cut.
#
# Usage: bash scripts/gpu-check.sh [STAGE...]       stages: all (default: the five above, in
#                                                   order), tests, bench, peers, tune, counters
#        bash scripts/gpu-check.sh --dry-run [STAGE...]
#   The dry run (HERE, no GPU: scripts/gpu_plan.py) checks that the bundle is complete (binaries,
#   libraries, the tier filter, the peers' wheels and FlashInfer tree), that the repository's
#   files plus the bundle stay under the 64 MiB carry limit with margin (CARRY_BUDGET_MIB, default
#   60), that the chosen stages' budgets sum to <= 540 s, and that every stage's command line
#   resolves (spec files, shapes, filters; peers.py --dry-run on the host backend with the carried
#   Liger wheel unpacked, with build/libropejit.so or GPU_PLAN_HOST_LIB); it prints the
#   plan with each stage's seconds. GPU_BUNDLE points it (and a real run) at another bundle folder.
#
# The device tool returns at most 8 files from $OUT: everything is collected in $RES and packed
# into $OUT/results.tar.gz; the few files read first are copied beside it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
DRY_RUN=0
if [ "${1:-}" = --dry-run ]; then DRY_RUN=1; shift; fi
STAGES="${*:-all}"
ORDER="tests bench peers tune counters"
for stage in $STAGES; do
  case " all $ORDER " in *" $stage "*) ;; *) echo "gpu-check: stage '$stage' is not allowed: all, ${ORDER// /, }" >&2; exit 2 ;; esac
done
# Whether stage $1 runs: named, or part of `all`.
want() {
  local stage
  for stage in $STAGES; do
    if [ "$stage" = "$1" ] || [ "$stage" = all ]; then return 0; fi
  done
  return 1
}

# The plan: budgets (seconds) and what each stage runs. Defaults fit one call: 100+70+190+120+60 = 540.
export T_TESTS="${T_TESTS:-100}" T_BENCH="${T_BENCH:-70}" T_PEERS="${T_PEERS:-190}" T_TUNE="${T_TUNE:-120}" \
  T_COUNTERS="${T_COUNTERS:-60}"
# The kernels issue 43 changed: loads ahead and the decode configs (every model spec), the all-heads
# rows on chip, MLA's heads loop, the fused forms peers.py compares.
export GPU_TEST_FILTER="${GPU_TEST_FILTER:-Backend/Conformance.DecodeAndLoadsAheadConfigs/cuda:Backend/Conformance.ModelSpecs/cuda:Backend/Conformance.FusedForms/cuda:Backend/QkNormAll.*/cuda:Backend/MlaLatentAppend.*/cuda:CooperativeCuda.*}"
export MAIN_JOB_SPECS="${MAIN_JOB_SPECS:-llama-3.1-8b qwen2.5-7b deepseek-v3}"
export BENCHES="${BENCHES:-ropejit_bench_gpu}"
# The shapes whose kernels issue 43 changed (docs/PERF.md has the model's prediction of each, written
# before this run), llama-3.1-8b as the control.
export BENCH_FILTER="${BENCH_FILTER:-copy_ceiling|rope/(llama-3.1-8b|deepseek-v3-rope|olmo-2-7b-allnorm|llama-3.1-8b-shift-fp8|deepseek-v3-mla|deepseek-v3-mla-ds|deepseek-v3-mla-prefill|deepseek-v3-mla-absorbed|deepseek-v4-main|deepseek-v4-output|deepseek-v4-indexer|deepseek-v3.2-indexer)/bf16/T:(1|64|4096|65536)/}"
# One shape of each comparison first (plain rope; norm + rope; the fused FP8 paged append and its MLA
# variant, where FlashInfer has a fused op); the other shapes of peers_reference.SHAPES in later calls.
export PEERS_SHAPES="${PEERS_SHAPES:-llama-3.1-8b qwen3-8b-qknorm llama-3.1-8b-paged-fp8-q deepseek-v3-mla-fp8-q}"
export PEERS_ARGS="${PEERS_ARGS:---dtypes bf16 --tokens 1,64,4096,65536}"
export TUNE_TOKENS="${TUNE_TOKENS:-1,8,64,4096,65536}" TUNE_BUDGET_MS="${TUNE_BUDGET_MS:-300}"
if [ -z "${TUNE_SPECS:-}" ]; then  # the specs issue 25 named first, then every other spec file
  first="llama-3.1-8b gpt-neox-20b phi-3.5-mini-rerotate olmo-2-7b deepseek-v3-mla-prefill deepseek-v4-main deepseek-v4-output llama-3.1-8b-nvfp4"
  TUNE_SPECS=$(for s in $first; do echo "specs/$s.json"; done
               for f in specs/*.json; do n=$(basename "$f" .json)
                 case " $first schema " in *" $n "*) ;; *) echo "$f" ;; esac; done | tr '\n' ' ')
  # V3.2's fused indexer form, kept out of specs/ by the static gate: the tuner weighs its spread map.
  TUNE_SPECS="$TUNE_SPECS tests/data/deepseek-v3.2-indexer.json"
fi
export TUNE_SPECS
# The model's DRAM hypotheses (docs/static-report.md §3): llama-3.1-8b dense (the control), gpt-neox-20b's
# 48-byte slices, V4 output's 128-byte slices, NVFP4's 8-byte scale rows at random slots.
export COUNTER_SPECS="${COUNTER_SPECS:-llama-3.1-8b gpt-neox-20b deepseek-v4-output llama-3.1-8b-nvfp4}"
B="${GPU_BUNDLE:-$PWD/gpu-bundle}"
SELECTED=""
for stage in $ORDER; do want "$stage" && SELECTED="$SELECTED $stage"; done

if [ $DRY_RUN = 1 ]; then
  # GPU_PLAN_HOST_LIB set (empty: none) names the host-backend library; unset: build/'s, if built.
  host_lib="${GPU_PLAN_HOST_LIB-}"
  if [ -z "${GPU_PLAN_HOST_LIB+set}" ] && [ -f build/libropejit.so ]; then host_lib=build/libropejit.so; fi
  exec python3 scripts/gpu_plan.py --bundle "$B" --stages "$SELECTED" ${host_lib:+--host-lib "$host_lib"}
fi

OUT="${OUT:-/tmp/ropejit-out}"
RES=/tmp/ropejit-gpu-results
rm -rf "$RES"
mkdir -p "$OUT" "$RES"
if [ ! -x "$B/bin/ropejit_tests" ] || [ ! -f "$B/gpu_tier_filter.txt" ]; then
  echo "gpu-check: $B is missing or stale: run scripts/gpu-prepare.sh first and carry gpu-bundle" >&2
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
  for f in device.txt gpu-tests.log ropejit_bench_gpu.txt peers.log "peers-$device.md" tune.txt "tuning-$device.json"; do  # 7 + the tarball
    [ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/"
  done
  echo "-- packed at $(( $(date +%s) - started )) s"
}
# Starts a stage with a budget of $2 seconds.
stage() {
  STAGE=$1 STAGE_END=$(( $(date +%s) + $2 ))
  echo "== $1 (budget $2 s, at $(( $(date +%s) - started )) s)"
}
# Runs a command within the stage's budget (and at most $1 s when $1 > 0); a cut command, or one
# the budget no longer reaches, says so and fails the run.
limited() {
  local cap=$1 left seconds rc; shift
  left=$(( STAGE_END - $(date +%s) ))
  if [ $left -lt 5 ]; then echo "gpu-check: SKIPPED, stage $STAGE's budget spent: $*" >&2; status=1; return 124; fi
  seconds=$left
  if [ "$cap" -gt 0 ] && [ "$cap" -lt "$left" ]; then seconds=$cap; fi
  timeout --kill-after=5 "$seconds" "$@"
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "gpu-check: CUT after ${seconds} s: $*" >&2; fi
  return $rc
}

{ nvidia-smi; nvcc --version; nvidia-smi -q -d CLOCK,POWER,PERFORMANCE; } > "$RES/device.txt" 2>&1
head -15 "$RES/device.txt"

if want tests; then
  stage tests "$T_TESTS"
  filter="$GPU_TEST_FILTER"
  [ "$filter" = tier ] && filter=$(cat "$B/gpu_tier_filter.txt")
  echo "filter: $filter"
  limited 0 "$B/bin/ropejit_tests" --gtest_filter="$filter" --gtest_output="json:$RES/gpu-tests.json" \
    > "$RES/gpu-tests.log" 2>&1 || status=1
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST' "$RES/gpu-tests.log" | head -30
  # The float64 check covers ~2^25 values (run's default --check-tokens); every run timed at 16384 tokens.
  for spec in $MAIN_JOB_SPECS; do
    limited 30 "$B/bin/ropejit" run "specs/$spec.json" --backend cuda --tokens 16384 --json >> "$RES/run.jsonl" 2>&1 || status=1
  done
  tail -c 1500 "$RES/run.jsonl"
  if [ "${SANITIZE:-0}" = 1 ]; then
    sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1 || true)
    for run in "memcheck Backend/Conformance.FusedForms/cuda:Backend/Conformance.StridedSeparateTensors/cuda:Backend/QkNormAll.*/cuda:CooperativeCuda.*" \
               "racecheck CooperativeCuda.*:Backend/QkNormAll.*/cuda" "synccheck CooperativeCuda.*"; do
      [ -n "$sanitizer" ] || { echo "SKIPPED: compute-sanitizer not found"; break; }
      tool=${run%% *} filter=${run#* }
      echo "--- $tool $filter" >> "$RES/sanitize.log"
      limited 60 "$sanitizer" --tool "$tool" --error-exitcode 3 "$B/bin/ropejit_tests" --gtest_filter="$filter" \
        >> "$RES/sanitize.log" 2>&1 || status=1
      echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$RES/sanitize.log" | tail -2 | tr '\n' ' ')"
    done
  fi
  pack
fi

if want bench; then
  stage bench "$T_BENCH"
  for name in $BENCHES; do
    filter=()
    [ "$name" = ropejit_bench_gpu ] && filter=(--benchmark_filter="$BENCH_FILTER")
    limited 0 "$B/bin/$name" "${filter[@]}" --benchmark_out="$RES/$name.json" --benchmark_out_format=json \
      > "$RES/$name.txt" 2>&1 || status=1
    tail -12 "$RES/$name.txt"
  done
  if [ "${PDL:-0}" = 1 ]; then  # decode sizes again with programmatic dependent launch (sm_90+)
    ROPEJIT_BENCH_PDL=1 limited 0 "$B/bin/ropejit_bench_gpu" --benchmark_filter="${PDL_FILTER:-rope/.*/T:(1|8|64)/}" \
      --benchmark_out="$RES/ropejit_bench_gpu_pdl.json" --benchmark_out_format=json \
      > "$RES/ropejit_bench_gpu_pdl.txt" 2>&1 || status=1
  fi
  pack
fi

if want peers; then
  stage peers "$T_PEERS"
  # The carried peers: wheels into a private site folder (--no-deps: only liger_kernel and tvm_ffi
  # land there, so torch and triton stay the image's), FlashInfer's rope sources unpacked for
  # bench/peers_flashinfer.py.
  site=/tmp/ropejit-peers-site fi_tree=/tmp/ropejit-flashinfer-rope fi_args=()
  if [ -d "$B/peers/wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
      "$B"/peers/wheels/*.whl || echo "gpu-check: the peers' wheels did not install (their columns read SKIPPED)"
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$site"
  fi
  if [ -f "$B/peers/flashinfer-rope.tar.xz" ]; then
    rm -rf "$fi_tree" && mkdir -p "$fi_tree" && tar xJf "$B/peers/flashinfer-rope.tar.xz" -C "$fi_tree" &&
      fi_args=(--flashinfer-tree "$fi_tree")
    # built by gpu-prepare.sh: saves about a minute here when this machine's nvcc is the same version
    [ -d "$B/peers/flashinfer-build" ] && fi_args+=(--flashinfer-prebuilt "$B/peers/flashinfer-build")
  fi
  for shape in $PEERS_SHAPES; do
    # shellcheck disable=SC2086  # PEERS_ARGS is a list of options
    limited 0 python3 bench/peers.py --lib "$B/lib/libropejit.so.0" --device-name "$device" --shapes "$shape" \
      --out-md "$RES/peers-$device.md" --out-png "$RES/perf-$device-$shape.png" "${fi_args[@]}" $PEERS_ARGS \
      >> "$RES/peers.log" 2>&1 || status=1
  done
  grep -E '^\| [a-z]|SKIPPED: plot|configurations in|FAILED|flagged|FlashInfer' "$RES/peers.log" | tail -40
  pack
fi

if want tune; then
  # The tuner's best config and speed-up over the default per spec and token count (each candidate
  # checked against the float64 reference first); one spec a run, so a cut keeps those done.
  stage tune "$T_TUNE"
  remaining=""
  for spec in $TUNE_SPECS; do
    if [ -n "$remaining" ] || [ $(( STAGE_END - $(date +%s) )) -lt 20 ]; then remaining="$remaining $spec"; continue; fi
    echo "--- $spec" >> "$RES/tune.txt"
    limited 0 "$B/bin/ropejit" tune "$spec" --tokens "$TUNE_TOKENS" --budget-ms "$TUNE_BUDGET_MS" --static-prune 2 \
      --db "$RES/tuning-$device.json" >> "$RES/tune.txt" 2>&1 || { status=1; remaining="$remaining $spec"; }
  done
  for spec in $remaining; do echo "$spec"; done > "$RES/tune-remaining.txt"
  echo "tune: $(grep -c '^---' "$RES/tune.txt" 2>/dev/null || echo 0) specs run; not reached: $(wc -l < "$RES/tune-remaining.txt") (tune-remaining.txt)"
  grep -A60 'device copy bandwidth' "$RES/tune.txt" | tail -30
  pack
fi

if want counters; then
  # DRAM bytes against bytes_moved for the kernels furthest under the copy ceiling (H200,
  # 2026-11-28: docs/PERF.md), llama-3.1-8b as the control; one profiled launch each.
  stage counters "$T_COUNTERS"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  if [ -n "$ncu" ]; then
    for spec in $COUNTER_SPECS; do
      echo "--- $spec" >> "$RES/counters.txt"
      limited 0 "$ncu" --clock-control none --kernel-name regex:ropejit --launch-skip 1 --launch-count 1 \
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

echo "gpu-check: stages$SELECTED, status $status, $(( $(date +%s) - started )) s; $OUT holds: $(cd "$OUT" && echo *)"
exit $status
