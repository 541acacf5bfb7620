// HF import of multimodal RoPE: Qwen2-VL / Qwen2.5-VL rope_scaling.mrope_section (contiguous
// sections) and Qwen3-VL text_config.rope_scaling.mrope_interleaved, each error named by its
// config key. The configs below are shaped like transformers' Qwen2_5_VLConfig / Qwen3VLConfig
// (members that do not affect RoPE left out); their sizes are the 7B / 8B models'.
// ropejit-tier: unit
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf_families.h"  // private: model_families, each multimodal row's default section
#include "hf_import.h"  // private: spec_from_hf, the HF importer's mrope reading under test
#include "support/repo_paths.h"
#include "ropejit/spec.h"

namespace ropejit {
namespace {

using nlohmann::json;

json qwen2_5_vl() {
  return json::parse(R"({"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "num_key_value_heads": 4, "max_position_embeddings": 128000, "rope_theta": 1000000.0,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})");
}

json qwen3_vl() {
  return json::parse(R"({"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text",
    "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 262144, "rope_theta": 5000000, "attention_bias": false,
    "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20], "rope_type": "default"}}})");
}

/// The config key and message of the first issue of an import that must fail.
std::pair<std::string, std::string> first_issue(const json& config) {
  try {
    spec_from_hf(config, HfImportOptions{});
  } catch (const SpecError& e) {
    return {e.issues().front().pointer, e.issues().front().message};
  }
  return {"(accepted)", ""};
}

TEST(HfImportMrope, Qwen25VlContiguousSectionsWithFusedBias) {
  const Spec spec = spec_from_hf(qwen2_5_vl(), HfImportOptions{"qwen2.5-vl-7b", DType::bf16, std::nullopt});
  EXPECT_EQ(spec.io.positions, PositionsForm::mrope);
  EXPECT_EQ(spec.io.mrope_section, (std::vector<int>{16, 24, 24}));
  EXPECT_FALSE(spec.io.mrope_interleaved);
  EXPECT_EQ(spec.rope.type, RopeType::default_);  // HF: type "mrope" is default RoPE with sections
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_TRUE(spec.io.qkv_bias);  // Qwen2 attention: q/k/v_proj with bias, fused with the sections
  EXPECT_EQ(spec.io.input, InputForm::packed_qkv);
  // The shipped spec is this import.
  EXPECT_EQ(spec_hash(spec), spec_hash(load_spec_file(test::source_dir() + "/specs/qwen2.5-vl-7b.json")));
}

TEST(HfImportMrope, Qwen3VlInterleavedInTextConfig) {
  const Spec spec = spec_from_hf(qwen3_vl(), HfImportOptions{});
  EXPECT_EQ(spec.io.positions, PositionsForm::mrope);
  EXPECT_EQ(spec.io.mrope_section, (std::vector<int>{24, 20, 20}));
  EXPECT_TRUE(spec.io.mrope_interleaved);
  EXPECT_EQ(spec.num_q_heads, 32);
  EXPECT_EQ(spec.num_kv_heads, 8);
  EXPECT_EQ(spec.rope.theta, 5e6);
  EXPECT_FALSE(spec.io.qkv_bias);
}

TEST(HfImportMrope, ErrorsNameTheConfigKey) {
  json wrong_sum = qwen2_5_vl();
  wrong_sum["rope_scaling"]["mrope_section"] = {16, 24, 25};
  auto [key, message] = first_issue(wrong_sum);
  EXPECT_EQ(key, "rope_scaling.mrope_section");
  EXPECT_NE(message.find("summing to rotary_dim / 2 = 64"), std::string::npos) << message;

  // HF reads no mrope_interleaved key (each family's module fixes the form): a value is ignored.
  json bad_flag = qwen3_vl();
  bad_flag["text_config"]["rope_scaling"]["mrope_interleaved"] = "yes";
  std::vector<std::string> warnings;
  EXPECT_TRUE(spec_from_hf(bad_flag, HfImportOptions{}, &warnings).io.mrope_interleaved);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.back().find("text_config.rope_scaling.mrope_interleaved"), std::string::npos) << warnings.back();
  json no_flag = qwen3_vl();
  no_flag["text_config"]["rope_scaling"].erase("mrope_interleaved");
  EXPECT_TRUE(spec_from_hf(no_flag, HfImportOptions{}).io.mrope_interleaved);  // always, as HF's module
  json contiguous = qwen2_5_vl();
  contiguous["rope_scaling"]["mrope_interleaved"] = true;
  EXPECT_FALSE(spec_from_hf(contiguous, HfImportOptions{}).io.mrope_interleaved);
  // Qwen3.5's [11, 11, 10] over 32 pairs: height takes pairs 1 ... 31, width 2 ... 29.
  json qwen3_5 = qwen3_vl();
  qwen3_5["text_config"]["head_dim"] = 64;
  qwen3_5["text_config"]["rope_scaling"]["mrope_section"] = {11, 11, 10};
  EXPECT_EQ(spec_from_hf(qwen3_5, HfImportOptions{}).io.mrope_section, (std::vector<int>{11, 11, 10}));

  // A one-stream family refuses the keys, naming the families that take them.
  json llama = qwen2_5_vl();
  llama["model_type"] = "llama";
  std::tie(key, message) = first_issue(llama);
  EXPECT_EQ(key, "rope_scaling.type");
  EXPECT_NE(message.find("qwen2_vl, qwen2_5_vl, qwen3_vl"), std::string::npos) << message;
}

TEST(HfImportMrope, WithoutASectionTheRotarysDefault) {
  // HF's rotary modules: self.mrope_section = config.rope_parameters.get("mrope_section", default).
  json qwen2_5 = qwen2_5_vl();
  qwen2_5["rope_scaling"].erase("mrope_section");
  Spec spec = spec_from_hf(qwen2_5, HfImportOptions{});  // rope type "mrope", no section: HF takes its default too
  EXPECT_EQ(spec.io.positions, PositionsForm::mrope);
  EXPECT_EQ(spec.io.mrope_section, (std::vector<int>{16, 24, 24}));
  EXPECT_FALSE(spec.io.mrope_interleaved);
  json qwen2_5_plain = qwen2_5;
  qwen2_5_plain.erase("rope_scaling");  // no rope block at all: the same rotary
  EXPECT_EQ(spec_from_hf(qwen2_5_plain, HfImportOptions{}).io.mrope_section, (std::vector<int>{16, 24, 24}));

  json qwen3 = qwen3_vl();
  qwen3["text_config"]["rope_scaling"].erase("mrope_section");
  spec = spec_from_hf(qwen3, HfImportOptions{});
  EXPECT_EQ(spec.io.mrope_section, (std::vector<int>{24, 20, 20}));
  EXPECT_TRUE(spec.io.mrope_interleaved);

  // Qwen3.5's text model: [11, 11, 10] over its partial rotary's 32 pairs.
  const json qwen3_5 = json::parse(R"({"model_type": "qwen3_5_text", "head_dim": 256, "hidden_size": 4096,
    "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 262144,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25}})");
  spec = spec_from_hf(qwen3_5, HfImportOptions{});
  EXPECT_EQ(spec.rotary_dim, 64);
  EXPECT_EQ(spec.io.mrope_section, (std::vector<int>{11, 11, 10}));
  EXPECT_TRUE(spec.io.mrope_interleaved);

  // Interleaved over fewer pairs than the default names: HF's slices stop at the last pair (height
  // 1, 4, ..., 31 and width 2, 5, ..., 29 of 32), temporal takes the rest; said in a warning.
  json short_head = qwen3;
  short_head["text_config"]["head_dim"] = 64;
  std::vector<std::string> warnings;
  spec = spec_from_hf(short_head, HfImportOptions{}, &warnings);
  EXPECT_EQ(spec.io.mrope_section, (std::vector<int>{11, 11, 10}));
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.back().find("[24,20,20]"), std::string::npos) << warnings.back();

  // Contiguous over other pairs: HF's torch.split raises; the import names the key and the sums.
  json glm_ocr = json::parse(R"({"model_type": "glm_ocr_text", "hidden_size": 1024, "num_attention_heads": 16,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "head_dim": 128, "rope_parameters":
    {"rope_type": "default", "rope_theta": 10000}})");
  auto [key, message] = first_issue(glm_ocr);
  EXPECT_EQ(key, "rope_parameters.mrope_section");
  EXPECT_NE(message.find("[8,12,12]"), std::string::npos) << message;
  EXPECT_NE(message.find("sums to 32 pairs, not rotary_dim / 2 = 64"), std::string::npos) << message;
  glm_ocr["head_dim"] = 64;
  spec = spec_from_hf(glm_ocr, HfImportOptions{});
  EXPECT_EQ(spec.io.mrope_section, (std::vector<int>{8, 12, 12}));
  EXPECT_EQ(spec.layout, Layout::interleaved);
}

TEST(HfImportMrope, EveryMultimodalFamilyNamesItsRotarysDefault) {
  for (const ModelFamily& family : model_families()) {
    if (!family.mrope) continue;
    ASSERT_EQ(family.mrope_default.size(), 3u) << family.model_type;
    for (int count : family.mrope_default) EXPECT_GE(count, 1) << family.model_type;
  }
}

}  // namespace
}  // namespace ropejit
