"""The tiny models of the patch report (patch_report.py): a family's default config shrunk to a
few layers and small sizes, the model built from it (the whole model, else its text decoder),
its inputs (token ids, or embeddings where the model takes no ids; three different position
streams for a multimodal rotary), and HF's own unpatched output."""
from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

TOKENS = 12
NUDGE = 2.0 ** -22  # rad: the turn of HF's cos/sin that measures how sensitive a model's output is
# Relative tolerance of the patched output (fp32) against HF's: two codes for the same fp32 angle.
TOLERANCE = 1e-4
# Small values for the size fields of a config (only lowered, never raised; absent keys stay
# absent). Head dims (head_dim, qk_rope_head_dim, ...) keep their defaults: RoPE's pairing,
# partial rotary and HF's default mrope_section are tied to them.
SMALL: Dict[str, int] = {
    "intermediate_size": 128, "vocab_size": 128, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "q_lora_rank": 32, "kv_lora_rank": 32, "n_group": 1, "topk_group": 1, "first_k_dense_replace": 1,
    "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 128, "laurel_rank": 8, "ffn_dim": 128,
    "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "ffn_hidden_size": 128, "expert_ffn_hidden_size": 32,
    "zero_expert_num": 4, "intermediate_size_mlp": 128, "moe_topk": 2,
}
MAX_PARAMETERS = 100_000_000  # a shrunk model above this has a size field SMALL misses: refused, not built
HEADS = 4  # query heads; kv heads become 2, or stay equal to the query heads where they were
INIT_RANGE = 0.1  # peaked attention: a wrong RoPE changes the output measurably
MIN_LAYERS = 2
TOWER_LAYERS = 1  # layers of vision / audio towers of composite models
TEXT_WORDS = ("text", "decoder", "language")  # sub-config names of a composite model's text decoder
# Fields of a sub-config that must equal the width of the model it feeds: a vision merger's
# output (the text model's hidden size), a TTS flow head's condition (the backbone's).
TIED_TO_HIDDEN = ("out_hidden_size", "condition_dim")
# Fields a family's default config leaves unset (or without RoPE) that its modeling code needs to
# build and run the rotary path the zoo matched, by the config's model_type (or class name); each
# says why.
FILLS: Dict[str, Tuple[Dict[str, Any], str]] = {
    "esm": ({"position_embedding_type": "rotary", "pad_token_id": 1},
            "the default has absolute positions (ESM-2 checkpoints: rotary) and no pad id the forward needs"),
    "granitemoehybrid": ({"position_embedding_type": "rope", "layer_types": ["linear_attention", "full_attention"]},
                         "the default has no position embedding (NoPE) and no attention layer (every layer Mamba)"),
    "dots1": ({"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1},
              "the default leaves the expert counts None, and the experts' weights need them"),
    "lfm2_moe": ({"layer_types": ["conv", "full_attention"]},
                 "the default leaves layer_types None (LFM2 derives them), and every layer reads its type"),
    "qwen4_exp_text": ({"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 256, "indexer_budget": 8,
                        "indexer_compress_ratio": 4},
                       "the default's indexed_attention layers need the QSA indexer fields it leaves None"),
    "DbrxAttentionConfig": ({"rope_theta": 10000.0, "clip_qkv": 8.0},
                            "DBRX's attention reads rope_theta (the default keeps it in rope_parameters) "
                            "and clamps by clip_qkv"),
    "t5gemma2_text": ({"dropout_rate": 0.0}, "T5Gemma2Config sets it on its sub-configs; alone they lack it"),
    "t5gemma2_decoder": ({"dropout_rate": 0.0}, "T5Gemma2Config sets it on its sub-configs; alone they lack it"),
    "dbrx": ({"n_layers": 2, "n_heads": 4, "d_model": 512}, "DBRX names its sizes d_model, n_heads, n_layers"),
    "deepseek_ocr2_text": ({"mlp_layer_types": ["dense", "sparse"], "num_experts_per_tok": 2},
                           "the default leaves mlp_layer_types and the experts per token None; every layer reads them"),
    "moonshine_streaming": ({"num_key_value_heads": HEADS},
                            "its decoder reads num_key_value_heads, the default has none"),
    "qwen3_omni_moe_talker_text": ({"shared_expert_intermediate_size": 64},
                                   "its MoE block reads shared_expert_intermediate_size, the default has none"),
    "diffusion_gemma_text": ({"num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32},
                             "the default leaves the expert sizes None, and the experts' weights need them"),
    "chameleon": ({"vocabulary_map": {"<image>": 127}}, "the model maps image tokens through it; the default is None"),
    "bamba": ({"attn_layer_indices": [1]},
              "the default's attn_layer_indices is None: every layer is Mamba, no attention layer applies RoPE"),
    "recurrent_gemma": ({"block_types": ["recurrent", "attention"]},
                        "the default's block pattern (recurrent, recurrent, attention) has no attention layer in 2"),
    "zamba2": ({"use_mem_rope": True, "layers_block_type": ["mamba", "hybrid"]},
               "the default has no RoPE (use_mem_rope False) and no hybrid (attention) layer in the first 2"),
    "t5_gemma_module": ({"dropout_rate": 0.0},
                        "T5GemmaConfig sets it on its encoder and decoder configs; alone they lack it"),
}


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


def _unset_fields(kwargs: Dict[str, Any], changes: Dict[str, Any]) -> None:
    """Values for fields HF's modeling code needs but the default config leaves None: kv heads
    (all query heads, HF's convention), the vocabulary (ESM's), a sliding window (Step 3.5 makes
    its sliding mask whatever the layers; wider than the input, so it changes nothing)."""
    heads = changes.get("num_attention_heads", kwargs.get("num_attention_heads"))
    if "num_key_value_heads" in kwargs and kwargs["num_key_value_heads"] is None and isinstance(heads, int):
        changes["num_key_value_heads"] = heads
    if "vocab_size" in kwargs and kwargs["vocab_size"] is None:
        changes["vocab_size"] = SMALL["vocab_size"]
    if "sliding_window" in kwargs and kwargs["sliding_window"] is None:
        changes["sliding_window"] = 4 * TOKENS


def shrink(config: Any, layers: Optional[int] = None, default: bool = True,
           init_range: Optional[float] = INIT_RANGE, out_hidden: Optional[int] = None) -> Any:
    """`config` with few layers and small sizes; per-layer lists are cut to the layers kept,
    sub-configs (text, vision, audio) shrunk too, towers to TOWER_LAYERS. A `default` config is
    built anew from its class with only the changes, so that derived fields (Gemma 4's per-layer
    head dims, DeepSeek's qk_head_dim) follow them; a sub-config from its fields and the changes."""
    cls = type(config)
    fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    kwargs = {name: config.__dict__[name] for name in fields if name in config.__dict__}
    changes: Dict[str, Any] = dict((FILLS.get(getattr(config, "model_type", "")) or FILLS.get(cls.__name__)
                                    or ({}, ""))[0])
    for name, small in SMALL.items():
        value = kwargs.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > small:
            changes[name] = small
        elif isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            changes[name] = [min(v, small) for v in value]  # per-layer sizes (Gemma 3n's intermediate_size)
    _fewer_heads(kwargs, changes)
    _unset_fields(kwargs, changes)
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
    for name in TIED_TO_HIDDEN:  # HF validates them equal to the width of the model they feed
        if isinstance(kwargs.get(name), int) and out_hidden is not None:
            changes[name] = out_hidden
    subs = [name for name in getattr(config, "sub_configs", {}) or {} if hasattr(config.__dict__.get(name), "to_dict")]
    text_first = sorted(subs, key=lambda name: not any(word in name for word in TEXT_WORDS))
    for name in text_first:
        tower = not any(word in name for word in TEXT_WORDS)
        width = getattr(changes.get("text_config"), "hidden_size", None) or changes.get("hidden_size")
        changes[name] = shrink(config.__dict__[name], TOWER_LAYERS if tower else None, False, init_range, width)
    return cls(**changes) if default else cls(**dict(kwargs, **changes))


# ------------------------------------------------------------------ models

def _modeling_module(config: Any) -> Any:
    """The modeling module next to the config class's module (None when there is none)."""
    name = type(config).__module__.replace(".configuration_", ".modeling_")
    if name == type(config).__module__:
        return None
    try:
        return sys.modules.get(name) or __import__(name, fromlist=["_"])
    except Exception:  # noqa: BLE001 - no importable modeling module: nothing more to try
        return None


def _model_classes(config: Any) -> List[Any]:
    """The modeling module's classes built from exactly this config class: causal LMs first, then
    base models, then the others (a decoder stack such as T5Gemma 2's or Dia's); then the encoder
    and decoder stacks its parent model builds from a sub-config of this class (T5Gemma's)."""
    import transformers

    module = _modeling_module(config)
    if module is None:
        return []
    classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, transformers.PreTrainedModel)
               and c.__module__ == module.__name__ and getattr(c, "config_class", None) is type(config)
               and not c.__name__.endswith("PreTrainedModel")]  # the abstract base has no forward
    stacks = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, transformers.PreTrainedModel)
              and c.__module__ == module.__name__ and c.__name__.endswith(("Encoder", "Decoder"))
              and type(config) in (getattr(getattr(c, "config_class", None), "sub_configs", None) or {}).values()]
    return sorted(classes, key=lambda c: (not c.__name__.endswith("ForCausalLM"), not c.__name__.endswith("Model"),
                                          c.__name__)) + sorted(stacks, key=lambda c: c.__name__)


def _not_too_large(make: Callable[[], torch.nn.Module]) -> None:
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


def builders(config: Any) -> List[Tuple[str, Callable[[], torch.nn.Module]]]:
    """(what, make) for each way to build a model of the shrunk config, in order: the causal LM
    transformers registers for it, its base model, the modeling module's classes for that config
    class; then the same for its text decoder's config (``get_text_config(decoder=True)``) when
    that is another one (a composite model whose towers need pixel or audio input)."""
    import transformers

    configs = [config]
    try:
        text = config.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001 - a config without a text part
        text = config
    if text is not config and hasattr(text, "to_dict"):
        configs.append(text)
    out: List[Tuple[str, Callable[[], torch.nn.Module]]] = []
    for c in configs:
        prefix = "" if c is config else f"text decoder {type(c).__name__}: "
        for auto in (transformers.AutoModelForCausalLM, transformers.AutoModel):
            out.append((prefix + auto.__name__, lambda auto=auto, c=c: auto.from_config(c)))
        for cls in _model_classes(c):
            out.append((prefix + cls.__name__, lambda cls=cls, c=c: cls(c)))
    return out


def build(what: str, make: Callable[[], torch.nn.Module]) -> Tuple[torch.nn.Module, Optional[str]]:
    """The model `make` builds, randomly initialised (seed 0), in eval mode, and a note naming the
    parameters HF's init leaves unset (``torch.empty``; Qwen3-Omni's talker experts), which get
    normal(0, INIT_RANGE) values instead of whatever memory held; refused when too large."""
    _not_too_large(make)
    torch.manual_seed(0)
    deterministic = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    try:  # torch.empty fills with NaN meanwhile, so that what init leaves unset shows
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        model = make().eval()
    finally:
        torch.use_deterministic_algorithms(deterministic[0])
        torch.utils.deterministic.fill_uninitialized_memory = deterministic[1]
    if not isinstance(model, torch.nn.Module):
        raise RuntimeError(f"{what} built a {type(model).__name__}")
    unset = [(name, p) for name, p in model.named_parameters() if p.is_floating_point() and not torch.isfinite(p).all()]
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for _, p in unset:
            p.copy_(torch.randn(p.shape, generator=generator) * INIT_RANGE)
    note = (f"HF's init leaves {', '.join(name for name, _ in unset)} unset (torch.empty): filled with "
            f"normal(0, {INIT_RANGE})") if unset else None
    return model, note


# ------------------------------------------------------------------ inputs and outputs

def text_config_of(model: torch.nn.Module) -> Any:
    """The model's text config (the config itself where it has no text part)."""
    config = model.config
    try:
        return config.get_text_config()
    except Exception:  # noqa: BLE001
        return config


def position_streams(model: torch.nn.Module) -> int:
    """How many position streams the model's text rotary module mixes (1: one; 3: Qwen2-VL's
    temporal, height and width; 2: NeoMME's rows and columns): the rows of ``position_ids`` for
    which equal rows give the cos of one stream and different rows another cos of that shape."""
    from ropejit._patch_layers import takes_layer_type, text_rotary_modules

    config = text_config_of(model)
    rotary = next(iter(text_rotary_modules(model, config)), None)
    if rotary is None:
        return 1
    types = [t for t in (getattr(config, "layer_types", None) or []) if isinstance(t, str)]
    positions = torch.arange(TOKENS).view(1, -1)
    x = torch.zeros(1, 1, 1)
    for streams in (3, 2):
        rows = torch.stack([positions * (s + 1) for s in range(streams)])  # different rows
        for extra in ([(t,) for t in dict.fromkeys(types)] if takes_layer_type(rotary) else [()]):
            try:
                with torch.no_grad():
                    one = rotary(x, positions, *extra)[0]
                    same = rotary(x, positions.expand(streams, 1, -1), *extra)[0]
                    mixed = rotary(x, rows, *extra)[0]
            except Exception:  # noqa: BLE001 - the module takes no such rows (or not this layer type)
                continue
            if one.shape == same.shape == mixed.shape and torch.equal(one, same) and not torch.equal(one, mixed):
                return streams
    return 1


# Input forms, in order, and the forward parameter each needs: token ids; embeddings; ids and an
# encoder's output.
INPUT_FORMS = {"ids": None, "embeds": "inputs_embeds", "ids+encoder": "encoder_hidden_states"}


def inputs(model: torch.nn.Module, streams: int, form: str = "ids") -> Dict[str, Any]:
    """The forward's inputs: TOKENS token ids (embeddings for the form "embeds", or where the
    forward takes no ids or needs embeddings; "ids+encoder" adds random encoder hidden states for
    a decoder stack that cross-attends), with `streams` different position rows as an image's
    grid gives (temporal fixed, height and width walking a 3 x 4 grid; rows and columns for two)
    where the rotary mixes streams."""
    parameters = inspect.signature(model.forward).parameters
    config = text_config_of(model)
    vocab = getattr(config, "vocab_size", None) or 128
    kwargs: Dict[str, Any] = {}
    needs_embeds = "inputs_embeds" in parameters and parameters["inputs_embeds"].default is inspect.Parameter.empty
    embeds = form == "embeds"
    if "input_ids" in parameters and not needs_embeds and not embeds:
        kwargs["input_ids"] = torch.randint(1, min(vocab, 64), (1, TOKENS), generator=torch.Generator().manual_seed(1))
    elif "inputs_embeds" in parameters:
        hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
        kwargs["inputs_embeds"] = torch.randn(1, TOKENS, hidden, generator=torch.Generator().manual_seed(1))
    hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
    if form == "ids+encoder":
        kwargs["encoder_hidden_states"] = torch.randn(1, TOKENS, hidden, generator=torch.Generator().manual_seed(2))
    if "decoder_input_ids" in parameters and "input_ids" in kwargs:
        kwargs["decoder_input_ids"] = kwargs["input_ids"]
    if "use_cache" in parameters:
        kwargs["use_cache"] = False
    if streams > 1 and "position_ids" in parameters:
        cell = torch.arange(TOKENS)
        grid = [torch.full_like(cell, 2), cell // 4, cell % 4] if streams == 3 else [cell // 4, cell % 4]
        kwargs["position_ids"] = (torch.stack(grid) + 3)[:, None, :]
    return kwargs


def output(model: torch.nn.Module, kwargs: Dict[str, Any]) -> torch.Tensor:
    """The model's logits (or last hidden state) for `kwargs`, in fp32."""
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


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest difference relative to the largest |value| (at least 1); inf for other shapes."""
    if got.shape != want.shape:
        return float("inf")
    return (got - want).abs().max().item() / max(1.0, want.abs().max().item())


def noise_floor(model: torch.nn.Module, kwargs: Dict[str, Any], want: torch.Tensor) -> float:
    """How far HF's own output moves when every cos/sin of its rotary modules turns by NUDGE rad
    (about what two float32 cos/sin codes differ by): the least difference a comparison can see."""
    def nudge(module: torch.nn.Module, args: Any, out: Any) -> Any:
        if isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out):
            cos, sin = out
            return cos - NUDGE * sin, sin + NUDGE * cos
        return out

    hooks = [m.register_forward_hook(nudge) for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    try:
        return relative(output(model, kwargs), want)
    finally:
        for hook in hooks:
            hook.remove()


@dataclasses.dataclass
class Tiny:
    """A tiny model that runs unpatched: its inputs, HF's output and noise floor, and the text
    forward (the model's own positions) where `kwargs` has multimodal ones."""

    what: str
    model: torch.nn.Module
    kwargs: Dict[str, Any]
    want: torch.Tensor
    floor: float
    streams: int = 1
    text_kwargs: Optional[Dict[str, Any]] = None
    text_want: Optional[torch.Tensor] = None
    note: Optional[str] = None  # what the report changed of the model HF built


def tiny(config: Any) -> Tiny:
    """The first model of the shrunk config that runs unpatched (see :func:`builders`; the text
    decoder's config shrunk alone where HF's validators refuse the whole one shrunk), fed token
    ids, else embeddings; a model whose output the floor shows to be chaotic at INIT_RANGE (HRM's
    recurrence) is built again at the config's own init. Raises with every builder's error (HF's
    words) when none runs."""
    errors: Dict[str, List[str]] = {}
    for index, (what, make) in enumerate(_all_builders(config, INIT_RANGE, errors)):
        found = _first_run(what, make, errors)
        if found is not None and found.floor > TOLERANCE / 10:
            what, make = _all_builders(config, None, {})[index]
            found = _first_run(what, make, errors) or found
        if found is not None:
            return found
    raise RuntimeError(_errors(errors) or "no model class of transformers takes the config")


def _first_run(what: str, make: Callable[[], torch.nn.Module], errors: Dict[str, List[str]]) -> Optional[Tiny]:
    """The model built and run on token ids, else on embeddings; None (errors noted) when it fails."""
    try:
        model, note = build(what, make)
    except Exception as e:  # noqa: BLE001 - HF raises anything for a config it cannot build
        errors.setdefault(f"{type(e).__name__}: {short(e, 160)}", []).append(what)
        return None
    parameters = inspect.signature(model.forward).parameters
    for form, needs in INPUT_FORMS.items():
        if needs is not None and needs not in parameters:
            continue  # the forward takes no such input
        try:
            found = _run(what, model, form)
            found.note = note
            return found
        except Exception as e:  # noqa: BLE001 - nor run it
            errors.setdefault(f"{type(e).__name__}: {short(e, 160)}", []).append(
                what + ("" if form == "ids" else f" ({form})"))
    return None


def _all_builders(config: Any, init_range: Optional[float],
                  errors: Dict[str, List[str]]) -> List[Tuple[str, Callable[[], torch.nn.Module]]]:
    """builders() of the config shrunk, or of its text decoder's config shrunk alone where the
    whole one does not shrink (a validator ties a tower's sizes to the text model's)."""
    try:
        return builders(shrink(config, init_range=init_range))
    except Exception as e:  # noqa: BLE001 - HF's validators raise on the shrunk config
        errors.setdefault(f"{type(e).__name__}: {short(e, 200)}", []).append("the config shrunk")
    try:
        text = config.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001
        return []
    if text is config or not hasattr(text, "to_dict"):
        return []
    try:
        small = shrink(text, default=False, init_range=init_range)
    except Exception as e:  # noqa: BLE001
        errors.setdefault(f"{type(e).__name__}: {short(e, 200)}", []).append(f"text decoder {type(text).__name__}")
        return []
    return [(f"text decoder {type(text).__name__}: {what}", make) for what, make in builders(small)]


def _errors(errors: Dict[str, List[str]]) -> str:
    """One line: each error once with the builders that met it; "Unrecognized configuration class"
    (an auto class that has no model for the config) only where nothing else was met."""
    real = {e: who for e, who in errors.items() if "Unrecognized configuration class" not in e} or errors
    return "; ".join(f"{', '.join(dict.fromkeys(who))}: {e}" for e, who in real.items())


def _run(what: str, model: torch.nn.Module, form: str) -> Tiny:
    """The model's inputs of `form` and HF's output for them (and for its own text positions)."""
    streams = position_streams(model)
    kwargs = inputs(model, streams, form)
    want = output(model, kwargs)
    found = Tiny(what, model, kwargs, want, noise_floor(model, kwargs, want), streams)
    if "position_ids" in kwargs:  # also the text forward, with the positions the model makes
        found.text_kwargs = {k: v for k, v in kwargs.items() if k != "position_ids"}
        found.text_want = output(model, found.text_kwargs)
    return found


def short(e: BaseException, limit: int = 240) -> str:
    """The exception's message on one line, at most `limit` characters."""
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
