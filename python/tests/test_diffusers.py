"""ropejit.Spec.from_diffusers and ropejit.diffusers.patch against diffusers' own rotary code.

Each family's spec rotates random q and k like the family's own rotary module and diffusers'
apply function (fp32, host backend, odd token counts); tiny random Flux, Flux 2, Wan and
HunyuanVideo transformers give the same output patched and unpatched, with the kernel counted.
Tests that run a spec need the ``axes`` positions form of this ropejit build (issue 46); a build
without it skips them with the reason, and any other failure of the probe spec fails here.
"""
import inspect
import types

import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

import ropejit  # noqa: E402
import ropejit.diffusers  # noqa: E402
import ropejit.torch  # noqa: E402
from diffusers.models import embeddings  # noqa: E402
from ropejit import _diffusers_specs  # noqa: E402


def _axes_form_missing():
    """Why this build cannot run an axes spec (the C++ side of issue 46), or None when it can."""
    probe = {"name": "axes-probe", "head_dim": 8, "rotary_dim": 8, "num_q_heads": 1, "num_kv_heads": 1,
             "layout": "interleaved", "dtype": "fp32", "max_position_embeddings": 64,
             "rope": {"rope_type": "default", "rope_theta": 10000},
             "io": {"positions": "axes", "axes": {"pairs": [2, 2], "frequencies": "own", "placement": "contiguous"}}}
    try:
        ropejit.Spec.from_json(probe)
    except ropejit.SpecError as e:
        if '/io/positions: "axes" is not allowed' not in str(e):
            raise
        return f"this ropejit build has no io.positions 'axes' form: {e}"
    return None


AXES_MISSING = _axes_form_missing()
needs_axes = pytest.mark.skipif(AXES_MISSING is not None, reason=str(AXES_MISSING))


def _close(ours, theirs, rtol=1e-5):
    """fp32: relative 1e-5 of the largest value (diffusers' float64 angles vs ropejit's float32 inv_freq)."""
    torch.testing.assert_close(ours, theirs, rtol=rtol, atol=rtol * float(theirs.abs().max()))


def _class(name):
    return getattr(diffusers, name)


def _default_config(name):
    """The class's own __init__ defaults, as a config dict with _class_name."""
    params = inspect.signature(_class(name).__init__).parameters
    config = {key: p.default for key, p in params.items() if p.default is not inspect.Parameter.empty}
    return dict(config, _class_name=name)


# ------------------------------------------------------------------ the family table

@pytest.mark.parametrize("name", sorted(_diffusers_specs.FAMILIES))
def test_family_defaults_are_the_class_defaults(name):
    defaults = _default_config(name)
    for key, value in _diffusers_specs.FAMILIES[name].defaults.items():
        assert key in defaults, f"{name} has no config key {key}"
        want = tuple(defaults[key]) if isinstance(defaults[key], (list, tuple)) else defaults[key]
        assert value == want, f"{name}.{key}: ropejit's default {value!r}, diffusers' {defaults[key]!r}"


@pytest.mark.parametrize("name", sorted(_diffusers_specs.REFUSED))
def test_refused_family_named(name):
    assert hasattr(diffusers, name), f"diffusers {diffusers.__version__} has no {name}"
    with pytest.raises(ropejit.SpecError, match=name) as info:
        ropejit.Spec.from_diffusers({"_class_name": name})
    assert "refused" in str(info.value)


def test_cogvideox_refusals_named():
    base = _default_config("CogVideoXTransformer3DModel")  # the default runs no RoPE at all
    with pytest.raises(ropejit.SpecError, match="use_rotary_positional_embeddings"):
        ropejit.Spec.from_diffusers(base)
    with pytest.raises(ropejit.SpecError, match="patch_size_t = None .*linspace"):  # CogVideoX 1.0
        ropejit.Spec.from_diffusers(dict(base, use_rotary_positional_embeddings=True))


def test_unknown_class_and_bad_config_named():
    with pytest.raises(ropejit.SpecError, match="SD3Transformer2DModel: transformer class not in"):
        ropejit.Spec.from_diffusers({"_class_name": "SD3Transformer2DModel"})
    with pytest.raises(ropejit.SpecError, match="no _class_name"):
        ropejit.Spec.from_diffusers({"axes_dims_rope": [16, 56, 56]})
    with pytest.raises(ropejit.SpecError, match=r"axes_dims_rope = \[16, 56, 48\].*summing to attention_head_dim"):
        ropejit.Spec.from_diffusers({"_class_name": "FluxTransformer2DModel", "axes_dims_rope": [16, 56, 48]})
    with pytest.raises(ropejit.SpecError, match="use_layer3d_rope"):
        ropejit.Spec.from_diffusers({"_class_name": "QwenImageTransformer2DModel", "use_layer3d_rope": True})
    with pytest.raises(ropejit.SpecError, match="rope_theta = 'x'"):
        ropejit.Spec.from_diffusers({"_class_name": "Flux2Transformer2DModel", "rope_theta": "x"})


def test_spec_dict_reads_the_config():
    spec = _diffusers_specs.spec_dict(_default_config("WanTransformer3DModel"), dtype="fp32")
    assert spec["io"]["axes"]["pairs"] == [22, 21, 21] and spec["num_q_heads"] == 40
    spec = _diffusers_specs.spec_dict({"_class_name": "Flux2Transformer2DModel", "attention_head_dim": 64,
                                       "axes_dims_rope": [16, 16, 16, 16], "rope_theta": 500})
    assert spec["io"]["axes"] == {"pairs": [8, 8, 8, 8], "theta": [500.0] * 4, "frequencies": "own",
                                  "placement": "contiguous"}
    assert spec["head_dim"] == 64 and spec["layout"] == "interleaved"


# ------------------------------------------------------------------ each spec against the library

def _rotate(spec, q, positions):
    """ropejit's rotation of q [B, S, H, D] (k: random, ignored) at positions [A, 1, S]."""
    k = torch.randn(q.shape[0], q.shape[1], spec.num_kv_heads, spec.head_dim)
    return ropejit.torch.apply_rope(q, k, positions, spec=spec)[0]


def _random_q(spec, tokens, generator):
    return torch.randn(1, tokens, spec.num_q_heads, spec.head_dim, generator=generator)


def _grid(*sizes):
    grids = torch.meshgrid(*[torch.arange(n) for n in sizes], indexing="ij")
    return torch.stack([g.reshape(-1) for g in grids]).unsqueeze(1)  # [A, 1, S], frame-major


@needs_axes
@pytest.mark.parametrize("name, module", [("FluxTransformer2DModel", "FluxPosEmbed"),
                                          ("Flux2Transformer2DModel", "Flux2PosEmbed")])
def test_flux_spec_matches_pos_embed(name, module):
    config = _default_config(name)
    spec = ropejit.Spec.from_diffusers(config, dtype="fp32")
    generator = torch.Generator().manual_seed(1)
    axes = len(config["axes_dims_rope"])
    ids = torch.randint(0, 96, (37, axes), generator=generator).to(torch.float64)  # Flux's ids: integer floats
    transformers = diffusers.models.transformers
    source = transformers.transformer_flux2 if "2" in module else transformers.transformer_flux
    pos_embed = getattr(source, module)(config.get("rope_theta", 10000), config["axes_dims_rope"])
    cos, sin = pos_embed(ids)
    q = _random_q(spec, 37, generator)
    _close(_rotate(spec, q, ids.long().t().unsqueeze(1)), embeddings.apply_rotary_emb(q, (cos, sin), sequence_dim=1))


@needs_axes
def test_wan_spec_matches_rotary_module():
    config = _default_config("WanTransformer3DModel")
    spec = ropejit.Spec.from_diffusers(config, dtype="fp32")
    rope = diffusers.models.transformers.transformer_wan.WanRotaryPosEmbed(
        config["attention_head_dim"], config["patch_size"], config["rope_max_seq_len"])
    p_t, p_h, p_w = config["patch_size"]
    cos, sin = rope(torch.zeros(1, 1, 3 * p_t, 3 * p_h, 5 * p_w))  # 45 tokens
    q = _random_q(spec, 45, torch.Generator().manual_seed(2))
    theirs = embeddings.apply_rotary_emb(q, (cos[0, :, 0], sin[0, :, 0]), sequence_dim=1)  # cos [1, S, 1, D]
    _close(_rotate(spec, q, _grid(3, 3, 5)), theirs)


@needs_axes
def test_hunyuan_video_spec_matches_rotary_module():
    config = _default_config("HunyuanVideoTransformer3DModel")
    spec = ropejit.Spec.from_diffusers(config, dtype="fp32")
    rope = diffusers.models.transformers.transformer_hunyuan_video.HunyuanVideoRotaryPosEmbed(
        config["patch_size"], config["patch_size_t"], config["rope_axes_dim"], config["rope_theta"])
    p, p_t = config["patch_size"], config["patch_size_t"]
    cos, sin = rope(torch.zeros(1, 1, 3 * p_t, 5 * p, 7 * p))  # 105 tokens
    q = _random_q(spec, 105, torch.Generator().manual_seed(3))
    _close(_rotate(spec, q, _grid(3, 5, 7)), embeddings.apply_rotary_emb(q, (cos, sin), sequence_dim=1))


@needs_axes
def test_qwen_image_spec_matches_rotary_module():
    config = _default_config("QwenImageTransformer2DModel")
    spec = ropejit.Spec.from_diffusers(config, dtype="fp32")
    module = diffusers.models.transformers.transformer_qwenimage
    rope = module.QwenEmbedRope(theta=10000, axes_dim=list(config["axes_dims_rope"]), scale_rope=True)
    generator = torch.Generator().manual_seed(4)
    positions = torch.randint(0, 300, (3, 33), generator=generator)  # the non-negative half of its table
    bounds = [0] + list(torch.tensor(config["axes_dims_rope"]).div(2, rounding_mode="floor").cumsum(0))
    freqs = torch.cat([rope.pos_freqs[positions[a], bounds[a]:bounds[a + 1]] for a in range(3)], dim=-1)
    q = _random_q(spec, 33, generator)
    _close(_rotate(spec, q, positions.unsqueeze(1)), module.apply_rotary_emb_qwen(q, freqs, use_real=False))


@needs_axes
def test_cogvideox_15_spec_matches_3d_rotary():
    config = dict(_default_config("CogVideoXTransformer3DModel"), use_rotary_positional_embeddings=True, patch_size_t=2)
    spec = ropejit.Spec.from_diffusers(config, dtype="fp32")
    cos, sin = embeddings.get_3d_rotary_pos_embed(config["attention_head_dim"], None, (5, 7), 3, grid_type="slice",
                                                  max_size=(9, 11))  # CogVideoX 1.5's pipeline form
    q = _random_q(spec, 105, torch.Generator().manual_seed(5))
    theirs = embeddings.apply_rotary_emb(q.transpose(1, 2), (cos, sin)).transpose(1, 2)  # [B, H, S, D] there
    _close(_rotate(spec, q, _grid(3, 5, 7)), theirs)


# ------------------------------------------------------------------ the patch on tiny models

def _randomize_qk_norms(model, generator):
    """QK-norm weights of their own (not ones), the text stream's (norm_added_*) apart from the
    image stream's: a fused norm must read the right ones."""
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if any(f".{norm}." in name for norm in ("norm_q", "norm_k", "norm_added_q", "norm_added_k")):
                weight.copy_(1 + 0.3 * torch.randn(weight.shape, generator=generator))


def _tiny_flux():
    torch.manual_seed(0)
    model = diffusers.FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                             attention_head_dim=16, num_attention_heads=2, joint_attention_dim=8,
                                             pooled_projection_dim=8, axes_dims_rope=(4, 6, 6)).eval()
    generator = torch.Generator().manual_seed(6)
    _randomize_qk_norms(model, generator)
    rows, cols, text = 3, 5, 4
    img_ids = torch.cat([torch.ones(1, rows * cols, dtype=torch.long), _grid(rows, cols)[:, 0]]).t()
    img_ids = img_ids.to(torch.float64)  # axis 0 = 1: a Kontext-style reference-image index
    inputs = dict(hidden_states=torch.randn(1, rows * cols, 4, generator=generator),
                  encoder_hidden_states=torch.randn(1, text, 8, generator=generator),
                  pooled_projections=torch.randn(1, 8, generator=generator), timestep=torch.tensor([0.5]),
                  img_ids=img_ids, txt_ids=torch.zeros(text, 3, dtype=torch.float64))
    return model, inputs


def _tiny_wan():
    torch.manual_seed(0)
    model = diffusers.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12,
                                            in_channels=4, out_channels=4, text_dim=8, freq_dim=8, ffn_dim=16,
                                            num_layers=2, rope_max_seq_len=32).eval()
    generator = torch.Generator().manual_seed(7)
    _randomize_qk_norms(model, generator)
    inputs = dict(hidden_states=torch.randn(1, 4, 3, 6, 10, generator=generator),  # 3 x 3 x 5 = 45 tokens
                  timestep=torch.tensor([500]), encoder_hidden_states=torch.randn(1, 5, 8, generator=generator))
    return model, inputs


def _tiny_flux2():
    torch.manual_seed(0)
    model = diffusers.Flux2Transformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                              attention_head_dim=16, num_attention_heads=2, joint_attention_dim=8,
                                              timestep_guidance_channels=8, axes_dims_rope=(4, 4, 4, 4),
                                              rope_theta=2000, guidance_embeds=False).eval()
    generator = torch.Generator().manual_seed(8)
    rows, cols, text = 3, 5, 4
    img_ids = torch.cat([torch.zeros(1, rows * cols, dtype=torch.long), _grid(rows, cols)[:, 0],
                         torch.zeros(1, rows * cols, dtype=torch.long)]).t()
    txt_ids = torch.zeros(text, 4, dtype=torch.long)
    txt_ids[:, 3] = torch.arange(text)  # Flux 2: text rotates along axis l
    inputs = dict(hidden_states=torch.randn(1, rows * cols, 4, generator=generator),
                  encoder_hidden_states=torch.randn(1, text, 8, generator=generator), timestep=torch.tensor([0.5]),
                  img_ids=img_ids, txt_ids=txt_ids)
    return model, inputs


def _tiny_hunyuan_video():
    torch.manual_seed(0)
    model = diffusers.HunyuanVideoTransformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16, num_layers=1,
        num_single_layers=1, num_refiner_layers=1, patch_size=2, patch_size_t=1, text_embed_dim=8,
        pooled_projection_dim=8, rope_axes_dim=(4, 6, 6), guidance_embeds=False).eval()
    generator = torch.Generator().manual_seed(9)
    inputs = dict(hidden_states=torch.randn(1, 4, 3, 6, 10, generator=generator),  # 3 x 3 x 5 = 45 tokens
                  timestep=torch.tensor([500]), encoder_hidden_states=torch.randn(1, 5, 8, generator=generator),
                  encoder_attention_mask=torch.ones(1, 5), pooled_projections=torch.randn(1, 8, generator=generator))
    return model, inputs


def _tiny_flux_like(name, **extra):
    """Chroma, LongCat-Image, Ovis-Image: Flux's double and single blocks, Flux's ids."""
    torch.manual_seed(0)
    model = getattr(diffusers, name)(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1,
                                     attention_head_dim=16, num_attention_heads=2, joint_attention_dim=8,
                                     axes_dims_rope=(4, 6, 6), **extra).eval()
    generator = torch.Generator().manual_seed(11)
    _randomize_qk_norms(model, generator)
    rows, cols, text = 3, 5, 4
    img_ids = torch.cat([torch.zeros(1, rows * cols, dtype=torch.long), _grid(rows, cols)[:, 0]]).t()
    inputs = dict(hidden_states=torch.randn(1, rows * cols, 4, generator=generator),
                  encoder_hidden_states=torch.randn(1, text, 8, generator=generator), timestep=torch.tensor([0.5]),
                  img_ids=img_ids.to(torch.float64), txt_ids=torch.zeros(text, 3, dtype=torch.float64))
    return model, inputs


def _tiny_wan_vace():
    torch.manual_seed(0)
    model = diffusers.WanVACETransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4, out_channels=4, text_dim=8,
        freq_dim=8, ffn_dim=16, num_layers=2, rope_max_seq_len=32, vace_layers=[0], vace_in_channels=6).eval()
    _, inputs = _tiny_wan()
    inputs["control_hidden_states"] = torch.randn(1, 6, 3, 6, 10, generator=torch.Generator().manual_seed(12))
    return model, inputs


def _tiny_hunyuan_video15():
    torch.manual_seed(0)
    model = diffusers.HunyuanVideo15Transformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16, num_layers=1, num_refiner_layers=1,
        patch_size=1, patch_size_t=1, text_embed_dim=8, text_embed_2_dim=8, image_embed_dim=8, rope_axes_dim=(4, 6, 6),
        task_type="t2v").eval()
    generator = torch.Generator().manual_seed(13)
    inputs = dict(hidden_states=torch.randn(1, 4, 3, 3, 5, generator=generator), timestep=torch.tensor([500.0]),
                  encoder_hidden_states=torch.randn(1, 5, 8, generator=generator),
                  encoder_attention_mask=torch.ones(1, 5),
                  encoder_hidden_states_2=torch.randn(1, 3, 8, generator=generator),
                  encoder_attention_mask_2=torch.ones(1, 3), image_embeds=torch.randn(1, 4, 8, generator=generator))
    return model, inputs


def _tiny_flux3():
    torch.manual_seed(0)
    model = diffusers.Flux3Transformer2DModel(in_channels=4, cond_in_channels=4, num_layers=1, num_single_layers=1,
                                              attention_head_dim=16, num_attention_heads=2, joint_attention_dim=8,
                                              timestep_channels=8, axes_dims_rope=(4, 4, 4, 4)).eval()
    return model, _tiny_flux2()[1]  # Flux 2's inputs: 4-axis ids, text along axis l


def _run(model, inputs):
    with torch.no_grad():
        return model(**inputs, return_dict=False)[0]


def _output_and_input_grad(model, inputs):
    """The model's output under autograd and the gradient of its squared sum by hidden_states."""
    hidden = inputs["hidden_states"].clone().requires_grad_(True)
    out = model(**dict(inputs, hidden_states=hidden), return_dict=False)[0]
    (grad,) = torch.autograd.grad(out.square().sum(), hidden)
    return out.detach(), grad


# family → (tiny model, kernel calls of one forward, of which from diffusers' cos and sin, processors swapped)
TINY = {"flux": (_tiny_flux, 3, 0, 2),  # fused norm and rotation: joint block 2 launches (text, image), single 1
        "wan": (_tiny_wan, 2, 0, 4),  # one call per block (q and k together); attn1 and attn2 swapped
        "flux2": (_tiny_flux2, 4, 4, 0),  # its cos is text's and image's concatenated: the cos/sin route
        "hunyuan-video": (_tiny_hunyuan_video, 4, 0, 0),
        "chroma": (lambda: _tiny_flux_like("ChromaTransformer2DModel", approximator_num_channels=8,
                                           approximator_hidden_dim=16, approximator_layers=1), 3, 0, 2),  # Flux's
        "longcat-image": (lambda: _tiny_flux_like("LongCatImageTransformer2DModel", pooled_projection_dim=8), 4, 0, 0),
        "ovis-image": (lambda: _tiny_flux_like("OvisImageTransformer2DModel", out_channels=4), 4, 0, 0),
        "bria": (lambda: _tiny_flux_like("BriaTransformer2DModel"), 4, 0, 0),
        # Flux 3: its text and image mode blocks rotate by the hooked positions; the joint single
        # block concatenates text and image cos, so its q and k take the cos/sin route.
        "flux3": (_tiny_flux3, 6, 2, 0),
        "wan-vace": (_tiny_wan_vace, 3, 0, 6),
        "hunyuan-video15": (_tiny_hunyuan_video15, 2, 0, 0)}  # 2 blocks and 1 VACE block, transformer_wan's processors


@needs_axes
@pytest.mark.parametrize("family", sorted(TINY))
def test_patch_tiny_model(family):
    tiny, calls, cos_sin_calls, processors = TINY[family]
    model, inputs = tiny()
    spec = ropejit.Spec.from_diffusers(model, dtype="fp32")  # the model, its FrozenDict, a config.json dict
    name = type(model).__name__
    assert spec == ropejit.Spec.from_diffusers(model.config, dtype="fp32", class_name=name)
    assert spec == ropejit.Spec.from_diffusers(dict(model.config, _class_name=name), dtype="fp32")
    with pytest.raises(ropejit.SpecError, match="no _class_name .*pass the model itself, or class_name="):
        ropejit.Spec.from_diffusers(model.config)
    expected = _run(model, inputs)
    state = ropejit.diffusers.patch(types.SimpleNamespace(transformer=model), strict=True)  # a pipeline's shape
    try:
        assert state.reason is None and state.spec == spec and state.family == family
        assert state.processors == processors
        assert ropejit.diffusers.patch(model) is state  # patching twice is a no-op
        got = _run(model, inputs)
        assert (state.kernel_calls, state.cos_sin_calls) == (calls, cos_sin_calls), state
        assert state.fallback_calls == 0, state.fallback_reasons
        # the swapped processors: Wan's RMSNorm over all heads, Flux's (and Chroma's) per-head RMSNorm
        # of each stream, and the rotation in one launch
        fused = calls if family in ("wan", "wan-vace", "flux", "chroma") else 0
        assert state.fused_norm_calls == fused, state.fused_norm_reasons
        _close(got, expected)
    finally:
        ropejit.diffusers.unpatch(model)
    assert not hasattr(model, "_ropejit_patch")
    assert diffusers.models.transformers.transformer_flux.apply_rotary_emb is embeddings.apply_rotary_emb
    assert diffusers.models.transformers.transformer_flux2.apply_rotary_emb is embeddings.apply_rotary_emb
    for module in ("transformer_longcat_image", "transformer_ovis_image", "transformer_bria", "transformer_flux3"):
        assert getattr(diffusers.models.transformers, module).apply_rotary_emb is embeddings.apply_rotary_emb
    assert embeddings.apply_rotary_emb.__module__ == "diffusers.models.embeddings"
    assert not any(type(m.processor).__name__.startswith("Ropejit") for m in model.modules() if hasattr(m, "processor"))
    torch.testing.assert_close(_run(model, inputs), expected, rtol=0, atol=0)
    assert state.kernel_calls == calls


@needs_axes
@pytest.mark.parametrize("family, cast", [("flux", "all"), ("wan", "all but rope"), ("wan", "all")])
def test_patch_bf16(family, cast):
    """bf16: the kernel rounds once where diffusers rounds its float32 product; both round to bf16.
    ``from_pretrained(torch_dtype=torch.bfloat16)`` keeps Wan's rope in float32 (its
    _keep_in_fp32_modules), and the spec serves it; ``model.to(torch.bfloat16)`` rounds its rope
    tables, which the probe sees: every rotation then runs from the model's own cos and sin."""
    model, inputs = TINY[family][0]()
    model = model.to(torch.bfloat16)  # in place: the rope module's buffers are rounded too
    if cast == "all but rope":  # a rope module built in float32 again, as from_pretrained keeps it
        model.rope = type(model.rope)(model.rope.attention_head_dim, model.rope.patch_size, model.rope.max_seq_len)
    inputs = {k: v.to(torch.bfloat16) if k in ("hidden_states", "encoder_hidden_states", "pooled_projections") else v
              for k, v in inputs.items()}
    expected = _run(model, inputs).float()
    if family == "wan" and cast == "all":
        with pytest.warns(RuntimeWarning, match="the spec does not match the model's rotary module"):
            state = ropejit.diffusers.patch(model)
    else:
        state = ropejit.diffusers.patch(model, strict=True)
    try:
        got = _run(model, inputs).float()
    finally:
        ropejit.diffusers.unpatch(model)
    calls = TINY[family][1]
    cos_sin = calls if family == "wan" and cast == "all" else 0
    assert (state.kernel_calls, state.cos_sin_calls, state.fallback_calls) == (calls, cos_sin, 0), state
    assert (state.cos_sin_only is not None) == bool(cos_sin)
    _close(got, expected, rtol=2 ** -7)


@needs_axes
def test_wan_copied_cos_takes_the_cos_sin_route():
    """A hook that hands the blocks a copy of the cos (offloading, caching) hides the positions:
    Wan's swapped processor then rotates from diffusers' cos and sin."""
    model, inputs = _tiny_wan()
    expected = _run(model, inputs)
    state = ropejit.diffusers.patch(model)
    copying = model.rope.register_forward_hook(lambda module, args, output: tuple(t.clone() for t in output))
    try:
        _close(_run(model, inputs), expected)
    finally:
        copying.remove()
        ropejit.diffusers.unpatch(model)
    assert (state.kernel_calls, state.cos_sin_calls, state.fallback_calls) == (2, 2, 0)
    assert list(state.cos_sin_reasons) == ["a cos no hooked rotary module made (its positions are unknown)"]


@needs_axes
def test_fractional_ids_take_the_cos_sin_route():
    model, inputs = _tiny_flux()
    inputs["img_ids"] = inputs["img_ids"] + 0.5  # not integer positions: the kernel reads diffusers' cos/sin
    expected = _run(model, inputs)
    for cos_sin in (True, False):
        state = ropejit.diffusers.patch(model, cos_sin=cos_sin)
        try:
            _close(_run(model, inputs), expected)
        finally:
            ropejit.diffusers.unpatch(model)
        why = "fractional positions (ropejit's axes positions are integers)"
        if cos_sin:
            assert (state.kernel_calls, state.cos_sin_calls, state.fallback_calls) == (4, 4, 0)
            assert state.cos_sin_reasons == {why: 4}
        else:
            assert (state.kernel_calls, state.fallback_calls) == (0, 4) and state.fallback_reasons == {why: 4}


@needs_axes
def test_unpatched_model_beside_patched_one_keeps_diffusers():
    patched, inputs = _tiny_flux()
    other, _ = _tiny_flux()
    expected = _run(other, inputs)
    state = ropejit.diffusers.patch(patched)
    try:
        before = ropejit.diffusers.unknown_cos_calls
        torch.testing.assert_close(_run(other, inputs), expected, rtol=0, atol=0)  # diffusers' own code ran
        assert ropejit.diffusers.unknown_cos_calls == before + 4 and state.kernel_calls == 0
    finally:
        ropejit.diffusers.unpatch(patched)


def test_cos_sin_route_matches_apply_rotary_emb():
    """The route for rotations whose positions are unknown: diffusers' own cos and sin as the
    kernel's cos_sin_cache rows (runs without the axes form)."""
    generator = torch.Generator().manual_seed(10)
    ids = torch.rand(41, 4, generator=generator, dtype=torch.float64) * 50  # fractional: no spec positions
    cos, sin = diffusers.models.transformers.transformer_flux2.Flux2PosEmbed(2000, (16, 16, 16, 16))(ids)
    q = torch.randn(2, 41, 3, 64, generator=generator)
    k = torch.randn(2, 41, 1, 64, generator=generator)
    (q_out, k_out), why = ropejit.diffusers._rotate_cos_sin((cos, sin), q, k)
    assert why is None
    _close(q_out, embeddings.apply_rotary_emb(q, (cos, sin), sequence_dim=1))
    _close(k_out, embeddings.apply_rotary_emb(k, (cos, sin), sequence_dim=1))
    # repeat_interleave_real=False (Stable Audio's form): each pair's two elements hold different values
    halves = tuple(torch.cat([t[:, 0::2], t[:, 0::2]], -1) for t in (cos, sin))
    assert "two different values" in ropejit.diffusers._rotate_cos_sin(halves, q, k)[1]


def test_patch_declines_refused_family():
    class MochiTransformer3DModel(torch.nn.Module):  # stands in for diffusers' (refused by name)
        config = {"attention_head_dim": 128}

    model = MochiTransformer3DModel()
    with pytest.warns(RuntimeWarning, match="MochiTransformer3DModel"):
        state = ropejit.diffusers.patch(model)
    assert "learned frequencies" in state.reason and state.spec is None and not state.functions
    assert not hasattr(model, "_ropejit_patch")
    with pytest.raises(ropejit.Error, match="MochiTransformer3DModel is refused"):
        ropejit.diffusers.patch(model, strict=True)


def test_patch_declines_spec_only_family():
    """An imported family without a patch route keeps diffusers' code and says so."""
    class CogView4Transformer2DModel(torch.nn.Module):  # stands in for diffusers' (spec only)
        config = {key: value for key, value in _default_config("CogView4Transformer2DModel").items()
                  if key != "_class_name"}

    model = CogView4Transformer2DModel()
    with pytest.warns(RuntimeWarning, match="no patch route for the cogview4 family"):
        state = ropejit.diffusers.patch(model)
    assert state.spec == ropejit.Spec.from_diffusers(model, dtype="fp32") and state.family == "cogview4"
    assert not state.functions and not hasattr(model, "_ropejit_patch")


@needs_axes
def test_wan_norm_stays_apart_under_autograd():
    """With autograd recording q and k, Wan's norm and rotation run apart (the fused launch writes
    in place), and the gradients are diffusers' own."""
    model, inputs = _tiny_wan()
    model.train(False)
    want, want_grad = _output_and_input_grad(model, inputs)
    state = ropejit.diffusers.patch(model)
    try:
        got, got_grad = _output_and_input_grad(model, inputs)
    finally:
        ropejit.diffusers.unpatch(model)
    assert state.fused_norm_calls == 0 and state.kernel_calls == 2, state
    assert any("autograd" in why for why in state.fused_norm_reasons), state.fused_norm_reasons
    _close(got, want)
    _close(got_grad, want_grad)


@needs_axes
def test_wan_fused_projections_keep_the_fused_norm():
    """fuse_qkv_projections' q and k are chunks of one output (token rows strided): Wan's norm and
    rotation still run as one launch on them, in place."""
    model, inputs = _tiny_wan()
    expected = _run(model, inputs)
    model.fuse_qkv_projections()
    state = ropejit.diffusers.patch(model, strict=True)
    try:
        _close(_run(model, inputs), expected)
    finally:
        ropejit.diffusers.unpatch(model)
    assert (state.kernel_calls, state.fused_norm_calls, state.fused_norm_reasons) == (2, 2, {}), state
