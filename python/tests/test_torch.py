"""ropejit.torch: the custom op against the float64 reference, its fake implementation,
torch.compile, autograd and error paths, on CPU tensors (host backend)."""
import subprocess
import sys
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the torch custom op is not tested")

import ropejit  # noqa: E402
import ropejit.torch as rope_torch  # noqa: E402
from reference import TOLERANCE, inv_freq_default, rotate  # noqa: E402

THETA = 10000.0
HQ, HKV, D = 4, 2, 32


def make_spec(dtype="fp32", layout="neox", rotary_dim=D, **extra):
    spec = {"name": "torch-test", "head_dim": D, "rotary_dim": rotary_dim, "num_q_heads": HQ,
            "num_kv_heads": HKV, "layout": layout, "dtype": dtype, "max_position_embeddings": 4096,
            "rope": {"rope_type": "default", "rope_theta": THETA}}
    spec.update(extra)
    return ropejit.Spec.from_json(spec)


@pytest.fixture(autouse=True, scope="module")
def host_runtime(runtime):
    """The op's CPU kernels come from the session's runtime (its cache in a temporary folder)."""
    rope_torch.set_runtime(runtime)


@pytest.fixture
def gen(request):
    """A torch generator seeded by the test's name."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


def heads(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


def expected(x, positions, spec):
    """The float64 reference of x ([..., H, D], any dtype) rotated by positions (same leading dims)."""
    flat = x.double().reshape(-1, x.shape[-2], x.shape[-1]).numpy()
    pos = positions.expand(x.shape[:-2]).reshape(-1).numpy()
    out = rotate(flat, pos, inv_freq_default(THETA, spec.rotary_dim), spec.layout)
    return out.reshape(x.shape)


def assert_matches(actual, want, dtype, what):
    got = actual.double().numpy()
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    error = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    assert error.max() <= TOLERANCE[dtype], f"{what}: error {error.max():.3g} > {TOLERANCE[dtype]} ({dtype})"


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("token_dims", [(37,), (3, 11)], ids=["T", "B,S"])
@pytest.mark.parametrize("layout", ["neox", "interleaved"])
def test_matches_float64_reference(gen, dtype, token_dims, layout):
    spec = make_spec(dtype, layout, rotary_dim=24)
    torch_dtype = rope_torch.TORCH_DTYPES[dtype]
    q = heads(gen, *token_dims, HQ, D, dtype=torch_dtype)
    k = heads(gen, *token_dims, HKV, D, dtype=torch_dtype)
    positions = torch.randint(0, 4000, token_dims, generator=gen)
    q_before, k_before = q.clone(), k.clone()
    q_out, k_out = rope_torch.apply_rope(q, k, positions, spec=spec)
    assert (q_out.shape, q_out.dtype, k_out.shape, k_out.dtype) == (q.shape, q.dtype, k.shape, k.dtype)
    assert_matches(q_out, expected(q, positions, spec), dtype, "q_out")
    assert_matches(k_out, expected(k, positions, spec), dtype, "k_out")
    assert torch.equal(q, q_before) and torch.equal(k, k_before)  # the functional op leaves its inputs


def test_hf_position_ids_broadcast_and_strided_layouts(gen):
    spec = make_spec()
    wide = heads(gen, 2, 9, HQ + 3, D)
    q = wide[:, :, :HQ]  # tokens strided (a fused projection's slice): read where it is
    k = heads(gen, 2, HKV, 9, D).transpose(1, 2)  # HF's [B, H, S, D] transposed back: rows not dense
    position_ids = torch.arange(5, 14, dtype=torch.int32).unsqueeze(0)  # [1, S], as HF passes it
    q_out, k_out = rope_torch.apply_rope(q, k, position_ids, spec=spec)
    assert_matches(q_out, expected(q, position_ids, spec), "fp32", "q_out")
    assert_matches(k_out, expected(k, position_ids, spec), "fp32", "k_out")


def test_inplace_rotates_where_the_tensors_are(gen):
    spec = make_spec("bf16")
    q = heads(gen, 2, 6, HQ, D, dtype=torch.bfloat16)
    k = heads(gen, 2, 6, HKV, D, dtype=torch.bfloat16)
    positions = torch.randint(0, 4000, (2, 6), generator=gen)
    want_q, want_k = rope_torch.apply_rope(q, k, positions, spec=spec)
    q_res, k_res = rope_torch.apply_rope(q, k, positions, spec=spec, inplace=True)
    assert q_res is q and k_res is k
    assert torch.equal(q, want_q) and torch.equal(k, want_k)


def test_spec_forms_agree(gen):
    spec = make_spec()
    q, k = heads(gen, 5, HQ, D), heads(gen, 5, HKV, D)
    positions = torch.arange(5)
    results = [rope_torch.apply_rope(q, k, positions, spec=form)
               for form in (spec, spec.to_dict(), spec.to_json(), rope_torch.op_spec_json(spec))]
    for q_out, k_out in results[1:]:
        assert torch.equal(q_out, results[0][0]) and torch.equal(k_out, results[0][1])
    packed = dict(spec.to_dict(), io={"input": "packed_qkv", "qkv_bias": True})  # the op's io replaces it
    assert rope_torch.op_spec_json(packed) == rope_torch.op_spec_json(spec)


def test_opcheck(gen):
    spec = make_spec()
    q = heads(gen, 2, 3, HQ, D).requires_grad_()
    k = heads(gen, 2, 3, HKV, D).requires_grad_()
    positions = torch.randint(0, 4000, (2, 3), generator=gen)
    spec_json = rope_torch.op_spec_json(spec)
    torch.library.opcheck(torch.ops.ropejit.apply_rope.default, (q, k, positions, spec_json, None))
    inplace_json = rope_torch.op_spec_json(spec, inplace=True)
    torch.library.opcheck(torch.ops.ropejit.apply_rope_.default,
                          (q.detach().clone(), k.detach().clone(), positions, inplace_json, None))


def test_fake_tensor_mode_gives_shapes_and_dtypes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    spec = make_spec("bf16")
    with FakeTensorMode():
        q = torch.empty(2, 7, HQ, D, dtype=torch.bfloat16)
        k = torch.empty(2, 7, HKV, D, dtype=torch.bfloat16)
        q_out, k_out = rope_torch.apply_rope(q, k, torch.zeros(1, 7, dtype=torch.int64), spec=spec)
        assert (q_out.shape, q_out.dtype, k_out.shape, k_out.dtype) == (q.shape, q.dtype, k.shape, k.dtype)
        with pytest.raises(ropejit.ArgumentError, match=r"k: shape \[2, 7, 3, 32\] is not allowed"):
            rope_torch.apply_rope(q, torch.empty(2, 7, 3, D, dtype=torch.bfloat16), torch.zeros(2, 7), spec=spec)


def test_torch_compile_fullgraph_matches_eager(gen):
    spec = make_spec()

    def rope(q, k, positions):
        return rope_torch.apply_rope(q, k, positions, spec=spec)

    q, k = heads(gen, 2, 5, HQ, D), heads(gen, 2, 5, HKV, D)
    positions = torch.randint(0, 4000, (2, 5), generator=gen)
    compiled = torch.compile(rope, fullgraph=True)  # inductor: the graph is the op alone, no C++ to build
    for got, want in zip(compiled(q, k, positions), rope(q, k, positions)):
        assert torch.equal(got, want)


def test_compiled_inplace_and_backward_match_eager(gen):
    spec = make_spec()

    def scores(q, k, positions):
        q_rot, k_rot = rope_torch.apply_rope(q, k, positions, spec=spec)
        q_in, k_in = rope_torch.apply_rope(q.detach() * 2, k.detach() + 1, positions, spec=spec, inplace=True)
        return (q_rot * q_in).sum() + (k_rot @ k_in.transpose(-1, -2)).sum()

    q, k = heads(gen, 7, HQ, D), heads(gen, 7, HKV, D)
    positions = torch.randint(0, 4000, (7,), generator=gen)
    results = []
    for fn in (scores, torch.compile(scores, fullgraph=True, backend="aot_eager")):
        q_leaf, k_leaf = q.clone().requires_grad_(), k.clone().requires_grad_()
        value = fn(q_leaf, k_leaf, positions)
        value.backward()
        results.append((value, q_leaf.grad, k_leaf.grad))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want)


def test_backward_matches_autograd_of_cos_sin_formula(gen):
    spec = make_spec(layout="interleaved", rotary_dim=16)
    q, k = heads(gen, 9, HQ, D).requires_grad_(), heads(gen, 9, HKV, D).requires_grad_()
    positions = torch.randint(0, 4000, (9,), generator=gen)
    weights_q, weights_k = heads(gen, 9, HQ, D), heads(gen, 9, HKV, D)
    q_out, k_out = rope_torch.apply_rope(q, k, positions, spec=spec)
    grads = torch.autograd.grad((q_out * weights_q).sum() + (k_out * weights_k).sum(), (q, k))

    inv_freq = torch.from_numpy(inv_freq_default(THETA, 16))
    angle = positions.float()[:, None, None] * inv_freq  # [T, 1, d/2]

    def formula(x):  # interleaved pairs (2i, 2i + 1), the tail past rotary_dim untouched
        a, b = x[..., 0:16:2], x[..., 1:16:2]
        rotated = torch.stack((a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin()), -1)
        return torch.cat((rotated.flatten(-2), x[..., 16:]), -1)

    want = torch.autograd.grad((formula(q) * weights_q).sum() + (formula(k) * weights_k).sum(), (q, k))
    for got, w in zip(grads, want):
        torch.testing.assert_close(got, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("interleaved", [False, True], ids=["contiguous", "interleaved"])
def test_mrope_takes_three_position_streams(gen, interleaved):
    section = [4, 6, 6] if not interleaved else [6, 5, 5]  # temporal, height, width pairs of the 16
    spec = make_spec(io={"positions": "mrope", "mrope_section": section, "mrope_interleaved": interleaved})
    q, k = heads(gen, 2, 5, HQ, D), heads(gen, 2, 5, HKV, D)
    positions = torch.randint(0, 4000, (3, 1, 5), generator=gen)  # [3, 1, S]: broadcast over the batch
    q_out, k_out = rope_torch.apply_rope(q, k, positions, spec=spec)
    # Each frequency pair rotates by its stream's position: pair by pair through the one-stream reference.
    if interleaved:
        stream = [1 if i % 3 == 1 and i < 3 * section[1] else 2 if i % 3 == 2 and i < 3 * section[2] else 0
                  for i in range(D // 2)]
    else:
        stream = [s for s, n in enumerate(section) for _ in range(n)]
    for got, x in ((q_out, q), (k_out, k)):
        want = np.empty(x.shape)
        for pair, s in enumerate(stream):
            rotated = expected(x, positions[s], make_spec())
            want[..., [pair, pair + D // 2]] = rotated[..., [pair, pair + D // 2]]
        assert_matches(got, want, "fp32", "mrope")
    with pytest.raises(ropejit.ArgumentError, match=r"positions: shape \[1, 5\] is not allowed: must be "
                                                    r"\[3, 2, 5\] or \[3, 1, 5\] \(3 streams"):
        rope_torch.apply_rope(q, k, positions[0], spec=spec)


@pytest.fixture
def call(gen):
    """Valid arguments, and a checker that a bad call raises and leaves q and k as they were."""
    args = {"q": heads(gen, 6, HQ, D), "k": heads(gen, 6, HKV, D), "positions": torch.arange(6)}
    before = {name: t.clone() for name, t in args.items()}

    def expect(error, match, spec=None, inplace=False, **changes):
        given = dict(args, **changes)
        with pytest.raises(error, match=match) as info:
            rope_torch.apply_rope(given["q"], given["k"], given["positions"], spec=spec or make_spec(),
                                  inplace=inplace)
        assert isinstance(info.value, ValueError)
        for name, original in before.items():
            assert torch.equal(args[name], original), f"{name} changed by a failed call"

    return args, expect


def test_errors_name_the_argument(call):
    args, expect = call
    expect(ropejit.ArgumentError, r"q: dtype torch.float16 is not allowed: the spec's dtype fp32 needs torch.float32",
           q=args["q"].half())
    expect(ropejit.ArgumentError, r"k: shape \[6, 3, 32\] is not allowed: must be \[T, Hkv, D\] = \[6, 2, 32\]",
           k=torch.zeros(6, 3, D))
    expect(ropejit.ArgumentError, r"q: shape \[6, 128\] is not allowed: must be \[T, Hq, D\] or \[B, S, Hq, D\]",
           q=args["q"].reshape(6, -1))
    expect(ropejit.ArgumentError, r"positions: shape \[5\] is not allowed: must be \[6\]", positions=torch.arange(5))
    expect(ropejit.ArgumentError, r"positions: dtype torch.float32 is not allowed", positions=torch.zeros(6))
    expect(ropejit.ArgumentError, r"k is on meta, but q is on cpu", k=torch.empty(6, HKV, D, device="meta"))


def test_errors_in_place_and_from_the_library(call):
    args, expect = call
    expect(ropejit.ArgumentError, r"positions\[2\] = -4 is not allowed", inplace=True,
           positions=torch.tensor([0, 1, -4, 3, 4, 5]))
    wide = torch.zeros(HQ, 6, D).transpose(0, 1)  # heads not one dense row: in place cannot copy
    expect(ropejit.ArgumentError, r"q: strides \[32, 192, 1\] are not allowed in place", inplace=True, q=wide)


def test_spec_errors():
    q, k, positions = torch.zeros(3, HQ, D), torch.zeros(3, HKV, D), torch.arange(3)
    with pytest.raises(ropejit.ArgumentError, match=r"spec: qk_norm is set, but apply_rope only rotates"):
        rope_torch.apply_rope(q, k, positions, spec=make_spec(qk_norm={"type": "rmsnorm", "eps": 1e-6}))
    with pytest.raises(ropejit.SpecError, match=r"/layout"):
        rope_torch.apply_rope(q, k, positions, spec=dict(make_spec().to_dict(), layout="sideways"))
    with pytest.raises(TypeError, match=r"spec: expected a ropejit.Spec, a dict or JSON text, not int"):
        rope_torch.apply_rope(q, k, positions, spec=3)


def test_import_ropejit_does_not_import_torch():
    code = "import sys, ropejit; assert 'torch' not in sys.modules, 'ropejit imported torch'"
    subprocess.run([sys.executable, "-c", code], check=True)
