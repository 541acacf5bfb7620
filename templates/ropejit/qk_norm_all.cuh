#pragma once
// The all-heads kernel: a QK-norm of scope "all" (OLMo 2 and 3, MiniMax-M2: one RMSNorm over a
// token's Hq·D q values and one over its Hkv·D k values, after the bias, then the rotation; v
// heads copied as without a norm) and per-token FP8 q scales (io.q_scale per_token: the amax of
// a token's final q values), either or both. Included by rope.cuh, whose rope_kernel calls it.
//
// A row's work items are one aligned power-of-2 segment of a warp (shape.cuh
// with_norm_scope): head_groups x lane slots. A thread owns the heads group + k·head_groups
// and the lanes slot + j·lanes of each (lane_vectors: the same vectors as a per-head norm's lane).
//  1. It sums the squares of its q vectors and of its k vectors (bias added) in a fixed order:
//     per (lane, head) over vector then element with fmaf, those sums added lane, then head.
//  2. The segment adds the two sums in a __shfl_xor_sync butterfly over offsets segment/2, ..., 1
//     (a + b and b + a are the same bits): every thread gets the same totals, on the GPU and on
//     the host backend alike.
//  3. Per lane (its angles computed once; the row's head groups each compute a share of a lane's
//     pairs and gather the rest by shuffles, angles.cuh angle_split), per head: the vectors are
//     read again, biased, normalized with their role's 1 / rms and the weight at index·D +
//     element, rotated, stored
//     (per-token q scales: first a pass over the q heads for their amax, reduced like the sums).
// Reading twice keeps the registers flat for any head count; the second read is the thread's own
// bytes of a moment before (L1/L2), so DRAM traffic is unchanged. In place is safe: a thread
// writes only vectors it read itself, after both reads.

namespace ropejit {

// The owned head with index k of group `group`, false past the row's heads.
template <class T>
__device__ __forceinline__ bool all_heads_owned(int group, int k, int& head) {
  constexpr WorkShape W = rope_shape<T>();
  head = group + k * W.head_groups;
  return head < W.heads;
}

// The lane's vectors of one head row with the bias added; zeros for a padding row (src null).
template <class T>
__device__ __forceinline__ void load_lane_vectors(const HeadIo<T>& io, const LaneVectors& lv,
                                                  float (&x)[norm_lane_vectors<T>()][T::kVec]) {
#pragma unroll
  for (int j = 0; j < norm_lane_vectors<T>(); ++j) {
    if (lane_holds<T>(lv, j) && has_source<T>(io)) {
      load_vec<typename T::Storage, T::kVec>(io.src + lane_element<T>(lv, j), x[j]);
      add_bias<T>(io.bias, lane_element<T>(lv, j), x[j]);
    } else {
#pragma unroll
      for (int i = 0; i < T::kVec; ++i) x[j][i] = 0.0f;
    }
  }
}

// 1 / sqrt(mean(x^2) + eps) of a role whose `elements` values have squares summing to `sum`.
template <class T>
__device__ __forceinline__ float all_heads_inv_rms(float sum, int elements) {
  return inv_sqrt_rn(sum / (float)elements + T::kNormEps);
}

// The final float32 values of one lane of one head: biased, normalized with its role's 1 / rms
// (an all-heads norm) and the weight at index·D + element, rotated; v heads and padding rows
// (zeros) as loaded.
template <class T>
__device__ __forceinline__ void all_heads_lane_values(const KernelParams& p, const HeadIo<T>& io, const LaneVectors& lv,
                                                      int lane, float inv_rms_q, float inv_rms_k,
                                                      const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                      const float (&sin_v)[rope_shape<T>().pairs_per_lane],
                                                      float (&x)[norm_lane_vectors<T>()][T::kVec]) {
  typedef typename T::Storage::raw raw;
  load_lane_vectors<T>(io, lv, x);
  if (!has_source<T>(io) || io.role == kRoleV) return;  // padding rows stay zeros; v is copied
  if constexpr (T::kQkNorm) {
    // The head's slice of its role's [heads·D] weight.
    HeadNorm norm;
    norm.weight = T::kNormWeight ? (const raw*)p.norm_weight[io.role] + io.index * T::kHeadDim : nullptr;
    norm.inv_rms = norm_factor<T>(p, io.role == kRoleQ ? inv_rms_q : inv_rms_k, io.role);
#pragma unroll
    for (int j = 0; j < norm_lane_vectors<T>(); ++j)
      if (lane_holds<T>(lv, j)) apply_norm<T>(norm, lane_element<T>(lv, j), x[j]);
  }
  rotate_lane_vectors<T>(lane, lv.first - T::kRotaryBegin, x, cos_v, sin_v);
}

// Calls body(step, lane, lv, head) for each lane slot the thread walks (lane steps past the head
// row's lanes hold nothing) and, in order, each of its heads below head_end.
template <class T, class Body>
__device__ __forceinline__ void for_each_lane_head(const WorkItem& at, int head_end, Body&& body) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int kHeadLanes = W.rot_lanes + W.tail_lanes;
  constexpr int kLaneSteps = (kHeadLanes + W.lanes - 1) / W.lanes;
#pragma unroll
  for (int step = 0; step < kLaneSteps; ++step) {
    const int lane = at.lane + step * W.lanes;
    if (lane >= kHeadLanes) break;
    const LaneVectors lv = lane_vectors<T>(lane);
#pragma unroll 1
    for (int k = 0;; ++k) {
      int head;
      if (!all_heads_owned<T>(at.group, k, head) || head >= head_end) break;
      body(step, lane, lv, head);
    }
  }
}

// One work item of the all-heads kernel: one lane slot of a head group of a row. Every thread
// takes every shuffle below (no row skips one), so each names the whole warp, a constant (ptxas
// checks no convergence per shuffle), with the row's segment as its width; at the grid's end a
// warp's rows leave with their whole segments (shape.cuh warp_wide_shuffles).
template <class T>
__device__ __forceinline__ void all_heads_norm_item(const KernelParams& p, const float* inv_freq,
                                                    const float* inv_freq_long, const WorkItem& at,
                                                    const RowRef& ref) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int kSegment = W.head_groups * W.lanes;  // a row's threads: a power of 2 <= 32
  constexpr int kHeadLanes = W.rot_lanes + W.tail_lanes;
  // Lanes a thread walks: one unless a head row has more than 32 (no loop then).
  constexpr int kLaneSteps = (kHeadLanes + W.lanes - 1) / W.lanes;
  constexpr int kMax = norm_lane_vectors<T>();
  constexpr int kPairs = W.pairs_per_lane;
  constexpr unsigned mask = 0xffffffffu;
  float inv_rms_q = 1.0f, inv_rms_k = 1.0f;
  if constexpr (T::kQkNorm) {
    float sum_q = 0.0f, sum_k = 0.0f;  // two scalars: an array indexed by role would live in local memory
#pragma unroll
    for (int step = 0; step < kLaneSteps; ++step) {
      const int lane = at.lane + step * W.lanes;
      const LaneVectors lv = lane_vectors<T>(lane);  // no vector past the row's lanes
#pragma unroll 1
      for (int k = 0;; ++k) {
        int head;
        if (!all_heads_owned<T>(at.group, k, head) || head >= W.rot_heads) break;  // v: no norm
        const HeadIo<T> io = head_io<T>(p, ref, head);
        float x[kMax][T::kVec];
        load_lane_vectors<T>(io, lv, x);
        float head_sum = 0.0f;  // this lane of this head, then added to its role's
#pragma unroll
        for (int j = 0; j < kMax; ++j)
#pragma unroll
          for (int i = 0; i < T::kVec; ++i) head_sum = fmaf(x[j][i], x[j][i], head_sum);
        if (io.role == kRoleQ) sum_q += head_sum;
        else sum_k += head_sum;
      }
    }
#pragma unroll
    for (int offset = kSegment / 2; offset > 0; offset /= 2) {
      sum_q = sum_q + __shfl_xor_sync(mask, sum_q, offset, kSegment);
      sum_k = sum_k + __shfl_xor_sync(mask, sum_k, offset, kSegment);
    }
    inv_rms_q = all_heads_inv_rms<T>(sum_q, T::kNumQHeads * T::kHeadDim);
    inv_rms_k = all_heads_inv_rms<T>(sum_k, T::kNumKvHeads * T::kHeadDim);
  }

  // The lanes' angles, once for both passes below; with head groups sharing a lane's pairs
  // (one lane step), each computes a share and the segment gathers them (angles.cuh).
  float cos_v[kLaneSteps][kPairs], sin_v[kLaneSteps][kPairs];
  if constexpr (angle_split<T>() > 1) {
    static_assert(kLaneSteps == 1, "a split lane's angles are those of one lane slot");
    pair_angles_split<T>(p, inv_freq, inv_freq_long, ref, at.lane, at.group,
                         at.lane < kHeadLanes && at.lane < angle_lanes<T>(W) && has_token<T>(ref), mask, cos_v[0],
                         sin_v[0]);
  } else {
    const bool angles_needed = at.group < W.rot_heads && has_token<T>(ref);
#pragma unroll
    for (int step = 0; step < kLaneSteps; ++step) {
      const int lane = at.lane + step * W.lanes;
#pragma unroll
      for (int i = 0; i < kPairs; ++i) cos_v[step][i] = 1.0f, sin_v[step][i] = 0.0f;
      if (lane < kHeadLanes && lane < angle_lanes<T>(W) && angles_needed)
        pair_angles<T>(p, inv_freq, inv_freq_long, ref, lane * kPairs, cos_v[step], sin_v[step]);
    }
  }

  // Per-token FP8 q scales: the amax of the token's final q values over the segment (a maximum
  // is exact in any order: the same bits on the GPU and the host backend), its fp8_group_scale,
  // written by the row's first thread. The values are computed again below (registers stay
  // flat for any head count; the second read is this thread's bytes of a moment before).
  float q_store_scale = 1.0f;
  if constexpr (T::kQScalePerToken) {
    float amax = 0.0f;
    for_each_lane_head<T>(at, T::kNumQHeads, [&](int step, int lane, const LaneVectors& lv, int head) {
      float x[kMax][T::kVec];
      all_heads_lane_values<T>(p, head_io<T>(p, ref, head), lv, lane, inv_rms_q, inv_rms_k, cos_v[step], sin_v[step],
                               x);
#pragma unroll
      for (int j = 0; j < kMax; ++j)
#pragma unroll
        for (int i = 0; i < T::kVec; ++i) amax = fmaxf(amax, fabsf(x[j][i]));
    });
#pragma unroll
    for (int offset = kSegment / 2; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(mask, amax, offset, kSegment));
    const float scale = fp8_group_scale<T>(amax, kRoleQ);
    q_store_scale = 1.0f / scale;
    if (at.group == 0 && at.lane == 0 && has_token<T>(ref)) p.q_scale_out[ref.token] = scale;
  }

  for_each_lane_head<T>(at, W.heads, [&](int step, int lane, const LaneVectors& lv, int head) {
    HeadIo<T> io = head_io<T>(p, ref, head);
    if constexpr (T::kOutputPagedKv) {
      if (!io.dst) return;  // a k or v head of a token with no cache slot
    }
    if (T::kQScalePerToken && io.role == kRoleQ) io.store_scale = q_store_scale;
    float x[kMax][T::kVec];
    all_heads_lane_values<T>(p, io, lv, lane, inv_rms_q, inv_rms_k, cos_v[step], sin_v[step], x);
#pragma unroll
    for (int j = 0; j < kMax; ++j)
      if (lane_holds<T>(lv, j)) store_head<T>(io, lane_element<T>(lv, j), x[j]);
  });
}

// A row kept on chip (WorkShape::row_on_chip): the row's warps' sums of one value per role (q's
// and k's sums of squares, or q's amax) in shared memory, added in warp order by every thread of
// the row: the same bits on the GPU and the host backend. kMax: a maximum instead of a sum.
template <class T, bool kMax>
__device__ __forceinline__ void row_totals(float (&slots)[T::kBlockThreads / kWarpLanes][2], float& a, float& b) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int kRowWarps = W.head_groups * W.lanes / kWarpLanes;
#pragma unroll
  for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
    const float a_other = __shfl_xor_sync(0xffffffffu, a, offset), b_other = __shfl_xor_sync(0xffffffffu, b, offset);
    a = kMax ? fmaxf(a, a_other) : a + a_other;
    b = kMax ? fmaxf(b, b_other) : b + b_other;
  }
  const int warp = threadIdx.x / kWarpLanes, first = warp - warp % kRowWarps;
  if (threadIdx.x % kWarpLanes == 0) slots[warp][0] = a, slots[warp][1] = b;
  __syncthreads();
  a = slots[first][0], b = slots[first][1];
#pragma unroll
  for (int w = 1; w < kRowWarps; ++w) {
    a = kMax ? fmaxf(a, slots[first + w][0]) : a + slots[first + w][0];
    b = kMax ? fmaxf(b, slots[first + w][1]) : b + slots[first + w][1];
  }
}

// The cos/sin of a block's rows kept on chip: [row of the pass][pair].
template <int kRows, int kPairs>
struct RowAngles {
  float cos[kRows][kPairs];
  float sin[kRows][kPairs];
};

// The all-heads kernel with rows on chip: a row's threads span whole warps; each reads its heads'
// lane vectors once (all loads in flight together), the row's sums meet in shared memory
// (row_totals), and the values are normalized, rotated and stored from the registers; a
// per-token FP8 q scale takes a second total, of the final q values' amax. Every thread of a block
// takes every pass and barrier; rows past the end load and store nothing.
template <class T>
__device__ __forceinline__ void rope_all_heads_on_chip_kernel(const KernelParams& p, const float* inv_freq,
                                                              const float* inv_freq_long) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int kHeads = (W.heads + W.head_groups - 1) / W.head_groups;
  constexpr int kVectors = norm_lane_vectors<T>(), kPairs = W.pairs_per_lane;
  constexpr int kRowThreads = W.head_groups * W.lanes, kRowsPerBlock = T::kBlockThreads / kRowThreads;
  constexpr int kAnglePairs = angle_lanes<T>(W) * kPairs;  // a row's pairs with a frequency
  constexpr int kRowPairs = W.rot_lanes * kPairs;            // ... and all of its pairs (the rest: 1, 0)
  constexpr bool kHold = row_holds_words(W);
  __shared__ float slots[T::kBlockThreads / kWarpLanes][2];
  __shared__ RowAngles<kRowsPerBlock, kRowPairs> angles;
  const i64 items = work_items(W, launch_rows<T>(p));
  for_each_block_pass<T::kBlockThreads>(items, [&](i64 pass) {
    const i64 item = pass * T::kBlockThreads + threadIdx.x;
    const bool live = item < items;  // whole rows: items and the block are multiples of a row's threads
    const WorkItem at = decode_item(W, live ? item : 0);
    const RowRef ref = locate_row<T>(p, at.row);
    const LaneVectors lv = lane_vectors<T>(at.lane);
    typedef u32 Words[kVectors][VecTraits<typename T::Storage, T::kVec>::kWords];
    // Held: every head's words from its one read, all loads in flight together.
    Words words[kHold ? kHeads : 1];
    auto load_head = [&](const HeadIo<T>& io, Words& w) {
      if (has_source<T>(io))
#pragma unroll
        for (int j = 0; j < kVectors; ++j)
          if (lane_holds<T>(lv, j)) load_words<typename T::Storage, T::kVec>(io.src + lane_element<T>(lv, j), w[j]);
    };
    if constexpr (kHold) {
#pragma unroll
      for (int k = 0; k < kHeads; ++k) {
        int head;
        if (live && all_heads_owned<T>(at.group, k, head)) load_head(head_io<T>(p, ref, head), words[k]);
      }
    }
    // The thread's head values, biased, from its held words or read again (zeros where it holds none).
    auto values = [&](int k, const HeadIo<T>& io, float (&x)[kVectors][T::kVec]) {
      Words reread;
      if constexpr (!kHold) load_head(io, reread);
      Words& w = kHold ? words[k] : reread;
#pragma unroll
      for (int j = 0; j < kVectors; ++j) {
        if (lane_holds<T>(lv, j) && has_source<T>(io)) {
          words_to_floats<typename T::Storage, T::kVec>(w[j], x[j]);
          add_bias<T>(io.bias, lane_element<T>(lv, j), x[j]);
        } else {
#pragma unroll
          for (int i = 0; i < T::kVec; ++i) x[j][i] = 0.0f;
        }
      }
    };
    // The block's rows' cos/sin, one (row, pair) unit a thread (shared: read after the barrier).
#pragma unroll 1
    for (int unit = threadIdx.x; unit < kRowsPerBlock * kRowPairs; unit += T::kBlockThreads) {
      const int r = unit / kRowPairs, pair = unit % kRowPairs;
      const i64 row = pass * kRowsPerBlock + r;
      angles.cos[r][pair] = 1.0f, angles.sin[r][pair] = 0.0f;  // frequency 0, or no token: unrotated
      if (pair >= kAnglePairs || row >= launch_rows<T>(p)) continue;
      const RowRef unit_ref = locate_row<T>(p, row);
      if (has_token<T>(unit_ref)) pair_cos_sin<T>(p, inv_freq, inv_freq_long, unit_ref, pair, angles.cos[r][pair], angles.sin[r][pair]);
    }
    float inv_rms_q = 1.0f, inv_rms_k = 1.0f;
    if constexpr (T::kQkNorm) {
      float sum_q = 0.0f, sum_k = 0.0f;
#pragma unroll
      for (int k = 0; k < kHeads; ++k) {
        int head;
        if (!live || !all_heads_owned<T>(at.group, k, head) || head >= W.rot_heads) continue;  // v: no norm
        const HeadIo<T> io = head_io<T>(p, ref, head);
        float x[kVectors][T::kVec];
        values(k, io, x);
        float head_sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kVectors; ++j)
#pragma unroll
          for (int i = 0; i < T::kVec; ++i) head_sum = fmaf(x[j][i], x[j][i], head_sum);
        if (io.role == kRoleQ) sum_q += head_sum;
        else sum_k += head_sum;
      }
      row_totals<T, false>(slots, sum_q, sum_k);
      inv_rms_q = all_heads_inv_rms<T>(sum_q, T::kNumQHeads * T::kHeadDim);
      inv_rms_k = all_heads_inv_rms<T>(sum_k, T::kNumKvHeads * T::kHeadDim);
      __syncthreads();  // every thread has its totals before the slots take the amax
    } else {
      __syncthreads();  // the angles are in
    }
    // The lane's cos/sin from the block's rows' (on_chip_angles, written before the sums' barrier).
    // Read where they are used (shared memory, not registers held across the heads).
    const int lane_pairs = (at.lane < W.rot_lanes ? at.lane : 0) * kPairs;
    const float(&cos_v)[kPairs] = *reinterpret_cast<const float(*)[kPairs]>(&angles.cos[threadIdx.x / kRowThreads][lane_pairs]);
    const float(&sin_v)[kPairs] = *reinterpret_cast<const float(*)[kPairs]>(&angles.sin[threadIdx.x / kRowThreads][lane_pairs]);
    // The final values of head k: normalized with its role's 1 / rms and its weight, rotated.
    auto final_values = [&](int k, const HeadIo<T>& io, float (&x)[kVectors][T::kVec]) {
      values(k, io, x);
      if (!has_source<T>(io) || io.role == kRoleV) return;  // padding rows stay zeros; v is copied
      if constexpr (T::kQkNorm) {
        typedef typename T::Storage::raw raw;
        HeadNorm norm;
        norm.weight = T::kNormWeight ? (const raw*)p.norm_weight[io.role] + io.index * T::kHeadDim : nullptr;
        norm.inv_rms = norm_factor<T>(p, io.role == kRoleQ ? inv_rms_q : inv_rms_k, io.role);
#pragma unroll
        for (int j = 0; j < kVectors; ++j)
          if (lane_holds<T>(lv, j)) apply_norm<T>(norm, lane_element<T>(lv, j), x[j]);
      }
      rotate_lane_vectors<T>(at.lane, lv.first - T::kRotaryBegin, x, cos_v, sin_v);
    };
    float q_store_scale = 1.0f;
    if constexpr (T::kQScalePerToken) {  // the amax of the token's final q values, then its scale
      float amax = 0.0f, unused = 0.0f;
#pragma unroll
      for (int k = 0; k < kHeads; ++k) {
        int head;
        if (!live || !all_heads_owned<T>(at.group, k, head) || head >= T::kNumQHeads) continue;
        float x[kVectors][T::kVec];
        final_values(k, head_io<T>(p, ref, head), x);
#pragma unroll
        for (int j = 0; j < kVectors; ++j)
#pragma unroll
          for (int i = 0; i < T::kVec; ++i) amax = fmaxf(amax, fabsf(x[j][i]));
      }
      row_totals<T, true>(slots, amax, unused);
      const float scale = fp8_group_scale<T>(amax, kRoleQ);
      q_store_scale = 1.0f / scale;
      if (live && at.group == 0 && at.lane == 0 && has_token<T>(ref)) p.q_scale_out[ref.token] = scale;
    }
#pragma unroll
    for (int k = 0; k < kHeads; ++k) {
      int head;
      if (!live || !all_heads_owned<T>(at.group, k, head)) continue;
      HeadIo<T> io = head_io<T>(p, ref, head);
      if constexpr (T::kOutputPagedKv) {
        if (!io.dst) continue;  // a k or v head of a token with no cache slot
      }
      if (T::kQScalePerToken && io.role == kRoleQ) io.store_scale = q_store_scale;
      float x[kVectors][T::kVec];
      final_values(k, io, x);
#pragma unroll
      for (int j = 0; j < kVectors; ++j)
        if (lane_holds<T>(lv, j)) store_head<T>(io, lane_element<T>(lv, j), x[j]);
    }
    __syncthreads();  // the slots are free for the next pass
  });
}

template <class T>
__device__ __forceinline__ void rope_all_heads_norm_kernel(const KernelParams& p, const float* inv_freq,
                                                           const float* inv_freq_long) {
  if constexpr (rope_shape<T>().row_on_chip) {
    rope_all_heads_on_chip_kernel<T>(p, inv_freq, inv_freq_long);
  } else {
    for_each_row_item<T>(p, rope_shape<T>(), [&](const WorkItem& at, const RowRef& ref) {
      all_heads_norm_item<T>(p, inv_freq, inv_freq_long, at, ref);
    });
  }
}

}  // namespace ropejit
