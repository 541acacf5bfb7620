"""Specs of the transformers vision and audio towers' RoPE: ``Spec.from_hf(config, tower="vision")``.

Each tower ropejit knows is a row of :data:`TOWERS`, keyed by the model_type of the tower's own
config (``qwen2_vl_vision``, ``pixtral``, ``kimi_k25_vision``, ...), read from transformers 5.24's
modeling code (docs/multi-axis-rope.md has file:line for each). A multi-axis tower becomes a spec
with ``io.positions = "axes"``: the pairs of each axis, their frequency rule and where the pairs sit
in a head. Its positions are integers ``[A, T]``, axis-major; :attr:`TowerForm.rows` says which
column of HF's ``position_ids`` (``[N, A']``, token-major, as the tower's rotary module takes them)
feeds each axis. A one-axis tower (an audio encoder's plain RoPE) becomes an ordinary spec with one
position stream, through the C++ import with Llama's conventions and the tower's pairing.

Nothing is guessed: a model_type missing from :data:`TOWERS` is refused with its name, and the
towers whose rotation the axes form cannot express are refused by name with the reason
(:data:`REFUSED`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from . import _ropejit

# The largest grid coordinate a vision spec is made for (max_position_embeddings): patch rows and
# columns of any image size transformers 5.24's processors make stay far below it.
MAX_POSITION = 32768
TOWER_KINDS = ("vision", "audio")


@dataclass(frozen=True)
class TowerForm:
    """How one tower's rotary module and apply function rotate a head (see the module docstring).

    ``form``: "half2" (two axes of D/4 pairs, own rule over D/2: the Qwen2-VL family),
    "pixtral" (two axes of D/4 pairs from one D-wide table, alternate entries),
    "third3" (three axes of (D//3)//2 pairs, own rule, the tail passes through: MiniMax-M3),
    "one" (one axis: ordinary RoPE). ``placement``: "contiguous" or "alternating".
    ``layout``: "neox" or "interleaved". ``rows``: the column of HF's position_ids per axis (None:
    the positions are the tower's fixed grid, Llama-4). ``rotary``: the rotary class,
    ``apply``: the apply function of the modeling module (``module.function``)."""

    form: str
    placement: str
    layout: str
    rows: Optional[Tuple[int, ...]]
    rotary: str
    apply: str
    note: str = ""


def _qwen(prefix: str, module: str, rotary: str = "", note: str = "") -> TowerForm:
    return TowerForm("half2", "contiguous", "neox", (0, 1), rotary or f"{prefix}VisionRotaryEmbedding",
                     f"{module}.apply_rotary_pos_emb_vision", note)


#: model_type of the tower's config -> its form.
TOWERS: Dict[str, TowerForm] = {
    "qwen2_vl_vision": _qwen("Qwen2VL", "qwen2_vl"),
    "qwen2_5_vl_vision": _qwen("Qwen2_5_VL", "qwen2_5_vl", note="cos rows permuted by window_index"),
    "qwen2_5_omni_vision_encoder": _qwen("Qwen2_5Omni", "qwen2_5_omni", note="cos rows permuted by window_index"),
    "qwen3_vl_vision": _qwen("Qwen3VL", "qwen3_vl"),
    "qwen3_vl_moe_vision": _qwen("Qwen3VLMoe", "qwen3_vl_moe"),
    "qwen3_5_vision": _qwen("Qwen3_5", "qwen3_5"),
    "qwen3_5_moe_vision": _qwen("Qwen3_5Moe", "qwen3_5_moe"),
    "qwen3_omni_moe_vision_encoder": _qwen("Qwen3OmniMoe", "qwen3_omni_moe"),
    "qwen4_exp_vision": _qwen("Qwen4Exp", "qwen4_exp"),
    "glm4v_vision": _qwen("Glm4v", "glm4v"),
    "glm4v_moe_vision": _qwen("Glm4vMoe", "glm4v_moe"),
    "glm_ocr_vision": _qwen("GlmOcr", "glm_ocr", note="per-head RMSNorm on q, k before the rotation (HF's)"),
    "glm5_next_vision": _qwen("Glm5Next", "glm5_next", note="per-head RMSNorm on q, k before the rotation (HF's)"),
    "paddleocr_vl_vision": _qwen("PaddleOCR", "paddleocr_vl"),
    "video_llama_3_vision": _qwen("VideoLlama3", "video_llama_3"),
    "exaone4_5_vision": _qwen("Exaone4_5_", "exaone4_5", note="cos rows permuted by window_index"),
    "ernie4_5_vl_moe_vision": _qwen("Ernie4_5_VLMoe", "ernie4_5_vl_moe"),
    "cohere_compass_vision": _qwen("CohereCompass", "cohere_compass"),
    "dots3_note_vision_encoder": _qwen("Dots3Note", "dots3_note"),
    "lfm3_vl_vision": _qwen("Lfm3Vl", "lfm3_vl"),
    "muse_glimmer_vision": _qwen("MuseGlimmer", "muse_glimmer"),
    "muse_spark_vision": _qwen("MuseSpark", "muse_spark"),
    "mlcd_vision_model": _qwen("MLCD", "mlcd", rotary="MLCDRotaryEmbedding"),
    # Step3p7: freq.flip(1): width first, then height
    "step3p5_vision": TowerForm("half2", "contiguous", "neox", (1, 0), "Step3p7VisionRotaryEmbedding",
                                "step3p7.apply_rotary_pos_emb_vision", "axis order w, h"),
    # Kimi-K2.5 MoonViT: transpose(1, 2).flip(-1): pair 2j is width's j-th, 2j + 1 height's
    "kimi_k25_vision": TowerForm("half2", "alternating", "neox", (1, 0), "Kimi_K25VisionRotaryEmbedding",
                                 "kimi_k25.apply_rotary_pos_emb_vision", "w, h alternating per pair"),
    # Inkling2: cat([w, h]).repeat_interleave(2) with rotate_pairwise
    "inkling2_vision": TowerForm("half2", "contiguous", "interleaved", (1, 0), "Inkling2VisionRotaryEmbedding",
                                 "inkling2.apply_rotary_pos_emb_vision", "interleaved pairs, axis order w, h"),
    "pixtral": TowerForm("pixtral", "contiguous", "neox", (0, 1), "PixtralVisionRotaryEmbedding",
                         "pixtral.apply_rotary_pos_emb", "height the even, width the odd entries of one table"),
    "minimax_m3_vl_vision": TowerForm("third3", "contiguous", "neox", (0, 1, 2), "MiniMaxM3VLVisionRotaryEmbedding",
                                      "minimax_m3_vl.apply_rotary_pos_emb_vision", "t, h, w; the tail passes through"),
    # Llama-4: complex (interleaved) pairs, x = column then y = row, positions column + 1, row + 1 on the
    # fixed (image_size / patch_size)^2 grid, the CLS token last at angle 0
    "llama4_vision_model": TowerForm("half2", "contiguous", "interleaved", None, "Llama4VisionRotaryEmbedding",
                                     "llama4.vision_apply_rotary_emb", "fixed grid, positions + 1, CLS last at 0"),
    # one-axis towers: plain RoPE over the head (or its partial_rotary_factor share)
    "lasr_encoder": TowerForm("one", "contiguous", "neox", (0,), "LasrEncoderRotaryEmbedding", "lasr.apply_rotary_pos_emb"),
    "dots3_note_audio_encoder": TowerForm("one", "contiguous", "neox", (0,), "Dots3NoteAudioRotaryEmbedding",
                                          "dots3_note.apply_rotary_pos_emb", "partial_rotary_factor"),
    "pocket_tts_audio_tokenizer": TowerForm("one", "contiguous", "neox", (0,), "PocketTTSAudioTokenizerRotaryEmbedding",
                                            "pocket_tts_audio_tokenizer.apply_rotary_pos_emb"),
    "pe_audio_encoder": TowerForm("one", "contiguous", "interleaved", (0,), "PeAudioEncoderRotaryEmbedding",
                                  "pe_audio.apply_rotary_pos_emb", "2x2 matrix on interleaved pairs"),
    "pe_video_encoder": TowerForm("one", "contiguous", "interleaved", (0,), "PeVideoEncoderRotaryEmbedding",
                                  "pe_video.apply_rotary_pos_emb", "2x2 matrix on interleaved pairs"),
    "pe_audio_video_encoder": TowerForm("one", "contiguous", "interleaved", (0,),
                                        "PeAudioVideoEncoderRotaryEmbedding", "pe_audio_video.apply_rotary_pos_emb",
                                        "2x2 matrix on interleaved pairs"),
    # DeepSeek-OCR2's vision encoder: a Qwen2-style decoder over the image tokens (encoder_config)
    "deepseek_ocr2_encoder": TowerForm("one", "contiguous", "neox", (0,), "DeepseekOcr2VisionRotaryEmbedding",
                                       "deepseek_ocr2.apply_rotary_pos_emb", "built from vision_config.encoder_config"),
    "pocket_tts_audio_tokenizer_encoder": TowerForm("one", "contiguous", "neox", (0,),
                                                    "PocketTTSAudioTokenizerRotaryEmbedding",
                                                    "pocket_tts_audio_tokenizer.apply_rotary_pos_emb", "the encoder half"),
    "pocket_tts_audio_tokenizer_decoder": TowerForm("one", "contiguous", "neox", (0,),
                                                    "PocketTTSAudioTokenizerRotaryEmbedding",
                                                    "pocket_tts_audio_tokenizer.apply_rotary_pos_emb", "the decoder half"),
    # Higgs-Audio-v2's rotary serves its (llama3-rope) decoder: the text patch runs it
    "higgs_audio_v2": TowerForm("one", "contiguous", "neox", (0,), "HiggsAudioV2RotaryEmbedding",
                                "higgs_audio_v2.apply_rotary_pos_emb", "the decoder's llama3 rope"),
}
TOWERS["mistral3_vision"] = TOWERS["pixtral"]  # never a model_type: Mistral-3's vision_config is pixtral's

#: model_type -> why the axes form cannot express the tower's rotation.
REFUSED: Dict[str, str] = {
    "gemma4_vision": ("each axis is a separate rotate_half block of D/2 (apply_multidimensional_rope): per-axis "
                      "neox halves, no placement of the axes form"),
    "gemma4_unified_vision": "Gemma-4's per-axis neox halves (apply_multidimensional_rope)",
    "vjepa2": ("the frequencies are laid out neox but the pairs interleaved, so a pair's two members turn by "
               "different angles: no rotation"),
    "sam2_video": ("memory attention repeats the query positions over the keys (rope_k_repeat) and leaves the last "
                   "num_k_exclude_rope keys unrotated: q and k need different positions"),
    "edgetam_video": "SAM2's memory attention: keys repeat the query positions (rope_k_repeat), some keys unrotated",
    "sam3_tracker_video": "SAM2's memory attention: keys repeat the query positions (rope_k_repeat), some keys unrotated",
    "sam3_vit_model": "float positions, scaled by window_size / grid in the global-attention layers",
    "sam3": "SAM3's ViT: float positions, scaled by window_size / grid in the global-attention layers",
    "dinov3_vit": "float positions (patch centres in [-1, 1]) and a 2*pi angle scale; CLS and register tokens skipped",
    "eomt_dinov3": "DINOv3's float positions (patch centres in [-1, 1]) and 2*pi angle scale",
    "sapiens2": "DINOv3's rotary: float positions in [-1, 1], 2*pi angle scale, prefix tokens skipped",
    "wav2vec2-bert": "the rotary module takes hidden states, not positions, and returns a stacked cos/sin table "
                     "its own attention applies (no apply function to stand in for)",
    "wav2vec2-conformer": "the rotary module takes hidden states, not positions, and returns a stacked cos/sin "
                          "table its own attention applies (no apply function to stand in for)",
    "seamless_m4t": "the conformer's rotary takes hidden states and returns a stacked cos/sin table its attention "
                    "applies (no apply function to stand in for)",
    "clvp": "the rotary module takes hidden states and its attention rotates a partial slice inline",
    "clvp_encoder": "CLVP's rotary takes hidden states and its attention rotates a partial slice inline",
    "clvp_decoder": "CLVP's rotary takes hidden states and its attention rotates a partial slice inline",
    "sam3_vision_model": "SAM3's ViT backbone: float positions, scaled by window_size / grid in global-attention layers",
}

#: model_type -> why the config holds no tower rotary (a part of a model whose rotary lives elsewhere, or a
#: text config of a model whose only rotary module is its vision tower's): refused by name, saying where it is.
NO_TOWER: Dict[str, str] = {
    "glm5_next_text": "GLM-5-Next's text decoder runs no RoPE (NoPE attention); the tower is glm5_next_vision",
    "inkling2_text": "Inkling2's text layers take a relative position bias, no RoPE; the tower is inkling2_vision",
    "sapiens2_head": "Sapiens2's head builds no rotary module; the backbone's (sapiens2) is refused",
    "sam3_detr_encoder": "a part of SAM3 without a rotary module (the ViT's, sam3_vit_model, is refused)",
    "sam3_detr_decoder": "a part of SAM3 without a rotary module (the ViT's, sam3_vit_model, is refused)",
    "sam3_geometry_encoder": "a part of SAM3 without a rotary module (the ViT's, sam3_vit_model, is refused)",
    "sam3_mask_decoder": "a part of SAM3 without a rotary module (the ViT's, sam3_vit_model, is refused)",
}
for _parent in ("sam2_video", "edgetam_video", "sam3_tracker_video"):
    for _part in ("mask_decoder", "prompt_encoder"):
        NO_TOWER[f"{_parent}_{_part}"] = (f"a part of {_parent} without a rotary module (the memory attention's, "
                                          f"{_parent}, is refused)")


# The config keys a tower's config sits under, per tower kind.
_SUB_CONFIGS = {"vision": ("vision_config", "video_config"), "audio": ("audio_config", "audio_video_config")}
# Tower configs whose rotary module is built from a config inside them.
_NESTED = {"deepseek_ocr2_vision": "encoder_config", "lasr_ctc": "encoder_config"}


def _field(config: Any, name: str) -> Any:
    if isinstance(config, dict):
        return config.get(name)
    return getattr(config, name, None)


def _tower_config(config: Any, tower: str) -> Any:
    """The tower's own config: `config` itself when it is one of :data:`TOWERS` / :data:`REFUSED`,
    else its ``<tower>_config`` (also under a ``thinker_config``, Qwen-Omni's)."""
    model_type = _field(config, "model_type")
    if model_type in NO_TOWER:
        raise _ropejit.SpecError(f"model_type {model_type!r}: no {tower} tower rotary in this config: "
                                 f"{NO_TOWER[model_type]}")
    if model_type in TOWERS or model_type in REFUSED:
        return config
    if model_type in _NESTED:
        return _field(config, _NESTED[model_type])
    for holder in (config, _field(config, "thinker_config")):
        for name in _SUB_CONFIGS[tower] if holder is not None else ():
            sub = _field(holder, name)
            if sub is not None:
                return _tower_config(sub, tower) if _field(sub, "model_type") in _NESTED else sub
    raise _ropejit.SpecError(f"model_type {model_type!r}: the config has no {tower}_config and is no {tower} "
                             f"tower ropejit knows ({len(TOWERS)} known; docs/vision-towers.md)")


def _int(config: Any, *names: str) -> Optional[int]:
    for name in names:
        value = _field(config, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _rope_block(config: Any) -> Dict[str, Any]:
    block = _field(config, "rope_parameters") or _field(config, "rope_scaling") or {}
    block = dict(block) if isinstance(block, dict) else {}
    if "rope_theta" not in block and _field(config, "rope_theta") is not None:
        block["rope_theta"] = _field(config, "rope_theta")
    return block


def tower_sizes(config: Any) -> Tuple[int, int]:
    """(head_dim, heads) of a tower config as its rotary module reads them: ``head_dim``, else the
    width (``embed_dim``, else ``hidden_size``) over ``num_attention_heads`` (``num_heads``)."""
    heads = _int(config, "num_attention_heads", "num_heads")
    if heads is None:
        raise _ropejit.SpecError("num_attention_heads: missing (nor num_heads): the tower's head count")
    head_dim = _int(config, "head_dim")
    if head_dim is None:
        width = _int(config, "embed_dim", "hidden_size")
        if width is None:
            raise _ropejit.SpecError("hidden_size: missing (nor embed_dim, head_dim): the tower's head width")
        head_dim = width // heads
    return head_dim, heads


def _axes(form: TowerForm, head_dim: int, model_type: str) -> Tuple[List[int], str]:
    """The pairs per axis and the frequency rule of a multi-axis form at head width `head_dim`."""
    if form.form == "third3":
        pairs = (head_dim // 3) // 2
        if pairs < 1:
            raise _ropejit.SpecError(f"head_dim: {head_dim} of {model_type} leaves no pair per axis ((D // 3) // 2)")
        return [pairs] * 3, "own"
    if head_dim % 4:
        raise _ropejit.SpecError(f"head_dim: {head_dim} of {model_type} is not a multiple of 4: its two axes take "
                                 "D/4 pairs each (HF's arange(0, D/2, 2) / (D/2) is no per-axis rule otherwise)")
    return [head_dim // 4] * 2, ("global_alternate" if form.form == "pixtral" else "own")


def tower_spec_dict(config: Any, tower: str = "vision", dtype: Optional[str] = None, name: str = "") -> Dict[str, Any]:
    """The spec dict (axes form) of a multi-axis tower's config, or the ordinary spec's for a
    one-axis tower; raises SpecError naming the model_type for a tower ropejit refuses or does not
    know. `config`: the tower's config or one holding it (``<tower>_config``), object or dict."""
    if tower not in TOWER_KINDS:
        raise _ropejit.SpecError(f"tower: {tower!r} is not allowed: must be one of {', '.join(TOWER_KINDS)}")
    if hasattr(config, "to_dict") and not isinstance(config, dict):
        config = config.to_dict()
    sub = _tower_config(config, tower)
    model_type = _field(sub, "model_type")
    if model_type in REFUSED:
        raise _ropejit.UnsupportedError(f"model_type {model_type!r}: ropejit cannot express this tower's rotary: "
                                        f"{REFUSED[model_type]}")
    form = TOWERS.get(model_type)
    if form is None:
        raise _ropejit.SpecError(f"model_type {model_type!r}: no {tower} tower rotary ropejit knows (its rotary "
                                 f"code was not read; {len(TOWERS)} towers known, docs/vision-towers.md)")
    block = _rope_block(sub)
    rope_type = block.get("rope_type", "default")
    head_dim, heads = tower_sizes(sub)
    if form.form == "one":
        return _one_axis(sub, form, dtype, name, model_type)
    allowed = ("default",) if form.rows is None else ("axial",)
    if rope_type not in allowed:
        raise _ropejit.SpecError(f"rope_parameters.rope_type: {rope_type!r} of {model_type} is not allowed: "
                                 f"must be {' | '.join(allowed)} (what {form.rotary} computes)")
    theta = block.get("rope_theta", 10000.0)
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
        raise _ropejit.SpecError(f"rope_parameters.rope_theta: {theta!r} of {model_type} is not allowed: "
                                 "must be a number > 0")
    pairs, frequencies = _axes(form, head_dim, model_type)
    axes: Dict[str, Any] = {"pairs": pairs, "frequencies": frequencies, "placement": form.placement}
    if frequencies == "own":  # global_alternate: one table, of rope_theta
        axes["theta"] = [float(theta)] * len(pairs)
    return {"name": name or f"{model_type}-{tower}", "head_dim": head_dim, "rotary_dim": 2 * sum(pairs),
            "num_q_heads": heads, "num_kv_heads": heads, "layout": form.layout, "dtype": dtype or "bf16",
            "max_position_embeddings": MAX_POSITION, "angle": "fp32",
            "rope": {"rope_type": "default", "rope_theta": float(theta)}, "io": {"positions": "axes", "axes": axes}}


def _one_axis(sub: Dict[str, Any], form: TowerForm, dtype: Optional[str], name: str, model_type: str
              ) -> Dict[str, Any]:
    """A one-axis tower's ordinary spec: the C++ import with Llama's conventions, the tower's pairing."""
    head_dim, heads = tower_sizes(sub)
    data = dict(sub, model_type=model_type, head_dim=head_dim, num_attention_heads=heads,
                num_key_value_heads=heads)
    data.setdefault("num_hidden_layers", 1)
    data.setdefault("max_position_embeddings", MAX_POSITION)
    text = json.dumps({k: v for k, v in data.items() if _jsonable(v)}, default=str)
    spec, _ = _ropejit.spec_from_hf(text, name or f"{model_type}-tower", dtype, form.layout, "", True, "rope")
    out = json.loads(spec.canonical_json())
    out.pop("qk_norm", None)  # a tower normalizes q and k itself, before its apply function
    out["io"] = {}  # the import's io (packed qkv, ...) is the text decoder's guess: q and k apart
    return out


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def tower_form(config: Any, tower: str = "vision") -> Tuple[str, TowerForm]:
    """(model_type, form) of a tower config ropejit imports; raises as :func:`tower_spec_dict`."""
    if hasattr(config, "to_dict") and not isinstance(config, dict):
        config = config.to_dict()
    sub = _tower_config(config, tower)
    model_type = _field(sub, "model_type")
    if model_type in REFUSED:
        raise _ropejit.UnsupportedError(f"model_type {model_type!r}: {REFUSED[model_type]}")
    if model_type not in TOWERS:
        raise _ropejit.SpecError(f"model_type {model_type!r}: no {tower} tower rotary ropejit knows")
    return model_type, TOWERS[model_type]


def llama4_positions(config: Any) -> List[List[int]]:
    """Llama-4 vision's fixed positions ``[2, n * n + 1]``: column + 1 and row + 1 of each patch of
    the ``n = image_size // patch_size`` grid, row-major, then the CLS token at 0 (HF masks its angle)."""
    side = _int(config, "image_size") // _int(config, "patch_size")
    cols = [i % side + 1 for i in range(side * side)] + [0]
    rows = [i // side + 1 for i in range(side * side)] + [0]
    return [cols, rows]
