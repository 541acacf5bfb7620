#!/usr/bin/env bash
# Op knowledge lives in op rows (docs/architecture.md §11): no generic production file names a
# specific op. Scans the C++ files of every production folder for `OpKind::<op>` and for the
# string literal "<op>", <op> each name of ROPEJIT_OPS (core/include/ropejit/enums.h), comments
# left out. The allow rule, all of it:
#   1. an op's own files, <folder>/src/op_<name>.cpp (they hold its rows and their code);
#   2. core/include/ropejit/enums.h (the op list, the enum, its names and its facts rows);
#   3. a row's own op: `OpKind::<op>` as the first value of the row `k<Layer>Op_<op>` (op rope's
#      rows beside the generic code: spec_ops.cpp, source.cpp, launch_args.cpp, reference_rope.cpp);
#   4. an op stored as a value, never tested: `= OpKind::<op>;` ending a statement (a member's
#      default, a table's datum: `OpKind op = OpKind::rope;`, `f.nope_op = OpKind::attn_temperature;`)
#      or `value_or(OpKind::<op>)` (a CLI default);
#   5. "rope" is the rope block's JSON key too: that literal fails only in a comparison
#      (`== "rope"`, `!= "rope"`); every other op's name fails as any literal.
# Anything else (`==`/`!=` against an op, `case OpKind::<op>:`, a ternary, a set of ops) fails.
# Usage: check_op_names.sh REPO_ROOT [FILE...]   (default: the production files)
#        check_op_names.sh REPO_ROOT --self-test (the check fails on injected branches)
set -euo pipefail
root="$(cd "$1" && pwd)"; shift

# The op names, from the one list.
ops="$(sed -nE 's/^#define ROPEJIT_OPS\(X\) (.*)$/\1/p' "$root/core/include/ropejit/enums.h" |
       grep -oE 'X\([a-z_0-9]+\)' | sed -E 's/X\((.*)\)/\1/' | tr '\n' ' ')"
[ -n "$ops" ] || { echo "FAIL: no ROPEJIT_OPS list in core/include/ropejit/enums.h"; exit 1; }

# Production C++: every layer, check, cli, bench and the Python binding's C++ (not tests/).
production_files() {
  local d
  for d in core spec codegen compile tunedb runtime tuner inspect check cli bench python/src; do
    [ -d "$root/$d" ] && find "$root/$d" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \)
  done | sort
}

# Prints "file:line: text" for each occurrence the allow rule does not cover; returns their count.
scan() {
  OPS="$ops" ROOT="${scan_root:-$root}" perl -e '
    my @ops = split " ", $ENV{OPS};
    my $names = join "|", @ops;
    my $failures = 0;
    for my $file (@ARGV) {
      (my $rel = $file) =~ s{^\Q$ENV{ROOT}\E/}{};
      next if $rel =~ m{(^|/)src/op_[a-z_0-9]+\.cpp$} || $rel eq "core/include/ropejit/enums.h";  # rules 1, 2
      open my $fh, "<", $file or die "$file: $!";
      my $text = do { local $/; <$fh> };
      # Comments out, line breaks kept (line numbers stay); strings keep their "//".
      $text =~ s{("(?:[^"\\\n]|\\.)*")|//[^\n]*|/\*(.*?)\*/}{defined $1 ? $1 : defined $2 ? ($2 =~ s/[^\n]//gr) : ""}gse;
      my $masked = $text;
      $masked =~ s{(k[A-Za-z]+Op_($names)\s*=?\s*\{\s*)OpKind::\2\b}{$1 . " " x length("OpKind::$2")}ge;  # rule 3
      $masked =~ s{(?<![=!<>])=\s*OpKind::($names)\s*;}{" " x length($&)}ge;  # rule 4
      $masked =~ s{value_or\(\s*OpKind::($names)\s*\)}{" " x length($&)}ge;
      my @lines = split /\n/, $masked, -1;
      my @shown = split /\n/, $text, -1;
      for my $i (0 .. $#lines) {
        my $l = $lines[$i];
        my $hit = $l =~ /\bOpKind::($names)\b/ ? "OpKind::$1"
                : $l =~ /"((?!rope")(?:$names))"/ ? "\"$1\""                                   # rule 5
                : $l =~ /(?:[=!]=\s*"rope"|"rope"\s*[=!]=)/ ? "\"rope\" compared" : "";
        next unless $hit;
        (my $shown = $shown[$i]) =~ s/^\s+//;
        print "FAIL: $rel:", $i + 1, ": $hit in a generic file (op knowledge belongs in op rows): $shown\n";
        $failures++;
      }
    }
    exit($failures > 255 ? 255 : $failures);
  ' "$@"
}

if [ "${1:-}" = "--self-test" ]; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/core/include/ropejit" "$tmp/codegen/src" "$tmp/spec/src"
  cp "$root/core/include/ropejit/enums.h" "$tmp/core/include/ropejit/"
  # Each must fail: a branch on an op, a case label, an op's name compared, a set of ops.
  printf 'int f(const Spec& s) { if (s.op == OpKind::rerotate) return 1; return 0; }\n' >"$tmp/codegen/src/bad_branch.cpp"
  printf 'switch (op) {\n  case OpKind::mla_append: break;\n}\n' >"$tmp/codegen/src/bad_case.cpp"
  printf 'bool g(OpKind op) { return to_string(op) == "rope"; }\n' >"$tmp/spec/src/bad_rope.cpp"
  printf 'auto n = std::string("inverse_rope");\n' >"$tmp/spec/src/bad_name.cpp"
  printf 'bool h(OpKind op) { return op != OpKind::rope && op != OpKind::rope; }\n' >"$tmp/spec/src/bad_two.cpp"
  # Each must pass: the rules above, and names in comments.
  printf 'extern const CodegenOp kCodegenOp_rope = {\n    OpKind::rope, "rope",\n    nullptr};\n' >"$tmp/codegen/src/source.cpp"
  printf 'struct S {\n  OpKind op = OpKind::rope;  // OpKind::rerotate in a comment\n};\n/* "mla_append" */\n' >"$tmp/spec/src/good.h"
  printf 'auto op = x.value_or(OpKind::rope);\nout["rope"] = 1;\n' >"$tmp/spec/src/good_default.cpp"
  printf 'bool k = op == OpKind::rerotate;\n' >"$tmp/codegen/src/op_rerotate.cpp"
  set +e
  out="$(scan_root="$tmp" scan "$tmp"/codegen/src/*.cpp "$tmp"/spec/src/*)"; rc=$?
  set -e
  echo "$out"
  got="$(grep -c '^FAIL' <<<"$out" || true)"
  if [ "$got" -ne 5 ] || ! grep -q bad_branch <<<"$out" || ! grep -q bad_case <<<"$out" ||
     ! grep -q bad_rope <<<"$out" || ! grep -q bad_name <<<"$out" || ! grep -q bad_two <<<"$out"; then
    echo "self-test: FAIL (expected the 5 injected files to fail and the others to pass; got $got, rc $rc)"
    exit 1
  fi
  echo "self-test: PASS (5 injected branches caught, the allowed forms passed)"
  exit 0
fi

if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(production_files); fi
set +e
scan "${files[@]}"; failures=$?
set -e
if [ "$failures" -eq 0 ]; then
  echo "op names: PASS (${#files[@]} production files; ops: $ops)"
else
  echo "op names: $failures occurrence(s) outside op rows"; exit 1
fi
