#!/usr/bin/env bash
# Configures and builds ropejit (Release) into ${ROPEJIT_BUILD_DIR:-build}; set-up first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR="${ROPEJIT_BUILD_DIR:-build}"
JOBS="${ROPEJIT_JOBS:-$(nproc)}"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${ROPEJIT_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
