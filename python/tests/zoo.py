"""The model zoo: every model_type of the installed transformers whose modeling module has a text
rotary embedding, its default config object (the text config of composite ones) per rope layer
type, imported with ``Spec.from_hf`` and run through the kernel on the host backend, against
HF's own rotary module and apply function. Used by test_zoo.py and by ``python zoo.py`` (which
prints the table)."""
from __future__ import annotations

import copy
import json
import logging
import os
import sys
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

import ropejit
from ropejit import _hf_probe as hfp

# Relative tolerance of q and k against HF (both fp32): the same fp32 angle, two cos/sin codes.
TOLERANCE = 2e-5
# inv_freq: ropejit takes the float32 power correctly rounded, torch's powf may be an ulp off.
FREQ_ULPS = 4


@dataclass
class Row:
    """One (model_type, layer type) of the zoo."""

    family: str
    layer_type: str = "-"
    result: str = "match"       # match | refused | mismatch | excluded
    reason: str = ""
    path: str = "table"         # table: the C++ family table; probe: learned from HF's code
    compared: str = "q, k"      # what was compared with HF


def candidates() -> Iterator[Tuple[str, Any]]:
    """(model_type, default config object) for every model_type with a text rotary class."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type in sorted(CONFIG_MAPPING.keys()):
        module = hfp.modeling_module(model_type)
        if module is None or not hfp.rotary_classes(module):
            continue
        yield model_type, CONFIG_MAPPING[model_type]


def _positions(spec: ropejit.Spec) -> np.ndarray:
    last = max(spec.max_position_embeddings - 1, 8)
    return np.array(sorted({0, 1, 2, 3, 17, 100, 1000, last // 2, last, last + 1, 3 * last, 65535, 1 << 20}),
                    dtype=np.int64)


# Positions from which the reference takes cos/sin in float64 instead of torch's float32 cos/sin.
SMALL = 1 << 12


def exact_rotation(x: np.ndarray, positions: np.ndarray, hf: hfp.HfRope, inv_freq: np.ndarray) -> np.ndarray:
    """x [T, H, D] rotated in float64 by HF's float32 angles fp32(p) * inv_freq, in HF's pairing.
    `inv_freq` is ropejit's (the float32 power correctly rounded; compare() checks it against HF's
    within FREQ_ULPS): at p = 2^20 torch's one-ulp-off power alone moves an angle by 3e-5 rad."""
    inv = inv_freq.astype(np.float32)
    angle = (positions.astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)  # [T, pairs]
    cos, sin = np.cos(angle)[:, None, :] * hf.attention_factor, np.sin(angle)[:, None, :] * hf.attention_factor
    out = x.astype(np.float64).copy()
    pairs = len(inv)
    first = np.arange(pairs) * 2 if hf.layout == "interleaved" else np.arange(pairs)
    second = first + (1 if hf.layout == "interleaved" else hf.stride)
    a, b = out[..., first].copy(), out[..., second].copy()
    out[..., first] = a * cos - b * sin
    out[..., second] = b * cos + a * sin
    return out


def _kernel_spec(spec: ropejit.Spec) -> Dict[str, Any]:
    """The spec as the zoo launches it: fp32, separate outputs, no QK-norm (HF norms before RoPE)."""
    d = spec.to_dict()
    d.pop("qk_norm", None)
    io = {key: value for key, value in d.get("io", {}).items() if key in ("positions", "mrope_section",
                                                                          "mrope_interleaved")}
    io["output"] = "separate"
    return dict(d, name="zoo", dtype="fp32", io=io)


def compare(spec: ropejit.Spec, hf: hfp.HfRope, runtime: ropejit.Runtime, config: Any,
            rng: np.random.Generator) -> Optional[str]:
    """None when ropejit matches HF; else what differs."""
    import torch

    if spec.head_dim == hf.rotary_dim < hf.head_dim and hf.apply.__name__.endswith("_interleave"):
        # MLA: the spec's head is the rope slice HF's attention splits off (q_rot, k_rot) and rotates.
        hf.head_dim = hf.call_width = hf.rotary_dim
    if spec.head_dim != hf.head_dim:
        return f"head_dim {spec.head_dim}, HF {hf.head_dim}"
    if spec.layout != hf.layout:
        return f"layout {spec.layout}, HF pairs {hf.layout}"
    if spec.rotary_dim != hf.rotary_dim:
        return f"rotary_dim {spec.rotary_dim}, HF rotates {hf.rotary_dim}"
    freqs = spec.freqs()
    ours = np.asarray(freqs["inv_freq"], dtype=np.float64)[: len(hf.inv_freq)]
    nonzero = hf.inv_freq != 0
    ulps = np.abs(ours - hf.inv_freq)[nonzero] / np.spacing(hf.inv_freq[nonzero].astype(np.float32)).astype(np.float64)
    if len(ours) != len(hf.inv_freq) or (ulps.size and ulps.max() > FREQ_ULPS):
        return f"inv_freq differs by up to {ulps.max() if ulps.size else float('nan'):.3g} ulp"
    if abs(freqs["attention_factor"] - hf.attention_factor) > 1e-6 * max(1.0, hf.attention_factor):
        return f"attention factor {freqs['attention_factor']:.9g}, HF {hf.attention_factor:.9g}"
    all_positions = _positions(spec)
    mrope = hfp.mrope_section(config) is not None
    positions = all_positions[all_positions < SMALL] if mrope else all_positions
    hf_positions = hfp.position_ids_for(config, positions)
    q = rng.standard_normal((len(positions), spec.num_q_heads, spec.head_dim)).astype(np.float32)
    k = rng.standard_normal((len(positions), spec.num_kv_heads, spec.head_dim)).astype(np.float32)
    kernel = runtime.get(ropejit.Spec.from_json(_kernel_spec(spec)))
    ours_positions = hf_positions.reshape(-1, len(positions)).numpy().astype(np.int64)
    if ours_positions.shape[0] == 1:
        ours_positions = ours_positions[0]
    q_out, k_out = kernel(q, k, positions=ours_positions, seq_len=int(hf_positions.max()) + 1)[:2]
    want_q, want_k = hfp.hf_rotate(hf, torch.from_numpy(q)[None], torch.from_numpy(k)[None], hf_positions)
    want_q, want_k = want_q[0].double().numpy(), want_k[0].double().numpy()
    # From 2^12 on torch's float32 cos/sin and its float32 pow (an ulp off) move HF's result by more
    # than the tolerance (docs/spec.md, "The zoo"): there the reference is HF's formula, fp32(p) *
    # inv_freq in float32, with ropejit's correctly rounded inv_freq and cos/sin in float64.
    large = positions >= SMALL
    if large.any():
        want_q[large] = exact_rotation(q[large], positions[large], hf, ours)
        want_k[large] = exact_rotation(k[large], positions[large], hf, ours)
    for name, got, want in (("q", q_out, want_q), ("k", k_out, want_k)):
        error = np.abs(np.asarray(got, dtype=np.float64) - want).max() / max(1.0, np.abs(want).max())
        if not error <= TOLERANCE:
            where = np.unravel_index(np.argmax(np.abs(np.asarray(got, dtype=np.float64) - want)), want.shape)
            return f"{name} differs from HF by {error:.3g} (position {positions[where[0]]}, dim {where[2]})"
    return None


def check(model_type: str, config: Any, layer_type: Optional[str], runtime: ropejit.Runtime,
          rng: np.random.Generator) -> Row:
    row = Row(model_type, layer_type or "-")
    try:
        hf = hfp.probe(config, layer_type)
    except hfp.ProbeError as e:
        if "rotates by -angle" in str(e):  # HF runs it, ropejit has no such form: a refusal
            row.result, row.reason = "refused", f"HF's rotation is no ropejit form: {_short(e)}"
            return row
        row.result, row.reason = "excluded", f"HF's rotary cannot run on the default config: {_short(e)}"
        return row
    except Exception as e:  # noqa: BLE001 - HF's own code fails on its default config
        row.result, row.reason = "excluded", f"HF's rotary cannot run on the default config: {_short(e)}"
        return row
    try:
        spec = ropejit.Spec.from_hf(config, dtype="fp32", **({"layer_type": layer_type} if layer_type else {}))
    except (ropejit.Error, TypeError) as e:
        row.result, row.reason = "refused", _short(e)
        return row
    row.path = "probe" if getattr(spec, "learned", False) else "table"
    try:
        mismatch = compare(spec, hf, runtime, hfp.text_config(config), rng)
    except ropejit.Error as e:
        row.result, row.reason = "refused", "launch: " + _short(e)
        return row
    except Exception as e:  # noqa: BLE001 - HF's function failing on our shapes is a finding too
        row.result, row.reason = "mismatch", f"comparison failed: {type(e).__name__}: {_short(e)}"
        return row
    if mismatch:
        row.result, row.reason = "mismatch", mismatch
    return row


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 240 else text[:237] + "..."


def run(runtime: ropejit.Runtime, only: Optional[List[str]] = None) -> List[Row]:
    """Every zoo row (one per model_type and rope layer type)."""
    logging.disable(logging.WARNING)
    rows: List[Row] = []
    rng = np.random.default_rng(2026)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type, config_class in candidates():
            if only and model_type not in only:
                continue
            try:
                config = config_class()
                text = hfp.text_config(config)
                layer_types = hfp.rope_layer_types(text)
            except Exception as e:  # noqa: BLE001
                rows.append(Row(model_type, "-", "excluded", f"the default config does not build: {_short(e)}"))
                continue
            if not _is_text_decoder(text):
                rows.append(Row(model_type, "-", "excluded", f"{type(text).__name__} is no text model's config "
                                                             "(a vision, audio or codec tower)"))
                continue
            for layer_type in layer_types:
                rows.append(check(model_type, config, layer_type, runtime, rng))
    return rows


def _is_text_decoder(config: Any) -> bool:
    """A config of a model that rotates text tokens: it has attention heads and a rope block."""
    name = type(config).__name__
    if any(word in name for word in ("Vision", "Audio", "VQ", "Encoder", "Perceiver", "Adapter", "BigVGAN",
                                     "Token2Wav", "DiT", "Tokenizer")):
        return False
    return getattr(config, "rope_parameters", None) is not None or hasattr(config, "rope_theta")


def summary(rows: List[Row]) -> str:
    families = [r for r in rows if r.result != "excluded"]
    matched = [r for r in families if r.result == "match"]
    return f"{len(matched)} of {len(families)} rope families match"


def table(rows: List[Row]) -> str:
    lines = [summary(rows), "", "| family | layer type | result | import | reason |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.family} | {r.layer_type} | {r.result} | {r.path if r.result != 'excluded' else '-'} "
                     f"| {r.reason.replace('|', '/')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    rt = ropejit.Runtime("host", cache_dir=os.environ.get("ROPEJIT_CACHE_DIR"))
    result = run(rt, sys.argv[1:] or None)
    print(table(result))
    with open(os.environ.get("ZOO_JSON", "/tmp/zoo_rows.json"), "w") as f:
        json.dump([asdict(r) for r in result], f, indent=1)
