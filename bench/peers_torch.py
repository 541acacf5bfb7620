"""The GPU side of bench/peers.py: torch tensors, the peers, and timing (CUDA machine only).

Systems, each on identical inputs (copies of one random problem, positions up to 10^6):
  ropejit          C API through ctypes on torch data_ptr()s, on torch's current stream
  torch_eager      HF-style: cos/sin gathered from a float32 cache [10^6, rotary_dim], cast to the
                   model dtype, x * cos + rotate_half(x) * sin (packed forms: + bias; padded: scatter)
  torch_compile    the same function under torch.compile(dynamic=True) (Inductor)
  liger            the same sequence with Liger-Kernel's Triton RoPE and RMSNorm (bench/peers_liger.py)
  fi_cos_sin_cache FlashInfer apply_rope_with_cos_sin_cache_inplace (any static scaling: the cache
                   holds cos/sin of HF's float32 angles times the attention factor)
  fi_pos_ids       FlashInfer apply_rope_pos_ids_inplace (rope_type default only)
  fi_llama31       FlashInfer apply_llama31_rope_pos_ids_inplace (rope_type llama3 only)
  fi_fused         FlashInfer rope_quantize_fp8_append_paged_kv_cache (GQA, and its MLA variant):
                   the paged shapes whose work is that op's (q to FP8, FP8 caches, no QK-norm)
  copy             a device-to-device copy of bytes_moved / 2 bytes (read + write = bytes_moved)
FlashInfer's ops are its CUDA sources built here (bench/peers_flashinfer.py says why not its
package). Packed/padded forms: the peers do the bias add and the padded scatter in torch around
their rotation (what an engine without a fused kernel does); positions of varlen tokens are given
to peers precomputed (not timed). Fused forms without a fused peer op, the sequence an engine runs
today: paged_kv (slot_mapping, nhd): norm, q rotated in place (or into q_out, FP8: codes of
q * (1 / q_scale)), k out of place, then k and v scattered into the caches' slots, FP8 as vLLM's
reshape_and_cache does it: float32 x * (1 / scale), clamped to +-448, cast to float8_e4m3fn;
MLA: q's trailing rope part rotated, then the row [kv_c | rotated k_pe] written as vLLM's
concat_and_cache_mla. Peers' FP8 codes are checked with the pair slack (they may round through
bf16 first); ropejit's exactly. A peer that cannot express a shape reads n/a.
Timing: T <= 64 as CUDA-graph replays of 20 launches (and an empty-kernel baseline the same
way); larger T with triton.testing.do_bench (median; it also flushes L2), else CUDA events.
Inputs rotate over sets whose total exceeds max(3 x L2, 256 MiB).
"""
import importlib.metadata
import math
import time

import numpy as np
import torch
import torch._dynamo  # config limits below; torch.compile imports it anyway

import peers_flashinfer
import peers_reference as ref
from peers_reference_paged import E4M3_MAX
from ropejit_ctypes import Runtime

FI_SYSTEMS = ("fi_cos_sin_cache", "fi_pos_ids", "fi_llama31", "fi_fused")
FI_VERSION = peers_flashinfer.FLASHINFER_VERSION

GRAPH_MAX_TOKENS = 64
GRAPH_LAUNCHES = 20
GRAPH_MAX_GRAPHS = 64
MIN_ROTATION_BYTES = 256 << 20
TORCH_DTYPE = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _to_torch(array, dtype):
    """numpy storage array (bf16 as uint16) -> CUDA tensor of the storage dtype."""
    if array.dtype == np.uint16:
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16).cuda()
    if array.dtype == np.float16:
        return torch.from_numpy(array.copy()).cuda()
    return torch.from_numpy(array.copy()).cuda()


def _to_numpy(tensor):
    """CUDA tensor -> numpy storage array (bf16 as uint16)."""
    t = tensor.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


class Sets:
    """`count` copies of one problem's buffers on the GPU: name -> tensor [count, ...]."""

    def __init__(self, problem, rotation_bytes):
        dt = TORCH_DTYPE[problem.dtype]
        base = {n: _to_torch(a, dt) for n, a in problem.inputs.items()}
        base["positions"] = torch.from_numpy(problem.positions).cuda()
        base["positions64"] = base["positions"].long()
        if problem.varlen:
            base["cu_seqlens"] = torch.from_numpy(problem.cu_seqlens).cuda()
            base["start_pos"] = torch.from_numpy(problem.start_pos).cuda()
        for name, shape in problem.output_shapes().items():  # poisoned: NaN (FP8 q_out: its NaN code 0x7f)
            if problem.output_dtype(name) == np.uint8:
                base[name] = torch.full(shape, 0x7F, dtype=torch.uint8, device="cuda")
            else:
                base[name] = torch.full(shape, float("nan"), dtype=dt, device="cuda")
        self.base = {n: t.clone() for n, t in base.items()}
        set_bytes = sum(t.numel() * t.element_size() for t in base.values())
        self.count = max(2, math.ceil(rotation_bytes / max(set_bytes, 1)))
        self.tensors = {n: t.unsqueeze(0).repeat((self.count,) + (1,) * t.dim()) for n, t in base.items()}
        if problem.varlen:
            self.seq_of = torch.from_numpy(problem.seq_of).cuda()
            self.seq_index = torch.from_numpy(problem.seq_index).cuda()
        self.next_index = 0

    def get(self, i):
        return {n: t[i] for n, t in self.tensors.items()}

    def reset(self, i):
        for n, t in self.tensors.items():
            t[i].copy_(self.base[n])

    def outputs_numpy(self, i):
        return {n: _to_numpy(t[i]) for n, t in self.tensors.items() if n in ref.OUTPUT_NAMES}

    def rotate(self):
        i = self.next_index
        self.next_index = (i + 1) % self.count
        return i


# ------------------------------------------------------------------ systems

def make_ropejit(kernel, problem, sets):
    """fn(i): ropejit on set i, on torch's current stream (prepared ctypes Args per set)."""
    names = ("q", "k", "v", "qkv", "bias", "q_out", "k_out", "v_out", "positions", "cu_seqlens", "start_pos",
             "q_norm_weight", "k_norm_weight", "k_cache", "v_cache", "slot_mapping", "kv_c", "k_pe")
    args = []
    for i in range(sets.count):
        b = sets.get(i)
        pointers = {n: b[n].data_ptr() for n in names if n in b}
        if problem.varlen:
            pointers.pop("positions", None)
        a = kernel.make_args(problem.tokens, pointers, problem.batch, problem.max_seq_len, problem.seq_len)
        for name, value in problem.launch_scalars().items():  # paged_kv: cache_num_pages, k_scale, v_scale
            setattr(a, name, value)
        args.append(a)

    def fn(i):
        kernel.launch(args[i], torch.cuda.current_stream().cuda_stream)
    return fn


def cos_sin_tables(spec):
    """float32 [10^6, rotary_dim/2] cos and sin of HF's float32 angles, times the attention factor."""
    inv, s = ref.inv_freq_and_factor(spec)
    pos = torch.arange(ref.MAX_POSITION, device="cuda", dtype=torch.float32)
    freqs = pos[:, None] * torch.from_numpy(inv.astype(np.float32)).cuda()[None, :]
    return freqs.cos() * s, freqs.sin() * s


def _form(spec):
    """(packed, padded, Hq, Hkv, D) of a spec."""
    io = spec.get("io", {})
    return (io.get("input") == "packed_qkv", io.get("output") == "padded_bhsd", spec["num_q_heads"],
            spec["num_kv_heads"], spec["head_dim"])


def _split_qkv(b, packed, padded, hq, hkv, d):
    """q, k, v views of one buffer set; packed forms get the bias added first (in place when the
    output is the packed buffer itself, into a copy for the padded scatter)."""
    if not packed:
        return b["q"], b["k"], b.get("v")
    if padded:
        x = (b["qkv"] + b["bias"]).view(-1, hq + 2 * hkv, d)
    else:
        b["qkv"].add_(b["bias"])
        x = b["qkv"].view(-1, hq + 2 * hkv, d)
    return x[:, :hq], x[:, hq:hq + hkv], x[:, hq + hkv:]


def make_torch_rope(spec, cos_half, sin_half, kernels=None):
    """The HF-style function of a spec: f(b, seq_of, seq_index) on one set's tensors, any T.
    kernels (bench/peers_liger.py's Kernels): another library's norm(x, weight) and
    rotate(q, k, cos, sin) in place of torch's, the rest of the sequence unchanged."""
    dt = TORCH_DTYPE[spec["dtype"]]
    packed, padded, hq, hkv, d = _form(spec)
    rd = spec["rotary_dim"]
    neox = spec["layout"] != "interleaved"
    if neox:
        cos_full, sin_full = torch.cat([cos_half, cos_half], -1), torch.cat([sin_half, sin_half], -1)
    else:
        cos_full, sin_full = cos_half.repeat_interleave(2, -1), sin_half.repeat_interleave(2, -1)

    def rotate_half(x):
        if neox:
            x1, x2 = x[..., : rd // 2], x[..., rd // 2:]
            return torch.cat((-x2, x1), dim=-1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    streams = torch.from_numpy(ref.mrope_streams(spec)).cuda()  # pair -> position stream
    half_index = torch.arange(rd // 2, device="cuda")
    mrope = spec.get("io", {}).get("positions") == "mrope"
    norm = spec.get("qk_norm")
    paged = spec.get("io", {}).get("output") == "paged_kv"
    fp8 = spec.get("io", {}).get("cache_dtype", "auto") != "auto"
    latent = ref.op_row(spec).latent_row  # MLA: q's trailing rope part, the latent cache row
    q_fp8 = spec.get("io", {}).get("q_output_dtype", "auto") != "auto"
    # float32 reciprocals of the FP8 scales (the value ropejit multiplies by)
    inv_scales = [float(np.float32(1) / np.float32(x)) if x else 0.0 for x in ref.cache_scales(spec)]
    inv_q_scale = float(np.float32(1) / np.float32(ref.Q_SCALE))

    def tables(pos):
        """cos, sin [T, 1, rd] of the token positions, or per pair of its stream (mrope [3, T])."""
        if not mrope:
            return cos_full[pos].unsqueeze(1).to(dt), sin_full[pos].unsqueeze(1).to(dt)
        per_pair = pos[streams, :].T  # [T, rd/2]
        c, s_ = cos_half[per_pair, half_index], sin_half[per_pair, half_index]
        if neox:
            c, s_ = torch.cat([c, c], -1), torch.cat([s_, s_], -1)
        else:
            c, s_ = c.repeat_interleave(2, -1), s_.repeat_interleave(2, -1)
        return c.unsqueeze(1).to(dt), s_.unsqueeze(1).to(dt)

    def rms_norm(x, weight):
        """Qwen3RMSNorm / Gemma3RMSNorm of each head of x [T, heads, D], or Olmo2RMSNorm of a token's
        heads together (scope all, its weight [heads * D]), as HF computes it (float32, then the dtype)."""
        all_heads = norm.get("scope", "head") == "all"
        y = x.float()
        y = y * torch.rsqrt(y.pow(2).mean((-2, -1) if all_heads else -1, keepdim=True) + norm.get("eps", 1e-6))
        if weight is not None:
            y = y * (norm.get("weight_offset", 0.0) + weight.float().view(x.shape[-2:] if all_heads else x.shape[-1:]))
        return y.to(dt)

    def rotated(x, cos, sin):
        """A new tensor: x with its first rotary_dim elements rotated (the tail as it is)."""
        x_rot = x[..., :rd] * cos + rotate_half(x[..., :rd]) * sin
        return torch.cat([x_rot, x[..., rd:]], -1) if rd < d else x_rot

    def quantize(x, inv_scale):
        """FP8 e4m3 codes of x * inv_scale in float32, saturating (vLLM's scaled_fp8_quant)."""
        return (x.float() * inv_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)

    def append(cache, x, inv_scale, slots, width=None):
        """vLLM reshape_and_cache (concat_and_cache_mla: rows of `width`): x into cache slots
        (page * page_size + offset)."""
        rows = cache.view(-1, width) if width else cache.view(-1, hkv, d)
        rows[slots] = quantize(x, inv_scale) if fp8 else x.to(dt)

    def store_q(b, q_new):
        """q back in place, or into q_out (FP8 codes of q / q_scale for an FP8 q_out)."""
        b.get("q_out", b["q"])[...] = quantize(q_new, inv_q_scale) if q_fp8 else q_new

    def mla_rope(b, cos, sin):
        """MLA: each head's trailing q_pe rotated (q_nope kept), then the row [kv_c | rotated k_pe]."""
        q, k_pe = b["q"], b["k_pe"].unsqueeze(1)
        q_pe = q[..., d - rd:]
        q_rot = q_pe * cos + rotate_half(q_pe) * sin
        if "q_out" in b:
            store_q(b, torch.cat([q[..., :d - rd], q_rot], -1))
        else:
            q_pe[...] = q_rot
        k_rot = (k_pe * cos + rotate_half(k_pe) * sin).squeeze(1)
        append(b["k_cache"], torch.cat([b["kv_c"], k_rot], -1), inv_scales[0], b["slot_mapping"],
               b["kv_c"].shape[-1] + rd)

    def paged_rope(b, cos, sin):
        """q rotated in place (or into q_out); k (normalized, rotated) and v appended to the caches;
        the inputs k and v only read."""
        q, k = b["q"], b["k"]
        if norm is not None:
            q, k = norm_fn(q, b.get("q_norm_weight")), norm_fn(k, b.get("k_norm_weight"))
        if kernels is not None:  # the library rotates in place: never the inputs k (only read)
            q_new, k_new = kernels.rotate(q if norm is not None else q.clone(), k if norm is not None else k.clone(),
                                          cos, sin)
        else:
            q_new, k_new = rotated(q, cos, sin), rotated(k, cos, sin)
        store_q(b, q_new)
        append(b["k_cache"], k_new, inv_scales[0], b["slot_mapping"])
        append(b["v_cache"], b["v"], inv_scales[1], b["slot_mapping"])

    def rope(b, seq_of, seq_index):
        cos, sin = tables(b["positions64"])
        if latent:
            return mla_rope(b, cos, sin)
        if paged:
            return paged_rope(b, cos, sin)
        q, k, v = _split_qkv(b, packed, padded, hq, hkv, d)
        if norm is not None:  # HF: q_norm / k_norm on the projections, then RoPE
            q[...] = norm_fn(q, b.get("q_norm_weight"))
            k[...] = norm_fn(k, b.get("k_norm_weight"))
        if kernels is not None:
            return library_rope(q, k, v, b, cos, sin, seq_of, seq_index)
        q_rot = q[..., :rd] * cos + rotate_half(q[..., :rd]) * sin
        k_rot = k[..., :rd] * cos + rotate_half(k[..., :rd]) * sin
        if padded:
            q_new = torch.cat([q_rot, q[..., rd:]], -1) if rd < d else q_rot
            k_new = torch.cat([k_rot, k[..., rd:]], -1) if rd < d else k_rot
            for name, src in (("q_out", q_new), ("k_out", k_new), ("v_out", v)):
                if name in b:
                    out = b[name]
                    out.zero_()
                    out[seq_of, :, seq_index] = src
        else:
            q[..., :rd] = q_rot
            k[..., :rd] = k_rot

    def library_rope(q, k, v, b, cos, sin, seq_of, seq_index):
        """The library's rotation (in place on contiguous q/k, else on its copies, written back)."""
        q_new, k_new = kernels.rotate(q, k, cos, sin)
        if padded:
            for name, src in (("q_out", q_new), ("k_out", k_new), ("v_out", v)):
                if name in b:
                    b[name].zero_()
                    b[name][seq_of, :, seq_index] = src
            return
        for dst, src in ((q, q_new), (k, k_new)):
            if src.data_ptr() != dst.data_ptr():
                dst[...] = src
    norm_fn = kernels.norm if kernels is not None else rms_norm
    return rope


# ------------------------------------------------------------------ timing

def _events_median(fn, repeats):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return float(np.median(times))


def time_plain(call, sets, do_bench):
    """Median µs of one launch, inputs rotating over the sets."""
    def fn():
        call(sets.rotate())
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    if do_bench is not None:
        return do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
    return _events_median(fn, 50)


def time_graph(call, sets):
    """Median µs per launch of CUDA-graph replays, each graph capturing 20 launches on 20 sets."""
    graphs = []
    count = min(GRAPH_MAX_GRAPHS, max(1, sets.count // GRAPH_LAUNCHES))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            call(i % sets.count)  # warm-up outside capture (compile, lazy init)
    torch.cuda.current_stream().wait_stream(side)
    for g in range(count):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for j in range(GRAPH_LAUNCHES):
                call((g * GRAPH_LAUNCHES + j) % sets.count)
        graphs.append(graph)

    def replay_all():
        for graph in graphs:
            graph.replay()
    replay_all()
    torch.cuda.synchronize()
    return _events_median(replay_all, 10) / (count * GRAPH_LAUNCHES)


# ------------------------------------------------------------------ the run

def _import_do_bench():
    try:
        from triton.testing import do_bench
        return do_bench
    except Exception as e:  # triton missing or broken: CUDA events instead
        print(f"peers: triton.testing.do_bench unavailable ({e}); timing with CUDA events")
        return None


def _load_flashinfer(args):
    """(Ops, None) of FlashInfer's rope module built for this GPU, or (None, why not)."""
    if not args.flashinfer_tree:
        return None, "no --flashinfer-tree (gpu-bundle/peers/flashinfer-rope.tar.xz, unpacked)"
    try:
        major, minor = torch.cuda.get_device_capability(0)
        started = time.time()
        ops, how = peers_flashinfer.load(args.flashinfer_tree, args.flashinfer_build, f"{major}{minor}",
                                         args.flashinfer_prebuilt)
        print(f"peers: FlashInfer {peers_flashinfer.FLASHINFER_VERSION} rope module for sm_{major}{minor} ready "
              f"({how}) in {time.time() - started:.0f} s")
        return ops, None
    except Exception as e:  # visible in every FlashInfer cell, never hidden
        print(f"peers: FlashInfer's rope module failed: {e}")
        return None, f"FlashInfer build/load failed: {_short(e)}"


def _load_liger(spec, liger_problem):
    """(Kernels, None) for a spec, or (None, why not)."""
    if liger_problem:
        return None, liger_problem
    import peers_liger
    why = peers_liger.unsupported(spec)
    if why:
        return None, None  # n/a: the library cannot express the spec
    try:
        return peers_liger.Kernels(spec), None
    except Exception as e:
        return None, f"liger_kernel not importable ({_short(e)})"


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _short(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"


def run(library, args, rng, Row, Result):
    if not torch.cuda.is_available():
        raise SystemExit("peers: torch sees no CUDA device: use --dry-run on machines without a GPU")
    props = torch.cuda.get_device_properties(0)
    device = props.name
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    rotation = max(3 * l2, MIN_ROTATION_BYTES)
    runtime = Runtime(library, "cuda")
    do_bench = _import_do_bench()
    fi_ops, fi_problem = _load_flashinfer(args) if set(args.systems) & set(FI_SYSTEMS) else (None, "not selected")
    liger_problem = None if "liger" in args.systems else "not selected (--systems)"
    for option in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, option):
            setattr(torch._dynamo.config, option, 4096)
    extra = [
        f"Device: {device}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MiB; torch {torch.__version__}; "
        f"FlashInfer {'rope module of ' + FI_VERSION if fi_ops else 'SKIPPED: ' + str(fi_problem)}; "
        f"liger-kernel {_version('liger_kernel')}; "
        f"timing {'triton do_bench median' if do_bench else 'CUDA events median'}; T <= {GRAPH_MAX_TOKENS}: "
        f"CUDA-graph replays of {GRAPH_LAUNCHES} launches. GB/s = ropejit's bytes_moved / time for every system.",
    ]
    rows = []
    for shape in args.shapes:
        for dtype in args.dtypes:
            spec = ref.load_spec(shape, dtype)
            kernel = runtime.kernel(spec)
            torch._dynamo.reset()  # drop the previous spec's compiled graphs (and their tables)
            cos_half, sin_half = cos_sin_tables(spec)
            eager = make_torch_rope(spec, cos_half, sin_half)
            try:
                compiled, compile_problem = torch.compile(eager, dynamic=True), None
            except Exception as e:
                compiled, compile_problem = None, _short(e)
            fi_fns = {kind: peers_flashinfer.make_system(kind, fi_ops, spec, cos_half, sin_half)
                      if fi_ops and kind != "fi_fused" else None for kind in FI_SYSTEMS}
            liger_kernels, liger_why = _load_liger(spec, liger_problem)
            liger = make_torch_rope(spec, cos_half, sin_half, kernels=liger_kernels) if liger_kernels else None
            for tokens in args.tokens:
                problem = ref.Problem(spec, tokens, rng)
                row = Row(shape, dtype, tokens, kernel.bytes_moved(tokens, problem.batch, problem.max_seq_len))
                row.graph = tokens <= GRAPH_MAX_TOKENS
                sets = Sets(problem, rotation)
                check_rows = ref.check_rows(tokens, rng)
                seq_of = getattr(sets, "seq_of", None)
                seq_index = getattr(sets, "seq_index", None)
                timer = (lambda c: time_graph(c, sets)) if row.graph else (lambda c: time_plain(c, sets, do_bench))

                def measure(name, call):
                    """Verifies on set 0 (fresh inputs) then times; records a Result."""
                    if name not in args.systems and name != "ropejit":
                        row.results[name] = Result(skipped="not selected (--systems)")
                        return
                    try:
                        sets.reset(0)
                        call(0)
                        torch.cuda.synchronize()
                        # FP8 caches: ropejit exact to fp32 noise; peers round k through bf16 first
                        ok, note = ref.check_outputs(problem, sets.outputs_numpy(0), check_rows,
                                                     strict=name == "ropejit")
                        if name == "ropejit":
                            row.check = ("ok: " if ok else "FAILED: ") + note
                            if not ok:
                                row.results[name] = Result(skipped="conformance check FAILED: not timed")
                                return
                        row.results[name] = Result(us=timer(call), note=("" if ok else "accuracy FAILED: ") + note)
                    except Exception as e:  # a peer that cannot run here: visible, never a number
                        row.results[name] = Result(skipped=_short(e))
                        if name == "ropejit":
                            row.check = "FAILED: " + _short(e)

                measure("ropejit", make_ropejit(kernel, problem, sets))
                measure("torch_eager", lambda i: eager(sets.get(i), seq_of, seq_index))
                if compiled is None:
                    row.results["torch_compile"] = Result(skipped=compile_problem)
                else:
                    measure("torch_compile", lambda i: compiled(sets.get(i), seq_of, seq_index))
                if liger is not None:
                    measure("liger", lambda i: liger(sets.get(i), seq_of, seq_index))
                elif liger_why:
                    row.results["liger"] = Result(skipped=liger_why)
                if problem.paged and fi_ops is not None:  # the fused op, its page tables made once
                    fi_fns["fi_fused"] = peers_flashinfer.make_fused(fi_ops, spec, cos_half, sin_half, problem,
                                                                     sets.base["slot_mapping"])
                for kind, fn in fi_fns.items():
                    if fi_ops is None:
                        row.results[kind] = Result(skipped=fi_problem)
                    elif fn is not None:  # None: this op cannot express the spec (n/a)
                        measure(kind, lambda i, f=fn: f(sets.get(i), seq_of, seq_index))
                copy_bytes = row.nbytes // 2
                src = torch.empty(copy_bytes * min(sets.count, max(2, rotation // max(copy_bytes, 1))),
                                  dtype=torch.uint8, device="cuda")
                dst = torch.empty_like(src)
                slots = src.numel() // copy_bytes

                def copy(i):
                    j = (i % slots) * copy_bytes
                    dst[j:j + copy_bytes].copy_(src[j:j + copy_bytes])
                try:
                    if "copy" in args.systems:
                        row.results["copy"] = Result(us=timer(copy))
                except Exception as e:
                    row.results["copy"] = Result(skipped=_short(e))
                if row.graph:
                    tiny = torch.zeros(1, device="cuda")
                    try:
                        row.empty_us = timer(lambda i: tiny.add_(1))
                    except Exception as e:
                        print(f"  empty-kernel baseline failed: {_short(e)}")
                rows.append(row)
                mine = row.results.get("ropejit")
                print(f"  {shape} {dtype} T={tokens}: ropejit "
                      f"{f'{mine.us:.2f} µs' if mine and mine.us else mine.skipped if mine else '-'}; {row.check}",
                      flush=True)
                sets = src = dst = None  # free before the next size
                torch.cuda.empty_cache()
    return device, rows, extra
