// HF import of the QK RMSNorm: per head, Qwen3 (q_norm / k_norm over head_dim, eps from
// rms_norm_eps) and Gemma 3 ((1 + w), text_config, the local layers' base named in a warning);
// over all heads (scope all), OLMo 2 and 3, OLMoE and MiniMax-M2 (q_norm over Hq * head_dim of
// the projection, before the reshape). Configs shaped like transformers' config classes, with
// the published sizes.
// ropejit-tier: unit
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf_import.h"  // private: spec_from_hf, the HF importer's qk_norm reading under test
#include "ropejit/spec.h"
#include "support/repo_paths.h"

namespace ropejit {
namespace {

using nlohmann::json;

// `config` imports as specs/<name>.json, with a weighted, unoffset norm of `scope`; with an
// attention_bias the bias fuses (bias, then norm, then RoPE: HF adds it in the projection).
void expect_shipped_norm_spec(const json& config, const std::string& name, NormScope scope) {
  const Spec spec = spec_from_hf(config, HfImportOptions{name, DType::bf16, std::nullopt});
  EXPECT_TRUE(spec.qk_norm.enabled);
  EXPECT_EQ(spec.qk_norm.scope, scope);
  EXPECT_EQ(spec.qk_norm.eps, 1e-6);
  EXPECT_EQ(spec.qk_norm.weight, NormWeight::per_head);
  EXPECT_EQ(spec.qk_norm.weight_offset, 0.0);
  EXPECT_EQ(spec_hash(spec), spec_hash(load_spec_file(test::source_dir() + "/specs/" + name + ".json")));
  json biased = config;
  biased["attention_bias"] = true;
  const Spec fused = spec_from_hf(biased, HfImportOptions{});
  EXPECT_TRUE(fused.io.qkv_bias);
  EXPECT_EQ(fused.qk_norm.scope, scope);
}

TEST(HfImportQkNorm, Qwen3NormsEveryHeadBeforeRope) {
  const json config = json::parse(R"({"model_type": "qwen3", "attention_bias": false, "head_dim": 128,
    "hidden_size": 4096, "max_position_embeddings": 40960, "num_attention_heads": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000})");
  expect_shipped_norm_spec(config, "qwen3-8b", NormScope::head);
  // A bad eps is named by its config key.
  json bad = config;
  bad["rms_norm_eps"] = -1;
  try {
    spec_from_hf(bad, HfImportOptions{});
    FAIL() << "accepted a negative rms_norm_eps";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.issues().front().pointer, "rms_norm_eps") << e.what();
  }
}

TEST(HfImportQkNorm, Gemma3ScalesByOnePlusWeightAndNamesTheLocalBase) {
  const json config = json::parse(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
    "head_dim": 256, "hidden_size": 3840, "num_attention_heads": 16, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}})");
  std::vector<std::string> warnings;
  const Spec spec = spec_from_hf(config, HfImportOptions{"gemma-3-12b", DType::bf16, std::nullopt}, &warnings);
  EXPECT_TRUE(spec.qk_norm.enabled);
  EXPECT_EQ(spec.qk_norm.weight_offset, 1.0);
  EXPECT_EQ(spec.head_dim, 256);
  EXPECT_EQ(spec.rope.type, RopeType::linear);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("text_config.rope_local_base_freq"), std::string::npos) << warnings[0];
  EXPECT_EQ(spec_hash(spec), spec_hash(load_spec_file(test::source_dir() + "/specs/gemma-3-12b.json")));
  // The local layers' spec: the same with the local base and no scaling.
  const Spec local = load_spec_file(test::source_dir() + "/specs/gemma-3-12b-local.json");
  EXPECT_EQ(local.rope.type, RopeType::default_);
  EXPECT_EQ(local.rope.theta, 10000.0);
  EXPECT_EQ(local.qk_norm.weight_offset, 1.0);
}

// OLMo-2-1124-7B's sizes: Olmo2Attention's q_norm = Olmo2RMSNorm(num_attention_heads * head_dim).
TEST(HfImportQkNorm, Olmo2NormsAllHeadsOfTheProjection) {
  const json config = json::parse(R"({"model_type": "olmo2", "attention_bias": false, "hidden_size": 4096,
    "max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 500000})");
  expect_shipped_norm_spec(config, "olmo-2-7b", NormScope::all);
  // Olmo2Config's defaults where the config is silent: rms_norm_eps 1e-5, 2048 positions.
  json bare = config;
  bare.erase("rms_norm_eps");
  bare.erase("max_position_embeddings");
  const Spec defaults = spec_from_hf(bare, HfImportOptions{});
  EXPECT_EQ(defaults.qk_norm.eps, 1e-5);
  EXPECT_EQ(defaults.max_position_embeddings, 2048);
}

// A v4 Olmo 3 config: Olmo3Config gives rope_scaling to the full_attention layers only; the
// sliding_attention layers rotate with rope_type default at its default_theta 500000.
TEST(HfImportQkNorm, Olmo3ScalesTheFullAttentionLayersOnly) {
  const json config = json::parse(R"({"model_type": "olmo3", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 32, "num_hidden_layers": 8, "max_position_embeddings": 65536, "rms_norm_eps": 1e-06,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    "rope_scaling": {"attention_factor": 1.2079441541679836, "beta_fast": 32, "beta_slow": 1, "factor": 8.0,
                     "original_max_position_embeddings": 8192, "rope_type": "yarn"},
    "rope_theta": 500000, "sliding_window": 4096})");
  try {
    spec_from_hf(config, HfImportOptions{});
    FAIL() << "imported one spec for layers HF rotates differently";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.issues().front().pointer, "rope_scaling") << e.what();
    EXPECT_NE(std::string(e.what()).find("full_attention layers only"), std::string::npos) << e.what();
  }
  HfImportOptions options;
  options.layer_type = "full_attention";
  const Spec full = spec_from_hf(config, options);
  EXPECT_EQ(full.rope.type, RopeType::yarn);
  EXPECT_EQ(full.rope.factor, 8.0);
  EXPECT_EQ(full.qk_norm.scope, NormScope::all);
  options.layer_type = "sliding_attention";
  const Spec sliding = spec_from_hf(config, options);
  EXPECT_EQ(sliding.rope.type, RopeType::default_);
  EXPECT_EQ(sliding.rope.theta, 500000.0);
  EXPECT_EQ(sliding.qk_norm.scope, NormScope::all);
  EXPECT_EQ(hf_rope_layer_types(config), (std::vector<std::string>{"sliding_attention", "full_attention"}));
  const auto layers = hf_layer_rope_map(config);
  ASSERT_EQ(layers.size(), 8u);
  EXPECT_EQ(layers[3], std::optional<std::string>("full_attention"));
  EXPECT_EQ(layers[4], std::optional<std::string>("sliding_attention"));
  // HF reads rope_theta once, for full_attention: the sliding layers keep the class default.
  json other_base = config;
  other_base["rope_theta"] = 10000;
  std::vector<std::string> warnings;
  const Spec quirk = spec_from_hf(other_base, options, &warnings);
  EXPECT_EQ(quirk.rope.theta, 500000.0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("default_theta 500000"), std::string::npos) << warnings[0];
  // Without rope_scaling and at the default base every layer rotates alike: one spec.
  json unscaled = config;
  unscaled["rope_scaling"] = nullptr;
  EXPECT_EQ(spec_from_hf(unscaled, HfImportOptions{}).rope.type, RopeType::default_);
}

// MiniMax-M2's sizes: partial rotary through the legacy rotary_dim, q/k/v_proj never biased, and
// q_norm over all heads whatever use_qk_norm says (MiniMaxM2Attention does not read it).
TEST(HfImportQkNorm, MiniMaxM2NormsAllHeadsAndRotatesHalfOfEach) {
  const json config = json::parse(R"({"model_type": "minimax_m2", "head_dim": 128, "hidden_size": 3072,
    "num_attention_heads": 48, "num_key_value_heads": 8, "max_position_embeddings": 196608, "rms_norm_eps": 1e-06,
    "rope_theta": 5000000, "rotary_dim": 64, "use_qk_norm": true, "qk_norm_type": "per_layer"})");
  std::vector<std::string> warnings;
  const Spec spec = spec_from_hf(config, HfImportOptions{}, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.rotary_dim, 64);
  EXPECT_EQ(spec.num_q_heads, 48);
  EXPECT_EQ(spec.num_kv_heads, 8);
  EXPECT_EQ(spec.rope.theta, 5000000.0);
  EXPECT_EQ(spec.qk_norm.scope, NormScope::all);
  json odd = config;
  odd["use_qk_norm"] = false;
  odd["attention_bias"] = true;  // not a MiniMaxM2Config key: the projections have no bias
  const Spec still = spec_from_hf(odd, HfImportOptions{}, &warnings);
  EXPECT_EQ(still.qk_norm.scope, NormScope::all);
  EXPECT_FALSE(still.io.qkv_bias);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("use_qk_norm"), std::string::npos) << warnings[0];
}

// OLMoE clamps q, k, v (clip_qkv) after the norm and before RoPE: nothing can be fused then.
TEST(HfImportQkNorm, OlmoeClipQkvLeavesBiasAndNormUnfused) {
  const json config = json::parse(R"({"model_type": "olmoe", "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 16, "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "attention_bias": true, "clip_qkv": null})");
  const Spec fused = spec_from_hf(config, HfImportOptions{});
  EXPECT_EQ(fused.qk_norm.scope, NormScope::all);
  EXPECT_TRUE(fused.io.qkv_bias);
  json clipped = config;
  clipped["clip_qkv"] = 8.0;
  std::vector<std::string> warnings;
  const Spec rope_only = spec_from_hf(clipped, HfImportOptions{}, &warnings);
  EXPECT_FALSE(rope_only.qk_norm.enabled);
  EXPECT_FALSE(rope_only.io.qkv_bias);
  ASSERT_EQ(warnings.size(), 2u);
  for (const std::string& w : warnings) EXPECT_NE(w.find("clip_qkv"), std::string::npos) << w;
}

}  // namespace
}  // namespace ropejit
