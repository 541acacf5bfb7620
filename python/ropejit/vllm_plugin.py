"""A vLLM general plugin that runs vLLM's rotary embedding through ropejit's kernel.

Installed with ropejit as the entry point ``ropejit`` of group ``vllm.general_plugins``; vLLM
loads it when ``VLLM_PLUGINS`` allows it (unset: every installed plugin; vLLM's rule), and it acts
only with ``ROPEJIT_VLLM=1``::

    ROPEJIT_VLLM=1 vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager

What it swaps: every vLLM rotary class that rotates by gathering one row of its own cos_sin_cache
per position gets an out-of-tree subclass (``CustomOp.register_oot``) whose ``forward_cuda`` /
``forward_cpu`` run ropejit's kernel on that cache (:mod:`ropejit.compat`):

- ``RotaryEmbedding`` and the scaling subclasses that only build a different cache (Llama 3,
  linear, NTK, dynamic NTK, YaRN, Gemma 4...): in place, as vLLM's ``rotary_embedding`` kernel;
- ``DeepseekScalingRotaryEmbedding`` (DeepSeek YaRN, its mscale in the cache): positions plus
  offsets, out of place as its ``forward_native`` (MLA passes q_pe, heads strided in wider rows);
- ``MRotaryEmbedding``: text-only positions ``[T]`` (RotaryEmbedding's math on its cache) and
  multimodal ``[3, T]`` positions (each pair its T/H/W section's row, contiguous or interleaved);
- ``Phi3LongRoPEScaledRotaryEmbedding`` (a plain ``nn.Module``, no custom op): get_rope builds
  ropejit's subclass, which reads the long/short cache at the row Phi-3's forward reads, where
  vLLM's ``rotary_embedding`` op is enabled.

Classes with forwards of their own (MRoPE variants, DeepSeek V4, dual chunk, Fourier, vision) keep
vLLM's, named in the log. A call ropejit refuses (an ``ArgumentError``: a dtype, a head layout, a
form the class computes otherwise) runs vLLM's own method, the reason logged once per class. vLLM
calls ``forward_cuda`` only where its custom op is enabled (``--enforce-eager``, or ``custom_ops``
with ``+rotary_embedding``); with Inductor compiling ``forward_native`` the rotary stays in vLLM's
graph, as vLLM decides for every custom op.
"""
import logging
import os
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

logger = logging.getLogger("ropejit.vllm_plugin")

ENV = "ROPEJIT_VLLM"  # "1": swap; anything else: vLLM keeps its own rotary kernel
# A subclass overriding any of these computes its own way; inheriting all, only its cache differs.
_METHODS = ("forward", "forward_static", "forward_native", "forward_cuda", "forward_cpu")
_PHI3 = "Phi3LongRoPEScaledRotaryEmbedding"
_fallbacks_logged: Dict[str, str] = {}
_replaced: Dict[str, type] = {}  # get_rope's names this process re-pointed, with vLLM's class
registered: List[str] = []  # the vLLM class names this process swapped (for tests and logs)
kept: Dict[str, str] = {}  # the vLLM rotary class names left to vLLM, with why


def table_classes(bases: Sequence[type], root: type) -> Tuple[Dict[type, type], Dict[str, str]]:
    """Each rotary class under `root` (vLLM's ``RotaryEmbeddingBase``) whose forward methods are
    one of `bases`' unchanged (only its cache differs), mapped to that base; the others with why."""
    found: Dict[type, type] = {}
    others: Dict[str, str] = {}
    pending = [root]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__ == __name__ or cls in found or cls is root:  # ours; the root
            continue
        base = next((b for b in bases if issubclass(cls, b)), None)
        own = [m for m in _METHODS if base is not None and getattr(cls, m, None) is not getattr(base, m, None)]
        if base is None:
            others[cls.__name__] = f"not a {' or '.join(b.__name__ for b in bases)}: its own cache and forwards"
        elif own:
            others[cls.__name__] = f"defines {', '.join(own)} of its own"
        else:
            found[cls] = base
    return found, others


def _refuse(name: str, why: str) -> NoReturn:
    """Raises the ArgumentError that sends a call to vLLM's own method, `why` logged."""
    from . import compat

    raise compat.ArgumentError(f"{name}: {why}")


def _table(module: Any, positions: Any, query: Any, key: Any, offsets: Any) -> Tuple[Any, Any]:
    """RotaryEmbedding's form: in place on the module's cache as vLLM's kernel reads it (query's
    dtype and device)."""
    from . import compat

    if offsets is not None:
        _refuse("offsets", f"{type(module).__name__}'s forwards take none")
    cache = module._match_cos_sin_cache_dtype(query)
    compat.rotary_embedding(positions, query, key, module.head_size, cache, module.is_neox_style)
    return query, key


def _mrope(module: Any, positions: Any, query: Any, key: Any, offsets: Any) -> Tuple[Any, Any]:
    """MRoPE: positions [T] (text only) are RotaryEmbedding's math on its cache; positions [3, T]
    read each pair's T/H/W section's row (its mrope_section, contiguous or interleaved)."""
    from . import compat

    if key is None:
        _refuse("key", "None: vLLM's MRoPE forwards require a key")
    if offsets is not None:  # vLLM's MRoPE forwards take and ignore them: its method decides
        _refuse("offsets", "vLLM's MRoPE forwards ignore them")
    if positions.dim() == 1:
        return _table(module, positions, query, key, None)
    if not module.mrope_section:
        _refuse("positions", f"shape {list(positions.shape)} without an mrope_section on the module")
    cache = module._match_cos_sin_cache_dtype(query)
    compat.mrope_rotary_embedding(positions, query, key, module.head_size, cache, module.is_neox_style,
                                  list(module.mrope_section), bool(getattr(module, "mrope_interleaved", False)))
    return query, key


def _deepseek(module: Any, positions: Any, query: Any, key: Any, offsets: Any) -> Tuple[Any, Any]:
    """DeepSeek YaRN: its cache as it is (mscale in it), row position + offset, into new tensors as
    its forward_native (the head width is query's last dimension, which forward_native slices)."""
    from . import compat

    if key is None:
        _refuse("key", "None: DeepSeek YaRN's forward_native requires a key")
    if positions.dim() != 1 or query.dim() != 3 or key.dim() != 3:
        _refuse("query", f"shape {list(query.shape)} with positions {list(positions.shape)}: DeepSeek YaRN's "
                "forward_native broadcasts one row per token over [T, heads, head_size] only")
    rows = positions if offsets is None else positions + offsets
    return compat.rotary_embedding_out(rows, query, key, query.shape[-1], module.cos_sin_cache, module.is_neox_style)


def _long_short(module: Any, positions: Any, query: Any, key: Any, offsets: Any) -> Tuple[Any, Any]:
    """Phi-3 LongRoPE: its concatenated short-then-long cache (mscale in it) at the row its forward
    reads: past the original_max_position_embeddings short rows when max_model_len chose the long
    factors, plus offsets; NeoX pairs (the class refuses GPT-J), in place."""
    from . import compat
    import torch

    cache = module.long_short_cos_sin_cache
    if key is None:
        _refuse("key", "None: Phi-3 LongRoPE's forward requires a key")
    if positions.dim() != 1 or query.dim() != 2 or key.dim() != 2:
        _refuse("query", f"shape {list(query.shape)} with positions {list(positions.shape)}: Phi-3 LongRoPE's "
                "forward rotates [T, heads * head_size] at positions [T] only")
    if torch.promote_types(cache.dtype, query.dtype) != query.dtype:  # vLLM's result would be the wider dtype
        _refuse("query", f"dtype {query.dtype} with a {cache.dtype} cache: Phi-3 LongRoPE's forward returns "
                f"{torch.promote_types(cache.dtype, query.dtype)}")
    rows = positions + module.original_max_position_embeddings if module.use_long_rope else positions
    rows = rows if offsets is None else rows + offsets
    compat.rotary_embedding(rows, query, key, module.head_size, cache, True)
    return query, key


def _rotate(module: Any, form: Callable, vllm_method: Callable, positions: Any, query: Any, key: Any,
            offsets: Any) -> Any:
    """ropejit's kernel in the class's `form`; vLLM's method (with the same arguments) where ropejit
    refuses, the reason logged once per class."""
    from . import compat

    try:
        return form(module, positions, query, key, offsets)
    except compat.ArgumentError as e:
        name = type(module).__name__
        if name not in _fallbacks_logged:
            _fallbacks_logged[name] = str(e)
            logger.warning("ropejit: %s runs vLLM's kernel for a call ropejit refuses: %s", name, e)
        return vllm_method(module, positions, query, key, *(() if offsets is None else (offsets,)))


def _ropejit_class(base: type, form: Callable) -> type:
    """The out-of-tree subclass of one vLLM rotary class, rotating in `form`."""

    def forward_cuda(self: Any, positions: Any, query: Any, key: Optional[Any] = None,
                     offsets: Optional[Any] = None) -> Any:
        return _rotate(self, form, getattr(base, "forward_cuda", base.forward), positions, query, key, offsets)

    def forward_cpu(self: Any, positions: Any, query: Any, key: Optional[Any] = None,
                    offsets: Optional[Any] = None) -> Any:
        return _rotate(self, form, getattr(base, "forward_cpu", base.forward), positions, query, key, offsets)

    doc = f"vLLM's {base.__name__} with ropejit's kernel (ropejit.vllm_plugin)."
    return type(f"Ropejit{base.__name__}", (base,), {"forward_cuda": forward_cuda, "forward_cpu": forward_cpu,
                                                     "__doc__": doc, "__module__": __name__})


def _module_class(base: type, op: type) -> type:
    """ropejit's subclass of a rotary ``nn.Module`` that is no custom op (Phi-3 LongRoPE): its
    ``forward`` runs ropejit where vLLM's op `op` is enabled when built (as CustomOp dispatches),
    else vLLM's forward, kept as ``forward_native``."""
    cls = _ropejit_class(base, _long_short)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        self.ropejit_enabled = op.enabled()

    def forward(self: Any, positions: Any, query: Any, key: Optional[Any] = None, offsets: Optional[Any] = None) -> Any:
        if self.ropejit_enabled:
            return self.forward_cuda(positions, query, key, offsets)
        return base.forward(self, positions, query, key, offsets)

    cls.__init__, cls.forward, cls.forward_native = __init__, forward, base.forward
    return cls


def _swap_phi3(op: type) -> None:
    """Points get_rope's Phi-3 LongRoPE at ropejit's subclass (vLLM looks it up by name when it
    builds one; no custom-op registry holds it)."""
    import vllm.model_executor.layers.rotary_embedding as rope
    from vllm.model_executor.layers.rotary_embedding.phi3_long_rope_scaled_rope import \
        Phi3LongRoPEScaledRotaryEmbedding as vllm_class

    current = getattr(rope, _PHI3, None)
    if current is not vllm_class:
        kept[_PHI3] = f"get_rope builds {getattr(current, '__name__', current)}, not vLLM's class"
        return
    _replaced[_PHI3] = vllm_class
    setattr(rope, _PHI3, _module_class(vllm_class, op))
    registered.append(_PHI3)


def register() -> None:
    """vLLM's entry point: with ``ROPEJIT_VLLM=1`` registers ropejit's subclass of each rotary class
    it serves (once per process); otherwise logs that vLLM keeps its kernel and does nothing."""
    if os.environ.get(ENV) != "1":
        logger.info("ropejit: vLLM keeps its rotary embedding kernel (set %s=1 to run ropejit's)", ENV)
        return
    try:
        from vllm.model_executor.custom_op import CustomOp, op_registry_oot
        from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding, RotaryEmbeddingBase
        from vllm.model_executor.layers.rotary_embedding.deepseek_scaling_rope import DeepseekScalingRotaryEmbedding
        from vllm.model_executor.layers.rotary_embedding.mrope import MRotaryEmbedding
    except ImportError as e:
        logger.warning("ropejit: vLLM's rotary classes did not import (%s): vLLM keeps its own", e)
        return
    forms = {RotaryEmbedding: _table, MRotaryEmbedding: _mrope, DeepseekScalingRotaryEmbedding: _deepseek}
    classes, others = table_classes(tuple(forms), RotaryEmbeddingBase)
    kept.update(others)
    for cls, base in classes.items():
        name = cls.__name__
        if name in registered:
            continue
        if name in op_registry_oot:
            kept[name] = f"another plugin registered {op_registry_oot[name].__name__} for it"
            continue
        subclass = _ropejit_class(cls, forms[base])
        CustomOp.register_oot(subclass, name=name)  # keyed by the class name CustomOp.__new__ looks up
        subclass.name = cls.name  # but enabled as vLLM's op: "+rotary_embedding" in custom_ops
        registered.append(name)
    if _PHI3 not in registered:
        _swap_phi3(RotaryEmbeddingBase)
    logger.info("ropejit: runs vLLM's %s; vLLM keeps %s", ", ".join(registered),
                "; ".join(f"{n} ({why})" for n, why in sorted(kept.items())) or "none")


def unregister() -> None:
    """Removes what :func:`register` added (tests; a process normally keeps it)."""
    try:
        from vllm.model_executor.custom_op import op_registry_oot
        import vllm.model_executor.layers.rotary_embedding as rope
    except ImportError:
        return
    for name in registered:
        cls = op_registry_oot.get(name)
        if cls is not None and cls.__module__ == __name__:
            del op_registry_oot[name]
    for name, vllm_class in _replaced.items():
        setattr(rope, name, vllm_class)
    _replaced.clear()
    registered.clear()
    kept.clear()
    _fallbacks_logged.clear()
