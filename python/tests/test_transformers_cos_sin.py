"""ropejit.transformers' cos/sin route: a layer type whose rope config ropejit cannot express (a
rope_type registered with transformers that ropejit has never seen; dynamic NTK, whose HF
frequencies follow the sequence length) runs ropejit's kernel on HF's own cos and sin. Tiny random
models (fp32, CPU, host backend) give HF's logits and tokens, the kernel runs on every layer, and
the pairing is found by the probe: Llama's rotate_half, Cohere's interleaved pairs, GLM's partial
interleaved rotation that splits the head itself."""
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # every model here is built from a config: never reach the hub
torch = pytest.importorskip("torch", reason="torch is not installed: the transformers patch is not tested")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: the patch is not tested")

import ropejit  # noqa: E402
import ropejit.compat as compat  # noqa: E402
import ropejit.torch as rope_torch  # noqa: E402
import ropejit.transformers as rope_hf  # noqa: E402
from ropejit._patch_cos_sin import CosSinRoute, cos_sin_rows, rotate_cos_sin  # noqa: E402
from transformers import modeling_rope_utils  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402

UNKNOWN = "ropejit_test_unknown"  # a rope_type only this test registers
SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, vocab_size=128, max_position_embeddings=256, pad_token_id=0)


def unknown_rope(config, device=None, seq_len=None, layer_type=None, **_):
    """A frequency rule no rope_type of ropejit's has, and an attention factor of 0.75."""
    params = config.rope_parameters
    params = params.get(layer_type, params) if layer_type else params
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * params.get("partial_rotary_factor", 1.0))
    i = torch.arange(0, dim, 2, dtype=torch.float)
    return params["rope_theta"] ** (-i / dim) * (1.0 + i / dim) / 2.0, 0.75


@pytest.fixture(autouse=True)
def runtime_and_rope_type(runtime, monkeypatch):
    rope_torch.set_runtime(runtime)
    monkeypatch.setitem(modeling_rope_utils.ROPE_INIT_FUNCTIONS, UNKNOWN, unknown_rope)


@pytest.fixture
def launches(monkeypatch):
    """The cos_sin_cache rows of every launch of the cos/sin op (the kernel really ran)."""
    seen = []
    real = compat._launch_cache

    def spy(positions, query, key, head_size, cos_sin_cache, is_neox, outputs):
        seen.append((cos_sin_cache.shape, is_neox))
        return real(positions, query, key, head_size, cos_sin_cache, is_neox, outputs)

    monkeypatch.setattr(compat, "_launch_cache", spy)
    return seen


def tiny(kind, rope, seed=0, **overrides):
    torch.manual_seed(seed)
    config_class, model_class = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                                 "cohere": (transformers.CohereConfig, transformers.CohereForCausalLM),
                                 "glm": (transformers.GlmConfig, transformers.GlmForCausalLM)}[kind]
    return model_class(config_class(**dict(SIZES, **overrides), rope_parameters=rope)).eval()


def logits(model, input_ids):
    with torch.no_grad():
        return model(input_ids).logits


def close(got, want):
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * want.abs().max().item())


@pytest.mark.parametrize("kind,rope,route", [
    ("llama", {"rope_type": UNKNOWN, "rope_theta": 10000.0}, CosSinRoute("neox", "half")),
    ("cohere", {"rope_type": UNKNOWN, "rope_theta": 10000.0}, CosSinRoute("interleaved", "even")),
    ("glm", {"rope_type": UNKNOWN, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
     CosSinRoute("interleaved", "half")),
], ids=["llama", "cohere", "glm-partial"])
def test_a_rope_type_ropejit_does_not_know_runs_from_hf_cos_sin(kind, rope, route, launches, patched):
    model = tiny(kind, rope, head_dim=16)
    input_ids = torch.randint(0, 128, (2, 37), generator=torch.Generator().manual_seed(1))
    hf = logits(model, input_ids)
    state = patched(model, strict=True)  # nothing left to HF: strict does not raise
    assert state.reason is None and not state.declined and state.specs == {}
    assert list(state.hf_angles) == ["all"] and UNKNOWN in state.hf_angles["all"]
    assert [route_ for route_, _ in state._routes.values()] == [route]
    launches.clear()  # the probe launched too: count the model's own
    ours = logits(model, input_ids)
    assert state.kernel_calls == 2 and state.fallback_calls == 0 and len(launches) == 2  # one per layer
    rotary_dim = 8 if kind == "glm" else 16
    assert launches[0] == (torch.Size([37, rotary_dim]), route.layout == "neox")  # cos [1, S, d]: one row a token
    close(ours, hf)


def test_dynamic_ntk_past_the_trained_length_runs_from_hf_cos_sin(launches, patched):
    model = tiny("llama", {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}, max_position_embeddings=32)
    prompt = torch.randint(0, 128, (1, 30), generator=torch.Generator().manual_seed(2))
    settings = dict(max_new_tokens=8, do_sample=False, use_cache=True, pad_token_id=0)
    hf_tokens = model.generate(prompt, **settings)  # crosses 32 tokens: HF's dynamic frequencies change
    long_ids = torch.randint(0, 128, (1, 50), generator=torch.Generator().manual_seed(3))
    hf_long = logits(model, long_ids)
    state = patched(model)
    assert "rope_type dynamic" in state.hf_angles["all"] and state.spec is None
    launches.clear()
    assert model.generate(prompt, **settings).tolist() == hf_tokens.tolist()
    close(logits(model, long_ids), hf_long)
    assert state.fallback_calls == 0 and state.kernel_calls == len(launches) > 0


def test_a_per_layer_type_model_runs_one_type_from_its_spec_and_one_from_hf_cos_sin(launches, patched):
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": UNKNOWN, "rope_theta": 1e6}}
    config = transformers.Gemma3TextConfig(hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                                           num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                           vocab_size=128, max_position_embeddings=256, sliding_window=8,
                                           layer_types=["sliding_attention", "full_attention"] * 2,
                                           rope_parameters=rope)
    torch.manual_seed(0)
    model = transformers.Gemma3ForCausalLM(config).eval()
    input_ids = torch.randint(0, 128, (1, 30), generator=torch.Generator().manual_seed(4))
    hf = logits(model, input_ids)
    state = patched(model, strict=True)
    assert list(state.specs) == ["sliding_attention"] and list(state.hf_angles) == ["full_attention"]
    launches.clear()
    ours = logits(model, input_ids)
    assert state.kernel_calls_by_type == {"sliding_attention": 2, "full_attention": 2} and len(launches) == 2
    close(ours, hf)


def test_without_hf_angles_the_layer_type_keeps_hf(patched):
    model = tiny("llama", {"rope_type": UNKNOWN, "rope_theta": 10000.0})
    with pytest.warns(RuntimeWarning, match=f"keeps HF's RoPE: ropejit cannot express the config.*{UNKNOWN}"):
        state = patched(model, hf_angles=False)
    assert state.hf_angles == {} and modeling_llama.apply_rotary_pos_emb.__name__ == "apply_rotary_pos_emb" \
        and not hasattr(modeling_llama.apply_rotary_pos_emb, "ropejit_original")


def test_a_function_no_route_matches_keeps_hf_and_says_why(monkeypatch, patched):
    """An apply function that rotates the other way (nanochat's sign) matches no route: HF keeps it."""
    original = modeling_llama.apply_rotary_pos_emb

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        return original(q, k, cos, -sin, unsqueeze_dim)

    monkeypatch.setattr(modeling_llama, "apply_rotary_pos_emb", apply_rotary_pos_emb)
    model = tiny("llama", {"rope_type": UNKNOWN, "rope_theta": 10000.0})
    with pytest.warns(RuntimeWarning, match="HF's cos and sin through the kernel: neox pairs from the half columns "
                                            "differ by"):
        state = patched(model)
    assert state.reason is not None and state.hf_angles == {}
    with pytest.raises(ropejit.Error, match="HF's cos and sin through the kernel"):
        rope_hf.patch(tiny("llama", {"rope_type": UNKNOWN, "rope_theta": 10000.0}), strict=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_cos_sin_rotate_closer_to_float64_than_hf(dtype):
    """HF's formula rounds each product to the model's dtype; the kernel reads the same rounded
    cos and sin and rounds once: never further from the float64 rotation of those values."""
    gen = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 4, 9, 32, generator=gen).to(dtype), torch.randn(2, 2, 9, 32, generator=gen).to(dtype)
    angle = torch.rand(2, 9, 16, generator=gen, dtype=torch.float64) * 50
    cos, sin = torch.cat((angle, angle), -1).cos().to(dtype), torch.cat((angle, angle), -1).sin().to(dtype)
    want = modeling_llama.apply_rotary_pos_emb(q.double(), k.double(), cos.double(), sin.double())
    hf = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    ours = rotate_cos_sin("qk", q, k, cos, sin, CosSinRoute("neox", "half"), 1)
    for w, h, o in zip(want, hf, ours):
        ours_error, hf_error = (o.double() - w).abs(), (h.double() - w).abs()
        # round to nearest once: half an ulp, plus float32's own error before that rounding
        assert (ours_error <= 0.5 * torch.finfo(dtype).eps * w.abs() + 1e-5).all()
        assert ours_error.sum() < hf_error.sum()


def test_cos_sin_rows_take_one_value_per_pair():
    cos = torch.arange(12.0).view(1, 2, 6)
    sin = -cos
    assert cos_sin_rows(cos, sin, CosSinRoute("neox", "half")).tolist() == [[0, 1, 2, 0, -1, -2],
                                                                             [6, 7, 8, -6, -7, -8]]
    assert cos_sin_rows(cos, sin, CosSinRoute("interleaved", "even")).tolist() == [[0, 2, 4, 0, -2, -4],
                                                                                   [6, 8, 10, -6, -8, -10]]
