// A LayerNorm QK-norm (qk_norm type layernorm: (x - mean) / sqrt(var + eps) * w + b, the
// indexer's k_norm) against the float64 reference on fresh random inputs with poisoned outputs:
// q and k or k alone, with and without weight and bias, both layouts, every dtype, every output
// form, packed input with a QKV bias, heads shared by a warp's lanes and heads owned whole by a
// thread, every config; DeepSeek-V3.2's indexer (k LayerNorm, then the rotation, FP8 codes and
// scales into its K cache); then the spec errors and the launch's norm fields.
// ropejit-tier: conformance
// ropejit-tier: unit LayerNormSpec
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "ropejit/introspect.h"
#include "support/conformance_fixture.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"
#include "support/spec_refusals.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class LayerNorm : public ropejit::test::BackendConformance {};

const ropejit::test::HeadShape kShapes[] = {{128, 64, 8, 2}, {256, 256, 4, 1}, {96, 32, 6, 6}};
const char* const kOutputs[] = {"inplace", "separate", "paged_kv", "padded_bhsd"};

nlohmann::json layer_norm_block(int index) {
  nlohmann::json norm = {{"type", "layernorm"}, {"eps", index % 2 ? 1e-5 : 1e-6}};
  if (index % 4 != 3) norm["bias"] = "per_head";
  if (index % 4 == 2) norm["weight"] = "none";
  if (index % 3 != 1) norm["heads"] = "k";
  return norm;
}

nlohmann::json layer_norm_json(int index, const char* layout, const char* dtype) {
  SpecFields f = ropejit::test::shaped_fields("layernorm", kShapes[index % std::size(kShapes)], layout, dtype, index);
  f.output = kOutputs[index % std::size(kOutputs)];
  f.positions = f.output == "padded_bhsd" ? "varlen" : "explicit";
  if (f.output == "paged_kv") f.io_extra = {{"page_size", 16}};
  if (index % 5 == 1 && f.output != "paged_kv") {  // packed, with a QKV bias before the norm
    f.input = "packed_qkv";
    f.qkv_bias = true;
  }
  f.qk_norm = layer_norm_block(index);
  return ropejit::test::spec_json(f);
}

}  // namespace

TEST_P(LayerNorm, EveryLayoutDtypeFormAndNorm) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp16", "fp32"})
      for (int form = 0; form < 4; ++form) {
        const Spec spec = parse_spec(layer_norm_json(index, layout, dtype).dump());
        ASSERT_EQ(spec.qk_norm.type, NormType::layernorm);
        expect_token_counts(spec, index,
                            fmt::format("layernorm {} {} D{}/{} {} heads {} bias {} weight {}", layout, dtype,
                                        spec.head_dim, spec.rotary_dim, to_string(spec.io.output),
                                        to_string(spec.qk_norm.heads), to_string(spec.qk_norm.bias),
                                        to_string(spec.qk_norm.weight)));
        ++index;
      }
  EXPECT_EQ(index, 24);
}

// Warp-shared heads (D 128) and heads owned whole by a thread (D 256 at 2 or 4 values a lane).
TEST_P(LayerNorm, EveryConfig) {
  EXPECT_GE(expect_every_config(parse_spec(layer_norm_json(0, "neox", "bf16").dump()), {2, 4, 8}, {1, 2, 4}, 9), 6);
  EXPECT_GE(expect_every_config(parse_spec(layer_norm_json(1, "interleaved", "bf16").dump()), {2, 4, 8}, {1, 2}, 5), 4);
}

// DeepSeek-V3.2's indexer as its engines run it: k = LayerNorm(wk(x)) (eps 1e-6, weight and
// bias), its leading 64 rotated neox, FP8 e4m3 into the indexer K cache with a scale per slot;
// q rotated (not normed) into FP8 with a scale per (token, head).
TEST_P(LayerNorm, DeepSeekV32IndexerKeys) {
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(ropejit::test::data_path("deepseek-v3.2-indexer.json")));
  spec["qk_norm"] = {{"type", "layernorm"}, {"eps", 1e-6}, {"weight", "per_head"}, {"bias", "per_head"}, {"heads", "k"}};
  const Spec parsed = parse_spec(spec.dump());
  expect_token_counts(parsed, 1, "deepseek-v3.2 indexer with k_norm");
  EXPECT_GE(expect_every_config(parsed, {4, 8}, {1, 2, 4}, 9), 2);
}

INSTANTIATE_TEST_SUITE_P(Backend, LayerNorm, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The canonical form keeps a LayerNorm's fields and leaves an RMSNorm's text (and hash) as before.
TEST(LayerNormSpec, CanonicalForm) {
  const Spec spec = parse_spec(layer_norm_json(0, "neox", "bf16").dump());
  EXPECT_EQ(spec.qk_norm.heads, NormHeads::k);
  EXPECT_EQ(spec.qk_norm.bias, NormWeight::per_head);
  const std::string text = canonical_json(spec);
  EXPECT_NE(text.find("\"type\":\"layernorm\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"bias\":\"per_head\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"heads\":\"k\""), std::string::npos) << text;
  EXPECT_EQ(parse_spec(text).qk_norm.heads, NormHeads::k);
  SpecFields f;
  f.qk_norm = {{"type", "rmsnorm"}};
  const std::string rms = canonical_json(ropejit::test::make_spec(f));
  EXPECT_EQ(rms.find("\"bias\""), std::string::npos) << rms;
  EXPECT_EQ(rms.find("\"heads\""), std::string::npos) << rms;
}

// A k-only norm takes no q weight or bias; a LayerNorm's biases are [D] launch fields of the dtype.
TEST(LayerNormSpec, LaunchFields) {
  auto use_of = [](const Spec& spec, std::string_view name) {
    for (const LaunchField& field : launch_fields(spec))
      if (field.name == name) return field.use;
    return FieldUse::unused;
  };
  const Spec k_only = parse_spec(layer_norm_json(0, "neox", "bf16").dump());
  EXPECT_EQ(use_of(k_only, "k_norm_weight"), FieldUse::required);
  EXPECT_EQ(use_of(k_only, "k_norm_bias"), FieldUse::required);
  EXPECT_EQ(use_of(k_only, "q_norm_weight"), FieldUse::unused);
  EXPECT_EQ(use_of(k_only, "q_norm_bias"), FieldUse::unused);
  const Spec both = parse_spec(layer_norm_json(1, "neox", "fp16").dump());
  ASSERT_EQ(both.qk_norm.heads, NormHeads::q_and_k);
  EXPECT_EQ(use_of(both, "q_norm_bias"), FieldUse::required);
  for (const LaunchField& field : launch_fields(both))
    if (field.name == "q_norm_bias") {
      EXPECT_EQ(field.dtype, "fp16");
      ASSERT_EQ(field.dims.size(), 1u);
      EXPECT_EQ(field.dims[0], "D");
      EXPECT_FALSE(field.written);
    }
  SpecFields rms;
  rms.qk_norm = {{"type", "rmsnorm"}};
  EXPECT_EQ(use_of(ropejit::test::make_spec(rms), "k_norm_bias"), FieldUse::unused);
}

TEST(LayerNormSpec, Refusals) {
  const nlohmann::json base = layer_norm_json(0, "neox", "bf16");
  ropejit::test::expect_refusals(base, {
      {[](nlohmann::json& s) { s["qk_norm"]["type"] = "groupnorm"; }, "/qk_norm/type: \"groupnorm\" is not allowed"},
      {[](nlohmann::json& s) { s["qk_norm"]["type"] = "rmsnorm"; },
       "/qk_norm/bias: \"per_head\" is not allowed: must be \"none\" unless type is \"layernorm\""},
      {[](nlohmann::json& s) { s["qk_norm"]["heads"] = "q"; }, "/qk_norm/heads: \"q\" is not allowed"},
      {[](nlohmann::json& s) {
         s["qk_norm"].erase("bias");
         s["qk_norm"]["scope"] = "all";
       },
       "/qk_norm/scope: \"all\" is not allowed: must be \"head\" with type \"layernorm\""},
      {[](nlohmann::json& s) { s["qk_norm"] = {{"type", "rmsnorm"}, {"scope", "all"}, {"heads", "k"}}; },
       "/qk_norm/heads: \"k\" is not allowed: must be \"q_and_k\" with scope \"all\""},
  });
}
