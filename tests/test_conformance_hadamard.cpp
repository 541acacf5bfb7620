// A spec's Hadamard transform ("hadamard": true: each q and k head, once rotated, times the
// Sylvester Walsh-Hadamard matrix over sqrt(head_dim), DeepSeek-V3.2's indexer rotate_activation)
// against the float64 reference (the transform from its definition) on fresh random inputs with
// poisoned outputs: both layouts, every dtype, whole and partial heads, every output form, FP8 q
// outputs and caches with per-head scales, a k LayerNorm, every config; DeepSeek-V3.2's indexer
// as its FP8 engines run it; then the spec and config errors.
// ropejit-tier: conformance
// ropejit-tier: unit HadamardSpec
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "ropejit/config.h"
#include "support/conformance_fixture.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"
#include "support/spec_refusals.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class Hadamard : public ropejit::test::BackendConformance {};

const ropejit::test::HeadShape kShapes[] = {{128, 64, 8, 1}, {128, 128, 4, 2}, {64, 32, 6, 3}, {256, 64, 4, 4}};
const char* const kOutputs[] = {"inplace", "separate", "paged_kv", "padded_bhsd", "fp8_paged", "fp8_q"};

nlohmann::json hadamard_json(int index, const char* layout, const char* dtype) {
  ropejit::test::HeadShape shape = kShapes[index % std::size(kShapes)];
  if (std::string(dtype) == "fp32" && shape.head_dim > 128) shape = kShapes[0];  // a warp of 4-value vectors
  SpecFields f = ropejit::test::shaped_fields("hadamard", shape, layout, dtype, index);
  const std::string form = kOutputs[index % std::size(kOutputs)];
  f.output = form == "fp8_paged" ? "paged_kv" : form == "fp8_q" ? "separate" : form;
  f.positions = f.output == "padded_bhsd" ? "varlen" : "explicit";
  if (f.output == "paged_kv") f.io_extra = {{"page_size", 16}};
  if (form == "fp8_paged")
    f.io_extra = {{"page_size", 16}, {"cache_dtype", "fp8_e4m3"}, {"cache_scale", "per_token_head"}};
  if (form == "fp8_q")
    f.io_extra = {{"q_output_dtype", "fp8_e4m3"}, {"q_scale", "per_token_head"}, {"scale_rounding", "ue8m0"}};
  if (index % 3 == 1) f.qk_norm = {{"type", "layernorm"}, {"bias", "per_head"}, {"heads", "k"}};
  nlohmann::json spec = ropejit::test::spec_json(f);
  spec["hadamard"] = true;
  return spec;
}

}  // namespace

TEST_P(Hadamard, EveryLayoutDtypeShapeAndForm) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp16", "fp32"})
      for (int form = 0; form < 6; ++form) {
        const Spec spec = parse_spec(hadamard_json(index, layout, dtype).dump());
        ASSERT_TRUE(spec.hadamard);
        expect_token_counts(spec, index,
                            fmt::format("hadamard {} {} D{}/{} {} q {} norm {}", layout, dtype, spec.head_dim,
                                        spec.rotary_dim, to_string(spec.io.output), to_string(spec.io.q_output_dtype),
                                        spec.qk_norm.enabled));
        ++index;
      }
  EXPECT_EQ(index, 36);
}

TEST_P(Hadamard, EveryConfig) {
  EXPECT_GE(expect_every_config(parse_spec(hadamard_json(0, "neox", "bf16").dump()), {4, 8}, {1, 2, 4}, 9), 4);
  EXPECT_GE(expect_every_config(parse_spec(hadamard_json(5, "interleaved", "bf16").dump()), {4, 8}, {1, 2, 4}, 5), 4);
}

// DeepSeek-V3.2's indexer with the FP8 engines' steps: k = LayerNorm(wk(x)), both rotated (neox,
// the leading 64 of 128), rotate_activation (the transform), then q into FP8 with a ue8m0 scale per
// (token, head) and k into the indexer K cache with one a slot.
TEST_P(Hadamard, DeepSeekV32Indexer) {
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(ropejit::test::data_path("deepseek-v3.2-indexer.json")));
  spec["qk_norm"] = {{"type", "layernorm"}, {"eps", 1e-6}, {"bias", "per_head"}, {"heads", "k"}};
  spec["hadamard"] = true;
  const Spec parsed = parse_spec(spec.dump());
  expect_token_counts(parsed, 1, "deepseek-v3.2 indexer, hadamard");
  EXPECT_GE(expect_every_config(parsed, {8}, {1, 2, 4}, 9), 2);
}

INSTANTIATE_TEST_SUITE_P(Backend, Hadamard, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The key is canonical only when set: every other spec keeps its text and hash.
TEST(HadamardSpec, CanonicalForm) {
  const Spec spec = parse_spec(hadamard_json(0, "neox", "bf16").dump());
  EXPECT_NE(canonical_json(spec).find("\"hadamard\":true"), std::string::npos);
  nlohmann::json plain = nlohmann::json::parse(canonical_json(spec));
  plain.erase("hadamard");
  EXPECT_EQ(canonical_json(parse_spec(plain.dump())).find("\"hadamard\":"), std::string::npos);
  EXPECT_NE(spec_hash(spec).hex(), spec_hash(parse_spec(plain.dump())).hex());
}

TEST(HadamardSpec, RefusedWhereNoHeadIsWholeInAWarp) {
  const nlohmann::json base = hadamard_json(1, "neox", "bf16");
  ropejit::test::expect_refusals(base, {
      {[](nlohmann::json& s) { s["hadamard"] = "yes"; }, "/hadamard: "},
      {[](nlohmann::json& s) {
         s["head_dim"] = 96;
         s["rotary_dim"] = 64;
       },
       "/hadamard: true is not allowed: must be false with head_dim 96 (a Hadamard transform needs a power of 2 "
       "of at most 256 bf16 values"},
      {[](nlohmann::json& s) {
         s["dtype"] = "fp32";
         s["head_dim"] = 256;
         s["rotary_dim"] = 64;
       },
       "must be false with head_dim 256 (a Hadamard transform needs a power of 2 of at most 128 fp32 values"},
      {[](nlohmann::json& s) { s["qk_norm"] = {{"type", "rmsnorm"}, {"scope", "all"}}; },
       "/hadamard: true is not allowed: must be false with qk_norm scope \"all\""},
      {[](nlohmann::json& s) {
         s["op"] = "inverse_rope";
         s["num_kv_heads"] = s["num_q_heads"];
         s["io"] = {{"positions", "explicit"}};
       },
       "/hadamard: true is not allowed: must be false when op is inverse_rope (a Hadamard transform: op rope)"},
  });
}

// A config whose head takes more lanes than a warp is refused by name; the default never is.
TEST(HadamardSpec, ConfigsKeepAHeadInAWarp) {
  nlohmann::json spec = hadamard_json(3, "neox", "bf16");  // D 256: a warp's lanes at vec 8 or 4, not at 2
  const Spec parsed = parse_spec(spec.dump());
  ASSERT_EQ(parsed.head_dim, 256);
  EXPECT_FALSE(config_problem(parsed, default_config(parsed)));
  Config narrow = default_config(parsed);
  narrow.vec = 2;
  const auto why = config_problem(parsed, narrow);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("the Hadamard transform meets a head's values within one warp"), std::string::npos) << *why;
}
