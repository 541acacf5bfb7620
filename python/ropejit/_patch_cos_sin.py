"""HF's own cos and sin as the kernel's angles (``io.angles: cos_sin_cache``): the transformers
patch's route for layer types whose rope config ropejit cannot express itself (a rope_type it does
not know, dynamic or longrope frequencies that follow the sequence length). HF's rotary module
computes cos and sin as it always does; ropejit's kernel reads them per token and rotates q and k
in one pass (in float32, rounded once, where HF's formula rounds each product in the model's
dtype). Which pairing HF's apply function uses is not guessed: a probe on the model's own rotary
module finds the one that gives HF's result, or the layer type keeps HF's function."""
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from . import _ropejit
from . import compat  # noqa: F401 - registers torch.ops.ropejit.cos_sin_cache_rope
from ._patch_layers import device_of, qk_misfit, rotary_call

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class CosSinRoute:
    """How one HF apply function's cos/sin become ropejit's cos_sin_cache rows: the kernel's
    pairing (``"neox"``: (i, i + d/2), ``"interleaved"``: (2i, 2i + 1)) and the columns of HF's
    cos that hold one value per pair (``"half"``: the first d/2, as ``cat(freqs, freqs)`` makes;
    ``"even"``: every other one, as ``repeat_interleave(freqs, 2)`` makes)."""

    layout: str
    columns: str


# The routes to probe for each apply form, the common first: Llama's rotate_half on cat(freqs, freqs);
# Cohere's interleaved pairs on repeat_interleave(freqs, 2); GLM's interleaved pairs on the first
# half of cat(freqs, freqs); rotate_half on repeat_interleave'd values. "interleave": DeepSeek's
# apply_rotary_pos_emb_interleave (q arrives with interleaved pairs, cos is cat(freqs, freqs)).
_ANY = (CosSinRoute("neox", "half"), CosSinRoute("interleaved", "even"), CosSinRoute("interleaved", "half"),
        CosSinRoute("neox", "even"))
ROUTES = {"qk": _ANY, "one": _ANY, "interleave": (CosSinRoute("interleaved", "half"),)}


def cos_sin_misfit(q: Any, k: Any, cos: Any, sin: Any, unsqueeze_dim: int, widths: Sequence[int]) -> Optional[str]:
    """Why an apply call's tensors cannot take the cos/sin route (HF's function runs), or None. k
    None: the one-tensor form. cos and sin ``[B or 1, S, rotary_dim]``, one of the kernel's dtypes,
    on q's device."""
    tensors = {"q": q, "cos": cos, "sin": sin} if k is None else {"q": q, "k": k, "cos": cos, "sin": sin}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            return f"{name} is a {type(t).__name__}, not a tensor"
    if unsqueeze_dim not in (1, 2):
        return f"unsqueeze_dim {unsqueeze_dim} (ropejit takes 1 or 2)"
    tokens_axis = 2 if unsqueeze_dim == 1 else 1
    why = qk_misfit(q, k, unsqueeze_dim, widths)
    if why is not None:
        return why
    if q.dtype not in _DTYPES or cos.dtype not in _DTYPES:
        return f"q of {q.dtype}, cos of {cos.dtype} (ropejit runs fp32, fp16, bf16)"
    if k is not None and q.shape[3 - tokens_axis] % k.shape[3 - tokens_axis]:
        return f"k's {k.shape[3 - tokens_axis]} heads do not divide q's {q.shape[3 - tokens_axis]}"
    rotary_dim = cos.shape[-1] if cos.dim() == 3 else 0
    if cos.dim() != 3 or sin.shape != cos.shape or sin.dtype != cos.dtype or cos.shape[1] != q.shape[tokens_axis] \
            or cos.shape[0] not in (1, q.shape[0]) or rotary_dim % 2 or not 2 <= rotary_dim <= q.shape[-1]:
        return (f"cos of shape {list(cos.shape)}, sin {list(sin.shape)} {sin.dtype} for q of shape "
                f"{list(q.shape)}: the cos/sin route takes [B or 1, S, even rotary_dim <= head_dim] for both")
    if q.device.type not in ("cpu", "cuda") or any(t.device != q.device for t in tensors.values()):
        return "q, k, cos and sin are not on one cpu or cuda device"
    return None


def cos_sin_rows(cos: torch.Tensor, sin: torch.Tensor, route: CosSinRoute) -> torch.Tensor:
    """HF's cos, sin ``[B', S, d]`` as the kernel's cache ``[B' * S, d]``: each row d / 2 cos values,
    then d / 2 sin values, one per pair."""
    half = cos.shape[-1] // 2

    def per_pair(t: torch.Tensor) -> torch.Tensor:
        return t[..., :half] if route.columns == "half" else t[..., 0::2]

    return torch.cat((per_pair(cos), per_pair(sin)), -1).reshape(-1, 2 * half)


def rotate_cos_sin(form: str, q: torch.Tensor, k: Optional[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor,
                   route: CosSinRoute, unsqueeze_dim: int) -> Any:
    """What HF's apply function of `form` returns for q, k, cos, sin, computed by the kernel from
    HF's cos and sin: each token reads its own row (positions 0 .. B' * S - 1, B' = cos.shape[0])."""
    if form == "one":
        k = q.narrow(1 if unsqueeze_dim == 1 else 2, 0, 1)  # the op rotates a key: one head, dropped
    assert k is not None
    if unsqueeze_dim == 1:  # the kernel wants tokens first: [B, S, H, D]
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    batch, seq = q.shape[0], q.shape[1]
    rows = cos_sin_rows(cos, sin, route)
    positions = torch.arange(rows.shape[0], device=q.device).view(cos.shape[0], seq).expand(batch, seq).reshape(-1)
    q_out, k_out = torch.ops.ropejit.cos_sin_cache_rope(positions, q, k, q.shape[-1], rows, route.layout == "neox")
    if unsqueeze_dim == 1:
        q_out, k_out = q_out.transpose(1, 2), k_out.transpose(1, 2)
    if form == "one":
        return q_out
    if form == "interleave":  # HF returns each head's pairs' first elements, then their second ones
        return tuple(t.unflatten(-1, (t.shape[-1] // 2, 2)).transpose(-1, -2).flatten(-2) for t in (q_out, k_out))
    return q_out, k_out


def probe_cos_sin(function: Callable, form: str, cos: torch.Tensor, sin: torch.Tensor,
                  width: int) -> Tuple[Optional[CosSinRoute], str]:
    """The route whose kernel result equals HF's `function` on a rotary module's own float32 `cos`
    and `sin` ``[1, P, d]`` for heads of `width` (relative 1e-5: the same cos and sin, one rounding
    apart); (None, what differed) when no route does."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, cos.shape[1], width, generator=generator).to(cos.device)
    k = torch.randn(1, 1, cos.shape[1], width, generator=generator).to(cos.device)
    why = cos_sin_misfit(q, None if form == "one" else k, cos, sin, 1, (width,))
    if why is not None:
        return None, why
    misses = []
    with torch.no_grad():
        want = (function(q, cos, sin), function(k, cos, sin)) if form == "one" else function(q, k, cos, sin)
        for route in ROUTES[form]:
            got = (rotate_cos_sin(form, q, None, cos, sin, route, 1), rotate_cos_sin(form, k, None, cos, sin, route, 1)) \
                if form == "one" else rotate_cos_sin(form, q, k, cos, sin, route, 1)
            error = max(((g.double() - w.double()).abs().max() / w.double().abs().max().clamp(min=1.0)).item()
                        if g.shape == w.shape else float("inf") for g, w in zip(got, want))
            if error <= 1e-5:
                return route, ""
            misses.append(f"{route.layout} pairs from the {route.columns} columns differ by {error:.3g}")
    return None, f"HF's cos and sin through the kernel: {'; '.join(misses)} on heads of {width}"


def head_dim_of(config: Any) -> Optional[int]:
    """The config's head width (head_dim, else hidden_size / num_attention_heads), None if it has neither."""
    head_dim = getattr(config, "head_dim", None)
    if isinstance(head_dim, int) and head_dim > 0:
        return head_dim
    hidden, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    return hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 else None


def module_routes(function: Callable, form: str, rotary: torch.nn.Module, key: str,
                  config: Any) -> Dict[int, Tuple[Optional[CosSinRoute], str]]:
    """probe_cos_sin on one rotary module's cos and sin for layer key `key`, a few positions up to
    its last, for each head width HF's function may get (the head; the rotated slice alone)."""
    call = rotary_call(rotary, key, config)
    if isinstance(call, str):
        return {0: (None, call)}
    device = device_of(rotary)
    last = max((getattr(config, "max_position_embeddings", None) or 4096) - 1, 1)
    position_ids = torch.tensor([[0, 1, 2, 3, 17, 100 % last, last // 2, last]], device=device)
    with torch.no_grad():
        cos, sin = rotary(torch.zeros(1, 1, 1, device=device), position_ids, *call)
    rotary_dim = int(cos.shape[-1])
    head_dim = head_dim_of(config) or rotary_dim
    widths = sorted({head_dim, rotary_dim}) if head_dim >= rotary_dim else [rotary_dim]
    return {w: probe_cos_sin(function, form, cos, sin, w) for w in widths}


def agreed_route(function: Callable, name: str, form: str, rotary_modules: Sequence[torch.nn.Module], key: str,
                 config: Any) -> Tuple[Optional[Tuple[CosSinRoute, List[int]]], List[str]]:
    """The route (and the head widths it serves) on which every module serving layer key `key`
    agrees with HF's `function` (`name`: its "module.function"), and what differed where not."""
    agreed: Optional[Dict[int, CosSinRoute]] = None  # head width -> the route every module agrees on
    misses: List[str] = []
    for rotary in rotary_modules:
        try:
            routes = module_routes(function, form, rotary, key, getattr(rotary, "config", config))
        except (_ropejit.Error, ValueError, NotImplementedError, RuntimeError, TypeError, IndexError) as e:
            routes = {0: (None, f"the cos/sin probe of {name} failed: {type(e).__name__}: {e}")}
        misses += [why for route, why in routes.values() if route is None]
        found = {w: route for w, (route, _) in routes.items() if route is not None}
        agreed = found if agreed is None else {w: r for w, r in agreed.items() if found.get(w) == r}
    if not agreed:
        return None, misses
    route = next(iter(agreed.values()))
    return (route, [w for w, r in agreed.items() if r == route]), misses
