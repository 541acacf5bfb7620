// Conformance of the all-heads QK-norm (qk_norm.scope "all", templates/ropejit/qk_norm_all.cuh)
// against the float64 reference, on fresh random inputs with poisoned outputs: layout x dtype x
// norm weight (OLMo's w, Gemma-style 1 + w, none), crossed with head shapes (partial rotary, a
// whole neox slice in one lane, a head of more than 32 lanes), head counts (GQA, MHA, 64 heads of
// a row), every io form (packed and separate input, bias, v copied, in place, separate, padded,
// paged KV with FP8 caches), every positions form, strided rows, every heads_per_thread, and
// odd token counts.
// ropejit-tier: conformance
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "support/conformance_fixture.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class QkNormAll : public ropejit::test::BackendConformance {};

using ropejit::test::HeadShape;
// D96/24: bf16's neox half of 12 is no vector (one lane rotates the slice); fp32 D512: 64 lanes,
// so a thread walks two; 32 + 32 heads: OLMo 2 7B's row.
const HeadShape kHeadShapes[] = {{128, 128, 12, 4}, {64, 32, 6, 1}, {96, 24, 4, 4},
                                 {512, 512, 4, 2},  {80, 80, 14, 2}, {128, 128, 32, 32}};
const char* const kOutputs[] = {"inplace", "separate", "padded_bhsd", "paged_kv"};
const char* const kPositions[] = {"explicit", "varlen", "offset", "mrope"};

// The io keys of case `index`: outputs and positions rotate, packed input and bias alternate;
// a paged cache takes both layouts, FP8 and both slot indexes.
void set_io(SpecFields& f, int index) {
  f.output = kOutputs[index % 4];
  f.positions = f.output == "padded_bhsd" ? "varlen" : kPositions[(index / 4 + index) % 4];
  f.input = index % 3 == 1 ? "packed_qkv" : "separate";
  f.qkv_bias = index % 5 >= 3;
  if (f.output == "paged_kv") {
    const bool block_tables = index % 8 == 7;
    if (block_tables) f.positions = "varlen";
    f.io_extra = {{"cache_layout", index % 3 ? "nhd" : "hnd"},
                  {"cache_dtype", index % 3 == 2 ? "fp8_e4m3" : "auto"},
                  {"cache_index", block_tables ? "block_tables" : "slot_mapping"},
                  {"page_size", index % 2 ? 16 : 5},
                  {"q_output", index % 6 < 3 ? "inplace" : "separate"}};
  }
  f.copy_v = f.output == "paged_kv" ||
             (f.input == "packed_qkv" && (f.output != "inplace" || f.qkv_bias));
  if (f.positions == "mrope") {
    const int half = f.rotary_dim / 2;
    f.mrope_section = {half - 2 * (half / 4), half / 4, half / 4};
  }
}

}  // namespace

TEST_P(QkNormAll, EveryIoFormAgainstTheReference) {
  const nlohmann::json norms[] = {
      {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", "all"}},                                // OLMo 2
      {{"type", "rmsnorm"}, {"eps", 1e-5}, {"weight_offset", 1.0}, {"scope", "all"}},        // 1 + w
      {{"type", "rmsnorm"}, {"eps", 1e-6}, {"weight", "none"}, {"scope", "all"}}};            // unweighted
  const int heads_per_thread[] = {4, 1, 8, 2};
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"fp32", "fp16", "bf16"})
      for (const auto& norm : norms) {
        const HeadShape& shape = kHeadShapes[index % std::size(kHeadShapes)];
        SpecFields f = ropejit::test::shaped_fields("qk-norm-all", shape, layout, dtype, index);
        f.qk_norm = norm;
        f.rope = index % 3 ? nlohmann::json{{"rope_type", "default"}, {"rope_theta", 500000.0}}
                           : nlohmann::json{{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0},
                                            {"original_max_position_embeddings", 1024}};
        set_io(f, index);
        const Spec spec = ropejit::test::make_spec(f);
        Config config = default_config(spec);
        config.heads_per_thread = heads_per_thread[index % 4];
        ASSERT_FALSE(config_problem(spec, config)) << index;
        const Kernel kernel = runtime().get(spec, config);
        for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(201)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.strided = index % 4 == 1;
          o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
          expect_case(kernel, o,
                      fmt::format("qk_norm all {} {} {} D{}/{} Hq{} Hkv{} {} {} {} {} {}", norm.dump(), layout, dtype,
                                  shape.head_dim, shape.rotary_dim, shape.num_q_heads, shape.num_kv_heads, f.input,
                                  f.output, f.positions, f.io_extra.is_null() ? "" : f.io_extra.dump(),
                                  config_name(config)));
        }
        ++index;
      }
  EXPECT_EQ(index, 18);
}

INSTANTIATE_TEST_SUITE_P(Backend, QkNormAll, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });
