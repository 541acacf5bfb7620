"""A vLLM general plugin that runs vLLM's rotary embedding through ropejit's kernel.

Installed with ropejit as the entry point ``ropejit`` of group ``vllm.general_plugins``; vLLM
loads it when ``VLLM_PLUGINS`` allows it (unset: every installed plugin; vLLM's rule), and it acts
only with ``ROPEJIT_VLLM=1``::

    ROPEJIT_VLLM=1 vllm serve meta-llama/Llama-3.1-8B-Instruct --enforce-eager

What it swaps: every vLLM rotary class that rotates through vLLM's own
``rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)`` kernel (its
``forward_cuda`` and ``forward_cpu`` are ``RotaryEmbedding``'s, its cos_sin_cache one row per
position: ``RotaryEmbedding`` and the scaling subclasses that only build a different cache,
Llama 3, linear, NTK, dynamic NTK, YaRN, Gemma 4...) gets an out-of-tree subclass
(``CustomOp.register_oot``) whose ``forward_cuda`` / ``forward_cpu`` call
:func:`ropejit.compat.rotary_embedding` on the same cache, in place. Classes with forwards of their
own (MRoPE, Phi-3 LongRoPE, DeepSeek YaRN, dual chunk, vision) keep vLLM's, named in the log. A
call ropejit refuses (an ``ArgumentError``: a dtype, a head layout) runs vLLM's own method, the
reason logged once per class. vLLM calls ``forward_cuda`` only where its custom op is enabled
(``--enforce-eager``, or ``custom_ops`` with ``+rotary_embedding``); with Inductor compiling
``forward_native`` the rotary stays in vLLM's graph, as vLLM decides for every custom op.
"""
import logging
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

logger = logging.getLogger("ropejit.vllm_plugin")

ENV = "ROPEJIT_VLLM"  # "1": swap; anything else: vLLM keeps its own rotary kernel
_METHODS = ("forward_native", "forward_cuda", "forward_cpu")  # inherited unchanged: the table form
_fallbacks_logged: Dict[str, str] = {}
registered: List[str] = []  # the vLLM class names this process swapped (for tests and logs)
kept: Dict[str, str] = {}  # the vLLM rotary class names left to vLLM, with why


def table_classes(base: type, root: Optional[type] = None) -> Tuple[List[type], Dict[str, str]]:
    """``base`` (vLLM's ``RotaryEmbedding``) and its subclasses that rotate from ``cos_sin_cache``
    through vLLM's kernel (forward methods inherited unchanged), and the other rotary classes
    under `root` (default `base`; vLLM's ``RotaryEmbeddingBase``) with why."""
    found: List[type] = []
    others: Dict[str, str] = {}
    pending = [root or base]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__ == __name__ or cls in found or (cls is root and root is not base):  # ours; the root
            continue
        own = [m for m in _METHODS if getattr(cls, m, None) is not getattr(base, m)]
        if not issubclass(cls, base):
            others[cls.__name__] = f"not a {base.__name__}: its own cache and forwards"
        elif own:
            others[cls.__name__] = f"defines {', '.join(own)} of its own"
        else:
            found.append(cls)
    return found, others


def _rotate(module: Any, vllm_method: Callable, positions: Any, query: Any, key: Any) -> Any:
    """ropejit's kernel on the module's cache, in place; vLLM's method where ropejit refuses."""
    from . import compat

    cache = module._match_cos_sin_cache_dtype(query)  # what vLLM's kernel would read, on query's device
    try:
        compat.rotary_embedding(positions, query, key, module.head_size, cache, module.is_neox_style)
    except compat.ArgumentError as e:
        name = type(module).__name__
        if name not in _fallbacks_logged:
            _fallbacks_logged[name] = str(e)
            logger.warning("ropejit: %s runs vLLM's kernel for a call ropejit refuses: %s", name, e)
        return vllm_method(module, positions, query, key)
    return query, key


def _ropejit_class(base: type) -> type:
    """The out-of-tree subclass of one vLLM rotary class."""

    def forward_cuda(self: Any, positions: Any, query: Any, key: Optional[Any] = None) -> Any:
        return _rotate(self, base.forward_cuda, positions, query, key)

    def forward_cpu(self: Any, positions: Any, query: Any, key: Optional[Any] = None) -> Any:
        return _rotate(self, base.forward_cpu, positions, query, key)

    doc = f"vLLM's {base.__name__} with ropejit's kernel (ropejit.vllm_plugin)."
    return type(f"Ropejit{base.__name__}", (base,), {"forward_cuda": forward_cuda, "forward_cpu": forward_cpu,
                                                     "__doc__": doc, "__module__": __name__})


def register() -> None:
    """vLLM's entry point: with ``ROPEJIT_VLLM=1`` registers ropejit's subclass of each table-form
    rotary class (once per process); otherwise logs that vLLM keeps its kernel and does nothing."""
    if os.environ.get(ENV) != "1":
        logger.info("ropejit: vLLM keeps its rotary embedding kernel (set %s=1 to run ropejit's)", ENV)
        return
    try:
        from vllm.model_executor.custom_op import CustomOp, op_registry_oot
        from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbedding, RotaryEmbeddingBase
    except ImportError as e:
        logger.warning("ropejit: vLLM's rotary classes did not import (%s): vLLM keeps its own", e)
        return
    classes, others = table_classes(RotaryEmbedding, RotaryEmbeddingBase)
    kept.update(others)
    for cls in classes:
        name = cls.__name__
        if name in registered:
            continue
        if name in op_registry_oot:
            kept[name] = f"another plugin registered {op_registry_oot[name].__name__} for it"
            continue
        subclass = _ropejit_class(cls)
        CustomOp.register_oot(subclass, name=name)  # keyed by the class name CustomOp.__new__ looks up
        subclass.name = cls.name  # but enabled as vLLM's op: "+rotary_embedding" in custom_ops
        registered.append(name)
    logger.info("ropejit: runs vLLM's %s; vLLM keeps %s", ", ".join(registered),
                "; ".join(f"{n} ({why})" for n, why in sorted(kept.items())) or "none")


def unregister() -> None:
    """Removes what :func:`register` added (tests; a process normally keeps it)."""
    try:
        from vllm.model_executor.custom_op import op_registry_oot
    except ImportError:
        return
    for name in registered:
        cls = op_registry_oot.get(name)
        if cls is not None and cls.__module__ == __name__:
            del op_registry_oot[name]
    registered.clear()
    kept.clear()
    _fallbacks_logged.clear()
