#!/usr/bin/env python3
"""RoPE peer comparison (issues 6, 43): ropejit (C API through ctypes) against PyTorch eager
HF-style RoPE, the same under torch.compile (Inductor), Liger-Kernel's Triton RoPE (and RMSNorm
for the QK-norm shapes), FlashInfer's RoPE ops (its CUDA sources built here: bench/peers_flashinfer.py
says why not its Python package) and a device-to-device copy of the same bytes (the achievable
ceiling), on identical inputs and shapes, in one run on one GPU. Fused shapes (QK-norm, paged FP8
cache append, MLA's latent-cache append) compare with the peer's fused op where one exists
(FlashInfer's rope_quantize_fp8_append_paged_kv_cache and its MLA variant), else with the sequence
of ops an engine runs (norm, rope, cache write), each library's kernels where it has them. The table's last columns: ropejit's time over the best peer's
(< 1: ropejit faster), naming that peer; a peer whose output fails the check is flagged and never
the best.

GB/s everywhere is ropejit's exact byte accounting of the operation (ropejit_kernel_bytes_moved)
divided by each system's median time: the same logical bytes for every system. ropejit's output
is checked against an independent float64 reference (bench/peers_reference.py) on the very
inputs it is timed on, positions up to 10^6, before any timing; a failure is reported, never timed.

GPU run (on the GPU machine; see scripts/gpu-check.sh):
  python3 bench/peers.py --lib gpu-bundle/lib/libropejit.so.0 --device-name h200 \\
      --out-md docs/PERF.md --out-png docs/perf-h200.png --flashinfer-tree /tmp/ropejit-flashinfer-rope
  (liger_kernel and tvm_ffi on PYTHONPATH: gpu-check.sh installs the carried wheels)
Dry run (no GPU, host backend, numpy only; GPU systems print SKIPPED; a carried Liger wheel on
PYTHONPATH and --flashinfer-tree are checked for the files and API the GPU run uses):
  python3 bench/peers.py --dry-run --lib build/libropejit.so
"""
import argparse
import datetime
import os
import shlex
import sys
import time

EXIT_SKIPPED = 77  # ctest SKIP_RETURN_CODE
try:
    import numpy as np
except ImportError:
    print("SKIPPED: bench/peers.py needs numpy (python3 -m pip install numpy)")
    sys.exit(EXIT_SKIPPED)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_reference as ref  # noqa: E402
from ropejit_ctypes import Library, RopejitError, Runtime  # noqa: E402

SYSTEMS = ["ropejit", "torch_eager", "torch_compile", "liger", "fi_cos_sin_cache", "fi_pos_ids", "fi_llama31",
           "fi_fused", "copy"]
PEERS = SYSTEMS[1:-1]
DEFAULT_TOKENS = [1, 8, 64, 512, 4096, 16384, 65536]
DRY_RUN_TOKENS = [1, 8, 64, 2049]  # 2049: two unequal sequences (a padding row)
DRY_RUN_MAX_TOKENS = 4096


class Result:
    """One system's outcome in one configuration: a time, or why there is none."""

    def __init__(self, us=None, note="", skipped=None):
        self.us, self.note, self.skipped = us, note, skipped

    def gbps(self, nbytes):
        return nbytes / (self.us * 1e3) if self.us else None


class Row:
    """One configuration: shape, dtype, tokens, bytes per launch, a Result per system."""

    def __init__(self, shape, dtype, tokens, nbytes):
        self.shape, self.dtype, self.tokens, self.nbytes = shape, dtype, tokens, nbytes
        self.results = {}
        self.check = ""
        self.graph = False
        self.empty_us = None

    def best_peer(self):
        """(µs, name) of the fastest peer whose output passed the check, or None."""
        timed = [(r.us, name) for name, r in self.results.items()
                 if name in PEERS and r.us and not r.note.startswith("accuracy FAILED")]
        return min(timed) if timed else None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lib", required=True, help="path to libropejit.so")
    p.add_argument("--device-name", default="", help="device label for the table and the PNG name (default: "
                   "the GPU's name, or 'host' in a dry run)")
    p.add_argument("--out-md", help="append a dated section (device, command, table) to this markdown file")
    p.add_argument("--out-png", help="write the GB/s vs tokens plot here (needs matplotlib)")
    p.add_argument("--shapes", default=",".join(ref.SHAPES), help="comma-separated labels: " + ", ".join(ref.SHAPES))
    p.add_argument("--tokens", help="comma-separated token counts (default: %s; dry run: %s)"
                   % (",".join(map(str, DEFAULT_TOKENS)), ",".join(map(str, DRY_RUN_TOKENS))))
    p.add_argument("--dtypes", default="bf16,fp16", help="comma-separated: bf16, fp16")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of: " + ", ".join(SYSTEMS)
                   + " (split a long GPU run; ropejit is always checked)")
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU: ropejit on the host backend with numpy arrays, checked, GPU systems SKIPPED")
    p.add_argument("--flashinfer-tree", help="FlashInfer's rope sources, unpacked from "
                   "gpu-bundle/peers/flashinfer-rope.tar.xz (bench/peers_flashinfer.py); without it the fi_* "
                   "columns read SKIPPED")
    p.add_argument("--flashinfer-build", default="/tmp/ropejit-flashinfer-build",
                   help="where FlashInfer's rope module is built (reused while sources and flags are unchanged)")
    p.add_argument("--flashinfer-prebuilt", help="the module built on the CPU machine (gpu-bundle/peers/"
                   "flashinfer-build), taken when nvcc's version and the flags match")
    p.add_argument("--seed", type=int, default=0, help="random seed (0: fresh)")
    args = p.parse_args(argv)
    args.shapes = [s for s in args.shapes.split(",") if s]
    for s in args.shapes:
        if s not in ref.SHAPES:
            p.error(f"--shapes: {s} is not allowed: must be one of {', '.join(ref.SHAPES)}")
    args.systems = [x for x in args.systems.split(",") if x]
    for x in args.systems:
        if x not in SYSTEMS:
            p.error(f"--systems: {x} is not allowed: must be one of {', '.join(SYSTEMS)}")
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    for d in args.dtypes:
        if d not in ref.STORAGE_BITS:
            p.error(f"--dtypes: {d} is not allowed: must be bf16 or fp16")
    default = DRY_RUN_TOKENS if args.dry_run else DEFAULT_TOKENS
    args.tokens = [int(t) for t in args.tokens.split(",")] if args.tokens else default
    if any(t < 1 for t in args.tokens):
        p.error("--tokens: each must be >= 1")
    if args.dry_run and max(args.tokens) > DRY_RUN_MAX_TOKENS:
        p.error(f"--tokens: {max(args.tokens)} is not allowed in a dry run: must be <= {DRY_RUN_MAX_TOKENS} "
                "(the host backend checks kernels, it is not fast)")
    return args


# ------------------------------------------------------------------ dry run (host backend)

def aligned_copy(arr, alignment=64):
    """A copy of `arr` whose data starts on an `alignment`-byte boundary (16-byte vector access)."""
    raw = np.empty(arr.nbytes + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    out = raw[start:start + arr.nbytes].view(arr.dtype).reshape(arr.shape)
    out[...] = arr
    return out


def launch_host(kernel, problem):
    """Runs ropejit on the host backend over numpy copies of the problem; returns the outputs."""
    arrays = {name: aligned_copy(a) for name, a in problem.inputs.items()}
    for name, shape in problem.output_shapes().items():  # poisoned: NaN (FP8 q_out: its NaN code 0x7f)
        dtype = problem.output_dtype(name)
        poison = np.full(1, 0x7F if dtype == np.uint8 else 0xFFFF, dtype=np.uint16).astype(
            np.uint8 if dtype == np.uint8 else np.uint16).view(dtype)[0]
        arrays[name] = aligned_copy(np.full(shape, poison, dtype=dtype))
    if problem.varlen:
        arrays["cu_seqlens"] = aligned_copy(problem.cu_seqlens)
        arrays["start_pos"] = aligned_copy(problem.start_pos)
    else:
        arrays["positions"] = aligned_copy(problem.positions)
    pointers = {name: a.ctypes.data for name, a in arrays.items()}
    args = kernel.make_args(problem.tokens, pointers, problem.batch, problem.max_seq_len, problem.seq_len)
    for name, value in problem.launch_scalars().items():  # paged_kv: cache_num_pages, k_scale, v_scale
        setattr(args, name, value)
    kernel.launch(args)
    return {n: a for n, a in arrays.items() if n in ref.OUTPUT_NAMES}


def check_carried_peers(args):
    """Dry run: the carried peers' files and API, as far as this machine can tell without torch,
    triton or a GPU. Returns (notes per system, problems)."""
    import importlib.util
    import peers_flashinfer
    import peers_liger
    notes, problems = {}, []
    spec = importlib.util.find_spec("liger_kernel")  # finds the package without running it
    if spec is None:
        notes["liger"] = "; liger_kernel not on PYTHONPATH"
    else:
        root = os.path.dirname(os.path.dirname(spec.origin))
        bad = peers_liger.api_problems(root)
        problems += [f"liger: {b}" for b in bad]
        notes["liger"] = f"; liger_kernel at {root}: " + ("API FAILED" if bad else "API present")
    if args.flashinfer_tree:
        missing = [m for m in peers_flashinfer.TREE_REQUIRED if not os.path.exists(os.path.join(args.flashinfer_tree, m))]
        problems += [f"flashinfer tree {args.flashinfer_tree} lacks {m}" for m in missing]
        for name in ("fi_cos_sin_cache", "fi_pos_ids", "fi_llama31", "fi_fused"):
            notes[name] = "; FlashInfer tree " + ("FAILED" if missing else "complete")
    for p in problems:
        print(f"FAILED carried peer: {p}")
    return notes, problems


def dry_run(library, args, rng):
    try:
        runtime = Runtime(library, "host")
    except RopejitError as e:
        if "unsupported" not in str(e):
            raise
        print(f"SKIPPED: the dry run needs the host backend: {e}")
        sys.exit(EXIT_SKIPPED)
    peer_notes, args.peer_problems = check_carried_peers(args)
    rows = []
    for shape in args.shapes:
        for dtype in args.dtypes:
            spec = ref.load_spec(shape, dtype)
            kernel = runtime.kernel(spec)
            for tokens in args.tokens:
                problem = ref.Problem(spec, tokens, rng)
                row = Row(shape, dtype, tokens, kernel.bytes_moved(tokens, problem.batch, problem.max_seq_len))
                outputs = launch_host(kernel, problem)
                ok, note = ref.check_outputs(problem, outputs, ref.check_rows(tokens, rng))
                row.check = ("ok: " if ok else "FAILED: ") + note
                row.results["ropejit"] = Result(
                    note=row.check, skipped="host backend, checked, not timed")
                for name in SYSTEMS[1:]:
                    row.results[name] = Result(skipped="no GPU (dry run)" + peer_notes.get(name, ""))
                rows.append(row)
                print(f"  {shape} {dtype} T={tokens}: {row.nbytes} bytes, {row.check}", flush=True)
    return rows


# ------------------------------------------------------------------ output

def cell(result, nbytes):
    if result is None:
        return "n/a"
    if result.skipped:
        return "SKIPPED: " + result.skipped
    if result.us is None:
        return result.note or "n/a"
    flag = " (accuracy FAILED)" if result.note.startswith("accuracy FAILED") else ""
    return f"{result.us:.2f} µs · {result.gbps(nbytes):.0f} GB/s{flag}"


def table(rows):
    head = ["shape", "dtype", "T", "bytes/launch"] + SYSTEMS + ["ropejit ÷ best peer (time)", "% of copy BW", "check"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        mine, copy = r.results.get("ropejit"), r.results.get("copy")
        best = r.best_peer()
        ratio = f"{mine.us / best[0]:.2f} ({best[1]})" if best and mine and mine.us else "—"
        of_copy = f"{100 * copy.us / mine.us:.0f} %" if copy and copy.us and mine and mine.us else "—"
        tokens = f"{r.tokens}" + (" (graph)" if r.graph else "")
        cells = [r.shape, r.dtype, tokens, f"{r.nbytes:,}"] + [cell(r.results.get(s), r.nbytes) for s in SYSTEMS]
        if r.empty_us and mine and mine.us:
            cells[4] += f" ({mine.us / r.empty_us:.2f}× empty)"
        lines.append("| " + " | ".join(cells + [ratio, of_copy, r.check]) + " |")
    return "\n".join(lines)


def write_markdown(path, device, command, rows, extra):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = [f"\n## RoPE vs peers (issue 6) — {device}, {stamp}\n", f"Command: `{command}`\n"]
    text += [line + "\n" for line in extra]
    text.append("\n" + table(rows) + "\n")
    with open(path, "a") as f:
        f.writelines(text)
    print(f"appended a section to {path}")


def plot(path, device, rows):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"SKIPPED: plot {path}: matplotlib is not installed")
        return
    shapes = list(dict.fromkeys(r.shape for r in rows))
    cols = min(3, len(shapes))
    nrows = -(-len(shapes) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False)
    for ax, shape in zip(axes.flat, shapes):
        for i, system in enumerate(SYSTEMS):
            for dtype, style in (("bf16", "-"), ("fp16", "--")):
                pts = [(r.tokens, r.results[system].gbps(r.nbytes)) for r in rows
                       if r.shape == shape and r.dtype == dtype and system in r.results and r.results[system].us]
                if pts:
                    ax.plot(*zip(*pts), style, marker="o", color=f"C{i}", label=f"{system} {dtype}")
        ax.set_xscale("log", base=2)
        ax.set_title(shape)
        ax.set_xlabel("tokens")
        ax.set_ylabel("GB/s")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(shapes):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle(f"RoPE GB/s vs tokens — {device} (solid bf16, dashed fp16)")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = "python3 bench/peers.py " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    rng = np.random.default_rng(args.seed or None)
    try:
        library = Library(args.lib)
    except (OSError, RopejitError) as e:
        print(f"peers: cannot load {args.lib}: {e}", file=sys.stderr)
        return 2
    print(f"peers: ropejit {library.version()} from {args.lib}")
    started = time.time()
    extra = []
    if args.dry_run:
        device = args.device_name or "host"
        print("peers: DRY RUN on the host backend: outputs checked, no GPU timings")
        rows = dry_run(library, args, rng)
        extra.append("Dry run on the host backend: not a GPU number; timings SKIPPED, outputs checked.")
    else:
        try:
            import peers_torch  # torch, triton, flashinfer: only on the GPU machine
        except ImportError as e:
            print(f"peers: the GPU run needs torch ({e}); on a machine without a GPU use --dry-run", file=sys.stderr)
            return 2
        device, rows, extra = peers_torch.run(library, args, rng, Row, Result)
        device = args.device_name or device
    print()
    print(table(rows))
    print(f"\npeers: {len(rows)} configurations in {time.time() - started:.1f} s")
    if args.out_md:
        write_markdown(args.out_md, device, command, rows, extra)
    if args.out_png:
        plot(args.out_png, device, rows)
    failed = [r for r in rows if r.check.startswith("FAILED")]
    for r in failed:
        print(f"FAILED check: {r.shape} {r.dtype} T={r.tokens}: {r.check}")
    for r in rows:  # a peer that computed something else is reported, not hidden (exit status: ropejit's)
        for name, res in r.results.items():
            if res.note.startswith("accuracy FAILED"):
                print(f"peer flagged: {name} {r.shape} {r.dtype} T={r.tokens}: {res.note}")
    return 1 if failed or getattr(args, "peer_problems", None) else 0


if __name__ == "__main__":
    sys.exit(main())
