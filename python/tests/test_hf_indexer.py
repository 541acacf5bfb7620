"""Spec.from_hf(config, layer_type="indexer"): the sparse-attention indexer's rotation (DeepSeek-V3.2,
GLM-5, AXK2) against transformers' own *Indexer.forward. The indexer runs on a tiny random config
of the family's own class; its q (wq_b's output), k before its norm (wk's output) and after it
(k_norm's), and the rotated parts (the apply function's results) are captured there, and the
kernel's output of the same q and unnormalized k, with k_norm's weight and bias, must equal them:
k's LayerNorm, pairing, slice, frequencies and the rope block's attention factor."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the indexer tests are not run")
pytest.importorskip("transformers", reason="transformers is not installed: the indexer tests are not run")

import ropejit  # noqa: E402
from ropejit import _hf_probe  # noqa: E402

SMALL = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=16,
             qk_nope_head_dim=16, v_head_dim=16, index_n_heads=5, index_head_dim=48, index_topk=4,
             num_hidden_layers=1, vocab_size=64, intermediate_size=64, max_position_embeddings=8192)
# (model_type, its indexer class, the apply function its forward calls, the main attention's layout)
FAMILIES = [("deepseek_v32", "DeepseekV32Indexer", "apply_rotary_pos_emb", "interleaved"),
            ("glm_moe_dsa", "GlmMoeDsaIndexer", "apply_rotary_pos_emb_interleave", "interleaved"),
            ("axk2", "AXK2Indexer", "apply_rotary_pos_emb", "interleaved")]
ROPE = [{"rope_type": "default", "rope_theta": 10000.0},
        {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}]


def _config(model_type, rope):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[model_type](**SMALL, rope_parameters=dict(rope))


def _hf_indexer_rotation(model_type, indexer_class, apply_name, config, positions, generator):
    """q [T, H, D], k [T, 1, D] before and after k_norm, k_norm's weight and bias, and the rotated
    parts from HF."""
    import importlib

    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    rotary_class = next(getattr(module, n) for n in dir(module) if n.endswith("RotaryEmbedding"))
    indexer = getattr(module, indexer_class)(config, layer_idx=0).float()
    for p in indexer.parameters():  # random weights, k_norm's too: nothing at its default of ones / zeros
        p.data = torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.5
    seen = {}
    indexer.wq_b.register_forward_hook(lambda m, a, out: seen.__setitem__("q", out.detach().clone()))
    indexer.wk.register_forward_hook(lambda m, a, out: seen.__setitem__("k_in", out.detach().clone()))
    indexer.k_norm.register_forward_hook(lambda m, a, out: seen.__setitem__("k", out.detach().clone()))
    original = getattr(module, apply_name)

    def recording(q, k, cos, sin, *args, **kwargs):
        out = original(q, k, cos, sin, *args, **kwargs)
        seen["rotated"] = tuple(t.detach().clone() for t in out)
        return out

    tokens = positions.shape[-1]
    hidden = torch.randn(1, tokens, config.hidden_size, generator=generator)
    q_resid = torch.randn(1, tokens, config.q_lora_rank, generator=generator)
    cos, sin = rotary_class(config)(hidden, positions)
    mask = torch.zeros(1, tokens, tokens)
    setattr(module, apply_name, recording)
    try:
        indexer(hidden, q_resid, (cos, sin), mask, positions)
    finally:
        setattr(module, apply_name, original)
    heads, dim = config.index_n_heads, config.index_head_dim
    norm = (indexer.k_norm.weight.detach().numpy(), indexer.k_norm.bias.detach().numpy())
    return (seen["q"].view(tokens, heads, dim), seen["k_in"].view(tokens, 1, dim), seen["k"].view(tokens, 1, dim),
            norm, seen["rotated"][0][0], seen["rotated"][1][0])


@pytest.mark.parametrize("rope", ROPE, ids=lambda r: r["rope_type"])
@pytest.mark.parametrize("model_type, indexer_class, apply_name, main_layout", FAMILIES)
def test_indexer_spec_rotates_as_hfs_indexer(runtime, model_type, indexer_class, apply_name, main_layout, rope):
    config = _config(model_type, rope)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = ropejit.Spec.from_hf(config, layer_type="indexer", dtype="fp32")
    main = ropejit.Spec.from_hf(config, dtype="fp32")
    assert (spec.num_q_heads, spec.num_kv_heads, spec.head_dim, spec.rotary_dim) == (5, 1, 48, 16)
    assert main.layout == main_layout and spec.layout == ("interleaved" if "interleave" in apply_name else "neox")
    assert spec.qk_norm == {"type": "layernorm", "eps": 1e-6, "weight": "per_head", "weight_offset": 0.0,
                            "scope": "head", "bias": "per_head", "heads": "k"}, spec.qk_norm
    assert not any("k_norm" in w for w in spec.warnings), spec.warnings  # fused: no step left to the caller
    generator = torch.Generator().manual_seed(47)
    positions = torch.sort(torch.randint(0, 6000, (1, 37), generator=generator)).values
    q, k_in, k, (weight, bias), q_rot, k_rot = _hf_indexer_rotation(model_type, indexer_class, apply_name, config,
                                                                    positions, generator)
    kernel = runtime.get(ropejit.Spec.from_json(dict(spec.to_dict(), io={"output": "separate"})))
    q_out, k_out = kernel(q.numpy(), k_in.numpy(), positions=positions[0].numpy().astype(np.int64),
                          k_norm_weight=weight, k_norm_bias=bias)[:2]
    q_out, k_out = np.asarray(q_out, dtype=np.float64), np.asarray(k_out, dtype=np.float64)
    rope_dim = spec.rotary_dim
    for name, got, want_rot, after_norm in (("q", q_out, q_rot, q), ("k", k_out, k_rot, k)):
        if apply_name.endswith("_interleave"):  # HF leaves pair j at j and j + d/2; the kernel keeps it in place
            want_rot = _hf_probe._deinterleave(want_rot, rope_dim)
        want = want_rot.double().numpy()
        error = np.abs(got[..., :rope_dim] - want).max() / max(1.0, np.abs(want).max())
        assert error < 2e-5, f"{model_type} {rope['rope_type']}: {name}'s rotated part differs by {error:.3g}"
        want_pass = after_norm.double().numpy()[..., rope_dim:]
        error = np.abs(got[..., rope_dim:] - want_pass).max() / max(1.0, np.abs(want_pass).max())
        assert error < 2e-5, f"{model_type}: {name}'s pass-through differs from HF's by {error:.3g}"
    assert np.array_equal(q_out[..., rope_dim:], q.double().numpy()[..., rope_dim:]), "q is not normed: passed as it is"


def test_indexer_of_a_family_without_one_is_refused():
    llama = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 128}
    with pytest.raises(ropejit.Error, match=r"layer_type.*\"indexer\" is not allowed.*deepseek_v32"):
        ropejit.Spec.from_hf(llama, layer_type="indexer")
    config = _config("deepseek_v32", ROPE[0]).to_dict()
    del config["index_head_dim"]
    with pytest.raises(ropejit.Error, match="index_head_dim"):
        ropejit.Spec.from_hf(config, layer_type="indexer")
