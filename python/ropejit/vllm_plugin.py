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

Classes with forwards of their own get forms of their own (:mod:`ropejit._vllm_forms`), through
the same registration: openPangu's interleaved MRoPE (it computes in ``forward``: its subclass's
``forward`` follows vLLM's op switch as Phi-3's), Bailing and Ernie 4.5 VL MRoPE (per-token tables
from their own cos/sin selection), DeepSeek V4 (last dims, ``inverse``), dual chunk attention (five
query rotations), Fourier RoPE (its coefficients' cos/sin), Llama 4 vision (its complex cache). A
class no form covers (a future vLLM's) keeps vLLM's, named in the log (``kept``).

A call ropejit refuses (an ``ArgumentError``: a dtype, a head layout, a form the class computes
otherwise) runs vLLM's own method, the reason logged once per class. vLLM calls ``forward_cuda``
only where its custom op is enabled (``--enforce-eager``, or ``custom_ops`` with
``+rotary_embedding``); with Inductor compiling ``forward_native`` the rotary stays in vLLM's
graph, as vLLM decides for every custom op.
"""
import importlib
import logging
import os
from typing import Any, Callable, Dict, List, Sequence, Tuple

logger = logging.getLogger("ropejit.vllm_plugin")

ENV = "ROPEJIT_VLLM"  # "1": swap; anything else: vLLM keeps its own rotary kernel
_ROPE_PACKAGE = "vllm.model_executor.layers.rotary_embedding"
# A subclass overriding any of these computes its own way; inheriting all, only its cache differs.
_METHODS = ("forward", "forward_static", "forward_native", "forward_cuda", "forward_cpu")
_PHI3 = "Phi3LongRoPEScaledRotaryEmbedding"
# vLLM's classes with forwards of their own that ropejit serves: the module under vLLM's
# rotary_embedding package, the form (ropejit._vllm_forms), whether the class computes in `forward`.
_OWN_FORMS = {
    "MRotaryEmbeddingInterleaved": ("mrope_interleaved", "mrope_interleaved", True),
    "BailingMRotaryEmbedding": ("bailing_mrope", "bailing", False),
    "Ernie4_5_VLRotaryEmbedding": ("ernie45_vl_rope", "ernie", False),
    "DeepseekV4ScalingRotaryEmbedding": ("deepseek_scaling_rope", "deepseek_v4", False),
    "DualChunkRotaryEmbedding": ("dual_chunk_rope", "dual_chunk", False),
    "FourierRotaryEmbedding": ("fope", "fourier", False),
    "Llama4VisionRotaryEmbedding": ("llama4_vision_rope", "llama4_vision", False),
}
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


def _rotate(module: Any, form: Callable, vllm_method: Callable, *args: Any, **kwargs: Any) -> Any:
    """ropejit's kernel in the class's `form`; vLLM's method (with the same arguments) where ropejit
    refuses, the reason logged once per class."""
    from . import compat

    try:
        return form(module, *args, **kwargs)
    except compat.ArgumentError as e:
        name = type(module).__name__
        if name not in _fallbacks_logged:
            _fallbacks_logged[name] = str(e)
            logger.warning("ropejit: %s runs vLLM's kernel for a call ropejit refuses: %s", name, e)
        return vllm_method(module, *args, **kwargs)


def _ropejit_class(base: type, form: Callable, own_forward: bool = False) -> type:
    """The out-of-tree subclass of one vLLM rotary class, rotating in `form`; `own_forward`: the
    class computes in its ``forward`` (what ropejit refuses runs that)."""

    # vLLM's method looked up at each call: what vLLM (or a test) has patched onto it by then.
    def forward_cuda(self: Any, *args: Any, **kwargs: Any) -> Any:
        vllm_method = base.forward if own_forward else getattr(base, "forward_cuda", base.forward)
        return _rotate(self, form, vllm_method, *args, **kwargs)

    def forward_cpu(self: Any, *args: Any, **kwargs: Any) -> Any:
        vllm_method = base.forward if own_forward else getattr(base, "forward_cpu", base.forward)
        return _rotate(self, form, vllm_method, *args, **kwargs)

    doc = f"vLLM's {base.__name__} with ropejit's kernel (ropejit.vllm_plugin)."
    return type(f"Ropejit{base.__name__}", (base,), {"forward_cuda": forward_cuda, "forward_cpu": forward_cpu,
                                                     "__doc__": doc, "__module__": __name__})


def _module_class(base: type, form: Callable, op: type) -> type:
    """ropejit's subclass of a rotary class that computes in its ``forward`` (Phi-3 LongRoPE, a
    plain ``nn.Module``; openPangu's interleaved MRoPE): its ``forward`` runs ropejit where vLLM's
    op `op` is enabled when built (as CustomOp dispatches), else vLLM's forward (also
    ``forward_native`` where the class has none)."""
    cls = _ropejit_class(base, form, own_forward=True)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        self.ropejit_enabled = op.enabled()

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.ropejit_enabled:
            return self.forward_cuda(*args, **kwargs)
        return base.forward(self, *args, **kwargs)

    cls.__init__, cls.forward = __init__, forward
    if not hasattr(base, "forward_native"):
        cls.forward_native = base.forward
    return cls


def _swap_phi3(op: type) -> None:
    """Points get_rope's Phi-3 LongRoPE at ropejit's subclass (vLLM looks it up by name when it
    builds one; no custom-op registry holds it)."""
    from . import _vllm_forms as forms
    import vllm.model_executor.layers.rotary_embedding as rope
    from vllm.model_executor.layers.rotary_embedding.phi3_long_rope_scaled_rope import \
        Phi3LongRoPEScaledRotaryEmbedding as vllm_class

    current = getattr(rope, _PHI3, None)
    if current is not vllm_class:
        kept[_PHI3] = f"get_rope builds {getattr(current, '__name__', current)}, not vLLM's class"
        return
    _replaced[_PHI3] = vllm_class
    setattr(rope, _PHI3, _module_class(vllm_class, forms.long_short, op))
    registered.append(_PHI3)


def _register_oot(cls: type, subclass: type, custom_op: type, oot: Dict[str, type]) -> bool:
    """Registers `subclass` for vLLM's `cls` (once per process); False where another plugin holds it."""
    name = cls.__name__
    if name in registered:
        return True
    if name in oot:
        kept[name] = f"another plugin registered {oot[name].__name__} for it"
        return False
    custom_op.register_oot(subclass, name=name)  # keyed by the class name CustomOp.__new__ looks up
    subclass.name = cls.name  # but enabled as vLLM's op: "+rotary_embedding" in custom_ops
    registered.append(name)
    return True


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
    from . import _vllm_forms as forms

    bases = {RotaryEmbedding: forms.table, MRotaryEmbedding: forms.mrope,
             DeepseekScalingRotaryEmbedding: forms.deepseek}
    classes, others = table_classes(tuple(bases), RotaryEmbeddingBase)
    kept.update(others)
    for cls, base in classes.items():
        _register_oot(cls, _ropejit_class(cls, bases[base]), CustomOp, op_registry_oot)
    for name, (module, form, own_forward) in _OWN_FORMS.items():
        cls = getattr(importlib.import_module(f"{_ROPE_PACKAGE}.{module}"), name, None)
        if cls is None:  # not in this vLLM
            continue
        form = getattr(forms, form)
        subclass = _module_class(cls, form, cls) if own_forward else _ropejit_class(cls, form)
        if _register_oot(cls, subclass, CustomOp, op_registry_oot):
            kept.pop(name, None)
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
