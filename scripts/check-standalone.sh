#!/usr/bin/env bash
# Proves the repository stands alone: (1) no tracked file refers to a path outside the tree,
# (2) a copy of the working tree in an empty temporary folder (no sibling folders) configures,
# builds the library, CLI and tests, and passes the unit tier there.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

echo "== standalone: references outside the repository"
# Paths that only exist beside this checkout on the team's machines, or documents kept there.
# (Spelled in pieces so that this file does not match itself.)
dots='\.\.'
pattern="$dots/shared|/work/""shared|SHARED""_DIR|ROPE_REFERENCE\.md|DESIGN\.md"
hits=$(git ls-files -co --exclude-standard | xargs -d '\n' grep -nIE "$pattern" 2>/dev/null || true)
if [ -n "$hits" ]; then
  echo "error: these lines refer to files outside the repository:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "none"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
copy="$work/ropejit"
mkdir "$copy"
# The working tree as a clone would have it (tracked + new unignored files), nothing beside it.
git ls-files -co --exclude-standard -z | (cd "$repo" && xargs -0 cp --parents -t "$copy")
echo "== standalone: configure + build in $copy (alone in its folder: $(ls "$work"))"
build="$copy/build"
# A machine without a toolkit keeps its CUDA wheels in the (ignored) prefix of this checkout.
export ROPEJIT_CUDA_PREFIX="${ROPEJIT_CUDA_PREFIX:-$repo/.deps/cuda}"
cmake -S "$copy" -B "$build" -DCMAKE_BUILD_TYPE=Release -DROPEJIT_BUILD_BENCH=OFF \
  ${ROPEJIT_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "${ROPEJIT_JOBS:-$(nproc)}" --target ropejit_tests ropejit_cli >/dev/null
echo "== standalone: unit tier in the copy"
# The unit tier: spec, HF import, frequency goldens, reference, source, caches, tuner logic.
unit='Spec*:HfImport*:Freqs*:FreqsCli*:GoldenModel*:Reference*:Source*:FpConvert*:Config*:ShippedSpecs*:MemoryCache*:DiskCache*:SearchSpace*:TuningDb*:DeviceMetadata*'
env -u ROPEJIT_SOURCE_DIR ROPEJIT_CACHE_DIR="$work/cache" \
  "$build/tests/ropejit_tests" --gtest_filter="$unit" --gtest_brief=1
echo "standalone: PASS"
