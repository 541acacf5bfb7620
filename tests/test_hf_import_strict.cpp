// Strict HF import: every config in tests/data/bad_hf/ is refused with an error that names the
// config key in its `_expect_error_key` member, through the library and through
// `ropejit spec from-hf`; what HF only warns about comes back as warnings, never printed.
// ropejit-tier: unit
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/build_paths.h"
#include "hf_import.h"  // private: spec_from_hf, the HF importer's strict checks under test
#include "support/run_command.h"
#include "support/repo_paths.h"

namespace ropejit {
namespace {

using nlohmann::json;

struct BadConfig {
  std::string name;  // file name without .json
  std::string text;
  std::string key;   // the config key the error must name
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The expected key is read from the text: a file whose number overflows cannot be parsed.
std::vector<BadConfig> bad_configs() {
  static const std::regex expect(R"re("_expect_error_key"\s*:\s*"([^"]+)")re");
  std::vector<BadConfig> out;
  for (const auto& entry : std::filesystem::directory_iterator(test::data_path("bad_hf"))) {
    if (entry.path().extension() != ".json") continue;
    BadConfig bad{entry.path().stem().string(), read_text(entry.path().string()), {}};
    std::smatch match;
    if (std::regex_search(bad.text, match, expect)) bad.key = match[1];
    out.push_back(std::move(bad));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

TEST(HfImportStrict, EveryBadConfigIsRefusedNamingItsKey) {
  const auto bad = bad_configs();
  ASSERT_GE(bad.size(), 40u) << "tests/data/bad_hf/ must hold at least 40 configs";
  for (const auto& config : bad) {
    SCOPED_TRACE(config.name);
    ASSERT_FALSE(config.key.empty()) << "the file has no \"_expect_error_key\" member";
    try {
      spec_from_hf(parse_hf_config(config.text), HfImportOptions{});
      ADD_FAILURE() << "imported without an error";
    } catch (const SpecError& e) {
      EXPECT_EQ(e.code(), Status::invalid_spec);
      bool named = false;
      for (const auto& issue : e.issues()) named = named || issue.pointer == config.key;
      EXPECT_TRUE(named) << "no issue at " << config.key << "; got:\n" << e.what();
      EXPECT_NE(std::string(e.what()).find(config.key + ": "), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a SpecError: " << e.what();
    }
  }
}

TEST(HfImportStrict, ReportsEveryProblemAtOnce) {
  const json config = json::parse(R"({"model_type": "llama", "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": "8", "attention_bias": "false",
    "max_position_embeddings": 8192, "rope_theta": -1,
    "rope_scaling": {"rope_type": "llama3", "factor": "8", "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  try {
    spec_from_hf(config, HfImportOptions{});
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    std::vector<std::string> keys;
    for (const auto& issue : e.issues()) keys.push_back(issue.pointer);
    std::sort(keys.begin(), keys.end());
    EXPECT_EQ(keys, (std::vector<std::string>{"attention_bias", "num_key_value_heads",
                                              "rope_scaling.factor", "rope_theta"}))
        << e.what();
  }
}

TEST(HfImportStrict, MalformedAndOverflowingJson) {
  try {
    parse_hf_config("{\"model_type\": \"llama\",\n \"rope_scaling\": {\"factor\": 2.0,}}");
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.issues().at(0).pointer, "");
    EXPECT_NE(e.issues()[0].message.find("malformed JSON"), std::string::npos) << e.what();
  }
  try {
    parse_hf_config(R"({"text_config": {"rope_scaling": {"long_factor": [1.0, 2.0, 1e999]}}})");
    FAIL() << "expected SpecError";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.issues().at(0).pointer, "text_config.rope_scaling.long_factor[2]");
    EXPECT_NE(e.issues()[0].message.find("1e999 is not allowed: must be a finite number"),
              std::string::npos);
  }
}

// Each case imports, and its warning names the key: HF only warns (or ignores) there.
TEST(HfImportStrict, WarningsWhereHfOnlyWarns) {
  const json base = json::parse(R"({"model_type": "llama", "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "rope_theta": 1000000.0})");
  struct Case {
    const char* label;
    json edit;
    const char* warning;
  };
  const std::vector<Case> cases{
      {"unknown yarn key (YaRN Llama-2 configs)",
       {{"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"finetuned", true},
                          {"original_max_position_embeddings", 32768}}}},
       "rope_scaling.finetuned: unknown key for rope_type \"yarn\""},
      {"typo of an optional key",
       {{"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"beta_fats", 16}}}},
       "did you mean \"beta_fast\"?"},
      {"key of another type",
       {{"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"low_freq_factor", 1.0}}}},
       "rope_scaling.low_freq_factor: does not apply to rope_type \"yarn\""},
      {"yarn factor against M / O",
       {{"rope_scaling", {{"type", "yarn"}, {"factor", 8.0},
                          {"original_max_position_embeddings", 32768}}}},
       "rope_scaling.factor: 8 differs from max_position_embeddings"},
      {"top-level O wins over the block's",
       {{"original_max_position_embeddings", 8192},
        {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 4096}}}},
       "rope_scaling.original_max_position_embeddings: 4096 ignored"},
      {"bias with a QK-norm before RoPE",
       {{"model_type", "cohere"}, {"attention_bias", true}, {"use_qk_norm", true}},
       "attention_bias: the QKV bias is not fused"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    json config = base;
    config.update(c.edit);
    std::vector<std::string> warnings;
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    Spec spec = spec_from_hf(config, HfImportOptions{}, &warnings);
    EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // the library never prints
    EXPECT_FALSE(spec.io.qkv_bias);
    bool found = false;
    for (const auto& w : warnings) found = found || w.find(c.warning) != std::string::npos;
    EXPECT_TRUE(found) << "wanted a warning with: " << c.warning << "\ngot "
                       << json(warnings).dump(1);
  }
}

// ---------------------------------------------------------------- the CLI

std::pair<int, std::string> run(const std::string& command) { return test::run_command(command); }

// A scratch config.json (its file name must not spell the key the test looks for).
std::string scratch_config(const std::string& text) {
  const auto dir = std::filesystem::path(testing::TempDir()) /
                   ("hf_strict_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "config.json";
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

// Every bad config through the command: exit 1..127, the key named, no spec file written.
TEST(HfImportStrictCli, BadConfigsExitNamingTheKeyAndWriteNothing) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: ropejit CLI not built";
  int checked = 0;
  for (const auto& bad : bad_configs()) {
    SCOPED_TRACE(bad.name);
    ++checked;
    const std::string path = scratch_config(bad.text);
    const std::string out = path + ".spec.json";
    std::filesystem::remove(out);
    auto [rc, printed] = run(cli + " spec from-hf '" + path + "' -o '" + out + "' 2>&1");
    EXPECT_GE(rc, 1) << printed;
    EXPECT_LE(rc, 127) << printed;
    EXPECT_NE(printed.find("error: "), std::string::npos) << printed;
    EXPECT_NE(printed.find(bad.key + ": "), std::string::npos) << printed;
    EXPECT_FALSE(std::filesystem::exists(out)) << "wrote " << out;
  }
  EXPECT_GE(checked, 80);
}

TEST(HfImportStrictCli, WarningsGoToStderr) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: ropejit CLI not built";
  const std::string path = scratch_config(R"({"model_type": "llama", "hidden_size": 4096,
    "num_attention_heads": 32, "max_position_embeddings": 65536, "rope_theta": 10000.0,
    "rope_scaling": {"type": "yarn", "factor": 2.0, "finetuned": true,
                     "original_max_position_embeddings": 32768}})");
  auto [rc, err] = run(cli + " spec from-hf '" + path + "' 2>&1 1>/dev/null");
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(err.find("warning: rope_scaling.finetuned: unknown key"), std::string::npos) << err;
  auto [rc2, out] = run(cli + " spec from-hf '" + path + "' 2>/dev/null");
  EXPECT_EQ(rc2, 0);
  EXPECT_EQ(json::parse(out).at("rope").at("rope_type"), "yarn");
}

}  // namespace
}  // namespace ropejit
