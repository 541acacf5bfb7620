#pragma once
// The all-heads QK-norm kernel (qk_norm.scope "all": OLMo 2 and 3, MiniMax-M2): one RMSNorm over
// a token's Hq·D q values and one over its Hkv·D k values (after the bias), then the rotation;
// v heads are copied as without a norm. Included by rope.cuh, whose rope_kernel calls it.
//
// A row's work items are one aligned power-of-2 segment of a warp (shape.cuh
// with_norm_scope): head_groups x lane slots. A thread owns the heads group + k·head_groups
// and the lanes slot + j·lanes of each (lane_vectors: the same vectors as a per-head norm's lane).
//  1. It sums the squares of its q vectors and of its k vectors (bias added) in a fixed order:
//     per (lane, head) over vector then element with fmaf, those sums added lane, then head.
//  2. The segment adds the two sums in a __shfl_xor_sync butterfly over offsets segment/2, ..., 1
//     (a + b and b + a are the same bits): every thread gets the same totals, on the GPU and on
//     the host backend alike.
//  3. Per lane (its angles computed once), per head: the vectors are read again, biased,
//     normalized with their role's 1 / rms and the weight at index·D + element, rotated, stored.
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
    if (lane_holds<T>(lv, j) && io.src) {
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
  return 1.0f / sqrtf(sum / (float)elements + T::kNormEps);
}

template <class T>
__device__ __forceinline__ void rope_all_heads_norm_kernel(const KernelParams& p, const float* inv_freq,
                                                           const float* inv_freq_long) {
  constexpr WorkShape W = rope_shape<T>();
  constexpr int kSegment = W.head_groups * W.lanes;  // a row's threads: a power of 2 <= 32
  constexpr int kHeadLanes = W.rot_lanes + W.tail_lanes;
  // Lanes a thread walks: one unless a head row has more than 32 (no loop then).
  constexpr int kLaneSteps = (kHeadLanes + W.lanes - 1) / W.lanes;
  constexpr int kMax = norm_lane_vectors<T>();
  typedef typename T::Storage::raw raw;
  wait_for_previous_grid();
  const i64 items = work_items(W, launch_rows<T>(p));
  const i64 stride = (i64)gridDim.x * blockDim.x;
  // Rows are whole segments and every stride a multiple of 32, so a segment's threads run the
  // same iterations and all reach its shuffles.
  for (i64 item = (i64)blockIdx.x * blockDim.x + threadIdx.x; item < items; item += stride) {
    const WorkItem at = decode_item(W, item);
    const RowRef ref = locate_row<T>(p, at.row);
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
    constexpr unsigned kSegmentBits = kSegment >= kWarpLanes ? 0xffffffffu : (1u << kSegment) - 1u;
    const unsigned mask = kSegmentBits << ((threadIdx.x % kWarpLanes) & ~(unsigned)(kSegment - 1));
#pragma unroll
    for (int offset = kSegment / 2; offset > 0; offset /= 2) {
      sum_q = sum_q + __shfl_xor_sync(mask, sum_q, offset, kSegment);
      sum_k = sum_k + __shfl_xor_sync(mask, sum_k, offset, kSegment);
    }
    const float inv_rms_q = all_heads_inv_rms<T>(sum_q, T::kNumQHeads * T::kHeadDim);
    const float inv_rms_k = all_heads_inv_rms<T>(sum_k, T::kNumKvHeads * T::kHeadDim);

    const bool angles_needed = at.group < W.rot_heads && has_token<T>(ref);
    float cos_v[W.pairs_per_lane], sin_v[W.pairs_per_lane];
#pragma unroll
    for (int step = 0; step < kLaneSteps; ++step) {
      const int lane = at.lane + step * W.lanes;
      if (lane >= kHeadLanes) break;
      if (lane < angle_lanes<T>(W) && angles_needed)
        pair_angles<T>(p, inv_freq, inv_freq_long, ref, lane * W.pairs_per_lane, cos_v, sin_v);
      const LaneVectors lv = lane_vectors<T>(lane);
#pragma unroll 1
      for (int k = 0;; ++k) {
        int head;
        if (!all_heads_owned<T>(at.group, k, head)) break;
        const HeadIo<T> io = head_io<T>(p, ref, head);
        if constexpr (T::kOutputPagedKv) {
          if (!io.dst) continue;  // a k or v head of a token with no cache slot
        }
        float x[kMax][T::kVec];
        load_lane_vectors<T>(io, lv, x);
        if (io.src && io.role != kRoleV) {  // padding rows stay zeros; v is copied
          // The head's slice of its role's [heads·D] weight.
          const void* weight = T::kNormWeight ? (const raw*)p.norm_weight[io.role] + io.index * T::kHeadDim : nullptr;
          const float inv_rms = norm_factor<T>(p, io.role == kRoleQ ? inv_rms_q : inv_rms_k, io.role);
#pragma unroll
          for (int j = 0; j < kMax; ++j)
            if (lane_holds<T>(lv, j)) apply_norm<T>(weight, inv_rms, lane_element<T>(lv, j), x[j]);
          rotate_lane_vectors<T>(lane, lv.first - T::kRotaryBegin, x, cos_v, sin_v);
        }
#pragma unroll
        for (int j = 0; j < kMax; ++j)
          if (lane_holds<T>(lv, j)) store_head<T>(io, lane_element<T>(lv, j), x[j]);
      }
    }
  }
}

}  // namespace ropejit
