// op attn_temperature (Llama 4's NoPE layers): its spec block (named errors, canonical JSON),
// its launch (every unused argument refused, q scaled in place at HF's float32 steps, bit for
// bit at the floor boundaries on the host backend) and its HF import (which layers run it).
// ropejit-tier: conformance
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hf_import.h"  // private: hf_layer_ops and hf_layer_rope_map, the HF importer (CLI import-hf is its face)
#include "ropejit/runtime.h"
#include "support/backends.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;
using ropejit::test::spec_error;

namespace {

nlohmann::json temperature_spec(const std::string& dtype = "fp32", const std::string& positions = "explicit") {
  SpecFields f;
  f.op = "attn_temperature";
  f.dtype = dtype;
  f.positions = positions;
  f.num_q_heads = 5;
  f.num_kv_heads = 1;
  f.head_dim = 64;
  f.rotary_dim = 64;
  f.max_position_embeddings = 1 << 24;
  nlohmann::json spec = test::spec_json(f);
  spec["attn_temperature"] = {{"floor_scale", 8192}, {"attn_scale", 0.1}};
  return spec;
}

void expect_error(const nlohmann::json& spec, const std::string& fragment) {
  const std::string error = spec_error(spec);
  EXPECT_NE(error.find(fragment), std::string::npos) << "wanted: " << fragment << "\ngot: " << error;
}

// HF's float32 steps (modeling_llama4.py), written here independently of the kernel.
float hf_scale(int64_t position, int64_t floor_scale, float attn_scale) {
  const float floored = std::floor((static_cast<float>(position) + 1.0f) / static_cast<float>(floor_scale));
  return std::log1p(floored) * attn_scale + 1.0f;
}

nlohmann::json llama4_config(const nlohmann::json& extra) {
  nlohmann::json text = {{"model_type", "llama4_text"}, {"head_dim", 128}, {"hidden_size", 5120},
                         {"max_position_embeddings", 10485760}, {"num_attention_heads", 40},
                         {"num_key_value_heads", 8}, {"num_hidden_layers", 8}, {"rope_theta", 500000.0}};
  text.update(extra);
  return {{"model_type", "llama4"}, {"text_config", text}};
}

}  // namespace

TEST(AttnTemperature, SpecBlockIsValidatedWithNamedErrors) {
  const nlohmann::json spec = temperature_spec();
  ASSERT_EQ(spec_error(spec), "accepted");
  const Spec parsed = parse_spec(spec.dump());
  EXPECT_EQ(parsed.op, OpKind::attn_temperature);
  EXPECT_EQ(parsed.attn_temperature.floor_scale, 8192);
  EXPECT_DOUBLE_EQ(parsed.attn_temperature.attn_scale, 0.1);

  nlohmann::json bad = spec;
  bad["attn_temperature"]["floor_scale"] = 0;
  expect_error(bad, "/attn_temperature/floor_scale: 0 is not allowed: must be an integer in [1, 2147483647]");
  bad = spec;
  bad["attn_temperature"]["floor_scal"] = 2;
  expect_error(bad, "/attn_temperature/floor_scal: unknown key; did you mean \"floor_scale\"?");
  bad = spec;
  bad["io"]["output"] = "separate";
  expect_error(bad, "/io/output: \"separate\" is not allowed: must be \"inplace\" or absent when op is attn_temperature");
  bad = spec;
  bad["io"]["positions"] = "mrope";
  bad["io"]["mrope_section"] = {16, 8, 8};
  expect_error(bad, "/io/positions: \"mrope\" is not allowed: must be explicit, varlen or offset when op is attn_temperature");
  bad = spec;
  bad["qk_norm"] = {{"type", "rmsnorm"}};
  expect_error(bad, "/qk_norm: ");
  bad = test::spec_json(SpecFields{});
  bad["attn_temperature"] = {{"floor_scale", 8192}};
  expect_error(bad, "/attn_temperature: {\"floor_scale\":8192} is not allowed: must be absent unless op is \"attn_temperature\"");
  // Canonical JSON names the op and its block, so the text round-trips to the same spec.
  const std::string canonical = canonical_json(parsed);
  EXPECT_NE(canonical.find("\"op\":\"attn_temperature\""), std::string::npos) << canonical;
  EXPECT_EQ(canonical_json(parse_spec(canonical)), canonical);
}

TEST(AttnTemperature, ScalesQInPlaceBitForBitAtTheFloorBoundaries) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  RuntimeOptions options;
  options.backend = BackendKind::host;
  options.disk_cache = false;
  Runtime runtime(options);
  const Kernel kernel = runtime.get(parse_spec(temperature_spec().dump()));
  // Each side of the first floors ((p + 1) / 8192 = 1, 2, ...) and far positions.
  const std::vector<int32_t> positions = {0, 8190, 8191, 8192, 16382, 16383, 1000000, 16777214, 5, 77, 24575};
  const int64_t T = static_cast<int64_t>(positions.size()), row = 5 * 64;
  std::vector<float> q(static_cast<size_t>(T * row));
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37 * static_cast<double>(i) + 0.1) * 3.0f;
  const std::vector<float> before = q;
  Args a;
  a.num_tokens = T;
  a.q = q.data();
  a.positions = positions.data();
  kernel.launch(a);
  for (int64_t t = 0; t < T; ++t) {
    const float scale = hf_scale(positions[t], 8192, 0.1f);
    for (int64_t e = 0; e < row; ++e) {
      const size_t at = static_cast<size_t>(t * row + e);
      const float want = before[at] * scale;
      EXPECT_EQ(std::memcmp(&q[at], &want, sizeof(float)), 0)
          << "position " << positions[t] << " element " << e << ": " << q[at] << " vs " << want;
    }
  }
  EXPECT_NE(q[static_cast<size_t>(2 * row)], before[static_cast<size_t>(2 * row)]) << "p = 8191 is scaled";
  EXPECT_EQ(q[static_cast<size_t>(1 * row)], before[static_cast<size_t>(1 * row)]) << "p = 8190: scale 1";

  Args unused = a;  // a k tensor the op never reads is refused by name, before any launch
  std::vector<float> k(q.size());
  unused.k = k.data();
  try {
    kernel.launch(unused);
    ADD_FAILURE() << "k accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Args::k:"), std::string::npos) << e.what();
  }
}

TEST(AttnTemperature, Llama4NopeLayersImportTheOpWithHfsDefaults) {
  // no_rope_layers empty (as Llama 4's config.json): HF's default, a NoPE layer every 4th.
  nlohmann::json config = llama4_config({{"no_rope_layers", nlohmann::json::array()},
                                         {"floor_scale", 4096}, {"attn_scale", 0.25}});
  const auto ops = hf_layer_ops(config);
  ASSERT_EQ(ops.size(), 8u);
  for (size_t i = 0; i < ops.size(); ++i)
    EXPECT_EQ(ops[i], (i + 1) % 4 == 0 ? OpKind::attn_temperature : OpKind::rope) << "layer " << i;
  HfImportOptions options;
  options.op = OpKind::attn_temperature;
  const Spec spec = spec_from_hf(config, options);
  EXPECT_EQ(spec.op, OpKind::attn_temperature);
  EXPECT_EQ(spec.attn_temperature.floor_scale, 4096);
  EXPECT_DOUBLE_EQ(spec.attn_temperature.attn_scale, 0.25);
  EXPECT_EQ(spec.num_q_heads, 40);

  // attn_temperature_tuning false: the NoPE layers run nothing; an explicit list is HF's.
  config = llama4_config({{"attn_temperature_tuning", false}, {"no_rope_layers", {1, 0, 1, 1, 0, 1, 1, 1}}});
  const auto off = hf_layer_ops(config);
  const auto map = hf_layer_rope_map(config);
  for (size_t i = 0; i < off.size(); ++i) {
    const bool nope = i == 1 || i == 4;
    EXPECT_EQ(off[i].has_value(), !nope) << "layer " << i;
    EXPECT_EQ(map[i].has_value(), !nope) << "layer " << i;
  }
  // SmolLM3 without no_rope_layers: every 4th layer NoPE (no_rope_layer_interval overrides it).
  const nlohmann::json smol = {{"model_type", "smollm3"}, {"num_attention_heads", 16}, {"hidden_size", 2048},
                               {"num_hidden_layers", 6}, {"no_rope_layer_interval", 3}};
  const auto smol_map = hf_layer_rope_map(smol);
  for (size_t i = 0; i < smol_map.size(); ++i) EXPECT_EQ(smol_map[i].has_value(), (i + 1) % 3 != 0) << "layer " << i;
  EXPECT_FALSE(hf_layer_ops(smol)[2].has_value()) << "SmolLM3's NoPE layers run no op";
}
