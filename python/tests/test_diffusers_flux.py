"""Flux's (and Chroma's) swapped FluxAttnProcessor under ropejit.diffusers.patch: the per-head
QK RMSNorm and the rotation as one launch per stream (text, image), and where they run apart.

The tiny models' QK-norm weights are random (test_diffusers._tiny_flux), so a launch reading the
wrong stream's weights fails the comparison with the unpatched output."""
import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

import ropejit.diffusers  # noqa: E402

from test_diffusers import _close, _output_and_input_grad, _run, _tiny_flux, needs_axes  # noqa: E402

AUTOGRAD = "autograd records q, k or their norms' weights (the fused launch writes q and k in place)"


@needs_axes
def test_flux_norm_stays_apart_under_autograd():
    """With autograd recording q and k, Flux's norms and rotation run apart (the fused launches
    write in place): diffusers' norms, then ropejit's rotation of q and of k, and the gradients are
    diffusers' own."""
    model, inputs = _tiny_flux()
    want, want_grad = _output_and_input_grad(model, inputs)
    state = ropejit.diffusers.patch(model)
    try:
        got, got_grad = _output_and_input_grad(model, inputs)
    finally:
        ropejit.diffusers.unpatch(model)
    assert (state.fused_norm_calls, state.kernel_calls, state.fallback_calls) == (0, 4, 0), state
    assert state.fused_norm_reasons == {AUTOGRAD: 2}
    _close(got, want)
    _close(got_grad, want_grad)


@needs_axes
def test_flux_fused_norm_batch_and_fused_projections():
    """Two batch rows (each at the same positions) and fuse_qkv_projections' chunks of one
    [B, S, 3 * H * D] output (token rows strided) still run one launch per stream; a norm the
    kernel does not take (no weight) runs diffusers' steps, the reason counted."""
    model, inputs = _tiny_flux()
    generator = torch.Generator().manual_seed(14)
    inputs = {k: torch.randn((2,) + v.shape[1:], generator=generator) if k in ("hidden_states", "encoder_hidden_states",
                                                                                "pooled_projections") else v
              for k, v in inputs.items()}
    inputs["timestep"] = torch.tensor([0.5, 0.25])
    expected = _run(model, inputs)
    model.fuse_qkv_projections()
    assert all(block.attn.fused_projections for block in model.transformer_blocks + model.single_transformer_blocks)
    state = ropejit.diffusers.patch(model, strict=True)
    try:
        _close(_run(model, inputs), expected)
        assert (state.kernel_calls, state.fused_norm_calls, state.fused_norm_reasons) == (3, 3, {}), state
        single = model.single_transformer_blocks[0].attn
        single.norm_k = torch.nn.RMSNorm(16, eps=1e-6, elementwise_affine=False)
        expected = _run(model, inputs)
        # the joint block's 2 launches again; the single block's q and k rotated apart (2 calls)
        assert (state.fused_norm_calls, state.kernel_calls) == (3 + 2, 3 + 2 + 2), state
        assert state.fused_norm_reasons == {"norm RMSNorm weighted None (the fused form takes an RMSNorm weighted "
                                            "in q's dtype)": 1}
    finally:
        ropejit.diffusers.unpatch(model)
    _close(_run(model, inputs), expected)



@needs_axes
def test_flux_trainable_norm_weights_keep_their_gradients():
    """Projections frozen, QK-norm weights trained: q and k are not recorded, the norms' weights are,
    so the norms run apart (a fused launch reads the weights detached) and their gradients are
    diffusers' own."""
    model, inputs = _tiny_flux()
    norms = [p for name, p in model.named_parameters() if ".norm_q." in name or ".norm_added_k." in name]
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    for weight in norms:
        weight.requires_grad_(True)

    def forward_and_grads():
        out = model(**inputs, return_dict=False)[0]
        return out.detach(), torch.autograd.grad(out.square().sum(), norms)

    want, want_grads = forward_and_grads()
    state = ropejit.diffusers.patch(model)
    try:
        got, got_grads = forward_and_grads()
    finally:
        ropejit.diffusers.unpatch(model)
    assert (state.fused_norm_calls, state.kernel_calls, state.fused_norm_reasons) == (0, 4, {AUTOGRAD: 2}), state
    _close(got, want)
    for ours, theirs in zip(got_grads, want_grads):
        _close(ours, theirs)
