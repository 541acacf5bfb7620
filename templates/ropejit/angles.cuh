#pragma once
// The angle of each rotated pair and its cos/sin (docs/rope-math.md §5-6): per work item, or
// computed once per block and shared by every head of a row. The RoPE kernel (rope.cuh) and the
// re-rotation (rerotate.cuh) take their frequencies here.
//
// Shared per block (docs/architecture.md §5): a block's threads take consecutive work items, so
// one pass of the block covers a short run of rows. Its threads first compute the cos/sin of
// those rows' pairs into shared memory (one lane's pairs per thread, with pair_angles, so the
// same bits an item computed itself), wait at a barrier, then each item reads its lane's values
// instead of evaluating sincos once per head group.
#include "ropejit/numeric.cuh"
#include "ropejit/params.cuh"
#include "ropejit/rows.cuh"
#include "ropejit/shape.cuh"
#include "ropejit/sincos.cuh"

namespace ropejit {

// The work decomposition of Traits T: the function the host's work_shape() calls (shape.cuh).
// A function, not a static member: device code may not odr-use a host variable.
template <class T>
ROPEJIT_HOST_DEVICE constexpr WorkShape rope_shape() {
  return with_norm_scope(make_work_shape(T::kHeadDim, T::kRotaryDim, T::kNumQHeads, T::kNumKvHeads,
                                         T::kInterleaved, T::kCopyV, T::kOutputInplace, T::kHasBias || T::kQkNorm || T::kHadamard,
                                         T::kVec, T::kHeadsPerThread, T::kCooperativeHeads, T::kSpreadTail),
                         T::kAllHeadsSegment, T::kHeadsPerThread, T::kBlockThreads);
}

// inv_freq of pair i for this launch: baked, LongRoPE's long table, or dynamic NTK's run-time
// base as HF computes it. Generic over the rope type's flags so a re-rotation's old parameters
// (rerotate.cuh) take the same path.
template <int kRotaryDim, bool kDynamic, bool kLongrope>
__device__ __forceinline__ float select_inv_freq(int use_dynamic_base, double dynamic_log2_base, int use_long_table,
                                                 const float* inv_freq, const float* inv_freq_long, int pair) {
  if constexpr (kDynamic) {
    if (use_dynamic_base) {
      // HF: float32 pow of the float32 base b'. exp2 in double of the host's log2(b') rounds to
      // the correctly rounded float32 power (what the reference and the generator bake), at a
      // fraction of pow's registers.
      const float exponent = (float)(2 * pair) / (float)kRotaryDim;
      const float power = (float)exp2((double)exponent * dynamic_log2_base);
      return 1.0f / power;
    }
  }
  if constexpr (kLongrope) {
    if (use_long_table) return __ldg(inv_freq_long + pair);
  }
  return __ldg(inv_freq + pair);
}

template <class T>
__device__ __forceinline__ float pair_inv_freq(const KernelParams& p, const float* inv_freq,
                                               const float* inv_freq_long, int pair) {
  return select_inv_freq<T::kRotaryDim, T::kRopeDynamic, T::kRopeLongrope>(
      p.use_dynamic_base, p.dynamic_log2_base, p.use_long_table, inv_freq, inv_freq_long, pair);
}

// s for this launch: LongRoPE's long table may have its own (PhiMoE's long_mscale).
template <class T>
__device__ __forceinline__ float attention_factor(const KernelParams& p) {
  if constexpr (T::kRopeLongrope) return p.use_long_table ? T::kAttentionFactorLong : T::kAttentionFactor;
  else return T::kAttentionFactor;
}

// fp32: HF's float32 product; exact: the product of the same float32 values in double.
template <class T>
__device__ __forceinline__ double pair_angle(i64 position, float inv) {
  if constexpr (T::kAngleExact) return (double)position * (double)inv;
  else return (double)__fmul_rn((float)position, inv);
}

// A position the launch's seq_len does not cover would silently take the wrong table (the host
// backend refuses it before launching; device arrays are not read): NaN angles instead.
template <class T>
__device__ __forceinline__ bool position_covered(const KernelParams& p, const RowRef& ref) {
  if constexpr (T::kRopeDynamic || T::kRopeLongrope) return ref.position < p.seq_len;
  else return true;
}

// sin of a pair's angle as the op rotates: negated for an inverse rotation (op inverse_rope).
template <class T>
__device__ __forceinline__ float oriented_sin(float sin) {
  return T::kInverseRotation ? -sin : sin;
}

// Element i of a cos/sin table row: the runtime's fp32 table, or the caller's cache in its dtype.
template <class T>
__device__ __forceinline__ float table_value(const KernelParams& p, i64 row, int i) {
  if constexpr (T::kCallerCosSin) {
    typedef typename T::CosSinStorage S;
    const typename S::raw* cache = (const typename S::raw*)p.cos_sin_table;
    return to_float(S(), __ldg(cache + row * (i64)T::kRotaryDim + i));
  } else {
    return __ldg((const float*)p.cos_sin_table + row * (i64)T::kRotaryDim + i);
  }
}

// The caller's cache has no row for a position outside [0, rows) and nothing may be computed in
// its place (its scaling is the caller's): NaN, so the token's rotated outputs say so.
__device__ __forceinline__ void no_cos_sin_row(float& cos_out, float& sin_out) {
  cos_out = sin_out = __uint_as_float(0x7fc00000u);
}

// cos and sin (times the attention factor) of one pair of a row: computed, or from a per-pair
// table row (mrope with a table), or the caller's cache row.
template <class T>
__device__ __forceinline__ void pair_cos_sin(const KernelParams& p, const float* inv_freq, const float* inv_freq_long,
                                             const RowRef& ref, int pair, float& cos_out, float& sin_out) {
  const i64 position = pair_position<T>(ref, pair);  // mrope, axes: the pair's own stream
  if constexpr (T::kTableSinCos && (per_pair_positions<T>() || T::kCallerCosSin)) {  // a table row per pair
    if (position >= 0 && position < p.cos_sin_table_rows) {
      cos_out = table_value<T>(p, position, pair);
      sin_out = oriented_sin<T>(table_value<T>(p, position, T::kRotaryDim / 2 + pair));
      return;
    }
  }
  if constexpr (T::kCallerCosSin) {
    no_cos_sin_row(cos_out, sin_out);
  } else {
    const bool covered = position_covered<T>(p, ref);
    const SinCos sc = sincos_reduced(pair_angle<T>(position, pair_inv_freq<T>(p, inv_freq, inv_freq_long, pair)));
    cos_out = covered ? sc.cos * attention_factor<T>(p) : __uint_as_float(0x7fc00000u);
    sin_out = covered ? oriented_sin<T>(sc.sin * attention_factor<T>(p)) : __uint_as_float(0x7fc00000u);
  }
}

template <class T>
__device__ __forceinline__ void pair_angles(const KernelParams& p, const float* inv_freq,
                                            const float* inv_freq_long, const RowRef& ref,
                                            int first_pair,
                                            float (&cos_out)[rope_shape<T>().pairs_per_lane],
                                            float (&sin_out)[rope_shape<T>().pairs_per_lane]) {
  constexpr WorkShape W = rope_shape<T>();
  if constexpr (T::kTableSinCos && !per_pair_positions<T>()) {  // one table row serves every pair
    if (ref.position >= 0 && ref.position < p.cos_sin_table_rows) {  // else computed, as below
#pragma unroll
      for (int i = 0; i < W.pairs_per_lane; ++i) {
        cos_out[i] = table_value<T>(p, ref.position, first_pair + i);
        sin_out[i] = oriented_sin<T>(table_value<T>(p, ref.position, W.half + first_pair + i));
      }
      return;
    }
  }
  if constexpr (T::kCallerCosSin && !per_pair_positions<T>()) {  // no row, and nothing to compute instead
#pragma unroll
    for (int i = 0; i < W.pairs_per_lane; ++i) no_cos_sin_row(cos_out[i], sin_out[i]);
  } else {  // per pair: computed, or (mrope, axes) the row of each pair's stream
#pragma unroll
    for (int i = 0; i < W.pairs_per_lane; ++i)
      pair_cos_sin<T>(p, inv_freq, inv_freq_long, ref, first_pair + i, cos_out[i], sin_out[i]);
  }
}

// How many head groups share the sin/cos of a lane (pair_angles_split), the same lane of each
// needing the same pairs: role slots whose rows start at warp boundaries hold 32 / lanes groups
// of one row in a warp; an all-heads segment (qk_norm_all.cuh) is one row's head_groups x lanes
// threads, each thread one lane slot (no more than 32 lanes a head row); 1 (no split) elsewhere.
template <class T>
ROPEJIT_HOST_DEVICE constexpr int angle_split() {
  constexpr WorkShape W = rope_shape<T>();
  if (T::kTableSinCos || W.lanes >= kWarpLanes || kWarpLanes % W.lanes != 0) return 1;
  int split = 1;
  if (W.row_on_chip) split = kWarpLanes / W.lanes;  // a warp of the row: 32 / lanes groups
  else if (T::kAllHeadsSegment) split = W.head_groups;
  else if (warp_rows(W)) split = kWarpLanes / W.lanes;
  while (split > 1 && W.pairs_per_lane % split != 0) split /= 2;
  return split;
}

// The threads pair_angles_split gathers among: a warp (role slots), or an all-heads row's segment.
template <class T>
ROPEJIT_HOST_DEVICE constexpr int angle_split_width() {
  constexpr WorkShape W = rope_shape<T>();
  return T::kAllHeadsSegment && !W.row_on_chip ? W.head_groups * W.lanes : kWarpLanes;
}

// pair_angles for a lane whose warp (or segment: angle_split_width) holds angle_split groups of
// its row: each group's thread computes one share of the lane's pairs (share `group % split`), and
// every thread gathers all shares from the same lane of each group with shuffles: the same bits,
// a fraction of the sin/cos work. Every thread of `mask` (the warp's, or the segment's) must call
// it; `needed` false leaves cos 1, sin 0 in its share, so it must not depend on the group.
template <class T>
__device__ __forceinline__ void pair_angles_split(const KernelParams& p, const float* inv_freq,
                                                  const float* inv_freq_long, const RowRef& ref, int lane, int group,
                                                  bool needed, unsigned mask,
                                                  float (&cos_out)[rope_shape<T>().pairs_per_lane],
                                                  float (&sin_out)[rope_shape<T>().pairs_per_lane]) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int kSplit = angle_split<T>(), kShare = W.pairs_per_lane / kSplit;
  const int first = lane * W.pairs_per_lane + (group % kSplit) * kShare;
  float c[kShare], s[kShare];
#pragma unroll
  for (int i = 0; i < kShare; ++i) {
    c[i] = 1.0f, s[i] = 0.0f;
    if (needed) pair_cos_sin<T>(p, inv_freq, inv_freq_long, ref, first + i, c[i], s[i]);
  }
#pragma unroll
  for (int j = 0; j < kSplit; ++j)
#pragma unroll
    for (int i = 0; i < kShare; ++i) {
      cos_out[j * kShare + i] = __shfl_sync(mask, c[i], lane + j * W.lanes, angle_split_width<T>());
      sin_out[j * kShare + i] = __shfl_sync(mask, s[i], lane + j * W.lanes, angle_split_width<T>());
    }
}

// (a, b) rotated by the angle whose cos and sin (times the attention factor) are c and s:
// (a c - b s, b c + a s), with the FMAs placed as every lane map places them.
__device__ __forceinline__ void rotate_in_place(float& a, float& b, float c, float s) {
  const float x = a, y = b;
  a = fmaf(x, c, -y * s);
  b = fmaf(y, c, x * s);
}

// Whether pair i of a lane whose pairs start at `first_pair` rotates. Pairs from kRotatedPairs on
// have inv_freq 0 (proportional) and keep their bits, which a rotation by cos 1, sin 0 would not
// (-0 + 0 is +0). One test per lane unless kRotatedPairs falls inside a lane's pairs.
template <class T, int kPairsPerLane>
__device__ __forceinline__ bool pair_rotates(int first_pair, int i) {
  if constexpr (T::kRotatedPairs >= T::kRotaryDim / 2) return true;
  else if constexpr (T::kRotatedPairs % kPairsPerLane == 0) return first_pair < T::kRotatedPairs;
  else return first_pair + i < T::kRotatedPairs;
}

// Rotating lanes whose pairs include one with a frequency: the others need no angles.
template <class T>
ROPEJIT_HOST_DEVICE constexpr int angle_lanes(WorkShape w) {
  return angle_lanes(w, T::kRotatedPairs);
}

// The kernel's sharing (shape.cuh shared_angle_shape, which the static report reads too). A
// function, not a static member, as rope_shape: device code may not odr-use a host variable.
template <class T>
ROPEJIT_HOST_DEVICE constexpr SharedAngleShape shared_angles() {
  return shared_angle_shape(rope_shape<T>(), T::kRotatedPairs, T::kBlockThreads, T::kTableSinCos, T::kAllHeadsSegment);
}

// Storage of one pass: cos then sin, [row - first_row][pair].
template <class T>
struct alignas(16) SharedAngleRows {
  float cos[shared_angles<T>().max_rows][shared_angles<T>().pairs];
  float sin[shared_angles<T>().max_rows][shared_angles<T>().pairs];
};

// Fills `rows` with the cos/sin of rows [first_row, last_row] (those with a token): each thread
// takes (row, pair) units threadIdx.x + k * block threads, so every warp computes a few pairs
// (about rows * pairs / block threads) instead of a lane's pairs per head group. Every thread
// of the block calls it.
template <class T>
__device__ __forceinline__ void compute_shared_angles(const KernelParams& p, const float* inv_freq,
                                                      const float* inv_freq_long, i64 first_row, i64 last_row,
                                                      SharedAngleRows<T>& rows) {
  constexpr SharedAngleShape A = shared_angles<T>();
  const int units = (int)(last_row - first_row + 1) * A.pairs;
  // A loop (the static report weights it by units_per_thread): unrolled, the units' sincos chains
  // interleave and spill at the 64-register cap.
#pragma unroll 1
  for (int k = 0; k < A.units_per_thread; ++k) {
    const int unit = threadIdx.x + k * T::kBlockThreads;
    if (unit >= units) break;
    const int row = unit / A.pairs, pair = unit % A.pairs;
    const RowRef ref = locate_row<T>(p, first_row + row);
    if (has_token<T>(ref))  // a padding slot: no item of it reads angles
      pair_cos_sin<T>(p, inv_freq, inv_freq_long, ref, pair, rows.cos[row][pair], rows.sin[row][pair]);
  }
}

// The lane's cos/sin from the pass's shared rows.
template <class T>
__device__ __forceinline__ void read_shared_angles(const SharedAngleRows<T>& rows, int row, int lane,
                                                   float (&cos_out)[rope_shape<T>().pairs_per_lane],
                                                   float (&sin_out)[rope_shape<T>().pairs_per_lane]) {
  constexpr int kPerLane = rope_shape<T>().pairs_per_lane;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    cos_out[i] = rows.cos[row][lane * kPerLane + i];
    sin_out[i] = rows.sin[row][lane * kPerLane + i];
  }
}

// The rotation's lane map, the one every op's lane takes (rope.cuh process_lane, rotate_slice_lane,
// head_lanes.cuh rotate_lane_vectors): lane `lane` of a rotary slice holds vectors j <
// slice_lane_vectors, vector j at element slice_lane_first(lane) + slice_vector_offset(j) of the
// slice: one interleaved vector of V/2 adjacent pairs, the neox halves d/2 apart, or the whole
// neox slice (lane 0).

/// Vectors a lane of a rotary slice holds: one interleaved, the neox halves, or the whole neox slice.
template <class T>
ROPEJIT_HOST_DEVICE constexpr int slice_lane_vectors() {
  return T::kInterleaved ? 1 : (rope_shape<T>().whole_slice ? T::kRotaryDim / T::kVec : 2);
}

/// The element (from the slice's start) of lane `lane`'s first vector.
template <class T>
__device__ __forceinline__ int slice_lane_first(int lane) {
  return rope_shape<T>().whole_slice ? 0 : lane * T::kVec;
}

/// How far past the lane's first vector its vector j starts: a constant expression, kept apart
/// from slice_lane_first so that it folds into the access's address.
template <class T>
ROPEJIT_HOST_DEVICE constexpr int slice_vector_offset(int j) {
  return T::kInterleaved ? 0 : rope_shape<T>().whole_slice ? j * T::kVec : j * rope_shape<T>().half;
}

/// The element (from the slice's start) of vector j of lane `lane`.
template <class T>
__device__ __forceinline__ int slice_lane_element(int lane, int j) {
  return slice_lane_first<T>(lane) + slice_vector_offset<T>(j);
}

/// Rotates a lane's vectors x[j] (the lane map's, kVectors >= slice_lane_vectors: a QK-norm
/// lane's may hold more after them) by its pairs' cos c and sin s; `first` is
/// slice_lane_first(lane). Pairs without a frequency keep their bits (pair_rotates).
template <class T, int kVectors>
__device__ __forceinline__ void rotate_slice_vectors(int first, float (&x)[kVectors][T::kVec],
                                                     const float (&c)[rope_shape<T>().pairs_per_lane],
                                                     const float (&s)[rope_shape<T>().pairs_per_lane]) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int V = T::kVec;
  static_assert(kVectors >= slice_lane_vectors<T>(), "a lane holds the lane map's vectors");
  if constexpr (T::kInterleaved) {  // one vector holds V/2 adjacent pairs
#pragma unroll
    for (int i = 0; i < V / 2; ++i)
      if (pair_rotates<T, V / 2>(first / 2, i)) rotate_in_place(x[0][2 * i], x[0][2 * i + 1], c[i], s[i]);
  } else if constexpr (W.whole_slice) {  // neox, x[i] and x[i + d/2] of the whole slice
#pragma unroll
    for (int i = 0; i < W.half; ++i)
      if (pair_rotates<T, W.half>(0, i))
        rotate_in_place(x[i / V][i % V], x[(i + W.half) / V][(i + W.half) % V], c[i], s[i]);
  } else {  // neox: the two halves' vectors
#pragma unroll
    for (int i = 0; i < V; ++i)
      if (pair_rotates<T, V>(first, i)) rotate_in_place(x[0][i], x[1][i], c[i], s[i]);
  }
}

/// One lane's pairs of a rotary slice that is the whole of what a lane moves (a cached key's, MLA's
/// k_pe): read with load(element, x[vec]) and written with store(element, x[vec]) in the lane
/// map's order, elements counted from the slice's start.
template <class T, class Load, class Store>
__device__ __forceinline__ void rotate_slice_lane(int lane, const float (&c)[rope_shape<T>().pairs_per_lane],
                                                  const float (&s)[rope_shape<T>().pairs_per_lane], Load load,
                                                  Store store) {
  constexpr int kVectors = slice_lane_vectors<T>();
  float x[kVectors][T::kVec];
#pragma unroll
  for (int j = 0; j < kVectors; ++j) load(slice_lane_element<T>(lane, j), x[j]);
  rotate_slice_vectors<T>(slice_lane_first<T>(lane), x, c, s);
#pragma unroll
  for (int j = 0; j < kVectors; ++j) store(slice_lane_element<T>(lane, j), x[j]);
}

}  // namespace ropejit
