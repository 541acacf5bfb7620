"""The fused QK-norm launch of ropejit.diffusers' swapped processors (Wan's, Flux's): a model's
RMSNorm of q and of k and the rotation at the spec's positions in one launch, in place on the
projections [B, S, H * D]. Shared so that every processor refuses, counts and launches alike."""
from typing import Any, Optional, Sequence

import torch

from . import torch as ropejit_torch
from ._spec import Spec

_DTYPE_NAMES = ropejit_torch.SPEC_DTYPES


class SwappedProcessor:
    """The part every swapped processor shares (put first among its bases): built from the original
    (its attention backend and parallel config carried over, the original kept for unpatch) and the
    patch state; the spec's positions of a call's rotary tensors where this patch recorded them."""

    def __init__(self, original: Any, state: Any) -> None:
        self.__dict__.update(original.__dict__)
        self._ropejit_original = original
        self._ropejit_state = state

    def spec_positions(self, recalled: Any, rotary: Any) -> Any:
        """`recalled(rotary)`'s positions when this processor's patch made them, else None."""
        known = recalled(rotary)
        return known[0] if known is not None and known[1] is self._ropejit_state else None


def positions_refusal(state: Any, positions: Any, norms: Sequence[Any], tensors: Sequence[torch.Tensor]
                      ) -> Optional[str]:
    """Why no fused launch can serve this attention call at all (None: one can): it needs the spec's
    positions, and no autograd recording q or k (the kernel writes them in place) or the norms'
    weights (the launch reads them detached: their gradients would be lost)."""
    if state.cos_sin_only is not None or positions is None or isinstance(positions, str):
        return "the spec's positions are not known"
    weights = [getattr(norm, "weight", None) for norm in norms]
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in list(tensors) + weights):
        return "autograd records q, k or their norms' weights (the fused launch writes q and k in place)"
    return None


def launch_refusal(norm_q: Any, norm_k: Any, weight_size: int, positions: torch.Tensor,
                   query: torch.Tensor, key: torch.Tensor) -> Optional[str]:
    """Why q's and k's norms and rotation cannot run as one launch (None: they can): the kernel takes
    an RMSNorm (torch's or diffusers', both named so) with a weight of q's dtype of `weight_size`
    values and no bias, one eps for q and k, and projections [B, S, H * D] of one shape whose S is
    the positions' [A, 1, S], each token's row dense and the batch's rows one stride apart (so
    fused projections' chunks of one [B, S, 3 * H * D] output serve, read in place)."""
    for norm in (norm_q, norm_k):
        weight = getattr(norm, "weight", None)
        if type(norm).__name__ != "RMSNorm" or weight is None or weight.dtype != query.dtype:
            return (f"norm {type(norm).__name__} weighted {None if weight is None else weight.dtype} "
                    "(the fused form takes an RMSNorm weighted in q's dtype)")
        if weight.numel() != weight_size or not weight.is_contiguous():
            return f"a norm weight of {weight.numel()} values (the fused form takes {weight_size})"
        if getattr(norm, "bias", None) is not None or getattr(norm, "eps", None) is None:
            return "a norm with a bias or without eps (torch's dtype-dependent default)"
    if norm_q.eps != norm_k.eps:
        return "q's and k's norms differ in eps"
    if query.dtype not in _DTYPE_NAMES or query.dim() != 3 or not _token_rows(query) or not _token_rows(key):
        return f"q of {query.dtype}, shape {list(query.shape)}, strides {query.stride()}"
    if query.shape != key.shape or query.shape[1] != positions.shape[-1] or positions.device != query.device:
        return f"q {list(query.shape)}, k {list(key.shape)}, positions {list(positions.shape)}"
    return None


def _token_rows(projection: torch.Tensor) -> bool:
    """Whether a projection [B, S, W] views as the kernel's token rows [B * S, H, D]: every row
    dense, and row b * S + s at one stride from the next (the kernel reads strided rows)."""
    batch_stride, token_stride, element_stride = projection.stride()
    return element_stride == 1 and (projection.shape[0] == 1 or batch_stride == projection.shape[1] * token_stride)


def count_refusal(state: Any, why: str) -> None:
    """Counts one attention call whose norm and rotation ran apart, per reason."""
    state.fused_norm_reasons[why] = state.fused_norm_reasons.get(why, 0) + 1


def norm_spec_json(state: Any, dtype: torch.dtype, heads: int, head_dim: int, eps: float, scope: str) -> str:
    """The fused launch's canonical spec: the model's, with the RMSNorm over each head (``scope``
    "head": one [head_dim] weight) or over all heads ("all": [H * head_dim]); validated once per
    (scope, dtype, heads, head_dim, eps) in the patch state's cache, not at every attention call."""
    key = ("norm", scope, dtype, heads, head_dim, eps)
    if key not in state._spec_json:
        spec = dict(state.spec.to_dict(), dtype=_DTYPE_NAMES[dtype], num_q_heads=heads, num_kv_heads=heads,
                    head_dim=head_dim, rotary_dim=head_dim,
                    qk_norm={"type": "rmsnorm", "eps": eps, "scope": scope, "weight": "per_head"})
        spec["io"] = dict(spec["io"], input="separate", output="inplace", qkv_bias=False, copy_v=False)
        state._spec_json[key] = Spec.from_json(spec).to_json()
    return state._spec_json[key]


def norm_rotate(state: Any, spec_json: str, heads: int, positions: torch.Tensor, query: torch.Tensor,
                key: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor) -> None:
    """One launch of `spec_json` (norm_spec_json's, for `heads` heads) on the projections q and k
    [B, S, H * D] in place, at positions [A, 1, S] (the same for every batch row); counted as a
    kernel call and a fused one."""
    head_dim = query.shape[-1] // heads
    rows = positions.expand(positions.shape[0], query.shape[0], query.shape[1]).reshape(positions.shape[0], -1)
    kernel = ropejit_torch.kernel_for(spec_json, query.device)
    kernel(query.view(-1, heads, head_dim), key.view(-1, heads, head_dim), positions=rows.contiguous(),
           q_norm_weight=q_weight.detach(), k_norm_weight=k_weight.detach())
    state._count()
    state.fused_norm_calls += 1
