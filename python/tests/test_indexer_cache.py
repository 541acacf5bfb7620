"""A sparse-attention indexer's K cache, ``io.cache_layout: "fp8_indexer"``, byte for byte against an
encoder written here from vLLM's ``indexer_k_quant_and_cache_kernel`` (csrc/cache_kernels.cu; SGLang's
NSA index buffer has the same page layout):

  page p of P slots: bytes [0, P * D)          e4m3 codes of k / s, the quotient correctly rounded
                     bytes [P * D, P * (D + 4)) one float32 s = fl(max(amax, 1e-4) / 448) a slot

With ``io.scale_rounding: "ue8m0"`` s is the least power of two at or above that (vLLM computes it as
``exp2f(ceilf(log2f(s)))``, whose float log2 can miss by one just above a power of two; ropejit's is
exact). The codes are of the rotated k: at position 0 the rotation is exact (cos 1, sin 0), so those
tokens' bytes are compared exactly; every token's codes times its scale must give a float64
rotation of k within FP8 rounding. DeepSeek-V3.2's indexer: 64 q heads of 128 over one k head, the
first 64 rotated, neox (the import, python/tests/test_hf_indexer.py, checks that against HF)."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")

D, ROT, HEADS, PAGE, PAGES = 128, 64, 8, 16, 5


def indexer_spec(rounding):
    io = {"output": "paged_kv", "copy_v": False, "cache_layout": "fp8_indexer", "cache_dtype": "fp8_e4m3",
          "cache_scale": "per_token_head", "cache_index": "slot_mapping", "page_size": PAGE, "q_output": "separate",
          "q_output_dtype": "fp8_e4m3", "q_scale": "per_token_head"}
    if rounding != "none":
        io["scale_rounding"] = rounding
    return ropejit.Spec.from_json({
        "name": f"indexer-{rounding}", "head_dim": D, "rotary_dim": ROT, "num_q_heads": HEADS, "num_kv_heads": 1,
        "layout": "neox", "dtype": "bf16", "max_position_embeddings": 163840,
        "rope": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}, "io": io})


def encode(k, rounding):
    """vLLM's codes and scale of each row of k [T, D] (float32 values)."""
    scale = torch.clamp(k.abs().amax(-1), min=1e-4) / 448.0  # float32 quotient
    if rounding == "ue8m0":
        mantissa, exponent = torch.frexp(scale)
        scale = torch.ldexp(torch.ones_like(scale), torch.where(mantissa == 0.5, exponent - 1, exponent))
    codes = (k / scale[:, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    return codes, scale


def rotated(k, positions, spec):
    """A float64 neox rotation of k's first ROT elements at the spec's (yarn) frequencies (checked against
    HF's in test_freqs and test_hf_indexer), by HF's float32 angles (position times inv_freq in float32),
    and each element's pair magnitude (the rotation's float32 noise scales with it)."""
    freqs = spec.freqs("hf_fp32")
    inv_freq, factor = np.asarray(freqs["inv_freq"], np.float32), freqs["attention_factor"]
    angle = (positions.numpy()[:, None].astype(np.float32) * inv_freq[None, :]).astype(np.float64)
    x = k.double().numpy().copy()
    a, b = x[:, :ROT // 2].copy(), x[:, ROT // 2:ROT].copy()
    x[:, :ROT // 2] = (a * np.cos(angle) - b * np.sin(angle)) * factor
    x[:, ROT // 2:ROT] = (b * np.cos(angle) + a * np.sin(angle)) * factor
    magnitude = np.abs(k.double().numpy())
    pair = np.hypot(a, b)
    magnitude[:, :ROT // 2] = magnitude[:, ROT // 2:ROT] = pair
    return x, magnitude


@pytest.mark.parametrize("rounding", ["none", "ue8m0"])
def test_pages_match_an_encoder_of_vllms_layout(runtime, rng, rounding):
    tokens = 23
    spec = indexer_spec(rounding)
    gen = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
    q = torch.randn(tokens, HEADS, D, generator=gen).to(torch.bfloat16)
    k = (torch.randn(tokens, 1, D, generator=gen) * torch.logspace(-6, 2, tokens)[:, None, None]).to(torch.bfloat16)
    positions = torch.from_numpy(rng.integers(1, 160000, tokens))
    positions[::3] = 0  # rotated exactly: their bytes are the encoder's
    slots = torch.from_numpy(rng.permutation(PAGES * PAGE)[:tokens])
    slots[4] = -1
    cache = torch.full((PAGES, PAGE, D + 4), 0xAB, dtype=torch.uint8)
    q_out = torch.empty(tokens, HEADS, D, dtype=torch.float8_e4m3fn)
    q_scale = torch.empty(tokens, HEADS, dtype=torch.float32)
    runtime.get(spec)(q, k, positions=positions, k_cache=cache, slot_mapping=slots, q_out=q_out, q_scale_out=q_scale)

    pages = cache.reshape(PAGES, PAGE * (D + 4))
    codes_of = lambda s: pages[s // PAGE, (s % PAGE) * D:(s % PAGE + 1) * D]  # noqa: E731
    scale_of = lambda s: pages[s // PAGE, PAGE * D + 4 * (s % PAGE):PAGE * D + 4 * (s % PAGE + 1)]  # noqa: E731
    want_codes, want_scale = encode(k[:, 0].float(), rounding)
    want, magnitude = rotated(k[:, 0], positions, spec)
    written = torch.zeros(PAGES * PAGE, dtype=torch.bool)
    exact = 0
    for t in range(tokens):
        s = int(slots[t])
        if s < 0:
            continue
        written[s] = True
        scale = scale_of(s).contiguous().view(torch.float32)[0]
        if int(positions[t]) == 0:
            exact += 1
            assert torch.equal(codes_of(s), want_codes[t]), f"token {t}: codes"
            assert scale.item() == want_scale[t].item(), f"token {t}: scale"
        decoded = codes_of(s).contiguous().view(torch.float8_e4m3fn).double().numpy() * scale.item()
        # Half an e4m3 step (2^-4 of the value; 2^-10 of the scale below the normals), plus float32 noise.
        bound = np.maximum(np.abs(want[t]) * 2 ** -4, scale.item() * 2 ** -10) + 1e-6 * magnitude[t]
        assert np.all(np.abs(decoded - want[t]) <= bound), f"token {t}: {np.max(np.abs(decoded - want[t]) / bound)}"
    assert exact >= 6
    untouched = [s for s in range(PAGES * PAGE) if not written[s]]
    assert all(bool((codes_of(s) == 0xAB).all()) and bool((scale_of(s) == 0xAB).all()) for s in untouched)
    # q: FP8 codes with a scale per (token, head) out beside them, as the indexer's q is quantized.
    decoded_q = q_out.double() * q_scale.double()[..., None]
    assert bool(torch.isfinite(decoded_q).all()) and bool((q_scale > 0).all())


def test_launch_fields_name_the_one_cache():
    """k_cache is [pages, page_size, D + 4] bytes (vLLM's tensor shape); no v, no separate scale buffer."""
    spec = indexer_spec("ue8m0")
    fields = {f["name"]: f for f in spec.launch_fields()}
    assert fields["k_cache"]["use"] == "required" and fields["k_cache"]["dims"] == ["pages", "page_size", "D+4"]
    assert fields["v_cache"]["use"] == "unused" and fields["k_scale_cache"]["use"] == "unused"
