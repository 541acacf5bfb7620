// HF config import: every conformance model, the real configs of tests/data/hf_real, v5
// rope_parameters, `su`, GLM rope_ratio, the family rules (Falcon, DeepSeek, Llama 4), and the
// shipped specs/*.json being exactly what the import produces.
// ropejit-tier: unit
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "support/repo_paths.h"
#include <nlohmann/json.hpp>

#include "hf_import.h"  // private: spec_from_hf and parse_hf_config, the HF importer under test
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
    "kv_channels": 128, "multi_query_attention": true, "multi_query_group_num": 2,
    "seq_length": 131072, "rope_ratio": 500, "add_qkv_bias": true})");
  Spec spec = spec_from_hf(config, HfImportOptions{});
  EXPECT_EQ(spec.rope.theta, 5e6);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.rotary_dim, 64);
  EXPECT_EQ(spec.num_kv_heads, 2);
  EXPECT_EQ(spec.layout, Layout::interleaved);
  EXPECT_EQ(spec.max_position_embeddings, 131072);
  EXPECT_TRUE(spec.io.qkv_bias);
  // ChatGLM reads multi_query_group_num only under multi_query_attention (default false).
  config.erase("multi_query_attention");
  std::vector<std::string> warnings;
  EXPECT_EQ(spec_from_hf(config, HfImportOptions{}, &warnings).num_kv_heads, 32);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("multi_query_group_num: 2 ignored"), std::string::npos) << warnings[0];
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
    // Named by the config keys, the spec field second; both problems at once.
    ASSERT_EQ(e.issues().size(), 2u) << e.what();
    EXPECT_EQ(e.issues()[0].pointer, "num_key_value_heads");
    EXPECT_EQ(e.issues()[0].message,
              "5 is not allowed: must be a divisor of num_attention_heads (32) (spec field /num_kv_heads)");
    EXPECT_EQ(e.issues()[1].pointer, "rope_scaling.factor");
    EXPECT_EQ(e.issues()[1].message, "0.5 is not allowed: must be a number >= 1 (spec field /rope/factor)");
    EXPECT_EQ(e.field(), "num_key_value_heads");
  }
}

// ---------------------------------------------------------------- real configs (tests/data/hf_real)

Spec import_real(const std::string& file, std::vector<std::string>* warnings = nullptr) {
  const json config = parse_hf_config(read_text(test::data_path("hf_real/" + file)));
  return spec_from_hf(config, HfImportOptions{}, warnings);
}

bool has_warning(const std::vector<std::string>& warnings, const std::string& fragment) {
  for (const auto& w : warnings)
    if (w.find(fragment) != std::string::npos) return true;
  return false;
}

TEST(HfImportReal, StableLm2UsesItsQkvBias) {
  Spec spec = import_real("stablelm-2-1_6b.json");
  EXPECT_EQ(spec.head_dim, 64);
  EXPECT_EQ(spec.rotary_dim, 16);  // partial_rotary_factor 0.25
  EXPECT_EQ(spec.num_q_heads, 32);
  EXPECT_EQ(spec.num_kv_heads, 32);
  EXPECT_EQ(spec.layout, Layout::neox);
  EXPECT_EQ(spec.max_position_embeddings, 4096);
  EXPECT_EQ(spec.rope.theta, 10000.0);
  EXPECT_TRUE(spec.io.qkv_bias);  // use_qkv_bias, StableLM's name for it
  EXPECT_EQ(spec.io.input, InputForm::packed_qkv);
  EXPECT_EQ(spec.io.output, OutputForm::inplace);
  EXPECT_TRUE(spec.io.copy_v);
}

TEST(HfImportReal, Falcon7bIsMultiQueryWithDefaultLength) {
  std::vector<std::string> warnings;
  Spec spec = import_real("falcon-7b.json", &warnings);
  EXPECT_EQ(spec.name, "falcon");
  EXPECT_EQ(spec.head_dim, 64);  // 4544 / 71
  EXPECT_EQ(spec.num_q_heads, 71);
  EXPECT_EQ(spec.num_kv_heads, 1);  // multi_query without new_decoder_architecture
  EXPECT_EQ(spec.max_position_embeddings, 2048);  // FalconConfig's default
  EXPECT_EQ(spec.rope.type, RopeType::default_);
  EXPECT_EQ(spec.rope.theta, 10000.0);
  EXPECT_EQ(spec.layout, Layout::neox);
  EXPECT_FALSE(spec.io.qkv_bias);
  EXPECT_TRUE(has_warning(warnings, "num_kv_heads: 71 ignored")) << warnings.size();
}

TEST(HfImportReal, Falcon40bUsesItsKvHeads) {
  Spec spec = import_real("falcon-40b.json");
  EXPECT_EQ(spec.head_dim, 64);  // 8192 / 128
  EXPECT_EQ(spec.num_q_heads, 128);
  EXPECT_EQ(spec.num_kv_heads, 8);  // new_decoder_architecture
  EXPECT_EQ(spec.max_position_embeddings, 2048);
}

TEST(HfImport, FalconCustomCodeNamesAndAlibi) {
  json rw7 = json::parse(R"({"model_type": "RefinedWebModel", "hidden_size": 4544, "n_head": 71,
                             "multi_query": true, "alibi": false})");
  EXPECT_EQ(spec_from_hf(rw7, HfImportOptions{}).num_kv_heads, 1);
  json rw40 = json::parse(R"({"model_type": "RefinedWeb", "hidden_size": 8192, "n_head": 128,
                              "n_head_kv": 8})");
  EXPECT_EQ(spec_from_hf(rw40, HfImportOptions{}).num_kv_heads, 8);  // n_head_kv: new architecture
  json plain = json::parse(R"({"model_type": "falcon", "hidden_size": 512, "num_attention_heads": 8,
                               "multi_query": false, "rope_theta": 50000.0})");
  Spec spec = spec_from_hf(plain, HfImportOptions{});
  EXPECT_EQ(spec.num_kv_heads, 8);  // neither MQA nor new architecture: num_kv_heads = heads
  EXPECT_EQ(spec.rope.theta, 50000.0);
  plain["alibi"] = true;
  EXPECT_THROW(spec_from_hf(plain, HfImportOptions{}), SpecError);
}

TEST(HfImportReal, CommandRRotatesInterleavedPairs) {
  Spec spec = import_real("c4ai-command-r-v01.json");
  EXPECT_EQ(spec.layout, Layout::interleaved);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.num_kv_heads, 64);
  EXPECT_EQ(spec.rope.theta, 8e6);
  EXPECT_EQ(spec.max_position_embeddings, 8192);
  json cohere2 = json::parse(R"({"model_type": "cohere2", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 8192, "rope_theta": 50000})");
  EXPECT_EQ(spec_from_hf(cohere2, HfImportOptions{}).layout, Layout::interleaved);
}

TEST(HfImportReal, Llama4ScoutEqualBandFactors) {
  std::vector<std::string> warnings;
  Spec spec = import_real("llama-4-scout-17b-16e.json", &warnings);
  EXPECT_EQ(spec.name, "llama4");
  EXPECT_EQ(spec.layout, Layout::interleaved);
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.num_q_heads, 40);
  EXPECT_EQ(spec.num_kv_heads, 8);
  EXPECT_EQ(spec.max_position_embeddings, 10485760);
  EXPECT_EQ(spec.rope.type, RopeType::llama3);
  EXPECT_EQ(spec.rope.factor, 16.0);
  EXPECT_EQ(spec.rope.low_freq_factor, 1.0);
  EXPECT_EQ(spec.rope.high_freq_factor, 1.0);
  EXPECT_EQ(spec.rope.original_max_position_embeddings, 8192);
  EXPECT_FALSE(spec.io.qkv_bias);
  EXPECT_TRUE(has_warning(warnings, "text_config.rope_scaling.high_freq_factor: equal to low_freq_factor"));
  // The text model on its own (model_type llama4_text) imports the same.
  json text = parse_hf_config(read_text(test::data_path("hf_real/llama-4-scout-17b-16e.json")))["text_config"];
  Spec flat = spec_from_hf(text, HfImportOptions{"llama4", std::nullopt, std::nullopt});
  EXPECT_EQ(spec_hash(flat), spec_hash(spec));
}

TEST(HfImport, DeepSeekRopeHeadDimOrder) {
  json config = json::parse(R"({"model_type": "deepseek_v2", "hidden_size": 5120,
    "num_attention_heads": 128, "num_key_value_heads": 128, "qk_rope_head_dim": 64,
    "head_dim": 192, "max_position_embeddings": 163840, "rope_theta": 10000})");
  EXPECT_EQ(spec_from_hf(config, HfImportOptions{}).head_dim, 64);  // qk_rope_head_dim first
  config.erase("qk_rope_head_dim");
  EXPECT_EQ(spec_from_hf(config, HfImportOptions{}).head_dim, 192);  // then head_dim
  config.erase("head_dim");
  EXPECT_EQ(spec_from_hf(config, HfImportOptions{}).head_dim, 40);  // then hidden / heads
}

TEST(HfImport, V5BlockHoldsThetaAndRotaryFraction) {
  json config = json::parse(R"({"model_type": "stablelm", "hidden_size": 2560,
    "num_attention_heads": 32, "max_position_embeddings": 4096, "rope_theta": 10000,
    "rope_parameters": {"rope_type": "default", "rope_theta": 20000, "partial_rotary_factor": 0.5}})");
  std::vector<std::string> warnings;
  Spec spec = spec_from_hf(config, HfImportOptions{}, &warnings);
  EXPECT_EQ(spec.rope.theta, 20000.0);  // the block wins, as in HF v5
  EXPECT_EQ(spec.rotary_dim, 40);       // 80 * 0.5, from the block
  EXPECT_TRUE(has_warning(warnings, "rope_theta: 10000 ignored"));
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
