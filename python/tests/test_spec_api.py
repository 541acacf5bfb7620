"""Spec introspection, HF import and frequencies from Python."""
import numpy as np
import pytest

import ropejit
from reference import inv_freq_default
from ropejit import _ropejit

LLAMA_CONFIG = {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32,
                "num_key_value_heads": 8, "max_position_embeddings": 131072,
                "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                "rope_theta": 500000.0}


def test_from_hf_derives_what_the_config_implies(tmp_path):
    spec = ropejit.Spec.from_hf(LLAMA_CONFIG, dtype="fp16")
    assert (spec.head_dim, spec.rotary_dim, spec.num_q_heads, spec.num_kv_heads) == (64, 64, 32, 8)
    assert (spec.dtype, spec.layout, spec.rope_type) == ("fp16", "neox", "llama3")
    assert spec.io["copy_v"] is False and spec.io["positions"] == "explicit"
    phi = dict(LLAMA_CONFIG, model_type="phi", partial_rotary_factor=0.5, rope_scaling=None)
    assert ropejit.Spec.from_hf(phi).rotary_dim == 32
    (tmp_path / "config.json").write_text(ropejit.Spec.from_hf(LLAMA_CONFIG).to_json())  # not a config: fails
    with pytest.raises(ropejit.SpecError):
        ropejit.Spec.from_hf(tmp_path)


def test_from_hf_error_names_the_config_key():
    with pytest.raises(ropejit.SpecError, match=r"rope_scaling.factor"):
        ropejit.Spec.from_hf(dict(LLAMA_CONFIG, rope_scaling=dict(LLAMA_CONFIG["rope_scaling"], factor=-2.0)))
    with pytest.raises(ropejit.ArgumentError, match=r'dtype "fp64" is not allowed'):
        ropejit.Spec.from_hf(LLAMA_CONFIG, dtype="fp64")


def test_freqs_default_and_deepseek_softmax_scale():
    spec = ropejit.Spec.from_json({"name": "f", "head_dim": 64, "num_q_heads": 2, "num_kv_heads": 2,
                                   "layout": "neox", "dtype": "fp32", "max_position_embeddings": 4096,
                                   "rope": {"rope_type": "default", "rope_theta": 10000.0}})
    freqs = spec.freqs()
    np.testing.assert_array_equal(np.asarray(freqs["inv_freq"], np.float32), inv_freq_default(10000.0, 64))
    assert freqs["attention_factor"] == 1.0 and freqs["softmax_scale"] is None
    yarn = ropejit.Spec.from_json({"name": "ds", "head_dim": 64, "num_q_heads": 2, "num_kv_heads": 2,
                                   "layout": "interleaved", "dtype": "bf16", "max_position_embeddings": 163840,
                                   "rope": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0,
                                            "original_max_position_embeddings": 4096, "mscale": 1.0,
                                            "mscale_all_dim": 1.0, "beta_fast": 32.0, "beta_slow": 1.0}})
    # DeepSeek: m = 0.1 * mscale_all_dim * ln(factor) + 1, reported squared for the softmax.
    m = 0.1 * np.log(40.0) + 1.0
    assert yarn.freqs()["softmax_scale"] == pytest.approx(m * m, rel=1e-12)
    assert yarn.freqs()["attention_factor"] == pytest.approx(1.0, rel=1e-12)


def test_launch_fields_describe_the_arrays():
    spec = ropejit.Spec.from_hf(LLAMA_CONFIG)
    fields = {f["name"]: f for f in spec.launch_fields(tokens=5)}
    assert fields["q"]["use"] == "required" and fields["q"]["dims"] == ["T", "Hq", "D"]
    assert fields["q"]["shape"] == [5, 32, 64] and fields["q"]["strided"]
    assert fields["positions"]["use"] == "required" and fields["positions"]["shape"] == [5]
    assert fields["qkv"]["use"] == "unused" and fields["bias"]["use"] == "unused"


def test_every_args_field_is_bound():
    names, index = [], 1  # field 0 is struct_size
    while (name := _ropejit.struct_field("ropejit_args", index)) is not None:
        names.append(name)
        index += 1
    assert sorted(names) == sorted(_ropejit.args_fields())


def test_array_fields_are_the_cpp_pointer_fields():
    """Kernel's array keywords come from the C++ field list (ropejit/args_fields.h): every field any
    spec shapes as an array is one, each named array keyword of Kernel.__call__ is one, and any
    other keyword is refused as Python refuses one."""
    import inspect

    from ropejit._kernel import ARRAY_FIELDS, Kernel
    assert set(ARRAY_FIELDS) <= set(_ropejit.args_fields()) and len(set(ARRAY_FIELDS)) == len(ARRAY_FIELDS)
    assert {"q", "qkv", "positions", "k_cache", "k_pe", "q_scale_out"} <= set(ARRAY_FIELDS)
    assert not {"q_stride", "seq_len", "k_scale", "positions_type"} & set(ARRAY_FIELDS)
    base = ropejit.Spec.from_hf(LLAMA_CONFIG).to_dict()
    ios = [{}, {"input": "packed_qkv", "qkv_bias": True, "copy_v": True}, {"output": "padded_bhsd", "positions": "varlen"},
           {"output": "paged_kv", "page_size": 16, "cache_index": "block_tables", "positions": "varlen"}]
    for io in ios:
        spec = ropejit.Spec.from_json(dict(base, io=dict(base["io"], **io)))
        arrays = {f["name"] for f in spec.launch_fields(tokens=2, batch=1) if f["dims"]}
        assert arrays and arrays <= set(ARRAY_FIELDS), io
    named = [n for n, p in inspect.signature(Kernel.__call__).parameters.items()
             if p.annotation == "Any" and p.kind != p.VAR_KEYWORD]
    assert named and set(named) <= set(ARRAY_FIELDS)
    with pytest.raises(TypeError, match="unexpected keyword argument 'q_strides'"):
        Kernel.__call__(Kernel.__new__(Kernel), q_strides=np.zeros(1))


def test_kernel_code_names_no_array_field():
    """Kernel reads every array off the C++ rows (launch_fields: dims, strides, element types,
    which outputs it may allocate), so its code names no array field but in its positional
    parameters q, k, v: a new array field changes nothing here (docs/tensor-rows.md)."""
    import ast
    import inspect

    from ropejit import _arrays, _kernel
    arrays = set(_ropejit.array_fields())
    for module in (_kernel, _arrays):
        tree = ast.parse(inspect.getsource(module))
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        io_keys = {id(node.slice) for node in ast.walk(tree)  # spec.io["positions"]: the spec's key
                   if isinstance(node, ast.Subscript)
                   and getattr(node.value, "attr", getattr(node.value, "id", "")) == "io"}
        named = sorted({node.value for node in ast.walk(tree)
                        if isinstance(node, ast.Constant) and node.value in arrays
                        and id(node) not in docstrings | io_keys})
        assert not named, f"{module.__name__} names array fields {named}: read them from launch_fields"
    # The call sizes too come from the C++ table: the Kernel names only the three its keywords and
    # the positions form say (num_tokens, max_seq_len; offset positions' batch of 1).
    sizes = {field for _, field, _ in _kernel.CALL_SIZES}
    tree = ast.parse(inspect.getsource(_kernel))
    named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in sizes}
    assert named <= {"num_tokens", "batch", "max_seq_len"}, f"_kernel names call sizes {sorted(named)}"


def test_launch_fields_take_any_call_size_by_its_field():
    """A size the call gives is set by its ropejit_args field (the caller's cos_sin_cache rows),
    read off the array's dim by a Kernel call; any other name is refused with the allowed list."""
    spec = ropejit.Spec.from_json({"name": "cache", "head_dim": 64, "num_q_heads": 2, "num_kv_heads": 1,
                                   "layout": "neox", "dtype": "fp32", "max_position_embeddings": 64,
                                   "rope": {"rope_type": "default"}, "io": {"angles": "cos_sin_cache"}})
    fields = {f["name"]: f for f in spec.launch_fields(tokens=3, cos_sin_cache_rows=7)}
    assert fields["cos_sin_cache"]["dims"] == ["cos_sin_rows", "d"] and fields["cos_sin_cache"]["shape"] == [7, 64]
    assert fields["cos_sin_cache_rows"]["use"] == "required"
    with pytest.raises(ropejit.ArgumentError, match=r'call size "rows" is not allowed: must be one of num_tokens'):
        spec.launch_fields(rows=7)
    from ropejit import _kernel
    assert ("cos_sin_rows", "cos_sin_cache_rows", 0) in _kernel.CALL_SIZES and ("B+1", "batch", 1) in _kernel.CALL_SIZES
