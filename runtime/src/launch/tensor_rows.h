#pragma once
// One row per tensor argument of an op or io form (issue 44): its checks (presence, alignment,
// strides), its view in KernelParams and its BufferDesc (sizes, bytes moved, the overlap check,
// the harness's buffers, and through them launch_fields) are all derived from that row.
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "launch/dim_symbols.h"
#include "launch/launch_checks.h"

namespace ropejit::launch_detail {

/// Where a tensor's checked view goes in KernelParams (q_scale_out, the norm weights, the index
/// arrays, the cache scales: the pointer; in_qkv, bias_qkv: the q, k and v inputs or bias rows as
/// three views of its rows, Hq, Hkv and Hkv heads).
enum class ParamSlot { none, in_q, in_k, in_v, out_q, out_k, out_v, heads_in, k_concat, q_scale_out, norm_q, norm_k,
                       in_qkv, bias_qkv, slot_mapping, positions, cu_seqlens, start_pos, new_positions, new_start_pos,
                       block_tables, scale_cache_k, scale_cache_v };

/// A tensor row's element type.
enum class RowElement {
  storage,    ///< the spec's dtype, accessed by vectors (aligned to a vector, strides a multiple of it)
  fp32,       ///< float32 scales, accessed one by one (aligned to 4), dense
  int64,      ///< int64 indices, accessed one by one (aligned to 8), dense
  int32,      ///< int32 indices (cu_seqlens, block_tables), aligned to 4, dense
  positions,  ///< int32 or int64 positions, as Args::positions_type (LaunchShape::positions_type) says
  q_output,   ///< the spec's q output dtype: storage, or FP8 codes (io.q_output_dtype) of q / q_scale
  cache,      ///< the spec's io.cache_dtype (NVFP4: bytes of two codes), vectors like the storage dtype
  block_scale,  ///< NVFP4 e4m3 block scales (bytes), written one by one
};

/// How a row's elements map to the kernel's rows.
enum class RowLayout {
  rows,    ///< rows of its first dim (tokens, sequences, slots), or one row (a weight, a bias)
  padded,  ///< [B, H, S, D]: a row per (sequence, position), heads S rows apart (padded_bhsd)
  paged,   ///< [pages, ...]: pages its stride field apart, a launch moves one slot a token (paged caches)
};

/// An Args field a row's buffer binds beside its pointer and strides (a shape field, a scale),
/// with how a launch uses it: `use`, or `use_of(spec)` where that depends on the spec.
struct RowField {
  const char* name = nullptr;
  FieldUse use = FieldUse::required;
  FieldUse (*use_of)(const Spec&) = nullptr;
};

/// The kDimSymbols index of each dim (kNoDim past the rank); a constant for a row's table.
inline constexpr uint8_t kNoDim = 0xff;
constexpr std::array<uint8_t, 4> dim_symbol_ids(const std::array<const char*, 4>& dims) {
  std::array<uint8_t, 4> ids{kNoDim, kNoDim, kNoDim, kNoDim};
  for (size_t i = 0; i < dims.size() && dims[i]; ++i) ids[i] = static_cast<uint8_t>(dim_symbol_id(dims[i]));
  return ids;
}

/// args_field_id of a field that must be of `kind` (a row's pointer, its int64 strides); in a
/// constant expression another kind fails to compile.
constexpr size_t typed_field_id(const char* name, ArgsFieldKind kind) {
  const size_t id = args_field_id(name);
  if (id != kNoArgsField && kArgsFields[id].kind != kind)
    throw Error(Status::internal, std::string(name) + " is not a ropejit_args field of a tensor row's kind");
  return id;
}

/// One tensor argument of a launch, declared once: token rows ("T" first; strided when it has a
/// token-stride field) or one dense row (a weight, a bias). Rows live in constexpr tables, so every Args
/// field and dim symbol they name is checked at compile time.
struct TensorRow {
  const char* name;                 ///< the Args pointer field ("q", "k_pe"), also the buffer's name
  const char* token_stride;         ///< the Args field of its token stride (0: dense), or null: dense
  const char* head_stride;          ///< the Args field of its head stride (heads any stride apart), or null
  std::array<const char*, 4> dims;  ///< dense shape in the dim symbols of ropejit/introspect.h
  BufferKind kind;                  ///< input, bias, norm_weight (read), output (written), inout (both)
  bool (*when)(const Spec&);        ///< the specs whose launches use it; null: every one of the op or form
  const char* why;                  ///< "when ...": why a missing pointer is refused
  std::array<ParamSlot, 2> slots;   ///< where its view goes (in and out for one rewritten in place)
  int64_t (*moved)(const Spec&) = nullptr;    ///< elements of a row a launch reads; null: the whole row
  int64_t (*written)(const Spec&) = nullptr;  ///< inout: elements of a row written back; null: moved
  FieldUse use = FieldUse::required;          ///< the pointer: required (with tokens) or optional
  RowElement element = RowElement::storage;
  bool (*needed_without_tokens)(const Spec&) = nullptr;  ///< required even when no token arrives (padding)
  RowLayout layout = RowLayout::rows;
  std::array<RowField, 2> fields{};  ///< Args fields bound beside it (max_seq_len, batch, cache_num_pages, ...)
  const char* moved_rows = nullptr;   ///< dim symbol of the rows a launch moves ("T": a slot a token); null: all
  bool also_read = false;             ///< a cache the launch reads before it rewrites it (rerotate)
  // The fields' indices in kArgsFields, resolved where the row is declared (a typo or a field of
  // the wrong type fails to compile).
  size_t ptr_field = typed_field_id(name, ArgsFieldKind::pointer);
  size_t stride_field = typed_field_id(token_stride, ArgsFieldKind::int64);
  size_t head_field = typed_field_id(head_stride, ArgsFieldKind::int64);
  std::array<uint8_t, 4> dim_ids = dim_symbol_ids(dims);  // each dim's number without a lookup by name
  uint8_t moved_rows_id = moved_rows ? static_cast<uint8_t>(dim_symbol_id(moved_rows)) : kNoDim;

  /// True when launches of `spec` use this row.
  bool used_by(const Spec& spec) const { return !when || when(spec); }
};

/// Checks and binds each row of [rows, rows + n) that the spec uses, in order: present when the
/// launch has tokens (or the row is needed without), aligned for its element type, strides
/// resolved (and within int64 bytes), its view stored in its KernelParams slots.
void bind_tensor_rows(const FormContext& c, const Args& a, KernelParams& p, const TensorRow* rows, size_t n);
/// Appends the BufferDesc of each row the spec uses (bound by its field names: bind_buffers).
void buffers_tensor_rows(const Spec& spec, const LaunchShape& shape, const TensorRow* rows, size_t n,
                         std::vector<BufferDesc>& out);

/// Stores into `a` the shape fields and scales a buffer's RowFields name, from `shape` (the
/// harness's binding of a buffer beside its pointer and strides).
void bind_row_fields(const BufferDesc& b, const LaunchShape& shape, Args& a);

/// bind_tensor_rows over a whole table (a C array or a std::array).
template <class Rows>
void bind_tensor_rows(const FormContext& c, const Args& a, KernelParams& p, const Rows& rows) {
  bind_tensor_rows(c, a, p, std::data(rows), std::size(rows));
}
/// buffers_tensor_rows over a whole table.
template <class Rows>
void buffers_tensor_rows(const Spec& spec, const LaunchShape& shape, const Rows& rows, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(spec, shape, std::data(rows), std::size(rows), out);
}

}  // namespace ropejit::launch_detail
