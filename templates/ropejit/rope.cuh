#pragma once
// The RoPE kernel body (docs/architecture.md §5; the math: docs/rope-math.md §5-6, §10).
// A generated source defines a Traits struct of constexpr values and the baked inv_freq
// tables, then calls rope_kernel<Traits>.
//
// Work decomposition: one "row" is a token (token-major output) or a (sequence, slot) of the
// padded output. Per row, heads [0, Hq) are q, [Hq, Hq+Hkv) are k, then Hkv v heads when v is
// copied. A thread owns one lane of a head row and heads_per_thread heads spaced by the
// head-group count, so sin/cos is computed once and reused across its heads.
// Lanes [0, kRotLanes) rotate pairs; lanes past that copy the pass-through tail [d, D).
#include "ropejit/numeric.cuh"
#include "ropejit/params.cuh"
#include "ropejit/sincos.cuh"

namespace ropejit {

enum RopeKind { kRopeStatic = 0, kRopeDynamic = 1, kRopeLongrope = 2 };

template <class T>
struct RopeShape {
  static constexpr int kHalf = T::kRotaryDim / 2;
  // Pairs whose angles one rotation lane needs.
  static constexpr int kPairsPerLane = T::kInterleaved ? T::kVec / 2 : T::kVec;
  static constexpr int kRotLanes = T::kInterleaved ? T::kRotaryDim / T::kVec : kHalf / T::kVec;
  // The tail [d, D) is touched only when it moves (not in place) or gains a bias.
  static constexpr bool kTouchTail = !T::kInplace || T::kHasBias;
  static constexpr int kTailLanes = kTouchTail ? (T::kHeadDim - T::kRotaryDim) / T::kVec : 0;
  static constexpr int kLanes = kRotLanes + kTailLanes;
  static constexpr int kVectorsPerHead = T::kHeadDim / T::kVec;
  static constexpr int kRotHeads = T::kNumQHeads + T::kNumKvHeads;
  static constexpr int kHeads = kRotHeads + (T::kCopyV ? T::kNumKvHeads : 0);
  static constexpr int kHeadGroups = (kHeads + T::kHeadsPerThread - 1) / T::kHeadsPerThread;
};

// Which sequence a token belongs to: the last b with cu_seqlens[b] <= t.
__device__ __forceinline__ int find_sequence(const int* cu_seqlens, int batch, i64 token) {
  int lo = 0, hi = batch;  // invariant: cu_seqlens[lo] <= token < cu_seqlens[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if ((i64)__ldg(cu_seqlens + mid) <= token) lo = mid; else hi = mid;
  }
  return lo;
}

// Where one row's data comes from and goes to.
struct RowRef {
  i64 token;     // input token index, or -1 for a padding row
  i64 position;  // rotation position
  i64 out_batch; // output sequence index (padded) or 0
  i64 out_row;   // output row: token (token-major) or slot within the sequence (padded)
};

template <class T>
__device__ __forceinline__ RowRef locate_row(const KernelParams& p, i64 row) {
  RowRef r;
  if (T::kPadded) {
    const int b = (int)(row / p.max_seq_len);
    const i64 slot = row - (i64)b * p.max_seq_len;
    const i64 begin = __ldg(p.cu_seqlens + b), end = __ldg(p.cu_seqlens + b + 1);
    r.out_batch = b;
    r.out_row = slot;
    // Bounded by num_tokens too, so inconsistent cu_seqlens on the device cannot read out of range.
    r.token = (slot < end - begin && begin + slot < p.num_tokens) ? begin + slot : -1;
    r.position = (p.start_pos ? __ldg(p.start_pos + b) : 0) + slot;
  } else {
    r.token = row;
    r.out_batch = 0;
    r.out_row = row;
    if (T::kVarlen) {
      const int b = find_sequence(p.cu_seqlens, p.batch, row);
      r.position = (p.start_pos ? __ldg(p.start_pos + b) : 0) + (row - __ldg(p.cu_seqlens + b));
    } else {
      r.position = p.positions_are_int64 ? __ldg((const i64*)p.positions + row)
                                         : (i64)__ldg((const int*)p.positions + row);
    }
  }
  return r;
}

// inv_freq of pair i for this launch (baked, or dynamic NTK's run-time base as HF computes it).
template <class T>
__device__ __forceinline__ float pair_inv_freq(const KernelParams& p, const float* inv_freq,
                                               const float* inv_freq_long, int pair) {
  if (T::kRopeKind == kRopeDynamic && p.use_dynamic_base) {
    // HF: float32 pow of the float32 base b'. exp2 in double of the host's log2(b') rounds to
    // the correctly rounded float32 power (what the reference and the generator bake), at a
    // fraction of pow's registers.
    const float exponent = (float)(2 * pair) / (float)T::kRotaryDim;
    const float power = (float)exp2((double)exponent * p.dynamic_log2_base);
    return 1.0f / power;
  }
  if (T::kRopeKind == kRopeLongrope && p.use_long_table) return __ldg(inv_freq_long + pair);
  return __ldg(inv_freq + pair);
}

template <class T>
__device__ __forceinline__ void pair_angles(const KernelParams& p, const float* inv_freq,
                                            const float* inv_freq_long, i64 position,
                                            int first_pair, float (&cos_out)[RopeShape<T>::kPairsPerLane],
                                            float (&sin_out)[RopeShape<T>::kPairsPerLane]) {
  constexpr int kPairs = RopeShape<T>::kPairsPerLane;
  if (T::kTableSinCos && position >= 0 && position < p.cos_sin_table_rows) {
    const float* row = p.cos_sin_table + position * (i64)T::kRotaryDim;
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      cos_out[i] = __ldg(row + first_pair + i);
      sin_out[i] = __ldg(row + RopeShape<T>::kHalf + first_pair + i);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const float inv = pair_inv_freq<T>(p, inv_freq, inv_freq_long, first_pair + i);
    // fp32: HF's float32 product; exact: the product of the same float32 values in double.
    const double angle = T::kAngleExact ? (double)position * (double)inv
                                        : (double)__fmul_rn((float)position, inv);
    const SinCos sc = sincos_reduced(angle);
    cos_out[i] = sc.cos * T::kAttentionFactor;
    sin_out[i] = sc.sin * T::kAttentionFactor;
  }
}

template <class T>
__device__ __forceinline__ void add_bias(const void* bias, int element, float (&v)[T::kVec]) {
  if (!T::kHasBias) return;
  float b[T::kVec];
  load_vec<typename T::Storage, T::kVec>((const typename T::Storage::raw*)bias + element, b);
#pragma unroll
  for (int i = 0; i < T::kVec; ++i) v[i] += b[i];
}

template <class T>
__device__ __forceinline__ void rope_kernel(const KernelParams& p, const float* inv_freq,
                                            const float* inv_freq_long) {
  typedef RopeShape<T> Shape;
  typedef typename T::Storage S;
  typedef typename S::raw raw;
  constexpr int V = T::kVec;
  const i64 rows = T::kPadded ? (i64)p.batch * p.max_seq_len : p.num_tokens;
  const i64 items = rows * Shape::kHeadGroups * Shape::kLanes;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 item = (i64)blockIdx.x * blockDim.x + threadIdx.x; item < items; item += stride) {
    const int lane = (int)(item % Shape::kLanes);
    const int group = (int)((item / Shape::kLanes) % Shape::kHeadGroups);
    const i64 row = item / ((i64)Shape::kLanes * Shape::kHeadGroups);
    const RowRef ref = locate_row<T>(p, row);
    const bool rotating_lane = lane < Shape::kRotLanes;
    const int first_pair = rotating_lane ? lane * Shape::kPairsPerLane : 0;

    float cos_v[Shape::kPairsPerLane], sin_v[Shape::kPairsPerLane];
    if (rotating_lane && group < Shape::kRotHeads && (!T::kPadded || ref.token >= 0))
      pair_angles<T>(p, inv_freq, inv_freq_long, ref.position, first_pair, cos_v, sin_v);

    // Not unrolled: unrolling hoists every head's pointers (register spills) and multiplies
    // compile time, while the stores below already order the heads.
#pragma unroll 1
    for (int k = 0; k < T::kHeadsPerThread; ++k) {
      const int head = group + k * Shape::kHeadGroups;
      if (Shape::kHeadGroups * T::kHeadsPerThread != Shape::kHeads && head >= Shape::kHeads) break;
      const int role = head < T::kNumQHeads ? kRoleQ : (head < Shape::kRotHeads ? kRoleK : kRoleV);
      const int head_in_role = head - (role == kRoleQ ? 0 : role == kRoleK ? T::kNumQHeads : Shape::kRotHeads);
      const TensorRef in = p.in[role], out = p.out[role];
      raw* dst = (raw*)out.ptr + ref.out_batch * out.batch_stride + ref.out_row * out.token_stride +
                 head_in_role * out.head_stride;
      // Only padded outputs have rows without a source token (written as zeros).
      const raw* src = (!T::kPadded || ref.token >= 0)
                           ? (const raw*)in.ptr + ref.token * in.token_stride + head_in_role * in.head_stride
                           : nullptr;
      const void* bias = T::kHasBias ? (const raw*)p.bias[role] + head_in_role * T::kHeadDim : nullptr;

      if (T::kCopyV && role == kRoleV) {  // copied with bias, never rotated
        for (int vec = lane; vec < Shape::kVectorsPerHead; vec += Shape::kLanes) {
          float x[V];
          if (!T::kPadded || src) {
            load_vec<S, V>(src + vec * V, x);
            add_bias<T>(bias, vec * V, x);
          } else {
#pragma unroll
            for (int i = 0; i < V; ++i) x[i] = 0.0f;
          }
          store_vec<S, V>(dst + vec * V, x);
        }
        continue;
      }
      if (Shape::kTailLanes > 0 && !rotating_lane) {  // pass-through tail element vector
        const int e = T::kRotaryDim + (lane - Shape::kRotLanes) * V;
        float x[V];
        if (!T::kPadded || src) {
          load_vec<S, V>(src + e, x);
          add_bias<T>(bias, e, x);
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) x[i] = 0.0f;
        }
        store_vec<S, V>(dst + e, x);
        continue;
      }
      if (T::kInterleaved) {
        const int e = lane * V;
        float x[V];
        if (!T::kPadded || src) {
          load_vec<S, V>(src + e, x);
          add_bias<T>(bias, e, x);
#pragma unroll
          for (int i = 0; i < V / 2; ++i) {
            const float a = x[2 * i], b = x[2 * i + 1];
            x[2 * i] = fmaf(a, cos_v[i], -b * sin_v[i]);
            x[2 * i + 1] = fmaf(b, cos_v[i], a * sin_v[i]);
          }
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) x[i] = 0.0f;
        }
        store_vec<S, V>(dst + e, x);
      } else {
        const int e = lane * V;
        float x[V], y[V];
        if (!T::kPadded || src) {
          load_vec<S, V>(src + e, x);
          load_vec<S, V>(src + e + Shape::kHalf, y);
          add_bias<T>(bias, e, x);
          add_bias<T>(bias, e + Shape::kHalf, y);
#pragma unroll
          for (int i = 0; i < V; ++i) {
            const float a = x[i], b = y[i];
            x[i] = fmaf(a, cos_v[i], -b * sin_v[i]);
            y[i] = fmaf(b, cos_v[i], a * sin_v[i]);
          }
        } else {
#pragma unroll
          for (int i = 0; i < V; ++i) x[i] = y[i] = 0.0f;
        }
        store_vec<S, V>(dst + e, x);
        store_vec<S, V>(dst + e + Shape::kHalf, y);
      }
    }
  }
}

}  // namespace ropejit
