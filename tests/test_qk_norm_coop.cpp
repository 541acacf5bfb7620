// The warp-cooperative QK-norm (templates/ropejit/rope.cuh process_lane_norm): a head's lanes add
// their sums of squares in a fixed __shfl_xor_sync butterfly, so the output cannot depend on how
// heads are spread over threads. On the host backend (fibers at the shuffles; a lane that never
// arrives is a deadlock error) every heads_per_thread gives the same bytes, over head shapes
// whose lanes are a power of 2, padded to one, a whole neox slice, and wider than a warp (the
// whole-head path), at a token count whose last warp is partial.
// ropejit-tier: compile
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "ropejit/source.h"
#include "support/backends.h"
#include "support/host_config_run.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"
#include "ropejit/internal/workload.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

using test::SpecCase;

std::vector<SpecCase> cases() {
  std::vector<SpecCase> out = test::shipped_spec_cases({"qwen3-8b", "gemma-4-global", "qwen3-8b-paged-fp8"});
  auto add = [&](const std::string& what, SpecFields f) {
    f.name = "qk-norm-coop";
    if (f.qk_norm.is_null()) f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}, {"weight_offset", 1.0}};
    out.push_back({what, test::make_spec(f)});
  };
  SpecFields f;
  f.num_q_heads = 14;  // 16 heads: a short last head group at heads_per_thread 8 (and 4 with v)
  f.num_kv_heads = 2;
  f.dtype = "fp32";
  f.head_dim = f.rotary_dim = 80;  // 10 lanes, padded to 16
  add("fp32 neox D80: 10 lanes in 16", f);
  test::set_heads(f, 96, 48, "fp16", "interleaved");
  f.input = "packed_qkv";
  f.output = "padded_bhsd";
  f.positions = "varlen";
  f.qkv_bias = true;
  f.copy_v = true;
  add("fp16 interleaved D96/48 packed, bias, v, padded: 12 lanes in 16", f);
  f = SpecFields{};
  f.num_q_heads = 6;
  f.num_kv_heads = 3;
  f.head_dim = 96;
  f.rotary_dim = 24;  // bf16: a half of 12 is no vector, one lane takes the slice
  f.output = "separate";
  f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-5}, {"weight", "none"}};
  add("bf16 neox D96/24 whole slice, separate, unweighted: 10 lanes in 16", f);
  f = SpecFields{};
  f.dtype = "fp32";
  f.head_dim = f.rotary_dim = 512;  // 64 lanes: the whole-head path
  f.num_q_heads = 4;
  f.num_kv_heads = 1;
  add("fp32 neox D512: whole heads", f);
  return out;
}

}  // namespace

// Lanes per head: a power of 2 up to a warp, else one thread per whole head.
TEST(QkNormCoop, WorkShapeLanes) {
  for (const SpecCase& c : cases()) {
    const WorkShape w = work_shape(c.spec, default_config(c.spec));
    const int head_lanes = w.rot_lanes + w.tail_lanes;
    if (head_lanes > 32) {
      EXPECT_TRUE(w.whole_heads) << c.what;
      EXPECT_EQ(w.lanes, 1) << c.what;
      EXPECT_EQ(default_config(c.spec).heads_per_thread, 1) << c.what;
      continue;
    }
    EXPECT_FALSE(w.whole_heads) << c.what;
    EXPECT_GE(w.lanes, head_lanes) << c.what;
    EXPECT_LT(w.lanes, 2 * head_lanes) << c.what;
    EXPECT_EQ(32 % w.lanes, 0) << c.what;
  }
}

// Every heads_per_thread writes the same bytes (outputs and caches) on the same inputs.
TEST(QkNormCoop, HeadsPerThreadGivesBitIdenticalOutputs) {
  if (!test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  int index = 0;
  for (const SpecCase& c : cases()) {
    WorkloadOptions o;
    o.tokens = 37;  // rows x items: the last warp of the grid is partial
    o.seed = 4321 + index++;
    const HostWorkload w = make_host_workload(c.spec, o);
    std::vector<std::string> first;
    std::string first_config;
    for (int heads_per_thread : {1, 2, 4, 8}) {
      Config config = default_config(c.spec);
      config.heads_per_thread = heads_per_thread;
      ASSERT_FALSE(config_problem(c.spec, config)) << c.what;
      const std::vector<std::string> bytes = test::run_host_config(c.spec, w, config);
      if (first.empty()) {
        first = bytes;
        first_config = config_name(config);
        for (size_t i = 0; i < w.buffers.size(); ++i)
          if (w.buffers[i].desc.is_written())
            EXPECT_NE(bytes[i], w.buffers[i].bytes) << c.what << ": nothing written to " << w.buffers[i].desc.name;
        continue;
      }
      for (size_t i = 0; i < w.buffers.size(); ++i)
        EXPECT_TRUE(bytes[i] == first[i]) << c.what << ": buffer " << w.buffers[i].desc.name << " differs between "
                                          << first_config << " and " << config_name(config);
    }
  }
}
