"""Against vLLM's own rotary classes, where vLLM imports (it is not a test requirement: a 336 MB
wheel with CUDA dependencies; without it every test here prints SKIPPED with the reason).

- ropejit.compat.rotary_embedding on each vLLM class's own cos_sin_cache gives that class's
  ``forward_native`` (vLLM's PyTorch reference) for every rope type ``get_rope`` builds with the
  table form: default, partial rotary, GPT-J pairs, linear, NTK, dynamic NTK (factor and alpha),
  YaRN, Llama 3, Gemma 4's proportional;
- the vLLM plugin (ropejit.vllm_plugin, entry point ``vllm.general_plugins``): off without
  ROPEJIT_VLLM=1; with it, get_rope builds ropejit's subclass of each of those classes, its
  ``forward_cuda`` / ``forward_cpu`` give ``forward_native``'s result in place, and a call ropejit
  refuses runs vLLM's own method with the reason logged; table_classes leaves out the classes with
  forwards of their own (MRoPE variants, DeepSeek V4, dual chunk, Fourier, vision), which the
  plugin serves in forms of their own (test_vllm_classes.py);
- the classes served in a form of their own, against their own ``forward_native`` with the kernel's
  launches counted: Phi-3 LongRoPE (long and short factors, partial rotary, offsets, its forward
  following vLLM's op switch), DeepSeek YaRN (mscale, offsets, MLA's strided q_pe, out of place),
  MRoPE with text-only positions [T] and multimodal [3, T] positions (contiguous and interleaved
  sections).

Run here with vLLM 0.33.0 on the host backend (see the issue note for the command)."""
import logging
import re
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: vLLM's classes are not compared")
vllm_rope = pytest.importorskip("vllm.model_executor.layers.rotary_embedding",
                                reason="vLLM is not installed: its rotary classes are not compared")

from ropejit import compat, vllm_plugin  # noqa: E402
from vllm.config import CompilationConfig, DeviceConfig, VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.model_executor.layers.rotary_embedding import phi3_long_rope_scaled_rope  # noqa: E402
from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding, RotaryEmbeddingBase  # noqa: E402
from vllm_support import assert_close, compare, launches, plugin, spread, vllm_context  # noqa: E402,F401

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
# The rotary classes whose forwards the plugin serves, each with its subclasses that only build another cache.
SERVED_BASES = (RotaryEmbedding, vllm_rope.MRotaryEmbedding, vllm_rope.DeepseekScalingRotaryEmbedding)
# vLLM's rotary classes with forwards of their own (interleaved or Bailing sections, DeepSeek V4's
# last-dims rotation, chunked attention, Fourier terms, vision): not table classes; forms of their own.
OWN_FORWARDS = ("MRotaryEmbeddingInterleaved", "BailingMRotaryEmbedding", "DeepseekV4ScalingRotaryEmbedding",
                "DualChunkRotaryEmbedding", "FourierRotaryEmbedding", "Llama4VisionRotaryEmbedding")


def build(params, is_neox=True, dtype=torch.float32):
    return vllm_rope.get_rope(head_size=64, max_position=512, is_neox_style=is_neox, rope_parameters=dict(params),
                              dtype=dtype)


def inputs(dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, 512, (23,), generator=gen)
    return positions, torch.randn(23, 4 * 64, generator=gen).to(dtype), torch.randn(23, 2 * 64, generator=gen).to(dtype)


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("form", list(TABLE_FORMS))
def test_compat_matches_each_table_class_forward_native(form, is_neox):
    rope = build(TABLE_FORMS[form], is_neox)
    assert vllm_plugin.table_classes(SERVED_BASES, RotaryEmbeddingBase)[0][type(rope)] is RotaryEmbedding
    positions, query, key = inputs()
    want_q, want_k = rope.forward_native(positions, query.clone(), key.clone())
    compat.rotary_embedding(positions, query, key, rope.head_size, rope.cos_sin_cache, rope.is_neox_style)
    assert_close(query, want_q, torch.float32)
    assert_close(key, want_k, torch.float32)


@pytest.mark.parametrize("name", OWN_FORWARDS)
def test_classes_with_forwards_of_their_own_are_no_table_classes(name):
    cls = getattr(vllm_rope, name)
    table, others = vllm_plugin.table_classes(SERVED_BASES, RotaryEmbeddingBase)
    assert cls not in table and (name in others or not issubclass(cls, RotaryEmbeddingBase))


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
    assert set(OWN_FORWARDS) <= set(vllm_plugin.registered) and vllm_plugin.kept == {}  # test_vllm_classes.py
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


# ------------------------------------------------------------------ classes served in a form of their own

PHI3 = {"full": (96, {}), "partial": (64, {"partial_rotary_factor": 0.75})}  # head_size, Phi-4-mini's 3/4


def build_phi3(monkeypatch, form, max_model_len, dtype):
    """Phi-3 LongRoPE through get_rope: original context 256 of 1024; long factors where vLLM's
    max_model_len exceeds the original (vLLM reads it from the model config)."""
    head_size, extra = PHI3[form]
    half = int(head_size * extra.get("partial_rotary_factor", 1.0)) // 2
    params = {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 256,
              "short_factor": [1.0 + 0.05 * i for i in range(half)],
              "long_factor": [1.5 + 0.3 * i for i in range(half)], **extra}
    monkeypatch.setattr(phi3_long_rope_scaled_rope, "get_current_vllm_config",
                        lambda: SimpleNamespace(model_config=SimpleNamespace(max_model_len=max_model_len)))
    return vllm_rope.get_rope(head_size=head_size, max_position=1024, rope_parameters=params, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("form", list(PHI3))
@pytest.mark.parametrize("max_model_len", [1024, 256], ids=["long", "short"])
def test_phi3_longrope_reads_the_row_its_forward_reads(form, max_model_len, dtype, monkeypatch, plugin, launches):
    rope = build_phi3(monkeypatch, form, max_model_len, dtype)
    assert type(rope).__name__ == "RopejitPhi3LongRoPEScaledRotaryEmbedding"
    assert rope.use_long_rope == (max_model_len > 256)
    assert rope.short_mscale != 1.0 and rope.rotary_dim == 2 * len(rope.short_factor)  # the mscale is in the cache
    shift = 256 if rope.use_long_rope else 0
    gen = torch.Generator().manual_seed(max_model_len)
    positions = spread(37, 256, 1024 - shift, max_model_len)
    query = torch.randn(37, 4 * rope.head_size, generator=gen).to(dtype)
    key = torch.randn(37, 2 * rope.head_size, generator=gen).to(dtype)
    offsets = torch.randint(0, 4, (37,), generator=gen)
    for method in (rope.forward_cuda, rope.forward_cpu):
        compare(method, rope.forward_native, positions, query, key, dtype)
        compare(method, rope.forward_native, positions, query, key, dtype, offsets)
    assert [p.tolist() for p in launches] == [(positions + shift).tolist(), (positions + shift + offsets).tolist()] * 2
    assert vllm_plugin._fallbacks_logged == {}


def test_phi3_longrope_forward_follows_vllms_rotary_op_switch(monkeypatch, plugin, launches):
    positions, query, key = inputs()
    for custom_ops, runs in ((["none"], 0), (["none", "+rotary_embedding"], 1)):
        config = VllmConfig(device_config=DeviceConfig(device="cpu"),
                            compilation_config=CompilationConfig(custom_ops=custom_ops))
        monkeypatch.setattr(vllm_rope, "_ROPE_DICT", {})  # a new module, built under this config
        with set_current_vllm_config(config):
            rope = build_phi3(monkeypatch, "partial", 1024, torch.float32)
        launches.clear()
        compare(rope.forward, rope.forward_native, positions, query, key, torch.float32, inplace=bool(runs))
        assert rope.ropejit_enabled == bool(runs) and len(launches) == runs


def test_phi3_longrope_refuses_gptj_pairs_and_unregister_restores_vllms(monkeypatch, plugin):
    with pytest.raises(ValueError, match="only supports neox_style"):  # vLLM's own rule: no GPT-J case to serve
        vllm_rope.get_rope(64, 1024, is_neox_style=False, rope_parameters={
            "rope_type": "longrope", "original_max_position_embeddings": 256, "short_factor": [1.0] * 32,
            "long_factor": [2.0] * 32})
    vllm_plugin.unregister()
    assert vllm_rope.Phi3LongRoPEScaledRotaryEmbedding is phi3_long_rope_scaled_rope.Phi3LongRoPEScaledRotaryEmbedding


DEEPSEEK = {"rope_type": "deepseek_yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 128,
            "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.0}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("partial", [False, True], ids=["full", "partial"])
def test_deepseek_yarn_on_mlas_strided_q_pe(partial, is_neox, dtype, plugin, launches):
    params = dict(DEEPSEEK, partial_rotary_factor=0.5) if partial else DEEPSEEK
    rope = vllm_rope.get_rope(64, 512, is_neox_style=is_neox, rope_parameters=params, dtype=dtype)
    assert type(rope).__name__ == "RopejitDeepseekScalingRotaryEmbedding" and rope.mscale > 1.1
    gen = torch.Generator().manual_seed(7)
    positions, offsets = spread(29, 128, 500, 7), torch.randint(0, 12, (29,), generator=gen)
    q_pe = torch.randn(29, 8, 128 + 64, generator=gen).to(dtype)[..., 128:]  # MLA: each head's last 64
    k_pe = torch.randn(29, 1, 64, generator=gen).to(dtype)
    for method in (rope.forward_cuda, rope.forward_cpu):
        compare(method, rope.forward_native, positions, q_pe, k_pe, dtype, inplace=False)
        compare(method, rope.forward_native, positions, q_pe, k_pe, dtype, offsets, inplace=False)
    assert [p.tolist() for p in launches] == [positions.tolist(), (positions + offsets).tolist()] * 2
    assert vllm_plugin._fallbacks_logged == {}


MROPE = {"mrope": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 8, 8]},
         "mrope-yarn": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 128,
                        "mrope_section": [16, 8, 8]},
         "mrope-interleaved": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [12, 10, 10],
                               "mrope_interleaved": True}}  # Qwen3-VL's T/H/W interleaving


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("form", list(MROPE))
def test_mrope_text_and_multimodal_positions(form, is_neox, plugin, launches, caplog):
    rope = build(MROPE[form], is_neox, dtype=torch.bfloat16)
    assert type(rope).__name__ == "RopejitMRotaryEmbedding"
    assert rope.mrope_interleaved == MROPE[form].get("mrope_interleaved", False)
    positions, query, key = inputs(torch.bfloat16)
    streams = torch.randint(0, 512, (3, 23), generator=torch.Generator().manual_seed(3))  # T/H/W, as vLLM's runner
    streams[1:, :5] = streams[0, :5]  # text tokens: one position in all three streams
    for method in (rope.forward_cuda, rope.forward_cpu):
        compare(method, rope.forward_native, positions, query, key, torch.bfloat16)
        compare(method, rope.forward_native, streams, query, key, torch.bfloat16)
    assert [p.tolist() for p in launches] == [positions.tolist(), streams.reshape(-1).tolist()] * 2
    assert vllm_plugin._fallbacks_logged == {}
    with caplog.at_level(logging.WARNING, logger="ropejit.vllm_plugin"):  # offsets: vLLM's method decides
        compare(rope.forward_cpu, rope.forward_native, streams, query, key, torch.bfloat16, torch.ones(23, dtype=torch.long),
                inplace=False)
    assert len(launches) == 4 and "RopejitMRotaryEmbedding runs vLLM's kernel" in caplog.text
    assert "offsets" in caplog.text


def test_mrope_compat_refuses_what_does_not_fit():
    positions, query, key = inputs()
    cache = build(MROPE["mrope"]).cos_sin_cache
    streams = positions.expand(3, -1)
    for bad, says in ((dict(positions=positions), "must be [3, T]"), (dict(key=None), "key: None"),
                      (dict(mrope_section=[16, 8, 9]), "summing to rotary_dim / 2 = 32"),
                      (dict(mrope_section=[32, 0, 0]), "integers >= 1")):
        args = dict(positions=streams, query=query.clone(), key=key.clone(), head_size=64, cos_sin_cache=cache,
                    is_neox=True, mrope_section=[16, 8, 8])
        args.update(bad)
        with pytest.raises(compat.ArgumentError, match=re.escape(says)):
            compat.mrope_rotary_embedding(**args)
