"""Op mla_append's ``io.cache_layout: "fp8_ds_mla"`` (vLLM's DeepSeek FP8 latent row, 656 bytes a
token for kv_lora_rank 512 and a 64-wide rope part) byte for byte against an encoder written here
from vLLM's documented layout (csrc/cache_kernels.cu ``concat_and_cache_ds_mla_kernel``):

  bytes [0, L)          e4m3 codes of kv_c / s_t, the quotient correctly rounded, saturated
  bytes [L, L + L / 32) one float32 scale s_t = max(fl(amax_t / 448), FLT_MIN) per 128-value tile t
  bytes [L + L / 32, .) the rotated k_pe in the input dtype (bf16)

With ``io.scale_rounding: "ue8m0"`` s_t is the least power of two >= that (the SM120 and DeepSeek
ue8m0 variant). The rope part is compared with the same spec's plain latent row (cache_layout nhd,
no FP8), which stores the same rotation."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")

RANK, ROPE, NOPE, HEADS, PAGE, PAGES = 512, 64, 128, 4, 16, 6


def ds_spec(layout="fp8_ds_mla", rounding="none"):
    io = {"output": "paged_kv", "cache_index": "slot_mapping", "page_size": PAGE}
    if layout == "fp8_ds_mla":
        io.update(cache_layout=layout, cache_dtype="fp8_e4m3")
        if rounding != "none":
            io["scale_rounding"] = rounding
    return ropejit.Spec.from_json({
        "name": f"ds-mla-{layout}-{rounding}", "op": "mla_append", "head_dim": NOPE + ROPE, "rotary_dim": ROPE,
        "rotary_slice": "trailing", "num_q_heads": HEADS, "num_kv_heads": 1, "layout": "interleaved",
        "dtype": "bf16", "max_position_embeddings": 163840,
        "rope": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
        "mla_append": {"kv_lora_rank": RANK}, "io": io})


def encode_latent(kv_c, rounding):
    """The row's codes and scales from kv_c [T, L] (bf16), as vLLM's kernel computes them."""
    x = kv_c.float().reshape(kv_c.shape[0], RANK // 128, 128)
    scale = torch.clamp(x.abs().amax(-1) / 448.0, min=torch.finfo(torch.float32).tiny)  # float32 quotient
    if rounding == "ue8m0":
        mantissa, exponent = torch.frexp(scale)
        scale = torch.ldexp(torch.ones_like(scale), torch.where(mantissa == 0.5, exponent - 1, exponent))
    codes = (x / scale[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    return codes.reshape(kv_c.shape[0], RANK), scale.contiguous().view(torch.uint8).reshape(kv_c.shape[0], -1)


def launch(runtime, spec, q, k_pe, kv_c, positions, slots, cache):
    runtime.get(spec)(q.clone(), positions=positions, k_pe=k_pe, kv_c=kv_c, k_cache=cache, slot_mapping=slots)
    return cache


@pytest.mark.parametrize("rounding", ["none", "ue8m0"])
def test_row_bytes_match_an_encoder_of_vllms_layout(runtime, rng, rounding):
    tokens = 29
    gen = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
    q = torch.randn(tokens, HEADS, NOPE + ROPE, generator=gen).to(torch.bfloat16)
    k_pe = torch.randn(tokens, ROPE, generator=gen).to(torch.bfloat16)
    # Tiles of very different magnitudes (one all zero, one tiny: the FLT_MIN and subnormal corners).
    kv_c = torch.randn(tokens, RANK, generator=gen) * torch.tensor([1.0, 300.0, 1e-3, 0.0]).repeat_interleave(128)
    kv_c[3, 256:384] = 1e-39  # below FLT_MIN / 448 * 448: the scale's floor
    kv_c = kv_c.to(torch.bfloat16)
    positions = torch.from_numpy(rng.integers(0, 160000, tokens))
    slots = torch.from_numpy(rng.permutation(PAGES * PAGE)[:tokens])
    slots[5] = -1  # a padded token: its slot is skipped

    row = RANK + RANK // 32 + 2 * ROPE
    assert row == 656
    cache = torch.full((PAGES, PAGE, row), 0xAB, dtype=torch.uint8)
    launch(runtime, ds_spec(rounding=rounding), q, k_pe, kv_c, positions, slots, cache)
    plain = torch.full((PAGES, PAGE, RANK + ROPE), float("nan"), dtype=torch.bfloat16)
    launch(runtime, ds_spec("nhd"), q, k_pe, kv_c, positions, slots, plain)

    codes, scales = encode_latent(kv_c, rounding)
    flat, plain_flat = cache.reshape(-1, row), plain.reshape(-1, RANK + ROPE)
    written = torch.zeros(PAGES * PAGE, dtype=torch.bool)
    for t in range(tokens):
        slot = int(slots[t])
        if slot < 0:
            continue
        written[slot] = True
        assert torch.equal(flat[slot, :RANK], codes[t]), f"token {t}: codes"
        assert torch.equal(flat[slot, RANK:RANK + RANK // 32], scales[t]), f"token {t}: scales"
        rope = plain_flat[slot, RANK:].contiguous().view(torch.uint8)
        assert torch.equal(flat[slot, RANK + RANK // 32:], rope), f"token {t}: rope part"
    assert bool((flat[~written] == 0xAB).all()), "a slot no token maps to was written"
    # The codes decode to kv_c within FP8's rounding (the layout's reading, as FlashMLA dequantizes).
    values = cache.reshape(-1, row)[slots[slots >= 0], :RANK].view(torch.float8_e4m3fn).float().reshape(-1, 4, 128)
    scale_f = cache.reshape(-1, row)[slots[slots >= 0], RANK:RANK + 16].contiguous().view(torch.float32)
    decoded = (values * scale_f[..., None]).reshape(-1, RANK)
    expected = kv_c[slots >= 0].float()
    assert torch.allclose(decoded, expected, rtol=2 ** -3, atol=scale_f.max().item() * 2 ** -9)


def test_refusals_name_the_field(runtime):
    """The layout needs op mla_append, FP8 e4m3 codes, bf16/fp16 inputs and aligned widths."""
    base = ds_spec().to_dict()
    cases = [
        (lambda s: s["io"].update(cache_dtype="auto"), "/io/cache_dtype"),
        (lambda s: s.update(dtype="fp32"), "/dtype"),
        (lambda s: s["mla_append"].update(kv_lora_rank=256), "/mla_append/kv_lora_rank"),
        (lambda s: s["io"].update(cache_scale="per_token_head"), "/io/cache_scale"),
    ]
    for edit, field in cases:
        spec = {**base, "io": dict(base["io"]), "mla_append": dict(base["mla_append"])}
        edit(spec)
        with pytest.raises(ropejit.SpecError, match=field):
            ropejit.Spec.from_json(spec)
    rope = {k: v for k, v in base.items() if k != "mla_append"}
    rope.update(op="rope", num_kv_heads=1)
    with pytest.raises(ropejit.SpecError, match=r"must be nhd or hnd when op is rope \(fp8_ds_mla: op mla_append\)"):
        ropejit.Spec.from_json(rope)
