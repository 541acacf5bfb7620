// A sparse-attention indexer's K cache (io.cache_layout fp8_indexer: vLLM's
// indexer_k_quant_and_cache, SGLang's NSA index buffer): each page holds its slots' FP8 e4m3
// codes [page_size, D], then their float32 scales [page_size], a scale fl(max(amax, 1e-4) / 448)
// (ue8m0: the least power of two at or above it) and codes fp8(k / scale); q rotated into q_out,
// in the dtype or FP8 with per-(token, head) scales (the indexer's q). Against the float64
// reference on fresh random inputs with poisoned caches (the harness checks both parts of each
// page and that no other byte changed): both layouts, dtypes, roundings, slot mapping and block
// tables, odd token counts, every config; then the spec errors.
// ropejit-tier: conformance
// ropejit-tier: unit IndexerCacheSpec
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/conformance_fixture.h"
#include "support/spec_builder.h"
#include "support/spec_refusals.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class IndexerCache : public ropejit::test::BackendConformance {};

// DeepSeek-V3.2's and GLM-5's indexer (64 or 32 q heads of 128 over one k head, 64 rotated),
// and a smaller, odd one.
const ropejit::test::HeadShape kShapes[] = {{128, 64, 64, 1}, {128, 64, 32, 1}, {64, 32, 5, 1}};

nlohmann::json indexer_json(int index, const char* layout, const char* dtype, const char* rounding, bool fp8_q) {
  SpecFields f = ropejit::test::shaped_fields("indexer", kShapes[index % std::size(kShapes)], layout, dtype, index);
  f.output = "paged_kv";
  const bool block_tables = index % 3 == 2;
  f.positions = block_tables ? "varlen" : "explicit";
  f.io_extra = {{"cache_layout", "fp8_indexer"}, {"cache_dtype", "fp8_e4m3"}, {"cache_scale", "per_token_head"},
                {"cache_index", block_tables ? "block_tables" : "slot_mapping"},
                {"page_size", index % 2 ? 16 : 64}, {"q_output", "separate"}, {"copy_v", false}};
  if (std::string(rounding) != "none") f.io_extra["scale_rounding"] = rounding;
  if (fp8_q) {
    f.io_extra["q_output_dtype"] = "fp8_e4m3";
    f.io_extra["q_scale"] = "per_token_head";
  }
  return ropejit::test::spec_json(f);
}

}  // namespace

TEST_P(IndexerCache, EveryLayoutDtypeRoundingAndIndex) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp16", "fp32"})
      for (const char* rounding : {"none", "ue8m0"}) {
        const Spec spec = parse_spec(indexer_json(index, layout, dtype, rounding, index % 2 == 0).dump());
        ASSERT_TRUE(indexer_cache(spec));
        expect_token_counts(spec, index,
                            fmt::format("indexer {} {} {} Hq{} q {} {}", layout, dtype, rounding, spec.num_q_heads,
                                        to_string(spec.io.q_output_dtype), to_string(spec.io.cache_index)));
        ++index;
      }
  EXPECT_EQ(index, 12);
}

TEST_P(IndexerCache, EveryConfig) {
  EXPECT_GE(expect_every_config(parse_spec(indexer_json(2, "neox", "bf16", "ue8m0", true).dump()), {2, 4, 8},
                                {1, 3, 16}, 9),
            9);
}

INSTANTIATE_TEST_SUITE_P(Backend, IndexerCache, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// What the layout needs is refused by name, with the allowed set.
TEST(IndexerCacheSpec, RefusesWhatTheLayoutCannotHold) {
  const nlohmann::json base = indexer_json(0, "neox", "bf16", "ue8m0", true);
  ropejit::test::expect_refusals(base, {
      {[](nlohmann::json& s) { s["io"]["cache_dtype"] = "fp8_e5m2"; },
       "/io/cache_dtype: \"fp8_e5m2\" is not allowed: must be \"fp8_e4m3\" with cache_layout fp8_indexer"},
      {[](nlohmann::json& s) { s["io"]["cache_scale"] = "static"; },
       "/io/cache_scale: \"static\" is not allowed: must be \"per_token_head\" with cache_layout fp8_indexer"},
      {[](nlohmann::json& s) { s["num_kv_heads"] = 2; },
       "/num_kv_heads: 2 is not allowed: must be 1 with cache_layout fp8_indexer"},
      {[](nlohmann::json& s) { s["io"]["copy_v"] = true; },
       "/io/copy_v: true is not allowed: must be false with cache_layout fp8_indexer"},
      {[](nlohmann::json& s) {
         s["op"] = "rerotate";
         s["io"].erase("q_output");
         s["io"].erase("q_output_dtype");
         s["io"].erase("q_scale");
       },
       "/io/cache_layout: \"fp8_indexer\" is not allowed: must be nhd or hnd when op is rerotate"},
  });
}
