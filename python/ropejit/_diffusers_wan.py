"""Wan's self-attention under ropejit.diffusers.patch: diffusers 0.42.1's ``WanAttnProcessor``
steps with the rotation (and, where it can, the RMSNorm over all heads before it) run by ropejit's
kernel. Its rotation is inline in the processor, so the processor is swapped rather than a function."""
import sys
from typing import Any, Callable, Optional

import torch

from ._diffusers_qk_norm import (SwappedProcessor, count_refusal, launch_refusal, norm_rotate, norm_spec_json,
                                 positions_refusal)


def processor_class(module_name: str, recalled: Callable, rotation: Callable) -> type:
    """A WanAttnProcessor whose self-attention (rotary_emb given) rotates with ropejit: diffusers
    0.42.1's steps for that branch, with the inline rotation replaced (`recalled` and `rotation`:
    ropejit.diffusers' position lookup and rotation)."""
    wan = sys.modules[module_name]

    class RopejitWanAttnProcessor(SwappedProcessor, wan.WanAttnProcessor):
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
            positions = self.spec_positions(recalled, rotary_emb)
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


def _norm_rotate_wan(state: Any, attn: Any, positions: Any, query: torch.Tensor,
                     key: torch.Tensor) -> bool:
    """Wan's RMSNorm over all heads of q and of k, then the rotation, in one launch on the projections
    [B, S, H * D] in place (docs/diffusers.md); False (the reason counted) where it cannot."""
    why = positions_refusal(state, positions, (attn.norm_q, attn.norm_k), (query, key)) or \
        launch_refusal(attn.norm_q, attn.norm_k, query.shape[-1], positions, query, key)
    if why is not None:
        count_refusal(state, why)
        return False
    heads = attn.heads
    spec_json = norm_spec_json(state, query.dtype, heads, query.shape[-1] // heads, float(attn.norm_q.eps), "all")
    norm_rotate(state, spec_json, heads, positions, query, key, attn.norm_q.weight, attn.norm_k.weight)
    return True
