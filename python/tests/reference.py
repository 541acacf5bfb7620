"""An independent float64 RoPE reference for the Python tests: HF's formulas written in numpy
(inv_freq in float32 as HF computes it, everything after in float64), and bf16 bit helpers."""
from __future__ import annotations

import numpy as np


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 → bf16 bits (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_float(bits: np.ndarray) -> np.ndarray:
    """bf16 bits (uint16) → float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    """float values in the array type ropejit takes for a spec dtype (bf16 as raw uint16 bits)."""
    if dtype == "bf16":
        return bf16_bits(x)
    return np.asarray(x, dtype=np.float16 if dtype == "fp16" else np.float32)


def to_float64(a: np.ndarray, dtype: str) -> np.ndarray:
    return (bf16_to_float(a) if dtype == "bf16" else np.asarray(a)).astype(np.float64)


def inv_freq_default(theta: float, rotary_dim: int) -> np.ndarray:
    """HF's default RoPE: 1 / theta^(2i/d), in float32 as HF computes it, the float32 power taken
    correctly rounded (in float64, rounded once), as ropejit defines it: numpy's own float32 power
    differs from that by an ulp in some pairs, and by how much changes between numpy releases."""
    exponent = np.arange(0, rotary_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(rotary_dim)
    power = (np.float64(np.float32(theta)) ** exponent.astype(np.float64)).astype(np.float32)
    return (np.float32(1.0) / power).astype(np.float32)


def rotate(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray, layout: str) -> np.ndarray:
    """x [T, H, D] float64 rotated by positions [T]; the tail past 2 * len(inv_freq) stays."""
    half = inv_freq.shape[0]
    angle = (positions.astype(np.float32)[:, None] * inv_freq[None, :]).astype(np.float64)  # HF: fp32 product
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    out = x.copy()
    if layout == "neox":
        a, b = x[..., :half], x[..., half:2 * half]
        out[..., :half] = a * cos - b * sin
        out[..., half:2 * half] = b * cos + a * sin
    else:
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2] = a * cos - b * sin
        out[..., 1:2 * half:2] = b * cos + a * sin
    return out


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x [T, H, D] / sqrt(mean(x^2) + eps) * weight, per head, in float64."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


# Largest error allowed against the float64 reference, relative to max(1, |value|): a few
# roundings of the storage type (the kernel rounds once; fp32 angles add a little).
TOLERANCE = {"fp32": 2e-5, "fp16": 2e-3, "bf16": 1.6e-2}


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str, what: str) -> None:
    got = to_float64(actual, dtype)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    error = np.abs(got - expected) / np.maximum(1.0, np.abs(expected))
    worst = np.unravel_index(np.argmax(error), error.shape)
    assert error[worst] <= TOLERANCE[dtype], (
        f"{what}: error {error[worst]:.3g} at {worst}: got {got[worst]!r}, expected {expected[worst]!r} "
        f"(tolerance {TOLERANCE[dtype]} for {dtype})")
