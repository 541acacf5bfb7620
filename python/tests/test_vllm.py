"""Against vLLM's own rotary classes, where vLLM imports (it is not a test requirement: a 336 MB
wheel with CUDA dependencies; without it every test here prints SKIPPED with the reason).

- ropejit.compat.rotary_embedding on each vLLM class's own cos_sin_cache gives that class's
  ``forward_native`` (vLLM's PyTorch reference) for every rope type ``get_rope`` builds with the
  table form: default, partial rotary, GPT-J pairs, linear, NTK, dynamic NTK (factor and alpha),
  YaRN, Llama 3, Gemma 4's proportional;
- the vLLM plugin (ropejit.vllm_plugin, entry point ``vllm.general_plugins``): off without
  ROPEJIT_VLLM=1; with it, get_rope builds ropejit's subclass of each of those classes, its
  ``forward_cuda`` / ``forward_cpu`` give ``forward_native``'s result in place, and a call ropejit
  refuses runs vLLM's own method with the reason logged; classes with forwards of their own (MRoPE,
  Phi-3 LongRoPE, DeepSeek YaRN) stay vLLM's.

Run here with vLLM 0.33.0 on the host backend (see the issue note for the command)."""
import logging

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: vLLM's classes are not compared")
vllm_rope = pytest.importorskip("vllm.model_executor.layers.rotary_embedding",
                                reason="vLLM is not installed: its rotary classes are not compared")

import ropejit.torch as rope_torch  # noqa: E402
from ropejit import compat, vllm_plugin  # noqa: E402
from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding  # noqa: E402

TABLE_FORMS = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    "partial": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
    "ntk": {"rope_type": "ntk", "rope_theta": 10000.0, "factor": 2.0},
    "dynamic": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
    "dynamic-alpha": {"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0},
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 128},
    "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 128},
    "proportional": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25},
}
# vLLM's rotary classes with forwards of their own (multi-stream positions, a long/short cache switch,
# DeepSeek's own rotation): the plugin leaves them to vLLM.
OWN_FORWARDS = ("MRotaryEmbedding", "Phi3LongRoPEScaledRotaryEmbedding", "DeepseekScalingRotaryEmbedding",
                "DualChunkRotaryEmbedding", "FourierRotaryEmbedding")


@pytest.fixture(autouse=True)
def vllm_context(runtime, monkeypatch):
    """A CPU vLLM config (CustomOps need one), ropejit's host runtime, a fresh get_rope cache."""
    rope_torch.set_runtime(runtime)
    monkeypatch.setattr(vllm_rope, "_ROPE_DICT", {})
    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        yield
    vllm_plugin.unregister()


def build(params, is_neox=True, dtype=torch.float32):
    return vllm_rope.get_rope(head_size=64, max_position=512, is_neox_style=is_neox, rope_parameters=dict(params),
                              dtype=dtype)


def inputs(dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, 512, (23,), generator=gen)
    return positions, torch.randn(23, 4 * 64, generator=gen).to(dtype), torch.randn(23, 2 * 64, generator=gen).to(dtype)


def assert_close(got, want, dtype):
    tol = {torch.float32: 2e-6, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * want.abs().max().item())


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("form", list(TABLE_FORMS))
def test_compat_matches_each_table_class_forward_native(form, is_neox):
    rope = build(TABLE_FORMS[form], is_neox)
    assert isinstance(rope, RotaryEmbedding) and type(rope) in vllm_plugin.table_classes(RotaryEmbedding)[0]
    positions, query, key = inputs()
    want_q, want_k = rope.forward_native(positions, query.clone(), key.clone())
    compat.rotary_embedding(positions, query, key, rope.head_size, rope.cos_sin_cache, rope.is_neox_style)
    assert_close(query, want_q, torch.float32)
    assert_close(key, want_k, torch.float32)


@pytest.mark.parametrize("name", OWN_FORWARDS)
def test_classes_with_forwards_of_their_own_are_left_to_vllm(name):
    cls = getattr(vllm_rope, name)
    table, others = vllm_plugin.table_classes(RotaryEmbedding, vllm_rope.base.RotaryEmbeddingBase)
    assert cls not in table and (name in others or not issubclass(cls, vllm_rope.base.RotaryEmbeddingBase))


def test_the_plugin_is_off_without_its_variable(monkeypatch, caplog):
    monkeypatch.delenv(vllm_plugin.ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="ropejit.vllm_plugin"):
        vllm_plugin.register()
    assert vllm_plugin.registered == [] and "set ROPEJIT_VLLM=1" in caplog.text
    assert type(build(TABLE_FORMS["default"])) is vllm_rope.RotaryEmbedding


@pytest.mark.parametrize("form", ["default", "llama3", "yarn", "partial"])
def test_the_plugin_swaps_the_table_classes(form, monkeypatch):
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    vllm_plugin.register()
    assert {"RotaryEmbedding", "Llama3RotaryEmbedding", "YaRNScalingRotaryEmbedding"} <= set(vllm_plugin.registered)
    assert "MRotaryEmbedding" in vllm_plugin.kept
    rope = build(TABLE_FORMS[form], dtype=torch.bfloat16)
    assert type(rope).__name__.startswith("Ropejit") and type(rope).__module__ == "ropejit.vllm_plugin"
    assert type(rope).name == "rotary_embedding"  # enabled and disabled by vLLM's own op name
    positions, query, key = inputs(torch.bfloat16)
    want_q, want_k = rope.forward_native(positions, query.clone(), key.clone())
    for method in (rope.forward_cuda, rope.forward_cpu):
        q, k = query.clone(), key.clone()
        got_q, got_k = method(positions, q, k)
        assert got_q is q and got_k is k  # in place, as vLLM's kernel
        assert_close(q, want_q, torch.bfloat16)
        assert_close(k, want_k, torch.bfloat16)


def test_a_call_ropejit_refuses_runs_vllms_method_with_the_reason_logged(monkeypatch, caplog):
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    vllm_plugin.register()
    rope = build(TABLE_FORMS["default"])
    seen = []
    monkeypatch.setattr(vllm_rope.RotaryEmbedding, "forward_cpu",
                        lambda self, positions, query, key=None: seen.append(query.shape) or (query, key))
    positions, query, key = inputs()
    with caplog.at_level(logging.WARNING, logger="ropejit.vllm_plugin"):
        rope.forward_cpu(positions, query, key.to(torch.float16))  # key's dtype differs from query's
    assert seen == [query.shape]
    assert "RopejitRotaryEmbedding runs vLLM's kernel for a call ropejit refuses: key: dtype torch.float16" \
        in caplog.text


def test_vllms_plugin_loader_runs_the_entry_point(monkeypatch):
    """vLLM's own loader (vllm.plugins.load_general_plugins) finds ropejit's entry point and swaps."""
    from importlib.metadata import entry_points

    plugins = {e.name: e.value for e in entry_points(group="vllm.general_plugins")}
    if "ropejit" not in plugins:
        pytest.skip("ropejit runs from a source tree without its installed metadata: no entry point to load")
    assert plugins["ropejit"] == "ropejit.vllm_plugin:register"
    import vllm.plugins

    monkeypatch.setenv(vllm_plugin.ENV, "1")
    monkeypatch.setenv("VLLM_PLUGINS", "ropejit")
    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    vllm.plugins.load_general_plugins()
    assert "RotaryEmbedding" in vllm_plugin.registered
    assert type(build(TABLE_FORMS["llama3"])).__name__ == "RopejitLlama3RotaryEmbedding"
