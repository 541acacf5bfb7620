"""Rope-type variants of the zoo: each matching (family, layer type) of zoo.py run again with its
rope block replaced by each rope type (linear, dynamic at and past the trained length, yarn with
and without truncate, llama3, longrope below and above its switch), HF's rotary module built from
the edited config object and ``Spec.from_hf`` importing the same object. Used by test_zoo.py (on
one row per row kind, see subset()) and by ``python zoo.py --variants`` (every matching row)."""
from __future__ import annotations

import copy
import dataclasses
import logging
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import ropejit
from ropejit import _hf_probe as hfp

import zoo

# The variants, in table order: (name, what the run shows).
VARIANTS: Tuple[Tuple[str, str], ...] = (
    ("linear", "factor 2"),
    ("dynamic_at", "factor 2, run length M (the default table)"),
    ("dynamic_beyond", "factor 2, run length past M (the grown base)"),
    ("yarn", "factor 4, O = M/4, truncate (default)"),
    ("yarn_no_truncate", "factor 4, O = M/4, truncate false (GPT-OSS)"),
    ("llama3", "factor 8, low 1, high 4, O = M/4"),
    ("longrope_short", "O = M/4, run length O (short factors)"),
    ("longrope_long", "O = M/4, run length past M (long factors)"),
)
RESULTS = ("match", "refused", "not applicable", "mismatch")
# Block keys that are no rope-type parameter: kept from the family's own block.
KEPT_KEYS = ("rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved")
# PhiMoE's config class requires these for every non-default type; Phi-3.5-MoE ships 1.243 for both,
# two values here show which one HF picks at each run length.
FAMILY_KEYS: Dict[str, Dict[str, float]] = {"phimoe": {"short_mscale": 1.1, "long_mscale": 1.243163121016122}}


@dataclass
class VariantRow:
    """One (family, layer type, variant) run."""

    family: str
    layer_type: str
    variant: str
    result: str = "match"      # match | refused | not applicable | mismatch
    reason: str = ""
    seq_len: int = 0           # the run length HF and the kernel were given
    explained: bool = True     # False: a mismatch no cause in EXPLANATIONS accounts for


def rope_block(config: Any, layer_type: Optional[str]) -> Optional[Dict[str, Any]]:
    """The rope block of a (text) config for a layer type, or None."""
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict):
        return None
    return params.get(layer_type) if layer_type else params


def variant_block(variant: str, block: Dict[str, Any], m: int, pairs: int, family: str) -> Dict[str, Any]:
    """The rope block of `variant` for a family whose block is `block` (M = m, rotary_dim/2 = pairs)."""
    kept = {key: block[key] for key in KEPT_KEYS if key in block}
    o = max(m // 4, 1)
    kind = variant.split("_")[0]
    if kind == "linear":
        new = {"rope_type": "linear", "factor": 2.0}
    elif kind == "dynamic":
        new = {"rope_type": "dynamic", "factor": 2.0}
    elif kind == "yarn":
        new = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": o}
        if variant == "yarn_no_truncate":
            new["truncate"] = False
    elif kind == "llama3":
        new = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": o}
    elif kind == "longrope":
        # Distinct per pair and between the lists, so a swapped or misindexed table shows.
        new = {"rope_type": "longrope", "original_max_position_embeddings": o,
               "short_factor": [1.0 + 0.01 * i for i in range(pairs)],
               "long_factor": [1.0 + 0.25 * i for i in range(pairs)]}
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return dict(kept, **new, **FAMILY_KEYS.get(family, {}))


def variant_config(config: Any, layer_type: Optional[str], block: Dict[str, Any]) -> Any:
    """A copy of `config` whose text config's rope block (of `layer_type`) is `block`."""
    config = copy.deepcopy(config)
    # get_text_config builds a fresh object for some (Moonshine, Dia's decoder): then edit the top level.
    for target in (hfp.text_config(config), config):
        if layer_type:
            params = dict(target.rope_parameters)
            params[layer_type] = block
            target.rope_parameters = params
        else:
            target.rope_parameters = block
        # A top-level original_max_position_embeddings (Phi-3) wins over the block's, in HF and ropejit.
        if "original_max_position_embeddings" in block and hasattr(target, "original_max_position_embeddings"):
            target.original_max_position_embeddings = block["original_max_position_embeddings"]
        if rope_block(hfp.text_config(config), layer_type) == block:
            return config
    raise RuntimeError("the edited rope block does not reach the config get_text_config returns")


def _rotary_dim(text: Any, layer_type: Optional[str], block: Dict[str, Any]) -> int:
    """The rotated width HF's longrope computes: int(head_dim * partial_rotary_factor)."""
    sizes = hfp.layer_config(text, layer_type)
    head_dim = getattr(sizes, "head_dim", None) or sizes.hidden_size // sizes.num_attention_heads
    return int(head_dim * block.get("partial_rotary_factor", 1.0))


def _run_positions(variant: str, spec: ropejit.Spec, o: int) -> np.ndarray:
    """The batch of positions of a variant: its max + 1 is the run length HF and the kernel use."""
    allp = zoo._positions(spec)
    m = spec.max_position_embeddings
    length = {"dynamic_at": m, "longrope_short": o}.get(variant)
    if length is None:  # every zoo position; the run length is past M
        return allp
    return np.array(sorted(set(allp[allp < length].tolist()) | {length - 1}), dtype=np.int64)


def _hf_scale(out: Any) -> float:
    """The cos/sin scale of one rotary output: median |(cos, sin)| (or |freqs_cis|)."""
    import torch

    if isinstance(out, torch.Tensor):
        return float(out.abs().median())
    return float(torch.hypot(out[0].double(), out[1].double()).median())


def _hf_buffer(hf: hfp.HfRope, pairs: int) -> Optional[np.ndarray]:
    """HF's inv_freq buffer as the rotary holds it now (after a forward at the run length)."""
    import torch

    for name in ([f"{hf.layer_type}_inv_freq"] if hf.layer_type else []) + ["inv_freq"]:
        value = getattr(hf.rotary, name, None)
        if isinstance(value, torch.Tensor) and value.dim() == 1 and value.numel() >= pairs:
            return value[:pairs].double().numpy()
    return None


def _ours(spec: ropejit.Spec, seq_len: int) -> Tuple[np.ndarray, float]:
    """ropejit's inv_freq and attention factor for a launch of length seq_len."""
    d = spec.to_dict()
    rope = d["rope"]
    if rope["rope_type"] == "dynamic":  # the table of a fixed length is the launch's at that length
        spec = ropejit.Spec.from_json(dict(d, rope=dict(rope, seq_len=seq_len)))
    freqs = spec.freqs()
    if rope["rope_type"] == "longrope" and seq_len > rope["original_max_position_embeddings"]:
        # The long table has its own factor where the spec says so (PhiMoE's long_mscale).
        return (np.asarray(freqs["inv_freq_long"], dtype=np.float64),
                float(freqs.get("attention_factor_long") or freqs["attention_factor"]))
    return np.asarray(freqs["inv_freq"], dtype=np.float64), float(freqs["attention_factor"])


def hf_attention(hf: hfp.HfRope, config: Any, positions: np.ndarray) -> float:
    """HF's cos/sin scale on a run of `positions`: the probe's (at run length 2) times the ratio of
    the rotary's output scales (PhiMoE picks its mscale by the run length)."""
    at_two = _hf_scale(hfp.cos_sin(hf.rotary, hfp.position_ids_for(config, [1]), hf.layer_type))
    at_run = _hf_scale(hfp.cos_sin(hf.rotary, hfp.position_ids_for(config, positions), hf.layer_type))
    return hf.attention_factor * at_run / at_two


def compare_variant(spec: ropejit.Spec, hf: hfp.HfRope, runtime: ropejit.Runtime, config: Any,
                    rng: np.random.Generator, positions: np.ndarray) -> Tuple[Optional[str], float]:
    """(None when ropejit matches HF on one run of `positions`, else what differs; HF's attention
    factor there). HF's table and cos/sin scale are read after a forward at the run length (dynamic
    NTK and LongRoPE change them there), ropejit's for the same seq_len."""
    why = zoo.shape_mismatch(spec, hf)
    if why:
        return why, hf.attention_factor
    seq_len = int(hfp.position_ids_for(config, positions).max()) + 1
    theirs_attention = hf_attention(hf, config, positions)
    hf_inv_freq = _hf_buffer(hf, len(hf.inv_freq))
    hf_inv_freq = hf.inv_freq if hf_inv_freq is None else hf_inv_freq
    ours, attention = _ours(spec, seq_len)
    why = zoo.freq_mismatch(ours, attention, hf_inv_freq, theirs_attention)
    if why:
        return f"{why} at run length {seq_len}", theirs_attention
    return (zoo.rotation_mismatch(spec, hf, runtime, config, rng, positions, ours[: len(hf.inv_freq)], attention),
            theirs_attention)


@dataclass
class Run:
    """What one variant run compared: the edited text config, HF's rotary, ropejit's spec."""

    variant: str
    layer_type: Optional[str]
    text: Any
    hf: hfp.HfRope
    spec: ropejit.Spec
    seq_len: int
    mismatch: str
    positions: np.ndarray
    runtime: ropejit.Runtime
    hf_attention: float


def _ulps(ours: np.ndarray, theirs: np.ndarray) -> float:
    """The largest distance of two tables in float32 ulps of `theirs`."""
    step = np.spacing(np.abs(theirs).astype(np.float32)).astype(np.float64)
    return float((np.abs(ours[: len(theirs)] - theirs) / step).max())


def _yarn_truncate_of_layer(run: Run) -> Optional[str]:
    """A layer type's yarn block with truncate false, which HF truncates anyway."""
    if run.variant != "yarn_no_truncate" or not run.layer_type or "truncate" in run.text.rope_parameters:
        return None
    d = run.spec.to_dict()
    truncated, _ = _ours(ropejit.Spec.from_json(dict(d, rope=dict(d["rope"], truncate=True))), run.seq_len)
    hf_table = _hf_buffer(run.hf, len(run.hf.inv_freq))
    if hf_table is None or _ulps(truncated, hf_table) > zoo.FREQ_ULPS:
        return None
    return ("HF truncates anyway: transformers 5.24's _compute_yarn_parameters reads "
            "config.rope_parameters.get('truncate', True), the dict of layer types, never the layer's block; "
            "with truncate true ropejit's table equals HF's")


def _own_table_each(run: Run) -> Optional[str]:
    """A q/k difference that is the tables' alone: ropejit's inv_freq within FREQ_ULPS of HF's (which
    the run checked), the kernel rotating exactly by ropejit's and HF exactly by its own."""
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if not run.mismatch.startswith(("q differs", "k differs")) or zoo.is_mrope(run.spec):
        return None
    hf_table = _hf_buffer(run.hf, len(run.hf.inv_freq))
    ours, attention = _ours(run.spec, run.seq_len)
    if hf_table is None:
        return None
    positions, small = run.positions, run.positions < zoo.SMALL  # HF's run length needs every position
    x = np.random.default_rng(0).standard_normal((len(positions), run.spec.num_q_heads, run.spec.head_dim))
    x = x.astype(np.float32)
    k = x[:, : run.spec.num_kv_heads].copy()
    kernel = run.runtime.get(ropejit.Spec.from_json(zoo._kernel_spec(run.spec)))
    got = np.asarray(kernel(x, k, positions=positions, seq_len=run.seq_len)[0], dtype=np.float64)[small]
    theirs = hfp.hf_rotate(run.hf, torch.from_numpy(x)[None], torch.from_numpy(k)[None],
                           hfp.position_ids_for(run.text, positions))[0][0].double().numpy()[small]
    x, positions = x[small], positions[small]
    scale = max(1.0, np.abs(theirs).max())
    ours_exact = zoo.exact_rotation(x, positions, dataclasses.replace(run.hf, attention_factor=attention), ours)
    hf_exact = zoo.exact_rotation(x, positions, run.hf, hf_table)
    if max(np.abs(got - ours_exact).max(), np.abs(theirs - hf_exact).max()) / scale > zoo.TOLERANCE:
        return None
    causes = []
    if run.variant == "dynamic_beyond":  # HF's table for the same L as a Python int: b' in double
        lt = {"layer_type": run.layer_type} if run.layer_type else {}
        fn = ROPE_INIT_FUNCTIONS["dynamic"]
        as_tensor = fn(run.text, None, seq_len=torch.tensor(run.seq_len), **lt)[0].double().numpy()
        as_int = fn(run.text, None, seq_len=run.seq_len, **lt)[0][: len(hf_table)].double().numpy()
        if not np.array_equal(as_tensor[: len(hf_table)], as_int):
            causes.append("HF evaluates the grown base b' in float32 (dynamic_rope_update passes seq_len as a "
                          "tensor), ropejit in double")
        if _ulps(ours, as_int) > 0:
            causes.append(f"torch's float32 pow is up to {_ulps(ours, as_int):.3g} ulp off the true power that "
                          "ropejit rounds (HF's table for L as a Python int)")
    return (f"the tables are {_ulps(ours, hf_table):.3g} ulp apart ({'; '.join(causes) or 'float32 evaluation'}); "
            "each side rotates exactly by its own table, and below 2^12 an ulp of inv_freq can exceed the tolerance")


def _phimoe_forward(run: Run) -> Optional[str]:
    """PhiMoE's rotary forward: mscale for every non-default type, the short table at every length."""
    import torch

    rotary = run.hf.rotary
    if run.text.model_type != "phimoe" or not hasattr(rotary, "rope_init_fn"):
        return None
    block = run.text.rope_parameters
    mscales = [block[key] for key in ("short_mscale", "long_mscale") if key in block]
    # ropejit applies the mscales to longrope's two tables; for other types HF's choice is PhiMoE's own.
    if (run.spec.rope_type != "longrope" and "attention factor" in run.mismatch
            and any(abs(run.hf_attention - m) < 1e-6 * m for m in mscales)):
        return ("PhiMoE's forward scales cos/sin by short_mscale / long_mscale for every non-default rope type, "
                "in place of the type's attention factor")
    with torch.no_grad():
        used = rotary.rope_init_fn(rotary.config)[0].double().numpy()
    held = _hf_buffer(run.hf, len(used))
    if held is not None and not np.array_equal(used, held[: len(used)]):
        return ("PhiMoE's forward (transformers 5.24) recomputes inv_freq with rope_init_fn(config), no seq_len: "
                "the short factors at every length, while dynamic_rope_update's long table goes unused")
    return None


# Verified causes of a mismatch: each returns the reason when it holds for the run, else None.
EXPLANATIONS: Tuple[Callable[[Run], Optional[str]], ...] = (_yarn_truncate_of_layer, _own_table_each,
                                                             _phimoe_forward)


def explain(run: Run) -> Optional[str]:
    """The verified cause of a run's mismatch, or None (an unexplained mismatch fails the test)."""
    for cause in EXPLANATIONS:
        why = cause(run)
        if why:
            return why
    return None


def _hf_error(text: Any, block: Dict[str, Any], e: Exception) -> str:
    """HF's error on a variant, with what it comes from where the zoo knows it."""
    message = zoo._short(e) if isinstance(e, hfp.ProbeError) else f"{type(e).__name__}: {zoo._short(e)}"
    if "NoneType" in message and getattr(text, "head_dim", 0) is None:
        return (f"{message} (the config's head_dim is None; HF's dynamic, yarn and longrope functions take "
                "getattr(config, 'head_dim', hidden_size // heads), that None)")
    if isinstance(e, KeyError):
        return f"{message} (HF's rotary reads that key, which a {block['rope_type']} block does not have)"
    return message


def run_variant(family: str, config: Any, layer_type: Optional[str], variant: str,
                runtime: ropejit.Runtime) -> VariantRow:
    """One variant run of one (family, layer type) whose default config is `config`."""
    row = VariantRow(family, layer_type or "-", variant)
    # Inputs seeded by the run's key: a run gives the same result in the subset and in the full zoo.
    rng = np.random.default_rng(zlib.crc32(key(row).encode()))
    text = hfp.text_config(config)
    block = rope_block(text, layer_type)
    if block is None:
        row.result, row.reason = "not applicable", f"{type(text).__name__} has no rope_parameters to replace"
        return row
    # No length in the config (RecurrentGemma): ropejit's default M sizes the block, HF then decides.
    m = int(getattr(hfp.layer_config(text, layer_type), "max_position_embeddings", None) or 8192)
    pairs = _rotary_dim(text, layer_type, block) // 2
    new_block = variant_block(variant, block, m, pairs, family)
    try:
        edited = variant_config(config, layer_type, new_block)
        hf = hfp.probe(edited, layer_type)
    except Exception as e:  # noqa: BLE001 - HF's code failing on the variant is the finding
        row.result, row.reason = "not applicable", f"HF's rotary cannot run it: {_hf_error(text, new_block, e)}"
        return row
    try:
        spec = ropejit.Spec.from_hf(edited, dtype="fp32", **({"layer_type": layer_type} if layer_type else {}))
    except (ropejit.Error, TypeError) as e:
        row.result, row.reason = "refused", zoo._short(e)
        return row
    positions = _run_positions(variant, spec, new_block.get("original_max_position_embeddings", m))
    row.seq_len = int(positions.max()) + 1
    try:
        mismatch, theirs_attention = compare_variant(spec, hf, runtime, hfp.text_config(edited), rng, positions)
    except ropejit.Error as e:
        row.result, row.reason = "refused", "launch: " + zoo._short(e)
        return row
    except Exception as e:  # noqa: BLE001 - HF's code failing at the run length is a finding too
        row.result, row.reason = "not applicable", f"HF's rotary fails at run length {row.seq_len}: " \
                                                   f"{_hf_error(text, new_block, e)}"
        return row
    if mismatch:
        known = explain(Run(variant, layer_type, hfp.text_config(edited), hf, spec, row.seq_len, mismatch,
                            positions, runtime, theirs_attention))
        row.result, row.explained = "mismatch", known is not None
        row.reason = f"{mismatch}: {known}" if known else f"{mismatch} (unexplained)"
    return row


def subset(rows: List["zoo.Row"], extra: Tuple[str, ...] = ("llama", "phimoe", "gpt_oss")) -> List["zoo.Row"]:
    """The matching rows the test runs variants on: the first (alphabetical) of each row kind
    (zoo.row_kind), and every row of the families in `extra`. Tower rows have no rope-type
    variants (a tower's rope block is axial or default): none."""
    seen, out = set(), []
    for r in rows:
        if r.result == "match" and r.path != "tower" and (r.kind not in seen or r.family in extra):
            seen.add(r.kind)
            out.append(r)
    return out


def run(runtime: ropejit.Runtime, rows: List["zoo.Row"]) -> List[VariantRow]:
    """Every variant of every matching row of `rows` (zoo.run's)."""
    configs = {model_type: cls for model_type, cls in zoo.candidates()}
    out: List[VariantRow] = []
    logging.disable(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in rows:
            if r.result != "match" or r.path == "tower":
                continue
            config = configs[r.family]()
            layer_type = None if r.layer_type == "-" else r.layer_type
            for variant, _ in VARIANTS:
                out.append(run_variant(r.family, config, layer_type, variant, runtime))
    return out


def counts(rows: List[VariantRow]) -> Dict[str, Dict[str, int]]:
    """Per variant: how many runs gave each result."""
    table = {name: {result: 0 for result in RESULTS} for name, _ in VARIANTS}
    for r in rows:
        table[r.variant][r.result] += 1
    return table


def summary(rows: List[VariantRow]) -> str:
    """`variants: M of N (family, variant) runs match`, then the count of each other result."""
    by = {result: sum(r.result == result for r in rows) for result in RESULTS}
    return (f"variants: {by['match']} of {len(rows)} (family, variant) runs match; {by['refused']} refused, "
            f"{by['not applicable']} not applicable, {by['mismatch']} mismatch")


def table(rows: List[VariantRow]) -> str:
    """The markdown table: the summary, per-variant counts, then every run that does not match."""
    lines = [summary(rows), "", "| variant | runs | match | refused | not applicable | mismatch |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, what in VARIANTS:
        c = counts(rows)[name]
        lines.append(f"| {name} ({what}) | {sum(c.values())} | {c['match']} | {c['refused']} "
                     f"| {c['not applicable']} | {c['mismatch']} |")
    lines += ["", "| family | layer type | variant | run length | result | reason |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r.result != "match":
            lines.append(f"| {r.family} | {r.layer_type} | {r.variant} | {r.seq_len or '-'} | {r.result} "
                         f"| {r.reason.replace('|', '/')} |")
    return "\n".join(lines)


def key(r: VariantRow) -> str:
    """The row's key in tests/data/zoo_variants_expected.json."""
    return f"{r.family}/{r.layer_type}/{r.variant}"

