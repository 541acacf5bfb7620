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

from typing import Any, Dict, Mapping, Optional, Tuple

from ._diffusers_families import FAMILIES, REFUSED, Family, _error, _spec_error  # noqa: F401  (re-exported)

DIFFUSERS_VERSION = "0.42.1"  # the diffusers release every row was read from


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
    return name, family, filled


def spec_dict(config_or_model: Any, *, dtype: Optional[str] = None, name: str = "",
              class_name: Optional[str] = None) -> Dict[str, Any]:
    """The spec JSON (a dict, not yet validated) of a diffusers transformer or its config."""
    cls, family, config = family_of(config_or_model, class_name)
    axes = family.axes(config, cls)
    return {
        "name": name or f"diffusers-{family.name}",
        "head_dim": axes["head_dim"], "rotary_dim": axes["rotary_dim"],
        "num_q_heads": axes["heads"], "num_kv_heads": axes["kv_heads"],
        "layout": axes["layout"],  # interleaved: use_real_unbind_dim=-1 / complex; neox: -2 / rotate_half
        "dtype": dtype or "bf16",
        "max_position_embeddings": axes["max"],
        "angle": axes["angle"],
        "rope": axes.get("rope") or {"rope_type": "default", "rope_theta": axes["theta"][0]},
        "io": axes.get("io") or {"positions": "axes",
                                 "axes": {"pairs": axes["pairs"], "theta": axes["theta"], "frequencies": "own",
                                          "placement": "contiguous"}},
    }
