"""One view of any array ropejit accepts: torch tensors, numpy arrays, objects with
``__cuda_array_interface__`` or ``__array_interface__``, and anything with ``__dlpack__``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from . import _ropejit

# numpy array-interface type strings → ropejit element names.
_TYPESTR = {"f2": "fp16", "f4": "fp32", "f8": "fp64", "u1": "uint8", "u2": "uint16", "i4": "int32",
            "i8": "int64", "i2": "int16", "u4": "uint32", "u8": "uint64", "i1": "int8", "b1": "bool"}
# DLPack (type code, bits) → ropejit element names (dlpack.h: 0 int, 1 uint, 2 float, 4 bfloat).
_DLPACK = {(0, 32): "int32", (0, 64): "int64", (1, 8): "uint8", (1, 16): "uint16", (2, 16): "fp16",
           (2, 32): "fp32", (2, 64): "fp64", (4, 16): "bf16", (10, 8): "fp8_e4m3", (12, 8): "fp8_e5m2"}


@dataclass(frozen=True)
class ArrayView:
    """Address, shape, strides (in elements), element type and device of an array."""

    ptr: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: str
    device: str  # "cpu" or "cuda"
    device_id: int
    writable: bool
    library: str  # "torch", "numpy" or "other": how to allocate a matching output


def dense_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """C-order strides, in elements, of a dense array of `shape`."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _torch_view(t: Any) -> ArrayView:
    import torch

    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp64",
             torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8", torch.int16: "int16"}
    for attr, name in (("float8_e4m3fn", "fp8_e4m3"), ("float8_e5m2", "fp8_e5m2"), ("uint16", "uint16"),
                       ("float4_e2m1fn_x2", "nvfp4")):
        if hasattr(torch, attr):
            names[getattr(torch, attr)] = name
    device = "cuda" if t.device.type == "cuda" else t.device.type
    return ArrayView(t.data_ptr(), tuple(t.shape), tuple(t.stride()), names.get(t.dtype, str(t.dtype)), device,
                     t.device.index or 0, True, "torch")


def _interface_view(iface: dict, device: str, library: str, writable_flag: Optional[bool]) -> ArrayView:
    typestr = iface["typestr"]
    dtype = _TYPESTR.get(typestr[1:], typestr)
    if typestr[0] == ">" and typestr[2:] != "1":
        dtype = "big-endian " + dtype
    itemsize = int(typestr[2:])
    ptr, readonly = iface["data"]
    shape = tuple(int(s) for s in iface["shape"])
    strides = iface.get("strides")
    if strides is None:
        elem_strides = dense_strides(shape)
    else:
        if any(s % itemsize for s in strides):
            raise _ropejit.ArgumentError(f"strides {tuple(strides)} are not whole elements of {itemsize} bytes")
        elem_strides = tuple(s // itemsize for s in strides)
    writable = (not readonly) if writable_flag is None else writable_flag
    return ArrayView(int(ptr or 0), shape, elem_strides, dtype, device, 0, writable, library)


def view(obj: Any, name: str) -> ArrayView:
    """The ArrayView of `obj`; ArgumentError naming `name` when it is no array."""
    module = type(obj).__module__.split(".")[0]
    if module == "torch":
        return _torch_view(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _interface_view(obj.__cuda_array_interface__, "cuda", "other", None)
    if hasattr(obj, "__array_interface__"):
        flags = getattr(obj, "flags", None)
        writable = getattr(flags, "writeable", None) if flags is not None else None
        return _interface_view(obj.__array_interface__, "cpu", "numpy" if module == "numpy" else "other", writable)
    if hasattr(obj, "__dlpack__"):
        ptr, shape, strides, code, bits, lanes, device_type, device_id = _ropejit.dlpack_view(obj)
        dtype = _DLPACK.get((code, bits), f"dlpack({code},{bits})") if lanes == 1 else f"dlpack lanes {lanes}"
        device = {1: "cpu", 2: "cuda", 3: "cpu", 13: "cuda"}.get(device_type, f"dlpack device {device_type}")
        return ArrayView(ptr, tuple(shape), tuple(strides), dtype, device, device_id, True, "other")
    raise _ropejit.ArgumentError(
        f"{name}: a {type(obj).__name__} is not an array: pass a torch tensor, a numpy array, or an object "
        "with __dlpack__, __cuda_array_interface__ or __array_interface__")


def empty_like(like: Any, like_view: ArrayView, shape: Tuple[int, ...], name: str, element: str = "") -> Any:
    """A new array of `shape` in the library and on the device of `like`, of its element type or
    of ``element`` ("fp8_e4m3" / "fp8_e5m2": numpy holds their uint8 codes; "fp32")."""
    if like_view.library == "torch":
        import torch

        dtype = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2,
                 "fp32": torch.float32}.get(element, like.dtype)
        return torch.empty(shape, dtype=dtype, device=like.device)
    if like_view.library == "numpy":
        import numpy as np

        return np.empty(shape, dtype={"fp8_e4m3": np.uint8, "fp8_e5m2": np.uint8,
                                      "fp32": np.float32}.get(element, like.dtype))
    raise _ropejit.ArgumentError(f"{name} is required: ropejit allocates outputs only for torch and numpy arrays")
