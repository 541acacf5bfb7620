"""Bad input raises the named error before anything runs, and leaves every output as it was."""
import json

import numpy as np
import pytest

import ropejit
from test_kernel_numpy import make_spec


def test_spec_error_names_field_value_and_allowed_set():
    spec = {"name": "x", "head_dim": 64, "num_q_heads": 4, "num_kv_heads": 2, "layout": "sideways",
            "dtype": "bf16", "max_position_embeddings": 4096, "rope": {"rope_type": "default"}}
    with pytest.raises(ropejit.SpecError) as info:
        ropejit.Spec.from_json(spec)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ropejit.Error)
    assert "/layout" in str(info.value) and "sideways" in str(info.value) and "neox" in str(info.value)
    assert ("/layout", info.value.issues[0][1]) == info.value.issues[0]
    assert info.value.status == "invalid_spec"


def test_spec_from_json_text_path_and_dict_agree(tmp_path):
    spec = make_spec()
    path = tmp_path / "spec.json"
    path.write_text(spec.to_json(indent=True))
    assert ropejit.Spec.from_json(path) == spec
    assert ropejit.Spec.from_json(str(path)) == spec
    assert ropejit.Spec.from_json(spec.to_json()) == spec
    assert ropejit.Spec.from_json(json.loads(spec.to_json())) == spec
    with pytest.raises(ropejit.Error, match="cannot read spec file"):
        ropejit.Spec.from_json(tmp_path / "missing.json")


@pytest.fixture
def call(runtime, rng):
    """A valid call's arrays, poisoned with random values, and a checker that they stay as they were."""
    spec = make_spec("fp32", io={"output": "separate"})
    arrays = {"q": rng.standard_normal((7, 4, 64)).astype(np.float32),
              "k": rng.standard_normal((7, 2, 64)).astype(np.float32),
              "q_out": rng.standard_normal((7, 4, 64)).astype(np.float32),
              "k_out": rng.standard_normal((7, 2, 64)).astype(np.float32),
              "positions": rng.integers(0, 100, 7).astype(np.int32)}
    before = {name: a.copy() for name, a in arrays.items()}

    def expect(error, match, **changes):
        given = dict(arrays, **changes)
        with pytest.raises(error, match=match):
            runtime.get(spec)(**{n: a for n, a in given.items() if a is not None})
        for name, original in before.items():
            np.testing.assert_array_equal(arrays[name], original, err_msg=f"{name} changed by a failed call")

    return arrays, expect


def test_wrong_dtype(call):
    arrays, expect = call
    expect(ropejit.ArgumentError, r"q: element type fp64 is not allowed: must be fp32",
           q=arrays["q"].astype(np.float64))
    expect(ropejit.ArgumentError, r"positions: element type fp32 is not allowed: must be int32 \| int64",
           positions=arrays["positions"].astype(np.float32))


def test_wrong_shape(call):
    arrays, expect = call
    expect(ropejit.ArgumentError, r"k: shape \[7, 3, 64\] is not allowed: must be \['T', 'Hkv', 'D'\] = \[7, 2, 64\]",
           k=np.zeros((7, 3, 64), np.float32))
    expect(ropejit.ArgumentError, r"positions: shape \[6\] is not allowed", positions=arrays["positions"][:6])


def test_wrong_strides(call):
    arrays, expect = call
    expect(ropejit.ArgumentError, r"q: strides .* are not allowed: each row must be dense",
           q=np.ascontiguousarray(arrays["q"].transpose(0, 2, 1)).transpose(0, 2, 1))
    expect(ropejit.ArgumentError, r"positions: strides \[2\] are not allowed",
           positions=np.repeat(arrays["positions"], 2)[::2])


def test_wrong_device(call):
    arrays, expect = call

    class OnGpu:  # claims CUDA memory: the host backend must refuse it before reading it
        __cuda_array_interface__ = {"shape": (7, 4, 64), "typestr": "<f4", "data": (4096, False), "version": 3}

    expect(ropejit.ArgumentError, r"q is on cuda:0, but this kernel runs on the host backend", q=OnGpu())


def test_missing_and_extra_arguments(call, runtime):
    arrays, expect = call
    expect(ropejit.ArgumentError, r"positions is required for this spec", positions=None)
    expect(ropejit.ArgumentError, r"bias is not used by this spec", bias=np.zeros(512, np.float32))
    expect(ropejit.ArgumentError, r"a str is not an array", k="not an array")


def test_read_only_output(call):
    arrays, expect = call
    frozen = arrays["q_out"].copy()
    frozen.flags.writeable = False
    expect(ropejit.ArgumentError, r"q_out is read-only", q_out=frozen)


def test_library_checks_still_apply(runtime, rng):
    spec = make_spec("fp32")
    q = rng.standard_normal((5, 4, 64)).astype(np.float32)
    k = rng.standard_normal((5, 2, 64)).astype(np.float32)
    before = q.copy()
    with pytest.raises(ropejit.ArgumentError, match=r"positions\[2\] = -4 is not allowed"):
        runtime.get(spec)(q, k, positions=np.array([0, 1, -4, 3, 4], np.int32))
    np.testing.assert_array_equal(q, before)


def test_bad_runtime_arguments():
    with pytest.raises(ropejit.ArgumentError, match=r'backend "tpu" is not allowed: must be one of auto \| cuda \| host'):
        ropejit.Runtime("tpu")
