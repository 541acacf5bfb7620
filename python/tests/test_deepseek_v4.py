"""DeepSeek-V4's pre-attention RoPE against transformers' own module.

A V4 config (both rope blocks: ``main`` for sliding layers, yarn ``compress`` for the compressed
ones) is imported with ``Spec.from_hf``; ropejit's kernel (host backend, fp32) on raw q and kv
projections must match the attention's ``q_b_norm`` (no weight: ones are passed) and ``kv_norm``
(random weight) followed by V4's ``apply_rotary_pos_emb``, which rotates each head's *trailing*
rope slice with interleaved pairs. In fp32 HF's dtype casts (cos/sin and the unweighted norm's
inverse RMS to q's dtype) are no-ops, so the two must agree to float32 rounding."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def v4_config():
    rope = {"main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
            "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0,
                         "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
                         "partial_rotary_factor": 0.125}}
    return transformers.DeepseekV4Config(
        hidden_size=256, num_attention_heads=4, head_dim=512, num_hidden_layers=4, q_lora_rank=64, o_lora_rank=32,
        o_groups=2, rope_parameters=rope, max_position_embeddings=65536, rms_norm_eps=1e-6,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "sliding_attention"])


@pytest.mark.parametrize("layer_type, label", [("sliding_attention", "main"), ("compressed_sparse_attention", "compress"),
                                               ("compress", "compress")])
def test_matches_the_v4_attention(runtime, rng, layer_type, label):
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
    config = v4_config()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type=layer_type)
    assert (spec.rotary_slice, spec.layout, spec.head_dim, spec.rotary_dim, spec.num_kv_heads) == \
        ("trailing", "interleaved", 512, 64, 1)
    hq, d = spec.num_q_heads, spec.head_dim
    tokens = 29
    q_raw = (rng.standard_normal((tokens, hq, d)) * 3.0 + 0.5).astype(np.float32)
    kv_raw = (rng.standard_normal((tokens, 1, d)) * 0.2 - 0.1).astype(np.float32)
    w_kv = rng.standard_normal(d).astype(np.float32)
    positions = rng.integers(0, 20000, tokens).astype(np.int64)

    rotary = m.DeepseekV4RotaryEmbedding(config)
    q_norm = m.DeepseekV4UnweightedRMSNorm(eps=config.rms_norm_eps)
    kv_norm = m.DeepseekV4RMSNorm(d, eps=config.rms_norm_eps)
    with torch.no_grad():
        kv_norm.weight.copy_(torch.from_numpy(w_kv))
        q4 = q_norm(torch.from_numpy(q_raw)[None].transpose(1, 2))           # [1, H, T, D]
        kv4 = kv_norm(torch.from_numpy(kv_raw)[None]).transpose(1, 2)          # [1, 1, T, D]
        cos, sin = rotary(q4, torch.from_numpy(positions)[None], layer_type=label)
        want_q = m.apply_rotary_pos_emb(q4, cos, sin).transpose(1, 2)[0].numpy()
        want_k = m.apply_rotary_pos_emb(kv4, cos, sin).transpose(1, 2)[0].numpy()

    q, k = q_raw.copy(), kv_raw.copy()
    runtime.get(spec)(q, k, positions=positions, q_norm_weight=np.ones(d, np.float32), k_norm_weight=w_kv)
    for name, got, want in (("q", q, want_q), ("k", k, want_k)):
        error = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
        assert error < 2e-6, f"{name}: max error {error:.3g} of the largest value"
    # The leading 448 elements are only normalized, so the rotation really sits at the tail: the
    # same spec with a leading slice differs there.
    leading = dict(spec.to_dict())
    leading.pop("rotary_slice")
    q_lead = q_raw.copy()
    runtime.get(ropejit.Spec.from_json(leading))(q_lead, kv_raw.copy(), positions=positions,
                                                 q_norm_weight=np.ones(d, np.float32), k_norm_weight=w_kv)
    assert np.abs(q_lead - want_q).max() > 1e-2 * np.abs(want_q).max()


def test_layer_map_labels_the_rope_blocks():
    # Sliding layers rotate with rope_parameters.main, the compressed ones with .compress.
    specs, layers = ropejit.Spec.from_hf_layers(v4_config(), dtype="fp32")
    assert layers == ["main", "compress", "compress", "main"]
    assert specs["main"].rope_type == "default" and specs["compress"].rope_type == "yarn"


@pytest.mark.parametrize("label", ["main", "compress"])
def test_inverse_rope_matches_the_v4_output_rotation(runtime, rng, label):
    # HF: attn_output = apply_rotary_pos_emb(attn_output, cos, -sin) at the query positions.
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
    config = v4_config()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type=label, op="inverse_rope")
    assert (spec.op, spec.rotary_slice, spec.qk_norm) == ("inverse_rope", "trailing", None)
    hq, d = spec.num_q_heads, spec.head_dim
    tokens = 23
    out_raw = rng.standard_normal((tokens, hq, d)).astype(np.float32)
    positions = rng.integers(0, 20000, tokens).astype(np.int64)
    rotary = m.DeepseekV4RotaryEmbedding(config)
    with torch.no_grad():
        o4 = torch.from_numpy(out_raw)[None].transpose(1, 2)                   # [1, H, T, D], as HF applies it
        cos, sin = rotary(o4, torch.from_numpy(positions)[None], layer_type=label)
        want = m.apply_rotary_pos_emb(o4, cos, -sin).transpose(1, 2)[0].numpy()
    got = out_raw.copy()
    runtime.get(spec)(got, positions=positions)
    error = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
    assert error < 2e-6, f"max error {error:.3g} of the largest value"
    assert np.array_equal(got[..., : d - 64], out_raw[..., : d - 64])  # the nope part is untouched
    # Undoing the forward rotation: rope then inverse_rope gives the input back (to rounding); yarn's
    # attention factor scales cos and sin both ways in HF, so only the unscaled block round-trips.
    if label != "main":
        return
    forward = dict(spec.to_dict(), op="rope")
    k = np.zeros((tokens, 1, d), np.float32) + 1.0
    x = out_raw.copy()
    runtime.get(ropejit.Spec.from_json(forward))(x, k, positions=positions)
    runtime.get(spec)(x, positions=positions)
    assert np.abs(x - out_raw).max() < 1e-5 * np.abs(out_raw).max()


def test_paged_append_writes_kv_once(runtime, rng):
    # K = V: io.output paged_kv with copy_v false writes the rotated kv head into k_cache only.
    config = v4_config()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type="main")
    paged = dict(spec.to_dict())
    paged["io"] = dict(paged["io"], output="paged_kv", copy_v=False, page_size=16)
    paged_spec = ropejit.Spec.from_json(paged)
    uses = {f["name"]: f["use"] for f in paged_spec.launch_fields()}
    assert (uses["k_cache"], uses["v_cache"], uses["v"]) == ("required", "unused", "unused")
    hq, d, tokens = spec.num_q_heads, spec.head_dim, 21
    q_raw = rng.standard_normal((tokens, hq, d)).astype(np.float32)
    kv_raw = rng.standard_normal((tokens, 1, d)).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    ones = np.ones(d, np.float32)
    positions = np.arange(100, 100 + tokens, dtype=np.int64)
    slots = rng.permutation(64)[:tokens].astype(np.int64)
    k_cache = np.full((4, 16, 1, d), np.nan, np.float32)
    q = q_raw.copy()
    outputs = runtime.get(paged_spec)(q, kv_raw.copy(), positions=positions, k_cache=k_cache, slot_mapping=slots,
                                      q_norm_weight=ones, k_norm_weight=w)
    assert len(outputs) == 2
    q_want, kv_want = q_raw.copy(), kv_raw.copy()
    runtime.get(spec)(q_want, kv_want, positions=positions, q_norm_weight=ones, k_norm_weight=w)
    np.testing.assert_array_equal(q, q_want)
    np.testing.assert_array_equal(k_cache.reshape(64, d)[slots], kv_want[:, 0])
