#!/usr/bin/env bash
# Run HERE (the CPU machine) before a GPU call: builds the GPU tier without the host backend
# (the GPU machine has no Debian packages or LLVM) and stages binaries plus the shared libraries
# they need in gpu-bundle/ (git-ignored), to pass as `carry` to the device call that runs
# scripts/gpu-check.sh; then the peers bench/peers.py compares with (gpu-bundle/peers/:
# Liger-Kernel's and apache-tvm-ffi's wheels, FlashInfer's rope sources; scripts/stage_peers.py
# says what and why), downloaded once with pip into build-gpu/peers-downloads (PyPI, pinned
# versions, cp312 manylinux x86_64: the GPU image's Python). Last, the dry run checks the bundle,
# the carry size and the stage plan: `bash scripts/gpu-check.sh --dry-run`.
# ROPEJIT_NO_PEERS=1 skips the peers (their columns then read SKIPPED on the GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DROPEJIT_HOST_BACKEND=OFF >/dev/null
cmake --build build-gpu -j "$(nproc)"
rm -rf gpu-bundle && mkdir -p gpu-bundle/bin gpu-bundle/lib
cp build-gpu/ropejit build-gpu/tests/ropejit_tests build-gpu/tests/c_api/ropejit_c_api_test gpu-bundle/bin/
cp build-gpu/bench/ropejit_bench_* gpu-bundle/bin/
# Non-system libraries the binaries link (CUDA's come from the GPU machine's toolkit).
for bin in gpu-bundle/bin/*; do
  ldd "$bin" | awk '/=> \//{print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux|libnvrtc)[.-]' || true
done | sort -u | xargs -r -I{} cp -L {} gpu-bundle/lib/
cp -L build-gpu/libropejit.so.0 gpu-bundle/lib/
cp build-gpu/gpu_tier_filter.txt gpu-bundle/  # the gpu tier's gtest filter (tests/CMakeLists.txt)

if [ "${ROPEJIT_NO_PEERS:-0}" = 1 ]; then
  echo "gpu-prepare: peers SKIPPED (ROPEJIT_NO_PEERS=1)"
else
  downloads=build-gpu/peers-downloads
  mkdir -p "$downloads"
  mapfile -t pins < <(python3 scripts/stage_peers.py --requirements)
  # --no-deps: the image has torch, triton, numpy (KINDS.md); stage_peers.py names what it lacks.
  if ! python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform any -d "$downloads" "${pins[@]}"; then
    echo "gpu-prepare: pip download of ${pins[*]} failed (PyPI unreachable?); rerun, or ROPEJIT_NO_PEERS=1" >&2
    exit 1
  fi
  python3 scripts/stage_peers.py "$downloads" gpu-bundle
  # FlashInfer's rope module built here for the H200 (sm_90): proves the staged tree complete, and
  # the GPU machine takes it when its nvcc is the same version (else builds it there, about a minute).
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    work=$(mktemp -d)
    tar xJf gpu-bundle/peers/flashinfer-rope.tar.xz -C "$work"
    python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
      gpu-bundle/peers/wheels/apache_tvm_ffi-*.whl "$work/tvm"
    python3 bench/peers_flashinfer.py --prebuild --tree "$work" --tvm-include "$work/tvm/tvm_ffi/include" \
      --out gpu-bundle/peers/flashinfer-build --arch "${FLASHINFER_ARCH:-90}"
    rm -rf "$work" gpu-bundle/peers/flashinfer-build/*.o
  else
    echo "gpu-prepare: no nvcc here: FlashInfer's rope module is built on the GPU machine (about a minute)"
  fi
fi
du -sh gpu-bundle
bash scripts/gpu-check.sh --dry-run
echo "next: device run with carry [\"gpu-bundle\"] and command: bash scripts/gpu-check.sh"
