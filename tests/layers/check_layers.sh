#!/usr/bin/env bash
# The build enforces the layer order core ← spec ← codegen ← compile ← tunedb ← runtime ← tuner:
# with the include folders a layer's object library compiles with (its own and those of the
# layers below), its own public header compiles and the next layer's header is not found.
# Usage: check_layers.sh CXX EXTRA_INCLUDE_DIRS LAYER=INCLUDE_DIR=HEADER...
set -euo pipefail
cxx="$1"; extra="$2"; shift 2
flags=(-std=c++17 -fsyntax-only -x c++)
for dir in ${extra//:/ }; do flags+=(-isystem "$dir"); done
layers=("$@")
failures=0
for ((i = 0; i < ${#layers[@]}; ++i)); do
  IFS='=' read -r name dir header <<<"${layers[$i]}"
  for d in ${dir//:/ }; do flags+=(-I "$d"); done
  if ! echo "#include \"ropejit/$header\"" | "$cxx" "${flags[@]}" - 2>/tmp/layers.$$; then
    echo "FAIL: layer $name cannot compile its own header ropejit/$header:"; cat /tmp/layers.$$
    failures=$((failures + 1))
  fi
  if ((i + 1 < ${#layers[@]})); then
    IFS='=' read -r up_name _ up_header <<<"${layers[$((i + 1))]}"
    if echo "#include \"ropejit/$up_header\"" | "$cxx" "${flags[@]}" - 2>/tmp/layers.$$; then
      echo "FAIL: layer $name can include ropejit/$up_header of the layer above ($up_name)"
      failures=$((failures + 1))
    elif ! grep -qE "No such file|file not found" /tmp/layers.$$; then  # gcc's words, clang's
      echo "FAIL: layer $name including ropejit/$up_header failed for another reason:"; cat /tmp/layers.$$
      failures=$((failures + 1))
    else
      echo "ok: $name sees ropejit/$header, not ropejit/$up_header ($up_name)"
    fi
  fi
done
rm -f /tmp/layers.$$
[ "$failures" -eq 0 ] && echo "layers: PASS" || { echo "layers: $failures failure(s)"; exit 1; }
