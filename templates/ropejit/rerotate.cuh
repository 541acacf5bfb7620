#pragma once
// Re-rotation of keys already in a paged K cache (op rerotate; docs/ops.md "Re-rotating the
// KV cache"). A key stored as s_from R(a_from) k, written at position p with the old rope
// parameters, becomes s_to R(a_to) k at position p' with the spec's: one rotation through the
// angle difference a_to(p') - a_from(p), taken in double from the two float32 angles HF would
// form, times s_to / s_from. Only the rotary part [0, d) of each K head is read and written;
// the tail and the V cache stay as they are. The slot of a key comes from its old position (or
// the slot mapping), as the append found it.
#include "ropejit/rope.cuh"

namespace ropejit {

// The work decomposition: rows are keys, heads the Hkv heads of the K cache, lanes the rotating
// lanes only (the tail is never touched). config.cpp's work_shape says the same for the host.
template <class T>
ROPEJIT_HOST_DEVICE constexpr WorkShape rerotate_shape() {
  return make_work_shape(T::kHeadDim, T::kRotaryDim, 0, T::kNumKvHeads, T::kInterleaved, false, true, false, T::kVec,
                         T::kHeadsPerThread, false);
}

// The position a key moves to: new_positions[row], or its sequence's new start plus its index
// in the sequence; unchanged when none is given (the LongRoPE switch keeps positions).
template <class T>
__device__ __forceinline__ i64 new_position(const KernelParams& p, const RowRef& ref, i64 row) {
  if constexpr (T::kPositionsExplicit) {
    if (!p.new_positions) return ref.position;
    return p.positions_are_int64 ? __ldg((const i64*)p.new_positions + row)
                                 : (i64)__ldg((const int*)p.new_positions + row);
  } else {
    if (!p.new_start_pos) return ref.position;
    const int sequence = T::kPositionsVarlen ? ref.sequence : 0;
    const i64 old_start = p.start_pos ? __ldg(p.start_pos + sequence) : 0;
    return ref.position - old_start + __ldg(p.new_start_pos + sequence);
  }
}

// What the lane's cos and sin carry besides s_to / s_from: with an FP8 cache, k_scale times its
// float32 reciprocal (the scale the codes are read with and rewritten with: a rotation commutes
// with it, so it is applied once here, not twice per element) and the raw decode's 2^8 (exact).
template <class T>
__device__ __forceinline__ float cache_fold(const KernelParams& p) {
  if constexpr (T::kCacheFp8)
    return p.cache_scale * p.cache_inv_scale[0] * fp8_raw_scale<typename T::CacheStorage>();
  else
    return 1.0f;
}

// cos and sin (times s_to / s_from and cache_fold) of the angle differences of the lane's pairs.
template <class T>
__device__ __forceinline__ void delta_angles(const KernelParams& p, const float* inv_to, const float* inv_to_long,
                                             const float* inv_from, const float* inv_from_long, i64 old_position,
                                             i64 new_position, int first_pair,
                                             float (&cos_out)[rerotate_shape<T>().pairs_per_lane],
                                             float (&sin_out)[rerotate_shape<T>().pairs_per_lane]) {
  // Positions the launch's seq_len / from_seq_len do not cover would take the wrong table (the
  // host backend refuses them first): the key's rotated pairs become NaN instead.
  bool covered = true;
  if constexpr (T::kRopeDynamic || T::kRopeLongrope) covered = new_position < p.seq_len;
  if constexpr (T::kFromRopeDynamic || T::kFromRopeLongrope) covered = covered && old_position < p.from_seq_len;
#pragma unroll
  for (int i = 0; i < rerotate_shape<T>().pairs_per_lane; ++i) {
    const int pair = first_pair + i;
    const float inv_old = select_inv_freq<T::kRotaryDim, T::kFromRopeDynamic, T::kFromRopeLongrope>(
        p.from_use_dynamic_base, p.from_dynamic_log2_base, p.from_use_long_table, inv_from, inv_from_long, pair);
    const double angle = pair_angle<T>(new_position, pair_inv_freq<T>(p, inv_to, inv_to_long, pair)) -
                         pair_angle<T>(old_position, inv_old);
    const SinCos sc = sincos_reduced(angle);
    cos_out[i] = covered ? sc.cos * T::kAttentionRatio * cache_fold<T>(p) : __uint_as_float(0x7fc00000u);
    sin_out[i] = covered ? sc.sin * T::kAttentionRatio * cache_fold<T>(p) : __uint_as_float(0x7fc00000u);
  }
}

// The raw words of the cached vectors one lane reads of one key head (rotate_slice_lane's order).
template <class T>
struct KeyWords {
  u32 w[slice_lane_vectors<T>()][VecTraits<typename T::CacheStorage, T::kVec>::kWords];
};

// Issues the lane's loads of a key head's rotary slice into `in` (ahead of their use).
template <class T>
__device__ __forceinline__ void fetch_key(const typename T::CacheStorage::raw* slice, int lane, KeyWords<T>& in) {
#pragma unroll
  for (int j = 0; j < slice_lane_vectors<T>(); ++j)
    load_words<typename T::CacheStorage, T::kVec>(slice + slice_lane_element<T>(lane, j), in.w[j]);
}

// Stores them back (FP8: rounded with saturation, as the append stores; 1 / k_scale is in cache_fold).
template <class T>
__device__ __forceinline__ void store_key(const KernelParams&, typename T::CacheStorage::raw* head, int element,
                                          float (&x)[T::kVec]) {
  store_vec<typename T::CacheStorage, T::kVec>(head + element, x);
}

// One lane's pairs of one key head's rotary slice, from the words fetch_key loaded, rotated in
// place (FP8: the codes, raw: cache_fold carries k_scale and the decode's 2^8).
template <class T>
__device__ __forceinline__ void rerotate_lane(const KernelParams& p, typename T::CacheStorage::raw* slice, int lane,
                                              const float (&c)[rerotate_shape<T>().pairs_per_lane],
                                              const float (&s)[rerotate_shape<T>().pairs_per_lane],
                                              const KeyWords<T>& in) {
  int j = 0;  // a constant at each load once unrolled
  rotate_slice_lane<T>(
      lane, c, s,
      [&](int, float(&x)[T::kVec]) { words_to_floats<typename T::CacheStorage, T::kVec, T::kCacheFp8>(in.w[j++], x); },
      [&](int element, float(&x)[T::kVec]) { store_key<T>(p, slice, element, x); });
}

/// The op's kernel: each work item re-rotates its lane of its key heads of its row's cache slot.
template <class T>
__device__ __forceinline__ void rerotate_kernel(const KernelParams& p, const float* inv_to, const float* inv_to_long,
                                                const float* inv_from, const float* inv_from_long) {
  constexpr WorkShape W = rerotate_shape<T>();
  // Neighbouring threads take neighbouring vectors of one key head (coalesced).
  // Lanes of frequency-0 pairs only have nothing to do: their bytes stay.
  for_each_row_item<T, GridWalk::thread_stride, angle_lanes<T>(W)>(p, W, [&](const WorkItem& at, const RowRef& ref) {
    if (ref.cache_page < 0) return;  // no slot: nothing to rotate
    // The thread's first key head's rotary slice, then a pointer step per head (not the slot's
    // address again); with loads ahead the first head's loads go before the angles.
    float unused_scale = 1.0f;
    auto* key = (typename T::CacheStorage::raw*)cache_head<T>(p, ref, kRoleK, at.group, unused_scale) + T::kRotaryBegin;
    const i64 step = (i64)W.head_groups * p.out[kRoleK].head_stride;
    const int heads = (W.heads - at.group + W.head_groups - 1) / W.head_groups;
    const int owned = heads < T::kHeadsPerThread ? heads : T::kHeadsPerThread;
    KeyWords<T> first;
    if constexpr (T::kLoadsAhead) fetch_key<T>(key, at.lane, first);
    float c[W.pairs_per_lane], s[W.pairs_per_lane];
    delta_angles<T>(p, inv_to, inv_to_long, inv_from, inv_from_long, ref.position, new_position<T>(p, ref, at.row),
                    at.lane * W.pairs_per_lane, c, s);
    auto fetch = [&](int k, KeyWords<T>& in) { fetch_key<T>(key + k * step, at.lane, in); };
    auto finish = [&](int k, KeyWords<T>& in) { rerotate_lane<T>(p, key + k * step, at.lane, c, s, in); };
    heads_trips<T>(owned, first, [&](int k, KeyWords<T>& in) { fetch(k, in), finish(k, in); }, fetch, finish);
  });
}

}  // namespace ropejit
