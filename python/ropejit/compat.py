"""Drop-in functions with other engines' call signatures, served by ropejit kernels.

FlashInfer's RoPE family that computes the angles in the kernel (``flashinfer/rope.py``)::

    from ropejit.compat import apply_rope_pos_ids          # was: from flashinfer import ...
    q_rope, k_rope = apply_rope_pos_ids(q, k, pos_ids, rotary_dim=64, rope_theta=1e4)

Each call builds the ropejit spec its arguments describe (heads and head_dim from q and k,
``interleave`` → layout, ``rope_scale`` → linear scaling, the llama 3.1 arguments → rope_type
``llama3``) and runs it through the registered torch ops ``ropejit::flashinfer_rope`` /
``ropejit::flashinfer_rope_`` (on ``ropejit::apply_rope`` / ``apply_rope_``; fake implementations
included: ``torch.compile(fullgraph=True)``, also with dynamic shapes, and CUDA graphs work).

The ``cos_sin_cache`` signatures take the engine's own cos/sin rows (its rotary class's scaling
already in them) and gather one row per token's position (spec ``io.angles`` cos_sin_cache): vLLM's
``rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)`` (in place, key may
be None; :func:`rotary_embedding_out` into new tensors) and FlashInfer's
``apply_rope_with_cos_sin_cache`` / ``..._inplace``, on the torch ops
``ropejit::cos_sin_cache_rope`` / ``ropejit::cos_sin_cache_rope_``; also SGLang's
``sgl_kernel.apply_rope_with_cos_sin_cache_inplace`` and vLLM's older
``batched_rotary_embedding``. The namespaces ``flashinfer``, ``vllm_ops`` and ``sgl_kernel`` hold
each peer's functions under its own names, so an engine swaps a module alias and nothing else::

    from ropejit.compat import vllm_ops as ops      # was: from vllm import _custom_ops as ops

docs/engines.md.
"""
import functools
import math
import types
from typing import Any, List, Optional, Tuple

import torch

from . import _ropejit
from ._spec import Spec
from .torch import TORCH_DTYPES, kernel_for, op_spec_json

__all__ = ["apply_rope_pos_ids", "apply_rope_pos_ids_inplace", "apply_llama31_rope_pos_ids",
           "apply_llama31_rope_pos_ids_inplace", "apply_rope", "apply_rope_inplace", "apply_llama31_rope",
           "apply_llama31_rope_inplace", "rotary_embedding", "rotary_embedding_out", "mrope_rotary_embedding",
           "apply_rope_with_cos_sin_cache", "apply_rope_with_cos_sin_cache_inplace", "batched_rotary_embedding",
           "sgl_apply_rope_with_cos_sin_cache_inplace", "flashinfer", "vllm_ops", "sgl_kernel"]

ArgumentError = _ropejit.ArgumentError

# FlashInfer rotates any position its int32/int64 ids hold; M only sizes ropejit's optional table.
_MAX_POSITIONS = 131072
_DTYPE_NAMES = {dtype: name for name, dtype in TORCH_DTYPES.items()}
_LIMIT = 1024  # ropejit's bound on head_dim and on each head count (docs/spec.md)


# ------------------------------------------------------------------ argument checks

def _check_tensors(q: Any, k: Any, ids: Tuple[Tuple[str, Any], ...]) -> None:
    """Raises ArgumentError naming the argument when q, k or the position tensors are not FlashInfer's
    forms: q [nnz, Hq, D], k [nnz, Hkv, D] of one dtype and device, int32/int64 1-D ids."""
    for name, t in (("q", q), ("k", k)) + ids:
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(f"{name}: a {type(t).__name__} is not a torch tensor")
    for name, t, heads in (("q", q, "num_q_heads"), ("k", k, "num_kv_heads")):
        if t.dim() != 3:
            raise ArgumentError(f"{name}: shape {list(t.shape)} is not allowed: must be [nnz, {heads}, head_dim]")
    if q.dtype not in _DTYPE_NAMES:
        raise ArgumentError(f"q: dtype {q.dtype} is not allowed: "
                            "must be torch.float16 | torch.bfloat16 | torch.float32")
    if k.dtype != q.dtype:
        raise ArgumentError(f"k: dtype {k.dtype} is not allowed: must be q's dtype {q.dtype}")
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2]:
        raise ArgumentError(f"k: shape {list(k.shape)} is not allowed: must be [nnz, num_kv_heads, head_dim] "
                            f"= [{q.shape[0]}, num_kv_heads, {q.shape[2]}] (q is {list(q.shape)})")
    for name, t in ids:
        if t.dtype not in (torch.int32, torch.int64):
            raise ArgumentError(f"{name}: dtype {t.dtype} is not allowed: must be torch.int32 | torch.int64")
        if t.dim() != 1 or (name == "pos_ids" and t.shape[0] != q.shape[0]):
            want = f"[nnz] = [{q.shape[0]}]" if name == "pos_ids" else "one-dimensional"
            raise ArgumentError(f"{name}: shape {list(t.shape)} is not allowed: must be {want}")
    for name, t in (("k", k),) + ids:
        if t.device != q.device:
            raise ArgumentError(f"{name} is on {t.device}, but q is on {q.device}")


def _number(name: str, value: Any, minimum: float, strict: bool = False) -> float:
    """value as a float, or ArgumentError naming `name` when it is not a finite number >= (>) minimum."""
    # Comparisons rather than math.isfinite: torch.compile traces them (NaN fails both).
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and -math.inf < value < math.inf
    if not ok or (value <= minimum if strict else value < minimum):
        raise ArgumentError(f"{name}: {value!r} is not allowed: must be a finite number {'>' if strict else '>='} "
                            f"{minimum:g}")
    return float(value)


def _rotary_dim(rotary_dim: Any, head_dim: int) -> int:
    """FlashInfer's rotary_dim (None: the whole head) checked against ropejit's bounds."""
    if rotary_dim is None:
        if head_dim % 2:
            raise ArgumentError(f"rotary_dim: None (the whole head_dim {head_dim}) is not allowed: head_dim is odd; "
                                "pass an even rotary_dim < head_dim")
        return head_dim
    if not isinstance(rotary_dim, int) or isinstance(rotary_dim, bool) or rotary_dim % 2 \
            or not 2 <= rotary_dim <= head_dim:
        raise ArgumentError(f"rotary_dim: {rotary_dim!r} is not allowed: must be an even integer in [2, head_dim "
                            f"= {head_dim}] or None")
    return rotary_dim


def _rope_block(rope_scale: Any, rope_theta: Any, llama31: Optional[Tuple[Any, Any, Any]]) -> dict:
    """The spec's rope block for FlashInfer's scalar arguments (llama31: low_freq_factor,
    high_freq_factor, old_context_len, or None for plain RoPE)."""
    theta = _number("rope_theta", rope_theta, 0.0, strict=True)
    # FlashInfer multiplies each frequency by 1 / rope_scale (pos_enc.cuh): ropejit's linear `factor`,
    # which must be >= 1.
    scale = _number("rope_scale", rope_scale, 1.0)
    if llama31 is None:
        block = {"rope_type": "default"} if scale == 1.0 else {"rope_type": "linear", "factor": scale}
    else:
        low_freq_factor, high_freq_factor, old_context_len = llama31
        low = _number("low_freq_factor", low_freq_factor, 0.0, strict=True)
        high = _number("high_freq_factor", high_freq_factor, low, strict=True)  # FlashInfer divides by high - low
        if isinstance(old_context_len, float) and old_context_len.is_integer():
            old_context_len = int(old_context_len)  # FlashInfer passes float(old_context_len) on
        if not isinstance(old_context_len, int) or isinstance(old_context_len, bool) or old_context_len < 1:
            raise ArgumentError(f"old_context_len: {old_context_len!r} is not allowed: must be an integer >= 1")
        block = {"rope_type": "llama3", "factor": scale, "low_freq_factor": low, "high_freq_factor": high,
                 "original_max_position_embeddings": old_context_len}
    block["rope_theta"] = theta
    return block


def _check_geometry(q: torch.Tensor, k: torch.Tensor, rotary_dim: Any, interleave: Any) -> None:
    """Raises ArgumentError for heads, head_dim, rotary_dim or interleave the spec cannot take."""
    num_q_heads, num_kv_heads, head_dim = q.shape[1], k.shape[1], q.shape[2]
    if num_q_heads > _LIMIT or num_kv_heads > _LIMIT or head_dim > _LIMIT or head_dim < 2:
        raise ArgumentError(f"q: {num_q_heads} heads of {head_dim} (k: {num_kv_heads} heads) is not allowed: "
                            f"head_dim must be in [2, {_LIMIT}] and each head count in [1, {_LIMIT}]")
    if num_kv_heads < 1 or num_q_heads % num_kv_heads != 0:
        raise ArgumentError(f"k: {num_kv_heads} heads is not allowed: num_kv_heads must divide q's num_q_heads "
                            f"= {num_q_heads} (ropejit's grouped-query geometry)")
    _rotary_dim(rotary_dim, head_dim)
    if not isinstance(interleave, bool):
        raise ArgumentError(f"interleave: {interleave!r} is not allowed: must be True | False")


def _rope_list(rope_scale: Any, rope_theta: Any, llama31: Optional[Tuple[Any, Any, Any]]) -> List[float]:
    """The op's rope argument, checked: [rope_scale, rope_theta] (+ the three llama 3.1 numbers)."""
    _rope_block(rope_scale, rope_theta, llama31)
    return [float(x) for x in (rope_scale, rope_theta) + tuple(llama31 or ())]


@functools.lru_cache(maxsize=256)
def _spec_json(num_q_heads: int, num_kv_heads: int, head_dim: int, dtype: str, rotary_dim: Optional[int],
               interleave: bool, rope: Tuple[float, ...], inplace: bool) -> str:
    """The ropejit op's canonical spec JSON for one call's geometry and scalars (cached)."""
    llama31 = tuple(rope[2:]) if len(rope) == 5 else None
    spec = {"name": "flashinfer-compat", "head_dim": head_dim, "rotary_dim": _rotary_dim(rotary_dim, head_dim),
            "num_q_heads": num_q_heads, "num_kv_heads": num_kv_heads,
            "layout": "interleaved" if interleave else "neox", "dtype": dtype,
            "max_position_embeddings": _MAX_POSITIONS, "rope": _rope_block(rope[0], rope[1], llama31)}
    return op_spec_json(spec, inplace=inplace)


def _op_spec_json(q: torch.Tensor, k: torch.Tensor, rotary_dim: Optional[int], interleave: bool,
                  rope: List[float], inplace: bool) -> str:
    return _spec_json(q.shape[1], k.shape[1], q.shape[2], _DTYPE_NAMES[q.dtype], rotary_dim, interleave,
                      tuple(rope), inplace)


# The spec depends on q's and k's head counts, which torch.compile may hold symbolic (dynamic=True):
# these ops take FlashInfer's scalars and build the spec from the real tensors when they run.
@torch.library.custom_op("ropejit::flashinfer_rope", mutates_args=())
def _flashinfer_rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rotary_dim: Optional[int],
                     interleave: bool, rope: List[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    return torch.ops.ropejit.apply_rope(q, k, positions, _op_spec_json(q, k, rotary_dim, interleave, rope, False),
                                        None)


@_flashinfer_rope.register_fake
def _flashinfer_rope_fake(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rotary_dim: Optional[int],
                          interleave: bool, rope: List[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    return q.new_empty(q.shape), k.new_empty(k.shape)


@torch.library.custom_op("ropejit::flashinfer_rope_", mutates_args=("q", "k"))
def _flashinfer_rope_inplace(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, rotary_dim: Optional[int],
                             interleave: bool, rope: List[float]) -> None:
    torch.ops.ropejit.apply_rope_(q, k, positions, _op_spec_json(q, k, rotary_dim, interleave, rope, True), None)


@_flashinfer_rope_inplace.register_fake
def _flashinfer_rope_inplace_fake(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                                  rotary_dim: Optional[int], interleave: bool, rope: List[float]) -> None:
    return None


def _run(q: Any, k: Any, positions_of: Any, ids: Tuple[Tuple[str, Any], ...], rotary_dim: Any, interleave: Any,
         rope: Tuple[Any, Any, Any], inplace: bool) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """Checks every argument (ArgumentError naming it), then runs the functional or in-place op at
    the positions positions_of() gives."""
    _check_tensors(q, k, ids)
    _check_geometry(q, k, rotary_dim, interleave)
    rope_list = _rope_list(*rope)
    positions = positions_of()
    if inplace:
        torch.ops.ropejit.flashinfer_rope_(q, k, positions, rotary_dim, interleave, rope_list)
        return None
    return torch.ops.ropejit.flashinfer_rope(q, k, positions, rotary_dim, interleave, rope_list)


def _ragged_positions(q: torch.Tensor, indptr: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Per-token positions of FlashInfer's ragged form: token t of segment b (indptr[b] <= t <
    indptr[b + 1]) is at offsets[b] + t - indptr[b] (pos_enc.cuh, BatchQKApplyRotaryKernel)."""
    if indptr.shape[0] != offsets.shape[0] + 1 or offsets.shape[0] < 1:
        raise ArgumentError(f"indptr: shape {list(indptr.shape)} is not allowed: must be [batch_size + 1] = "
                            f"[{offsets.shape[0] + 1}] (offsets is {list(offsets.shape)}; batch_size >= 1)")
    if indptr.dtype != offsets.dtype:
        raise ArgumentError(f"offsets: dtype {offsets.dtype} is not allowed: must be indptr's dtype {indptr.dtype}")
    tokens = torch.arange(q.shape[0], device=q.device, dtype=indptr.dtype)
    # searchsorted keeps the graph free of data-dependent sizes; clamp keeps tokens past indptr[-1]
    # (FlashInfer leaves them unwritten; its docs require nnz = indptr[-1]) inside the arrays.
    segment = torch.searchsorted(indptr[1:], tokens, right=True).clamp(max=offsets.shape[0] - 1)
    return offsets[segment] + tokens - indptr[segment]


# ------------------------------------------------------------------ FlashInfer: pos_ids

def apply_rope_pos_ids(q: torch.Tensor, k: torch.Tensor, pos_ids: torch.Tensor, rotary_dim: Optional[int] = None,
                       interleave: bool = False, rope_scale: float = 1,
                       rope_theta: float = 1e4) -> Tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's ``apply_rope_pos_ids``: returns (q_rope, k_rope), new tensors.

    q ``[nnz, Hq, D]``, k ``[nnz, Hkv, D]`` (fp16, bf16 or fp32, one dtype; Hkv divides Hq),
    pos_ids int32/int64 ``[nnz]``. The first ``rotary_dim`` (default D) elements of each head
    rotate: pairs (i, i + rotary_dim/2), or (2i, 2i+1) when ``interleave``; frequencies
    ``1 / rope_theta^(2i/rotary_dim) / rope_scale`` (rope_scale >= 1). Raises ArgumentError naming
    the argument otherwise."""
    return _run(q, k, lambda: pos_ids, (("pos_ids", pos_ids),), rotary_dim, interleave,
                (rope_scale, rope_theta, None), False)


def apply_rope_pos_ids_inplace(q: torch.Tensor, k: torch.Tensor, pos_ids: torch.Tensor,
                               rotary_dim: Optional[int] = None, interleave: bool = False,
                               rope_scale: float = 1, rope_theta: float = 1e4) -> None:
    """FlashInfer's ``apply_rope_pos_ids_inplace``: :func:`apply_rope_pos_ids` written into q and k;
    returns None. Each token's heads must be one dense row (tokens may be strided, as q and k
    sliced from a packed QKV tensor)."""
    _run(q, k, lambda: pos_ids, (("pos_ids", pos_ids),), rotary_dim, interleave,
         (rope_scale, rope_theta, None), True)


def apply_llama31_rope_pos_ids(q: torch.Tensor, k: torch.Tensor, pos_ids: torch.Tensor,
                               rotary_dim: Optional[int] = None, interleave: bool = False, rope_scale: float = 8,
                               rope_theta: float = 5e5, low_freq_factor: float = 1, high_freq_factor: float = 4,
                               old_context_len: int = 8192) -> Tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's ``apply_llama31_rope_pos_ids``: :func:`apply_rope_pos_ids` with Llama 3.1's
    frequency smoothing (ropejit rope_type ``llama3``: factor = rope_scale,
    original_max_position_embeddings = old_context_len); returns (q_rope, k_rope).
    high_freq_factor must exceed low_freq_factor (FlashInfer divides by their difference)."""
    return _run(q, k, lambda: pos_ids, (("pos_ids", pos_ids),), rotary_dim, interleave,
                (rope_scale, rope_theta, (low_freq_factor, high_freq_factor, old_context_len)), False)


def apply_llama31_rope_pos_ids_inplace(q: torch.Tensor, k: torch.Tensor, pos_ids: torch.Tensor,
                                       rotary_dim: Optional[int] = None, interleave: bool = False,
                                       rope_scale: float = 8, rope_theta: float = 5e5, low_freq_factor: float = 1,
                                       high_freq_factor: float = 4, old_context_len: int = 8192) -> None:
    """FlashInfer's ``apply_llama31_rope_pos_ids_inplace``: :func:`apply_llama31_rope_pos_ids`
    written into q and k; returns None."""
    _run(q, k, lambda: pos_ids, (("pos_ids", pos_ids),), rotary_dim, interleave,
         (rope_scale, rope_theta, (low_freq_factor, high_freq_factor, old_context_len)), True)


# ------------------------------------------------------------------ FlashInfer: ragged (indptr, offsets)

def _ragged(q: torch.Tensor, k: torch.Tensor, indptr: torch.Tensor, offsets: torch.Tensor, rotary_dim: Any,
            interleave: Any, rope: Tuple, inplace: bool) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    return _run(q, k, lambda: _ragged_positions(q, indptr, offsets), (("indptr", indptr), ("offsets", offsets)),
                rotary_dim, interleave, rope, inplace)


def apply_rope(q: torch.Tensor, k: torch.Tensor, indptr: torch.Tensor, offsets: torch.Tensor,
               rotary_dim: Optional[int] = None, interleave: bool = False, rope_scale: float = 1,
               rope_theta: float = 1e4) -> Tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's ``apply_rope`` (ragged batch): segment b is tokens indptr[b] .. indptr[b+1] - 1
    at positions offsets[b], offsets[b] + 1, ...; indptr ``[batch_size + 1]`` and offsets
    ``[batch_size]`` of one int dtype, indptr[-1] = nnz. Otherwise as :func:`apply_rope_pos_ids`."""
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, (rope_scale, rope_theta, None), False)


def apply_rope_inplace(q: torch.Tensor, k: torch.Tensor, indptr: torch.Tensor, offsets: torch.Tensor,
                       rotary_dim: Optional[int] = None, interleave: bool = False, rope_scale: float = 1,
                       rope_theta: float = 1e4) -> None:
    """FlashInfer's ``apply_rope_inplace``: :func:`apply_rope` written into q and k; returns None."""
    _ragged(q, k, indptr, offsets, rotary_dim, interleave, (rope_scale, rope_theta, None), True)


def apply_llama31_rope(q: torch.Tensor, k: torch.Tensor, indptr: torch.Tensor, offsets: torch.Tensor,
                       rotary_dim: Optional[int] = None, interleave: bool = False, rope_scale: float = 8,
                       rope_theta: float = 5e5, low_freq_factor: float = 1, high_freq_factor: float = 4,
                       old_context_len: int = 8192) -> Tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's ``apply_llama31_rope``: the ragged form of :func:`apply_llama31_rope_pos_ids`."""
    rope = (rope_scale, rope_theta, (low_freq_factor, high_freq_factor, old_context_len))
    return _ragged(q, k, indptr, offsets, rotary_dim, interleave, rope, False)


def apply_llama31_rope_inplace(q: torch.Tensor, k: torch.Tensor, indptr: torch.Tensor, offsets: torch.Tensor,
                               rotary_dim: Optional[int] = None, interleave: bool = False, rope_scale: float = 8,
                               rope_theta: float = 5e5, low_freq_factor: float = 1, high_freq_factor: float = 4,
                               old_context_len: int = 8192) -> None:
    """FlashInfer's ``apply_llama31_rope_inplace``: :func:`apply_llama31_rope` written into q and k;
    returns None."""
    rope = (rope_scale, rope_theta, (low_freq_factor, high_freq_factor, old_context_len))
    _ragged(q, k, indptr, offsets, rotary_dim, interleave, rope, True)


# ------------------------------------------------------------------ cos_sin_cache: vLLM and FlashInfer

def _check_cache_call(positions: Any, query: Any, key: Any, head_size: Any, cos_sin_cache: Any,
                      is_neox: Any) -> None:
    """Raises ArgumentError naming the argument when a cos_sin_cache call does not fit: positions
    int32/int64 of T elements, query and key (or None) of T tokens of whole heads of head_size, one
    dtype; cos_sin_cache [rows, rotary_dim] fp32/bf16/fp16, rotary_dim even and <= head_size."""
    tensors = (("positions", positions), ("query", query), ("cos_sin_cache", cos_sin_cache)) + \
        ((("key", key),) if key is not None else ())
    for name, t in tensors:
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(f"{name}: a {type(t).__name__} is not a torch tensor")
    if not isinstance(head_size, int) or isinstance(head_size, bool) or not 2 <= head_size <= _LIMIT:
        raise ArgumentError(f"head_size: {head_size!r} is not allowed: must be an integer in [2, {_LIMIT}]")
    if not isinstance(is_neox, bool):
        raise ArgumentError(f"is_neox: {is_neox!r} is not allowed: must be True | False")
    if positions.dtype not in (torch.int32, torch.int64):
        raise ArgumentError(f"positions: dtype {positions.dtype} is not allowed: must be torch.int32 | torch.int64")
    if query.dtype not in _DTYPE_NAMES:
        raise ArgumentError(f"query: dtype {query.dtype} is not allowed: "
                            "must be torch.float16 | torch.bfloat16 | torch.float32")
    if key is not None and key.dtype != query.dtype:
        raise ArgumentError(f"key: dtype {key.dtype} is not allowed: must be query's dtype {query.dtype}")
    if cos_sin_cache.dtype not in _DTYPE_NAMES:
        raise ArgumentError(f"cos_sin_cache: dtype {cos_sin_cache.dtype} is not allowed: "
                            "must be torch.float32 | torch.bfloat16 | torch.float16")
    rotary_dim = cos_sin_cache.shape[-1] if cos_sin_cache.dim() == 2 else 0
    if cos_sin_cache.dim() != 2 or cos_sin_cache.shape[0] < 1 or rotary_dim % 2 or not 2 <= rotary_dim <= head_size:
        raise ArgumentError(f"cos_sin_cache: shape {list(cos_sin_cache.shape)} is not allowed: must be "
                            f"[max_position >= 1, rotary_dim] with rotary_dim even in [2, head_size = {head_size}]")
    lead = tuple(positions.shape)  # vLLM: positions [T] or [B, S], query and key shaped like them
    heads = {}
    for name, t in (("query", query), ("key", key)):
        if t is None:
            continue
        rest = tuple(t.shape[len(lead):])
        whole = rest[0] // head_size if len(rest) == 1 and rest[0] % head_size == 0 else \
            rest[0] if len(rest) == 2 and rest[1] == head_size else 0
        if tuple(t.shape[:len(lead)]) != lead or whole < 1:
            raise ArgumentError(f"{name}: shape {list(t.shape)} is not allowed: must be positions' shape "
                                f"{list(lead)} then [heads * head_size] or [heads, head_size], head_size {head_size}")
        heads[name] = whole
    if key is not None and heads["query"] % heads["key"]:
        raise ArgumentError(f"key: {heads['key']} heads is not allowed: must divide query's {heads['query']} heads "
                            "(ropejit's grouped-query geometry)")
    for name, t in tensors[1:] + (("positions", positions),):
        if t.device != query.device:
            raise ArgumentError(f"{name} is on {t.device}, but query is on {query.device}")


@functools.lru_cache(maxsize=256)
def _cache_spec_json(num_q_heads: int, num_kv_heads: int, head_size: int, rotary_dim: int, is_neox: bool,
                     dtype: str, cache_dtype: str, inplace: bool, mrope: Optional[Tuple[Tuple[int, ...], bool]]) -> str:
    """The canonical spec of one cos_sin_cache call's geometry: the caller's cos/sin rows
    (io.angles cos_sin_cache), no rope scaling of ropejit's own, q and k apart, per-token positions
    (mrope: (section, interleaved), positions [3, T], each pair reading its stream's row)."""
    io = {"input": "separate", "output": "inplace" if inplace else "separate", "positions": "explicit",
          "angles": "cos_sin_cache", "cos_sin_dtype": _DTYPE_NAMES[cache_dtype]}
    if mrope:
        io.update(positions="mrope", mrope_section=list(mrope[0]), mrope_interleaved=mrope[1])
    spec = {"name": "cos-sin-cache-compat", "head_dim": head_size, "rotary_dim": rotary_dim,
            "num_q_heads": num_q_heads, "num_kv_heads": num_kv_heads, "layout": "neox" if is_neox else "interleaved",
            "dtype": dtype, "max_position_embeddings": _MAX_POSITIONS, "rope": {"rope_type": "default"}, "io": io}
    return Spec.from_json(spec).to_json()


def _cache_rows(t: torch.Tensor, tokens: int, head_size: int, name: str, copy_allowed: bool) -> torch.Tensor:
    """t as [T, heads, head_size] with each token's heads one dense row; a copy only when allowed."""
    try:
        rows = t.view(tokens, -1, head_size)
        if rows.stride(2) == 1 and (rows.shape[1] <= 1 or rows.stride(1) == head_size):
            return rows
    except RuntimeError:  # the dims do not merge without a copy
        pass
    if not copy_allowed:
        raise ArgumentError(f"{name}: strides {list(t.stride())} are not allowed in place: each token's heads "
                            "must be one dense row")
    return t.reshape(tokens, -1, head_size).contiguous()


def _launch_cache(positions: torch.Tensor, query: torch.Tensor, key: Optional[torch.Tensor], head_size: int,
                  cos_sin_cache: torch.Tensor, is_neox: bool, outputs: Optional[Tuple[torch.Tensor, ...]],
                  mrope: Optional[Tuple[Tuple[int, ...], bool]] = None) -> None:
    """One launch: in place (outputs None) or into outputs (query_out, key_out); mrope: positions [3, T]."""
    tokens = positions.shape[-1] if mrope else positions.numel()
    if tokens == 0:
        return
    q = _cache_rows(query, tokens, head_size, "query", outputs is not None)
    # No key (vLLM: cross-layer KV sharing): one scratch head, rotated and dropped.
    k = _cache_rows(key, tokens, head_size, "key", outputs is not None) if key is not None \
        else query.new_zeros(tokens, 1, head_size)
    spec_json = _cache_spec_json(q.shape[1], k.shape[1], head_size, cos_sin_cache.shape[1], is_neox,
                                 _DTYPE_NAMES[query.dtype], cos_sin_cache.dtype, outputs is None, mrope)
    arrays = dict(positions=positions.reshape(-1).contiguous(), cos_sin_cache=cos_sin_cache.contiguous())
    if outputs is not None:
        arrays.update(q_out=outputs[0].view(q.shape), k_out=outputs[1].view(k.shape))
    kernel_for(spec_json, query.device)(q, k, **arrays)


@torch.library.custom_op("ropejit::cos_sin_cache_rope", mutates_args=())
def _cos_sin_cache_rope(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
                        cos_sin_cache: torch.Tensor, is_neox: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    query_out = torch.empty(query.shape, dtype=query.dtype, device=query.device)
    key_out = torch.empty(key.shape, dtype=key.dtype, device=key.device)
    _launch_cache(positions, query, key, head_size, cos_sin_cache, is_neox, (query_out, key_out))
    return query_out, key_out


@_cos_sin_cache_rope.register_fake
def _cos_sin_cache_rope_fake(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
                             cos_sin_cache: torch.Tensor, is_neox: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    return query.new_empty(query.shape), key.new_empty(key.shape)


@torch.library.custom_op("ropejit::cos_sin_cache_rope_", mutates_args=("query", "key"))
def _cos_sin_cache_rope_inplace(positions: torch.Tensor, query: torch.Tensor, key: Optional[torch.Tensor],
                                head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    _launch_cache(positions, query, key, head_size, cos_sin_cache, is_neox, None)


@_cos_sin_cache_rope_inplace.register_fake
def _cos_sin_cache_rope_inplace_fake(positions: torch.Tensor, query: torch.Tensor, key: Optional[torch.Tensor],
                                     head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    return None


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: Optional[torch.Tensor], head_size: int,
                     cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    """vLLM's ``_custom_ops.rotary_embedding``: rotates query and key (None: query only) in place;
    returns None.

    positions int32/int64 ``[T]`` (any shape of T elements: vLLM flattens them); query ``[T, Hq *
    head_size]`` or ``[T, Hq, head_size]``, key likewise with Hkv heads (Hkv divides Hq), one dtype
    (fp16, bf16, fp32), each token's heads one dense row (tokens may be strided: slices of a packed
    QKV); cos_sin_cache ``[max_position, rotary_dim]`` (fp32, bf16 or fp16, any of them whatever
    query's dtype): row p holds position p's rotary_dim / 2 cos then rotary_dim / 2 sin values. The
    first rotary_dim elements of each head rotate, pairs (i, i + rotary_dim / 2) when ``is_neox``,
    else (2i, 2i + 1). A position outside [0, max_position) has no row: its token's rotated
    elements become NaN (vLLM's kernel would read past the cache). Raises ArgumentError naming the
    argument otherwise."""
    _check_cache_call(positions, query, key, head_size, cos_sin_cache, is_neox)
    torch.ops.ropejit.cos_sin_cache_rope_(positions, query, key, head_size, cos_sin_cache, is_neox)


def rotary_embedding_out(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
                         cos_sin_cache: torch.Tensor, is_neox: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`rotary_embedding` into new tensors (query_out, key_out) of query's and key's shapes; query
    and key stay as they are and may have any strides (heads sliced out of wider rows, as MLA's q_pe):
    vLLM's out-of-place forwards (DeepSeek YaRN's ``forward_native``). A key is required."""
    if key is None:
        raise ArgumentError("key: None is not allowed: rotary_embedding_out returns a rotated key")
    _check_cache_call(positions, query, key, head_size, cos_sin_cache, is_neox)
    return torch.ops.ropejit.cos_sin_cache_rope(positions, query, key, head_size, cos_sin_cache, is_neox)


@torch.library.custom_op("ropejit::mrope_cos_sin_cache_rope_", mutates_args=("query", "key"))
def _mrope_cos_sin_cache_rope_inplace(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
                                      cos_sin_cache: torch.Tensor, is_neox: bool, mrope_section: List[int],
                                      mrope_interleaved: bool) -> None:
    _launch_cache(positions, query, key, head_size, cos_sin_cache, is_neox, None,
                  (tuple(mrope_section), mrope_interleaved))


@_mrope_cos_sin_cache_rope_inplace.register_fake
def _mrope_cos_sin_cache_rope_inplace_fake(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                                           head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool,
                                           mrope_section: List[int], mrope_interleaved: bool) -> None:
    return None


def mrope_rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
                           cos_sin_cache: torch.Tensor, is_neox: bool, mrope_section: List[int],
                           mrope_interleaved: bool = False) -> None:
    """vLLM's ``MRotaryEmbedding`` on multimodal positions, in place: as :func:`rotary_embedding`
    with positions ``[3, T]`` (temporal, height, width), rotary pair i reading the row of its
    section's stream: ``mrope_section`` [t, h, w] pairs summing to rotary_dim / 2, contiguous
    sections (Qwen2-VL) or, with ``mrope_interleaved``, Qwen3-VL's T/H/W interleaving."""
    if not isinstance(positions, torch.Tensor) or positions.dim() != 2 or positions.shape[0] != 3:
        shape = list(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise ArgumentError(f"positions: {shape} is not allowed: must be [3, T] (temporal, height, width)")
    if key is None:
        raise ArgumentError("key: None is not allowed: MRoPE rotates a key tensor (vLLM's forwards require one)")
    _check_cache_call(positions[0], query, key, head_size, cos_sin_cache, is_neox)
    half = cos_sin_cache.shape[1] // 2
    if (not isinstance(mrope_section, (list, tuple)) or len(mrope_section) != 3 or sum(mrope_section) != half
            or not all(isinstance(n, int) and n >= 1 for n in mrope_section)):
        raise ArgumentError(f"mrope_section: {mrope_section!r} is not allowed: must be 3 integers >= 1 summing to "
                            f"rotary_dim / 2 = {half}")
    torch.ops.ropejit.mrope_cos_sin_cache_rope_(positions, query, key, head_size, cos_sin_cache, is_neox,
                                                list(mrope_section), bool(mrope_interleaved))


def _flashinfer_cache(positions: Any, query: Any, key: Any, head_size: Any, cos_sin_cache: Any, is_neox: Any) -> None:
    """FlashInfer's checks of a cos_sin_cache call: a key, and a float32 cache (rope.py raises otherwise)."""
    if key is None:
        raise ArgumentError("key: None is not allowed: FlashInfer's cos_sin_cache functions rotate a key tensor")
    _check_cache_call(positions, query, key, head_size, cos_sin_cache, is_neox)
    if cos_sin_cache.dtype != torch.float32:
        raise ArgumentError(f"cos_sin_cache: dtype {cos_sin_cache.dtype} is not allowed: must be torch.float32 "
                            "(FlashInfer's requirement; ropejit.compat.rotary_embedding takes bf16 / fp16 too)")


def _check_backend(backend: Any) -> None:
    """FlashInfer's kernel choice: ropejit runs its own kernel for either, with the same results."""
    if backend not in ("cuda", "cute-dsl"):
        raise ArgumentError(f"backend: {backend!r} is not allowed: must be 'cuda' | 'cute-dsl'")


def apply_rope_with_cos_sin_cache(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
                                  cos_sin_cache: torch.Tensor, is_neox: bool = True,
                                  backend: str = "cuda") -> Tuple[torch.Tensor, torch.Tensor]:
    """FlashInfer's ``apply_rope_with_cos_sin_cache``: returns (query_out, key_out), new tensors of
    query's and key's shapes. positions ``[nnz]``; query ``[nnz, Hq * head_size]``, key ``[nnz, Hkv *
    head_size]``; cos_sin_cache float32 ``[max_seq_len, rotary_dim]``, cos in the first half, sin in
    the second; `backend` (FlashInfer's kernel choice) checked, then ropejit's kernel runs.
    Otherwise as :func:`rotary_embedding`."""
    _check_backend(backend)
    _flashinfer_cache(positions, query, key, head_size, cos_sin_cache, is_neox)
    return torch.ops.ropejit.cos_sin_cache_rope(positions, query, key, head_size, cos_sin_cache, is_neox)


def apply_rope_with_cos_sin_cache_inplace(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                                          head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool = True,
                                          backend: str = "cuda") -> None:
    """FlashInfer's ``apply_rope_with_cos_sin_cache_inplace``: :func:`apply_rope_with_cos_sin_cache`
    written into query and key; returns None."""
    _check_backend(backend)
    _flashinfer_cache(positions, query, key, head_size, cos_sin_cache, is_neox)
    torch.ops.ropejit.cos_sin_cache_rope_(positions, query, key, head_size, cos_sin_cache, is_neox)


def sgl_apply_rope_with_cos_sin_cache_inplace(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
                                              head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool = True,
                                              fused_set_kv_buffer_arg: Any = None,
                                              enable_pdl: Optional[bool] = None) -> None:
    """SGLang's ``sgl_kernel.apply_rope_with_cos_sin_cache_inplace``: FlashInfer's in-place function
    (float32 cache, key required). `enable_pdl` is a launch hint (ropejit's kernel decides its own
    programmatic dependent launch; any value is accepted). `fused_set_kv_buffer_arg` must be None:
    ropejit fuses the KV write through a spec with ``io.output: paged_kv``, not through this
    signature (ArgumentError otherwise)."""
    if fused_set_kv_buffer_arg is not None:
        raise ArgumentError("fused_set_kv_buffer_arg: a value is not allowed: must be None (ropejit fuses the KV "
                            "cache write through a spec with io.output paged_kv, not through this signature)")
    if enable_pdl is not None and not isinstance(enable_pdl, bool):
        raise ArgumentError(f"enable_pdl: {enable_pdl!r} is not allowed: must be None | True | False")
    apply_rope_with_cos_sin_cache_inplace(positions, query, key, head_size, cos_sin_cache, is_neox)


def batched_rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: Optional[torch.Tensor],
                             head_size: int, cos_sin_cache: torch.Tensor, is_neox: bool, rot_dim: int,
                             cos_sin_cache_offsets: torch.Tensor) -> None:
    """vLLM's ``batched_rotary_embedding`` (multi-LoRA caches stacked in one table; vLLM removed it
    in vllm#24789, 2025): token t reads row ``positions[t] + cos_sin_cache_offsets[t]``. `rot_dim`
    must be the cache's width; cos_sin_cache_offsets int64 (or int32) with one entry per token. The
    offsets are added in torch before the kernel (one elementwise op); otherwise as
    :func:`rotary_embedding`."""
    if not isinstance(cos_sin_cache_offsets, torch.Tensor) or cos_sin_cache_offsets.dtype not in (torch.int32,
                                                                                                  torch.int64):
        raise ArgumentError(f"cos_sin_cache_offsets: {getattr(cos_sin_cache_offsets, 'dtype', cos_sin_cache_offsets)!r}"
                            " is not allowed: must be an int32 | int64 torch tensor")
    _check_cache_call(positions, query, key, head_size, cos_sin_cache, is_neox)
    if cos_sin_cache_offsets.numel() != positions.numel() or cos_sin_cache_offsets.device != positions.device:
        raise ArgumentError(f"cos_sin_cache_offsets: shape {list(cos_sin_cache_offsets.shape)} on "
                            f"{cos_sin_cache_offsets.device} is not allowed: must be one entry per position "
                            f"({positions.numel()}) on {positions.device}")
    if rot_dim != cos_sin_cache.shape[-1] or isinstance(rot_dim, bool):
        raise ArgumentError(f"rot_dim: {rot_dim!r} is not allowed: must be cos_sin_cache's width "
                            f"{cos_sin_cache.shape[-1]}")
    shifted = positions.reshape(-1).long() + cos_sin_cache_offsets.reshape(-1).long()
    torch.ops.ropejit.cos_sin_cache_rope_(shifted, query, key, head_size, cos_sin_cache, is_neox)


# Each peer's functions under its own names: ``from ropejit.compat import vllm_ops as ops``.
flashinfer = types.SimpleNamespace(
    apply_rope_pos_ids=apply_rope_pos_ids, apply_rope_pos_ids_inplace=apply_rope_pos_ids_inplace,
    apply_llama31_rope_pos_ids=apply_llama31_rope_pos_ids,
    apply_llama31_rope_pos_ids_inplace=apply_llama31_rope_pos_ids_inplace, apply_rope=apply_rope,
    apply_rope_inplace=apply_rope_inplace, apply_llama31_rope=apply_llama31_rope,
    apply_llama31_rope_inplace=apply_llama31_rope_inplace,
    apply_rope_with_cos_sin_cache=apply_rope_with_cos_sin_cache,
    apply_rope_with_cos_sin_cache_inplace=apply_rope_with_cos_sin_cache_inplace)
vllm_ops = types.SimpleNamespace(rotary_embedding=rotary_embedding, batched_rotary_embedding=batched_rotary_embedding)
sgl_kernel = types.SimpleNamespace(apply_rope_with_cos_sin_cache_inplace=sgl_apply_rope_with_cos_sin_cache_inplace)
