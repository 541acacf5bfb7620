"""Module functions the patches replace (transformers' and diffusers' apply functions): one
replacement per function however many patched models use it, counted, and the library's own put
back when the last of them is unpatched."""
import sys
from typing import Callable, Dict, Tuple

#: (module name, function name) -> (the library's function, its replacement, patched models using it)
Registry = Dict[Tuple[str, str], Tuple[Callable, Callable, int]]


def acquire(registry: Registry, module_name: str, function: str, make: Callable[[Callable], Callable]) -> None:
    """Replaces ``module_name.function`` with ``make(original)``, or counts one more user of the
    replacement already there."""
    key = (module_name, function)
    if key in registry:
        original, replacement, users = registry[key]
        registry[key] = (original, replacement, users + 1)
        return
    module = sys.modules[module_name]
    original = getattr(module, function)
    replacement = make(original)
    registry[key] = (original, replacement, 1)
    setattr(module, function, replacement)


def release(registry: Registry, key: Tuple[str, str]) -> None:
    """Drops one user of the replacement at `key`; the last puts the library's function back
    (unless someone else has replaced it since)."""
    original, replacement, users = registry[key]
    if users > 1:
        registry[key] = (original, replacement, users - 1)
        return
    del registry[key]
    module = sys.modules.get(key[0])
    if module is not None and getattr(module, key[1], None) is replacement:
        setattr(module, key[1], original)
