// Loads ahead (Config::ahead; rope.cuh heads_trips) in the compiled kernels (compile tier): a
// decode kernel issues its first q/k loads before its block barrier and before it reads its
// position, and a rolled heads loop keeps two heads' loads in flight; configs name and refuse it.
// ropejit-tier: compile
#include <string>

#include <gtest/gtest.h>

#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/kernel_stats.h"
#include "support/repo_paths.h"

using namespace ropejit;

namespace {

KernelStats stats_of(const Spec& spec, const Config& config) {
  const Source source = generate_source(make_plan(spec, config));
  return kernel_stats(spec, config, source, compile_nvrtc(source, "sm_90"), StatsSource::sass);
}

}  // namespace

TEST(LoadsAhead, DecodeKernelLoadsBeforeItsBarrier) {
  if (!find_disassembler()) GTEST_SKIP() << "SKIPPED: no nvdisasm or cuobjdump (scripts/setup.sh installs them)";
  for (const char* name : {"llama-3.1-8b", "qwen3-8b", "deepseek-v3-mla", "qwen2.5-7b"}) {
    const Spec spec = load_spec_file(test::spec_path(name));
    const Config decode = default_config(spec, 1);
    ASSERT_TRUE(decode.ahead) << name;
    const InstrCounts c = stats_of(spec, decode).counts;
    ASSERT_GE(c.first_data_load, 0) << name;
    EXPECT_TRUE(c.first_barrier < 0 || c.first_data_load < c.first_barrier)
        << name << ": first q/k load at " << c.first_data_load << ", first barrier at " << c.first_barrier;
    EXPECT_TRUE(c.data_load_before_index_use) << name << ": the first q/k load waits for an index load";
  }
  // Without loads ahead the block-shared angles come first: the check tells them apart.
  const Spec llama = load_spec_file(test::spec_path("llama-3.1-8b"));
  Config late = default_config(llama, 1);
  late.ahead = false;
  late.heads_per_thread = 4;
  const InstrCounts c = stats_of(llama, late).counts;
  ASSERT_GE(c.first_barrier, 0);
  EXPECT_LT(c.first_barrier, c.first_data_load);
}

TEST(LoadsAhead, TwoHeadsLoadsInFlight) {
  if (!find_disassembler()) GTEST_SKIP() << "SKIPPED: no nvdisasm or cuobjdump (scripts/setup.sh installs them)";
  // The latency-bound kernels of the H200 run (one 16-byte access a head and lane): their default
  // takes loads ahead, and the listing holds twice the bytes in flight it holds without.
  for (const char* name : {"deepseek-v3", "deepseek-v4-output", "deepseek-v3-mla", "deepseek-v3-mla-fp8",
                           "llama-3.1-8b-context-shift"}) {
    const Spec spec = load_spec_file(test::spec_path(name));
    const Config ahead = default_config(spec);
    ASSERT_TRUE(ahead.ahead) << name;
    Config plain = ahead;
    plain.ahead = false;
    const KernelStats with = stats_of(spec, ahead), without = stats_of(spec, plain);
    EXPECT_GE(with.counts.bytes_in_flight, 2 * without.counts.bytes_in_flight) << name;  // both lanes' arms counted
    EXPECT_EQ(with.spill_bytes, 0) << name;
    // Two heads a trip: the loop's trips and a thread's round trips are half the heads.
    EXPECT_EQ(with.serial_trips, (without.serial_trips + 1) / 2) << name;
  }
}

TEST(LoadsAhead, ConfigsNameAndRefuseIt) {
  const Spec llama = load_spec_file(test::spec_path("llama-3.1-8b"));
  Config c = default_config(llama);
  EXPECT_FALSE(c.ahead);  // 32 bytes a lane and head already in flight
  c.ahead = true;
  EXPECT_EQ(config_name(c), "bt256.v8.h4.compute.blocks.ahead");
  EXPECT_EQ(config_from_json(config_to_json(c)), c);
  EXPECT_FALSE(config_from_json(R"({"block_threads": 256})").ahead);
  EXPECT_THROW(config_from_json(R"({"ahead": 1})"), Error);
  // Kernels without the path refuse it by name.
  const Spec olmo = load_spec_file(test::spec_path("olmo-2-7b"));
  Config all_heads = default_config(olmo);
  all_heads.ahead = true;
  const auto why = config_problem(olmo, all_heads);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("all-heads"), std::string::npos) << *why;
  const Spec nope = load_spec_file(test::spec_path("llama-4-scout-nope"));
  Config scale = default_config(nope);
  scale.ahead = true;
  ASSERT_TRUE(config_problem(nope, scale).has_value());
  EXPECT_NE(config_problem(nope, scale)->find("attn_temperature"), std::string::npos);
  // Decode sizes take one head a thread with loads ahead; larger launches the spec's default.
  EXPECT_EQ(default_config(llama, 8).heads_per_thread, 1);
  EXPECT_TRUE(default_config(llama, 8).ahead);
  EXPECT_EQ(default_config(llama, 9), default_config(llama));
}
