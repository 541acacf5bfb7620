#!/usr/bin/env python3
"""Cold NVRTC compile time of every spec, as a Markdown table for docs/PERF.md (issue 25 item 5).

Each spec is compiled by a fresh `ropejit compile SPEC --arch ... --json --phases` process, as a
user compiles one spec, in ROUNDS rounds over all specs; the table keeps each kernel's fastest
round (the least disturbed by other load) and states the load average before and after.

Usage: python3 scripts/compile-table.py [--ropejit build/ropejit] [--rounds 3]
         [--arch sm_80,sm_90] [--line-ms 100] [SPEC.json ...]   (default: every spec in specs/)
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def compile_once(ropejit, spec, arch):
    """The kernels of one process: [{spec, arch, compile_ms, phases_ms, ...}]."""
    run = subprocess.run([ropejit, "compile", spec, "--arch", arch, "--json", "--phases"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"compile-table: `{ropejit} compile {spec}` failed: {run.stderr.strip()}")
    return json.loads(run.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ropejit", default=os.path.join(ROOT, "build", "ropejit"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--arch", default="sm_80,sm_90")
    ap.add_argument("--line-ms", type=float, default=100.0, help="the goal a kernel is marked against")
    ap.add_argument("specs", nargs="*")
    args = ap.parse_args()
    specs = args.specs or sorted(p for p in glob.glob(os.path.join(ROOT, "specs", "*.json"))
                                 if os.path.basename(p) != "schema.json")
    if args.rounds < 1:
        sys.exit("compile-table: --rounds must be at least 1")

    start = (time.strftime("%Y-%m-%d %H:%M:%S"), load_average())
    best = {}
    for _ in range(args.rounds):
        for spec in specs:
            for k in compile_once(args.ropejit, spec, args.arch):
                key = (k["spec"], k["arch"])
                if key not in best or k["compile_ms"] < best[key]["compile_ms"]:
                    best[key] = k
    end = (time.strftime("%H:%M:%S"), load_average())

    print(f"`python3 scripts/compile-table.py {' '.join(sys.argv[1:])}`: "
          f"{start[0]}–{end[0]}, load average (1/5/15 min) {start[1]} before, {end[1]} after; "
          f"fastest of {args.rounds} processes per spec; ms = NVRTC create + compile + CUBIN, "
          f"phases from NVRTC's `--time` (whole ms).\n")
    print("| spec | arch | ms | front end / NVVM / ptxas | registers |")
    print("| --- | --- | --- | --- | --- |")
    over = 0
    for (spec, arch), k in sorted(best.items()):
        p = k["phases_ms"]
        mark = f" **over {args.line_ms:.0f}**" if k["compile_ms"] > args.line_ms else ""
        over += bool(mark)
        print(f"| {spec} | {arch} | {k['compile_ms']:.1f}{mark} | {p['frontend']} / {p['nvvm']} / {p['ptxas']} "
              f"| {k['registers']} |")
    print(f"\n{len(best) - over} of {len(best)} kernels at or under {args.line_ms:.0f} ms.")


if __name__ == "__main__":
    main()
