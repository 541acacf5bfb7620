"""ropejit: rotary position embedding (RoPE) kernels generated for one model's spec, compiled
at run time (CUDA through NVRTC, or the CPU host backend), checked and launched from Python.

    import ropejit
    spec = ropejit.Spec.from_hf("path/to/config.json", dtype="bf16")
    kernel = ropejit.Runtime().get(spec)
    q, k = kernel(q, k, positions=positions)      # torch, numpy or any __dlpack__ array

Importing needs neither a GPU nor torch. ``ropejit.torch`` (a torch custom op) and
``ropejit.transformers`` (a patch for transformers models) load torch when imported.
"""
from ._ropejit import (  # noqa: F401  (re-exported)
    ArgumentError,
    CompileError,
    Error,
    SpecError,
    UnsupportedError,
    __version__,
)
from ._kernel import Kernel, Runtime  # noqa: F401
from ._spec import Spec  # noqa: F401

__all__ = ["Spec", "Runtime", "Kernel", "Error", "SpecError", "ArgumentError", "UnsupportedError",
           "CompileError", "__version__"]
