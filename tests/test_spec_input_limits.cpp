// Issue 15 regressions on the spec side: JSON nested 100k deep or holding a NUL byte is refused
// (never a stack overflow, never text silently ignored), quoted values are clipped, every float
// the kernel bakes is validated at the field that causes it, the partial_rotary_factor message,
// and original_max_position_embeddings above max_position_embeddings as HF treats it.
// ropejit-tier: unit
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/build_paths.h"
#include "hf_import.h"  // private: spec_from_hf and parse_hf_config input limits under test
#include "ropejit/json_limits.h"
#include "ropejit/spec.h"
#include "support/run_command.h"
#include "support/spec_builder.h"

namespace ropejit {
namespace {

using nlohmann::json;

// Llama 3.1's shape: head_dim and rotary_dim 128, M 131072, llama3 rope with O 8192.
json llama3_spec() {
  test::SpecFields fields;
  fields.max_position_embeddings = 131072;
  fields.rope = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                 {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  return test::spec_json(fields);
}

// A longrope block of 4 pairs (head_dim 8) with O = `original`.
json longrope_edit(int64_t original, double long_factor_2) {
  return {{"head_dim", 8}, {"rotary_dim", 8},
          {"rope", {{"rope_type", "longrope"}, {"rope_theta", 1e4}, {"original_max_position_embeddings", original},
                    {"short_factor", {1.0, 1.0, 1.0, 1.0}}, {"long_factor", {2.0, 2.0, long_factor_2, 2.0}}}}};
}

json llama_config() {
  return json::parse(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "rope_theta": 500000.0})");
}

std::vector<SpecIssue> issues_of(const std::string& text) {
  try {
    parse_spec(text);
  } catch (const SpecError& e) {
    return e.issues();
  }
  return {};
}

std::vector<SpecIssue> hf_issues_of(const json& config, std::vector<std::string>* warnings = nullptr) {
  try {
    spec_from_hf(config, HfImportOptions{}, warnings);
  } catch (const SpecError& e) {
    return e.issues();
  }
  return {};
}

// A document edited by `edit` (merged over a base) and the issue it must give.
struct EditCase {
  const char* label;
  json edit;
  const char* pointer;  ///< JSON pointer (spec) or key path (HF config)
  const char* fragment;
};

// The issue at `pointer` whose message holds `fragment`, or a failure listing what was found.
void expect_issue(const std::vector<SpecIssue>& issues, const std::string& pointer, const std::string& fragment) {
  std::string all;
  for (const auto& issue : issues) {
    if (issue.pointer == pointer && issue.message.find(fragment) != std::string::npos) return;
    all += "\n  " + issue.to_string();
  }
  ADD_FAILURE() << "no issue at " << pointer << " with \"" << fragment << "\"; got:" << all;
}

// Each case's edit of `base`, read by `read`, gives its issue.
template <class Read>
void expect_each(const json& base, const std::vector<EditCase>& cases, Read read) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    json document = base;
    document.update(c.edit);
    expect_issue(read(document), c.pointer, c.fragment);
  }
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string scratch_file(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::path(testing::TempDir()) / ("spec_limits_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

TEST(SpecInputLimits, DeepNestingIsRefusedBeforeParsing) {
  std::string deep_name = llama3_spec().dump();
  deep_name.replace(deep_name.find("\"test\""), 6, nested(100000));
  for (const std::string& text : {std::string(100000, '['), nested(100000), deep_name}) {
    const auto issues = issues_of(text);
    ASSERT_EQ(issues.size(), 1u);
    EXPECT_EQ(issues[0].pointer, "");
    EXPECT_NE(issues[0].message.find("nesting deeper than 64 levels"), std::string::npos) << issues[0].message;
    try {
      parse_hf_config(text);
      ADD_FAILURE() << "parse_hf_config accepted it";
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find("nesting deeper than 64 levels"), std::string::npos) << e.what();
    }
  }
  // 64 levels are read (and refused for what they are); 65 are not.
  EXPECT_EQ(json_text_problem(nested(kMaxJsonDepth)), std::nullopt);
  EXPECT_NE(json_text_problem(nested(kMaxJsonDepth + 1)), std::nullopt);
  // Brackets inside strings are text, not nesting.
  EXPECT_EQ(json_text_problem("{\"name\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}"),
            std::nullopt);
}

TEST(SpecInputLimits, TheCommandsFailCleanlyOnDeepNesting) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: the ropejit CLI is not part of this build";
  const std::string path = scratch_file("deep.json", nested(100000));
  for (const char* command : {" spec validate ", " spec from-hf "}) {
    SCOPED_TRACE(command);
    auto [status, output] = test::run_command(cli + command + "'" + path + "' 2>&1");
    EXPECT_EQ(status, 1) << output;  // -1 when killed by SIGSEGV
    EXPECT_NE(output.find("nesting deeper than 64 levels"), std::string::npos) << output;
  }
}

TEST(SpecInputLimits, NulByteIsRefusedNamingItsOffset) {
  const std::string good = llama3_spec().dump();
  const std::string text = good + std::string(1, '\0') + "{\"anything\": 1}";
  const auto issues = issues_of(text);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].pointer, "");
  EXPECT_NE(issues[0].message.find("a NUL byte at byte offset " + std::to_string(good.size())), std::string::npos)
      << issues[0].message;
  try {
    load_spec_file(scratch_file("nul.json", text));
    ADD_FAILURE() << "load_spec_file accepted a file with a NUL byte";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("NUL byte"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_hf_config(llama_config().dump() + std::string(1, '\0')), SpecError);
}

TEST(SpecInputLimits, HugeValuesAreClippedInMessages) {
  json spec = llama3_spec();
  spec["head_dim"] = std::string(100000, 'x');
  json deep = json::array();
  for (int i = 0; i < 60; ++i) deep = json::array({deep, std::string(100, 'y')});
  spec["layout"] = deep;
  for (const auto& issue : issues_of(spec.dump())) {
    EXPECT_LE(issue.message.size(), 400u) << issue.to_string().substr(0, 400);
    if (issue.pointer == "/head_dim" || issue.pointer == "/layout")
      EXPECT_NE(issue.message.find("... is not allowed"), std::string::npos) << issue.message;
  }
  json config = llama_config();
  config["model_type"] = std::string(100000, 'z');
  for (const auto& issue : hf_issues_of(config)) EXPECT_LE(issue.message.size(), 400u) << issue.pointer;
  // Cut on a character boundary: "é" is two bytes.
  std::string accents;
  for (int i = 0; i < 60; ++i) accents += "\xc3\xa9";
  const std::string clipped = clip_for_message(accents, 80);
  EXPECT_LE(clipped.size(), 80u);
  EXPECT_EQ(clipped.substr(clipped.size() - 3), "...");
  EXPECT_EQ((clipped.size() - 3) % 2, 0u) << "a two-byte character was split";
  EXPECT_EQ(clip_for_message("short"), "short");
}

// Values that pass their own range check but give no finite non-zero float32 to bake.
TEST(SpecDerivedFloats, EveryBakedValueIsAFiniteFloat32NamedByItsField) {
  auto rope = [](json block) { return json{{"rope", std::move(block)}}; };
  const std::vector<EditCase> cases{
      {"subnormal rope_theta (float32 0, inv_freq inf)", rope({{"rope_type", "default"}, {"rope_theta", 1e-320}}),
       "/rope/rope_theta", "1e-320 is not allowed: must be a base giving every inv_freq a finite float32 > 0"},
      {"rope_theta above float32", rope({{"rope_type", "default"}, {"rope_theta", 1e300}}), "/rope/rope_theta",
       "1e+300 is not allowed"},
      {"yarn attention_factor above float32",
       rope({{"rope_type", "yarn"}, {"rope_theta", 1e4}, {"factor", 4.0}, {"attention_factor", 1e300}}),
       "/rope/attention_factor", "1e+300 is not allowed: must be a finite float32 > 0"},
      {"linear factor dividing inv_freq to 0", rope({{"rope_type", "linear"}, {"rope_theta", 1e4}, {"factor", 1e300}}),
       "/rope/factor", "1e+300 is not allowed: must be a factor keeping every inv_freq a finite float32 > 0"},
      {"ntk alpha overflowing the base", rope({{"rope_type", "ntk"}, {"rope_theta", 1e4}, {"alpha", 1e300}}),
       "/rope/alpha", "1e+300 is not allowed"},
      {"yarn with rope_theta 1 (log 1 = 0: NaN)", rope({{"rope_type", "yarn"}, {"rope_theta", 1.0}, {"factor", 4.0}}),
       "/rope", "every inv_freq must be a finite float32 > 0"},
      {"longrope factor giving inv_freq 0", longrope_edit(4096, 1e300), "/rope/long_factor/2", "1e+300 is not allowed"},
      {"qk_norm eps below float32", {{"qk_norm", {{"type", "rmsnorm"}, {"eps", 1e-50}}}}, "/qk_norm/eps",
       "1e-50 is not allowed: must be a number >= 1.4e-45"},
  };
  expect_each(llama3_spec(), cases, [](const json& spec) { return issues_of(spec.dump()); });
  // Through the HF import the problem is named by the config key.
  json config = llama_config();
  config["rope_theta"] = 1e-320;
  expect_issue(hf_issues_of(config), "rope_theta", "1e-320 is not allowed");
}

TEST(SpecValidation, PartialRotaryFactorGivingNoRotaryDimIsNamedWithExplicitRotaryDim) {
  json spec = llama3_spec();
  spec["rotary_dim"] = 64;
  spec["partial_rotary_factor"] = 0.001;
  const auto issues = issues_of(spec.dump());
  ASSERT_EQ(issues.size(), 1u) << issues.size();
  EXPECT_EQ(issues[0].pointer, "/partial_rotary_factor");
  EXPECT_NE(issues[0].message.find("a fraction giving an even rotary_dim >= 2 (floor(128 * 0.001) = 0)"),
            std::string::npos) << issues[0].message;
  spec["partial_rotary_factor"] = 0.25;  // 32: a real disagreement is still named at rotary_dim
  expect_issue(issues_of(spec.dump()), "/rotary_dim", "64 is not allowed: must be 32 = floor(head_dim");
}

// HF v5 rejects original_max_position_embeddings >= max_position_embeddings for no type: it
// warns for llama3 and for a yarn factor that differs from M / O. ropejit does the same.
TEST(SpecValidation, OriginalLengthAboveMaxIsAcceptedAsHfDoes) {
  json llama3 = llama3_spec();
  llama3["rope"]["original_max_position_embeddings"] = 262144;
  EXPECT_TRUE(issues_of(llama3.dump()).empty());
  json yarn = llama3_spec();
  yarn["rope"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0},
                  {"original_max_position_embeddings", 262144}};
  EXPECT_TRUE(issues_of(yarn.dump()).empty());
  json longrope = llama3_spec();
  longrope.update(longrope_edit(262144, 2.0));
  EXPECT_TRUE(issues_of(longrope.dump()).empty());
}

TEST(HfImportStrict, OriginalLengthAboveMaxWarnsForLlama3AsHfDoes) {
  json config = llama_config();
  config["max_position_embeddings"] = 8192;
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16384}};
  std::vector<std::string> warnings;
  const Spec spec = spec_from_hf(config, HfImportOptions{}, &warnings);
  EXPECT_EQ(*spec.rope.original_max_position_embeddings, 16384);
  bool warned = false;
  for (const auto& w : warnings)
    warned = warned || w.find("rope_scaling.original_max_position_embeddings: 16384 is not below "
                              "max_position_embeddings (8192)") != std::string::npos;
  EXPECT_TRUE(warned) << json(warnings).dump(1);
}

// Every key the import reads is type-checked and named; none surfaces as a library exception.
TEST(HfImportStrict, KeysOfTheWrongTypeAreNamed) {
  const std::vector<EditCase> cases{
      {"model_type number", {{"model_type", 5}}, "model_type", "5 is not allowed: must be a string"},
      {"model_type null", {{"model_type", nullptr}}, "model_type", "null is not allowed: must be a string"},
      {"model_type object", {{"model_type", json::object()}}, "model_type", "{} is not allowed: must be a string"},
      {"hidden_size string", {{"hidden_size", "4096"}}, "hidden_size", "\"4096\" is not allowed: must be an integer"},
      {"attention_bias string", {{"attention_bias", "true"}}, "attention_bias",
       "\"true\" is not allowed: must be true or false"},
      {"rope_ratio string",
       {{"model_type", "chatglm"}, {"kv_channels", 128}, {"rope_theta", nullptr}, {"rope_ratio", "50"}},
       "rope_ratio", "\"50\" is not allowed: must be a finite number > 0"},
      {"rope_local_base_freq string", {{"model_type", "gemma3_text"}, {"head_dim", 128}, {"rope_local_base_freq", "1e4"}},
       "rope_local_base_freq", "\"1e4\" is not allowed"},
  };
  expect_each(llama_config(), cases, [](const json& config) { return hf_issues_of(config); });
  try {
    parse_hf_config(R"({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 1e309}})");
    ADD_FAILURE() << "a factor overflowing a double was read";
  } catch (const SpecError& e) {
    expect_issue(e.issues(), "rope_scaling.factor", "1e309 is not allowed: must be a finite number");
  }
}

}  // namespace
}  // namespace ropejit
