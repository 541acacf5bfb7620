"""The forms in which :mod:`ropejit.vllm_plugin` serves each vLLM rotary class through
:mod:`ropejit.compat`: ``form(module, *args, **kwargs)`` takes the arguments of the class's
forward and returns what that forward returns, or raises ``compat.ArgumentError`` (then the plugin
runs vLLM's own method).

Where a class selects cos/sin per token itself (MRoPE variants, inverse RoPE) the form builds that
per-token table [T, rotary_dim] with the class's own helpers (or the gather its forward does) and
rotates token t by row t (positions ``arange(T)``), so the values are the ones vLLM's forward uses.
"""
from typing import Any, NoReturn, Optional, Tuple

from . import compat

_NO_KEY = "None: its forward rotates a key tensor"


def refuse(name: str, why: str) -> NoReturn:
    """Raises the ArgumentError that sends a call to vLLM's own method, `why` logged."""
    raise compat.ArgumentError(f"{name}: {why}")


def _no_offsets(module: Any, offsets: Any) -> None:
    """Refuses offsets a class's forward takes and ignores (its own method decides)."""
    if offsets is not None:
        refuse("offsets", f"{type(module).__name__}'s forwards ignore them")


def _dtype_kept(cache: Any, query: Any, what: str) -> None:
    """Refuses a cache whose dtype would widen vLLM's result past query's dtype."""
    import torch

    wide = torch.promote_types(cache.dtype, query.dtype)
    if wide != query.dtype:
        refuse("query", f"dtype {query.dtype} with a {cache.dtype} cache: {what} returns {wide}")


def _out(rows: Any, query: Any, key: Optional[Any], head_size: int, cache: Any,
         is_neox: bool) -> Tuple[Any, Optional[Any]]:
    """Rotated copies of query and key (None: query alone); query and key untouched."""
    import torch

    if key is not None:
        return compat.rotary_embedding_out(rows, query, key, head_size, cache, is_neox)
    q = query.clone(memory_format=torch.contiguous_format)  # dense rows, as the in-place op takes them
    compat.rotary_embedding(rows, q, None, head_size, cache, is_neox)
    return q, None


def _per_token(table: Any, query: Any, key: Optional[Any], head_size: int,
               is_neox: bool) -> Tuple[Any, Optional[Any]]:
    """Token t rotated by row t of `table` [T, rotary_dim] (a class's own per-token cos/sin)."""
    import torch

    rows = torch.arange(table.shape[0], device=table.device)
    return _out(rows, query, key, head_size, table, is_neox)


# ------------------------------------------------------------------ classes that gather one cache row

def table(module: Any, positions: Any, query: Any, key: Any = None, offsets: Any = None) -> Tuple[Any, Any]:
    """RotaryEmbedding's form: in place on the module's cache as vLLM's kernel reads it (query's
    dtype and device)."""
    if offsets is not None:
        refuse("offsets", f"{type(module).__name__}'s forwards take none")
    cache = module._match_cos_sin_cache_dtype(query)
    compat.rotary_embedding(positions, query, key, module.head_size, cache, module.is_neox_style)
    return query, key


def mrope(module: Any, positions: Any, query: Any, key: Any = None, offsets: Any = None) -> Tuple[Any, Any]:
    """MRoPE: positions [T] (text only) are RotaryEmbedding's math on its cache; positions [3, T]
    read each pair's T/H/W section's row (its mrope_section, contiguous or interleaved)."""
    if key is None:
        refuse("key", "None: vLLM's MRoPE forwards require a key")
    _no_offsets(module, offsets)
    if positions.dim() == 1:
        return table(module, positions, query, key, None)
    if not module.mrope_section:
        refuse("positions", f"shape {list(positions.shape)} without an mrope_section on the module")
    cache = module._match_cos_sin_cache_dtype(query)
    compat.mrope_rotary_embedding(positions, query, key, module.head_size, cache, module.is_neox_style,
                                  list(module.mrope_section), bool(getattr(module, "mrope_interleaved", False)))
    return query, key


def deepseek(module: Any, positions: Any, query: Any, key: Any = None, offsets: Any = None) -> Tuple[Any, Any]:
    """DeepSeek YaRN: its cache as it is (mscale in it), row position + offset, into new tensors as
    its forward_native (the head width is query's last dimension, which forward_native slices)."""
    if key is None:
        refuse("key", "None: DeepSeek YaRN's forward_native requires a key")
    if positions.dim() != 1 or query.dim() != 3 or key.dim() != 3:
        refuse("query", f"shape {list(query.shape)} with positions {list(positions.shape)}: DeepSeek YaRN's "
               "forward_native broadcasts one row per token over [T, heads, head_size] only")
    rows = positions if offsets is None else positions + offsets
    return compat.rotary_embedding_out(rows, query, key, query.shape[-1], module.cos_sin_cache, module.is_neox_style)


def long_short(module: Any, positions: Any, query: Any, key: Any = None, offsets: Any = None) -> Tuple[Any, Any]:
    """Phi-3 LongRoPE: its concatenated short-then-long cache (mscale in it) at the row its forward
    reads: past the original_max_position_embeddings short rows when max_model_len chose the long
    factors, plus offsets; NeoX pairs (the class refuses GPT-J), in place."""
    cache = module.long_short_cos_sin_cache
    if key is None:
        refuse("key", "None: Phi-3 LongRoPE's forward requires a key")
    if positions.dim() != 1 or query.dim() != 2 or key.dim() != 2:
        refuse("query", f"shape {list(query.shape)} with positions {list(positions.shape)}: Phi-3 LongRoPE's "
               "forward rotates [T, heads * head_size] at positions [T] only")
    _dtype_kept(cache, query, "Phi-3 LongRoPE's forward")
    rows = positions + module.original_max_position_embeddings if module.use_long_rope else positions
    rows = rows if offsets is None else rows + offsets
    compat.rotary_embedding(rows, query, key, module.head_size, cache, True)
    return query, key


# ------------------------------------------------------------------ per-token tables: MRoPE variants

def mrope_interleaved(module: Any, positions: Any, query: Any, key: Any = None) -> Tuple[Any, Any]:
    """openPangu's MRotaryEmbeddingInterleaved (its forward): the per-token cos/sin its
    ``_rebuild_pos_emb`` interleaves from the [streams, T] positions, into new tensors."""
    if positions.dim() != 2:  # its _rebuild_pos_emb indexes tokens by stream on [T]: no rotation to match
        refuse("positions", f"shape {list(positions.shape)}: its forward reads [streams, T] positions only")
    cos_sin, _ = module._rebuild_pos_emb(positions)
    # Its forward rounds cos/sin to query's dtype (ApplyRotaryEmb): the same values.
    return _per_token(cos_sin.to(query.dtype), query, key, module.head_size, module.is_neox_style)


def bailing(module: Any, positions: Any, query: Any, key: Any = None, offsets: Any = None) -> Tuple[Any, Any]:
    """Bailing M-RoPE: positions [T] read its cache; [3, T] the per-token cos/sin of its
    ``select_cos_sin`` (H/W alternating, T tail), into new tensors as its forward_native."""
    import torch

    if key is None:
        refuse("key", "None: Bailing M-RoPE requires key states")
    _no_offsets(module, offsets)
    cache = module._match_cos_sin_cache_dtype(query)
    if positions.dim() == 1:
        return compat.rotary_embedding_out(positions, query, key, module.head_size, cache, module.is_neox_style)
    cos, sin = module.select_cos_sin(positions, cache)  # raises vLLM's ValueError on positions it refuses
    return _per_token(torch.cat((cos, sin), dim=-1), query, key, module.head_size, module.is_neox_style)


def ernie(module: Any, positions: Any, query: Any, key: Any = None) -> Tuple[Any, Any]:
    """Ernie 4.5 VL's MRoPE: positions [T] read its cache; [3, T] give pair j of the first h + w
    the H (j even) or W (j odd) stream's row, the last t pairs the T stream's (mrope_section
    [h, w, t], h = w: its forward_native's [h w h w ... t t t]), into new tensors."""
    import torch

    if key is None:
        refuse("key", _NO_KEY)
    cache = module._match_cos_sin_cache_dtype(query)
    if positions.dim() == 1:
        return compat.rotary_embedding_out(positions, query, key, module.head_size, cache, module.is_neox_style)
    section = list(module.mrope_section or ())
    if positions.dim() != 2 or positions.shape[0] != 3 or len(section) != 3 or section[0] != section[1] \
            or section[2] < 1:
        refuse("positions", f"shape {list(positions.shape)} with mrope_section {module.mrope_section}: its "
               "forward_native splits [3, T] into h = w interleaved pairs and a T tail of t >= 1")
    streams = [1, 2] * section[0] + [0] * section[2]
    index = torch.tensor(streams * 2, device=positions.device)  # the same stream for a pair's cos and sin
    gathered = cache[positions]  # [3, T, rotary_dim], the gather its forward_native does
    per_token = gathered.gather(0, index.expand(1, positions.shape[1], -1)).squeeze(0)
    return _per_token(per_token, query, key, module.head_size, module.is_neox_style)


# ------------------------------------------------------------------ forms of their own

def deepseek_v4(module: Any, positions: Any, query: Any, key: Any = None, offsets: Any = None,
                inverse: bool = False) -> Tuple[Any, Any]:
    """DeepSeek V4: the last rotary_dim elements of each head (query's last dimension), its fp32
    cache at position + offset; ``inverse`` negates sin (the inverse rotation, on a per-token table).
    Written into query and key in place as its forward_cuda (vLLM's kernel with rope_dim_offset)."""
    import torch

    if query.dim() != 3 or (key is not None and key.dim() != 3) or positions.dim() != 1:
        refuse("query", f"shape {list(query.shape)} with positions {list(positions.shape)}: its forward_native "
               "broadcasts one row per token over [T, heads, head_size] only")
    rd = module.rotary_dim
    rows = positions if offsets is None else positions + offsets
    cache = module.cos_sin_cache
    if inverse:
        cos, sin = cache[rows].chunk(2, dim=-1)
        cache, rows = torch.cat((cos, -sin), dim=-1), torch.arange(rows.shape[0], device=rows.device)
    q_rot, k_rot = _out(rows, query[..., -rd:], None if key is None else key[..., -rd:], rd, cache,
                        module.is_neox_style)
    query[..., -rd:].copy_(q_rot)
    if key is not None:
        key[..., -rd:].copy_(k_rot)
    return query, key


def dual_chunk(module: Any, positions: Any, query: Any, key: Any, offsets: Any = None) -> Tuple[Any, Any]:
    """Dual chunk attention: key at its k cache's row position + offset; query rotated five times
    (intra, successor, inter, and the two critical variants, each its cache and row) side by side
    in one new tensor [T, 5 * heads * head_size], as its forward_native."""
    import torch

    if query.dim() != 2 or key is None or key.dim() != 2 or positions.dim() != 1:
        refuse("query", f"shape {list(query.shape)} with positions {list(positions.shape)}: its forward_native "
               "returns [T, 5 * heads * head_size] for [T, heads * head_size] only")
    _dtype_kept(module.cos_sin_q_cache, query, "its forward_native")
    _dtype_kept(module.cos_sin_k_cache, key, "its forward_native")
    rows = positions if offsets is None else positions + offsets
    chunk_len = module.chunk_size - module.local_size
    in_chunk = rows % chunk_len
    variants = ((module.cos_sin_q_cache, in_chunk), (module.cos_sin_qc_cache, in_chunk),
                (module.cos_sin_qc_cache, torch.full_like(rows, chunk_len - 1)),
                (module.cos_sin_qc_no_clamp_cache, in_chunk), (module.cos_sin_q_inter_cache, in_chunk))
    out = query.new_empty(query.shape[0], len(variants), query.shape[1])
    out.copy_(query.unsqueeze(1))  # the unrotated elements of each copy are query's
    for i, (cache, at) in enumerate(variants):
        compat.rotary_embedding(at, out[:, i], None, module.head_size, cache, module.is_neox_style)
    key_out, _ = _out(rows, key, None, module.head_size, module.cos_sin_k_cache, module.is_neox_style)
    return out.view(query.shape[0], -1).squeeze(0), key_out.squeeze(0)  # squeeze: its forward's, for T = 1


def fourier(module: Any, positions: Any, query: Any, key: Any = None, offsets: Any = None) -> Tuple[Any, Any]:
    """FoPE: the cos and sin of its cache (built from its coefficients at the first call, as its
    forward_native) are pair-wise values the kernel reads as cos/sin rows, NeoX pairs over the whole
    head; with fope_sep_head one row per token and KV head group. Into new [T, heads, head_size]."""
    import torch

    if key is None:
        refuse("key", "None: FoPE requires a key tensor")
    _no_offsets(module, offsets)
    if query.dim() != 2 or key.dim() != 2:
        refuse("query", f"shape {list(query.shape)}: its forward_native unflattens [T, heads * head_size] only")
    if module.update_cache:  # its forward_native's first call: the coefficients are loaded by now
        module.cos_sin_cache.copy_(module._compute_cos_sin_cache().to(module.dtype))
        module.update_cache = False
    cache = module.cos_sin_cache
    _dtype_kept(cache, query, "its forward_native")
    head, tokens = module.head_size, query.shape[0]
    rows = cache.index_select(0, positions.flatten())  # [T, 2 * head] or [T, kv_heads, 2 * head]
    per_token = torch.cat((rows[..., :head // 2], rows[..., head:head + head // 2]), dim=-1)  # cos, sin halves repeat
    groups = per_token.shape[1] if per_token.dim() == 3 else 1
    q, k = query.reshape(tokens * groups, -1), key.reshape(tokens * groups, -1)
    q_out, k_out = _per_token(per_token.reshape(tokens * groups, head), q, k, head, True)
    return q_out.view(tokens, -1, head), k_out.view(tokens, -1, head)


def llama4_vision(module: Any, query: Any, key: Any = None) -> Tuple[Any, Any]:
    """Llama 4's vision RoPE: its complex cache (one row per patch, CLS last) as cos = real and
    sin = imaginary parts, GPT-J pairs over the whole head, patch s of each image at row s; into
    new tensors of query's and key's shapes [images, patches, heads, head_size]."""
    import torch

    if key is None:
        refuse("key", _NO_KEY)
    cache = module.cos_sin_cache.to(query.device)
    patches, pairs = cache.shape[0], cache.shape[-1]
    if query.dim() != 4 or query.shape[1] != patches or query.shape[-1] != 2 * pairs or not cache.is_complex():
        refuse("query", f"shape {list(query.shape)}: its forward_native takes [images, {patches} patches, heads, "
               f"{2 * pairs}] with its complex cache")
    parts = torch.view_as_real(cache.reshape(patches, pairs))
    rows = torch.arange(patches, device=query.device).expand(query.shape[0], patches)
    return compat.rotary_embedding_out(rows, query, key, 2 * pairs, torch.cat((parts[..., 0], parts[..., 1]), -1),
                                       False)
