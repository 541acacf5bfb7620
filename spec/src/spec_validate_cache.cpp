// Spec validation of the cache forms an engine reads: its own layouts (fp8_ds_mla, fp8_indexer,
// fp8_deepseek_v4) and NVFP4 caches, each against the op that writes it.
#include <fmt/core.h>

#include "spec_ops.h"
#include "spec_reader.h"

namespace ropejit::spec_detail {

using nlohmann::json;

namespace {

// An engine's own cache layout (fp8_ds_mla, fp8_indexer, fp8_deepseek_v4) where the op writes one
// (OpQuantForms), else nhd or hnd.
void check_cache_layout_op(Reader& reader, const Spec& spec) {
  const std::pair<CacheLayout, bool OpQuantForms::*> kLayouts[] = {
      {CacheLayout::fp8_ds_mla, &OpQuantForms::ds_mla_cache},
      {CacheLayout::fp8_indexer, &OpQuantForms::indexer_cache},
      {CacheLayout::fp8_deepseek_v4, &OpQuantForms::deepseek_v4_cache}};
  for (const auto& [layout, form] : kLayouts)
    if (spec.io.cache_layout == layout && !(op_facts(spec.op).quant.*form))
      reader.not_allowed("/io/cache_layout", std::string(to_string(layout)),
                         fmt::format("nhd or hnd when op is {} ({}: {})", to_string(spec.op), to_string(layout),
                                     ops_taking(form)));
}

// An engine's one-head FP8 K cache (fp8_indexer, fp8_deepseek_v4): e4m3 codes, `scale` as the
// cache_scale, one kv head and no V cache; `why` names the layout in each message.
void check_fp8_k_cache(Reader& reader, const Spec& spec, QScale scale, const char* why) {
  if (spec.io.cache_dtype != CacheDType::fp8_e4m3)
    reader.not_allowed("/io/cache_dtype", std::string(to_string(spec.io.cache_dtype)), fmt::format("\"fp8_e4m3\" {}", why));
  if (spec.io.cache_scale != scale)
    reader.not_allowed("/io/cache_scale", std::string(to_string(spec.io.cache_scale)),
                       fmt::format("\"{}\"{} {}", to_string(scale), scale == QScale::static_ ? " or absent" : "", why));
  if (spec.num_kv_heads != 1) reader.not_allowed("/num_kv_heads", json(spec.num_kv_heads), fmt::format("1 {}", why));
  if (spec.io.copy_v) reader.not_allowed("/io/copy_v", json(true), fmt::format("false {}", why));
}

// DeepSeek-V4's cache cell (cache_layout fp8_deepseek_v4): op rope's one 512-wide bf16 k head of
// 448 nope and 64 trailing rope values (K = V), its ue8m0 scales the launch's, a per-head norm.
void check_deepseek_v4_cache(Reader& reader, const Spec& spec) {
  constexpr const char* kWhy = "with cache_layout fp8_deepseek_v4 (DeepSeek-V4's cell: 448 FP8 + 64 bf16 values)";
  check_fp8_k_cache(reader, spec, QScale::static_, kWhy);
  if (spec.dtype != DType::bf16) reader.not_allowed("/dtype", std::string(to_string(spec.dtype)), fmt::format("\"bf16\" {}", kWhy));
  if (spec.head_dim != 512) reader.not_allowed("/head_dim", json(spec.head_dim), fmt::format("512 {}", kWhy));
  if (spec.rotary_dim != 64) reader.not_allowed("/rotary_dim", json(spec.rotary_dim), fmt::format("64 {}", kWhy));
  if (spec.rotary_slice != RotarySlice::trailing)
    reader.not_allowed("/rotary_slice", std::string(to_string(spec.rotary_slice)), fmt::format("\"trailing\" {}", kWhy));
  if (spec.qk_norm.enabled && spec.qk_norm.scope == NormScope::all)
    reader.not_allowed("/qk_norm/scope", std::string("all"), fmt::format("\"head\" {}", kWhy));
}

// An NVFP4 cache: an op that takes one (OpQuantForms::nvfp4_cache), its own block scales (no
// per-head ones), heads whose 16-value blocks fall on whole vectors of lanes (codegen
// config_problem checks the lane map).
void check_nvfp4(Reader& reader, const Spec& spec) {
  const std::string value = "nvfp4";
  if (!op_facts(spec.op).quant.nvfp4_cache) {
    reader.not_allowed("/io/cache_dtype", value,
                       fmt::format("auto, fp8_e4m3 or fp8_e5m2 when op is {} (NVFP4 caches: {} so far)",
                                   to_string(spec.op), ops_taking(&OpQuantForms::nvfp4_cache)));
    return;
  }
  if (spec.io.cache_scale == QScale::per_token_head)
    reader.not_allowed("/io/cache_scale", std::string("per_token_head"),
                       "\"static\" with cache_dtype nvfp4 (its e4m3 scales are per 16-value block, computed in the "
                       "launch, under the static k_scale / v_scale)");
  if (spec.qk_norm.enabled && spec.qk_norm.scope == NormScope::all)
    reader.not_allowed("/qk_norm/scope", std::string("all"), "\"head\" with cache_dtype nvfp4");
  if (spec.io.v_scale_layout == BlockScaleLayout::interleave4 &&
      (spec.io.cache_layout != CacheLayout::hnd || spec.io.page_size % 4 != 0 || !spec.io.copy_v))
    reader.not_allowed("/io/v_scale_layout", std::string("interleave4"),
                       fmt::format("\"linear\" with cache_layout {}, page_size {}, copy_v {} (the 4-token interleave "
                                   "needs hnd pages of a multiple of 4 tokens, and a V cache)",
                                   to_string(spec.io.cache_layout), spec.io.page_size, spec.io.copy_v));
  const int D = spec.head_dim, d = spec.rotary_dim, half_multiple = spec.layout == Layout::neox ? 32 : 16;
  if (D % kNvfp4Block != 0 || d % half_multiple != 0 || (D - d) % kNvfp4Block != 0)
    reader.not_allowed("/io/cache_dtype", value,
                       fmt::format("auto, fp8_e4m3 or fp8_e5m2 with head_dim {} and rotary_dim {} (NVFP4 blocks of 16 "
                                   "values: head_dim and rotary_dim multiples of 16, rotary_dim of {} with layout {})",
                                   D, d, half_multiple, to_string(spec.layout)));
}

}  // namespace

void check_cache_forms(Reader& reader, const Spec& spec) {
  check_cache_layout_op(reader, spec);
  if (indexer_cache(spec))  // an indexer's K cache: codes, then the launch's scale a slot, after each page's codes
    check_fp8_k_cache(reader, spec, QScale::per_token_head,
                      "with cache_layout fp8_indexer (an indexer's K cache: FP8 codes, then a scale a slot)");
  if (deepseek_v4_cache(spec)) check_deepseek_v4_cache(reader, spec);
  if (nvfp4_cache(spec)) check_nvfp4(reader, spec);
}

}  // namespace ropejit::spec_detail
