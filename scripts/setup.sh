#!/usr/bin/env bash
# Installs what ropejit builds against (idempotent; apt-get update at most once):
#   1. Debian packages (needs root or sudo);
#   2. only where no CUDA toolkit is found ($CUDA_HOME, default /usr/local/cuda, lacking
#      include/nvrtc.h or libnvrtc): NVRTC and the CUDA headers from the PyPI wheels, with the
#      system's pip, into the project-local prefix ${ROPEJIT_CUDA_PREFIX:-<repo>/.deps/cuda},
#      where CMake (cmake/RopejitCuda.cmake) finds them. See docs/install.md;
#   3. only where no nvdisasm is found (PATH, $CUDA_HOME/bin): nvdisasm and cuobjdump from the
#      PyPI wheels into ${ROPEJIT_CUDA_TOOLS_PREFIX:-<repo>/.deps/cuda-tools} for the static
#      kernel report (cmake/RopejitCudaTools.cmake; optional: without them it reads the PTX);
#   4. only where the system python lacks numpy: numpy from PyPI into
#      ${ROPEJIT_PYTHON_DEPS:-<repo>/.deps/python} for the peers dry run (bench/peers.py), which
#      checks the host backend against bench/peers_reference.py (optional: else it prints SKIPPED).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
CUDA_PREFIX="${ROPEJIT_CUDA_PREFIX:-$repo/.deps/cuda}"
# CUDA 13.0, the release ropejit is developed and tested with (the component versions of the
# CUDA 13.0 toolkit on the development machine); the oldest 13.x asks the least of the driver.
# nvrtc: libnvrtc + builtins + nvrtc.h; runtime: cuda.h (driver API types), cuda_fp16.h,
# cuda_bf16.h; cccl (nv/target) and crt (crt/host_defines.h) complete those fp16/bf16 headers
# for a host compiler. Override with a space-separated list in ROPEJIT_CUDA_WHEELS.
read -r -a CUDA_WHEELS <<<"${ROPEJIT_CUDA_WHEELS:-nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88}"

have_toolkit() {
  [ -f "$CUDA_HOME/include/nvrtc.h" ] || return 1
  local d
  for d in lib64 lib; do
    compgen -G "$CUDA_HOME/$d/libnvrtc.so*" >/dev/null && return 0
  done
  return 1
}
need_wheels=0
have_toolkit || need_wheels=1

TOOLS_PREFIX="${ROPEJIT_CUDA_TOOLS_PREFIX:-$repo/.deps/cuda-tools}"
# No 13.0.x of these wheels exists; 13.2 reads CUDA 13.0 CUBINs (sm_80, sm_90).
read -r -a TOOL_WHEELS <<<"${ROPEJIT_CUDA_TOOL_WHEELS:-nvidia-cuda-nvdisasm==13.2.51 nvidia-cuda-cuobjdump==13.2.51}"
need_tools=0
command -v nvdisasm >/dev/null 2>&1 || [ -x "$CUDA_HOME/bin/nvdisasm" ] || need_tools=1

PACKAGES=(
  cmake g++ make ninja-build pkg-config ccache
  nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  llvm-19-dev libclang-cpp19-dev libclang-19-dev clang-19 libclang-rt-19-dev
  python3 python3-venv python3-dev
)
# pip from Debian, never a user's or pyenv's: it installs with --target, outside any environment.
if [ "$need_wheels" -eq 1 ] || [ "$need_tools" -eq 1 ]; then PACKAGES+=(python3 python3-pip); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup: Debian packages done"
fi

PYTHON=/usr/bin/python3
require_pip() {
  if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    echo "error: $PYTHON -m pip does not work; install the Debian package python3-pip" >&2
    return 1
  fi
}
# pip_target DIR WHEEL...: --target: no environment is touched (so no PEP 668 refusal);
# --no-deps: the wheels have none; --only-binary: never build anything. One command, so the
# shared nvidia/ folder is merged.
pip_target() {
  local dir="$1"
  shift
  "$PYTHON" -m pip install --disable-pip-version-check --no-input --root-user-action=ignore \
    --no-deps --only-binary=:all: --no-cache-dir --progress-bar off --target "$dir" "$@"
}

# --- no toolkit: NVRTC + CUDA headers from PyPI into the prefix ---
install_nvrtc_wheels() {
  # Layout: $CUDA_PREFIX/pip (pip install --target: nvidia/cu13/{include,lib}), with
  # $CUDA_PREFIX/include and $CUDA_PREFIX/lib linked to it; .installed lists the wheels.
  stamp="$CUDA_PREFIX/.installed"
  wanted="${CUDA_WHEELS[*]}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -f "$CUDA_PREFIX/include/nvrtc.h" ] \
     && [ -f "$CUDA_PREFIX/include/cuda.h" ] && compgen -G "$CUDA_PREFIX/lib/libnvrtc.so.*" >/dev/null; then
    echo "setup: no CUDA toolkit at $CUDA_HOME; NVRTC + CUDA headers present in $CUDA_PREFIX ($wanted)"
    return 0
  fi

  echo "setup: no CUDA toolkit at $CUDA_HOME (include/nvrtc.h, lib64/libnvrtc.so*); installing"
  echo "       $wanted"
  echo "       from PyPI into $CUDA_PREFIX (about 100 MB download, 250 MB on disk)"
  require_pip || exit 1
  mkdir -p "$CUDA_PREFIX"
  rm -rf "$CUDA_PREFIX/pip.new" "$stamp"
  pip_target "$CUDA_PREFIX/pip.new" "${CUDA_WHEELS[@]}"

  wheel_dir=""
  for d in "$CUDA_PREFIX"/pip.new/nvidia/cu*; do
    [ -f "$d/include/nvrtc.h" ] && wheel_dir="${d#"$CUDA_PREFIX/pip.new/"}"
  done
  if [ -z "$wheel_dir" ] || ! compgen -G "$CUDA_PREFIX/pip.new/$wheel_dir/lib/libnvrtc.so.*" >/dev/null \
     || [ ! -f "$CUDA_PREFIX/pip.new/$wheel_dir/include/cuda.h" ]; then
    echo "error: the wheels did not provide nvidia/cu*/include/{nvrtc.h,cuda.h} and lib/libnvrtc.so.*" >&2
    exit 1
  fi
  rm -rf "$CUDA_PREFIX/pip"
  mv "$CUDA_PREFIX/pip.new" "$CUDA_PREFIX/pip"
  ln -sfn "pip/$wheel_dir/include" "$CUDA_PREFIX/include"
  ln -sfn "pip/$wheel_dir/lib" "$CUDA_PREFIX/lib"
  echo "$wanted" >"$stamp"
  echo "setup: NVRTC + CUDA headers installed in $CUDA_PREFIX (include/, lib/ -> pip/$wheel_dir)"
}

# --- no nvdisasm: nvdisasm + cuobjdump from PyPI into the tools prefix (optional) ---
# Layout as above: $TOOLS_PREFIX/pip (nvidia/cu13/bin), $TOOLS_PREFIX/bin linked to it.
install_tool_wheels() {
  local stamp="$TOOLS_PREFIX/.installed" wanted="${TOOL_WHEELS[*]}" d wheel_dir=""
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$TOOLS_PREFIX/bin/nvdisasm" ]; then
    echo "setup: no nvdisasm on PATH or in $CUDA_HOME/bin; present in $TOOLS_PREFIX ($wanted)"
    return 0
  fi
  echo "setup: no nvdisasm on PATH or in $CUDA_HOME/bin; installing $wanted from PyPI into $TOOLS_PREFIX"
  require_pip || return 1
  mkdir -p "$TOOLS_PREFIX"
  rm -rf "$TOOLS_PREFIX/pip.new" "$stamp"
  pip_target "$TOOLS_PREFIX/pip.new" "${TOOL_WHEELS[@]}" || return 1
  for d in "$TOOLS_PREFIX"/pip.new/nvidia/cu*; do
    [ -x "$d/bin/nvdisasm" ] && wheel_dir="${d#"$TOOLS_PREFIX/pip.new/"}"
  done
  if [ -z "$wheel_dir" ]; then
    echo "error: the wheels did not provide nvidia/cu*/bin/nvdisasm" >&2
    return 1
  fi
  rm -rf "$TOOLS_PREFIX/pip"
  mv "$TOOLS_PREFIX/pip.new" "$TOOLS_PREFIX/pip"
  ln -sfn "pip/$wheel_dir/bin" "$TOOLS_PREFIX/bin"
  echo "$wanted" >"$stamp"
  echo "setup: nvdisasm + cuobjdump installed in $TOOLS_PREFIX (bin/ -> pip/$wheel_dir/bin)"
}

# --- numpy for the peers dry run, when the system python has none (optional) ---
PYTHON_DEPS="${ROPEJIT_PYTHON_DEPS:-$repo/.deps/python}"
install_numpy() {
  if "$PYTHON" -c "import numpy" >/dev/null 2>&1; then
    echo "setup: numpy in the system python"
    return 0
  fi
  if PYTHONPATH="$PYTHON_DEPS" "$PYTHON" -c "import numpy" >/dev/null 2>&1; then
    echo "setup: numpy present in $PYTHON_DEPS"
    return 0
  fi
  echo "setup: installing numpy (>= 1.26) from PyPI into $PYTHON_DEPS"
  require_pip || return 1
  rm -rf "$PYTHON_DEPS.new"
  pip_target "$PYTHON_DEPS.new" "numpy>=1.26" || return 1
  rm -rf "$PYTHON_DEPS"
  mv "$PYTHON_DEPS.new" "$PYTHON_DEPS"
}

if [ "$need_wheels" -eq 0 ]; then
  echo "setup: CUDA toolkit at $CUDA_HOME"
else
  install_nvrtc_wheels
fi
if [ "$need_tools" -eq 0 ]; then
  echo "setup: nvdisasm at $(command -v nvdisasm || echo "$CUDA_HOME/bin/nvdisasm")"
elif ! install_tool_wheels; then
  # Optional: the static kernel report reads the PTX without a disassembler.
  echo "setup: warning: nvdisasm not installed; the static kernel report (ropejit compile --stats) will read the PTX" >&2
fi
if ! install_numpy; then
  echo "setup: warning: numpy not installed; the peers dry run (ctest peers_dry_run) will print SKIPPED" >&2
fi
