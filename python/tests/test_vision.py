"""Vision and audio towers: ``Spec.from_hf(config, tower=...)`` and the tower side of
``ropejit.transformers.patch``, against transformers' own rotary modules and apply functions.

- The spec of every imported tower, read by an independent float64 reference of the axes form
  (``axes_reference``: the form's documented meaning, nothing of ropejit's code), gives HF's
  rotation on a fresh random odd grid of positions and random q and k; head dims 72, 80 and 88
  where the family's head dim follows the config's width.
- The kernel (``ropejit.torch.apply_rope`` with the spec) gives HF's rotation too, where the
  installed ropejit takes the axes form (skipped, saying so, where it does not).
- Every imported tower's rotary module and apply function patched in a small harness, and whole
  tiny towers (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V, Pixtral, Llama-4, Kimi-K2.5, ...) built
  from the library's config classes: patched output equals HF's, the kernel ran, unpatch restores.
- Refused towers are refused by name.
"""
import importlib
import json
import math
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
pytest.importorskip("transformers", reason="transformers is not installed")

import ropejit  # noqa: E402
import ropejit.transformers as rt  # noqa: E402
from ropejit import _patch_vision as pv  # noqa: E402
from ropejit import _vision_specs as vs  # noqa: E402
from tower_support import (TOLERANCE, hf_positions, hf_rotation, modeling, relative_error, rotary_of,  # noqa: E402
                           tower_config)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

TOWER_TYPES = sorted(t for t in vs.TOWERS if t in CONFIG_MAPPING)
MULTI_AXIS = [t for t in TOWER_TYPES if vs.TOWERS[t].form != "one"]


def axes_reference(spec, x, positions):
    """x [1, S, H, D] rotated in float64 by the spec dict's axes form (its documented meaning):
    per pair an axis and a float32 inv_freq, the float32 angle position * inv_freq, pairs neox
    (i, i + R/2) or interleaved (2i, 2i + 1). `positions` [A, S]."""
    axes = spec["io"]["axes"]
    pairs, count = axes["pairs"], len(axes["pairs"])
    thetas = axes.get("theta") or [spec["rope"]["rope_theta"]] * count
    rotary_dim = spec["rotary_dim"]
    axis_of, freq = [], []
    for slot in range(rotary_dim // 2):
        if axes["placement"] == "alternating":
            a, j = slot % count, slot // count
        else:
            a = next(i for i in range(count) if slot < sum(pairs[:i + 1]))
            j = slot - sum(pairs[:a])
        if axes["frequencies"] == "own":
            exponent = np.float32(2 * j) / np.float32(2 * pairs[a])
        else:  # global_alternate: one table over rotary_dim, axis a's pair j its entry j * A + a
            exponent = np.float32(2 * (j * count + a)) / np.float32(rotary_dim)
        axis_of.append(a)
        freq.append(np.float32(1.0 / math.pow(thetas[a], float(exponent))))
    pos = positions.numpy().astype(np.float32)[axis_of]  # [pairs, S]
    angle = (pos * np.array(freq, dtype=np.float32)[:, None]).astype(np.float64).T  # [S, pairs]
    out = x.double().numpy().copy()
    half = rotary_dim // 2
    first = np.arange(half) * 2 if spec["layout"] == "interleaved" else np.arange(half)
    second = first + 1 if spec["layout"] == "interleaved" else first + half
    a, b = out[..., first].copy(), out[..., second].copy()
    c, s = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
    out[..., first], out[..., second] = a * c - b * s, b * c + a * s
    return torch.from_numpy(out)


def head_dims(model_type):
    """72, 80 and 88 where the head width follows the config (the default's own otherwise)."""
    if model_type in ("pixtral", "llama4_vision_model") or vs.TOWERS[model_type].form == "one":
        return [None]
    return [72, 80, 88]


# ------------------------------------------------------------------ the import

@pytest.mark.parametrize("model_type", MULTI_AXIS)
def test_spec_reference_matches_hf(model_type):
    form = vs.TOWERS[model_type]
    rng = np.random.default_rng(sorted(vs.TOWERS).index(model_type))
    for head_dim in head_dims(model_type):
        config = tower_config(model_type, head_dim)
        spec = vs.tower_spec_dict(config, "vision", "fp32")
        assert spec["io"]["positions"] == "axes" and sum(spec["io"]["axes"]["pairs"]) * 2 == spec["rotary_dim"]
        rotary = rotary_of(config, form)
        position_ids = hf_positions(form, rng)
        positions = pv.tower_positions(form, rotary, position_ids)
        seq = positions.shape[1]
        q = torch.from_numpy(rng.standard_normal((1, seq, 2, spec["head_dim"]), dtype=np.float32))
        k = torch.from_numpy(rng.standard_normal((1, seq, 2, spec["head_dim"]), dtype=np.float32))
        want = hf_rotation(form, rotary, position_ids, q, k)
        for got, hf in zip((axes_reference(spec, q, positions), axes_reference(spec, k, positions)), want):
            assert relative_error(got, hf) <= TOLERANCE, (model_type, head_dim, spec["io"])


def test_reference_sees_a_wrong_spec():
    """The reference test fails for a spec one field off (placement, frequencies, axis order)."""
    form = vs.TOWERS["qwen2_vl_vision"]
    config = tower_config("qwen2_vl_vision", 80)
    rotary = rotary_of(config, form)
    position_ids = hf_positions(form, np.random.default_rng(1))
    positions = pv.tower_positions(form, rotary, position_ids)
    q = torch.randn(1, positions.shape[1], 2, 80)
    want = hf_rotation(form, rotary, position_ids, q, q)[0]
    spec = vs.tower_spec_dict(config, "vision", "fp32")
    assert relative_error(axes_reference(spec, q, positions), want) <= TOLERANCE
    for change in ({"placement": "alternating"}, {"frequencies": "global_alternate"}):
        wrong = dict(spec, io=dict(spec["io"], axes=dict(spec["io"]["axes"], **change)))
        assert relative_error(axes_reference(wrong, q, positions), want) > 1e-2, change
    assert relative_error(axes_reference(spec, q, positions.flip(0)), want) > 1e-2


@pytest.mark.parametrize("model_type", [t for t in TOWER_TYPES if vs.TOWERS[t].form == "one"])
def test_one_axis_spec_matches_hf(model_type, runtime):
    """A one-axis tower's ordinary spec through the kernel against HF's rotary and apply."""
    form = vs.TOWERS[model_type]
    config = tower_config(model_type)
    spec = ropejit.Spec.from_hf(config, tower="audio", dtype="fp32")
    assert spec.io["positions"] == "explicit"
    rng = np.random.default_rng(7)
    position_ids = hf_positions(form, rng)
    rotary = rotary_of(config, form)
    q = torch.from_numpy(rng.standard_normal((1, 13, 2, spec.head_dim), dtype=np.float32))
    k = torch.from_numpy(rng.standard_normal((1, 13, 2, spec.head_dim), dtype=np.float32))
    op_spec = dict(spec.to_dict(), num_q_heads=2, num_kv_heads=2)
    got = ropejit.torch.apply_rope(q, k, position_ids, spec=op_spec)
    with torch.no_grad():
        width = rotary(torch.zeros(1, 1), position_ids)[0].shape[-1]
    if width < spec.head_dim:  # HF's apply takes the rotated slice alone (split off before the call)
        want = hf_rotation(form, rotary, position_ids, q[..., :width].contiguous(), k[..., :width].contiguous())
        got = tuple(t[..., :width] for t in got)
    else:
        want = hf_rotation(form, rotary, position_ids, q, k)
    for g, w in zip(got, want):
        assert relative_error(g, w) <= 1e-4, model_type


def _axes_supported():
    try:
        ropejit.Spec.from_hf(tower_config("qwen2_vl_vision", 80), tower="vision")
        return None
    except ropejit.SpecError as e:
        return str(e).splitlines()[0]


@pytest.mark.parametrize("model_type", MULTI_AXIS)
def test_kernel_matches_hf(model_type):
    """The axes spec through the kernel (ropejit.torch.apply_rope) against HF, odd grids, head dims 72/80/88."""
    missing = _axes_supported()
    if missing:
        pytest.skip(f"the installed ropejit does not take the axes form: {missing}")
    form = vs.TOWERS[model_type]
    rng = np.random.default_rng(100 + sorted(vs.TOWERS).index(model_type))
    for head_dim in head_dims(model_type):
        config = tower_config(model_type, head_dim, heads=3)
        spec = ropejit.Spec.from_hf(config, tower="vision", dtype="fp32")
        rotary = rotary_of(config, form)
        position_ids = hf_positions(form, rng)
        positions = pv.tower_positions(form, rotary, position_ids)
        seq = positions.shape[1]
        q = torch.from_numpy(rng.standard_normal((1, seq, 3, spec.head_dim), dtype=np.float32))
        k = torch.from_numpy(rng.standard_normal((1, seq, 3, spec.head_dim), dtype=np.float32))
        want = hf_rotation(form, rotary, position_ids, q, k)
        got = ropejit.torch.apply_rope(q[0], k[0], positions, spec=spec)
        for g, w in zip(got, want):
            assert relative_error(g[None], w) <= TOLERANCE, (model_type, head_dim)


@pytest.mark.parametrize("model_type", sorted(vs.REFUSED))
def test_refused_towers_are_named(model_type):
    if model_type not in CONFIG_MAPPING:
        pytest.skip(f"{model_type} is not a model_type of this transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = CONFIG_MAPPING[model_type]()
    with pytest.raises(ropejit.Error, match=model_type):
        ropejit.Spec.from_hf(config, tower="vision")


def test_unknown_tower_and_bad_options_are_refused():
    config = tower_config("qwen2_vl_vision").to_dict()
    with pytest.raises(ropejit.SpecError, match="'qwen9_vision'"):
        ropejit.Spec.from_hf(dict(config, model_type="qwen9_vision"), tower="vision")
    with pytest.raises(ropejit.SpecError, match="tower: 'video'"):
        ropejit.Spec.from_hf(config, tower="video")
    with pytest.raises(ropejit.SpecError, match="rope_type: 'yarn'"):
        vs.tower_spec_dict(dict(config, rope_parameters={"rope_type": "yarn", "rope_theta": 1e4}))
    with pytest.raises(ropejit.SpecError, match="head_dim: 78"):
        vs.tower_spec_dict(dict(config, embed_dim=156))
    with pytest.raises(ropejit.SpecError, match="layer_type"):
        ropejit.Spec.from_hf(config, tower="vision", layer_type="full_attention")


def test_composite_configs_find_their_tower():
    for model_type, tower in (("qwen2_vl", "qwen2_vl_vision"), ("mistral3", "pixtral"), ("llama4", "llama4_vision_model"),
                              ("qwen2_5_omni", "qwen2_5_omni_vision_encoder"), ("kimi_k25", "kimi_k25_vision")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = CONFIG_MAPPING[model_type]()
        assert vs.tower_spec_dict(config, "vision")["name"] == f"{tower}-vision"
        as_json = json.loads(json.dumps(config.to_dict(), default=str))  # a config.json
        assert vs.tower_spec_dict(as_json, "vision") == vs.tower_spec_dict(config, "vision")


# ------------------------------------------------------------------ the patch: a harness per tower

class Harness(torch.nn.Module):
    """A tower's own rotary module and apply function, called as its attention calls them (the
    function looked up in the modeling module at each call): what the patch must find and replace."""

    def __init__(self, config, form):
        super().__init__()
        self.form = form
        self.rotary = rotary_of(config, form)

    def forward(self, q, k, position_ids):
        function = getattr(modeling(self.form), self.form.apply.split(".")[1])
        if self.form.rows is None:
            return function(q, k, self.rotary(q))
        cos, sin = self.rotary(q, position_ids)
        kind = pv._apply_kind(self.form)
        if kind == "vision":
            return function(q, k, cos, sin)
        return function(q, k, cos, sin, unsqueeze_dim=0 if cos.dim() == 2 else 1)


def harness_inputs(form, config, rng):
    position_ids = hf_positions(form, rng)
    seq = len(position_ids) if form.rows is not None and form.form != "one" else position_ids.shape[-1]
    if form.rows is None:
        seq = len(vs.llama4_positions(config)[0])
    head_dim, _ = vs.tower_sizes(config.to_dict())
    kind = pv._apply_kind(form)
    shape = {"vision": (seq, 3, head_dim), "complex": (1, seq, 3, head_dim)}.get(kind)
    if kind == "llama":
        shape = (1, 3, seq, head_dim)
    with torch.no_grad():
        width = head_dim if form.form != "one" else Harness(config, form).rotary(torch.zeros(1), position_ids)[0].shape[-1]
    shape = shape[:-1] + (width,)
    q = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    k = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    return q, k, position_ids


def _patched_harness(model_type, head_dim, seed, patched):
    """A tower's harness (its rotary module and apply function), its inputs drawn with seed + the
    tower's index, HF's output, and the tower's patch record once `patched` (warnings quiet)."""
    form = vs.TOWERS[model_type]
    config = tower_config(model_type, head_dim)
    model = Harness(config, form).eval()
    inputs = harness_inputs(form, config, np.random.default_rng(seed + sorted(vs.TOWERS).index(model_type)))
    with torch.no_grad():
        want = model(*inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state = patched(model)
    (tower,) = state.towers.values()
    return model, inputs, want, tower


@pytest.mark.parametrize("model_type", TOWER_TYPES)
def test_patch_harness(model_type, patched):
    """Every imported tower: its rotary module and apply function, patched, give HF's result; the
    kernel ran; unpatch puts HF's function back."""
    form = vs.TOWERS[model_type]
    function_name = form.apply.split(".")[1]
    original = getattr(modeling(form), function_name)
    head_dim = 88 if model_type in MULTI_AXIS and head_dims(model_type) != [None] else None
    model, (q, k, position_ids), want, tower = _patched_harness(model_type, head_dim, 500, patched)
    # a one-axis tower's spec is an ordinary one: its own positions serve on any ropejit
    assert tower.route == ("axes" if _axes_supported() is None or form.form == "one" else "cos_sin"), tower.why
    assert getattr(modeling(form), function_name) is not original
    with torch.no_grad():
        got = model(q, k, position_ids)
    assert tower.kernel_calls == 1 and tower.fallback_calls == 0, tower.fallback_reason
    for g, w in zip(got, want):
        assert relative_error(g, w) <= TOLERANCE
    rt.unpatch(model)
    assert getattr(modeling(form), function_name) is original
    with torch.no_grad():
        again = model(q, k, position_ids)
    assert tower.kernel_calls == 1 and all(torch.equal(a, w) for a, w in zip(again, want))


def test_patch_declines_a_wrong_route(patched, monkeypatch):
    """The probe is what keeps a tower from a wrong rotation: a form with the axes swapped makes
    the axes route disagree, and the cos/sin route (HF's own cos) is taken."""
    form = vs.TOWERS["qwen2_vl_vision"]
    monkeypatch.setitem(vs.TOWERS, "qwen2_vl_vision", vs.TowerForm("half2", "contiguous", "neox", (1, 0), form.rotary,
                                                                    form.apply))
    model = Harness(tower_config("qwen2_vl_vision", 80), form).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state = patched(model)
    (tower,) = state.towers.values()
    if _axes_supported() is None:
        assert tower.route == "cos_sin" and "axes: ropejit's q differs" in tower.why, tower.why
    else:
        assert tower.route == "cos_sin", tower.why


def test_strict_names_a_refused_tower():
    gemma = CONFIG_MAPPING["gemma4_vision"]()
    modeling_gemma = importlib.import_module("transformers.models.gemma4.modeling_gemma4")
    model = torch.nn.Module()
    model.rotary = modeling_gemma.Gemma4VisionRotaryEmbedding(gemma)
    with pytest.raises(ropejit.Error, match="gemma4_vision"):
        rt.patch(model, strict=True)
    assert getattr(model, "_ropejit_patch", None) is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = rt.patch(model)
    try:
        (tower,) = state.towers.values()
        assert tower.route == "hf" and "separate rotate_half" in tower.why
        assert any("gemma4_vision" in str(w.message) for w in caught)
    finally:
        rt.unpatch(model)


# ------------------------------------------------------------------ the patch: whole tiny towers

# Small sizes of the towers' configs (set only where the config has the field; the type kept)
SMALL = {"depth": 2, "num_hidden_layers": 2, "intermediate_size": 64, "out_hidden_size": 32, "patch_size": 2,
         "temporal_patch_size": 1, "patch_temporal": 1, "mlp_ratio": 2, "num_position_embeddings": 64,
         "deepstack_visual_indexes": [1], "fullatt_block_indexes": [1], "window_size": 8, "vision_output_dim": 32,
         "projector_input_dim": 32, "projector_output_dim": 32, "adapter_out_dim": 32, "moe_intermediate_size": 32,
         "merge_size": 1, "merge_kernel_size": (1, 1), "spatial_merge_size": 1, "num_key_value_heads": 2}
# Towers whose merger needs an even grid (spatial_merge_size 2), and Llama-4's pixel shuffle an even side
EVEN_GRID = {"dots3_note_vision_encoder"}


def tiny_tower(model_type, head_dim):
    """The library's tower model built from its own config class, tiny (2 layers, 2 heads of
    `head_dim`), fp32, random weights; and HF-shaped inputs: two images of odd patch grids
    (3 x 5 and 5 x 7: 50 patches) where the tower takes grid_thw."""
    from transformers import PreTrainedModel

    form = vs.TOWERS[model_type]
    config = tower_config(model_type, head_dim, heads=2)
    for name, value in SMALL.items():
        old = getattr(config, name, None)
        if old is not None:
            setattr(config, name, type(old)(value) if isinstance(old, (int, float, tuple)) else value)
    if hasattr(config, "embed_dim") and hasattr(config, "hidden_size"):  # Qwen2-VL: hidden_size is the merger's output
        config.hidden_size = 32
    if hasattr(config, "adapter_in_dim"):
        config.adapter_in_dim = config.hidden_size
    if model_type == "lfm3_vl_vision":  # its first two layers are convolutions by default
        config.layer_types = ["conv", "full_attention"]
    if model_type in EVEN_GRID:
        config.spatial_merge_size = 2
    if model_type == "llama4_vision_model":  # 6 x 6 patches (the pixel shuffle halves an even side) + CLS
        config.image_size = 6 * config.patch_size
        config.intermediate_size = int(config.hidden_size / config.pixel_shuffle_ratio ** 2)  # the adapter's input
    elif getattr(config, "image_size", None):  # a tower fed whole images: 7 x 7 patches
        config.image_size = 7 * config.patch_size
    module = modeling(form)
    classes = [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, PreTrainedModel)
               and c.__module__ == module.__name__ and isinstance(config, c.config_class) and "PreTrained" not in c.__name__]
    torch.manual_seed(sorted(vs.TOWERS).index(model_type))
    model = classes[-1](config).eval()
    return model, tower_inputs(model, config, model_type in EVEN_GRID)


def tower_inputs(model, config, even):
    import inspect

    params = list(inspect.signature(model.forward).parameters)
    patch, channels = config.patch_size, getattr(config, "in_channels", None) or getattr(config, "num_channels", 3)
    generator = torch.Generator().manual_seed(3)
    grid_name = next((n for n in params if n.endswith("grid_thw")), None)
    if grid_name:
        grid = torch.tensor([[1, 4, 6], [1, 2, 4]] if even else [[1, 3, 5], [1, 5, 7]])
        patches = int(grid.prod(-1).sum())
        for shape in ((patches, channels * patch * patch), (patches, channels, patch, patch),
                      (1, patches, channels, patch, patch)):
            kwargs = {params[0]: torch.randn(*shape, generator=generator), grid_name: grid}
            if "merge_sizes" in params:
                kwargs["merge_sizes"] = torch.ones(len(grid), dtype=torch.int64)
            try:
                with torch.no_grad():
                    model(**kwargs)
                return kwargs
            except (RuntimeError, ValueError):
                continue
        raise AssertionError(f"no patch layout runs {type(model).__name__}")
    if "image_sizes" in params:
        return {"pixel_values": torch.randn(2, channels, 5 * patch, 7 * patch, generator=generator),
                "image_sizes": torch.tensor([[5 * patch, 7 * patch], [3 * patch, 5 * patch]])}
    return {"pixel_values": torch.randn(1, channels, config.image_size, config.image_size, generator=generator)}


def hidden(out):
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


@pytest.mark.parametrize("model_type", MULTI_AXIS)
def test_tiny_tower_patched(model_type, patched):
    """A whole tiny tower: patched output equals HF's (fp32), every rotation ran the kernel, unpatch restores."""
    for head_dim in head_dims(model_type):
        model, kwargs = tiny_tower(model_type, head_dim)
        with torch.no_grad():
            want = hidden(model(**kwargs))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state = patched(model)
        (tower,) = state.towers.values()
        assert tower.route == ("axes" if _axes_supported() is None else "cos_sin"), tower.why
        with torch.no_grad():
            got = hidden(model(**kwargs))
        assert tower.kernel_calls > 0 and tower.fallback_calls == 0, (tower.fallback_reason, head_dim)
        # every cos found its positions (Qwen2.5-VL's window permutation followed); MLCD's carries a learned CLS angle
        assert tower.cos_sin_calls == (tower.kernel_calls if model_type == "mlcd_vision_model" else 0)
        assert state.kernel_calls_by_type[next(iter(state.towers))] == tower.kernel_calls
        assert relative_error(got, want) <= 1e-5, (model_type, head_dim)
        calls = tower.kernel_calls
        rt.unpatch(model)
        with torch.no_grad():
            again = hidden(model(**kwargs))
        assert tower.kernel_calls == calls and torch.equal(again, want)


def test_tower_table_rows_are_imported_or_refused_by_name():
    """docs/vision-towers.md's table: every model_type whose only rotary classes are a tower's is
    imported (as a tower the tests above check) or refused naming it."""
    import vision_table

    rows = vision_table.rows()
    assert len(rows) >= 40, "too few tower-only model types: is the installed transformers complete?"
    for model_type, _, result, detail in rows:
        if result == "imported":
            assert detail.split("`")[1].rsplit("-", 1)[0] in TOWER_TYPES, (model_type, detail)
        else:
            assert f"'{model_type}'" in detail, (model_type, detail)


def test_composite_model_patches_text_and_tower(patched):
    """A whole Qwen2-VL model (the patch report's shrunk default): the text layers take their mrope
    spec, the vision tower its axes spec, both give HF's output and both ran the kernel."""
    import patch_models

    from transformers import Qwen2VLConfig, Qwen2VLModel

    config = patch_models.shrink(Qwen2VLConfig())
    config.vision_config.depth = 2
    torch.manual_seed(0)
    model = Qwen2VLModel(config).eval()
    vision = config.vision_config
    grid = torch.tensor([[1, 4, 6], [1, 2, 2]])
    pixels = torch.randn(28, vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2)
    ids = torch.randint(0, 100, (1, 9))
    with torch.no_grad():
        want = model.visual(pixels, grid_thw=grid).last_hidden_state, model.language_model(input_ids=ids).last_hidden_state
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state = patched(model)
    with torch.no_grad():
        got = model.visual(pixels, grid_thw=grid).last_hidden_state, model.language_model(input_ids=ids).last_hidden_state
    (key,) = state.towers
    assert state.towers[key].route == ("axes" if _axes_supported() is None else "cos_sin")
    assert state.kernel_calls_by_type[key] == 2 and state.kernel_calls_by_type["all"] == 2
    assert state.fallback_calls == 0, state.fallback_reasons
    for g, w in zip(got, want):
        assert ((g - w).abs().max() / w.abs().max()).item() <= 1e-5


# towers whose HF apply rounds cos and each product in the model dtype (the kernel rounds once)
ROUNDS_IN_DTYPE = {"pixtral", "minimax_m3_vl_vision"}


@pytest.mark.parametrize("model_type", ["qwen2_vl_vision", "qwen2_5_vl_vision", "pixtral", "kimi_k25_vision",
                                        "llama4_vision_model", "minimax_m3_vl_vision", "inkling2_vision"])
def test_tiny_tower_bf16(model_type, patched):
    """A tower cast with model.to(bfloat16): the patch runs the config's float32 frequencies (a
    warning says so) and gives what HF gives with them, as from_pretrained(dtype=bfloat16) loads
    the model: the same bits where HF rotates in float32, within 4 bf16 ulps where it rounds in bf16."""
    missing = _axes_supported()
    if missing:
        pytest.skip(f"the float32 frequencies are the axes route's; the installed ropejit has no axes form: {missing}")
    model, kwargs = tiny_tower(model_type, 80 if head_dims(model_type) != [None] else None)
    model = model.to(torch.bfloat16)
    kwargs = {name: v.to(torch.bfloat16) if v.is_floating_point() else v for name, v in kwargs.items()}
    (rotary,) = pv.tower_modules(model, None)
    cast = dict(rotary.named_buffers(recurse=False))
    for name, buffer in type(rotary)(rotary.config).named_buffers(recurse=False):  # from_pretrained's buffers
        setattr(rotary, name, buffer)
    with torch.no_grad():
        want = hidden(model(**kwargs)).float()
    for name, buffer in cast.items():
        setattr(rotary, name, buffer)
    with pytest.warns(RuntimeWarning, match="float32 ones"):
        state = patched(model)
    (tower,) = state.towers.values()
    assert tower.route == ("axes" if _axes_supported() is None else "cos_sin"), tower.why
    with torch.no_grad():
        got = hidden(model(**kwargs)).float()
    assert tower.kernel_calls == 2 and tower.fallback_calls == 0
    if model_type in ROUNDS_IN_DTYPE:
        assert 0 < relative_error(got, want) <= 4 * 2.0 ** -8
    else:
        assert torch.equal(got, want)


@pytest.mark.parametrize("model_type", MULTI_AXIS)
def test_patch_harness_cos_sin_route(model_type, patched, monkeypatch):
    """The cos/sin route on every multi-axis tower (what runs where no spec serves): HF's own cos
    and sin through the kernel, in the tower's pairing (neox halves, interleaved, Llama-4's complex
    freqs_ci), give HF's result."""
    def no_spec(*args, **kwargs):
        raise ropejit.SpecError("io: the axes form is switched off by this test")

    monkeypatch.setattr(pv, "tower_spec_dict", no_spec)
    head_dim = 72 if head_dims(model_type) != [None] else None
    model, (q, k, position_ids), want, tower = _patched_harness(model_type, head_dim, 900, patched)
    assert tower.route == "cos_sin" and "switched off by this test" in tower.why, tower.why
    with torch.no_grad():
        got = model(q, k, position_ids)
    assert tower.kernel_calls == 1 and tower.fallback_calls == 0, tower.fallback_reason
    for g, w in zip(got, want):
        assert relative_error(g, w) <= TOLERANCE
