// HF import of the per-head QK RMSNorm: Qwen3 (q_norm / k_norm over head_dim, eps from
// rms_norm_eps) and Gemma 3 ((1 + w), text_config, the local layers' base named in a warning).
// Configs shaped like transformers' Qwen3Config / Gemma3Config, with the 8B / 12B sizes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf_import.h"  // private: spec_from_hf, the HF importer's qk_norm reading under test
#include "ropejit/spec.h"
#include "support/repo_paths.h"

namespace ropejit {
namespace {

using nlohmann::json;

TEST(HfImportQkNorm, Qwen3NormsEveryHeadBeforeRope) {
  const json config = json::parse(R"({"model_type": "qwen3", "attention_bias": false, "head_dim": 128,
    "hidden_size": 4096, "max_position_embeddings": 40960, "num_attention_heads": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000})");
  const Spec spec = spec_from_hf(config, HfImportOptions{"qwen3-8b", DType::bf16, std::nullopt});
  EXPECT_TRUE(spec.qk_norm.enabled);
  EXPECT_EQ(spec.qk_norm.eps, 1e-6);
  EXPECT_EQ(spec.qk_norm.weight, NormWeight::per_head);
  EXPECT_EQ(spec.qk_norm.weight_offset, 0.0);
  EXPECT_EQ(spec_hash(spec), spec_hash(load_spec_file(test::source_dir() + "/specs/qwen3-8b.json")));

  // With a bias the norm is in the spec, so the bias fuses (bias, then norm, then RoPE).
  json biased = config;
  biased["attention_bias"] = true;
  EXPECT_TRUE(spec_from_hf(biased, HfImportOptions{}).io.qkv_bias);
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

}  // namespace
}  // namespace ropejit
