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

/// Where a tensor's checked view goes in KernelParams (q_scale_out, the norm weights and biases, the index
/// arrays, the cache scales: the pointer; in_qkv, bias_qkv: the q, k and v inputs or bias rows as
/// three views of its rows, Hq, Hkv and Hkv heads).
enum class ParamSlot { none, in_q, in_k, in_v, out_q, out_k, out_v, heads_in, k_concat, q_scale_out, norm_q, norm_k,
                       norm_bias_q, norm_bias_k,
                       in_qkv, bias_qkv, slot_mapping, positions, cu_seqlens, start_pos, new_positions, new_start_pos,
                       block_tables, scale_cache_k, scale_cache_v };

/// A tensor row's element type: its name in launch_fields (BufferDesc::element_type), its bytes,
/// and the bytes its pointer is aligned to (a vector of it, or one element). A row with an element
/// type of its own declares its RowElement beside it.
struct RowElement {
  std::string_view (*type)(const Spec& spec, PositionsType positions);
  int (*bytes)(const Spec& spec, PositionsType positions);
  int (*align)(const FormContext& c, PositionsType positions);
};

/// True when q_out holds FP8 codes of q / q_scale (io.q_output_dtype).
inline bool fp8_q_output(const Spec& spec) { return spec.io.q_output_dtype != CacheDType::auto_; }
/// True for an NVFP4 cache: rows of bytes, two codes each.
inline bool nvfp4(const Spec& spec) { return spec.io.cache_dtype == CacheDType::nvfp4; }

/// The element types rows share.
namespace element {
/// The spec's dtype, accessed by vectors (aligned to a vector, strides a multiple of it).
inline constexpr RowElement storage{[](const Spec& s, PositionsType) { return to_string(s.dtype); },
                                    [](const Spec& s, PositionsType) { return dtype_size(s.dtype); },
                                    [](const FormContext& c, PositionsType) { return c.align; }};
/// float32 scales, int64 and int32 indices: accessed one by one (aligned to one), dense.
inline constexpr RowElement fp32{[](const Spec&, PositionsType) { return std::string_view("fp32"); },
                                 [](const Spec&, PositionsType) { return 4; },
                                 [](const FormContext&, PositionsType) { return 4; }};
inline constexpr RowElement int64{[](const Spec&, PositionsType) { return std::string_view("int64"); },
                                  [](const Spec&, PositionsType) { return 8; },
                                  [](const FormContext&, PositionsType) { return 8; }};
inline constexpr RowElement int32{[](const Spec&, PositionsType) { return std::string_view("int32"); },
                                  [](const Spec&, PositionsType) { return 4; },
                                  [](const FormContext&, PositionsType) { return 4; }};
/// int32 or int64 positions, as Args::positions_type (LaunchShape::positions_type) says.
inline constexpr RowElement positions{
    [](const Spec&, PositionsType p) { return std::string_view(p == PositionsType::int64 ? "int64" : "int32"); },
    [](const Spec&, PositionsType p) { return p == PositionsType::int64 ? 8 : 4; },
    [](const FormContext&, PositionsType p) { return p == PositionsType::int64 ? 8 : 4; }};
/// The spec's q output dtype: storage, or FP8 codes (io.q_output_dtype) of q / q_scale.
inline constexpr RowElement q_output{
    [](const Spec& s, PositionsType) { return fp8_q_output(s) ? to_string(s.io.q_output_dtype) : to_string(s.dtype); },
    [](const Spec& s, PositionsType) { return fp8_q_output(s) ? 1 : dtype_size(s.dtype); },
    [](const FormContext& c, PositionsType) { return c.align; }};
/// The spec's io.cache_dtype (NVFP4: bytes of two codes), vectors like the storage dtype.
inline constexpr RowElement cache{
    [](const Spec& s, PositionsType) {
      return s.io.cache_dtype != CacheDType::auto_ ? to_string(s.io.cache_dtype) : to_string(s.dtype);
    },
    [](const Spec& s, PositionsType) { return cache_dtype_size(s.io.cache_dtype, s.dtype); },
    [](const FormContext& c, PositionsType) {
      return nvfp4(c.spec) ? c.vec / 2 : c.vec * cache_dtype_size(c.spec.io.cache_dtype, c.spec.dtype);
    }};
/// NVFP4 e4m3 block scales (bytes), written one by one.
inline constexpr RowElement block_scale{[](const Spec&, PositionsType) { return to_string(CacheDType::fp8_e4m3); },
                                        [](const Spec&, PositionsType) { return 1; },
                                        [](const FormContext&, PositionsType) { return 1; }};
}  // namespace element

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
  const RowElement* element = &element::storage;
  bool (*needed_without_tokens)(const Spec&) = nullptr;  ///< required even when no token arrives (padding)
  RowLayout layout = RowLayout::rows;
  std::array<RowField, 2> fields{};  ///< Args fields bound beside it (max_seq_len, batch, cache_num_pages, ...)
  const char* moved_rows = nullptr;   ///< dim symbol of the rows a launch moves ("T": a slot a token); null: all
  bool also_read = false;             ///< a cache the launch reads before it rewrites it (rerotate)
  /// Where its view goes when no ParamSlot says (a row that is the only one to fill its member).
  void (*store)(const TensorRef& view, KernelParams& p) = nullptr;
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
/// The launch's shape as `a` gives it: each call size from its ropejit_args field (kDimSymbols).
LaunchShape shape_from_args(const Args& a);

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

/// The launch of an op that rotates one tensor's heads in place (inverse_rope, rope_tensor; in
/// op_inverse_rope.cpp): the tensor [T, Hq, D] in q's fields, only each head's rope slice read
/// and written, and the positions.
int64_t bind_one_tensor_rotation(const FormContext& c, const Args& a, KernelParams& p);
/// The buffers of bind_one_tensor_rotation.
void buffers_one_tensor_rotation(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out);

}  // namespace ropejit::launch_detail
