// A sparse-attention indexer's rotation (DeepSeek-V3.2's lightning indexer, GLM-5's, AXK2's): its
// own heads (index_n_heads q heads, one k head, index_head_dim each) and pairing, the model's rope
// block. transformers 5.24's *Indexer.forward: q = wq_b(q_resid).view(..., n_heads, head_dim);
// k = k_norm(wk(x)); q_rot, q_pass = split(q, [qk_rope_head_dim, rest]); the same for k; then
// apply_rotary_pos_emb (neox) or apply_rotary_pos_emb_interleave with the model's cos and sin;
// k_norm (LayerNorm with a bias, k alone) imports as the spec's qk_norm.
// DeepSeek-V4's indexer (modeling_deepseek_v4.py DeepseekV4Indexer.forward) rotates its queries at
// the token positions and its compressed keys at window positions i * compress_rate +
// first_window_position, both with the "compress" rope block of head_dim * partial_rotary_factor
// (the main attention's rotation: the trailing slice, interleaved); the compressors' keys too.

#include <cmath>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include "hf_context.h"
#include "spec_json.h"

namespace ropejit {

using nlohmann::json;

namespace {

// spec[field] from the config's size `key`, an error naming the key when absent or not a size.
void import_size(const json& text, const char* key, const char* field, HfContext& ctx, json& spec) {
  const std::string pointer = std::string("/") + field;
  const json* value = HfContext::member(text, key);
  if (!value) {
    ctx.error(ctx.path(key), pointer, "missing required key: the indexer's size (its forward reads it)");
  } else if (auto n = ctx.integer(*value, ctx.path(key), 1, pointer)) {
    spec[field] = *n;
    ctx.source(pointer, ctx.path(key));
  }
}

}  // namespace

void import_indexer_shape(const json& text, const ModelFamily& family, HfContext& ctx, json& spec) {
  static constexpr std::pair<const char*, const char*> kSizes[] = {
      {"index_n_heads", "num_q_heads"}, {"index_head_dim", "head_dim"}, {"qk_rope_head_dim", "rotary_dim"}};
  for (const auto& [key, field] : kSizes) import_size(text, key, field, ctx, spec);
  spec["num_kv_heads"] = 1;  // wk: hidden_size -> index_head_dim, one k head every q head reads
  ctx.source("/num_kv_heads", ctx.path("index_head_dim"));
  ctx.source("/layout", ctx.path("model_type"));  // the caller writes the indexer's layout
  if (family.indexer.slice != RotarySlice::leading) {
    spec["rotary_slice"] = std::string(to_string(family.indexer.slice));
    ctx.source("/rotary_slice", ctx.path("model_type"));
  }
  // k_norm = nn.LayerNorm(index_head_dim, eps=1e-6): weight and bias, k alone; q has no norm.
  spec["qk_norm"] = {{"type", "layernorm"}, {"eps", family.indexer.k_norm_eps}, {"weight", "per_head"},
                     {"bias", "per_head"}, {"heads", "k"}};
  ctx.source("/qk_norm", ctx.path("model_type"));
}

IndexerPart indexer_part(const ModelFamily& family, std::string_view model_type, std::string_view layer_type,
                         OpKind op) {
  const bool keys = layer_type == kIndexerKeysLayerType || layer_type == kCompressorLayerType;
  IndexerPart part;
  part.indexer = layer_type == kIndexerLayerType || keys;
  part.apart = part.indexer && family.indexer.keys_apart;
  const std::string type = show_json(json(std::string(layer_type))), model = show_json(json(std::string(model_type)));
  if (part.indexer && !family.indexer.present)
    throw SpecError({{"layer_type", fmt::format("{} is not allowed: model_type {} has no sparse-attention indexer in "
                                                "ropejit's family table (those with one: {})",
                                                type, model, model_types_where(has_indexer))}});
  if (keys && !family.indexer.keys_apart)
    throw SpecError({{"layer_type", fmt::format("{} is not allowed: model_type {}'s indexer rotates its queries and "
                                                "keys at the same positions, one launch: layer_type \"indexer\" "
                                                "(keys apart: {})",
                                                type, model, model_types_where(has_indexer_keys_apart))}});
  if (part.apart && op != OpKind{})
    throw SpecError({{"op", fmt::format("{} is not allowed with layer_type {}: each of its tensors rotates alone "
                                        "(the import writes the op)",
                                        show_json(json(std::string(to_string(op)))), type)}});
  return part;
}

void import_indexer_apart(const json& text, const ModelFamily& family, std::string_view layer_type, HfContext& ctx,
                          json& spec) {
  constexpr OpKind kOneTensorOp = OpKind::rope_tensor;  // q and keys at their own positions: a launch each
  spec["op"] = std::string(to_string(kOneTensorOp));
  ctx.source("/op", ctx.path("model_type"));
  spec["rotary_slice"] = std::string(to_string(family.indexer.slice));
  ctx.source("/rotary_slice", ctx.path("model_type"));
  // HF sizes cos/sin from config.head_dim * partial_rotary_factor (1 when absent) whatever the
  // rotated tensor's width: the rotation's width is fixed before the indexer's head_dim replaces
  // the attention's (wider than the indexer's head: the spec's validation names it).
  if (spec.contains("head_dim") && spec["head_dim"].is_number() && !spec.contains("rotary_dim")) {
    const auto fraction = spec.find("partial_rotary_factor");
    const bool given = fraction != spec.end() && fraction->is_number();
    spec["rotary_dim"] =
        static_cast<int64_t>(std::floor(spec["head_dim"].get<double>() * (given ? fraction->get<double>() : 1.0)));
    ctx.source("/rotary_dim", ctx.path(given ? "partial_rotary_factor" : "head_dim"));
    if (given) spec.erase("partial_rotary_factor");
  }
  // The compressor's keys keep the attention's head_dim; the indexer's take index_head_dim.
  if (layer_type != kCompressorLayerType) import_size(text, "index_head_dim", "head_dim", ctx, spec);
  if (layer_type == kIndexerLayerType) {  // q_b_proj: index_n_heads heads of index_head_dim
    import_size(text, "index_n_heads", "num_q_heads", ctx, spec);
  } else {  // kv_proj: one compressed key a window
    spec["num_q_heads"] = 1;
    ctx.source("/num_q_heads", ctx.path("model_type"));
  }
  spec["num_kv_heads"] = 1;  // the op reads one tensor; the field stays the spec's
  spec.erase("qk_norm");
}

}  // namespace ropejit
