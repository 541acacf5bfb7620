#pragma once
// The RoPE kernel body (docs/architecture.md §5; the math: docs/rope-math.md §5-6, §10).
// A generated source defines a Traits struct of constexpr values and the baked inv_freq
// tables, then calls rope_kernel<Traits>.
//
// Work decomposition: one "row" is a token (token-major output) or a (sequence, slot) of the
// padded output. Per row, heads [0, Hq) are q, [Hq, Hq+Hkv) are k, then Hkv v heads when v is
// copied. A thread owns one lane of a head row and heads_per_thread heads spaced by the
// head-group count, so sin/cos is computed once and reused across its heads; with several head
// groups a row's sin/cos is computed once per block and shared by all of them (angles.cuh).
// Lanes [0, rot_lanes) rotate pairs; lanes past that copy the pass-through tail [d, D). The
// numbers come from shape.cuh, which the host reads too. A QK-norm's head lanes add their sums
// of squares in warp shuffles (process_lane_norm), or one thread owns whole heads when a head
// needs more than a warp's lanes (WorkShape::whole_heads). A norm over all heads of a token
// (qk_norm.scope "all") is qk_norm_all.cuh's kernel.
#include "ropejit/angles.cuh"
#include "ropejit/numeric.cuh"
#include "ropejit/nvfp4.cuh"
#include "ropejit/params.cuh"
#include "ropejit/rows.cuh"
#include "ropejit/shape.cuh"

namespace ropejit {

template <class T>
__device__ __forceinline__ void add_bias(const void* bias, int element, float (&v)[T::kVec]) {
  if constexpr (T::kHasBias) {
    float b[T::kVec];
    load_vec<typename T::Storage, T::kVec>((const typename T::Storage::raw*)bias + element, b);
#pragma unroll
    for (int i = 0; i < T::kVec; ++i) v[i] += b[i];
  }
}

// The QK-norm of one head row owned whole by one thread (WorkShape::whole_heads):
// 1 / sqrt(mean(x^2) + eps) over its head_dim biased elements, in fp32, summed in element order
// with explicit fmaf (the same bits on the host backend), and its weight vector; a LayerNorm's
// mean too (its variance summed in a second pass over the centred values, as torch does).
// `apply` is false for v heads, padding rows, q heads of a k-only norm and specs without it.
struct HeadNorm {
  float inv_rms = 1.0f;          // 1 / sqrt(mean(x^2) + eps), or a LayerNorm's 1 / sqrt(var + eps)
  float mean = 0.0f;             // LayerNorm: subtracted first
  const void* weight = nullptr;  // [D] in the storage type, or null
  const void* bias = nullptr;    // LayerNorm's [D] bias in the storage type, or null
  bool apply = false;
};

// FP8 q_out with a static scale and a QK-norm of q: 1 / q_scale rides on q's inverse RMS (one
// product a head, every element of a normed head passes through it), so store_head does not scale q again.
template <class T>
ROPEJIT_HOST_DEVICE constexpr bool q_scale_in_norm() {
  return T::kQOutFp8 && T::kNormQ && !T::kQScalePerHead && !T::kQScalePerToken;
}

template <class T>
__device__ __forceinline__ float norm_factor(const KernelParams& p, float inv_rms, int role) {
  if constexpr (q_scale_in_norm<T>()) return role == kRoleQ ? inv_rms * p.q_inv_scale : inv_rms;
  return inv_rms;
}

// Whether a head of `role` is normed: q and k heads, or k alone (an indexer's k_norm).
template <class T>
__device__ __forceinline__ bool role_normed(int role) {
  return T::kQkNorm && role != kRoleV && (T::kNormQ || role != kRoleQ);
}

// A head's norm with its sums done: the factors, and the weight and bias of its role.
template <class T>
__device__ __forceinline__ HeadNorm head_norm_of(const KernelParams& p, float mean, float inv_rms, int role) {
  HeadNorm n;
  n.inv_rms = norm_factor<T>(p, inv_rms, role);
  n.mean = mean;
  n.weight = p.norm_weight[role];
  n.bias = p.norm_bias[role];
  n.apply = true;
  return n;
}

// One pass over a head row's biased vectors in element order: term(v) of each value, summed.
template <class T, class Term>
__device__ __forceinline__ float sum_head(const typename T::Storage::raw* src, const void* bias, Term term) {
  float sum = 0.0f;
#pragma unroll 4
  for (int j = 0; j < T::kHeadDim / T::kVec; ++j) {
    float x[T::kVec];
    load_vec<typename T::Storage, T::kVec>(src + j * T::kVec, x);
    add_bias<T>(bias, j * T::kVec, x);
#pragma unroll
    for (int i = 0; i < T::kVec; ++i) sum = term(x[i], sum);
  }
  return sum;
}

template <class T>
__device__ __forceinline__ HeadNorm head_norm(const KernelParams& p, const typename T::Storage::raw* src,
                                              const void* bias, int role) {
  HeadNorm n;
  if constexpr (T::kQkNorm) {
    if (src && role_normed<T>(role)) {
      float mean = 0.0f;  // a LayerNorm's, from a first pass
      if constexpr (T::kNormLayer)
        mean = sum_head<T>(src, bias, [](float x, float sum) { return sum + x; }) / (float)T::kHeadDim;
      const float sum = sum_head<T>(src, bias, [mean](float x, float sum) {
        const float c = T::kNormLayer ? x - mean : x;  // centred for a LayerNorm's variance
        return fmaf(c, c, sum);
      });
      n = head_norm_of<T>(p, mean, inv_sqrt_rn(sum / (float)T::kHeadDim + T::kNormEps), role);
    }
  }
  return n;
}

// A QK-norm at `element`: (x - mean) * inv_rms (RMSNorm: no mean) times its weight (plus its
// offset), plus a LayerNorm's bias.
template <class T>
__device__ __forceinline__ void apply_norm(const HeadNorm& n, int element, float (&x)[T::kVec]) {
  float w[T::kVec], b[T::kVec];
  if constexpr (T::kNormWeight) {
    load_vec<typename T::Storage, T::kVec>((const typename T::Storage::raw*)n.weight + element, w);
  } else {
#pragma unroll
    for (int i = 0; i < T::kVec; ++i) w[i] = 1.0f;
  }
  if constexpr (T::kNormBias) load_vec<typename T::Storage, T::kVec>((const typename T::Storage::raw*)n.bias + element, b);
#pragma unroll
  for (int i = 0; i < T::kVec; ++i) {
    const float scaled = (T::kNormLayer ? x[i] - n.mean : x[i]) * n.inv_rms;
    // Offset 0 (Qwen3, HF's weight * x): no add, which would also turn a weight of -0 into +0.
    x[i] = scaled * (T::kNormWeight ? (T::kNormWeightOffset != 0.0f ? w[i] + T::kNormWeightOffset : w[i]) : 1.0f);
    if constexpr (T::kNormBias) x[i] += b[i];
  }
}

// How a lane's loads of one head run: with their use (whole), issued alone a step ahead into raw
// words (fetch: no arithmetic, no stores), or used from those words (finish: no loads).
// Config::ahead (kLoadsAhead) splits a head's work so: rope_heads, heads_trips.
enum class LaneStep { whole, fetch, finish };

// Vectors one lane loads of one head: its rotated ones (one interleaved, the neox halves, the
// whole neox slice) or one pass-through vector; a QK-norm lane's (head_lanes.cuh lane_vectors).
template <class T>
ROPEJIT_HOST_DEVICE constexpr int lane_load_vectors() {
  constexpr WorkShape W = rope_shape<T>();
  if (T::kCooperativeHeads) return max_lane_vectors(W);
  return W.whole_slice ? T::kRotaryDim / T::kVec : (T::kInterleaved ? 1 : 2);
}

// The raw words of a lane's loads of one head, in the order the lane reads its vectors.
template <class T>
struct LaneWords {
  u32 w[lane_load_vectors<T>()][VecTraits<typename T::Storage, T::kVec>::kWords];
};

// Vector `element` + kOffset of a head row with its bias added (and normalized, for a QK-norm),
// or zeros for a padding row (src null), through `words` as kStep says. Returns whether it was
// loaded: zeros are stored as they are, never rotated. kOffset is separate so that the constant
// folds into the address.
template <class T, LaneStep kStep = LaneStep::whole, int kOffset = 0>
__device__ __forceinline__ bool load_input(const typename T::Storage::raw* src, const void* bias,
                                           const HeadNorm& norm, int element,
                                           u32 (&words)[VecTraits<typename T::Storage, T::kVec>::kWords],
                                           float (&x)[T::kVec]) {
  if constexpr (T::kOutputPaddedBhsd) {
    if (!src) {
#pragma unroll
      for (int i = 0; i < T::kVec; ++i) x[i] = 0.0f;
      return false;
    }
  }
  if constexpr (kStep != LaneStep::finish) load_words<typename T::Storage, T::kVec>(src + element + kOffset, words);
  if constexpr (kStep == LaneStep::fetch) return true;
  words_to_floats<typename T::Storage, T::kVec>(words, x);
  add_bias<T>(bias, element + kOffset, x);
  if constexpr (T::kQkNorm) {
    if (norm.apply) apply_norm<T>(norm, element + kOffset, x);
  }
  return true;
}

// Where one head of a row is read from and written to.
template <class T>
struct HeadIo {
  int role;                            // kRoleQ, kRoleK or kRoleV
  int index;                           // the head's index among its role's heads
  const typename T::Storage::raw* src; // null for a padding row
  void* dst;                           // Storage elements, or CacheStorage ones for a cache head;
                                       // null for a k/v head of a token with no cache slot
  const void* bias;                    // this head's bias row, or null
  float store_scale;                   // FP8 cache heads, FP8 q: multiplies each value before rounding
  float* scale_out;                    // per-head FP8 q scales: where this (token, head)'s goes, or null
  u8* block_scales;                    // NVFP4 cache heads: the head row's e4m3 block scales
};

// Whether the head row has a source (only a padded output's padding rows have none): a
// constant elsewhere, so no null test of the pointer is compiled.
template <class T>
__device__ __forceinline__ bool has_source(const HeadIo<T>& io) {
  if constexpr (T::kOutputPaddedBhsd) return io.src != nullptr;
  else return true;
}

// True when k and v go to an FP8 or NVFP4 paged cache (the cache traits exist only with one).
template <class T>
__device__ __forceinline__ constexpr bool quantized_cache() {
  if constexpr (T::kOutputPagedKv) return T::kCacheFp8 || T::kCacheNvfp4;
  return false;
}
template <class T>
__device__ __forceinline__ constexpr bool nvfp4_cache() {
  if constexpr (T::kOutputPagedKv) return T::kCacheNvfp4;
  return false;
}

// paged_kv: where head `head` of a k or v row starts in its cache (the host's cache_tensor
// strides: page, offset within it, head; NVFP4 in bytes), its FP8 or NVFP4 global scale, and in
// *block_scales (NVFP4 only) the row's block scales (dense pages of the cache's layout: D / 16
// bytes a head row, the row's offset within its page that of the data's D / 2 bytes / 8); null
// when not cached.
template <class T>
__device__ __forceinline__ void* cache_head(const KernelParams& p, const RowRef& ref, int role, int head,
                                            float& scale, u8** block_scales = nullptr) {
  if (ref.cache_page < 0) return nullptr;
  if constexpr (quantized_cache<T>()) scale = p.cache_inv_scale[role - kRoleK];
  const TensorRef cache = p.out[role];
  const i64 in_page = ref.cache_offset * cache.token_stride + head * cache.head_stride;
  if constexpr (T::kCacheDeepseekV4) {  // the slot's 8 scale bytes after the page's slots (cache.token_stride bytes)
    *block_scales = (u8*)cache.ptr + ref.cache_page * cache.batch_stride + T::kPageSize * cache.token_stride +
                    ref.cache_offset * 8;
  }
  if constexpr (T::kCacheNvfp4) {
    constexpr int kBlocks = T::kHeadDim / 16;
    *block_scales = (u8*)p.cache_scale_out[role - kRoleK] + ref.cache_page * (T::kPageSize * T::kNumKvHeads * kBlocks) +
                   in_page / 8;
    // V's 4-token interleave (hnd): token t's row starts at (t / 4) * 4 * kBlocks + t % 4, not t * kBlocks.
    if (T::kVScaleInterleave4 && role == kRoleV) *block_scales += (ref.cache_offset & 3) * (1 - kBlocks);
  }
  return (typename T::CacheStorage::raw*)cache.ptr + ref.cache_page * cache.batch_stride + in_page;
}

// Head `head_in_role` of role `role`: a constant role folds every role test that follows.
// Without kCacheDst a k/v head's dst is not its cache's: for a caller that does not store it.
template <class T, bool kCacheDst = true>
__device__ __forceinline__ HeadIo<T> role_head_io(const KernelParams& p, const RowRef& ref, int role, int head_in_role) {
  typedef typename T::Storage::raw raw;
  HeadIo<T> io;
  io.role = role;
  io.index = head_in_role;
  const TensorRef in = p.in[role], out = p.out[role];
  io.dst = (raw*)out.ptr + ref.out_batch * out.batch_stride + ref.out_row * out.token_stride +
           head_in_role * out.head_stride;
  io.store_scale = 1.0f;
  io.scale_out = nullptr;
  io.block_scales = nullptr;
  if constexpr (T::kQOutFp8) {  // q_out of one-byte FP8 codes: the same element offsets, in bytes
    if (role == kRoleQ) {
      io.dst = (u8*)out.ptr + ref.out_batch * out.batch_stride + ref.out_row * out.token_stride +
               head_in_role * out.head_stride;
      io.store_scale = p.q_inv_scale;
      if (T::kQScalePerHead && has_token<T>(ref)) io.scale_out = p.q_scale_out + ref.token * T::kNumQHeads + head_in_role;
    }
  }
  if constexpr (T::kOutputPagedKv && kCacheDst) {
    if (role != kRoleQ) io.dst = cache_head<T>(p, ref, role, head_in_role, io.store_scale, &io.block_scales);
    if (T::kIndexerCache && role != kRoleQ && ref.cache_page >= 0)  // after the page's [page_size, D] codes
      io.scale_out = (float*)((u8*)p.out[kRoleK].ptr + ref.cache_page * p.out[kRoleK].batch_stride +
                              T::kPageSize * T::kHeadDim) + ref.cache_offset;
    else if (T::kCacheScalePerHead && role != kRoleQ && ref.cache_page >= 0)  // [slots, Hkv], slot-major
      io.scale_out = p.cache_scale_out[role - kRoleK] +
                     (ref.cache_page * T::kPageSize + ref.cache_offset) * T::kNumKvHeads + head_in_role;
  }
  io.src = has_token<T>(ref) ? (const raw*)in.ptr + ref.token * in.token_stride + head_in_role * in.head_stride
                             : nullptr;
  io.bias = nullptr;
  if constexpr (T::kHasBias) io.bias = (const raw*)p.bias[role] + head_in_role * T::kHeadDim;
  return io;
}

// Head `head` of a row: q heads first, then k, then copied v.
template <class T>
__device__ __forceinline__ HeadIo<T> head_io(const KernelParams& p, const RowRef& ref, int head) {
  constexpr WorkShape W = rope_shape<T>();
  const int role = head < T::kNumQHeads ? kRoleQ : (head < W.rot_heads ? kRoleK : kRoleV);
  return role_head_io<T>(p, ref, role, head - (role == kRoleQ ? 0 : role == kRoleK ? T::kNumQHeads : W.rot_heads));
}

// An indexer K cache's codes divide by the scale (vLLM's x / scale); a power-of-two (ue8m0) scale's
// exact reciprocal gives the same codes from a product.
template <class T>
ROPEJIT_HOST_DEVICE constexpr bool indexer_divides() {
  return T::kIndexerCache && !T::kScaleUe8m0;
}

// Stores kVec values at element `element` of a head's destination: in the storage type, or in
// the cache's or an FP8 q_out's (scaled first, then rounded with saturation).
// kCacheHead: the caller knows io is a cache head (its role is no constant there).
template <class T, bool kCacheHead = false>
__device__ __forceinline__ void store_head(const HeadIo<T>& io, int element, const float (&x)[T::kVec]) {
  if constexpr (T::kQOutFp8) {  // FP8 q_out: fp8(x * (1 / q_scale)), as a cache stores
    if (!kCacheHead && io.role == kRoleQ) {
      float scaled[T::kVec];
#pragma unroll
      for (int i = 0; i < T::kVec; ++i) scaled[i] = q_scale_in_norm<T>() ? x[i] : x[i] * io.store_scale;
      store_vec<typename T::QOutStorage, T::kVec, true>((typename T::QOutStorage::raw*)io.dst + element, scaled);
      return;
    }
  }
  if constexpr (T::kOutputPagedKv) {
    if constexpr (T::kCacheFp8) {
      if (kCacheHead || io.role != kRoleQ) {
        float scaled[T::kVec];
#pragma unroll
        for (int i = 0; i < T::kVec; ++i)  // an indexer's codes: x / scale, as vLLM's; else x * (1 / scale)
          scaled[i] = indexer_divides<T>() ? __fdiv_rn(x[i], io.store_scale) : x[i] * io.store_scale;
        store_vec<typename T::CacheStorage, T::kVec, true>((typename T::CacheStorage::raw*)io.dst + element, scaled);
        return;
      }
    }
  }
  store_vec<typename T::Storage, T::kVec>((typename T::Storage::raw*)io.dst + element, x);
}

// One lane's vectors of one head: loaded (bias added, normalized), rotated with the lane's
// angles, stored. Lanes [0, rot_lanes) rotate pairs, the others copy the tail [d, D). Its loads
// go through `in` as kStep says (fetch: only them; finish: the rest).
template <class T, LaneStep kStep = LaneStep::whole>
__device__ __forceinline__ void process_lane(const HeadIo<T>& io, const HeadNorm& norm, int lane,
                                             const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                             const float (&sin_v)[rope_shape<T>().pairs_per_lane], LaneWords<T>& in) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int V = T::kVec;
  constexpr bool kFetch = kStep == LaneStep::fetch;
  const auto* src = io.src;
  if constexpr (T::kOutputPagedKv) {
    // A k or v head of a token with no cache slot. Leaving early is safe here, as this path has
    // no shuffle; cooperative heads instead run through and skip the store (store_lane_vector).
    if (!io.dst) return;
  }
  // A copied v head takes the same lane-to-vector map as q and k, unrotated: the rotating
  // lanes cover [0, d) and the tail lanes [d, D) whenever the tail changes (in place
  // without a bias or norm, an untouched tail is already the copy).
  const bool rotate = !T::kCopyV || io.role != kRoleV;
  if constexpr (W.tail_lanes > 0) {
    if (lane >= W.rot_lanes) {  // pass-through tail element vector
      if constexpr (T::kOutputPagedKv) {
        // The cache takes whole k and v heads; q in place keeps an unchanged tail where it is.
        if constexpr (T::kQOutputInplace && !(T::kHasBias || T::kQkNorm || T::kHadamard)) {
          if (io.role == kRoleQ) return;
        }
      }
      const int e = T::kPassBegin + (lane - W.rot_lanes) * V;
      float x[V];
      load_input<T, kStep>(src, io.bias, norm, e, in.w[0], x);
      if constexpr (!kFetch) store_head<T>(io, e, x);
      return;
    }
  }
  // The rotary slice's lane map (angles.cuh): the lane's vectors loaded, rotated, stored.
  constexpr int kVectors = slice_lane_vectors<T>();
  const int r = slice_lane_first<T>(lane);  // the lane's first element within the rotated slice
  const int e = T::kRotaryBegin + r;        // ... within the head
  float x[kVectors][V];
  bool loaded = true;
  if constexpr (!T::kInterleaved && !W.whole_slice) {  // the neox halves: y's offset a constant
    loaded = load_input<T, kStep>(src, io.bias, norm, e, in.w[0], x[0]);
    if (loaded) load_input<T, kStep, slice_vector_offset<T>(1)>(src, io.bias, norm, e, in.w[1], x[1]);
  } else {
#pragma unroll
    for (int j = 0; j < kVectors; ++j)
      loaded = load_input<T, kStep>(src, io.bias, norm, e + slice_vector_offset<T>(j), in.w[j], x[j]);
  }
  if constexpr (kFetch) return;
  if (loaded) {
    if (rotate) rotate_slice_vectors<T>(r, x, cos_v, sin_v);
  } else {  // a padding row: zeros (the neox y is not loaded)
#pragma unroll
    for (int j = 1; j < kVectors; ++j)
#pragma unroll
      for (int i = 0; i < V; ++i) x[j][i] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kVectors; ++j) store_head<T>(io, e + slice_vector_offset<T>(j), x[j]);
}

// process_lane with its loads where it uses them.
template <class T>
__device__ __forceinline__ void process_lane(const HeadIo<T>& io, const HeadNorm& norm, int lane,
                                             const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                             const float (&sin_v)[rope_shape<T>().pairs_per_lane]) {
  LaneWords<T> in;
  process_lane<T, LaneStep::whole>(io, norm, lane, cos_v, sin_v, in);
}

}  // namespace ropejit

#include "ropejit/head_lanes.cuh"
#include "ropejit/heads_loop.cuh"

namespace ropejit {

// The block-shared angles' kernel (angles.cuh SharedAngleRows): every thread of a block takes
// every pass's block part (its barriers); a thread past the last item leaves after it.
template <class T>
__device__ __forceinline__ void rope_kernel_shared_angles(const KernelParams& p, const float* inv_freq,
                                                          const float* inv_freq_long) {
  constexpr SharedAngleShape A = shared_angles<T>();
  constexpr WorkShape W = rope_shape<T>();
  __shared__ SharedAngleRows<T> angles;
  const i64 items = work_items(W, launch_rows<T>(p));
  bool first_pass = true;
  i64 first_row;  // the pass's first row
  WorkItem at;
  RowRef ref;
  LaneWords<T> first;
  // The block's part: the pass's rows' angles (with loads ahead the thread's item's row and its
  // first head's loads before them).
  auto block_part = [&](i64 base) {
    if (!first_pass) __syncthreads();  // the last pass's readers are done with `angles`
    first_pass = false;
    first_row = base / A.items_per_row;
    const i64 end_item = base + T::kBlockThreads < items ? base + T::kBlockThreads : items;
    const i64 item = base + threadIdx.x;
    if (T::kLoadsAhead && item < items) {
      at = decode_item(W, item);
      ref = locate_row<T>(p, at.row);
      fetch_first_head<T>(p, ref, at.group, at.lane, first);
    }
    compute_shared_angles<T>(p, inv_freq, inv_freq_long, first_row, (end_item - 1) / A.items_per_row, angles);
    __syncthreads();
  };
  // The item's part: its heads with the shared angles (past the end the thread has left, so a
  // warp's live threads meet at whole-warp shuffles: shape.cuh warp_wide_shuffles).
  auto item_part = [&](i64 item) {
    if constexpr (!T::kLoadsAhead) {
      at = decode_item(W, item);
      ref = locate_row<T>(p, at.row);
    }
    float unused[W.pairs_per_lane];
    const bool angles_needed = at.lane < angle_lanes<T>(W) && has_token<T>(ref);
    rope_heads<T>(p, ref, at.group, at.lane, unused, unused, angles_needed ? &angles : nullptr, (int)(at.row - first_row),
                  first);
  };
  for_each_block_pass_then_item<T::kBlockThreads>(items, block_part, item_part);
}

// One work item of rope_head_kernel: one lane of a head group of a row. Neighbouring threads
// take neighbouring vectors of one head row (coalesced); a thread's heads are group + k * head_groups.
template <class T>
__device__ __forceinline__ void rope_head_item(const KernelParams& p, const float* inv_freq,
                                               const float* inv_freq_long, const WorkItem& at, const RowRef& ref) {
  constexpr WorkShape W = rope_shape<T>();
  const int group = at.group;
  LaneWords<T> first;  // with loads ahead: the first head's, issued before the angles
  if constexpr (!W.whole_heads) fetch_first_head<T>(p, ref, group, at.lane, first);
  float cos_v[W.pairs_per_lane], sin_v[W.pairs_per_lane];
  const bool angles_needed = group < W.rot_heads && has_token<T>(ref);

  if constexpr (W.whole_heads) {
    // A QK-norm head wider than a warp: one thread owns its heads whole (W.lanes == 1), so each
    // head's norm reads the whole row before any of its vectors is written.
    // Unrolled: the per-head norms must stay in registers (a dynamic index would put them
    // in local memory).
    HeadNorm norms[T::kHeadsPerThread];
#pragma unroll
    for (int k = 0; k < T::kHeadsPerThread; ++k) {
      int head;
      if (!owned_head<T>(group, k, head)) break;
      const HeadIo<T> io = head_io<T>(p, ref, head);
      norms[k] = head_norm<T>(p, io.dst ? io.src : nullptr, io.bias, io.role);  // no slot: no norm
    }
#pragma unroll 1
    for (int lane = 0; lane < W.rot_lanes + W.tail_lanes; ++lane) {
      if (lane < angle_lanes<T>(W) && angles_needed)
        pair_angles<T>(p, inv_freq, inv_freq_long, ref, lane * W.pairs_per_lane, cos_v, sin_v);
#pragma unroll
      for (int k = 0; k < T::kHeadsPerThread; ++k) {
        int head;
        if (!owned_head<T>(group, k, head)) break;
        process_lane<T>(head_io<T>(p, ref, head), norms[k], lane, cos_v, sin_v);
      }
    }
  } else {
    if constexpr (angle_split<T>() > 1) {  // the whole warp shuffles: no thread skips it
      pair_angles_split<T>(p, inv_freq, inv_freq_long, ref, at.lane, group,
                           at.lane < angle_lanes<T>(W) && has_token<T>(ref), 0xffffffffu, cos_v, sin_v);
    } else if (at.lane < angle_lanes<T>(W) && angles_needed) {
      pair_angles<T>(p, inv_freq, inv_freq_long, ref, at.lane * W.pairs_per_lane, cos_v, sin_v);
    }
    rope_heads<T>(p, ref, group, at.lane, cos_v, sin_v, nullptr, 0, first);
  }
}

// Every head on its own: no norm, or a norm per head.
template <class T>
__device__ __forceinline__ void rope_head_kernel(const KernelParams& p, const float* inv_freq,
                                                 const float* inv_freq_long) {
  if constexpr (shared_angles<T>().enabled) {
    rope_kernel_shared_angles<T>(p, inv_freq, inv_freq_long);
    return;
  }
  // Whole-warp shuffles (shape.cuh warp_wide_shuffles) in block-uniform passes: no divergent
  // fallback per shuffle (qwen3-8b-paged-fp8: 161 SASS instructions fewer on sm_80).
  for_each_row_item<T>(p, rope_shape<T>(), [&](const WorkItem& at, const RowRef& ref) {
    rope_head_item<T>(p, inv_freq, inv_freq_long, at, ref);
  });
}

}  // namespace ropejit

#include "ropejit/qk_norm_all.cuh"

namespace ropejit {

template <class T>
__device__ __forceinline__ void rope_kernel(const KernelParams& p, const float* inv_freq,
                                            const float* inv_freq_long) {
  if constexpr (T::kAllHeadsSegment) rope_all_heads_norm_kernel<T>(p, inv_freq, inv_freq_long);
  else rope_head_kernel<T>(p, inv_freq, inv_freq_long);
}

}  // namespace ropejit
