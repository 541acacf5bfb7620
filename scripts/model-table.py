#!/usr/bin/env python3
"""The table "estimate vs measured" of the calibrated static model, for docs/PERF.md.

For each measurements file (default: every tests/data/perf/*.json) it runs
`build/ropejit model check FILE` (the model's estimate of each recorded launch, with the static
figures of the kernel that ran) and prints its markdown table; with --predict, `model predict`
(today's kernels at the same launches: a prediction for the next GPU run, written down before it).
Exit status 1 when a checked row leaves its band (the unit test ModelCalibration says the same).

  python3 scripts/model-table.py                 # every recorded run, checked
  python3 scripts/model-table.py --predict       # today's kernels, predicted
"""
import argparse
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="measurements files (default: tests/data/perf/*.json)")
    ap.add_argument("--predict", action="store_true", help="today's kernels instead of those that ran")
    ap.add_argument("--ropejit", default=os.path.join(ROOT, "build", "ropejit"))
    a = ap.parse_args()
    files = a.files or sorted(glob.glob(os.path.join(ROOT, "tests", "data", "perf", "*.json")))
    if not os.access(a.ropejit, os.X_OK):
        sys.exit(f"model-table: no {a.ropejit}: build first (scripts/build.sh)")
    status = 0
    for path in files:
        cmd = [a.ropejit, "model", "predict" if a.predict else "check", path, "--specs", os.path.join(ROOT, "specs")]
        shown = [os.path.relpath(c, ROOT) if os.path.isabs(c) else c for c in cmd]
        print(f"$ {' '.join(shown)}")
        run = subprocess.run(cmd, text=True, capture_output=True)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        status = status or run.returncode
        print()
    return status


if __name__ == "__main__":
    sys.exit(main())
