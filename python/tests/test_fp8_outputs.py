"""FP8 outputs through the Python API (q_out: io.q_output_dtype; per-head scales of q and of the
paged FP8 cache): the fused launch's codes against the
engines' unfused path, rotate (the same spec with a plain q_out) and then quantize with torch
(``(q * (1 / q_scale)).clamp(-max, max).to(float8)``), on real-model-shaped random data."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")

FP8 = {"fp8_e4m3": (torch.float8_e4m3fn, 448.0), "fp8_e5m2": (torch.float8_e5m2, 57344.0)}


def spec_dict(q_dtype, qk_norm=False):
    spec = {"name": "fp8-q", "head_dim": 128, "rotary_dim": 128, "num_q_heads": 32, "num_kv_heads": 8,
            "layout": "neox", "dtype": "fp32", "max_position_embeddings": 40960,
            "rope": {"rope_type": "default", "rope_theta": 1000000.0},
            "io": {"output": "separate", "q_output_dtype": q_dtype}}
    if qk_norm:
        spec["qk_norm"] = {"type": "rmsnorm", "eps": 1e-6}
    return spec


def unfused(runtime, spec, q, k, positions, weights, both=False):
    """The same spec's plain (unquantized) rotated q (and k): the engines' unfused first step."""
    io = {key: value for key, value in spec["io"].items() if key != "q_scale"}
    plain = dict(spec, io=dict(io, q_output_dtype="auto"))
    q_out, k_out = runtime.get(plain)(torch.from_numpy(q), torch.from_numpy(k), positions=torch.from_numpy(positions),
                                      **weights)
    return (q_out, k_out) if both else q_out


@pytest.mark.parametrize("q_dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_codes_equal_rotate_then_quantize(runtime, rng, q_dtype):
    torch_type, fp8_max = FP8[q_dtype]
    spec = spec_dict(q_dtype)
    tokens = 37
    q = rng.standard_normal((tokens, 32, 128)).astype(np.float32) * 3
    k = rng.standard_normal((tokens, 8, 128)).astype(np.float32)
    positions = rng.integers(0, 40000, tokens).astype(np.int64)
    q_scale = 0.004 if q_dtype == "fp8_e4m3" else 0.0001  # some values saturate
    q_out, k_out = runtime.get(spec)(torch.from_numpy(q), torch.from_numpy(k), positions=torch.from_numpy(positions),
                                     q_scale=q_scale)
    assert q_out.dtype == torch_type and q_out.shape == (tokens, 32, 128)
    rotated = unfused(runtime, spec, q, k, positions, {})
    inverse = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(q_scale, dtype=torch.float32)
    want = (rotated * inverse).clamp(-fp8_max, fp8_max).to(torch_type)
    assert torch.equal(q_out.view(torch.uint8), want.view(torch.uint8))           # the same codes, bit for bit
    assert (want.to(torch.float32).abs() == fp8_max).any()                      # saturation was exercised


def test_qk_norm_folds_the_scale_within_one_code(runtime, rng):
    """With a QK-norm the scale rides on the inverse RMS: one rounding of difference at most,
    only where the quotient sits at a midpoint between two codes."""
    spec = spec_dict("fp8_e4m3", qk_norm=True)
    tokens = 19
    q = rng.standard_normal((tokens, 32, 128)).astype(np.float32)
    k = rng.standard_normal((tokens, 8, 128)).astype(np.float32)
    positions = rng.integers(0, 40000, tokens).astype(np.int64)
    weights = {"q_norm_weight": torch.from_numpy(rng.uniform(0.5, 1.5, 128).astype(np.float32)),
               "k_norm_weight": torch.from_numpy(rng.uniform(0.5, 1.5, 128).astype(np.float32))}
    q_out = np.zeros((tokens, 32, 128), np.uint8)                               # numpy: uint8 codes
    runtime.get(spec)(q, k, positions=positions, q_out=q_out, q_scale=0.02,
                      q_norm_weight=weights["q_norm_weight"].numpy(), k_norm_weight=weights["k_norm_weight"].numpy())
    rotated = unfused(runtime, spec, q, k, positions, weights)
    want = (rotated / 0.02).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    got_values = torch.from_numpy(q_out).view(torch.float8_e4m3fn).to(torch.float32)
    want_values = torch.from_numpy(want).view(torch.float8_e4m3fn).to(torch.float32)
    differ = (got_values != want_values).numpy()
    assert differ.mean() < 1e-3
    step = (want_values.abs() / 8).clamp(min=2.0 ** -9)                        # one e4m3 code near the value
    assert ((got_values - want_values).abs() <= step).all()


def test_q_scale_is_checked_by_name(runtime, rng):
    spec = spec_dict("fp8_e4m3")
    q = np.ones((2, 32, 128), np.float32)
    k = np.ones((2, 8, 128), np.float32)
    for bad in (None, 0.0, float("inf"), -1.0):
        with pytest.raises(ropejit.ArgumentError, match="q_scale"):
            runtime.get(spec)(q, k, positions=np.arange(2), q_scale=bad)
    fields = {f["name"]: f for f in ropejit.Spec.from_json(spec).launch_fields()}
    assert (fields["q_out"]["dtype"], fields["q_scale"]["use"]) == ("fp8_e4m3", "required")
    with pytest.raises(ropejit.ArgumentError, match="q_out: element type fp32 is not allowed: must be fp8_e4m3 | uint8"):
        runtime.get(spec)(q, k, positions=np.arange(2), q_scale=1.0, q_out=np.zeros((2, 32, 128), np.float32))


@pytest.mark.parametrize("q_dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_per_token_head_scales_equal_amax_then_quantize(runtime, rng, q_dtype):
    """io.q_scale per_token_head: each (token, head)'s scale is max(amax × fl32(1 / FP8 max), 1 /
    (FP8 max * 512)) of its rotated values (an all-zero head takes the floor and all-zero codes), and the
    codes are those of torch's quantization with that scale (vLLM's per-token-group path)."""
    torch_type, fp8_max = FP8[q_dtype]
    spec = spec_dict(q_dtype)
    spec["io"]["q_scale"] = "per_token_head"
    tokens = 23
    q = rng.standard_normal((tokens, 32, 128)).astype(np.float32) * rng.uniform(0.01, 100, (tokens, 32, 1)).astype(np.float32)
    q[3, 5] = 0.0                                                                # an all-zero head
    k = rng.standard_normal((tokens, 8, 128)).astype(np.float32)
    positions = rng.integers(0, 40000, tokens).astype(np.int64)
    q_out, k_out, scales = runtime.get(spec)(torch.from_numpy(q), torch.from_numpy(k),
                                             positions=torch.from_numpy(positions))
    assert scales.dtype == torch.float32 and scales.shape == (tokens, 32)
    rotated = unfused(runtime, spec, q, k, positions, {})
    inverse_max = torch.tensor(1.0 / fp8_max, dtype=torch.float32)
    want_scales = torch.maximum(rotated.abs().amax(dim=-1) * inverse_max, torch.tensor(1.0 / (fp8_max * 512)))
    assert torch.equal(scales, want_scales)                                      # amax × fl32(1 / max): exact
    assert scales[3, 5] == torch.tensor(1.0 / (fp8_max * 512), dtype=torch.float32)
    assert not q_out[3, 5].to(torch.float32).any()                              # zeros (some -0: 0·cos − 0·sin)
    inverse = 1.0 / scales                                                      # float32, as the kernel
    want = (rotated * inverse[..., None]).clamp(-fp8_max, fp8_max).to(torch_type)
    assert torch.equal(q_out.view(torch.uint8), want.view(torch.uint8))
    assert (want.to(torch.float32).abs() == fp8_max).any()                      # each head's amax hits the max


@pytest.mark.parametrize("q_dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_per_token_scales_equal_amax_then_quantize(runtime, rng, q_dtype):
    """io.q_scale per_token: one scale a token, max(amax × fl32(1 / FP8 max), 1 / (FP8 max * 512))
    over all its heads' rotated values (vLLM's per-token dynamic quantization of the flattened q),
    and the codes of torch's quantization with it; an all-zero token takes the floor."""
    torch_type, fp8_max = FP8[q_dtype]
    spec = spec_dict(q_dtype)
    spec["io"]["q_scale"] = "per_token"
    tokens = 29
    q = rng.standard_normal((tokens, 32, 128)).astype(np.float32) * rng.uniform(0.01, 100, (tokens, 32, 1)).astype(np.float32)
    q[4] = 0.0                                                                   # an all-zero token
    k = rng.standard_normal((tokens, 8, 128)).astype(np.float32)
    positions = rng.integers(0, 40000, tokens).astype(np.int64)
    q_out, k_out, scales = runtime.get(spec)(torch.from_numpy(q), torch.from_numpy(k),
                                             positions=torch.from_numpy(positions))
    assert scales.dtype == torch.float32 and scales.shape == (tokens,)
    rotated = unfused(runtime, spec, q, k, positions, {})
    inverse_max = torch.tensor(1.0 / fp8_max, dtype=torch.float32)
    want_scales = torch.maximum(rotated.abs().amax(dim=(1, 2)) * inverse_max, torch.tensor(1.0 / (fp8_max * 512)))
    assert torch.equal(scales, want_scales)
    assert scales[4] == torch.tensor(1.0 / (fp8_max * 512), dtype=torch.float32)
    inverse = 1.0 / scales
    want = (rotated * inverse[:, None, None]).clamp(-fp8_max, fp8_max).to(torch_type)
    assert torch.equal(q_out.view(torch.uint8), want.view(torch.uint8))
    # Only the token's largest head reaches the max: the other heads keep their smaller codes.
    assert (want.to(torch.float32).abs().amax(dim=-1) < fp8_max).any()


def test_per_slot_head_cache_scales_equal_amax_then_quantize(runtime, rng):
    """io.cache_scale per_token_head: each written (slot, kv head) gets max(amax × fl32(1 / 448),
    1 / (448 · 512)) of its rotated k (or v) in k_scale_cache / v_scale_cache [slots, Hkv], its
    codes those of torch's quantization with it; untouched slots keep their bytes."""
    spec = spec_dict("fp8_e4m3")
    spec["io"] = {"output": "paged_kv", "page_size": 16, "cache_dtype": "fp8_e4m3", "cache_scale": "per_token_head"}
    tokens, pages = 21, 3
    q = rng.standard_normal((tokens, 32, 128)).astype(np.float32)
    k = rng.standard_normal((tokens, 8, 128)).astype(np.float32) * rng.uniform(0.1, 10, (tokens, 8, 1)).astype(np.float32)
    v = rng.standard_normal((tokens, 8, 128)).astype(np.float32)
    positions = rng.integers(0, 40000, tokens).astype(np.int64)
    slots = rng.permutation(pages * 16)[:tokens].astype(np.int64)
    caches = [torch.zeros((pages, 16, 8, 128), dtype=torch.float8_e4m3fn) for _ in range(2)]
    scales = [torch.full((pages * 16, 8), -1.0) for _ in range(2)]
    runtime.get(spec)(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                      positions=torch.from_numpy(positions), k_cache=caches[0], v_cache=caches[1],
                      slot_mapping=torch.from_numpy(slots), k_scale_cache=scales[0], v_scale_cache=scales[1])
    _, rotated_k = unfused(runtime, spec_dict("fp8_e4m3"), q, k, positions, {}, both=True)
    inverse_max = torch.tensor(1.0 / 448, dtype=torch.float32)
    for values, cache, scale in ((rotated_k, caches[0], scales[0]), (torch.from_numpy(v), caches[1], scales[1])):
        want_scale = torch.maximum(values.abs().amax(dim=-1) * inverse_max, torch.tensor(1.0 / (448 * 512)))
        assert torch.equal(scale[torch.from_numpy(slots)], want_scale)
        untouched = np.setdiff1d(np.arange(pages * 16), slots)
        assert (scale[torch.from_numpy(untouched)] == -1).all()
        want = (values * (1.0 / want_scale)[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        got = cache.view(pages * 16, 8, 128)[torch.from_numpy(slots)]
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))
