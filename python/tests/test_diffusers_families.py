"""Every diffusers 0.42.1 transformer class that rotates q and k is in ropejit's family table
(imported or refused by name), and each imported family's spec rotates like the family's OWN
rotary module (built from its class's config) and the library's own apply function.

fp32, host backend, random q and k, odd token counts. Families whose per-family test lives in
test_diffusers.py (Flux, Flux 2, Wan, HunyuanVideo, Qwen-Image, CogVideoX) are not repeated here.
"""
import importlib
import inspect
import pkgutil
import re
import types

import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

import ropejit  # noqa: E402
import ropejit.torch  # noqa: E402
from diffusers.models import embeddings  # noqa: E402
from ropejit import _diffusers_specs  # noqa: E402

from test_diffusers import AXES_MISSING, _close, _default_config, _grid  # noqa: E402

needs_axes = pytest.mark.skipif(AXES_MISSING is not None, reason=str(AXES_MISSING))
T = importlib.import_module("diffusers.models.transformers")


def _module(name):
    return importlib.import_module(f"diffusers.models.{name}")


# ------------------------------------------------------------------ completeness

#: Model classes whose module matches ROTARY but whose attention rotates nothing (why).
NO_ROPE = {
    "RFD4ProteinaTransformer": "transformer_rfd4_proteina.py: only 'proper' matches; its 'rotations' are SVD-fitted "
                               "3-D rotations of protein coordinates, no rotary embedding",
    "DreamLiteUNetModel": "unets/unet_dreamlite.py: only 'properly' (a comment) matches; a UNet without RoPE",
    "I2VGenXLUNet": "unets/unet_i2vgen_xl.py: only 'proper' (a comment) matches; a UNet without RoPE",
}

#: Deliberately loose (a false match must be listed in NO_ROPE with why; a miss is what the test guards).
ROTARY = re.compile(r"rotary|rope|freqs_cis", re.IGNORECASE)


def _rotating_classes():
    """Each diffusers model class (a ModelMixin defined in a models/transformers, controlnets or
    unets module) whose module's source matches ROTARY."""
    from diffusers.models.modeling_utils import ModelMixin
    found = {}
    for package in ("transformers", "controlnets", "unets"):
        root = _module(package)
        for info in pkgutil.iter_modules(root.__path__):
            module = importlib.import_module(f"{root.__name__}.{info.name}")
            if not ROTARY.search(inspect.getsource(module)):
                continue
            for name, value in vars(module).items():
                if inspect.isclass(value) and issubclass(value, ModelMixin) and value.__module__ == module.__name__:
                    found[name] = f"{package}/{info.name}.py"
    return found


def test_every_rotating_class_is_in_a_table():
    rotating = _rotating_classes()
    assert len(rotating) > 50, sorted(rotating)  # the scan itself found diffusers' models
    families, refused = _diffusers_specs.FAMILIES, _diffusers_specs.REFUSED
    missing = sorted(f"{name} ({path})" for name, path in rotating.items()
                     if name not in families and name not in refused and name not in NO_ROPE)
    assert not missing, f"diffusers {diffusers.__version__} classes that rotate but are in no table: {missing}"
    assert not set(families) & set(refused) and not set(NO_ROPE) & (set(families) | set(refused))
    stale = sorted((set(families) | set(refused) | set(NO_ROPE)) - set(rotating))
    assert not stale, f"table rows the scan does not find rotating: {stale}"


def test_scan_sees_a_plain_model_as_not_rotating():
    """The pattern is not so loose that everything matches: SD3, PixArt and the UNet2D rotate nothing."""
    rotating = _rotating_classes()
    assert not {"SD3Transformer2DModel", "PixArtTransformer2DModel", "UNet2DConditionModel"} & set(rotating)


# ------------------------------------------------------------------ references

def _spec(name, **overrides):
    config = dict(_default_config(name), **overrides)
    return ropejit.Spec.from_diffusers(config, dtype="fp32"), config


def _qk(spec, tokens, seed):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(1, tokens, spec.num_q_heads, spec.head_dim, generator=generator)
    k = torch.randn(1, tokens, spec.num_kv_heads, spec.head_dim, generator=generator)
    return q, k


def _ours(spec, q, k, positions):
    """ropejit's rotation of q and k [B, S, H, D] at positions [A, S]."""
    return ropejit.torch.apply_rope(q, k, positions.long().unsqueeze(1), spec=spec)


def _check(spec, q, k, positions, theirs_q, theirs_k):
    ours_q, ours_k = _ours(spec, q, k, positions)
    _close(ours_q, theirs_q)
    _close(ours_k, theirs_k)


def _random_ids(axes, tokens, high, seed):
    return torch.randint(0, high, (tokens, axes), generator=torch.Generator().manual_seed(seed))


FLUX_LIKE = {  # class -> (module, rotary class, theta from the config or fixed)
    "ChromaTransformer2DModel": ("transformers.transformer_chroma", "FluxPosEmbed", None),
    "FluxControlNetModel": ("controlnets.controlnet_flux", "FluxPosEmbed", None),
    "BriaTransformer2DModel": ("transformers.transformer_bria", "BriaEmbedND", "rope_theta"),
    "BriaFiboTransformer2DModel": ("transformers.transformer_bria_fibo", "BriaFiboEmbedND", "rope_theta"),
    "LongCatImageTransformer2DModel": ("transformers.transformer_longcat_image", "LongCatImagePosEmbed", None),
    "OvisImageTransformer2DModel": ("transformers.transformer_ovis_image", "OvisImagePosEmbed", None),
    "Krea2Transformer2DModel": ("transformers.transformer_krea2", "Krea2RotaryPosEmbed", "rope_theta"),
    "Flux3Transformer2DModel": ("transformers.transformer_flux3", "Flux3PosEmbed", "rope_theta"),
}


@needs_axes
@pytest.mark.filterwarnings("ignore:`FluxPosEmbed` is deprecated:FutureWarning")  # Chroma's own import
@pytest.mark.parametrize("name", sorted(FLUX_LIKE))
def test_flux_like_spec_matches_pos_embed(name):
    module, rotary, theta_key = FLUX_LIKE[name]
    spec, config = _spec(name)
    dims = list(config["axes_dims_rope"])
    pos_embed = getattr(_module(module), rotary)(config[theta_key] if theta_key else 10000, dims)
    ids = _random_ids(len(dims), 37, 96, 11)
    cos, sin = pos_embed(ids.to(torch.float64))  # ids: floats holding integers
    q, k = _qk(spec, 37, 12)
    apply = getattr(_module(module), "apply_rotary_emb", embeddings.apply_rotary_emb)
    _check(spec, q, k, ids.t(), apply(q, (cos, sin), sequence_dim=1), apply(k, (cos, sin), sequence_dim=1))


@needs_axes
@pytest.mark.parametrize("dims, head", [((64, 32, 32), 128), ((16, 8, 8), 64)])  # whole head, first half
def test_hidream_spec_matches_embed_nd(dims, head):
    spec, config = _spec("HiDreamImageTransformer2DModel", axes_dims_rope=dims, attention_head_dim=head)
    assert spec.rotary_dim == sum(dims)
    module = T.transformer_hidream_image
    ids = _random_ids(3, 35, 80, 13)
    freqs = module.HiDreamImageEmbedND(theta=10000, axes_dim=list(dims))(ids[None].to(torch.float64))
    q, k = _qk(spec, 35, 14)
    if sum(dims) == head:
        theirs = module.apply_rope(q, k, freqs)
    else:  # the attention rotates the first half (HiDreamAttnProcessor)
        rotated = module.apply_rope(q[..., : head // 2], k[..., : head // 2], freqs)
        theirs = tuple(torch.cat([r, x[..., head // 2:]], -1) for r, x in zip(rotated, (q, k)))
    _check(spec, q, k, ids.t(), *theirs)
    with pytest.raises(ropejit.SpecError, match=r"axes_dims_rope = \(32, 32\).*3 sizes"):
        ropejit.Spec.from_diffusers(_default_config("HiDreamImageTransformer2DModel"))


@needs_axes
def test_prx_spec_matches_embed_nd():
    spec, config = _spec("PRXTransformer2DModel")
    module = T.transformer_prx
    head = config["hidden_size"] // config["num_heads"]
    embed = module.PRXEmbedND(dim=head, theta=config["theta"], axes_dim=[32, 32])
    ids = _random_ids(2, 33, 64, 15)
    freqs = embed(ids[None].to(torch.float64))  # [B, 1, S, D/2, 2, 2]
    q, k = _qk(spec, 33, 16)
    bhsd = [x.transpose(1, 2) for x in (q, k)]  # PRX rotates [B, H, S, D]
    _check(spec, q, k, ids.t(), *[module.apply_rope(x, freqs).transpose(1, 2) for x in bhsd])


def _wan_grid_cos(rope, frames, rows, cols, patch):
    p_t, p_h, p_w = patch
    cos, sin = rope(torch.zeros(1, 1, frames * p_t, rows * p_h, cols * p_w))
    return cos.reshape(frames * rows * cols, -1), sin.reshape(frames * rows * cols, -1)


WAN_LIKE = {
    "WanVACETransformer3DModel": ("transformer_wan", "WanRotaryPosEmbed"),
    "WanAnimateTransformer3DModel": ("transformer_wan_animate", "WanRotaryPosEmbed"),
    "SkyReelsV2Transformer3DModel": ("transformer_skyreels_v2", "SkyReelsV2RotaryPosEmbed"),
    "ChronoEditTransformer3DModel": ("transformer_chronoedit", "ChronoEditRotaryPosEmbed"),
    "SanaVideoTransformer3DModel": ("transformer_sana_video", "WanRotaryPosEmbed"),
}


@needs_axes
@pytest.mark.parametrize("name", sorted(WAN_LIKE))
def test_wan_like_spec_matches_rotary_module(name):
    spec, config = _spec(name)
    module, rotary = WAN_LIKE[name]
    rope = getattr(getattr(T, module), rotary)(config["attention_head_dim"], config["patch_size"],
                                               config["rope_max_seq_len"])
    cos, sin = _wan_grid_cos(rope, 3, 3, 5, config["patch_size"])  # 45 tokens
    q, k = _qk(spec, 45, 17)
    apply = embeddings.apply_rotary_emb
    _check(spec, q, k, _grid(3, 3, 5)[:, 0], apply(q, (cos, sin), sequence_dim=1), apply(k, (cos, sin), sequence_dim=1))


@needs_axes
def test_chronoedit_two_frames_and_split():
    """Two latent frames take temporal positions 0 and temporal_skip_len - 1; a head size whose
    forward split differs from its table's is refused."""
    spec, config = _spec("ChronoEditTransformer3DModel")
    rope = T.transformer_chronoedit.ChronoEditRotaryPosEmbed(config["attention_head_dim"], config["patch_size"],
                                                             config["rope_max_seq_len"], temporal_skip_len=8)
    cos, sin = _wan_grid_cos(rope, 2, 3, 5, config["patch_size"])  # 30 tokens
    positions = _grid(2, 3, 5)[:, 0]
    positions[0] *= 7  # frame 1 -> 7
    q, k = _qk(spec, 30, 18)
    apply = embeddings.apply_rotary_emb
    _check(spec, q, k, positions, apply(q, (cos, sin), sequence_dim=1), apply(k, (cos, sin), sequence_dim=1))
    with pytest.raises(ropejit.SpecError, match="attention_head_dim = 16 .*D mod 6"):
        _spec("ChronoEditTransformer3DModel", attention_head_dim=16)


@needs_axes
def test_anyflow_spec_matches_rotary_module():
    spec, config = _spec("AnyFlowTransformer3DModel")
    module = T.transformer_anyflow
    rope = module.AnyFlowRotaryPosEmbed(config["attention_head_dim"], config["patch_size"], config["rope_max_seq_len"])
    freqs = rope({"total_frames": 3, "full_frame_shape": (5, 3)}, torch.device("cpu"))["query"]
    q, k = _qk(spec, 45, 19)
    theirs = [module.apply_rotary_emb(x.transpose(1, 2), freqs).transpose(1, 2) for x in (q, k)]  # [B, H, S, D]
    _check(spec, q, k, _grid(3, 5, 3)[:, 0], *theirs)


@needs_axes
def test_wan_animate2_spec_matches_rope_apply():
    spec, config = _spec("WanAnimate2Transformer3DModel")
    module = T.transformer_wan_animate_2
    d = config["dim"] // config["num_heads"]
    offsets, stride = (1, 0, 5), 2  # a reference stream: t from 1 in steps of 2, w after a 5-column grid
    freqs = torch.cat([module.rope_params(512, d - 4 * (d // 6), offset=offsets[0]),
                       module.rope_params(512, 2 * (d // 6), offset=offsets[1]),
                       module.rope_params(512, 2 * (d // 6), offset=offsets[2])], dim=1)
    q, k = _qk(spec, 45, 20)
    grid = torch.tensor([[3, 3, 5]])
    positions = _grid(3, 3, 5)[:, 0]
    positions = positions * torch.tensor([[stride], [1], [1]]) + torch.tensor(offsets)[:, None]
    _check(spec, q, k, positions, *[module.rope_apply(x, grid, freqs, stride) for x in (q, k)])


GRID_LIKE = {  # class -> rotary built from (config) -> module, and the hidden_states shape for 3 x 5 x 7
    "HunyuanVideo15Transformer3DModel": lambda c: T.transformer_hunyuan_video15.HunyuanVideo15RotaryPosEmbed(
        c["patch_size"], c["patch_size_t"], c["rope_axes_dim"], c["rope_theta"]),
    "MotifVideoTransformer3DModel": lambda c: T.transformer_motif_video.MotifVideoRotaryPosEmbed(
        c["patch_size"], c["patch_size_t"], c["rope_axes_dim"], c["rope_theta"]),
}


@needs_axes
@pytest.mark.parametrize("name", sorted(GRID_LIKE))
def test_grid_like_spec_matches_rotary_module(name):
    spec, config = _spec(name)
    rope = GRID_LIKE[name](config)
    p, p_t = config["patch_size"], config["patch_size_t"]
    cos, sin = rope(torch.zeros(1, 1, 3 * p_t, 5 * p, 7 * p))  # 105 tokens
    q, k = _qk(spec, 105, 22)
    if name.startswith("Motif"):
        theirs = [embeddings.apply_rotary_emb(x, (cos, sin), sequence_dim=1) for x in (q, k)]  # motif imports it
    else:
        theirs = [embeddings.apply_rotary_emb(x, (cos, sin), sequence_dim=1) for x in (q, k)]
    _check(spec, q, k, _grid(3, 5, 7)[:, 0], *theirs)


@needs_axes
@pytest.mark.parametrize("patch, dims", [((1, 1), (64, 64)), ((1, 2, 2), (32, 48, 48))])
def test_hunyuan_image_spec_matches_rotary_module(patch, dims):
    spec, config = _spec("HunyuanImageTransformer2DModel", patch_size=patch, rope_axes_dim=dims)
    rope = T.transformer_hunyuanimage.HunyuanImageRotaryPosEmbed(patch, dims, config["rope_theta"])
    sizes = (5, 7) if len(patch) == 2 else (3, 5, 7)
    cos, sin = rope(torch.zeros(1, 1, *[n * s for n, s in zip(sizes, patch)]))
    tokens = cos.shape[0]
    q, k = _qk(spec, tokens, 23)
    apply = embeddings.apply_rotary_emb
    _check(spec, q, k, _grid(*sizes)[:, 0], apply(q, (cos, sin), sequence_dim=1), apply(k, (cos, sin), sequence_dim=1))


@needs_axes
def test_joyimage_spec_matches_rotary_pos_embed():
    spec, config = _spec("JoyImageEditTransformer3DModel")
    module = T.transformer_joyimage
    owner = types.SimpleNamespace(hidden_size=config["hidden_size"], num_attention_heads=config["num_attention_heads"],
                                  rope_dim_list=list(config["rope_dim_list"]), theta=config["theta"])
    vis, txt = module.JoyImageEditTransformer3DModel.get_rotary_pos_embed(owner, [3, 5, 7], 9)
    cos, sin = torch.cat([vis[0], txt[0]]), torch.cat([vis[1], txt[1]])  # 105 image + 9 text tokens
    text = torch.arange(9) + 7  # after the largest visual index, on all three axes
    positions = torch.cat([_grid(3, 5, 7)[:, 0], text.expand(3, 9)], dim=1)
    q, k = _qk(spec, 114, 24)
    _check(spec, q, k, positions, *module._apply_rotary_emb(q, k, (cos, sin)))


@needs_axes
def test_joyimage_plus_spec_matches_rotary_for_range():
    spec, config = _spec("JoyImageEditPlusTransformer3DModel")
    module = T.transformer_joyimage_edit_plus
    owner = types.SimpleNamespace(config=types.SimpleNamespace(**config))
    start, stop = (2, 1, 3), (5, 6, 6)  # a reference block placed away from the origin
    cos, sin = module.JoyImageEditPlusTransformer3DModel._get_rotary_pos_embed_for_range(owner, start, stop)
    positions = _grid(3, 5, 3)[:, 0] + torch.tensor(start)[:, None]
    q, k = _qk(spec, 45, 25)
    _check(spec, q, k, positions, *module._apply_rotary_emb_batched(q, k, (cos[None], sin[None])))


TABLE_LIKE = {
    "ZImageTransformer2DModel": lambda c: T.transformer_z_image.RopeEmbedder(
        theta=c["rope_theta"], axes_dims=list(c["axes_dims"]), axes_lens=list(c["axes_lens"])),
    "BriaFibo2Transformer2DModel": lambda c: T.transformer_bria_fibo2.RopeEmbedder(
        theta=c["rope_theta"], axes_dims=list(c["axes_dims"]), axes_lens=list(c["axes_lens"])),
}


@needs_axes
@pytest.mark.parametrize("name", sorted(TABLE_LIKE))
@pytest.mark.parametrize("high", [128, 512])
def test_rope_embedder_spec_matches(name, high):
    """Positions < 128 at relative 1e-5; over the tables (< 512) the bound grows with the position:
    RopeEmbedder rounds its float64 angle to float32 (half an ulp: p · 2^-24 rad relative) before
    cos and sin, and ropejit's float32 inv_freq is off by up to p · f · 2^-24 rad: 4 · p · 2^-24."""
    spec, config = _spec(name)
    ids = _random_ids(3, 41, high, 26)
    freqs = TABLE_LIKE[name](config)(ids)[None]  # complex64 [1, S, D/2]
    q, k = _qk(spec, 41, 27)
    ours = _ours(spec, q, k, ids.t())
    rtol = max(1e-5, 4 * high * 2.0 ** -24)
    for mine, x in zip(ours, (q, k)):  # the processors' complex form
        _close(mine, embeddings.apply_rotary_emb(x, freqs, use_real=False), rtol=rtol)


@needs_axes
def test_lumina2_spec_matches_rotary_module():
    spec, config = _spec("Lumina2Transformer2DModel")
    rope = T.transformer_lumina2.Lumina2RotaryPosEmbed(theta=10000, axes_dim=list(config["axes_dim_rope"]),
                                                       axes_lens=list(config["axes_lens"]), patch_size=2)
    ids = torch.cat([_random_ids(1, 39, 300, 28), _random_ids(2, 39, 512, 29)], dim=1)
    freqs = rope._get_freqs_cis(ids[None])
    q, k = _qk(spec, 39, 30)
    assert spec.num_kv_heads == config["num_kv_heads"] < spec.num_q_heads
    _check(spec, q, k, ids.t(), *[embeddings.apply_rotary_emb(x, freqs, use_real=False) for x in (q, k)])


@needs_axes
@pytest.mark.parametrize("name", ["CogView4Transformer2DModel", "GlmImageTransformer2DModel"])
def test_cogview4_like_spec_matches_rotary_module(name):
    spec, config = _spec(name)
    rows, cols = 5, 7
    if name.startswith("CogView4"):
        rope = T.transformer_cogview4.CogView4RotaryPosEmbed(config["attention_head_dim"], config["patch_size"],
                                                             config["rope_axes_dim"])
        bounds = config["rope_axes_dim"]  # rows and columns rescaled onto the table: h * 256 // rows
    else:
        rope = T.transformer_glm_image.GlmImageRotaryPosEmbed(config["attention_head_dim"], config["patch_size"])
        bounds = (rows, cols)
    p = config["patch_size"]
    cos, sin = rope(torch.zeros(1, 1, rows * p, cols * p))
    positions = _grid(rows, cols)[:, 0] * torch.tensor(bounds)[:, None] // torch.tensor([rows, cols])[:, None]
    q, k = _qk(spec, 35, 31)
    theirs = [embeddings.apply_rotary_emb(x, (cos, sin), use_real_unbind_dim=-2, sequence_dim=1) for x in (q, k)]
    _check(spec, q, k, positions, *theirs)


@needs_axes
@pytest.mark.parametrize("name", ["CosmosTransformer3DModel", "CosmosControlNetModel"])
@pytest.mark.parametrize("fps", [None, 24])  # images, and video at the base fps (integer frame positions)
def test_cosmos_spec_matches_rotary_module(name, fps):
    spec, config = _spec(name)
    rope = T.transformer_cosmos.CosmosRotaryPosEmbed(
        hidden_size=config["attention_head_dim"], max_size=config["max_size"], patch_size=config["patch_size"],
        rope_scale=config["rope_scale"])
    p_t, p_h, p_w = config["patch_size"]
    cos, sin = rope(torch.zeros(1, 1, 3 * p_t, 5 * p_h, 7 * p_w), fps=fps)
    q, k = _qk(spec, 105, 32)
    theirs = [embeddings.apply_rotary_emb(x.transpose(1, 2), (cos, sin), use_real=True, use_real_unbind_dim=-2)
              .transpose(1, 2) for x in (q, k)]  # Cosmos rotates [B, H, S, D]
    _check(spec, q, k, _grid(3, 5, 7)[:, 0], *theirs)
    assert len(set(spec.to_dict()["io"]["axes"]["theta"])) == 2  # t's NTK theta, and 10000 for h and w


@needs_axes
def test_minimax_h3_spec_matches_rotary_module():
    spec, config = _spec("MiniMaxH3Transformer3DModel")
    module = T.transformer_minimax_h3
    rope = module.MiniMaxH3RotaryPosEmbed(rope_freq_dim=config["rope_freq_dim"], rope_theta=config["rope_theta"])
    ids = _random_ids(3, 31, 200, 33)
    cos, sin = rope(ids)
    assert spec.rotary_dim == cos.shape[-1] < spec.head_dim  # the tail passes through
    q, k = _qk(spec, 31, 34)
    _check(spec, q, k, ids.t(), *[module._apply_rotary_emb(x, cos, sin) for x in (q, k)])


QWEN_LIKE = {  # class -> (module, per-axis table of non-negative positions)
    "QwenImageControlNetModel": ("transformer_qwenimage", lambda m, c: m.QwenEmbedRope(
        theta=10000, axes_dim=list(c["axes_dims_rope"]), scale_rope=True).pos_freqs),
    "NucleusMoEImageTransformer2DModel": ("transformer_nucleusmoe_image", lambda m, c: m.NucleusMoEEmbedRope(
        theta=10000, axes_dim=list(c["axes_dims_rope"]), scale_rope=True).pos_freqs),
    "QwenImage21Transformer2DModel": ("transformer_qwenimage21", lambda m, c: torch.cat(
        [f[:4096] for f in m.QwenImage21Rope(theta=10000, axes_dim=list(c["axes_dims_rope"])).freqs], dim=-1)),
}


@needs_axes
@pytest.mark.parametrize("name", sorted(QWEN_LIKE))
def test_qwen_like_spec_matches_table(name):
    spec, config = _spec(name)
    module = getattr(T, QWEN_LIKE[name][0])
    table = QWEN_LIKE[name][1](module, config)
    dims = list(config["axes_dims_rope"])
    bounds = [0] + list(torch.tensor(dims).div(2, rounding_mode="floor").cumsum(0))
    positions = _random_ids(3, 33, 300, 35).t()  # the non-negative half of the tables
    freqs = torch.cat([table[positions[a], bounds[a]:bounds[a + 1]] for a in range(3)], dim=-1)
    apply = getattr(module, "apply_rotary_emb_qwen", None) or module._apply_rotary_emb_nucleus
    q, k = _qk(spec, 33, 36)
    _check(spec, q, k, positions, *[apply(x, freqs, use_real=False) for x in (q, k)])


def _stable_audio(config, tokens):
    rotary = config["attention_head_dim"] // 2  # pipeline_stable_audio.py: rotary_embed_dim
    cos, sin = embeddings.get_1d_rotary_pos_embed(rotary, tokens, use_real=True, repeat_interleave_real=False)

    def apply(x):  # StableAudioAttnProcessor2_0 on [B, H, S, D]: the first `rotary` dims, neox halves
        x = x.transpose(1, 2)
        rotated = embeddings.apply_rotary_emb(x[..., :rotary], (cos, sin), use_real=True, use_real_unbind_dim=-2)
        return torch.cat([rotated, x[..., rotary:]], -1).transpose(1, 2)
    return apply


def _stable_audio3(config, tokens):
    module = T.transformer_stable_audio3
    freqs = module.StableAudio3RotaryEmbedding(config["embed_dim"] // config["num_heads"] // 2)(tokens, "cpu")
    return lambda x: module._apply_rotary_partial(x, freqs)


def _ace_step(config, tokens):
    cos, sin = T.ace_step_transformer._ace_step_rotary_freqs(tokens, config["head_dim"], config["rope_theta"],
                                                             torch.device("cpu"), torch.float32)
    return lambda x: embeddings.apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-2, sequence_dim=1)


def _longcat_audio(config, tokens):
    module = T.transformer_longcat_audio_dit
    rope = module.AudioDiTRotaryEmbedding(config["dit_dim"] // config["dit_heads"], 2048, base=100000.0)
    cos_sin = rope(torch.zeros(1, tokens, 1), tokens)
    return lambda x: module._apply_rotary_emb(x, cos_sin)


def _minimax_music3(config, tokens):
    module = T.transformer_minimax_music3
    cos_sin = module.MiniMaxMusic3RotaryEmbedding(config["rotary_dim"])(tokens, torch.device("cpu"))
    return lambda x: module._apply_partial_rotary_emb(x, cos_sin)


SEQUENCE_LIKE = {"StableAudioDiTModel": _stable_audio, "StableAudio3DiTModel": _stable_audio3,
                 "AceStepTransformer1DModel": _ace_step, "LongCatAudioDiTTransformer": _longcat_audio,
                 "MiniMaxMusic3Transformer1DModel": _minimax_music3}


@needs_axes
@pytest.mark.parametrize("name", sorted(SEQUENCE_LIKE))
def test_sequence_spec_matches_rotary(name):
    """1-D audio DiTs: token t at position t, neox halves over the rotated width."""
    spec, config = _spec(name)
    tokens = 77
    apply = SEQUENCE_LIKE[name](config, tokens)
    q, k = _qk(spec, tokens, 37)
    if spec.num_kv_heads != spec.num_q_heads:  # GQA: diffusers repeats k's heads; the rotation is per head
        assert name in ("StableAudioDiTModel", "AceStepTransformer1DModel")
    _check(spec, q, k, torch.arange(tokens)[None], apply(q), apply(k))


@needs_axes
@pytest.mark.parametrize("name", ["Ideogram4Transformer2DModel", "Cosmos3OmniTransformer"])
def test_interleaved_mrope_spec_matches_rotary(name):
    """Qwen3-VL-style interleaved MRoPE: the spec is ropejit's mrope form (not axes). Text tokens
    carry one position on all three axes; image tokens (t, h, w), Ideogram 4's from 65536."""
    spec, config = _spec(name)
    io = spec.to_dict()["io"]
    assert io["positions"] == "mrope" and io["mrope_interleaved"]
    generator = torch.Generator().manual_seed(38)
    text = torch.arange(9).expand(3, 9)
    start = 65536 if name.startswith("Ideogram") else 9
    image = _grid(1, 5, 7)[:, 0] + torch.tensor([[start], [start], [start]])
    positions = torch.cat([text, image, torch.randint(0, 4000, (3, 7), generator=generator)], dim=1)  # 51 tokens
    q, k = _qk(spec, 51, 39)
    if name.startswith("Ideogram"):
        module = T.transformer_ideogram4
        rope = module.Ideogram4MRoPE(head_dim=config["attention_head_dim"], base=config["rope_theta"],
                                     mrope_section=config["mrope_section"])
        cos, sin = (t.unsqueeze(2) for t in rope(positions.t()[None]))
    else:
        module = T.transformer_cosmos3
        rope = module.Cosmos3VLTextRotaryEmbedding(head_dim=config["head_dim"], rope_theta=config["rope_theta"],
                                                   rope_axes_dim=[24, 20, 20])  # the default from rope_scaling None
        cos, sin = (t.unsqueeze(2) for t in rope(positions[:, None], torch.device("cpu"), torch.float32))
    theirs = [x * cos + module._rotate_half(x) * sin for x in (q, k)]
    # Both sides compute the angle p·f in float32, an ulp apart at most (ropejit's inv_freq is correctly
    # rounded, torch.pow's may be an ulp off): up to p·f·2^-22 rad per pair, which at Ideogram 4's image
    # positions (65536 on) exceeds the 1e-5 of the other tests; each element is held to that bound.
    half = spec.head_dim // 2
    inv_freq = float(config["rope_theta"]) ** (-torch.arange(half, dtype=torch.float64) * 2 / spec.head_dim)
    angle_error = positions.max(0).values.double()[:, None] * inv_freq * 2.0 ** -22  # [S, D/2]
    for mine, want, x in zip(_ours(spec, q, k, positions), theirs, (q, k)):
        magnitude = (x[..., :half].abs() + x[..., half:].abs()).double()  # each neox pair's two elements
        bound = (angle_error[None, :, None] * magnitude).repeat(1, 1, 1, 2) + 1e-5 * float(want.abs().max())
        excess = ((mine - want).abs().double() - bound).max()
        assert excess <= 0, f"{name}: ropejit and diffusers differ beyond the float32 angle bound by {excess}"
    if name.startswith("Cosmos3"):  # positions < 4000: the plain 1e-5 holds too
        _check(spec, q, k, positions, *theirs)


@needs_axes
@pytest.mark.parametrize("longest", [40, 5000])  # short_factor (max position + 1 <= 4096), long_factor past it
def test_omnigen_longrope_spec_matches_rotary(longest):
    generator = torch.Generator().manual_seed(40)
    half = 3072 // 32 // 2
    scaling = {"short_factor": (1 + torch.rand(half, generator=generator)).tolist(),
               "long_factor": (1 + 4 * torch.rand(half, generator=generator)).tolist()}
    spec, config = _spec("OmniGenTransformer2DModel", rope_scaling=scaling)
    assert spec.to_dict()["rope"]["rope_type"] == "longrope"
    module = T.transformer_omnigen
    rope = module.OmniGenSuScaledRotaryEmbedding(
        config["hidden_size"] // config["num_attention_heads"], config["max_position_embeddings"],
        config["original_max_position_embeddings"], config["rope_base"], scaling)
    positions = torch.randint(0, longest, (1, 43), generator=generator)
    positions[0, 0] = longest - 1  # the table follows max(position) + 1
    cos, sin = rope(torch.zeros(1), positions)
    q, k = _qk(spec, 43, 41)
    theirs = [embeddings.apply_rotary_emb(x.transpose(1, 2), (cos, sin), use_real_unbind_dim=-2).transpose(1, 2)
              for x in (q, k)]  # OmniGen rotates [B, H, S, D]
    ours = ropejit.torch.apply_rope(q, k, positions, spec=spec, seq_len=longest)
    for mine, want in zip(ours, theirs):
        _close(mine, want)
    with pytest.raises(ropejit.SpecError, match="rope_scaling = None"):
        ropejit.Spec.from_diffusers(_default_config("OmniGenTransformer2DModel"))


@pytest.mark.parametrize("name, key, value, allowed", [
    ("Lumina2Transformer2DModel", "num_kv_heads", 5, "a divisor of num_attention_heads = 24"),
    ("ZImageTransformer2DModel", "dim", 3841, "a multiple of n_heads = 30"),
    ("CosmosTransformer3DModel", "rope_scale", (1, 2), "3 positive numbers"),
    ("MiniMaxH3Transformer3DModel", "rope_freq_dim", 30, "at most attention_head_dim / 6 = 21"),
    ("Ideogram4Transformer2DModel", "mrope_section", (24, 50, 20), "h and w sections whose interleaved pairs exist"),
    ("CogView4Transformer2DModel", "attention_head_dim", 42, "a multiple of 4"),
    ("Krea2Transformer2DModel", "axes_dims_rope", (32, 48, 40), "sizes summing to attention_head_dim = 128"),
    ("HunyuanImageTransformer2DModel", "patch_size", (1, 2, 2), "2 sizes, one per rope_axes_dim axis"),
])
def test_config_errors_name_class_key_value_and_allowed(name, key, value, allowed):
    with pytest.raises(ropejit.SpecError) as info:
        ropejit.Spec.from_diffusers(dict(_default_config(name), **{key: value}))
    message = str(info.value)
    shown = {repr(value), repr(list(value)) if isinstance(value, tuple) else repr(value)}
    assert message.startswith(f"{name}: config {key} = ") and any(f"= {v} is not allowed" in message for v in shown)
    assert allowed in message, message
    assert info.value.issues[0][0] == key


def test_docs_list_every_class():
    """docs/diffusers.md's two tables name every row of FAMILIES and REFUSED, with the counts."""
    import pathlib
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "diffusers.md").read_text()
    families, refused = _diffusers_specs.FAMILIES, _diffusers_specs.REFUSED
    missing = [name for name in list(families) + list(refused) if f"| `{name}` |" not in text]
    assert not missing, f"docs/diffusers.md lacks rows for {missing}"
    assert f"### Imported ({len(families)})" in text and f"### Refused by name ({len(refused)})" in text
