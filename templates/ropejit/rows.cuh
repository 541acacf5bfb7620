#pragma once
// Where a grid row's data comes from and goes to, shared by every op's kernel: the rows of a
// launch, each row's token and position in the spec's positions form, its padded-output slot
// and its paged-cache slot; and the programmatic-dependent-launch prologue.
#include "ropejit/numeric.cuh"
#include "ropejit/params.cuh"

namespace ropejit {

// Programmatic dependent launch (a no-op when not launched with it): let the next kernel in
// the stream start launching now, and wait for the previous one's results before any read.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Calls body(item) for this thread's work items, the grid's passes counted by a block-uniform
// index; a thread past the last item leaves (it would be past it in every later pass). The exit
// is uniform, so ptxas can prove a warp's live threads converged at body's shuffles and compiles
// no divergent fallback for each (docs/architecture.md §5). A kernel's last statement.
template <class Body>
__device__ __forceinline__ void for_each_work_item(i64 items, Body&& body) {
  for (i64 pass = blockIdx.x;; pass += gridDim.x) {
    const i64 first_item = pass * blockDim.x;
    if (first_item >= items) return;
    const i64 item = first_item + threadIdx.x;
    if (item >= items) return;
    body(item);
  }
}

// Rows of this launch: tokens, or every (sequence, slot) of the padded output.
template <class T>
__device__ __forceinline__ i64 launch_rows(const KernelParams& p) {
  if constexpr (T::kOutputPaddedBhsd) return (i64)p.batch * p.max_seq_len;
  else return p.num_tokens;
}

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
  i64 position;  // rotation position (mrope: the temporal stream's)
  i64 out_batch; // output sequence index (padded) or 0
  i64 out_row;   // output row: token (token-major) or slot within the sequence (padded)
  i64 stream_position[3];  // mrope only: temporal, height, width positions
  int sequence;  // varlen: the token's sequence
  i64 cache_page;    // paged_kv: the page k and v go to, or -1 (not cached)
  i64 cache_offset;  // paged_kv: the slot within the page
};

// mrope: the position stream rotating frequency pair `pair`. Contiguous sections (Qwen2-VL's
// mrope_section split of cos/sin), or interleaved (Qwen3-VL: height and width take pairs
// 1, 4, 7, ... and 2, 5, 8, ... below three times their counts; temporal the rest).
template <class T>
__device__ __forceinline__ int mrope_stream(int pair) {
  if constexpr (T::kMropeInterleaved) {
    const int r = pair % 3;
    if (r == 1 && pair < 3 * T::kMropeHeight) return 1;
    if (r == 2 && pair < 3 * T::kMropeWidth) return 2;
    return 0;
  } else {
    return pair < T::kMropeTemporal ? 0 : (pair < T::kMropeTemporal + T::kMropeHeight ? 1 : 2);
  }
}

// The position a token's row rotates pair `pair` by.
template <class T>
__device__ __forceinline__ i64 pair_position(const RowRef& ref, int pair) {
  if constexpr (T::kPositionsMrope) {
    const int stream = mrope_stream<T>(pair);
    return stream == 0 ? ref.stream_position[0] : (stream == 1 ? ref.stream_position[1] : ref.stream_position[2]);
  } else {
    return ref.position;
  }
}

// paged_kv: the cache page and offset of a token's k and v, from its slot_mapping entry or from
// its sequence's block table at its position. Out-of-range entries (the host checks them on the
// host backend) give page -1: nothing is written, so a bad table cannot write past the caches.
template <class T>
__device__ __forceinline__ void locate_cache_slot(const KernelParams& p, i64 row, RowRef& r) {
  i64 page = -1, offset = 0;
  if constexpr (T::kCacheIndexSlotMapping) {
    const i64 slot = __ldg(p.slot_mapping + row);
    if (slot >= 0 && slot < p.cache_pages * T::kPageSize) {
      page = slot / T::kPageSize;
      offset = slot - page * T::kPageSize;
    }
  } else {  // block_tables: varlen positions (validation requires them)
    const i64 block = r.position / T::kPageSize;
    if (block < p.max_blocks_per_seq) {
      const i64 entry = __ldg(p.block_tables + r.sequence * p.max_blocks_per_seq + block);
      if (entry >= 0 && entry < p.cache_pages) {
        page = entry;
        offset = r.position - block * T::kPageSize;
      }
    }
  }
  r.cache_page = page;
  r.cache_offset = offset;
}

template <class T>
__device__ __forceinline__ RowRef locate_row(const KernelParams& p, i64 row) {
  RowRef r;
  if constexpr (T::kOutputPaddedBhsd) {
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
    if constexpr (T::kPositionsVarlen) {
      const int b = find_sequence(p.cu_seqlens, p.batch, row);
      r.sequence = b;
      r.position = (p.start_pos ? __ldg(p.start_pos + b) : 0) + (row - __ldg(p.cu_seqlens + b));
    } else if constexpr (T::kPositionsOffset) {
      r.position = (p.start_pos ? __ldg(p.start_pos) : 0) + row;
    } else if constexpr (T::kPositionsMrope) {  // [3, T]: stream s of token t at s * T + t
#pragma unroll
      for (int stream = 0; stream < 3; ++stream) {
        const i64 at = stream * p.num_tokens + row;
        r.stream_position[stream] = p.positions_are_int64 ? __ldg((const i64*)p.positions + at)
                                                          : (i64)__ldg((const int*)p.positions + at);
      }
      r.position = r.stream_position[0];
    } else {
      r.position = p.positions_are_int64 ? __ldg((const i64*)p.positions + row)
                                         : (i64)__ldg((const int*)p.positions + row);
    }
  }
  if constexpr (T::kOutputPagedKv) locate_cache_slot<T>(p, row, r);
  return r;
}

// Only padded outputs have rows without a source token (written as zeros).
template <class T>
__device__ __forceinline__ bool has_token(const RowRef& ref) {
  if constexpr (T::kOutputPaddedBhsd) return ref.token >= 0;
  else return true;
}

}  // namespace ropejit
