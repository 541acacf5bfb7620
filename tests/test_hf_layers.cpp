// HF import of transformers 5 configs: unknown families refused (or taken with Llama's conventions
// on request), text_config nesting, rope_parameters per layer type, and the layer -> spec map.
// ropejit-tier: unit
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf_import.h"  // private: hf_layer_rope_map and hf_rope_layer_types, the importer's layer map under test
#include "ropejit/freqs.h"
#include "ropejit/spec.h"

namespace ropejit {
namespace {

using nlohmann::json;

// Gemma 3 as transformers 5 writes it: one rope block per layer type.
json gemma3_config() {
  return json::parse(R"({
    "model_type": "gemma3_text", "hidden_size": 3840, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 256, "max_position_embeddings": 131072, "num_hidden_layers": 6, "rms_norm_eps": 1e-6,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                    "sliding_attention", "full_attention"],
    "rope_parameters": {
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
      "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}}})");
}

std::string first_pointer(const SpecError& e) { return e.issues().empty() ? "" : e.issues().front().pointer; }

TEST(HfLayers, PerLayerTypeBlockNeedsALayerType) {
  try {
    spec_from_hf(gemma3_config(), HfImportOptions{});
    FAIL() << "imported without a layer type";
  } catch (const SpecError& e) {
    EXPECT_EQ(first_pointer(e), "rope_parameters");
    EXPECT_NE(std::string(e.what()).find("sliding_attention"), std::string::npos) << e.what();
  }
}

TEST(HfLayers, EachLayerTypeGetsItsOwnBlock) {
  HfImportOptions options;
  options.layer_type = "sliding_attention";
  const Spec local = spec_from_hf(gemma3_config(), options);
  EXPECT_EQ(local.rope.type, RopeType::default_);
  EXPECT_EQ(local.rope.theta, 10000.0);
  options.layer_type = "full_attention";
  const Spec global = spec_from_hf(gemma3_config(), options);
  EXPECT_EQ(global.rope.type, RopeType::linear);
  EXPECT_EQ(global.rope.theta, 1e6);
  EXPECT_TRUE(global.qk_norm.enabled);  // the family row still applies
  options.layer_type = "chunked_attention";
  try {
    spec_from_hf(gemma3_config(), options);
    FAIL() << "an absent layer type was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(first_pointer(e), "rope_parameters.chunked_attention");
  }
}

TEST(HfLayers, LayerTypeOnASingleBlockIsRefused) {
  json config = gemma3_config();
  config["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  HfImportOptions options;
  options.layer_type = "full_attention";
  EXPECT_THROW(spec_from_hf(config, options), SpecError);
  EXPECT_NO_THROW(spec_from_hf(config, HfImportOptions{}));
}

TEST(HfLayers, LayerMapFollowsLayerTypesAndNoRopeLayers) {
  const auto map = hf_layer_rope_map(gemma3_config());
  ASSERT_EQ(map.size(), 6u);
  EXPECT_EQ(*map[0], "sliding_attention");
  EXPECT_EQ(*map[5], "full_attention");
  EXPECT_EQ(hf_rope_layer_types(gemma3_config()), (std::vector<std::string>{"sliding_attention", "full_attention"}));

  // SmolLM3: no_rope_layers[i] == 0 means layer i has no RoPE (HF: use_rope = no_rope_layers[i]).
  const json smollm3 = json::parse(R"({"model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 4, "max_position_embeddings": 65536, "num_hidden_layers": 4,
    "no_rope_layers": [1, 1, 1, 0], "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0}})");
  const auto smol = hf_layer_rope_map(smollm3);
  ASSERT_EQ(smol.size(), 4u);
  EXPECT_EQ(*smol[0], "");
  EXPECT_FALSE(smol[3].has_value());
}

TEST(HfLayers, UnknownFamilyIsRefusedUnlessAsked) {
  const json config = json::parse(R"({"model_type": "brand_new_lm", "hidden_size": 1024,
    "num_attention_heads": 8, "max_position_embeddings": 4096})");
  try {
    spec_from_hf(config, HfImportOptions{});
    FAIL() << "an unknown family was imported";
  } catch (const SpecError& e) {
    EXPECT_EQ(first_pointer(e), "model_type");
    EXPECT_NE(std::string(e.what()).find("--assume-llama"), std::string::npos) << e.what();
  }
  HfImportOptions options;
  options.assume_generic = true;
  std::vector<std::string> warnings;
  const Spec spec = spec_from_hf(config, options, &warnings);
  EXPECT_EQ(spec.layout, Layout::neox);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings.front().find("as asked"), std::string::npos) << warnings.front();
}

TEST(HfLayers, TextConfigIsReadWhereTheTopLevelHasNoHeads) {
  // Qwen2.5-VL as transformers 5 writes it: sizes and rope under text_config.
  const json config = json::parse(R"({"model_type": "qwen2_5_vl", "text_config": {
    "model_type": "qwen2_5_vl_text", "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
    "max_position_embeddings": 128000,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}}})");
  const Spec spec = spec_from_hf(config, HfImportOptions{});
  EXPECT_EQ(spec.num_q_heads, 28);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.io.positions, PositionsForm::mrope);
  EXPECT_TRUE(spec.io.qkv_bias);  // the qwen2_5_vl row: q/k/v always biased
}

TEST(HfLayers, InterleavedFamiliesOnceGuessedAsNeox) {
  for (const char* type : {"ernie4_5", "helium", "cohere2_moe"}) {
    json config = {{"model_type", type}, {"hidden_size", 1024}, {"num_attention_heads", 8},
                   {"max_position_embeddings", 4096}};
    EXPECT_EQ(spec_from_hf(config, HfImportOptions{}).layout, Layout::interleaved) << type;
  }
}

// Gemma 4 (transformers 5.24): full-attention layers take head_dim 512 through per_layer_config
// and rotate proportionally (a quarter of the pairs); sliding layers keep head_dim 256.
json gemma4_config() {
  return json::parse(R"({
    "model_type": "gemma4_text", "hidden_size": 2560, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "max_position_embeddings": 131072, "num_hidden_layers": 4,
    "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    "per_layer_config": {"01": {"head_dim": 512, "num_key_value_heads": 1}, "03": {"head_dim": 512, "num_key_value_heads": 1}},
    "rope_parameters": {
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}})");
}

TEST(HfLayers, PerLayerConfigOverridesTheLayerTypesSizes) {
  HfImportOptions options;
  options.layer_type = "full_attention";
  const Spec global = spec_from_hf(gemma4_config(), options);
  EXPECT_EQ(global.head_dim, 512);
  EXPECT_EQ(global.rotary_dim, 512);  // proportional pairs the whole head ...
  EXPECT_EQ(global.num_kv_heads, 1);
  ASSERT_TRUE(global.rope.partial_rotary_factor.has_value());  // ... and keeps its fraction for the angles
  EXPECT_EQ(*global.rope.partial_rotary_factor, 0.25);
  const FreqTable table = compute_freqs(global, FreqMode::hf_fp32);
  EXPECT_EQ(table.rotated_pairs, 64);  // floor(0.25 * 512 / 2)
  EXPECT_GT(table.inv_freq[63], 0.0);
  EXPECT_EQ(table.inv_freq[64], 0.0);
  options.layer_type = "sliding_attention";
  const Spec local = spec_from_hf(gemma4_config(), options);
  EXPECT_EQ(local.head_dim, 256);
  EXPECT_EQ(local.num_kv_heads, 4);

  // A config.json written before per_layer_config: global_head_dim for the full_attention layers.
  json flat = gemma4_config();
  flat.erase("per_layer_config");
  flat["global_head_dim"] = 512;
  flat["num_global_key_value_heads"] = 2;
  options.layer_type = "full_attention";
  EXPECT_EQ(spec_from_hf(flat, options).head_dim, 512);
  EXPECT_EQ(spec_from_hf(flat, options).num_kv_heads, 2);
  flat["attention_k_eq_v"] = false;  // HF gates the kv override on it
  EXPECT_EQ(spec_from_hf(flat, options).num_kv_heads, 4);
}

TEST(HfLayers, LayersOfOneTypeMustAgree) {
  json config = gemma4_config();
  HfImportOptions options;
  options.layer_type = "full_attention";
  config["per_layer_config"]["03"]["sliding_window"] = 512;  // not read by the import: may differ
  EXPECT_EQ(spec_from_hf(config, options).head_dim, 512);
  config["per_layer_config"]["03"]["head_dim"] = 384;
  try {
    spec_from_hf(config, options);
    FAIL() << "disagreeing layers of one type were imported";
  } catch (const SpecError& e) {
    EXPECT_EQ(first_pointer(e), "per_layer_config");
    EXPECT_NE(std::string(e.what()).find("layer 3"), std::string::npos) << e.what();
  }
}

TEST(HfLayers, SubConfigKeysAndNestedTextModels) {
  // DBRX keeps kv heads and the base in attn_config (config.json) under its own size names.
  const json dbrx = json::parse(R"({"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "max_seq_len": 32768,
    "attn_config": {"kv_n_heads": 8, "rope_theta": 500000}})");
  const Spec spec = spec_from_hf(dbrx, HfImportOptions{});
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.num_kv_heads, 8);
  EXPECT_EQ(spec.rope.theta, 500000.0);
  EXPECT_EQ(spec.max_position_embeddings, 32768);
  // Qwen2.5-Omni: the text model two levels down, with multimodal sections.
  const json omni = json::parse(R"({"model_type": "qwen2_5_omni", "thinker_config": {"text_config": {
    "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4, "max_position_embeddings": 32768,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}}}})");
  EXPECT_EQ(spec_from_hf(omni, HfImportOptions{}).io.positions, PositionsForm::mrope);
  try {
    spec_from_hf(json{{"model_type", "qwen2_5_omni"}}, HfImportOptions{});
    FAIL() << "a missing thinker text model was accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(first_pointer(e), "thinker_config.text_config");
  }
}

TEST(HfLayers, LayerMapOfADecoderSubConfig) {
  // T5Gemma 2 keeps its decoder (with layer types) under "decoder"; errors name that path.
  json config = json::parse(R"({"model_type": "t5gemma2", "decoder": {"model_type": "t5gemma2_decoder",
    "hidden_size": 2304, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "max_position_embeddings": 131072, "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}}})");
  const auto map = hf_layer_rope_map(config);
  ASSERT_EQ(map.size(), 2u);
  EXPECT_EQ(*map[1], "full_attention");
  HfImportOptions options;
  options.layer_type = "full_attention";
  EXPECT_EQ(spec_from_hf(config, options).rope.theta, 1e6);
  config["decoder"]["layer_types"] = {"conv", "full_attention"};  // LFM3: a type without a block has no RoPE
  EXPECT_FALSE(hf_layer_rope_map(config)[0].has_value());
  config["decoder"]["layer_types"] = {"sliding_attention", 7};
  try {
    hf_layer_rope_map(config);
    FAIL() << "a layer type that is no string was mapped";
  } catch (const SpecError& e) {
    EXPECT_EQ(first_pointer(e), "decoder.layer_types[1]");
  }
}

TEST(HfLayers, RopeInterleaveChoosesThePairing) {
  json config = json::parse(R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "qk_rope_head_dim": 64, "max_position_embeddings": 4096})");
  EXPECT_EQ(spec_from_hf(config, HfImportOptions{}).layout, Layout::interleaved);  // HF's default: true
  config["rope_interleave"] = false;  // HF then calls apply_rotary_pos_emb (rotate_half)
  EXPECT_EQ(spec_from_hf(config, HfImportOptions{}).layout, Layout::neox);
  config["rope_interleave"] = "no";
  EXPECT_THROW(spec_from_hf(config, HfImportOptions{}), SpecError);
  // DeepSeek-V3.2's main attention interleaves whatever the flag (its indexer rotates neox).
  config["model_type"] = "deepseek_v32";
  config["rope_interleave"] = false;
  EXPECT_EQ(spec_from_hf(config, HfImportOptions{}).layout, Layout::interleaved);
}

TEST(HfLayers, PhiMoeScalesEachLongRopeTableByItsMscale) {
  json config = json::parse(R"({"model_type": "phimoe", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
    "rope_scaling": {"type": "longrope", "short_mscale": 1.243163121016122, "long_mscale": 1.5}})");
  config["rope_scaling"]["short_factor"] = std::vector<double>(64, 1.0);
  config["rope_scaling"]["long_factor"] = std::vector<double>(64, 2.0);
  const Spec spec = spec_from_hf(config, HfImportOptions{});
  const FreqTable table = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_EQ(table.attention_factor, 1.243163121016122);  // in place of sqrt(1 + ln 32 / ln 4096)
  EXPECT_EQ(table.attention_factor_long, 1.5);
  // Another type with them: PhiMoE's forward would still scale by them, which no spec of that type does.
  json yarn = config;
  yarn["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"short_mscale", 1.1}, {"long_mscale", 1.2}};
  try {
    spec_from_hf(yarn, HfImportOptions{});
    FAIL() << "PhiMoE's yarn block with mscales was imported";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("rope_scaling.short_mscale"), std::string::npos) << e.what();
  }
  // Phi-3's rotary ignores them (HF warns): the computed factor stays, for both tables.
  config["model_type"] = "phi3";
  std::vector<std::string> warnings;
  const FreqTable phi3 = compute_freqs(spec_from_hf(config, HfImportOptions{}, &warnings), FreqMode::hf_fp32);
  EXPECT_NEAR(phi3.attention_factor, 1.1902380714238083, 1e-12);
  EXPECT_EQ(phi3.attention_factor_long, phi3.attention_factor);
  EXPECT_FALSE(warnings.empty());
}

}  // namespace
}  // namespace ropejit
