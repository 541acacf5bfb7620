"""The per-layer-type side of ``ropejit.transformers.patch``: the spec of each rope layer type of a
model, its text rotary modules, the rotation in HF's three apply forms, and the probe that
compares ropejit with HF before patching.

A model whose ``rope_parameters`` are keyed by layer type (Gemma 3, Gemma 4, OLMo 3, ...) calls
its one rotary module once per layer type, ``rotary_emb(x, position_ids, layer_type)``, and hands
each layer the cos/sin of its type; so the layer type of a call is known where cos is made, and
the patch keys the spec by it. A model with one rope block has the single key :data:`ALL`.

Multimodal models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, PaddleOCR-VL, GLM-OCR, ...) give their
rotary module ``position_ids`` of shape ``[3, B, S]`` (temporal, height, width) and mix the three
streams into cos per frequency pair (``mrope_section``, contiguous or Qwen3-VL's interleaved
form); their apply function is the usual one. The spec of such a layer type has ropejit's mrope
positions, with the sections of the config or, where the config has none, the rotary module's
default; the probe rotates three different streams and picks the form (contiguous or
interleaved) HF computes. Where no mrope spec agrees (NeoMME's two row/column streams), the
one-stream spec runs for text positions (all rows equal) and HF keeps the others.

``model.to(torch.bfloat16)`` also casts the rotary module's ``inv_freq`` buffers, so HF's angles
are then taken from bf16-rounded frequencies. ``from_pretrained(dtype=torch.bfloat16)`` keeps
them float32 (transformers 5.24, modeling_utils.py): the model is built under
``local_torch_dtype(dtype)``, but every rope init function computes ``inv_freq`` with an
explicit ``dtype=torch.float``; the buffers are non-persistent, so no checkpoint value replaces
them, and ``_init_weights`` refills them in place (``init.copy_``) from the same fp32 function.
``_keep_in_fp32_modules`` plays no part (it only applies to fp16 loads). The patch therefore runs
the config's fp32 frequencies for a cast model, and probes against a rotary module rebuilt from
the config: the model then computes what the from_pretrained one does.
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import _ropejit
from . import torch as ropejit_torch
from ._spec import Spec, _text

ALL = "all"  # the key of the one spec of a model whose rope block serves every layer
# Rope types whose HF frequencies follow the sequence length (and, for dynamic, the longest seen).
SEQUENCE_DEPENDENT = ("dynamic", "longrope")
# Rotary classes of other towers (their cos is never the text layers'): not hooked.
NOT_TEXT = ("Vision", "Audio", "DiT", "Patch", "SaProt")


# ------------------------------------------------------------------ HF's apply functions

# The apply functions a modeling module may define, by name: parameters they may have, the ones they need.
_FORMS = {
    "apply_rotary_pos_emb": [("qk", {"q", "k", "cos", "sin"}, {"position_ids", "unsqueeze_dim"}),
                             ("one", {"x", "cos", "sin"}, {"unsqueeze_dim"})],
    # DeepSeek-style MLA: q and k arrive with interleaved pairs and leave in rotate_half order.
    "apply_rotary_pos_emb_interleave": [("interleave", {"q", "k", "cos", "sin"}, {"position_ids", "unsqueeze_dim"})],
}
FUNCTION_NAMES = tuple(_FORMS)


def apply_form(name: str, function: Any) -> Optional[str]:
    """The form of HF apply function `name`: "qk" ``(q, k, cos, sin, unsqueeze_dim)``, "one"
    ``(x, cos, sin, unsqueeze_dim)`` (Gemma 3n, Gemma 4: q and k in two calls), "interleave"
    (``apply_rotary_pos_emb_interleave``); None for a signature ropejit does not stand in for."""
    try:
        parameters = set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None
    for form, needed, optional in _FORMS.get(name, []):
        if needed <= parameters <= needed | optional:
            return form
    return None


# ------------------------------------------------------------------ the rotation

def rotate(q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor, spec_json: str,
           unsqueeze_dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """q and k rotated by the op; HF's [B, H, S, D] (unsqueeze_dim 1) or [B, S, H, D] (2)."""
    if unsqueeze_dim == 1:  # ropejit wants tokens first
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    q_out, k_out = ropejit_torch.apply_rope(q, k, position_ids, spec=spec_json)
    if unsqueeze_dim == 1:
        return q_out.transpose(1, 2), k_out.transpose(1, 2)
    return q_out, k_out


def rotate_form(form: str, q: torch.Tensor, k: Optional[torch.Tensor], position_ids: torch.Tensor,
                spec_json: str, unsqueeze_dim: int) -> Any:
    """What HF's apply function of `form` returns, computed by the op. "one": `spec_json` has
    q's heads and one kv head, fed a one-head view of q whose output is dropped. "interleave":
    HF returns each head with the pairs' first elements, then their second ones."""
    if form == "one":
        return rotate(q, q.narrow(1 if unsqueeze_dim == 1 else 2, 0, 1), position_ids, spec_json, unsqueeze_dim)[0]
    assert k is not None
    q_out, k_out = rotate(q, k, position_ids, spec_json, unsqueeze_dim)
    if form == "interleave":
        return tuple(t.unflatten(-1, (t.shape[-1] // 2, 2)).transpose(-1, -2).flatten(-2) for t in (q_out, k_out))
    return q_out, k_out


def heads_of(t: torch.Tensor, unsqueeze_dim: int) -> int:
    """The head count of an HF-shaped q or k."""
    return t.shape[1 if unsqueeze_dim == 1 else 2]


def widths(spec: Spec) -> Tuple[int, ...]:
    """The head widths HF's apply function may get for a spec: the head, and for partial rotary
    the rotated slice alone (Phi, StableLM, Persimmon split it off before the call)."""
    return (spec.head_dim,) + ((spec.rotary_dim,) if spec.rotary_dim < spec.head_dim else ())


def misfit(q: Any, k: Any, position_ids: Any, spec: Spec, unsqueeze_dim: int,
           allowed: Optional[Sequence[int]] = None) -> Optional[str]:
    """Why q, k and position_ids are not HF-shaped for the spec (HF's function runs then), or None.
    k None: the one-tensor form. Head counts are free (the rotation is the same for every head;
    Laguna's and Gemma 4's differ per layer, MLA's rope key has one); the last dim must be one of
    `allowed` (default: the spec's head_dim)."""
    tensors = {"q": q, "position_ids": position_ids} if k is None else {"q": q, "k": k, "position_ids": position_ids}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            return f"{name} is a {type(t).__name__}, not a tensor"
    if unsqueeze_dim not in (1, 2):
        return f"unsqueeze_dim {unsqueeze_dim} (ropejit takes 1 or 2)"
    if position_ids.dtype not in (torch.int32, torch.int64):
        return f"position_ids of {position_ids.dtype} (ropejit takes int32 or int64)"
    mrope = is_mrope(spec)
    if position_ids.dim() == 3 and not (mrope and position_ids.shape[0] == 3):
        return (f"position_ids of shape {list(position_ids.shape)} with rows that differ (multimodal positions): "
                + ("ropejit's mrope takes 3 streams" if mrope else "the spec of this layer type has one stream"))
    if position_ids.dim() not in (2, 3):
        return f"position_ids of shape {list(position_ids.shape)}: ropejit takes [B, S] (or [3, B, S] for mrope)"
    tokens_axis = 2 if unsqueeze_dim == 1 else 1
    why = qk_misfit(q, k, unsqueeze_dim, tuple(allowed or (spec.head_dim,)))
    if why is not None:
        return why
    if q.device.type not in ("cpu", "cuda") or position_ids.device != q.device:
        return f"q on {q.device}, position_ids on {position_ids.device}: ropejit runs on one cpu or cuda device"
    if position_ids.shape[-1] != q.shape[tokens_axis] or position_ids.shape[-2] not in (1, q.shape[0]):
        return f"position_ids of shape {list(position_ids.shape)} for q of shape {list(q.shape)}"
    return None


def qk_misfit(q: torch.Tensor, k: Optional[torch.Tensor], unsqueeze_dim: int, allowed: Sequence[int]) -> Optional[str]:
    """Why HF-shaped q and k (None: the one-tensor form) do not pair as one rotation's heads of a
    width in `allowed` (rank 4, same batch, tokens, width and dtype, nothing empty), or None."""
    tokens_axis = 2 if unsqueeze_dim == 1 else 1
    for name, t in (("q", q), ("k", k)):
        if t is None:
            continue
        if t.dim() != 4 or t.shape[-1] not in allowed:
            return f"{name} of shape {list(t.shape)}: ropejit rotates heads of {' or '.join(map(str, allowed))}"
        if (t.shape[0] != q.shape[0] or t.shape[tokens_axis] != q.shape[tokens_axis] or t.shape[-1] != q.shape[-1]
                or t.dtype != q.dtype or min(t.shape) == 0):
            return f"{name} of shape {list(t.shape)} and {t.dtype} does not pair with q {list(q.shape)} {q.dtype}"
    return None


# ------------------------------------------------------------------ multimodal positions

def is_mrope(spec: Spec) -> bool:
    """Whether the spec takes three position streams (temporal, height, width)."""
    return spec.io["positions"] == "mrope"


def kernel_positions(position_ids: torch.Tensor, spec: Spec) -> torch.Tensor:
    """HF's position_ids as the op takes them for the spec: [B, S] repeated as three equal streams
    for an mrope spec (text tokens: HF's rotary module expands them so)."""
    if is_mrope(spec) and position_ids.dim() == 2:
        return position_ids.expand(3, *position_ids.shape)
    return position_ids


def one_stream(position_ids: Any) -> Any:
    """[n, B, S] position_ids whose rows are all equal (text tokens) as [B, S]; others unchanged.
    The comparison reads the tensor (a device sync on CUDA): the hook calls it once per rotary call,
    only for layer types whose spec has one stream."""
    if isinstance(position_ids, torch.Tensor) and position_ids.dim() == 3 and position_ids.shape[0] > 1 \
            and bool((position_ids == position_ids[:1]).all()):
        return position_ids[0]
    return position_ids


def mrope_candidates(spec: Spec, rotary_modules: Sequence[torch.nn.Module]) -> Tuple[List[Spec], List[str]]:
    """The specs to probe for a layer type, in order, and why a multimodal form could not be built:
    an mrope spec (the config's form, then the other one), or for a one-stream spec whose rotary
    module mixes streams by ``mrope_section`` (the config has no sections: the module's default),
    that section contiguous and interleaved; the spec itself last."""
    forms: List[Tuple[List[int], bool]] = []
    if is_mrope(spec):
        section, interleaved = list(spec.io["mrope_section"]), bool(spec.io["mrope_interleaved"])
        forms = [(section, interleaved), (section, not interleaved)]
    else:
        sections = [getattr(m, "mrope_section", None) for m in rotary_modules]
        section = next((list(value) for value in sections if _is_section(value)), None)
        forms = [(section, False), (section, True)] if section else []
    candidates, refused = [], []
    for section, interleaved in forms:
        if interleaved:
            section = _interleaved_section(section, spec.rotary_dim // 2)
        io = dict(spec.io, positions="mrope", mrope_section=section, mrope_interleaved=interleaved)
        try:
            candidates.append(Spec.from_json(dict(spec.to_dict(), io=io)))
        except (_ropejit.Error, ValueError) as e:
            refused.append(f"mrope_section {section}{' interleaved' if interleaved else ''}: {_first_line(e)}")
    if not is_mrope(spec):
        candidates.append(spec)
    else:
        candidates.append(Spec.from_json(dict(spec.to_dict(), io={"output": spec.io["output"]})))
    return candidates, refused


def _interleaved_section(section: Sequence[int], pairs: int) -> List[int]:
    """The sections HF's interleaved recomposition (Qwen3-VL's) gives on `pairs` frequency pairs:
    height takes pairs 1, 4, ... below 3h, width 2, 5, ... below 3w, both cut at the last pair,
    temporal all the others (so a section that does not sum to the pairs still has one meaning)."""
    height = len(range(1, min(3 * section[1], pairs), 3))
    width = len(range(2, min(3 * section[2], pairs), 3))
    return [pairs - height - width, height, width]


def _is_section(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 3 and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


# ------------------------------------------------------------------ specs per layer type

def layer_specs(config: Any, dtype: str) -> Tuple[Dict[str, Spec], Dict[str, str]]:
    """The spec ropejit runs per layer key, and the keys HF keeps with why. The keys are the layer
    types of a per-layer-type config (only those some layer uses), else :data:`ALL`."""
    try:
        entries = _ropejit.hf_layer_rope_map(_text(config.to_dict(), "HF config"))
    except (_ropejit.Error, ValueError, TypeError) as e:
        entries = None
        if "num_hidden_layers" in str(e) and not getattr(config, "layer_types", None):
            entries = [""]  # no layer count the map reads (Moonshine's decoder_num_hidden_layers): one block
        if entries is None:
            return {}, {ALL: f"ropejit cannot express the config: {e}"}
    keys = sorted({entry for entry in entries if entry is not None})
    if not keys:
        return {}, {ALL: "no layer of the config uses RoPE"}
    specs: Dict[str, Spec] = {}
    declined: Dict[str, str] = {}
    for entry in keys:
        key = entry or ALL
        try:
            spec = _from_hf(config, dtype, entry)
        except (_ropejit.Error, ValueError, NotImplementedError) as e:
            declined[key] = f"ropejit cannot express the config: {e}"
            continue
        if spec.rope_type in SEQUENCE_DEPENDENT:
            declined[key] = f"rope_type {spec.rope_type}: HF's frequencies follow the sequence length"
        else:  # HF normalizes q and k before apply_rotary_pos_emb: the spec only rotates
            spec_dict = {name: value for name, value in spec.to_dict().items() if name != "qk_norm"}
            io = {name: spec.io[name] for name in ("positions", "mrope_section", "mrope_interleaved")} \
                if is_mrope(spec) else {}
            specs[key] = Spec.from_json(dict(spec_dict, io=dict(io, output="separate")))
    return specs, declined


_MROPE_KEYS = ("mrope_section", "mrope_interleaved")


def _from_hf(config: Any, dtype: str, layer_type: Optional[str]) -> Spec:
    """Spec.from_hf for a layer type; where the importer refuses the config's mrope sections
    (GLM-OCR and PaddleOCR-VL are not in its multimodal list, Qwen3.5's interleaved [11, 11, 10]
    fails its section rule) the config without them: mrope_candidates adds the rotary module's
    sections back and the probe checks them against HF."""
    options = {"layer_type": layer_type} if layer_type else {}
    try:
        return Spec.from_hf(config, dtype=dtype, **options)
    except (_ropejit.Error, ValueError) as e:
        data = config.to_dict() if hasattr(config, "to_dict") else dict(config)
        stripped = _without_mrope(data)
        if "mrope_section" not in str(e) or stripped == data:
            raise
        return Spec.from_hf(stripped, dtype=dtype, **options)


def _without_mrope(data: Dict[str, Any]) -> Dict[str, Any]:
    """A config dict with the mrope keys taken out of its rope blocks (one, or one per layer type)."""
    out = dict(data)
    for name in ("rope_parameters", "rope_scaling"):
        block = out.get(name)
        if isinstance(block, dict):
            block = {k: v for k, v in block.items() if k not in _MROPE_KEYS}
            out[name] = {k: ({n: x for n, x in v.items() if n not in _MROPE_KEYS} if isinstance(v, dict) else v)
                         for k, v in block.items()}
    return out


def decline_reason(declined: Dict[str, str]) -> str:
    """One line for the keys HF keeps: the reason itself for a one-block model."""
    if list(declined) == [ALL]:
        return declined[ALL]
    return "; ".join(f"{key}: {why}" for key, why in sorted(declined.items()))


# ------------------------------------------------------------------ rotary modules

def text_rotary_modules(model: torch.nn.Module, text_config: Any = None) -> List[torch.nn.Module]:
    """The model's ``*RotaryEmbedding`` modules of its text layers: those built from `text_config`
    or a copy of it (GraniteSWA's one per layer_rope_theta) where some are (an audio encoder's
    rotary, GLM-ASR's, has a config of another class), else all but the ones named for vision or
    audio towers."""
    from ._patch_vision import tower_rotary_names  # a vision tower's class, whatever its name (MLCD's)

    towers = tower_rotary_names()
    named = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")
             and not any(word in type(m).__name__ for word in NOT_TEXT) and type(m).__name__ not in towers]
    own = [m for m in named if text_config is not None and type(getattr(m, "config", None)) is type(text_config)]
    return own or named


def module_specs(rotary_modules: Sequence[torch.nn.Module], text_config: Any, specs: Dict[str, Spec], dtype: str
                 ) -> Tuple[Dict[str, Spec], Dict[str, str], Dict[int, Dict[str, str]]]:
    """The specs of rotary modules built from a copy of the text config with a rope block of
    their own (GraniteSWA's per-layer theta): ``(new specs, new declined, {id(module): {layer
    key: spec key}})``. A module whose spec for a key is the text config's shares its key; another
    gets a key of its own, named for what differs (``"all (rope_theta=1000000.0)"``)."""
    new_specs: Dict[str, Spec] = {}
    new_declined: Dict[str, str] = {}
    keys: Dict[int, Dict[str, str]] = {}
    for rotary in rotary_modules:
        config = getattr(rotary, "config", None)
        if config is None or config is text_config:
            continue
        own, declined = layer_specs(config, dtype)
        mapping = keys.setdefault(id(rotary), {})
        for key, spec in own.items():
            if specs.get(key) == spec:
                mapping[key] = key
                continue
            name = _key_name(key, spec, specs.get(key))
            mapping[key] = name
            new_specs.setdefault(name, spec)
        for key, why in declined.items():  # a key the main spec runs must not take this module's calls
            mapping[key] = f"{key} ({type(rotary).__name__} {len(keys)})" if key in specs else key
            new_declined.setdefault(mapping[key], why)
    return new_specs, new_declined, keys


def _key_name(key: str, spec: Spec, main: Optional[Spec]) -> str:
    """The key of a module's own spec: the layer key and the rope fields that differ from the main spec."""
    rope, main_rope = spec.to_dict()["rope"], (main.to_dict()["rope"] if main is not None else {})
    differ = [f"{name}={value}" for name, value in rope.items() if main_rope.get(name) != value]
    return f"{key} ({', '.join(differ) or spec.hash[:8]})"


def takes_layer_type(rotary: torch.nn.Module) -> bool:
    """Whether the rotary module's forward is per layer type: ``forward(x, position_ids, layer_type)``."""
    try:
        return "layer_type" in inspect.signature(rotary.forward).parameters
    except (TypeError, ValueError):
        return False


def layer_key(layer_type: Any, keys: Sequence[str]) -> Optional[str]:
    """The spec key of a rotary call made for `layer_type` (None: not one ropejit knows)."""
    if isinstance(layer_type, str) and layer_type in keys:
        return layer_type
    return ALL if ALL in keys else None


def cast_inv_freq(rotary: torch.nn.Module) -> Optional[torch.dtype]:
    """The dtype of the rotary module's inv_freq buffers when not float32 (``model.to(dtype)``)."""
    for name, buffer in rotary.named_buffers(recurse=False):
        if name.endswith("inv_freq") and buffer.dtype != torch.float32:
            return buffer.dtype
    return None


def device_of(module: torch.nn.Module) -> torch.device:
    """Where the module's buffers are (the CPU when it has none)."""
    buffer = next(iter(module.buffers()), None)
    return buffer.device if buffer is not None else torch.device("cpu")


def reference_rotary(rotary: torch.nn.Module) -> torch.nn.Module:
    """The rotary module whose cos/sin ropejit must give: `rotary` itself, or a copy rebuilt from
    its config (fp32 frequencies, as from_pretrained loads them) when its inv_freq was cast."""
    if cast_inv_freq(rotary) is None:
        return rotary
    try:
        return type(rotary)(config=rotary.config).to(device_of(rotary))
    except Exception as e:  # noqa: BLE001 - HF's constructor may raise anything
        raise RuntimeError(f"{type(rotary).__name__} could not be rebuilt from its config to get the "
                           f"fp32 frequencies: {type(e).__name__}: {e}") from None


# ------------------------------------------------------------------ the probe

# The probe's tolerance grows with the angle: an inv_freq an ulp apart (ropejit rounds the power
# correctly, torch may not) turns the angle p * inv_freq by up to 2^-23 of it; 8 * 2^-24 allowed.
_ANGLE_ULPS = 8 * 2.0 ** -24


def rotary_call(rotary: torch.nn.Module, key: str, config: Any) -> Any:
    """The arguments after ``(x, position_ids)`` that make the rotary module's cos for layer key
    `key` (its layer type, for a per-layer-type module), or why there are none (a str)."""
    if takes_layer_type(rotary):
        types = [t for t in (getattr(config, "layer_types", None) or []) if isinstance(t, str)]
        return (key if key != ALL else (types[0] if types else None),)
    if key != ALL:
        return f"{type(rotary).__name__} takes no layer_type, so the layer type of its cos is unknown"
    return ()


def probe(spec: Spec, spec_json: str, rotary: torch.nn.Module, key: str, config: Any, function: Any,
          form: str, width: int) -> Optional[str]:
    """None when ropejit (`spec_json`: heads of `width`, the spec's head counts) gives what HF's
    `function` gives for layer `key` on a few positions (in fp32: the math is the same in every
    dtype, bf16 rounding would hide small differences); else what differs. The tolerance is 1e-4
    plus what float32 angles allow at each position."""
    call = rotary_call(rotary, key, config)
    if isinstance(call, str):
        return call
    device = device_of(rotary)
    last = max(spec.max_position_embeddings - 1, 1)
    positions = [0, 1, 2, 3, 17, 100 % last, last // 2, last]
    position_ids = torch.tensor([positions], device=device)
    if is_mrope(spec):  # three different streams, as an image's grid gives, so that the sections show
        position_ids = torch.stack((position_ids, position_ids // 2 + 1, position_ids // 3 + 2))
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, spec.num_q_heads, len(positions), width, generator=generator).to(device)
    k = torch.randn(1, spec.num_kv_heads, len(positions), width, generator=generator).to(device)
    largest = max(spec.freqs()["inv_freq"] or [1.0])
    tolerance = 1e-4 + position_ids.reshape(-1, len(positions)).amax(0).double()[:, None] * largest * _ANGLE_ULPS
    with torch.no_grad():
        cos, sin = reference_rotary(rotary)(torch.zeros(1, 1, 1, device=device), position_ids, *call)
        got = rotate_form("interleave" if form == "interleave" else "qk", q, k, position_ids, spec_json, 1)
        want = (function(q, cos, sin), function(k, cos, sin)) if form == "one" else function(q, k, cos, sin)
        for name, g, w in zip(("q", "k"), got, want):
            if g.shape != w.shape:
                return f"ropejit's {name} has shape {list(g.shape)}, {_name(function)}'s {list(w.shape)}"
            # error per position relative to the largest |value| (at least 1) of that position's head
            error = (g.double() - w.double()).abs() / w.double().abs().amax(-1, keepdim=True).clamp(min=1.0)
            excess = error.amax(dim=(0, 1, 3)) / tolerance[:, 0]
            if not excess.max().item() <= 1.0:
                where = int(excess.argmax())
                return (f"ropejit's {name} differs from {_name(function)} by {error[:, :, where].max().item():.3g} "
                        f"at position {positions[where]} (tolerance {tolerance[where, 0].item():.3g}) on a probe")
    return None


def _name(function: Any) -> str:
    return f"{function.__module__}.{function.__name__}"
