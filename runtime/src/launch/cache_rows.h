#pragma once
// The paged caches' tensor rows (io.output paged_kv, ops rerotate and mla_append): a K or V cache
// in the spec's layout and dtype with its static scale, and the scales a launch writes beside it.
#include <array>

#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

inline constexpr const char* kPagedWhy = "when the spec's io.output is paged_kv";

/// A cache's static scale (k_scale, v_scale): required for a quantized cache with static scales.
inline FieldUse static_scale_use(const Spec& s) {
  return caller_cache_scale(s) ? FieldUse::required : FieldUse::unused;
}

/// A cache's page dims in a layout (hnd: heads before slots), with `row` elements a head row.
constexpr std::array<const char*, 4> page_dims(bool hnd, const char* row) {
  return hnd ? std::array<const char*, 4>{"pages", "Hkv", "page_size", row}
             : std::array<const char*, 4>{"pages", "page_size", "Hkv", row};
}

/// True for a spec whose cache is in layout hnd (kHnd) or nhd, NVFP4 (kNvfp4) or not; for the V
/// cache's rows (kV) only when it copies v.
template <bool kHnd, bool kNvfp4, bool kV>
bool cache_form(const Spec& s) {
  return (s.io.cache_layout == CacheLayout::hnd) == kHnd && (s.io.cache_dtype == CacheDType::nvfp4) == kNvfp4 &&
         (!kV || s.io.copy_v) && !indexer_cache(s) && !deepseek_v4_cache(s);
}

/// The K or V (kV) cache's row in one layout and dtype: pages of page_size slots, one slot a
/// token moved (`kMoved` elements of it), the page stride, cache_num_pages and the static scale.
template <bool kV, bool kHnd, bool kNvfp4, int64_t (*kMoved)(const Spec&), bool kAlsoRead>
constexpr TensorRow cache_row() {
  return {kV ? "v_cache" : "k_cache", kV ? "v_cache_page_stride" : "k_cache_page_stride", nullptr,
          page_dims(kHnd, kNvfp4 ? "D/2" : "D"), BufferKind::cache, cache_form<kHnd, kNvfp4, kV>, kPagedWhy,
          {kV ? ParamSlot::out_v : ParamSlot::out_k}, kMoved, nullptr, FieldUse::required, &element::cache,
          nullptr, RowLayout::paged,
          {RowField{"cache_num_pages"}, RowField{kV ? "v_scale" : "k_scale", FieldUse::unused, static_scale_use}},
          "T", kAlsoRead};
}

/// A cache's rows in every layout and dtype (one applies to a spec).
template <bool kV, int64_t (*kMoved)(const Spec&), bool kAlsoRead = false>
constexpr std::array<TensorRow, 4> cache_rows() {
  return {cache_row<kV, false, false, kMoved, kAlsoRead>(), cache_row<kV, false, true, kMoved, kAlsoRead>(),
          cache_row<kV, true, false, kMoved, kAlsoRead>(), cache_row<kV, true, true, kMoved, kAlsoRead>()};
}

}  // namespace ropejit::launch_detail
