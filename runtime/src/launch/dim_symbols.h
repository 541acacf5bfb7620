#pragma once
// The dim symbols of launch_fields (ropejit/introspect.h dim_value) with the number each stands
// for: one table, read by dim_value and, resolved at compile time, by tensor rows.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

#include "ropejit/error.h"
#include "ropejit/introspect.h"
#include "ropejit/spec.h"

namespace ropejit {

/// One dim symbol of BufferDesc::dims and the number it stands for. A size the call gives (a
/// LaunchShape member) names its ropejit_args field too: Args and LaunchShape convert through
/// these rows (shape_from_args, bind_row_fields), and Python reads an array's dim into that field.
struct DimSymbol {
  std::string_view symbol;
  int64_t (*value)(const Spec& spec, const LaunchShape& shape);
  bool from_shape = false;  ///< a LaunchShape size (a buffer's rows), not the spec's
  const char* args_field = nullptr;  ///< the ropejit_args field holding the size, value - args_offset
  int args_offset = 0;               ///< "B+1": batch is the dim less one
  void (*load)(LaunchShape& shape, int64_t size) = nullptr;  ///< stores the field's size (offset 0 rows)
};

inline constexpr DimSymbol kDimSymbols[] = {
    {"T", [](const Spec&, const LaunchShape& s) { return s.tokens; }, true, "num_tokens", 0,
     [](LaunchShape& s, int64_t n) { s.tokens = n; }},
    {"B+1", [](const Spec&, const LaunchShape& s) { return int64_t(s.batch) + 1; }, true, "batch", 1},
    {"B", [](const Spec&, const LaunchShape& s) { return int64_t(s.batch); }, true, "batch", 0,
     [](LaunchShape& s, int64_t n) { s.batch = static_cast<int>(n); }},
    {"S", [](const Spec&, const LaunchShape& s) { return s.max_seq_len; }, true, "max_seq_len", 0,
     [](LaunchShape& s, int64_t n) { s.max_seq_len = n; }},
    {"Hq", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.num_q_heads); }},
    {"Hkv", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.num_kv_heads); }},
    {"Hq+2Hkv", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.num_q_heads) + 2 * spec.num_kv_heads; }},
    {"D", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.head_dim); }},
    {"d", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.rotary_dim); }},  // MLA: k_pe
    {"L", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.mla_append.kv_lora_rank); }},  // MLA: kv_c
    {"L+d", [](const Spec& spec, const LaunchShape&) {  // MLA: a latent cache row
       return int64_t(spec.mla_append.kv_lora_rank) + spec.rotary_dim;
     }},
    {"ds_mla_row", [](const Spec& spec, const LaunchShape&) { return ds_mla_row_bytes(spec); }},  // MLA fp8_ds_mla
    {"D+4", [](const Spec& spec, const LaunchShape&) { return indexer_slot_bytes(spec); }},  // fp8_indexer: a slot
    {"576+8", [](const Spec&, const LaunchShape&) {  // fp8_deepseek_v4: a slot's data and scale bytes
       return int64_t(kDeepseekV4TokenBytes + kDeepseekV4ScaleBytes);
     }},
    {"D-d", [](const Spec& spec, const LaunchShape&) {  // MLA concat_k: k_nope's heads
       return int64_t(spec.head_dim) - spec.rotary_dim;
     }},
    {"D/2", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.head_dim) / 2; }},  // NVFP4 cache rows
    {"D/16", [](const Spec& spec, const LaunchShape&) {  // NVFP4 block scales
       return int64_t(spec.head_dim) / kNvfp4Block;
     }},
    {"page_size", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.io.page_size); }},
    {"slots", [](const Spec& spec, const LaunchShape& s) {  // per-slot scales
       return s.cache_pages * spec.io.page_size;
     }, true},
    {"pages", [](const Spec&, const LaunchShape& s) { return s.cache_pages; }, true, "cache_num_pages", 0,
     [](LaunchShape& s, int64_t n) { s.cache_pages = n; }},
    {"max_blocks_per_seq", [](const Spec&, const LaunchShape& s) { return s.max_blocks_per_seq; }, true,
     "max_blocks_per_seq", 0, [](LaunchShape& s, int64_t n) { s.max_blocks_per_seq = n; }},
    {"cos_sin_rows", [](const Spec&, const LaunchShape& s) { return s.cos_sin_rows; }, true,  // cos_sin_cache
     "cos_sin_cache_rows", 0, [](LaunchShape& s, int64_t n) { s.cos_sin_rows = n; }},
    {"1", [](const Spec&, const LaunchShape&) { return int64_t(1); }},
    {"3", [](const Spec&, const LaunchShape&) { return int64_t(3); }},  // mrope: one stream per axis
    {"A", [](const Spec& spec, const LaunchShape&) { return int64_t(position_streams(spec)); }},  // io.axes
};

/// The index of dim symbol `symbol` in kDimSymbols; in a constant expression an unknown symbol
/// fails to compile (the throw is not a constant).
constexpr size_t dim_symbol_id(std::string_view symbol) {
  for (size_t i = 0; i < std::size(kDimSymbols); ++i)
    if (kDimSymbols[i].symbol == symbol) return i;
  throw Error(Status::internal, "unknown dim symbol " + std::string(symbol));
}

/// The dim row that stores ropejit_args field `name` (offset 0), or null: not a call size.
constexpr const DimSymbol* size_field_row(std::string_view name) {
  for (const DimSymbol& row : kDimSymbols)
    if (row.load && row.args_field == name) return &row;
  return nullptr;
}

}  // namespace ropejit
