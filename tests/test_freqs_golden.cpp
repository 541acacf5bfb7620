// Frequency tables against transformers 5.24 bit for bit (tests/data/freqs_golden/, written by
// its make_golden.py; nothing is read from a Python installation here): llama3 in HF's torch
// float32 operation order, Gemma 4's proportional RoPE, and YaRN with and without truncate.
// ropejit-tier: unit
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

constexpr double kPi = 3.14159265358979323846;

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

Spec llama3_spec(const json& t) {
  return table_spec(t, {{"rope_type", "llama3"}, {"rope_theta", t.at("rope_theta")}, {"factor", t.at("factor")},
                        {"low_freq_factor", t.at("low_freq_factor")}, {"high_freq_factor", t.at("high_freq_factor")},
                        {"original_max_position_embeddings", t.at("original_max_position_embeddings")}});
}

Spec proportional_spec(const json& t) {
  return table_spec(t, {{"rope_type", "proportional"}, {"rope_theta", t.at("rope_theta")}, {"factor", t.at("factor")},
                        {"partial_rotary_factor", t.at("partial_rotary_factor")}});
}

// The whole table, bit for bit, from the generator and from the independent reference.
TEST(FreqsGolden, Llama3IsTransformersBitForBit) {
  const json document = golden("llama3.json");
  ASSERT_EQ(document.at("transformers"), "5.24.0");
  ASSERT_GE(document.at("tables").size(), 7u);
  for (const json& t : document.at("tables")) {
    SCOPED_TRACE(t.at("name").get<std::string>());
    ASSERT_TRUE(t.at("torch_pow_pairs").empty()) << "chosen so that torch's pow is correctly rounded";
    const Spec spec = llama3_spec(t);
    const FreqTable table = compute_freqs(spec, FreqMode::hf_fp32);
    const ref::RefFreqs reference = ref::reference_freqs(spec, 1, /*hf_fp32=*/true);
    const std::vector<double> want = t.at("inv_freq");
    ASSERT_EQ(table.inv_freq.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(bits(table.inv_freq[i]), bits(want[i])) << "pair " << i << ": " << table.inv_freq[i] << " vs " << want[i];
      EXPECT_EQ(bits(reference.inv_freq[i]), bits(want[i])) << "reference pair " << i;
    }
    // float64 mode is the math, one division each: within float32 rounding of HF's table.
    const FreqTable exact = compute_freqs(spec, FreqMode::float64);
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(exact.inv_freq[i], want[i], 4e-6 * want[i]) << "float64 pair " << i;
  }
}

// The data tells the two orders apart: 2 pi / inv_freq as one float32 division (ropejit before
// it followed torch) differs from HF in the smooth band of most of these tables.
TEST(FreqsGolden, Llama3DataSeparatesOneDivisionFromTorchsReciprocal) {
  int differing = 0;
  const json document = golden("llama3.json");
  for (const json& t : document.at("tables")) {
    const Spec spec = llama3_spec(t);
    const std::vector<double> want = t.at("inv_freq");
    const float factor = static_cast<float>(*spec.rope.factor), low = static_cast<float>(*spec.rope.low_freq_factor),
                high = static_cast<float>(*spec.rope.high_freq_factor);
    const double original = static_cast<double>(*spec.rope.original_max_position_embeddings);
    const std::vector<double> base = compute_freqs(table_spec(t, {{"rope_type", "default"}, {"rope_theta", t.at("rope_theta")}}),
                                                   FreqMode::hf_fp32).inv_freq;
    bool differs = false;
    for (size_t i = 0; i < base.size(); ++i) {
      const float v = static_cast<float>(base[i]);
      const float wavelen = static_cast<float>(2 * kPi) / v;
      if (wavelen < static_cast<float>(original / *spec.rope.high_freq_factor) ||
          wavelen > static_cast<float>(original / *spec.rope.low_freq_factor))
        continue;
      const float smooth = (static_cast<float>(original) / wavelen - low) / static_cast<float>(high - low);
      differs |= bits((1.0f - smooth) * v / factor + smooth * v) != bits(want[i]);
    }
    differing += differs;
  }
  EXPECT_GE(differing, 3);
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

// YaRN as GPT-OSS's rotary computes it, with and without `truncate` (GPT-OSS: false; the
// correction range then keeps its fractional bounds), and DeepSeek's mscale pair.
TEST(FreqsGolden, YarnWithAndWithoutTruncateIsTransformers) {
  const json document = golden("yarn.json");
  ASSERT_EQ(document.at("tables").size(), 5u);
  int truncation_matters = 0;
  for (const json& t : document.at("tables")) {
    SCOPED_TRACE(t.at("name").get<std::string>());
    const int head_dim = t.at("head_dim");
    const json spec_json = {{"name", t.at("name")}, {"head_dim", head_dim}, {"rotary_dim", head_dim},
                            {"num_q_heads", 8}, {"num_kv_heads", 2}, {"layout", "neox"}, {"dtype", "bf16"},
                            {"max_position_embeddings", t.at("max_position_embeddings")}, {"rope", t.at("rope")}};
    const Spec spec = parse_spec(spec_json.dump());
    const FreqTable table = compute_freqs(spec, FreqMode::hf_fp32);
    const ref::RefFreqs reference = ref::reference_freqs(spec, 1, /*hf_fp32=*/true);
    const std::vector<double> want = t.at("inv_freq");
    const std::vector<int> pow_pairs = t.at("torch_pow_pairs");
    ASSERT_EQ(table.inv_freq.size(), want.size());
    EXPECT_NEAR(table.attention_factor, t.at("attention_factor").get<double>(), 1e-15);
    EXPECT_NEAR(reference.attention_factor, t.at("attention_factor").get<double>(), 1e-15);
    for (size_t i = 0; i < want.size(); ++i) {
      const bool rounded_differently = std::find(pow_pairs.begin(), pow_pairs.end(), static_cast<int>(i)) != pow_pairs.end();
      for (double got : {table.inv_freq[i], reference.inv_freq[i]}) {
        const int64_t ulps = std::llabs(static_cast<int64_t>(bits(got)) - static_cast<int64_t>(bits(want[i])));
        EXPECT_LE(ulps, rounded_differently ? 1 : 0) << "pair " << i << ": " << got << " vs " << want[i];
      }
    }
    json flipped = spec_json;  // the other truncate value gives another table: the data tells them apart
    flipped["rope"]["truncate"] = !t.at("rope").at("truncate").get<bool>();
    truncation_matters += compute_freqs(parse_spec(flipped.dump()), FreqMode::hf_fp32).inv_freq != table.inv_freq;
  }
  EXPECT_GE(truncation_matters, 4);
}

}  // namespace
}  // namespace ropejit
