#!/usr/bin/env bash
# The main job: set-up and build, then validate every spec in specs/, compile each with NVRTC
# for sm_80 and sm_90 (NVFP4 ones for Blackwell too), and run Llama-3.1-8B end to end on the best available backend
# (cuda when a GPU is usable, else the host backend), verified against the float64 reference.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the job runs: the library and the CLI (a broken test target cannot stop it).
bash scripts/build.sh ropejit_cli
BIN="${ROPEJIT_BUILD_DIR:-build}/ropejit"
specs=$(ls specs/*.json | grep -v schema.json)
echo "== validate"
"$BIN" spec validate $specs
echo "== compile (NVRTC, CUBIN)"
"$BIN" compile $specs --arch sm_80,sm_90
# NVFP4 caches on Blackwell: the plain arch (integer e2m1 rounding) and the family targets
# whose cvt.rn.satfinite.e2m1x2 the kernel uses (sm_100f: B200/GB200/B300, sm_120f: RTX 50).
echo "== compile NVFP4 specs for Blackwell (sm_100, sm_100f, sm_120, sm_120f)"
"$BIN" compile $(grep -l '"nvfp4"' $specs) --arch sm_100,sm_100f,sm_120,sm_120f
echo "== run"
"$BIN" run specs/llama-3.1-8b.json --tokens "${ROPEJIT_TOKENS:-4096}" --backend auto
