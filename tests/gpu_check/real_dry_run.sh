#!/usr/bin/env bash
# ctest gpu_check_dry_run_bundle: the dry run of scripts/gpu-check.sh on the real gpu-bundle/
# (scripts/gpu-prepare.sh makes it; git-ignored, so a fresh clone and CI have none: SKIPPED).
# Usage: real_dry_run.sh SOURCE_DIR [HOST_LIB]
set -uo pipefail
src=$1
if [ ! -d "$src/gpu-bundle" ]; then
  echo "SKIPPED: no $src/gpu-bundle (scripts/gpu-prepare.sh makes it)"
  exit 77
fi
GPU_PLAN_HOST_LIB="${2:-}" exec bash "$src/scripts/gpu-check.sh" --dry-run
