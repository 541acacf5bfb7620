// DeepSeek-V4's K cache cell (io.cache_layout fp8_deepseek_v4; FlashMLA's MODEL1, vLLM's and
// SGLang's V4 cache): each page's slots of [448 FP8 e4m3 nope codes | 64 bf16 rope values] (576
// bytes), then their 8 scale bytes (a ue8m0 exponent per 64-value nope block, a zero pad byte);
// a block's scale 2^e, e = ceil(log2(max(amax, 1e-4) / 448)) over its values rounded to bf16.
// Against the float64 reference on fresh random inputs with poisoned caches (the harness checks
// the codes at the reference's block scales, the rope part, every scale byte, and that no other
// byte changed): with and without V4's per-head norm, both positions forms and cache indexes,
// odd token counts, every config that fits; then the spec errors.
// ropejit-tier: conformance
// ropejit-tier: unit DeepseekV4CacheSpec
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/conformance_fixture.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"
#include "support/spec_refusals.h"

using namespace ropejit;

namespace {

class DeepseekV4Cache : public ropejit::test::BackendConformance {};

// tests/data/deepseek-v4-main-paged-fp8.json (specs/deepseek-v4-main-paged.json in the cell),
// edited: its norm dropped or kept, block tables or a slot mapping, page size, q out.
nlohmann::json v4_json(int index) {
  nlohmann::json spec =
      nlohmann::json::parse(pretty_json(load_spec_file(ropejit::test::data_path("deepseek-v4-main-paged-fp8.json"))));
  spec["num_q_heads"] = index % 2 ? 16 : 5;
  if (index % 2) spec.erase("qk_norm");
  if (index % 3 == 2) {
    spec["io"]["cache_index"] = "block_tables";
    spec["io"]["positions"] = "varlen";
  }
  spec["io"]["page_size"] = index % 2 ? 16 : 3;
  if (index % 4 == 1) spec["io"]["q_output"] = "separate";
  return spec;
}

}  // namespace

TEST_P(DeepseekV4Cache, NormIndexAndPageForms) {
  for (int index = 0; index < 6; ++index) {
    const Spec spec = parse_spec(v4_json(index).dump());
    ASSERT_TRUE(deepseek_v4_cache(spec));
    expect_token_counts(spec, index,
                        fmt::format("deepseek-v4 cell Hq{} norm {} {} page {} q {}", spec.num_q_heads,
                                    spec.qk_norm.enabled, to_string(spec.io.cache_index), spec.io.page_size,
                                    to_string(spec.io.q_output)));
  }
}

TEST_P(DeepseekV4Cache, EveryConfig) {
  EXPECT_GE(expect_every_config(parse_spec(v4_json(0).dump()), {2, 4, 8}, {1, 3, 16}, 9), 3);
}

INSTANTIATE_TEST_SUITE_P(Backend, DeepseekV4Cache, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// What the cell cannot hold is refused by name, with the allowed set.
TEST(DeepseekV4CacheSpec, RefusesWhatTheCellCannotHold) {
  const nlohmann::json base = v4_json(0);
  ropejit::test::expect_refusals(base, {
      {[](nlohmann::json& s) { s["io"]["cache_dtype"] = "auto"; },
       "/io/cache_dtype: \"auto\" is not allowed: must be \"fp8_e4m3\" with cache_layout fp8_deepseek_v4"},
      {[](nlohmann::json& s) { s["dtype"] = "fp16"; },
       "/dtype: \"fp16\" is not allowed: must be \"bf16\" with cache_layout fp8_deepseek_v4"},
      {[](nlohmann::json& s) { s["rotary_dim"] = 32; },
       "/rotary_dim: 32 is not allowed: must be 64 with cache_layout fp8_deepseek_v4"},
      {[](nlohmann::json& s) { s["head_dim"] = 256; }, "/head_dim: 256 is not allowed: must be 512"},
      {[](nlohmann::json& s) { s["rotary_slice"] = "leading"; },
       "/rotary_slice: \"leading\" is not allowed: must be \"trailing\" with cache_layout fp8_deepseek_v4"},
      {[](nlohmann::json& s) { s["io"]["copy_v"] = true; },
       "/io/copy_v: true is not allowed: must be false with cache_layout fp8_deepseek_v4"},
      {[](nlohmann::json& s) { s["io"]["cache_scale"] = "per_token_head"; },
       "/io/cache_scale: \"per_token_head\" is not allowed: must be \"static\" or absent with cache_layout "
       "fp8_deepseek_v4"},
  });
}
