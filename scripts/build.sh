#!/usr/bin/env bash
# Configures and builds ropejit (Release) into ${ROPEJIT_BUILD_DIR:-build}; set-up first.
# Arguments name the targets to build (default: all), e.g. `build.sh ropejit_cli`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR="${ROPEJIT_BUILD_DIR:-build}"
JOBS="${ROPEJIT_JOBS:-$(nproc)}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${ROPEJIT_CMAKE_ARGS:-} >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "$@"
else
  cmake --build "$BUILD_DIR" -j "$JOBS"
fi
