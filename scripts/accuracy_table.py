#!/usr/bin/env python3
"""Accuracy of ropejit's quantized outputs (docs/accuracy.md): for each output format and scale
mode, the fused codes against the exact float64 value, in units of the format's step, next to the
engines' unfused path (transformers' bf16 rotation, then torch's quantization).

Usage: ROPEJIT_CACHE_DIR=/tmp/acc-cache build/py-venv/bin/python scripts/accuracy_table.py
Prints a markdown table; exits 1 when a ropejit code lies past its bound (BOUND below).

A new format is one more FORMATS entry (the step at a value, the torch/numpy quantize-reference,
the decode of the kernel's codes) plus the CASES rows that launch it. NVFP4 (io.cache_dtype
"nvfp4": e2m1 values, an e4m3 scale per 16 values, an fp32 global scale) is such an entry, with
its block quantizer and the scale mode "block16" (k cache only): each element's scale is its
block's e4m3 scale times the global one, the global calibrated as TensorRT-LLM's, amax / (448 · 6).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import ropejit  # noqa: E402
from transformers import LlamaConfig, Qwen3Config  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402
from transformers.models.qwen3 import modeling_qwen3  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F32_ULP = 2.0 ** -24


# ---- formats ------------------------------------------------------------------------------
def binade_step(mantissa_bits, min_normal_exp):
    """The spacing of representable values at v (scaled units): 2^(e - m) in the binade
    [2^e, 2^(e+1)) of |v|, the subnormal spacing below the smallest normal 2^min_normal_exp."""
    def step(v):
        exp = np.frexp(np.abs(v))[1] - 1                      # floor(log2 |v|), exact; 0 -> -1
        return np.ldexp(1.0, np.maximum(exp, min_normal_exp) - mantissa_bits)
    return step


def torch_fp8(dtype, fmax):
    """Quantize-reference: float32 values times fl32(1 / scale), clamped, cast (RNE), as (values,
    scale); decode."""
    return (lambda x, scale: (((x * (1.0 / scale)).clamp(-fmax, fmax).to(dtype).float().double().numpy()),
                              scale.double().numpy()),
            lambda codes: codes.view(dtype).float().double().numpy())


E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
E2M1_MIDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
E2M1_TIES_UP = torch.tensor([0.75, 1.75, 3.5])       # midpoints whose even neighbour is the upper one


def nvfp4_step(v):
    """The e2m1 spacing at a scaled value: 0.5 below 2, 1 in [2, 4), 2 from 4."""
    a = np.abs(v)
    return np.where(a < 2, 0.5, np.where(a < 4, 1.0, 2.0))


def nvfp4_quantize(x, scale):
    """The NVFP4 recipe in torch float32 (TensorRT-LLM's and ropejit's): inv = fl32(1 / global); per
    16 values sf = e4m3(min(inv · fl32(amax · fl32(1 / 6)), 448)) (RNE); the values times
    fl32(inv / sf) (0 where sf is 0) rounded to e2m1 (nearest, ties to even, saturating at 6).
    Returns (e2m1 values, each element's scale sf · global), float64 [..., D]."""
    inv = torch.tensor(1.0, dtype=torch.float32) / scale
    blocks = x.float().reshape(x.shape[:-1] + (x.shape[-1] // 16, 16))
    amax = blocks.abs().amax(-1, keepdim=True)
    sf = (inv * (amax * (torch.tensor(1.0) / torch.tensor(6.0)))).clamp(max=448).to(torch.float8_e4m3fn).float()
    multiplier = torch.where(sf != 0, inv / torch.where(sf != 0, sf, 1.0), 0.0)
    scaled = (blocks * multiplier).clamp(-6, 6)
    index = torch.bucketize(scaled.abs(), E2M1_MIDS) + torch.isin(scaled.abs(), E2M1_TIES_UP).long()
    values = torch.where(scaled < 0, -E2M1[index], E2M1[index])
    element_scale = sf.double() * scale.double()
    return (values.reshape(x.shape).double().numpy(),
            element_scale.expand(blocks.shape).reshape(x.shape).numpy())


def nvfp4_decode(packed, sf_codes):
    """Cache bytes (two e2m1 codes a byte, element 2i low) and e4m3 block scales -> (values, sf)."""
    codes = torch.stack([packed & 15, packed >> 4], -1).reshape(packed.shape[:-1] + (packed.shape[-1] * 2,)).long()
    values = torch.where(codes >= 8, -E2M1[codes & 7], E2M1[codes & 7])
    sf = sf_codes.view(torch.float8_e4m3fn).double().repeat_interleave(16, -1)
    return values.double().numpy(), sf.numpy()


FORMATS = {  # name: max finite value, step(v), quantize(scaled float32 torch) -> values, decode(codes)
    "fp8_e4m3": dict(max=448.0, step=binade_step(3, -6), torch=torch.float8_e4m3fn),
    "fp8_e5m2": dict(max=57344.0, step=binade_step(2, -14), torch=torch.float8_e5m2),
}
for _f in FORMATS.values():
    _f["quantize"], _f["decode"] = torch_fp8(_f["torch"], _f["max"])
# NVFP4: max 6 in the block-scaled domain; its static (global) scale is calibrated over max · 448.
FORMATS["nvfp4"] = dict(max=6.0, calibrate=6.0 * 448.0, step=nvfp4_step, quantize=nvfp4_quantize,
                        decode=nvfp4_decode, block=True)

# The bound checked on every non-saturated ropejit code: half a step (a correctly rounded code,
# or with a QK-norm folding a static scale its neighbour at a midpoint: docs/spec.md "FP8 q"), plus
# float32 noise: BOUND float32 ulps (2^-24) of the rotated pair's magnitude, as the kernel's value is
# a float32 computation whose few roundings (cos, sin, products, the 1/scale product; the norm's
# inverse RMS and weight) scale with the pair, not with the result. Measured: at most 2.5 (6 seeds).
BOUND = {"plain": 8, "qk_norm": 16}


# ---- models and data ----------------------------------------------------------------------
def llama():
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    cfg = LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                      max_position_embeddings=131072, rope_parameters=rope)
    return "specs/llama-3.1-8b.json", modeling_llama.LlamaRotaryEmbedding(cfg), modeling_llama.apply_rotary_pos_emb, None


def qwen3():
    cfg = Qwen3Config(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                      max_position_embeddings=40960, rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    return ("specs/qwen3-8b.json", modeling_qwen3.Qwen3RotaryEmbedding(cfg), modeling_qwen3.apply_rotary_pos_emb,
            modeling_qwen3.Qwen3RMSNorm)


MODELS = {"Llama-3.1-8B": llama, "Qwen3-8B (QK-norm)": qwen3}


def activations(rng, tokens, heads, dim):
    """bf16 N(0, 1) times a per-head gain exp(N(0, 0.5)), 4 outlier channels (the same in every
    token and head) at 16x, as real q/k projections have."""
    gain = np.exp(rng.normal(0.0, 0.5, (1, heads, 1)))
    channel = np.ones(dim)
    channel[rng.choice(dim, 4, replace=False)] = 16.0
    return torch.from_numpy(rng.standard_normal((tokens, heads, dim)) * gain * channel).to(torch.bfloat16)


def exact(x, positions, inv_freq, attention_factor, weight, eps):
    """float64 from the same bf16 inputs: RMSNorm (if any), then the neox rotation by HF's
    float32 angle p * inv_freq (the spec's angle "fp32") with float64 cos and sin."""
    x = x.double().numpy()
    if weight is not None:
        x = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight.double().numpy()
    angle = (positions.numpy().astype(np.float32)[:, None] * inv_freq[None, :]).astype(np.float64)
    cos, sin = (np.cos(angle) * attention_factor)[:, None, :], (np.sin(angle) * attention_factor)[:, None, :]
    half = inv_freq.shape[0]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def hf_unfused(model, x_q, x_k, positions, q_weight, k_weight, eps):
    """transformers on bf16: the model's q_norm / k_norm (Qwen3RMSNorm), its rotary module's bf16
    cos and sin and apply_rotary_pos_emb (q * cos + rotate_half(q) * sin, in bf16)."""
    _, rotary, apply_rotary, norm_class = model
    if norm_class is not None:
        out = []
        for x, w in ((x_q, q_weight), (x_k, k_weight)):
            norm = norm_class(x.shape[-1], eps).to(torch.bfloat16)
            norm.weight.data.copy_(w)
            out.append(norm(x))
        x_q, x_k = out
    cos, sin = rotary(x_q, positions[None])
    q, k = apply_rotary(x_q.transpose(0, 1)[None], x_k.transpose(0, 1)[None], cos, sin)
    return q[0].transpose(0, 1), k[0].transpose(0, 1)


# ---- the cases: where the quantized tensor comes from, and its scale ------------------------
def fused(rt, spec, fmt, target, mode, q, k, v, positions, weights, static_scale):
    """ropejit's one launch: (codes as float64 values in scaled units, the scale it used)."""
    if fmt == "nvfp4":
        return fused_nvfp4(rt, spec, q, k, v, positions, weights, static_scale)
    spec = dict(spec)
    if target == "q_out":
        spec["io"] = {"output": "separate", "q_output_dtype": fmt, "q_scale": mode}
        extra = {"q_scale": static_scale} if mode == "static" else {}
        out = rt.get(spec)(q, k, positions=positions, **weights, **extra)
        if mode == "static":
            return FORMATS[fmt]["decode"](out[0]), static_scale
        written = out[2].double().numpy()  # [T, Hq] per (token, head), [T] per token
        return FORMATS[fmt]["decode"](out[0]), written.reshape(written.shape[0], -1, 1)
    spec["io"] = {"output": "paged_kv", "page_size": 16, "cache_dtype": fmt, "cache_scale": mode}
    tokens, heads, dim = k.shape
    pages = (tokens + 15) // 16
    caches = [torch.zeros((pages, 16, heads, dim), dtype=FORMATS[fmt]["torch"]) for _ in range(2)]
    if mode == "static":  # v's scale: its own amax (v is not measured here)
        extra = {"k_scale": static_scale, "v_scale": float(v.float().abs().max()) / FORMATS[fmt]["max"]}
    else:
        extra = {"k_scale_cache": torch.zeros(pages * 16, heads), "v_scale_cache": torch.zeros(pages * 16, heads)}
    slots = torch.from_numpy(np.random.default_rng(0).permutation(pages * 16)[:tokens])
    rt.get(spec)(q.clone(), k, v, positions=positions, k_cache=caches[0], v_cache=caches[1], slot_mapping=slots,
                 **weights, **extra)
    codes = FORMATS[fmt]["decode"](caches[0].view(pages * 16, heads, dim)[slots])
    return codes, (extra["k_scale_cache"][slots].double().numpy()[..., None] if mode != "static" else static_scale)


def fused_nvfp4(rt, spec, q, k, v, positions, weights, global_scale):
    """An NVFP4 k cache (io.cache_dtype nvfp4): (e2m1 values, each element's sf · k_scale)."""
    spec = dict(spec, io={"output": "paged_kv", "page_size": 16, "cache_dtype": "nvfp4"})
    tokens, heads, dim = k.shape
    pages = (tokens + 15) // 16
    caches = [torch.zeros((pages, 16, heads, dim // 2), dtype=torch.uint8) for _ in range(2)]
    scales = [torch.zeros((pages, 16, heads, dim // 16), dtype=torch.uint8) for _ in range(2)]
    slots = torch.from_numpy(np.random.default_rng(0).permutation(pages * 16)[:tokens])
    v_scale = float(np.float32(float(v.float().abs().max()) / FORMATS["nvfp4"]["calibrate"]))
    rt.get(spec)(q.clone(), k, v, positions=positions, k_cache=caches[0], v_cache=caches[1], slot_mapping=slots,
                 k_scale_cache=scales[0], v_scale_cache=scales[1], k_scale=global_scale, v_scale=v_scale, **weights)
    values, sf = nvfp4_decode(caches[0].view(pages * 16, heads, dim // 2)[slots],
                              scales[0].view(pages * 16, heads, dim // 16)[slots])
    return values, sf * global_scale


UNFUSED_SCALE = {  # the engine's scale for its own rotated bf16 values (float32 torch [T, H, 1])
    "static": lambda x, fmax, static: torch.tensor(static, dtype=torch.float32),
    "per_token_head": lambda x, fmax, static: torch.maximum(
        x.float().abs().amax(-1, keepdim=True) * torch.tensor(1.0 / fmax, dtype=torch.float32),
        torch.tensor(1.0 / (fmax * 512), dtype=torch.float32)),
    "per_token": lambda x, fmax, static: torch.maximum(                              # vLLM's per-token dynamic
        x.float().abs().amax((-2, -1), keepdim=True) * torch.tensor(1.0 / fmax, dtype=torch.float32),
        torch.tensor(1.0 / (fmax * 512), dtype=torch.float32)),
    "block16": lambda x, fmax, static: torch.tensor(static, dtype=torch.float32),   # the global scale
}

LABELS = {("q_out", "static"): "q static", ("q_out", "per_token_head"): "q per (token, head)",
          ("q_out", "per_token"): "q per token",
          ("k_cache", "static"): "k cache static", ("k_cache", "per_token_head"): "k cache per (slot, kv head)",
          ("k_cache", "block16"): "k cache e4m3 per 16 × global"}
CASES = [(fmt, target, mode) for target in ("q_out", "k_cache") for mode in ("static", "per_token_head")
         for fmt in FORMATS if not FORMATS[fmt].get("block")] + [("nvfp4", "k_cache", "block16")] + \
        [(fmt, "q_out", "per_token") for fmt in FORMATS if not FORMATS[fmt].get("block")]  # no per-head norm


# ---- measuring ----------------------------------------------------------------------------
def steps(fmt, values, truth, scale):
    """|values - truth/scale| in steps at truth/scale, and the saturated mask (past the largest
    finite value by more than half a step: no code lies within 0.5 step; or a block scale of 0)."""
    f = FORMATS[fmt]
    scale = np.broadcast_to(scale, truth.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where(scale > 0, truth / np.where(scale > 0, scale, 1.0), 0.0)
    saturated = (np.abs(want) > f["max"] + 0.5 * f["step"](np.float64(f["max"]))) | (scale == 0)
    return np.abs(values - want), f["step"](want), saturated


def run_case(rt, model_name, fmt, target, mode, data, factor):
    model, spec, q, k, v, positions, weights, truth, hf = (data[key] for key in (
        "model", "spec", "q", "k", "v", "positions", "weights", "truth", "hf"))
    x_exact, x_hf = (truth[0], hf[0]) if target == "q_out" else (truth[1], hf[1])
    fmax = FORMATS[fmt]["max"]
    calibrate = FORMATS[fmt].get("calibrate", fmax)
    static = float(np.float32(np.abs(x_exact).max() / calibrate * factor))   # calibrated: the data's amax / max
    codes, scale = fused(rt, spec, fmt, target, mode, q, k, v, positions, weights, static)
    u_scale = UNFUSED_SCALE[mode](x_hf, fmax, static)
    u_codes, u_scale = FORMATS[fmt]["quantize"](x_hf.float(), u_scale)
    err, step, sat = steps(fmt, codes, x_exact, scale)
    u_err, u_step, u_sat = steps(fmt, u_codes, x_exact, u_scale)
    keep = ~(sat | u_sat)
    half = x_exact.shape[-1] // 2
    pair = np.hypot(x_exact[..., :half], x_exact[..., half:])
    with np.errstate(divide="ignore"):
        pair = np.concatenate([pair, pair], axis=-1) / scale      # the rotated pair's magnitude, scaled
    allow = BOUND["qk_norm" if model[3] else "plain"]
    excess = (err - 0.5 * step) / (F32_ULP * pair)                # float32 ulps of the pair past 0.5 step
    return dict(fmt=fmt, mode=mode, target=target, model=model_name, n=x_exact.size, sat=int((~keep).sum()),
                max=(err / step)[keep].max(), mean=(err / step)[keep].mean(),
                u_max=(u_err / u_step)[keep].max(), u_mean=(u_err / u_step)[keep].mean(),
                differ=100.0 * np.mean(codes * scale != u_codes * u_scale if FORMATS[fmt].get("block")
                                       else codes != u_codes), over_half=int((excess[keep] > 0).sum()),
                excess=max(0.0, excess[keep].max()), allow=allow, ok=bool((excess[keep] <= allow).all()))


def prepare(model_name, rng, tokens):
    model = MODELS[model_name]()
    spec = json.load(open(os.path.join(ROOT, model[0])))
    info = ropejit.Spec.from_json(spec).freqs()
    inv_freq = np.asarray(info["inv_freq"], dtype=np.float32)
    hf_inv_freq = model[1].inv_freq.numpy()
    ulps = np.abs(hf_inv_freq.view(np.int32) - inv_freq.view(np.int32))
    hq, hkv, dim = spec["num_q_heads"], spec["num_kv_heads"], spec["head_dim"]
    q, k, v = activations(rng, tokens, hq, dim), activations(rng, tokens, hkv, dim), activations(rng, tokens, hkv, dim)
    positions = torch.from_numpy(rng.integers(0, 8192, tokens))
    weights, eps, w = {}, None, (None, None)
    if model[3] is not None:
        eps = spec["qk_norm"]["eps"]
        w = tuple(torch.from_numpy(rng.uniform(0.5, 2.0, dim)).to(torch.bfloat16) for _ in range(2))
        weights = {"q_norm_weight": w[0], "k_norm_weight": w[1]}
    truth = [exact(x, positions, inv_freq, info["attention_factor"], wt, eps) for x, wt in ((q, w[0]), (k, w[1]))]
    with torch.no_grad():
        hf = hf_unfused(model, q, k, positions, w[0], w[1], eps)
    return dict(inv_freq_ulps=(int((ulps > 0).sum()), int(ulps.max()), ulps.size), model=model, spec=spec,
                q=q, k=k, v=v, positions=positions, weights=weights, truth=truth, hf=hf)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--backend", default="host")
    parser.add_argument("--static-factor", type=float, default=1.0,
                        help="static scales = factor x amax / max (below 1: some values saturate)")
    args = parser.parse_args()
    rt = ropejit.Runtime(args.backend, cache_dir=os.environ.get("ROPEJIT_CACHE_DIR"))
    rng = np.random.default_rng(args.seed)
    rows, notes = [], []
    for model_name in MODELS:
        data = prepare(model_name, rng, args.tokens)
        if data["inv_freq_ulps"][0]:
            notes.append(f"{model_name}: HF's float32 inv_freq is off ropejit's (the correctly rounded power) in "
                         f"{data['inv_freq_ulps'][0]} of {data['inv_freq_ulps'][2]} "
                         f"pairs, by at most {data['inv_freq_ulps'][1]} ulp")
        # Per-token q scales run in the all-heads kernel, which has no per-head QK-norm (Qwen3's).
        rows += [run_case(rt, model_name, fmt, target, mode, data, args.static_factor) for fmt, target, mode in CASES
                 if not (mode == "per_token" and data["model"][3] is not None)]
    print(f"{args.tokens} tokens, seed {args.seed}, backend {args.backend}, static scales {args.static_factor} x "
          "amax / max. Errors in steps of the format at the exact scaled value; unfused: transformers' bf16 "
          "rotation, then torch's quantization. Last column: ropejit codes past 0.5 step, and the largest excess "
          "/ the bound, in float32 ulps of the rotated pair's magnitude.\n")
    print("| format | scale mode | model | n values | saturated | ropejit max / mean steps vs exact "
          "| unfused max / mean steps vs exact | codes differing | ropejit past 0.5 step |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['fmt']} | {LABELS[r['target'], r['mode']]} | {r['model']} | {r['n']} | {r['sat']} "
              f"| {r['max']:.3f} / {r['mean']:.3f} | {r['u_max']:.1f} / {r['u_mean']:.3f} | {r['differ']:.2f}% "
              f"| {r['over_half']} ({r['excess']:.1f} / {r['allow']}) |")
    for note in notes:
        print(f"\n{note}")
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        print(f"FAIL: {r['fmt']} {r['target']} {r['mode']} {r['model']}: a code {r['excess']:.2f} float32 ulps of "
              f"its pair past half a step (bound {r['allow']})", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
