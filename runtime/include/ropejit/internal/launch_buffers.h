#pragma once
// The buffers one launch has, per io form, and the checked parameters of a launch: the runtime
// binds Args from them; the check harness, the tuner and the benchmark build workloads from them.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ropejit/introspect.h"
#include "ropejit/params.cuh"
#include "ropejit/runtime.h"

namespace ropejit {

/// The checked kernel parameters and the number of rows the grid covers.
struct CheckedLaunch {
  KernelParams params{};
  int64_t rows = 0;  ///< tokens, or batch * max_seq_len for padded_bhsd
};

/// A paged K or V cache as the kernel addresses it: element (page, offset, head, e) at
/// page * batch_stride + offset * token_stride + head * head_stride + e, in the spec's
/// cache_layout (nhd [pages, page_size, Hkv, D], hnd [pages, Hkv, page_size, D]), pages
/// `page_stride` elements apart.
TensorRef cache_tensor(const Spec& spec, void* cache, int64_t page_stride);

/// What a launch does with a buffer.
enum class BufferKind {
  input,       ///< q, k, v or qkv, read only (outputs elsewhere)
  inout,       ///< q, k, v or qkv, read and rewritten (inplace output)
  output,      ///< q_out, k_out, v_out, written only
  bias,        ///< the QKV bias row
  norm_weight, ///< a QK-norm weight vector [D]
  positions,   ///< explicit positions
  cu_seqlens,  ///< varlen sequence boundaries
  start_pos,   ///< varlen tokens already cached per sequence
  cache,       ///< a paged K or V cache: the launch writes the slots of its tokens only
  slot_mapping,  ///< paged_kv: each token's cache slot
  block_tables,  ///< paged_kv: each sequence's pages
  new_positions, ///< rerotate, explicit positions: each key's new position
  new_start_pos, ///< rerotate, varlen / offset: each sequence's new start
  table,         ///< a caller's value table read by index (io.angles cos_sin_cache): any finite values
};

/// An Args field a buffer's binder fills beside the pointer (a stride, a size, a scale), and
/// how a launch uses it.
struct BoundField {
  const char* name = nullptr;  ///< the ropejit_args field; null: no entry
  FieldUse use = FieldUse::unused;
};

/// One buffer of one launch (a tensor row's, runtime/src/launch/tensor_rows.h): its size, what a
/// launch moves of it and where it goes in Args (the pointer field `name`, its stride_field(), the
/// `bound` fields).
struct BufferDesc {
  const char* name;             ///< "q", "k", "v", "qkv", "q_out", ..., "bias", "positions", ...
  BufferKind kind;
  int64_t rows;                 ///< tokens, batch * S (padded output), 1 (bias), batch (+1)
  int64_t row_elements;         ///< dense elements of one row
  int64_t row_stride;           ///< elements from one row to the next (>= row_elements)
  int element_bytes;
  int64_t moved_row_elements;   ///< elements of a row a launch reads or writes (the tail may stay)
  bool token_rows;              ///< rows are tokens, so a wider row stride is allowed
  /// The dense shape in the dim symbols of ropejit/introspect.h ({"T", "Hq", "D"}); null: past the rank.
  std::array<const char*, 4> dims{};
  std::array<BoundField, 3> bound{};  ///< the other fields bind_buffers fills: strides, shape fields, scales
  int64_t moved_rows = -1;      ///< rows a launch moves, when not all (a cache: one slot per token)
  /// inout: elements of a moved row written back, when fewer than read (packed q in place with
  /// the k and v parts only read); -1: all of moved_row_elements.
  int64_t written_row_elements = -1;
  bool also_read = false;             ///< a cache the launch reads before it rewrites it (rerotate)
  FieldUse use = FieldUse::required;  ///< the pointer: required, or optional (null allowed)
  /// Its element type as launch_fields names it ("bf16", "fp8_e4m3", "int64", "nvfp4"; a static literal).
  std::string_view element_type{};
  const char* stride = nullptr;        ///< the Args field of its row (token or page) stride, also in `bound`
  const char* head_stride = nullptr;   ///< the Args field of its head stride (heads any stride apart), or null

  /// True for q, k, v / qkv and the outputs: the per-launch data (others are shared tables).
  bool is_data() const {
    return kind == BufferKind::input || kind == BufferKind::inout || kind == BufferKind::output ||
           kind == BufferKind::cache;
  }
  /// The bound field holding the row stride (token or page stride), or null: dense rows only.
  const char* stride_field() const { return stride; }
  /// True when a launch reads the buffer.
  bool is_read() const { return kind != BufferKind::output && (kind != BufferKind::cache || also_read); }
  /// Elements of a moved row a launch writes (0: read only).
  int64_t written_elements() const {
    if (!is_written()) return 0;
    return kind == BufferKind::inout && written_row_elements >= 0 ? written_row_elements : moved_row_elements;
  }
  /// True when a launch writes the buffer.
  bool is_written() const {
    return kind == BufferKind::inout || kind == BufferKind::output || kind == BufferKind::cache;
  }
  /// Allocation size: every row at its stride. Error(invalid_argument) on int64 overflow.
  int64_t bytes() const { return checked_product(rows, row_stride, element_bytes); }
  /// Bytes one launch moves through memory: read, written, or both (inout). Error on overflow.
  int64_t moved_bytes() const {
    const int64_t written = also_read                   ? moved_row_elements
                            : kind != BufferKind::inout ? 0
                            : written_row_elements < 0  ? moved_row_elements
                                                        : written_row_elements;
    return checked_product(moved_rows < 0 ? rows : moved_rows, moved_row_elements + written, element_bytes);
  }
  /// a * b * c, or Error(invalid_argument) naming this buffer when it overflows int64.
  int64_t checked_product(int64_t a, int64_t b, int64_t c) const;
};

/// True when launches of `spec` need Args::seq_len (dynamic NTK without a fixed rope.seq_len,
/// LongRoPE): their frequencies depend on the run-time length.
bool needs_seq_len(const Spec& spec);
/// The same for one rope block (op rerotate's old parameters need from_seq_len by this rule).
bool needs_seq_len(const RopeParams& rope);

/// Every buffer of one launch of `spec` at `shape`, dense (row_stride = row_elements), in the
/// order: inputs, bias, positions arrays, outputs. Built from one row per io form.
std::vector<BufferDesc> launch_buffers(const Spec& spec, const LaunchShape& shape);

/// Args for `spec` at `shape` with buffer i at `ptrs[i]` (the buffers of launch_buffers, with
/// their strides); seq_len and from_seq_len (op rerotate) as given.
Args bind_buffers(const std::vector<BufferDesc>& buffers, const LaunchShape& shape, const std::vector<void*>& ptrs,
                  int64_t seq_len, int64_t from_seq_len = 0);

}  // namespace ropejit
