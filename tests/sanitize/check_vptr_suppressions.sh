#!/usr/bin/env bash
# ropejit::HostModule is implemented in the -fno-rtti host JIT TU: its vtable has no type_info,
# so UBSan's vptr check fails every virtual call on it from RTTI'd code. Every test file that
# names HostModule must therefore be named in tests/sanitize/ubsan.supp (its suppression line, or
# the comment above a narrower one); otherwise only the sanitizer tier (scripts/sanitize.sh, the
# longest CI tier) finds the gap.
# Usage: check_vptr_suppressions.sh REPO_ROOT              (the files under tests/)
#        check_vptr_suppressions.sh REPO_ROOT --self-test  (the check fails on a file it should)
set -euo pipefail
root="$(cd "$1" && pwd)"; shift

# Checks every .cpp/.h under $1/tests against $1/tests/sanitize/ubsan.supp; returns the failures.
scan() {
  local base="$1" supp="$1/tests/sanitize/ubsan.supp" failures=0 callers=0 f rel
  while IFS= read -r f; do
    grep -qw HostModule "$f" || continue
    callers=$((callers + 1))
    rel="${f#"$base"/}"
    if ! grep -qF "$rel" "$supp"; then
      echo "FAIL: $rel names HostModule but tests/sanitize/ubsan.supp does not name it (add a vptr line)"
      failures=$((failures + 1))
    fi
  done < <(find "$base/tests" -type f \( -name '*.cpp' -o -name '*.h' \) | sort)
  echo "test files naming HostModule: $callers, each named in ubsan.supp unless FAIL above"
  return "$failures"
}

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/tests/sanitize" "$tmp/tests/support"
  printf 'vptr:*/tests/test_named.cpp\n# tests/support/in_comment.h: a narrower line below\nvptr:Foo::*\n' \
    >"$tmp/tests/sanitize/ubsan.supp"
  printf 'void f(const HostModule& m);\n' | tee "$tmp/tests/test_named.cpp" "$tmp/tests/support/in_comment.h" \
    "$tmp/tests/support/missing.h" >/dev/null
  printf 'int HostModules_elsewhere;\n' >"$tmp/tests/test_plain.cpp"
  ok=1
  scan "$tmp" >"$tmp/out" && { echo "FAIL: a HostModule caller without a suppression passed"; ok=0; }
  grep -q 'FAIL: tests/support/missing.h' "$tmp/out" || { echo "FAIL: the missing file was not named:"; cat "$tmp/out"; ok=0; }
  [ "$(grep -c '^FAIL' "$tmp/out")" = 1 ] || { echo "FAIL: a covered or unrelated file was flagged:"; cat "$tmp/out"; ok=0; }
  grep -q 'naming HostModule: 3' "$tmp/out" || { echo "FAIL: wrong count of callers:"; cat "$tmp/out"; ok=0; }
  [ "$ok" = 1 ] && echo "vptr suppressions self-test: PASS" || exit 1
  exit 0
fi

if scan "$root"; then echo "vptr suppressions: PASS"; else echo "vptr suppressions: FAIL"; exit 1; fi
