// Frequency math: HF golden tables for every conformance model, docs/rope-math.md check values,
// dynamic NTK, NTK alpha, linear, float64 vs hf_fp32, and the LongRoPE switch.
// ropejit-tier: unit
// ropejit-tier: conformance GoldenModel
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/build_paths.h"
#include "hf_import.h"  // private: spec_from_hf, the HF importer (CLI import-hf is its face), under test
#include "ropejit/freqs.h"
#include "ropejit/check/reference.h"
#include "support/run_command.h"
#include "support/repo_paths.h"

namespace ropejit {
namespace {

using nlohmann::json;

constexpr double kPi = 3.14159265358979323846;

json load_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return json::parse(in);
}

const json& golden() {
  static const json j = load_json(test::data_path("conformance/hf_golden.json"));
  return j;
}

const json& models() {
  static const json j = load_json(test::data_path("conformance/models.json"));
  return j;
}

/// The spec of one conformance model through HF import (model_type merged into the config).
Spec model_spec(const std::string& key) {
  const json& entry = models().at(key);
  json config = entry.at("config");
  config["model_type"] = entry.at("model_type");
  HfImportOptions options;
  options.name = key;
  return spec_from_hf(config, options);
}

/// A few float32 ulps relative, or an absolute floor for values near zero.
void expect_close(double expected, double actual, double rel, double abs_floor,
                  const std::string& what) {
  EXPECT_LE(std::fabs(expected - actual), std::max(rel * std::fabs(expected), abs_floor))
      << what << ": expected " << expected << ", got " << actual;
}

void expect_tables_close(const json& expected, const std::vector<double>& actual,
                         const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    expect_close(expected[i].get<double>(), actual[i], 1e-6, 2e-7,
                 what + "[" + std::to_string(i) + "]");
}

/// A base spec with the fields the frequency math reads; rope fields are set per test.
Spec make_spec(int rotary_dim, double theta, int64_t max_positions) {
  Spec spec;
  spec.name = "test";
  spec.head_dim = rotary_dim;
  spec.rotary_dim = rotary_dim;
  spec.num_q_heads = 1;
  spec.num_kv_heads = 1;
  spec.max_position_embeddings = max_positions;
  spec.rope.theta = theta;
  return spec;
}

// Llama 3 scaling with O = 8192 over make_spec.
Spec llama3_spec(int rotary_dim, int64_t max_positions, double factor, double low, double high) {
  Spec spec = make_spec(rotary_dim, 5e5, max_positions);
  spec.rope.type = RopeType::llama3;
  spec.rope.factor = factor;
  spec.rope.low_freq_factor = low;
  spec.rope.high_freq_factor = high;
  spec.rope.original_max_position_embeddings = 8192;
  return spec;
}

std::mt19937_64& rng() {
  static std::mt19937_64 gen(std::random_device{}());
  return gen;
}

double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng()); }

// ---------------------------------------------------------------- HF golden tables

class GoldenModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenModel, TablesMatchHf) {
  const std::string key = GetParam();
  const json& g = golden().at(key);
  const Spec spec = model_spec(key);
  const FreqTable table = compute_freqs(spec, FreqMode::hf_fp32);

  EXPECT_EQ(table.rotary_dim, g.at("rotary_dim").get<int>());
  EXPECT_EQ(spec.rotary_dim, g.at("rotary_dim").get<int>());
  expect_close(g.at("attention_factor").get<double>(), table.attention_factor, 1e-12, 0,
               "attention_factor");
  expect_tables_close(g.at("inv_freq"), table.inv_freq, "inv_freq");
  if (g.contains("inv_freq_long")) {
    expect_tables_close(g.at("inv_freq_long"), table.inv_freq_long, "inv_freq_long");
  } else {
    EXPECT_TRUE(table.inv_freq_long.empty());
  }
  if (g.contains("low")) {
    ASSERT_TRUE(table.yarn_low && table.yarn_high);
    EXPECT_DOUBLE_EQ(*table.yarn_low, g.at("low").get<double>());
    EXPECT_DOUBLE_EQ(*table.yarn_high, g.at("high").get<double>());
  } else {
    EXPECT_FALSE(table.yarn_low.has_value());
  }
  if (g.contains("counts")) {
    ASSERT_TRUE(table.llama3_counts.has_value());
    const auto counts = g.at("counts").get<std::vector<int>>();
    EXPECT_EQ((*table.llama3_counts)[0], counts.at(0));
    EXPECT_EQ((*table.llama3_counts)[1], counts.at(1));
    EXPECT_EQ((*table.llama3_counts)[2], counts.at(2));
  } else {
    EXPECT_FALSE(table.llama3_counts.has_value());
  }
}

TEST_P(GoldenModel, SamplesMatchHf) {
  const std::string key = GetParam();
  const json& g = golden().at(key);
  const FreqTable table = compute_freqs(model_spec(key), FreqMode::hf_fp32);
  const auto golden_inv = g.at("inv_freq").get<std::vector<double>>();
  const float s32 = static_cast<float>(table.attention_factor);
  const double s = table.attention_factor;
  for (const json& sample : g.at("samples")) {
    const int64_t p = sample.at("position").get<int64_t>();
    const auto cos32 = sample.at("cos_fp32").get<std::vector<double>>();
    const auto sin32 = sample.at("sin_fp32").get<std::vector<double>>();
    const auto cos64 = sample.at("cos_exact").get<std::vector<double>>();
    const auto sin64 = sample.at("sin_exact").get<std::vector<double>>();
    ASSERT_EQ(cos32.size(), table.inv_freq.size());
    for (size_t i = 0; i < table.inv_freq.size(); ++i) {
      const std::string where = "p=" + std::to_string(p) + " i=" + std::to_string(i);
      // HF: float32 angle, float32 cos/sin, times s in float32.
      const float angle = static_cast<float>(p) * static_cast<float>(table.inv_freq[i]);
      // torch's powf may land one ulp from ours (the inv_freq check bounds that); the angle
      // then moves by p * that difference (plus one angle ulp in float32), and cos/sin with it.
      const double inv_delta = std::fabs(table.inv_freq[i] - golden_inv[i]);
      const double drift32 =
          inv_delta == 0 ? 0 : s * (p * inv_delta + std::fabs(std::nextafter(angle, 1e30f) - angle));
      const double drift64 = s * p * inv_delta;
      expect_close(cos32[i], std::cos(angle) * s32, 1e-6, 2e-7 + drift32, "cos_fp32 " + where);
      expect_close(sin32[i], std::sin(angle) * s32, 1e-6, 2e-7 + drift32, "sin_fp32 " + where);
      // Exact: double product of the float32 inv_freq, double cos/sin.
      const double exact = static_cast<double>(p) * table.inv_freq[i];
      expect_close(cos64[i], std::cos(exact) * s, 1e-9, 1e-12 + drift64, "cos_exact " + where);
      expect_close(sin64[i], std::sin(exact) * s, 1e-9, 1e-12 + drift64, "sin_exact " + where);
    }
  }
}

std::vector<std::string> golden_keys() {
  std::vector<std::string> keys;
  for (auto it = golden().begin(); it != golden().end(); ++it) keys.push_back(it.key());
  return keys;
}

INSTANTIATE_TEST_SUITE_P(Conformance, GoldenModel, ::testing::ValuesIn(golden_keys()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(Freqs, GoldenCoversEveryModel) {
  EXPECT_GE(golden().size(), 13u);
  for (auto it = golden().begin(); it != golden().end(); ++it)
    EXPECT_TRUE(models().contains(it.key())) << it.key();
}

// ---------------------------------------------------------------- docs/rope-math.md check values

TEST(Freqs, QwenYarnCheckValues) {
  Spec spec = make_spec(128, 1e6, 131072);
  spec.rope.type = RopeType::yarn;
  spec.rope.factor = 4.0;
  spec.rope.original_max_position_embeddings = 32768;
  const FreqTable t = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_EQ(*t.yarn_low, 23);
  EXPECT_EQ(*t.yarn_high, 40);
  EXPECT_NEAR(t.attention_factor, 1.13863, 5e-6);
  EXPECT_FALSE(t.yarn_attention_softmax_scale.has_value());
  // Below low the pair is pure extrapolation (default), above high pure interpolation (/f).
  const FreqTable plain = compute_freqs(make_spec(128, 1e6, 131072), FreqMode::hf_fp32);
  EXPECT_EQ(t.inv_freq[5], plain.inv_freq[5]);
  EXPECT_NEAR(t.inv_freq[60], plain.inv_freq[60] / 4, 1e-6 * plain.inv_freq[60]);
  EXPECT_LT(t.inv_freq[30], plain.inv_freq[30]);
  EXPECT_GT(t.inv_freq[30], plain.inv_freq[30] / 4);
}

TEST(Freqs, DeepSeekV3YarnCheckValues) {
  Spec spec = make_spec(64, 1e4, 163840);
  spec.rope.type = RopeType::yarn;
  spec.rope.factor = 40.0;
  spec.rope.original_max_position_embeddings = 4096;
  spec.rope.mscale = 1.0;
  spec.rope.mscale_all_dim = 1.0;
  spec.rope.beta_fast = 32;
  spec.rope.beta_slow = 1;
  const FreqTable t = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_EQ(*t.yarn_low, 10);
  EXPECT_EQ(*t.yarn_high, 23);
  EXPECT_DOUBLE_EQ(t.attention_factor, 1.0);
  ASSERT_TRUE(t.yarn_attention_softmax_scale.has_value());
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(*t.yarn_attention_softmax_scale, m * m, 1e-12);
  // mscale 0.707 against mscale_all_dim 1 gives their ratio.
  spec.rope.mscale = 0.707;
  EXPECT_NEAR(compute_freqs(spec, FreqMode::hf_fp32).attention_factor,
              (0.1 * 0.707 * std::log(40.0) + 1) / m, 1e-12);
}

TEST(Freqs, GptOssYarnWithoutTruncate) {
  Spec spec = make_spec(64, 1.5e5, 131072);
  spec.rope.type = RopeType::yarn;
  spec.rope.factor = 32.0;
  spec.rope.original_max_position_embeddings = 4096;
  spec.rope.truncate = false;
  const FreqTable t = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_NEAR(*t.yarn_low, 8.0928, 5e-5);
  EXPECT_NEAR(*t.yarn_high, 17.3980, 5e-5);
  EXPECT_NEAR(t.attention_factor, 0.1 * std::log(32.0) + 1, 1e-12);
  spec.rope.truncate = true;
  const FreqTable truncated = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_EQ(*truncated.yarn_low, 8);
  EXPECT_EQ(*truncated.yarn_high, 18);
  EXPECT_NE(truncated.inv_freq[12], t.inv_freq[12]);
}

TEST(Freqs, YarnDefaultsAndExplicitFactor) {
  Spec spec = make_spec(128, 1e6, 131072);
  spec.rope.type = RopeType::yarn;
  spec.rope.factor = 4.0;
  spec.rope.original_max_position_embeddings = 32768;
  const FreqTable defaults = compute_freqs(spec, FreqMode::hf_fp32);
  spec.rope.beta_fast = 0.0;  // zero means the default, as in HF (`x or 32`)
  spec.rope.beta_slow = 0.0;
  const FreqTable zeros = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_EQ(zeros.inv_freq, defaults.inv_freq);
  spec.rope.beta_fast = 64.0;
  EXPECT_LT(*compute_freqs(spec, FreqMode::hf_fp32).yarn_low, *defaults.yarn_low);
  const double explicit_s = uniform(0.5, 2.0);
  spec.rope.attention_factor = explicit_s;
  EXPECT_EQ(compute_freqs(spec, FreqMode::hf_fp32).attention_factor, explicit_s);
  // Missing O falls back to M; missing factor is M / O.
  Spec no_o = make_spec(128, 1e6, 32768);
  no_o.rope.type = RopeType::yarn;
  no_o.rope.factor = 4.0;
  const FreqTable t = compute_freqs(no_o, FreqMode::hf_fp32);
  EXPECT_EQ(t.inv_freq, defaults.inv_freq);
  Spec no_factor = make_spec(128, 1e6, 131072);
  no_factor.rope.type = RopeType::yarn;
  no_factor.rope.original_max_position_embeddings = 32768;
  EXPECT_EQ(compute_freqs(no_factor, FreqMode::hf_fp32).inv_freq, defaults.inv_freq);
}

TEST(Freqs, YarnEqualBoundsGetAStep) {
  // beta_fast == beta_slow without truncation: low == high, HF widens by 0.001, so the ramp is
  // a step: pairs at or below low keep default RoPE, pairs above are divided by f.
  Spec spec = make_spec(64, 1e4, 4096);
  spec.rope.type = RopeType::yarn;
  spec.rope.factor = uniform(2, 16);
  spec.rope.original_max_position_embeddings = 4096;
  spec.rope.truncate = false;
  spec.rope.beta_fast = 8.0;
  spec.rope.beta_slow = 8.0;
  const FreqTable t = compute_freqs(spec, FreqMode::hf_fp32);
  const double corr = 64 * std::log(4096 / (8 * 2 * kPi)) / (2 * std::log(1e4));  // 15.29
  EXPECT_NEAR(*t.yarn_low, corr, 1e-12);
  EXPECT_EQ(*t.yarn_low, *t.yarn_high);
  Spec linear = make_spec(64, 1e4, 4096);
  linear.rope.type = RopeType::linear;
  linear.rope.factor = spec.rope.factor;
  const FreqTable plain = compute_freqs(make_spec(64, 1e4, 4096), FreqMode::hf_fp32);
  const FreqTable divided = compute_freqs(linear, FreqMode::hf_fp32);
  for (int i = 0; i < 32; ++i) {
    if (i <= 15) EXPECT_EQ(t.inv_freq[i], plain.inv_freq[i]) << i;
    else expect_close(divided.inv_freq[i], t.inv_freq[i], 2e-7, 0, "pair " + std::to_string(i));
  }
}

TEST(Freqs, YarnClampPastEndInterpolatesAll) {
  // A huge O pushes low past d - 1 while high is clamped to d - 1: low > high, and HF's ramp
  // (i - low) / (high - low) is >= 1 everywhere, so every pair is interpolated (divided by f).
  Spec spec = make_spec(8, 1e4, 1000);
  spec.rope.type = RopeType::yarn;
  spec.rope.factor = uniform(2, 16);
  spec.rope.original_max_position_embeddings = int64_t(1) << 50;
  const FreqTable t = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_EQ(*t.yarn_low, 12);
  EXPECT_EQ(*t.yarn_high, 7);
  const FreqTable plain = compute_freqs(make_spec(8, 1e4, 1000), FreqMode::hf_fp32);
  for (int i = 0; i < 4; ++i)
    expect_close(plain.inv_freq[i] / spec.rope.factor.value(), t.inv_freq[i], 2e-7, 0, "pair");
}

TEST(Freqs, Phi35LongropeAttentionFactor) {
  Spec spec = make_spec(96, 1e4, 131072);
  spec.rope.type = RopeType::longrope;
  spec.rope.original_max_position_embeddings = 4096;
  for (int i = 0; i < 48; ++i) {
    spec.rope.short_factor.push_back(uniform(1.0, 2.0));
    spec.rope.long_factor.push_back(uniform(1.0, 60.0));
  }
  const FreqTable t = compute_freqs(spec, FreqMode::hf_fp32);
  EXPECT_NEAR(t.attention_factor, 1.190238, 5e-7);
  const FreqTable plain = compute_freqs(make_spec(96, 1e4, 131072), FreqMode::float64);
  for (int i = 0; i < 48; ++i) {
    expect_close(plain.inv_freq[i] / spec.rope.short_factor[i], t.inv_freq[i], 1e-6, 0, "short");
    expect_close(plain.inv_freq[i] / spec.rope.long_factor[i], t.inv_freq_long[i], 1e-6, 0, "long");
  }
  spec.rope.factor = 1.0;  // explicit factor <= 1: no scaling
  EXPECT_EQ(compute_freqs(spec, FreqMode::hf_fp32).attention_factor, 1.0);
  spec.rope.attention_factor = 1.25;
  EXPECT_EQ(compute_freqs(spec, FreqMode::hf_fp32).attention_factor, 1.25);
  spec.rope.long_factor.pop_back();
  EXPECT_THROW(compute_freqs(spec, FreqMode::hf_fp32), Error);
}

TEST(Freqs, LongropeSwitchesAboveOriginal) {
  Spec spec = make_spec(96, 1e4, 131072);
  spec.rope.type = RopeType::longrope;
  const int64_t original = 1024 + static_cast<int64_t>(uniform(0, 8192));
  spec.rope.original_max_position_embeddings = original;
  EXPECT_FALSE(longrope_uses_long(spec, 1));
  EXPECT_FALSE(longrope_uses_long(spec, original));
  EXPECT_TRUE(longrope_uses_long(spec, original + 1));
  EXPECT_TRUE(longrope_uses_long(spec, 1000000));
}

TEST(Freqs, Llama3Counts) {
  Spec spec = llama3_spec(128, 131072, 8.0, 1.0, 4.0);
  for (FreqMode mode : {FreqMode::hf_fp32, FreqMode::float64}) {
    const FreqTable t = compute_freqs(spec, mode);
    ASSERT_TRUE(t.llama3_counts.has_value());
    EXPECT_EQ(*t.llama3_counts, (std::array<int, 3>{29, 6, 29}));
    const FreqTable plain = compute_freqs(make_spec(128, 5e5, 131072), mode);
    EXPECT_EQ(t.inv_freq[0], plain.inv_freq[0]);
    expect_close(plain.inv_freq[63] / 8, t.inv_freq[63], 1e-7, 0, "divided");
    for (int i = 29; i < 35; ++i) {  // smoothed pairs lie strictly between
      EXPECT_LT(t.inv_freq[i], plain.inv_freq[i]);
      EXPECT_GT(t.inv_freq[i], plain.inv_freq[i] / 8);
    }
  }
  spec = llama3_spec(64, 131072, 32.0, 1.0, 4.0);
  EXPECT_EQ(*compute_freqs(spec, FreqMode::hf_fp32).llama3_counts, (std::array<int, 3>{15, 3, 14}));
}

// Llama 4: low_freq_factor == high_freq_factor leaves the smooth band empty (HF only warns).
TEST(Freqs, Llama3EqualFactorsHaveNoSmoothBand) {
  const Spec spec = llama3_spec(128, 10485760, 16.0, 1.0, 1.0);
  for (FreqMode mode : {FreqMode::hf_fp32, FreqMode::float64}) {
    const FreqTable t = compute_freqs(spec, mode);
    const FreqTable plain = compute_freqs(make_spec(128, 5e5, 10485760), mode);
    ASSERT_TRUE(t.llama3_counts.has_value());
    EXPECT_EQ((*t.llama3_counts)[1], 0);
    EXPECT_EQ((*t.llama3_counts)[0] + (*t.llama3_counts)[2], 64);
    const ref::RefFreqs r = ref::reference_freqs(spec, 1, mode == FreqMode::hf_fp32);
    for (int i = 0; i < 64; ++i) {
      ASSERT_TRUE(std::isfinite(t.inv_freq[i])) << i;
      const bool low_frequency = 2 * kPi / plain.inv_freq[i] > 8192;
      expect_close(low_frequency ? plain.inv_freq[i] / 16 : plain.inv_freq[i], t.inv_freq[i], 1e-7, 0,
                   "pair " + std::to_string(i));
      expect_close(r.inv_freq[i], t.inv_freq[i], 1e-15, 0, "reference pair " + std::to_string(i));
    }
  }
  // A wavelength exactly on the one edge O/lf = O/hf: kept, no 0/0 (HF's smooth formula is NaN).
  Spec edge = make_spec(2, 1e4, 1 << 20);  // one pair, inv_freq 1, wavelength float32(2 pi)
  edge.rope.type = RopeType::llama3;
  edge.rope.factor = 4.0;
  edge.rope.low_freq_factor = edge.rope.high_freq_factor =
      8192.0 / static_cast<double>(static_cast<float>(2 * kPi));
  edge.rope.original_max_position_embeddings = 8192;
  const FreqTable t = compute_freqs(edge, FreqMode::hf_fp32);
  EXPECT_EQ(t.inv_freq[0], 1.0);
  EXPECT_EQ(*t.llama3_counts, (std::array<int, 3>{1, 0, 0}));
  EXPECT_EQ(ref::reference_freqs(edge, 1, true).inv_freq[0], 1.0);
}

// ---------------------------------------------------------------- dynamic, ntk, linear

TEST(Freqs, DynamicAtOrBelowMaxIsDefault) {
  const double theta = uniform(1e3, 1e6);
  Spec spec = make_spec(128, theta, 4096);
  spec.rope.type = RopeType::dynamic;
  spec.rope.factor = uniform(1.5, 8);
  const FreqTable plain = compute_freqs(make_spec(128, theta, 4096), FreqMode::hf_fp32);
  EXPECT_EQ(compute_freqs(spec, FreqMode::hf_fp32).inv_freq, plain.inv_freq);
  for (int64_t length : {int64_t(1), int64_t(100), int64_t(4096)}) {
    EXPECT_EQ(dynamic_ntk_base(spec, length), theta);
    EXPECT_EQ(compute_freqs_dynamic(spec, length, FreqMode::hf_fp32).inv_freq, plain.inv_freq);
  }
}

TEST(Freqs, DynamicLongerLengthByHand) {
  // d = 4: the exponent d/(d-2) is 2. b = 1e4, f = 2, M = 1000, L = 2000:
  // b' = 1e4 * (2*2000/1000 - 1)^2 = 9e4, so inv_freq = {1, 1/sqrt(9e4) = 1/300}.
  Spec spec = make_spec(4, 1e4, 1000);
  spec.rope.type = RopeType::dynamic;
  spec.rope.factor = 2.0;
  EXPECT_NEAR(dynamic_ntk_base(spec, 2000), 9e4, 1e-9);
  const FreqTable t = compute_freqs_dynamic(spec, 2000, FreqMode::float64);
  EXPECT_EQ(t.inv_freq[0], 1.0);
  EXPECT_NEAR(t.inv_freq[1], 1.0 / 300, 1e-15);
  EXPECT_NEAR(compute_freqs_dynamic(spec, 2000, FreqMode::hf_fp32).inv_freq[1], 1.0 / 300, 1e-9);
  // A spec that fixes seq_len bakes that length's table.
  spec.rope.seq_len = 2000;
  EXPECT_EQ(compute_freqs(spec, FreqMode::float64).inv_freq, t.inv_freq);
  // d = 128 against the formula written out.
  Spec big = make_spec(128, 1e4, 4096);
  big.rope.type = RopeType::dynamic;
  big.rope.factor = 4.0;
  const double expected = 1e4 * std::pow(4.0 * 10000 / 4096 - 3, 128.0 / 126);
  EXPECT_NEAR(dynamic_ntk_base(big, 10000), expected, 1e-9 * expected);
  const FreqTable tb = compute_freqs_dynamic(big, 10000, FreqMode::float64);
  EXPECT_NEAR(tb.inv_freq[10], 1 / std::pow(expected, 20.0 / 128), 1e-15);
}

TEST(Freqs, NtkAlpha) {
  // d = 4, alpha = 4: b' = b * 4^2 = 16 b; inv_freq[1] = 1 / sqrt(16 b).
  const double theta = uniform(1e3, 1e5);
  Spec spec = make_spec(4, theta, 2048);
  spec.rope.type = RopeType::ntk;
  spec.rope.alpha = 4.0;
  const FreqTable t = compute_freqs(spec, FreqMode::float64);
  EXPECT_EQ(t.inv_freq[0], 1.0);
  EXPECT_NEAR(t.inv_freq[1], 1 / std::sqrt(16 * theta), 1e-15);
  EXPECT_EQ(t.attention_factor, 1.0);
  const double alpha = uniform(1.5, 8);
  Spec wide = make_spec(128, theta, 2048);
  wide.rope.type = RopeType::ntk;
  wide.rope.alpha = alpha;
  const double base = theta * std::pow(alpha, 128.0 / 126);
  const FreqTable tw = compute_freqs(wide, FreqMode::float64);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(tw.inv_freq[i], std::pow(base, -i / 64.0), 1e-14);
}

TEST(Freqs, LinearDividesByFactor) {
  const double theta = uniform(1e3, 1e6);
  const double factor = uniform(1.5, 16);
  Spec spec = make_spec(128, theta, 8192);
  spec.rope.type = RopeType::linear;
  spec.rope.factor = factor;
  for (FreqMode mode : {FreqMode::hf_fp32, FreqMode::float64}) {
    const FreqTable plain = compute_freqs(make_spec(128, theta, 8192), mode);
    const FreqTable t = compute_freqs(spec, mode);
    for (int i = 0; i < 64; ++i) {
      const double expected = mode == FreqMode::hf_fp32
                                  ? double(float(plain.inv_freq[i]) / float(factor))
                                  : plain.inv_freq[i] / factor;
      EXPECT_EQ(t.inv_freq[i], expected) << i;
    }
  }
}

TEST(Freqs, DefaultFloat64ByFormula) {
  const double theta = uniform(1e3, 1e6);
  const FreqTable t = compute_freqs(make_spec(64, theta, 4096), FreqMode::float64);
  ASSERT_EQ(t.inv_freq.size(), 32u);
  for (int i = 0; i < 32; ++i)
    EXPECT_NEAR(t.inv_freq[i], 1 / std::pow(theta, 2.0 * i / 64), 1e-15);
  EXPECT_THROW(compute_freqs(make_spec(0, theta, 4096), FreqMode::float64), Error);
}

TEST(Freqs, Float64AgreesWithHfFp32) {
  // Every rope type with fresh random parameters: the modes differ by float32 rounding only.
  std::vector<Spec> specs;
  const double theta = uniform(1e3, 1e6);
  for (RopeType type : {RopeType::default_, RopeType::linear, RopeType::ntk, RopeType::dynamic,
                        RopeType::yarn, RopeType::longrope, RopeType::llama3}) {
    Spec spec = make_spec(128, theta, 131072);
    spec.rope.type = type;
    spec.rope.factor = uniform(2, 32);
    spec.rope.alpha = uniform(2, 8);
    spec.rope.seq_len = 200000;
    spec.rope.original_max_position_embeddings = 8192;
    spec.rope.low_freq_factor = 1.0;
    spec.rope.high_freq_factor = 4.0;
    for (int i = 0; i < 64; ++i) {
      spec.rope.short_factor.push_back(uniform(1, 2));
      spec.rope.long_factor.push_back(uniform(1, 50));
    }
    specs.push_back(spec);
  }
  for (const Spec& spec : specs) {
    SCOPED_TRACE(std::string(to_string(spec.rope.type)));
    const FreqTable f32 = compute_freqs(spec, FreqMode::hf_fp32);
    const FreqTable f64 = compute_freqs(spec, FreqMode::float64);
    EXPECT_EQ(f32.attention_factor, f64.attention_factor);
    ASSERT_EQ(f32.inv_freq.size(), f64.inv_freq.size());
    for (size_t i = 0; i < f64.inv_freq.size(); ++i)
      expect_close(f64.inv_freq[i], f32.inv_freq[i], 2e-6, 0, "inv_freq " + std::to_string(i));
    for (size_t i = 0; i < f64.inv_freq_long.size(); ++i)
      expect_close(f64.inv_freq_long[i], f32.inv_freq_long[i], 2e-6, 0, "long");
    // hf_fp32 values are float32 numbers widened.
    for (double v : f32.inv_freq) EXPECT_EQ(v, double(float(v)));
  }
}

// ---------------------------------------------------------------- CLI

/// Runs a command line, returns its stdout (and the exit status through `status`).
std::string run_command(const std::string& command, int& status) {
  auto [exit_status, out] = test::run_command(command);
  status = exit_status;
  return out;
}

TEST(FreqsCli, DynamicJsonMatchesLibrary) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "ropejit CLI not built";
  const double factor = uniform(1.5, 8);
  const int64_t length = 4096 + static_cast<int64_t>(uniform(1, 100000));
  const std::string path = ::testing::TempDir() + "freqs_cli_" + std::to_string(getpid()) + ".json";
  {
    json spec = {{"name", "cli-dynamic"}, {"head_dim", 64}, {"num_q_heads", 8},
                 {"num_kv_heads", 8}, {"layout", "neox"}, {"dtype", "bf16"},
                 {"max_position_embeddings", 4096},
                 {"rope", {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", factor}}}};
    std::ofstream(path) << spec.dump();
  }
  int status = -1;
  const std::string out = run_command(
      cli + " freqs " + path + " --json --mode float64 --length " + std::to_string(length), status);
  ASSERT_EQ(status, 0) << out;
  const json report = json::parse(out);
  Spec spec = make_spec(64, 1e4, 4096);
  spec.rope.type = RopeType::dynamic;
  spec.rope.factor = factor;
  const FreqTable expected = compute_freqs_dynamic(spec, length, FreqMode::float64);
  EXPECT_EQ(report.at("rope_type"), "dynamic");
  EXPECT_EQ(report.at("mode"), "float64");
  EXPECT_EQ(report.at("dynamic_base").get<double>(), dynamic_ntk_base(spec, length));
  ASSERT_EQ(report.at("pairs").size(), 32u);
  for (size_t i = 0; i < 32; ++i) {
    EXPECT_EQ(report["pairs"][i].at("index").get<size_t>(), i);
    EXPECT_EQ(report["pairs"][i].at("inv_freq").get<double>(), expected.inv_freq[i]);
    EXPECT_NEAR(report["pairs"][i].at("wavelength").get<double>(),
                2 * kPi / expected.inv_freq[i], 1e-12 * 2 * kPi / expected.inv_freq[i]);
  }
  run_command(cli + " freqs " + path + " --mode fp16 2>&1", status);
  EXPECT_NE(status, 0);
  std::remove(path.c_str());
}

TEST(Freqs, ModeNames) {
  EXPECT_EQ(to_string(FreqMode::hf_fp32), "hf_fp32");
  EXPECT_EQ(enum_from_string<FreqMode>("float64"), FreqMode::float64);
  EXPECT_FALSE(enum_from_string<FreqMode>("fp16").has_value());
  EXPECT_EQ(allowed_names<FreqMode>(), "hf_fp32 | float64");
}

}  // namespace
}  // namespace ropejit
