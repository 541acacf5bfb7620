// NVFP4 paged KV cache (io.cache_dtype nvfp4): each written (slot, kv head) row holds the e2m1
// codes of k (after norm and rotation) and v, two a byte, and one e4m3 block scale per 16 values
// beside the cache (k_scale_cache / v_scale_cache); checked against the float64 reference (block
// scales from the float64 amax, within fp32 noise of an e4m3 midpoint; codes at the launch's
// scales, one code off only within fp32 noise) on fresh random inputs with poisoned caches,
// untouched slots and scale rows, global scales that saturate or reach e4m3's subnormals: head
// shapes, layouts, dtypes, cache layouts, slot mapping and block tables, QK-norm, bias, K = V,
// FP8 q beside it, odd token counts, every config; then the spec errors.
// ropejit-tier: conformance
// ropejit-tier: unit Nvfp4CacheSpec
// ropejit-tier: compile Compile
#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "ropejit/compile.h"
#include "support/conformance_fixture.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class Nvfp4Cache : public ropejit::test::BackendConformance {};

using ropejit::test::HeadShape;
// {head_dim, rotary_dim, Hq, Hkv}: full and partial rotation, MQA, a 192-wide head, a 64-wide one.
const HeadShape kShapes[] = {{128, 128, 8, 2}, {128, 64, 6, 3}, {192, 64, 4, 1}, {64, 32, 4, 4}};

SpecFields nvfp4_fields(int index, const char* layout, const char* dtype) {
  SpecFields f = ropejit::test::shaped_fields("nvfp4", kShapes[index % std::size(kShapes)], layout, dtype, index);
  const bool block_tables = index % 3 == 1;
  f.output = "paged_kv";
  f.positions = block_tables ? "varlen" : "explicit";
  f.qkv_bias = index % 4 == 2;
  if (index % 2) f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  f.io_extra = {{"cache_dtype", "nvfp4"}, {"cache_layout", index % 3 ? "nhd" : "hnd"},
                {"page_size", index % 2 ? 16 : 1}, {"cache_index", block_tables ? "block_tables" : "slot_mapping"}};
  if (index % 5 == 4) {  // an FP8 q_out beside the NVFP4 cache
    f.io_extra["q_output"] = "separate";
    f.io_extra["q_output_dtype"] = "fp8_e4m3";
  }
  return f;
}

Spec nvfp4_spec(int index, const char* layout, const char* dtype) {
  nlohmann::json spec = ropejit::test::spec_json(nvfp4_fields(index, layout, dtype));
  if (index % 6 == 5) spec["io"]["copy_v"] = false;  // K = V: no V cache, no v scales
  // V's block scales in TensorRT-LLM's 4-token interleave (hnd pages of 4k tokens).
  if (index % 6 == 3) spec["io"].update({{"cache_layout", "hnd"}, {"page_size", 8}, {"v_scale_layout", "interleave4"}});
  const Spec parsed = parse_spec(spec.dump());
  EXPECT_TRUE(nvfp4_cache(parsed));
  return parsed;
}

}  // namespace

TEST_P(Nvfp4Cache, EveryShapeLayoutAndForm) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp16", "fp32"})
      for (int variant = 0; variant < 3; ++variant) {
        const Spec spec = nvfp4_spec(index, layout, dtype);
        expect_token_counts(spec, index,
                            fmt::format("nvfp4 {} {} {} {} D{}/{} Hq{} Hkv{} norm {} bias {} copy_v {} q {}", layout,
                                        dtype, to_string(spec.io.cache_layout), to_string(spec.io.cache_index),
                                        spec.head_dim, spec.rotary_dim, spec.num_q_heads, spec.num_kv_heads,
                                        spec.qk_norm.enabled, spec.io.qkv_bias, spec.io.copy_v,
                                        to_string(spec.io.q_output_dtype)));
        ++index;
      }
  EXPECT_EQ(index, 18);
}

TEST_P(Nvfp4Cache, EveryConfig) {
  EXPECT_GE(expect_every_config(nvfp4_spec(0, "neox", "bf16"), {2, 4, 8}, {1, 3, 5}, 9), 3);
  EXPECT_GE(expect_every_config(nvfp4_spec(3, "interleaved", "fp32"), {2, 4}, {1, 2}, 9), 2);
}

INSTANTIATE_TEST_SUITE_P(Backend, Nvfp4Cache, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Where NVFP4 is refused, by name.
TEST(Nvfp4CacheSpec, RefusesWhatItCannotHold) {
  const nlohmann::json base = ropejit::test::spec_json(nvfp4_fields(0, "neox", "bf16"));
  EXPECT_EQ(ropejit::test::spec_error(base), "accepted");
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](nlohmann::json& s) { s["io"]["cache_scale"] = "per_token_head"; },
       "/io/cache_scale: \"per_token_head\" is not allowed: must be \"static\" with cache_dtype nvfp4"},
      {[](nlohmann::json& s) { s["qk_norm"] = {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", "all"}}; },
       "/qk_norm/scope: \"all\" is not allowed: must be \"head\" with cache_dtype nvfp4"},
      {[](nlohmann::json& s) { s["rotary_dim"] = 48; },
       "/io/cache_dtype: \"nvfp4\" is not allowed: must be auto, fp8_e4m3 or fp8_e5m2 with head_dim 128 and "
       "rotary_dim 48"},
      {[](nlohmann::json& s) {
         s["head_dim"] = 120;
         s["rotary_dim"] = 64;
       },
       "/io/cache_dtype: \"nvfp4\" is not allowed: must be auto, fp8_e4m3 or fp8_e5m2 with head_dim 120"},
      {[](nlohmann::json& s) {
         s["io"]["q_output"] = "separate";
         s["io"]["q_output_dtype"] = "nvfp4";
       },
       "/io/q_output_dtype: \"nvfp4\" is not allowed: must be auto, fp8_e4m3 or fp8_e5m2 (NVFP4 is a cache format)"},
      {[](nlohmann::json& s) { s["io"]["v_scale_layout"] = "interleave4"; },
       "/io/v_scale_layout: \"interleave4\" is not allowed: must be \"linear\" with cache_layout hnd, page_size 1"},
      {[](nlohmann::json& s) {
         s["io"]["cache_dtype"] = "fp8_e4m3";
         s["io"]["v_scale_layout"] = "linear";
       },
       "/io/v_scale_layout: \"linear\" is not allowed: must be absent unless io.cache_dtype is \"nvfp4\""},
      {[](nlohmann::json& s) {
         s["op"] = "rerotate";
       },
       "/io/cache_dtype: \"nvfp4\" is not allowed: must be auto, fp8_e4m3 or fp8_e5m2 when op is rerotate"},
  };
  for (const auto& [edit, want] : cases) {
    nlohmann::json spec = base;
    edit(spec);
    const std::string error = ropejit::test::spec_error(spec);
    EXPECT_NE(error.find(want), std::string::npos) << spec.dump() << "\n" << error;
  }
}

// Blackwell: the family targets (sm_100f, sm_120f) round with cvt.rn.satfinite.e2m1x2, the plain
// archs and Hopper with the integer path; every image without spills or local memory.
TEST(Compile, Nvfp4ForBlackwellFamilyTargets) {
  const Spec spec = load_spec_file(ropejit::test::spec_path("llama-3.1-8b-nvfp4"));
  const Source source = generate_source(make_plan(spec, default_config(spec)));
  for (const char* arch : {"sm_100", "sm_100f", "sm_120", "sm_120f"}) {
    const Binary cubin = compile_nvrtc(source, arch);
    EXPECT_EQ(cubin.spill_bytes, 0) << arch;
    EXPECT_EQ(cubin.stack_bytes, 0) << arch;
    EXPECT_GT(cubin.registers, 0) << arch;
  }
  for (const auto& [arch, cvt] : {std::pair{"compute_100f", true}, {"compute_120f", true}, {"compute_100", false},
                                  {"compute_90", false}}) {
    const Binary ptx = compile_nvrtc(source, arch, true);
    EXPECT_EQ(ptx.image.find("cvt.rn.satfinite.e2m1x2.f32") != std::string::npos, cvt) << arch;
  }
}
