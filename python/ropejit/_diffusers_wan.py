"""Wan's self-attention under ropejit.diffusers.patch: diffusers 0.42.1's ``WanAttnProcessor``
steps with the rotation (and, where it can, the RMSNorm over all heads before it) run by ropejit's
kernel. Its rotation is inline in the processor, so the processor is swapped rather than a function."""
import sys
from typing import Any, Callable, Optional

import torch

from . import torch as ropejit_torch
from ._spec import Spec

_DTYPE_NAMES = ropejit_torch.SPEC_DTYPES


def processor_class(module_name: str, recalled: Callable, rotation: Callable) -> type:
    """A WanAttnProcessor whose self-attention (rotary_emb given) rotates with ropejit: diffusers
    0.42.1's steps for that branch, with the inline rotation replaced (`recalled` and `rotation`:
    ropejit.diffusers' position lookup and rotation)."""
    wan = sys.modules[module_name]

    class RopejitWanAttnProcessor(wan.WanAttnProcessor):
        def __init__(self, original: Any, state: Any) -> None:
            self.__dict__.update(original.__dict__)  # the attention backend and parallel config set on it
            self._ropejit_original = original
            self._ropejit_state = state

        def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: Optional[torch.Tensor] = None,
                     attention_mask: Optional[torch.Tensor] = None, rotary_emb: Any = None,
                     **kwargs: Any) -> torch.Tensor:
            state = self._ropejit_state
            args = (attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb)
            if rotary_emb is None:  # cross-attention: nothing to rotate
                return super().__call__(*args, **kwargs)
            if attn.add_k_proj is not None or kwargs:
                state._count("image-conditioned attention (add_k_proj) or extra arguments: "
                             "a branch ropejit does not copy")
                return super().__call__(*args, **kwargs)
            known = recalled(rotary_emb)
            positions = known[0] if known is not None and known[1] is state else None
            query, key, value = wan._get_qkv_projections(attn, hidden_states, encoder_hidden_states)
            value = value.unflatten(2, (attn.heads, -1))
            if _norm_rotate_wan(state, attn, positions, query, key):  # one launch: norm, then rotate
                query, key = query.unflatten(2, (attn.heads, -1)), key.unflatten(2, (attn.heads, -1))
            else:
                query = attn.norm_q(query).unflatten(2, (attn.heads, -1))
                key = attn.norm_k(key).unflatten(2, (attn.heads, -1))
                rotated = rotation(state, positions, rotary_emb, query, key)
                if rotated is None:  # diffusers' own steps, from the projections again
                    return super().__call__(*args, **kwargs)
                query, key = rotated
            hidden_states = wan.dispatch_attention_fn(
                query, key, value, attn_mask=attention_mask, dropout_p=0.0, is_causal=False,
                backend=self._attention_backend,
                parallel_config=(self._parallel_config if encoder_hidden_states is None else None))
            hidden_states = hidden_states.flatten(2, 3).type_as(query)
            hidden_states = attn.to_out[0](hidden_states)
            return attn.to_out[1](hidden_states)

    return RopejitWanAttnProcessor


def _wan_norm_why(state: Any, attn: Any, positions: Any, query: torch.Tensor,
                  key: torch.Tensor) -> Optional[str]:
    """Why Wan's QK-norm and rotation cannot run as one launch here (None: they can): the fused form
    needs the spec's positions, diffusers' RMSNorm over all heads with a weight of q's dtype, and
    no autograd (the kernel writes q and k in place)."""
    if state.cos_sin_only is not None or positions is None or isinstance(positions, str):
        return "the spec's positions are not known"
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad):
        return "autograd records q and k (the fused launch writes them in place)"
    for norm in (attn.norm_q, attn.norm_k):
        weight = getattr(norm, "weight", None)
        if type(norm).__name__ != "RMSNorm" or weight is None or weight.dtype != query.dtype:
            return f"norm {type(norm).__name__} (the fused form takes diffusers' RMSNorm with a weight of q's dtype)"
        if weight.numel() != query.shape[-1] or not weight.is_contiguous():
            return f"a norm weight of {weight.numel()} values over rows of {query.shape[-1]}"
    if attn.norm_q.eps != attn.norm_k.eps:
        return "q's and k's norms differ in eps"
    if query.dtype not in _DTYPE_NAMES or query.dim() != 3 or not query.is_contiguous() or not key.is_contiguous():
        return f"q of {query.dtype}, shape {list(query.shape)}"
    if query.shape != key.shape or query.shape[1] != positions.shape[-1] or positions.device != query.device:
        return f"q {list(query.shape)}, k {list(key.shape)}, positions {list(positions.shape)}"
    return None


def _norm_spec_json(state: Any, dtype: torch.dtype, heads: int, head_dim: int, eps: float) -> str:
    """The fused launch's canonical spec: the model's, with the norm over all heads; validated once
    per (dtype, heads, head_dim, eps) in the patch state's cache, not at every attention call."""
    key = ("norm all", dtype, heads, head_dim, eps)
    if key not in state._spec_json:
        spec = dict(state.spec.to_dict(), dtype=_DTYPE_NAMES[dtype], num_q_heads=heads, num_kv_heads=heads,
                    head_dim=head_dim, rotary_dim=head_dim, qk_norm={"type": "rmsnorm", "eps": eps, "scope": "all"})
        spec["io"] = dict(spec["io"], input="separate", output="inplace", qkv_bias=False, copy_v=False)
        state._spec_json[key] = Spec.from_json(spec).to_json()
    return state._spec_json[key]


def _norm_rotate_wan(state: Any, attn: Any, positions: Any, query: torch.Tensor,
                     key: torch.Tensor) -> bool:
    """Wan's RMSNorm over all heads of q and of k, then the rotation, in one launch on the projections
    [B, S, H * D] in place (docs/diffusers.md); False (the reason counted) where it cannot."""
    why = _wan_norm_why(state, attn, positions, query, key)
    if why is not None:
        state.fused_norm_reasons[why] = state.fused_norm_reasons.get(why, 0) + 1
        return False
    heads = attn.heads
    head_dim = query.shape[-1] // heads
    spec_json = _norm_spec_json(state, query.dtype, heads, head_dim, float(attn.norm_q.eps))
    rows = positions.expand(positions.shape[0], query.shape[0], query.shape[1]).reshape(positions.shape[0], -1)
    kernel = ropejit_torch.kernel_for(spec_json, query.device)
    kernel(query.view(-1, heads, head_dim), key.view(-1, heads, head_dim), positions=rows.contiguous(),
           q_norm_weight=attn.norm_q.weight.detach().view(heads, head_dim),
           k_norm_weight=attn.norm_k.weight.detach().view(heads, head_dim))
    state._count()
    state.fused_norm_calls += 1
    return True
