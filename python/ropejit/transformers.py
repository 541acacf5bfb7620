"""Run a transformers model's RoPE through ropejit: ``patch(model)`` / ``unpatch(model)``.

HF's attention calls ``apply_rotary_pos_emb(q, k, cos, sin)`` (Gemma 3n and Gemma 4:
``apply_rotary_pos_emb(x, cos, sin)`` once for q and once for k) with the cos and sin its rotary
embedding module made from ``position_ids``. ``patch`` hooks that module to remember which
``position_ids`` and which layer type made each cos (keyed by the cos tensor's identity, held
weakly), and replaces ``apply_rotary_pos_emb`` (and DeepSeek's ``apply_rotary_pos_emb_interleave``)
in the modeling modules the model's classes come from with a function that looks them up and
launches ropejit's kernel with that layer type's spec instead of the cos/sin arithmetic.

    import ropejit.transformers
    state = ropejit.transformers.patch(model)    # state.specs, state.reason, state.kernel_calls
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
from ._patch_layers import (ALL, FUNCTION_NAMES, apply_form, cast_inv_freq, decline_reason, heads_of,
                            is_mrope, kernel_positions, layer_key, layer_specs, misfit, module_specs,
                            mrope_candidates, one_stream, probe, rotate, rotate_form, takes_layer_type,
                            text_rotary_modules, widths)
from ._module_functions import acquire, release
from ._patch_cos_sin import CosSinRoute, agreed_route, cos_sin_misfit, rotate_cos_sin
from ._patch_vision import patch_towers, unpatch_towers
from ._spec import Spec

__all__ = ["patch", "unpatch", "apply_rotary_pos_emb", "RopePatch"]

_DTYPE_NAMES = ropejit_torch.SPEC_DTYPES


@dataclass(eq=False)
class RopePatch:
    """What ``patch`` did to one model: the spec ropejit runs per layer type (``specs``; the key
    is ``"all"`` when one rope block serves every layer, and ``spec`` is then that spec), the
    layer types HF keeps with why (``declined``), ``reason`` when HF keeps every layer, a
    ``note`` on what ropejit does differently from the model as it is (a cast ``inv_freq``), the
    HF functions replaced (``functions``: ``"module.function"`` -> the layer types it runs
    ropejit for), and how many calls ran ropejit's kernel or fell back to HF's, in all and per
    layer type, with the first reason for a fallback per layer type. Multimodal layer types run
    the spec's mrope positions (``[3, B, S]``); ``text_positions_only`` names those whose rotary
    mixes position streams in a way no mrope spec matched, with why: ropejit runs them where the
    rows are equal (text tokens) and HF runs the others. ``hf_angles`` names the layer types
    whose rope config ropejit cannot express itself (with why) that ropejit's kernel rotates from
    HF's own cos and sin (the cos/sin route: ``patch(model, hf_angles=True)``, the default).
    ``towers`` has one ``TowerPatch`` per vision or audio tower rotary module (key ``"<model_type>
    (<RotaryClass>)"``): its route (``"axes"``: ropejit's spec from the integer positions;
    ``"cos_sin"``: HF's cos and sin through the kernel; ``"hf"``: HF's function), why, and its
    calls; they count in ``kernel_calls`` too, under the same key."""

    spec: Optional[Spec]
    reason: Optional[str] = None
    kernel_calls: int = 0
    fallback_calls: int = 0
    modules: List[str] = field(default_factory=list)
    specs: Dict[str, Spec] = field(default_factory=dict)
    declined: Dict[str, str] = field(default_factory=dict)
    note: Optional[str] = None
    functions: Dict[str, List[str]] = field(default_factory=dict)
    kernel_calls_by_type: Dict[str, int] = field(default_factory=dict)
    fallback_calls_by_type: Dict[str, int] = field(default_factory=dict)
    fallback_reasons: Dict[str, str] = field(default_factory=dict)
    text_positions_only: Dict[str, str] = field(default_factory=dict)
    hf_angles: Dict[str, str] = field(default_factory=dict)
    towers: Dict[str, Any] = field(default_factory=dict)
    _hooks: List[Any] = field(default_factory=list, repr=False)
    _replaced: List[Tuple[str, str]] = field(default_factory=list, repr=False)
    # (function, layer type) → the head widths the probe passed (the head; the rotated slice)
    _widths: Dict[Tuple[str, str], List[int]] = field(default_factory=dict, repr=False)
    _spec_json: Dict[Tuple[Any, ...], str] = field(default_factory=dict, repr=False)
    # id(rotary module) → {layer key: spec key} for modules with a rope block of their own
    _module_keys: Dict[int, Dict[str, str]] = field(default_factory=dict, repr=False)
    # (function, layer type) of the cos/sin route → the route the probe found and its head widths
    _routes: Dict[Tuple[str, str], Tuple[CosSinRoute, List[int]]] = field(default_factory=dict, repr=False)
    # hf_angles on: what a route probed at the first call that needs it reads (serving modules per
    # key, the config, the apply functions); the (function, key) pairs probed so far
    _route_sources: Optional[Tuple[Dict[str, List[Any]], Any, List[Tuple[str, str, str]]]] = \
        field(default=None, repr=False)
    _probed: set = field(default_factory=set, repr=False)
    _tower_installed: List[Tuple[str, str]] = field(default_factory=list, repr=False)
    _tower_owners: List[Any] = field(default_factory=list, repr=False)

    def spec_json(self, dtype: torch.dtype, layer: str = ALL, q_heads: Optional[int] = None,
                  k_heads: Optional[int] = None, width: Optional[int] = None) -> Optional[str]:
        """The op's spec JSON for layer type `layer` and q and k of `dtype` (autocast may differ
        from the model's dtype) with the given head counts (default: the spec's; the rotation
        does not depend on them) and head width (default: head_dim; the rotary_dim of a partial
        spec rotates a slice HF split off). None when ropejit runs no spec for that layer or dtype."""
        spec = self.specs.get(layer)
        if spec is None or dtype not in _DTYPE_NAMES:
            return None
        key = (layer, dtype, q_heads, k_heads, width)
        if key not in self._spec_json:
            spec_dict = dict(spec.to_dict(), dtype=_DTYPE_NAMES[dtype])
            spec_dict.update(num_q_heads=q_heads or spec.num_q_heads, num_kv_heads=k_heads or spec.num_kv_heads)
            if width is not None and width != spec.head_dim:
                spec_dict.update(head_dim=width, rotary_dim=width)
            self._spec_json[key] = ropejit_torch.op_spec_json(spec_dict)
        return self._spec_json[key]

    def _count(self, layer: str, fallback: Optional[str] = None) -> None:
        if fallback is None:
            self.kernel_calls += 1
            self.kernel_calls_by_type[layer] = self.kernel_calls_by_type.get(layer, 0) + 1
        else:
            self.fallback_calls += 1
            self.fallback_calls_by_type[layer] = self.fallback_calls_by_type.get(layer, 0) + 1
            self.fallback_reasons.setdefault(layer, fallback)


# id(cos) → (weakref to cos, position_ids, patch state, layer key); entries leave when cos is freed.
_positions_by_cos: Dict[int, Tuple[weakref.ref, torch.Tensor, RopePatch, str]] = {}
# (module name, function name) → (HF's original, ropejit's replacement, number of patched models using it).
_replaced: Dict[Tuple[str, str], Tuple[Callable, Callable, int]] = {}
_ATTRIBUTE = "_ropejit_patch"
unknown_position_calls = 0  # calls with a cos no patched rotary module made (HF's function ran)


def _remember(cos: torch.Tensor, position_ids: Optional[torch.Tensor], state: RopePatch, layer: str = ALL) -> None:
    key = id(cos)

    def forget(ref: weakref.ref) -> None:
        if _positions_by_cos.get(key, (None,))[0] is ref:
            del _positions_by_cos[key]

    _positions_by_cos[key] = (weakref.ref(cos, forget), position_ids, state, layer)


def _recalled(cos: Any) -> Optional[Tuple[torch.Tensor, RopePatch, str]]:
    """The positions, patch state and layer key of a cos a patched rotary module made, or of a
    slice of its tokens (Qwen4-Exp's attention takes ``cos[:, -S:, :]``); None for any other."""
    entry = _positions_by_cos.get(id(cos))
    if entry is not None and entry[0]() is cos:
        return entry[1], entry[2], entry[3]
    base = getattr(cos, "_base", None)
    entry = _positions_by_cos.get(id(base)) if isinstance(cos, torch.Tensor) and base is not None else None
    if entry is None or entry[0]() is not base:
        return None
    start = _token_slice(cos, base)
    if start is None:
        return None
    positions = entry[1][..., start:start + cos.shape[-2]] if entry[1] is not None else None
    return positions, entry[2], entry[3]


def _token_slice(view: torch.Tensor, base: torch.Tensor) -> Optional[int]:
    """The first token of `view` when it is `base` ([B, S, D]) cut to a run of its tokens, else None."""
    if view.dim() != 3 or base.dim() != 3 or view.stride() != base.stride() or view.shape[0] != base.shape[0] \
            or view.shape[2] != base.shape[2]:
        return None
    offset = view.storage_offset() - base.storage_offset()
    step = base.stride(1)
    if step <= 0 or offset % step or not 0 <= offset // step <= base.shape[1] - view.shape[1]:
        return None
    return offset // step


# ------------------------------------------------------------------ the rotation

def _rotate_recorded(function: str, form: str, q: Any, k: Any, cos: Any, sin: Any, unsqueeze_dim: int
                     ) -> Optional[Any]:
    """ropejit's result for HF function `function` ("module.name") of `form` when a patched
    rotary module made `cos`; None where HF's function must run."""
    global unknown_position_calls
    recalled = _recalled(cos)
    if recalled is None:
        unknown_position_calls += 1
        return None
    position_ids, state, layer = recalled
    spec = state.specs.get(layer)
    allowed = state._widths.get((function, layer))
    if spec is None:
        why: Optional[str] = f"HF keeps layer type {layer}: {state.declined.get(layer, 'not patched')}"
    elif not allowed:
        why = f"{function} is not ropejit's rotation for layer type {layer} (the probe said so)"
    elif form != "one" and k is None:
        why = f"{function} called with q alone (k None): the probe checked it with q and k"
    else:
        why = misfit(q, None if form == "one" else k, position_ids, spec, unsqueeze_dim, allowed)
    spec_json = None
    if why is None:
        k_heads = 1 if form == "one" else heads_of(k, unsqueeze_dim)
        spec_json = state.spec_json(q.dtype, layer, heads_of(q, unsqueeze_dim), k_heads, q.shape[-1])
        why = None if spec_json is not None else f"dtype {q.dtype} (ropejit runs fp32, fp16, bf16)"
    route = _route_for(state, function, layer, why) if why is not None else None
    if route is not None:  # HF's own cos and sin: nothing of the positions is needed
        if form != "one" and k is None:
            why = f"{function} called with q alone (k None): the probe checked it with q and k"
        else:
            why = cos_sin_misfit(q, None if form == "one" else k, cos, sin, unsqueeze_dim, route[1])
        state._count(layer, why)
        return None if why is not None else rotate_cos_sin(form, q, k, cos, sin, route[0], unsqueeze_dim)
    state._count(layer, why)
    if why is not None or spec_json is None:
        return None
    return rotate_form(form, q, k, kernel_positions(position_ids, spec), spec_json, unsqueeze_dim)


def _route_for(state: RopePatch, function: str, layer: str, why: str) -> Optional[Tuple[CosSinRoute, List[int]]]:
    """The cos/sin route of (function, layer type) for a call ropejit's spec cannot run (`why`):
    probed at the first such call (position rows that differ, a rotary argument no spec knows),
    named in ``state.hf_angles`` once it serves; None where hf_angles is off or none matches."""
    if (function, layer) not in state._probed and state._route_sources is not None:
        serving, config, functions = state._route_sources
        _plan_cos_sin(state, layer, serving.get(layer, []), config,
                      [f for f in functions if f"{f[0]}.{f[1]}" == function])
        state._probed.add((function, layer))
        if (function, layer) in state._routes and layer not in state.hf_angles:
            state.hf_angles[layer] = f"calls ropejit's spec cannot run (the first: {why})"
    return state._routes.get((function, layer))


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

    The positions are `position_ids` (``[B, S]`` or ``[1, S]``; ``[3, B, S]`` for a spec with
    mrope positions) when given, else the ones a
    patched model's rotary module made `cos` from; the spec is `spec` when given, else that
    model's for the layer type of `cos`. cos and sin are then not read. Falls back to HF Llama's
    cos/sin formula (:func:`hf_apply_rotary_pos_emb`) when the positions or the spec are unknown
    or the shapes do not fit the spec."""
    recalled = _recalled(cos)
    if position_ids is None and recalled is not None:
        position_ids = recalled[0]
    if spec is None and recalled is not None:
        spec = recalled[1].specs.get(recalled[2])
    if spec is not None and position_ids is not None and q.dtype in _DTYPE_NAMES:
        if spec.qk_norm:  # HF normalizes q and k before this function: the spec must only rotate
            spec = Spec.from_json({key: value for key, value in spec.to_dict().items() if key != "qk_norm"})
        if not is_mrope(spec):
            position_ids = one_stream(position_ids)
        if misfit(q, k, position_ids, spec, unsqueeze_dim) is None:
            spec_json = ropejit_torch.op_spec_json(dict(spec.to_dict(), dtype=_DTYPE_NAMES[q.dtype],
                                                        num_kv_heads=heads_of(k, unsqueeze_dim)))
            return rotate(q, k, kernel_positions(position_ids, spec), spec_json, unsqueeze_dim)
    return hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim)


def _replacement(original: Callable, module_name: str, form: str) -> Callable:
    """ropejit's stand-in for one modeling module's apply function (HF's runs as fallback)."""
    signature = inspect.signature(original)
    function = f"{module_name}.{original.__name__}"

    @functools.wraps(original)
    def ropejit_apply_rotary_pos_emb(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return original(*args, **kwargs)
        rotated = _rotate_recorded(function, form, arguments.get("x" if form == "one" else "q"), arguments.get("k"),
                                   arguments.get("cos"), arguments.get("sin"), arguments.get("unsqueeze_dim", 1))
        return rotated if rotated is not None else original(*args, **kwargs)

    ropejit_apply_rotary_pos_emb.ropejit_original = original  # type: ignore[attr-defined]
    return ropejit_apply_rotary_pos_emb


# ------------------------------------------------------------------ patch / unpatch

def _hf_functions(model: torch.nn.Module) -> List[Tuple[str, str, str]]:
    """(module, function name, form) of each HF apply function in the modules of the model's
    classes that ropejit can stand in for (their attention code calls them as globals)."""
    found = set()
    for cls in {type(m) for m in model.modules()}:
        module = sys.modules.get(cls.__module__)
        for name in FUNCTION_NAMES:
            function = getattr(module, name, None)
            if not callable(function):
                continue
            form = apply_form(name, getattr(function, "ropejit_original", function))
            if form is not None:
                found.add((cls.__module__, name, form))
    return sorted(found)


def _original(module_name: str, name: str) -> Callable:
    if (module_name, name) in _replaced:
        return _replaced[(module_name, name)][0]
    return getattr(sys.modules[module_name], name)


def _text_config(model: torch.nn.Module) -> Any:
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "get_text_config"):
        config = config.get_text_config()
    return config


def _plan(model: torch.nn.Module, state: RopePatch, rotary_modules: List[torch.nn.Module],
          functions: List[Tuple[str, str, str]], verify: bool, hf_angles: bool) -> None:
    """Fills state.specs, state.declined and state.functions (state.reason where nothing can be
    patched)."""
    config = _text_config(model)
    if config is None:
        state.reason = "the model has no config"
        return
    dtype = _DTYPE_NAMES.get(getattr(model, "dtype", None) or next(model.parameters()).dtype)
    if dtype is None:
        state.reason = f"the model's dtype {model.dtype} is not one of fp32, fp16, bf16"
        return
    state.specs, state.declined = layer_specs(config, dtype)
    main = list(state.specs)
    text_keys = set(state.specs) | set(state.declined)
    own_specs, own_declined, state._module_keys = module_specs(rotary_modules, config, state.specs, dtype)
    state.specs.update(own_specs)
    state.declined.update(own_declined)
    if state.specs and not rotary_modules:
        state.reason = "the model has no *RotaryEmbedding module"
    elif state.specs and not functions:
        state.reason = ("no modeling module of the model defines apply_rotary_pos_emb(q, k, cos, sin, ...), "
                        "apply_rotary_pos_emb(x, cos, sin, ...) or apply_rotary_pos_emb_interleave")
    if state.reason is not None:
        return
    cast = next((cast for cast in map(cast_inv_freq, rotary_modules) if cast is not None), None)
    if cast is not None and state.specs:
        state.note = (f"the rotary module's inv_freq is {cast} (model.to(dtype) rounds it); ropejit runs the "
                      "config's float32 frequencies, as a model loaded with from_pretrained(dtype=...) has them")
    for key in list(state.specs):
        serving = [m for m in rotary_modules if _serves(state, m, key, main)]
        candidates, refused = mrope_candidates(state.specs[key], serving)
        if not verify and len(candidates) > 1 and not is_mrope(state.specs[key]):
            # the rotary module's default sections are used only where the probe confirms them
            candidates, refused = candidates[-1:], ["verify=False: the rotary module's mrope_section is not probed"]
        mismatches = []
        for spec in candidates:
            found = _probe_functions(state, key, spec, serving if verify else [], config, functions)
            if isinstance(found, list):
                mismatches += [f"{_form(spec)}: {m}" if len(candidates) > 1 else m for m in found]
                continue
            if not is_mrope(spec) and (refused or len(candidates) > 1):
                state.text_positions_only[key] = "; ".join(refused + mismatches)
            break
        else:
            state.declined[key] = "; ".join(refused + mismatches)
            del state.specs[key]
    if hf_angles:  # layer types ropejit's own angles cannot serve; multimodal rows probe at first need
        serving = {key: [m for m in rotary_modules if (key in state._module_keys[id(m)].values()
                                                       if id(m) in state._module_keys else key in text_keys)]
                   for key in set(state.declined) | set(state.specs)}
        state._route_sources = (serving, config, functions)
        for key in list(state.declined):
            _plan_cos_sin(state, key, serving[key], config, functions)
        for key in list(state.text_positions_only):  # known now: their multimodal rows need the route
            for module_name, name, _ in functions:
                _route_for(state, f"{module_name}.{name}", key, "position rows that differ, which no mrope spec "
                           f"follows: {state.text_positions_only[key]}")
            if key in state.hf_angles:
                del state.text_positions_only[key]
    if not state.specs and not state.hf_angles:
        state.reason = decline_reason(state.declined)


def _plan_cos_sin(state: RopePatch, key: str, rotary_modules: List[torch.nn.Module], config: Any,
                  functions: List[Tuple[str, str, str]]) -> None:
    """The cos/sin route for layer type `key`: for each HF apply function, the route on which
    ropejit's kernel gives HF's result from the rotary modules' own cos and sin (every module
    serving the key agreeing). A declined key moves to ``hf_angles`` where one does; a key with a
    spec keeps it (the route serves only the calls the spec cannot: :func:`_route_for`)."""
    if not rotary_modules or not functions:
        return
    misses: List[str] = []
    for module_name, name, form in functions:
        function = f"{module_name}.{name}"
        found, missed = agreed_route(_original(module_name, name), function, form, rotary_modules, key, config)
        misses += missed
        if found is not None:
            state._routes[(function, key)] = found
            if key not in state.functions.setdefault(function, []):
                state.functions[function].append(key)
    state._probed.update((f"{m}.{n}", key) for m, n, _ in functions)
    served = any(function_key == key for _, function_key in state._routes)
    if key not in state.declined:  # a layer type with a spec: the route serves the calls it cannot
        return
    if served:
        state.hf_angles[key] = state.declined.pop(key)
    elif misses:
        state.declined[key] += "; " + "; ".join(dict.fromkeys(misses))


def _serves(state: RopePatch, rotary: torch.nn.Module, key: str, main: List[str]) -> bool:
    """Whether layers of spec key `key` get their cos from `rotary`: a module of the text config
    serves its keys, one with a rope block of its own the keys it maps to."""
    if id(rotary) not in state._module_keys:
        return key in main
    return key in state._module_keys[id(rotary)].values()


def _probe_functions(state: RopePatch, key: str, spec: Spec, rotary_modules: List[torch.nn.Module], config: Any,
                     functions: List[Tuple[str, str, str]]) -> Optional[List[str]]:
    """Makes `spec` layer type `key`'s and records the functions and head widths where ropejit
    agrees with HF (returns None); where it agrees with none, returns the disagreements."""
    state.specs[key] = spec
    for cached in [cached for cached in state._spec_json if cached[0] == key]:
        del state._spec_json[cached]
    mismatches = []
    for module_name, name, form in functions:
        function = f"{module_name}.{name}"
        for width in widths(spec):
            mismatch = _probe_all(state, key, width, rotary_modules, config, _original(module_name, name), form)
            if mismatch is None:
                state._widths.setdefault((function, key), []).append(width)
                if key not in state.functions.setdefault(function, []):
                    state.functions[function].append(key)
            else:
                mismatches.append(mismatch)
    if any(key in keys for keys in state.functions.values()):
        return None
    return mismatches


def _form(spec: Spec) -> str:
    """The position form of a spec, for messages."""
    if not is_mrope(spec):
        return "one position stream"
    return f"mrope_section {spec.io['mrope_section']}{' interleaved' if spec.io['mrope_interleaved'] else ''}"


def _probe_all(state: RopePatch, key: str, width: int, rotary_modules: List[torch.nn.Module], config: Any,
               function: Callable, form: str) -> Optional[str]:
    """The first disagreement of ropejit with `function` over the rotary modules, or None."""
    spec = state.specs[key]
    for rotary in rotary_modules:
        # the layer key the module's own config has for this spec key (the key itself for the text config's)
        layer = next((k for k, v in state._module_keys.get(id(rotary), {}).items() if v == key), key)
        try:
            mismatch = probe(spec, state.spec_json(torch.float32, key, width=width) or "", rotary, layer,
                             getattr(rotary, "config", config), function, form, width)
        except (_ropejit.Error, ValueError, NotImplementedError, RuntimeError, TypeError) as e:
            mismatch = (f"the probe of {function.__module__}.{function.__name__} on heads of {width} failed: "
                        f"{type(e).__name__}: {e}")
        if mismatch is not None:
            return mismatch
    return None


def patch(model: torch.nn.Module, *, verify: bool = True, strict: bool = False, hf_angles: bool = True) -> RopePatch:
    """Runs the model's RoPE through ropejit; returns the patch state (also ``model._ropejit_patch``).

    Hooks every text ``*RotaryEmbedding`` submodule so its forward remembers the ``position_ids``
    and the layer type (its ``layer_type`` argument, for per-layer-type models) of each cos it
    returns, and replaces HF's apply functions (``apply_rotary_pos_emb`` in its q-and-k and its
    one-tensor form, ``apply_rotary_pos_emb_interleave``) in the modeling modules of the model's
    classes with ropejit's (one replacement per function, shared by every patched model; a cos
    from an unpatched model finds no positions and runs HF's function). The spec of each layer
    type is ``Spec.from_hf(model.config, dtype=<model dtype>, layer_type=...)`` with separate
    outputs and without qk_norm (HF normalizes q and k before the call). With `verify`, ropejit
    is compared with each HF function on a few positions of each layer type first, and runs for
    a (function, layer type) only where they agree; without it, for all of them.

    A model cast with ``model.to(torch.bfloat16)`` has bf16-rounded ``inv_freq`` buffers; ropejit
    then runs the config's float32 frequencies (what ``from_pretrained(dtype=...)`` keeps), and
    ``state.note`` and a RuntimeWarning say so once.

    A layer type whose config ropejit cannot express (a rope_type it does not know; ``dynamic`` /
    ``longrope`` rope, whose HF frequencies follow the sequence length) takes the cos/sin route
    with `hf_angles` (the default): HF's rotary module computes cos and sin as always and ropejit's
    kernel rotates q and k from them (``io.angles: cos_sin_cache``, each token its own row; a probe
    on the module's own cos and sin finds the pairing that gives HF's result, per apply function);
    ``state.hf_angles`` names those layer types and why ropejit's own angles could not serve.

    HF's original function keeps running where ropejit cannot do the same: for a layer type that
    neither route serves (``state.declined`` says why per layer type; ``state.reason`` when that
    is every layer), for a cos whose positions are unknown, or where the shapes and dtype do not
    fit (``state.fallback_reasons``). A RuntimeWarning names the layer types HF keeps; with
    `strict` a ``ropejit.Error`` is raised instead and nothing is patched.

    Vision and audio towers (Qwen2-VL's vision transformer, Pixtral, Kimi's MoonViT, ...) are
    patched too, each on the route ``state.towers`` records: ropejit's ``Spec.from_hf(config,
    tower=...)`` from the integer positions its rotary module gets, HF's cos and sin through the
    kernel, or HF's function (a tower ropejit refuses; `strict` raises naming it). See
    ``ropejit._patch_vision`` and docs/vision-towers.md.
    """
    if getattr(model, _ATTRIBUTE, None) is not None:
        return getattr(model, _ATTRIBUTE)
    state = RopePatch(spec=None)
    # the towers first: the text patch's replacement of a function both use then wraps the towers'
    towers = patch_towers(model, state, _text_config(model), verify, hf_angles)
    rotary_modules = [m for m in text_rotary_modules(model, _text_config(model)) if not any(m is t for t in towers)]
    functions = _hf_functions(model)
    _plan(model, state, rotary_modules, functions, verify, hf_angles)
    name = type(model).__name__
    towers_kept = {key: t.why for key, t in state.towers.items() if t.route == "hf"}
    if strict and towers_kept:
        unpatch_towers(state)
        for hook in state._hooks:
            hook.remove()
        raise _ropejit.Error(f"ropejit.transformers.patch: towers: {decline_reason(towers_kept)}")
    if towers_kept:
        warnings.warn(f"ropejit: {name} keeps HF's RoPE for towers {decline_reason(towers_kept)}", RuntimeWarning, 2)
    if state.reason is not None or (strict and state.declined):
        state.specs, state.functions = {}, {}
        if not rotary_modules and state.towers:  # a tower-only model: nothing of the text to say
            state.reason = None
            setattr(model, _ATTRIBUTE, state)
            return state
        if strict:
            unpatch_towers(state)
            for hook in state._hooks:
                hook.remove()
            raise _ropejit.Error(f"ropejit.transformers.patch: {state.reason or decline_reason(state.declined)}")
        warnings.warn(f"ropejit: {name} keeps HF's RoPE: {state.reason}", RuntimeWarning, 2)
        setattr(model, _ATTRIBUTE, state)
        return state
    if state.declined:
        warnings.warn(f"ropejit: {name} keeps HF's RoPE for {decline_reason(state.declined)}", RuntimeWarning, 2)
    if state.note:
        warnings.warn(f"ropejit: {name}: {state.note}", RuntimeWarning, 2)
    if state.text_positions_only:  # no cos/sin route either (hf_angles=False, or none matched)
        warnings.warn(f"ropejit: {name} keeps HF's RoPE for multimodal positions (rows that differ) of "
                      f"{decline_reason(state.text_positions_only)}", RuntimeWarning, 2)
    state.spec = state.specs.get(ALL)
    keys = list(state.specs) + list(state.declined) + list(state.hf_angles)
    typed = {id(m) for m in rotary_modules if takes_layer_type(m)}  # forward(x, position_ids, layer_type)

    def remember_positions(module: torch.nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any],
                           output: Any) -> None:
        position_ids = kwargs.get("position_ids", args[1] if len(args) > 1 else None)
        with_type = id(module) in typed
        layer_type = kwargs.get("layer_type", args[2] if with_type and len(args) > 2 else None)
        named = ("position_ids", "layer_type") if with_type else ("position_ids",)
        extra = [a for a in args[3 if with_type else 2:] if a is not None] + [
            v for n, v in kwargs.items() if n not in named and v is not None]
        own = state._module_keys.get(id(module), {})
        layer = layer_key(layer_type, list(own) or keys)
        layer = own.get(layer, layer) if layer is not None else None
        # An argument the spec knows nothing of may change HF's cos: leave those calls to HF, or to
        # the cos/sin route, which reads HF's cos itself (no positions remembered: no spec runs them).
        if extra:
            if layer not in state.hf_angles:
                return
            position_ids = None
        if (position_ids is None or isinstance(position_ids, torch.Tensor)) and layer and isinstance(output, tuple) \
                and output:
            spec = state.specs.get(layer)
            if spec is not None and not is_mrope(spec):  # text tokens of a multimodal model: equal rows
                position_ids = one_stream(position_ids)
            _remember(output[0], position_ids, state, layer)

    state._hooks += [m.register_forward_hook(remember_positions, with_kwargs=True) for m in rotary_modules]
    for module_name, function_name, form in functions:
        if f"{module_name}.{function_name}" not in state.functions:
            continue
        acquire(_replaced, module_name, function_name,
                lambda original, module_name=module_name, form=form: _replacement(original, module_name, form))
        state._replaced.append((module_name, function_name))
    state.modules = sorted({module_name for module_name, _ in state._replaced})
    setattr(model, _ATTRIBUTE, state)
    return state


def unpatch(model: torch.nn.Module) -> None:
    """Undoes :func:`patch`: removes the hooks, and restores HF's apply functions in each module
    once no patched model uses them. Does nothing for a model that is not patched."""
    state: Optional[RopePatch] = getattr(model, _ATTRIBUTE, None)
    if state is None:
        return
    for hook in state._hooks:
        hook.remove()
    for key in state._replaced:
        release(_replaced, key)
    for cos_id in [cos_id for cos_id, entry in _positions_by_cos.items() if entry[2] is state]:
        del _positions_by_cos[cos_id]
    unpatch_towers(state)
    state._hooks, state._replaced, state.modules = [], [], []
    delattr(model, _ATTRIBUTE)
