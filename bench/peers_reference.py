"""The issue-6 shapes, random problems and an independent float64 numpy reference for
bench/peers.py.

The reference is written from docs/rope-math.md (HF v5 semantics): inv_freq in HF's
float32 steps (each step one float64 operation rounded to float32, pow correctly rounded), the
angle as HF's float32 product float32(p) * inv_freq (or the exact product for angle "exact"),
cos/sin and the rotation in float64. It shares no code with ropejit.

Tolerance (a simplified form of check/include/ropejit/check/reference.h): an fp16/bf16 element passes when
it is finite and within 2 storage ulps of the expected value, or within 1e-2 of the magnitude
of its rotated pair (s * |(x, y)|; |x| for pass-through and v elements).

paged_kv (docs/spec.md, "RoPE + paged KV-cache append"; slot_mapping, nhd, cache dtype auto or
fp8_e4m3) and op mla_append (docs/ops.md, "MLA latent-cache append"; its latent cache row): q is
checked as above, or as FP8 codes of q / q_scale when q_output_dtype is fp8_e4m3; the inputs a
launch only reads must keep their bytes; each checked token's cache slot holds its k and v (MLA: kv_c and the rotated k_pe), the
storage dtype under the rule above or FP8 codes (bench/peers_reference_paged.py); every slot no
token maps must keep its bytes.
"""
import collections
import json
import math
import os

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# label -> spec file in specs/, or (file, io fields replaced): the shapes (Qwen2.5-7B
# twice: fused in place and the fused padded_bhsd form of the >= 85 % target), and the fused
# forms of issue 43: QK-norm, the paged FP8 append (with the norm; and without it, q to FP8 as
# FlashInfer's rope_quantize_fp8_append_paged_kv_cache does), MLA's latent-cache append (q in
# place; and q to FP8, as that op's MLA variant).
FP8_Q = {"q_output": "separate", "q_output_dtype": "fp8_e4m3"}
SHAPES = {
    "llama-3.1-8b": "llama-3.1-8b",
    "qwen2.5-7b-fused": "qwen2.5-7b",
    "qwen2.5-7b-padded": "qwen2.5-7b-padded",
    "mistral-7b": "mistral-7b-v0.1",
    "deepseek-v3-rope": "deepseek-v3",
    "gpt-neox-20b": "gpt-neox-20b",
    "gemma-2": "gemma-2-2b",
    "qwen2.5-vl-7b-mrope": "qwen2.5-vl-7b",
    "qwen3-8b-qknorm": "qwen3-8b",
    "gemma-3-12b-qknorm": "gemma-3-12b",
    "olmo-2-7b-allnorm": "olmo-2-7b",
    "qwen3-8b-paged-fp8": "qwen3-8b-paged-fp8",
    "llama-3.1-8b-paged-fp8-q": ("llama-3.1-8b", dict(FP8_Q, output="paged_kv", cache_dtype="fp8_e4m3", copy_v=True,
                                                      cache_index="slot_mapping", cache_layout="nhd", page_size=16)),
    "deepseek-v3-mla-fp8": "deepseek-v3-mla-fp8",
    "deepseek-v3-mla-fp8-q": ("deepseek-v3-mla-fp8", FP8_Q),
}
# The ops this reference checks, one row each: what a launch of the op takes and writes, and which
# check of peers_reference_paged reads its paged outputs. The per-op branches of the reference and
# of the peers' op paths (peers_torch, peers_flashinfer) read its row (op_row), not the op's name.
#   read_only: the token arrays a paged launch only reads (they must keep their bytes)
#   caches: the paged caches it writes (io.output paged_kv)
#   latent_row: a cache slot holds one latent row [kv_c | rotated k_pe] for the token (MLA), not
#     its k and v heads; q's rope part is its trailing rotary_dim
#   check_cache: the function of peers_reference_paged checking the caches
OpRow = collections.namedtuple("OpRow", "read_only caches latent_row check_cache")
OPS = {
    "rope": OpRow(("k", "v"), ("k_cache", "v_cache"), False, "check_paged"),
    "mla_append": OpRow(("kv_c", "k_pe"), ("k_cache",), True, "check_mla"),
}


def op_row(spec):
    """The OPS row of a spec's op; an op the reference does not implement is refused by name."""
    op = spec.get("op", "rope")
    if op not in OPS:
        raise ValueError(f"peers reference: op {op} is not supported here (ops: {', '.join(OPS)})")
    return OPS[op]


MAX_POSITION = 10**6   # positions drawn from [0, 10^6)
ULPS = 2
PAIR_RELATIVE = 1e-2
STORAGE_BITS = {"bf16": 7, "fp16": 10}  # explicit mantissa bits
MIN_EXPONENT = {"bf16": -126, "fp16": -14}
FP32_RELATIVE = 2e-6   # fp32 math noise relative to max(|value|, pair), as the conformance suite
# k_scale, v_scale of FP8 caches and q_scale of FP8 q (float32 values at launch): small enough that
# the largest values of a few thousand tokens saturate at +-448; k and v alike, as FlashInfer's
# fused op takes one scale for both
CACHE_SCALES = (0.01, 0.01)
Q_SCALE = 0.01
# Buffers check_outputs reads after a launch: what a system writes, or must leave as it was
# (k and v of paged_kv, kv_c and k_pe of MLA, which are only read).
OUTPUT_NAMES = ("q", "k", "v", "qkv", "q_out", "k_out", "v_out", "k_cache", "v_cache", "kv_c", "k_pe")


def load_spec(label, dtype):
    """The spec dict of a shape with the dtype (and a derived shape's io fields) replaced."""
    name, io = SHAPES[label] if isinstance(SHAPES[label], tuple) else (SHAPES[label], {})
    with open(os.path.join(REPO, "specs", name + ".json")) as f:
        spec = json.load(f)
    spec["io"] = dict(spec.get("io", {}), **io)
    spec["dtype"] = dtype
    spec["name"] = f"{label if io else spec['name']}-{dtype}"
    return spec


def batch_for(tokens):
    """Varlen sequences: equal lengths of about 1024 tokens (as bench/bench_gpu.cpp)."""
    return max(1, tokens // 1024)


# ------------------------------------------------------------------ storage types

def encode(dtype, values):
    """float values -> storage array (bf16 as uint16 bits, round to nearest even)."""
    if dtype == "fp16":
        return np.asarray(values, dtype=np.float64).astype(np.float16)
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def decode(dtype, storage):
    """storage array -> float64."""
    if dtype == "fp16":
        return np.asarray(storage).view(np.float16).astype(np.float64)
    bits = np.asarray(storage).view(np.uint16).astype(np.uint32) << 16
    return bits.view(np.float32).astype(np.float64)


def storage_numpy_dtype(dtype):
    return np.float16 if dtype == "fp16" else np.uint16


def storage_ulp(dtype, x):
    """Spacing of the storage type at |x| (subnormal spacing near zero)."""
    _, e = np.frexp(np.abs(x))  # |x| = m 2^e, m in [0.5, 1)
    exponent = np.maximum(e - 1, MIN_EXPONENT[dtype])
    return np.ldexp(1.0, exponent - STORAGE_BITS[dtype])


# ------------------------------------------------------------------ frequencies

def _f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def _default_inv_freq(base, d):
    i = np.arange(d // 2, dtype=np.float64)
    exponent = _f32(_f32(2.0 * i) / _f32(d))
    return _f32(1.0 / _f32(np.power(_f32(base), exponent)))


def inv_freq_and_factor(spec):
    """(inv_freq [d/2] as float32 values in float64, attention factor) of a static rope type."""
    rope, d = spec["rope"], spec["rotary_dim"]
    kind, base = rope.get("rope_type", "default"), rope.get("rope_theta", 10000.0)
    if kind == "default":
        return _default_inv_freq(base, d), 1.0
    if kind == "linear":
        return _f32(_default_inv_freq(base, d) / _f32(rope["factor"])), 1.0
    if kind == "llama3":
        f, lf, hf = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        o = rope["original_max_position_embeddings"]
        inv = _default_inv_freq(base, d)
        # torch: a python number over a tensor is reciprocal() times the number (docs/rope-math.md 7.7).
        wavelen = _f32(_f32(1.0 / inv) * _f32(2 * math.pi))
        low_wavelen, high_wavelen = _f32(o / lf), _f32(o / hf)
        divided = _f32(inv / _f32(f))
        smooth = _f32(_f32(_f32(_f32(1.0 / wavelen) * _f32(o)) - _f32(lf)) / _f32(hf - lf))
        smoothed = _f32(_f32(_f32(_f32(1.0 - smooth) * inv) / _f32(f)) + _f32(smooth * inv))
        out = np.where(wavelen < high_wavelen, inv, np.where(wavelen > low_wavelen, divided, smoothed))
        return out, 1.0
    if kind == "yarn":
        f = rope.get("factor") or spec["max_position_embeddings"] / rope["original_max_position_embeddings"]
        o = float(rope.get("original_max_position_embeddings", spec["max_position_embeddings"]))

        def m(k):
            return 1.0 if f <= 1 else 0.1 * k * math.log(f) + 1.0
        if rope.get("attention_factor") is not None:
            s = rope["attention_factor"]
        elif rope.get("mscale") and rope.get("mscale_all_dim"):
            s = m(rope["mscale"]) / m(rope["mscale_all_dim"])
        else:
            s = m(1.0)
        beta_fast, beta_slow = rope.get("beta_fast") or 32.0, rope.get("beta_slow") or 1.0

        def corr(r):
            return d * math.log(o / (r * 2 * math.pi)) / (2 * math.log(base))
        low, high = corr(beta_fast), corr(beta_slow)
        if rope.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0.0), min(high, d - 1.0)
        if low == high:
            high += 0.001
        i = np.arange(d // 2, dtype=np.float64)
        pos_freq = _f32(np.power(_f32(base), _f32(_f32(2.0 * i) / _f32(d))))
        inv_extra = _f32(1.0 / pos_freq)
        inv_inter = _f32(1.0 / _f32(_f32(f) * pos_freq))
        ramp = np.clip(_f32(_f32(_f32(i) - _f32(low)) / _f32(high - low)), 0.0, 1.0)
        extra = _f32(1.0 - ramp)
        return _f32(_f32(inv_inter * _f32(1.0 - extra)) + _f32(inv_extra * extra)), s
    raise ValueError(f"peers reference: rope_type {kind} is not supported here (default, linear, llama3, yarn)")


def angles(spec, positions, inv_freq):
    """[n, d/2] angles: HF's float32 product, or exact."""
    if spec.get("angle", "fp32") == "exact":
        return positions.astype(np.float64)[:, None] * inv_freq[None, :]
    return (positions.astype(np.float32)[:, None] * inv_freq.astype(np.float32)[None, :]).astype(np.float64)


def mrope_streams(spec):
    """Position stream (0 temporal, 1 height, 2 width) of each frequency pair, built as HF
    builds it: Qwen2-VL takes chunk i of cat(freqs, freqs) split by mrope_section * 2 from
    stream i % 3; Qwen3-VL overwrites slice(1, 3h, 3) with height and slice(2, 3w, 3) with width."""
    io = spec.get("io", {})
    half = spec["rotary_dim"] // 2
    if io.get("positions") != "mrope":
        return np.zeros(half, dtype=np.int64)
    section = io["mrope_section"]
    if io.get("mrope_interleaved"):
        streams = np.zeros(half, dtype=np.int64)
        streams[1:3 * section[1]:3] = 1
        streams[2:3 * section[2]:3] = 2
        return streams
    columns = np.concatenate([np.full(n, i % 3) for i, n in enumerate(section * 2)])
    assert (columns[:half] == columns[half:]).all(), "rotate_half pairs columns j and j + d/2"
    return columns[:half].astype(np.int64)


def pair_angles(spec, positions, inv_freq):
    """[n, d/2] angles: positions [n] (one stream), or mrope positions [3, n] (each pair its stream's)."""
    if positions.ndim == 1:
        return angles(spec, positions, inv_freq)
    per_pair = positions[mrope_streams(spec), :].T  # [n, d/2]
    if spec.get("angle", "fp32") == "exact":
        return per_pair.astype(np.float64) * inv_freq[None, :]
    return (per_pair.astype(np.float32) * inv_freq.astype(np.float32)[None, :]).astype(np.float64)


def rms_normalize(spec, x, weight):
    """q_norm, k_norm of x [n, heads, head_dim] in float64: over each head (Qwen3 / Gemma 3), or
    over all of a token's heads (scope all: OLMo 2, with a weight of heads * head_dim)."""
    norm = spec["qk_norm"]
    axes = (-2, -1) if norm.get("scope", "head") == "all" else -1
    y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + norm.get("eps", 1e-6))
    if norm.get("weight", "per_head") == "per_head":
        y = y * (norm.get("weight_offset", 0.0) + weight.reshape(x.shape[-2:] if axes != -1 else x.shape[-1:]))
    return y


# ------------------------------------------------------------------ problems

class Problem:
    """Random inputs of one launch (numpy, storage dtype), positions up to 10^6."""

    def __init__(self, spec, tokens, rng):
        self.spec, self.tokens = spec, tokens
        self.dtype = spec["dtype"]
        io = spec.get("io", {})
        self.packed = io.get("input") == "packed_qkv"
        self.padded = io.get("output") == "padded_bhsd"
        self.varlen = io.get("positions") == "varlen"
        self.copy_v = bool(io.get("copy_v"))
        hq, hkv, d = spec["num_q_heads"], spec["num_kv_heads"], spec["head_dim"]
        self.heads = {"q": hq, "k": hkv, "v": hkv}
        self.op = op_row(spec)
        self.q_fp8 = io.get("q_output_dtype", "auto") == "fp8_e4m3"
        self.q_scale = float(np.float32(Q_SCALE)) if self.q_fp8 else 0.0

        def rand(*shape):
            return encode(self.dtype, rng.standard_normal(shape))
        self.inputs = {}
        if self.op.latent_row:  # q [T, H, nope + rope], the latent kv_c and the one rope key k_pe per token
            self.kv_lora_rank = spec["mla_append"]["kv_lora_rank"]
            self.inputs.update(q=rand(tokens, hq, d), kv_c=rand(tokens, self.kv_lora_rank),
                               k_pe=rand(tokens, spec["rotary_dim"]))
        elif self.packed:
            self.inputs["qkv"] = rand(tokens, (hq + 2 * hkv) * d)
        else:
            self.inputs["q"], self.inputs["k"] = rand(tokens, hq, d), rand(tokens, hkv, d)
            if self.copy_v:
                self.inputs["v"] = rand(tokens, hkv, d)
        if io.get("qkv_bias"):
            self.inputs["bias"] = encode(self.dtype, 0.5 * rng.standard_normal((hq + 2 * hkv) * d))
        if spec.get("qk_norm", {}).get("weight", "per_head") == "per_head" and "qk_norm" in spec:
            all_heads = spec["qk_norm"].get("scope", "head") == "all"  # [heads * d], else [d]
            self.inputs["q_norm_weight"] = encode(self.dtype, rng.standard_normal((hq if all_heads else 1) * d))
            self.inputs["k_norm_weight"] = encode(self.dtype, rng.standard_normal((hkv if all_heads else 1) * d))
        self.batch = self.max_seq_len = 0
        if self.varlen:
            self.batch = batch_for(tokens)
            seq = -(-tokens // self.batch)
            self.cu_seqlens = np.minimum(np.arange(self.batch + 1) * seq, tokens).astype(np.int32)
            lengths = np.diff(self.cu_seqlens)
            self.start_pos = np.array([rng.integers(0, MAX_POSITION - n + 1) for n in lengths], dtype=np.int64)
            self.max_seq_len = max(1, int(lengths.max())) if self.padded else 0
            self.seq_index = np.concatenate([np.arange(n) for n in lengths]).astype(np.int64)
            self.seq_of = np.repeat(np.arange(self.batch), lengths)
            self.positions = (self.start_pos[self.seq_of] + self.seq_index).astype(np.int32)
        elif io.get("positions") == "mrope":  # [3, T]: temporal, height, width
            self.positions = rng.integers(0, MAX_POSITION, size=(3, tokens)).astype(np.int32)
        else:
            self.positions = rng.integers(0, MAX_POSITION, size=tokens).astype(np.int32)
        self.seq_len = int(self.positions.max()) + 1 if tokens else 0
        self.paged = io.get("output") == "paged_kv"
        if self.paged:
            self._draw_cache(io, rng)

    def _draw_cache(self, io, rng):
        """paged_kv: caches of ceil(T / page_size) + 1 pages of random bytes (the untouched-slot
        check needs stale contents), a random permutation of slots for the tokens (every token
        written, no two alike), the FP8 scales. Caches and slot_mapping join `inputs` under their
        ropejit_args names; the scalar fields are in launch_scalars()."""
        refused = [f"{key} {io.get(key, default)}" for key, default, allowed in (
            ("cache_index", "slot_mapping", ("slot_mapping",)), ("cache_layout", "nhd", ("nhd",)),
            ("cache_dtype", "auto", ("auto", "fp8_e4m3")), ("input", "separate", ("separate",)))
            if io.get(key, default) not in allowed]
        if refused:
            raise ValueError(f"peers reference: {self.spec['name']}: paged_kv with {', '.join(refused)} is not "
                             "supported here (only separate input, cache_index slot_mapping, cache_layout nhd, "
                             "cache_dtype auto or fp8_e4m3)")
        self.page_size = int(io["page_size"])
        self.fp8 = io.get("cache_dtype", "auto") == "fp8_e4m3"
        self.cache_num_pages = -(-self.tokens // self.page_size) + 1
        page_shape = (self.cache_num_pages, self.page_size, self.heads["k"], self.spec["head_dim"])
        if self.op.latent_row:  # one latent cache: rows [kv_c | k_pe]
            page_shape = (self.cache_num_pages, self.page_size, self.kv_lora_rank + self.spec["rotary_dim"])
        storage = np.dtype(np.uint8 if self.fp8 else storage_numpy_dtype(self.dtype))
        for name in self.op.caches:
            raw = rng.integers(0, 256, size=int(np.prod(page_shape)) * storage.itemsize, dtype=np.uint8)
            self.inputs[name] = raw.view(storage).reshape(page_shape)
        slots = self.cache_num_pages * self.page_size
        self.inputs["slot_mapping"] = rng.permutation(slots)[:self.tokens].astype(np.int64)
        self.k_scale, self.v_scale = cache_scales(self.spec)

    def launch_scalars(self):
        """Non-pointer ropejit_args fields of the launch (paged_kv): name -> value."""
        if not self.paged:
            return {}
        scalars = {"cache_num_pages": self.cache_num_pages, "k_scale": self.k_scale,
                   "v_scale": self.v_scale if "v_cache" in self.op.caches else 0.0}
        if self.q_fp8:
            scalars["q_scale"] = self.q_scale
        return scalars

    def output_dtype(self, name):
        """numpy dtype of an output buffer: FP8 codes (uint8) for an FP8 q_out, else the storage dtype."""
        return np.dtype(np.uint8) if name == "q_out" and self.q_fp8 else np.dtype(storage_numpy_dtype(self.dtype))

    def output_shapes(self):
        """Separate outputs: padded form name -> shape [B, H, S, D]; paged_kv with q_output
        separate: q_out [T, Hq, D]."""
        d = self.spec["head_dim"]
        if self.paged and self.spec["io"].get("q_output", "inplace") == "separate":
            return {"q_out": (self.tokens, self.heads["q"], d)}
        if not self.padded:
            return {}
        names = ["q", "k"] + (["v"] if self.copy_v else [])
        return {n + "_out": (self.batch, self.heads[n], self.max_seq_len, d) for n in names}


def cache_scales(spec):
    """(k_scale, v_scale) of a paged_kv launch: float32 values for FP8 caches, 0 otherwise."""
    if spec.get("io", {}).get("cache_dtype", "auto") == "auto":
        return 0.0, 0.0
    return tuple(float(np.float32(x)) for x in CACHE_SCALES)


def expected(problem, rows):
    """Expected float64 values and tolerance scales of q, k (and v) at token indices `rows`:
    name -> (value [n, H, D], scale [n, H, D])."""
    spec, dt = problem.spec, problem.dtype
    d, rd = spec["head_dim"], spec["rotary_dim"]
    hq, hkv = problem.heads["q"], problem.heads["k"]
    if problem.op.latent_row:  # k_pe as one head rotated whole, kv_c passed through
        parts = {"q": decode(dt, problem.inputs["q"][rows]),
                 "k_pe": decode(dt, problem.inputs["k_pe"][rows])[:, None, :],
                 "kv_c": decode(dt, problem.inputs["kv_c"][rows])[:, None, :]}
    elif problem.packed:
        x = decode(dt, problem.inputs["qkv"][rows]).reshape(len(rows), hq + 2 * hkv, d)
        parts = {"q": x[:, :hq], "k": x[:, hq:hq + hkv], "v": x[:, hq + hkv:]}
    else:
        parts = {n: decode(dt, problem.inputs[n][rows]) for n in ("q", "k", "v") if n in problem.inputs}
    if "bias" in problem.inputs:
        b = decode(dt, problem.inputs["bias"]).reshape(hq + 2 * hkv, d)
        bias = {"q": b[:hq], "k": b[hq:hq + hkv], "v": b[hq + hkv:]}
        parts = {n: v + bias[n][None] for n, v in parts.items()}
    if "qk_norm" in spec:
        for name in ("q", "k"):
            w = problem.inputs.get(name + "_norm_weight")
            parts[name] = rms_normalize(spec, parts[name], None if w is None else decode(dt, w))
    inv, s = inv_freq_and_factor(spec)
    theta = pair_angles(spec, problem.positions[..., rows], inv)[:, None, :]  # [n, 1, d/2]
    cos, sin = np.cos(theta), np.sin(theta)
    half = rd // 2
    if spec["layout"] == "interleaved":
        first, second = np.arange(0, rd, 2), np.arange(1, rd, 2)
    else:
        first, second = np.arange(half), np.arange(half, rd)
    out = {}
    for name, x in parts.items():
        value, scale = x.copy(), np.abs(x)
        if name not in ("v", "kv_c"):
            # the rotary slice: the first rotary_dim entries, or the last ("trailing"; k_pe is all of it)
            lo = x.shape[-1] - rd if spec.get("rotary_slice", "leading") == "trailing" else 0
            i, j = first + lo, second + lo
            a, b = x[..., i], x[..., j]
            value[..., i] = (a * cos - b * sin) * s
            value[..., j] = (b * cos + a * sin) * s
            norm = s * np.hypot(a, b)
            scale[..., i], scale[..., j] = norm, norm
        out[name] = (value, scale)
    return out


def compare(dtype, actual, value, scale):
    """(ok, worst error in storage ulps, count of failing elements)."""
    err = np.abs(actual - value)
    ulp = storage_ulp(dtype, value)
    good = np.isfinite(actual) & ((err <= ULPS * ulp) | (err <= PAIR_RELATIVE * scale))
    worst = float(np.nanmax(err / ulp)) if err.size else 0.0
    return bool(good.all()), worst, int(err.size - good.sum())


def check_outputs(problem, outputs, rows, strict=True):
    """Checks a system's outputs (name -> numpy array after the launch: q/k/v, qkv, or
    q_out/k_out/v_out; paged_kv: q (or q_out), k, v, k_cache, v_cache; mla_append: q (or q_out),
    kv_c, k_pe, k_cache) at token indices `rows` plus, for padded_bhsd, every padding element and,
    for the caches, every unmapped slot. strict=False gives FP8 elements the peers' pair slack
    (peers_reference_paged.compare_fp8). Returns (ok, message)."""
    import peers_reference_paged as paged  # noqa: PLC0415  (it imports this module)
    dt, d = problem.dtype, problem.spec["head_dim"]
    hq, hkv = problem.heads["q"], problem.heads["k"]
    if problem.paged:  # k and v live in the caches; q in place or in q_out
        got = {"q": outputs["q_out" if "q_out" in outputs else "q"][rows]}
    elif problem.padded:
        got = {n: outputs[n + "_out"][problem.seq_of[rows], :, problem.seq_index[rows], :]
               for n in ("q", "k", "v") if n + "_out" in outputs}
    elif problem.packed:
        got = dict(zip("qkv", np.split(outputs["qkv"][rows].reshape(len(rows), hq + 2 * hkv, d), [hq, hq + hkv], 1)))
    else:
        got = {n: outputs[n][rows] for n in ("q", "k", "v") if n in outputs}
    cached = getattr(problem, "_expected", None)
    if cached is None or cached[0] is not rows:  # every system is checked on the same rows
        cached = problem._expected = (rows, expected(problem, rows))
    notes, ok = [], True
    for name, (value, scale) in cached[1].items():
        if name not in got:
            continue
        fp8_q = problem.q_fp8 and name == "q"  # FP8 codes of q / q_scale in q_out
        good, note = paged.compare_elements(problem, got[name], value, scale, problem.q_scale if fp8_q else 0.0,
                                            strict, name)
        ok &= good
        notes.append(note)
    if problem.paged:
        good, more = getattr(paged, problem.op.check_cache)(problem, outputs, rows, cached[1], strict)
        ok &= good
        notes += more
    if problem.padded:
        lengths = np.diff(problem.cu_seqlens)
        pad = np.arange(problem.max_seq_len)[None, :] >= lengths[:, None]  # [B, S]
        for name, arr in ((n, a) for n, a in outputs.items() if n.endswith("_out")):
            nonzero = int(np.count_nonzero(decode(dt, arr).transpose(0, 2, 1, 3)[pad]))
            if nonzero:
                ok = False
                notes.append(f"{name}: {nonzero} padding elements not zero")
    return ok, ", ".join(notes)


def check_rows(tokens, rng, limit=2048):
    """Token indices to check: all when few, else the first, the last and a random sample."""
    if tokens <= limit:
        return np.arange(tokens)
    sample = rng.choice(tokens, size=limit - 2, replace=False)
    return np.unique(np.concatenate([[0, tokens - 1], sample]))
