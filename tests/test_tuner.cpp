// The tuning loop against a deterministic cost model (no GPU): it finds the model's optimum,
// keeps to the budget, refuses wrong outputs and spilling binaries.
// ropejit-tier: unit
#include <gtest/gtest.h>

#include "support/build_paths.h"
#include "support/run_command.h"
#include "support/repo_paths.h"
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/device_workload.h"
#include "launch/launch_args.h"  // private: check_launch, which every workload set's Args must pass
#include "ropejit/source.h"
#include "ropejit/tuner.h"
#include "support/spec_builder.h"
#include "workload_data.h"  // private: tuning_workload and compare_output_bytes, the tuner's checks under test

namespace ropejit {
namespace {

/// A Measurer whose "kernel time" is a fixed function of the config and the token count, and
/// whose clock advances by exactly the simulated time spent.
class FakeMeasurer : public Measurer {
 public:
  /// Configs whose output check fails, by name.
  std::set<std::string> wrong_output;
  /// Configs whose binary spills, by name.
  std::set<std::string> spilling;
  /// Every 5th sample is 10x slower (a hiccup the median must ignore).
  bool hiccups = true;
  int64_t tokens = 0;
  double clock_ms = 0.0;
  int checks = 0;
  std::map<std::string, int> timed_samples;
  std::vector<std::string> prepared_names;

  /// Model: the optimum is block 128, vec 8, 2 heads per thread, table, persistent at large
  /// sizes; each step away costs a fixed fraction.
  static double model_us(const Config& c, int64_t tokens) {
    const double base = 2.0 + double(tokens) * 0.01;
    double penalty = 1.0;
    penalty += 0.07 * std::fabs(std::log2(double(c.block_threads) / 128.0));
    penalty += 0.11 * std::fabs(std::log2(8.0 / double(c.vec)));
    penalty += 0.05 * std::fabs(std::log2(double(c.heads_per_thread) / 2.0));
    penalty += c.sincos == SinCosMode::table ? 0.0 : 0.03;
    const bool persistent_wins = tokens >= 4096;
    penalty += (c.grid == GridMode::persistent) == persistent_wins ? 0.0 : 0.02;
    return base * penalty;
  }

  std::vector<Prepared> prepare(const Spec&, const std::vector<Config>& configs) override {
    std::vector<Prepared> out;
    for (const auto& c : configs) {
      prepared_names.push_back(config_name(c));
      Binary b;
      b.registers = 24 + 8 * c.heads_per_thread;
      b.spill_bytes = spilling.count(config_name(c)) ? 64 : 0;
      out.push_back({b, ""});
    }
    return out;
  }
  void set_workload(const WorkloadShape& shape) override { tokens = shape.tokens; }
  std::string check(const Config& c) override {
    ++checks;
    return wrong_output.count(config_name(c)) ? "q[3] = 7 but the reference gives 0.5" : "";
  }
  std::vector<double> time(const Config& c, int samples) override {
    std::vector<double> out;
    int& seen = timed_samples[config_name(c)];
    for (int i = 0; i < samples; ++i, ++seen) {
      const double us = model_us(c, tokens) * (hiccups && seen % 5 == 4 ? 10.0 : 1.0);
      clock_ms += us / 1e3 + 0.002;  // plus a launch and synchronize overhead
      out.push_back(us);
    }
    return out;
  }
  double copy_bandwidth_gbps() override { return 3000.0; }
  int sm_count() const override { return 132; }
  double now_ms() override { return clock_ms; }
};

Spec llama_like() {
  test::SpecFields f;
  f.name = "llama-like";
  f.num_q_heads = 32;
  f.num_kv_heads = 8;
  return test::make_spec(f);
}

/// The model's best among the candidates the tuner may consider at `tokens`.
Config model_optimum(const Spec& spec, int64_t tokens, const std::set<std::string>& excluded = {}) {
  const auto candidates = bucket_candidates(spec, search_space(spec).configs, tokens, 132);
  const Config* best = nullptr;
  for (const auto& c : candidates) {
    if (excluded.count(config_name(c))) continue;
    if (!best || FakeMeasurer::model_us(c, tokens) < FakeMeasurer::model_us(*best, tokens)) best = &c;
  }
  return *best;
}

TEST(Tuner, FindsTheCostModelsOptimumInEveryBucket) {
  const Spec spec = llama_like();
  FakeMeasurer m;
  TuneOptions o;
  o.tokens = {1, 16, 256, 4096, 65536};
  o.budget_ms = 1e6;  // ample
  const auto results = tune({spec}, m, o);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_EQ(results[0].buckets.size(), 5u);
  for (const auto& b : results[0].buckets) {
    SCOPED_TRACE(b.tokens);
    ASSERT_TRUE(b.best);
    EXPECT_EQ(config_name(b.best->config), config_name(model_optimum(spec, b.tokens)));
    EXPECT_NEAR(b.best->time_us, FakeMeasurer::model_us(b.best->config, b.tokens), 1e-9) << "median ignores hiccups";
    ASSERT_TRUE(b.runner_up);
    EXPECT_GE(b.runner_up->time_us, b.best->time_us);
    EXPECT_EQ(b.bucket, bucket_of(b.tokens));
    EXPECT_EQ(config_name(b.default_result.config), config_name(default_config(spec, b.tokens)));
    EXPECT_GE(b.speedup, 1.0);
    EXPECT_NEAR(b.speedup, b.default_result.time_us / b.best->time_us, 1e-12);
    EXPECT_GT(b.best->gbps, 0.0);
    EXPECT_NEAR(b.best->copy_fraction, b.best->gbps / 3000.0, 1e-12);
    EXPECT_GT(b.best->registers, 0);
    for (const auto& c : b.candidates) EXPECT_TRUE(c.rejected.empty()) << config_name(c.config) << ": " << c.rejected;
  }
  // The model's optimum changes with size (persistent from 4096 tokens on) and the tuner follows.
  EXPECT_EQ(results[0].buckets[0].best->config.grid, GridMode::blocks);
  EXPECT_EQ(results[0].buckets[4].best->config.grid, GridMode::persistent);
}

TEST(Tuner, CompilesEachConfigOnceForAllBuckets) {
  const Spec spec = llama_like();
  FakeMeasurer m;
  TuneOptions o;
  o.budget_ms = 1e5;
  tune({spec}, m, o);
  EXPECT_EQ(m.prepared_names.size(), search_space(spec).configs.size());
}

TEST(Tuner, KeepsToTheBudget) {
  const Spec spec = llama_like();
  FakeMeasurer m;
  m.hiccups = false;
  TuneOptions o;
  o.tokens = {65536};
  // ~660 us per launch; the default plus a handful of candidates fit.
  o.budget_ms = 40.0;
  const auto results = tune({spec}, m, o);
  const BucketResult& b = results[0].buckets[0];
  const double slowest_us = 2.0 * FakeMeasurer::model_us(default_config(spec), 65536);
  const double one_candidate_ms = (o.warmup_samples + o.min_samples) * (slowest_us / 1e3 + 0.002);
  EXPECT_LE(b.elapsed_ms, o.budget_ms + one_candidate_ms);
  int skipped = 0, measured = 0;
  for (const auto& c : b.candidates) {
    if (c.rejected.find("budget") != std::string::npos) ++skipped;
    if (c.samples > 0) ++measured;
  }
  EXPECT_GT(skipped, 0) << "a 40 ms budget cannot cover every candidate";
  EXPECT_GE(measured, 2);
  EXPECT_TRUE(b.default_result.samples > 0) << "the default is always measured";
  ASSERT_TRUE(b.best);

  // A larger budget measures more candidates, and spends more (clock) time.
  FakeMeasurer m2;
  m2.hiccups = false;
  o.budget_ms = 400.0;
  const auto more = tune({spec}, m2, o);
  int measured_more = 0;
  for (const auto& c : more[0].buckets[0].candidates) measured_more += c.samples > 0;
  EXPECT_GT(measured_more, measured);
  EXPECT_LE(more[0].buckets[0].elapsed_ms, o.budget_ms + one_candidate_ms);
}

TEST(Tuner, RefusesACandidateWhoseOutputIsWrong) {
  const Spec spec = llama_like();
  const Config optimum = model_optimum(spec, 4096);
  FakeMeasurer m;
  m.wrong_output = {config_name(optimum)};
  TuneOptions o;
  o.tokens = {4096};
  o.budget_ms = 1e6;
  const auto results = tune({spec}, m, o);
  const BucketResult& b = results[0].buckets[0];
  ASSERT_TRUE(b.best);
  EXPECT_NE(config_name(b.best->config), config_name(optimum));
  EXPECT_EQ(config_name(b.best->config), config_name(model_optimum(spec, 4096, m.wrong_output)));
  bool refused = false;
  for (const auto& c : b.candidates)
    if (c.config == optimum) {
      refused = c.rejected.rfind("wrong output", 0) == 0 && c.samples == 0;
      EXPECT_NE(c.rejected.find("q[3] = 7"), std::string::npos) << c.rejected;
    }
  EXPECT_TRUE(refused);
  EXPECT_EQ(m.timed_samples.count(config_name(optimum)), 0u) << "a wrong candidate is never timed";
  EXPECT_GT(m.checks, 1);
}

TEST(Tuner, RejectsBinariesThatSpill) {
  const Spec spec = llama_like();
  const Config optimum = model_optimum(spec, 256);
  FakeMeasurer m;
  m.spilling = {config_name(optimum)};
  TuneOptions o;
  o.tokens = {256};
  o.budget_ms = 1e6;
  const auto results = tune({spec}, m, o);
  ASSERT_EQ(results[0].compile_rejected.size(), 1u);
  EXPECT_EQ(results[0].compile_rejected[0].config, optimum);
  EXPECT_NE(results[0].compile_rejected[0].rejected.find("spills 64 bytes"), std::string::npos);
  EXPECT_NE(config_name(results[0].buckets[0].best->config), config_name(optimum));
}

TEST(Tuner, OneTokenCountPerBucketAndEntriesForTheDatabase) {
  const Spec spec = llama_like();
  FakeMeasurer m;
  TuneOptions o;
  o.tokens = {300, 256, 1, 2};  // 300 and 256 share a bucket (the first given wins); 2 is its own
  o.budget_ms = 1e5;
  const auto results = tune({spec, spec}, m, o);
  ASSERT_EQ(results.size(), 2u);
  std::vector<int64_t> tuned;
  for (const auto& b : results[0].buckets) tuned.push_back(b.tokens);
  EXPECT_EQ(tuned, (std::vector<int64_t>{1, 2, 300}));
  const auto entries = results[0].entries();
  ASSERT_EQ(entries.size(), 3u);
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].spec_hash, spec_hash(spec).hex());
    EXPECT_EQ(entries[i].bucket, results[0].buckets[i].bucket);
    EXPECT_EQ(entries[i].best.config, results[0].buckets[i].best->config);
    ASSERT_TRUE(entries[i].runner_up);
    EXPECT_GT(entries[i].default_time_us, 0.0);
    EXPECT_EQ(entries[i].date.size(), 20u);  // 2025-01-31T12:00:00Z
  }
  EXPECT_THROW(tune({spec}, m, TuneOptions{{0}}), Error);
}

TEST(Tuner, ReportsProgressWithAnEta) {
  const Spec spec = llama_like();
  FakeMeasurer m;
  TuneOptions o;
  o.tokens = {1, 4096};
  o.budget_ms = 100.0;
  std::vector<TuneProgress> seen;
  tune({spec, spec}, m, o, [&](const TuneProgress& p) { seen.push_back(p); });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().spec_count, 2);
  EXPECT_EQ(seen.front().token_count, 2);
  EXPECT_EQ(seen.back().spec_index, 1);
  EXPECT_EQ(seen.back().token_index, 1);
  EXPECT_EQ(seen.back().candidate, seen.back().candidates - 1);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].elapsed_s, seen[i - 1].elapsed_s);
    EXPECT_GE(seen[i].eta_s, 0.0);
  }
  // Half-way through, the ETA predicts about as much again.
  const auto& mid = seen[seen.size() / 2];
  EXPECT_GT(mid.eta_s, 0.0);
}

TEST(Tuner, RejectsANonPositiveBudget) {
  FakeMeasurer m;
  TuneOptions o;
  o.budget_ms = 0;
  EXPECT_THROW(tune({llama_like()}, m, o), Error);
}

// ---------------------------------------------------------------- workloads on a real backend

/// Runs `config` once on the first set of `w` and reads back what it wrote.
std::vector<HostTensor> run_once(Backend& backend, const Spec& spec, const Config& config, DeviceWorkload& w) {
  const auto variant = KernelVariant::create(backend, spec, config, nullptr);
  w.reset_first_set();
  const KernelParams& params = w.params(*variant);
  variant->launch(params, variant->dims(w.rows()), nullptr);
  backend.synchronize();
  return w.read_first_set();
}

TEST(TunerWorkload, EveryIoFormRunsAndConfigsAgreeWithTheDefault) {
  std::unique_ptr<Backend> backend;
  try {
    backend = make_host_backend();
  } catch (const Error& e) {
    GTEST_SKIP() << "no host backend in this build: " << e.what();
  }
  std::vector<test::SpecFields> forms(4);
  forms[0].name = "separate-inplace";
  forms[1].name = "packed-bias-separate";
  forms[1].input = "packed_qkv";
  forms[1].output = "separate";
  forms[1].qkv_bias = true;
  forms[1].head_dim = 96;
  forms[1].rotary_dim = 64;
  forms[2].name = "varlen-padded-fp16-interleaved";
  forms[2].positions = "varlen";
  forms[2].output = "padded_bhsd";
  forms[2].dtype = "fp16";
  forms[2].layout = "interleaved";
  forms[3].name = "dynamic-fp32";
  forms[3].dtype = "fp32";
  forms[3].rope = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}};
  std::mt19937_64 seeds(std::random_device{}());
  for (const auto& f : forms) {
    const Spec spec = test::make_spec(f);
    const SearchSpace space = search_space(spec);
    // The default against the config farthest from it in the enumeration (other block, heads,
    // vector width, sin/cos mode, grid).
    const Config other = space.configs.back() == default_config(spec) ? space.configs.front() : space.configs.back();
    for (int64_t tokens : {3, 100}) {
      SCOPED_TRACE(spec.name + " @" + std::to_string(tokens) + " vs " + config_name(other));
      const WorkloadShape shape = workload_shape(spec, tokens);
      DeviceWorkload w(*backend, tuning_workload(spec, shape, seeds()), 2);
      // Every set's Args pass the launch checks (host memory: contents too); tables are shared.
      for (size_t s = 0; s < w.set_count(); ++s) {
        const Args a = w.args(s);
        check_launch(spec, default_config(spec).vec, a, true);
        EXPECT_EQ(a.bias, w.args(0).bias);
        EXPECT_EQ(a.positions, w.args(0).positions);
        EXPECT_EQ(a.cu_seqlens, w.args(0).cu_seqlens);
      }
      const auto reference = run_once(*backend, spec, default_config(spec), w);
      const auto candidate = run_once(*backend, spec, other, w);
      ASSERT_EQ(reference.size(), candidate.size());
      for (size_t i = 0; i < reference.size(); ++i) {
        EXPECT_EQ(compare_output_bytes(spec.dtype, reference[i].name, candidate[i].bytes, reference[i].bytes), "");
        // Every element written (padding zeroed): no poison left.
        std::string poison(size_t(dtype_size(spec.dtype)), '\xff');
        bool poisoned = false;
        for (size_t at = 0; at + poison.size() <= reference[i].bytes.size() && !poisoned; at += poison.size())
          poisoned = reference[i].bytes.compare(at, poison.size(), poison) == 0;
        EXPECT_FALSE(poisoned) << reference[i].name << " has unwritten elements";
        // The kernel did something: in-place outputs differ from the inputs.
        if (spec.io.output == OutputForm::inplace)
          EXPECT_NE(reference[i].bytes, w.host().find(reference[i].name)->bytes);
      }
      // Another set is a separate copy: launching on set 1 leaves set 0 alone.
      w.reset_first_set();
      const auto before = w.read_first_set();
      const auto variant = KernelVariant::create(*backend, spec, default_config(spec), nullptr);
      const KernelParams& first = w.params(*variant);
      const KernelParams second = w.params_of_set(first, 1);
      EXPECT_NE(second.in[0].ptr, first.in[0].ptr);
      variant->launch(second, variant->dims(w.rows()), nullptr);
      const auto after = w.read_first_set();
      for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i].bytes, before[i].bytes) << after[i].name;
      // A wrong output is caught: one element moved by a large amount.
      // Flip the top exponent bit of the middle element (little endian: its last byte), so the
      // change is large whatever the element's value.
      auto broken = candidate[0].bytes;
      const size_t element_bytes = size_t(dtype_size(spec.dtype));
      broken[(broken.size() / element_bytes / 2) * element_bytes + element_bytes - 1] ^= 0x40;
      EXPECT_NE(compare_output_bytes(spec.dtype, candidate[0].name, broken, reference[0].bytes), "");
    }
  }
}

// ---------------------------------------------------------------- the command

std::string run_cli(const std::string& args, int* rc) {
  auto [status, out] = test::run_command(std::string(ropejit::test::cli_path()) + " " + args + " 2>&1");
  *rc = status;
  return out;
}

TEST(TuneCommand, WithoutAGpuTuneFailsClearlyAndDryRunCompilesTheSpace) {
  if (std::string(ropejit::test::cli_path()).empty()) GTEST_SKIP() << "the ropejit command is not built";
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: the no-GPU message does not apply";
  const std::string spec = ropejit::test::source_dir() + "/specs/llama-3.2-1b.json";
  int rc = 0;
  const std::string refused = run_cli("tune " + spec, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(refused.find("tuning measures on a GPU"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--dry-run"), std::string::npos) << refused;

  const std::string bad = run_cli("tune " + spec + " --dry-run --tokens 1,zero", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(bad.find("\"zero\" is not allowed"), std::string::npos) << bad;

  const std::string out = run_cli("tune " + spec + " --dry-run --json --tokens 1,65536", &rc);
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 1u);
  const Spec parsed = load_spec_file(spec);
  EXPECT_EQ(j[0]["configs"].size(), search_space(parsed).configs.size());
  // Configs differing only in the grid mode share one source, compiled once.
  EXPECT_LT(j[0]["distinct_sources"].get<size_t>(), j[0]["configs"].size());
  EXPECT_GE(j[0]["compile_threads"].get<int>(), 1);
  for (const auto& c : j[0]["configs"]) {
    EXPECT_EQ(c["status"], "ok") << c.dump();
    EXPECT_EQ(c["spill_bytes"], 0) << c.dump();
  }
  ASSERT_EQ(j[0]["buckets"].size(), 2u);
  EXPECT_LT(j[0]["buckets"][0]["candidates"].size(), j[0]["buckets"][1]["candidates"].size())
      << "fewer candidates at one token than at 65536";
}

}  // namespace
}  // namespace ropejit
