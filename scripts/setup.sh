#!/usr/bin/env bash
# Installs the Debian packages ropejit builds against (idempotent; apt-get update at most once).
set -euo pipefail

CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$CUDA_HOME/include/nvrtc.h" ]; then
  echo "error: the CUDA toolkit was not found at $CUDA_HOME (need include/nvrtc.h and lib64/libnvrtc.so)." >&2
  echo "       Install CUDA 12.x/13.x there or set CUDA_HOME." >&2
  exit 1
fi

PACKAGES=(
  cmake g++ make ninja-build pkg-config
  nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  llvm-19-dev libclang-cpp19-dev libclang-19-dev clang-19
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
