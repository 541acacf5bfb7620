#pragma once
// Op attn_temperature (Llama 4's NoPE layers, HF modeling_llama4.py): every q element of a token
// at position p times log1p(floor((p + 1) / floor_scale)) * attn_scale + 1, in place. Each
// thread takes one kVec vector of kHeadsPerThread q heads of one token.
#include "ropejit/rows.cuh"
#include "ropejit/shape.cuh"

namespace ropejit {

// Every q head, one vector per lane (the same shape for the host's launch dims: config.cpp).
template <class T>
ROPEJIT_HOST_DEVICE constexpr WorkShape attn_temperature_shape() {
  return make_work_shape(T::kHeadDim, T::kHeadDim, T::kNumQHeads, 0, true, false, true, false, T::kVec,
                         T::kHeadsPerThread, false);
}

// HF's float32 steps: floor((p + 1) / floor_scale) (exact in integers; HF's float32 quotient gives
// the same below 2^24), log1p, times attn_scale, plus 1, each rounded (no FMA: --fmad=false).
template <class T>
__device__ __forceinline__ float temperature_scale(i64 position) {
  const float floored = (float)((position + 1) / T::kFloorScale);
  return __fmul_rn(log1pf(floored), T::kAttnScale) + 1.0f;
}

/// The op's kernel: each work item scales its vector of its q heads by its row's temperature.
template <class T>
__device__ __forceinline__ void attn_temperature_kernel(const KernelParams& p) {
  constexpr WorkShape W = attn_temperature_shape<T>();
  typedef typename T::Storage::raw raw;
  for_each_row_item<T, GridWalk::thread_stride>(p, W, [&](const WorkItem& at, const RowRef& ref) {
    const float scale = temperature_scale<T>(ref.position);
    const TensorRef q = p.in[kRoleQ];
#pragma unroll 1
    for (int k = 0; k < T::kHeadsPerThread; ++k) {
      const int head = at.group + k * W.head_groups;
      if (head >= W.heads) break;
      raw* vector = (raw*)q.ptr + ref.token * q.token_stride + head * q.head_stride + at.lane * T::kVec;
      float x[T::kVec];
      load_vec<typename T::Storage, T::kVec>(vector, x);
#pragma unroll
      for (int i = 0; i < T::kVec; ++i) x[i] = __fmul_rn(x[i], scale);
      store_vec<typename T::Storage, T::kVec>(vector, x);
    }
  });
}

}  // namespace ropejit
