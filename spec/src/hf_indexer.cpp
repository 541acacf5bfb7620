// A sparse-attention indexer's rotation (DeepSeek-V3.2's lightning indexer, GLM-5's, AXK2's): its
// own heads (index_n_heads q heads, one k head, index_head_dim each) and pairing, the model's rope
// block. transformers 5.24's *Indexer.forward: q = wq_b(q_resid).view(..., n_heads, head_dim);
// k = k_norm(wk(x)); q_rot, q_pass = split(q, [qk_rope_head_dim, rest]); the same for k; then
// apply_rotary_pos_emb (neox) or apply_rotary_pos_emb_interleave with the model's cos and sin;
// k_norm (LayerNorm with a bias, k alone) imports as the spec's qk_norm.

#include "hf_context.h"
#include "spec_json.h"

namespace ropejit {

using nlohmann::json;

void import_indexer_shape(const json& text, const ModelFamily& family, HfContext& ctx, json& spec) {
  static constexpr std::pair<const char*, const char*> kSizes[] = {
      {"index_n_heads", "num_q_heads"}, {"index_head_dim", "head_dim"}, {"qk_rope_head_dim", "rotary_dim"}};
  for (const auto& [key, field] : kSizes) {
    const std::string pointer = std::string("/") + field;
    const json* value = HfContext::member(text, key);
    if (!value) {
      ctx.error(ctx.path(key), pointer, "missing required key: the indexer's size (its forward reads it)");
    } else if (auto n = ctx.integer(*value, ctx.path(key), 1, pointer)) {
      spec[field] = *n;
      ctx.source(pointer, ctx.path(key));
    }
  }
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

}  // namespace ropejit
