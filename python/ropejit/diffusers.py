"""Run a diffusers transformer's RoPE through ropejit: ``patch(pipe_or_transformer)`` / ``unpatch``.

A diffusers transformer computes its rotary cos and sin once per forward in one rotary module
(Flux's ``pos_embed``, Wan's and HunyuanVideo's ``rope``) and hands them to every attention
processor, which rotates q and k with them. ``patch`` hooks that module to remember the integer
position of each token on each axis (keyed by the cos tensor's identity, held weakly): Flux's
``ids`` (float64 holding integers), the frame / row / column grid of a video latent. The rotation
then runs ropejit's kernel with the model's spec (:meth:`ropejit.Spec.from_diffusers`, the
``axes`` positions form) instead of the cos/sin arithmetic:

- Flux, Flux 2, Flux 3, Chroma (Flux's processor), LongCat-Image, Ovis-Image, Bria: diffusers'
  ``apply_rotary_emb``, as imported into their modules, is replaced; Flux's and Chroma's
  ``FluxAttnProcessor`` is also swapped, to run the per-head QK-norm with the rotation;
- HunyuanVideo and 1.5: the processor imports ``apply_rotary_emb`` from ``embeddings`` at each
  call, so that one is replaced;
- Wan, Wan-VACE: the processor applies the rotation inline, so each ``WanAttnProcessor`` is swapped
  for a subclass whose self-attention runs the same steps with ropejit's rotation.

    import ropejit.diffusers
    state = ropejit.diffusers.patch(pipe)          # or pipe.transformer
    image = pipe(prompt).images[0]
    print(state.kernel_calls, state.cos_sin_calls, state.fallback_reasons)
    ropejit.diffusers.unpatch(pipe)

A rotation whose positions no hook knows, or that the spec cannot take (Flux 2's concatenated
text and image cos, fractional ids), runs the kernel from diffusers' own cos and sin (the
``cos_sin_cache`` route); where neither serves (a dtype or shape they do not fit, cos/sin that
are not a rotation of interleaved pairs) diffusers' own code runs it and ``fallback_reasons``
counts why. QK-norm stays the model's (it normalizes q and k before the rotation), but for Wan's
self-attention and Flux's and Chroma's attention without autograd: there the swapped processor
runs the norm and the rotation as one launch per stream (``fused_norm_calls``).
docs/diffusers.md has the family table.
"""
import sys
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import _ropejit
from . import compat  # noqa: F401 - registers torch.ops.ropejit.cos_sin_cache_rope (the cos/sin route)
from . import torch as ropejit_torch
from . import _diffusers_flux, _diffusers_wan
from ._module_functions import acquire, release
from ._diffusers_specs import DIFFUSERS_VERSION, family_of
from ._spec import Spec

__all__ = ["patch", "unpatch", "DiffusersRopePatch"]

_DTYPE_NAMES = ropejit_torch.SPEC_DTYPES
_ATTRIBUTE = "_ropejit_patch"
_TRANSFORMERS = "diffusers.models.transformers."
_WAN_MODULE = _TRANSFORMERS + "transformer_wan"
_FLUX_MODULE = _TRANSFORMERS + "transformer_flux"


@dataclass(eq=False)
class DiffusersRopePatch:
    """What ``patch`` did to one transformer: its ``spec`` (``Spec.from_diffusers``), ``family``,
    ``reason`` when ropejit runs nothing (a refused family, one without a patch route, or a probe
    that disagreed), what was replaced (``functions``: "module.name"; ``processors``: how many
    attention processors were swapped), and how many rotations ran ropejit's kernel
    (``kernel_calls``; ``cos_sin_calls`` of them from diffusers' own cos and sin, counted per reason
    the spec's positions could not serve in ``cos_sin_reasons``) or fell back to diffusers' code
    (``fallback_calls``, counted per reason in ``fallback_reasons``). ``note`` says what ropejit
    leaves to the model (its QK-norm). ``cos_sin_only`` says why every rotation takes the cos/sin
    route: the probe found the model's rotary module away from its config (Wan's rope tables
    rounded by ``model.to(torch.bfloat16)``), so the spec does not serve it. Wan's self-attention runs
    its QK-norm (RMSNorm over all heads) and the rotation as one launch where it can, Flux's and
    Chroma's attention their per-head QK-norm and the rotation (one launch per stream: text, image)
    (``fused_norm_calls``; why not, per reason, in ``fused_norm_reasons``: autograd, other norms)."""

    spec: Optional[Spec]
    family: Optional[str] = None
    reason: Optional[str] = None
    note: Optional[str] = None
    kernel_calls: int = 0
    cos_sin_calls: int = 0
    cos_sin_reasons: Dict[str, int] = field(default_factory=dict)
    fallback_calls: int = 0
    fallback_reasons: Dict[str, int] = field(default_factory=dict)
    functions: List[str] = field(default_factory=list)
    cos_sin: bool = True
    cos_sin_only: Optional[str] = None
    processors: int = 0
    fused_norm_calls: int = 0
    fused_norm_reasons: Dict[str, int] = field(default_factory=dict)
    _hooks: List[Any] = field(default_factory=list, repr=False)
    _replaced: List[Tuple[str, str]] = field(default_factory=list, repr=False)
    _swapped: List[Tuple[Any, Any]] = field(default_factory=list, repr=False)
    _spec_json: Dict[Tuple[Any, ...], str] = field(default_factory=dict, repr=False)

    def spec_json(self, dtype: torch.dtype, q_heads: int, k_heads: int) -> Optional[str]:
        """The op's spec JSON for q and k of `dtype` with these head counts; None for a dtype
        ropejit has no kernel for."""
        if self.spec is None or dtype not in _DTYPE_NAMES:
            return None
        key = (dtype, q_heads, k_heads)
        if key not in self._spec_json:
            spec = dict(self.spec.to_dict(), dtype=_DTYPE_NAMES[dtype], num_q_heads=q_heads, num_kv_heads=k_heads)
            self._spec_json[key] = ropejit_torch.op_spec_json(spec)
        return self._spec_json[key]

    def _count(self, fallback: Optional[str] = None, cos_sin: Optional[str] = None) -> None:
        if fallback is None:
            self.kernel_calls += 1
            if cos_sin is not None:
                self.cos_sin_calls += 1
                self.cos_sin_reasons[cos_sin] = self.cos_sin_reasons.get(cos_sin, 0) + 1
        else:
            self.fallback_calls += 1
            self.fallback_reasons[fallback] = self.fallback_reasons.get(fallback, 0) + 1


# ------------------------------------------------------------------ positions by cos

# id(cos) → (weakref to cos, positions [A, 1, S] int64 or the reason there are none, patch state)
_positions_by_cos: Dict[int, Tuple[weakref.ref, Any, DiffusersRopePatch]] = {}
# (module name, function name) → (diffusers' original, ropejit's replacement, patched models using it)
_replaced: Dict[Tuple[str, str], Tuple[Callable, Callable, int]] = {}
unknown_cos_calls = 0  # rotations outside any patched model's forward with a cos no hook knows (diffusers' code ran)


def _remember(cos: Any, positions: Any, state: DiffusersRopePatch) -> None:
    if not isinstance(cos, torch.Tensor):
        return
    key = id(cos)

    def forget(ref: weakref.ref) -> None:
        if _positions_by_cos.get(key, (None,))[0] is ref:
            del _positions_by_cos[key]

    _positions_by_cos[key] = (weakref.ref(cos, forget), positions, state)


def _recalled(freqs: Any) -> Optional[Tuple[Any, DiffusersRopePatch]]:
    """(positions or why none, state) of a (cos, sin) pair a patched rotary module made."""
    if not isinstance(freqs, (tuple, list)) or len(freqs) != 2:
        return None
    entry = _positions_by_cos.get(id(freqs[0]))
    if entry is None or entry[0]() is not freqs[0]:
        return None
    return entry[1], entry[2]


def _integer_positions(ids: torch.Tensor, axes: int) -> Any:
    """Flux's ids [S, A] (floats holding integers) as positions [A, 1, S] int64, or why not."""
    if ids.dim() != 2 or ids.shape[-1] != axes:
        return f"ids of shape {list(ids.shape)} (the spec has {axes} axes: [S, {axes}])"
    if ids.is_floating_point():
        if not bool(torch.equal(ids, ids.round())):  # one device sync per forward on CUDA
            return "fractional positions (ropejit's axes positions are integers)"
    if ids.numel() and not bool((ids >= 0).all() and (ids < 2 ** 31).all()):
        return "positions outside [0, 2^31)"
    return ids.to(torch.int64).t().unsqueeze(1).contiguous()


def _axes_of(state: DiffusersRopePatch) -> int:
    return len(state.spec.io["axes"]["pairs"]) if state.spec is not None else 0


def _ids_hook(state: DiffusersRopePatch) -> Callable:
    """Flux's and Flux 2's pos_embed(ids): the positions are the ids."""
    def hook(module: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], output: Any) -> None:
        ids = args[0] if args else kwargs.get("ids")
        if isinstance(output, (tuple, list)) and isinstance(ids, torch.Tensor):
            _remember(output[0], _integer_positions(ids, _axes_of(state)), state)
    return hook


def _patch_sizes(module: Any) -> Tuple[int, int, int]:
    """(frames, rows, columns) per patch of a grid rotary module: Wan's patch_size tuple, or
    HunyuanVideo's patch_size_t and patch_size."""
    if hasattr(module, "patch_size_t"):
        return (module.patch_size_t, module.patch_size, module.patch_size)
    return tuple(module.patch_size)  # type: ignore[return-value]


def _grid_hook(state: DiffusersRopePatch) -> Callable:
    """Wan's and HunyuanVideo's rope(hidden_states): the positions are the latent's patch grid."""
    def hook(module: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], output: Any) -> None:
        hidden = args[0] if args else kwargs.get("hidden_states")
        if isinstance(output, (tuple, list)) and isinstance(hidden, torch.Tensor) and hidden.dim() == 5:
            _remember(output[0], _grid_positions(hidden, _patch_sizes(module)), state)
    return hook


def _grid_positions(hidden: torch.Tensor, patch_size: Any) -> torch.Tensor:
    """The token positions [3, 1, S]: frame, row, column of each patch of the latent
    [B, C, F, H, W], frame-major (WanRotaryPosEmbed's and HunyuanVideoRotaryPosEmbed's order)."""
    sizes = [n // p for n, p in zip(hidden.shape[2:], patch_size)]
    grids = torch.meshgrid(*[torch.arange(n, device=hidden.device) for n in sizes], indexing="ij")
    return torch.stack([g.reshape(-1) for g in grids]).unsqueeze(1)


# ------------------------------------------------------------------ the rotation

def _rotate(state: DiffusersRopePatch, positions: Any, q: torch.Tensor, k: Optional[torch.Tensor]
            ) -> Tuple[Optional[Tuple[torch.Tensor, torch.Tensor]], Optional[str]]:
    """ropejit's rotation of q and k ([B, S, H, D]; k None: q alone) at positions [A, 1, S];
    (None, why) where diffusers' code must run instead."""
    if state.cos_sin_only is not None:
        return None, state.cos_sin_only
    if isinstance(positions, str):
        return None, positions
    if positions is None:
        return None, "no positions"
    if q.dim() != 4 or q.shape[-1] != state.spec.head_dim:
        return None, f"q of shape {list(q.shape)} (the spec needs [B, S, H, {state.spec.head_dim}])"
    if q.shape[1] != positions.shape[-1]:
        return None, f"{q.shape[1]} tokens, but the rotary module made {positions.shape[-1]}"
    if k is not None and (k.dim() != 4 or k.shape[:2] != q.shape[:2] or k.shape[-1] != q.shape[-1]
                          or k.dtype != q.dtype):
        return None, f"k of shape {list(k.shape)} and {k.dtype} beside q of {list(q.shape)} and {q.dtype}"
    if positions.device != q.device:
        return None, f"positions on {positions.device}, q on {q.device}"
    # q alone (diffusers rotates q and k in two calls): one head of q stands in for k.
    k_in = k if k is not None else q[:, :, :1, :]
    spec_json = state.spec_json(q.dtype, q.shape[2], k_in.shape[2])
    if spec_json is None:
        return None, f"dtype {q.dtype} (ropejit runs fp32, fp16, bf16)"
    return ropejit_torch.apply_rope(q, k_in, positions, spec=spec_json), None


# id(cos) → (weakref to cos, weakref to sin, rows [S, D] or why none): built once per cos tensor
_rows_by_cos: Dict[int, Tuple[weakref.ref, weakref.ref, Any]] = {}
# the patched models whose forward is running (innermost last): their rotations with a cos no hook
# knows take the cos/sin route
_active: List[DiffusersRopePatch] = []


def _cos_sin_rows(freqs: Any) -> Any:
    """diffusers' (cos, sin), each [S, D] or [1, S, 1, D] with every pair's value repeated
    (``repeat_interleave_real``), as ropejit's cos_sin_cache rows [S, D]: D / 2 cos values, then
    D / 2 sin values, per token; or why not. Checked and built once per cos tensor."""
    if not isinstance(freqs, (tuple, list)) or len(freqs) != 2:
        return f"rotary embedding of type {type(freqs).__name__} (the cos/sin route takes a (cos, sin) pair)"
    cos, sin = freqs
    if not isinstance(cos, torch.Tensor) or not isinstance(sin, torch.Tensor):
        return "cos or sin is not a tensor"
    entry = _rows_by_cos.get(id(cos))
    if entry is not None and entry[0]() is cos and entry[1]() is sin:
        return entry[2]
    if cos.dim() == 4 and cos.shape[0] == 1 and cos.shape[2] == 1:  # Wan: [1, S, 1, D]
        cos, sin = cos[0, :, 0], sin[0, :, 0]
    if cos.dim() != 2 or sin.shape != cos.shape or cos.shape[-1] % 2 or not cos.is_floating_point() \
            or sin.dtype != cos.dtype or sin.device != cos.device:
        rows: Any = (f"cos of shape {list(cos.shape)} {cos.dtype}, sin {list(sin.shape)} {sin.dtype} "
                     "(the cos/sin route takes [S, D] for both)")
    elif not (torch.equal(cos[:, 0::2], cos[:, 1::2]) and torch.equal(sin[:, 0::2], sin[:, 1::2])):
        rows = "cos/sin whose pairs hold two different values (not a rotation of interleaved pairs)"
    else:
        rows = torch.cat([cos[:, 0::2], sin[:, 0::2]], dim=-1).float().contiguous()
    key = id(freqs[0])

    def forget(ref: weakref.ref) -> None:
        if _rows_by_cos.get(key, (None,))[0] is ref:
            del _rows_by_cos[key]

    _rows_by_cos[key] = (weakref.ref(freqs[0], forget), weakref.ref(freqs[1]), rows)
    return rows


def _rotate_cos_sin(freqs: Any, q: torch.Tensor, k: Optional[torch.Tensor]
                    ) -> Tuple[Optional[Tuple[torch.Tensor, torch.Tensor]], Optional[str]]:
    """ropejit's rotation of q and k ([B, S, H, D]; k None: q alone) from diffusers' own cos and
    sin (``io.angles: cos_sin_cache``, each token reading its own row); (None, why) where not."""
    rows = _cos_sin_rows(freqs)
    if isinstance(rows, str):
        return None, rows
    if q.dim() != 4 or q.shape[1] != rows.shape[0] or q.shape[-1] != rows.shape[1]:
        return None, f"q of shape {list(q.shape)} for cos/sin rows {list(rows.shape)}"
    if q.dtype not in _DTYPE_NAMES or rows.device != q.device or q.device.type not in ("cpu", "cuda"):
        return None, f"q of {q.dtype} on {q.device}, cos/sin on {rows.device}"
    if k is not None and (k.shape[:2] != q.shape[:2] or k.shape[-1] != q.shape[-1] or k.dtype != q.dtype):
        return None, f"k of shape {list(k.shape)} and {k.dtype} beside q of {list(q.shape)} and {q.dtype}"
    k_in = k if k is not None else q[:, :, :1, :]
    positions = torch.arange(q.shape[1], device=q.device).repeat(q.shape[0])
    return torch.ops.ropejit.cos_sin_cache_rope(positions, q, k_in, q.shape[-1], rows, False), None


def _rotation(state: DiffusersRopePatch, positions: Any, freqs: Any, q: torch.Tensor,
              k: Optional[torch.Tensor]) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """ropejit's (q, k) for one rotation of a patched model: the spec at the positions a hook
    recorded (None: unknown), else from diffusers' own cos and sin (the cos/sin route); None where
    diffusers' code must run it. Counted in `state` with why."""
    if positions is not None:
        out, why = _rotate(state, positions, q, k)
        if why is None:
            state._count()
            return out
    else:
        why = "a cos no hooked rotary module made (its positions are unknown)"
    if state.cos_sin:
        out, not_cos_sin = _rotate_cos_sin(freqs, q, k)
        if not_cos_sin is None:
            state._count(cos_sin=why)
            return out
        why = f"{why}; cos/sin route: {not_cos_sin}"
    state._count(why)
    return None


def _apply_function(original: Callable) -> Callable:
    """diffusers' ``apply_rotary_emb`` with ropejit's rotation where a hooked module made the cos."""

    def apply_rotary_emb(x: torch.Tensor, freqs_cis: Any, use_real: bool = True, use_real_unbind_dim: int = -1,
                         sequence_dim: int = 2) -> torch.Tensor:
        global unknown_cos_calls
        recalled = _recalled(freqs_cis)
        state = recalled[1] if recalled is not None else (_active[-1] if _active else None)
        if state is None:
            unknown_cos_calls += 1
            return original(x, freqs_cis, use_real, use_real_unbind_dim, sequence_dim)
        why: Optional[str] = None
        if not use_real or use_real_unbind_dim != -1:
            why = (f"use_real={use_real}, use_real_unbind_dim={use_real_unbind_dim} (ropejit serves the "
                   "interleaved pairs of use_real=True, use_real_unbind_dim=-1)")
        elif sequence_dim not in (1, 2) or x.dim() != 4:
            why = f"x of shape {list(x.shape)} with sequence_dim={sequence_dim}"
        if why is not None:
            state._count(why)
            return original(x, freqs_cis, use_real, use_real_unbind_dim, sequence_dim)
        q = x if sequence_dim == 1 else x.transpose(1, 2)  # [B, S, H, D]
        out = _rotation(state, recalled[0] if recalled else None, freqs_cis, q, None)
        if out is None:
            return original(x, freqs_cis, use_real, use_real_unbind_dim, sequence_dim)
        return out[0] if sequence_dim == 1 else out[0].transpose(1, 2)

    apply_rotary_emb.__wrapped__ = original  # type: ignore[attr-defined]
    return apply_rotary_emb


# ------------------------------------------------------------------ probes

def _close(ours: torch.Tensor, theirs: torch.Tensor) -> bool:
    scale = max(1.0, float(theirs.abs().max()))
    return bool(torch.isfinite(ours).all()) and float((ours - theirs).abs().max()) <= 1e-5 * scale


def _probe(state: DiffusersRopePatch, rotary: Any, route: "Route", device: torch.device) -> Optional[str]:
    """Rotates random q and k by the model's own rotary module's cos/sin and diffusers'
    ``apply_rotary_emb`` (fp32) and by ropejit at the same positions; None where they agree."""
    generator = torch.Generator().manual_seed(46)
    axes = _axes_of(state)
    if route.positions == "ids":  # random integer ids, as Flux's pipelines make (floats holding integers)
        ids = torch.randint(0, 64, (7, axes), generator=generator).to(device=device, dtype=torch.float64)
        cos, sin = rotary(ids)
        positions = _integer_positions(ids, axes)
    else:  # a 3 x 2 x 5 patch grid: 30 tokens
        hidden = torch.zeros(1, 1, *[p * n for p, n in zip(_patch_sizes(rotary), (3, 2, 5))], device=device)
        cos, sin = rotary(hidden)
        positions = _grid_positions(hidden, _patch_sizes(rotary))
    cos, sin = cos.reshape(-1, cos.shape[-1]).float(), sin.reshape(-1, sin.shape[-1]).float()
    tokens = positions.shape[-1]
    q = torch.randn(2, tokens, 3, state.spec.head_dim, generator=generator).to(device)
    k = torch.randn(2, tokens, 1, state.spec.head_dim, generator=generator).to(device)
    embeddings = sys.modules["diffusers.models.embeddings"]
    apply = _replaced.get((embeddings.__name__, "apply_rotary_emb"), (embeddings.apply_rotary_emb,))[0]
    theirs = [apply(t, (cos, sin), sequence_dim=1) for t in (q, k)]
    try:
        ours, why = _rotate(state, positions, q, k)
    except (_ropejit.Error, ValueError, NotImplementedError) as e:
        return f"ropejit's kernel failed on the probe: {e}"
    if why is not None:
        return why
    if not all(_close(o, t) for o, t in zip(ours, theirs)):
        return "ropejit's rotation differs from diffusers' on the probe (fp32, relative 1e-5)"
    return None


# ------------------------------------------------------------------ patch / unpatch

@dataclass(frozen=True)
class Route:
    """How ropejit reaches one family: its rotary module's attribute, where the positions come
    from (``ids``: Flux's ids; ``grid``: the latent's patch grid), and what is replaced: the
    ``apply_rotary_emb`` of these diffusers modules, and (``processor``: the diffusers module of a
    :data:`_PROCESSORS` entry) its attention processors."""

    rotary: str
    positions: str
    functions: Tuple[str, ...] = ()
    processor: str = ""


_ROUTES: Dict[str, Route] = {
    # Flux's FluxAttnProcessor is swapped (QK-norm and rotation fused); its IP-adapter processor
    # and a processor that cannot fuse call the replaced apply_rotary_emb.
    "flux": Route("pos_embed", "ids", (_FLUX_MODULE,), processor=_FLUX_MODULE),
    # Flux 2 concatenates its text and image cos/sin: those run the cos/sin route.
    "flux2": Route("pos_embed", "ids", (_TRANSFORMERS + "transformer_flux2",)),
    # HunyuanVideo's processor imports apply_rotary_emb from embeddings at each call.
    "hunyuan-video": Route("rope", "grid", ("diffusers.models.embeddings",)),
    "hunyuan-video15": Route("rope", "grid", ("diffusers.models.embeddings",)),  # the same import at each call
    "wan": Route("rope", "grid", processor=_WAN_MODULE),
    # Wan-VACE's blocks (its VACE blocks too) are transformer_wan's, with WanAttnProcessor.
    "wan-vace": Route("rope", "grid", processor=_WAN_MODULE),
    # Chroma's blocks run transformer_flux's FluxAttnProcessor; LongCat-Image's, Ovis-Image's, Bria's
    # and Flux 3's processors call the apply_rotary_emb imported into their own modules (Flux 3's
    # joint blocks concatenate text and image cos/sin: the cos/sin route).
    "chroma": Route("pos_embed", "ids", (_FLUX_MODULE,), processor=_FLUX_MODULE),
    "longcat-image": Route("pos_embed", "ids", (_TRANSFORMERS + "transformer_longcat_image",)),
    "ovis-image": Route("pos_embed", "ids", (_TRANSFORMERS + "transformer_ovis_image",)),
    "bria": Route("pos_embed", "ids", (_TRANSFORMERS + "transformer_bria",)),
    "flux3": Route("pos_embed", "ids", (_TRANSFORMERS + "transformer_flux3",)),
}

# diffusers module → (the processor class swapped, the factory of its ropejit subclass)
_PROCESSORS: Dict[str, Tuple[str, Callable[[], type]]] = {
    _WAN_MODULE: ("WanAttnProcessor", lambda: _diffusers_wan.processor_class(_WAN_MODULE, _recalled, _rotation)),
    _FLUX_MODULE: ("FluxAttnProcessor", lambda: _diffusers_flux.processor_class(_FLUX_MODULE, _recalled)),
}


def _transformers_of(target: Any) -> List[torch.nn.Module]:
    """The transformers of a pipeline (``transformer``, and ``transformer_2`` where set), or the model."""
    if isinstance(target, torch.nn.Module):
        return [target]
    found = [getattr(target, name, None) for name in ("transformer", "transformer_2")]
    found = [m for m in found if isinstance(m, torch.nn.Module)]
    if not found:
        raise TypeError(f"patch: expected a diffusers transformer or a pipeline with one, not {type(target).__name__}")
    return found


def patch(target: Any, *, verify: bool = True, strict: bool = False, cos_sin: bool = True) -> DiffusersRopePatch:
    """Runs the RoPE of a diffusers transformer (or of a pipeline's ``transformer`` and
    ``transformer_2``) through ropejit's kernel; returns the transformer's DiffusersRopePatch
    (each patched model keeps its own as ``model._ropejit_patch``).

    ``verify`` first rotates random q and k by the model's own rotary module and diffusers'
    ``apply_rotary_emb`` and by ropejit (fp32, relative 1e-5), and patches only where they agree.
    ``cos_sin``: a rotation whose positions the hooks do not know (Flux 2's concatenated text and
    image cos, fractional ids) runs ropejit's kernel from diffusers' own cos and sin
    (``io.angles: cos_sin_cache``); False leaves those to diffusers' code. A family ropejit does
    not serve leaves the model as it is, with ``state.reason`` and a ``RuntimeWarning``;
    ``strict=True`` raises ``ropejit.Error`` instead. Patching twice is a no-op."""
    states = [_patch_one(model, verify, strict, cos_sin) for model in _transformers_of(target)]
    return states[0]


def _declined(model: torch.nn.Module, state: DiffusersRopePatch, verify: bool) -> Optional[str]:
    """Why ropejit cannot patch `model` (its spec, route, rotary module, the probe), or None."""
    name = type(model).__name__
    try:
        _, family, _ = family_of(model)
        state.family = family.name
        state.spec = Spec.from_diffusers(model, dtype="fp32")
    except (_ropejit.Error, ValueError, NotImplementedError) as e:
        return str(e)
    route = _ROUTES.get(state.family or "")
    if route is None:
        return (f"{name}: ropejit has its spec but no patch route for the {state.family} family yet "
                f"(routes: {', '.join(sorted(_ROUTES))})")
    rotary = getattr(model, route.rotary, None)
    if not isinstance(rotary, torch.nn.Module):
        return f"{name}: no rotary module at .{route.rotary}"
    for module_name in route.functions + ((route.processor,) if route.processor else ()):
        if module_name not in sys.modules:
            return f"{name}: diffusers module {module_name} is not loaded"
    version = getattr(sys.modules.get("diffusers"), "__version__", None)
    if route.processor and version != DIFFUSERS_VERSION:
        return (f"{name}: diffusers {version}: the swapped processor repeats {_PROCESSORS[route.processor][0]}'s "
                f"steps as diffusers {DIFFUSERS_VERSION} has them, and only that release was read")
    if verify:
        try:
            device = next(model.parameters()).device
        except StopIteration:
            device = torch.device("cpu")
        with torch.no_grad():
            why = _probe(state, rotary, route, device)
        if why is not None and not state.cos_sin:
            return f"{name}: {why}"
        if why is not None:  # the model's own cos and sin still serve every rotation
            state.cos_sin_only = f"the spec does not match the model's rotary module: {why}"
            warnings.warn(f"ropejit.diffusers.patch: {name}: ropejit rotates from the model's own cos and sin "
                          f"(the cos/sin route), since {state.cos_sin_only} (rotary buffers cast to a lower "
                          "precision round the model's angles; diffusers keeps them float32 in from_pretrained)",
                          RuntimeWarning, stacklevel=4)
    return None


def _patch_one(model: torch.nn.Module, verify: bool, strict: bool, cos_sin: bool) -> DiffusersRopePatch:
    existing = getattr(model, _ATTRIBUTE, None)
    if existing is not None:
        return existing
    state = DiffusersRopePatch(spec=None, cos_sin=cos_sin)
    state.reason = _declined(model, state, verify)
    if state.reason is not None:
        if strict:
            raise _ropejit.Error(f"ropejit.diffusers.patch: {state.reason}")
        warnings.warn(f"ropejit.diffusers.patch: diffusers keeps the RoPE of {type(model).__name__}: "
                      f"{state.reason}", RuntimeWarning, stacklevel=3)
        return state
    route = _ROUTES[state.family or ""]
    hook = _ids_hook if route.positions == "ids" else _grid_hook
    state._hooks.append(getattr(model, route.rotary).register_forward_hook(hook(state), with_kwargs=True))

    def enter(module: Any, args: Any) -> None:
        _active.append(state)

    def leave(module: Any, args: Any, output: Any) -> None:
        if _active and _active[-1] is state:
            _active.pop()

    state._hooks.append(model.register_forward_pre_hook(enter))
    state._hooks.append(model.register_forward_hook(leave, always_call=True))
    for module_name in route.functions:
        _replace(state, module_name, "apply_rotary_emb", _apply_function)
    if route.processor:
        class_name, make_class = _PROCESSORS[route.processor]
        replacement = make_class()
        original_class = getattr(sys.modules[route.processor], class_name)
        for module in model.modules():
            processor = getattr(module, "processor", None)
            if type(processor) is original_class:
                module.processor = replacement(processor, state)
                state._swapped.append((module, processor))
        state.processors = len(state._swapped)
    state.note = ("the model's QK-norm runs before the rotation, as before (ropejit rotates only), but for Wan's "
                  "self-attention and Flux's and Chroma's attention without autograd (norm and rotation in one "
                  "launch per stream); angles from the spec's "
                  "float32 inv_freq (Flux, Flux 2 and Wan compute theirs in float64)")
    setattr(model, _ATTRIBUTE, state)
    return state


def _replace(state: DiffusersRopePatch, module_name: str, function: str, make: Callable[[Callable], Callable]) -> None:
    acquire(_replaced, module_name, function, make)
    state._replaced.append((module_name, function))
    state.functions.append(f"{module_name}.{function}")


def unpatch(target: Any) -> None:
    """Undoes :func:`patch` for a transformer or a pipeline's transformers: removes the hooks,
    puts the original processors back, and restores diffusers' functions once no patched model
    uses them. Does nothing for a model that is not patched."""
    for model in _transformers_of(target):
        state: Optional[DiffusersRopePatch] = getattr(model, _ATTRIBUTE, None)
        if state is None:
            continue
        for hook in state._hooks:
            hook.remove()
        for module, processor in state._swapped:
            module.processor = processor
        for key in state._replaced:
            release(_replaced, key)
        for cos_id in [cos_id for cos_id, entry in _positions_by_cos.items() if entry[2] is state]:
            del _positions_by_cos[cos_id]
        state._hooks, state._replaced, state._swapped = [], [], []
        delattr(model, _ATTRIBUTE)
