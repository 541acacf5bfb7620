// What one launch does to memory, for the calibrated model (compile/include/ropejit/roofline.h
// MemoryAccess; docs/static-report.md §3): each buffer's moved bytes as DRAM sees them, from the
// layout its dims say (token-major rows, padded planes, paged caches in HND or NHD, scattered by
// a slot mapping or filled page by page through block tables), the kernels' second reads, and
// the index loads a thread waits for before its first data load.
#include "launch/launch_args.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "ropejit/config.h"
#include "ropejit/runtime.h"
#include "ropejit/shape.cuh"

namespace ropejit {

namespace {

constexpr int64_t kSector = 32;  // bytes: the least L2 and DRAM move

// Where the moved bytes of one row lie: `pieces` runs, `stride` bytes apart, the first `offset`
// bytes into the row; the next row's same piece starts `row_step` bytes later, so a piece that
// fills its step runs on into the next row's, for `run_rows` rows (a page's; 0: all), unless
// rows are `scattered` (a slot mapping puts each anywhere).
struct RowLayout {
  int64_t pieces = 1;
  int64_t stride = 0;
  int64_t offset = 0;
  int64_t row_step = 0;
  int64_t run_rows = 0;
  bool scattered = false;
};

bool is(const char* dim, std::string_view symbol) { return dim && symbol == dim; }
bool head_dim(const char* dim) { return is(dim, "Hq") || is(dim, "Hkv") || is(dim, "Hq+2Hkv"); }

// The layout of buffer `b` of a launch of `spec` at `shape`, read off its dims.
RowLayout row_layout(const Spec& spec, const LaunchShape& shape, const BufferDesc& b) {
  RowLayout l;
  const int64_t esize = b.element_bytes;
  l.row_step = b.row_stride * esize;
  if (is(b.dims[0], "pages") || is(b.dims[0], "slots")) {  // a cache or its scales: a slot row per token
    const bool hnd = is(b.dims[1], "Hkv") && is(b.dims[2], "page_size");
    const bool nhd = is(b.dims[1], "page_size") && is(b.dims[2], "Hkv");
    const int64_t heads = hnd || nhd ? spec.num_kv_heads : 1;
    const int64_t width = hnd || nhd ? b.row_elements / (int64_t(spec.io.page_size) * heads) : b.moved_row_elements;
    const int64_t moved_per_head = b.moved_row_elements / heads;
    l.pieces = hnd || moved_per_head < width ? heads : 1;
    l.stride = (hnd ? int64_t(spec.io.page_size) * width : width) * esize;
    l.offset = moved_per_head < width ? int64_t(rotary_begin(spec)) * esize : 0;  // a re-rotation's rotary part
    l.row_step = (hnd ? width : heads * width) * esize;  // from a slot to the next
    l.scattered = spec.io.cache_index == CacheIndex::slot_mapping;
    l.run_rows = spec.io.page_size;
    return l;
  }
  const bool token_heads = is(b.dims[0], "T") && head_dim(b.dims[1]);
  if (token_heads && b.moved_row_elements < b.row_elements) {  // [T, H, W], a slice of each head moved
    const int64_t heads = dim_value(b.dims[1], spec, shape);
    if (heads > 0 && b.moved_row_elements % heads == 0) {
      const int64_t width = b.row_elements / heads, moved = b.moved_row_elements / heads;
      l.pieces = heads;
      l.stride = width * esize;
      l.offset = spec.rotary_slice == RotarySlice::trailing ? (width - moved) * esize : 0;
    }  // else packed q, k and a whole v: taken as one run (no such spec measured)
  }
  return l;
}

// Adds one direction (read or write) of buffer `b`: `elements` of each of `rows` moved rows.
void add_direction(const RowLayout& l, const BufferDesc& b, int64_t rows, int64_t elements, bool write,
                   MemoryAccess& out) {
  if (elements <= 0 || rows <= 0) return;
  const int64_t piece = elements / l.pieces * b.element_bytes;
  if (!l.scattered && piece == l.row_step) {  // runs on: long runs, a page's (one each) or the whole buffer's
    out.sector_bytes += rows * l.pieces * piece;
    if (l.run_rows > 0) out.chunks += (rows + l.run_rows - 1) / l.run_rows * l.pieces;
    return;
  }
  // Separate runs, every piece of every row: sectors and partly written sectors averaged over
  // the alignments of 32 consecutive rows (or slots), which repeat after that.
  int64_t sectors = 0, partial = 0;
  for (int64_t r = 0; r < kSector; ++r)
    for (int64_t i = 0; i < l.pieces; ++i) {
      const int64_t start = r * l.row_step + l.offset + i * l.stride, end = start + piece;
      const int64_t first = start / kSector, last = (end - 1) / kSector;
      sectors += last - first + 1;
      if (write) partial += first == last ? ((start % kSector || end % kSector) ? 1 : 0)
                                          : (start % kSector ? 1 : 0) + (end % kSector ? 1 : 0);
    }
  out.sector_bytes += std::llround(static_cast<double>(sectors) * kSector * rows / kSector);
  out.partial_sectors += std::llround(static_cast<double>(partial) * rows / kSector);
  out.chunks += rows * l.pieces;
}

// Dependent index loads before a row's first data load (rows.cuh locate_row): the position (or
// slot, padded row bounds) in one round trip; a varlen token's sequence by binary search over
// cu_seqlens first; a block table's entry after the sequence is known.
int index_levels(const Spec& spec, const LaunchShape& shape) {
  int levels = 1;
  if (spec.io.positions == PositionsForm::varlen && spec.io.output != OutputForm::padded_bhsd)
    levels += static_cast<int>(std::ceil(std::log2(std::max(1, shape.batch))));
  if (paged_kv(spec) && spec.io.cache_index == CacheIndex::block_tables) levels += 1;
  return levels;
}

}  // namespace

MemoryAccess memory_access(const Spec& spec, const Config& config, const LaunchShape& shape) {
  MemoryAccess out;
  int64_t qk_read = 0, q_read = 0;  // per launch: bytes of q and k the kernel reads (for its re-reads)
  for (const BufferDesc& b : launch_buffers(spec, shape)) {
    out.bytes += b.moved_bytes();
    const int64_t rows = b.moved_rows >= 0 ? b.moved_rows : b.rows;
    const RowLayout layout = row_layout(spec, shape, b);
    if (b.is_read()) add_direction(layout, b, rows, b.moved_row_elements, false, out);
    add_direction(layout, b, rows, b.written_elements(), true, out);
    const std::string_view name = b.name;
    if (b.is_read() && (name == "q" || name == "k" || name == "qkv")) {
      const int64_t bytes = rows * b.moved_row_elements * b.element_bytes;
      qk_read += bytes;
      if (name == "q") q_read += bytes;
    }
  }
  // Second reads: the all-heads norm reads a token's q and k for their sums, then again to
  // rotate them (a per-token FP8 q scale reads q once more for its amax); a thread owning whole
  // QK-norm heads reads each head for its norm before the rotation reads it again.
  const WorkShape w = work_shape(spec, config);
  const int64_t items = std::max<int64_t>(1, int64_t(w.head_groups) * w.lanes) * std::max<int64_t>(1, shape.tokens);
  if (all_heads_segment(spec) && !row_holds_words(w)) {  // held on chip: each value read once
    out.reread_bytes = (all_heads_norm(spec) ? qk_read : 0) + (q_scale_per_token(spec) ? q_read : 0);
    out.reread_distance = qk_read / items;
  } else if (spec.qk_norm.enabled && w.whole_heads) {  // a LayerNorm's two passes: its mean, then its variance
    out.reread_bytes = qk_read * (spec.qk_norm.type == NormType::layernorm ? 2 : 1);
    out.reread_distance = qk_read / items;
  }
  out.index_levels = index_levels(spec, shape);
  return out;
}

}  // namespace ropejit
