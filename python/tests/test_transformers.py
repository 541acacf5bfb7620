"""ropejit.transformers: tiny randomly initialised Llama and Qwen2 models (built locally, fp32,
CPU) give the same logits and generated tokens with their RoPE patched to ropejit."""
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # every model here is built from a config: never reach the hub
torch = pytest.importorskip("torch", reason="torch is not installed: the transformers patch is not tested")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: the patch is not tested")

import ropejit  # noqa: E402
import ropejit.torch as rope_torch  # noqa: E402
import ropejit.transformers as rope_hf  # noqa: E402
from transformers.models.llama import modeling_llama  # noqa: E402
from transformers.models.qwen2 import modeling_qwen2  # noqa: E402

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


@pytest.fixture
def patched():
    """patch() for the test, unpatched afterwards even when the test fails."""
    models = []

    def do_patch(model, **kwargs):
        models.append(model)
        return rope_hf.patch(model, **kwargs)

    yield do_patch
    for model in models:
        rope_hf.unpatch(model)


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
    model = tiny_model("llama", rope={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0})
    original = modeling_llama.apply_rotary_pos_emb
    with pytest.warns(RuntimeWarning, match=r"keeps HF's RoPE: rope_type dynamic"):
        state = patched(model)
    assert state.spec is None and modeling_llama.apply_rotary_pos_emb is original
    rope_hf.unpatch(model)
    with pytest.raises(ropejit.Error, match=r"rope_type dynamic: HF's frequencies follow the sequence length"):
        rope_hf.patch(model, strict=True)
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
