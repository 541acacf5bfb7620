// A spec's inverse rotation ("inverse": true: every pair turns by minus its angle, nanochat's
// rotate_half sign) against the float64 reference on fresh random inputs with poisoned outputs:
// both layouts, partial and trailing slices, every output form, QK-norm, scaled rope types, odd
// token counts, every config; the import of nanochat's config; then the spec errors.
// ropejit-tier: conformance
// ropejit-tier: unit InverseRotationSpec
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hf_import.h"  // private: spec_from_hf, the HF importer under test
#include "support/conformance_fixture.h"
#include "support/spec_builder.h"
#include "support/spec_refusals.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class InverseRotation : public ropejit::test::BackendConformance {};

const ropejit::test::HeadShape kShapes[] = {{128, 128, 6, 6}, {128, 64, 8, 2}, {96, 32, 4, 1}};
const char* const kOutputs[] = {"inplace", "separate", "paged_kv", "padded_bhsd"};

nlohmann::json inverse_json(int index, const char* layout, const char* dtype) {
  SpecFields f = ropejit::test::shaped_fields("inverse", kShapes[index % std::size(kShapes)], layout, dtype, index);
  if (index % 3 == 2) f.rotary_slice = "trailing";
  f.output = kOutputs[index % std::size(kOutputs)];
  f.positions = f.output == "padded_bhsd" ? "varlen" : "explicit";
  if (f.output == "paged_kv") f.io_extra = {{"page_size", 16}};
  if (index % 2 == 0) f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}, {"weight", "none"}};
  if (index % 4 == 1)
    f.rope = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0},
              {"original_max_position_embeddings", 1024}};
  nlohmann::json spec = ropejit::test::spec_json(f);
  spec["inverse"] = true;
  return spec;
}

}  // namespace

TEST_P(InverseRotation, EveryLayoutFormAndNorm) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp32"})
      for (int form = 0; form < 4; ++form) {
        const Spec spec = parse_spec(inverse_json(index, layout, dtype).dump());
        ASSERT_TRUE(spec.inverse);
        expect_token_counts(spec, index,
                            fmt::format("inverse {} {} D{}/{} {} {} norm {}", layout, dtype, spec.head_dim,
                                        spec.rotary_dim, to_string(spec.rotary_slice), to_string(spec.io.output),
                                        spec.qk_norm.enabled));
        ++index;
      }
  EXPECT_EQ(index, 16);
}

TEST_P(InverseRotation, EveryConfig) {
  EXPECT_GE(expect_every_config(parse_spec(inverse_json(0, "neox", "bf16").dump()), {2, 4, 8}, {1, 3}, 6), 6);
}

INSTANTIATE_TEST_SUITE_P(Backend, InverseRotation, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// nanochat (transformers' NanoChatConfig defaults): rotate_half's sign imports as inverse, its
// weightless q_norm / k_norm as qk_norm weight none; the canonical form keeps other specs' text.
TEST(InverseRotationSpec, ImportsNanochat) {
  const nlohmann::json config = {{"model_type", "nanochat"}, {"hidden_size", 768}, {"num_attention_heads", 6},
                                 {"num_key_value_heads", 6}, {"max_position_embeddings", 2048},
                                 {"rms_norm_eps", 1e-6}, {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  HfImportOptions options;
  options.name = "nanochat";
  const Spec spec = spec_from_hf(config, options);
  EXPECT_TRUE(spec.inverse);
  EXPECT_EQ(spec.layout, Layout::neox);
  EXPECT_EQ(spec.rotary_dim, 128);
  ASSERT_TRUE(spec.qk_norm.enabled);
  EXPECT_EQ(spec.qk_norm.weight, NormWeight::none);
  EXPECT_NE(canonical_json(spec).find("\"inverse\":true"), std::string::npos);
  nlohmann::json plain = nlohmann::json::parse(canonical_json(spec));
  plain.erase("inverse");
  EXPECT_EQ(canonical_json(parse_spec(plain.dump())).find("inverse"), std::string::npos);
}

TEST(InverseRotationSpec, RefusedWhereNoAngleTurns) {
  const nlohmann::json base = inverse_json(1, "neox", "bf16");
  ropejit::test::expect_refusals(base, {
      {[](nlohmann::json& s) { s["inverse"] = 1; }, "/inverse: "},
      {[](nlohmann::json& s) {
         s["op"] = "inverse_rope";
         s["num_kv_heads"] = s["num_q_heads"];
         s["io"] = {{"positions", "explicit"}};
       },
       "/inverse: true is not allowed: must be false when op is inverse_rope"},
      {[](nlohmann::json& s) {
         s["io"] = {{"angles", "cos_sin_cache"}, {"output", "separate"}};
         s["rope"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
       },
       "/inverse: true is not allowed: must be false when op is rope with io.angles cos_sin_cache"},
  });
}
