"""ropejit as a torch custom op: ``apply_rope(q, k, positions, spec=...)``.

The op is ``torch.ops.ropejit.apply_rope`` (new outputs, with autograd) and
``torch.ops.ropejit.apply_rope_`` (rotates q and k in place). Both have fake implementations, so
they trace under ``torch.compile(fullgraph=True)``, and the launch neither allocates (outputs come
from torch's allocator) nor synchronizes: it runs on torch's current CUDA stream, so it is
captured by CUDA graphs. CPU tensors run on the host backend, CUDA tensors on the cuda backend.

    import ropejit.torch
    spec = ropejit.Spec.from_hf(config, dtype="bf16")
    q, k = ropejit.torch.apply_rope(q, k, position_ids, spec=spec)   # [T, H, D] or [B, S, H, D]

A spec with multimodal positions (``io.positions = "mrope"``, Qwen2-VL's and Qwen3-VL's
sections) takes three position streams: ``[3, T]``, or ``[3, B, S]`` / ``[3, 1, S]`` (HF's
``position_ids`` of those models); one with ``io.positions = "axes"`` (vision towers, diffusion
transformers) one row per axis: ``[A, T]``, ``[A, B, S]`` or ``[A, 1, S]``.
"""
import atexit
import functools
import json
import threading
from typing import Any, Dict, Optional, Tuple, Union

import torch

from . import _ropejit
from ._kernel import Kernel, Runtime
from ._spec import Spec

__all__ = ["apply_rope", "op_spec_json", "kernel_for", "runtime_for", "set_runtime"]

ArgumentError = _ropejit.ArgumentError
SpecLike = Union[Spec, str, Dict[str, Any]]

# Spec element types → torch dtypes (the op's q and k must have exactly this dtype).
TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# ... and back: a torch dtype's spec element type (the patches' specs follow the model's dtype).
SPEC_DTYPES = {dtype: name for name, dtype in TORCH_DTYPES.items()}

_lock = threading.Lock()
_runtimes: Dict[Tuple[str, int], Runtime] = {}
_kernels: Dict[Tuple[str, str, int], Kernel] = {}


# ------------------------------------------------------------------ runtimes and kernels

def _backend_key(device: torch.device) -> Tuple[str, int]:
    if device.type == "cpu":
        return ("host", 0)
    if device.type == "cuda":
        return ("cuda", device.index if device.index is not None else torch.cuda.current_device())
    raise ArgumentError(f"q is on {device}, but ropejit runs on cpu (host backend) or cuda tensors only")


def runtime_for(device: Union[torch.device, str]) -> Runtime:
    """The Runtime that runs kernels for tensors on `device`: one host Runtime for CPU tensors,
    one cuda Runtime per GPU; created on first use with default settings."""
    backend, index = _backend_key(torch.device(device))
    with _lock:
        if (backend, index) not in _runtimes:
            _runtimes[(backend, index)] = Runtime(backend, device=index)
        return _runtimes[(backend, index)]


def set_runtime(runtime: Runtime) -> None:
    """Uses `runtime` (its own cache folder or tuning database) for its backend and device from
    now on; kernels cached for that device are dropped."""
    key = ("host", 0) if runtime.backend == "host" else ("cuda", runtime.device)
    with _lock:
        _runtimes[key] = runtime
        for cached in [c for c in _kernels if c[1:] == key]:
            del _kernels[cached]


def kernel_for(spec_json: str, device: Union[torch.device, str]) -> Kernel:
    """The compiled kernel of a canonical spec JSON for tensors on `device`, cached per (spec, device)."""
    backend, index = _backend_key(torch.device(device))
    key = (spec_json, backend, index)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = runtime_for(device).get(_parse(spec_json))  # compiles outside the lock: it can be slow
        with _lock:
            kernel = _kernels.setdefault(key, kernel)
    return kernel


@functools.lru_cache(maxsize=256)
def _parse(spec_json: str) -> Spec:
    return Spec.from_json(spec_json)


@atexit.register
def _release_cached() -> None:
    # Free kernels and runtimes before the extension is torn down (nanobind reports leaks otherwise).
    with _lock:
        _kernels.clear()
        _runtimes.clear()
    _parse.cache_clear()


# ------------------------------------------------------------------ the spec the op runs

@functools.lru_cache(maxsize=256)
def _normalized(spec_json: str, output: str) -> str:
    spec = json.loads(spec_json)
    if spec.get("qk_norm"):
        raise ArgumentError("spec: qk_norm is set, but apply_rope only rotates: normalize q and k first and "
                            "drop qk_norm from the spec")
    io = spec.get("io", {})
    # The op's own io form: q and k apart, per-token positions (three streams for mrope, one per
    # axis for axes); the
    # rope math stays the spec's.
    streamed = io.get("positions") in ("mrope", "axes")
    streams = {name: io[name] for name in ("mrope_section", "mrope_interleaved", "axes") if name in io} \
        if streamed else {}
    spec["io"] = dict({"input": "separate", "output": output, "qkv_bias": False, "copy_v": False,
                       "positions": io["positions"] if streamed else "explicit"}, **streams)
    return Spec.from_json(spec).to_json()


def op_spec_json(spec: SpecLike, inplace: bool = False) -> str:
    """The canonical JSON the op takes: `spec` (a Spec, dict or JSON text) with its io block
    replaced by the op's form (separate q and k, explicit positions, or mrope positions with the
    spec's sections; output separate, or inplace when `inplace`). Raises SpecError for a bad spec,
    ArgumentError for qk_norm specs."""
    if isinstance(spec, Spec):
        text = spec.to_json()
    elif isinstance(spec, dict):
        text = Spec.from_json(spec).to_json()
    elif isinstance(spec, str):
        text = _parse(spec).to_json()
    else:
        raise TypeError(f"spec: expected a ropejit.Spec, a dict or JSON text, not {type(spec).__name__}")
    return _normalized(text, "inplace" if inplace else "separate")


# ------------------------------------------------------------------ argument checks

def _check(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, spec: Spec) -> None:
    """Raises ArgumentError naming the argument when q, k or positions do not fit the spec."""
    for name, t in (("q", q), ("k", k), ("positions", positions)):
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(f"{name}: a {type(t).__name__} is not a torch tensor")
    if q.dim() not in (3, 4):
        raise ArgumentError(f"q: shape {list(q.shape)} is not allowed: must be [T, Hq, D] or [B, S, Hq, D]")
    tokens = "[T" if q.dim() == 3 else "[B, S"
    for name, t, heads in (("q", q, spec.num_q_heads), ("k", k, spec.num_kv_heads)):
        want = list(q.shape[:-2]) + [heads, spec.head_dim]
        if t.dim() != q.dim() or list(t.shape) != want:
            dims = f"{tokens}, H{name if name == 'q' else 'kv'}, D]"
            raise ArgumentError(f"{name}: shape {list(t.shape)} is not allowed: must be {dims} = {want}")
    dtype = TORCH_DTYPES[spec.dtype]
    for name, t in (("q", q), ("k", k)):
        if t.dtype != dtype:
            raise ArgumentError(f"{name}: dtype {t.dtype} is not allowed: the spec's dtype {spec.dtype} needs {dtype}")
    if positions.dtype not in (torch.int32, torch.int64):
        raise ArgumentError(f"positions: dtype {positions.dtype} is not allowed: must be torch.int32 | torch.int64")
    batch_shape = list(q.shape[:-2])
    allowed = [batch_shape] + ([[1, batch_shape[1]]] if q.dim() == 4 else [])
    streams = _streams(spec)
    if streams:  # mrope: one row per position stream
        allowed = [[streams] + shape for shape in allowed]
    if list(positions.shape) not in allowed:
        of = f"{streams} streams of the {tokens}] of q" if streams else f"{tokens}] of q"
        raise ArgumentError(f"positions: shape {list(positions.shape)} is not allowed: must be "
                            + " or ".join(str(s) for s in allowed) + f" ({of})")
    for name, t in (("k", k), ("positions", positions)):
        if t.device != q.device:
            raise ArgumentError(f"{name} is on {t.device}, but q is on {q.device}")
    _backend_key(q.device)


def _token_rows(t: torch.Tensor, name: str, copy_allowed: bool) -> torch.Tensor:
    """t as [T, H, D] with each token's heads one dense row (what the kernel reads); a copy only
    where the layout needs one and `copy_allowed`."""
    shape = (-1, t.shape[-2], t.shape[-1])
    try:
        rows: Optional[torch.Tensor] = t.view(shape)
    except RuntimeError:  # the token dims do not merge without a copy
        rows = None
    if rows is not None and _dense_rows(rows):
        return rows
    if not copy_allowed:
        raise ArgumentError(f"{name}: strides {list(t.stride())} are not allowed in place: each token's heads "
                            "must be one dense row, and the token dims must merge without a copy")
    return t.reshape(shape).contiguous()


def _dense_rows(rows: torch.Tensor) -> bool:
    tokens, heads, dim = rows.shape
    return ((dim <= 1 or rows.stride(2) == 1) and (heads <= 1 or rows.stride(1) == dim)
            and (tokens <= 1 or rows.stride(0) >= heads * dim))


def _streams(spec: Spec) -> int:
    """The position streams per token the kernel reads: 3 for mrope, one per axis for axes, else 0
    (positions [T])."""
    if spec.io["positions"] == "axes":
        return len(spec.io["axes"]["pairs"])
    return 3 if spec.io["positions"] == "mrope" else 0


def _positions_per_token(positions: torch.Tensor, q: torch.Tensor, spec: Spec) -> torch.Tensor:
    """positions as the kernel reads them: [T], or [streams, T] stream-major (mrope, axes)."""
    streams = _streams(spec)
    if streams:
        return positions.expand(streams, *q.shape[:-2]).reshape(streams, -1).contiguous()
    return positions.expand(q.shape[:-2]).reshape(-1).contiguous()


# ------------------------------------------------------------------ the ops

@torch.library.custom_op("ropejit::apply_rope", mutates_args=())
def _apply_rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, spec_json: str,
                seq_len: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    spec = _parse(spec_json)
    _check(q, k, positions, spec)
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    q_rows = _token_rows(q, "q", copy_allowed=True)
    if q_rows.shape[0] > 0:
        k_rows = _token_rows(k, "k", copy_allowed=True)
        kernel_for(spec_json, q.device)(q_rows, k_rows, positions=_positions_per_token(positions, q, spec),
                                        q_out=q_out.view(q_rows.shape), k_out=k_out.view(k_rows.shape),
                                        seq_len=seq_len)
    return q_out, k_out


@_apply_rope.register_fake
def _apply_rope_fake(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, spec_json: str,
                     seq_len: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    _check(q, k, positions, _parse(spec_json))
    return q.new_empty(q.shape), k.new_empty(k.shape)


def _pair_signs(spec: Spec, like: torch.Tensor) -> torch.Tensor:
    """+1 / -1 per element of a head: -1 on the second element of each rotated pair."""
    signs = torch.ones(spec.head_dim, dtype=like.dtype, device=like.device)
    half = spec.rotary_dim // 2
    if spec.layout == "neox":
        signs[half:2 * half] = -1
    else:
        signs[1:2 * half:2] = -1
    return signs


def _setup_backward(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
    _, _, positions, spec_json, seq_len = inputs
    ctx.save_for_backward(positions)
    ctx.spec_json, ctx.seq_len = spec_json, seq_len


def _backward(ctx: Any, grad_q: torch.Tensor, grad_k: torch.Tensor) -> Tuple[Any, ...]:
    # RoPE is a scaled rotation per pair, so its transpose is the rotation by -angle: flipping
    # the sign of each pair's second element before and after the forward rotation gives it.
    (positions,) = ctx.saved_tensors
    signs = _pair_signs(_parse(ctx.spec_json), grad_q)
    grad_q_in, grad_k_in = _apply_rope(grad_q * signs, grad_k * signs, positions, ctx.spec_json, ctx.seq_len)
    return grad_q_in * signs, grad_k_in * signs, None, None, None


_apply_rope.register_autograd(_backward, setup_context=_setup_backward)


@torch.library.custom_op("ropejit::apply_rope_", mutates_args=("q", "k"))
def _apply_rope_inplace(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, spec_json: str,
                        seq_len: Optional[int] = None) -> None:
    spec = _parse(spec_json)
    _check(q, k, positions, spec)
    q_rows = _token_rows(q, "q", copy_allowed=False)
    k_rows = _token_rows(k, "k", copy_allowed=False)
    if q_rows.shape[0] > 0:
        kernel_for(spec_json, q.device)(q_rows, k_rows, positions=_positions_per_token(positions, q, spec),
                                        seq_len=seq_len)


@_apply_rope_inplace.register_fake
def _apply_rope_inplace_fake(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, spec_json: str,
                             seq_len: Optional[int] = None) -> None:
    _check(q, k, positions, _parse(spec_json))


# ------------------------------------------------------------------ the public function

def apply_rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, *, spec: SpecLike,
               inplace: bool = False, seq_len: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rotates q and k by the spec's RoPE at the given positions; returns (q, k) rotated.

    q: ``[T, Hq, D]`` or ``[B, S, Hq, D]``; k: the same with Hkv heads; both of the spec's dtype,
    on one device (CPU: host backend; CUDA: cuda backend). Each token's heads should be one dense
    row (other layouts are copied first); tokens may be strided. positions: int32 or int64,
    ``[T]`` or ``[B, S]`` (``[1, S]`` is broadcast over the batch, as HF's ``position_ids``); for
    an mrope spec one row per stream (temporal, height, width) before those: ``[3, T]``,
    ``[3, B, S]`` or ``[3, 1, S]``.
    spec: a Spec, dict or JSON text; its io block is replaced by the op's form (q and k apart,
    explicit positions), so ``Spec.from_hf(config)`` works as it is.
    inplace: False returns new contiguous tensors (differentiable); True rotates q and k where
    they are (their token dims must merge without a copy) and returns them.
    seq_len: the sequence length for ``dynamic`` and ``longrope`` specs without a fixed one.

    Raises ArgumentError (a ValueError) naming the argument when shapes, dtypes or devices do not
    fit the spec; nothing is written then. Under torch.compile pass the spec as a Spec or JSON
    text made outside the compiled function, or use :func:`op_spec_json` once and pass its text.
    """
    spec_json = _op_spec_json_constant(spec, inplace)
    if inplace:
        torch.ops.ropejit.apply_rope_(q, k, positions, spec_json, seq_len)
        return q, k
    return torch.ops.ropejit.apply_rope(q, k, positions, spec_json, seq_len)


@torch.compiler.assume_constant_result
def _op_spec_json_constant(spec: SpecLike, inplace: bool) -> str:
    # torch.compile runs this at trace time and bakes the text into the graph as a constant.
    return op_spec_json(spec, inplace)
