// Spec language: validation (every bad input names its field), canonical form, content hash.
// ropejit-tier: unit
#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "support/build_paths.h"
#include "support/run_command.h"
#include "support/repo_paths.h"
#include <nlohmann/json.hpp>

#include "ropejit/spec.h"
#include "ropejit/spec_schema.h"
#include "spec_json.h"  // private: rope_param_rules, the table the shipped schema must cover

namespace ropejit {
namespace {

using nlohmann::json;

json llama3_spec() {
  return json::parse(R"({
    "name": "llama-3.1-8b", "head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8,
    "layout": "neox", "dtype": "bf16", "max_position_embeddings": 131072,
    "rope": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
             "original_max_position_embeddings": 8192}})");
}

json yarn_spec() {
  json j = llama3_spec();
  j["max_position_embeddings"] = 32768;
  j["rope"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0},
               {"original_max_position_embeddings", 32768}};
  return j;
}

json longrope_spec() {
  json j = llama3_spec();
  j["head_dim"] = 96;
  j["num_kv_heads"] = 32;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> dist(1.0, 60.0);
  json short_factor = json::array(), long_factor = json::array();
  for (int i = 0; i < 48; ++i) {
    short_factor.push_back(dist(rng));
    long_factor.push_back(dist(rng));
  }
  j["rope"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0},
               {"original_max_position_embeddings", 4096}, {"short_factor", short_factor},
               {"long_factor", long_factor}};
  return j;
}

std::vector<SpecIssue> issues_of(std::string_view text) {
  try {
    parse_spec(text);
  } catch (const SpecError& e) {
    EXPECT_EQ(e.code(), Status::invalid_spec);
    EXPECT_FALSE(e.issues().empty());
    EXPECT_EQ(e.field(), e.issues().front().pointer);
    return e.issues();
  }
  return {};
}

std::string describe(const std::vector<SpecIssue>& issues) {
  std::string out;
  for (const auto& issue : issues) out += "  " + issue.to_string() + "\n";
  return out;
}

struct BadCase {
  std::string label;
  std::function<std::string()> text;  // the spec text to parse
  std::string pointer;                // expected pointer of the (first) issue
  std::string fragment;               // expected part of its message
  size_t count = 1;                   // expected number of issues
};

std::function<std::string()> edit(json (*base)(), std::function<void(json&)> change) {
  return [base, change] {
    json j = base();
    change(j);
    return j.dump();
  };
}

std::function<std::string()> raw(std::string text) {
  return [text] { return text; };
}

std::vector<BadCase> bad_cases() {
  return {
      {"head_dim as string", edit(llama3_spec, [](json& j) { j["head_dim"] = "128"; }),
       "/head_dim", "\"128\" is not allowed: must be an integer in [1, 1024]"},
      {"head_dim fractional", edit(llama3_spec, [](json& j) { j["head_dim"] = 12.5; }),
       "/head_dim", "12.5 is not allowed"},
      {"head_dim too large", edit(llama3_spec, [](json& j) { j["head_dim"] = 2048; }),
       "/head_dim", "2048 is not allowed: must be an integer in [1, 1024]"},
      {"rotary_dim odd", edit(llama3_spec, [](json& j) { j["rotary_dim"] = 63; }),
       "/rotary_dim", "63 is not allowed: must be an even integer in [2, 128]"},
      {"odd head_dim rotated whole",
       edit(llama3_spec, [](json& j) { j.erase("rotary_dim"); j["head_dim"] = 65; }),
       "/head_dim", "65 is not allowed: must be an even integer when rotary_dim"},
      {"rotary_dim > head_dim", edit(llama3_spec, [](json& j) { j["rotary_dim"] = 256; }),
       "/rotary_dim", "256 is not allowed: must be an even integer in [2, 128] (head_dim)"},
      {"rotary_dim disagrees with partial_rotary_factor",
       edit(llama3_spec, [](json& j) { j["rotary_dim"] = 64; j["partial_rotary_factor"] = 0.3; }),
       "/rotary_dim", "38 = floor(head_dim * partial_rotary_factor)"},
      {"partial_rotary_factor > 1",
       edit(llama3_spec, [](json& j) { j["partial_rotary_factor"] = 1.5; }),
       "/partial_rotary_factor", "1.5 is not allowed: must be a number > 0 and <= 1"},
      {"partial_rotary_factor gives odd rotary_dim",
       edit(llama3_spec, [](json& j) { j["head_dim"] = 100; j["partial_rotary_factor"] = 0.25; }),
       "/partial_rotary_factor", "floor(100 * 0.25) = 25"},
      {"heads not divisible", edit(llama3_spec, [](json& j) { j["num_kv_heads"] = 5; }),
       "/num_kv_heads", "5 is not allowed: must be a divisor of num_q_heads (32)"},
      {"negative heads", edit(llama3_spec, [](json& j) { j["num_q_heads"] = -4; }),
       "/num_q_heads", "-4 is not allowed: must be an integer in [1, 1024]"},
      {"zero max_position_embeddings",
       edit(llama3_spec, [](json& j) { j["max_position_embeddings"] = 0; }),
       "/max_position_embeddings", "0 is not allowed"},
      {"layout typo", edit(llama3_spec, [](json& j) { j["layout"] = "neoxx"; }), "/layout",
       "one of neox | interleaved (did you mean \"neox\"?)"},
      {"layout wrong type", edit(llama3_spec, [](json& j) { j["layout"] = 1; }), "/layout",
       "1 is not allowed: must be one of neox | interleaved"},
      {"unknown dtype", edit(llama3_spec, [](json& j) { j["dtype"] = "float16"; }), "/dtype",
       "\"float16\" is not allowed: must be one of fp32 | fp16 | bf16"},
      {"unknown angle", edit(llama3_spec, [](json& j) { j["angle"] = "fp64"; }), "/angle",
       "must be one of fp32 | exact"},
      {"missing name", edit(llama3_spec, [](json& j) { j.erase("name"); }), "/name",
       "missing required key \"name\""},
      {"unknown top-level key", edit(llama3_spec, [](json& j) { j["rotary_dims"] = 64; }),
       "/rotary_dims", "unknown key; did you mean \"rotary_dim\"?"},
      {"unknown key without a near match",
       edit(llama3_spec, [](json& j) { j["sliding_window"] = 4096; }), "/sliding_window",
       "unknown key; allowed keys: name, head_dim"},
      {"rope key typo",
       edit(llama3_spec, [](json& j) { j["rope"]["rope_thta"] = j["rope"]["rope_theta"];
                                       j["rope"].erase("rope_theta"); }),
       "/rope/rope_thta", "unknown key; did you mean \"rope_theta\"?", 2},
      {"v4 spelling type", edit(llama3_spec, [](json& j) { j["rope"]["type"] = "llama3";
                                                          j["rope"].erase("rope_type"); }),
       "/rope/rope_type", "missing required key \"rope_type\"", 2},
      {"unknown rope type", edit(llama3_spec, [](json& j) { j["rope"]["rope_type"] = "ntk-aware"; }),
       "/rope/rope_type", "must be one of default | linear | ntk | dynamic | yarn | longrope | llama3"},
      {"rope not an object", edit(llama3_spec, [](json& j) { j["rope"] = "llama3"; }), "/rope",
       "\"llama3\" is not allowed: must be an object"},
      {"factor below 1", edit(llama3_spec, [](json& j) { j["rope"]["factor"] = -2; }),
       "/rope/factor", "-2 is not allowed: must be a number >= 1"},
      {"factor as string", edit(llama3_spec, [](json& j) { j["rope"]["factor"] = "8"; }),
       "/rope/factor", "\"8\" is not allowed: must be a number >= 1"},
      {"llama3 missing factor", edit(llama3_spec, [](json& j) { j["rope"].erase("factor"); }),
       "/rope/factor", "missing required key \"factor\" for rope_type \"llama3\""},
      {"llama3 missing low_freq_factor",
       edit(llama3_spec, [](json& j) { j["rope"].erase("low_freq_factor"); }),
       "/rope/low_freq_factor", "missing required key \"low_freq_factor\" for rope_type \"llama3\""},
      {"llama3 high <= low", edit(llama3_spec, [](json& j) { j["rope"]["high_freq_factor"] = 0.5; }),
       "/rope/high_freq_factor", "0.5 is not allowed: must be a number > low_freq_factor (1)"},
      {"llama3 with yarn parameter", edit(llama3_spec, [](json& j) { j["rope"]["mscale"] = 1.0; }),
       "/rope/mscale", "does not apply to rope_type \"llama3\""},
      {"rope_theta zero", edit(llama3_spec, [](json& j) { j["rope"]["rope_theta"] = 0; }),
       "/rope/rope_theta", "0 is not allowed: must be a number > 0"},
      {"rope_theta missing", edit(llama3_spec, [](json& j) { j["rope"].erase("rope_theta"); }),
       "/rope/rope_theta", "missing required key \"rope_theta\""},
      {"yarn with llama3 parameter",
       edit(yarn_spec, [](json& j) { j["rope"]["low_freq_factor"] = 1.0; }),
       "/rope/low_freq_factor", "does not apply to rope_type \"yarn\""},
      {"yarn beta_fast < beta_slow",
       edit(yarn_spec, [](json& j) { j["rope"]["beta_fast"] = 1.0; j["rope"]["beta_slow"] = 32.0; }),
       "/rope/beta_fast", "1.0 is not allowed: must be a number >= beta_slow (32)"},
      {"yarn truncate not a bool", edit(yarn_spec, [](json& j) { j["rope"]["truncate"] = "yes"; }),
       "/rope/truncate", "\"yes\" is not allowed: must be true or false"},
      {"yarn negative attention_factor",
       edit(yarn_spec, [](json& j) { j["rope"]["attention_factor"] = -1.0; }),
       "/rope/attention_factor", "-1.0 is not allowed: must be a number > 0"},
      {"yarn missing factor", edit(yarn_spec, [](json& j) { j["rope"].erase("factor"); }),
       "/rope/factor", "missing required key \"factor\" for rope_type \"yarn\""},
      {"yarn O fractional",
       edit(yarn_spec, [](json& j) { j["rope"]["original_max_position_embeddings"] = 4096.5; }),
       "/rope/original_max_position_embeddings", "4096.5 is not allowed: must be an integer"},
      {"longrope list wrong length",
       edit(longrope_spec, [](json& j) { j["rope"]["short_factor"].erase(0); }),
       "/rope/short_factor", "a list of 47 items is not allowed: must be a list of 48 numbers > 0"},
      {"longrope negative element",
       edit(longrope_spec, [](json& j) { j["rope"]["long_factor"][5] = -1.0; }),
       "/rope/long_factor/5", "-1.0 is not allowed: must be a number > 0"},
      {"longrope missing O",
       edit(longrope_spec, [](json& j) { j["rope"].erase("original_max_position_embeddings"); }),
       "/rope/original_max_position_embeddings",
       "missing required key \"original_max_position_embeddings\" for rope_type \"longrope\""},
      {"longrope factor below 1", edit(longrope_spec, [](json& j) { j["rope"]["factor"] = 0.5; }),
       "/rope/factor", "0.5 is not allowed: must be a number >= 1"},
      {"ntk missing alpha",
       edit(llama3_spec, [](json& j) { j["rope"] = {{"rope_type", "ntk"}, {"rope_theta", 1e4}}; }),
       "/rope/alpha", "missing required key \"alpha\" for rope_type \"ntk\""},
      {"ntk alpha below 1",
       edit(llama3_spec, [](json& j) {
         j["rope"] = {{"rope_type", "ntk"}, {"rope_theta", 1e4}, {"alpha", 0.5}}; }),
       "/rope/alpha", "0.5 is not allowed: must be a number >= 1"},
      {"linear missing factor",
       edit(llama3_spec, [](json& j) { j["rope"] = {{"rope_type", "linear"}, {"rope_theta", 1e4}}; }),
       "/rope/factor", "missing required key \"factor\" for rope_type \"linear\""},
      {"dynamic seq_len zero",
       edit(llama3_spec, [](json& j) {
         j["rope"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e4}, {"factor", 2}, {"seq_len", 0}}; }),
       "/rope/seq_len", "0 is not allowed: must be an integer in [1, 2147483647]"},
      {"io output unknown", edit(llama3_spec, [](json& j) { j["io"] = {{"output", "padded"}}; }),
       "/io/output", "must be one of inplace | separate | padded_bhsd"},
      {"io padded needs varlen",
       edit(llama3_spec, [](json& j) { j["io"] = {{"output", "padded_bhsd"}}; }),
       "/io/positions", "\"explicit\" is not allowed: must be \"varlen\" when output is padded_bhsd"},
      {"io copy_v false with packed separate output",
       edit(llama3_spec, [](json& j) {
         j["io"] = {{"input", "packed_qkv"}, {"output", "separate"}, {"copy_v", false}}; }),
       "/io/copy_v", "false is not allowed: must be true when input is packed_qkv"},
      {"io key typo", edit(llama3_spec, [](json& j) { j["io"] = {{"qkv_bais", true}}; }),
       "/io/qkv_bais", "unknown key; did you mean \"qkv_bias\"?"},
      {"io bias not a bool", edit(llama3_spec, [](json& j) { j["io"] = {{"qkv_bias", "true"}}; }),
       "/io/qkv_bias", "\"true\" is not allowed: must be true or false"},
      {"mrope without a section",
       edit(llama3_spec, [](json& j) { j["io"] = {{"positions", "mrope"}}; }),
       "/io/mrope_section", "missing: io.positions \"mrope\" needs it"},
      {"mrope section not summing to d/2",
       edit(llama3_spec, [](json& j) { j["io"] = {{"positions", "mrope"}, {"mrope_section", {16, 24, 23}}}; }),
       "/io/mrope_section", "[16,24,23] is not allowed: must be a list of 3 integers >= 1 (temporal, height, width "
                            "pairs) summing to rotary_dim / 2 = 64"},
      {"mrope section of two",
       edit(llama3_spec, [](json& j) { j["io"] = {{"positions", "mrope"}, {"mrope_section", {32, 32}}}; }),
       "/io/mrope_section", "[32,32] is not allowed: must be a list of 3 integers"},
      {"mrope section element zero",
       edit(llama3_spec, [](json& j) { j["io"] = {{"positions", "mrope"}, {"mrope_section", {0, 32, 32}}}; }),
       "/io/mrope_section/0", "0 is not allowed: must be an integer in [1,"},
      {"mrope interleaved width too wide",
       edit(llama3_spec, [](json& j) {
         j["io"] = {{"positions", "mrope"}, {"mrope_section", {8, 22, 34}}, {"mrope_interleaved", true}}; }),
       "/io/mrope_section", "must be height count <= (rotary_dim / 2 + 1) / 3 = 21 and width count <= rotary_dim / 6 = 21"},
      {"mrope section without mrope positions",
       edit(llama3_spec, [](json& j) { j["io"] = {{"mrope_section", {16, 24, 24}}}; }),
       "/io/mrope_section", "[16,24,24] is not allowed: must be absent unless io.positions is \"mrope\""},
      {"mrope with longrope",
       edit(longrope_spec, [](json& j) { j["io"] = {{"positions", "mrope"}, {"mrope_section", {16, 16, 16}}}; }),
       "/io/positions", "\"mrope\" is not allowed: must be another form with rope_type longrope"},
      {"qk_norm wrong type", edit(llama3_spec, [](json& j) { j["qk_norm"] = {{"type", "groupnorm"}}; }),
       "/qk_norm/type", "\"groupnorm\" is not allowed: must be one of rmsnorm | layernorm"},
      {"qk_norm missing type", edit(llama3_spec, [](json& j) { j["qk_norm"] = {{"eps", 1e-6}}; }),
       "/qk_norm/type", "missing required key \"type\""},
      {"qk_norm eps zero", edit(llama3_spec, [](json& j) { j["qk_norm"] = {{"type", "rmsnorm"}, {"eps", 0}}; }),
       "/qk_norm/eps", "0 is not allowed: must be a number > 0"},
      {"qk_norm scope", edit(llama3_spec, [](json& j) { j["qk_norm"] = {{"type", "rmsnorm"}, {"scope", "token"}}; }),
       "/qk_norm/scope", "\"token\" is not allowed: must be one of head | all"},
      {"qk_norm scope not a string",
       edit(llama3_spec, [](json& j) { j["qk_norm"] = {{"type", "rmsnorm"}, {"scope", true}}; }),
       "/qk_norm/scope", "true is not allowed: must be one of head | all"},
      {"qk_norm weight unknown",
       edit(llama3_spec, [](json& j) { j["qk_norm"] = {{"type", "rmsnorm"}, {"weight", "per_token"}}; }),
       "/qk_norm/weight", "must be one of per_head | none"},
      {"qk_norm offset without weight",
       edit(llama3_spec, [](json& j) {
         j["qk_norm"] = {{"type", "rmsnorm"}, {"weight", "none"}, {"weight_offset", 1.0}}; }),
       "/qk_norm/weight_offset", "1.0 is not allowed: must be 0 when weight is \"none\""},
      {"qk_norm key typo", edit(llama3_spec, [](json& j) { j["qk_norm"] = {{"type", "rmsnorm"}, {"epsilon", 1e-6}}; }),
       "/qk_norm/epsilon", "unknown key"},
      {"yarn with rope_theta 1 gives NaN frequencies (log 1 = 0)",
       edit(yarn_spec, [](json& j) { j["rope"]["rope_theta"] = 1.0; }),
       "/rope", "every inv_freq must be a finite float32 > 0"},
      {"not an object", raw("[1, 2]"), "", "[1,2] is not allowed: must be an object"},
      {"rope_theta overflows to inf",
       raw(R"({"name": "x", "head_dim": 64, "num_q_heads": 8, "num_kv_heads": 8, "layout": "neox",
              "dtype": "fp16", "max_position_embeddings": 4096,
              "rope": {"rope_type": "default", "rope_theta": 1e999}})"),
       "/rope/rope_theta", "1e999 is not allowed: must be a finite number"},
      {"factor overflows to -inf in a list",
       raw(R"({"rope": {"short_factor": [1.0, 2.0, -1e999]}})"), "/rope/short_factor/2",
       "-1e999 is not allowed: must be a finite number"},
      {"NaN literal", raw(R"({"name": "x", "head_dim": NaN})"), "",
       "malformed JSON: parse error at line 1, column"},
      {"missing comma with line and column",
       raw("{\n  \"name\": \"x\",\n  \"head_dim\": 64\n  \"num_q_heads\": 8\n}"), "",
       "parse error at line 4, column 15"},  // end of the unexpected token
      {"empty text", raw(""), "", "malformed JSON"},
  };
}

TEST(SpecValidation, EveryBadInputNamesItsFieldAndValue) {
  const auto cases = bad_cases();
  EXPECT_GE(cases.size(), 30u);
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.label);
    const std::string text = bad.text();
    auto issues = issues_of(text);
    ASSERT_EQ(issues.size(), bad.count) << text << "\n" << describe(issues);
    EXPECT_EQ(issues.front().pointer, bad.pointer) << describe(issues);
    bool found = false;
    for (const auto& issue : issues)
      found = found || (issue.pointer == bad.pointer &&
                        issue.message.find(bad.fragment) != std::string::npos);
    EXPECT_TRUE(found) << "wanted " << bad.pointer << ": ..." << bad.fragment << "\ngot\n"
                       << describe(issues);
  }
}

TEST(SpecValidation, ReportsEveryProblemAtOnce) {
  json j = llama3_spec();
  j["head_dim"] = "wide";
  j["num_kv_heads"] = 7;
  j["layout"] = "diagonal";
  j["rope"]["factor"] = 0.25;
  j["rope"]["beta_fast"] = 32;
  j["io"] = {{"output", "padded_bhsd"}};
  try {
    parse_spec(j.dump());
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    std::vector<std::string> pointers;
    for (const auto& issue : e.issues()) pointers.push_back(issue.pointer);
    std::vector<std::string> expected{"/head_dim", "/num_kv_heads", "/layout", "/rope/beta_fast",
                                      "/rope/factor", "/io/positions"};
    EXPECT_EQ(pointers, expected) << e.what();
    // what() lists all of them, one per line.
    std::string what = e.what();
    EXPECT_EQ(std::count(what.begin(), what.end(), '\n'), 5);
    EXPECT_NE(what.find("/rope/factor: 0.25 is not allowed: must be a number >= 1"),
              std::string::npos);
    EXPECT_EQ(e.field(), "/head_dim");
  }
}

TEST(SpecValidation, ValidSpecFillsDefaults) {
  Spec spec = parse_spec(llama3_spec().dump());
  EXPECT_EQ(spec.name, "llama-3.1-8b");
  EXPECT_EQ(spec.head_dim, 128);
  EXPECT_EQ(spec.rotary_dim, 128);
  EXPECT_EQ(spec.num_q_heads, 32);
  EXPECT_EQ(spec.num_kv_heads, 8);
  EXPECT_EQ(spec.layout, Layout::neox);
  EXPECT_EQ(spec.dtype, DType::bf16);
  EXPECT_EQ(spec.angle, AnglePrecision::fp32);
  EXPECT_EQ(spec.max_position_embeddings, 131072);
  EXPECT_EQ(spec.rope.type, RopeType::llama3);
  EXPECT_EQ(spec.rope.theta, 500000.0);
  EXPECT_EQ(spec.rope.factor, 8.0);
  EXPECT_EQ(spec.rope.low_freq_factor, 1.0);
  EXPECT_EQ(spec.rope.high_freq_factor, 4.0);
  EXPECT_EQ(spec.rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(spec.io.input, InputForm::separate);
  EXPECT_EQ(spec.io.output, OutputForm::inplace);
  EXPECT_FALSE(spec.io.copy_v);
  EXPECT_EQ(spec.io.positions, PositionsForm::explicit_);
  EXPECT_EQ(canonical_json(spec),
            R"({"name":"llama-3.1-8b","head_dim":128,"rotary_dim":128,"num_q_heads":32,)"
            R"("num_kv_heads":8,"layout":"neox","dtype":"bf16","max_position_embeddings":131072,)"
            R"("angle":"fp32","rope":{"rope_type":"llama3","rope_theta":500000.0,"factor":8.0,)"
            R"("original_max_position_embeddings":8192,"low_freq_factor":1.0,)"
            R"("high_freq_factor":4.0},"io":{"input":"separate","output":"inplace",)"
            R"("qkv_bias":false,"copy_v":false,"positions":"explicit"}})");
}

TEST(SpecValidation, YarnDefaultsAndMissingOriginalLength) {
  json j = yarn_spec();
  j["rope"].erase("original_max_position_embeddings");
  Spec spec = parse_spec(j.dump());
  EXPECT_EQ(spec.rope.original_max_position_embeddings, 32768);  // filled from M
  EXPECT_EQ(spec.rope.beta_fast, 32.0);
  EXPECT_EQ(spec.rope.beta_slow, 1.0);
  EXPECT_EQ(spec.rope.truncate, true);
  EXPECT_FALSE(spec.rope.mscale.has_value());
  json explicit_defaults = yarn_spec();
  explicit_defaults["rope"]["beta_fast"] = 32;
  explicit_defaults["rope"]["beta_slow"] = 1;
  explicit_defaults["rope"]["truncate"] = true;
  EXPECT_EQ(spec_hash(spec), spec_hash(parse_spec(explicit_defaults.dump())));
}

TEST(SpecValidation, IoCopyVDefaults) {
  json j = llama3_spec();
  j["io"] = {{"input", "packed_qkv"}, {"output", "separate"}};
  EXPECT_TRUE(parse_spec(j.dump()).io.copy_v);
  j["io"] = {{"input", "packed_qkv"}, {"output", "inplace"}, {"qkv_bias", true}};
  EXPECT_TRUE(parse_spec(j.dump()).io.copy_v);
  j["io"] = {{"input", "packed_qkv"}, {"output", "inplace"}};
  EXPECT_FALSE(parse_spec(j.dump()).io.copy_v);
  j["io"] = {{"input", "separate"}, {"output", "padded_bhsd"}, {"positions", "varlen"},
             {"qkv_bias", true}, {"copy_v", true}};
  Spec spec = parse_spec(j.dump());
  EXPECT_TRUE(spec.io.copy_v);
  EXPECT_TRUE(spec.io.qkv_bias);
  EXPECT_EQ(total_heads(spec), 32 + 8 + 8);
}

TEST(SpecHash, IgnoresKeyOrderWhitespaceAndEquivalentSpellings) {
  const std::string compact =
      R"({"name":"phi-2","head_dim":80,"rotary_dim":32,"num_q_heads":32,"num_kv_heads":32,)"
      R"("layout":"neox","dtype":"fp16","max_position_embeddings":2048,)"
      R"("rope":{"rope_type":"default","rope_theta":10000.0}})";
  const std::string reordered = R"(
    {
      "rope": { "rope_theta": 10000, "rope_type": "default" },
      "max_position_embeddings": 2048.0,
      "dtype": "fp16",   "layout": "neox",
      "num_kv_heads": 32, "num_q_heads": 32,
      "partial_rotary_factor": 0.4,
      "head_dim": 80, "name": "phi-2", "angle": "fp32",
      "io": {"positions": "explicit", "input": "separate"}
    })";
  Spec a = parse_spec(compact), b = parse_spec(reordered);
  EXPECT_EQ(b.rotary_dim, 32);
  EXPECT_EQ(canonical_json(a), canonical_json(b));
  EXPECT_EQ(spec_hash(a), spec_hash(b));
  EXPECT_EQ(spec_hash(a), spec_hash(parse_spec(pretty_json(a))));
}

TEST(SpecHash, DifferentValuesGiveDifferentHashesAndDoublesRoundTrip) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> theta_dist(1e3, 1e7), factor_dist(1.0, 64.0);
  json j = llama3_spec();
  j["rope"]["rope_theta"] = theta_dist(rng);
  j["rope"]["factor"] = factor_dist(rng);
  Spec base = parse_spec(j.dump());
  const Hash128 base_hash = spec_hash(base);
  // Exact round trip of arbitrary doubles through the canonical text.
  Spec again = parse_spec(canonical_json(base));
  EXPECT_EQ(again.rope.theta, j["rope"]["rope_theta"].get<double>());
  EXPECT_EQ(again.rope.factor, j["rope"]["factor"].get<double>());
  EXPECT_EQ(spec_hash(again), base_hash);

  std::vector<std::function<void(json&)>> changes{
      [](json& s) { s["rope"]["rope_theta"] = std::nextafter(s["rope"]["rope_theta"].get<double>(), 1e9); },
      [](json& s) { s["rope"]["factor"] = s["rope"]["factor"].get<double>() + 0.5; },
      [](json& s) { s["name"] = "other"; },
      [](json& s) { s["layout"] = "interleaved"; },
      [](json& s) { s["dtype"] = "fp16"; },
      [](json& s) { s["angle"] = "exact"; },
      [](json& s) { s["rotary_dim"] = 64; },
      [](json& s) { s["num_kv_heads"] = 4; },
      [](json& s) { s["io"] = {{"qkv_bias", true}}; },
      [](json& s) { s["rope"]["original_max_position_embeddings"] = 4096; },
      [](json& s) { s["qk_norm"] = {{"type", "rmsnorm"}}; },
      [](json& s) { s["qk_norm"] = {{"type", "rmsnorm"}, {"scope", "all"}}; },
  };
  std::vector<Hash128> seen{base_hash};
  for (size_t i = 0; i < changes.size(); ++i) {
    json changed = j;
    changes[i](changed);
    Hash128 h = spec_hash(parse_spec(changed.dump()));
    for (const auto& other : seen) EXPECT_NE(h, other) << "change " << i;
    seen.push_back(h);
  }
}

TEST(SpecHash, HexIsHighWordFirst) {
  Hash128 h{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(h.hex(), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(hash_bytes("").hex(), "99aa06d3014798d86001c324468d497f");  // XXH3-128 known answer
  std::string text = "ropejit " + std::to_string(std::random_device{}());
  EXPECT_EQ(hash_bytes(text), hash_bytes(std::string(text)));
  EXPECT_NE(hash_bytes(text), hash_bytes(text + " "));
  EXPECT_EQ(hash_bytes(text).hex().size(), 32u);
}

TEST(SpecFile, MissingFileIsAnIoError) {
  try {
    load_spec_file("/nonexistent/ropejit/spec.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::io_error);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ropejit/spec.json"), std::string::npos);
  }
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(SpecSchema, ShippedSchemaMatchesGenerated) {
  const std::string shipped = read_text(ropejit::test::source_dir() + "/specs/schema.json");
  ASSERT_FALSE(shipped.empty()) << "specs/schema.json missing; run `ropejit spec schema -o specs/schema.json`";
  EXPECT_EQ(shipped, spec_schema_json());
  json schema = json::parse(shipped);
  // Generated from the tables: every enum name and rope parameter is in it.
  for (const auto& row : kRopeTypeNames)
    EXPECT_NE(shipped.find("\"" + std::string(row.name) + "\""), std::string::npos);
  for (const auto& rule : rope_param_rules())
    EXPECT_TRUE(schema["$defs"]["rope"]["properties"].contains(std::string(rule.key)));
}

// Runs a shell command; returns its exit status and combined output.
std::pair<int, std::string> run_command(const std::string& command) {
  return test::run_command(command + " 2>&1");
}

TEST(SpecCli, ValidateReportsEveryIssueAndFails) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: the ropejit CLI is not part of this build";
  const std::string bad_path = testing::TempDir() + "ropejit_bad_spec.json";
  json bad = llama3_spec();
  bad["num_kv_heads"] = 3;
  bad["rope"]["rope_thta"] = 1e4;
  std::ofstream(bad_path) << bad.dump(2);
  const std::string good_path = ropejit::test::source_dir() + "/specs/llama-3.1-8b.json";
  auto [bad_status, bad_output] = run_command(cli + " spec validate " + bad_path + " " + good_path);
  EXPECT_NE(bad_status, 0);
  EXPECT_NE(bad_output.find("/num_kv_heads: 3 is not allowed"), std::string::npos) << bad_output;
  EXPECT_NE(bad_output.find("/rope/rope_thta: unknown key; did you mean \"rope_theta\"?"),
            std::string::npos) << bad_output;
  EXPECT_NE(bad_output.find(good_path + ": OK"), std::string::npos) << bad_output;
  auto [good_status, good_output] = run_command(cli + " spec validate " + good_path);
  EXPECT_EQ(good_status, 0) << good_output;
  auto [hash_status, hash_output] = run_command(cli + " spec hash " + good_path);
  EXPECT_EQ(hash_status, 0);
  EXPECT_EQ(hash_output, spec_hash(load_spec_file(good_path)).hex() + "\n");
}

}  // namespace
}  // namespace ropejit
