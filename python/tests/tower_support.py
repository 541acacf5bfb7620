"""Transformers' own tower rotary modules and apply functions, as the tests run them: shared by
test_vision.py and the zoo's tower rows (zoo.py). ``tower_error`` is one tower's check: a spec
through the kernel against HF's rotary module + apply function on random q, k and positions."""
import importlib
from typing import Any, Callable, Dict, Tuple

import numpy as np
import torch

from ropejit import _patch_vision as pv
from ropejit import _vision_specs as vs
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

# fp32 q and k, the same float32 angles: two codes, a few ulps of |x| apart
TOLERANCE = 1e-5


def tower_config(model_type, head_dim=None, heads=2, **changes):
    """The library's default config of a tower, with `heads` heads of `head_dim` (default: the
    config's own head width) where the width follows the head count."""
    config = CONFIG_MAPPING[model_type]()
    if model_type == "deepseek_ocr2_vision":
        config = config.encoder_config
    own, _ = vs.tower_sizes(config.to_dict())
    head_dim = head_dim or own
    for name in ("num_heads", "num_attention_heads"):
        if hasattr(config, name) and isinstance(getattr(config, name), int):
            setattr(config, name, heads)
    if getattr(config, "head_dim", None):
        config.head_dim = head_dim
    width = "embed_dim" if isinstance(getattr(config, "embed_dim", None), int) else "hidden_size"
    setattr(config, width, heads * head_dim)
    if model_type == "llama4_vision_model":  # a small fixed grid: (image_size / patch_size)^2 + CLS
        config.image_size, config.patch_size = 5 * config.patch_size, config.patch_size
    for name, value in changes.items():
        setattr(config, name, value)
    return config


def modeling(form):
    short = form.apply.split(".")[0]
    return importlib.import_module(f"transformers.models.{short}.modeling_{short}")


def rotary_of(config, form):
    return getattr(modeling(form), form.rotary)(config)


def hf_positions(form, rng):
    """A fresh random odd grid (HF's token-major [N, A]) at a random offset; [1, S] for one axis."""
    if form.form == "one":
        return torch.tensor(np.sort(rng.choice(4096, size=13, replace=False)))[None]
    rows, cols = int(rng.integers(3, 8)) | 1, int(rng.integers(3, 8)) | 1
    h, w = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    grid = torch.stack((h.flatten(), w.flatten()), -1) + torch.tensor(rng.integers(0, 60, size=2))
    if form.form == "third3":
        grid = torch.cat([torch.cat((torch.full((len(grid), 1), t), grid), -1) for t in (0, int(rng.integers(1, 9)))])
    return grid


def hf_rotation(form, rotary, position_ids, q, k):
    """HF's rotary module and apply function on q, k in the kernel's [1, S, H, D] layout."""
    kind = pv._apply_kind(form)
    function = getattr(modeling(form), form.apply.split(".")[1])
    function = getattr(function, "ropejit_original", function)
    x = torch.zeros(1, 1)
    with torch.no_grad():
        if kind == "complex":
            return function(q, k, rotary(x))
        cos, sin = rotary(x, position_ids)
        if kind == "vision":
            return tuple(t[None] for t in function(q[0], k[0], cos, sin))
        unsqueeze = 0 if cos.dim() == 2 else 1
        out = function(q.transpose(1, 2), k.transpose(1, 2), cos, sin, unsqueeze_dim=unsqueeze)
        return tuple(t.transpose(1, 2) for t in out)


def relative_error(got, want):
    return ((got.double() - want.double()).abs() / want.double().abs().amax(-1, keepdim=True).clamp(min=1.0)).max().item()


def sub_config(config: Any, model_type: str) -> Any:
    """The config object of model_type `model_type` in `config` (itself, or under a vision, video,
    audio, audio-video, encoder or thinker config, depth first), as ``_vision_specs.tower_form``
    names it from the config's dict; None when there is none. (Read from the object:
    PeAudioVideoConfig's ``audio_config`` attribute is no key of its dict.)"""
    if config is None or getattr(config, "model_type", None) == model_type:
        return config
    for name in ("vision_config", "video_config", "audio_config", "audio_video_config", "encoder_config",
                 "thinker_config"):
        found = sub_config(getattr(config, name, None), model_type)
        if found is not None:
            return found
    return None


# a one-axis tower's positions reach 4096: torch's float32 cos/sin there is some 1e-5 off
ONE_AXIS_TOLERANCE = 1e-4


def tower_error(config: Any, form: vs.TowerForm, spec: Dict[str, Any], kernel: Callable, rng: np.random.Generator,
                heads: int = 2) -> Tuple[float, float]:
    """(relative error, tolerance) of `kernel` against HF's rotary module of the tower config
    `config` and its apply function, on a fresh random grid (``hf_positions``; Llama-4: its fixed
    grid) and random fp32 q, k ``[S, heads, D]``. `spec`: the tower's spec dict (``head_dim``);
    ``kernel(q, k, positions)`` takes numpy q, k and the kernel's positions (``[A, S]``; ``[S]``
    for one axis) and returns (q, k). Where HF rotates a slice (partial rotation) the rest of the
    head must pass through unchanged."""
    rotary = rotary_of(config, form)
    position_ids = hf_positions(form, rng)
    positions = pv.tower_positions(form, rotary, position_ids)
    if form.form == "one":
        positions = positions[0]
    seq, head_dim = positions.shape[-1], spec["head_dim"]
    q = torch.from_numpy(rng.standard_normal((1, seq, heads, head_dim), dtype=np.float32))
    k = torch.from_numpy(rng.standard_normal((1, seq, heads, head_dim), dtype=np.float32))
    got = [torch.from_numpy(np.asarray(t))[None] for t in kernel(q[0].numpy(), k[0].numpy(), positions.numpy())]
    error = 0.0
    with torch.no_grad():
        width = rotary(torch.zeros(1, 1), position_ids)[0].shape[-1] if form.form == "one" else head_dim
    if width < head_dim:  # HF's apply takes the rotated slice alone (split off before the call)
        error = max(relative_error(g[..., width:], x[..., width:]) for g, x in zip(got, (q, k)))
        q, k, got = q[..., :width].contiguous(), k[..., :width].contiguous(), [g[..., :width] for g in got]
    want = hf_rotation(form, rotary, position_ids, q, k)
    error = max([error] + [relative_error(g, w) for g, w in zip(got, want)])
    return error, ONE_AXIS_TOLERANCE if form.form == "one" else TOLERANCE
