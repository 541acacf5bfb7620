#!/usr/bin/env bash
# Tests reach a layer's private headers (<layer>/src/...) only on purpose: every such include in
# tests/*.cpp, tests/*.h and tests/support/* carries `// private: <what is under test, why not
# public>` on its line, and no include of another header carries one. Prints the count of
# tests/test_*.cpp files that include a private header (docs/architecture.md §10).
# Usage: check_test_includes.sh REPO_ROOT [FILE...]   (default: the files above)
#        check_test_includes.sh REPO_ROOT --self-test (the check fails on an include without a reason)
set -euo pipefail
root="$(cd "$1" && pwd)"; shift

# Every private header as its path below its src folder ("launch/launch_args.h").
private=()
for src in "$root"/*/src; do
  while IFS= read -r h; do private+=("${h#"$src"/}"); done < <(find "$src" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cuh' \))
done

# True when include path $1 names a private header: it is one of them or a path-component
# suffix of one (a test may reach "host/cooperative.h" from backends/), and no tests/ or public file.
is_private() {
  local inc="$1" p
  while [[ "$inc" == ./* || "$inc" == ../* ]]; do inc="${inc#*/}"; done
  [[ "$inc" == */src/* ]] && inc="${inc##*/src/}"
  [ -f "$root/tests/$inc" ] && return 1
  compgen -G "$root/*/include/$inc" >/dev/null && return 1
  for p in "${private[@]}"; do
    [[ "$p" == "$inc" || "$p" == */"$inc" ]] && return 0
  done
  return 1
}

# Checks the files given; prints each failure and the summary; returns the number of failures.
scan() {
  local failures=0 reaching=0 tests=0 f line inc reached
  for f in "$@"; do
    reached=0
    [[ "$(basename "$f")" == test_*.cpp ]] && tests=$((tests + 1))
    while IFS= read -r line; do
      inc="$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]+)[">].*/\1/' <<<"${line#*:}")"
      if is_private "$inc"; then
        reached=1
        if ! grep -qE '//[[:space:]]*private:[[:space:]]*[^[:space:]].{8,}' <<<"$line"; then
          echo "FAIL: ${f#"$root"/}:$line: private header without a '// private: <reason>' comment"
          failures=$((failures + 1))
        fi
      elif grep -qE '//[[:space:]]*private:' <<<"$line"; then
        echo "FAIL: ${f#"$root"/}:$line: '// private:' on an include of a header that is not private"
        failures=$((failures + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' "$f" || true)
    [[ "$(basename "$f")" == test_*.cpp ]] && reaching=$((reaching + reached))
  done
  echo "test files reaching private headers: $reaching of $tests tests/test_*.cpp (each include with its reason)"
  return "$failures"
}

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  printf '#include "launch/launch_args.h"\n#include "ropejit/runtime.h"\n' >"$tmp/test_bad.cpp"
  printf '#include "launch/launch_args.h"  // private: check_launch under test\n' >"$tmp/test_good.cpp"
  printf '#include "ropejit/runtime.h"  // private: not so\n' >"$tmp/test_stale.cpp"
  printf '#include "../runtime/src/backends/host/cooperative.h"\n' >"$tmp/test_path.cpp"
  ok=1
  scan "$tmp/test_bad.cpp" >"$tmp/out" && { echo "FAIL: an include without a reason passed"; ok=0; }
  grep -q 'test_bad.cpp:1:' "$tmp/out" || { echo "FAIL: the bad include was not named:"; cat "$tmp/out"; ok=0; }
  grep -q 'test_bad.cpp:2:' "$tmp/out" && { echo "FAIL: a public include was flagged:"; cat "$tmp/out"; ok=0; }
  scan "$tmp/test_good.cpp" >"$tmp/out" || { echo "FAIL: an include with its reason failed:"; cat "$tmp/out"; ok=0; }
  scan "$tmp/test_stale.cpp" >"$tmp/out" && { echo "FAIL: '// private:' on a public include passed"; ok=0; }
  scan "$tmp/test_path.cpp" >"$tmp/out" && { echo "FAIL: a private header by relative path passed"; ok=0; }
  [ "$ok" = 1 ] && echo "test includes self-test: PASS" || exit 1
  exit 0
fi

if [ $# -eq 0 ]; then
  shopt -s nullglob
  set -- "$root"/tests/*.cpp "$root"/tests/*.h "$root"/tests/support/*
fi
if scan "$@"; then echo "test includes: PASS"; else echo "test includes: FAIL"; exit 1; fi
