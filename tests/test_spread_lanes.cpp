// Config::spread: a partial cooperative head (a QK-norm, per-head FP8 scales, the Hadamard
// transform; rotary_dim < head_dim) spreads its pass-through vectors over fewer lanes, rotating
// lanes included (shape.cuh make_work_shape). Every config with it, against the float64 reference
// on fresh random inputs with poisoned outputs: RMSNorm and LayerNorm heads, both layouts, FP8 q and
// caches with per-head scales, the V3.2 indexer with its Hadamard transform; then the config's
// name, JSON, refusal where it changes nothing, and the tuner's space.
// ropejit-tier: conformance
// ropejit-tier: unit SpreadConfig
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "ropejit/config.h"
#include "ropejit/tuner.h"
#include "support/conformance_fixture.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class SpreadLanes : public ropejit::test::BackendConformance {
 protected:
  /// Runs every valid spread config of `spec` over these widths and head counts; returns how many ran.
  int expect_spread_configs(const Spec& spec, const std::string& what) {
    int configs = 0;
    for (int vec : {2, 4, 8})
      for (int heads : {1, 2, 4}) {
        Config c = default_config(spec);
        c.vec = vec;
        c.heads_per_thread = heads;
        c.ahead = false;
        c.spread = true;
        if (config_problem(spec, c)) continue;
        EXPECT_TRUE(work_shape(spec, c).tail_spread) << what << " " << config_name(c);
        for (int64_t tokens : {int64_t(1), int64_t(9)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.strided = configs % 2 == 1;
          expect_case(runtime().get(spec, c), o, what + " " + config_name(c));
        }
        ++configs;
      }
    return configs;
  }
};

SpecFields partial_fields(const char* layout, const char* dtype) {
  SpecFields f;
  f.name = "spread";
  ropejit::test::set_heads(f, 128, 64, dtype, layout);
  f.num_q_heads = 8;
  f.num_kv_heads = 2;
  return f;
}

}  // namespace

TEST_P(SpreadLanes, NormedPartialHeads) {
  int ran = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp32"}) {
      SpecFields rms = partial_fields(layout, dtype);
      rms.qk_norm = {{"type", "rmsnorm"}};
      rms.output = "separate";
      ran += expect_spread_configs(ropejit::test::make_spec(rms), fmt::format("rmsnorm {} {}", layout, dtype));
      SpecFields ln = partial_fields(layout, dtype);
      ln.qk_norm = {{"type", "layernorm"}, {"bias", "per_head"}, {"heads", "k"}};
      ran += expect_spread_configs(ropejit::test::make_spec(ln), fmt::format("layernorm k {} {}", layout, dtype));
    }
  EXPECT_GE(ran, 16);
}

TEST_P(SpreadLanes, PerHeadFp8ScalesAndPagedCache) {
  SpecFields q = partial_fields("neox", "bf16");
  q.output = "separate";
  q.io_extra = {{"q_output_dtype", "fp8_e4m3"}, {"q_scale", "per_token_head"}};
  EXPECT_GE(expect_spread_configs(ropejit::test::make_spec(q), "fp8 q per head"), 2);
  SpecFields cache = partial_fields("interleaved", "fp16");
  cache.output = "paged_kv";
  cache.copy_v = true;
  cache.io_extra = {{"page_size", 16}, {"cache_dtype", "fp8_e4m3"}, {"cache_scale", "per_token_head"}};
  EXPECT_GE(expect_spread_configs(ropejit::test::make_spec(cache), "fp8 cache per head"), 2);
}

TEST_P(SpreadLanes, DeepSeekV32IndexerWithHadamard) {
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(ropejit::test::data_path("deepseek-v3.2-indexer.json")));
  spec["qk_norm"] = {{"type", "layernorm"}, {"eps", 1e-6}, {"bias", "per_head"}, {"heads", "k"}};
  spec["hadamard"] = true;
  EXPECT_GE(expect_spread_configs(parse_spec(spec.dump()), "v3.2 indexer"), 2);
}

INSTANTIATE_TEST_SUITE_P(Backend, SpreadLanes, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(SpreadConfig, NameJsonAndShape) {
  SpecFields f = partial_fields("neox", "bf16");
  f.qk_norm = {{"type", "rmsnorm"}};
  const Spec spec = ropejit::test::make_spec(f);
  Config c = default_config(spec);
  EXPECT_FALSE(c.spread);  // the default keeps the one-vector-a-slot map (docs/PERF.md)
  c.vec = 4;
  c.heads_per_thread = 1;
  const WorkShape plain = work_shape(spec, c);
  c.spread = true;
  ASSERT_FALSE(config_problem(spec, c));
  const WorkShape spread = work_shape(spec, c);
  // 8 rotating lanes and 16 pass-through vectors: 32 lanes, or 8 holding 2 + 2 vectors.
  EXPECT_EQ(plain.lanes, 32);
  EXPECT_EQ(spread.lanes, 8);
  EXPECT_EQ(max_lane_vectors(spread), 4);
  EXPECT_EQ(config_name(c), "bt256.v4.h1.compute.blocks.spread");
  EXPECT_TRUE(config_from_json(config_to_json(c)).spread);
  EXPECT_EQ(config_to_json(default_config(spec)).find("spread"), std::string::npos);  // old JSON unchanged
  EXPECT_THROW(config_from_json(R"({"spread": 1})"), Error);
}

TEST(SpreadConfig, RefusedWhereItChangesNothing) {
  SpecFields whole = partial_fields("neox", "bf16");
  whole.rotary_dim = 128;
  whole.qk_norm = {{"type", "rmsnorm"}};
  SpecFields plain = partial_fields("neox", "bf16");  // no norm: heads are not cooperative
  for (const Spec& spec : {ropejit::test::make_spec(whole), ropejit::test::make_spec(plain)}) {
    Config c = default_config(spec);
    c.spread = true;
    const auto why = config_problem(spec, c);
    ASSERT_TRUE(why) << canonical_json(spec);
    EXPECT_NE(why->find("spread is not allowed for this spec at vec"), std::string::npos) << *why;
  }
}

// The tuner measures spread configs where they apply and prunes them, by name, elsewhere.
TEST(SpreadConfig, TunerSpace) {
  SpecFields f = partial_fields("neox", "bf16");
  f.qk_norm = {{"type", "rmsnorm"}};
  const SearchSpace space = search_space(ropejit::test::make_spec(f));
  EXPECT_TRUE(std::any_of(space.configs.begin(), space.configs.end(), [](const Config& c) { return c.spread; }));
  const SearchSpace plain = search_space(ropejit::test::make_spec(partial_fields("neox", "bf16")));
  EXPECT_FALSE(std::any_of(plain.configs.begin(), plain.configs.end(), [](const Config& c) { return c.spread; }));
}
