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

/// One dim symbol of BufferDesc::dims and the number it stands for.
struct DimSymbol {
  std::string_view symbol;
  int64_t (*value)(const Spec& spec, const LaunchShape& shape);
  bool from_shape = false;  ///< a LaunchShape size (a buffer's rows), not the spec's
};

inline constexpr DimSymbol kDimSymbols[] = {
    {"T", [](const Spec&, const LaunchShape& s) { return s.tokens; }, true},
    {"B", [](const Spec&, const LaunchShape& s) { return int64_t(s.batch); }, true},
    {"B+1", [](const Spec&, const LaunchShape& s) { return int64_t(s.batch) + 1; }, true},
    {"S", [](const Spec&, const LaunchShape& s) { return s.max_seq_len; }, true},
    {"Hq", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.num_q_heads); }},
    {"Hkv", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.num_kv_heads); }},
    {"Hq+2Hkv", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.num_q_heads) + 2 * spec.num_kv_heads; }},
    {"D", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.head_dim); }},
    {"d", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.rotary_dim); }},  // MLA: k_pe
    {"L", [](const Spec& spec, const LaunchShape&) { return int64_t(spec.mla_append.kv_lora_rank); }},  // MLA: kv_c
    {"L+d", [](const Spec& spec, const LaunchShape&) {  // MLA: a latent cache row
       return int64_t(spec.mla_append.kv_lora_rank) + spec.rotary_dim;
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
    {"pages", [](const Spec&, const LaunchShape& s) { return s.cache_pages; }, true},
    {"max_blocks_per_seq", [](const Spec&, const LaunchShape& s) { return s.max_blocks_per_seq; }, true},
    {"1", [](const Spec&, const LaunchShape&) { return int64_t(1); }},
    {"3", [](const Spec&, const LaunchShape&) { return int64_t(3); }},  // mrope: one stream per axis
};

/// The index of dim symbol `symbol` in kDimSymbols; in a constant expression an unknown symbol
/// fails to compile (the throw is not a constant).
constexpr size_t dim_symbol_id(std::string_view symbol) {
  for (size_t i = 0; i < std::size(kDimSymbols); ++i)
    if (kDimSymbols[i].symbol == symbol) return i;
  throw Error(Status::internal, "unknown dim symbol " + std::string(symbol));
}

}  // namespace ropejit
