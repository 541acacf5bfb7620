#pragma once
// Every op's kernel skeleton (for_each_row_item: the programmatic-dependent-launch prologue, the
// grid's work items, each decoded and its row located) and where a row's data comes from and goes
// to: the rows of a launch, each row's token and position in the spec's positions form, its
// padded-output slot and its paged-cache slot.
#include "ropejit/numeric.cuh"
#include "ropejit/params.cuh"
#include "ropejit/shape.cuh"

namespace ropejit {

/// Programmatic dependent launch (a no-op when not launched with it): let the next kernel in
/// the stream start launching now, and wait for the previous one's results before any read.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Calls body(item) for this thread's work items, the grid's passes counted by a block-uniform
/// index; a thread past the last item leaves (it would be past it in every later pass). The exit
/// is uniform, so ptxas can prove a warp's live threads converged at body's shuffles and compiles
/// no divergent fallback for each (docs/architecture.md §5). A kernel's last statement.
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

/// Calls body(item) for this thread's work items in the plain grid-stride loop: for a kernel
/// without warp shuffles, where no convergence is to be proven and the heads loops of rerotate
/// and MLA compile smaller (phi-3.5-mini-rerotate's decode kernel: 612 SASS instructions, not
/// 687; MLA's decode kernel keeps its first q load ahead of the index loads' use).
template <class Body>
__device__ __forceinline__ void for_each_work_item_strided(i64 items, Body&& body) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 item = (i64)blockIdx.x * blockDim.x + threadIdx.x; item < items; item += stride) body(item);
}

/// How a kernel walks the grid's work items: for_each_work_item (kernels with warp shuffles) or
/// for_each_work_item_strided (kernels without, where it compiles smaller).
enum class GridWalk { uniform_passes, thread_stride };

/// Rows of this launch: tokens, or every (sequence, slot) of the padded output.
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
  i64 position;  // rotation position (mrope, axes: the first stream's)
  i64 out_batch; // output sequence index (padded) or 0
  i64 out_row;   // output row: token (token-major) or slot within the sequence (padded)
  i64 stream_position[4];  // mrope, axes: each stream's position (temporal, height, width; the axes')
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

// io.axes: the axis (position stream) rotating pair `pair`: consecutive runs (kAxisEnd0..2 end
// axes 0..2), or pair k to axis k % A.
template <class T>
__device__ __forceinline__ int axis_stream(int pair) {
  if constexpr (T::kAxesAlternating) return pair % T::kPositionStreams;
  else return (pair >= T::kAxisEnd0) + (pair >= T::kAxisEnd1) + (pair >= T::kAxisEnd2);
}

// Whether each pair reads its own stream's position (mrope, axes), not the token's one.
template <class T>
ROPEJIT_HOST_DEVICE constexpr bool per_pair_positions() {
  return T::kPositionsMrope || T::kPositionsAxes;
}

// The position a token's row rotates pair `pair` by.
template <class T>
__device__ __forceinline__ i64 pair_position(const RowRef& ref, int pair) {
  if constexpr (per_pair_positions<T>()) {
    int stream;
    if constexpr (T::kPositionsMrope) stream = mrope_stream<T>(pair);
    else stream = axis_stream<T>(pair);
    i64 position = ref.stream_position[0];  // selects, not an indexed load: the array stays in registers
#pragma unroll
    for (int s = 1; s < T::kPositionStreams; ++s)
      if (stream == s) position = ref.stream_position[s];
    return position;
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

/// Where row `row`'s data comes from and goes to.
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
    } else if constexpr (per_pair_positions<T>()) {  // [A, T]: stream s of token t at s * T + t
#pragma unroll
      for (int stream = 0; stream < T::kPositionStreams; ++stream) {
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

/// The skeleton of a kernel whose blocks share work across barriers: waits for the previous
/// grid, then runs body(pass) for each of this block's passes over `items` work items (pass
/// `pass` holds items pass * kBlockThreads + [0, kBlockThreads)), every thread of the block in
/// every pass, past the last item too (it takes the barriers, loading and storing nothing).
template <int kBlockThreads, class Body>
__device__ __forceinline__ void for_each_block_pass(i64 items, Body&& body) {
  wait_for_previous_grid();
  for (i64 pass = blockIdx.x; pass * kBlockThreads < items; pass += gridDim.x) body(pass);
}

/// for_each_block_pass split in two: block_part(first_item), the pass's first item, which every
/// thread of the block takes (its barriers), then item_part(item) for the thread's item. A thread
/// past the last item leaves after block_part: no later pass has an item for it, and its exit
/// keeps ptxas's proof that a warp's live threads converge (as for_each_work_item). A kernel's
/// last statement.
template <int kBlockThreads, class BlockPart, class ItemPart>
__device__ __forceinline__ void for_each_block_pass_then_item(i64 items, BlockPart&& block_part, ItemPart&& item_part) {
  wait_for_previous_grid();
  const i64 stride = (i64)gridDim.x * kBlockThreads;
  for (i64 first_item = (i64)blockIdx.x * kBlockThreads; first_item < items; first_item += stride) {
    block_part(first_item);
    const i64 item = first_item + threadIdx.x;
    if (item >= items) return;
    item_part(item);
  }
}

/// for_each_row_item's default: every lane of an item has work.
constexpr int kEveryLane = 1 << 30;

/// The skeleton of every op's kernel: waits for the previous grid, then runs body(at, ref), the
/// op's work on one item, for each of this thread's work items of shape `w` over the launch's
/// rows (walked as kWalk says), decoded (at) with its row located (ref); items whose lane is
/// kWorkingLanes or more end before their row is located (lanes with nothing to do). body: a
/// plain lambda (NVRTC compiles no generic one); its `return` ends its item. A kernel's last
/// statement (for_each_work_item).
template <class T, GridWalk kWalk = GridWalk::uniform_passes, int kWorkingLanes = kEveryLane, class Body>
__device__ __forceinline__ void for_each_row_item(const KernelParams& p, WorkShape w, Body&& body) {
  wait_for_previous_grid();
  auto row_item = [&](i64 item) {
    const WorkItem at = decode_item(w, item);
    if (kWorkingLanes != kEveryLane && at.lane >= kWorkingLanes) return;
    body(at, locate_row<T>(p, at.row));
  };
  if constexpr (kWalk == GridWalk::uniform_passes) for_each_work_item(work_items(w, launch_rows<T>(p)), row_item);
  else for_each_work_item_strided(work_items(w, launch_rows<T>(p)), row_item);
}

}  // namespace ropejit
