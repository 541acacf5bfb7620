#!/usr/bin/env bash
# Run ON the GPU machine (device tool), after scripts/gpu-prepare.sh here, with carry
# ["gpu-bundle"]: the GPU test tier (conformance on the cuda backend, cuda backend, tuner),
# compute-sanitizer memcheck, the main job and the benchmarks. Results go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/ropejit-out}"
mkdir -p "$OUT"
B="$PWD/gpu-bundle"
if [ ! -x "$B/bin/ropejit_tests" ]; then
  echo "gpu-check: gpu-bundle/ is missing: run scripts/gpu-prepare.sh first and carry gpu-bundle" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export ROPEJIT_SOURCE_DIR="$PWD" ROPEJIT_CACHE_DIR=/tmp/ropejit-cache
status=0
{ nvidia-smi; nvcc --version; } > "$OUT/device.txt" 2>&1
head -15 "$OUT/device.txt"

echo "== gpu tests"
"$B/bin/ropejit_tests" --gtest_filter='*Conformance*cuda*:CudaBackend.*:TunerGpu.*' \
  --gtest_output="json:$OUT/gpu-tests.json" > "$OUT/gpu-tests.log" 2>&1 || status=1
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/gpu-tests.log" | head -20

echo "== compute-sanitizer memcheck"
if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 3 "$B/bin/ropejit_tests" \
    --gtest_filter='Backend/Conformance.FusedForms/cuda:Backend/Conformance.StridedSeparateTensors/cuda' \
    > "$OUT/memcheck.log" 2>&1 || status=1
  tail -3 "$OUT/memcheck.log"
else
  echo "SKIPPED: compute-sanitizer not found"
fi

echo "== main job"
for spec in specs/llama-3.1-8b.json specs/qwen2.5-7b.json specs/deepseek-v3.json; do
  "$B/bin/ropejit" run "$spec" --backend cuda --tokens 16384 --json >> "$OUT/run.jsonl" 2>&1 || status=1
done
tail -c 1500 "$OUT/run.jsonl"

echo "== benchmarks"
for bench in "$B"/bin/ropejit_bench_*; do
  name=$(basename "$bench")
  "$bench" --benchmark_out="$OUT/$name.json" --benchmark_out_format=json > "$OUT/$name.txt" 2>&1 || status=1
  tail -12 "$OUT/$name.txt"
done
exit $status
