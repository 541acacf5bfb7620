"""Which model families ``ropejit.transformers.patch`` runs: for each model_type whose zoo row
matches (tests/data/zoo_expected.json), a tiny random model from its default config (shrunk to a
few layers and small sizes where the config has them), its logits unpatched, then patched, and
whether the kernel ran and the logits stayed HF's. Used by test_patch_report.py (a fixed subset)
and by ``python patch_report.py [model_type ...]`` (the whole zoo: writes build/patch-table.md).

Results: ``patched`` (the kernel ran on every rope layer type, the logits are HF's), ``partial``
(the kernel ran, HF keeps some layer types, said why), ``declined`` (HF keeps every layer, said
why), ``no call`` (patched, but the forward pass never reached the kernel), ``mismatch`` (the
patched logits differ from HF's: a bug), ``error`` (the tiny model does not build or run
unpatched: transformers' side, the reason says where)."""
from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
import pathlib
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model here is built from a config

import torch  # noqa: E402

import ropejit  # noqa: E402
import ropejit.torch as rope_torch  # noqa: E402
import ropejit.transformers as rope_hf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXPECTED = ROOT / "tests" / "data" / "zoo_expected.json"
# Relative tolerance of the patched logits (fp32) against HF's: two codes for the same fp32 angle.
TOLERANCE = 1e-4
TOKENS = 12
NUDGE = 2.0 ** -22  # rad: the turn of HF's cos/sin that measures how sensitive a model's output is
# Small values for the size fields of a config (only lowered, never raised; absent keys stay
# absent). Head dims (head_dim, qk_rope_head_dim, ...) keep their defaults: RoPE's pairing,
# partial rotary and HF's default mrope_section are tied to them.
SMALL: Dict[str, int] = {
    "intermediate_size": 128, "vocab_size": 128, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "q_lora_rank": 32, "kv_lora_rank": 32, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1,
    "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 128, "laurel_rank": 8, "ffn_dim": 128,
    "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "ffn_hidden_size": 128, "expert_ffn_hidden_size": 32,
    "zero_expert_num": 4, "intermediate_size_mlp": 128,
}
MAX_PARAMETERS = 100_000_000  # a shrunk model above this has a size field SMALL misses: refused, not built
HEADS = 4  # query heads; kv heads become 2, or stay equal to the query heads where they were
INIT_RANGE = 0.1  # peaked attention: a wrong RoPE changes the output measurably
MIN_LAYERS = 2
TOWER_LAYERS = 1  # layers of vision / audio towers of composite models


@dataclass
class Row:
    """One model_type: what patching its tiny model did."""

    family: str
    result: str = "patched"
    reason: str = ""
    model: str = ""
    calls: Dict[str, int] = field(default_factory=dict)   # kernel calls per layer type
    seconds: float = 0.0


def families(path: pathlib.Path = EXPECTED) -> List[str]:
    """The model_types with a matching zoo row (any of their layer types)."""
    expected = json.loads(path.read_text())
    return sorted({key.split("/")[0] for key, result in expected.items() if result == "match"})


# ------------------------------------------------------------------ tiny configs

def _layer_count(config: Any) -> Optional[int]:
    """The fewest leading layers that keep every layer type (at least MIN_LAYERS)."""
    layers = config.__dict__.get("num_hidden_layers")
    if not isinstance(layers, int):
        return None
    types = config.__dict__.get("layer_types")
    keep = MIN_LAYERS
    if isinstance(types, (list, tuple)) and types:
        keep = max(keep, max(types.index(t) for t in set(types)) + 1)
    return min(layers, keep)


def _fewer_heads(kwargs: Dict[str, Any], changes: Dict[str, Any]) -> None:
    """HEADS query heads of the same head dim (the residual width shrinks with them where the head
    dim is hidden_size / heads, else to 64); kv heads 2 (1 where 2 does not divide), or all where
    they were all."""
    for heads_name, kv_name, hidden_name in (("num_attention_heads", "num_key_value_heads", "hidden_size"),
                                             ("num_heads", "num_key_value_heads", "embed_dim")):
        heads, kv, hidden = kwargs.get(heads_name), kwargs.get(kv_name), kwargs.get(hidden_name)
        if not isinstance(heads, int) or heads <= HEADS:
            continue
        changes[heads_name] = HEADS
        head_dim = kwargs.get("head_dim")
        if isinstance(hidden, int) and hidden % heads == 0 and (not head_dim or head_dim == hidden // heads):
            changes[hidden_name] = HEADS * (hidden // heads)
        elif isinstance(hidden, int) and hidden > 64:
            changes[hidden_name] = 64  # the head dim is a field of its own: the residual width shrinks alone
        if isinstance(kv, int):
            changes[kv_name] = HEADS if kv == heads else (2 if kv >= 2 else 1)


def shrink(config: Any, layers: Optional[int] = None, default: bool = True,
           init_range: Optional[float] = INIT_RANGE, out_hidden: Optional[int] = None) -> Any:
    """`config` with few layers and small sizes; per-layer lists are cut to the layers kept,
    sub-configs (text, vision, audio) shrunk too, towers to TOWER_LAYERS. A `default` config is
    built anew from its class with only the changes, so that derived fields (Gemma 4's per-layer
    head dims, DeepSeek's qk_head_dim) follow them; a sub-config from its fields and the changes."""
    cls = type(config)
    fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    kwargs = {name: config.__dict__[name] for name in fields if name in config.__dict__}
    changes: Dict[str, Any] = {}
    for name, small in SMALL.items():
        value = kwargs.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > small:
            changes[name] = small
        elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            changes[name] = [min(v, small) for v in value]  # per-layer sizes (Gemma 3n's intermediate_size)
    _fewer_heads(kwargs, changes)
    if "head_dim" in kwargs and kwargs["head_dim"] is None and isinstance(kwargs.get("num_attention_heads"), int):
        # Ministral's attention reads config.head_dim even when the default leaves it None
        changes["head_dim"] = changes.get("hidden_size", kwargs.get("hidden_size", 0)) // changes.get(
            "num_attention_heads", kwargs["num_attention_heads"])
    old, new = kwargs.get("num_hidden_layers"), layers if layers is not None else _layer_count(config)
    if isinstance(old, int) and new is not None and new < old:
        changes["num_hidden_layers"] = new
        for name, value in kwargs.items():
            if isinstance(value, list) and len(value) == old:
                changes[name] = changes.get(name, value)[:new]
        if isinstance(kwargs.get("num_kv_shared_layers"), int):
            changes["num_kv_shared_layers"] = 0  # KV sharing needs an earlier layer of each type
    vocab = changes.get("vocab_size", kwargs.get("vocab_size"))
    for name, value in kwargs.items():
        if isinstance(vocab, int) and name.endswith(("_token_id", "_token_index")) and isinstance(value, int) \
                and value >= vocab:
            changes[name] = vocab - 1  # an embedding's padding_idx must be inside the vocab
    if isinstance(kwargs.get("initializer_range"), float) and init_range is not None:
        changes["initializer_range"] = init_range
    if isinstance(kwargs.get("out_hidden_size"), int) and out_hidden is not None:
        changes["out_hidden_size"] = out_hidden  # a vision merger's output is the text model's width
    subs = [name for name in getattr(config, "sub_configs", {}) or {} if hasattr(config.__dict__.get(name), "to_dict")]
    text_first = sorted(subs, key=lambda name: not any(word in name for word in ("text", "decoder", "language")))
    for name in text_first:
        tower = not any(word in name for word in ("text", "decoder", "language"))
        changes[name] = shrink(config.__dict__[name], TOWER_LAYERS if tower else None, False, init_range,
                               getattr(changes.get("text_config"), "hidden_size", None))
    return cls(**changes) if default else cls(**dict(kwargs, **changes))


# ------------------------------------------------------------------ models

def _model_classes(config: Any) -> List[Any]:
    """The modeling module's classes built from exactly this config class: causal LMs first."""
    import transformers
    from transformers.models.auto import configuration_auto

    try:
        name = configuration_auto.model_type_to_module_name(config.model_type)
        module = sys.modules.get(f"transformers.models.{name}.modeling_{name}") or __import__(
            f"transformers.models.{name}.modeling_{name}", fromlist=["_"])
    except Exception:  # noqa: BLE001 - no modeling module: nothing more to try
        return []
    classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, transformers.PreTrainedModel)
               and c.__module__ == module.__name__ and getattr(c, "config_class", None) is type(config)
               and not c.__name__.endswith("PreTrainedModel")]  # the abstract base has no forward
    return sorted(classes, key=lambda c: (not c.__name__.endswith("ForCausalLM"), not c.__name__.endswith("Model"),
                                          c.__name__))


def _not_too_large(make: Any) -> None:
    """Raises when the model `make` builds has more than MAX_PARAMETERS (counted on the meta device)."""
    try:
        with torch.device("meta"):
            model = make()
    except Exception:  # noqa: BLE001 - some models do not build on the meta device: the real build tells
        return
    count = sum(p.numel() for p in model.parameters())
    if count > MAX_PARAMETERS:
        big = sorted(((p.numel(), n) for n, p in model.named_parameters()), reverse=True)[0]
        raise RuntimeError(f"{count / 1e6:.0f}M parameters after shrinking (largest: {big[1]}, {big[0] / 1e6:.0f}M)")


def build(config: Any) -> torch.nn.Module:
    """A randomly initialised model of the config: a causal LM where transformers has one, else
    its base model, else a class of its modeling module made for that config class."""
    import transformers

    errors = []
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoModel):
        try:
            _not_too_large(lambda: auto.from_config(config))
            torch.manual_seed(0)
            return auto.from_config(config).eval()
        except Exception as e:  # noqa: BLE001 - HF raises anything for a config it cannot build
            errors.append(f"{auto.__name__}: {type(e).__name__}: {_short(e, 120)}")
    for cls in _model_classes(config)[:2]:
        try:
            _not_too_large(lambda: cls(config))
            torch.manual_seed(0)
            return cls(config).eval()
        except Exception as e:  # noqa: BLE001
            errors.append(f"{cls.__name__}: {type(e).__name__}: {_short(e, 120)}")
    raise RuntimeError("; ".join(errors))


def _output(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    kwargs: Dict[str, Any] = {"input_ids": input_ids}
    parameters = inspect.signature(model.forward).parameters
    if "decoder_input_ids" in parameters:
        kwargs["decoder_input_ids"] = input_ids
    if "use_cache" in parameters:
        kwargs["use_cache"] = False
    with torch.no_grad():
        out = model(**kwargs)
    for name in ("logits", "last_hidden_state"):
        value = getattr(out, name, None)
        if isinstance(value, torch.Tensor):
            return value.float()
    value = out[0] if isinstance(out, (tuple, list)) or hasattr(out, "to_tuple") else out
    if not isinstance(value, torch.Tensor):
        raise RuntimeError(f"the model's output {type(out).__name__} holds no logits or hidden states")
    return value.float()


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    if got.shape != want.shape:
        return float("inf")
    return (got - want).abs().max().item() / max(1.0, want.abs().max().item())


def noise_floor(model: torch.nn.Module, input_ids: torch.Tensor, want: torch.Tensor) -> float:
    """How far HF's own output moves when every cos/sin of its rotary modules turns by NUDGE rad
    (about what two float32 cos/sin codes differ by): the least difference a comparison can see."""
    def nudge(module: torch.nn.Module, args: Any, output: Any) -> Any:
        if isinstance(output, tuple) and len(output) == 2 and all(isinstance(t, torch.Tensor) for t in output):
            cos, sin = output
            return cos - NUDGE * sin, sin + NUDGE * cos
        return output

    hooks = [m.register_forward_hook(nudge) for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    try:
        return _relative(_output(model, input_ids), want)
    finally:
        for hook in hooks:
            hook.remove()


def _tiny(config: Any) -> Tuple[torch.nn.Module, torch.Tensor, torch.Tensor, float]:
    """The tiny model, its input, HF's output and its noise floor; a model whose output the floor
    shows to be chaotic at INIT_RANGE (HRM's recurrence) is built again at the config's own init."""
    for init_range in (INIT_RANGE, None):
        model = build(shrink(config, init_range=init_range))
        vocab = getattr(model.config.get_text_config(), "vocab_size", None) or 128
        input_ids = torch.randint(1, min(vocab, 64), (1, TOKENS), generator=torch.Generator().manual_seed(1))
        want = _output(model, input_ids)
        floor = noise_floor(model, input_ids, want)
        if floor <= TOLERANCE / 10 or init_range is None:
            return model, input_ids, want, floor
    raise AssertionError("unreachable")


def check(family: str, config: Any) -> Row:
    """Patches the tiny model of one family and compares its output with HF's."""
    row = Row(family)
    try:
        model, input_ids, want, floor = _tiny(config)
        row.model = type(model).__name__
    except Exception as e:  # noqa: BLE001 - transformers' side: the tiny model does not build or run
        row.result, row.reason = "error", f"the tiny model does not build or run unpatched: {_short(e)}"
        return row
    state = rope_hf.patch(model)
    try:
        if state.reason is not None:
            row.result, row.reason = "declined", state.reason
            return row
        try:
            got = _output(model, input_ids)
        except Exception as e:  # noqa: BLE001 - the patched forward failing is a finding
            row.result, row.reason = "mismatch", f"the patched forward failed: {type(e).__name__}: {_short(e)}"
            return row
        row.calls = dict(state.kernel_calls_by_type)
        tolerance = max(TOLERANCE, 10 * floor)
        error = _relative(got, want)
        if not error <= tolerance:
            row.result, row.reason = "mismatch", f"patched output differs from HF's by {error:.3g} (relative)"
        elif state.kernel_calls == 0:
            row.result = "no call"
            why = "; ".join(f"{k}: {v}" for k, v in state.fallback_reasons.items()) or \
                "HF's apply functions never got a cos of the patched rotary module"
            row.reason = f"the forward pass never reached the kernel ({state.fallback_calls} fallback calls: {why})"
        elif state.declined:
            row.result, row.reason = "partial", "HF keeps " + "; ".join(f"{k}: {v}" for k, v in state.declined.items())
        notes = [row.reason] if row.reason else []
        if tolerance > TOLERANCE:
            notes.append(f"compared within {tolerance:.2g}: HF's own output moves by {floor:.2g} when its cos/sin "
                         f"turn by {NUDGE:.2g} rad")
        row.reason = "; ".join(notes + ([state.note] if state.note else []))
        return row
    finally:
        rope_hf.unpatch(model)


def _short(e: BaseException, limit: int = 240) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run(only: Optional[List[str]] = None) -> List[Row]:
    """A row for every family with a matching zoo row (or the ones in `only`)."""
    logging.disable(logging.WARNING)  # transformers warns about most default configs
    try:
        return _run(only)
    finally:
        logging.disable(logging.NOTSET)


def _run(only: Optional[List[str]]) -> List[Row]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for family in only or families():
            start = time.perf_counter()
            try:
                config = CONFIG_MAPPING[family]()
            except Exception as e:  # noqa: BLE001
                row = Row(family, "error", f"the default config does not build: {_short(e)}")
            else:
                row = check(family, config)
            row.seconds = time.perf_counter() - start
            rows.append(row)
    return rows


def summary(rows: List[Row]) -> str:
    ran = [r for r in rows if r.result in ("patched", "partial")]
    partial = sum(r.result == "partial" for r in rows)
    return (f"{len(ran)} of {len(rows)} families patch and run the kernel"
            + (f" ({partial} for some layer types only)" if partial else ""))


def table(rows: List[Row]) -> str:
    counts: Dict[str, int] = {}
    for r in rows:
        counts[r.result] = counts.get(r.result, 0) + 1
    lines = [summary(rows), "", ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())), "",
             "(error: transformers' side, before any patch: the tiny model needs pixel or audio input, or HF "
             "cannot build or run its default config shrunk; the reason quotes HF.)", "",
             "| family | model | result | kernel calls | s | reason |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        calls = ", ".join(f"{k} {v}" for k, v in sorted(r.calls.items())) or "-"
        lines.append(f"| {r.family} | {r.model or '-'} | {r.result} | {calls} | {r.seconds:.1f} "
                     f"| {r.reason.replace('|', '/')} |")
    return "\n".join(lines)


def write(rows: List[Row]) -> pathlib.Path:
    out = ROOT / os.environ.get("ROPEJIT_BUILD_DIR", "build") / "patch-table.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table(rows) + "\n")
    return out


if __name__ == "__main__":
    torch.set_num_threads(int(os.environ.get("PATCH_REPORT_THREADS", "1")))
    rope_torch.set_runtime(ropejit.Runtime("host", cache_dir=os.environ.get("ROPEJIT_CACHE_DIR")))
    result = run(sys.argv[1:] or None)
    path = write(result)
    print(table(result))
    print(f"\n{summary(result)} (table: {path})")
