// The main job and bench commands end to end through the `ropejit` binary (host backend).
// ropejit-tier: unit
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/build_paths.h"
#include "support/backends.h"
#include "support/run_command.h"
#include "support/spec_builder.h"

namespace {

// stdout and stderr together.
std::pair<int, std::string> run(const std::string& command) {
  return ropejit::test::run_command(command + " 2>&1");
}

std::string cli_or_skip() {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) return {};
  if (!ropejit::test::host_backend_built()) return {};
  return cli;
}

}  // namespace

TEST(CliRun, RunVerifiesAgainstTheReferenceAndReportsJson) {
  const std::string cli = cli_or_skip();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: needs the ropejit command and the host backend";
  const std::string spec = ropejit::test::source_dir() + "/specs/qwen2.5-7b-padded.json";
  auto [rc, out] = run(cli + " run '" + spec + "' --backend host --tokens 33 --json");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j.at("backend"), "host");
  EXPECT_TRUE(j.at("ok").get<bool>());
  EXPECT_GT(j.at("bytes").get<int64_t>(), 0);
  EXPECT_EQ(j.at("tokens").get<int64_t>(), 33);
}

// Above --check-tokens the reference compares that many tokens on the config of --tokens, and the
// full launch is timed: what the reports say, for run and bench.
TEST(CliRun, LargeRunsCheckAFixedNumberOfTokens) {
  const std::string cli = cli_or_skip();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: needs the ropejit command and the host backend";
  const std::string spec = ropejit::test::source_dir() + "/specs/qwen2.5-7b.json";
  auto [rc, out] = run(cli + " run '" + spec + "' --backend host --tokens 41 --check-tokens 9 --repeats 1 --json");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j.at("ok").get<bool>());
  EXPECT_EQ(j.at("tokens").get<int64_t>(), 41);
  EXPECT_EQ(j.at("checked_tokens").get<int64_t>(), 9);
  EXPECT_GT(j.at("time_us").get<double>(), 0.0);
  auto [rc_all, out_all] = run(cli + " run '" + spec + "' --backend host --tokens 41 --check-tokens 0 --json");
  ASSERT_EQ(rc_all, 0) << out_all;
  EXPECT_EQ(nlohmann::json::parse(out_all).at("checked_tokens").get<int64_t>(), 41);
  auto [rc_text, text] = run(cli + " run '" + spec + "' --backend host --tokens 41 --check-tokens 9 --repeats 1");
  ASSERT_EQ(rc_text, 0) << text;
  EXPECT_NE(text.find("checked    9 tokens"), std::string::npos) << text;
  auto [rc_bench, bench] = run(cli + " bench '" + spec + "' --backend host --tokens 3,20 --check-tokens 5 --repeats 1 --json");
  ASSERT_EQ(rc_bench, 0) << bench;
  const auto rows = nlohmann::json::parse(bench);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("checked_tokens").get<int64_t>(), 3);
  EXPECT_EQ(rows[1].at("checked_tokens").get<int64_t>(), 5);
  auto [rc_bad, bad] = run(cli + " run '" + spec + "' --check-tokens -1");
  EXPECT_NE(rc_bad, 0);
  EXPECT_NE(bad.find("--check-tokens"), std::string::npos) << bad;
}

TEST(CliRun, BadArgumentsAreNamed) {
  const std::string cli = cli_or_skip();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: needs the ropejit command and the host backend";
  const std::string spec = ropejit::test::source_dir() + "/specs/llama-3.1-8b.json";
  auto [rc, out] = run(cli + " run '" + spec + "' --backend tpu");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("--backend tpu is not allowed: must be one of auto | cuda | host"), std::string::npos) << out;
  auto [rc2, out2] = run(cli + " run /nonexistent/spec.json");
  EXPECT_NE(rc2, 0);
  EXPECT_NE(out2.find("/nonexistent/spec.json"), std::string::npos) << out2;
}

TEST(CliRun, BenchTimesVerifiedLaunches) {
  const std::string cli = cli_or_skip();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: needs the ropejit command and the host backend";
  const std::string spec = ropejit::test::source_dir() + "/specs/gpt-neox-20b.json";
  auto [rc, out] = run(cli + " bench '" + spec + "' --backend host --tokens 1,20 --json");
  ASSERT_EQ(rc, 0) << out;
  const auto rows = nlohmann::json::parse(out);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_TRUE(row.at("ok").get<bool>());
    EXPECT_GT(row.at("time_us").get<double>(), 0.0);
  }
}
