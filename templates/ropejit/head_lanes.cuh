#pragma once
// The lanes of one head working together (WorkShape lanes: an aligned power-of-2 segment of a
// warp, shape.cuh): the warp-cooperative QK-norm, and the per-head FP8 scales of q_out and of
// the paged cache, both reduced by __shfl_xor_sync butterflies whose results do not depend on
// the order (the same bits on the GPU and the host backend). Included by rope.cuh after HeadIo
// and the load/store helpers it uses.

namespace ropejit {

// Vectors any lane of a warp-cooperative QK-norm head holds: a rotating lane's rotated ones
// (one interleaved, two neox, or the whole slice) and, spread, pass-through ones (shape.cuh).
template <class T>
ROPEJIT_HOST_DEVICE constexpr int norm_lane_vectors() {
  return max_lane_vectors(rope_shape<T>());
}

template <class T>
__device__ __forceinline__ LaneVectors lane_vectors(int lane) {
  return lane_vectors_of(rope_shape<T>(), T::kVec, T::kRotaryBegin, T::kPassBegin, lane);
}
template <class T>
__device__ __forceinline__ bool lane_holds(const LaneVectors& lv, int j) {
  return lane_holds_vector(rope_shape<T>(), lv, j);
}
template <class T>
__device__ __forceinline__ int lane_element(const LaneVectors& lv, int j) {
  return lane_vector_element(rope_shape<T>(), lv, j);
}

// Rotates the vectors a QK-norm lane holds (lane_vectors: the rotary slice's lane map of
// angles.cuh, then any spread tail vectors) when it is a rotating lane whose pairs rotate; tail
// lanes keep theirs. `first`: the lane's first element within the rotated slice.
template <class T>
__device__ __forceinline__ void rotate_lane_vectors(int lane, int first,
                                                    float (&x)[norm_lane_vectors<T>()][T::kVec],
                                                    const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                    const float (&sin_v)[rope_shape<T>().pairs_per_lane]) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int V = T::kVec;
  // Whether the lane's pairs rotate, as one test where pair_rotates gives one answer per lane.
  constexpr int kLanePairs = T::kInterleaved ? V / 2 : W.whole_slice ? W.half : V;
  constexpr bool kLaneUniform = T::kRotatedPairs >= W.half || T::kRotatedPairs % kLanePairs == 0;
  const bool lane_rotates = !kLaneUniform || pair_rotates<T, kLanePairs>(T::kInterleaved ? first / 2 : first, 0);
  if (!lane_rotates || !(W.lanes == W.rot_lanes || lane < W.rot_lanes)) return;
  rotate_slice_vectors<T>(first, x, cos_v, sin_v);
}

// Whether every thread of a warp takes each of the heads' shuffles (shape.cuh warp_wide_shuffles).
template <class T>
__device__ __forceinline__ constexpr bool warp_wide_head_shuffles() {
  return warp_wide_shuffles(rope_shape<T>(), T::kPerRoleShuffles);
}

// The shuffle mask of this thread's head: its aligned segment of W.lanes lanes of the warp, or
// the whole warp (a constant: ptxas checks no convergence per shuffle).
template <class T>
__device__ __forceinline__ unsigned head_lanes_mask() {
  constexpr WorkShape W = rope_shape<T>();
  constexpr unsigned kSegment = W.lanes >= kWarpLanes ? 0xffffffffu : (1u << W.lanes) - 1u;
  if constexpr (warp_wide_head_shuffles<T>()) return 0xffffffffu;
  return kSegment << ((threadIdx.x % kWarpLanes) & ~(unsigned)(W.lanes - 1));
}

// The Walsh-Hadamard transform of one q or k head (spec hadamard: Sylvester order, times
// kHadamardScale = fl(1 / sqrt(D)) at the end, as fast_hadamard_transform scales) over its W.lanes
// lanes: each lane runs the butterflies of the low bits of an element's index (within its own
// vectors) in registers, writes its vectors to the head's row in shared memory, the head's lanes
// run the butterflies of the vector index's bits there, a __syncwarp of the head's lanes after
// each step, and each lane reads its own vectors back. Every lane of the head takes it, whatever
// the row (a padding row's zeros stay zeros).
template <class T>
__device__ __forceinline__ void hadamard_lane(int lane, const LaneVectors& lv,
                                              float (&x)[norm_lane_vectors<T>()][T::kVec]) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int V = T::kVec, kVectors = T::kHeadDim / V, kMax = norm_lane_vectors<T>();
  __shared__ float rows[T::kBlockThreads / W.lanes][T::kHeadDim];
  float* row = rows[threadIdx.x / W.lanes];
  const unsigned mask = head_lanes_mask<T>();
#pragma unroll
  for (int j = 0; j < kMax; ++j) {
    if (!lane_holds<T>(lv, j)) continue;
#pragma unroll
    for (int h = 1; h < V; h *= 2)
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (!(i & h)) {
          const float a = x[j][i], b = x[j][i + h];
          x[j][i] = a + b;
          x[j][i + h] = a - b;
        }
    const int element = lane_element<T>(lv, j);
#pragma unroll
    for (int i = 0; i < V; ++i) row[element + i] = x[j][i];
  }
  __syncwarp(mask);
#pragma unroll
  for (int half = 1; half < kVectors; half *= 2) {
    for (int pair = lane; pair < kVectors / 2; pair += W.lanes) {
      float* first = row + ((pair / half) * 2 * half + pair % half) * V;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float a = first[i], b = first[half * V + i];
        first[i] = a + b;
        first[half * V + i] = a - b;
      }
    }
    __syncwarp(mask);
  }
#pragma unroll
  for (int j = 0; j < kMax; ++j) {
    if (!lane_holds<T>(lv, j)) continue;
    const int element = lane_element<T>(lv, j);
#pragma unroll
    for (int i = 0; i < V; ++i) x[j][i] = row[element + i] * T::kHadamardScale;
  }
  __syncwarp(mask);  // every lane has read its vectors before the row takes the next head's
}

// One lane of a warp-cooperative QK-norm head (W.lanes lanes, an aligned power-of-2 segment of a
// warp: shape.cuh): the lane loads its vectors (bias added) and sums their squares in element
// order with fmaf; the head's lanes add their sums in a butterfly of __shfl_xor_sync over offsets
// lanes/2, ..., 1 (a + b and b + a are the same bits, so every lane gets the same total, on the GPU
// and the host backend alike); each lane then normalizes and rotates its own vectors, left in x
// for store_lane_vectors.
// In place is safe: a lane writes only the vectors it read before the reduction. Every lane takes
// the shuffles, whatever its head (a v head's or a padding row's sum is not applied), so a warp's
// threads meet at them (head_lanes_mask).
// kLoadOnly: a copied v head (its role not known when compiling): loaded, with its bias, no more.
// The lane's loads go through `in` as kStep says (rope.cuh LaneStep; fetch: only them, no shuffle).
template <class T, bool kLoadOnly = false, LaneStep kStep = LaneStep::whole>
__device__ __forceinline__ void norm_rotate_lane(const KernelParams& p, const HeadIo<T>& io, int lane,
                                                 const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                 const float (&sin_v)[rope_shape<T>().pairs_per_lane],
                                                 float (&x)[norm_lane_vectors<T>()][T::kVec], LaneWords<T>& in) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int V = T::kVec;
  constexpr int kMax = norm_lane_vectors<T>();
  const LaneVectors lv = lane_vectors<T>(lane);
  const bool loaded = has_source<T>(io);  // padding rows: zeros, stored
  // No copied v: no v heads; a k-only norm (kNormQ false) leaves q heads as they are.
  const bool normed = !kLoadOnly && loaded && (!T::kCopyV || io.role != kRoleV);
  const bool norm_applies = normed && (T::kNormQ || io.role != kRoleQ);
  // Every vector's load first, then their sums: the lane's loads in flight together.
  if constexpr (kStep != LaneStep::finish) {
#pragma unroll
    for (int j = 0; j < kMax; ++j)
      if (lane_holds<T>(lv, j) && loaded) load_words<typename T::Storage, V>(io.src + lane_element<T>(lv, j), in.w[j]);
  }
  if constexpr (kStep == LaneStep::fetch) return;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kMax; ++j) {
    if (lane_holds<T>(lv, j) && loaded) {
      words_to_floats<typename T::Storage, V>(in.w[j], x[j]);
      add_bias<T>(io.bias, lane_element<T>(lv, j), x[j]);
#pragma unroll
      for (int i = 0; i < V; ++i) sum = T::kNormLayer ? sum + x[j][i] : fmaf(x[j][i], x[j][i], sum);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) x[j][i] = 0.0f;
    }
  }
  if constexpr (T::kQkNorm && !kLoadOnly) {  // without a norm (per-head FP8 q scales alone): only the rotation
    const unsigned mask = head_lanes_mask<T>();
#pragma unroll
    for (int offset = W.lanes / 2; offset > 0; offset /= 2) sum = sum + __shfl_xor_sync(mask, sum, offset, W.lanes);
    float mean = 0.0f;
    if constexpr (T::kNormLayer) {  // sum held x: the head's mean, then its centred squares in a second butterfly
      mean = sum / (float)T::kHeadDim;
      sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kMax; ++j) {
        if (lane_holds<T>(lv, j) && loaded) {
#pragma unroll
          for (int i = 0; i < V; ++i) sum = fmaf(x[j][i] - mean, x[j][i] - mean, sum);
        }
      }
#pragma unroll
      for (int offset = W.lanes / 2; offset > 0; offset /= 2) sum = sum + __shfl_xor_sync(mask, sum, offset, W.lanes);
    }
    if (norm_applies) {
      const HeadNorm norm = head_norm_of<T>(p, mean, inv_sqrt_rn(sum / (float)T::kHeadDim + T::kNormEps), io.role);
#pragma unroll
      for (int j = 0; j < kMax; ++j)
        if (lane_holds<T>(lv, j)) apply_norm<T>(norm, lane_element<T>(lv, j), x[j]);
    }
  }
  if (normed) rotate_lane_vectors<T>(lane, lv.first - T::kRotaryBegin, x, cos_v, sin_v);
  if constexpr (T::kHadamard && !kLoadOnly) {
    if (io.role != kRoleV) hadamard_lane<T>(lane, lv, x);  // a head's lanes share its role
  }
}

// The largest finite value of the FP8 type a head of `role` is stored in (q_out's or the cache's).
template <class T>
__device__ __forceinline__ float fp8_max_of(int role) {
  float q_max = 448.0f, cache_max = 448.0f;
  if constexpr (T::kQOutFp8) q_max = T::QOutStorage::kE4M3 ? 448.0f : 57344.0f;
  if constexpr (T::kOutputPagedKv) {  // kCacheFp8 exists only there
    if constexpr (T::kCacheFp8) cache_max = T::CacheStorage::kE4M3 ? 448.0f : 57344.0f;
  }
  return role == kRoleQ ? q_max : cache_max;
}

// The FP8 scale of a group (a head, a token) of amax `amax` stored as `role`: max(amax * fl(1 /
// FP8 max), 1 / (FP8 max * 512)) (a product, not a division: 12 instructions fewer; vLLM's floor
// for an all-zero group). With io.scale_rounding ue8m0, the least power of two >= amax / FP8 max
// (DeepSeek's and vLLM's ue8m0): a correctly rounded quotient is above a power of two exactly when
// the true one is, so the result is exact whatever the rounding (a product could round onto one).
template <class T>
__device__ __forceinline__ float fp8_group_scale(float amax, int role) {
  const float fp8_max = fp8_max_of<T>(role);
  if (T::kIndexerCache && role != kRoleQ) {  // vLLM's indexer_k_quant_and_cache: fl(max(amax, 1e-4) / 448)
    const float scale = __fdiv_rn(fmaxf(amax, 1e-4f), fp8_max);
    return T::kScaleUe8m0 ? pow2_ceil(scale) : scale;
  }
  if constexpr (T::kScaleUe8m0) return pow2_ceil(fmaxf(__fdiv_rn(amax, fp8_max), 1.0f / (fp8_max * 512.0f)));
  return fmaxf(amax * (1.0f / fp8_max), 1.0f / (fp8_max * 512.0f));
}

// An FP8 head with a scale of its own (q_out's per (token, head), the cache's per (slot, kv head)):
// the head's amax over its lanes (max is exact in any order: the same bits on the GPU and the
// host backend), its fp8_group_scale, written by the head's lane 0; the lane's stores then take
// 1 / scale (correctly rounded). Every lane of the head's segment reaches it (the norm's rule: a
// head without a slot skips it whole).
template <class T>
__device__ __forceinline__ void per_head_scale(HeadIo<T>& io, int lane,
                                               const float (&x)[norm_lane_vectors<T>()][T::kVec]) {
  if constexpr (T::kQScalePerHead || T::kCacheScalePerHead) {
    if (io.role == kRoleQ ? !T::kQScalePerHead : !T::kCacheScalePerHead) return;
    constexpr WorkShape W = rope_shape<T>();
    const LaneVectors lv = lane_vectors<T>(lane);
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < norm_lane_vectors<T>(); ++j)
      if (lane_holds<T>(lv, j)) {
#pragma unroll
        for (int i = 0; i < T::kVec; ++i) amax = fmaxf(amax, fabsf(x[j][i]));
      }
    const unsigned mask = head_lanes_mask<T>();
#pragma unroll
    for (int offset = W.lanes / 2; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(mask, amax, offset, W.lanes));
    const float scale = fp8_group_scale<T>(amax, io.role);
    io.store_scale = indexer_divides<T>() && io.role != kRoleQ ? scale : 1.0f / scale;  // rope.cuh store_head
    if (lane == 0 && io.scale_out) *io.scale_out = scale;
  }
}

// Vector j of an NVFP4 k or v head: its 16-value block's amax over the block's lanes (xor
// partners: shape.cuh blocks_in_lane_groups; a max is exact in any order), the block scale
// (nvfp4.cuh nvfp4_block_scale), the e2m1 codes of x times its multiplier; the lane holding the
// block's first element writes the scale's byte. Every lane of the head's segment takes the
// shuffles; a k or v head of a token with no cache slot stores nothing.
template <class T>
__device__ __forceinline__ void store_nvfp4_vector(const HeadIo<T>& io, const LaneVectors& lv, int j,
                                                   const float (&x)[T::kVec]) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int V = T::kVec, kGroup = 16 / V;
  static_assert(blocks_in_lane_groups(W, V, T::kRotaryBegin, T::kPassBegin, 16),
                "NVFP4: a 16-value block must lie in xor partner lanes (config_problem refuses this shape)");
  const bool holds = lane_holds<T>(lv, j);
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) amax = holds ? fmaxf(amax, fabsf(x[i])) : amax;
#pragma unroll
  for (int offset = 1; offset < kGroup; offset *= 2)
    amax = fmaxf(amax, __shfl_xor_sync(head_lanes_mask<T>(), amax, offset, W.lanes));
  if (!holds || !io.dst) return;  // no cache slot: nothing stored
  float multiplier;
  const u32 code = nvfp4_block_scale(amax, io.store_scale, multiplier);
  float scaled[V];
#pragma unroll
  for (int i = 0; i < V; ++i) scaled[i] = x[i] * multiplier;
  const int element = lane_element<T>(lv, j);
  store_e2m1<V>((u8*)io.dst + element / 2, scaled);
  constexpr int kInterleave = T::kVScaleInterleave4 ? 4 : 1;  // V's blocks 4 bytes apart (rope.cuh cache_head)
  if (element % 16 == 0) io.block_scales[element / 16 * (io.role == kRoleV ? kInterleave : 1)] = (u8)code;
}

// Vector j of DeepSeek-V4's k head into its cell (SGLang's fused_store_flashmla_cache, vLLM's V4
// insert): a rope vector as bf16 after the 448 code bytes; a nope vector's 64-value block takes
// its amax over the block's 8 / (vec / 8) lanes (xor partners, shape.cuh blocks_in_lane_groups) of
// the values rounded to bf16 first, the scale 2^e, e = ceil(log2(max(amax, 1e-4) / 448)) (exact),
// codes fp8(x_bf16 * 2^-e); the lane of the block's first element writes e + 127 (the slot's byte
// of that block; the one of element 0 the zero pad byte 7). Every lane of the head takes the
// shuffles; a token with no cache slot stores nothing.
template <class T>
__device__ __forceinline__ void store_deepseek_v4_vector(const HeadIo<T>& io, const LaneVectors& lv, int j,
                                                         const float (&x)[T::kVec]) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int V = T::kVec, kGroup = 64 / V, kNope = T::kHeadDim - T::kRotaryDim;
  static_assert(blocks_in_lane_groups(W, V, T::kRotaryBegin, T::kPassBegin, 64),
                "DeepSeek-V4's cell: a 64-value block must lie in xor partner lanes (config_problem refuses this)");
  const bool holds = lane_holds<T>(lv, j);
  float rounded[V], amax = 0.0f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    rounded[i] = to_float(typename T::Storage(), from_float(typename T::Storage(), x[i]));
    amax = holds ? fmaxf(amax, fabsf(rounded[i])) : amax;
  }
#pragma unroll
  for (int offset = 1; offset < kGroup; offset *= 2)
    amax = fmaxf(amax, __shfl_xor_sync(head_lanes_mask<T>(), amax, offset, W.lanes));
  if (!holds || !io.dst) return;
  const int element = lane_element<T>(lv, j);
  if (element >= kNope) {  // the rotated rope part, bf16 after the codes
    store_vec<typename T::Storage, V>((typename T::Storage::raw*)((u8*)io.dst + kNope) + (element - kNope), x);
    return;
  }
  // 2^e, the least power of two with 448 * 2^e >= the floored amax: from a product, then one
  // exact check each way (no division; a bf16 amax is 448 * 2^k or not within 2^-24 of it, so
  // this is ceil of the correctly rounded quotient, SGLang's cast_to_ue8m0).
  const float floored = fmaxf(amax, 1e-4f);
  float scale = pow2_ceil(floored * (1.0f / 448.0f));
  if (448.0f * scale < floored) scale *= 2.0f;
  if (448.0f * (0.5f * scale) >= floored) scale *= 0.5f;
  const unsigned biased = __float_as_uint(scale) >> 23;  // e + 127
  const float inverse = __uint_as_float((254u - biased) << 23);  // 2^-e, exact
  float scaled[V];
#pragma unroll
  for (int i = 0; i < V; ++i) scaled[i] = rounded[i] * inverse;
  store_vec<typename T::CacheStorage, V, true>((u8*)io.dst + element, scaled);
  if (element % 64 == 0) io.block_scales[element / 64] = (u8)biased;
  if (element == 0) io.block_scales[7] = 0;
}

// Vector j of the lane's vectors to the head's destination (NVFP4 cache heads: store_nvfp4_vector;
// DeepSeek-V4's cell: store_deepseek_v4_vector).
template <class T, bool kCacheHead>
__device__ __forceinline__ void store_lane_vector(const HeadIo<T>& io, const LaneVectors& lv, int j,
                                                  const float (&x)[T::kVec]) {
  if constexpr (T::kOutputPagedKv) {
    if constexpr (T::kCacheNvfp4) {
      if (kCacheHead || io.role != kRoleQ) return store_nvfp4_vector<T>(io, lv, j, x);
    }
    if constexpr (T::kCacheDeepseekV4) {
      if (kCacheHead || io.role != kRoleQ) return store_deepseek_v4_vector<T>(io, lv, j, x);
    }
  }
  // A cache head of a token with no cache slot stores nothing (its lanes still took the shuffles).
  const bool has_dst = !T::kOutputPagedKv || (!kCacheHead && io.role == kRoleQ) || io.dst;
  if (lane_holds<T>(lv, j) && has_dst) store_head<T, kCacheHead>(io, lane_element<T>(lv, j), x);
}

// Stores the vectors norm_rotate_lane left in x to the head's destination. kCacheHead: a k or v
// head of a quantized cache (NVFP4's vectors one a trip of a loop: shape.cuh cache_vector_loop).
template <class T, bool kCacheHead = false>
__device__ __forceinline__ void store_lane_vectors(const HeadIo<T>& io, int lane,
                                                   const float (&x)[norm_lane_vectors<T>()][T::kVec]) {
  constexpr int kMax = norm_lane_vectors<T>();
  const LaneVectors lv = lane_vectors<T>(lane);
  if constexpr (kCacheHead && cache_vector_loop(kMax, nvfp4_cache<T>())) {
    float queue[kMax][T::kVec];  // vector j in queue[0] on trip j: static indices, no local memory
#pragma unroll
    for (int j = 0; j < kMax; ++j)
#pragma unroll
      for (int i = 0; i < T::kVec; ++i) queue[j][i] = x[j][i];
#pragma unroll 1
    for (int j = 0; j < kMax; ++j) {
      store_lane_vector<T, true>(io, lv, j, queue[0]);
#pragma unroll
      for (int k = 0; k + 1 < kMax; ++k)
#pragma unroll
        for (int i = 0; i < T::kVec; ++i) queue[k][i] = queue[k + 1][i];
    }
  } else {
#pragma unroll
    for (int j = 0; j < kMax; ++j) store_lane_vector<T, kCacheHead>(io, lv, j, x[j]);
  }
}

// norm_rotate_lane's kLoadOnly-free form with its loads where it uses them.
template <class T, bool kLoadOnly = false>
__device__ __forceinline__ void norm_rotate_lane(const KernelParams& p, const HeadIo<T>& io, int lane,
                                                 const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                 const float (&sin_v)[rope_shape<T>().pairs_per_lane],
                                                 float (&x)[norm_lane_vectors<T>()][T::kVec]) {
  LaneWords<T> in;
  norm_rotate_lane<T, kLoadOnly, LaneStep::whole>(p, io, lane, cos_v, sin_v, x, in);
}

template <class T, LaneStep kStep = LaneStep::whole>
__device__ __forceinline__ void process_lane_norm(const KernelParams& p, const HeadIo<T>& io, int lane,
                                                  const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                  const float (&sin_v)[rope_shape<T>().pairs_per_lane],
                                                  LaneWords<T>& in) {
  float x[norm_lane_vectors<T>()][T::kVec];  // a k or v head of a token with no cache slot: not stored
  norm_rotate_lane<T, false, kStep>(p, io, lane, cos_v, sin_v, x, in);
  if constexpr (kStep == LaneStep::fetch) return;
  HeadIo<T> scaled = io;
  per_head_scale<T>(scaled, lane, x);
  store_lane_vectors<T>(scaled, lane, x);
}

template <class T>
__device__ __forceinline__ void process_lane_norm(const KernelParams& p, const HeadIo<T>& io, int lane,
                                                  const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                  const float (&sin_v)[rope_shape<T>().pairs_per_lane]) {
  LaneWords<T> in;
  process_lane_norm<T, LaneStep::whole>(p, io, lane, cos_v, sin_v, in);
}

}  // namespace ropejit
