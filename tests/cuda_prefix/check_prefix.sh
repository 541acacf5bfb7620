#!/usr/bin/env bash
# The no-toolkit fallback of cmake/RopejitCuda.cmake, container-free:
#   1. a fake prefix laid out as scripts/setup.sh lays out the PyPI wheels
#      (<prefix>/pip/nvidia/cu13/{include,lib} + <prefix>/include, <prefix>/lib links), its few
#      files linked from the NVRTC and headers the main build found;
#   2. the toolkit hidden: CUDA_HOME and CUDAToolkit_ROOT name an empty folder, CUDA_PATH unset,
#      no PATH entry holding nvcc;
#   3. a probe project configures (must pick the prefix), builds, and runs: nvrtcVersion, a kernel
#      compiled to PTX, libnvrtc loaded from the prefix. It runs with the loader's cache
#      inhibited where possible, so a system-wide toolkit in ld.so.conf cannot stand in;
#   4. with an empty prefix instead, the configure must fail and point to scripts/setup.sh.
# usage: check_prefix.sh CMAKE CXX_COMPILER LIBNVRTC CUDA_INCLUDE_DIR ROPEJIT_CMAKE_DIR
set -euo pipefail
cmake_cmd="$1" cxx="$2" nvrtc_lib="$3" cuda_include="$4" module_dir="$5"
probe_src="$(cd "$(dirname "$0")/probe" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/ropejit-cuda-prefix.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- 1. the fake prefix ---
prefix="$work/prefix"
wheel="$prefix/pip/nvidia/cu13"
mkdir -p "$wheel/include" "$wheel/lib"
for h in nvrtc.h cuda.h; do
  [ -f "$cuda_include/$h" ] || fail "$cuda_include/$h missing (the main build's CUDA headers)"
  ln -s "$(readlink -f "$cuda_include/$h")" "$wheel/include/$h"
done
lib_dir="$(dirname "$(readlink -f "$nvrtc_lib")")"
shopt -s nullglob
libs=("$lib_dir"/libnvrtc.so.[0-9]* "$lib_dir"/libnvrtc-builtins.so.[0-9]*)
shopt -u nullglob
[ ${#libs[@]} -ge 2 ] || fail "no libnvrtc.so.N / libnvrtc-builtins.so.N in $lib_dir"
# Versioned names only, as the wheel ships them (no libnvrtc.so development link).
for f in "${libs[@]}"; do ln -s "$(readlink -f "$f")" "$wheel/lib/$(basename "$f")"; done
ln -s pip/nvidia/cu13/include "$prefix/include"
ln -s pip/nvidia/cu13/lib "$prefix/lib"

# --- 2. no toolkit ---
empty="$work/empty-cuda-home"
mkdir -p "$empty"
export CUDA_HOME="$empty" CUDAToolkit_ROOT="$empty"
unset CUDA_PATH ROPEJIT_CUDA_PREFIX CMAKE_PREFIX_PATH
path=""
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && [ ! -x "$d/nvcc" ] && path="${path:+$path:}$d"
done
export PATH="$path"
if command -v nvcc >/dev/null; then fail "nvcc still on PATH: $(command -v nvcc)"; fi

configure() {  # configure BUILD_DIR PREFIX -> output in BUILD_DIR.log, status returned
  "$cmake_cmd" -S "$probe_src" -B "$1" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
    -DROPEJIT_CMAKE_DIR="$module_dir" -DROPEJIT_CUDA_PREFIX="$2" >"$1.log" 2>&1
}

# --- 3. the fallback finds the prefix, and what it found works ---
if ! configure "$work/build" "$prefix"; then
  cat "$work/build.log"; fail "configure with the toolkit hidden and a filled prefix failed"
fi
grep -F "ropejit CUDA: prefix $prefix" "$work/build.log" || { cat "$work/build.log"; fail "fallback not reported"; }
grep -F "probe: origin=prefix include=$prefix/include" "$work/build.log" \
  || { cat "$work/build.log"; fail "CUDAToolkit_INCLUDE_DIRS does not name the prefix"; }
grep -F "nvrtc: $prefix/lib/libnvrtc.so." "$work/build.log" >/dev/null \
  || { cat "$work/build.log"; fail "CUDA::nvrtc does not come from the prefix"; }
"$cmake_cmd" --build "$work/build" >"$work/build-make.log" 2>&1 \
  || { cat "$work/build-make.log"; fail "probe build failed"; }

probe="$work/build/probe"
runner=()
interp="$(readelf -p .interp "$probe" 2>/dev/null | sed -n 's/^ *\[ *[0-9a-f]*\] *//p' | head -n 1 || true)"
if [ -n "$interp" ] && [ -x "$interp" ] && "$interp" --inhibit-cache /bin/true 2>/dev/null; then
  runner=("$interp" --inhibit-cache)
  echo "running the probe without the loader cache ($interp --inhibit-cache)"
else
  echo "note: cannot inhibit the loader cache here; running the probe directly"
fi
out="$(env -u LD_LIBRARY_PATH "${runner[@]}" "$probe" 2>&1)" || { echo "$out"; fail "probe failed"; }
echo "$out"
grep -F "libnvrtc: $prefix/" <<<"$out" >/dev/null || fail "libnvrtc was not loaded from the prefix"

# --- 4. an empty prefix fails the configure, with advice ---
mkdir -p "$work/empty-prefix"
if configure "$work/build-empty" "$work/empty-prefix"; then
  cat "$work/build-empty.log"; fail "configure succeeded with neither a toolkit nor a filled prefix"
fi
grep -F "scripts/setup.sh" "$work/build-empty.log" >/dev/null \
  || { cat "$work/build-empty.log"; fail "the error does not point to scripts/setup.sh"; }
echo "PASS: toolkit hidden, CUDA::nvrtc and CUDA headers taken from the prefix; empty prefix refused"
