"""The model zoo: every model_type of the installed transformers whose modeling module has a text
rotary embedding, its default config object (the text config of composite ones) per rope layer
type, imported with ``Spec.from_hf`` and run through the kernel on the host backend, against
HF's own rotary module and apply function. Vision and audio towers (and model types with tower
rotary classes only) are tower rows: ``Spec.from_hf(config, tower=...)`` against the tower's own
rotary module and apply function (check_tower; docs/vision-towers.md, "In the zoo"). Used by
test_zoo.py and by ``python zoo.py`` (which prints the table; ``--variants`` adds each matching
text row's rope-type variants, zoo_variants.py)."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

import ropejit
import vision_table
from ropejit import _hf_probe as hfp
from ropejit import _vision_specs as vs

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
    path: str = "table"         # table: the C++ family table; probe: learned from HF's code; tower: check_tower
    compared: str = "q, k"      # what was compared with HF
    kind: str = ""              # the row's kind (layout, import path, rope block form): row_kind()


def candidates() -> Iterator[Tuple[str, Any]]:
    """(model_type, config class) for every model_type with a text rotary class, or with tower
    rotary classes only (vision_table.rotary_classes: Pixtral, Kimi-K2.5, PE-Audio, SAM2-video, ...)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type in sorted(CONFIG_MAPPING.keys()):
        module = hfp.modeling_module(model_type)
        if module is None or not (hfp.rotary_classes(module) or vision_table.rotary_classes(model_type)[0]):
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
    sign = -1.0 if hf.inverse else 1.0  # nanochat turns the other way
    cos, sin = np.cos(angle)[:, None, :] * hf.attention_factor, sign * np.sin(angle)[:, None, :] * hf.attention_factor
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


def shape_mismatch(spec: ropejit.Spec, hf: hfp.HfRope) -> Optional[str]:
    """What differs in head_dim, layout or rotated dims (None when they agree)."""
    if spec.head_dim == hf.rotary_dim < hf.head_dim and hf.apply.__name__.endswith("_interleave"):
        # MLA: the spec's head is the rope slice HF's attention splits off (q_rot, k_rot) and rotates.
        hf.head_dim = hf.call_width = hf.rotary_dim
    if spec.head_dim != hf.head_dim:
        return f"head_dim {spec.head_dim}, HF {hf.head_dim}"
    if spec.layout != hf.layout:
        return f"layout {spec.layout}, HF pairs {hf.layout}"
    if spec.rotary_dim != hf.rotary_dim:
        return f"rotary_dim {spec.rotary_dim}, HF rotates {hf.rotary_dim}"
    if bool(spec.to_dict().get("inverse", False)) != hf.inverse:
        return f"inverse {spec.to_dict().get('inverse', False)}, HF rotates by {'-' if hf.inverse else '+'}angle"
    return None


def freq_mismatch(ours: np.ndarray, attention: float, hf_inv_freq: np.ndarray, hf_attention: float) -> Optional[str]:
    """What differs in inv_freq (beyond FREQ_ULPS) or the attention factor (None when they agree)."""
    ours = ours[: len(hf_inv_freq)]
    nonzero = hf_inv_freq != 0
    ulps = np.abs(ours - hf_inv_freq)[nonzero] / np.spacing(hf_inv_freq[nonzero].astype(np.float32)).astype(np.float64)
    if len(ours) != len(hf_inv_freq) or (ulps.size and ulps.max() > FREQ_ULPS):
        return f"inv_freq differs by up to {ulps.max() if ulps.size else float('nan'):.3g} ulp"
    if abs(attention - hf_attention) > 1e-6 * max(1.0, hf_attention):
        return f"attention factor {attention:.9g}, HF {hf_attention:.9g}"
    return None


def compare(spec: ropejit.Spec, hf: hfp.HfRope, runtime: ropejit.Runtime, config: Any,
            rng: np.random.Generator) -> Optional[str]:
    """None when ropejit matches HF; else what differs."""
    why = shape_mismatch(spec, hf)
    if why:
        return why
    freqs = spec.freqs()
    ours = np.asarray(freqs["inv_freq"], dtype=np.float64)[: len(hf.inv_freq)]
    why = freq_mismatch(ours, freqs["attention_factor"], hf.inv_freq, hf.attention_factor)
    if why:
        return why
    hf_sections = getattr(hf.rotary, "mrope_section", None)
    if hf_sections is not None and not is_mrope(spec):
        return f"imported with one position stream; HF's rotary mixes three (mrope_section {list(hf_sections)})"
    positions = _positions(spec)
    if is_mrope(spec):  # the formula past SMALL has no sections
        positions = positions[positions < SMALL]
    return rotation_mismatch(spec, hf, runtime, config, rng, positions, ours, hf.attention_factor)


def is_mrope(spec: ropejit.Spec) -> bool:
    """Whether the spec rotates by three position streams (io.positions "mrope")."""
    return spec.to_dict().get("io", {}).get("positions") == "mrope"


def rotation_mismatch(spec: ropejit.Spec, hf: hfp.HfRope, runtime: ropejit.Runtime, config: Any,
                      rng: np.random.Generator, positions: np.ndarray, inv_freq: np.ndarray,
                      attention: float) -> Optional[str]:
    """q and k through the kernel (seq_len = HF's run length, max position + 1) against HF's rotary
    and apply function on one batch of `positions`; from SMALL on against HF's formula with
    `inv_freq` (ropejit's, checked against HF's) and `attention`. Multimodal rows compare below
    SMALL only (the formula has no sections), the larger positions still set the run length."""
    import torch

    mrope = is_mrope(spec)
    hf_positions = hfp.position_ids_for(config, positions, mrope)
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
    # than the tolerance (docs/hf-import.md, "Learning a family from transformers, and the zoo"):
    # there the reference is HF's formula, fp32(p) * inv_freq in float32, with ropejit's correctly
    # rounded inv_freq and cos/sin in float64.
    large = positions >= SMALL
    if large.any() and not mrope:
        scaled = dataclasses.replace(hf, attention_factor=attention)
        want_q[large] = exact_rotation(q[large], positions[large], scaled, inv_freq)
        want_k[large] = exact_rotation(k[large], positions[large], scaled, inv_freq)
    kept = ~large if mrope else np.ones(len(positions), dtype=bool)
    for name, got, want in (("q", q_out, want_q), ("k", k_out, want_k)):
        diff = np.abs(np.asarray(got, dtype=np.float64)[kept] - want[kept])
        error = diff.max() / max(1.0, np.abs(want[kept]).max())
        if not error <= TOLERANCE:
            where = np.unravel_index(np.argmax(diff), diff.shape)
            return f"{name} differs from HF by {error:.3g} (position {positions[kept][where[0]]}, dim {where[2]})"
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
    row.kind = row_kind(row, spec, hf)
    return checked(row, lambda: compare(spec, hf, runtime, hfp.text_config(config), rng))


def checked(row: Row, check: Callable[[], Optional[str]]) -> Row:
    """`row` after `check()` (a mismatch's description, or None): refused where ropejit refuses the
    launch, a mismatch where the comparison itself fails."""
    try:
        mismatch = check()
    except ropejit.Error as e:
        row.result, row.reason = "refused", "launch: " + _short(e)
        return row
    except Exception as e:  # noqa: BLE001 - HF's function failing on our shapes is a finding too
        row.result, row.reason = "mismatch", f"comparison failed: {type(e).__name__}: {_short(e)}"
        return row
    if mismatch:
        row.result, row.reason = "mismatch", mismatch
    return row


def row_kind(row: Row, spec: ropejit.Spec, hf: hfp.HfRope) -> str:
    """What distinguishes how a row's rope is built: layout, import path, the rope block's form
    (one block or per layer type, multimodal sections), MLA slice, partial or proportional
    rotation, complex freqs_cis. The zoo's variant test runs one row per kind."""
    words = [spec.layout, row.path, "per-layer" if row.layer_type != "-" else "one-block"]
    words += ["mrope"] if is_mrope(spec) else []
    words += ["mla"] if hf.apply.__name__.endswith("_interleave") else []
    words += ["proportional"] if spec.rope_type == "proportional" else []
    words += ["partial"] if hf.rotary_dim < hf.head_dim else []
    words += ["complex"] if hf.complex_freqs else []
    return "/".join(words)


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
            if is_tower(model_type, config, text):
                rows.append(check_tower(model_type, config, runtime, rng))
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


def is_tower(model_type: str, config: Any, text: Any) -> bool:
    """A row for the tower import (check_tower): a model_type of the tower tables
    (_vision_specs TOWERS, REFUSED, NO_TOWER), one whose modeling module has tower rotary classes
    only, or a config that is no text decoder's."""
    if model_type in vs.TOWERS or model_type in vs.REFUSED or model_type in vs.NO_TOWER:
        return True
    return not hfp.rotary_classes(hfp.modeling_module(model_type)) or not _is_text_decoder(text)


def _has_rope_block(config: Any) -> bool:
    """The config, or a tower config it holds, carries a rope block (rope_parameters, rope_theta)."""
    for sub in [config] + [getattr(config, name, None) for name in ("vision_config", "audio_config", "encoder_config")]:
        block = getattr(sub, "rope_parameters", None)
        if getattr(sub, "rope_theta", None) is not None or (isinstance(block, dict) and "rope_theta" in block):
            return True
    return False


def check_tower(model_type: str, config: Any, runtime: ropejit.Runtime, rng: np.random.Generator) -> Row:
    """A tower row: ``Spec.from_hf(config, tower=...)`` (vision, then audio) through the kernel
    against HF's own tower rotary module and apply function on a random grid and random q, k
    (tower_support.tower_error). Refused with the import's reason (a tower the spec cannot
    express, or a rope block of a tower ropejit does not know); excluded when the config holds
    no rotary (_vision_specs.NO_TOWER) or no rope block."""
    import tower_support

    row = Row(model_type, path="tower", compared="q, k (tower)")
    reason = ""
    for tower in vs.TOWER_KINDS:
        try:
            spec = ropejit.Spec.from_hf(config, tower=tower, dtype="fp32")
            break
        except ropejit.UnsupportedError as e:
            row.result, row.reason = "refused", _short(e)
            return row
        except ropejit.Error as e:  # as vision_table.import_result: the audio reason after "no vision_config"
            reason = _short(e) if not reason or "has no vision_config" in reason else reason
    else:
        if model_type in vs.NO_TOWER:
            row.result, row.reason = "excluded", reason
        elif _has_rope_block(config):
            row.result, row.reason = "refused", reason
        else:
            row.result, row.reason = "excluded", (f"{type(config).__name__} has no rope block (rope_parameters, "
                                                  "rope_theta) and is no tower ropejit knows")
        return row
    tower_type, form = vs.tower_form(config, tower)
    row.kind = f"tower/{form.form}/{form.placement}/{form.layout}"
    spec_dict = spec.to_dict()
    io = {key: value for key, value in spec_dict.get("io", {}).items() if key in ("positions", "axes")}
    launch = dict(spec_dict, name="zoo-tower", dtype="fp32", num_q_heads=2, num_kv_heads=2,
                  io=dict(io, output="separate"))

    def check() -> Optional[str]:
        kernel = runtime.get(ropejit.Spec.from_json(launch))

        def rotate(q: np.ndarray, k: np.ndarray, positions: np.ndarray) -> Tuple[Any, Any]:
            positions = np.ascontiguousarray(positions, dtype=np.int64)  # HF's [N, A] columns, axis-major
            return kernel(q, k, positions=positions, seq_len=int(positions.max()) + 1)[:2]

        sub = tower_support.sub_config(config, tower_type)
        error, tolerance = tower_support.tower_error(sub, form, spec_dict, rotate, rng)
        if error <= tolerance:
            return None
        return f"{tower_type}: q or k differs from HF's {form.rotary} + {form.apply} by {error:.3g} (tolerance {tolerance:g})"

    return checked(row, check)


def summary(rows: List[Row]) -> str:
    """`M of N rope families match (T of U towers)`: N counts every row not excluded, towers included."""
    families = [r for r in rows if r.result != "excluded"]
    matched = [r for r in families if r.result == "match"]
    towers = [r for r in families if r.path == "tower"]
    return (f"{len(matched)} of {len(families)} rope families match "
            f"({sum(r.result == 'match' for r in towers)} of {len(towers)} vision/audio towers)")


def counts(rows: List[Row]) -> Dict[str, int]:
    """Rows per result: match, refused, mismatch, excluded."""
    return {result: sum(r.result == result for r in rows) for result in ("match", "refused", "mismatch", "excluded")}


def table(rows: List[Row]) -> str:
    lines = [summary(rows), "", "| family | layer type | result | import | reason |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.family} | {r.layer_type} | {r.result} | {r.path if r.result != 'excluded' else '-'} "
                     f"| {r.reason.replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: List[str]) -> None:
    """``python zoo.py [--variants] [model_type ...]``: prints the table (and with --variants the
    rope-type variants of every matching row, also written to build/zoo-variants.md)."""
    variants = "--variants" in argv
    only = [a for a in argv if a != "--variants"] or None
    rt = ropejit.Runtime("host", cache_dir=os.environ.get("ROPEJIT_CACHE_DIR"))
    result = run(rt, only)
    print(table(result))
    with open(os.environ.get("ZOO_JSON", "/tmp/zoo_rows.json"), "w") as f:
        json.dump([asdict(r) for r in result], f, indent=1)
    if variants:
        import zoo_variants

        runs = zoo_variants.run(rt, result)
        text = zoo_variants.table(runs)
        print("\n" + text)
        out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                           os.environ.get("ROPEJIT_BUILD_DIR", "build"), "zoo-variants.md")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            f.write(text + "\n")
        with open(os.environ.get("ZOO_VARIANTS_JSON", "/tmp/zoo_variants.json"), "w") as f:
            json.dump([asdict(r) for r in runs], f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
