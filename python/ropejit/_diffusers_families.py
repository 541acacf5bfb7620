"""The family table of ``ropejit.Spec.from_diffusers``: every transformer class of diffusers 0.42.1
whose attention rotates q and k, imported (:data:`FAMILIES`) or refused by name with the reason
(:data:`REFUSED`). Each row was read from the file it names
(``site-packages/diffusers/models/...``); this module needs neither torch nor diffusers.

A family's ``axes(config, class name)`` returns the spec's rotary: ``pairs`` per axis, ``theta``
per axis, ``angle`` (``exact`` where diffusers computes its angles in float64, ``fp32`` where in
float32), ``max`` positions, ``layout`` (``interleaved``: pairs (2i, 2i+1); ``neox``: each axis's
pairs in both halves, contiguous) and the head: ``head_dim``, ``heads``, ``kv_heads``,
``rotary_dim``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping

from . import _ropejit


@dataclass(frozen=True)
class Family:
    """One diffusers family: the config keys its rotary reads (with the class defaults) and
    ``axes(config, class_name) -> dict`` (see the module doc)."""

    name: str
    source: str  # the rotary module and file in diffusers 0.42.1
    defaults: Mapping[str, Any]
    axes: Callable[[Dict[str, Any], str], Dict[str, Any]]


def _spec_error(class_name: str, key: str, value: Any, allowed: str) -> Exception:
    return _error(key, f"{class_name}: config {key} = {value!r} is not allowed: must be {allowed}")


def _error(key: str, message: str) -> Exception:
    """A SpecError whose ``issues`` name the config key (``_class_name`` for the family itself)."""
    error = _ropejit.SpecError(message)
    error.issues = [(key, message)]
    return error


def _positive(config: Dict[str, Any], key: str, cls: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _spec_error(cls, key, value, "a positive integer")
    return value


def _theta(config: Dict[str, Any], key: str, cls: str) -> float:
    theta = config[key]
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 1:
        raise _spec_error(cls, key, theta, "a number above 1")
    return float(theta)


def _pairs_of(dims: Any, key: str, class_name: str, rotated: int, what: str = "attention_head_dim") -> List[int]:
    """Rotary pairs per axis from a diffusers per-axis dim list (each even), covering `rotated`."""
    if not isinstance(dims, (list, tuple)) or not dims or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
        raise _spec_error(class_name, key, dims, "a list of positive even integers, one per axis")
    if any(d % 2 for d in dims):
        raise _spec_error(class_name, key, list(dims), "even sizes (each axis rotates whole pairs)")
    if len(dims) > 4:
        raise _spec_error(class_name, key, list(dims), "1 to 4 axes (ropejit's axes form)")
    if sum(dims) != rotated:
        raise _spec_error(class_name, key, list(dims),
                          f"sizes summing to {what} = {rotated} (the whole head rotates)")
    return [d // 2 for d in dims]


def _head(config: Dict[str, Any], cls: str, dim_key: str = "attention_head_dim",
          heads_key: str = "num_attention_heads", kv_key: str = "") -> Dict[str, int]:
    heads = _positive(config, heads_key, cls)
    kv = config.get(kv_key) if kv_key else None
    kv = heads if kv is None else _positive(config, kv_key, cls)
    if heads % kv:
        raise _spec_error(cls, kv_key, kv, f"a divisor of {heads_key} = {heads}")
    return {"head_dim": _positive(config, dim_key, cls), "heads": heads, "kv_heads": kv}


def _split_head(config: Dict[str, Any], cls: str, dim_key: str, heads_key: str, kv_key: str = "") -> Dict[str, int]:
    """head_dim = dim // heads, for classes configured by model width and head count."""
    dim, heads = _positive(config, dim_key, cls), _positive(config, heads_key, cls)
    if dim % heads:
        raise _spec_error(cls, dim_key, dim, f"a multiple of {heads_key} = {heads}")
    return _head(dict(config, **{"head_dim (computed)": dim // heads}), cls, "head_dim (computed)", heads_key, kv_key)


def _axes(head: Dict[str, int], pairs: List[int], theta: Any, angle: str, max_positions: int,
          layout: str = "interleaved", rotary_dim: int = 0) -> Dict[str, Any]:
    thetas = list(theta) if isinstance(theta, (list, tuple)) else [float(theta)] * len(pairs)
    return dict(head, pairs=pairs, theta=thetas, angle=angle, max=max_positions, layout=layout,
                rotary_dim=rotary_dim or head["head_dim"])


# ---------------------------------------------------------------- the rotary forms

def _ids_form(theta_key: str = "", theta: float = 10000.0, angle: str = "exact", axes_key: str = "axes_dims_rope",
              kv_key: str = "") -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """Flux's form: per-axis get_1d_rotary_pos_embed of the ids (PosEmbed(theta, axes_dim)), float64
    angles, repeat-interleaved cos/sin; θ fixed in the model or read from `theta_key`."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        head = _head(config, cls, kv_key=kv_key)
        pairs = _pairs_of(config[axes_key], axes_key, cls, head["head_dim"])
        return _axes(head, pairs, _theta(config, theta_key, cls) if theta_key else theta, angle, 4096)
    return axes


def _wan_pairs(head_dim: int, cls: str) -> List[int]:
    spatial = 2 * (head_dim // 6)
    temporal = head_dim - 2 * spatial
    if head_dim % 2 or spatial == 0:
        raise _spec_error(cls, "attention_head_dim", head_dim, "an even size of at least 6 (t, h and w take pairs)")
    return [temporal // 2, spatial // 2, spatial // 2]


def _wan_form(split_check: bool = False) -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """WanRotaryPosEmbed's form: h = w = 2⌊D/6⌋ dims, t the rest; θ 10000; float64 table of
    rope_max_seq_len positions. `split_check`: the forward splits [D - 2⌊D/3⌋, ⌊D/3⌋, ⌊D/3⌋]
    (ChronoEdit), which is the table's split only where ⌊D/3⌋ = 2⌊D/6⌋."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        head = _head(config, cls)
        d = head["head_dim"]
        if split_check and d // 3 != 2 * (d // 6):
            raise _spec_error(cls, "attention_head_dim", d, "a size with ⌊D/3⌋ = 2⌊D/6⌋ (D mod 6 of 0 or 2): "
                              "its forward splits the cos by ⌊D/3⌋, its table by 2⌊D/6⌋")
        return _axes(head, _wan_pairs(d, cls), 10000.0, "exact", _positive(config, "rope_max_seq_len", cls))
    return axes


def _wan_animate2(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # rope_params(512, d - 4(d//6)), rope_params(512, 2(d//6)) x 2 (theta 10000, float64), d = dim // num_heads.
    head = _split_head(config, cls, "dim", "num_heads")
    return _axes(head, _wan_pairs(head["head_dim"], cls), 10000.0, "exact", 4096)


def _grid_form(axes_key: str, theta_key: str, angle: str) -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """HunyuanVideo's form: get_1d_rotary_pos_embed of the patch grid per axis, θ from the config."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        head = _head(config, cls)
        pairs = _pairs_of(config[axes_key], axes_key, cls, head["head_dim"])
        return _axes(head, pairs, _theta(config, theta_key, cls), angle, 4096)
    return axes


def _table_form(dim_key: str, heads_key: str, kv_key: str, axes_key: str, lens_key: str,
                theta_key: str = "", theta: float = 10000.0) -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """Z-Image's / Lumina 2's form: per-axis float64 tables of axes_lens positions, complex
    (interleaved) multiply; head_dim = dim // heads."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        head = _split_head(config, cls, dim_key, heads_key, kv_key)
        pairs = _pairs_of(config[axes_key], axes_key, cls, head["head_dim"])
        lens = config[lens_key]
        if not isinstance(lens, (list, tuple)) or len(lens) != len(pairs) or not all(
                isinstance(n, int) and n > 0 for n in lens):
            raise _spec_error(cls, lens_key, lens, f"{len(pairs)} positive integers (one table length per axis)")
        value = _theta(config, theta_key, cls) if theta_key else theta
        return _axes(head, pairs, value, "exact", max(lens))
    return axes


def _hidream(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # HiDreamImageEmbedND(theta=10000, axes_dims_rope) over 3-column ids (0, row, col), float64 2x2 matrices;
    # the attention rotates the whole head when the dims sum to it, else the first half (query.chunk(2)).
    head = _head(config, cls)
    dims = config["axes_dims_rope"]
    if not isinstance(dims, (list, tuple)) or len(dims) != 3:
        raise _spec_error(cls, "axes_dims_rope", dims, "3 sizes (its ids have 3 columns: the class default "
                          "(32, 32) fails in HiDreamImageEmbedND; checkpoints set (64, 32, 32))")
    total = sum(d for d in dims if isinstance(d, int))
    rotated = head["head_dim"] // 2 if 2 * total == head["head_dim"] else head["head_dim"]
    pairs = _pairs_of(dims, "axes_dims_rope", cls, rotated, "attention_head_dim or half of it")
    return _axes(head, pairs, 10000.0, "exact", 4096, rotary_dim=rotated)


def _prx(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # PRXEmbedND(dim=hidden_size // num_heads, theta, axes_dim or [32, 32]): float64 2x2 rotation matrices.
    head = _split_head(config, cls, "hidden_size", "num_heads")
    dims = config["axes_dim"] if config["axes_dim"] is not None else [32, 32]
    return _axes(head, _pairs_of(dims, "axes_dim", cls, head["head_dim"]), _theta(config, "theta", cls), "exact", 4096)


def _joyimage(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # get_rotary_pos_embed: float32 θ^(-2j/d) per axis of rope_dim_list, float32 outer, interleaved rotate.
    head = _split_head(config, cls, "hidden_size", "num_attention_heads")
    dims = config["rope_dim_list"]
    if dims is None:
        dims = [head["head_dim"] // 3] * 3
    pairs = _pairs_of(dims, "rope_dim_list", cls, head["head_dim"])
    return _axes(head, pairs, _theta(config, "theta", cls), "fp32", 4096)


def _cogview4(rescaled: bool) -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """CogView4RotaryPosEmbed / GlmImageRotaryPosEmbed: h and w take D/4 pairs each with their own
    float32 θ^(-2j/(D/2)), θ 10000, neox halves (use_real_unbind_dim=-2); image tokens only."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        head = _head(config, cls)
        d = head["head_dim"]
        if d % 4:
            raise _spec_error(cls, "attention_head_dim", d, "a multiple of 4 (h and w take D/4 pairs each)")
        limit = 4096
        if rescaled:
            bounds = config["rope_axes_dim"]
            if not isinstance(bounds, (list, tuple)) or len(bounds) != 2 or not all(
                    isinstance(n, int) and n > 0 for n in bounds):
                raise _spec_error(cls, "rope_axes_dim", bounds, "2 positive integers (the h and w table lengths)")
            limit = max(bounds)
        return _axes(head, [d // 4, d // 4], 10000.0, "fp32", limit, layout="neox")
    return axes


def _cosmos(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # CosmosRotaryPosEmbed(hidden_size=attention_head_dim, rope_scale): h = w = 2⌊D/6⌋ dims, t the rest;
    # axis θ_a = 10000 · rope_scale[a]^(d_a / (d_a - 2)) (NTK per axis), float32, neox halves.
    head = _head(config, cls)
    pairs = _wan_pairs(head["head_dim"], cls)
    scale = config["rope_scale"]
    if not isinstance(scale, (list, tuple)) or len(scale) != 3 or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 for s in scale):
        raise _spec_error(cls, "rope_scale", scale, "3 positive numbers (t, h, w)")
    if min(pairs) < 2:
        raise _spec_error(cls, "attention_head_dim", head["head_dim"], "a size giving each axis 2 pairs or more")
    thetas = [10000.0 * float(s) ** (2 * p / (2 * p - 2)) for s, p in zip(scale, pairs)]
    return _axes(head, pairs, thetas, "fp32", 4096, layout="neox")


def _minimax_h3(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # MiniMaxH3RotaryPosEmbed(rope_freq_dim, rope_theta): one float32 inv_freq of rope_freq_dim pairs
    # shared by t, h and w (each axis's own θ^(-2j/d_a)), neox over the first 6·rope_freq_dim dims.
    head = _head(config, cls)
    f = _positive(config, "rope_freq_dim", cls)
    if 6 * f > head["head_dim"]:
        raise _spec_error(cls, "rope_freq_dim", f, f"at most attention_head_dim / 6 = {head['head_dim'] // 6}")
    return _axes(head, [f, f, f], _theta(config, "rope_theta", cls), "fp32", 4096, layout="neox", rotary_dim=6 * f)


def _sequence_form(head_of: Callable[[Dict[str, Any], str], Dict[str, int]],
                   rotated: Callable[[Dict[str, Any], int], int],
                   theta_key: str = "", theta: float = 10000.0) -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """1-D audio DiTs: one axis (the token index), float32 θ^(-2j/R) over the first R = rotated(D)
    dims, neox halves (rotate_half / use_real_unbind_dim=-2, cos and sin concatenated twice)."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        head = head_of(config, cls)
        rotary = rotated(config, head["head_dim"])
        if isinstance(rotary, bool) or not isinstance(rotary, int) or rotary % 2 or not 0 < rotary <= head["head_dim"]:
            raise _spec_error(cls, "rotary width", rotary, f"an even size of at most the head, {head['head_dim']}")
        value = _theta(config, theta_key, cls) if theta_key else theta
        return _axes(head, [rotary // 2], value, "fp32", 1 << 20, layout="neox", rotary_dim=rotary)
    return axes


def _mrope(dim_key: str, section_key: str, kv_key: str = "") -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """Qwen3-VL's interleaved MRoPE (Ideogram4MRoPE, Cosmos3VLTextRotaryEmbedding): one float32 table
    θ^(-2k/D), pair k rotated by h (k ≡ 1 mod 3, k < 3·s_h), w (k ≡ 2 mod 3, k < 3·s_w) or t;
    neox halves. Not the axes form: ropejit's ``positions: "mrope"`` with ``mrope_interleaved``."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        head = _head(config, cls, dim_key, kv_key=kv_key)
        section = config[section_key]
        if section is None and section_key == "rope_axes_dim":  # Cosmos 3: rope_scaling's, else [24, 20, 20]
            section = (config.get("rope_scaling") or {}).get("mrope_section", [24, 20, 20])
        if not isinstance(section, (list, tuple)) or len(section) != 3 or not all(
                isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in section):
            raise _spec_error(cls, section_key, section, "3 positive integers (t, h, w pairs)")
        half = head["head_dim"] // 2
        if not (3 * section[1] - 2 < half and 3 * section[2] - 1 < half):
            raise _spec_error(cls, section_key, list(section), f"h and w sections whose interleaved pairs exist in "
                              f"head_dim / 2 = {half} (3h - 2 and 3w - 1 below it)")
        # every pair the h and w strides do not take is temporal: t's share is the rest of the head
        section = [half - section[1] - section[2], section[1], section[2]]
        result = _axes(head, [head["head_dim"] // 2], _theta(config, "rope_theta", cls), "fp32", 1 << 24,
                       layout="neox")
        result["io"] = {"positions": "mrope", "mrope_section": list(section), "mrope_interleaved": True}
        return result
    return axes


def _omnigen(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    """OmniGenSuScaledRotaryEmbedding(hidden_size // heads, max_position_embeddings, original, rope_base,
    rope_scaling): Phi-3's LongRoPE on one position stream (short_factor up to original_max, long_factor
    past it, by max(position) + 1; cos and sin scaled by sqrt(1 + ln(max / original) / ln(original))),
    float32, neox halves: ropejit's rope_type longrope with explicit positions (not the axes form)."""
    head = _split_head(config, cls, "hidden_size", "num_attention_heads", "num_key_value_heads")
    scaling = config["rope_scaling"]
    half = head["head_dim"] // 2
    if not isinstance(scaling, Mapping) or not all(
            isinstance(scaling.get(key), (list, tuple)) and len(scaling[key]) == half
            for key in ("short_factor", "long_factor")):
        raise _spec_error(cls, "rope_scaling", scaling, f"a dict with short_factor and long_factor, {half} numbers "
                          "each (the class default None fails in OmniGenSuScaledRotaryEmbedding)")
    longest = _positive(config, "max_position_embeddings", cls)
    original = _positive(config, "original_max_position_embeddings", cls)
    scale = longest / original
    attention = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(original))
    theta = _theta(config, "rope_base", cls)
    result = _axes(head, [half], theta, "fp32", longest, layout="neox")
    result["rope"] = {"rope_type": "longrope", "rope_theta": theta, "short_factor": list(scaling["short_factor"]),
                      "long_factor": list(scaling["long_factor"]), "original_max_position_embeddings": original,
                      "attention_factor": attention}
    result["io"] = {"positions": "explicit"}
    return result


def _qwen_form(kv_key: str = "", table: int = 4096) -> Callable[[Dict[str, Any], str], Dict[str, Any]]:
    """QwenEmbedRope's form (θ 10000, float32 table, complex multiply); rows and columns centred
    (negative positions: the spec serves the non-negative half)."""
    def axes(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
        if config.get("use_layer3d_rope"):
            raise _spec_error(cls, "use_layer3d_rope", True, "False (QwenEmbedLayer3DRope was not read for ropejit)")
        head = _head(config, cls, kv_key=kv_key)
        pairs = _pairs_of(config["axes_dims_rope"], "axes_dims_rope", cls, head["head_dim"])
        return _axes(head, pairs, 10000.0, "fp32", table)
    return axes


def _cogvideox(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # get_3d_rotary_pos_embed, built by the pipeline: t D/4, h and w 3D/8 dims, theta 10000, float32.
    if not config["use_rotary_positional_embeddings"]:
        raise _error("use_rotary_positional_embeddings",
                     f"{cls}: config use_rotary_positional_embeddings = False: this model runs no RoPE "
                     "(sinusoidal or learned absolute positions)")
    if config["patch_size_t"] is None:
        raise _error(
            "patch_size_t",
            f"{cls}: config patch_size_t = None (CogVideoX 1.0) is refused: its pipeline builds the rotary with "
            "grid_type='linspace' over the resize-crop region, whose positions are fractional floats; ropejit's "
            "axes positions are integers (CogVideoX 1.5, patch_size_t set, uses integer 'slice' grids)")
    head = _head(config, cls)
    d = head["head_dim"]
    pairs = _pairs_of([d // 4, d // 8 * 3, d // 8 * 3], "attention_head_dim (t D/4, h and w 3D/8)", cls, d)
    return _axes(head, pairs, 10000.0, "fp32", 4096)


def _hunyuan_image(config: Dict[str, Any], cls: str) -> Dict[str, Any]:
    # HunyuanImageRotaryPosEmbed(patch_size, rope_axes_dim, rope_theta): 2 or 3 axes (the patch_size's length).
    axes = _grid_form("rope_axes_dim", "rope_theta", "fp32")(config, cls)
    patch = config["patch_size"]
    if not isinstance(patch, (list, tuple)) or len(patch) != len(axes["pairs"]):
        raise _spec_error(cls, "patch_size", patch, f"{len(axes['pairs'])} sizes, one per rope_axes_dim axis")
    return axes


_FLUX = {"attention_head_dim": 128, "num_attention_heads": 24, "axes_dims_rope": (16, 56, 56)}
_WAN = {"attention_head_dim": 128, "num_attention_heads": 40, "rope_max_seq_len": 1024}
_HV = {"attention_head_dim": 128, "num_attention_heads": 24, "rope_axes_dim": (16, 56, 56), "rope_theta": 256.0}
_T = "transformers/"

#: class name -> family; each family's defaults are its class's __init__ defaults in diffusers 0.42.1.
FAMILIES: Dict[str, Family] = {
    "FluxTransformer2DModel": Family("flux", "FluxPosEmbed, transformer_flux.py", _FLUX, _ids_form()),
    "Flux2Transformer2DModel": Family(
        "flux2", "Flux2PosEmbed, transformer_flux2.py",
        {"attention_head_dim": 128, "num_attention_heads": 48, "axes_dims_rope": (32, 32, 32, 32),
         "rope_theta": 2000}, _ids_form("rope_theta")),
    "WanTransformer3DModel": Family("wan", "WanRotaryPosEmbed, transformer_wan.py", _WAN, _wan_form()),
    "HunyuanVideoTransformer3DModel": Family(
        "hunyuan-video", "HunyuanVideoRotaryPosEmbed, transformer_hunyuan_video.py", _HV,
        _grid_form("rope_axes_dim", "rope_theta", "fp32")),
    "QwenImageTransformer2DModel": Family(
        "qwen-image", "QwenEmbedRope, transformer_qwenimage.py", dict(_FLUX, use_layer3d_rope=False), _qwen_form()),
    "CogVideoXTransformer3DModel": Family(
        "cogvideox", "get_3d_rotary_pos_embed (embeddings.py), built by pipeline_cogvideox.py",
        {"attention_head_dim": 64, "num_attention_heads": 30, "patch_size_t": None,
         "use_rotary_positional_embeddings": False}, _cogvideox),
    # Flux's form (PosEmbed(theta, axes_dim)(ids), float64, interleaved)
    "ChromaTransformer2DModel": Family("chroma", "FluxPosEmbed, transformer_chroma.py", _FLUX, _ids_form()),
    "FluxControlNetModel": Family("flux-controlnet", "FluxPosEmbed, controlnets/controlnet_flux.py",
                                  _FLUX, _ids_form()),
    "BriaTransformer2DModel": Family("bria", "BriaEmbedND, transformer_bria.py",
                                     dict(_FLUX, axes_dims_rope=(16, 56, 56), rope_theta=10000),
                                     _ids_form("rope_theta")),
    "BriaFiboTransformer2DModel": Family("bria-fibo", "BriaFiboEmbedND, transformer_bria_fibo.py",
                                         dict(_FLUX, rope_theta=10000), _ids_form("rope_theta")),
    "LongCatImageTransformer2DModel": Family("longcat-image", "LongCatImagePosEmbed, transformer_longcat_image.py",
                                             _FLUX, _ids_form()),
    "OvisImageTransformer2DModel": Family("ovis-image", "OvisImagePosEmbed, transformer_ovis_image.py",
                                          _FLUX, _ids_form()),
    "Krea2Transformer2DModel": Family(
        "krea2", "Krea2RotaryPosEmbed, transformer_krea2.py (GQA: k rotated before its heads are repeated)",
        {"attention_head_dim": 128, "num_attention_heads": 48, "num_key_value_heads": 12,
         "axes_dims_rope": (32, 48, 48), "rope_theta": 1000.0}, _ids_form("rope_theta", kv_key="num_key_value_heads")),
    "Flux3Transformer2DModel": Family(
        "flux3", "Flux3PosEmbed, transformer_flux3.py",
        {"attention_head_dim": 128, "num_attention_heads": 24, "axes_dims_rope": (32, 32, 32, 32),
         "rope_theta": 10000}, _ids_form("rope_theta")),
    "HiDreamImageTransformer2DModel": Family(
        "hidream-image", "HiDreamImageEmbedND / rope(), transformer_hidream_image.py (2x2 matrices, float64)",
        {"attention_head_dim": 128, "num_attention_heads": 20, "axes_dims_rope": (32, 32)}, _hidream),
    "PRXTransformer2DModel": Family(
        "prx", "PRXEmbedND, transformer_prx.py (2x2 matrices, float64)",
        {"hidden_size": 1792, "num_heads": 28, "axes_dim": None, "theta": 10000}, _prx),
    # Wan's form (WanRotaryPosEmbed(D, patch_size, rope_max_seq_len), float64 tables of t, h, w)
    "WanVACETransformer3DModel": Family("wan-vace", "WanRotaryPosEmbed, transformer_wan.py (transformer_wan_vace.py)",
                                        _WAN, _wan_form()),
    "WanAnimateTransformer3DModel": Family("wan-animate", "WanRotaryPosEmbed, transformer_wan_animate.py",
                                           _WAN, _wan_form()),
    "SkyReelsV2Transformer3DModel": Family("skyreels-v2", "SkyReelsV2RotaryPosEmbed, transformer_skyreels_v2.py",
                                           dict(_WAN, num_attention_heads=16), _wan_form()),
    "ChronoEditTransformer3DModel": Family("chronoedit", "ChronoEditRotaryPosEmbed, transformer_chronoedit.py",
                                           _WAN, _wan_form(split_check=True)),
    "SanaVideoTransformer3DModel": Family(
        "sana-video", "WanRotaryPosEmbed, transformer_sana_video.py (q and k of its linear attention)",
        {"attention_head_dim": 112, "num_attention_heads": 20, "rope_max_seq_len": 1024}, _wan_form()),
    "AnyFlowTransformer3DModel": Family("anyflow", "AnyFlowRotaryPosEmbed, transformer_anyflow.py (complex128)",
                                        _WAN, _wan_form()),
    "WanAnimate2Transformer3DModel": Family(
        "wan-animate2", "rope_params / rope_apply, transformer_wan_animate_2.py (complex128; positions t * stride + "
        "offset, h + offset, w + offset, integers)",
        {"dim": 5120, "num_heads": 40}, _wan_animate2),
    # HunyuanVideo's form (get_1d_rotary_pos_embed of the patch grid)
    "HunyuanVideo15Transformer3DModel": Family(
        "hunyuan-video15", "HunyuanVideo15RotaryPosEmbed, transformer_hunyuan_video15.py",
        dict(_HV, num_attention_heads=16), _grid_form("rope_axes_dim", "rope_theta", "fp32")),
    "MotifVideoTransformer3DModel": Family(
        "motif-video", "MotifVideoRotaryPosEmbed, transformer_motif_video.py (float64)", _HV,
        _grid_form("rope_axes_dim", "rope_theta", "exact")),
    "HunyuanImageTransformer2DModel": Family(
        "hunyuan-image", "HunyuanImageRotaryPosEmbed, transformer_hunyuanimage.py",
        {"attention_head_dim": 128, "num_attention_heads": 28, "rope_axes_dim": (64, 64), "rope_theta": 256.0,
         "patch_size": (1, 1)}, _hunyuan_image),
    "JoyImageEditTransformer3DModel": Family(
        "joyimage-edit", "get_rotary_pos_embed, transformer_joyimage.py",
        {"hidden_size": 3072, "num_attention_heads": 24, "rope_dim_list": (16, 56, 56), "theta": 256}, _joyimage),
    "JoyImageEditPlusTransformer3DModel": Family(
        "joyimage-edit-plus", "get_rotary_pos_embed, transformer_joyimage_edit_plus.py",
        {"hidden_size": 3072, "num_attention_heads": 24, "rope_dim_list": (16, 56, 56), "theta": 256}, _joyimage),
    # per-axis float64 tables (Z-Image's RopeEmbedder, Lumina 2)
    "ZImageTransformer2DModel": Family(
        "z-image", "RopeEmbedder, transformer_z_image.py",
        {"dim": 3840, "n_heads": 30, "n_kv_heads": 30, "axes_dims": (32, 48, 48), "axes_lens": (1024, 512, 512),
         "rope_theta": 256.0}, _table_form("dim", "n_heads", "n_kv_heads", "axes_dims", "axes_lens", "rope_theta")),
    "BriaFibo2Transformer2DModel": Family(
        "bria-fibo2", "RopeEmbedder, transformer_bria_fibo2.py",
        {"dim": 3584, "n_heads": 28, "axes_dims": (32, 48, 48), "axes_lens": (2048, 512, 512), "rope_theta": 256.0},
        _table_form("dim", "n_heads", "", "axes_dims", "axes_lens", "rope_theta")),
    "Lumina2Transformer2DModel": Family(
        "lumina2", "Lumina2RotaryPosEmbed, transformer_lumina2.py (θ 10000 fixed)",
        {"hidden_size": 2304, "num_attention_heads": 24, "num_kv_heads": 8, "axes_dim_rope": (32, 32, 32),
         "axes_lens": (300, 512, 512)},
        _table_form("hidden_size", "num_attention_heads", "num_kv_heads", "axes_dim_rope", "axes_lens")),
    # neox halves: h and w (CogView4, GLM-Image), t, h and w with an NTK θ per axis (Cosmos), partial (MiniMax H3)
    "CogView4Transformer2DModel": Family(
        "cogview4", "CogView4RotaryPosEmbed, transformer_cogview4.py",
        {"attention_head_dim": 40, "num_attention_heads": 64, "rope_axes_dim": (256, 256)}, _cogview4(True)),
    "GlmImageTransformer2DModel": Family(
        "glm-image", "GlmImageRotaryPosEmbed, transformer_glm_image.py",
        {"attention_head_dim": 40, "num_attention_heads": 64}, _cogview4(False)),
    "CosmosTransformer3DModel": Family(
        "cosmos", "CosmosRotaryPosEmbed, transformer_cosmos.py",
        {"attention_head_dim": 128, "num_attention_heads": 32, "rope_scale": (2.0, 1.0, 1.0)}, _cosmos),
    "CosmosControlNetModel": Family(
        "cosmos-controlnet", "CosmosRotaryPosEmbed, controlnets/controlnet_cosmos.py",
        {"attention_head_dim": 128, "num_attention_heads": 32, "rope_scale": (2.0, 1.0, 1.0)}, _cosmos),
    "MiniMaxH3Transformer3DModel": Family(
        "minimax-h3", "MiniMaxH3RotaryPosEmbed, transformer_minimax_h3.py",
        {"attention_head_dim": 128, "num_attention_heads": 56, "rope_freq_dim": 16, "rope_theta": 10000.0},
        _minimax_h3),
    # 1-D audio DiTs (one axis: the token index; neox halves)
    "StableAudioDiTModel": Family(
        "stable-audio", "get_1d_rotary_pos_embed(attention_head_dim // 2) built by pipeline_stable_audio.py, "
        "StableAudioAttnProcessor2_0 (attention_processor.py): the first D/2 dims rotate",
        {"attention_head_dim": 64, "num_attention_heads": 24, "num_key_value_attention_heads": 12},
        _sequence_form(lambda c, n: _head(c, n, kv_key="num_key_value_attention_heads"), lambda c, d: d // 2)),
    "StableAudio3DiTModel": Family(
        "stable-audio3", "StableAudio3RotaryEmbedding(dim_heads // 2), transformer_stable_audio3.py "
        "(differential attention: q1/k1 and q2/k2 each rotated alike)",
        {"embed_dim": 1536, "num_heads": 24},
        _sequence_form(lambda c, n: _split_head(c, n, "embed_dim", "num_heads"), lambda c, d: d // 2)),
    "AceStepTransformer1DModel": Family(
        "ace-step", "_ace_step_rotary_freqs (get_1d_rotary_pos_embed, repeat_interleave_real=False), "
        "ace_step_transformer.py",
        {"head_dim": 128, "num_attention_heads": 16, "num_key_value_heads": 8, "rope_theta": 1000000.0},
        _sequence_form(lambda c, n: _head(c, n, "head_dim", kv_key="num_key_value_heads"), lambda c, d: d,
                       "rope_theta")),
    "LongCatAudioDiTTransformer": Family(
        "longcat-audio", "AudioDiTRotaryEmbedding(dim_head, base=100000), transformer_longcat_audio_dit.py (its "
        "cross-attention rotates q at the audio positions and k at the prompt's: one call each)",
        {"dit_dim": 1536, "dit_heads": 24},
        _sequence_form(lambda c, n: _split_head(c, n, "dit_dim", "dit_heads"), lambda c, d: d, theta=100000.0)),
    "MiniMaxMusic3Transformer1DModel": Family(
        "minimax-music3", "MiniMaxMusic3RotaryEmbedding(rotary_dim), transformer_minimax_music3.py",
        {"attention_head_dim": 64, "num_attention_heads": 32, "rotary_dim": 32},
        _sequence_form(_head, lambda c, d: c["rotary_dim"])),
    # Qwen3-VL's interleaved MRoPE (positions "mrope", not "axes")
    "Ideogram4Transformer2DModel": Family(
        "ideogram4", "Ideogram4MRoPE, transformer_ideogram4.py (image positions from 65536)",
        {"attention_head_dim": 256, "num_attention_heads": 18, "rope_theta": 5000000, "mrope_section": (24, 20, 20)},
        _mrope("attention_head_dim", "mrope_section")),
    "Cosmos3OmniTransformer": Family(
        "cosmos3", "Cosmos3VLTextRotaryEmbedding, transformer_cosmos3.py (both pathways, und and gen)",
        {"head_dim": 128, "num_attention_heads": 32, "num_key_value_heads": 8, "rope_theta": 5000000.0,
         "rope_axes_dim": None, "rope_scaling": None},
        _mrope("head_dim", "rope_axes_dim", "num_key_value_heads")),
    "OmniGenTransformer2DModel": Family(
        "omnigen", "OmniGenSuScaledRotaryEmbedding, transformer_omnigen.py (Phi-3 LongRoPE)",
        {"hidden_size": 3072, "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 131072,
         "original_max_position_embeddings": 4096, "rope_base": 10000, "rope_scaling": None}, _omnigen),
    # Qwen-Image's form (centred positions)
    "QwenImageControlNetModel": Family("qwen-image-controlnet", "QwenEmbedRope, controlnets/controlnet_qwenimage.py",
                                       _FLUX, _qwen_form()),
    "QwenImage21Transformer2DModel": Family(
        "qwen-image21", "QwenImage21Rope, transformer_qwenimage21.py",
        {"attention_head_dim": 128, "num_attention_heads": 32, "axes_dims_rope": (16, 56, 56)}, _qwen_form(table=8192)),
    "NucleusMoEImageTransformer2DModel": Family(
        "nucleus-moe-image", "NucleusMoEEmbedRope, transformer_nucleusmoe_image.py",
        {"attention_head_dim": 128, "num_attention_heads": 16, "num_key_value_heads": None,
         "axes_dims_rope": (16, 56, 56)}, _qwen_form("num_key_value_heads")),
}

#: class name -> why no spec expresses its RoPE (and the file it was read from).
REFUSED: Dict[str, str] = {
    "LTXVideoTransformer3DModel": (
        "LTX-Video's rotary (LTXVideoRotaryPosEmbed, transformer_ltx.py) takes float, affine positions (frame / 20 "
        "and pixel / 2048 scaled by the VAE and patch sizes, as 2g - 1), frequencies (pi/2) * theta^(j/(F-1)) that "
        "are not theta^(-2j/d), axes alternating per pair, and 2 pass-through dims, all over the whole inner dim"),
    "LTX2VideoTransformer3DModel": (
        "LTX-2 (transformer_ltx2.py) uses LTX-Video's rotary form (float affine positions, (pi/2) * theta^(j/(F-1)) "
        "frequencies) for its audio and video streams"),
    "SanaWMLTX2RefinerTransformer3DModel": (
        "SanaWMLTX2AudioVideoRotaryPosEmbed (transformer_sana_wm_refiner.py) is LTX-2's form: linspace(0, 1) "
        "frequency exponents and float affine positions"),
    "MochiTransformer3DModel": (
        "Mochi's rotary (MochiRoPE, transformer_mochi.py) has learned frequencies: each pair's angle is a per-head "
        "linear combination of three float positions (pos_frequencies [3, H, D/2]), not one axis and a theta"),
    "ErnieImageTransformer2DModel": (
        "ErnieImageEmbedND3 (transformer_ernie_image.py) repeats each angle for two adjacent dims ([a0, a0, a1, a1, "
        "...]) but the attention rotates neox halves (rotate_half, x_i with x_{i+D/2}): the two members of a pair "
        "turn by different angles, which is not a rotation ropejit's layouts express"),
    "AllegroTransformer3DModel": (
        "get_3d_rotary_pos_embed_allegro / apply_rotary_emb_allegro (embeddings.py) rotate each axis's D/3 block as "
        "its own neox halves (per-axis rotate_half), and the positions are integer grids divided by "
        "interpolation_scale_t/h/w (2.2, 2.0, 2.0 by default: fractional)"),
    "EasyAnimateTransformer3DModel": (
        "EasyAnimateRotaryPosEmbed (transformer_easyanimate.py) calls get_3d_rotary_pos_embed with the default "
        "grid_type='linspace' over a resize-crop region of a 90 x 60 base grid: fractional float positions unless "
        "the latent grid is that crop region"),
    "ConsisIDTransformer3DModel": (
        "its pipeline (pipeline_consisid.py _prepare_rotary_positional_embeddings) builds get_3d_rotary_pos_embed "
        "with grid_type='linspace' over the resize-crop region (CogVideoX 1.0's form): fractional float positions"),
    "HunyuanDiT2DModel": (
        "its pipeline (pipeline_hunyuandit.py) builds get_2d_rotary_pos_embed over linspace resize-crop coordinates "
        "(hunyuan_transformer_2d.py takes the cos/sin): fractional float positions"),
    "HunyuanDiT2DControlNetModel": "HunyuanDiT's rotary (linspace resize-crop positions: fractional floats)",
    "LuminaNextDiT2DModel": (
        "get_2d_rotary_pos_embed_lumina (embeddings.py, built by pipeline_lumina.py each step): h and w alternate "
        "per pair (which the axes form has), but above the default resolution the pipeline divides positions by "
        "scaling_factor = sqrt(H·W) / default_image_size (fractional) or scales theta by it (ntk_factor), switching "
        "between the two with the denoising timestep (scaling_watershed): no one spec"),
    "Kandinsky5Transformer3DModel": (
        "transformer_kandinsky.py: Kandinsky5RoPE3D divides each axis's angles by the forward's scale_factor "
        "((1, 2, 2) between 480p and 854p in pipeline_kandinsky.py _get_scale_factor: half-integer positions), and "
        "the text blocks rotate with Kandinsky5RoPE1D (one axis over the whole head): two rotary forms in one model"),
    "Kandinsky6Transformer3DModel": (
        "transformer_kandinsky6.py: Kandinsky6RoPE3D divides angles by scale_factor (config default (1.0, 2.0, 2.0): "
        "half-integer h and w positions); its text and audio blocks rotate with Kandinsky6RoPE1D (one axis over the "
        "whole head, the audio one with freqs_scaling): several rotary forms in one model"),
    "Kandinsky6SRTransformer3DModel": (
        "transformer_kandinsky6_sr.py: Kandinsky6SRRoPE3D divides angles by scale_factor (documented default "
        "(1.0, 2.0, 2.0): half-integer h and w positions)"),
    "AnyFlowFARTransformer3DModel": (
        "AnyFlowCausalRotaryPosEmbed (transformer_anyflow_far.py) rotates compressed-frame tokens by the normalised "
        "average of K consecutive positions' unit phasors (avg_pool_complex): a half-integer position that turns by "
        "pi where the average's sign flips, not an integer position"),
    "HunyuanVideoFramepackTransformer3DModel": (
        "transformer_hunyuan_video_framepack.py _pad_rotary_emb: the 2x and 4x history tokens take avg_pool3d of "
        "their neighbours' cos and sin (_center_down_sample_3d), which is no rotation at any position"),
    "HeliosTransformer3DModel": (
        "transformer_helios.py forward: the mid and long history tokens take avg_pool3d of their neighbours' cos and "
        "sin (center_down_sample_3d, kernels 2 and 4), which is no rotation at any position (the current and short "
        "history tokens are HeliosRotaryPosEmbed's integer t, h, w grid, interleaved, float32)"),
    "SanaWMTransformer3DModel": (
        "transformer_sana_wm.py: its linear attention rotates q and k in Wan's form (float32 table), but its camera "
        "attention (_apply_ucpe_transform) multiplies the first half of each head by per-token 4x4 ray matrices, "
        "rotates the second half by RoPE re-sliced to head_dim / 2 (_slice_rope_for_cam), and rotates the attention "
        "output back by the conjugate (inverse_rope): a transform of q, k and the output that no q/k spec expresses"),
    "ZImageControlNetModel": (
        "controlnet_z_image.py builds no rotary: it rotates by the freqs_cis its ZImageTransformer2DModel hands in "
        "(use that model's spec)"),
    "FluxMultiControlNetModel": "a list of FluxControlNetModel (each imports as its own class)",
    "QwenImageMultiControlNetModel": "a list of QwenImageControlNetModel (each imports as its own class)",
    "HunyuanDiT2DMultiControlNetModel": "a list of HunyuanDiT2DControlNetModel",
}
