#!/usr/bin/env python3
"""Records a GPU run's times as a measurements file for the calibrated model (tests/data/perf/).

Each row: the shape, spec, dtype, tokens, how it was timed, the time, and the static figures of
the kernel that ran (`ropejit compile --stats --json` of the spec's default config for --arch,
read HERE at the commit the GPU ran: run this before the kernels change). `ropejit model check`
and the unit test ModelCalibration read the file (docs/static-report.md §3).

Times come from ropejit_bench_gpu's JSON (--benchmark_out: names rope/<shape>/<dtype>/T:<n>,
counter "us", event-timed) or from a plain list (--times) of
  {"label", "spec", "dtype", "tokens", "us", "timing": "event|graph", "inputs": "dram|l2"}.

  python3 scripts/record-measurements.py --bench results/ropejit_bench_gpu.json --part H200 \\
      --device "NVIDIA H200" --date 2026-12-01 --commit $(git rev-parse --short HEAD) \\
      --source "docs/PERF.md ..." --out tests/data/perf/h200-2026-12-01.json
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENS = 4096  # the launch whose access figures are read (per row, they do not depend on it)
KERNEL_FIELDS = ["registers", "shared_bytes", "block_threads", "items_per_row", "serial_trips",
                 "instructions_per_item", "bytes_in_flight", "data_load_before_index_use"]


def bench_shapes():
    """label -> spec file stem, from bench/bench_gpu.cpp's kShapes (the one table of them)."""
    text = open(os.path.join(ROOT, "bench", "bench_gpu.cpp")).read()
    table = text[text.index("kShapes[]"):text.index("};", text.index("kShapes[]"))]
    return dict(re.findall(r'\{"([^"]+)",\s*"([^"]+)"\}', table))


def rows_from_bench(path):
    shapes = bench_shapes()
    rows = []
    for b in json.load(open(path))["benchmarks"]:
        m = re.match(r"rope/([^/]+)/([^/]+)/T:(\d+)", b.get("name", ""))
        if not m or "us" not in b or b.get("error_occurred"):
            continue
        label, dtype, tokens = m.group(1), m.group(2), int(m.group(3))
        if label not in shapes:
            sys.exit(f"record-measurements: shape {label} is not in bench_gpu.cpp's kShapes")
        rows.append({"label": label, "spec": shapes[label], "dtype": dtype, "tokens": tokens,
                     "us": b["us"], "timing": "event", "inputs": "dram"})
    return rows


def kernel_figures(ropejit, spec, dtype, arch):
    """The static figures of `spec` with `dtype` on `arch` (default config), as the model reads them."""
    j = json.load(open(os.path.join(ROOT, "specs", spec + ".json")))
    j["dtype"] = dtype
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(j, f)
        path = f.name
    try:
        out = subprocess.run([ropejit, "compile", path, "--arch", arch, "--stats", "--json", "--parts", "H200",
                              "--tokens", str(TOKENS)],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    r = json.loads(out)[0]
    s = r["stats"]
    if s["source"] != "sass":
        sys.exit(f"record-measurements: {spec} was read from {s['source']}, not SASS (install nvdisasm: scripts/setup.sh)")
    k = {"arch": r["arch"], "config": config_json(r["config"])}
    k.update({f: s[f] for f in KERNEL_FIELDS})
    k["fp64_arith_per_item"] = s["fp64"]["arith_per_item"]
    k["fp64_convert_per_item"] = s["fp64"]["convert_per_item"]
    # Second reads are the kernel's, not the spec's: recorded as they ran (per row, at --tokens).
    k["reread_bytes_per_row"] = s["access"]["reread_bytes"] // TOKENS
    k["reread_distance"] = s["access"]["reread_distance"]
    return k


def config_json(name):
    """bt256.v8.h4.compute.blocks[.ahead] -> the config object."""
    m = re.fullmatch(r"bt(\d+)\.v(\d+)\.h(\d+)\.(\w+)\.(\w+)(\.ahead)?", name)
    if not m:
        sys.exit(f"record-measurements: cannot read config name {name}")
    config = {"block_threads": int(m.group(1)), "vec": int(m.group(2)), "heads_per_thread": int(m.group(3)),
              "sincos": m.group(4), "grid": m.group(5)}
    if m.group(6):
        config["ahead"] = True
    return config


def dumps_rows(out):
    """The file with one row a line (diffs of a new run read row by row)."""
    head = {k: v for k, v in out.items() if k != "rows"}
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "rows": [']
    lines += ["  " + json.dumps(r, ensure_ascii=False) + ("," if i + 1 < len(out["rows"]) else "")
              for i, r in enumerate(out["rows"])]
    return "\n".join(lines) + "\n]}\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", help="ropejit_bench_gpu JSON (--benchmark_out)")
    ap.add_argument("--times", help="a JSON list of rows (see above)")
    ap.add_argument("--part", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", required=True, help="where the numbers are written down, and the command")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--ropejit", default=os.path.join(ROOT, "build", "ropejit"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if bool(a.bench) == bool(a.times):
        sys.exit("record-measurements: give exactly one of --bench and --times")
    rows = rows_from_bench(a.bench) if a.bench else json.load(open(a.times))
    figures = {}
    for row in rows:
        key = (row["spec"], row["dtype"])
        if key not in figures:
            figures[key] = kernel_figures(a.ropejit, row["spec"], row["dtype"], a.arch)
        row.setdefault("batch", max(1, row["tokens"] // 1024))  # bench_gpu's and peers' varlen sequences
        row["kernel"] = figures[key]
    out = {"format": 1, "part": a.part, "device": a.device, "date": a.date, "commit": a.commit,
           "source": a.source, "rows": rows}
    with open(a.out, "w") as f:
        f.write(dumps_rows(out))
    print(f"record-measurements: {len(rows)} rows -> {a.out}")


if __name__ == "__main__":
    main()
