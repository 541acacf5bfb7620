#!/usr/bin/env bash
# Production code keeps to the faces of the layers below it: a file of folder F (a layer, check,
# cli, bench, python/src) includes its own folder's headers, public ones (<layer>/include,
# templates/) and tests/ support (bench), never another folder's src/ (docs/architecture.md §3).
# tests/ may (check_test_includes.sh: with a reason on the line). The reaches not yet moved behind
# a public header are the rows of `kDebt` below, each with why; a new reach fails, and so does a
# row whose reach is gone (delete it). A CMake target (CMakeLists.txt, bench/, python/) lists
# another layer's src/ among its include folders only for a kDebt row of its folder.
# Usage: check_src_reach.sh REPO_ROOT               (every production file)
#        check_src_reach.sh REPO_ROOT --self-test   (the check fails on an injected reach)
set -euo pipefail
root="$(cd "$1" && pwd)"; shift

# "<folder> <layer>/src/<header>": the one list of known reaches, grouped by why they remain.
kDebt=(
  # The workload builder and the launch internals under it (BufferDesc, KernelVariant, Backend):
  # their public face waits for the tensor-descriptor rework of runtime/src/launch (issue 44 item 4).
  "check runtime/src/workload/workload.h"
  "check runtime/src/workload/device_workload.h"
  "check runtime/src/backends/backend.h"
  "tuner runtime/src/workload/workload.h"
  "tuner runtime/src/workload/device_workload.h"
  "tuner runtime/src/kernel_variant.h"
  "tuner runtime/src/backends/backend.h"
  "tuner runtime/src/backends/cuda_driver.h"
  "tuner runtime/src/backends/cuda_graph.h"
  "tuner runtime/src/backends/device_info.h"
  "bench runtime/src/workload/device_workload.h"
  "bench runtime/src/backends/backend.h"
  "bench runtime/src/backends/cuda_driver.h"
  "bench runtime/src/backends/host/host_jit.h"
  "bench runtime/src/caches/memory_cache.h"
  "cli runtime/src/backends/backend.h"
  # The C API's exception guard: emit --standalone's C entry points share it.
  "inspect runtime/src/c_api/c_api_guard.h"
)
kFolders=(core spec codegen compile tunedb runtime tuner inspect check cli bench python)

# The folder a production file belongs to ("runtime", "python").
folder_of() {
  local rel="${1#"$root"/}"
  echo "${rel%%/*}"
}

# Prints "<folder> <layer>/src/<header>" for each include of another folder's src/ in the files.
reaches() {
  local f line inc F own other dir
  for f in "$@"; do
    F="$(folder_of "$f")"; own="$root/$F"; [ "$F" = python ] && own="$root/python"
    dir="$(dirname "$f")"
    while IFS= read -r line; do
      inc="$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$line")"
      if [ -f "$dir/$inc" ] || [ -f "$own/src/$inc" ] || [ -f "$own/$inc" ]; then continue; fi
      if compgen -G "$root/*/include/$inc" >/dev/null; then continue; fi
      if [ -f "$root/templates/$inc" ] || [ -f "$root/tests/$inc" ]; then continue; fi
      for other in "${kFolders[@]}"; do
        if [ "$other" != "$F" ] && [ -f "$root/$other/src/$inc" ]; then echo "$F $other/src/$inc"; fi
      done
    done < <(grep -hE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
  done | sort -u
}

production_files() {
  local d
  for d in "${kFolders[@]}"; do
    [ -d "$root/$d" ] && find "$root/$d" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.cuh' \) \
      -not -path "$root/python/tests/*"
  done
}

# Prints "<folder> <layer>" for each other layer's src/ a CMake target of the folder lists among its
# include folders (tests/ aside: they may reach private headers).
cmake_reaches() {
  (cd "$root" && perl -0777 -ne '
    while (/target_include_directories\(\s*(\S+)([^)]*)\)/g) {
      my ($target, $dirs) = ($1, $2);
      my $folder = $target =~ /^ropejit_(\w+)$/ ? $1 : $target =~ /\$\{name\}/ ? "bench" : "";
      $folder = {host_jit => "runtime", inspect_clang => "inspect"}->{$folder} // $folder;
      next if $folder eq "";  # the library target itself: its layers own every src/ folder
      while ($dirs =~ m{(?<![\w.])(core|spec|codegen|compile|tunedb|runtime|tuner|inspect|check)/src\b}g) {
        print "$folder $1\n" if $1 ne $folder;
      }
    }' CMakeLists.txt bench/CMakeLists.txt python/CMakeLists.txt | sort -u)
}

# Compares the reaches found with kDebt; prints each difference; returns their count.
judge() {
  local found="$1" failures=0 row
  while IFS= read -r row; do
    [ -z "$row" ] && continue
    if ! printf '%s\n' "${kDebt[@]}" | grep -qxF "$row"; then
      echo "FAIL: ${row%% *} includes ${row#* } (another layer's src/): give it a public header, or include one"
      failures=$((failures + 1))
    fi
  done <<<"$found"
  for row in "${kDebt[@]}"; do
    if ! grep -qxF "$row" <<<"$found"; then
      echo "FAIL: kDebt row \"$row\" no longer happens: delete it"
      failures=$((failures + 1))
    fi
  done
  return "$failures"
}

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/runtime/src/backends" "$tmp/runtime/include/ropejit" "$tmp/check/src"
  touch "$tmp/runtime/src/backends/secret.h" "$tmp/runtime/include/ropejit/runtime.h" "$tmp/check/src/own.h"
  printf '#include "own.h"\n#include "ropejit/runtime.h"\n#include <vector>\n' >"$tmp/check/src/good.cpp"
  printf '#include "backends/secret.h"\n' >"$tmp/check/src/bad.cpp"
  found="$(root="$tmp" reaches "$tmp/check/src/good.cpp" "$tmp/check/src/bad.cpp")"
  if [ "$found" != "check runtime/src/backends/secret.h" ]; then
    echo "self-test: FAIL (expected only check's reach into runtime/src/backends/secret.h; found: $found)"
    exit 1
  fi
  set +e
  out="$(kDebt=(); judge "$found")"; rc=$?
  set -e
  echo "$out"
  [ "$rc" -eq 1 ] || { echo "self-test: FAIL (the reach did not fail the check)"; exit 1; }
  echo "self-test: PASS (an include of another layer's src/ fails; own and public headers pass)"
  exit 0
fi

mapfile -t files < <(production_files)
found="$(reaches "${files[@]}")"
set +e
judge "$found"; failures=$?
set -e
# A target lists another layer's src/ only while its folder includes from it (a kDebt row).
while IFS= read -r pair; do
  [ -z "$pair" ] && continue
  if ! printf '%s\n' "${kDebt[@]}" | grep -q "^${pair% *} ${pair#* }/src/"; then
    echo "FAIL: a CMake target of ${pair% *} lists ${pair#* }/src among its include folders, and includes nothing there"
    failures=$((failures + 1))
  fi
done <<<"$(cmake_reaches)"
if [ "$failures" -eq 0 ]; then
  echo "src reach: PASS (${#files[@]} production files; ${#kDebt[@]} known reaches in kDebt)"
else
  echo "src reach: $failures failure(s)"; exit 1
fi
