"""FP8 codes and the paged-cache checks of bench/peers_reference.py (split off to keep each file
short): e4m3fn encoding, compare_fp8, the paged_kv check (q in place or q_out, FP8 or not; k and
v into their caches at slot_mapping slots) and the MLA latent-cache check (op mla_append: each
token's row [kv_c | rotated k_pe] at its slot).

Rules (the module docstring of peers_reference.py has the storage-dtype rule): an FP8 element is
the code of value / scale, correctly rounded (to nearest, ties to even) and saturated to +-448, or
its neighbour when value / scale lies within fp32 noise of the midpoint between the two (as
check/src/reference.cpp's fp8_matches); peers, which may round through the model dtype first,
get the 1e-2 pair slack instead. Inputs a launch only reads must keep their bytes; every cache
slot no token maps must keep its bytes.
"""
import numpy as np

import peers_reference as ref

E4M3_MAX = 448.0


def _e4m3_table():
    """float64 value of each of the 256 OCP e4m3fn codes (0x7f and 0xff: NaN; no infinities)."""
    codes = np.arange(256)
    exponent, mantissa = (codes >> 3) & 0xF, (codes & 7).astype(np.float64)
    magnitude = np.where(exponent == 0, np.ldexp(mantissa / 8, -6), np.ldexp(1 + mantissa / 8, exponent - 7))
    values = np.where(codes & 0x80, -magnitude, magnitude)
    values[[0x7F, 0xFF]] = np.nan
    return values


E4M3_VALUES = _e4m3_table()
_E4M3_POSITIVE = E4M3_VALUES[:0x7F]  # codes 0 .. 0x7e: 0 .. 448, increasing


def e4m3_decode(codes):
    """uint8 codes -> float64 values (NaN codes -> NaN)."""
    return E4M3_VALUES[np.asarray(codes, dtype=np.uint8)]


def e4m3_encode(x):
    """float values -> uint8 e4m3fn codes: round to nearest, ties to the even code, saturating
    (beyond +-448, infinities too, -> +-448); NaN -> 0x7f."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), E4M3_MAX)  # NaN stays NaN
    hi = np.clip(np.searchsorted(_E4M3_POSITIVE, np.nan_to_num(a)), 0, len(_E4M3_POSITIVE) - 1)
    lo = np.maximum(hi - 1, 0)
    below, above = a - _E4M3_POSITIVE[lo], _E4M3_POSITIVE[hi] - a
    take_hi = (above < below) | ((above == below) & (hi % 2 == 0))
    code = np.where(take_hi, hi, lo).astype(np.uint8)
    code = np.where(np.signbit(x), code | np.uint8(0x80), code).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), code).astype(np.uint8)


def e4m3_ordinal(codes):
    """Signed step count from zero (+0 and -0 both 0): ulp distance = difference of ordinals."""
    codes = np.asarray(codes, dtype=np.int64)
    return np.where(codes & 0x80, -(codes & 0x7F), codes & 0x7F)


def compare_fp8(codes, value, scale, quant_scale, strict=True):
    """FP8 e4m3 elements against float64 values: (ok, worst distance in codes, count of failing
    elements). A code passes when it is the correctly rounded, saturated code of
    value / quant_scale, or (strict) its neighbour across the midpoint when value / quant_scale
    lies within fp32 noise of that midpoint (noise: FP32_RELATIVE * max(|value|, pair) /
    quant_scale, plus 2^-22 relative for the kernel's float32 reciprocal of the scale). Not
    strict (peers, which round through the storage dtype first): any code no farther from the
    quotient than the right one plus twice that noise and the pair slack PAIR_RELATIVE * pair /
    quant_scale. NaN codes never pass."""
    quotient = value / quant_scale
    want = e4m3_encode(quotient)
    got_value, want_value = e4m3_decode(codes), e4m3_decode(want)
    clamped = np.clip(quotient, -E4M3_MAX, E4M3_MAX)  # saturation: beyond 448 the right code is 448
    ulps = np.abs(e4m3_ordinal(codes) - e4m3_ordinal(want))
    noise = ref.FP32_RELATIVE * np.maximum(np.abs(value), scale) / quant_scale + np.abs(quotient) * 2.0**-22
    if not strict:
        noise = noise + ref.PAIR_RELATIVE * scale / quant_scale
    finite = np.isfinite(got_value)
    near = finite & (np.abs(got_value - clamped) - np.abs(want_value - clamped) <= 2 * noise)
    good = finite & ((ulps == 0) | (near & ((ulps <= 1) | (not strict))))
    worst = int(ulps[finite].max()) if finite.any() else 0
    return bool(good.all()), worst, int(good.size - good.sum())


def compare_elements(problem, got, value, scale, quant_scale, strict, what):
    """One tensor's elements (storage dtype, or FP8 codes when quant_scale): (ok, note)."""
    if quant_scale:
        good, worst, bad = compare_fp8(got, value, scale, quant_scale, strict)
        note = f"{what} {worst} code"
    else:
        good, worst, bad = ref.compare(problem.dtype, ref.decode(problem.dtype, got), value, scale)
        note = f"{what} {worst:.1f} ulp"
    return good, note + ("" if good else f" ({bad} FAILED)")


def _read_only(problem, outputs, names):
    """Inputs the launch only reads must keep their bytes: (ok, notes)."""
    changed = [n for n in names if n in outputs and not np.array_equal(
        np.asarray(outputs[n]).view(np.uint8), problem.inputs[n].view(np.uint8))]
    return not changed, [f"input {n} changed (FAILED: it is only read)" for n in changed]


def _unmapped_changed(problem, cache_name, after, width):
    """Bytes of the cache's slots no token maps that changed."""
    slots = problem.inputs["slot_mapping"]
    unmapped = np.ones(problem.cache_num_pages * problem.page_size, dtype=bool)
    unmapped[slots[slots >= 0]] = False
    before = problem.inputs[cache_name].reshape(-1, width)
    return int(np.count_nonzero(after.reshape(-1, width)[unmapped].view(np.uint8) != before[unmapped].view(np.uint8))), \
        int(unmapped.sum())


def check_paged(problem, outputs, rows, expect, strict):
    """paged_kv beyond q: k and v (and q when q_out is separate) left as they were, each checked
    token's K and V cache slot, every slot no token maps byte-identical. (ok, notes)."""
    hkv, d = problem.heads["k"], problem.spec["head_dim"]
    ok, notes = _read_only(problem, outputs, list(problem.op.read_only) + (["q"] if "q_out" in outputs else []))
    written = problem.inputs["slot_mapping"][rows]
    mapped = written >= 0
    kept = 0
    for name, quant_scale in (("k", problem.k_scale), ("v", problem.v_scale)):
        cache = outputs.get(name + "_cache")
        if cache is None:
            ok = False
            notes.append(f"{name}_cache missing (FAILED)")
            continue
        after = np.asarray(cache).reshape(-1, hkv * d)
        value, scale = expect[name]
        good, note = compare_elements(problem, after[written[mapped]].reshape(-1, hkv, d), value[mapped],
                                      scale[mapped], quant_scale if problem.fp8 else 0.0, strict, name + "_cache")
        changed, kept = _unmapped_changed(problem, name + "_cache", after, hkv * d)
        ok &= good and not changed
        notes.append(note + (f", {changed} unmapped-slot bytes changed (FAILED)" if changed else ""))
    if ok:
        notes.append(f"{kept} unmapped slots kept")
    return ok, notes


def check_mla(problem, outputs, rows, expect, strict):
    """op mla_append: q (in place, or q_out with q itself kept) against `expect`'s q, kv_c and k_pe
    kept, each checked token's cache row [kv_c | rotated k_pe] at its slot (the spec's cache
    dtype, FP8 with k_scale), every unmapped row byte-identical. (ok, notes)."""
    rank, rd = problem.kv_lora_rank, problem.spec["rotary_dim"]
    ok, notes = _read_only(problem, outputs, list(problem.op.read_only) + (["q"] if "q_out" in outputs else []))
    cache = outputs.get("k_cache")
    if cache is None:
        return False, notes + ["k_cache missing (FAILED)"]
    after = np.asarray(cache).reshape(-1, rank + rd)
    written = problem.inputs["slot_mapping"][rows]
    got = after[written]
    quant_scale = problem.k_scale if problem.fp8 else 0.0
    for what, part, (value, scale) in (("cache kv_c", got[:, :rank], expect["kv_c"]),
                                       ("cache k_pe", got[:, rank:], expect["k_pe"])):
        good, note = compare_elements(problem, part, value.reshape(part.shape), scale.reshape(part.shape),
                                      quant_scale, strict, what)
        ok &= good
        notes.append(note)
    changed, kept = _unmapped_changed(problem, "k_cache", after, rank + rd)
    ok &= not changed
    notes.append(f"{changed} unmapped-row bytes changed (FAILED)" if changed else f"{kept} unmapped rows kept")
    return ok, notes
