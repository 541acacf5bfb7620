// What an HF attention does to q and k between the projection and RoPE, imported where a spec
// can fuse it: the QKV bias (packed input, fused form) and the QK RMSNorm (qk_norm), unless a
// step no spec expresses (a LayerNorm, OLMo's clamp) runs between them.
#include <fmt/core.h>

#include "hf_context.h"
#include "spec_json.h"

namespace ropejit {

using nlohmann::json;

namespace {

// The config key of OLMo's clip_qkv when it is set (not null): q, k and v are clamped after the
// projection (and the norm) and before RoPE, which no spec expresses; else empty.
std::string clip_path(const json& text, const ModelFamily& family, const HfContext& ctx) {
  const json* clip = family.clip_key.empty() ? nullptr : HfContext::member(text, family.clip_key);
  return clip && !clip->is_null() ? ctx.path(family.clip_key) : std::string();
}

}  // namespace

void import_bias(const json& text, const ModelFamily& family, HfContext& ctx, json& spec) {
  bool bias = family.bias_default;
  std::string bias_path = ctx.path("model_type");
  for (std::string_view key : family.bias_keys) {
    const json* value = HfContext::member(text, key);
    if (!value) continue;
    bias_path = ctx.path(key);
    bias = ctx.boolean(*value, bias_path, "/io/qkv_bias").value_or(false);
    break;
  }
  if (!bias) return;
  if (const std::string clip = clip_path(text, family, ctx); !clip.empty()) {
    ctx.warn(bias_path, fmt::format("the QKV bias is not fused: {} clamps q and k between the bias and RoPE, so "
                                    "q and k must arrive biased and clamped", clip));
    return;
  }
  // A LayerNorm between the bias and the rotation (StableLM, Cohere) is no spec's qk_norm: keep
  // the separate form. (An RMSNorm family's norm is in the spec, after the bias.)
  const json* norm = family.qk_norm_key.empty() ? nullptr : HfContext::member(text, family.qk_norm_key);
  if (norm && ctx.boolean(*norm, ctx.path(family.qk_norm_key), "").value_or(false)) {
    ctx.warn(bias_path, fmt::format("the QKV bias is not fused: a QK-norm ({}) runs between the "
                                    "bias and RoPE, so q and k must arrive biased and normalized",
                                    ctx.path(family.qk_norm_key)));
    return;
  }
  // Merged into io: the rope block may already have set the positions form (mrope).
  spec["io"]["input"] = "packed_qkv";
  spec["io"]["output"] = "inplace";
  spec["io"]["qkv_bias"] = true;
  ctx.source("/io", bias_path);
}

// The RMSNorm of q and k: per head (Qwen3, Gemma 3: a head_dim weight for q and one for k) or
// over all heads (OLMo 2: weights of Hq and Hkv heads), eps from rms_norm_eps (HF's default
// 1e-6), Gemma's (1 + w). Gemma 3's local layers also use rope_local_base_freq: said in a
// warning, since one spec holds one theta.
void import_qk_norm(const json& text, const ModelFamily& family, HfContext& ctx, json& spec) {
  if (!family.qk_rmsnorm) return;
  if (const std::string clip = clip_path(text, family, ctx); !clip.empty()) {
    ctx.warn(clip, "the QK-norm is not fused: q and k are clamped between the norm and RoPE, so they must "
                   "arrive normalized and clamped (this spec only rotates)");
    return;
  }
  if (const json* used = family.qk_norm_unread_key.empty() ? nullptr : HfContext::member(text, family.qk_norm_unread_key))
    if (used->is_boolean() && !used->get<bool>())
      ctx.warn(ctx.path(family.qk_norm_unread_key),
               fmt::format("false is ignored: {} normalizes q and k whatever it says, and so does this spec",
                           family.source));
  json norm = {{"type", "rmsnorm"}, {"eps", family.rms_norm_eps_default},
               {"weight", family.qk_norm_weightless ? "none" : "per_head"},
               {"weight_offset", family.qk_norm_weight_offset},
               {"scope", std::string(to_string(family.qk_norm_scope))}};
  ctx.source("/qk_norm", ctx.path("model_type"));
  if (const json* eps = HfContext::member(text, "rms_norm_eps")) {
    if (auto v = ctx.positive(*eps, ctx.path("rms_norm_eps"), "/qk_norm/eps")) {
      norm["eps"] = *v;
      ctx.source("/qk_norm/eps", ctx.path("rms_norm_eps"));
    }
  }
  spec["qk_norm"] = norm;
  if (!family.qk_norm_note.empty()) ctx.warn(ctx.path("model_type"), std::string(family.qk_norm_note));
  const json* local = HfContext::member(text, "rope_local_base_freq");
  if (local && ctx.positive(*local, ctx.path("rope_local_base_freq"), ""))
    ctx.warn(ctx.path("rope_local_base_freq"),
             fmt::format("{}: the sliding-window layers rotate with this base and no scaling; this spec is "
                         "the global layers' (write the local layers' spec with rope_theta {} and "
                         "rope_type default)", show_json(*local), show_json(*local)));
}

}  // namespace ropejit
