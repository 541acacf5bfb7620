#!/usr/bin/env bash
# The Python tier (run by scripts/test.sh after ctest): a fresh venv from Debian's python3,
# `pip install .` into it (scikit-build-core + nanobind from PyPI; the CMake build folder
# build-py/ is kept, so a second run rebuilds only what changed), `import ropejit` from outside
# the tree, then pytest (python/tests) with real numpy, torch and transformers on the host backend.
# ROPEJIT_SKIP_PYTHON=1 skips the tier (it prints SKIPPED; CI never sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${ROPEJIT_SKIP_PYTHON:-0}" = 1 ]; then
  echo "python tier: SKIPPED (ROPEJIT_SKIP_PYTHON=1)"
  exit 0
fi
BUILD_DIR="${ROPEJIT_BUILD_DIR:-build}"
VENV="$(realpath -m "$BUILD_DIR/py-venv")"
PYTHON="${ROPEJIT_PYTHON:-/usr/bin/python3}"
# No pip cache: torch's PyPI wheels (CUDA libraries included) would sit on disk twice.
pip_quiet=(--disable-pip-version-check --no-input --progress-bar off -q --no-cache-dir)

# The venv holds only the test requirements and ropejit (reinstalled each run); made once.
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
echo "python tier: installing the test requirements (python/requirements-test.txt) into $VENV"
# torch from PyPI unpacks to ~5.5 GB and needs ~9 GB while installing: say so before pip fails.
free_kb=$(df -Pk "$VENV" | awk 'NR == 2 {print $4}')
if ! compgen -G "$VENV/lib/python3*/site-packages/torch" >/dev/null && [ "${free_kb:-0}" -lt $((9 * 1024 * 1024)) ]; then
  echo "python tier: warning: $((free_kb / 1024)) MiB free on the disk of $VENV; installing torch needs about 9 GiB" >&2
fi
"$VENV/bin/pip" install "${pip_quiet[@]}" -r python/requirements-test.txt
# The compilers CMake picks for build/ (scikit-build-core would take Python's CC/CXX,
# x86_64-linux-gnu-g++): the same name is what lets the compiler cache serve both builds.
export CC="${CC:-cc}" CXX="${CXX:-c++}"
echo "python tier: pip install . (log: $BUILD_DIR/pip-install.log)"
if ! "$VENV/bin/pip" install "${pip_quiet[@]}" -v . >"$BUILD_DIR/pip-install.log" 2>&1; then
  tail -40 "$BUILD_DIR/pip-install.log" >&2
  echo "python tier: pip install . failed" >&2
  exit 1
fi
# From an empty folder: the installed package, not the source tree, must import, without torch.
(cd "$(mktemp -d)" && "$VENV/bin/python" -c \
  "import sys, ropejit; assert 'torch' not in sys.modules, 'import ropejit imported torch'; print('python tier: import ropejit', ropejit.__version__, 'from', ropejit.__file__)")
export ROPEJIT_CACHE_DIR="$PWD/$BUILD_DIR/test-cache-python"
cd python/tests
"$VENV/bin/python" -m pytest -q -rs "$@"
