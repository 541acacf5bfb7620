// HF import of a sparse-attention indexer's rotation (layer_type "indexer"): DeepSeek-V3.2's
// lightning indexer (neox beside its interleaved MLA), GLM-5's (interleaved), each error named by
// its config key; DeepSeek-V4's, whose queries and compressed keys rotate apart (op rope_tensor,
// layer types "indexer", "indexer_keys", "compressor"). The configs are shaped like transformers
// 5.24's DeepseekV32Config, GlmMoeDsaConfig and DeepseekV4Config defaults (members that do not
// affect RoPE left out); python/tests/test_hf_indexer.py and test_deepseek_v4.py check the
// rotations against each family's own Indexer / Compressor forward.
// ropejit-tier: unit
#include <string>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf_import.h"  // private: spec_from_hf, the HF importer's indexer reading under test
#include "ropejit/spec.h"

namespace ropejit {
namespace {

using nlohmann::json;

json deepseek_v32() {
  return json::parse(R"({"model_type": "deepseek_v32", "hidden_size": 7168, "num_attention_heads": 128,
    "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128, "v_head_dim": 128, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048,
    "max_position_embeddings": 163840, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0,
    "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
    "mscale": 1.0, "mscale_all_dim": 1.0}})");
}

/// The config key and message of the first issue of an import that must fail.
std::pair<std::string, std::string> first_issue(const json& config, const HfImportOptions& options) {
  try {
    spec_from_hf(config, options);
  } catch (const SpecError& e) {
    return {e.issues().front().pointer, e.issues().front().message};
  }
  return {"(accepted)", ""};
}

HfImportOptions indexer_options() {
  HfImportOptions options;
  options.layer_type = "indexer";
  return options;
}

TEST(HfImportIndexer, DeepseekV32IndexerIsNeoxOverItsOwnHeads) {
  std::vector<std::string> warnings;
  const Spec spec = spec_from_hf(deepseek_v32(), indexer_options(), &warnings);
  EXPECT_EQ(spec.name, "deepseek_v32-indexer");
  EXPECT_EQ(spec.num_q_heads, 64);
  EXPECT_EQ(spec.num_kv_heads, 1);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.rotary_dim, 64);
  EXPECT_EQ(spec.layout, Layout::neox);
  EXPECT_EQ(spec.rotary_slice, RotarySlice::leading);
  // k_norm = nn.LayerNorm(index_head_dim, eps=1e-6): weight and bias, on k alone.
  ASSERT_TRUE(spec.qk_norm.enabled);
  EXPECT_EQ(spec.qk_norm.type, NormType::layernorm);
  EXPECT_EQ(spec.qk_norm.heads, NormHeads::k);
  EXPECT_EQ(spec.qk_norm.bias, NormWeight::per_head);
  EXPECT_EQ(spec.qk_norm.weight, NormWeight::per_head);
  EXPECT_EQ(spec.qk_norm.eps, 1e-6);
  EXPECT_FALSE(spec.io.qkv_bias);
  // The model's rope block, yarn's attention factor included: the same as the main attention's.
  const Spec main = spec_from_hf(deepseek_v32(), HfImportOptions{});
  EXPECT_EQ(main.layout, Layout::interleaved);
  EXPECT_EQ(spec.rope.type, main.rope.type);
  EXPECT_EQ(spec.rope.factor, main.rope.factor);
  for (const std::string& w : warnings) EXPECT_EQ(w.find("k_norm"), std::string::npos) << w;  // fused, nothing left
  // The main attention's rope_interleave is no flag of the indexer's.
  json flagged = deepseek_v32();
  flagged["rope_interleave"] = true;
  EXPECT_EQ(spec_from_hf(flagged, indexer_options()).layout, Layout::neox);
}

TEST(HfImportIndexer, Glm5IndexerIsInterleaved) {
  json glm5 = deepseek_v32();
  glm5["model_type"] = "glm_moe_dsa";
  glm5["index_n_heads"] = 32;
  const Spec spec = spec_from_hf(glm5, indexer_options());
  EXPECT_EQ(spec.layout, Layout::interleaved);
  EXPECT_EQ(spec.num_q_heads, 32);
}

TEST(HfImportIndexer, ErrorsNameTheConfigKey) {
  json no_dim = deepseek_v32();
  no_dim.erase("index_head_dim");
  auto [key, message] = first_issue(no_dim, indexer_options());
  EXPECT_EQ(key, "index_head_dim");
  EXPECT_NE(message.find("missing required key"), std::string::npos) << message;

  json llama = json::parse(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    "max_position_embeddings": 128})");
  std::tie(key, message) = first_issue(llama, indexer_options());
  EXPECT_EQ(key, "layer_type");
  EXPECT_NE(message.find("deepseek_v32"), std::string::npos) << message;
}

json deepseek_v4() {  // DeepseekV4Config().to_dict()'s rope members
  return json::parse(R"({"model_type": "deepseek_v4", "hidden_size": 4096, "num_attention_heads": 64,
    "num_key_value_heads": 1, "head_dim": 512, "index_n_heads": 64, "index_head_dim": 128,
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
    "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
    "compress": {"rope_theta": 160000.0, "rope_type": "default", "partial_rotary_factor": 0.125}},
    "max_position_embeddings": 1048576, "partial_rotary_factor": 0.125})");
}

HfImportOptions layer(const char* layer_type) {
  HfImportOptions options;
  options.layer_type = layer_type;
  return options;
}

TEST(HfImportIndexer, DeepseekV4PartsRotateApartWithTheCompressBlock) {
  // HF: DeepseekV4RotaryEmbedding(layer_type="compress") sizes cos/sin from config.head_dim *
  // partial_rotary_factor (64), whatever the rotated tensor's width; apply_rotary_pos_emb turns the
  // trailing 64, interleaved.
  const Spec compressed = spec_from_hf(deepseek_v4(), layer("compressed_sparse_attention"));
  const std::tuple<const char*, int, int> parts[] = {{"indexer", 64, 128}, {"indexer_keys", 1, 128},
                                                     {"compressor", 1, 512}};
  for (const auto& [type, heads, head_dim] : parts) {
    const Spec spec = spec_from_hf(deepseek_v4(), layer(type));
    EXPECT_EQ(spec.name, std::string("deepseek_v4-") + type);
    EXPECT_EQ(to_string(spec.op), "rope_tensor") << type;
    EXPECT_EQ(spec.num_q_heads, heads) << type;
    EXPECT_EQ(spec.head_dim, head_dim) << type;
    EXPECT_EQ(spec.rotary_dim, 64) << type;
    EXPECT_EQ(spec.layout, Layout::interleaved) << type;
    EXPECT_EQ(spec.rotary_slice, RotarySlice::trailing) << type;
    EXPECT_FALSE(spec.qk_norm.enabled) << type;  // kv_norm runs on the compressed sum, before: the caller's
    EXPECT_EQ(spec.rope.theta, compressed.rope.theta) << type;
    EXPECT_EQ(spec.rope.theta, 160000.0) << type;
  }
}

TEST(HfImportIndexer, KeysApartAreV4sOnly) {
  auto [key, message] = first_issue(deepseek_v32(), layer("indexer_keys"));
  EXPECT_EQ(key, "layer_type");
  EXPECT_NE(message.find("\"indexer_keys\" is not allowed"), std::string::npos) << message;
  EXPECT_NE(message.find("deepseek_v4"), std::string::npos) << message;
  json llama = json::parse(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    "max_position_embeddings": 128})");
  std::tie(key, message) = first_issue(llama, layer("compressor"));
  EXPECT_EQ(key, "layer_type");
  EXPECT_NE(message.find("no sparse-attention indexer"), std::string::npos) << message;
  HfImportOptions with_op = layer("indexer");
  with_op.op = OpKind::inverse_rope;
  std::tie(key, message) = first_issue(deepseek_v4(), with_op);
  EXPECT_EQ(key, "op");
  EXPECT_NE(message.find("each of its tensors rotates alone"), std::string::npos) << message;
  json no_dim = deepseek_v4();
  no_dim.erase("index_head_dim");
  std::tie(key, message) = first_issue(no_dim, layer("indexer_keys"));
  EXPECT_EQ(key, "index_head_dim");
  // Without a partial_rotary_factor HF's cos/sin span the attention's whole 512: wider than the
  // indexer's 128-element head, refused rather than narrowed.
  json whole = deepseek_v4();
  whole.erase("partial_rotary_factor");
  for (auto& block : whole["rope_parameters"]) block.erase("partial_rotary_factor");
  std::tie(key, message) = first_issue(whole, layer("indexer"));
  EXPECT_EQ(key, "head_dim");
  EXPECT_NE(message.find("512 is not allowed"), std::string::npos) << message;
}

}  // namespace
}  // namespace ropejit
