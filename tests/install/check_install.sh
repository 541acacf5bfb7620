#!/usr/bin/env bash
# Installs the built tree into a temporary prefix, builds + runs a find_package consumer, and
# compiles the source it emits against the installed headers only (NVRTC; nvcc too if present).
# Also checks that the installed library finds the installed shipped tuning folder.
# Usage: check_install.sh BUILD_DIR NVRTC_LIBRARY CUDA_INCLUDE_DIR
set -euo pipefail
build_dir="$1"
nvrtc_library="$2"
cuda_include="$3"
source_dir="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DNVRTC_LIBRARY="$nvrtc_library" -DCUDA_INCLUDE_DIR="$cuda_include" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/consumer/consumer" "$work/kernel.cu"
# Only the install prefix and the CUDA headers: no source tree, no embedded templates.
# libnvrtc finds its builtins beside itself only when that folder is on the loader path.
LD_LIBRARY_PATH="$(dirname "$nvrtc_library"):${LD_LIBRARY_PATH:-}" \
  "$work/consumer/compile_emitted" "$work/kernel.cu" "$work/prefix/include" "$cuda_include"
# The shipped tuning folder is installed, and the installed library finds it from where it lies.
tuning="$(realpath "$work/prefix")/share/ropejit/tuning"
[ -d "$tuning" ] || { echo "install: no $tuning" >&2; exit 1; }
if [ -x "$work/prefix/bin/ropejit" ]; then
  echo '{"format": 1, "devices": []}' > "$tuning/synthetic-gpu.json"
  shipped="$(env -u ROPEJIT_SHIPPED_TUNING_DIR LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" \
    "$work/prefix/bin/ropejit" db shipped)"
  if ! grep -qF "shipped tuning folder: $tuning (the install prefix)" <<<"$shipped" ||
     ! grep -qF "synthetic-gpu.json" <<<"$shipped"; then
    echo "install: the installed library does not read $tuning:"$'\n'"$shipped" >&2
    exit 1
  fi
  echo "shipped tuning folder found from the installed library: $tuning"
fi
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x "$(dirname "$cuda_include")/bin/nvcc" ] && nvcc="$(dirname "$cuda_include")/bin/nvcc"
if [ -n "$nvcc" ]; then
  "$nvcc" -cubin -arch=sm_90 -I"$work/prefix/include" -o "$work/kernel.cubin" "$work/kernel.cu"
  echo "nvcc: $(stat -c %s "$work/kernel.cubin") bytes of sm_90 CUBIN against the installed headers"
else
  echo "nvcc: not found; the NVRTC compile above is the check"
fi
