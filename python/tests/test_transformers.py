"""ropejit.transformers: tiny randomly initialised Llama and Qwen2 models (built locally, fp32,
CPU) give the same logits and generated tokens with their RoPE patched to ropejit; a bf16-cast
Llama gives the logits of the same model loaded with from_pretrained(dtype=bf16); per-layer-type
models (Gemma 3, GPT-OSS, Gemma 3n, Gemma 4) run each layer type with its own spec."""
import collections
import os
import warnings

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # every model here is built from a config: never reach the hub
torch = pytest.importorskip("torch", reason="torch is not installed: the transformers patch is not tested")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: the patch is not tested")

import ropejit  # noqa: E402
import ropejit.torch as rope_torch  # noqa: E402
import ropejit.transformers as rope_hf  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402
from transformers.models.qwen2 import modeling_qwen2  # noqa: E402
from transformers.models.qwen2_vl import modeling_qwen2_vl  # noqa: E402

LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, vocab_size=128, max_position_embeddings=256)


def tiny_model(kind, rope=None, seed=0):
    torch.manual_seed(seed)
    if kind == "llama":
        config = transformers.LlamaConfig(**SIZES, rope_parameters=rope or LLAMA3_ROPE)
        return transformers.LlamaForCausalLM(config).eval()
    config = transformers.Qwen2Config(**SIZES, rope_parameters=rope or {"rope_type": "default", "rope_theta": 1e6})
    return transformers.Qwen2ForCausalLM(config).eval()


@pytest.fixture(autouse=True, scope="module")
def host_runtime(runtime):
    rope_torch.set_runtime(runtime)


@pytest.fixture
def kernel_calls(monkeypatch):
    """The positions of every ropejit.torch.apply_rope call the patch makes."""
    seen = []
    real = rope_torch.apply_rope

    def spy(q, k, positions, **kwargs):
        seen.append(positions.clone())
        return real(q, k, positions, **kwargs)

    monkeypatch.setattr(rope_torch, "apply_rope", spy)
    return seen


def logits(model, input_ids):
    with torch.no_grad():
        return model(input_ids).logits


@pytest.mark.parametrize("kind,module", [("llama", modeling_llama), ("qwen2", modeling_qwen2)], ids=["llama", "qwen2"])
def test_logits_match_and_the_kernel_runs(kind, module, kernel_calls, patched):
    model = tiny_model(kind)
    input_ids = torch.randint(0, 128, (2, 40), generator=torch.Generator().manual_seed(1))
    hf = logits(model, input_ids)
    state = patched(model)
    kernel_calls.clear()  # patch() compared ropejit with HF on a probe; count the model's calls only
    assert state.reason is None and state.modules == [module.__name__]
    assert (state.spec.rope_type, state.spec.dtype, state.spec.io["output"]) == (
        "llama3" if kind == "llama" else "default", "fp32", "separate")
    assert module.apply_rotary_pos_emb.ropejit_original is not None
    ours = logits(model, input_ids)
    assert len(kernel_calls) == 2 and state.kernel_calls == 2 and state.fallback_calls == 0  # one per layer
    assert kernel_calls[0].tolist() == [list(range(40))]  # HF's [1, S] position_ids
    torch.testing.assert_close(ours, hf, rtol=1e-4, atol=1e-4 * hf.abs().max().item())


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_generation_with_kv_cache_gives_the_same_tokens(kind, kernel_calls, patched):
    model = tiny_model(kind)
    prompt = torch.randint(0, 128, (1, 7), generator=torch.Generator().manual_seed(2))
    settings = dict(max_new_tokens=6, do_sample=False, use_cache=True, pad_token_id=0)
    hf_tokens = model.generate(prompt, **settings)
    patched(model)
    ours = model.generate(prompt, **settings)
    assert ours.tolist() == hf_tokens.tolist()
    decode_positions = [p.tolist() for p in kernel_calls if p.shape[-1] == 1]
    assert [[7]] in decode_positions and [[11]] in decode_positions  # decode steps past the cached prompt


def test_unpatch_restores_hf(kernel_calls):
    model = tiny_model("llama")
    original = modeling_llama.apply_rotary_pos_emb
    input_ids = torch.randint(0, 128, (1, 12), generator=torch.Generator().manual_seed(3))
    hf = logits(model, input_ids)
    rope_hf.patch(model)
    assert modeling_llama.apply_rotary_pos_emb is not original
    rope_hf.unpatch(model)
    kernel_calls.clear()
    assert modeling_llama.apply_rotary_pos_emb is original
    assert not model.model.rotary_emb._forward_hooks and not hasattr(model, "_ropejit_patch")
    assert torch.equal(logits(model, input_ids), hf) and kernel_calls == []
    rope_hf.unpatch(model)  # a second unpatch does nothing


def test_two_models_keep_their_own_specs(kernel_calls, patched):
    llama3 = tiny_model("llama")
    default = tiny_model("llama", rope={"rope_type": "default", "rope_theta": 500.0}, seed=4)
    input_ids = torch.randint(0, 128, (1, 30), generator=torch.Generator().manual_seed(5))
    hf = [logits(llama3, input_ids), logits(default, input_ids)]
    first, second = patched(llama3), patched(default)
    assert first.spec.rope_type == "llama3" and second.spec.rope_type == "default"
    for model, want in zip((llama3, default), hf):
        got = logits(model, input_ids)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * want.abs().max().item())
    rope_hf.unpatch(llama3)  # the module stays patched for the other model
    assert modeling_llama.apply_rotary_pos_emb.ropejit_original is not None
    calls = len(kernel_calls)
    logits(default, input_ids)
    assert len(kernel_calls) == calls + 2


def test_unknown_positions_fall_back_to_hf(kernel_calls, patched):
    patched(tiny_model("llama"))
    kernel_calls.clear()
    gen = torch.Generator().manual_seed(6)
    q, k = torch.randn(1, 4, 5, 16, generator=gen), torch.randn(1, 2, 5, 16, generator=gen)
    angle = torch.arange(5.0)[:, None] * torch.rand(8, generator=gen)
    cos, sin = torch.cat((angle, angle), -1).cos()[None], torch.cat((angle, angle), -1).sin()[None]
    got = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)  # a cos no patched rotary module made
    want = modeling_llama.apply_rotary_pos_emb.ropejit_original(q, k, cos, sin)
    assert kernel_calls == [] and all(torch.equal(g, w) for g, w in zip(got, want))


def test_configs_ropejit_does_not_follow_keep_hf(patched):
    """Without HF's own cos and sin (hf_angles=False; test_transformers_cos_sin.py has the default)."""
    model = tiny_model("llama", rope={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0})
    original = modeling_llama.apply_rotary_pos_emb
    with pytest.warns(RuntimeWarning, match=r"keeps HF's RoPE: rope_type dynamic"):
        state = patched(model, hf_angles=False)
    assert state.spec is None and modeling_llama.apply_rotary_pos_emb is original
    rope_hf.unpatch(model)
    with pytest.raises(ropejit.Error, match=r"rope_type dynamic: HF's frequencies follow the sequence length"):
        rope_hf.patch(model, strict=True, hf_angles=False)
    assert not hasattr(model, "_ropejit_patch")


def test_public_apply_rotary_pos_emb_matches_hf():
    model = tiny_model("llama")
    position_ids = torch.tensor([[3, 4, 5, 90, 200], [0, 1, 2, 3, 4]])
    gen = torch.Generator().manual_seed(7)
    q, k = torch.randn(2, 4, 5, 16, generator=gen), torch.randn(2, 2, 5, 16, generator=gen)
    cos, sin = model.model.rotary_emb(q, position_ids)
    want = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    spec = ropejit.Spec.from_hf(model.config, dtype="fp32")
    got = rope_hf.apply_rotary_pos_emb(q, k, cos, sin, position_ids, spec=spec)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    fallback = rope_hf.apply_rotary_pos_emb(q, k, cos, sin)  # no positions, no spec: HF's formula
    assert all(torch.equal(g, w) for g, w in zip(fallback, want))


# ------------------------------------------------------------------ bf16-cast models

def test_a_bf16_cast_model_runs_what_from_pretrained_loads(tmp_path, kernel_calls, patched):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SIZES, initializer_range=0.1,  # peaked attention: RoPE moves the logits
                                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    loaded = transformers.LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    cast = transformers.LlamaForCausalLM.from_pretrained(tmp_path).eval().to(torch.bfloat16)
    # the premise: from_pretrained keeps the rotary buffer fp32, model.to() rounds it
    assert loaded.model.rotary_emb.inv_freq.dtype == torch.float32
    assert cast.model.rotary_emb.inv_freq.dtype == torch.bfloat16 and cast.dtype == loaded.dtype == torch.bfloat16
    input_ids = torch.randint(0, 128, (2, 200), generator=torch.Generator().manual_seed(8))
    want = logits(loaded, input_ids).float()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = patched(cast)
        kernel_calls.clear()
        got = logits(cast, input_ids).float()
        logits(cast, input_ids)
    said = [str(w.message) for w in caught if "inv_freq" in str(w.message)]
    assert len(said) == 1 and "config's float32 frequencies" in said[0]  # once per patch, not per call
    assert state.reason is None and state.note is not None and state.spec.dtype == "bf16"
    assert state.kernel_calls == 4 == len(kernel_calls) and state.fallback_calls == 0
    tolerance = dict(rtol=1.6e-2, atol=0.03 * want.abs().max().item())  # bf16: a few ulps of the logits
    torch.testing.assert_close(got, want, **tolerance)
    patched(loaded)  # the same frequencies: ropejit gives the two models the same logits, bit for bit
    assert torch.equal(logits(loaded, input_ids).float(), got)
    rope_hf.unpatch(loaded)
    with torch.no_grad():  # the tolerance sees a RoPE 3 % off
        loaded.model.rotary_emb.inv_freq.mul_(0.97)
    assert not torch.allclose(logits(loaded, input_ids).float(), want, **tolerance)


# ------------------------------------------------------------------ per-layer-type models

COMMON = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=128,
              vocab_size=128, max_position_embeddings=256, sliding_window=16, initializer_range=0.1)
GEMMA3_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
               "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}


def tiny_layered(kind, **overrides):
    """(model, calls per layer type for one forward pass) of a tiny per-layer-type model."""
    torch.manual_seed(0)
    if kind == "gemma3":  # 5 sliding layers, then a full one
        sizes = dict(COMMON, num_hidden_layers=6, rope_parameters=GEMMA3_ROPE)
        config = transformers.Gemma3TextConfig(**dict(sizes, **overrides))
        model = transformers.Gemma3ForCausalLM(config)
    elif kind == "gpt_oss":  # sliding and full attention layers, one yarn rope block for both
        config = transformers.GptOssConfig(**COMMON, num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2,
                                           rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0,
                                                            "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                                                            "original_max_position_embeddings": 64})
        model = transformers.GptOssForCausalLM(config)
        return model.eval(), {"all": 2}
    elif kind == "gemma3n":  # apply_rotary_pos_emb(x, cos, sin): q and k in two calls
        config = transformers.Gemma3nTextConfig(**COMMON, num_hidden_layers=4, vocab_size_per_layer_input=128,
                                                hidden_size_per_layer_input=8, laurel_rank=8, num_kv_shared_layers=0,
                                                layer_types=["sliding_attention", "full_attention"] * 2,
                                                activation_sparsity_pattern=[0.0] * 4)
        model = transformers.Gemma3nForCausalLM(config)
    else:  # gemma4: proportional rope and heads of 32 on the full-attention layers, one-tensor calls
        config = transformers.Gemma4TextConfig(**COMMON, num_hidden_layers=2, global_head_dim=32,
                                               vocab_size_per_layer_input=128, hidden_size_per_layer_input=8,
                                               layer_types=["sliding_attention", "full_attention"])
        model = transformers.Gemma4ForCausalLM(config)
    per_call = 2 if kind in ("gemma3n", "gemma4") else 1
    return model.eval(), {t: n * per_call for t, n in collections.Counter(config.layer_types).items()}


@pytest.mark.parametrize("kind", ["gemma3", "gpt_oss", "gemma3n", "gemma4"])
def test_per_layer_type_models_run_each_layer_type_with_its_spec(kind, kernel_calls, patched):
    model, calls = tiny_layered(kind)
    input_ids = torch.randint(0, 128, (2, 40), generator=torch.Generator().manual_seed(9))
    hf = logits(model, input_ids)
    state = patched(model)
    kernel_calls.clear()
    ours = logits(model, input_ids)
    assert state.reason is None and not state.declined and set(state.specs) == set(calls)
    assert state.kernel_calls_by_type == calls and state.fallback_calls == 0
    assert len(kernel_calls) == sum(calls.values())
    torch.testing.assert_close(ours, hf, rtol=1e-4, atol=1e-4 * hf.abs().max().item())
    if kind == "gemma3":  # the two layer types differ: each spec is the config's own block
        assert (state.specs["sliding_attention"].rope_type, state.specs["full_attention"].rope_type) == ("default",
                                                                                                          "linear")
    if kind == "gemma4":
        assert (state.specs["full_attention"].rope_type, state.specs["full_attention"].head_dim) == ("proportional", 32)


def test_a_layer_type_ropejit_does_not_follow_keeps_hf(kernel_calls, patched):
    rope = dict(GEMMA3_ROPE, full_attention={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e6})
    model, calls = tiny_layered("gemma3", rope_parameters=rope)
    input_ids = torch.randint(0, 128, (1, 30), generator=torch.Generator().manual_seed(10))
    hf = logits(model, input_ids)
    with pytest.raises(ropejit.Error, match=r"full_attention: rope_type dynamic"):
        rope_hf.patch(model, strict=True, hf_angles=False)
    assert not hasattr(model, "_ropejit_patch")
    with pytest.warns(RuntimeWarning, match=r"keeps HF's RoPE for full_attention: rope_type dynamic"):
        state = patched(model, hf_angles=False)
    kernel_calls.clear()
    ours = logits(model, input_ids)
    assert state.reason is None and list(state.specs) == ["sliding_attention"]
    assert state.kernel_calls_by_type == {"sliding_attention": 5}
    assert state.fallback_calls_by_type == {"full_attention": 1}
    assert "rope_type dynamic" in state.fallback_reasons["full_attention"]
    torch.testing.assert_close(ours, hf, rtol=1e-4, atol=1e-4 * hf.abs().max().item())


# ------------------------------------------------------------------ multimodal positions, several rotary modules

TEXT_SIZES = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                  vocab_size=128, max_position_embeddings=4096, initializer_range=0.1)


def grid_positions(text=4, rows=2, cols=3, after=3):
    """[3, 1, S] position_ids as Qwen2-VL's get_rope_index gives them: text tokens (three equal
    rows), an image of rows x cols patches (temporal fixed, height and width walking the grid),
    text again from the image's largest position on."""
    t = torch.arange(text).expand(3, -1)
    cell = torch.arange(rows * cols)
    image = torch.stack((torch.zeros_like(cell), cell // cols, cell % cols)) + text
    tail = torch.arange(after).expand(3, -1) + image.max() + 1
    return torch.cat((t, image, tail), dim=1)[:, None, :]


def tiny_mrope(kind, rope):
    torch.manual_seed(0)
    if kind == "qwen2_vl":
        config = transformers.Qwen2VLTextConfig(hidden_size=64, rope_parameters=rope, **TEXT_SIZES)
        return transformers.Qwen2VLTextModel(config).eval()
    if kind == "qwen3_vl":
        config = transformers.Qwen3VLTextConfig(hidden_size=128, head_dim=32, rope_parameters=rope, **TEXT_SIZES)
        return transformers.Qwen3VLTextModel(config).eval()
    config = transformers.Qwen3_5TextConfig(hidden_size=128, head_dim=64, rope_parameters=rope,
                                            layer_types=["full_attention"] * 2, **TEXT_SIZES)
    return transformers.Qwen3_5TextModel(config).eval()


def hidden(model, input_ids, position_ids=None):
    with torch.no_grad():
        return model(input_ids=input_ids, position_ids=position_ids, use_cache=False).last_hidden_state


# The config's sections (Qwen2-VL: contiguous, as imported) and Qwen3-VL's interleaved form, which the
# config does not flag (HF's Qwen3-VL always interleaves): the probe picks it.
MROPE = {"qwen2_vl": ({"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]}, False),
         "qwen3_vl": ({"rope_type": "default", "rope_theta": 5e5, "mrope_section": [6, 5, 5]}, True),
         # Qwen3.5's shipped [11, 11, 10] of 32 pairs: height reaches pair 31, the last one.
         "qwen3_5": ({"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 1.0,
                      "mrope_section": [11, 11, 10], "mrope_interleaved": True}, True)}


@pytest.mark.parametrize("kind", list(MROPE))
def test_multimodal_positions_run_the_kernel_with_three_streams(kind, kernel_calls, patched):
    rope, interleaved = MROPE[kind]
    model = tiny_mrope(kind, rope)
    position_ids = grid_positions()
    input_ids = torch.randint(1, 128, (1, position_ids.shape[-1]), generator=torch.Generator().manual_seed(11))
    hf = hidden(model, input_ids, position_ids)
    one_stream = hidden(model, input_ids, position_ids[:1].expand(3, -1, -1))
    assert not torch.allclose(one_stream, hf, rtol=1e-3, atol=1e-3)  # the three streams move HF's output
    state = patched(model)
    spec = state.specs["all"]
    assert (spec.io["positions"], spec.io["mrope_section"], spec.io["mrope_interleaved"]) == (
        "mrope", rope["mrope_section"], interleaved)
    kernel_calls.clear()
    ours = hidden(model, input_ids, position_ids)
    assert state.kernel_calls == 2 and state.fallback_calls == 0 and not state.text_positions_only
    assert all(p.shape == (3, 1, position_ids.shape[-1]) and torch.equal(p, position_ids) for p in kernel_calls)
    torch.testing.assert_close(ours, hf, rtol=1e-4, atol=1e-4 * hf.abs().max().item())
    text = hidden(model, input_ids)  # text positions: HF expands [B, S] to three equal rows
    rope_hf.unpatch(model)
    torch.testing.assert_close(text, hidden(model, input_ids), rtol=1e-4, atol=1e-4)


def test_public_apply_rotary_pos_emb_takes_mrope_positions():
    model = tiny_mrope("qwen2_vl", MROPE["qwen2_vl"][0])
    position_ids = grid_positions()
    gen = torch.Generator().manual_seed(12)
    q, k = torch.randn(1, 4, position_ids.shape[-1], 16, generator=gen), torch.randn(1, 2, position_ids.shape[-1],
                                                                                      16, generator=gen)
    cos, sin = model.rotary_emb(q, position_ids)
    want = modeling_qwen2_vl.apply_rotary_pos_emb(q, k, cos, sin)
    spec = ropejit.Spec.from_hf(model.config, dtype="fp32")
    got = rope_hf.apply_rotary_pos_emb(q, k, cos, sin, position_ids, spec=spec)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_rotary_modules_of_their_own_theta_run_their_own_spec(kernel_calls, patched):
    # GraniteSWA builds one rotary module per layer_rope_theta (from a copy of the config; 0 = NoPE).
    config = transformers.GraniteSWAConfig(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                           num_key_value_heads=2, intermediate_size=128, vocab_size=128,
                                           layer_rope_theta=[1e4, 5e5, 0], sliding_window=64, initializer_range=0.1,
                                           layer_types=["full_attention", "sliding_attention", "sliding_attention"])
    torch.manual_seed(0)
    model = transformers.GraniteSWAForCausalLM(config).eval()
    input_ids = torch.randint(1, 128, (1, 40), generator=torch.Generator().manual_seed(14))
    hf = logits(model, input_ids)
    state = patched(model)
    assert {key: spec.to_dict()["rope"]["rope_theta"] for key, spec in state.specs.items()} == {
        "all": 1e4, "all (rope_theta=500000.0)": 5e5}
    ours = logits(model, input_ids)
    assert state.kernel_calls_by_type == {"all": 1, "all (rope_theta=500000.0)": 1} and state.fallback_calls == 0
    torch.testing.assert_close(ours, hf, rtol=1e-4, atol=1e-4 * hf.abs().max().item())
