"""A spec's "hadamard": true against numpy, independently of the C++ reference: the same q and k
rotated by the spec without the key, then multiplied by Sylvester's Walsh-Hadamard matrix (built
with np.kron, H_2n = [[H, H], [H, -H]]) over sqrt(head_dim), must equal the launch's output; v is
not transformed; the transform is orthogonal (q . k kept per head pair)."""
import numpy as np
import pytest

import ropejit


def _sylvester(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.kron(np.array([[1.0, 1.0], [1.0, -1.0]]), h)
    return h


def _spec(layout, dtype, head_dim, rotary_dim, hadamard, copy_v=False):
    spec = {"name": "hadamard-numpy", "head_dim": head_dim, "rotary_dim": rotary_dim, "num_q_heads": 4,
            "num_kv_heads": 2, "layout": layout, "dtype": dtype, "max_position_embeddings": 4096,
            "rope": {"rope_type": "default", "rope_theta": 10000.0},
            "io": {"output": "separate", "copy_v": copy_v}}
    if hadamard:
        spec["hadamard"] = True
    return ropejit.Spec.from_json(spec)


@pytest.mark.parametrize("layout", ["neox", "interleaved"])
@pytest.mark.parametrize("head_dim, rotary_dim", [(128, 64), (64, 64), (256, 128)])
def test_hadamard_is_sylvesters_matrix_after_the_rotation(runtime, rng, layout, head_dim, rotary_dim):
    tokens = 13
    q = rng.standard_normal((tokens, 4, head_dim)).astype(np.float32)
    k = rng.standard_normal((tokens, 2, head_dim)).astype(np.float32)
    positions = rng.integers(0, 4000, tokens).astype(np.int64)
    dtype = "fp32" if head_dim <= 128 else "fp16"  # fp32 heads fit a warp up to 128 values
    if dtype == "fp16":
        q, k = q.astype(np.float16), k.astype(np.float16)
    plain = runtime.get(_spec(layout, dtype, head_dim, rotary_dim, False))
    transformed = runtime.get(_spec(layout, dtype, head_dim, rotary_dim, True))
    assert transformed.spec.hadamard and not plain.spec.hadamard
    q_rot, k_rot = (np.asarray(t, dtype=np.float64) for t in plain(q, k, positions=positions)[:2])
    q_had, k_had = (np.asarray(t, dtype=np.float64) for t in transformed(q, k, positions=positions)[:2])
    h = _sylvester(head_dim) / np.sqrt(head_dim)
    for name, rotated, got in (("q", q_rot, q_had), ("k", k_rot, k_had)):
        want = rotated @ h.T
        if dtype == "fp32":
            error = np.abs(got - want).max() / np.abs(want).max()
            assert error < 2e-6, f"{name}: {error:.3g}"
        else:  # the plain output was rounded to fp16 before numpy's transform; the kernel's was not
            error = np.abs(got - want).max() / np.abs(want).max()
            assert error < 4e-3, f"{name}: {error:.3g}"
    # Orthogonal: every q head's dot product with every k head is kept.
    np.testing.assert_allclose(np.einsum("thd,tgd->thg", q_had, k_had), np.einsum("thd,tgd->thg", q_rot, k_rot),
                               rtol=1e-2 if dtype == "fp16" else 1e-4, atol=5e-2 if dtype == "fp16" else 1e-3)


def test_v_is_copied_as_it_is(runtime, rng):
    tokens = 5
    q, k, v = (rng.standard_normal((tokens, h, 64)).astype(np.float32) for h in (4, 2, 2))
    kernel = runtime.get(_spec("neox", "fp32", 64, 32, True, copy_v=True))
    outs = kernel(q, k, v, positions=np.arange(tokens, dtype=np.int64))
    np.testing.assert_array_equal(np.asarray(outs[2]), v)


def test_refusals_name_the_key(runtime):
    with pytest.raises(ropejit.Error, match=r"/hadamard: true is not allowed: must be false with head_dim 96"):
        _spec("neox", "fp32", 96, 64, True)
