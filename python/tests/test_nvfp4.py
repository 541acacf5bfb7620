"""NVFP4 paged KV cache through the Python API (io.cache_dtype "nvfp4", op rope): e2m1 codes two a
byte (element 2i in the low nibble) in k_cache / v_cache, one e4m3 block scale per 16 values of a
head row in k_scale_cache / v_scale_cache, k_scale / v_scale the fp32 global scales. The fused
launch's bytes against an independent encoder written from the format's definition (e2m1 and e4m3
value tables, round to nearest even), applied to the same spec's plain rotated k (output separate,
fp32 spec: the exact float32 values the fused kernel encodes) and to v as it is."""
import numpy as np
import pytest

import ropejit

torch = pytest.importorskip("torch")

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])                      # code index -> value
E4M3 = np.array([(c & 7) * 2.0 ** -9 if c < 8 else (1 + (c & 7) / 8) * 2.0 ** ((c >> 3) - 7)
                 for c in range(127)])                                           # codes 0..126 (127: NaN)
F32 = np.float32


def round_to_table(x, table):
    """|x| rounded to nearest in a sorted value table (ties to the even index, i.e. the even
    mantissa), saturating at its last value: the code index."""
    a = np.minimum(np.abs(x.astype(np.float64)), table[-1])
    hi = np.clip(np.searchsorted(table, a, side="left"), 1, len(table) - 1)   # table[hi - 1] < a <= table[hi]
    lo = hi - 1
    below, above = a - table[lo], table[hi] - a
    pick_hi = (above < below) | ((above == below) & (hi % 2 == 0))
    return np.where(pick_hi, hi, lo)


def encode_nvfp4(rows, global_scale):
    """rows [..., D] float32 -> (packed e2m1 bytes [..., D/2], e4m3 scale codes [..., D/16])."""
    rows = np.asarray(rows, F32)
    blocks = rows.reshape(rows.shape[:-1] + (rows.shape[-1] // 16, 16))
    inv = F32(1) / F32(global_scale)
    amax = np.abs(blocks).max(axis=-1)
    sf_value = inv * (amax * (F32(1) / F32(6)))                                 # float32 ops throughout
    sf_code = round_to_table(sf_value, E4M3)                                      # RNE, saturating at 448
    sf = E4M3[sf_code].astype(F32)
    with np.errstate(divide="ignore"):
        multiplier = np.where(sf != 0, inv / np.where(sf != 0, sf, F32(1)), F32(0)).astype(F32)
    scaled = blocks * multiplier[..., None]
    codes = (np.signbit(scaled).astype(np.uint8) << 3) | round_to_table(scaled, E2M1).astype(np.uint8)
    codes = codes.reshape(rows.shape)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return packed.astype(np.uint8), sf_code.astype(np.uint8)


def decode_nvfp4(packed, sf_codes, global_scale):
    """Bytes back to float64 values: e2m1 value × block scale × global scale."""
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(packed.shape[:-1] + (packed.shape[-1] * 2,))
    values = np.where(codes & 8, -1.0, 1.0) * E2M1[codes & 7]
    sf = E4M3[sf_codes]
    return values * np.repeat(sf, 16, axis=-1) * global_scale


def test_encoder_tables():
    """The independent encoder against torch's own conversions (e4m3) and the format's midpoints."""
    x = np.float32(np.random.default_rng(1).uniform(0, 480, 4000))
    want = torch.from_numpy(np.minimum(x, 448)).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert (round_to_table(x, E4M3) == want).all()
    assert np.array_equal(E4M3, torch.arange(127, dtype=torch.uint8).view(torch.float8_e4m3fn).double().numpy())
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.25, -5.0], F32)
    assert E2M1[round_to_table(mids, E2M1)].tolist() == [0, 1, 1, 2, 2, 4, 4, 6, 0, 4]


def nvfp4_spec(layout, rotary_dim=128, page_size=32):
    return {"name": "nvfp4-kv", "head_dim": 128, "rotary_dim": rotary_dim, "num_q_heads": 32, "num_kv_heads": 8,
            "layout": "neox", "dtype": "fp32", "max_position_embeddings": 131072,
            "rope": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                     "original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
            "io": {"input": "separate", "output": "paged_kv", "copy_v": True, "positions": "explicit",
                   "cache_layout": layout, "cache_dtype": "nvfp4", "cache_index": "slot_mapping",
                   "page_size": page_size, "q_output": "inplace"}}


def plain(runtime, spec, q, k, positions):
    """The same spec's plain rotation (output separate): the float32 q and k the kernel writes and encodes."""
    spec = dict(spec, io={"input": "separate", "output": "separate", "positions": "explicit"})
    return runtime.get(spec)(q, k, positions=positions)


def slot_rows(cache, layout, page_size):
    """A cache [pages, page_size, Hkv, X] (nhd) or [pages, Hkv, page_size, X] (hnd) as [slots, Hkv, X]."""
    c = cache if layout == "nhd" else cache.transpose(0, 2, 1, 3)
    return c.reshape((-1,) + c.shape[2:])


# e2m1 midpoints (and 6): with global scale 0.25 the block scale is exactly 1 and the multiplier 4,
# so the scaled values are these: each rounds to the even neighbour (6, 0, 1, 1, 2, 2, 4, 4, signed).
TIES = np.array([6, .25, .75, 1.25, 1.75, 2.5, 3.5, 5, -.25, -.75, -1.25, -1.75, -2.5, -3.5, -5, -6], F32)
TIE_CODES = [7, 0, 2, 2, 4, 4, 6, 6, 8, 10, 10, 12, 12, 14, 14, 15]

# An amax (1.78125 less an ulp) whose block scale 4 · fl32(amax · fl32(1 / 6)) rounds onto the e4m3
# midpoint 1.1875 (tie: 1.25, code 58), where the real 4 · amax / 6 lies below it (1.125, code 57).
AMAX_ROUNDED_UP = np.nextafter(F32(1.78125), F32(0))


def data(rng, tokens):
    """k and v over a wide range of per-(token, head) gains, with all-zero blocks: with k_scale 0.01
    (inv 100) the block scales underflow to 0, are e4m3 subnormals, normals, or saturate at 448; v
    (v_scale 0.25) the same, plus the e2m1 ties and the rounded-up block scale above."""
    q = rng.standard_normal((tokens, 32, 128)).astype(F32)
    gains = 10.0 ** rng.uniform(-6.5, 2.5, (2, tokens, 8, 1)) * np.array([1.0, 25.0])[:, None, None, None]  # v: inv 4
    k, v = (rng.standard_normal((tokens, 8, 128)) * g for g in gains)
    k, v = k.astype(F32), v.astype(F32)
    k[2, 3, 16:32] = k[2, 3, 80:96] = 0                                           # both halves of the pairs
    k[5, :, :] = 0                                                                # a whole zero row
    v[4, 1, 96:112] = 0
    v[6, 2, :16] = -0.0                                                           # -0: sign-bit codes (8)
    v[8, 0, :16] = TIES / 4                                                       # with v_scale 0.25: sf 1, ties
    v[9, 0, :16] = AMAX_ROUNDED_UP * np.linspace(-1, 1, 16, dtype=F32)            # its block's amax
    return q, k, v


@pytest.mark.parametrize("layout,rotary_dim,torch_types", [("nhd", 128, False), ("hnd", 128, True),
                                                           ("hnd", 64, False), ("nhd", 64, True)])
def test_codes_equal_independent_encoder(runtime, rng, layout, rotary_dim, torch_types):
    page_size, pages, tokens = 32, 3, 70
    spec = nvfp4_spec(layout, rotary_dim, page_size)
    q, k, v = data(rng, tokens)
    positions = rng.integers(0, 131072, tokens).astype(np.int64)
    slots = rng.permutation(pages * page_size)[:tokens].astype(np.int64)
    slots[[7, 30, 55]] = -1                                                       # not cached (not 8, 9)
    k_scale, v_scale = 0.01, 0.25
    shape = (pages, page_size, 8) if layout == "nhd" else (pages, 8, page_size)
    poison = [rng.integers(0, 256, shape + (n,), dtype=np.uint8) for n in (64, 64, 8, 8)]
    arrays = [torch.from_numpy(p.copy()) for p in poison]
    if torch_types:                                                               # torch's own NVFP4 / e4m3 types
        arrays = ([a.view(torch.float4_e2m1fn_x2) for a in arrays[:2]] +
                  [a.view(torch.float8_e4m3fn) for a in arrays[2:]])
    q_t = torch.from_numpy(q.copy())
    out = runtime.get(spec)(q_t, torch.from_numpy(k), torch.from_numpy(v), positions=torch.from_numpy(positions),
                            k_cache=arrays[0], v_cache=arrays[1], k_scale_cache=arrays[2], v_scale_cache=arrays[3],
                            slot_mapping=torch.from_numpy(slots), k_scale=k_scale, v_scale=v_scale)
    assert len(out) == 5 and all(o is a for o, a in zip(out[1:], arrays))
    got = [slot_rows(a.view(torch.uint8).numpy(), layout, page_size) for a in arrays]
    rotated_q, rotated = plain(runtime, spec, q, k, positions)
    written = slots >= 0
    sf_seen = []
    for name, values, scale, codes, sfs in (("k", rotated, k_scale, got[0], got[2]), ("v", v, v_scale, got[1], got[3])):
        want_codes, want_sf = encode_nvfp4(values[written], scale)
        sf_seen.append(want_sf)
        bad = np.argwhere((codes[slots[written]] != want_codes).any(-1) | (sfs[slots[written]] != want_sf).any(-1))
        rows = [(int(np.flatnonzero(written)[t]), int(h)) for t, h in bad[:5]]
        assert not bad.size, f"{name}: {len(bad)} (token, kv head) rows differ from the encoder, first {rows}"
    tie_row = got[1][slots[8], 0]
    assert (tie_row[:8] & 15).tolist() + (tie_row[:8] >> 4).tolist() == TIE_CODES[0::2] + TIE_CODES[1::2]
    assert got[3][slots[8], 0, 0] == 56                                           # e4m3 1.0
    assert got[3][slots[9], 0, 0] == 58                                           # the float32 recipe's rounding
    sf_seen = np.concatenate(sf_seen)
    assert (sf_seen == 126).any() and (sf_seen == 0).any() and ((sf_seen > 0) & (sf_seen < 8)).any()
    untouched = np.setdiff1d(np.arange(pages * page_size), slots)
    for g, p in zip(got, poison):
        assert np.array_equal(g[untouched], slot_rows(p, layout, page_size)[untouched])
    assert np.array_equal(q_t.numpy(), rotated_q)                                 # q rotated in place



def test_dequantized_within_half_a_step(runtime, rng):
    """e2m1 value × block scale × k_scale lies within half an e2m1 step (in the scaled domain
    x / (sf · k_scale): 0.5 below 2, 1 up to 4, 2 up to 6) of the float64 rotation, plus float32
    noise of the rotated pair, wherever the block scale is nonzero and the value not past 6 + 1."""
    spec = nvfp4_spec("nhd")
    tokens, page_size = 48, 32
    q = rng.standard_normal((tokens, 32, 128)).astype(F32)
    k = (rng.standard_normal((tokens, 8, 128)) * 10.0 ** rng.uniform(-2.5, 0, (tokens, 8, 1))).astype(F32)
    v = rng.standard_normal((tokens, 8, 128)).astype(F32)
    positions = rng.integers(0, 131072, tokens).astype(np.int64)
    slots = np.arange(tokens, dtype=np.int64)
    caches = [np.zeros((2, page_size, 8, n), np.uint8) for n in (64, 64, 8, 8)]
    k_scale = 0.002
    runtime.get(spec)(q, k, v, positions=positions, k_cache=caches[0], v_cache=caches[1], k_scale_cache=caches[2],
                      v_scale_cache=caches[3], slot_mapping=slots, k_scale=k_scale, v_scale=0.01)
    packed, sf_codes = (slot_rows(c, "nhd", page_size)[:tokens] for c in (caches[0], caches[2]))
    got = decode_nvfp4(packed, sf_codes, k_scale)
    inv_freq = np.asarray(ropejit.Spec.from_json(spec).freqs()["inv_freq"], F32)
    angle = (positions.astype(F32)[:, None] * inv_freq[None]).astype(np.float64)[:, None, :]
    a, b = k[..., :64].astype(np.float64), k[..., 64:].astype(np.float64)
    exact = np.concatenate([a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], -1)
    unit = np.repeat(E4M3[sf_codes], 16, axis=-1) * k_scale                       # one scaled unit
    with np.errstate(divide="ignore", invalid="ignore"):
        want, have = exact / unit, got / unit
    step = np.where(np.abs(want) < 2, 0.5, np.where(np.abs(want) < 4, 1.0, 2.0))
    pair = np.hypot(a, b)
    noise = 8 * 2.0 ** -24 * np.concatenate([pair, pair], -1) / unit
    keep = (unit > 0) & (np.abs(want) <= 7)
    assert keep.mean() > 0.99
    assert (np.abs(have - want) <= 0.5 * step + noise)[keep].all()


def test_errors_name_the_argument(runtime):
    spec = nvfp4_spec("hnd")
    with pytest.raises(ropejit.SpecError, match="q_output_dtype"):
        ropejit.Spec.from_json(dict(nvfp4_spec("nhd"), io=dict(spec["io"], q_output="separate",
                                                               q_output_dtype="nvfp4")))
    with pytest.raises(ropejit.SpecError, match="q_output_dtype"):
        ropejit.Spec.from_json({**spec, "io": {"output": "separate", "q_output_dtype": "nvfp4"}})
    tokens = 4
    q, k, v = (np.ones((tokens, h, 128), F32) for h in (32, 8, 8))
    positions, slots = np.arange(tokens), np.arange(tokens, dtype=np.int64)

    def call(k_scale=0.01, k_scale_cache_shape=(2, 8, 32, 8)):
        caches = [np.full((2, 8, 32, 64), 7, np.uint8), np.full((2, 8, 32, 64), 7, np.uint8),
                  np.full(k_scale_cache_shape, 7, np.uint8), np.full((2, 8, 32, 8), 7, np.uint8)]
        q_in = q.copy()
        try:
            runtime.get(spec)(q_in, k, v, positions=positions, k_cache=caches[0], v_cache=caches[1],
                              k_scale_cache=caches[2], v_scale_cache=caches[3], slot_mapping=slots,
                              k_scale=k_scale, v_scale=0.01)
        except ropejit.Error:
            assert np.array_equal(q_in, q) and all((c == 7).all() for c in caches)   # nothing was written
            raise

    call()                                                                        # the right call runs
    for shape in ((2, 8, 32, 16), (2, 32, 8, 8), (2, 8, 32)):
        with pytest.raises(ropejit.ArgumentError, match="k_scale_cache"):
            call(k_scale_cache_shape=shape)
    for bad in (0.0, float("inf"), -1.0, float("nan"), None):
        with pytest.raises(ropejit.ArgumentError, match="k_scale"):
            call(k_scale=bad)
    with pytest.raises(ropejit.ArgumentError) as raised:
        call(k_scale=None)
    assert str(raised.value).startswith("k_scale is required for this spec") and raised.value.field == "k_scale"
    call(k_scale=2.0 ** 126)                           # the largest global scale: 1 / k_scale is normal
    with pytest.raises(ropejit.ArgumentError, match=r"^k_scale: .*\(0, 2\^126\]"):
        call(k_scale=2.0 ** 127)
