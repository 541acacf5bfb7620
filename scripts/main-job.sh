#!/usr/bin/env bash
# The main job: set-up and build, then validate every spec in specs/, compile each with NVRTC
# for sm_80 and sm_90, and run Llama-3.1-8B end to end on the best available backend
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
echo "== run"
"$BIN" run specs/llama-3.1-8b.json --tokens "${ROPEJIT_TOKENS:-4096}" --backend auto
