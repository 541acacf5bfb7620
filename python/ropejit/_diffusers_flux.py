"""Flux's attention under ropejit.diffusers.patch: diffusers 0.42.1's ``FluxAttnProcessor`` steps
with the per-head QK RMSNorm and the rotation run as ropejit launches in place on the projections.

diffusers normalizes q and k per head (``norm_q`` / ``norm_k``: one [head_dim] weight shared by
the heads; a joint block's text stream by ``norm_added_q`` / ``norm_added_k``), concatenates text
before image, and rotates the whole sequence (``apply_rotary_emb``). The swapped processor runs the
norm and the rotation on each stream's own projections [B, S, H * D] before the concatenation:
one launch for the text stream (its weights, the first S_txt positions), one for the image stream
(the rest), one for a single block. diffusers' concatenation then copies the normalized, rotated
streams, as it copied the normalized ones before: no copy is added, and the norms' and the
rotation's outputs are not allocated. Where a launch cannot serve (autograd, other norms, unknown
positions: counted in ``state.fused_norm_reasons``) the processor runs diffusers' own steps, whose
``apply_rotary_emb`` is ropejit's replacement. Chroma's blocks run this processor class too."""
import sys
from typing import Any, Callable, List, Optional, Tuple

import torch

from ._diffusers_qk_norm import (SwappedProcessor, count_refusal, launch_refusal, norm_rotate, norm_spec_json,
                                 positions_refusal)


def processor_class(module_name: str, recalled: Callable) -> type:
    """A FluxAttnProcessor whose QK-norm and rotation run as ropejit launches where they can:
    diffusers 0.42.1's steps, with those two replaced (`recalled`: ropejit.diffusers' position
    lookup by the cos tensor)."""
    flux = sys.modules[module_name]

    class RopejitFluxAttnProcessor(SwappedProcessor, flux.FluxAttnProcessor):
        # FluxAttention.forward passes only the arguments this signature names: it is diffusers'.
        def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: Optional[torch.Tensor] = None,
                     attention_mask: Optional[torch.Tensor] = None, image_rotary_emb: Any = None) -> Any:
            state = self._ropejit_state
            if image_rotary_emb is None:  # nothing to rotate
                return super().__call__(attn, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb)
            query, key, value, encoder_query, encoder_key, encoder_value = flux._get_qkv_projections(
                attn, hidden_states, encoder_hidden_states)
            joint = attn.added_kv_proj_dim is not None
            positions = self.spec_positions(recalled, image_rotary_emb)
            streams = [(attn.norm_q, attn.norm_k, query, key)]
            if joint:  # text first, as diffusers concatenates them
                streams.insert(0, (attn.norm_added_q, attn.norm_added_k, encoder_query, encoder_key))
            fused = _norm_rotate_flux(state, positions, attn.head_dim, streams)

            def heads(*projections: torch.Tensor) -> List[torch.Tensor]:
                return [p.unflatten(-1, (-1, attn.head_dim)) for p in projections]

            query, key, value = heads(query, key, value)
            if not fused:
                query = attn.norm_q(query)
                key = attn.norm_k(key)
            if joint:
                encoder_query, encoder_key, encoder_value = heads(encoder_query, encoder_key, encoder_value)
                if not fused:
                    encoder_query = attn.norm_added_q(encoder_query)
                    encoder_key = attn.norm_added_k(encoder_key)
                query = torch.cat([encoder_query, query], dim=1)
                key = torch.cat([encoder_key, key], dim=1)
                value = torch.cat([encoder_value, value], dim=1)
            if not fused:  # the module's apply_rotary_emb: ropejit's replacement while patched
                query = flux.apply_rotary_emb(query, image_rotary_emb, sequence_dim=1)
                key = flux.apply_rotary_emb(key, image_rotary_emb, sequence_dim=1)

            hidden_states = flux.dispatch_attention_fn(query, key, value, attn_mask=attention_mask,
                                                       backend=self._attention_backend,
                                                       parallel_config=self._parallel_config)
            hidden_states = hidden_states.flatten(2, 3).to(query.dtype)
            if encoder_hidden_states is None:
                return hidden_states
            encoder_hidden_states, hidden_states = hidden_states.split_with_sizes(
                [encoder_hidden_states.shape[1], hidden_states.shape[1] - encoder_hidden_states.shape[1]], dim=1)
            hidden_states = attn.to_out[0](hidden_states.contiguous())
            hidden_states = attn.to_out[1](hidden_states)
            return hidden_states, attn.to_add_out(encoder_hidden_states.contiguous())

    return RopejitFluxAttnProcessor


Stream = Tuple[Any, Any, torch.Tensor, torch.Tensor]  # (norm of q, norm of k, q, k): projections [B, S, H * D]


def _norm_rotate_flux(state: Any, positions: Any, head_dim: int, streams: List[Stream]) -> bool:
    """Each stream's per-head RMSNorm of q and of k and the rotation at its own slice of the
    positions (streams in sequence order), one launch per stream in place; False (the reason
    counted, nothing written) where any stream cannot: both streams run one way."""
    why = positions_refusal(state, positions, [norm for stream in streams for norm in stream[:2]],
                            [t for stream in streams for t in stream[2:]])
    sliced = []
    start = 0
    for norm_q, norm_k, query, key in streams if why is None else []:
        stream_positions = positions[..., start:start + query.shape[1]]
        start += query.shape[1]
        why = launch_refusal(norm_q, norm_k, head_dim, stream_positions, query, key)
        if why is None and query.shape[-1] % head_dim:
            why = f"q rows of {query.shape[-1]} values, not whole heads of {head_dim}"
        if why is not None:
            break
        sliced.append(stream_positions)
    if why is None and start != positions.shape[-1]:
        why = f"{start} tokens, but the rotary module made {positions.shape[-1]}"
    if why is not None:
        count_refusal(state, why)
        return False
    for (norm_q, norm_k, query, key), stream_positions in zip(streams, sliced):
        heads = query.shape[-1] // head_dim
        spec_json = norm_spec_json(state, query.dtype, heads, head_dim, float(norm_q.eps), "head")
        norm_rotate(state, spec_json, heads, stream_positions, query, key, norm_q.weight, norm_k.weight)
    return True
