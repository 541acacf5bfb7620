"""The vision/audio tower table of docs/vision-towers.md: every model_type of the installed
transformers whose modeling module defines rotary classes of towers only (no text rotary), each
either imported by ``Spec.from_hf(config, tower=...)`` or refused naming it; then the towers of
multimodal models that also have a text rotary. ``python vision_table.py`` prints the markdown."""
from __future__ import annotations

import importlib
import inspect
import logging
import re
import warnings
from typing import Any, List, Tuple

import ropejit
from ropejit import _vision_specs as vs
from ropejit._patch_vision import tower_rotary_names

# Rotary classes named for a tower that serve a text decoder (read in their modeling modules).
TEXT_ROTARIES = {"Granite4VisionTextRotaryEmbedding", "HiggsAudioV2RotaryEmbedding"}
TOWER_WORDS = ("Vision", "Audio", "Encoder", "ViT", "Conformer", "DiT", "SaProt", "Patch")


def _module(model_type: str) -> Any:
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    try:
        return importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    except Exception:  # noqa: BLE001 - a module that does not import defines no rotary class
        return None


def _is_text(name: str) -> bool:
    return name in TEXT_ROTARIES or (name.endswith("RotaryEmbedding") and not any(w in name for w in TOWER_WORDS)
                                     and name not in tower_rotary_names())


def rotary_classes(model_type: str) -> Tuple[List[str], List[str]]:
    """(tower rotary classes, text rotary classes) defined in the model_type's modeling module."""
    module = _module(model_type)
    if module is None:
        return [], []
    names = [n for n, c in vars(module).items() if inspect.isclass(c) and c.__module__ == module.__name__
             and re.search("rotary|rope", n, re.I)]
    text = [n for n in names if _is_text(n)]
    return [n for n in names if n not in text], text


def import_result(config: Any) -> Tuple[str, str]:
    """("imported", what) or ("refused", the error's first line) for a config, vision then audio."""
    result = ("refused", "")
    for tower in ("vision", "audio"):
        try:
            spec = ropejit.Spec.from_hf(config, tower=tower)
        except ropejit.Error as e:
            message = str(e).splitlines()[0]
            if result[1] == "" or "has no vision_config" in result[1]:
                result = ("refused", message)
            continue
        axes = spec.io.get("axes")
        form = (f"axes {axes['pairs']} {axes['frequencies']} {axes['placement']}" if axes else
                f"one axis, rotary_dim {spec.rotary_dim}") + f", {spec.layout}"
        return "imported", f"`{spec.name}`: {form}"
    return result


def rows() -> List[Tuple[str, str, str, str]]:
    """(model_type, tower rotary classes, result, detail) for every model_type whose only rotary
    classes are towers'."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    logging.disable(logging.WARNING)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in sorted(CONFIG_MAPPING.keys()):
            towers, text = rotary_classes(model_type)
            if not towers or text:
                continue
            try:
                config = CONFIG_MAPPING[model_type]()
            except Exception as e:  # noqa: BLE001
                out.append((model_type, ", ".join(towers), "refused", f"the default config does not build: {e}"))
                continue
            out.append((model_type, ", ".join(towers)) + import_result(config))
    return out


def multimodal_rows() -> List[Tuple[str, str, str]]:
    """(tower model_type, result, detail) for the towers in TOWERS / REFUSED that the first table
    does not show (those of models with a text rotary as well)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    shown = {r[0] for r in rows()}
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type in sorted(set(vs.TOWERS) | set(vs.REFUSED)):
            if model_type in shown or model_type not in CONFIG_MAPPING:
                continue
            out.append((model_type,) + import_result(CONFIG_MAPPING[model_type]()))
    return out


def markdown() -> str:
    first = rows()
    imported = sum(r[2] == "imported" for r in first)
    lines = [f"{len(first)} model types; {imported} imported, {len(first) - imported} refused.", "",
             "| model_type | tower rotary classes | result | spec / reason |", "|---|---|---|---|"]
    lines += [f"| `{r[0]}` | {r[1]} | {r[2]} | {r[3]} |" for r in first]
    second = multimodal_rows()
    imported = sum(r[1] == "imported" for r in second)
    lines += ["", f"Towers of models that also have a text rotary: {len(second)}; {imported} imported, "
              f"{len(second) - imported} refused.", "", "| tower model_type | result | spec / reason |", "|---|---|---|"]
    lines += [f"| `{r[0]}` | {r[1]} | {r[2]} |" for r in second]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
