"""DeepSeek-V4's K cache cell, ``io.cache_layout: "fp8_deepseek_v4"`` (FlashMLA's MODEL1), byte for byte
against an encoder written here from the layout SGLang's ``fused_store_flashmla_cache`` and vLLM's V4
insert write (FlashMLA's tests/quant.py reads it):

  page p of P slots: bytes [576 o, 576 o + 448)     e4m3 codes of the nope values x_bf16 * 2^-e
                     bytes [576 o + 448, 576 (o+1)) the 64 rotated rope values, bf16
                     bytes [576 P + 8 o, + 7)       e + 127 for each 64-value block (ue8m0)
                     byte  576 P + 8 o + 7          0 (vLLM writes it; SGLang leaves it)

with e = ceil(log2(max(amax, 1e-4) / 448)) of the block's bf16 values (SGLang's cast_to_ue8m0 of the
rounded quotient; vLLM's ceilf(log2f(.)) agrees save where float log2 rounds onto an integer). Pages are
padded to a multiple of 576 bytes (FlashMLA's and SGLang's stride), passed as the cache's page stride.
At position 0 the rotation is exact, so those tokens' bytes are the encoder's; every token's codes
times 2^e and its rope part must give a float64 rotation within FP8 / bf16 rounding."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")

D, ROT, NOPE, HEADS, PAGE, PAGES = 512, 64, 448, 4, 16, 5
PAGE_BYTES = (PAGE * 584 + 575) // 576 * 576


def v4_spec():
    return ropejit.Spec.from_json({
        "name": "v4-cell", "head_dim": D, "rotary_dim": ROT, "rotary_slice": "trailing", "num_q_heads": HEADS,
        "num_kv_heads": 1, "layout": "interleaved", "dtype": "bf16", "max_position_embeddings": 1048576,
        "rope": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0, "original_max_position_embeddings": 65536,
                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.0, "mscale_all_dim": 0.0},
        "io": {"output": "paged_kv", "copy_v": False, "cache_layout": "fp8_deepseek_v4", "cache_dtype": "fp8_e4m3",
               "cache_index": "slot_mapping", "page_size": PAGE}})


def encode_nope(x):
    """Codes [T, 448] and scale bytes [T, 7] of bf16 nope rows x [T, 448]."""
    blocks = x.float().reshape(x.shape[0], NOPE // 64, 64)
    raw = torch.clamp(blocks.abs().amax(-1), min=1e-4) / 448.0  # float32 quotient
    bits = raw.view(torch.int32)
    biased = (bits >> 23) + ((bits & 0x7FFFFF) != 0).int()  # SGLang's cast_to_ue8m0
    inverse = ((254 - biased) << 23).view(torch.float32)
    codes = (blocks * inverse[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8)
    return codes.reshape(x.shape[0], NOPE), biased.to(torch.uint8)


def rotated_rope(k, positions, spec):
    """A float64 interleaved rotation of the trailing 64 at HF's float32 angles."""
    freqs = spec.freqs("hf_fp32")
    inv_freq = np.asarray(freqs["inv_freq"], np.float32)
    angle = (positions.numpy()[:, None].astype(np.float32) * inv_freq[None, :]).astype(np.float64)
    x = k[:, NOPE:].double().numpy()
    even, odd = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2] = (even * np.cos(angle) - odd * np.sin(angle)) * freqs["attention_factor"]
    out[:, 1::2] = (odd * np.cos(angle) + even * np.sin(angle)) * freqs["attention_factor"]
    return out


def test_cells_match_an_encoder_of_the_v4_layout(runtime, rng):
    tokens = 21
    spec = v4_spec()
    gen = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
    q = torch.randn(tokens, HEADS, D, generator=gen).to(torch.bfloat16)
    # Blocks of very different magnitudes: one below the 1e-4 floor, one at exactly 448 * 2^-3.
    k = torch.randn(tokens, 1, D, generator=gen) * torch.tensor([1.0, 30.0, 1e-6, 0.01, 1.0, 5.0, 0.2, 1.0]).repeat_interleave(64)
    k[2, 0, 64:128] = 0.0
    k[3, 0, 0:64] = torch.linspace(-56.0, 56.0, 64)  # amax 56 = 448 * 2^-3: e = -3, not -2
    k = k.to(torch.bfloat16)
    positions = torch.from_numpy(rng.integers(1, 1 << 20, tokens))
    positions[::3] = 0
    slots = torch.from_numpy(rng.permutation(PAGES * PAGE)[:tokens])
    slots[5] = -1
    storage = torch.full((PAGES, PAGE_BYTES), 0xAB, dtype=torch.uint8)
    cache = storage[:, :PAGE * 584].view(PAGES, PAGE, 584)  # pages PAGE_BYTES apart
    runtime.get(spec)(q, k, positions=positions, k_cache=cache, slot_mapping=slots)

    codes, scale_bytes = encode_nope(k[:, 0, :NOPE])
    want_rope = rotated_rope(k[:, 0], positions, spec)
    written = set()
    for t in range(tokens):
        s = int(slots[t])
        if s < 0:
            continue
        written.add(s)
        page, o = divmod(s, PAGE)
        cell = storage[page, 576 * o:576 * (o + 1)]
        scales = storage[page, 576 * PAGE + 8 * o:576 * PAGE + 8 * (o + 1)]
        assert torch.equal(scales[:7], scale_bytes[t]) and int(scales[7]) == 0, f"token {t}: scale bytes"
        if t == 3:
            assert int(scales[0]) == 127 - 3
        if int(positions[t]) == 0:
            assert torch.equal(cell[:NOPE], codes[t]), f"token {t}: codes"
            factor = torch.tensor(spec.freqs("hf_fp32")["attention_factor"], dtype=torch.float32)  # yarn's, on cos
            rope0 = (k[t, 0, NOPE:].float() * factor).to(torch.bfloat16)
            assert torch.equal(cell[NOPE:], rope0.view(torch.uint8)), f"token {t}: rope part"
        decoded = cell[:NOPE].view(torch.float8_e4m3fn).double().reshape(7, 64)
        decoded *= torch.exp2(scales[:7].double() - 127)[:, None]
        nope = k[t, 0, :NOPE].double().reshape(7, 64)
        assert bool((torch.abs(decoded - nope) <= torch.maximum(nope.abs() * 2 ** -4,
                                                                 torch.exp2(scales[:7].double() - 127 - 10)[:, None])).all())
        rope = cell[NOPE:].contiguous().view(torch.bfloat16).double().numpy()
        np.testing.assert_allclose(rope, want_rope[t], rtol=2 ** -7, atol=1e-3 * np.abs(want_rope[t]).max(),
                                   err_msg=f"token {t}: rope part")
    for page in range(PAGES):  # slots no token maps to, and the page padding, untouched
        for o in range(PAGE):
            if page * PAGE + o not in written:
                assert bool((storage[page, 576 * o:576 * (o + 1)] == 0xAB).all())
                assert bool((storage[page, 576 * PAGE + 8 * o:576 * PAGE + 8 * (o + 1)] == 0xAB).all())
        assert bool((storage[page, PAGE * 584:] == 0xAB).all())
