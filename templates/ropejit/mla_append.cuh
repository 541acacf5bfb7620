#pragma once
// Op mla_append (Multi-head Latent Attention's append: DeepSeek-V2/V3/R1, Kimi K2; docs/ops.md
// "MLA latent-cache append"). Per token: q's heads rotated over the spec's rotary slice (q_pe,
// the trailing rotary_dim of [q_nope | q_pe]) in place or into q_out with q_nope, and the latent
// cache row [kv_c | rotated k_pe] (kv_lora_rank + rotary_dim elements) written at the token's
// slot; FP8 caches store fp8(x / k_scale) as the paged append does. The row rides on q's work
// items (shape.cuh mla_work_shape): head group 0's rotating lanes rotate k_pe with the angles
// they computed for q, and each item copies its share of kv_c. With concat_k (prefill's
// concat_mla_k) every item also writes its lane of k_out for each of its heads: a rotating lane
// the rotated k_pe (rotated once per item, kept in registers), a pass-through lane the head's k_nope.
#include "ropejit/rope.cuh"

namespace ropejit {

template <class T>
ROPEJIT_HOST_DEVICE constexpr WorkShape mla_shape() {
  return mla_work_shape(T::kHeadDim, T::kRotaryDim, T::kNumQHeads, T::kInterleaved,
                        T::kQOutputInplace && !T::kConcatK, T::kVec, T::kHeadsPerThread,
                        T::kAbsorbedQ ? T::kKvLoraRank : 0);
}

// A pass-through lane's vector of q_latent (absorbed_q) or k_nope (concat_k): element `e` of
// the head's row of the second input, through `in` as kStep says (rope.cuh LaneStep).
template <class T, LaneStep kStep>
__device__ __forceinline__ void head_in_vector(const KernelParams& p, const RowRef& ref, int head, int e,
                                               u32 (&words)[VecTraits<typename T::Storage, T::kVec>::kWords],
                                               float (&x)[T::kVec]) {
  typedef typename T::Storage::raw raw;
  if constexpr (kStep != LaneStep::finish)
    load_words<typename T::Storage, T::kVec>(
        (const raw*)p.mla_heads_in.ptr + ref.token * p.mla_heads_in.token_stride + head * p.mla_heads_in.head_stride + e,
        words);
  if constexpr (kStep != LaneStep::fetch) words_to_floats<typename T::Storage, T::kVec>(words, x);
}

// The words of one MLA heads-loop trip: q's lane (or q_latent's), and k_nope's.
template <class T>
struct MlaWords {
  LaneWords<T> q;
  u32 k_nope[VecTraits<typename T::Storage, T::kVec>::kWords];  // unused (no registers) unless apart
};

// Where k_nope's words go: apart from q's where a pass-through lane of concat_k loads both (q's
// tail into q_out, k_nope into k_out), else in q's (with q in place a lane loads one of them).
template <class T>
__device__ __forceinline__ u32 (&k_nope_words(MlaWords<T>& in))[VecTraits<typename T::Storage, T::kVec>::kWords] {
  if constexpr (T::kConcatK && !T::kQOutputInplace) return in.k_nope;
  else return in.q.w[0];
}

// absorbed_q: lane `lane` of q head `head`: a rotating lane rotates q_pe into q_out after the
// latent part (q_out's head is kv_lora_rank + d wide), a pass-through lane copies its q_latent vector.
template <class T, LaneStep kStep>
__device__ __forceinline__ void absorbed_q_lane(const KernelParams& p, const RowRef& ref, int head, int lane,
                                                const float (&c)[rope_shape<T>().pairs_per_lane],
                                                const float (&s)[rope_shape<T>().pairs_per_lane], LaneWords<T>& in) {
  constexpr WorkShape W = mla_shape<T>();
  constexpr int V = T::kVec;
  typedef typename T::Storage::raw raw;
  HeadIo<T> io = role_head_io<T>(p, ref, kRoleQ, head);
  if (lane < W.rot_lanes) {
    constexpr int kShift = T::kKvLoraRank - (T::kHeadDim - T::kRotaryDim);  // q_pe's element e lands at L + e - (D - d)
    io.dst = (char*)io.dst + kShift * (int)(T::kQOutFp8 ? 1 : sizeof(raw));
    const HeadNorm no_norm{};
    process_lane<T, kStep>(io, no_norm, lane, c, s, in);
  } else {
    const int e = (lane - W.rot_lanes) * V;
    float x[V];
    head_in_vector<T, kStep>(p, ref, head, e, in.w[0], x);
    if constexpr (kStep != LaneStep::fetch) store_head<T>(io, e, x);  // in q_out's type (FP8: scaled)
  }
}

// A rotating lane's rotated k_pe vectors (1 interleaved, 2 neox, or the whole neox slice) and
// their elements within the rotary slice, in rotate_slice_lane's store order.
template <class T>
struct RotatedKPe {
  static constexpr int kVectors = rope_shape<T>().whole_slice ? T::kRotaryDim / T::kVec : rope_shape<T>().rot_vectors;
  float x[kVectors][T::kVec];
  int element[kVectors];
};

// concat_k: the lane's k_pe vectors rotated once, for every head of the item.
template <class T>
__device__ __forceinline__ void rotate_k_pe_once(const KernelParams& p, const RowRef& ref, int lane,
                                                 const float (&c)[rope_shape<T>().pairs_per_lane],
                                                 const float (&s)[rope_shape<T>().pairs_per_lane],
                                                 RotatedKPe<T>& out) {
  typedef typename T::Storage::raw raw;
  const raw* k_pe = (const raw*)p.in[kRoleK].ptr + ref.token * p.in[kRoleK].token_stride;
  int n = 0;  // a constant at each store once unrolled: the vectors stay in registers
  rotate_slice_lane<T>(
      lane, c, s, [&](int element, float(&x)[T::kVec]) { load_vec<typename T::Storage, T::kVec>(k_pe + element, x); },
      [&](int element, float(&x)[T::kVec]) {
#pragma unroll
        for (int i = 0; i < T::kVec; ++i) out.x[n][i] = x[i];
        out.element[n++] = element;
      });
}

// concat_k: lane `lane` of head `head` of k_out: the rotated k_pe in the rotary slice, the head's
// k_nope vector in the pass-through one (its load through `in` as kStep says).
template <class T, LaneStep kStep>
__device__ __forceinline__ void concat_k_lane(const KernelParams& p, const RowRef& ref, int head, int lane,
                                              const RotatedKPe<T>& k_pe,
                                              u32 (&words)[VecTraits<typename T::Storage, T::kVec>::kWords]) {
  constexpr WorkShape W = mla_shape<T>();
  constexpr int V = T::kVec;
  typedef typename T::Storage::raw raw;
  raw* k_out = (raw*)p.k_concat.ptr + ref.token * p.k_concat.token_stride + head * p.k_concat.head_stride;
  if (lane < W.rot_lanes) {
    if constexpr (kStep != LaneStep::fetch) {
#pragma unroll
      for (int j = 0; j < RotatedKPe<T>::kVectors; ++j)
        store_vec<typename T::Storage, V>(k_out + T::kRotaryBegin + k_pe.element[j], k_pe.x[j]);
    }
  } else {
    const int e = (lane - W.rot_lanes) * V;  // within k_nope
    float x[V];
    head_in_vector<T, kStep>(p, ref, head, e, words, x);
    if constexpr (kStep != LaneStep::fetch) store_vec<typename T::Storage, V>(k_out + T::kPassBegin + e, x);
  }
}

// Lane `lane` of q head `head` in the heads loop: q's rope slice (absorbed: into q_out with its
// q_latent), then with concat_k the head's k_out lane; its loads through `in` as kStep says.
template <class T, LaneStep kStep>
__device__ __forceinline__ void mla_head_lane(const KernelParams& p, const RowRef& ref, int head, int lane,
                                              const float (&c)[rope_shape<T>().pairs_per_lane],
                                              const float (&s)[rope_shape<T>().pairs_per_lane],
                                              const RotatedKPe<T>& k_pe, MlaWords<T>& in) {
  if constexpr (T::kAbsorbedQ) {
    absorbed_q_lane<T, kStep>(p, ref, head, lane, c, s, in.q);
  } else {
    const HeadNorm no_norm{};
    process_lane<T, kStep>(role_head_io<T>(p, ref, kRoleQ, head), no_norm, lane, c, s, in.q);
  }
  if constexpr (T::kConcatK) concat_k_lane<T, kStep>(p, ref, head, lane, k_pe, k_nope_words<T>(in));
}

// k_pe's rotating lane `lane`, rotated with the lane's angles and stored after kv_c in the row.
template <class T>
__device__ __forceinline__ void rotate_k_pe_lane(const typename T::Storage::raw* k_pe, const HeadIo<T>& row, int lane,
                                                 const float (&c)[rope_shape<T>().pairs_per_lane],
                                                 const float (&s)[rope_shape<T>().pairs_per_lane]) {
  rotate_slice_lane<T>(
      lane, c, s, [&](int element, float(&x)[T::kVec]) { load_vec<typename T::Storage, T::kVec>(k_pe + element, x); },
      [&](int element, float(&x)[T::kVec]) { store_head<T, true>(row, T::kKvLoraRank + element, x); });
}

// A token's share of its latent cache row held by work item (group, lane): k_pe's rotating lane
// `lane` for group 0 (with the lane's angles), and kv_c's vectors item, item + items a row, ...;
// nothing for a token without a slot.
template <class T>
__device__ __forceinline__ void latent_share(const KernelParams& p, const RowRef& ref, const WorkItem& at,
                                             const float (&c)[rope_shape<T>().pairs_per_lane],
                                             const float (&s)[rope_shape<T>().pairs_per_lane]) {
  constexpr WorkShape W = mla_shape<T>();
  constexpr int V = T::kVec, kVectors = T::kKvLoraRank / V, kItems = W.head_groups * W.lanes;
  typedef typename T::Storage::raw raw;
  HeadIo<T> row;  // the slot's row, a cache head: stored in the cache's type (FP8: scaled first)
  row.role = kRoleK;
  row.index = 0;
  row.src = nullptr;
  row.bias = nullptr;
  row.store_scale = 1.0f;
  row.dst = cache_head<T>(p, ref, kRoleK, 0, row.store_scale);
  if (!row.dst) return;
  if (at.group == 0 && at.lane < W.rot_lanes) {
    const TensorRef k_pe = p.in[kRoleK];
    rotate_k_pe_lane<T>((const raw*)k_pe.ptr + ref.token * k_pe.token_stride, row, at.lane, c, s);
  }
  const TensorRef kv_c = p.in[kRoleV];  // already normed: copied
  const int first = at.group * W.lanes + at.lane;
#pragma unroll
  for (int k = 0; k < (kVectors + kItems - 1) / kItems; ++k) {
    const int e = (first + k * kItems) * V;
    if (e >= T::kKvLoraRank) break;
    float x[V];
    load_vec<typename T::Storage, V>((const raw*)kv_c.ptr + ref.token * kv_c.token_stride + e, x);
    store_head<T, true>(row, e, x);
  }
}

// fp8_ds_mla's scale of a 128-value tile of amax `amax`, as vLLM's concat_and_cache_ds_mla_kernel
// computes it: max(amax / 448, FLT_MIN), the quotient correctly rounded; with io.scale_rounding
// ue8m0 the least power of two >= that (exact: see fp8_group_scale).
template <class T>
__device__ __forceinline__ float ds_mla_tile_scale(float amax) {
  const float scale = fmaxf(__fdiv_rn(amax, 448.0f), 1.17549435e-38f);
  return T::kScaleUe8m0 ? pow2_ceil(scale) : scale;
}

// A lane's 8 values (`chunk`) of a 128-value tile of kv_c, the tile held by 16 lanes (a warp's
// aligned half): their amax meets in an xor butterfly of width 16 (as vLLM's kernel reduces it),
// the tile's first lane writes its float32 scale, each lane its 8 codes.
template <class T>
__device__ __forceinline__ void ds_mla_chunk(const typename T::Storage::raw* kv_c, u8* row, int chunk) {
  constexpr int V = T::kVec, kPer = 8, kSegment = 16;
  float x[kPer], amax = 0.0f;
#pragma unroll
  for (int j = 0; j < kPer / V; ++j) {
    float v[V];
    load_vec<typename T::Storage, V>(kv_c + chunk * kPer + j * V, v);
#pragma unroll
    for (int i = 0; i < V; ++i) x[j * V + i] = v[i];
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const unsigned mask = 0xffffu << ((threadIdx.x % kWarpLanes) & kSegment);
#pragma unroll
  for (int offset = kSegment / 2; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(mask, amax, offset, kSegment));
  const float scale = ds_mla_tile_scale<T>(amax);
  if (chunk % kSegment == 0) ((float*)(row + T::kKvLoraRank))[chunk / kSegment] = scale;
#pragma unroll
  for (int i = 0; i < kPer; ++i) x[i] = __fdiv_rn(x[i], scale);
  store_vec<typename T::CacheStorage, kPer, true>(row + chunk * kPer, x);
}

// The same tile by one thread: two passes over its 16 chunks (its amax, then its codes).
template <class T>
__device__ __forceinline__ void ds_mla_tile_serial(const typename T::Storage::raw* kv_c, u8* row, int tile) {
  constexpr int V = T::kVec, kTile = 128;
  float amax = 0.0f;
#pragma unroll 4
  for (int j = 0; j < kTile / V; ++j) {
    float x[V];
    load_vec<typename T::Storage, V>(kv_c + tile * kTile + j * V, x);
#pragma unroll
    for (int i = 0; i < V; ++i) amax = fmaxf(amax, fabsf(x[i]));
  }
  const float scale = ds_mla_tile_scale<T>(amax);
  ((float*)(row + T::kKvLoraRank))[tile] = scale;
#pragma unroll 4
  for (int j = 0; j < kTile / V; ++j) {
    float x[V];
    load_vec<typename T::Storage, V>(kv_c + tile * kTile + j * V, x);
#pragma unroll
    for (int i = 0; i < V; ++i) x[i] = __fdiv_rn(x[i], scale);
    store_vec<typename T::CacheStorage, V, true>(row + tile * kTile + j * V, x);
  }
}

// An fp8_ds_mla row's share held by work item (group, lane): group 0's rotating lane `lane`
// rotates k_pe into the row's rope part (the dtype, after the codes and scales); kv_c's chunks of
// 8 values go to items item, item + items a row, ... (16 a tile: when a token's items are a
// multiple of 16, each tile's lanes are an aligned half of a warp), else its tiles one a thread.
// Codes are fp8(x / scale), the quotient correctly rounded: vLLM's, byte for byte. Nothing for a
// token without a slot.
template <class T>
__device__ __forceinline__ void ds_mla_latent_share(const KernelParams& p, const RowRef& ref, const WorkItem& at,
                                                    const float (&c)[rope_shape<T>().pairs_per_lane],
                                                    const float (&s)[rope_shape<T>().pairs_per_lane]) {
  constexpr WorkShape W = mla_shape<T>();
  constexpr int V = T::kVec, kTiles = T::kKvLoraRank / 128, kItems = W.head_groups * W.lanes;
  static_assert(8 % V == 0, "fp8_ds_mla: a lane's 8 latent values are whole vectors");
  typedef typename T::Storage::raw raw;
  float unused_scale = 1.0f;
  u8* row = (u8*)cache_head<T>(p, ref, kRoleK, 0, unused_scale);
  if (!row) return;
  if (at.group == 0 && at.lane < W.rot_lanes) {
    const TensorRef k_pe = p.in[kRoleK];
    raw* rope = (raw*)(row + T::kKvLoraRank + 4 * kTiles);
    rotate_slice_lane<T>(
        at.lane, c, s,
        [&](int element, float(&x)[V]) {
          load_vec<typename T::Storage, V>((const raw*)k_pe.ptr + ref.token * k_pe.token_stride + element, x);
        },
        [&](int element, float(&x)[V]) { store_vec<typename T::Storage, V>(rope + element, x); });
  }
  const raw* kv_c = (const raw*)p.in[kRoleV].ptr + ref.token * p.in[kRoleV].token_stride;
  const int item = at.group * W.lanes + at.lane;
  if constexpr (kItems % 16 == 0) {
    for (int chunk = item; chunk < kTiles * 16; chunk += kItems) ds_mla_chunk<T>(kv_c, row, chunk);
  } else {
    for (int tile = item; tile < kTiles; tile += kItems) ds_mla_tile_serial<T>(kv_c, row, tile);
  }
}

/// The op's kernel: each work item appends its lane of its q heads and its share of the latent row.
template <class T>
__device__ __forceinline__ void mla_append_kernel(const KernelParams& p, const float* inv_freq,
                                                  const float* inv_freq_long) {
  constexpr WorkShape W = mla_shape<T>();
  for_each_row_item<T, GridWalk::thread_stride>(p, W, [&](const WorkItem& at, const RowRef& ref) {
    // q: the thread's heads group + k * head_groups (fewer in a short last group), each lane with
    // the row's angles; with loads ahead the first head's loads go before the angles.
    const int heads = (T::kNumQHeads - at.group + W.head_groups - 1) / W.head_groups;
    const int owned = heads < T::kHeadsPerThread ? heads : T::kHeadsPerThread;
    float c[W.pairs_per_lane], s[W.pairs_per_lane];
    RotatedKPe<T> k_pe;
    MlaWords<T> first;
    if constexpr (T::kLoadsAhead)
      if (owned > 0) mla_head_lane<T, LaneStep::fetch>(p, ref, at.group, at.lane, c, s, k_pe, first);
    if (at.lane < angle_lanes<T>(W)) pair_angles<T>(p, inv_freq, inv_freq_long, ref, at.lane * W.pairs_per_lane, c, s);
    if constexpr (T::kConcatK)
      if (at.lane < W.rot_lanes) rotate_k_pe_once<T>(p, ref, at.lane, c, s, k_pe);
    const auto head_of = [&](int k) { return at.group + k * W.head_groups; };
    heads_trips<T>(
        owned, first,
        [&](int k, MlaWords<T>& in) { mla_head_lane<T, LaneStep::whole>(p, ref, head_of(k), at.lane, c, s, k_pe, in); },
        [&](int k, MlaWords<T>& in) { mla_head_lane<T, LaneStep::fetch>(p, ref, head_of(k), at.lane, c, s, k_pe, in); },
        [&](int k, MlaWords<T>& in) { mla_head_lane<T, LaneStep::finish>(p, ref, head_of(k), at.lane, c, s, k_pe, in); });
    if constexpr (T::kDsMlaCache) ds_mla_latent_share<T>(p, ref, at, c, s);
    else latent_share<T>(p, ref, at, c, s);
  });
}

}  // namespace ropejit
