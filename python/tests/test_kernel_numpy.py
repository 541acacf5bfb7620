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


class DlpackOnly:
    """An array known only through the DLPack protocol (as cupy or jax arrays are seen)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_only_arrays(runtime, rng):
    spec = make_spec("fp16", io={"output": "separate"})
    tokens = 6
    q, q64 = random_heads(rng, tokens, 4, 64, "fp16")
    k, k64 = random_heads(rng, tokens, 2, 64, "fp16")
    q_out = np.full((tokens, 4, 64), np.nan, np.float16)
    k_out = np.full((tokens, 2, 64), np.nan, np.float16)
    positions = rng.integers(0, 4000, tokens).astype(np.int64)
    runtime.get(spec)(DlpackOnly(q), DlpackOnly(k), positions=DlpackOnly(positions), q_out=DlpackOnly(q_out),
                      k_out=DlpackOnly(k_out))
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q_out, rotate(q64, positions, inv_freq, "neox"), "fp16", "q_out")
    assert_close(k_out, rotate(k64, positions, inv_freq, "neox"), "fp16", "k_out")
    with pytest.raises(ropejit.ArgumentError, match="q_out is required: ropejit allocates outputs only for torch"):
        runtime.get(spec)(DlpackOnly(q), DlpackOnly(k), positions=positions, k_out=k_out)


def test_mrope_positions(runtime, rng):
    section = [8, 12, 12]  # temporal, height, width pairs (Qwen2-VL's contiguous sections)
    spec = make_spec("fp32", io={"positions": "mrope", "mrope_section": section})
    tokens = 10
    q, q64 = random_heads(rng, tokens, 4, 64, "fp32")
    k, k64 = random_heads(rng, tokens, 2, 64, "fp32")
    positions = rng.integers(0, 4000, (3, tokens)).astype(np.int32)
    runtime.get(spec)(q, k, positions=positions)
    inv_freq = inv_freq_default(THETA, 64)
    stream_of_pair = np.repeat([0, 1, 2], section)
    # Each pair rotates by its own stream's position: rotate one pair at a time.
    want_q, want_k = q64.copy(), k64.copy()
    for pair, stream in enumerate(stream_of_pair):
        only = np.zeros_like(inv_freq)
        only[pair] = inv_freq[pair]
        for want, source in ((want_q, q64), (want_k, k64)):
            rotated = rotate(source, positions[stream], only, "neox")
            want[..., pair], want[..., pair + 32] = rotated[..., pair], rotated[..., pair + 32]
    assert_close(q, want_q, "fp32", "q")
    assert_close(k, want_k, "fp32", "k")


def fp8_e4m3_values():
    """Every finite e4m3fn code 0..126 decoded (the positive half; 127 is NaN)."""
    codes = np.arange(127)
    exponent, mantissa = codes >> 3, codes & 7
    return np.where(exponent == 0, mantissa / 8.0 * 2.0**-6, (1 + mantissa / 8.0) * 2.0 ** (exponent - 7.0))


def fp8_e4m3_round(x):
    """float64 → e4m3fn value, nearest (ties to the even code), saturating at 448."""
    values = fp8_e4m3_values()
    magnitude = np.minimum(np.abs(x), 448.0)
    distance = np.abs(magnitude[..., None] - values)
    best = distance.min(axis=-1, keepdims=True)
    candidates = np.where(distance == best, np.arange(127), 1000)
    even = np.where(candidates % 2 == 0, candidates, 1000).min(axis=-1)
    code = np.where(even < 1000, even, candidates.min(axis=-1))
    return np.sign(x) * values[code]


def fp8_e4m3_decode(bits):
    values = fp8_e4m3_values()
    return np.where(bits & 0x80, -1.0, 1.0) * values[np.minimum(bits & 0x7F, 126)]


def test_paged_kv_block_tables_fp8(runtime, rng):
    page_size, pages, scale = 4, 8, 0.05
    spec = make_spec("bf16", io={"output": "paged_kv", "page_size": page_size, "cache_index": "block_tables",
                                 "cache_dtype": "fp8_e4m3", "positions": "varlen", "q_output": "separate"})
    cu, start_pos, positions = varlen_positions(rng, [3, 5], [2, 6])
    tokens = int(cu[-1])
    q, q64 = random_heads(rng, tokens, 4, 64, "bf16")
    k, k64 = random_heads(rng, tokens, 2, 64, "bf16")
    v, v64 = random_heads(rng, tokens, 2, 64, "bf16")
    block_tables = np.array([[5, 1, 7], [0, 2, 6]], dtype=np.int32)  # pages of each sequence
    k_cache = rng.integers(0, 256, (pages, page_size, 2, 64)).astype(np.uint8)  # random bytes
    v_cache = rng.integers(0, 256, (pages, page_size, 2, 64)).astype(np.uint8)
    k_before, v_before = k_cache.copy(), v_cache.copy()
    q_out, k_res, v_res = runtime.get(spec)(q, k, v, cu_seqlens=cu, start_pos=start_pos, k_cache=k_cache,
                                            v_cache=v_cache, block_tables=block_tables, k_scale=scale, v_scale=scale)
    assert k_res is k_cache and v_res is v_cache
    inv_freq = inv_freq_default(THETA, 64)
    assert_close(q_out, rotate(q64, positions, inv_freq, "neox"), "bf16", "q_out")
    k_rot = rotate(k64, positions, inv_freq, "neox")
    touched = np.zeros((pages, page_size), bool)
    for t in range(tokens):
        b = int(np.searchsorted(cu, t, side="right") - 1)
        page, offset = block_tables[b, positions[t] // page_size], positions[t] % page_size
        touched[page, offset] = True
        for cache, values, what in ((k_cache, k_rot[t], "k"), (v_cache, v64[t], "v")):
            got = fp8_e4m3_decode(cache[page, offset])
            want = fp8_e4m3_round(values / scale)
            # One rounding of fp32 values: a value within fp32 noise of a midpoint may take either side.
            ulp = np.maximum(2.0**-9, 2.0 ** (np.floor(np.log2(np.maximum(np.abs(want), 2.0**-6))) - 3))
            assert np.all(np.abs(got - want) <= ulp * 1.0001), f"{what} token {t}"
            assert np.mean(got == want) > 0.97, f"{what} token {t}: too many codes off by one"
    np.testing.assert_array_equal(k_cache[~touched], k_before[~touched])
    np.testing.assert_array_equal(v_cache[~touched], v_before[~touched])
