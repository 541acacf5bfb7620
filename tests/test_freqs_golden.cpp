// Frequency tables against transformers 5.24 (tests/data/freqs_golden/, written by its
// make_golden.py; nothing is read from a Python installation here): Gemma 4's proportional RoPE.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ropejit/check/reference.h"
#include "ropejit/freqs.h"
#include "support/repo_paths.h"

namespace ropejit {
namespace {

using nlohmann::json;

json golden(const std::string& name) {
  std::ifstream in(test::data_path("freqs_golden/" + name));
  EXPECT_TRUE(in.good()) << "cannot open " << name;
  return json::parse(in);
}

uint32_t bits(double value) {
  const float f = static_cast<float>(value);
  uint32_t out;
  std::memcpy(&out, &f, sizeof out);
  return out;
}

Spec table_spec(const json& t, const json& rope) {
  const int head_dim = t.at("head_dim");
  const json spec = {{"name", t.at("name")},  {"head_dim", head_dim},     {"rotary_dim", head_dim},
                     {"num_q_heads", 8},       {"num_kv_heads", 4},        {"layout", "neox"},
                     {"dtype", "bf16"},        {"max_position_embeddings", 131072}, {"rope", rope}};
  return parse_spec(spec.dump());
}

Spec proportional_spec(const json& t) {
  return table_spec(t, {{"rope_type", "proportional"}, {"rope_theta", t.at("rope_theta")}, {"factor", t.at("factor")},
                        {"partial_rotary_factor", t.at("partial_rotary_factor")}});
}

// Gemma 4's global layers (head_dim 256 and 512, a quarter of the pairs rotated, theta 1e6, factor
// 1 and 8): HF's table, where torch's float32 pow is correctly rounded, and 0 past rope_angles.
TEST(FreqsGolden, ProportionalIsTransformers) {
  const json document = golden("proportional.json");
  ASSERT_EQ(document.at("tables").size(), 4u);
  for (const json& t : document.at("tables")) {
    SCOPED_TRACE(t.at("name").get<std::string>());
    const Spec spec = proportional_spec(t);
    const FreqTable table = compute_freqs(spec, FreqMode::hf_fp32);
    const ref::RefFreqs reference = ref::reference_freqs(spec, 1, /*hf_fp32=*/true);
    const std::vector<double> want = t.at("inv_freq");
    const std::vector<int> pow_pairs = t.at("torch_pow_pairs");
    const int head_dim = t.at("head_dim");
    ASSERT_EQ(table.inv_freq.size(), static_cast<size_t>(head_dim / 2));
    ASSERT_EQ(want.size(), table.inv_freq.size());
    EXPECT_EQ(table.rotated_pairs, head_dim / 8);  // int(0.25 * head_dim // 2)
    EXPECT_EQ(table.attention_factor, 1.0);
    for (size_t i = 0; i < want.size(); ++i) {
      const bool rounded_differently = std::find(pow_pairs.begin(), pow_pairs.end(), static_cast<int>(i)) != pow_pairs.end();
      for (double got : {table.inv_freq[i], reference.inv_freq[i]}) {
        const int64_t ulps = std::llabs(static_cast<int64_t>(bits(got)) - static_cast<int64_t>(bits(want[i])));
        EXPECT_LE(ulps, rounded_differently ? 1 : 0) << "pair " << i << ": " << got << " vs " << want[i];
      }
      if (static_cast<int>(i) >= table.rotated_pairs) {
        EXPECT_EQ(want[i], 0.0) << "pair " << i;
        EXPECT_EQ(bits(table.inv_freq[i]), 0u) << "pair " << i;
      } else {
        EXPECT_GT(table.inv_freq[i], 0.0) << "pair " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ropejit
