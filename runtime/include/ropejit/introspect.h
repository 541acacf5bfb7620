#pragma once
/// What a launch of a spec takes: every ropejit_args field with how the spec uses it, and for
/// arrays their element type and shape, so a binding can check tensors before launching.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ropejit/enums.h"
#include "ropejit/ropejit.h"
#include "ropejit/spec.h"

namespace ropejit {

/// The sizes one launch's buffers follow beyond the spec.
struct LaunchShape {
  int64_t tokens = 0;                                   ///< T
  int batch = 0;                                        ///< sequences (varlen positions)
  int64_t max_seq_len = 0;                              ///< S of the padded_bhsd output
  PositionsType positions_type = PositionsType::int32;  ///< explicit positions' element type
  int64_t cache_pages = 0;                              ///< paged_kv: pages in each cache
  int64_t max_blocks_per_seq = 0;                       ///< paged_kv block_tables: row length
  float k_scale = 0.0f, v_scale = 0.0f;                 ///< paged_kv FP8 caches: the scales
  float q_scale = 0.0f;                                 ///< FP8 q_out (io.q_output_dtype): its scale
  int64_t cos_sin_rows = 0;                             ///< io.angles cos_sin_cache: the cache's rows
};

/// How launches of a spec use one ropejit_args field; the numbers of ropejit_field_use.
enum class FieldUse {
  required,  ///< must be set (non-null, or a value in range)
  optional,  ///< may be left 0 / NULL (a dense stride, no start positions, int32 positions)
  unused,    ///< not read: leave it 0 / NULL (set, it is rejected; shape fields are range-checked instead)
};
/// Names of FieldUse values.
inline constexpr std::array<EnumName<FieldUse>, 3> kFieldUseNames{{
    {FieldUse::required, "required"}, {FieldUse::optional, "optional"}, {FieldUse::unused, "unused"}}};
/// The FieldUse table, so to_string / enum_from_string / allowed_names work on it.
template <> constexpr const auto& enum_table<FieldUse>() { return kFieldUseNames; }

/// One ropejit_args field as launches of a spec use it. Every string views a static,
/// NUL-terminated literal.
struct LaunchField {
  std::string_view name;  ///< the ropejit_args field: "q", "q_stride", "positions", "seq_len"
  FieldUse use = FieldUse::unused;
  /// Arrays the spec uses: the element type ("bf16", "fp16", "fp32", "int32", "int64",
  /// "fp8_e4m3", "fp8_e5m2"; positions: "int32|int64", picked by positions_type). Else empty.
  std::string_view dtype;
  /// Arrays the spec uses: the dense shape in dim symbols ({"T", "Hq", "D"}; dim_value gives
  /// their numbers). Else empty.
  std::vector<std::string_view> dims;
  /// Arrays a launch writes (outputs, caches, inputs rotated in place); a binding refuses
  /// read-only memory for them.
  bool written = false;
  /// Outputs each launch writes whole, not read (q_out, k_out, q_scale_out; not a cache or the
  /// scales beside one): a binding may allocate them.
  bool whole_output = false;
  /// Arrays whose rows (tokens, pages) may be further apart than dense: the field of that stride,
  /// in elements ("q_stride", "k_cache_page_stride"). Else empty.
  std::string_view stride_field;
  /// Arrays whose heads may be any stride apart: the field of that stride ("k_nope_head_stride"). Else empty.
  std::string_view head_stride_field;
};

/// Every ropejit_args field but struct_size, in declaration order, with how launches of `spec`
/// use it; derived from the buffers a launch binds (ropejit/internal/launch_buffers.h).
std::vector<LaunchField> launch_fields(const Spec& spec);

/// The number a dim symbol of launch_fields stands for with `spec` at `shape`: "T", "B",
/// "B+1", "S", "Hq", "Hkv", "Hq+2Hkv", "D", "page_size", "pages", "max_blocks_per_seq", "1",
/// "3". Error(invalid_argument) for any other symbol.
int64_t dim_value(std::string_view symbol, const Spec& spec, const LaunchShape& shape);

/// The dense shape of `field` with `spec` at `shape`: dim_value of each of its dims.
std::vector<int64_t> field_shape(const LaunchField& field, const Spec& spec, const LaunchShape& shape);

/// A size the call gives (a LaunchShape size): the dim symbol an array's dim says it by, and the
/// ropejit_args field that holds it, `dim - offset` ("B+1" is batch + 1). In the order an array's
/// dim is trusted: cu_seqlens' B + 1 before another array's B.
struct CallSize {
  std::string_view symbol;      ///< "T", "B+1", "B", "S", "pages", "max_blocks_per_seq", "cos_sin_rows"
  std::string_view args_field;  ///< "num_tokens", "batch", ...
  int offset = 0;
};
/// Every call size, from the one table of dim symbols.
std::vector<CallSize> call_sizes();
/// Stores the size held by ropejit_args field `args_field` into `shape`; Error(invalid_argument)
/// naming the allowed fields for any other name.
void set_call_size(LaunchShape& shape, std::string_view args_field, int64_t size);

}  // namespace ropejit
