#!/usr/bin/env python3
"""Markdown table of `ropejit compile --stats --json` output (read from stdin), for docs/PERF.md.

Usage: build/ropejit compile specs/*.json --arch sm_90 --stats --json --parts H100-SXM \
         | python3 scripts/stats-table.py
"""
import json
import sys


def widths(counts):
    """'2x128 1x64' from a {bits: count} map; '-' when empty."""
    parts = [f"{n}x{bits}" for bits, n in sorted(counts.items(), key=lambda kv: -int(kv[0])) if n]
    return " ".join(parts) or "-"


rows = [r for r in json.load(sys.stdin) if "stats" in r]
print("| spec | arch | config | regs | warps/SM | q/k/v loads | stores (global / generic) | instr/16B | 16B loads in flight | H100 issue % of memory |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    s = r["stats"]
    h100 = next((p for p in s["roofline"] if p["part"].startswith("H100")), None)
    issue = f"{100 * h100['issue_fraction']:.0f}%" if h100 else "?"
    stores = f"{widths(s['global_stores']['qkv'])} / {widths(s['global_stores']['generic'])}"
    print(f"| {r['spec']} | {r['arch']} | {r['config']} | {s['registers']} | {s['occupancy']['warps_per_sm']} "
          f"| {widths(s['global_loads']['qkv'])} | {stores} | {s['instructions_per_vector']:.1f} "
          f"| {s['loads_in_flight']} | {issue} |")
sources = {r["stats"]["source"] for r in rows}
print(f"\nInstructions counted from: {', '.join(sorted(sources))}.")
