// The tuner's search space: generation from tunables(), spec pruning, bucket pruning, workloads.
// ropejit-tier: unit
// ropejit-tier: compile StaticPrune
#include <gtest/gtest.h>

#include "support/repo_paths.h"

#include <algorithm>
#include <map>
#include <set>

#include "ropejit/compile.h"
#include "ropejit/source.h"
#include "ropejit/tuner.h"
#include "support/spec_builder.h"

namespace ropejit {
namespace {

std::set<std::string> names(const std::vector<Config>& configs) {
  std::set<std::string> out;
  for (const auto& c : configs) out.insert(config_name(c));
  return out;
}

TEST(SearchSpace, FullSpaceIsEveryCombinationOfTheTunablesTable) {
  size_t expected = 1;
  for (const auto& t : tunables()) expected *= t.values.size();
  const auto space = full_config_space();
  EXPECT_EQ(space.size(), expected);
  EXPECT_EQ(names(space).size(), expected) << "duplicates in the full space";
  // Every listed value of every axis appears.
  std::set<int> blocks, vecs, hpts;
  for (const auto& c : space) {
    blocks.insert(c.block_threads);
    vecs.insert(c.vec);
    hpts.insert(c.heads_per_thread);
  }
  for (const auto& t : tunables()) {
    const std::set<int> values(t.values.begin(), t.values.end());
    if (t.name == "block_threads") EXPECT_EQ(blocks, values);
    if (t.name == "vec") EXPECT_EQ(vecs, values);
    if (t.name == "heads_per_thread") EXPECT_EQ(hpts, values);
  }
}

void expect_space_is_sound(const Spec& spec) {
  SCOPED_TRACE(spec.name);
  const SearchSpace space = search_space(spec);
  const auto kept = names(space.configs);
  ASSERT_FALSE(space.configs.empty());
  EXPECT_EQ(kept.size(), space.configs.size()) << "duplicates";
  EXPECT_TRUE(kept.count(config_name(default_config(spec)))) << "the default must always be measured";
  // The default is added when the tunables' lists lack one of its values (Gemma 4: 6 heads).
  const std::vector<Config> full = full_config_space();
  const bool default_listed =
      std::any_of(full.begin(), full.end(), [&](const Config& c) { return c == default_config(spec); });
  EXPECT_EQ(space.configs.size() + space.pruned.size(), full.size() + (default_listed ? 0 : 1));
  const int heads = total_heads(spec);
  std::set<int> kept_vecs;
  for (const auto& c : space.configs) {
    EXPECT_FALSE(config_problem(spec, c)) << config_name(c) << ": " << config_problem(spec, c).value_or("");
    if (c == default_config(spec)) continue;
    EXPECT_TRUE(c.heads_per_thread == 1 || c.heads_per_thread <= heads) << config_name(c);
    kept_vecs.insert(c.vec);
  }
  EXPECT_LE(kept_vecs.size(), 2u);
  for (const auto& p : space.pruned) {
    EXPECT_FALSE(p.reason.empty()) << config_name(p.config);
    EXPECT_FALSE(kept.count(config_name(p.config))) << config_name(p.config) << " both kept and pruned";
    // "invalid" exactly when config_problem says so.
    const bool invalid = config_problem(spec, p.config).has_value();
    EXPECT_EQ(invalid, p.reason.rfind("invalid: ", 0) == 0) << config_name(p.config) << ": " << p.reason;
  }
  // The widest valid vector width is never pruned for narrowness.
  int widest = 0;
  for (int v : {1, 2, 4, 8}) {
    Config probe = default_config(spec);
    probe.vec = v;
    if (!config_problem(spec, probe)) widest = std::max(widest, v);
  }
  EXPECT_TRUE(kept_vecs.empty() || kept_vecs.count(widest)) << "widest " << widest;
}

TEST(SearchSpace, EverySpecInSpecsDirectoryGivesASoundPrunedSpace) {
  const auto files = test::spec_files();
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) expect_space_is_sound(load_spec_file(path));
}

TEST(SearchSpace, TestMatrixSpecsGiveSoundSpaces) {
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp16", "fp32"})
      for (int rotary : {64, 96, 128}) {
        test::SpecFields f;
        f.layout = layout;
        f.dtype = dtype;
        f.rotary_dim = rotary;
        f.name = std::string(layout) + dtype + std::to_string(rotary);
        expect_space_is_sound(test::make_spec(f));
      }
  test::SpecFields f;
  f.output = "separate";
  f.qkv_bias = true;
  f.head_dim = 80;
  f.rotary_dim = 32;  // tail of 48: vec 8 divides it, 16 elements of the half do too
  expect_space_is_sound(test::make_spec(f));
}

TEST(SearchSpace, HeadsPerThreadBeyondTheHeadsOfTheSpecIsPruned) {
  test::SpecFields f;
  f.num_q_heads = 1;
  f.num_kv_heads = 1;  // two heads in all
  const SearchSpace space = search_space(test::make_spec(f));
  std::set<int> hpts;
  for (const auto& c : space.configs) hpts.insert(c.heads_per_thread);
  EXPECT_EQ(hpts, (std::set<int>{1, 2}));
  const bool reason_given = std::any_of(space.pruned.begin(), space.pruned.end(), [](const PrunedConfig& p) {
    return p.config.heads_per_thread == 8 && p.reason.find("exceeds the spec's 2 heads") != std::string::npos;
  });
  EXPECT_TRUE(reason_given);
}

TEST(SearchSpace, HeadsPerThreadUpToTheHeadCountIsKept) {
  test::SpecFields f;
  f.num_q_heads = 4;
  f.num_kv_heads = 1;  // five heads: 1, 2, 4 per thread make 5, 3, 2 groups; 8 exceeds them
  f.head_dim = 64;
  f.rotary_dim = 64;
  const SearchSpace five = search_space(test::make_spec(f));
  std::set<int> hpts;
  for (const auto& c : five.configs) hpts.insert(c.heads_per_thread);
  EXPECT_EQ(hpts, (std::set<int>{1, 2, 4}));
}

TEST(SearchSpace, NarrowVectorsArePrunedWhenWiderOnesAreValid) {
  test::SpecFields f;  // bf16, rotary 128: vec 8 and 4 kept, 2 and 1 pruned
  const SearchSpace space = search_space(test::make_spec(f));
  std::set<int> vecs;
  for (const auto& c : space.configs) vecs.insert(c.vec);
  EXPECT_EQ(vecs, (std::set<int>{4, 8}));
  f.dtype = "fp32";  // at most 4 fp32 elements in 16 bytes
  const SearchSpace fp32 = search_space(test::make_spec(f));
  vecs.clear();
  for (const auto& c : fp32.configs) vecs.insert(c.vec);
  EXPECT_EQ(vecs, (std::set<int>{2, 4}));
}

TEST(SearchSpace, TableModeIsPrunedForRuntimeFrequencies) {
  test::SpecFields f;
  f.rope = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}};
  const SearchSpace space = search_space(test::make_spec(f));
  for (const auto& c : space.configs) EXPECT_EQ(c.sincos, SinCosMode::compute) << config_name(c);
}

TEST(SearchSpace, TinyTokenCountsDropBlocksLargerThanTheWork) {
  test::SpecFields f;  // 10 heads, neox 128, vec 8: 8 lanes per head group
  const Spec spec = test::make_spec(f);
  const SearchSpace space = search_space(spec);
  std::vector<PrunedConfig> pruned;
  const auto one = bucket_candidates(spec, space.configs, 1, 132, &pruned);
  ASSERT_FALSE(one.empty());
  for (const auto& c : one) {
    if (c == default_config(spec) || c == default_config(spec, 1)) continue;  // the baselines stay
    const WorkShape w = work_shape(spec, c);
    const int64_t items = int64_t(w.head_groups) * w.lanes;
    EXPECT_LE(c.block_threads, std::max<int64_t>(64, 2 * items)) << config_name(c);
    EXPECT_EQ(c.grid, GridMode::blocks) << config_name(c) << ": one block is never persistent-worthy";
  }
  EXPECT_TRUE(std::any_of(pruned.begin(), pruned.end(), [](const PrunedConfig& p) {
    return p.config.block_threads == 1024 && p.reason.find("exceeds the") != std::string::npos;
  }));
  // At 65536 tokens every block size and persistent grids are in play.
  const auto big = bucket_candidates(spec, space.configs, 65536, 132);
  std::set<int> blocks;
  bool persistent = false;
  for (const auto& c : big) {
    blocks.insert(c.block_threads);
    persistent |= c.grid == GridMode::persistent;
  }
  EXPECT_EQ(blocks.size(), 5u);
  EXPECT_TRUE(persistent);
  EXPECT_GT(big.size(), one.size());
}

TEST(SearchSpace, BucketPruningKeepsTheDefaultAndOnlyRemoves) {
  for (const auto& path : test::spec_files()) {
    const Spec spec = load_spec_file(path);
    const SearchSpace space = search_space(spec);
    for (int64_t tokens : {1, 16, 256, 4096, 65536}) {
      std::vector<PrunedConfig> pruned;
      const auto kept = bucket_candidates(spec, space.configs, tokens, 132, &pruned);
      EXPECT_EQ(kept.size() + pruned.size(), space.configs.size()) << spec.name << " @" << tokens;
      EXPECT_TRUE(names(kept).count(config_name(default_config(spec, tokens)))) << spec.name << " @" << tokens;
    }
  }
}

TEST(SearchSpace, WorkloadShapes) {
  test::SpecFields f;
  const Spec dense = test::make_spec(f);
  const WorkloadShape w = workload_shape(dense, 4096);
  EXPECT_EQ(w.tokens, 4096);
  EXPECT_EQ(w.rows, 4096);
  // inplace, no bias: only the rotated part moves, read and written: 10 heads * 128 * 2 bytes * 2.
  EXPECT_EQ(w.bytes, 4096 * (10 * 128 * 2 * 2 + 4));

  f.positions = "varlen";
  f.output = "padded_bhsd";
  const Spec padded = test::make_spec(f);
  const WorkloadShape decode = workload_shape(padded, 16);
  EXPECT_EQ(decode.batch, 16);
  EXPECT_EQ(decode.max_seq_len, 1);
  EXPECT_EQ(decode.rows, 16);
  const WorkloadShape prefill = workload_shape(padded, 3000);
  EXPECT_EQ(prefill.max_seq_len, 1024);
  EXPECT_EQ(prefill.batch, 3);
  EXPECT_EQ(prefill.rows, 3 * 1024);  // padding rows are written too
}

TEST(SearchSpace, PrunedSpaceOfOneSpecCompilesWithoutSpills) {
  // A few configs across the axes (the whole space is the dry-run's job): NVRTC needs no GPU.
  const Spec spec = load_spec_file(ropejit::test::source_dir() + "/specs/llama-3.1-8b.json");
  const SearchSpace space = search_space(spec);
  std::vector<Config> sample = {space.configs.front(), space.configs[space.configs.size() / 2], space.configs.back()};
  for (const auto& c : sample) {
    const Binary b = compile_nvrtc(generate_source(make_plan(spec, c)), "sm_90");
    EXPECT_EQ(b.spill_bytes, 0) << config_name(c);
    EXPECT_GT(b.registers, 0) << config_name(c);
  }
}

TEST(StaticPrune, LeavesOutOnlyWhatTheModelCallsMuchSlower) {
  const Spec spec = load_spec_file(ropejit::test::source_dir() + "/specs/llama-3.1-8b.json");
  const Config fallback = default_config(spec);
  const KernelStats real =
      kernel_stats(spec, fallback, generate_source(make_plan(spec, fallback)),
                   compile_nvrtc(generate_source(make_plan(spec, fallback)), "sm_90"), StatsSource::ptx);
  // Two more candidates: the same kernel (a tie) and one whose threads issue 20x the
  // instructions (issue-bound, far slower by the model).
  Config tie = fallback, slow = fallback;
  tie.grid = GridMode::persistent;
  slow.block_threads = 128;
  KernelStats issue_bound = real;
  issue_bound.counts.per_item *= 20;
  const std::vector<Config> candidates = {fallback, tie, slow};
  const std::map<std::string, KernelStats> stats = {
      {config_name(fallback), real}, {config_name(tie), real}, {config_name(slow), issue_bound}};
  const GpuPart& h100 = find_gpu_part("H100-SXM");

  std::vector<PrunedConfig> pruned;
  const auto kept = static_prune(spec, candidates, stats, h100, workload_shape(spec, 65536), 1.5, &pruned);
  EXPECT_EQ(kept, (std::vector<Config>{fallback, tie}));
  ASSERT_EQ(pruned.size(), 1u);
  EXPECT_EQ(pruned[0].config, slow);
  EXPECT_NE(pruned[0].reason.find("H100-SXM"), std::string::npos) << pruned[0].reason;
  EXPECT_NE(pruned[0].reason.find("issue-bound"), std::string::npos) << pruned[0].reason;

  // The default is kept however slow the model calls it.
  const std::map<std::string, KernelStats> slow_default = {
      {config_name(fallback), issue_bound}, {config_name(tie), real}, {config_name(slow), real}};
  EXPECT_EQ(static_prune(spec, candidates, slow_default, h100, workload_shape(spec, 65536), 1.5).size(), 3u);
  // Off at factor 0, and where launch overhead dominates (the modelled memory time is tiny).
  EXPECT_EQ(static_prune(spec, candidates, stats, h100, workload_shape(spec, 65536), 0.0).size(), 3u);
  EXPECT_EQ(static_prune(spec, candidates, stats, h100, workload_shape(spec, 16), 1.5).size(), 3u);
  // One report per candidate, or a clear internal error.
  EXPECT_THROW(static_prune(spec, candidates, {{config_name(fallback), real}}, h100, workload_shape(spec, 65536), 1.5),
               Error);
}

TEST(StaticPrune, ReportsOncePerSourceByConfigName) {
  const Spec spec = load_spec_file(ropejit::test::source_dir() + "/specs/llama-3.1-8b.json");
  Config blocks = default_config(spec), persistent = blocks, other = blocks;
  persistent.grid = GridMode::persistent;  // same source as `blocks`
  other.vec = 4;
  const Binary shared = compile_nvrtc(generate_source(make_plan(spec, blocks)), "sm_90");
  const Binary own = compile_nvrtc(generate_source(make_plan(spec, other)), "sm_90");
  const auto reports = static_reports(spec, {blocks, persistent, other}, {&shared, &shared, &own}, 2);
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports.at(config_name(persistent)).config, config_name(persistent));
  EXPECT_EQ(reports.at(config_name(persistent)).counts.instructions, reports.at(config_name(blocks)).counts.instructions);
  EXPECT_NE(reports.at(config_name(other)).counts.instructions, reports.at(config_name(blocks)).counts.instructions);
  // A config without a binary gets no report.
  EXPECT_EQ(static_reports(spec, {blocks, other}, {&shared, nullptr}, 1).count(config_name(other)), 0u);
}

TEST(StaticPrune, DeviceNamesMapToTheirRooflinePart) {
  auto part = [](const char* name, int sms) {
    const GpuPart* p = gpu_part_for_device(name, sms);
    return p ? p->name : std::string("none");
  };
  EXPECT_EQ(part("NVIDIA H100 80GB HBM3", 132), "H100-SXM");
  EXPECT_EQ(part("NVIDIA H200", 132), "H200");
  EXPECT_EQ(part("NVIDIA A100-SXM4-80GB", 108), "A100-80GB-SXM");
  EXPECT_EQ(part("NVIDIA L40S", 142), "L40S");
  EXPECT_EQ(part("NVIDIA GeForce RTX 4090", 128), "RTX-4090");
  // Another variant of a chip (H100 PCIe: 114 SMs, less bandwidth) is not the table's part.
  EXPECT_EQ(part("NVIDIA H100 PCIe", 114), "none");
  EXPECT_EQ(part("host", 2), "none");
}

}  // namespace
}  // namespace ropejit
