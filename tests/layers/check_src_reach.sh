#!/usr/bin/env bash
# Production code keeps to the faces of the layers below it: a file of folder F (a layer, check,
# cli, bench, python/src) includes its own folder's headers, public ones (<layer>/include,
# templates/) and tests/ support (bench), never another folder's src/ (docs/architecture.md §3).
# tests/ may (check_test_includes.sh: with a reason on the line). A reach fails unless a row of
# `kDebt` below allows it (each with why), and so does a row whose reach is gone (delete it). A
# CMake target (CMakeLists.txt, bench/, python/) lists another layer's src/ among its include
# folders only for a kDebt row of its folder.
# Usage: check_src_reach.sh REPO_ROOT               (every production file)
#        check_src_reach.sh REPO_ROOT --self-test   (the check fails on an injected reach)
set -euo pipefail
root="$(cd "$1" && pwd)"; shift

# "<folder> <layer>/src/<header>": reaches allowed for now, each with why. Empty: every reach of
# issue 44 item 4 moved behind a face (runtime's ropejit/internal/, spec's ropejit/hf_import.h).
kDebt=()
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

# Prints "<folder> <layer>/src" for each other layer's src/ a CMake target of the folder lists among
# its include folders (tests/ aside: they may reach private headers).
cmake_reaches() {
  (cd "$root" && perl -0777 -ne '
    while (/target_include_directories\(\s*(\S+)([^)]*)\)/g) {
      my ($target, $dirs) = ($1, $2);
      my $folder = $target =~ /^ropejit_(\w+)$/ ? $1 : $target =~ /\$\{name\}/ ? "bench" : "";
      $folder = {host_jit => "runtime", inspect_clang => "inspect"}->{$folder} // $folder;
      next if $folder eq "";  # the library target itself: its layers own every src/ folder
      while ($dirs =~ m{(?<![\w.])(core|spec|codegen|compile|tunedb|runtime|tuner|inspect|check)/src\b}g) {
        print "$folder $1/src\n" if $1 ne $folder;
      }
    }' CMakeLists.txt bench/CMakeLists.txt python/CMakeLists.txt | sort -u)
}

# True when a kDebt row matches glob $1 ("check runtime/src/x.h", "check runtime/src/*").
in_debt() {
  local row
  for row in ${kDebt[@]+"${kDebt[@]}"}; do
    # shellcheck disable=SC2053  # $1 is a glob on purpose
    [[ "$row" == $1 ]] && return 0
  done
  return 1
}

# Prints a failure, in printf format $3 (folder, path), for each "<folder> <path>" line of $1 that
# no kDebt row matches as glob "<line>$2"; returns their count.
unlisted() {
  local line failures=0
  while IFS= read -r line; do
    if [ -n "$line" ] && ! in_debt "$line$2"; then
      # shellcheck disable=SC2059  # $3 is the format on purpose
      printf "FAIL: $3\n" "${line%% *}" "${line#* }"
      failures=$((failures + 1))
    fi
  done <<<"$1"
  return "$failures"
}

# Compares the reaches found (rows) and the CMake include folders (cmake_reaches lines) with
# kDebt; prints each difference; returns their count.
judge() {
  local found="$1" cmake_found="$2" failures=0 row
  unlisted "$found" "" "%s includes %s (another layer's src/): give it a public header, or include one" ||
    failures=$?
  for row in ${kDebt[@]+"${kDebt[@]}"}; do
    if ! grep -qxF "$row" <<<"$found"; then
      echo "FAIL: kDebt row \"$row\" no longer happens: delete it"
      failures=$((failures + 1))
    fi
  done
  # A target lists another layer's src/ only while its folder includes from it (a kDebt row).
  unlisted "$cmake_found" "/*" "a CMake target of %s lists %s among its include folders, and no kDebt row allows it" ||
    failures=$((failures + $?))
  return "$failures"
}

# Runs judge on an injected case; fails the self-test unless it returns `want` failures.
expect_failures() {
  local want="$1" what="$2" out rc
  set +e
  out="$(judge "$3" "$4")"; rc=$?
  set -e
  if [ -n "$out" ]; then echo "$out"; fi
  [ "$rc" -eq "$want" ] || { echo "self-test: FAIL ($what: $rc failure(s), expected $want)"; exit 1; }
}

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/runtime/src/backends" "$tmp/runtime/include/ropejit" "$tmp/check/src" "$tmp/bench" "$tmp/python"
  touch "$tmp/runtime/src/backends/secret.h" "$tmp/runtime/include/ropejit/runtime.h" "$tmp/check/src/own.h"
  printf '#include "own.h"\n#include "ropejit/runtime.h"\n#include <vector>\n' >"$tmp/check/src/good.cpp"
  printf '#include "backends/secret.h"\n' >"$tmp/check/src/bad.cpp"
  printf 'target_include_directories(ropejit_check PUBLIC check/include PRIVATE runtime/src)\n' >"$tmp/CMakeLists.txt"
  touch "$tmp/bench/CMakeLists.txt" "$tmp/python/CMakeLists.txt"
  found="$(root="$tmp" reaches "$tmp/check/src/good.cpp" "$tmp/check/src/bad.cpp")"
  if [ "$found" != "check runtime/src/backends/secret.h" ]; then
    echo "self-test: FAIL (expected only check's reach into runtime/src/backends/secret.h; found: $found)"
    exit 1
  fi
  cmake_found="$(root="$tmp" cmake_reaches)"
  if [ "$cmake_found" != "check runtime/src" ]; then
    echo "self-test: FAIL (expected check's target to list runtime/src; found: $cmake_found)"
    exit 1
  fi
  expect_failures 2 "an injected reach and its include folder" "$found" "$cmake_found"
  kDebt=("check runtime/src/backends/secret.h")
  expect_failures 0 "the same reach as a kDebt row" "$found" "$cmake_found"
  expect_failures 1 "a kDebt row whose reach is gone" "" ""
  echo "self-test: PASS (an include of another layer's src/ and its CMake include folder fail; own and" \
    "public headers pass; a kDebt row allows both, and fails once its reach is gone)"
  exit 0
fi

mapfile -t files < <(production_files)
set +e
judge "$(reaches "${files[@]}")" "$(cmake_reaches)"; failures=$?
set -e
if [ "$failures" -eq 0 ]; then
  echo "src reach: PASS (${#files[@]} production files; ${#kDebt[@]} known reaches in kDebt)"
else
  echo "src reach: $failures failure(s)"; exit 1
fi
