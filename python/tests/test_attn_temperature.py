"""op attn_temperature (Llama 4's NoPE layers) from Python: the layer map imports it for the NoPE
layers of a transformers Llama 4 config, and the kernel scales q in place as HF's attention
module does (its own code, run here), on the host backend."""
import numpy as np
import pytest

import ropejit
from reference import assert_close, to_float64, to_storage


def llama4_text_config(**overrides):
    transformers = pytest.importorskip("transformers")
    options = dict(num_hidden_layers=8, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                   head_dim=64, intermediate_size=64, intermediate_size_mlp=64, vocab_size=32)
    options.update(overrides)
    return transformers.Llama4TextConfig(**options)


def test_nope_layers_import_the_op_with_the_configs_scales():
    config = llama4_text_config(floor_scale=16, attn_scale=0.25)
    specs, layers = ropejit.Spec.from_hf_layers(config)
    expected = ["attn_temperature" if use == 0 else "all" for use in config.no_rope_layers]
    assert layers == expected
    spec = specs["attn_temperature"]
    assert spec.op == "attn_temperature"
    assert spec.to_dict()["attn_temperature"] == {"floor_scale": 16, "attn_scale": 0.25}
    off = llama4_text_config(attn_temperature_tuning=False)
    _, layers = ropejit.Spec.from_hf_layers(off)
    assert layers == [None if use == 0 else "all" for use in off.no_rope_layers]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_kernel_scales_q_as_hfs_attention_does(runtime, rng, dtype):
    torch = pytest.importorskip("torch")
    config = llama4_text_config(floor_scale=16, attn_scale=0.25)
    specs, _ = ropejit.Spec.from_hf_layers(config, dtype=dtype)
    kernel = runtime.get(specs["attn_temperature"])
    tokens = 37
    q = to_storage(rng.standard_normal((tokens, 4, 64)).astype(np.float32), dtype)
    positions = rng.integers(0, 200, tokens).astype(np.int64)
    before = to_float64(q, dtype)
    (result,) = kernel(q, positions=positions)
    assert result is q
    # HF's steps (modeling_llama4.py Llama4TextAttention.forward), in torch float32.
    p = torch.from_numpy(positions)
    scales = torch.log1p(torch.floor((p.float() + 1.0) / 16)) * 0.25 + 1.0
    expected = before * scales.double().numpy()[:, None, None]
    assert_close(q, expected, dtype, "q")
    assert np.any(scales.numpy() != 1.0), "positions past floor_scale scale q"
    with pytest.raises(ropejit.ArgumentError, match="k"):
        kernel(q, k=q.copy(), positions=positions)
