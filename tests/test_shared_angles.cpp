// A block's shared cos/sin (templates/ropejit/angles.cuh): its threads compute each (row, pair)
// once into __shared__ and every head reads it there. The bytes must not depend on it: the
// kernel that shares (the default config) writes exactly what the kernel that does not (one head
// group per row: each thread computes its own) writes, at other block sizes (other rows per
// pass) and with a grid of two blocks (the grid-stride loop's later passes, behind the barrier
// that keeps a pass from overwriting angles the last one still reads). Host backend (fibers).
// ropejit-tier: compile
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "ropejit/source.h"
#include "support/backends.h"
#include "support/host_config_run.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"
#include "ropejit/internal/workload.h"

using namespace ropejit;

namespace {

using test::SpecCase;

// Every position form, rope type hook (run-time dynamic base, LongRoPE's switch, mrope streams,
// proportional pairs without a frequency), layout, output form and the QK-norm.
std::vector<SpecCase> cases() {
  std::vector<SpecCase> out = test::shipped_spec_cases({"llama-3.1-8b", "qwen2.5-vl-7b", "phi-3.5-mini",
                                                        "qwen2.5-7b-padded", "qwen2.5-7b-separate", "gemma-4-global",
                                                        "gpt-j-6b", "qwen3-8b-paged-fp8", "qwen3-8b"});
  test::SpecFields f;
  f.name = "shared-angles-dynamic";
  f.num_q_heads = 12;
  f.num_kv_heads = 4;
  f.head_dim = 96;
  f.rotary_dim = 64;
  f.dtype = "fp16";
  f.layout = "interleaved";
  f.positions = "offset";
  f.rope = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}};  // L at launch: run-time base
  out.push_back({"fp16 interleaved D96/64 dynamic NTK, offset positions", test::make_spec(f)});
  f = test::SpecFields{};
  f.name = "shared-angles-slice";
  f.num_q_heads = 16;
  f.num_kv_heads = 16;
  f.head_dim = 96;
  f.rotary_dim = 24;  // GPT-NeoX-20B's partial slice: one lane takes it whole
  f.input = "packed_qkv";
  f.output = "separate";
  f.copy_v = true;
  out.push_back({"bf16 neox D96/24 whole slice, packed, separate, copied v", test::make_spec(f)});
  return out;
}

bool shares(const Spec& spec, const Config& config) { return shared_angles(make_plan(spec, config)).enabled; }

}  // namespace

TEST(SharedAngles, SameBytesAsPerThreadAngles) {
  if (!test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  int index = 0;
  for (const SpecCase& c : cases()) {
    SCOPED_TRACE(c.what);
    WorkloadOptions o;
    o.tokens = 37;  // the last block is partial
    o.seed = 9001 + index++;
    const HostWorkload w = make_host_workload(c.spec, o);
    // One head group per row: every thread computes the angles of its lane itself.
    Config alone = default_config(c.spec);
    alone.heads_per_thread = work_shape(c.spec, alone).heads;
    ASSERT_FALSE(config_problem(c.spec, alone));
    ASSERT_FALSE(shares(c.spec, alone));
    const std::vector<std::string> expected = test::run_host_config(c.spec, w, alone);
    for (size_t i = 0; i < w.buffers.size(); ++i)
      if (w.buffers[i].desc.is_written())
        EXPECT_NE(expected[i], w.buffers[i].bytes) << "nothing written to " << w.buffers[i].desc.name;

    struct Variant {
      const char* what;
      int block_threads;
      unsigned grid;
    };
    // Role slots (one head group per kv head: the FP8 append's default) keep per-thread angles.
    Config sharing = default_config(c.spec);
    for (int h : {4, 2, 8})
      if (work_shape(c.spec, sharing).role_slots) sharing.heads_per_thread = h;
    for (const Variant& v : {Variant{"default", 0, 0}, Variant{"64 threads", 64, 0},
                             Variant{"1024 threads", 1024, 0}, Variant{"two blocks, many passes", 64, 2}}) {
      Config config = sharing;
      if (v.block_threads) config.block_threads = v.block_threads;
      ASSERT_FALSE(config_problem(c.spec, config)) << v.what;
      EXPECT_TRUE(shares(c.spec, config)) << v.what << ": " << config_name(config) << " does not share its angles";
      const std::vector<std::string> bytes = test::run_host_config(c.spec, w, config, v.grid);
      for (size_t i = 0; i < w.buffers.size(); ++i)
        EXPECT_TRUE(bytes[i] == expected[i]) << v.what << ": buffer " << w.buffers[i].desc.name << " differs between "
                                             << config_name(alone) << " and " << config_name(config);
    }
  }
}
