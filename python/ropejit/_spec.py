"""ropejit.Spec: a validated RoPE spec, from spec JSON or a Hugging Face config."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _ropejit

JsonLike = Union[str, bytes, os.PathLike, Dict[str, Any]]


def _finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by its name as a string: JSON has no Infinity
    (a transformers config may hold one in a key RoPE never reads; a key the import reads then
    fails with its name, as any non-number does)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _text(source: JsonLike, what: str) -> str:
    """JSON text from a dict, a JSON string, or the path of a JSON file."""
    if isinstance(source, dict):
        return json.dumps(_finite(source), allow_nan=False, default=str)
    if isinstance(source, bytes):
        return source.decode("utf-8")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith("{")):
        path = os.fspath(source)
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise _ropejit.Error(f"cannot read {what} file {path}: {e.strerror}") from None
    if isinstance(source, str):
        return source
    raise TypeError(f"{what}: expected a dict, JSON text or a path, not {type(source).__name__}")


def _unknown_family(error: Exception) -> bool:
    """Whether an import failed only because the model_type is not in the family table."""
    issues = getattr(error, "issues", None) or []
    return len(issues) == 1 and issues[0][0] == "model_type" and "family table" in issues[0][1]


class Spec:
    """A validated RoPE spec. Build one with :meth:`from_json` or :meth:`from_hf`.

    Every field is the validated, canonical value: derived ones (``rotary_dim`` from
    ``partial_rotary_factor``, ``io["copy_v"]``) are filled in.
    """

    __slots__ = ("_spec", "warnings", "learned")

    def __init__(self, spec: "_ropejit.Spec", warnings: Optional[List[str]] = None, learned: bool = False) -> None:
        self._spec = spec
        self.warnings: List[str] = list(warnings or [])
        #: True when from_hf learned the family's conventions from transformers' code (see from_hf).
        self.learned = learned

    @classmethod
    def from_json(cls, source: JsonLike) -> "Spec":
        """Parses and validates a spec: a dict, JSON text, or a path. Raises SpecError."""
        return cls(_ropejit.parse_spec(_text(source, "spec")))

    @classmethod
    def from_hf(cls, config: JsonLike, *, dtype: Optional[str] = None, layout: Optional[str] = None,
                name: str = "", layer_type: Optional[str] = None, assume_llama: bool = False,
                learn: bool = True, op: str = "rope", tower: str = "text") -> "Spec":
        """The spec of a Hugging Face config: a transformers config object, a ``config.json`` dict,
        JSON text, or a path (a model folder works too). ``dtype`` defaults to bf16, ``layout`` to
        the model type's. ``layer_type`` picks the rope block of a config whose rope parameters are
        per layer type (Gemma 3, GPT-OSS, ...; :meth:`from_hf_layers` imports them all), or
        ``"indexer"`` a sparse-attention indexer's rotation (such as DeepSeek-V3.2's; DeepSeek-V4's
        queries, with ``"indexer_keys"`` and ``"compressor"`` its compressed keys, each of op
        ``"rope_tensor"``: one tensor at its own positions); ``op``
        the op of a layer that runs another (Llama 4's NoPE layers: ``"attn_temperature"``).

        A model_type missing from ropejit's family table is refused (``ropejit.SpecError`` naming
        ``model_type``), unless ``assume_llama`` (Llama's conventions) or, with ``learn`` and
        transformers installed, the family's own rotary module and apply function show its
        pairing, rotary dim and frequencies: the spec is then built from them, checked against HF
        (inv_freq, attention factor, rotated dims) and marked ``learned``. Where HF only warns, the
        warnings are in ``spec.warnings``.

        ``tower="vision"`` (or ``"audio"``) imports the config's vision (audio) tower instead: the
        tower's own config or one holding it (``vision_config``). A multi-axis tower (Qwen2-VL's,
        Pixtral's, Kimi's, ...) gets ``io.positions = "axes"``; a tower ropejit cannot express or
        does not know is refused naming its model_type (docs/vision-towers.md). ``layout``,
        ``layer_type``, ``assume_llama`` and ``op`` are text-only."""
        if tower != "text":
            if layout is not None or layer_type is not None or assume_llama or op != "rope":
                raise _ropejit.SpecError(f"tower: {tower!r} takes no layout, layer_type, assume_llama or op "
                                         "(the tower's rotary code fixes them)")
            from ._vision_specs import tower_spec_dict

            return cls.from_json(tower_spec_dict(config, tower, dtype, name))
        original = config
        if isinstance(config, (str, os.PathLike)) and os.path.isdir(os.fspath(config)):
            config = os.path.join(os.fspath(config), "config.json")
        if not isinstance(config, dict) and hasattr(config, "to_dict"):  # a transformers PretrainedConfig
            config = config.to_dict()
        text = _text(config, "HF config")
        try:
            spec, warnings = _ropejit.spec_from_hf(text, name, dtype, layout, layer_type or "", assume_llama, op)
        except _ropejit.SpecError as e:
            if not learn or assume_llama or not _unknown_family(e):
                raise
            from ._hf_learn import learn_spec

            return learn_spec(cls, original, text, e, dtype=dtype, layout=layout, name=name, layer_type=layer_type)
        return cls(spec, warnings)

    @classmethod
    def from_hf_layers(cls, config: JsonLike, **options: Any) -> "Tuple[Dict[str, Spec], List[Optional[str]]]":
        """Every distinct spec of a model and the layer -> spec map: ``({key: Spec}, [key or None per
        layer])``; the key is the layer type (``"all"`` when one rope block serves every layer), the
        op's name for a layer that runs another op (Llama 4's NoPE layers with attention temperature
        tuning: ``"attn_temperature"``), None a layer without either (SmolLM3's ``no_rope_layers``,
        a null per-layer block). ``options`` are :meth:`from_hf`'s."""
        if not isinstance(config, dict) and hasattr(config, "to_dict"):
            source: Any = config
            text = _text(config.to_dict(), "HF config")
        else:
            source = json.loads(_text(config, "HF config"))
            text = json.dumps(_finite(source))
        specs: Dict[str, Spec] = {}
        layers: List[Optional[str]] = []
        for entry, op in zip(_ropejit.hf_layer_rope_map(text), _ropejit.hf_layer_ops(text)):
            if op is None:
                layers.append(None)
                continue
            key = op if op != "rope" else (entry or "all")
            layers.append(key)
            if key not in specs:
                specs[key] = cls.from_hf(source, layer_type=entry or None, op=op, **options)
        return specs, layers

    @classmethod
    def from_diffusers(cls, config_or_model: Any, *, dtype: Optional[str] = None, name: str = "",
                       class_name: Optional[str] = None) -> "Spec":
        """The spec of a diffusers transformer's RoPE: a model instance or its config (a dict or
        FrozenDict with ``_class_name``, as a ``config.json`` has; ``class_name`` names the class of a
        config without one, such as a model's own ``model.config``).
        The family follows the class name (every rotating class of diffusers 0.42.1 is imported or
        refused: ropejit/_diffusers_families.py); most specs have ``io.positions = "axes"``, one
        integer position per axis per token (Ideogram 4 and Cosmos 3: interleaved ``mrope``;
        OmniGen: ``longrope`` with explicit positions). An unknown class or rotary configuration
        raises ``ropejit.SpecError`` naming it; families no spec expresses (LTX-Video, Mochi, ...)
        are refused by name with the reason (docs/diffusers.md)."""
        from ._diffusers_specs import spec_dict

        return cls.from_json(spec_dict(config_or_model, dtype=dtype, name=name, class_name=class_name))

    def validate(self) -> "Spec":
        """Validates again (a Spec is valid once built); returns self."""
        _ropejit.parse_spec(self._spec.canonical_json())
        return self

    name = property(lambda self: self._spec.name, doc="Free text, part of the hash.")
    head_dim = property(lambda self: self._spec.head_dim, doc="D: elements per head.")
    rotary_dim = property(lambda self: self._spec.rotary_dim, doc="d: rotated elements per head (<= D).")
    num_q_heads = property(lambda self: self._spec.num_q_heads, doc="Hq.")
    num_kv_heads = property(lambda self: self._spec.num_kv_heads, doc="Hkv.")
    layout = property(lambda self: self._spec.layout, doc='"neox" or "interleaved".')
    rotary_slice = property(lambda self: self._spec.rotary_slice,
                            doc='"leading" (a head\'s first d elements rotate) or "trailing" (its last d: DeepSeek-V4).')
    dtype = property(lambda self: self._spec.dtype, doc='"bf16", "fp16" or "fp32".')
    angle = property(lambda self: self._spec.angle, doc="Angle precision.")
    rope_type = property(lambda self: self._spec.rope_type, doc='"default", "llama3", "yarn", ...')
    op = property(lambda self: self._spec.op,
                  doc='"rope", "rerotate" (keys already in a paged K cache), "attn_temperature" (q scaled, Llama 4 '
                      'NoPE layers), "inverse_rope" / "rope_tensor" (one tensor turned back / forward in place) or '
                      '"mla_append" (MLA latent cache).')
    max_position_embeddings = property(lambda self: self._spec.max_position_embeddings, doc="M.")
    io = property(lambda self: self._spec.io, doc="The io block, defaults filled.")
    qk_norm = property(lambda self: self._spec.qk_norm, doc="The qk_norm block, or None.")
    hadamard = property(lambda self: self._spec.hadamard,
                        doc="True: q and k heads go through a Walsh-Hadamard transform after the rotation.")
    hash = property(lambda self: self._spec.hash, doc="32 hex digits: the spec's content hash.")

    def to_json(self, indent: bool = False) -> str:
        """Canonical JSON (fixed key order, defaults filled); indented for people with indent=True."""
        return self._spec.pretty_json() if indent else self._spec.canonical_json()

    def to_dict(self) -> Dict[str, Any]:
        """Canonical JSON as a dict."""
        return json.loads(self._spec.canonical_json())

    def freqs(self, mode: str = "hf_fp32") -> Dict[str, Any]:
        """inv_freq (and inv_freq_long for longrope) as the kernels bake them, the attention factor
        that scales cos and sin, and ``softmax_scale``: the DeepSeek YaRN factor HF reports for the
        attention kernel but does not apply (None for other specs). mode: hf_fp32 | float64."""
        return self._spec.freqs(mode)

    def launch_fields(self, tokens: int = 1, batch: int = 1, max_seq_len: int = 1, cache_pages: int = 1,
                      max_blocks_per_seq: int = 1, **sizes: int) -> List[Dict[str, Any]]:
        """Every launch argument of this spec: name, use (required | optional | unused), element type,
        symbolic and concrete shape at the given sizes. ``sizes``: any other call size by its
        ropejit_args field (``cos_sin_cache_rows``; ropejit._kernel.CALL_SIZES lists them)."""
        from ._kernel import launch_fields

        return launch_fields(self, dict({"num_tokens": tokens, "batch": batch, "max_seq_len": max_seq_len,
                                         "cache_num_pages": cache_pages, "max_blocks_per_seq": max_blocks_per_seq},
                                        **sizes, positions_type="int32"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Spec) and other.hash == self.hash

    def __hash__(self) -> int:
        return hash(self.hash)

    def __repr__(self) -> str:
        return f"ropejit.Spec({self.to_json()})"
