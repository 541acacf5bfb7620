"""vLLM's rotary classes with forwards of their own, served by ropejit.vllm_plugin in forms of their
own (ropejit._vllm_forms), each against the class's own forward (``forward_native``, or ``forward``
where the class computes there) on fresh random inputs of odd token counts, the kernel's launches
counted so that a silent fallback to vLLM's method fails:

- openPangu's ``MRotaryEmbeddingInterleaved`` ([3, T] positions; its forward follows vLLM's op switch),
- ``BailingMRotaryEmbedding`` and Ernie 4.5 VL's MRoPE ([T] and [3, T] positions),
- ``DeepseekV4ScalingRotaryEmbedding`` (last dims of each head, offsets, inverse, query alone),
- ``DualChunkRotaryEmbedding`` (five query rotations side by side, the key's own cache),
- ``FourierRotaryEmbedding`` (its coefficients' cos/sin, one row per KV head group with fope_sep_head),
- ``Llama4VisionRotaryEmbedding`` (complex cache, [images, patches, heads, head_size]).

Skipped without vLLM, as test_vllm.py."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: vLLM's classes are not compared")
vllm_rope = pytest.importorskip("vllm.model_executor.layers.rotary_embedding",
                                reason="vLLM is not installed: its rotary classes are not compared")

from ropejit import vllm_plugin  # noqa: E402
from vllm.config import CompilationConfig, DeviceConfig, VllmConfig, set_current_vllm_config  # noqa: E402
from vllm.model_executor.layers.rotary_embedding import dual_chunk_rope, ernie45_vl_rope  # noqa: E402
from vllm_support import assert_close, compare, launches, plugin, vllm_context  # noqa: E402,F401

DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
NEOX = pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
TOKENS = 23


def qk(dtype, heads=(4, 2), head_size=64, seed=0):
    """Random query and key [T, heads * head_size], query a strided slice of a packed QKV row."""
    gen = torch.Generator().manual_seed(seed)
    packed = torch.randn(TOKENS, (heads[0] + 2 * heads[1]) * head_size, generator=gen).to(dtype)
    return packed[:, :heads[0] * head_size], torch.randn(TOKENS, heads[1] * head_size, generator=gen).to(dtype)


def streams(top=512, seed=3):
    """[3, T] T/H/W positions, the first tokens text (one position in all three streams)."""
    positions = torch.randint(0, top, (3, TOKENS), generator=torch.Generator().manual_seed(seed))
    positions[1:, :5] = positions[0, :5]
    return positions


def served(rope, name):
    assert type(rope).__name__ == f"Ropejit{name}" and type(rope).__module__ == "ropejit.vllm_plugin"


def test_every_rotary_class_is_served(plugin):
    assert vllm_plugin.kept == {}
    assert set(vllm_plugin._OWN_FORMS) <= set(vllm_plugin.registered)


PANGU = {"rope_type": "openpangu", "rope_theta": 1e4, "mrope_section": [12, 10, 10], "mrope_interleaved": True}


@DTYPES
@NEOX
def test_pangu_interleaved_mrope(is_neox, dtype, plugin, launches):
    rope = vllm_rope.get_rope(64, 512, is_neox_style=is_neox, rope_parameters=PANGU, dtype=dtype)
    served(rope, "MRotaryEmbeddingInterleaved")
    vllm_forward = vllm_rope.MRotaryEmbeddingInterleaved.forward.__get__(rope)
    positions, (query, key) = streams(), qk(dtype)
    for method in (rope.forward_cuda, rope.forward_cpu):
        compare(method, vllm_forward, positions, query, key, dtype, inplace=False)
        got_q, got_k = method(positions, query, None)  # no key: cross-layer KV sharing
        assert got_k is None
        assert_close(got_q, vllm_forward(positions, query, None)[0], dtype)
    assert [p.tolist() for p in launches] == [list(range(TOKENS))] * 4
    assert vllm_plugin._fallbacks_logged == {}


def test_pangu_forward_follows_vllms_rotary_op_switch(monkeypatch, plugin, launches):
    positions, (query, key) = streams(), qk(torch.float32)
    for custom_ops, runs in ((["none"], 0), (["none", "+rotary_embedding"], 1)):
        monkeypatch.setattr(vllm_rope, "_ROPE_DICT", {})  # a new module, built under this config
        with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"),
                                                compilation_config=CompilationConfig(custom_ops=custom_ops))):
            rope = vllm_rope.get_rope(64, 512, rope_parameters=PANGU, dtype=torch.float32)
        launches.clear()
        compare(rope.forward, vllm_rope.MRotaryEmbeddingInterleaved.forward.__get__(rope), positions, query, key,
                torch.float32, inplace=False)
        assert rope.ropejit_enabled == bool(runs) and len(launches) == runs


def mrope_cases(rope, dtype, launches):
    """[T] and [3, T] positions through forward_cuda and forward_cpu against forward_native, out of place."""
    positions, multimodal, (query, key) = streams()[0], streams(), qk(dtype)
    for method in (rope.forward_cuda, rope.forward_cpu):
        compare(method, rope.forward_native, positions, query, key, dtype, inplace=False)
        compare(method, rope.forward_native, multimodal, query, key, dtype, inplace=False)
    assert [p.tolist() for p in launches] == [positions.tolist(), list(range(TOKENS))] * 2
    assert vllm_plugin._fallbacks_logged == {}


@DTYPES
@NEOX
def test_bailing_mrope(is_neox, dtype, plugin, launches):
    params = {"rope_type": "bailing_mrope", "rope_theta": 1e4, "mrope_section": [8, 12, 12]}
    rope = vllm_rope.get_rope(64, 512, is_neox_style=is_neox, rope_parameters=params, dtype=dtype)
    served(rope, "BailingMRotaryEmbedding")
    mrope_cases(rope, dtype, launches)


@DTYPES
@NEOX
def test_ernie45_vl_mrope(is_neox, dtype, plugin, launches):
    # As ernie45_vl_moe.py builds it: mrope_section [h, w, t], h = w.
    rope = ernie45_vl_rope.Ernie4_5_VLRotaryEmbedding(head_size=64, rotary_dim=64, max_position_embeddings=512,
                                                      base=5e5, is_neox_style=is_neox, dtype=dtype,
                                                      mrope_section=[10, 10, 12])
    served(rope, "Ernie4_5_VLRotaryEmbedding")
    mrope_cases(rope, dtype, launches)


V4 = {"rope_type": "deepseek_yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 128,
      "beta_fast": 32, "beta_slow": 1, "mscale": 0, "mscale_all_dim": 0, "is_deepseek_v4": True, "rope_dim": 64}


@DTYPES
@NEOX
@pytest.mark.parametrize("inverse", [False, True], ids=["forward", "inverse"])
def test_deepseek_v4_last_dims(inverse, is_neox, dtype, plugin, launches):
    rope = vllm_rope.get_rope(96, 512, is_neox_style=is_neox, rope_parameters=V4, dtype=dtype)  # as rope.py builds it
    served(rope, "DeepseekV4ScalingRotaryEmbedding")
    gen = torch.Generator().manual_seed(5)
    positions, offsets = torch.randint(0, 500, (TOKENS,), generator=gen), torch.randint(0, 12, (TOKENS,), generator=gen)
    query = torch.randn(TOKENS, 8, 96, generator=gen).to(dtype)
    key = torch.randn(TOKENS, 1, 96, generator=gen).to(dtype)
    for method in (rope.forward_cuda, rope.forward_cpu):
        for extra, k in (((), key), ((offsets,), key), ((offsets,), None)):
            want_q, want_k = rope.forward_native(positions, query.clone(), k, *extra, inverse=inverse)
            q, kk = query.clone(), None if k is None else k.clone()
            got_q, got_k = method(positions, q, kk, *extra, inverse=inverse)
            assert got_q is q and got_k is kk  # in place, as its forward_cuda (vLLM's kernel)
            assert_close(got_q, want_q, dtype)
            assert torch.equal(got_q[..., :32], query[..., :32])  # the leading dims pass through
            if k is not None:
                assert_close(got_k, want_k, dtype)
    rows = [positions, positions + offsets, positions + offsets] * 2
    assert [p.tolist() for p in launches] == [list(range(TOKENS)) if inverse else r.tolist() for r in rows]
    assert vllm_plugin._fallbacks_logged == {}


class CpuTorch:
    """torch, with the CUDA device DualChunkRotaryEmbedding builds its caches on mapped to the CPU."""
    accelerator = type("Accelerator", (), {"current_device_index": staticmethod(lambda: 0)})

    @staticmethod
    def device(name):
        return torch.device("cpu")

    def __getattr__(self, name):
        return getattr(torch, name)


@DTYPES
@NEOX
@pytest.mark.parametrize("tokens", [TOKENS, 1])
def test_dual_chunk(tokens, is_neox, dtype, monkeypatch, plugin, launches):
    monkeypatch.setattr(dual_chunk_rope, "torch", CpuTorch())
    rope = vllm_rope.get_rope(64, 512, is_neox_style=is_neox, dtype=dtype,
                              rope_parameters={"rope_theta": 1e4, "partial_rotary_factor": 0.75},
                              dual_chunk_attention_config={"chunk_size": 96, "local_size": 16})
    served(rope, "DualChunkRotaryEmbedding")
    gen = torch.Generator().manual_seed(9)
    positions, offsets = torch.randint(0, 400, (tokens,), generator=gen), torch.randint(0, 8, (tokens,), generator=gen)
    query, key = (t[:tokens] for t in qk(dtype))
    for method in (rope.forward_cuda, rope.forward_cpu):
        compare(method, rope.forward_native, positions, query, key, dtype, offsets, inplace=False)
    rows = positions + offsets
    expect = [rows % 80, rows % 80, torch.full_like(rows, 79), rows % 80, rows % 80, rows]
    assert [p.tolist() for p in launches] == [r.tolist() for r in expect] * 2
    assert vllm_plugin._fallbacks_logged == {}


@DTYPES
def test_fourier_rope(dtype, plugin, launches):
    # fope_sep_head: vLLM's coefficients are [kv_heads, in, out] (without it its einsum refuses them).
    params = {"rope_type": "default", "rope_theta": 1e4, "use_fope": True, "num_key_value_heads": 2,
              "num_inv_freq": 24, "fope_sep_head": True, "fope_init_factor": 0.1}
    gen = torch.Generator().manual_seed(11)
    ropes = []
    for _ in range(2):  # ropejit's first, vLLM's first: each builds its cache from the coefficients
        vllm_rope._ROPE_DICT.clear()
        rope = vllm_rope.get_rope(64, 512, rope_parameters=params, dtype=dtype)
        served(rope, "FourierRotaryEmbedding")
        ropes.append(rope)
    for coef in ("cos_coef", "sin_coef"):
        values = torch.randn(getattr(ropes[0], coef).shape, generator=gen) * 0.3
        for rope in ropes:
            getattr(rope, coef).data.copy_(values)
    positions, (query, key) = torch.randint(0, 512, (TOKENS,), generator=gen), qk(dtype)
    compare(ropes[0].forward_cpu, ropes[1].forward_native, positions, query, key, dtype, inplace=False)
    compare(ropes[0].forward_cuda, ropes[0].forward_native, positions, query, key, dtype, inplace=False)
    assert not ropes[0].update_cache and torch.equal(ropes[0].cos_sin_cache, ropes[1].cos_sin_cache)
    assert [p.tolist() for p in launches] == [list(range(TOKENS * 2))] * 2  # a row per token and KV head
    assert vllm_plugin._fallbacks_logged == {}


@DTYPES
def test_llama4_vision_rope(dtype, plugin, launches):
    # As mllama4.py builds it: 4 x 4 patches (+ CLS), half the head's frequencies, complex cache.
    rope = vllm_rope.get_rope(64, 16, is_neox_style=False, dtype=torch.complex64,
                              rope_parameters={"rope_type": "mllama4", "rope_theta": 1e4, "partial_rotary_factor": 0.5})
    served(rope, "Llama4VisionRotaryEmbedding")
    gen = torch.Generator().manual_seed(13)
    qkv = torch.randn(3, 17, 3 * 4 * 64, generator=gen).to(dtype)
    query, key = (t.view(3, 17, 4, 64) for t in qkv.split(4 * 64, dim=-1)[:2])  # strided, as its attention's split
    for method in (rope.forward_cuda, rope.forward_cpu):
        want_q, want_k = rope.forward_native(query, key)
        got_q, got_k = method(query, key)
        assert_close(got_q, want_q, dtype)
        assert_close(got_k, want_k, dtype)
    assert [p.tolist() for p in launches] == [list(range(17)) * 3] * 2
    assert vllm_plugin._fallbacks_logged == {}


def test_a_call_a_form_refuses_runs_vllms_method(plugin, launches):
    params = {"rope_type": "bailing_mrope", "rope_theta": 1e4, "mrope_section": [8, 12, 12]}
    rope = vllm_rope.get_rope(64, 512, rope_parameters=params, dtype=torch.float32)
    positions, (query, key) = streams(), qk(torch.float32)
    offsets = torch.ones(TOKENS, dtype=torch.long)  # Bailing's forwards take and ignore them: vLLM's method decides
    compare(rope.forward_cpu, rope.forward_native, positions, query, key, torch.float32, offsets, inplace=False)
    assert launches == []
    name = "RopejitBailingMRotaryEmbedding"
    assert vllm_plugin._fallbacks_logged == {name: f"offsets: {name}'s forwards ignore them"}
