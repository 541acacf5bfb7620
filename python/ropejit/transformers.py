"""Run a transformers model's RoPE through ropejit: ``patch(model)`` / ``unpatch(model)``.

HF's attention calls ``apply_rotary_pos_emb(q, k, cos, sin)`` with the cos and sin its rotary
embedding module made from ``position_ids``. ``patch`` hooks that module to remember which
``position_ids`` made each cos (keyed by the cos tensor's identity, held weakly), and replaces
``apply_rotary_pos_emb`` in the modeling modules the model's classes come from with a function
that looks the positions up and launches ropejit's kernel instead of the cos/sin arithmetic.

    import ropejit.transformers
    state = ropejit.transformers.patch(model)    # state.spec, state.reason, state.kernel_calls
    model.generate(input_ids, max_new_tokens=8)
    ropejit.transformers.unpatch(model)

Under ``torch.compile`` the lookup by tensor identity does not trace: the model still gives the
same results, with a graph break at each call. For ``fullgraph=True`` or CUDA graphs, call
:func:`ropejit.torch.apply_rope` with the positions from your own attention code instead.
"""
import functools
import inspect
import sys
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import _ropejit
from . import torch as ropejit_torch
from ._spec import Spec

__all__ = ["patch", "unpatch", "apply_rotary_pos_emb", "RopePatch"]

# Rope types whose HF frequencies follow the sequence length (and, for dynamic, the longest seen).
_SEQUENCE_DEPENDENT = ("dynamic", "longrope")
# Parameter names of HF's apply_rotary_pos_emb across models (v4 had position_ids, unused).
_KNOWN_PARAMETERS = {"q", "k", "cos", "sin", "position_ids", "unsqueeze_dim"}
_DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@dataclass(eq=False)
class RopePatch:
    """What ``patch`` did to one model: the spec (None when HF's function keeps running, with
    ``reason`` saying why) and how many calls ran ropejit's kernel or fell back to HF's."""

    spec: Optional[Spec]
    reason: Optional[str] = None
    kernel_calls: int = 0
    fallback_calls: int = 0
    modules: List[str] = field(default_factory=list)
    _hooks: List[Any] = field(default_factory=list, repr=False)
    _spec_json: Dict[torch.dtype, str] = field(default_factory=dict, repr=False)

    def spec_json(self, dtype: torch.dtype) -> Optional[str]:
        """The op's spec JSON for q and k of `dtype` (autocast may differ from the model's dtype)."""
        if self.spec is None or dtype not in _DTYPE_NAMES:
            return None
        if dtype not in self._spec_json:
            self._spec_json[dtype] = ropejit_torch.op_spec_json(dict(self.spec.to_dict(), dtype=_DTYPE_NAMES[dtype]))
        return self._spec_json[dtype]


# id(cos) → (weakref to cos, position_ids, patch state); entries leave when their cos is freed.
_positions_by_cos: Dict[int, Tuple[weakref.ref, torch.Tensor, RopePatch]] = {}
# module name → (HF's original function, ropejit's replacement, number of patched models using it).
_replaced: Dict[str, Tuple[Callable, Callable, int]] = {}
_ATTRIBUTE = "_ropejit_patch"
unknown_position_calls = 0  # calls with a cos no patched rotary module made (HF's function ran)


def _remember(cos: torch.Tensor, position_ids: torch.Tensor, state: RopePatch) -> None:
    key = id(cos)

    def forget(ref: weakref.ref) -> None:
        if _positions_by_cos.get(key, (None,))[0] is ref:
            del _positions_by_cos[key]

    _positions_by_cos[key] = (weakref.ref(cos, forget), position_ids, state)


def _recalled(cos: Any) -> Optional[Tuple[torch.Tensor, RopePatch]]:
    entry = _positions_by_cos.get(id(cos))
    if entry is None or entry[0]() is not cos:
        return None
    return entry[1], entry[2]


# ------------------------------------------------------------------ the rotation

def _rotate(q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor, spec_json: str,
            unsqueeze_dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    # HF's q and k are [B, H, S, D] (unsqueeze_dim 1) or [B, S, H, D] (2); ropejit wants tokens first.
    if unsqueeze_dim == 1:
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    q_out, k_out = ropejit_torch.apply_rope(q, k, position_ids, spec=spec_json)
    if unsqueeze_dim == 1:
        return q_out.transpose(1, 2), k_out.transpose(1, 2)
    return q_out, k_out


def _fits(q: Any, k: Any, position_ids: Any, spec: Spec, unsqueeze_dim: int) -> bool:
    """Whether q, k and position_ids are HF-shaped for the spec (else HF's function runs)."""
    if unsqueeze_dim not in (1, 2) or not all(isinstance(t, torch.Tensor) for t in (q, k, position_ids)):
        return False
    if q.dim() != 4 or k.dim() != 4 or position_ids.dim() != 2 or q.device.type not in ("cpu", "cuda"):
        return False
    heads_axis, tokens_axis = (1, 2) if unsqueeze_dim == 1 else (2, 1)
    batch, tokens = q.shape[0], q.shape[tokens_axis]
    return (q.shape[heads_axis] == spec.num_q_heads and k.shape[heads_axis] == spec.num_kv_heads
            and q.shape[-1] == spec.head_dim and k.shape[-1] == spec.head_dim and q.dtype == k.dtype
            and k.shape[0] == batch and k.shape[tokens_axis] == tokens
            and position_ids.shape[-1] == tokens and position_ids.shape[0] in (1, batch)
            and position_ids.device == q.device)


def _rotate_recorded(q: Any, k: Any, cos: Any, unsqueeze_dim: int) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """ropejit's rotation when a patched rotary module made `cos`; None where HF's function must run."""
    global unknown_position_calls
    recalled = _recalled(cos)
    if recalled is None:
        unknown_position_calls += 1
        return None
    position_ids, state = recalled
    spec_json = state.spec_json(q.dtype) if isinstance(q, torch.Tensor) else None
    if spec_json is None or not _fits(q, k, position_ids, state.spec, unsqueeze_dim):
        state.fallback_calls += 1
        return None
    state.kernel_calls += 1
    return _rotate(q, k, position_ids, spec_json, unsqueeze_dim)


def hf_apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                            unsqueeze_dim: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """HF Llama's formula (neox layout: rotate_half), the fallback of :func:`apply_rotary_pos_emb`."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         position_ids: Optional[torch.Tensor] = None, unsqueeze_dim: int = 1, *,
                         spec: Optional[Spec] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """HF's ``apply_rotary_pos_emb`` through ropejit: q ``[B, Hq, S, D]`` and k ``[B, Hkv, S, D]``
    (``[B, S, H, D]`` with ``unsqueeze_dim=2``) rotated; same shapes and dtype as HF returns.

    The positions are `position_ids` (``[B, S]`` or ``[1, S]``) when given, else the ones a
    patched model's rotary module made `cos` from; the spec is `spec` when given, else that
    model's. cos and sin are then not read. Falls back to HF Llama's cos/sin formula
    (:func:`hf_apply_rotary_pos_emb`) when the positions or the spec are unknown or the shapes
    do not fit the spec."""
    recalled = _recalled(cos)
    if position_ids is None and recalled is not None:
        position_ids = recalled[0]
    if spec is None and recalled is not None:
        spec = recalled[1].spec
    if spec is not None and position_ids is not None and q.dtype in _DTYPE_NAMES:
        if spec.qk_norm:  # HF normalizes q and k before this function: the spec must only rotate
            spec = Spec.from_json({key: value for key, value in spec.to_dict().items() if key != "qk_norm"})
        spec_json = ropejit_torch.op_spec_json(dict(spec.to_dict(), dtype=_DTYPE_NAMES[q.dtype]))
        if _fits(q, k, position_ids, spec, unsqueeze_dim):
            return _rotate(q, k, position_ids, spec_json, unsqueeze_dim)
    return hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim)


def _replacement(original: Callable) -> Callable:
    """ropejit's stand-in for one modeling module's apply_rotary_pos_emb (HF's runs as fallback)."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def ropejit_apply_rotary_pos_emb(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return original(*args, **kwargs)
        rotated = _rotate_recorded(arguments.get("q"), arguments.get("k"), arguments.get("cos"),
                                   arguments.get("unsqueeze_dim", 1))
        return rotated if rotated is not None else original(*args, **kwargs)

    ropejit_apply_rotary_pos_emb.ropejit_original = original  # type: ignore[attr-defined]
    return ropejit_apply_rotary_pos_emb


# ------------------------------------------------------------------ patch / unpatch

def _rotary_modules(model: torch.nn.Module) -> List[torch.nn.Module]:
    return [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]


def _modeling_modules(model: torch.nn.Module) -> List[str]:
    """The modules whose attention code calls a global apply_rotary_pos_emb of HF's signature."""
    names: List[str] = []
    for cls in {type(m) for m in model.modules()}:
        name = cls.__module__
        function = getattr(sys.modules.get(name), "apply_rotary_pos_emb", None)
        if name in names or not callable(function):
            continue
        original = getattr(function, "ropejit_original", function)
        try:
            parameters = set(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            continue
        if {"q", "k", "cos", "sin"} <= parameters <= _KNOWN_PARAMETERS:
            names.append(name)
    return sorted(names)


def _model_spec(model: torch.nn.Module) -> Tuple[Optional[Spec], Optional[str]]:
    """The spec of the model's config (its text config for multimodal ones), or why there is none."""
    config = getattr(model, "config", None)
    if config is None:
        return None, "the model has no config"
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    dtype = _DTYPE_NAMES.get(getattr(model, "dtype", None) or next(model.parameters()).dtype)
    if dtype is None:
        return None, f"the model's dtype {model.dtype} is not one of fp32, fp16, bf16"
    try:
        spec = Spec.from_hf(config, dtype=dtype)
    except (_ropejit.Error, ValueError, NotImplementedError) as e:
        return None, f"ropejit cannot express the config: {e}"
    if spec.rope_type in _SEQUENCE_DEPENDENT:
        return None, f"rope_type {spec.rope_type}: HF's frequencies follow the sequence length"
    if spec.io["positions"] == "mrope":
        return None, "multimodal positions (mrope) use another HF function"
    spec_dict = {key: value for key, value in spec.to_dict().items() if key != "qk_norm"}  # HF norms first
    return Spec.from_json(dict(spec_dict, io={"output": "separate"})), None


def _verify(model: torch.nn.Module, state: RopePatch, rotary: torch.nn.Module, functions: List[Callable]) -> None:
    """Compares ropejit with each HF function on a few positions, in fp32 (the math is the same in
    every dtype; bf16 rounding would hide small differences); sets state.reason on a mismatch."""
    spec = state.spec
    assert spec is not None
    inv_freq = getattr(rotary, "inv_freq", None)
    if isinstance(inv_freq, torch.Tensor) and inv_freq.dtype != torch.float32:
        state.reason = (f"the rotary module's inv_freq is {inv_freq.dtype} (model.to(dtype) casts it), so HF's "
                        "angles are rounded; load with from_pretrained(dtype=...) instead, or patch with "
                        "verify=False for ropejit's fp32 frequencies")
        return
    device = next(model.parameters()).device
    last = max(spec.max_position_embeddings - 1, 1)
    position_ids = torch.tensor([[0, 1, 2, 3, 17, 100 % last, last // 2, last]], device=device)
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, spec.num_q_heads, position_ids.shape[1], spec.head_dim, generator=generator).to(device)
    k = torch.randn(1, spec.num_kv_heads, position_ids.shape[1], spec.head_dim, generator=generator).to(device)
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, 1, 1, device=device), position_ids)
        for function in functions:
            want = function(q, k, cos, sin)
            got = _rotate(q, k, position_ids, state.spec_json(torch.float32) or "", 1)
            for name, g, w in zip(("q", "k"), got, want):
                error = ((g.double() - w.double()).abs() / w.double().abs().clamp(min=1.0)).max().item()
                if not error <= 1e-4:
                    state.reason = (f"ropejit's {name} differs from {function.__module__}.apply_rotary_pos_emb by "
                                    f"{error:.3g} (tolerance 1e-4) on a probe")
                    return


def patch(model: torch.nn.Module, *, verify: bool = True, strict: bool = False) -> RopePatch:
    """Runs the model's RoPE through ropejit; returns the patch state (also ``model._ropejit_patch``).

    Hooks every ``*RotaryEmbedding`` submodule so its forward remembers the ``position_ids`` of
    each cos it returns, and replaces ``apply_rotary_pos_emb`` in the modeling modules of the
    model's classes with ropejit's (one replacement per module, shared by every patched model; a
    cos from an unpatched model finds no positions and runs HF's function). The spec is
    ``Spec.from_hf(model.config, dtype=<model dtype>)`` with separate outputs and without qk_norm
    (HF normalizes q and k before the call). With `verify`, ropejit is compared with HF's function
    on a few positions first.

    HF's original function keeps running where ropejit cannot do the same: the config is one
    ropejit cannot express (or ``dynamic`` / ``longrope`` rope, whose HF frequencies follow the
    sequence length), the probe disagrees, the positions of a cos are unknown, or the shapes and
    dtype do not fit the spec. Then ``state.reason`` says why (a RuntimeWarning too), or with
    `strict` a ``ropejit.Error`` is raised and nothing is patched.
    """
    if getattr(model, _ATTRIBUTE, None) is not None:
        return getattr(model, _ATTRIBUTE)
    spec, reason = _model_spec(model)
    state = RopePatch(spec=spec, reason=reason)
    rotary_modules = _rotary_modules(model)
    module_names = _modeling_modules(model)
    if state.reason is None and not rotary_modules:
        state.reason = "the model has no *RotaryEmbedding module"
    if state.reason is None and not module_names:
        state.reason = "no modeling module of the model defines apply_rotary_pos_emb(q, k, cos, sin, ...)"
    if state.reason is None and verify:
        originals = [_replaced[n][0] if n in _replaced else sys.modules[n].apply_rotary_pos_emb for n in module_names]
        try:
            _verify(model, state, rotary_modules[0], originals)
        except (_ropejit.Error, ValueError, NotImplementedError, RuntimeError, TypeError) as e:
            state.reason = f"the probe failed: {type(e).__name__}: {e}"
    if state.reason is not None:
        state.spec = None
        if strict:
            raise _ropejit.Error(f"ropejit.transformers.patch: {state.reason}")
        warnings.warn(f"ropejit: {type(model).__name__} keeps HF's RoPE: {state.reason}", RuntimeWarning, 2)
        setattr(model, _ATTRIBUTE, state)
        return state

    def remember_positions(module: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                           output: Any) -> None:
        position_ids = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
        extra = [a for a in args[2:] if a is not None] + [v for n, v in kwargs.items()
                                                          if n != "position_ids" and v is not None]
        # A per-layer-type rotary (a layer_type argument) may differ from the spec: leave it to HF.
        if isinstance(position_ids, torch.Tensor) and not extra and isinstance(output, tuple) and output:
            _remember(output[0], position_ids, state)

    state._hooks = [m.register_forward_hook(remember_positions, with_kwargs=True) for m in rotary_modules]
    for name in module_names:
        module = sys.modules[name]
        if name in _replaced:
            original, replacement, users = _replaced[name]
            _replaced[name] = (original, replacement, users + 1)
        else:
            original = module.apply_rotary_pos_emb
            replacement = _replacement(original)
            _replaced[name] = (original, replacement, 1)
            module.apply_rotary_pos_emb = replacement
    state.modules = module_names
    setattr(model, _ATTRIBUTE, state)
    return state


def unpatch(model: torch.nn.Module) -> None:
    """Undoes :func:`patch`: removes the hooks, and restores HF's apply_rotary_pos_emb in each
    module once no patched model uses it. Does nothing for a model that is not patched."""
    state: Optional[RopePatch] = getattr(model, _ATTRIBUTE, None)
    if state is None:
        return
    for hook in state._hooks:
        hook.remove()
    for name in state.modules:
        original, replacement, users = _replaced[name]
        if users > 1:
            _replaced[name] = (original, replacement, users - 1)
            continue
        del _replaced[name]
        module = sys.modules.get(name)
        if module is not None and getattr(module, "apply_rotary_pos_emb", None) is replacement:
            module.apply_rotary_pos_emb = original
    for key in [key for key, entry in _positions_by_cos.items() if entry[2] is state]:
        del _positions_by_cos[key]
    state._hooks, state.modules = [], []
    delattr(model, _ATTRIBUTE)
