// The JSON Schema of the spec format, generated from the enum tables and the rope parameter
// table (so specs/schema.json can never drift from the validator's allow-lists).
#include "ropejit/spec_schema.h"
#include "spec_json.h"
#include "spec_ops.h"

namespace ropejit {

using nlohmann::ordered_json;

namespace {

template <class E>
ordered_json enum_schema(std::string_view description) {
  ordered_json names = ordered_json::array();
  for (const auto& row : enum_table<E>()) names.push_back(std::string(row.name));
  return {{"description", std::string(description)}, {"enum", names}};
}

ordered_json integer_schema(int64_t min, int64_t max, std::string_view description) {
  return {{"description", std::string(description)}, {"type", "integer"}, {"minimum", min},
          {"maximum", max}};
}

ordered_json bound_number(const char* type, double min, bool exclusive) {
  ordered_json out{{"type", type}};
  out[exclusive ? "exclusiveMinimum" : "minimum"] = min;
  return out;
}

ordered_json rope_param_schema(const RopeParamRule& rule) {
  ordered_json out{{"description", std::string(rule.doc)}};
  switch (rule.kind) {
    case ParamKind::number:
      out.update(bound_number("number", rule.min, rule.min_exclusive));
      if (rule.max) out["maximum"] = *rule.max;
      break;
    case ParamKind::integer:
      out.update(integer_schema(static_cast<int64_t>(rule.min), kMaxPositions, ""));
      out["description"] = std::string(rule.doc);
      break;
    case ParamKind::boolean:
      out["type"] = "boolean";
      break;
    case ParamKind::number_list:
      out["type"] = "array";
      out["items"] = bound_number("number", rule.min, rule.min_exclusive);
      break;
  }
  if (!rule.fallback.is_null()) out["default"] = rule.fallback;
  return out;
}

ordered_json strings(const std::vector<std::string_view>& items) {
  ordered_json out = ordered_json::array();
  for (auto item : items) out.push_back(std::string(item));
  return out;
}

ordered_json rope_schema() {
  ordered_json properties;
  properties["rope_type"] = enum_schema<RopeType>("frequency scaling method (HF rope_type)");
  std::vector<std::string_view> always{"rope_type"};
  for (const auto& rule : rope_param_rules()) {
    properties[std::string(rule.key)] = rope_param_schema(rule);
    if (rule.required == RopeTypeSet::all()) always.push_back(rule.key);
  }
  // Per rope type: its required keys, and no keys of other types.
  ordered_json all_of = ordered_json::array();
  for (const auto& row : enum_table<RopeType>()) {
    const RopeTypeParams& params = rope_type_params(row.value);
    std::vector<std::string_view> keys{"rope_type"};
    keys.insert(keys.end(), params.required.begin(), params.required.end());
    keys.insert(keys.end(), params.optional.begin(), params.optional.end());
    ordered_json then{{"required", strings(params.required)},
                      {"propertyNames", {{"enum", strings(keys)}}}};
    all_of.push_back({{"if", {{"properties", {{"rope_type", {{"const", std::string(row.name)}}}}}}},
                      {"then", then}});
  }
  return {{"description", "rope parameters, named as HF rope_parameters"},
          {"type", "object"},
          {"required", strings(always)},
          {"properties", properties},
          {"additionalProperties", false},
          {"allOf", all_of}};
}

ordered_json io_schema() {
  ordered_json properties;
  properties["input"] = enum_schema<InputForm>("separate q/k(/v) tensors or packed QKV (default separate)");
  properties["output"] = enum_schema<OutputForm>(
      "in place, token-major separate, head-major padded, or q out and k, v into a paged KV cache (default inplace)");
  properties["qkv_bias"] = {{"description", "add the QKV bias before rotating (default false)"},
                            {"type", "boolean"}};
  properties["copy_v"] = {{"description",
                           "v is read and written too (default: true for packed_qkv input with a "
                           "non-inplace output or a bias)"},
                          {"type", "boolean"}};
  properties["positions"] = enum_schema<PositionsForm>(
      "explicit per-token positions, varlen, one sequence at an offset, multimodal [3, T], or [A, T] of io.axes "
      "(default explicit)");
  properties["mrope_section"] = {
      {"description", "positions mrope: pairs rotated by the temporal, height and width streams (sum rotary_dim / 2)"},
      {"type", "array"},
      {"items", {{"type", "integer"}, {"minimum", 1}}},
      {"minItems", 3},
      {"maxItems", 3}};
  properties["mrope_interleaved"] = {
      {"description", "positions mrope: Qwen3-VL interleaving (height and width take every third pair; default false)"},
      {"type", "boolean"}};
  properties["axes"] = {
      {"description", "positions axes: the position axes (vision towers, diffusion transformers), each rotating its "
                      "share of the pairs by its row of the [A, T] positions"},
      {"type", "object"},
      {"properties",
       {{"pairs", {{"description", "rotary pairs per axis (sum rotary_dim / 2)"},
                   {"type", "array"},
                   {"items", {{"type", "integer"}, {"minimum", 1}}},
                   {"minItems", 1},
                   {"maxItems", kMaxAxes}}},
        {"theta", {{"description", "frequencies own: each axis's base (default rope_theta for every axis)"},
                   {"type", "array"},
                   {"items", {{"type", "number"}, {"exclusiveMinimum", 0}}}}},
        {"frequencies", enum_schema<AxisFrequencies>(
                            "own: axis a's pair j has inv_freq theta_a^(-j / pairs_a) (default); global_alternate: "
                            "entry j * A + a of rope_theta's table over rotary_dim (Pixtral)")},
        {"placement", enum_schema<AxisPlacement>(
                          "contiguous: axis 0 the first pairs_0 pairs, then axis 1, ... (default); alternating: pair "
                          "k to axis k % A")}}},
      {"required", ordered_json::array({"pairs"})},
      {"additionalProperties", false}};
  properties["cache_layout"] =
      enum_schema<CacheLayout>("paged_kv: nhd [pages, page_size, Hkv, D] or hnd [pages, Hkv, page_size, D] (default nhd); op "
                               "mla_append also fp8_ds_mla (vLLM's row: kv_lora_rank FP8 e4m3 codes, a float32 scale "
                               "per 128 computed in the launch, the rotated k_pe in the dtype; 656 bytes for DeepSeek); "
                               "op rope also fp8_indexer (a sparse-attention indexer's K cache, vLLM's and SGLang's: "
                               "each page's [page_size, D] FP8 e4m3 codes, then its [page_size] float32 scales) and "
                               "fp8_deepseek_v4 (DeepSeek-V4's cell: a page's slots of 448 FP8 nope codes and 64 bf16 "
                               "rope values, then their ue8m0 scales, one a 64-value block)");
  properties["cache_dtype"] =
      enum_schema<CacheDType>(
          "paged_kv: the spec dtype (auto, default), FP8 with k_scale / v_scale at launch, or NVFP4 (op rope: e2m1 "
          "codes two a byte, an e4m3 scale per 16 values written to k_scale_cache / v_scale_cache, k_scale / v_scale "
          "global)");
  properties["cache_index"] = enum_schema<CacheIndex>(
      "paged_kv: slot_mapping [T] (-1 skips a token) or block_tables [B, max_blocks] with varlen positions "
      "(default slot_mapping)");
  properties["page_size"] = integer_schema(1, 1 << 16, "paged_kv: tokens per cache page (required there)");
  properties["q_output"] = enum_schema<QOutput>("paged_kv: rotated q into q (inplace, default) or q_out");
  properties["cache_scale"] = enum_schema<QScale>(
      "paged_kv FP8 cache: static (k_scale / v_scale at launch, default) or per_token_head (each slot and kv head's "
      "max(amax * fl(1 / FP8 max), 1 / (FP8 max * 512)), written to k_scale_cache / v_scale_cache [pages * "
      "page_size, Hkv]; op rope)");
  properties["q_output_dtype"] = enum_schema<CacheDType>(
      "q_out's element type: the spec dtype (auto, default) or FP8, not nvfp4 (q_out only: output separate or padded_bhsd, "
      "or q_output separate), stored as fp8(q * (1 / scale))");
  properties["q_scale"] = enum_schema<QScale>(
      "FP8 q_out's scale: static (q_scale at launch, default), per_token_head (max(amax * fl(1 / FP8 max), 1 / (FP8 max "
      "* 512)) of each head, written to q_scale_out [T, Hq]; op rope) or per_token (the same over all of a token's q "
      "heads, q_scale_out [T]; op rope, no qk_norm or scope all)");
  properties["scale_rounding"] = enum_schema<ScaleRounding>(
      "computed FP8 scales (q_scale or cache_scale not static): as computed (none, default) or rounded up to a power of "
      "two (ue8m0: DeepSeek's scale_fmt, vLLM's use_ue8m0)");
  properties["angles"] = enum_schema<AnglesSource>(
      "where cos/sin come from: computed from the rope block (default) or the caller's cos_sin_cache "
      "[cos_sin_cache_rows, rotary_dim] gathered by position (rope block {\"rope_type\": \"default\"} only; op rope; "
      "mrope: each pair reads its stream's row; a position outside the cache rotates to NaN)");
  properties["cos_sin_dtype"] = enum_schema<DType>("angles cos_sin_cache: the cache's element type (default fp32)");
  properties["v_scale_layout"] = enum_schema<BlockScaleLayout>(
      "NVFP4 cache: V's block scales within a page and head: linear (default, as K's) or interleave4 (TensorRT-LLM's "
      "4-token interleave that trtllm-gen's SM100 attention reads; hnd pages of a multiple of 4 tokens)");
  ordered_json paged_keys = ordered_json::array();
  for (const char* key : {"cache_layout", "cache_dtype", "cache_index", "page_size", "q_output", "cache_scale",
                          "v_scale_layout"})
    paged_keys.push_back({{"required", ordered_json::array({key})}});
  ordered_json paged_needs_page_size{
      {"if", {{"properties", {{"output", {{"const", "paged_kv"}}}}}, {"required", ordered_json::array({"output"})}}},
      {"then", {{"required", ordered_json::array({"page_size"})}}},
      {"else", {{"not", {{"anyOf", paged_keys}}}}}};
  ordered_json block_tables_need_varlen{
      {"if", {{"properties", {{"cache_index", {{"const", "block_tables"}}}}},
              {"required", ordered_json::array({"cache_index"})}}},
      {"then", {{"properties", {{"positions", {{"const", "varlen"}}}}}, {"required", ordered_json::array({"positions"})}}}};
  ordered_json padded_needs_varlen{
      {"if", {{"properties", {{"output", {{"const", "padded_bhsd"}}}}}, {"required", ordered_json::array({"output"})}}},
      {"then", {{"properties", {{"positions", {{"const", "varlen"}}}}}, {"required", ordered_json::array({"positions"})}}}};
  ordered_json mrope_needs_section{
      {"if", {{"properties", {{"positions", {{"const", "mrope"}}}}}, {"required", ordered_json::array({"positions"})}}},
      {"then", {{"required", ordered_json::array({"mrope_section"})}}},
      {"else", {{"not", {{"anyOf", ordered_json::array({{{"required", ordered_json::array({"mrope_section"})}},
                                                        {{"required", ordered_json::array({"mrope_interleaved"})}}})}}}}}};
  ordered_json axes_needs_block{
      {"if", {{"properties", {{"positions", {{"const", "axes"}}}}}, {"required", ordered_json::array({"positions"})}}},
      {"then", {{"required", ordered_json::array({"axes"})}}},
      {"else", {{"not", {{"required", ordered_json::array({"axes"})}}}}}};
  return {{"description", "how q/k/v arrive and leave"},
          {"type", "object"},
          {"properties", properties},
          {"additionalProperties", false},
          {"allOf", ordered_json::array({padded_needs_varlen, mrope_needs_section, axes_needs_block,
                                          paged_needs_page_size, block_tables_need_varlen})}};
}

}  // namespace

std::string spec_schema_json() {
  ordered_json properties;
  properties["name"] = {{"description", "free text, part of the hash"}, {"type", "string"},
                        {"minLength", 1}};
  std::string op_summary;
  for (const auto& row : enum_table<OpKind>())
    op_summary += (op_summary.empty() ? "" : "; ") + std::string(spec_detail::spec_op(row.value).summary);
  properties["op"] = enum_schema<OpKind>(op_summary);
  properties["head_dim"] = integer_schema(1, kMaxHeadDim, "D, elements per head");
  ordered_json rotary = integer_schema(2, kMaxHeadDim, "d, rotated elements (even, <= head_dim; default head_dim)");
  rotary["multipleOf"] = 2;
  properties["rotary_dim"] = rotary;
  properties["partial_rotary_factor"] = {
      {"description", "rotary_dim = floor(head_dim * f) when rotary_dim is not given"},
      {"type", "number"}, {"exclusiveMinimum", 0}, {"maximum", 1}};
  properties["num_q_heads"] = integer_schema(1, kMaxHeads, "Hq");
  properties["num_kv_heads"] = integer_schema(1, kMaxHeads, "Hkv, divides num_q_heads");
  properties["layout"] = enum_schema<Layout>("rotation pairing: neox (i, i+d/2) or interleaved (2i, 2i+1)");
  properties["rotary_slice"] = enum_schema<RotarySlice>(
      "where a head's rotary_dim rotated elements sit: its first d (leading, the default) or its last d "
      "(trailing: DeepSeek-V4's [nope | rope] heads)");
  properties["inverse"] = {
      {"description", "rotate by minus each angle (nanochat: rotate_half is cat((x2, -x1))); op rope, computed angles; "
                      "default false"},
      {"type", "boolean"}};
  properties["hadamard"] = {
      {"description", "after the rotation, a Walsh-Hadamard transform of each q and k head scaled by "
                      "1/sqrt(head_dim) (DeepSeek-V3.2's indexer rotate_activation, before FP8); op rope, head_dim a "
                      "power of 2 whose lanes fit a warp; default false"},
      {"type", "boolean"}};
  properties["dtype"] = enum_schema<DType>("storage type of q/k/v");
  properties["max_position_embeddings"] = integer_schema(1, kMaxPositions, "M");
  properties["angle"] = enum_schema<AnglePrecision>("angle precision (default fp32)");
  properties["rope"] = {{"$ref", "#/$defs/rope"}};
  for (const auto& row : enum_table<OpKind>())
    if (const auto schema = spec_detail::spec_op(row.value).schema) schema(properties);
  properties["io"] = {{"$ref", "#/$defs/io"}};
  properties["qk_norm"] = {
      {"description", "RMSNorm (or LayerNorm) of q and k heads before the rotation (after the bias); absent: none"},
      {"type", "object"},
      {"required", ordered_json::array({"type"})},
      {"properties",
       {{"type", enum_schema<NormType>("rmsnorm: x / sqrt(mean(x^2) + eps); layernorm: (x - mean) / sqrt(var + "
                                       "eps), scope head (an indexer's k_norm)")},
        {"eps", {{"description", "added to mean(x^2), or to the variance (default 1e-6)"}, {"type", "number"},
                 {"exclusiveMinimum", 0}, {"maximum", 1}}},
        {"weight", enum_schema<NormWeight>(
                       "per_head: a weight for q and one for k, given at launch: head_dim long (scope head), "
                       "Hq*head_dim and Hkv*head_dim (scope all) (default)")},
        {"weight_offset", {{"description", "scale by (weight_offset + w): Gemma uses 1.0 (default 0)"},
                           {"type", "number"}, {"minimum", -16}, {"maximum", 16}}},
        {"bias", enum_schema<NormWeight>("layernorm: per_head adds a bias for q and one for k, given at launch "
                                         "(q_norm_bias, k_norm_bias: head_dim long); none (default)")},
        {"scope", enum_schema<NormScope>("head: each head over its head_dim (default); all: a token's q heads "
                                         "together over Hq*head_dim, its k heads over Hkv*head_dim")},
        {"heads", enum_schema<NormHeads>("q_and_k (default), or k: only the k heads are normed (an indexer's "
                                         "k_norm), q passes as it is")}}},
      {"additionalProperties", false}};
  ordered_json schema{{"$schema", "https://json-schema.org/draft/2020-12/schema"},
                      {"title", "ropejit spec"},
                      {"description", "One RoPE operator; see docs/spec.md"},
                      {"type", "object"},
                      {"required", strings(spec_required_keys())},
                      {"properties", properties},
                      {"additionalProperties", false},
                      {"$defs", {{"rope", rope_schema()}, {"io", io_schema()}}}};
  return pretty_json_text(schema);
}

}  // namespace ropejit
