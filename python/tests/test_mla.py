"""Op mla_append (Multi-head Latent Attention's append) through the Python API, against
transformers' DeepSeek-V3 rotary module and its ``apply_rotary_pos_emb_interleave``.

ropejit rotates each interleaved pair (2i, 2i+1) where it is (vLLM's ``is_neox_style=False``);
HF's function returns the rotated evens, then the rotated odds. Both give q and k_pe the same
order, so q·k is the same; the test compares after that reordering."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def v3_config():
    return transformers.DeepseekV3Config(
        hidden_size=256, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=64, kv_lora_rank=64,
        qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, num_hidden_layers=1, max_position_embeddings=16384,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 4096, "mscale": 1.0, "mscale_all_dim": 0.8})


def mla_spec(config, cache_dtype="auto", q_output="inplace"):
    spec = ropejit.Spec.from_hf(config, dtype="fp32", op="mla_append").to_dict()
    spec["io"].update(page_size=16, cache_dtype=cache_dtype, q_output=q_output)
    return ropejit.Spec.from_json(spec)


@pytest.mark.parametrize("family", ["deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k25"])
def test_import_as_mla_append_from_config_objects_and_dicts(family):
    """op="mla_append" imports an MLA config whole: q heads of qk_nope + qk_rope with the rope part
    trailing, one latent kv head, kv_lora_rank, the paged output; the rope block as op rope's."""
    sizes = dict(num_attention_heads=16, num_key_value_heads=16, q_lora_rank=64, kv_lora_rank=128,
                 qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, hidden_size=256)
    if family == "kimi_k25":
        config = transformers.Kimi_K25Config(text_config=dict(model_type="deepseek_v3", **sizes))
        text = config.text_config
    else:
        config = transformers.AutoConfig.for_model(family, **sizes)
        text = config
    for source in (config, config.to_dict()):
        spec = ropejit.Spec.from_hf(source, op="mla_append")
        d = spec.to_dict()
        assert (d["op"], d["head_dim"], d["rotary_dim"], d["rotary_slice"], d["num_q_heads"], d["num_kv_heads"]) == \
            ("mla_append", 48, 16, "trailing", 16, 1)
        assert d["mla_append"] == {"kv_lora_rank": 128} and d["io"]["output"] == "paged_kv"
        rope = ropejit.Spec.from_hf(source).to_dict()  # op rope: MLA's rope part alone
        assert (rope["head_dim"], d["rope"], d["layout"]) == (16, rope["rope"], rope["layout"])
    assert text.qk_rope_head_dim == 16


def test_matches_deepseek_v3_rotation_and_cache_row(runtime, rng):
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m
    config = v3_config()
    spec = mla_spec(config)
    h, nope, rope, rank, tokens = 4, 32, 16, 64, 19
    q_raw = rng.standard_normal((tokens, h, nope + rope)).astype(np.float32)
    k_pe = rng.standard_normal((tokens, rope)).astype(np.float32)
    kv_c = rng.standard_normal((tokens, rank)).astype(np.float32)
    positions = rng.integers(0, 12000, tokens).astype(np.int64)
    slots = rng.permutation(64)[:tokens].astype(np.int64)
    cache = np.full((4, 16, rank + rope), np.nan, np.float32)

    q = q_raw.copy()
    out = runtime.get(spec)(q, positions=positions, k_pe=k_pe, kv_c=kv_c, k_cache=cache, slot_mapping=slots)
    assert len(out) == 2 and out[1] is cache

    with torch.no_grad():
        rotary = m.DeepseekV3RotaryEmbedding(config)
        q_pe = torch.from_numpy(q_raw[..., nope:])[None].transpose(1, 2)           # [1, H, T, rope]
        k4 = torch.from_numpy(k_pe)[None, None]                                  # [1, 1, T, rope]
        cos, sin = rotary(q_pe, torch.from_numpy(positions)[None])
        q_hf, k_hf = m.apply_rotary_pos_emb_interleave(q_pe, k4, cos, sin)
    q_hf = q_hf.transpose(1, 2)[0].numpy()
    k_hf = k_hf[0, 0].numpy()

    def halves(x):  # ropejit's in-place pairs in HF's order: evens, then odds
        return np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)

    scale = np.abs(q_hf).max()
    assert np.abs(halves(q[..., nope:]) - q_hf).max() < 2e-6 * scale
    np.testing.assert_array_equal(q[..., :nope], q_raw[..., :nope])          # q_nope untouched
    rows = cache.reshape(64, rank + rope)[slots]
    np.testing.assert_array_equal(rows[:, :rank], kv_c)                      # the latent, copied
    assert np.abs(halves(rows[:, rank:]) - k_hf).max() < 2e-6 * np.abs(k_hf).max()
    untouched = np.setdiff1d(np.arange(64), slots)
    assert np.isnan(cache.reshape(64, -1)[untouched]).all()                  # no other slot written


def test_fp8_cache_and_separate_q(runtime, rng):
    config = v3_config()
    spec = mla_spec(config, cache_dtype="fp8_e4m3", q_output="separate")
    uses = {f["name"]: f["use"] for f in spec.launch_fields()}
    assert (uses["k_pe"], uses["kv_c"], uses["k_scale"], uses["q_out"], uses["v_cache"]) == \
        ("required", "required", "required", "required", "unused")
    tokens = 7
    q = rng.standard_normal((tokens, 4, 48)).astype(np.float32)
    q_out = np.zeros_like(q)
    cache = np.zeros((2, 16, 80), np.uint8)
    runtime.get(spec)(q.copy(), positions=np.arange(tokens), k_pe=rng.standard_normal((tokens, 16)).astype(np.float32),
                      kv_c=np.full((tokens, 64), 3.0, np.float32), k_cache=cache, slot_mapping=np.arange(tokens),
                      q_out=q_out, k_scale=0.5)
    np.testing.assert_array_equal(q_out[..., :32], q[..., :32])
    assert (cache.reshape(32, 80)[:tokens, :64] == 0x4C).all()  # 3 / 0.5 = 6 = e4m3 0x4C


def test_concat_k_matches_deepseek_v3_prefill_keys(runtime, rng):
    """mla_append.concat_k: k_out = HF's ``torch.cat((k_pass, k_rot.expand(...)), dim=-1)``, with
    k_nope handed over as the k half of the up-projection's [k_nope | v] output (a head-strided
    view, as vLLM's MLA prefill splits it), in the same launch as q and the cache row."""
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m
    config = v3_config()
    spec_dict = mla_spec(config).to_dict()
    spec_dict["mla_append"]["concat_k"] = True
    spec = ropejit.Spec.from_json(spec_dict)
    uses = {f["name"]: f["use"] for f in spec.launch_fields()}
    assert (uses["k_nope"], uses["k_nope_head_stride"], uses["k_out"]) == ("required", "optional", "required")
    h, nope, rope, rank, v_dim, tokens = 4, 32, 16, 64, 32, 23
    q = rng.standard_normal((tokens, h, nope + rope)).astype(np.float32)
    k_pe = rng.standard_normal((tokens, rope)).astype(np.float32)
    kv_c = rng.standard_normal((tokens, rank)).astype(np.float32)
    kv_up = rng.standard_normal((tokens, h, nope + v_dim)).astype(np.float32)  # kv_b_proj's output
    k_nope = kv_up[..., :nope]                                                  # heads nope + v apart
    assert k_nope.strides[1] == (nope + v_dim) * 4
    positions = rng.integers(0, 12000, tokens).astype(np.int64)
    cache = np.zeros((2, 16, rank + rope), np.float32)
    out = runtime.get(spec)(q, positions=positions, k_pe=k_pe, kv_c=kv_c, k_cache=cache,
                            slot_mapping=np.arange(tokens), k_nope=k_nope)
    assert len(out) == 3 and out[0] is q and out[2] is cache  # launch_fields order: q, k_out, k_cache
    k_out = out[1]
    assert k_out.shape == (tokens, h, nope + rope)

    with torch.no_grad():
        rotary = m.DeepseekV3RotaryEmbedding(config)
        k4 = torch.from_numpy(k_pe)[None, None]                                  # [1, 1, T, rope]
        cos, sin = rotary(k4, torch.from_numpy(positions)[None])
        _, k_rot = m.apply_rotary_pos_emb_interleave(k4, k4, cos, sin)
        k_pass = torch.from_numpy(np.ascontiguousarray(k_nope))[None].transpose(1, 2)  # [1, H, T, nope]
        k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
        key_states = torch.cat((k_pass, k_rot), dim=-1).transpose(1, 2)[0].numpy()  # [T, H, nope + rope]

    def halves(x):  # ropejit's in-place pairs in HF's order: evens, then odds
        return np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)

    np.testing.assert_array_equal(k_out[..., :nope], key_states[..., :nope])  # k_nope placed, exactly
    assert np.abs(halves(k_out[..., nope:]) - key_states[..., nope:]).max() < 2e-6 * np.abs(key_states).max()
    np.testing.assert_array_equal(k_out[..., nope:], np.broadcast_to(k_out[:, :1, nope:], (tokens, h, rope)))
    np.testing.assert_array_equal(cache.reshape(32, -1)[:tokens, rank:], k_out[:, 0, nope:])  # the cache's k_pe

    with pytest.raises(ropejit.ArgumentError, match="k_nope is required"):
        runtime.get(spec)(q, positions=positions, k_pe=k_pe, kv_c=kv_c, k_cache=cache,
                          slot_mapping=np.arange(tokens), k_out=np.zeros_like(k_out))
    overlapping = np.lib.stride_tricks.as_strided(kv_up, (tokens, h, nope), (kv_up.strides[0], 16 * 4, 4))
    with pytest.raises(ropejit.ArgumentError, match="k_nope: head stride 16 is not allowed: must be >= 32"):
        runtime.get(spec)(q, positions=positions, k_pe=k_pe, kv_c=kv_c, k_cache=cache,
                          slot_mapping=np.arange(tokens), k_nope=overlapping)


def test_absorbed_q_places_the_latent_query_of_a_transposed_bmm(runtime, rng):
    """mla_append.absorbed_q: q_out [T, H, kv_lora_rank + d] = [q_nope · W_UK | rotated q_pe], the
    query absorbed-weight decode kernels (FlashMLA) read; q_latent is the batched matmul's
    [H, T, L] output transposed to [T, H, L] (heads T · L apart), as vLLM's MLA decode makes it."""
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m
    config = v3_config()
    spec_dict = mla_spec(config, q_output="separate").to_dict()
    spec_dict["mla_append"]["absorbed_q"] = True
    spec = ropejit.Spec.from_json(spec_dict)
    h, nope, rope, rank, tokens = 4, 32, 16, 64, 9
    q = torch.from_numpy(rng.standard_normal((tokens, h, nope + rope)).astype(np.float32))
    w_uk_t = torch.from_numpy(rng.standard_normal((h, nope, rank)).astype(np.float32))
    q_latent = torch.bmm(q[..., :nope].transpose(0, 1), w_uk_t).transpose(0, 1)  # [T, H, L], heads T·L apart
    assert q_latent.stride() == (rank, tokens * rank, 1)
    k_pe = torch.from_numpy(rng.standard_normal((tokens, rope)).astype(np.float32))
    kv_c = torch.from_numpy(rng.standard_normal((tokens, rank)).astype(np.float32))
    positions = torch.from_numpy(rng.integers(0, 12000, tokens).astype(np.int64))
    cache = torch.zeros((1, 16, rank + rope))
    q_before = q.clone()
    q_out, k_cache = runtime.get(spec)(q, positions=positions, k_pe=k_pe, kv_c=kv_c, k_cache=cache,
                                       slot_mapping=torch.arange(tokens), q_latent=q_latent)
    assert k_cache is cache and q_out.shape == (tokens, h, rank + rope)
    assert torch.equal(q, q_before)                                            # q only read

    with torch.no_grad():
        rotary = m.DeepseekV3RotaryEmbedding(config)
        q_pe = q[..., nope:][None].transpose(1, 2)                             # [1, H, T, rope]
        cos, sin = rotary(q_pe, positions[None])
        q_rot, _ = m.apply_rotary_pos_emb_interleave(q_pe, q_pe, cos, sin)
        q_rot = q_rot.transpose(1, 2)[0]

    def halves(x):  # ropejit's in-place pairs in HF's order: evens, then odds
        return torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)

    assert torch.equal(q_out[..., :rank], q_latent)                            # the latent query, placed exactly
    assert (halves(q_out[..., rank:]) - q_rot).abs().max() < 2e-6 * q_rot.abs().max()
    with pytest.raises(ropejit.ArgumentError, match="q_latent_stride: 16 is not allowed"):
        overlapping = torch.as_strided(q_latent, (tokens, h, rank), (16, rank, 1))
        runtime.get(spec)(q, positions=positions, k_pe=k_pe, kv_c=kv_c, k_cache=cache,
                          slot_mapping=torch.arange(tokens), q_latent=overlapping)
