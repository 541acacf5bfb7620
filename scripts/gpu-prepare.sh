#!/usr/bin/env bash
# Run HERE (the CPU machine) before a GPU call: builds the GPU tier without the host backend
# (the GPU machine has no Debian packages or LLVM) and stages binaries plus the shared libraries
# they need in gpu-bundle/ (git-ignored), to pass as `carry` to the device call that runs
# scripts/gpu-check.sh.
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
du -sh gpu-bundle
echo "next: device run with carry [\"gpu-bundle\"] and command: bash scripts/gpu-check.sh"
