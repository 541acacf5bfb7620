"""op rerotate from numpy on the host backend: a context shift of a paged K cache matches the
float64 rotation of the raw keys to their new positions, the slots it does not name and the V cache
keep their bytes, and bad calls raise ArgumentError before anything runs."""
import numpy as np
import pytest

import ropejit
from reference import assert_close, inv_freq_default, rotate, to_float64, to_storage

THETA = 10000.0
PAGE = 4


def paged_spec(op, dtype, layout="neox", head_dim=64, rotary_dim=48, hkv=2):
    spec = {"name": f"py-{op}", "op": op, "head_dim": head_dim, "rotary_dim": rotary_dim, "num_q_heads": hkv,
            "num_kv_heads": hkv, "layout": layout, "dtype": dtype, "max_position_embeddings": 4096,
            "rope": {"rope_type": "default", "rope_theta": THETA},
            "io": {"output": "paged_kv", "page_size": PAGE, "cache_index": "slot_mapping"}}
    return ropejit.Spec.from_json(spec)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
def test_context_shift_matches_the_rotation_to_the_new_positions(runtime, rng, dtype, layout):
    append = runtime.get(paged_spec("rope", dtype, layout))
    shift = runtime.get(paged_spec("rerotate", dtype, layout))
    assert shift.spec.op == "rerotate"
    tokens, heads, head_dim = 23, 2, 64
    keys = to_storage(rng.standard_normal((tokens, heads, head_dim)).astype(np.float32), dtype)
    q = keys.copy()
    pages = 9  # 36 slots: 13 of them hold no key and must keep their bytes
    k_cache = to_storage(rng.standard_normal((pages, PAGE, heads, head_dim)).astype(np.float32), dtype)
    v_cache = k_cache.copy()
    slots = rng.permutation(pages * PAGE)[:tokens].astype(np.int64)
    old = rng.integers(1000, 4000, tokens).astype(np.int32)
    append(q, keys, keys.copy(), positions=old, k_cache=k_cache, v_cache=v_cache, slot_mapping=slots)
    before, v_before = k_cache.copy(), v_cache.copy()
    new = (old - 1000).astype(np.int32)
    (result,) = shift(positions=old, new_positions=new, k_cache=k_cache, slot_mapping=slots)
    assert result is k_cache
    got = k_cache.reshape(pages * PAGE, heads, head_dim)[slots]
    expected = rotate(to_float64(keys, dtype), new, inv_freq_default(THETA, 48), layout)
    # Two roundings (the append's, then the re-rotation's): twice a rope's tolerance.
    assert_close(got, expected, dtype, "k_cache")
    untouched = np.ones(pages * PAGE, dtype=bool)
    untouched[slots] = False
    flat_before, flat_after = before.reshape(pages * PAGE, -1), k_cache.reshape(pages * PAGE, -1)
    np.testing.assert_array_equal(flat_after[untouched], flat_before[untouched])
    tails = (slice(None), slice(None), slice(48, None))  # every head's tail [d, D) of every slot
    np.testing.assert_array_equal(k_cache.reshape(pages * PAGE, heads, head_dim)[tails],
                                  before.reshape(pages * PAGE, heads, head_dim)[tails])
    np.testing.assert_array_equal(v_cache, v_before)


def test_bad_calls_raise_before_anything_runs(runtime, rng):
    shift = runtime.get(paged_spec("rerotate", "fp32"))
    k_cache = rng.standard_normal((4, PAGE, 2, 64)).astype(np.float32)
    before = k_cache.copy()
    positions = np.array([3, 5], dtype=np.int32)
    slots = np.array([0, 1], dtype=np.int64)
    q = np.zeros((2, 2, 64), dtype=np.float32)
    with pytest.raises(ropejit.ArgumentError, match="q is not used by this spec"):
        shift(q, positions=positions, k_cache=k_cache, slot_mapping=slots)
    with pytest.raises(ropejit.ArgumentError, match="new_positions"):
        shift(positions=positions, new_positions=np.array([1, -2], dtype=np.int32), k_cache=k_cache,
              slot_mapping=slots)
    with pytest.raises(ropejit.ArgumentError, match="k_cache is required"):
        shift(positions=positions, slot_mapping=slots)
    np.testing.assert_array_equal(k_cache, before)
