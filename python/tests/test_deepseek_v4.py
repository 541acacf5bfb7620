"""DeepSeek-V4's pre-attention RoPE against transformers' own module.

A V4 config (both rope blocks: ``main`` for sliding layers, yarn ``compress`` for the compressed
ones) is imported with ``Spec.from_hf``; ropejit's kernel (host backend, fp32) on raw q and kv
projections must match the attention's ``q_b_norm`` (no weight: ones are passed) and ``kv_norm``
(random weight) followed by V4's ``apply_rotary_pos_emb``, which rotates each head's *trailing*
rope slice with interleaved pairs. In fp32 HF's dtype casts (cos/sin and the unweighted norm's
inverse RMS to q's dtype) are no-ops, so the two must agree to float32 rounding."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def v4_config():
    rope = {"main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
            "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0,
                         "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
                         "partial_rotary_factor": 0.125}}
    return transformers.DeepseekV4Config(
        hidden_size=256, num_attention_heads=4, head_dim=512, num_hidden_layers=4, q_lora_rank=64, o_lora_rank=32,
        o_groups=2, rope_parameters=rope, max_position_embeddings=65536, rms_norm_eps=1e-6,
        layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                     "sliding_attention"])


@pytest.mark.parametrize("layer_type, label", [("sliding_attention", "main"), ("compressed_sparse_attention", "compress"),
                                               ("compress", "compress")])
def test_matches_the_v4_attention(runtime, rng, layer_type, label):
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
    config = v4_config()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type=layer_type)
    assert (spec.rotary_slice, spec.layout, spec.head_dim, spec.rotary_dim, spec.num_kv_heads) == \
        ("trailing", "interleaved", 512, 64, 1)
    hq, d = spec.num_q_heads, spec.head_dim
    tokens = 29
    q_raw = (rng.standard_normal((tokens, hq, d)) * 3.0 + 0.5).astype(np.float32)
    kv_raw = (rng.standard_normal((tokens, 1, d)) * 0.2 - 0.1).astype(np.float32)
    w_kv = rng.standard_normal(d).astype(np.float32)
    positions = rng.integers(0, 20000, tokens).astype(np.int64)

    rotary = m.DeepseekV4RotaryEmbedding(config)
    q_norm = m.DeepseekV4UnweightedRMSNorm(eps=config.rms_norm_eps)
    kv_norm = m.DeepseekV4RMSNorm(d, eps=config.rms_norm_eps)
    with torch.no_grad():
        kv_norm.weight.copy_(torch.from_numpy(w_kv))
        q4 = q_norm(torch.from_numpy(q_raw)[None].transpose(1, 2))           # [1, H, T, D]
        kv4 = kv_norm(torch.from_numpy(kv_raw)[None]).transpose(1, 2)          # [1, 1, T, D]
        cos, sin = rotary(q4, torch.from_numpy(positions)[None], layer_type=label)
        want_q = m.apply_rotary_pos_emb(q4, cos, sin).transpose(1, 2)[0].numpy()
        want_k = m.apply_rotary_pos_emb(kv4, cos, sin).transpose(1, 2)[0].numpy()

    q, k = q_raw.copy(), kv_raw.copy()
    runtime.get(spec)(q, k, positions=positions, q_norm_weight=np.ones(d, np.float32), k_norm_weight=w_kv)
    for name, got, want in (("q", q, want_q), ("k", k, want_k)):
        error = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
        assert error < 2e-6, f"{name}: max error {error:.3g} of the largest value"
    # The leading 448 elements are only normalized, so the rotation really sits at the tail: the
    # same spec with a leading slice differs there.
    leading = dict(spec.to_dict())
    leading.pop("rotary_slice")
    q_lead = q_raw.copy()
    runtime.get(ropejit.Spec.from_json(leading))(q_lead, kv_raw.copy(), positions=positions,
                                                 q_norm_weight=np.ones(d, np.float32), k_norm_weight=w_kv)
    assert np.abs(q_lead - want_q).max() > 1e-2 * np.abs(want_q).max()


def test_layer_map_labels_the_rope_blocks():
    # Sliding layers rotate with rope_parameters.main, the compressed ones with .compress.
    specs, layers = ropejit.Spec.from_hf_layers(v4_config(), dtype="fp32")
    assert layers == ["main", "compress", "compress", "main"]
    assert specs["main"].rope_type == "default" and specs["compress"].rope_type == "yarn"


@pytest.mark.parametrize("label", ["main", "compress"])
def test_inverse_rope_matches_the_v4_output_rotation(runtime, rng, label):
    # HF: attn_output = apply_rotary_pos_emb(attn_output, cos, -sin) at the query positions.
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
    config = v4_config()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type=label, op="inverse_rope")
    assert (spec.op, spec.rotary_slice, spec.qk_norm) == ("inverse_rope", "trailing", None)
    hq, d = spec.num_q_heads, spec.head_dim
    tokens = 23
    out_raw = rng.standard_normal((tokens, hq, d)).astype(np.float32)
    positions = rng.integers(0, 20000, tokens).astype(np.int64)
    rotary = m.DeepseekV4RotaryEmbedding(config)
    with torch.no_grad():
        o4 = torch.from_numpy(out_raw)[None].transpose(1, 2)                   # [1, H, T, D], as HF applies it
        cos, sin = rotary(o4, torch.from_numpy(positions)[None], layer_type=label)
        want = m.apply_rotary_pos_emb(o4, cos, -sin).transpose(1, 2)[0].numpy()
    got = out_raw.copy()
    runtime.get(spec)(got, positions=positions)
    error = np.abs(got.astype(np.float64) - want).max() / np.abs(want).max()
    assert error < 2e-6, f"max error {error:.3g} of the largest value"
    assert np.array_equal(got[..., : d - 64], out_raw[..., : d - 64])  # the nope part is untouched
    # Undoing the forward rotation: rope then inverse_rope gives the input back (to rounding); yarn's
    # attention factor scales cos and sin both ways in HF, so only the unscaled block round-trips.
    if label != "main":
        return
    forward = dict(spec.to_dict(), op="rope")
    k = np.zeros((tokens, 1, d), np.float32) + 1.0
    x = out_raw.copy()
    runtime.get(ropejit.Spec.from_json(forward))(x, k, positions=positions)
    runtime.get(spec)(x, positions=positions)
    assert np.abs(x - out_raw).max() < 1e-5 * np.abs(out_raw).max()


def test_paged_append_writes_kv_once(runtime, rng):
    # K = V: io.output paged_kv with copy_v false writes the rotated kv head into k_cache only.
    config = v4_config()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type="main")
    paged = dict(spec.to_dict())
    paged["io"] = dict(paged["io"], output="paged_kv", copy_v=False, page_size=16)
    paged_spec = ropejit.Spec.from_json(paged)
    uses = {f["name"]: f["use"] for f in paged_spec.launch_fields()}
    assert (uses["k_cache"], uses["v_cache"], uses["v"]) == ("required", "unused", "unused")
    hq, d, tokens = spec.num_q_heads, spec.head_dim, 21
    q_raw = rng.standard_normal((tokens, hq, d)).astype(np.float32)
    kv_raw = rng.standard_normal((tokens, 1, d)).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    ones = np.ones(d, np.float32)
    positions = np.arange(100, 100 + tokens, dtype=np.int64)
    slots = rng.permutation(64)[:tokens].astype(np.int64)
    k_cache = np.full((4, 16, 1, d), np.nan, np.float32)
    q = q_raw.copy()
    outputs = runtime.get(paged_spec)(q, kv_raw.copy(), positions=positions, k_cache=k_cache, slot_mapping=slots,
                                      q_norm_weight=ones, k_norm_weight=w)
    assert len(outputs) == 2
    q_want, kv_want = q_raw.copy(), kv_raw.copy()
    runtime.get(spec)(q_want, kv_want, positions=positions, q_norm_weight=ones, k_norm_weight=w)
    np.testing.assert_array_equal(q, q_want)
    np.testing.assert_array_equal(k_cache.reshape(64, d)[slots], kv_want[:, 0])


def small_compress_config():
    config = v4_config()
    config.compress_rates = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}
    config.index_n_heads, config.index_head_dim, config.index_topk = 6, 128, 8
    return config


def recorded_rotations(m, monkeypatch):
    """Each apply_rotary_pos_emb call a module's forward makes: (input, output), as HF shaped them."""
    calls = []
    original = m.apply_rotary_pos_emb

    def spy(x, cos, sin, unsqueeze_dim=1):
        out = original(x, cos, sin, unsqueeze_dim)
        calls.append((x.detach().clone(), out.detach().clone()))
        return out
    monkeypatch.setattr(m, "apply_rotary_pos_emb", spy)
    return calls


def randomized(module, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():  # position_bias is torch.empty in HF's __init__
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return module


def expect_rotated(runtime, spec, x, want, positions):
    got = np.ascontiguousarray(x.numpy())
    runtime.get(spec)(got, positions=positions)
    error = np.abs(got.astype(np.float64) - want.numpy()).max() / np.abs(want.numpy()).max()
    assert error < 2e-6, f"{spec.name}: max error {error:.3g} of the largest value"
    d = spec.head_dim - spec.rotary_dim
    assert np.array_equal(got[..., :d], x.numpy()[..., :d])  # the leading nope part is untouched


@pytest.mark.parametrize("yarn", [False, True])
def test_indexer_and_compressor_rotate_apart_as_the_v4_modules(runtime, rng, monkeypatch, yarn):
    # DeepseekV4CSACompressor.forward rotates its compressed keys at window positions
    # i * compress_rate (no cache: first_window_position 0), then its indexer's compressed keys
    # likewise and the indexer's queries at position_ids: three apply_rotary_pos_emb calls, each
    # one ropejit spec (op rope_tensor) of layer type compressor / indexer_keys / indexer.
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
    config = small_compress_config()
    if not yarn:
        config.rope_parameters["compress"] = {"rope_type": "default", "rope_theta": 160000.0,
                                              "partial_rotary_factor": 0.125}
    specs = {t: ropejit.Spec.from_hf(config, dtype="fp32", layer_type=t)
             for t in ("compressor", "indexer_keys", "indexer")}
    assert {t: (s.op, s.num_q_heads, s.head_dim, s.rotary_dim, s.rotary_slice, s.layout)
            for t, s in specs.items()} == {
        "compressor": ("rope_tensor", 1, 512, 64, "trailing", "interleaved"),
        "indexer_keys": ("rope_tensor", 1, 128, 64, "trailing", "interleaved"),
        "indexer": ("rope_tensor", 6, 128, 64, "trailing", "interleaved")}
    calls = recorded_rotations(m, monkeypatch)
    compressor = randomized(m.DeepseekV4CSACompressor(config), 7)
    seq, rate = 23, config.compress_rates["compressed_sparse_attention"]
    positions = np.sort(rng.choice(5000, seq, replace=False)).astype(np.int64)
    hidden = torch.from_numpy(rng.standard_normal((1, seq, config.hidden_size)).astype(np.float32))
    q_residual = torch.from_numpy(rng.standard_normal((1, seq, config.q_lora_rank)).astype(np.float32))
    with torch.no_grad():
        compressor(hidden, q_residual, torch.from_numpy(positions)[None], None, 0)
    assert len(calls) == 3
    windows = np.arange(seq // rate, dtype=np.int64) * rate
    for (x, out), part, pos in zip(calls, ("compressor", "indexer_keys", "indexer"), (windows, windows, positions)):
        # [1, H, N, D] as HF rotates it -> ropejit's [N, H, D]
        expect_rotated(runtime, specs[part], x[0].transpose(0, 1).contiguous(), out[0].transpose(0, 1), pos)


def test_heavily_compressed_keys_rotate_at_window_positions(runtime, rng, monkeypatch):
    # DeepseekV4HCACompressor: one compressed key every 8 tokens, at i * 8.
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as m
    config = small_compress_config()
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type="compressor")
    calls = recorded_rotations(m, monkeypatch)
    hca = randomized(m.DeepseekV4HCACompressor(config), 11)
    seq = 41
    hidden = torch.from_numpy(rng.standard_normal((1, seq, config.hidden_size)).astype(np.float32))
    with torch.no_grad():
        hca(hidden, None, torch.arange(seq)[None], None, 0)
    assert len(calls) == 1
    x, out = calls[0]
    windows = np.arange(seq // 8, dtype=np.int64) * 8
    expect_rotated(runtime, spec, x[0].transpose(0, 1).contiguous(), out[0].transpose(0, 1), windows)
    # The same keys rotated as the main attention's k (op rope, token positions) differ: the
    # window positions matter.
    got = np.ascontiguousarray(x[0].transpose(0, 1).numpy())
    runtime.get(spec)(got, positions=np.arange(len(windows), dtype=np.int64))
    assert np.abs(got - out[0].transpose(0, 1).numpy()).max() > 1e-3


def test_rope_tensor_is_op_ropes_q(runtime, rng):
    # One tensor forward equals op rope's q of the same spec (k of op rope a dummy), and
    # inverse_rope undoes it (a default block: yarn's attention factor scales both ways).
    config = v4_config()
    config.rope_parameters["compress"] = {"rope_type": "default", "rope_theta": 160000.0,
                                          "partial_rotary_factor": 0.125}
    spec = ropejit.Spec.from_hf(config, dtype="fp32", layer_type="indexer")
    tokens, h, d = 19, spec.num_q_heads, spec.head_dim
    x = rng.standard_normal((tokens, h, d)).astype(np.float32)
    positions = rng.integers(0, 60000, tokens).astype(np.int64)
    one = x.copy()
    runtime.get(spec)(one, positions=positions)
    assert np.abs(one - x).max() > 1e-2 * np.abs(x).max()  # the rope slice did turn
    pair = x.copy()
    runtime.get(ropejit.Spec.from_json(dict(spec.to_dict(), op="rope")))(pair, np.ones((tokens, 1, d), np.float32),
                                                                         positions=positions)
    np.testing.assert_array_equal(one, pair)
    runtime.get(ropejit.Spec.from_json(dict(spec.to_dict(), op="inverse_rope")))(one, positions=positions)
    assert np.abs(one - x).max() < 1e-5 * np.abs(x).max()
