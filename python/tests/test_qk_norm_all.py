"""The all-heads QK-norm (qk_norm.scope "all") against transformers' own modules.

OLMo 2, OLMo 3 (both layer types) and MiniMax-M2 (partial rotary) configs are imported with
``Spec.from_hf``; ropejit's fused kernel (host backend, fp32) on raw q and k projections must match
the family's attention ``q_norm`` / ``k_norm`` (random weights) over the whole projection followed
by its ``apply_rotary_pos_emb`` with its rotary module's cos and sin."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SIZES = dict(hidden_size=192, num_attention_heads=6, num_key_value_heads=2, num_hidden_layers=4, rms_norm_eps=1e-5)


def olmo2():
    from transformers.models.olmo2 import modeling_olmo2 as m
    config = transformers.Olmo2Config(**SIZES, rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    return config, m.Olmo2Attention(config, layer_idx=0), m.Olmo2RotaryEmbedding(config), m.apply_rotary_pos_emb


def olmo3():
    from transformers.models.olmo3 import modeling_olmo3 as m
    rope = {"full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                               "rope_theta": 500000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}}
    config = transformers.Olmo3Config(**SIZES, rope_parameters=rope, max_position_embeddings=4096)
    return config, m.Olmo3Attention(config, layer_idx=3), m.Olmo3RotaryEmbedding(config), m.apply_rotary_pos_emb


def minimax_m2():
    from transformers.models.minimax_m2 import modeling_minimax_m2 as m
    sizes = dict(SIZES, num_hidden_layers=1)
    config = transformers.MiniMaxM2Config(**sizes, head_dim=64, num_local_experts=4, num_experts_per_tok=2,
                                          rope_parameters={"rope_type": "default", "rope_theta": 5000000.0,
                                                           "partial_rotary_factor": 0.5})
    return config, m.MiniMaxM2Attention(config, layer_idx=0), m.MiniMaxM2RotaryEmbedding(config), m.apply_rotary_pos_emb


@pytest.mark.parametrize("family, layer_type", [(olmo2, None), (olmo3, "sliding_attention"), (olmo3, "full_attention"),
                                                (minimax_m2, None)])
def test_matches_the_family_attention(runtime, rng, family, layer_type):
    config, attention, rotary, apply_rotary = family()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type=layer_type)
    assert spec.qk_norm["scope"] == "all" and spec.qk_norm["weight"] == "per_head"
    hq, hkv, d = spec.num_q_heads, spec.num_kv_heads, spec.head_dim
    assert attention.q_norm.weight.shape == (hq * d,) and attention.k_norm.weight.shape == (hkv * d,)
    tokens = 37
    # Projections far from unit RMS, so a norm over the wrong extent is visible.
    q_raw = (rng.standard_normal((tokens, hq * d)) * 3.0 + 0.5).astype(np.float32)
    k_raw = (rng.standard_normal((tokens, hkv * d)) * 0.2 - 0.1).astype(np.float32)
    wq = rng.standard_normal(hq * d).astype(np.float32)
    wk = rng.standard_normal(hkv * d).astype(np.float32)
    positions = rng.integers(0, 3000, tokens).astype(np.int64)

    with torch.no_grad():
        attention.q_norm.weight.copy_(torch.from_numpy(wq))
        attention.k_norm.weight.copy_(torch.from_numpy(wk))
        q4 = attention.q_norm(torch.from_numpy(q_raw)[None]).view(1, tokens, hq, d).transpose(1, 2)
        k4 = attention.k_norm(torch.from_numpy(k_raw)[None]).view(1, tokens, hkv, d).transpose(1, 2)
        position_ids = torch.from_numpy(positions)[None]
        cos, sin = rotary(q4, position_ids, layer_type) if layer_type else rotary(q4, position_ids)
        q_hf, k_hf = apply_rotary(q4, k4, cos, sin)
    want_q = q_hf.transpose(1, 2)[0].numpy()
    want_k = k_hf.transpose(1, 2)[0].numpy()

    q = q_raw.reshape(tokens, hq, d).copy()
    k = k_raw.reshape(tokens, hkv, d).copy()
    runtime.get(spec)(q, k, positions=positions, q_norm_weight=wq, k_norm_weight=wk)
    for name, got, want in (("q", q, want_q), ("k", k, want_k)):
        error = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
        assert error < 2e-6, f"{name}: max error {error:.3g} of the largest value"
    # A norm per head instead gives other values (the test can tell the two apart).
    per_head = dict(spec.to_dict(), qk_norm=dict(spec.qk_norm, type="rmsnorm", scope="head", weight="none"))
    q_head = q_raw.reshape(tokens, hq, d).copy()
    runtime.get(ropejit.Spec.from_json(per_head))(q_head, k_raw.reshape(tokens, hkv, d).copy(), positions=positions)
    assert np.abs(q_head - want_q).max() > 1e-2 * np.abs(want_q).max()


def test_import_names_the_scope_and_weight_shapes():
    spec = ropejit.Spec.from_hf({"model_type": "olmo2", "hidden_size": 4096, "num_attention_heads": 32,
                                 "num_key_value_heads": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
                                 "rope_theta": 500000})
    assert spec.qk_norm == {"type": "rmsnorm", "eps": 1e-6, "weight": "per_head", "weight_offset": 0.0, "scope": "all",
                            "bias": "none", "heads": "q_and_k"}
    fields = {f["name"]: f for f in spec.launch_fields()}
    assert fields["q_norm_weight"]["dims"] == ["Hq", "D"]
    assert fields["k_norm_weight"]["dims"] == ["Hkv", "D"]
