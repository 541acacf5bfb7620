// HF config import: every conformance model, v5 rope_parameters, `su`, GLM rope_ratio, and the
// shipped specs/*.json being exactly what the import produces.
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "support/repo_paths.h"
#include <nlohmann/json.hpp>

#include "hf_import.h"
#include "ropejit/spec.h"

namespace ropejit {
namespace {

using nlohmann::json;

json load_json(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  return json::parse(file);
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

const json& models() {
  static const json m = load_json(test::data_path("conformance/models.json"));
  return m;
}

const json& golden() {
  static const json g = load_json(test::data_path("conformance/hf_golden.json"));
  return g;
}

// config.json as HF writes it: model_type sits beside the other fields.
json hf_config(const json& entry) {
  json config = entry.at("config");
  config["model_type"] = entry.at("model_type");
  return config;
}

// head_dim of each conformance model, read off the model cards (independent of the import).
const std::map<std::string, int> kHeadDim{
    {"llama-3.1-8b", 128}, {"llama-3.2-1b", 64},     {"qwen2.5-7b", 128},
    {"qwen2.5-7b-yarn", 128}, {"mistral-7b-v0.1", 128}, {"phi-3.5-mini", 96},
    {"deepseek-v3", 64},   {"gpt-neox-20b", 96},     {"gpt-j-6b", 256},
    {"gemma-2-2b", 256},   {"phi-2", 80},            {"codellama-7b", 128},
    {"example-linear-x4", 128}};

TEST(HfImport, EveryConformanceModel) {
  ASSERT_GE(models().size(), 10u);
  for (const auto& [key, entry] : models().items()) {
    SCOPED_TRACE(key);
    const json config = hf_config(entry);
    Spec spec = spec_from_hf(config, HfImportOptions{key, std::nullopt, std::nullopt});
    EXPECT_EQ(spec.name, key);
    ASSERT_TRUE(kHeadDim.count(key)) << "add the model's head_dim to kHeadDim";
    EXPECT_EQ(spec.head_dim, kHeadDim.at(key));
    EXPECT_EQ(spec.rotary_dim, golden().at(key).at("rotary_dim").get<int>());
    EXPECT_EQ(spec.num_q_heads, config.at("num_attention_heads").get<int>());
    EXPECT_EQ(spec.num_kv_heads,
              config.value("num_key_value_heads", config.at("num_attention_heads").get<int>()));
    EXPECT_EQ(to_string(spec.layout), entry.at("layout").get<std::string>());
    EXPECT_EQ(spec.dtype, DType::bf16);
    EXPECT_EQ(spec.max_position_embeddings, config.at("max_position_embeddings").get<int64_t>());
    const json& scaling = config.contains("rope_scaling") ? config["rope_scaling"] : json();
    std::string expected_type = "default";
    if (scaling.is_object())
      expected_type = scaling.value("rope_type", scaling.value("type", std::string("default")));
    EXPECT_EQ(to_string(spec.rope.type), expected_type);
    EXPECT_EQ(spec.rope.theta, config.at("rope_theta").get<double>());
    EXPECT_EQ(spec.io.qkv_bias, config.value("attention_bias", false));
  }
}

TEST(HfImport, FamilyDetails) {
  auto import = [](const std::string& key) {
    return spec_from_hf(hf_config(models().at(key)), HfImportOptions{});
  };
  Spec phi3 = import("phi-3.5-mini");  // top-level O, 48 factors per list
  EXPECT_EQ(phi3.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(phi3.rope.short_factor.size(), 48u);
  EXPECT_EQ(phi3.rope.long_factor,
            models()["phi-3.5-mini"]["config"]["rope_scaling"]["long_factor"].get<std::vector<double>>());
  Spec deepseek = import("deepseek-v3");
  EXPECT_EQ(deepseek.name, "deepseek_v3");  // default name: model_type
  EXPECT_EQ(deepseek.rope.factor, 40.0);
  EXPECT_EQ(deepseek.rope.mscale, 1.0);
  EXPECT_EQ(deepseek.rope.mscale_all_dim, 1.0);
  EXPECT_EQ(deepseek.rope.original_max_position_embeddings, 4096);
  Spec qwen = import("qwen2.5-7b");
  EXPECT_EQ(qwen.io.input, InputForm::packed_qkv);
  EXPECT_EQ(qwen.io.output, OutputForm::inplace);
  EXPECT_TRUE(qwen.io.qkv_bias);
  EXPECT_TRUE(qwen.io.copy_v);  // v needs its bias too
  Spec llama = import("llama-3.1-8b");
  EXPECT_EQ(llama.io.input, InputForm::separate);
  EXPECT_EQ(llama.rope.low_freq_factor, 1.0);
  EXPECT_EQ(llama.rope.high_freq_factor, 4.0);
}

TEST(HfImport, OptionsOverrideLayoutDtypeAndName) {
  HfImportOptions options{"custom", DType::fp16, Layout::interleaved};
  Spec spec = spec_from_hf(hf_config(models().at("mistral-7b-v0.1")), options);
  EXPECT_EQ(spec.name, "custom");
  EXPECT_EQ(spec.dtype, DType::fp16);
  EXPECT_EQ(spec.layout, Layout::interleaved);
}

TEST(HfImport, V5RopeParameters) {
  json config = json::parse(R"({
    "model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                        "original_max_position_embeddings": 32768, "beta_fast": 32.0,
                        "beta_slow": 1.0, "truncate": false}})");
  Spec spec = spec_from_hf(config, HfImportOptions{});
  EXPECT_EQ(spec.rope.type, RopeType::yarn);
  EXPECT_EQ(spec.rope.theta, 1e6);
  EXPECT_EQ(spec.rope.factor, 4.0);
  EXPECT_EQ(spec.rope.original_max_position_embeddings, 32768);
  EXPECT_EQ(spec.rope.truncate, false);
  EXPECT_EQ(spec.num_kv_heads, 8);
  EXPECT_EQ(spec.layout, Layout::neox);
  EXPECT_FALSE(spec.io.qkv_bias);
}

TEST(HfImport, SuIsLongRopeAndTopLevelOriginalLengthWins) {
  json factors = json::array();
  for (int i = 0; i < 48; ++i) factors.push_back(1.0 + 0.37 * i);
  json config = {{"model_type", "phi3"},
                 {"hidden_size", 3072},
                 {"num_attention_heads", 32},
                 {"max_position_embeddings", 131072},
                 {"original_max_position_embeddings", 4096},
                 {"rope_theta", 10000.0},
                 {"rope_scaling",
                  {{"type", "su"}, {"short_factor", factors}, {"long_factor", factors},
                   {"original_max_position_embeddings", 2048}}}};
  Spec spec = spec_from_hf(config, HfImportOptions{});
  EXPECT_EQ(spec.rope.type, RopeType::longrope);
  EXPECT_EQ(spec.rope.original_max_position_embeddings, 4096);
  EXPECT_EQ(spec.rope.short_factor, factors.get<std::vector<double>>());
  EXPECT_EQ(spec.num_kv_heads, 32);
}

TEST(HfImport, GlmRopeRatioAndHalfRotation) {
  json config = json::parse(R"({
    "model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32,
    "kv_channels": 128, "multi_query_group_num": 2, "seq_length": 131072,
    "rope_ratio": 500, "add_qkv_bias": true})");
  Spec spec = spec_from_hf(config, HfImportOptions{});
  EXPECT_EQ(spec.rope.theta, 5e6);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.rotary_dim, 64);
  EXPECT_EQ(spec.num_kv_heads, 2);
  EXPECT_EQ(spec.layout, Layout::interleaved);
  EXPECT_EQ(spec.max_position_embeddings, 131072);
  EXPECT_TRUE(spec.io.qkv_bias);
}

TEST(HfImport, GptNeoxBaseAndPercent) {
  json config = json::parse(R"({"model_type": "gpt_neox", "hidden_size": 2048,
    "num_attention_heads": 16, "rotary_pct": 0.25, "rotary_emb_base": 10000,
    "max_position_embeddings": 2048})");
  Spec spec = spec_from_hf(config, HfImportOptions{});
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.rotary_dim, 32);
  EXPECT_EQ(spec.rope.theta, 10000.0);
}

TEST(HfImport, InvalidConfigReportsSpecFields) {
  json config = json::parse(R"({"model_type": "llama", "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 5, "max_position_embeddings": 4096,
    "rope_scaling": {"type": "linear", "factor": 0.5}})");
  try {
    spec_from_hf(config, HfImportOptions{});
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    ASSERT_EQ(e.issues().size(), 2u) << e.what();
    EXPECT_EQ(e.issues()[0].pointer, "/num_kv_heads");
    EXPECT_EQ(e.issues()[1].pointer, "/rope/factor");
  }
}

TEST(ShippedSpecs, OnePerModelExactlyAsImported) {
  for (const auto& [key, entry] : models().items()) {
    SCOPED_TRACE(key);
    const std::string path = ropejit::test::source_dir() + "/specs/" + key + ".json";
    const std::string shipped = read_text(path);
    ASSERT_FALSE(shipped.empty()) << path << " missing: ropejit spec from-hf ... --name " << key;
    Spec imported = spec_from_hf(hf_config(entry), HfImportOptions{key, DType::bf16, std::nullopt});
    EXPECT_EQ(shipped, pretty_json(imported));
    EXPECT_EQ(spec_hash(load_spec_file(path)), spec_hash(imported));
  }
}

}  // namespace
}  // namespace ropejit
