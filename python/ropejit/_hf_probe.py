"""Learning a model family's RoPE from transformers' own code (used by ``Spec.from_hf`` for a
model_type ropejit's family table does not know, and by the zoo test).

The family's text rotary module is built from the config and asked for cos/sin; its apply
function rotates basis vectors, which shows which dims pair with which (the layout and the
rotary dim), the angle of each pair (inv_freq) and the scale of cos/sin (attention factor).
Nothing is guessed: a family whose rotation is no ropejit layout is reported as such.
"""
from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

# Rotary classes of other towers: never the text model's.
_NOT_TEXT = ("Vision", "Audio", "DiT", "Encoder", "SaProt", "Patch")
# Names of the functions that apply cos/sin (or a complex freqs_cis) to q and k.
_APPLY_NAMES = ("apply_rotary_pos_emb", "apply_rotary_emb", "apply_rotary_pos_emb_interleave")


class ProbeError(Exception):
    """Why a family's RoPE could not be read from transformers' code."""


@dataclass
class HfRope:
    """What transformers computes for one (config, layer type): enough to build or check a spec."""

    model_type: str
    module: str                      # the modeling module, e.g. transformers.models.llama.modeling_llama
    layer_type: Optional[str]
    head_dim: int
    layout: Optional[str]            # "neox", "interleaved", or None (no ropejit layout)
    rotary_dim: int                  # dims rotated (the leading ones)
    stride: int                      # neox partner distance (rotary_dim / 2 unless proportional)
    inv_freq: np.ndarray             # HF's float32 inv_freq per rotated pair (float64 view)
    attention_factor: float
    rotary: Any = field(repr=False, default=None)
    apply: Optional[Callable] = field(repr=False, default=None)
    complex_freqs: bool = False      # the rotary returns one complex freqs_cis (Llama 4)
    inverse: bool = False            # HF rotates by -angle (nanochat's rotate_half): the spec's inverse
    call_width: int = 0              # dims HF's apply function takes (the leading ones); 0: all


def modeling_module(model_type: str):
    """transformers' modeling module of a model_type, or None."""
    from transformers.models.auto import configuration_auto

    name = configuration_auto.model_type_to_module_name(model_type)
    try:
        return importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    except Exception:  # noqa: BLE001 - a family whose module does not import has nothing to probe
        return None


def text_config(config: Any) -> Any:
    """The decoder text config of a (possibly composite) config object."""
    if hasattr(config, "get_text_config"):
        try:
            return config.get_text_config(decoder=True)
        except TypeError:
            return config.get_text_config()
    return config


def rope_layer_types(config: Any) -> List[Optional[str]]:
    """The layer types with their own rope block ([None] when the block is not per layer type)."""
    block = getattr(config, "rope_parameters", None)
    if isinstance(block, dict) and block and all(isinstance(v, dict) or v is None for v in block.values()):
        types = getattr(config, "layer_types", None) or list(block)
        return sorted({t for t in types if block.get(t) is not None})
    return [None]


def layer_config(config: Any, layer_type: Optional[str]) -> Any:
    """The config holding a layer type's sizes: Gemma 4's per_layer_config of the first layer of
    that type, else the config itself."""
    per_layer = getattr(config, "__dict__", {}).get("per_layer_config") if hasattr(config, "__dict__") else None
    try:
        per_layer = per_layer or getattr(config, "per_layer_config", None)
    except Exception:  # noqa: BLE001 - an attribute HF guards
        per_layer = None
    if layer_type is None or not per_layer:
        return config
    types = list(getattr(config, "layer_types", None) or [])
    return per_layer[types.index(layer_type)] if layer_type in types else config


def rotary_classes(module) -> List[type]:
    """The module's own text rotary-embedding classes."""
    out = []
    for name in dir(module):
        obj = getattr(module, name)
        if (name.endswith("RotaryEmbedding") and inspect.isclass(obj) and obj.__module__ == module.__name__
                and not any(word in name for word in _NOT_TEXT)):
            out.append(obj)
    return out


def _rotaries_built_for(module, config: Any) -> List[str]:
    """The rotary classes the module's models for `config`'s class build (named in the __init__ of
    each class whose config_class it is): Qwen3-Omni's talker text model builds the multimodal
    rotary, its code predictor the one-stream one, both defined in one module."""
    names: List[str] = []
    for obj in vars(module).values():
        if inspect.isclass(obj) and obj.__module__ == module.__name__ and getattr(obj, "config_class", None) is type(config):
            try:
                names += re.findall(r"(\w+RotaryEmbedding)\(", inspect.getsource(obj.__init__))
            except (OSError, TypeError):  # no source: the class order stands
                continue
    return names


def build_rotary(module, config: Any):
    """An instance of the module's text rotary class built from `config`, or ProbeError; where the
    module defines several, the ones its models for `config`'s class build come first."""
    errors = []
    built = _rotaries_built_for(module, config)
    for cls in sorted(rotary_classes(module), key=lambda c: c.__name__ not in built):
        params = inspect.signature(cls.__init__).parameters
        if "config" not in params:
            errors.append(f"{cls.__name__} takes no config")
            continue
        try:
            return cls(config=config)
        except Exception as e:  # noqa: BLE001 - HF raises anything on a config it cannot use
            errors.append(f"{cls.__name__}(config): {type(e).__name__}: {e}")
    raise ProbeError("; ".join(errors) or f"{module.__name__} has no text rotary embedding class")


def apply_function(module, config: Any = None) -> Callable:
    """The function the family's attention applies; DeepSeek-style modules pick the interleave
    variant unless the config's rope_interleave is false, as their MLA attention does (the
    DeepSeek-V3.2 indexer's neox rotation is not the main attention's)."""
    interleave = getattr(module, "apply_rotary_pos_emb_interleave", None)
    if getattr(config, "rope_interleave", True) and callable(interleave):
        return interleave
    for name in _APPLY_NAMES:
        fn = getattr(module, name, None)
        if callable(fn):
            return fn
    raise ProbeError(f"{module.__name__} defines none of {', '.join(_APPLY_NAMES)}")


def cos_sin(rotary, position_ids, layer_type: Optional[str]):
    """HF's rotary output for [B, S] (or [3, B, S]) positions: (cos, sin) or a complex freqs_cis."""
    import torch

    x = torch.zeros(1, 1, 1, dtype=torch.float32)
    with torch.no_grad():
        if layer_type is not None:
            return rotary(x, position_ids, layer_type)
        return rotary(x, position_ids)


def _call(apply: Callable, q, k, out):
    """One call of a family's apply function, q and k [B, S, H, w] tokens-major; the calling
    convention read from its parameter names (q, k, cos, sin / x, cos, sin / tensor, sin, cos /
    xq, xk, freqs_cis)."""
    import torch

    names = list(inspect.signature(apply).parameters)[:4]
    if isinstance(out, torch.Tensor):  # complex freqs_cis (Llama 4): [B, S, H, D] in, one angle per head
        return apply(q, k, out[:, :, None, :] if out.dim() == 3 else out)
    first, second = out
    if names[:3] == ["tensor", "sin", "cos"]:  # GPT-J / CodeGen: [B, S, H, D], rotary returns (sin, cos)
        return apply(q, first, second), apply(k, first, second)
    cos, sin = first, second
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    if names[:3] == ["x", "cos", "sin"]:  # Gemma 3n: one tensor per call
        qo, ko = apply(q, cos, sin), apply(k, cos, sin)
    else:
        qo, ko = apply(q, k, cos, sin)
    return qo.transpose(1, 2), ko.transpose(1, 2)


def _deinterleave(x, width: int):
    """Undoes the neox reordering of DeepSeek's apply_rotary_pos_emb_interleave (out[i] came from
    in[2i], out[i + w/2] from in[2i+1]), so the result is in the input's dim order."""
    import torch

    head, tail = x[..., :width], x[..., width:]
    fixed = torch.empty_like(head)
    fixed[..., 0::2], fixed[..., 1::2] = head[..., : width // 2], head[..., width // 2:]
    return torch.cat((fixed, tail), dim=-1)


def hf_rotate(rope: HfRope, q, k, position_ids):
    """HF's own rotation of q [B, S, Hq, D], k [B, S, Hkv, D] (fp32 torch tensors), tokens-major
    out, in the input's dim order. The dims past the width HF's function takes pass through, as
    the families' attention code does with the slice [..., :rotary_dim]."""
    import torch

    out = cos_sin(rope.rotary, position_ids, rope.layer_type)
    w = rope.call_width or q.shape[-1]
    with torch.no_grad():
        qo, ko = _call(rope.apply, q[..., :w], k[..., :w], out)
        if rope.apply.__name__.endswith("_interleave"):
            qo, ko = _deinterleave(qo, w), _deinterleave(ko, w)
        return torch.cat((qo, q[..., w:]), dim=-1), torch.cat((ko, k[..., w:]), dim=-1)


def _widths(out, head_dim: int) -> List[int]:
    """The widths to try HF's apply function with: the head, cos's width, twice it (GPT-J's sin)."""
    import torch

    if isinstance(out, torch.Tensor):
        return [head_dim]
    width = out[0].shape[-1]
    return list(dict.fromkeys(w for w in (head_dim, width, 2 * width) if 0 < w <= head_dim))


def position_ids_for(config: Any, positions, mrope: Optional[bool] = None):
    """[1, S] positions, or [3, 1, S] for a multimodal (mrope) rotary (`mrope`; None: the config's
    rope block has sections): three different streams (text, height, width) so that the sections show."""
    import torch

    p = torch.as_tensor(positions).reshape(1, -1)
    if not (mrope_section(config) is not None if mrope is None else mrope):
        return p
    return torch.stack((p, p // 2 + 1, p // 3 + 2))


def mrope_section(config: Any) -> Optional[List[int]]:
    block = getattr(config, "rope_parameters", None)
    if isinstance(block, dict):
        return block.get("mrope_section")
    return None


def probe(config: Any, layer_type: Optional[str] = None) -> HfRope:
    """Reads the rotation transformers applies for `config` (a config object; its text config is
    taken) and `layer_type`, by rotating basis vectors through the family's own functions."""
    import torch

    config = text_config(config)
    model_type = getattr(config, "model_type", "") or ""
    module = modeling_module(model_type)
    if module is None:
        raise ProbeError(f"transformers has no importable modeling module for model_type {model_type!r}")
    rotary = build_rotary(module, config)
    apply = apply_function(module, config)
    sizes = layer_config(config, layer_type)
    head_dim = getattr(sizes, "head_dim", None) or sizes.hidden_size // sizes.num_attention_heads
    position = 1
    position_ids = position_ids_for(config, [position], mrope=False)  # one stream: HF repeats it for each
    out = cos_sin(rotary, position_ids, layer_type)
    rope = HfRope(model_type, module.__name__, layer_type, head_dim, None, 0, 0, np.zeros(0), 1.0,
                  rotary, apply, isinstance(out, torch.Tensor))
    basis = torch.eye(head_dim, dtype=torch.float32).reshape(1, 1, head_dim, head_dim)  # B, S, H=D, D
    errors = []
    for width in _widths(out, head_dim):
        rope.call_width = width
        try:
            rotated, _ = hf_rotate(rope, basis, basis.clone(), position_ids)
            break
        except Exception as e:  # noqa: BLE001
            errors.append(f"width {width}: {type(e).__name__}: {str(e)[:120]}")
    else:
        raise ProbeError(f"{apply.__module__}.{apply.__name__} on basis vectors: {'; '.join(errors)}")
    m = rotated[0, 0].double().numpy()  # m[j] = image of e_j
    return _read_rotation(rope, m, position)


def _read_rotation(rope: HfRope, m: np.ndarray, position: int) -> HfRope:
    """Fills layout, rotary dim, inv_freq and attention factor from the image of each basis vector."""
    d_all = m.shape[0]
    partner = [-1] * d_all
    for j in range(d_all):
        others = [i for i in np.nonzero(m[j])[0] if i != j]
        if len(others) > 1:
            raise ProbeError(f"dim {j} mixes with {len(others)} dims: not a rotation of pairs")
        if others:
            partner[j] = int(others[0])
    rotated = [j for j in range(d_all) if partner[j] >= 0]
    if not rotated:
        raise ProbeError("no dim is rotated at position 1")
    if any(partner[partner[j]] != j for j in rotated):
        raise ProbeError("the pairing is not symmetric")
    firsts = [j for j in rotated if partner[j] > j]
    if rotated != list(range(len(rotated))) and not _proportional(partner, d_all):
        raise ProbeError(f"the rotated dims are not the leading ones (first rotated dim {rotated[0]}, "
                         f"{len(rotated)} of {d_all})")
    if all(partner[j] == j + 1 for j in firsts) and all(j % 2 == 0 for j in firsts):
        layout, stride = "interleaved", 1
    elif len({partner[j] - j for j in firsts}) == 1 and firsts == list(range(len(firsts))):
        layout, stride = "neox", partner[firsts[0]] - firsts[0]
    else:
        raise ProbeError("the pairing is neither neox (i, i + d/2) nor interleaved (2i, 2i+1)")
    # e_j -> s (cos a e_j + sin a e_partner): a negative sin is a rotation the other way (spec inverse).
    negative = [m[j, partner[j]] < 0 for j in firsts]
    if any(negative) and not all(negative):
        raise ProbeError("HF rotates some pairs by -angle and others by +angle: no ropejit form")
    rope.inverse = all(negative)
    # The angle of a pair at position 1.
    scale = np.array([np.hypot(m[j, j], m[j, partner[j]]) for j in firsts])
    angle = np.array([np.arctan2(abs(m[j, partner[j]]), m[j, j]) for j in firsts]) / position
    rope.layout, rope.stride = layout, stride
    rope.rotary_dim = 2 * len(firsts) if layout == "interleaved" else 2 * stride
    rope.attention_factor = float(np.median(scale))
    rope.inv_freq = _buffer_inv_freq(rope, len(firsts)) if _buffer_inv_freq(rope, len(firsts)) is not None else angle
    return rope


def _proportional(partner: List[int], d_all: int) -> bool:
    half = d_all // 2
    return all(p < 0 or p == (j + half) % d_all for j, p in enumerate(partner))


def _buffer_inv_freq(rope: HfRope, pairs: int) -> Optional[np.ndarray]:
    """HF's inv_freq buffer (exact float32) when the rotary module has one of the right length."""
    import torch

    names = [f"{rope.layer_type}_inv_freq"] if rope.layer_type else []
    for name in names + ["inv_freq"]:
        value = getattr(rope.rotary, name, None)
        if isinstance(value, torch.Tensor) and value.dim() == 1 and value.numel() >= pairs:
            return value[:pairs].double().numpy()
    return None
