"""Specs of diffusers transformers' RoPE (``ropejit.Spec.from_diffusers``), read from diffusers 0.42.1.

Each family is decided by the transformer's class name (a model's ``type(model).__name__``, or a
config's ``_class_name``); the rotary configuration is read from the config keys the model's own
rotary module is built from, with the defaults of that class's ``__init__``. The spec runs the
multi-axis positions form (``io.positions = "axes"``): one integer position per axis per token,
``[A, T]``. Nothing is guessed: an unknown class, or a configuration a family's rotary module
does not take the way ropejit reads it, raises ``ropejit.SpecError`` naming the class or key;
families whose rotation no spec expresses are refused by name with the reason
(:data:`REFUSED`).

This module needs neither torch nor diffusers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from . import _ropejit

DIFFUSERS_VERSION = "0.42.1"  # the diffusers release every row below was read from


@dataclass(frozen=True)
class Family:
    """One diffusers family: the config keys its rotary reads (with the class defaults), and
    ``axes(config) -> (pairs per axis, theta per axis, angle, max positions)``."""

    name: str
    source: str  # the rotary module and file in diffusers 0.42.1
    defaults: Mapping[str, Any]
    axes: Callable[[Dict[str, Any], str], Tuple[List[int], List[float], str, int]]


def _pairs_of(dims: Any, key: str, class_name: str, head_dim: int) -> List[int]:
    """Rotary pairs per axis from a diffusers per-axis dim list (each even), covering the head."""
    if not isinstance(dims, (list, tuple)) or not dims or not all(isinstance(d, int) and d > 0 for d in dims):
        raise _spec_error(class_name, key, dims, "a list of positive even integers, one per axis")
    if any(d % 2 for d in dims):
        raise _spec_error(class_name, key, list(dims), "even sizes (each axis rotates whole pairs)")
    if len(dims) > 4:
        raise _spec_error(class_name, key, list(dims), "1 to 4 axes (ropejit's axes form)")
    if sum(dims) != head_dim:
        raise _spec_error(class_name, key, list(dims),
                          f"sizes summing to attention_head_dim = {head_dim} (the whole head rotates)")
    return [d // 2 for d in dims]


def _spec_error(class_name: str, key: str, value: Any, allowed: str) -> Exception:
    return _error(key, f"{class_name}: config {key} = {value!r} is not allowed: must be {allowed}")


def _error(key: str, message: str) -> Exception:
    """A SpecError whose ``issues`` name the config key (``_class_name`` for the family itself)."""
    error = _ropejit.SpecError(message)
    error.issues = [(key, message)]
    return error


def _flux(config: Dict[str, Any], cls: str) -> Tuple[List[int], List[float], str, int]:
    # FluxPosEmbed(theta=10000, axes_dim=axes_dims_rope): get_1d_rotary_pos_embed per axis of the
    # ids, frequencies in float64 (maybe_adjust_dtype_for_device), repeat-interleaved cos/sin.
    pairs = _pairs_of(config["axes_dims_rope"], "axes_dims_rope", cls, config["attention_head_dim"])
    return pairs, [10000.0] * len(pairs), "exact", 4096


def _flux2(config: Dict[str, Any], cls: str) -> Tuple[List[int], List[float], str, int]:
    # Flux2PosEmbed(theta=rope_theta, axes_dim=axes_dims_rope): as Flux, float64 frequencies.
    pairs = _pairs_of(config["axes_dims_rope"], "axes_dims_rope", cls, config["attention_head_dim"])
    theta = _theta(config, "rope_theta", cls)
    return pairs, [theta] * len(pairs), "exact", 4096


def _wan(config: Dict[str, Any], cls: str) -> Tuple[List[int], List[float], str, int]:
    # WanRotaryPosEmbed: h_dim = w_dim = 2 * (D // 6), t_dim = D - h_dim - w_dim; theta 10000;
    # float64 frequencies for positions [0, rope_max_seq_len).
    head_dim = config["attention_head_dim"]
    spatial = 2 * (head_dim // 6)
    temporal = head_dim - 2 * spatial
    if temporal % 2 or spatial == 0:
        raise _spec_error(cls, "attention_head_dim", head_dim, "an even size of at least 6 (t, h and w take pairs)")
    max_len = config["rope_max_seq_len"]
    if not isinstance(max_len, int) or max_len <= 0:
        raise _spec_error(cls, "rope_max_seq_len", max_len, "a positive integer")
    return [temporal // 2, spatial // 2, spatial // 2], [10000.0] * 3, "exact", max_len


def _hunyuan_video(config: Dict[str, Any], cls: str) -> Tuple[List[int], List[float], str, int]:
    # HunyuanVideoRotaryPosEmbed(patch_size, patch_size_t, rope_axes_dim, rope_theta): float32
    # frequencies (get_1d_rotary_pos_embed's default) and a float32 outer product.
    pairs = _pairs_of(config["rope_axes_dim"], "rope_axes_dim", cls, config["attention_head_dim"])
    theta = _theta(config, "rope_theta", cls)
    return pairs, [theta] * len(pairs), "fp32", 4096


def _qwen_image(config: Dict[str, Any], cls: str) -> Tuple[List[int], List[float], str, int]:
    # QwenEmbedRope(theta=10000, axes_dim, scale_rope=True): float32 frequencies, a 4096-row table
    # per sign; image rows and columns are centred (negative positions: see docs/diffusers.md).
    if config["use_layer3d_rope"]:
        raise _spec_error(cls, "use_layer3d_rope", True, "False (QwenEmbedLayer3DRope was not read for ropejit)")
    pairs = _pairs_of(config["axes_dims_rope"], "axes_dims_rope", cls, config["attention_head_dim"])
    return pairs, [10000.0] * len(pairs), "fp32", 4096


def _cogvideox(config: Dict[str, Any], cls: str) -> Tuple[List[int], List[float], str, int]:
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
    head_dim = config["attention_head_dim"]
    dims = [head_dim // 4, head_dim // 8 * 3, head_dim // 8 * 3]
    pairs = _pairs_of(dims, "attention_head_dim (t D/4, h and w 3D/8)", cls, head_dim)
    return pairs, [10000.0] * 3, "fp32", 4096


def _theta(config: Dict[str, Any], key: str, cls: str) -> float:
    theta = config[key]
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 1:
        raise _spec_error(cls, key, theta, "a number above 1")
    return float(theta)


#: class name -> family; each family's defaults are its class's __init__ defaults in diffusers 0.42.1.
FAMILIES: Dict[str, Family] = {
    "FluxTransformer2DModel": Family(
        "flux", "FluxPosEmbed, transformer_flux.py",
        {"attention_head_dim": 128, "num_attention_heads": 24, "axes_dims_rope": (16, 56, 56)}, _flux),
    "Flux2Transformer2DModel": Family(
        "flux2", "Flux2PosEmbed, transformer_flux2.py",
        {"attention_head_dim": 128, "num_attention_heads": 48, "axes_dims_rope": (32, 32, 32, 32),
         "rope_theta": 2000}, _flux2),
    "WanTransformer3DModel": Family(
        "wan", "WanRotaryPosEmbed, transformer_wan.py",
        {"attention_head_dim": 128, "num_attention_heads": 40, "rope_max_seq_len": 1024}, _wan),
    "HunyuanVideoTransformer3DModel": Family(
        "hunyuan-video", "HunyuanVideoRotaryPosEmbed, transformer_hunyuan_video.py",
        {"attention_head_dim": 128, "num_attention_heads": 24, "rope_axes_dim": (16, 56, 56),
         "rope_theta": 256.0}, _hunyuan_video),
    "QwenImageTransformer2DModel": Family(
        "qwen-image", "QwenEmbedRope, transformer_qwenimage.py",
        {"attention_head_dim": 128, "num_attention_heads": 24, "axes_dims_rope": (16, 56, 56),
         "use_layer3d_rope": False}, _qwen_image),
    "CogVideoXTransformer3DModel": Family(
        "cogvideox", "get_3d_rotary_pos_embed (embeddings.py), built by pipeline_cogvideox.py",
        {"attention_head_dim": 64, "num_attention_heads": 30, "patch_size_t": None,
         "use_rotary_positional_embeddings": False}, _cogvideox),
}

#: class name -> why no spec expresses its RoPE.
REFUSED: Dict[str, str] = {
    "LTXVideoTransformer3DModel": (
        "LTX-Video's rotary (LTXVideoRotaryPosEmbed) takes float, affine positions (frame / 20 and pixel / 2048 "
        "scaled by the VAE and patch sizes, as 2g - 1), frequencies (pi/2) * theta^(j/(F-1)) that are not "
        "theta^(-2j/d), axes alternating per pair, and 2 pass-through dims, all over the whole inner dim"),
    "LTX2VideoTransformer3DModel": (
        "LTX-2 uses LTX-Video's rotary form (float affine positions, (pi/2) * theta^(j/(F-1)) frequencies) "
        "for its audio and video streams"),
    "MochiTransformer3DModel": (
        "Mochi's rotary (MochiRoPE) has learned frequencies: each pair's angle is a per-head linear combination "
        "of three float positions (pos_frequencies [3, H, D/2]), not one axis and a theta"),
}


def _config_dict(config_or_model: Any) -> Tuple[Dict[str, Any], Optional[str]]:
    """The config as a plain dict and the class name it names (a model's own class first)."""
    config = getattr(config_or_model, "config", None)
    class_name: Optional[str] = None
    if config is not None and not isinstance(config_or_model, Mapping):  # a diffusers model instance
        class_name = type(config_or_model).__name__
    else:
        config = config_or_model
    if not isinstance(config, Mapping):
        raise TypeError("from_diffusers: expected a diffusers transformer, its config (dict or FrozenDict), "
                        f"not {type(config_or_model).__name__}")
    config = dict(config)
    return config, class_name or config.get("_class_name")


def family_of(config_or_model: Any, class_name: Optional[str] = None) -> Tuple[str, Family, Dict[str, Any]]:
    """(class name, family, config with the class defaults filled) of a diffusers transformer or
    config. Raises SpecError for a refused family (with the reason) or an unknown class."""
    config, named = _config_dict(config_or_model)
    name = class_name or named
    if not name:
        raise _error("_class_name", "from_diffusers: the config has no _class_name (a model's own config, "
                     "model.config, has none): pass the model itself, or class_name= (one of "
                     + ", ".join(sorted(FAMILIES)) + ")")
    if name in REFUSED:
        raise _error("_class_name", f"{name} is refused: {REFUSED[name]}")
    family = FAMILIES.get(name)
    if family is None:
        raise _error(
            "_class_name", f"{name}: transformer class not in ropejit's diffusers family table (read from diffusers "
            f"{DIFFUSERS_VERSION}): must be one of {', '.join(sorted(FAMILIES))}; refused by name: "
            + ", ".join(sorted(REFUSED)))
    filled = {key: config.get(key, default) for key, default in family.defaults.items()}
    for key in ("attention_head_dim", "num_attention_heads"):
        value = filled[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise _spec_error(name, key, value, "a positive integer")
    return name, family, filled


def spec_dict(config_or_model: Any, *, dtype: Optional[str] = None, name: str = "",
              class_name: Optional[str] = None) -> Dict[str, Any]:
    """The spec JSON (a dict, not yet validated) of a diffusers transformer or its config."""
    cls, family, config = family_of(config_or_model, class_name)
    pairs, thetas, angle, max_positions = family.axes(config, cls)
    heads = config["num_attention_heads"]
    head_dim = config["attention_head_dim"]
    return {
        "name": name or f"diffusers-{family.name}",
        "head_dim": head_dim, "rotary_dim": head_dim,
        "num_q_heads": heads, "num_kv_heads": heads,
        "layout": "interleaved",  # diffusers' use_real_unbind_dim=-1 / repeat_interleave_real form
        "dtype": dtype or "bf16",
        "max_position_embeddings": max_positions,
        "angle": angle,
        "rope": {"rope_type": "default", "rope_theta": thetas[0]},
        "io": {"positions": "axes",
               "axes": {"pairs": pairs, "theta": thetas, "frequencies": "own", "placement": "contiguous"}},
    }
