"""ropejit.Runtime and ropejit.Kernel: every array is checked against the spec (element type,
shape, strides, device, writability) before anything is launched, so a bad call raises
ArgumentError and leaves every output as it was."""
from __future__ import annotations

import math
import warnings
from typing import Any, Dict, List, Optional, Tuple

from . import _ropejit
from ._arrays import ArrayView, dense_strides, empty_like, view
from ._spec import JsonLike, Spec

ArgumentError = _ropejit.ArgumentError

# Array element types a spec element type accepts: numpy has no bf16 or fp8, so raw bits pass.
_ACCEPTS = {"bf16": ("bf16", "uint16"), "fp8_e4m3": ("fp8_e4m3", "uint8"), "fp8_e5m2": ("fp8_e5m2", "uint8"),
            "nvfp4": ("nvfp4", "uint8")}  # NVFP4: bytes of two e2m1 codes (torch float4_e2m1fn_x2)

# The launch arguments that are arrays: the C++ library's pointer fields of ropejit_args, in their
# order (ropejit/args_fields.h), so a new array field is taken by keyword with no change here.
ARRAY_FIELDS: Tuple[str, ...] = tuple(_ropejit.array_fields())


def launch_fields(spec: Spec, sizes: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The C++ library's list of launch arguments of `spec` at these sizes (one source of truth):
    `sizes` maps the call sizes' ropejit_args fields (CALL_SIZES) and "positions_type"."""
    return _ropejit.launch_fields(spec._spec, sizes)


# The sizes a call gives, (dim symbol, ropejit_args field, offset), in the order an array's dim is
# trusted (cu_seqlens' B + 1 before another array's B): the C++ library's table, so a new size
# read off an array needs no change here.
CALL_SIZES: Tuple[Tuple[str, str, int], ...] = tuple(tuple(size) for size in _ropejit.call_sizes())


class Kernel:
    """A compiled kernel for one spec; call it with arrays (see :meth:`__call__`)."""

    def __init__(self, kernel: "_ropejit.Kernel", spec: Spec, runtime: "Runtime") -> None:
        self._kernel = kernel
        self.spec = spec
        self._device = "cuda" if runtime.backend == "cuda" else "cpu"
        self._device_id = runtime.device
        # The spec's fields with their dim symbols (no sizes): which arrays say the token count.
        self._fields = launch_fields(spec, {})

    @property
    def backend(self) -> str:
        """"cuda" or "host"."""
        return self._kernel.backend

    def config_name(self, tokens: int) -> str:
        """The launch config used for a token count."""
        return self._kernel.config_name(tokens)

    def bytes_moved(self, tokens: int, batch: int = 0, max_seq_len: int = 0) -> int:
        """Bytes one launch moves through memory (int32 positions)."""
        return _ropejit.bytes_moved(self.spec._spec, tokens, batch, max_seq_len)

    def __call__(self, q: Any = None, k: Any = None, v: Any = None, *, seq_len: Optional[int] = None,
                 max_seq_len: Optional[int] = None, k_scale: Optional[float] = None, v_scale: Optional[float] = None,
                 q_scale: Optional[float] = None, from_seq_len: Optional[int] = None,
                 num_tokens: Optional[int] = None, stream: Optional[int] = None, **arrays: Any) -> Tuple[Any, ...]:
        """Applies the spec's RoPE. Arrays: torch tensors, numpy arrays (host backend), or any
        ``__dlpack__`` / array-interface object, shaped as ``spec.launch_fields()`` says (q [T, Hq, D],
        qkv [T, Hq + 2 Hkv, D], positions [T] int32/int64, ...); rows may be strided, each row dense.
        Outputs of the separate and padded forms are allocated when not given (torch and numpy).
        ``stream``: a CUstream handle; default torch's current stream for CUDA tensors.
        Returns the outputs: the rotated (q, k[, v]) or qkv, or (q, k_cache, v_cache) for paged_kv.
        A spec of op "rerotate" takes k_cache with the keys' old positions (positions, or cu_seqlens
        and start_pos), their slots (slot_mapping or block_tables), where they move (new_positions or
        new_start_pos; None keeps them), seq_len and from_seq_len; num_tokens is the number of keys
        when no positions or slot_mapping array says it. It returns (k_cache,). A spec of op
        "inverse_rope" or "rope_tensor" takes the one tensor as q [T, Hq, D] (rotated in place) and
        the positions, and returns (q,). A spec of op
        "mla_append" takes q, k_pe [T, d] and kv_c [T, kv_lora_rank], the latent cache k_cache
        [pages, page_size, kv_lora_rank + d] with its slot index (and k_scale for FP8), and returns
        (q or q_out, k_cache); with ``mla_append.concat_k`` also k_nope [T, Hq, D - d] (its heads may
        be a view with wider head strides, such as the k_nope half of the up-projection's [k_nope | v]
        output) and k_out [T, Hq, D] (allocated when not given): it returns (q or q_out, k_out, k_cache);
        A spec with an FP8 ``io.q_output_dtype`` writes q_out as FP8 codes of q / ``q_scale`` (torch
        float8_e4m3fn / float8_e5m2, or uint8; allocated as those when not given); with ``io.q_scale``
        per_token_head each (token, head)'s scale goes to q_scale_out [T, Hq] float32 (allocated too,
        returned after q_out); with ``io.cache_scale`` per_token_head pass k_scale_cache (and
        v_scale_cache) [pages * page_size, Hkv] float32: each written slot's scales land there;
        with ``mla_append.absorbed_q`` q_latent [T, Hq, kv_lora_rank] (q_nope times W_UK; heads may be
        T rows apart, a transposed batched matmul's output) and q_out [T, Hq, kv_lora_rank + d].
        With ``io.angles`` cos_sin_cache pass the caller's cos_sin_cache [rows, rotary_dim] (each
        row rotary_dim / 2 cos then rotary_dim / 2 sin, of ``io.cos_sin_dtype``): a token reads its
        position's row; a position outside [0, rows) rotates to NaN.
        ``arrays``: the array fields of ropejit_args (ARRAY_FIELDS) by their names, q, k and v also
        by position."""
        arrays.update({name: value for name, value in dict(q=q, k=k, v=v).items() if value is not None})
        for name in arrays:
            if name not in ARRAY_FIELDS:
                raise TypeError(f"Kernel.__call__() got an unexpected keyword argument '{name}'")
        given = {name: arrays[name] for name in ARRAY_FIELDS if arrays.get(name) is not None}
        views = {name: view(value, name) for name, value in given.items()}
        sizes = self._call_sizes(views)
        sizes["num_tokens"] = self._tokens(views, num_tokens)
        if self.spec.io["positions"] == "offset":  # one sequence
            sizes["batch"] = 1
        if max_seq_len:
            sizes["max_seq_len"] = int(max_seq_len)
        positions_type = self._positions_type(views)
        fields = launch_fields(self.spec, dict(sizes, positions_type=positions_type))

        self._allocate_outputs(fields, given, views)  # allocated outputs join `given`
        args: Dict[str, Any] = dict(sizes, positions_type=positions_type)
        scales = {"k_scale": k_scale, "v_scale": v_scale, "q_scale": q_scale}
        for field in fields:
            name = field["name"]
            if name in scales and scales[name] is None and field["use"] == "required":
                # a scale the spec's launches read, not given: named as a missing array is
                error = ArgumentError(f"{name} is required for this spec (io {self._io_summary()}): a number > 0")
                error.field = name
                raise error
            if name not in ARRAY_FIELDS:
                continue
            self._check(field, views.get(name))
            if name in views:
                args[name] = views[name].ptr
                if field["strided"] and views[name].shape and views[name].shape[0] > 1:
                    args[field["stride_field"]] = views[name].strides[0]
                if field["head_stride_field"] and len(views[name].shape) == 3 and views[name].shape[1] > 1:
                    args[field["head_stride_field"]] = views[name].strides[1]
        for name in views:
            if name not in {f["name"] for f in fields}:
                raise ArgumentError(f"{name} is not used by this spec (io {self._io_summary()}): pass None")
        args.update({"seq_len": seq_len or 0, "from_seq_len": from_seq_len or 0})
        # a paged cache's static scales, an FP8 q_out's: one a spec does not read is refused by name
        args.update({name: float(value) for name, value in scales.items() if value is not None})
        try:
            self._kernel.launch(args, self._stream(stream, views))
        except ArgumentError as e:
            raise _without_struct_prefix(e) from None
        return self._results(given, fields)

    # ---------------------------------------------------------------- helpers

    def _tokens(self, views: Dict[str, ArrayView], num_tokens: Optional[int]) -> int:
        """The number of tokens (op rerotate: keys): the first dim of the first given array the
        spec shapes [T, ...] (launch_fields order: q or qkv before positions), else num_tokens."""
        fields = self._fields
        token_fields = [f["name"] for f in fields if f["use"] != "unused" and f["dims"][:1] == ["T"]]
        for name in token_fields:
            if name in views and views[name].shape:
                return views[name].shape[0]
        if num_tokens is not None:
            return int(num_tokens)
        required = [f["name"] for f in fields if f["use"] == "required" and f["dims"][:1] == ["T"]]
        if required:
            raise ArgumentError(f"{required[0]} is required: the spec's launches read it ({self._io_summary()})")
        raise ArgumentError(f"num_tokens is required: none of {', '.join(token_fields)} is given to say it")

    def _io_summary(self) -> str:
        io = self.spec.io
        return f"input {io['input']}, output {io['output']}, positions {io['positions']}"

    def _call_sizes(self, views: Dict[str, ArrayView]) -> Dict[str, int]:
        """The call sizes (CALL_SIZES but T) the given arrays say through their dims, by their
        ropejit_args fields: cu_seqlens [B + 1], block_tables [B, max_blocks_per_seq], a padded q_out
        [B, Hq, S, D], a cache [pages, ...], a cos_sin_cache [rows, d]."""
        sizes: Dict[str, int] = {}
        for symbol, args_field, offset in CALL_SIZES:
            if symbol == "T":  # the token count: _tokens, which num_tokens may say
                continue
            for field in self._fields:
                shape = views[field["name"]].shape if field["name"] in views else ()
                dims = field["dims"] if field["use"] != "unused" else []
                for axis, dim in enumerate(dims):
                    whole = axis == 0 or len(shape) == len(dims)  # later dims: only when none are merged
                    if dim == symbol and args_field not in sizes and axis < len(shape) and whole:
                        sizes[args_field] = shape[axis] - offset
        return sizes

    def _positions_type(self, views: Dict[str, ArrayView]) -> str:
        """The element type of the first given array of int32 or int64 positions (positions_type)."""
        for field in self._fields:
            if field["dtype"] == "int32|int64" and field["name"] in views:
                element = views[field["name"]].dtype
                if element not in ("int32", "int64"):
                    raise ArgumentError(
                        f"{field['name']}: element type {element} is not allowed: must be int32 | int64")
                return element
        return "int32"

    def _allocate_outputs(self, fields: List[Dict[str, Any]], given: Dict[str, Any],
                          views: Dict[str, ArrayView]) -> Dict[str, Any]:
        """Allocates each output a launch writes whole (not a cache) that is not given, like the first
        given array of the spec's dtype (its library and device), of the output's element type."""
        like = next((f["name"] for f in fields if f["dtype"] == self.spec.dtype and f["name"] in given), None)
        out: Dict[str, Any] = {}
        for field in fields:
            name = field["name"]
            if field["whole_output"] and name not in given and field["use"] == "required" and like is not None:
                element = field["dtype"] if field["dtype"] != self.spec.dtype else ""  # FP8 q_out, fp32 scales
                given[name] = empty_like(given[like], views[like], tuple(field["shape"]), name, element)
                views[name] = view(given[name], name)
                out[name] = given[name]
        return out

    def _check(self, field: Dict[str, Any], v: Optional[ArrayView]) -> None:
        name, use = field["name"], field["use"]
        if v is None:
            if use == "required":
                raise ArgumentError(f"{name} is required for this spec (io {self._io_summary()}), "
                                    f"shaped {list(field['dims'])} = {list(field['shape'])} of {field['dtype']}")
            return
        if use == "unused":
            raise ArgumentError(f"{name} is not used by this spec (io {self._io_summary()}): pass None")
        accepted = tuple(t for d in field["dtype"].split("|") for t in _ACCEPTS.get(d, (d,)))
        if v.dtype not in accepted:
            raise ArgumentError(f"{name}: element type {v.dtype} is not allowed: must be {' | '.join(accepted)}")
        if v.device != self._device or (self._device == "cuda" and v.device_id != self._device_id):
            where = self._device if self._device == "cpu" else f"cuda:{self._device_id}"
            here = v.device if v.device == "cpu" else f"{v.device}:{v.device_id}"
            raise ArgumentError(f"{name} is on {here}, but this kernel runs on the {self.backend} backend ({where})")
        expected = tuple(field["shape"])
        if v.shape not in _accepted_shapes(expected, field["strided"]):
            raise ArgumentError(f"{name}: shape {list(v.shape)} is not allowed: must be {list(field['dims'])} = "
                                f"{list(expected)}" + (" (or with the dims after the first merged)"
                                                       if len(expected) > 2 else ""))
        shape = v.shape
        dense = dense_strides(shape)
        # Heads any stride apart (token- or head-major views: the library checks the two strides).
        head_strided = bool(field["head_stride_field"]) and len(shape) == 3
        if head_strided and shape[1] > 1 and v.strides[1] < dense[1]:
            raise ArgumentError(f"{name}: head stride {v.strides[1]} is not allowed: must be >= {dense[1]}")
        for axis in range(1 if field["strided"] else 0, len(shape)):
            if head_strided and axis == 1:
                continue
            if shape[axis] > 1 and v.strides[axis] != dense[axis]:
                rows = "each row" if field["strided"] else "the whole array"
                raise ArgumentError(f"{name}: strides {list(v.strides)} are not allowed: {rows} must be dense "
                                    f"(strides {list(dense[1:] if field['strided'] else dense)}"
                                    f"{' after the first' if field['strided'] else ''})")
        if field["strided"] and not head_strided and len(shape) > 1 and shape[0] > 1 and v.strides[0] < dense[0]:
            raise ArgumentError(f"{name}: row stride {v.strides[0]} is not allowed: must be >= {dense[0]}")
        if field["written"] and not v.writable:
            raise ArgumentError(f"{name} is read-only, but the kernel writes it")

    def _stream(self, stream: Optional[int], views: Dict[str, ArrayView]) -> int:
        if stream is not None:
            return int(stream)
        if self._device == "cuda" and any(v.library == "torch" for v in views.values()):
            import torch

            return torch.cuda.current_stream(self._device_id).cuda_stream
        return 0

    @staticmethod
    def _results(given: Dict[str, Any], fields: List[Dict[str, Any]]) -> Tuple[Any, ...]:
        """Every array the launch writes, in launch_fields order: (q, k[, v]), qkv, (q_out, k_out[,
        v_out]), (q, k_cache, v_cache), (k_cache,) ..."""
        return tuple(given.get(f["name"]) for f in fields if f["written"] and f["use"] != "unused")


def _accepted_shapes(shape: Tuple[int, ...], strided: bool) -> Tuple[Tuple[int, ...], ...]:
    """The spec's shape, or the same with the dims after the first merged ([T, Hq * D] for
    [T, Hq, D]); an array that is not strided may also be flat."""
    shapes = [shape]
    if len(shape) > 2:
        shapes.append((shape[0], math.prod(shape[1:])))
    if not strided and len(shape) > 1:
        shapes.append((math.prod(shape),))
    return tuple(shapes)


class Runtime:
    """Where kernels run (``backend``: auto | cuda | host), their caches and tuning database."""

    def __init__(self, backend: str = "auto", *, cache_dir: Optional[str] = None, disk_cache: bool = True,
                 tuning_db: Optional[str] = None, arch: Optional[str] = None, device: int = 0,
                 programmatic_dependent_launch: bool = False) -> None:
        self.device = device
        self._runtime = _ropejit.Runtime(backend, cache_dir or "", disk_cache, tuning_db or "", arch or "", device,
                                         programmatic_dependent_launch,
                                         lambda text: warnings.warn(f"ropejit: {text}", RuntimeWarning, 3))
        self._kernels: Dict[Tuple[str, str], Kernel] = {}

    @property
    def backend(self) -> str:
        """"cuda" or "host"."""
        return self._runtime.backend

    @property
    def arch(self) -> str:
        """The compile target ("sm_90"; "host" on the host backend)."""
        return self._runtime.arch

    def get(self, spec: "Spec | JsonLike", config: Optional[str] = None) -> Kernel:
        """The kernel of a spec (a Spec, dict, JSON text or path); tuned configs where the database
        has them, else the default, or one fixed `config` (JSON, as ``ropejit emit --config``).
        Kernels are cached per spec and config."""
        if not isinstance(spec, Spec):
            spec = Spec.from_json(spec)
        key = (spec.hash, config or "")
        if key not in self._kernels:
            self._kernels[key] = Kernel(self._runtime.get(spec._spec, config or ""), spec, self)
        return self._kernels[key]


def _without_struct_prefix(error: Exception) -> Exception:
    """A launch's ArgumentError named as this call names things: the keyword, without the C++
    ``Args::`` prefix."""
    message = str(error)
    if not message.startswith("Args::"):
        return error
    renamed = ArgumentError(message[len("Args::"):])
    for attr in ("status", "field", "log", "issues"):
        if hasattr(error, attr):
            setattr(renamed, attr, getattr(error, attr))
    return renamed
