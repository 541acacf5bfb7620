"""Every io form and dtype through numpy on the host backend, against the float64 reference."""
import numpy as np
import pytest

import ropejit
from reference import assert_close, inv_freq_default, rms_norm, rotate, to_float64, to_storage

THETA = 10000.0


def make_spec(dtype="fp32", layout="neox", head_dim=64, rotary_dim=None, hq=4, hkv=2, io=None, **extra):
    spec = {"name": "py-test", "head_dim": head_dim, "rotary_dim": rotary_dim or head_dim, "num_q_heads": hq,
            "num_kv_heads": hkv, "layout": layout, "dtype": dtype, "max_position_embeddings": 4096,
            "rope": {"rope_type": "default", "rope_theta": THETA}, "io": io or {}}
    spec.update(extra)
    return ropejit.Spec.from_json(spec)


def random_heads(rng, tokens, heads, head_dim, dtype):
    values = rng.standard_normal((tokens, heads, head_dim)).astype(np.float32)
    stored = to_storage(values, dtype)
    return stored, to_float64(stored, dtype)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
def test_inplace_explicit_positions(runtime, rng, dtype, layout):
    spec = make_spec(dtype, layout, head_dim=96, rotary_dim=64, hq=6, hkv=2)
    tokens = 37
    q, q64 = random_heads(rng, tokens, 6, 96, dtype)
    k, k64 = random_heads(rng, tokens, 2, 96, dtype)
    positions = rng.integers(0, 4000, tokens).astype(np.int64)
    q_res, k_res = runtime.get(spec)(q, k, positions=positions)
    assert q_res is q and k_res is k
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q, rotate(q64, positions, inv_freq, layout), dtype, "q")
    assert_close(k, rotate(k64, positions, inv_freq, layout), dtype, "k")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_separate_output_allocated_and_strided_input(runtime, rng, dtype):
    spec = make_spec(dtype, io={"output": "separate", "copy_v": True})
    tokens = 19
    wide, _ = random_heads(rng, tokens, 5, 64, dtype)  # q rows 5 heads apart: a token stride of 320
    q = wide[:, :4, :]
    q64 = to_float64(q, dtype)
    k, k64 = random_heads(rng, tokens, 2, 64, dtype)
    v, v64 = random_heads(rng, tokens, 2, 64, dtype)
    q_before = q.copy()
    positions = rng.integers(0, 4000, tokens).astype(np.int32)
    q_out, k_out, v_out = runtime.get(spec)(q, k, v, positions=positions)
    assert q_out.shape == (tokens, 4, 64) and q_out.dtype == q.dtype
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q_out, rotate(q64, positions, inv_freq, "neox"), dtype, "q_out")
    assert_close(k_out, rotate(k64, positions, inv_freq, "neox"), dtype, "k_out")
    np.testing.assert_array_equal(to_float64(v_out, dtype), v64)
    np.testing.assert_array_equal(q, q_before)  # inputs untouched by a separate output


def test_packed_qkv_with_bias(runtime, rng):
    spec = make_spec("fp16", io={"input": "packed_qkv", "qkv_bias": True, "copy_v": True})
    tokens, width = 23, (4 + 2 * 2) * 64
    qkv = rng.standard_normal((tokens, width)).astype(np.float16)
    bias = rng.standard_normal(width).astype(np.float16)
    expected = qkv.astype(np.float64) + bias.astype(np.float64)
    positions = rng.integers(0, 4000, tokens).astype(np.int32)
    (result,) = runtime.get(spec)(qkv=qkv, bias=bias, positions=positions)
    assert result is qkv
    heads = expected.reshape(tokens, 8, 64)
    inv_freq = inv_freq_default(THETA, 64)
    want = heads.copy()
    want[:, :6] = rotate(heads[:, :6], positions, inv_freq, "neox")
    assert_close(qkv.reshape(tokens, 8, 64), want, "fp16", "qkv")


def varlen_positions(rng, lengths, starts):
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    positions = np.concatenate([np.arange(s, s + n) for n, s in zip(lengths, starts)]).astype(np.int64)
    return cu, np.asarray(starts, dtype=np.int64), positions


def test_varlen_positions(runtime, rng):
    spec = make_spec("fp32", io={"output": "separate", "positions": "varlen"})
    cu, start_pos, positions = varlen_positions(rng, [5, 1, 9], [0, 17, 300])
    tokens = int(cu[-1])
    q, q64 = random_heads(rng, tokens, 4, 64, "fp32")
    k, k64 = random_heads(rng, tokens, 2, 64, "fp32")
    q_out, k_out = runtime.get(spec)(q, k, cu_seqlens=cu, start_pos=start_pos)
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q_out, rotate(q64, positions, inv_freq, "neox"), "fp32", "q_out")
    assert_close(k_out, rotate(k64, positions, inv_freq, "neox"), "fp32", "k_out")


def test_offset_positions(runtime, rng):
    spec = make_spec("bf16", io={"positions": "offset"})
    tokens = 11
    q, q64 = random_heads(rng, tokens, 4, 64, "bf16")
    k, k64 = random_heads(rng, tokens, 2, 64, "bf16")
    runtime.get(spec)(q, k, start_pos=np.array([1234], dtype=np.int64))
    positions = np.arange(1234, 1234 + tokens)
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q, rotate(q64, positions, inv_freq, "neox"), "bf16", "q")
    assert_close(k, rotate(k64, positions, inv_freq, "neox"), "bf16", "k")


def test_padded_bhsd_output(runtime, rng):
    spec = make_spec("fp32", io={"output": "padded_bhsd", "positions": "varlen"})
    lengths, max_len = [3, 6], 7
    cu, start_pos, positions = varlen_positions(rng, lengths, [0, 40])
    tokens = int(cu[-1])
    q, q64 = random_heads(rng, tokens, 4, 64, "fp32")
    k, k64 = random_heads(rng, tokens, 2, 64, "fp32")
    q_out = np.full((2, 4, max_len, 64), np.nan, dtype=np.float32)  # poisoned: padding must become 0
    k_out = np.full((2, 2, max_len, 64), np.nan, dtype=np.float32)
    runtime.get(spec)(q, k, cu_seqlens=cu, start_pos=start_pos, q_out=q_out, k_out=k_out)
    inv_freq = inv_freq_default(THETA, 64)
    q_rot, k_rot = rotate(q64, positions, inv_freq, "neox"), rotate(k64, positions, inv_freq, "neox")
    for b, (begin, n) in enumerate(zip(cu[:-1], lengths)):
        assert_close(q_out[b, :, :n].transpose(1, 0, 2), q_rot[begin:begin + n], "fp32", f"q_out[{b}]")
        assert_close(k_out[b, :, :n].transpose(1, 0, 2), k_rot[begin:begin + n], "fp32", f"k_out[{b}]")
        assert np.all(q_out[b, :, n:] == 0) and np.all(k_out[b, :, n:] == 0)


def test_qk_norm(runtime, rng):
    spec = make_spec("fp32", qk_norm={"type": "rmsnorm", "eps": 1e-6})
    tokens = 13
    q, q64 = random_heads(rng, tokens, 4, 64, "fp32")
    k, k64 = random_heads(rng, tokens, 2, 64, "fp32")
    wq = rng.standard_normal(64).astype(np.float32)
    wk = rng.standard_normal(64).astype(np.float32)
    positions = rng.integers(0, 4000, tokens).astype(np.int32)
    runtime.get(spec)(q, k, positions=positions, q_norm_weight=wq, k_norm_weight=wk)
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q, rotate(rms_norm(q64, wq, 1e-6), positions, inv_freq, "neox"), "fp32", "q")
    assert_close(k, rotate(rms_norm(k64, wk, 1e-6), positions, inv_freq, "neox"), "fp32", "k")


@pytest.mark.parametrize("cache_layout", ["nhd", "hnd"])
def test_paged_kv_slot_mapping(runtime, rng, cache_layout):
    page_size, pages = 4, 6
    spec = make_spec("fp32", io={"output": "paged_kv", "page_size": page_size, "cache_layout": cache_layout})
    tokens = 9
    q, q64 = random_heads(rng, tokens, 4, 64, "fp32")
    k, k64 = random_heads(rng, tokens, 2, 64, "fp32")
    v, v64 = random_heads(rng, tokens, 2, 64, "fp32")
    shape = (pages, page_size, 2, 64) if cache_layout == "nhd" else (pages, 2, page_size, 64)
    k_cache = rng.standard_normal(shape).astype(np.float32)
    v_cache = rng.standard_normal(shape).astype(np.float32)
    k_before, v_before = k_cache.copy(), v_cache.copy()
    slots = rng.permutation(pages * page_size)[:tokens].astype(np.int64)
    slots[3] = -1  # token 3 is not cached
    positions = rng.integers(0, 4000, tokens).astype(np.int64)
    q_res, k_res, v_res = runtime.get(spec)(q, k, v, positions=positions, k_cache=k_cache, v_cache=v_cache,
                                            slot_mapping=slots)
    assert q_res is q and k_res is k_cache and v_res is v_cache
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q, rotate(q64, positions, inv_freq, "neox"), "fp32", "q")
    k_rot = rotate(k64, positions, inv_freq, "neox")

    def slot(cache, s):
        page, offset = divmod(int(s), page_size)
        return cache[page, offset] if cache_layout == "nhd" else cache[page, :, offset]

    written = set()
    for t, s in enumerate(slots):
        if s < 0:
            continue
        written.add(int(s))
        assert_close(slot(k_cache, s), k_rot[t], "fp32", f"k_cache slot {s}")
        np.testing.assert_array_equal(slot(v_cache, s), v64[t])
    for s in range(pages * page_size):
        if s not in written:
            np.testing.assert_array_equal(slot(k_cache, s), slot(k_before, s))
            np.testing.assert_array_equal(slot(v_cache, s), slot(v_before, s))
