"""The vision and audio towers' side of ``ropejit.transformers.patch``.

A tower of transformers 5.24 (Qwen2-VL's vision transformer, Pixtral, Kimi's MoonViT, an audio
encoder, ...) builds cos and sin once per forward in its rotary module, ``rotary(x, position_ids)``
with integer ``position_ids`` ``[N, A]`` (a patch's row and column; t, h, w), and hands them to every
block, whose attention calls the modeling module's apply function (``apply_rotary_pos_emb_vision(q,
k, cos, sin)``, Pixtral's ``apply_rotary_pos_emb(..., unsqueeze_dim=0)``, Llama-4's
``vision_apply_rotary_emb(q, k, freqs_ci)``). The patch hooks the rotary module so it remembers the
positions of each cos it returns (keyed by the cos tensor, held weakly; Qwen2.5-VL's window
permutation of cos is followed), and replaces the apply function with one that looks them up.

Each tower takes one route, recorded in ``RopePatch.towers`` with why:

- ``"axes"``: ropejit's own spec (``Spec.from_hf(config, tower=...)``, io.positions ``axes``, or
  one position stream for a one-axis tower) from the integer positions: HF's cos and sin are not read.
- ``"cos_sin"``: HF's own cos and sin through the kernel (``io.angles: cos_sin_cache``, each token
  its own row), where the spec cannot serve: a tower ropejit refuses, or a ropejit build without
  the axes form.
- ``"hf"``: HF's function keeps running (why: the probe disagreed, the tower is unknown, ...).

With ``verify`` each route is first compared with HF's apply function on the tower's own rotary
module (an odd grid of positions, random q and k, fp32) and used only where they agree.
"""
from __future__ import annotations

import functools
import inspect
import sys
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from . import _ropejit
from ._module_functions import acquire, release
from . import torch as ropejit_torch
from ._patch_cos_sin import CosSinRoute, rotate_cos_sin
from ._spec import Spec
from ._vision_specs import REFUSED, TOWERS, TowerForm, llama4_positions, tower_spec_dict

_DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
# The probe's tolerance, relative to the largest |value| of a head: fp32 angles of the same positions.
PROBE_TOLERANCE = 1e-5


@dataclass(eq=False)
class TowerPatch:
    """What the patch does for one tower's rotary module: its config's model_type, the rotary
    class, the route (``"axes"``, ``"cos_sin"`` or ``"hf"``) and why, the spec the axes route runs,
    the apply functions replaced (``"module.function"``), and the calls that ran ropejit's kernel or
    fell back to HF's function, with the first reason for a fallback. A call whose cos the rotary
    module did not make (MLCD prepends a learned CLS angle to it) takes HF's cos and sin through the
    kernel on any route but "hf" (``cos_sin_calls`` counts them among ``kernel_calls``)."""

    model_type: str
    rotary: str
    route: str = "hf"
    why: str = ""
    spec: Optional[Spec] = None
    functions: List[str] = field(default_factory=list)
    kernel_calls: int = 0
    fallback_calls: int = 0
    fallback_reason: Optional[str] = None
    #: kernel calls on a cos the rotary module did not make (MLCD prepends a learned CLS angle): HF's cos and sin
    cos_sin_calls: int = 0
    _form: Optional[TowerForm] = field(default=None, repr=False)
    _cos_sin: Optional[CosSinRoute] = field(default=None, repr=False)
    _spec_json: Dict[Tuple[Any, ...], str] = field(default_factory=dict, repr=False)

    def count(self, state: Any, key: str, fallback: Optional[str] = None) -> None:
        """Counts one call here and in the model's RopePatch (under `key`)."""
        if fallback is None:
            self.kernel_calls += 1
        else:
            self.fallback_calls += 1
            self.fallback_reason = self.fallback_reason or fallback
        state._count(key, fallback)

    def spec_json(self, dtype: torch.dtype, heads: int, kv_heads: int, width: int) -> str:
        """The op's spec JSON for q and k of `dtype` with these head counts and head width (the
        spec's head_dim, or its rotary_dim: a partial rotary slice HF split off first)."""
        key = (dtype, heads, kv_heads, width)
        if key not in self._spec_json:
            assert self.spec is not None
            spec = dict(self.spec.to_dict(), dtype=_DTYPE_NAMES[dtype], num_q_heads=heads, num_kv_heads=kv_heads)
            if width != self.spec.head_dim:
                spec.update(head_dim=width, rotary_dim=width)
            self._spec_json[key] = ropejit_torch.op_spec_json(spec)
        return self._spec_json[key]


# id(cos) -> (weakref to cos, positions [A, N] or None, tower, model's RopePatch, key)
_by_cos: Dict[int, Tuple[weakref.ref, Optional[torch.Tensor], TowerPatch, Any, str]] = {}
# (module name, function) -> (the function replaced, the replacement, users)
_installed: Dict[Tuple[str, str], Tuple[Callable, Callable, int]] = {}
# "module.function" -> (tower, state, key) of each patched tower using it (the cos/sin route's pairing is the function's)
_users: Dict[str, List[Tuple[TowerPatch, Any, str]]] = {}
unknown_calls = 0  # calls of a replaced function with a cos no patched tower made (the inner function ran)


def _remember(cos: torch.Tensor, positions: Optional[torch.Tensor], tower: TowerPatch, state: Any, key: str) -> None:
    ident = id(cos)

    def forget(ref: weakref.ref) -> None:
        if _by_cos.get(ident, (None,))[0] is ref:
            del _by_cos[ident]

    _by_cos[ident] = (weakref.ref(cos, forget), positions, tower, state, key)


def _recalled(cos: Any) -> Optional[Tuple[Optional[torch.Tensor], TowerPatch, Any, str]]:
    entry = _by_cos.get(id(cos))
    if entry is None or entry[0]() is not cos:
        return None
    return entry[1], entry[2], entry[3], entry[4]


# ------------------------------------------------------------------ finding the towers

def _module_name(short: str) -> str:
    return f"transformers.models.{short}.modeling_{short}"


def _form_of(rotary: torch.nn.Module) -> Tuple[Optional[str], Optional[TowerForm], str]:
    """(model_type, form, why not) of a rotary module: its config's model_type must be a row of
    TOWERS whose rotary class is this module's."""
    config = getattr(rotary, "config", None)
    model_type = getattr(config, "model_type", None)
    name = type(rotary).__name__
    if model_type in REFUSED:
        return model_type, None, REFUSED[model_type]
    form = TOWERS.get(model_type)
    if form is None:
        return model_type, None, f"model_type {model_type!r} of {name}: no tower rotary ropejit knows"
    if form.rotary != name:
        return model_type, None, f"{name} is not {form.rotary}, the rotary class read for model_type {model_type!r}"
    return model_type, form, ""


def tower_rotary_names() -> Tuple[str, ...]:
    """The rotary classes of multi-axis towers (never a text layer's, whatever their name)."""
    return tuple(sorted({f.rotary for f in TOWERS.values() if f.form != "one"}))


def tower_modules(model: torch.nn.Module, text_config: Any) -> List[torch.nn.Module]:
    """The model's tower rotary modules: a vision/audio class, or one of TOWERS; not one built from
    the text config (a one-axis tower class that serves the text decoder, Higgs-Audio-v2's)."""
    words = ("Vision", "Audio", "Encoder", "ViT")
    known = {f.rotary for f in TOWERS.values()}
    out = []
    for m in model.modules():
        name = type(m).__name__
        if not (name.endswith("RotaryEmbedding") or name.endswith("RotaryPositionalEmbedding")
                or name.endswith("RopePositionEmbedding")):
            continue
        if name not in known and not any(w in name for w in words):
            continue
        if text_config is not None and type(getattr(m, "config", None)) is type(text_config) \
                and name not in tower_rotary_names():
            continue
        out.append(m)
    return out


# ------------------------------------------------------------------ positions

def tower_positions(form: TowerForm, rotary: torch.nn.Module, position_ids: Any) -> Optional[torch.Tensor]:
    """The kernel's positions ``[A, N]`` (``[B, S]`` for a one-axis tower) from what the rotary
    module got: HF's token-major ``[N, A']`` integer position_ids, its rows picked by the form;
    Llama-4's fixed grid. None when they are not integer positions of the expected shape."""
    if form.rows is None:
        return torch.tensor(llama4_positions(rotary.config), dtype=torch.int64)
    if not isinstance(position_ids, torch.Tensor) or position_ids.dtype not in (torch.int32, torch.int64):
        return None
    if form.form == "one":
        return position_ids if position_ids.dim() == 2 else None
    if position_ids.dim() != 2 or position_ids.shape[1] <= max(form.rows):
        return None
    return position_ids[:, list(form.rows)].t()


def probe_positions(form: TowerForm, device: torch.device) -> torch.Tensor:
    """HF-shaped positions for a probe: an odd 5 x 7 grid at an offset (three axes: two frames),
    so every axis and pair shows; ``[1, 11]`` scattered positions for a one-axis tower."""
    if form.form == "one":
        return torch.tensor([[0, 1, 2, 3, 5, 17, 100, 257, 1000, 2047, 4095]], device=device)
    rows, cols = torch.meshgrid(torch.arange(5) + 3, torch.arange(7) * 3 + 1, indexing="ij")
    grid = torch.stack((rows.flatten(), cols.flatten()), -1)
    if form.form == "third3":
        grid = torch.cat([torch.cat((torch.full((35, 1), t), grid), -1) for t in (0, 4)])
    return grid.to(device)


# ------------------------------------------------------------------ the rotation

def _apply_kind(form: TowerForm) -> str:
    """How the form's apply function takes q and k: "vision" ``(q, k, cos, sin)``, q ``[S, H, D]``
    or ``[1, S, H, D]``, cos ``[S, R]``; "llama" ``(q, k, cos, sin, unsqueeze_dim)``; "complex"
    ``(q, k, freqs_ci)``, q ``[B, S, H, D]``."""
    name = form.apply.split(".")[-1]
    return "vision" if name == "apply_rotary_pos_emb_vision" else "complex" if name == "vision_apply_rotary_emb" \
        else "llama"


def _tokens_first(kind: str, q: torch.Tensor, unsqueeze_dim: int) -> Tuple[Optional[torch.Tensor], str]:
    """q as ``[B, S, H, D]`` (a view) for the op, or why not."""
    if not isinstance(q, torch.Tensor):
        return None, f"q is a {type(q).__name__}"
    if kind == "vision":
        return (q.unsqueeze(0), "") if q.dim() == 3 else (q, "") if q.dim() == 4 else (None, f"q of shape {list(q.shape)}")
    if q.dim() != 4:
        return None, f"q of shape {list(q.shape)}"
    if kind == "llama" and unsqueeze_dim in (0, 1):
        return q.transpose(1, 2), ""
    if kind == "complex" or unsqueeze_dim == 2:
        return q, ""
    return None, f"unsqueeze_dim {unsqueeze_dim}"


def _back(kind: str, out: torch.Tensor, like: torch.Tensor, unsqueeze_dim: int) -> torch.Tensor:
    if kind == "vision":
        return out[0] if like.dim() == 3 else out
    if kind == "llama" and unsqueeze_dim in (0, 1):
        return out.transpose(1, 2)
    return out


def rotate(tower: TowerPatch, kind: str, q: Any, k: Any, cos: Any, sin: Any, positions: Optional[torch.Tensor],
           unsqueeze_dim: int = 1, route: Optional[str] = None) -> Tuple[Optional[Tuple[torch.Tensor, torch.Tensor]], str]:
    """(q, k) as the tower's HF apply function returns them, computed by the kernel on `route`
    (default: the tower's); (None, why) where HF's function must run."""
    q4, why = _tokens_first(kind, q, unsqueeze_dim)
    k4, why_k = _tokens_first(kind, k, unsqueeze_dim)
    if q4 is None or k4 is None:
        return None, why or why_k
    if q4.dtype not in _DTYPE_NAMES or k4.dtype != q4.dtype or q4.shape[:2] != k4.shape[:2] \
            or q4.shape[-1] != k4.shape[-1] or q4.device.type not in ("cpu", "cuda") or k4.device != q4.device:
        return None, f"q {list(q.shape)} {q.dtype}, k {list(k.shape)} {k.dtype}: no kernel call fits"
    batch, seq = q4.shape[:2]
    if (route or tower.route) == "axes":
        if positions is None or positions.shape[-1] != seq or positions.device != q4.device:
            return None, f"positions {None if positions is None else list(positions.shape)} for {seq} tokens"
        if q4.shape[-1] not in (tower.spec.head_dim, tower.spec.rotary_dim):
            return None, f"heads of {q4.shape[-1]}, the spec's {tower.spec.head_dim}"
        if tower.spec.io["positions"] == "axes":
            kernel_positions = positions[:, None, :]  # [A, 1, S]: the same grid for every batch row
        else:
            kernel_positions = positions if positions.shape[0] == batch else positions[:1].expand(batch, seq)
        spec_json = tower.spec_json(q4.dtype, q4.shape[2], k4.shape[2], q4.shape[-1])
        q_out, k_out = ropejit_torch.apply_rope(q4, k4, kernel_positions, spec=spec_json)
    else:
        if tower._cos_sin is None:
            return None, "HF's cos and sin through the kernel disagreed with HF on the probe"
        cos3, sin3, why = _cos_sin_rows(kind, cos, sin, seq)
        if cos3 is None:
            return None, why
        if cos3.device != q4.device or not 2 <= cos3.shape[-1] <= q4.shape[-1] or cos3.shape[0] not in (1, batch):
            return None, f"cos of shape {list(cos.shape)} for q {list(q.shape)}"
        if q4.shape[2] % k4.shape[2]:
            return None, f"k's {k4.shape[2]} heads do not divide q's {q4.shape[2]}"
        dtype = q4.dtype
        q_out, k_out = rotate_cos_sin("qk", q4, k4, cos3.to(torch.float32) if cos3.dtype not in _DTYPE_NAMES else cos3,
                                      sin3.to(cos3.dtype) if sin3.dtype != cos3.dtype else sin3, tower._cos_sin, 2)
        q_out, k_out = q_out.to(dtype), k_out.to(dtype)
    return (_back(kind, q_out, q, unsqueeze_dim), _back(kind, k_out, k, unsqueeze_dim)), ""


def _cos_sin_rows(kind: str, cos: Any, sin: Any, seq: int) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor], str]:
    """HF's cos and sin as ``[B' , S, d]`` (Llama-4's complex freqs_ci: its real and imaginary parts,
    one per pair, twice: the "half" columns)."""
    if kind == "complex":
        if not isinstance(cos, torch.Tensor) or not cos.is_complex():
            return None, None, "freqs_ci is not a complex tensor"
        freqs = cos.reshape(-1, cos.shape[-1])
        real, imag = freqs.real.float(), freqs.imag.float()
        cos, sin = torch.cat((real, real), -1), torch.cat((imag, imag), -1)
    if not isinstance(cos, torch.Tensor) or not isinstance(sin, torch.Tensor) or cos.shape != sin.shape:
        return None, None, "cos and sin are not tensors of one shape"
    if cos.dim() == 2:
        cos, sin = cos[None], sin[None]
    if cos.dim() != 3 or cos.shape[1] != seq or cos.shape[-1] % 2:
        return None, None, f"cos of shape {list(cos.shape)} for {seq} tokens"
    return cos, sin, ""


def _replacement(inner: Callable, original: Callable, kind: str, function: str) -> Callable:
    """The stand-in for one modeling module's apply function: ropejit for a cos a patched tower
    made, else `inner` (what was there: HF's, or the text patch's replacement)."""
    signature = inspect.signature(original)
    names = ("query", "key", "freqs_ci") if kind == "complex" else ("q", "k", "cos")

    @functools.wraps(original)
    def ropejit_tower_apply(*args: Any, **kwargs: Any) -> Any:
        global unknown_calls
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return inner(*args, **kwargs)
        q, k, cos = (bound.get(n) for n in names)
        recalled = _recalled(cos)
        if recalled is None:
            users = [user for user in _users.get(function, []) if user[0]._cos_sin is not None]
            if not users:
                unknown_calls += 1
                return inner(*args, **kwargs)
            tower, state, key = users[-1]
            out, why = rotate(tower, kind, q, k, cos, bound.get("sin"), None, bound.get("unsqueeze_dim", 1), "cos_sin")
            tower.count(state, key, why if out is None else None)
            tower.cos_sin_calls += out is not None
            return out if out is not None else inner(*args, **kwargs)
        positions, tower, state, key = recalled
        if tower.route == "hf":
            tower.count(state, key, tower.why)
            return inner(*args, **kwargs)
        out, why = rotate(tower, kind, q, k, cos, bound.get("sin"), positions, bound.get("unsqueeze_dim", 1))
        tower.count(state, key, why if out is None else None)
        return out if out is not None else inner(*args, **kwargs)

    ropejit_tower_apply.ropejit_original = original  # type: ignore[attr-defined]
    return ropejit_tower_apply


# ------------------------------------------------------------------ planning a tower

def _rotary_output(rotary: torch.nn.Module, form: TowerForm, position_ids: torch.Tensor) -> Any:
    x = torch.zeros(1, 1, device=position_ids.device)
    with torch.no_grad():
        return rotary(x) if form.rows is None else rotary(x, position_ids)


def cast_buffers(rotary: torch.nn.Module) -> Optional[torch.dtype]:
    """The dtype of the rotary module's frequency buffers when ``model.to(dtype)`` cast them
    (``inv_freq`` not float32, Llama-4's ``freqs_ci`` no longer complex), else None."""
    for name, buffer in rotary.named_buffers(recurse=False):
        if name.endswith("inv_freq") and buffer.dtype != torch.float32:
            return buffer.dtype
        if name == "freqs_ci" and not buffer.is_complex():
            return buffer.dtype
    return None


def reference_rotary(rotary: torch.nn.Module) -> torch.nn.Module:
    """The rotary module ropejit must agree with: `rotary`, or one rebuilt from its config when
    ``model.to(dtype)`` cast its buffers (``from_pretrained(dtype=...)`` keeps them float32: every
    rotary init computes them in float32, and they are not in the checkpoint)."""
    if cast_buffers(rotary) is None:
        return rotary
    device = next(iter(rotary.buffers()), torch.zeros(0)).device
    return type(rotary)(rotary.config).to(device)


def _probe(tower: TowerPatch, rotary: torch.nn.Module, function: Callable) -> Optional[str]:
    """None when the tower's route gives what HF's `function` gives on the rotary module's own
    output for an odd grid of positions (random fp32 q, k; relative PROBE_TOLERANCE); else what
    differs. The axes route is compared with the module rebuilt from its config where
    ``model.to(dtype)`` cast its buffers (:func:`reference_rotary`); the cos/sin route, which reads
    the module's own output, with the module itself."""
    form = tower._form
    kind = _apply_kind(form)
    if tower.route == "axes":
        rotary = reference_rotary(rotary)
    device = next(iter(rotary.buffers()), torch.zeros(0)).device
    position_ids = probe_positions(form, device)
    out = _rotary_output(rotary, form, position_ids)
    cos, sin = (out, None) if kind == "complex" else out
    positions = tower_positions(form, rotary, position_ids)
    positions = positions.to(device) if positions is not None else None
    seq = (cos.shape[0] if kind != "llama" or cos.dim() == 2 else cos.shape[1])
    head_dim = tower.spec.head_dim if tower.spec is not None else _head_dim(rotary)
    generator = torch.Generator().manual_seed(46)
    shape = {"vision": (seq, 3, head_dim), "complex": (1, seq, 3, head_dim), "llama": (1, 3, seq, head_dim)}[kind]
    q = torch.randn(*shape, generator=generator).to(device)
    k = torch.randn(*shape, generator=generator).to(device)
    unsqueeze = 0 if kind == "llama" and cos.dim() == 2 else 1
    with torch.no_grad():
        if kind == "complex":
            want = function(q, k, cos)
        elif kind == "llama":
            want = function(q, k, cos, sin, unsqueeze_dim=unsqueeze)
        else:
            want = function(q, k, cos, sin)
        got, why = rotate(tower, kind, q, k, cos, sin, positions, unsqueeze)
    if got is None:
        return f"the probe's call does not fit: {why}"
    for name, g, w in zip(("q", "k"), got, want):
        if g.shape != w.shape:
            return f"ropejit's {name} has shape {list(g.shape)}, HF's {list(w.shape)}"
        error = ((g.double() - w.double()).abs() / w.double().abs().amax(-1, keepdim=True).clamp(min=1.0)).max().item()
        if not error <= PROBE_TOLERANCE:
            return f"ropejit's {name} differs from HF's {form.apply} by {error:.3g} on a probe"
    return None


def _head_dim(rotary: torch.nn.Module) -> int:
    from ._vision_specs import tower_sizes

    return tower_sizes(rotary.config.to_dict())[0]


def plan_tower(rotary: torch.nn.Module, function: Optional[Callable], verify: bool, hf_angles: bool) -> TowerPatch:
    """The route of one tower rotary module (see the module docstring)."""
    model_type, form, why = _form_of(rotary)
    tower = TowerPatch(model_type or "?", type(rotary).__name__, why=why, _form=form)
    if form is None:
        return tower
    if function is None:
        tower.why = f"{form.apply} is not loaded or not a function"
        return tower
    kind = _apply_kind(form)
    tower._cos_sin = CosSinRoute(form.layout, "even" if form.layout == "interleaved" and kind != "complex" else "half")
    misses = []
    try:
        kind_of_tower = "audio" if form.form == "one" else "vision"  # only the spec's name reads it
        tower.spec = Spec.from_json(tower_spec_dict(rotary.config.to_dict(), kind_of_tower, "fp32"))
    except (_ropejit.Error, ValueError) as e:
        misses.append(f"ropejit's spec: {str(e).splitlines()[0]}")
    passed: Dict[str, bool] = {}
    for route in (["axes"] if tower.spec is not None else []) + (["cos_sin"] if hf_angles else []):
        tower.route = route
        try:
            miss = _probe(tower, rotary, function) if verify else None
        except (_ropejit.Error, ValueError, RuntimeError, TypeError, IndexError) as e:
            miss = f"the probe failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        passed[route] = miss is None
        if miss is not None:
            misses.append(f"{route}: {miss}")
    if not passed.get("cos_sin"):
        tower._cos_sin = None  # no call takes HF's cos and sin then, not even one the rotary did not make
    if passed.get("axes"):
        tower.route, tower.why = "axes", "ropejit's spec from the integer positions the rotary module gets"
        cast = cast_buffers(rotary)
        if cast is not None:
            tower.why += (f"; the rotary module's frequencies are {cast} (model.to(dtype) cast them): ropejit runs "
                          "the config's float32 ones, as a model loaded with from_pretrained(dtype=...) has them")
    elif passed.get("cos_sin"):
        tower.route, tower.why = "cos_sin", "HF's cos and sin through the kernel: " + "; ".join(misses)
    else:
        tower.route, tower.why = "hf", "; ".join(misses) or "hf_angles=False and no spec"
    return tower


# ------------------------------------------------------------------ patch / unpatch

def patch_towers(model: torch.nn.Module, state: Any, text_config: Any, verify: bool = True,
                 hf_angles: bool = True) -> List[torch.nn.Module]:
    """Plans a route for each tower rotary module of `model` and installs the hooks and apply
    functions; fills ``state.towers`` (key: ``"<model_type> (<RotaryClass>)"``). Returns the
    tower rotary modules (the text patch leaves them alone)."""
    modules = tower_modules(model, text_config)
    for rotary in modules:
        model_type, form, _ = _form_of(rotary)
        module_name = _module_name(form.apply.split(".")[0]) if form is not None else ""
        function_name = form.apply.split(".")[1] if form is not None else ""
        module = sys.modules.get(module_name)
        current = getattr(module, function_name, None) if module is not None else None
        original = getattr(current, "ropejit_original", current)
        tower = plan_tower(rotary, original if callable(original) else None, verify, hf_angles)
        key = f"{tower.model_type} ({tower.rotary})"
        if key in state.towers:
            key = f"{key} {sum(1 for k in state.towers if k.startswith(key))}"
        state.towers[key] = tower
        if tower.route == "hf":
            continue
        if tower.route == "axes" and cast_buffers(rotary) is not None:
            warnings.warn(f"ropejit: {key}: {tower.why.split('; ', 1)[1]}", RuntimeWarning, 3)
        state._hooks.append(rotary.register_forward_hook(_hook(tower, state, key), with_kwargs=True))
        for owner in model.modules():  # Qwen2.5-VL's tower permutes cos rows by window_index
            if rotary in owner.children() and hasattr(owner, "permute_input_for_window_attn"):
                _follow_permutation(owner, state)
        _install(module_name, function_name, _apply_kind(form), state)
        tower.functions.append(f"{module_name}.{function_name}")
        _users.setdefault(f"{module_name}.{function_name}", []).append((tower, state, key))
    return modules


def _hook(tower: TowerPatch, state: Any, key: str) -> Callable:
    form = tower._form

    def remember(module: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any], output: Any) -> None:
        position_ids = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
        positions = tower_positions(form, module, position_ids)
        cos = output if form.rows is None else (output[0] if isinstance(output, tuple) and output else None)
        if not isinstance(cos, torch.Tensor):
            return
        if positions is not None:
            positions = positions.to(cos.device)
        _remember(cos, positions, tower, state, key)

    return remember


def _follow_permutation(owner: torch.nn.Module, state: Any) -> None:
    """Wraps ``owner.permute_input_for_window_attn`` (instance attribute) so a cos it permutes keeps
    its positions, permuted the same way."""
    if "permute_input_for_window_attn" in vars(owner):
        return
    method = owner.permute_input_for_window_attn

    def permute(input_tensor: torch.Tensor, window_index: torch.Tensor, seq_len: int) -> torch.Tensor:
        out = method(input_tensor, window_index, seq_len)
        recalled = _recalled(input_tensor)
        if recalled is not None:
            positions = recalled[0]
            if positions is not None:
                positions = method(positions.t(), window_index, seq_len).t()
            _remember(out, positions, recalled[1], recalled[2], recalled[3])
        return out

    owner.permute_input_for_window_attn = permute
    state._tower_owners.append(owner)


def _install(module_name: str, function_name: str, kind: str, state: Any) -> None:
    key = (module_name, function_name)
    if key in state._tower_installed:
        return
    acquire(_installed, module_name, function_name,
            lambda inner: _replacement(inner, getattr(inner, "ropejit_original", inner), kind,
                                       f"{module_name}.{function_name}"))
    state._tower_installed.append(key)


def unpatch_towers(state: Any) -> None:
    """Undoes :func:`patch_towers`: the apply functions back once no patched model uses them, the
    window permutation unwrapped, the remembered positions dropped (the hooks are state._hooks)."""
    for key in state._tower_installed:
        release(_installed, key)
    for owner in state._tower_owners:
        vars(owner).pop("permute_input_for_window_attn", None)
    for ident in [i for i, entry in _by_cos.items() if entry[3] is state]:
        del _by_cos[ident]
    for function in list(_users):
        _users[function] = [user for user in _users[function] if user[1] is not state]
        if not _users[function]:
            del _users[function]
    state._tower_installed, state._tower_owners = [], []
