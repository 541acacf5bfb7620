"""ropejit.compat: FlashInfer's RoPE drop-ins against a float64 reference written from FlashInfer's
own math, their in-place forms, the ragged (indptr, offsets) form, torch.compile and errors; CPU
tensors on the host backend.

The reference follows FlashInfer's kernel (include/flashinfer/pos_enc.cuh, commit fb28d72):
frequency j of a head is ``rope_theta^(-2·(j mod rotary_dim/2)/rotary_dim)`` (neox) or
``rope_theta^(-2·floor(j/2)/rotary_dim)`` (interleave), a float (lines 593-597); it is then
``(1 − s)·freq/rope_scale + s·freq`` with ``s = clamp(freq·a + b, 0, 1)``, where a = b = 0 for plain
RoPE and ``a = old_context_len / (2π(high − low))``, ``b = −1 / (high/low − 1)`` for Llama 3.1
(lines 600-602, 1397-1400, 1538-1539; tests/test_helpers/rope_reference.py ``apply_scaling`` is
the same smoothing); the angle is ``float(pos) · freq`` (line 615), and the pairs are
``(x[i], x[i + rotary_dim/2])`` or ``(x[2i], x[2i+1])`` rotated as ``(x1·cos − x2·sin, x2·cos + x1·sin)``
(``vec_apply_llama_rope_cos_sin`` and ``_interleave``; rope_reference.py ``RotaryEmbedding``).
"""
import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: ropejit.compat is not tested")

import ropejit  # noqa: E402
from ropejit import compat  # noqa: E402
# test_torch's fixtures: the session's host runtime for the ops, a generator seeded by the test's name.
from test_torch import gen, heads as randn, host_runtime  # noqa: E402,F401

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Relative to max(1, |expected|), past each element's angle slack (reference()): fp32 arithmetic;
# fp16 / bf16 one rounding of the output.
TOLERANCE = {"fp32": 2e-5, "fp16": 2e-3, "bf16": 1.6e-2}
LLAMA31_DEFAULTS = dict(rope_scale=8.0, rope_theta=5e5, low_freq_factor=1.0, high_freq_factor=4.0,
                        old_context_len=8192)


# ------------------------------------------------------------------ the float64 reference

def reference_freqs(rotary_dim, rope_scale=1.0, rope_theta=1e4, llama31=None):
    """FlashInfer's per-pair frequencies (float32 values, as its kernel holds them) as float64."""
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    freq = np.float32(rope_theta) ** (-2.0 * i / rotary_dim)
    freq = freq.astype(np.float32).astype(np.float64)
    if llama31 is None:
        smooth = np.zeros_like(freq)
    else:
        low, high, old = llama31
        wavelen = 2 * math.pi / freq
        smooth = np.clip((old / wavelen - low) / (high - low), 0.0, 1.0)
    freq = (1 - smooth) * (freq / rope_scale) + smooth * freq
    return freq.astype(np.float32)


def reference(x, pos, rotary_dim, interleave, **rope):
    """x [nnz, H, D] rotated at positions pos [nnz] in float64 (the tail past rotary_dim stays), and
    each element's angle slack: |pair| · angle · 2^-22, what four float32 ulps of the frequency move it
    (FlashInfer's __powf and 1/rope_scale, ropejit's HF order 1/theta^x and freq/factor differ so)."""
    llama31 = None
    if "low_freq_factor" in rope:
        llama31 = (rope.pop("low_freq_factor"), rope.pop("high_freq_factor"), rope.pop("old_context_len"))
    freq = reference_freqs(rotary_dim, llama31=llama31, **rope)
    angle = (pos.numpy().astype(np.float32)[:, None] * freq[None, :]).astype(np.float64)  # float(pos) * freq
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    out = x.double().numpy().copy()
    half = rotary_dim // 2
    even, odd = (out[..., 0:rotary_dim:2], out[..., 1:rotary_dim:2]) if interleave else \
        (out[..., :half], out[..., half:rotary_dim])
    slack = np.zeros_like(out)
    pair_slack = np.hypot(even, odd) * angle[:, None, :] * 2.0 ** -22
    if interleave:
        slack[..., 0:rotary_dim:2] = slack[..., 1:rotary_dim:2] = pair_slack
    else:
        slack[..., :half] = slack[..., half:rotary_dim] = pair_slack
    if interleave:
        x1, x2 = out[..., 0:rotary_dim:2].copy(), out[..., 1:rotary_dim:2].copy()
        out[..., 0:rotary_dim:2], out[..., 1:rotary_dim:2] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    else:
        x1, x2 = out[..., :half].copy(), out[..., half:rotary_dim].copy()
        out[..., :half], out[..., half:rotary_dim] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    return out, slack


def assert_matches(actual, expected, dtype, what):
    want, slack = expected
    got = actual.double().numpy()
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    error = (np.abs(got - want) - slack) / np.maximum(1.0, np.abs(want))
    assert error.max() <= TOLERANCE[dtype], f"{what}: error {error.max():.3g} > {TOLERANCE[dtype]} ({dtype})"


# ------------------------------------------------------------------ the pos_ids family

FAMILIES = {  # name: (out-of-place, in-place, the rope arguments passed)
    "rope": (compat.apply_rope_pos_ids, compat.apply_rope_pos_ids_inplace, dict(rope_theta=1e4)),
    "rope_scaled": (compat.apply_rope_pos_ids, compat.apply_rope_pos_ids_inplace,
                    dict(rope_scale=2.5, rope_theta=5e5)),
    "llama31": (compat.apply_llama31_rope_pos_ids, compat.apply_llama31_rope_pos_ids_inplace,
                dict(rope_scale=8.0, rope_theta=5e5, low_freq_factor=1.0, high_freq_factor=4.0,
                     old_context_len=2048)),
}
GEOMETRIES = {"h3-1_d64_r32": (3, 1, 64, 32), "h4-2_d80_full": (4, 2, 80, None), "h2-2_d64_r48": (2, 2, 64, 48)}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("interleave", [False, True], ids=["neox", "interleave"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_pos_ids_matches_reference(gen, dtype, geometry, interleave, family):
    functional, inplace, rope = FAMILIES[family]
    hq, hkv, head_dim, rotary_dim = GEOMETRIES[geometry]
    nnz = 37
    q, k = randn(gen, nnz, hq, head_dim, dtype=DTYPES[dtype]), randn(gen, nnz, hkv, head_dim, dtype=DTYPES[dtype])
    pos_ids = torch.randint(0, 4096, (nnz,), generator=gen, dtype=torch.int32 if hq == 3 else torch.int64)
    q_before, k_before = q.clone(), k.clone()
    q_rope, k_rope = functional(q, k, pos_ids, rotary_dim=rotary_dim, interleave=interleave, **rope)
    assert torch.equal(q, q_before) and torch.equal(k, k_before), "the functional form changed its inputs"
    assert (q_rope.dtype, k_rope.dtype) == (q.dtype, k.dtype)
    rd = rotary_dim or head_dim
    assert_matches(q_rope, reference(q, pos_ids, rd, interleave, **rope), dtype, "q_rope")
    assert_matches(k_rope, reference(k, pos_ids, rd, interleave, **rope), dtype, "k_rope")
    # In place: the same values written into q and k, None returned (as FlashInfer).
    assert inplace(q, k, pos_ids, rotary_dim, interleave, **rope) is None
    assert torch.equal(q, q_rope) and torch.equal(k, k_rope)


def test_defaults_are_flashinfers(gen):
    q, k = randn(gen, 9, 4, 64), randn(gen, 9, 2, 64)
    pos_ids = torch.randint(0, 100000, (9,), generator=gen)
    for got, x in zip(compat.apply_rope_pos_ids(q, k, pos_ids), (q, k)):  # rope_scale 1, rope_theta 1e4
        assert_matches(got, reference(x, pos_ids, 64, False, rope_theta=1e4), "fp32", "apply_rope_pos_ids")
    explicit = compat.apply_llama31_rope_pos_ids(q, k, pos_ids, 64, False, **LLAMA31_DEFAULTS)
    for got, want, x in zip(compat.apply_llama31_rope_pos_ids(q, k, pos_ids), explicit, (q, k)):
        assert torch.equal(got, want)
        assert_matches(got, reference(x, pos_ids, 64, False, **LLAMA31_DEFAULTS), "fp32", "apply_llama31")


def test_inplace_on_slices_of_packed_qkv(gen):
    # FlashInfer's docstring example: q and k are column slices of one [nnz, (Hq + 2 Hkv) D] tensor.
    nnz, hq, hkv, d = 21, 4, 2, 64
    packed = randn(gen, nnz, (hq + 2 * hkv) * d, dtype=torch.bfloat16)
    q = packed[:, :hq * d].reshape(nnz, hq, d)
    k = packed[:, hq * d:(hq + hkv) * d].reshape(nnz, hkv, d)
    v_before = packed[:, (hq + hkv) * d:].clone()
    pos_ids = torch.randint(0, 4096, (nnz,), generator=gen)
    q_rope, k_rope = compat.apply_llama31_rope_pos_ids(q, k, pos_ids, interleave=True)
    compat.apply_llama31_rope_pos_ids_inplace(q, k, pos_ids, interleave=True)
    assert torch.equal(q, q_rope) and torch.equal(k, k_rope)
    assert torch.equal(packed[:, (hq + hkv) * d:], v_before), "v changed"


# ------------------------------------------------------------------ the ragged form

def ragged_positions(indptr, offsets):
    """Per-token positions, segment by segment, as FlashInfer's BatchQKApplyRotaryKernel walks them."""
    pos = []
    for b in range(len(offsets)):
        pos += [int(offsets[b]) + i for i in range(int(indptr[b + 1] - indptr[b]))]
    return torch.tensor(pos)


@pytest.mark.parametrize("family", ["rope", "llama31"])
def test_ragged_form_rotates_segments_from_their_offsets(gen, family):
    functional, inplace = {"rope": (compat.apply_rope, compat.apply_rope_inplace),
                           "llama31": (compat.apply_llama31_rope, compat.apply_llama31_rope_inplace)}[family]
    indptr = torch.tensor([0, 5, 5, 20, 37], dtype=torch.int32)  # an empty segment among them
    offsets = torch.tensor([0, 7, 1000, 3], dtype=torch.int32)
    q, k = randn(gen, 37, 3, 80, dtype=torch.float16), randn(gen, 37, 1, 80, dtype=torch.float16)
    pos = ragged_positions(indptr, offsets)
    rope = FAMILIES[family][2]
    q_rope, k_rope = functional(q, k, indptr, offsets, rotary_dim=32, **rope)
    assert_matches(q_rope, reference(q, pos, 32, False, **rope), "fp16", "q_rope")
    assert_matches(k_rope, reference(k, pos, 32, False, **rope), "fp16", "k_rope")
    assert inplace(q, k, indptr.long(), offsets.long(), 32, False, **rope) is None
    assert torch.equal(q, q_rope) and torch.equal(k, k_rope)


# ------------------------------------------------------------------ torch.compile and fake tensors

def test_torch_compile_fullgraph_matches_eager(gen):
    def step(q, k, pos_ids):
        q_rope, k_rope = compat.apply_rope_pos_ids(q, k, pos_ids, rotary_dim=32, rope_theta=5e5)
        compat.apply_llama31_rope_pos_ids_inplace(q_rope, k_rope, pos_ids, 32, True)
        return q_rope, k_rope

    q, k = randn(gen, 11, 3, 64), randn(gen, 11, 1, 64)
    pos_ids = torch.randint(0, 4096, (11,), generator=gen)
    compiled = torch.compile(step, fullgraph=True)  # inductor: the graph is the ops alone, no C++ to build
    for got, want in zip(compiled(q, k, pos_ids), step(q, k, pos_ids)):
        assert torch.equal(got, want)


def test_torch_compile_dynamic_shapes(gen):
    def step(q, k, indptr, offsets, pos_ids):
        q_rope, k_rope = compat.apply_rope(q, k, indptr, offsets, interleave=True)
        compat.apply_llama31_rope_pos_ids_inplace(q_rope, k_rope, pos_ids, rotary_dim=32)
        return q_rope, k_rope

    # dynamic=True: every dim symbolic, the head counts too (the ops build the spec when they run).
    compiled = torch.compile(step, fullgraph=True, dynamic=True, backend="aot_eager")
    for nnz, hq in ((13, 2), (29, 4)):
        q, k = randn(gen, nnz, hq, 64), randn(gen, nnz, 2, 64)
        indptr = torch.tensor([0, 4, nnz], dtype=torch.int64)
        offsets = torch.randint(0, 500, (2,), generator=gen)
        pos_ids = torch.randint(0, 9000, (nnz,), generator=gen)
        for got, want in zip(compiled(q, k, indptr, offsets, pos_ids), step(q, k, indptr, offsets, pos_ids)):
            assert torch.equal(got, want)


def test_opcheck(gen):
    q, k = randn(gen, 6, 4, 64), randn(gen, 6, 2, 64)
    pos_ids = torch.randint(0, 4096, (6,), generator=gen)
    for op in (torch.ops.ropejit.flashinfer_rope.default, torch.ops.ropejit.flashinfer_rope_.default):
        torch.library.opcheck(op, (q.clone(), k.clone(), pos_ids, 32, True, [8.0, 5e5, 1.0, 4.0, 8192.0]))


def test_fake_tensor_mode_gives_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q, k = torch.empty(5, 4, 64, dtype=torch.bfloat16), torch.empty(5, 2, 64, dtype=torch.bfloat16)
        q_rope, k_rope = compat.apply_llama31_rope_pos_ids(q, k, torch.zeros(5, dtype=torch.int32))
        assert (q_rope.shape, q_rope.dtype, k_rope.shape) == (q.shape, q.dtype, k.shape)


# ------------------------------------------------------------------ errors

Q, K, POS = torch.zeros(5, 4, 64), torch.zeros(5, 2, 64), torch.zeros(5, dtype=torch.int32)
IDX = torch.tensor([0, 5], dtype=torch.int32)


@pytest.mark.parametrize("call, message", [
    (lambda: compat.apply_rope_pos_ids(Q, K.half(), POS), r"k: dtype torch.float16 is not allowed: must be q's dtype"),
    (lambda: compat.apply_rope_pos_ids(Q.double(), K.double(), POS), r"q: dtype torch.float64 is not allowed"),
    (lambda: compat.apply_rope_pos_ids(Q[0], K, POS), r"q: shape \[4, 64\] is not allowed: must be \[nnz"),
    (lambda: compat.apply_rope_pos_ids(Q, K[:3], POS), r"k: shape \[3, 2, 64\] is not allowed"),
    (lambda: compat.apply_rope_pos_ids(Q, K[..., :32], POS), r"k: shape \[5, 2, 32\] is not allowed"),
    (lambda: compat.apply_rope_pos_ids(Q, torch.zeros(5, 3, 64), POS),
     r"k: 3 heads is not allowed: num_kv_heads must divide"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS.float()),
     r"pos_ids: dtype torch.float32 is not allowed: must be torch.int32"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS[None]), r"pos_ids: shape \[1, 5\] is not allowed: must be \[nnz\]"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS[:4]), r"pos_ids: shape \[4\] is not allowed: must be \[nnz\] = \[5\]"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS, rotary_dim=33), r"rotary_dim: 33 is not allowed: must be an even"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS, rotary_dim=128), r"rotary_dim: 128 is not allowed.*head_dim = 64"),
    (lambda: compat.apply_rope_pos_ids(Q[..., :63], K[..., :63], POS), r"rotary_dim: None .*head_dim 63\) .* odd"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS, interleave=1),
     r"interleave: 1 is not allowed: must be True \| False"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS, rope_scale=0.5),
     r"rope_scale: 0.5 is not allowed: must be a finite number >= 1"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS, rope_theta=0),
     r"rope_theta: 0 is not allowed: must be a finite number > 0"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS, rope_theta=math.inf), r"rope_theta: inf is not allowed"),
    (lambda: compat.apply_llama31_rope_pos_ids(Q, K, POS, low_freq_factor=4.0),
     r"high_freq_factor: 4 is not allowed: must be a finite number > 4"),
    (lambda: compat.apply_llama31_rope_pos_ids(Q, K, POS, old_context_len=0),
     r"old_context_len: 0 is not allowed: must be an integer >= 1"),
    (lambda: compat.apply_rope(Q, K, IDX, IDX),
     r"indptr: shape \[2\] is not allowed: must be \[batch_size \+ 1\] = \[3\]"),
    (lambda: compat.apply_rope(Q, K, IDX, IDX[:1].long()),
     r"offsets: dtype torch.int64 is not allowed: must be indptr's dtype"),
    (lambda: compat.apply_rope_pos_ids("q", K, POS), r"q: a str is not a torch tensor"),
    (lambda: compat.apply_rope_pos_ids(Q, K.to("meta"), POS), r"k is on meta, but q is on cpu"),
    (lambda: compat.apply_rope_pos_ids(Q, K, POS, rope_scale=math.nan), r"rope_scale: nan is not allowed"),
])
def test_errors_name_the_argument(call, message):
    with pytest.raises(ropejit.ArgumentError, match=message):
        call()


def test_inplace_refuses_heads_that_are_not_one_row(gen):
    q = randn(gen, 5, 4, 128)[..., :64]  # each head strided: FlashInfer's kernel takes it, ropejit's in-place op not
    k = randn(gen, 5, 2, 64)
    with pytest.raises(ropejit.ArgumentError, match=r"q: strides \[512, 128, 1\] are not allowed in place"):
        compat.apply_rope_pos_ids_inplace(q, k, torch.zeros(5, dtype=torch.int32))
    q_rope, _ = compat.apply_rope_pos_ids(q, k, torch.zeros(5, dtype=torch.int32))  # out of place: copied first
    assert torch.equal(q_rope, q)  # position 0 rotates by nothing


# ------------------------------------------------------------------ FlashInfer itself, where it runs

def test_agrees_with_flashinfer(gen):
    flashinfer = pytest.importorskip("flashinfer", reason="flashinfer is not installed: no side-by-side check")
    if not torch.cuda.is_available():
        pytest.skip("flashinfer's kernels need a CUDA GPU: no side-by-side check")
    q, k = randn(gen, 37, 4, 128, dtype=torch.bfloat16).cuda(), randn(gen, 37, 2, 128, dtype=torch.bfloat16).cuda()
    pos_ids = torch.randint(0, 8192, (37,), generator=gen).cuda()
    for name, args in (("apply_rope_pos_ids", dict(rotary_dim=64, interleave=True, rope_scale=2.0)),
                       ("apply_llama31_rope_pos_ids", dict(rotary_dim=128))):
        for ours, theirs in zip(getattr(compat, name)(q, k, pos_ids, **args),
                                getattr(flashinfer, name)(q, k, pos_ids, **args)):
            torch.testing.assert_close(ours, theirs, rtol=1.6e-2, atol=1.6e-2)


# ------------------------------------------------------------------ cos_sin_cache: vLLM and FlashInfer
#
# The reference is vLLM's RotaryEmbedding.forward_native (vllm/model_executor/layers/rotary_embedding/
# base.py, commit 04458da, lines 60-88: positions flattened, cos_sin = cos_sin_cache.index_select(0,
# positions), cos, sin = cos_sin.chunk(2, dim=-1), query viewed [T, -1, head_size], its first rotary_dim
# elements rotated by apply_rotary_emb_torch, the rest passed through) with apply_rotary_emb_torch's pairs
# (common.py: neox x1, x2 = chunk(x, 2), else x[..., ::2], x[..., 1::2]; o1 = x1 cos - x2 sin, o2 = x2 cos +
# x1 sin) in float64, the cache's values as stored (vLLM's native form rounds them to query's dtype first; its
# CUDA kernel reads a cache it converted to query's dtype; ropejit reads the cache's own dtype). A position
# outside the cache has no row: NaN where vLLM would index out of range.

CACHE_GEOMETRIES = {"h4-2_d80_r32": (4, 2, 80, 32), "h6-3_d64_r48": (6, 3, 64, 48), "h8-1_d128_full": (8, 1, 128, 128)}


def pair_streams(half, section, interleaved):
    """The position stream (0 temporal, 1 height, 2 width) of each rotary pair, as vLLM's MRoPE
    picks it: contiguous sections (torch.cat of the split), or interleaved (apply_interleaved_rope)."""
    j = np.arange(half)
    if interleaved:
        return np.where((j % 3 == 1) & (j < 3 * section[1]), 1, np.where((j % 3 == 2) & (j < 3 * section[2]), 2, 0))
    return np.repeat([0, 1, 2], section)


def cache_reference(positions, x, head_size, cache, is_neox, section=None, interleaved=False):
    """x ([T, H * head_size] or [T, H, head_size]) rotated by the cache's rows at positions, float64, and
    each element's pair scale |(x1, x2)| |(cos, sin)| (the size of its rounding noise). With an MRoPE
    `section`, positions are [3, T] and pair j reads the row of its stream's position."""
    table = cache.double().numpy()
    rows, rotary_dim = table.shape
    half = rotary_dim // 2
    pos = positions.long().numpy().reshape(3 if section else 1, -1)
    pos = pos[pair_streams(half, section, interleaved)].T if section else np.repeat(pos.T, half, axis=1)  # [T, half]
    pairs_of = np.arange(half)
    cos = table[np.clip(pos, 0, rows - 1), pairs_of]
    sin = table[np.clip(pos, 0, rows - 1), half + pairs_of]
    cos[(pos < 0) | (pos >= rows)] = sin[(pos < 0) | (pos >= rows)] = np.nan  # no row
    cos, sin = cos[:, None, :], sin[:, None, :]
    out = x.double().numpy().reshape(len(pos), -1, head_size).copy()
    pairs = (np.s_[..., 0:rotary_dim:2], np.s_[..., 1:rotary_dim:2]) if not is_neox else \
        (np.s_[..., :half], np.s_[..., half:rotary_dim])
    x1, x2 = out[pairs[0]].copy(), out[pairs[1]].copy()
    out[pairs[0]], out[pairs[1]] = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    scale = np.ones_like(out)
    scale[pairs[0]] = scale[pairs[1]] = np.maximum(1.0, np.hypot(x1, x2) * np.hypot(cos, sin))
    return out.reshape(x.shape), scale.reshape(x.shape)


def assert_cache_matches(actual, expected, dtype, what):
    want, scale = expected
    got = actual.double().numpy()
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaN where the reference has none, or none"
    error = np.nan_to_num(np.abs(got - want) / scale)
    assert error.max() <= TOLERANCE[dtype], f"{what}: error {error.max():.3g} > {TOLERANCE[dtype]} ({dtype})"


def random_cache(gen, rows, rotary_dim, dtype):
    """A caller's cache of any finite numbers (not unit pairs: nothing may recompute them)."""
    return torch.randn(rows, rotary_dim, generator=gen).to(DTYPES[dtype])


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("cache_dtype", list(DTYPES))
@pytest.mark.parametrize("geometry", list(CACHE_GEOMETRIES))
@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
def test_vllm_rotary_embedding_matches_forward_native(gen, dtype, cache_dtype, geometry, is_neox):
    hq, hkv, head_size, rotary_dim = CACHE_GEOMETRIES[geometry]
    tokens, rows = 37, 301
    query = randn(gen, tokens, hq * head_size, dtype=DTYPES[dtype])
    key = randn(gen, tokens, hkv * head_size, dtype=DTYPES[dtype])
    cache = random_cache(gen, rows, rotary_dim, cache_dtype)
    positions = torch.randint(0, rows, (tokens,), generator=gen, dtype=torch.int32 if hq == 4 else torch.int64)
    want_q = cache_reference(positions, query, head_size, cache, is_neox)
    want_k = cache_reference(positions, key, head_size, cache, is_neox)
    q_before, k_before = query.clone(), key.clone()
    assert compat.rotary_embedding(positions, query, key, head_size, cache, is_neox) is None  # in place
    assert_cache_matches(query, want_q, dtype, "query")
    assert_cache_matches(key, want_k, dtype, "key")
    for got, before, heads in ((query, q_before, hq), (key, k_before, hkv)):  # the tail passes through as it was
        tail = np.s_[..., rotary_dim:]
        assert torch.equal(got.view(tokens, heads, head_size)[tail], before.view(tokens, heads, head_size)[tail])


def test_vllm_forms_key_none_batched_positions_and_heads_dim(gen):
    cache = random_cache(gen, 64, 32, "fp32")
    query = randn(gen, 2, 5, 4, 64)  # positions [B, S], query [B, S, H, head_size]
    positions = torch.randint(0, 64, (2, 5), generator=gen)
    want = cache_reference(positions, query, 64, cache, True)
    compat.rotary_embedding(positions, query, None, 64, cache, True)  # no key: cross-layer KV sharing
    assert_cache_matches(query, want, "fp32", "query without key")


def test_rotary_embedding_out_takes_strided_heads_and_leaves_them(gen):
    """The out-of-place form (vLLM's DeepSeek YaRN forward_native on MLA's q_pe, each head's last 64)."""
    cache, wide, key = random_cache(gen, 64, 32, "fp32"), randn(gen, 9, 4, 96), randn(gen, 9, 1, 64)
    q_pe, positions = wide[..., 32:], torch.randint(0, 64, (9,), generator=gen)
    wide_before, key_before = wide.clone(), key.clone()
    got_q, got_k = compat.rotary_embedding_out(positions, q_pe, key, 64, cache, False)
    assert torch.equal(wide, wide_before) and torch.equal(key, key_before)
    assert_cache_matches(got_q, cache_reference(positions, q_pe, 64, cache, False), "fp32", "query")
    assert_cache_matches(got_k, cache_reference(positions, key, 64, cache, False), "fp32", "key")


@pytest.mark.parametrize("interleaved", [False, True], ids=["sections", "interleaved"])
@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
def test_mrope_rotary_embedding_reads_each_pairs_stream(gen, is_neox, interleaved):
    """vLLM's MRotaryEmbedding on [3, T] positions: pair j rotates by the row of its T/H/W stream's
    position (Qwen2-VL's contiguous sections, Qwen3-VL's interleaving), partial rotary, GQA, bf16."""
    hq, hkv, head_size, rotary_dim = CACHE_GEOMETRIES["h6-3_d64_r48"]
    section = [10, 7, 7] if interleaved else [12, 6, 6]
    tokens, rows = 41, 257
    query = randn(gen, tokens, hq * head_size, dtype=torch.bfloat16)
    key = randn(gen, tokens, hkv, head_size, dtype=torch.bfloat16)
    cache = random_cache(gen, rows, rotary_dim, "fp32")
    streams = torch.randint(0, rows + 3, (3, tokens), generator=gen)  # a few past the cache: NaN there
    want_q = cache_reference(streams, query, head_size, cache, is_neox, section, interleaved)
    want_k = cache_reference(streams, key, head_size, cache, is_neox, section, interleaved)
    assert compat.mrope_rotary_embedding(streams, query, key, head_size, cache, is_neox, section, interleaved) is None
    assert_cache_matches(query, want_q, "bf16", "query")
    assert_cache_matches(key, want_k, "bf16", "key")
    # The same positions in all three streams are the text form.
    flat = streams[0]
    q1 = randn(gen, tokens, hq * head_size)
    q2 = q1.clone()
    compat.mrope_rotary_embedding(flat.expand(3, -1), q1, key.float().clone(), head_size, cache, is_neox, section)
    compat.rotary_embedding(flat, q2, key.float().clone(), head_size, cache, is_neox)
    assert torch.equal(torch.nan_to_num(q1), torch.nan_to_num(q2))


@pytest.mark.parametrize("call, message", [
    (lambda c, q, k: compat.mrope_rotary_embedding(torch.zeros(7, dtype=torch.long), q, k, 64, c, True, [12, 6, 6]),
     "positions: [7] is not allowed: must be [3, T]"),
    (lambda c, q, k: compat.mrope_rotary_embedding(torch.zeros(3, 7, dtype=torch.long), q, k, 64, c, True, [12, 6, 5]),
     "mrope_section: [12, 6, 5] is not allowed: must be 3 integers >= 1 summing to rotary_dim / 2 = 24"),
    (lambda c, q, k: compat.mrope_rotary_embedding(torch.zeros(3, 7, dtype=torch.long), q, None, 64, c, True, [12, 6, 6]),
     "key: None is not allowed"),
])
def test_mrope_errors_name_the_argument(gen, call, message):
    cache, query, key = random_cache(gen, 16, 48, "fp32"), randn(gen, 7, 6 * 64), randn(gen, 7, 3 * 64)
    before = query.clone()
    with pytest.raises(compat.ArgumentError, match=re.escape(message)):
        call(cache, query, key)
    assert torch.equal(query, before)


@pytest.mark.parametrize("cache_dtype", ["fp32", "bf16"])
def test_positions_outside_the_cache_rotate_to_nan(gen, cache_dtype):
    query, key = randn(gen, 9, 2 * 64, dtype=torch.bfloat16), randn(gen, 9, 64, dtype=torch.bfloat16)
    cache = random_cache(gen, 10, 48, cache_dtype)
    positions = torch.tensor([0, 9, 10, 4, 4, 1 << 20, 3, 11, 2])  # negative ones: refused as any position
    want_q, want_k = (cache_reference(positions, x, 64, cache, True) for x in (query, key))
    compat.rotary_embedding(positions, query, key, 64, cache, True)
    assert_cache_matches(query, want_q, "bf16", "query")
    assert_cache_matches(key, want_k, "bf16", "key")
    rotated = query.view(9, 2, 64)[..., :48].isnan().all(dim=-1).all(dim=-1)
    assert rotated.tolist() == [False, False, True, False, False, True, False, True, False]
    assert not query.view(9, 2, 64)[..., 48:].isnan().any()  # the pass-through tail keeps its values


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
def test_flashinfer_cos_sin_cache_pair(gen, is_neox):
    query, key = randn(gen, 13, 4 * 80, dtype=torch.float16), randn(gen, 13, 2 * 80, dtype=torch.float16)
    cache = random_cache(gen, 100, 64, "fp32")
    positions = torch.randint(0, 100, (13,), generator=gen)
    q_before, k_before = query.clone(), key.clone()
    q_out, k_out = compat.apply_rope_with_cos_sin_cache(positions, query, key, 80, cache, is_neox)
    assert torch.equal(query, q_before) and torch.equal(key, k_before), "the functional form changed its inputs"
    assert (q_out.shape, k_out.shape, q_out.dtype) == (query.shape, key.shape, query.dtype)
    assert_cache_matches(q_out, cache_reference(positions, query, 80, cache, is_neox), "fp16", "query_out")
    assert_cache_matches(k_out, cache_reference(positions, key, 80, cache, is_neox), "fp16", "key_out")
    assert compat.apply_rope_with_cos_sin_cache_inplace(positions, query, key, 80, cache, is_neox) is None
    assert torch.equal(query, q_out) and torch.equal(key, k_out)
    # Defaults as FlashInfer's: is_neox True.
    assert all(torch.equal(a, b) for a, b in zip(
        compat.apply_rope_with_cos_sin_cache(positions, q_before, k_before, 80, cache),
        compat.apply_rope_with_cos_sin_cache(positions, q_before, k_before, 80, cache, True)))


def test_cos_sin_cache_ops_opcheck_and_compile(gen):
    query, key = randn(gen, 6, 4 * 64), randn(gen, 6, 2 * 64)
    cache, positions = random_cache(gen, 32, 64, "fp32"), torch.randint(0, 32, (6,), generator=gen)
    for op in (torch.ops.ropejit.cos_sin_cache_rope.default, torch.ops.ropejit.cos_sin_cache_rope_.default):
        torch.library.opcheck(op, (positions, query.clone(), key.clone(), 64, cache, False))
    without_key = (positions, query.clone(), None, 64, cache, True)
    torch.library.opcheck(torch.ops.ropejit.cos_sin_cache_rope_.default, without_key)
    streams = torch.randint(0, 32, (3, 6), generator=gen)
    torch.library.opcheck(torch.ops.ropejit.mrope_cos_sin_cache_rope_.default,
                          (streams, query.clone(), key.clone(), 64, cache, True, [16, 8, 8], False))
    step = lambda p, q, k: compat.apply_rope_with_cos_sin_cache(p, q, k, 64, cache)  # noqa: E731
    compiled = torch.compile(step, fullgraph=True)
    for got, want in zip(compiled(positions, query, key), step(positions, query, key)):
        assert torch.equal(got, want)


CQ, CK, CACHE = torch.zeros(5, 4 * 64), torch.zeros(5, 2 * 64), torch.zeros(8, 64)
CPOS = torch.zeros(5, dtype=torch.int32)


@pytest.mark.parametrize("call, message", [
    (lambda: compat.rotary_embedding(CPOS, CQ, CK.half(), 64, CACHE, True), r"key: dtype torch.float16 is not allowed"),
    (lambda: compat.rotary_embedding(CPOS.float(), CQ, CK, 64, CACHE, True), r"positions: dtype torch.float32"),
    (lambda: compat.rotary_embedding(CPOS, CQ, CK, 48, CACHE[:, :32], True), r"query: shape \[5, 256\] is not allowed"),
    (lambda: compat.rotary_embedding(CPOS[:4], CQ, CK, 64, CACHE, True), r"query: shape \[5, 256\] is not allowed"),
    (lambda: compat.rotary_embedding(CPOS, CQ, torch.zeros(5, 3 * 64), 64, CACHE, True), r"key: 3 heads"),
    (lambda: compat.rotary_embedding(CPOS, CQ, CK, 64, CACHE[:, :33], True), r"cos_sin_cache: shape \[8, 33\]"),
    (lambda: compat.rotary_embedding(CPOS, CQ, CK, 64, torch.zeros(8, 128), True),
     r"rotary_dim even in \[2, head_size"),
    (lambda: compat.rotary_embedding(CPOS, CQ, CK, 64, CACHE.double(), True), r"cos_sin_cache: dtype torch.float64"),
    (lambda: compat.rotary_embedding(CPOS, CQ, CK, 64, CACHE, 1), r"is_neox: 1 is not allowed"),
    (lambda: compat.rotary_embedding(CPOS, CQ, CK, 64.0, CACHE, True), r"head_size: 64.0 is not allowed"),
    (lambda: compat.rotary_embedding(CPOS, CQ, CK, 64, CACHE.to("meta"), True), r"cos_sin_cache is on meta"),
    (lambda: compat.apply_rope_with_cos_sin_cache(CPOS, CQ, CK, 64, CACHE.half()),
     r"cos_sin_cache: dtype torch.float16 is not allowed: must be torch.float32"),
    (lambda: compat.apply_rope_with_cos_sin_cache_inplace(CPOS, CQ, None, 64, CACHE), r"key: None is not allowed"),
    (lambda: compat.rotary_embedding_out(CPOS, CQ, None, 64, CACHE, True), r"key: None is not allowed"),
])
def test_cos_sin_cache_errors_name_the_argument(call, message):
    with pytest.raises(ropejit.ArgumentError, match=message):
        call()


def test_sglang_and_vllm_batched_forms(gen):
    """sgl_kernel's in-place function is FlashInfer's; vLLM's batched form reads row position + offset."""
    query, key = randn(gen, 11, 4 * 64, dtype=torch.bfloat16), randn(gen, 11, 2 * 64, dtype=torch.bfloat16)
    cache, positions = random_cache(gen, 200, 48, "fp32"), torch.randint(0, 100, (11,), generator=gen)
    q_sgl, k_sgl = query.clone(), key.clone()
    compat.sgl_kernel.apply_rope_with_cos_sin_cache_inplace(positions, q_sgl, k_sgl, 64, cache, False, None, True)
    assert all(torch.equal(a, b) for a, b in zip((q_sgl, k_sgl), compat.flashinfer.apply_rope_with_cos_sin_cache(
        positions, query, key, 64, cache, False, backend="cute-dsl")))
    offsets = torch.randint(0, 100, (11,), generator=gen)  # each token its LoRA's stacked cache
    want_q, want_k = (cache_reference(positions + offsets, x, 64, cache, True) for x in (query, key))
    compat.vllm_ops.batched_rotary_embedding(positions, query, key, 64, cache, True, 48, offsets)
    assert_cache_matches(query, want_q, "bf16", "query")
    assert_cache_matches(key, want_k, "bf16", "key")


@pytest.mark.parametrize("call, message", [
    (lambda: compat.sgl_apply_rope_with_cos_sin_cache_inplace(CPOS, CQ, CK, 64, CACHE, True, object()),
     r"fused_set_kv_buffer_arg: a value is not allowed: must be None"),
    (lambda: compat.sgl_apply_rope_with_cos_sin_cache_inplace(CPOS, CQ, CK, 64, CACHE, True, None, 1),
     r"enable_pdl: 1 is not allowed"),
    (lambda: compat.apply_rope_with_cos_sin_cache(CPOS, CQ, CK, 64, CACHE, backend="triton"),
     r"backend: 'triton' is not allowed: must be 'cuda' \| 'cute-dsl'"),
    (lambda: compat.batched_rotary_embedding(CPOS, CQ, CK, 64, CACHE, True, 32, CPOS.long()),
     r"rot_dim: 32 is not allowed: must be cos_sin_cache's width 64"),
    (lambda: compat.batched_rotary_embedding(CPOS, CQ, CK, 64, CACHE, True, 64, CPOS[:3].long()),
     r"cos_sin_cache_offsets: shape \[3\]"),
    (lambda: compat.batched_rotary_embedding(CPOS, CQ, CK, 64, CACHE, True, 64, CPOS.float()),
     r"cos_sin_cache_offsets: torch.float32 is not allowed"),
])
def test_engine_form_errors_name_the_argument(call, message):
    with pytest.raises(ropejit.ArgumentError, match=message):
        call()


def test_namespaces_hold_each_peers_names():
    assert vars(compat.vllm_ops) == {"rotary_embedding": compat.rotary_embedding,
                                     "batched_rotary_embedding": compat.batched_rotary_embedding}
    assert compat.sgl_kernel.apply_rope_with_cos_sin_cache_inplace is compat.sgl_apply_rope_with_cos_sin_cache_inplace
    assert all(getattr(compat, name) is function for name, function in vars(compat.flashinfer).items())


def test_agrees_with_vllm_and_flashinfer_cos_sin_cache(gen):
    if not torch.cuda.is_available():
        pytest.skip("the peers' kernels need a CUDA GPU: no side-by-side check")
    query = randn(gen, 37, 4 * 128, dtype=torch.bfloat16).cuda()
    key = randn(gen, 37, 2 * 128, dtype=torch.bfloat16).cuda()
    cache, positions = random_cache(gen, 4096, 128, "fp32").cuda(), torch.randint(0, 4096, (37,), generator=gen).cuda()
    ours = compat.apply_rope_with_cos_sin_cache(positions, query, key, 128, cache)
    flashinfer = pytest.importorskip("flashinfer", reason="flashinfer is not installed: no side-by-side check")
    for a, b in zip(ours, flashinfer.apply_rope_with_cos_sin_cache(positions, query, key, 128, cache)):
        torch.testing.assert_close(a, b, rtol=1.6e-2, atol=1.6e-2)
