#!/usr/bin/env bash
# Issue 15: libropejit must load on a machine without a GPU driver or CUDA toolkit. NVRTC and the
# driver API are dlopen'ed on first use, so neither libcuda nor libnvrtc may be NEEDED (a linked
# CUDA::nvrtc once pulled the driver stub in when the linker did not use --as-needed).
# Usage: check_needed.sh LIBRARY...
set -euo pipefail
status=0
for lib in "$@"; do
  needed="$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
  [ -n "$needed" ] || { echo "FAIL: readelf found no NEEDED entries in $lib" >&2; status=1; continue; }
  if grep -E '^lib(cuda|nvrtc|cudart)\.' <<<"$needed"; then
    echo "FAIL: $lib needs the CUDA libraries above; they must be dlopen'ed" >&2
    status=1
  else
    echo "ok: $lib needs $(tr '\n' ' ' <<<"$needed")"
  fi
done
exit $status
