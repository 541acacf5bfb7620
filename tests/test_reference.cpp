// Tests of the float64 reference itself (check/include/ropejit/check/reference.h, fp_convert.h): storage
// conversions, frequencies and angles vs HF golden data, and the rotation/scatter on small
// hand-checked problems.
// ropejit-tier: unit
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "ropejit/fp_convert.h"
#include "ropejit/check/reference.h"
#include "support/ref_test_util.h"
#include "support/repo_paths.h"

using namespace ropejit;
using namespace ropejit::ref;
using nlohmann::json;
using namespace ropejit::ref::test_util;

namespace {

// ---------------------------------------------------------------- helpers

json read_json(const std::string& name) {
  std::ifstream in(ropejit::test::data_path("conformance/" + name));
  if (!in) throw std::runtime_error("cannot read conformance/" + name);
  return json::parse(in);
}

/// A Spec from one models.json entry (HF config spelling), filled by hand: no HF import.
Spec spec_from_model(const json& entry) {
  const json& c = entry.at("config");
  Spec s;
  s.num_q_heads = c.contains("num_attention_heads") ? c["num_attention_heads"].get<int>() : c.at("n_head").get<int>();
  s.num_kv_heads = c.value("num_key_value_heads", s.num_q_heads);
  s.head_dim = c.contains("head_dim") ? c["head_dim"].get<int>() : c.at("hidden_size").get<int>() / s.num_q_heads;
  const double partial = c.contains("partial_rotary_factor") ? c["partial_rotary_factor"].get<double>()
                                                             : c.value("rotary_pct", 1.0);
  s.rotary_dim = c.contains("rotary_dim") ? c["rotary_dim"].get<int>() : static_cast<int>(s.head_dim * partial);
  s.layout = entry.at("layout") == "interleaved" ? Layout::interleaved : Layout::neox;
  s.max_position_embeddings = c.at("max_position_embeddings").get<int64_t>();
  s.rope.theta = c.value("rope_theta", c.value("rotary_emb_base", 10000.0));
  const json rs = c.value("rope_scaling", json());
  if (rs.is_object()) {
    s.rope.type = *enum_from_string<RopeType>(rs.value("rope_type", rs.value("type", std::string("default"))));
    auto opt = [&](const char* key, std::optional<double>& field) {
      if (rs.contains(key) && !rs[key].is_null()) field = rs[key].get<double>();
    };
    opt("factor", s.rope.factor);
    opt("low_freq_factor", s.rope.low_freq_factor);
    opt("high_freq_factor", s.rope.high_freq_factor);
    opt("beta_fast", s.rope.beta_fast);
    opt("beta_slow", s.rope.beta_slow);
    opt("mscale", s.rope.mscale);
    opt("mscale_all_dim", s.rope.mscale_all_dim);
    opt("attention_factor", s.rope.attention_factor);
    if (rs.contains("truncate")) s.rope.truncate = rs["truncate"].get<bool>();
    if (rs.contains("original_max_position_embeddings"))
      s.rope.original_max_position_embeddings = rs["original_max_position_embeddings"].get<int64_t>();
    s.rope.short_factor = rs.value("short_factor", std::vector<double>{});
    s.rope.long_factor = rs.value("long_factor", std::vector<double>{});
  }
  if (c.contains("original_max_position_embeddings"))  // Phi-3's top-level O wins
    s.rope.original_max_position_embeddings = c["original_max_position_embeddings"].get<int64_t>();
  return s;
}

/// float32 inv_freq of the default table, evaluated independently (float operations).
double default_inv_freq_f32(double theta, int d, int i) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(d);
  const float power = static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)), exponent));
  return static_cast<double>(1.0f / power);
}

// ---------------------------------------------------------------- golden


struct GoldenCase {
  std::string name;
  Spec spec;
  json golden;
};

std::vector<GoldenCase> golden_cases() {
  const json models = read_json("models.json"), golden = read_json("hf_golden.json");
  std::vector<GoldenCase> cases;
  for (const auto& [name, entry] : golden.items()) cases.push_back({name, spec_from_model(models.at(name)), entry});
  return cases;
}

/// Run length that keeps longrope on its short table (the golden samples use it throughout).
int64_t short_run_length(const Spec& spec) { return spec.rope.original_max_position_embeddings.value_or(1); }

TEST(ReferenceGolden, FrequencyTablesMatchHf) {
  const auto cases = golden_cases();
  ASSERT_GE(cases.size(), 10u);
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.spec.rotary_dim, c.golden.at("rotary_dim").get<int>());
    const RefFreqs f32 = reference_freqs(c.spec, short_run_length(c.spec), true);
    const RefFreqs f64 = reference_freqs(c.spec, short_run_length(c.spec), false);
    EXPECT_NEAR(f32.attention_factor, c.golden.at("attention_factor").get<double>(), 1e-12);
    const auto check_table = [&](const std::vector<double>& mine, const std::vector<double>& mine64, const json& hf) {
      ASSERT_EQ(mine.size(), hf.size());
      int bit_exact = 0;
      for (size_t i = 0; i < mine.size(); ++i) {
        const double want = hf[i].get<double>();
        EXPECT_NEAR(mine[i], want, 2 * kFloatUlp * want) << "pair " << i;
        EXPECT_NEAR(mine64[i], want, 8 * kFloatUlp * want) << "float64 pair " << i;
        EXPECT_EQ(mine[i], static_cast<double>(static_cast<float>(mine[i])));  // a float32 value
        bit_exact += mine[i] == want;
      }
      // Correctly rounded pow vs torch's float32 pow: nearly every value agrees to the bit.
      EXPECT_GE(bit_exact, static_cast<int>(mine.size()) - 2);
    };
    check_table(f32.inv_freq, f64.inv_freq, c.golden.at("inv_freq"));
    if (c.golden.contains("inv_freq_long")) {
      const int64_t long_run = *c.spec.rope.original_max_position_embeddings + 1;
      const RefFreqs long32 = reference_freqs(c.spec, long_run, true);
      const RefFreqs long64 = reference_freqs(c.spec, long_run, false);
      EXPECT_TRUE(long32.longrope_long);
      check_table(long32.inv_freq, long64.inv_freq, c.golden.at("inv_freq_long"));
    }
    if (c.golden.contains("low")) {
      EXPECT_EQ(*f32.yarn_low, c.golden["low"].get<double>());
      EXPECT_EQ(*f32.yarn_high, c.golden["high"].get<double>());
    }
    if (c.golden.contains("counts")) {  // llama3: unchanged / smoothed / divided
      int counts[3] = {0, 0, 0};
      const double factor = *c.spec.rope.factor;
      for (int i = 0; i < c.spec.rotary_dim / 2; ++i) {
        const double plain = default_inv_freq_f32(c.spec.rope.theta, c.spec.rotary_dim, i);
        const double v = f32.inv_freq[i];
        counts[v == plain ? 0 : v == static_cast<double>(static_cast<float>(plain / factor)) ? 2 : 1]++;
      }
      EXPECT_EQ(counts[0], c.golden["counts"][0].get<int>());
      EXPECT_EQ(counts[1], c.golden["counts"][1].get<int>());
      EXPECT_EQ(counts[2], c.golden["counts"][2].get<int>());
    }
  }
}

/// Rotates the unit vector (1, 0) of every pair at every sample position through
/// reference_outputs and compares with HF's cos and sin (times the attention factor).
void check_samples(AnglePrecision angle) {
  for (const GoldenCase& c : golden_cases()) {
    SCOPED_TRACE(c.name);
    Spec spec = c.spec;
    spec.dtype = DType::fp32;
    spec.angle = angle;
    spec.num_q_heads = spec.num_kv_heads = 1;
    const json& samples = c.golden.at("samples");
    const int64_t T = static_cast<int64_t>(samples.size());
    const int d = spec.rotary_dim, D = spec.head_dim;
    std::vector<double> unit(static_cast<size_t>(T * D), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int i = 0; i < d / 2; ++i) unit[t * D + pair_elements(spec.layout, d, i).first] = 1.0;
    const std::vector<uint8_t> bytes = encode_values(DType::fp32, unit);
    RefProblem problem;
    problem.num_tokens = T;
    problem.q.data = problem.k.data = bytes.data();
    for (const json& s : samples) problem.positions.push_back(s.at("position").get<int64_t>());
    problem.run_length = short_run_length(spec);
    const RefOutputs out = reference_outputs(spec, problem);
    const double s = out.freqs.attention_factor;
    const std::vector<double> hf_inv_freq = c.golden.at("inv_freq").get<std::vector<double>>();
    const char* cos_key = angle == AnglePrecision::fp32 ? "cos_fp32" : "cos_exact";
    const char* sin_key = angle == AnglePrecision::fp32 ? "sin_fp32" : "sin_exact";
    const double tol = angle == AnglePrecision::fp32 ? 2 * kFloatUlp * s : 1e-12;
    int tight_pairs = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t p = problem.positions[t];
      for (int i = 0; i < d / 2; ++i) {
        const auto [a, b] = pair_elements(spec.layout, d, i);
        // torch's float32 pow is not correctly rounded: where our inv_freq differs from HF's
        // by an ulp, the angle moves by p ulps of inv_freq (plus an ulp of a float32 angle).
        const bool same_inv_freq = out.freqs.inv_freq[i] == hf_inv_freq[i];
        tight_pairs += same_inv_freq;
        const double theta = reference_angle(angle, p, out.freqs.inv_freq[i]);
        const double slack = (p * kFloatUlp * out.freqs.inv_freq[i] + theta * kFloatUlp) * s;
        const double bound = same_inv_freq ? tol : tol + slack;
        const double want_cos = samples[t].at(cos_key)[i].get<double>();
        const double want_sin = samples[t].at(sin_key)[i].get<double>();
        EXPECT_NEAR(out.tensors[0].value[t * D + a], want_cos, bound) << "position " << p << " pair " << i;
        EXPECT_NEAR(out.tensors[0].value[t * D + b], want_sin, bound) << "position " << p << " pair " << i;
        EXPECT_EQ(out.tensors[1].value[t * D + a], out.tensors[0].value[t * D + a]);  // k rotates like q
      }
    }
    EXPECT_GE(tight_pairs, (T * d / 2) * 9 / 10);
  }
}

TEST(ReferenceGolden, Fp32AngleSamplesMatchHf) { check_samples(AnglePrecision::fp32); }
TEST(ReferenceGolden, ExactAngleSamplesMatchHf) { check_samples(AnglePrecision::exact); }

// ---------------------------------------------------------------- rotation and scatter

/// Rotates one biased head row by hand (default rope, pairs indexed here, not via the library).
std::vector<double> rotate_by_hand(const Spec& spec, int64_t position, std::vector<double> row) {
  const int d = spec.rotary_dim;
  for (int i = 0; i < d / 2; ++i) {
    const double inv = default_inv_freq_f32(spec.rope.theta, d, i);
    const double theta = spec.angle == AnglePrecision::exact
                             ? position * inv
                             : static_cast<double>(static_cast<float>(position) * static_cast<float>(inv));
    const int a = spec.layout == Layout::neox ? i : 2 * i;
    const int b = spec.layout == Layout::neox ? i + d / 2 : 2 * i + 1;
    const double x = row[a], y = row[b];
    row[a] = x * std::cos(theta) - y * std::sin(theta);
    row[b] = y * std::cos(theta) + x * std::sin(theta);
  }
  return row;
}


void expect_row(const RefTensor& t, int64_t first_index, const std::vector<double>& want, double tol) {
  for (size_t e = 0; e < want.size(); ++e)
    EXPECT_NEAR(t.value[first_index + e], want[e], tol) << t.name << " index " << first_index + e;
}

TEST(ReferenceRotation, NeoxAndInterleavedPairing) {
  for (Layout layout : {Layout::neox, Layout::interleaved}) {
    for (AnglePrecision angle : {AnglePrecision::exact, AnglePrecision::fp32}) {
      Spec spec = small_spec(8, 8, 1, 1, layout, DType::fp32);
      spec.angle = angle;
      const Inputs in(spec, 2);
      RefProblem problem = in.problem(spec, 2);
      problem.positions = {3, 70001};
      const RefOutputs out = reference_outputs(spec, problem);
      ASSERT_EQ(out.tensors.size(), 3u);  // in place, v given: v expected unchanged
      for (int64_t t = 0; t < 2; ++t) {
        expect_row(out.tensors[0], t * 8, rotate_by_hand(spec, problem.positions[t], in.row(spec, 0, t, 0, false)), 1e-12);
        expect_row(out.tensors[1], t * 8, rotate_by_hand(spec, problem.positions[t], in.row(spec, 1, t, 0, false)), 1e-12);
        expect_row(out.tensors[2], t * 8, in.row(spec, 2, t, 0, false), 0.0);
      }
    }
  }
  // The two pairings give different results on the same input.
  const Inputs in(small_spec(8, 8, 1, 1, Layout::neox, DType::fp32), 1);
  Spec neox = small_spec(8, 8, 1, 1, Layout::neox, DType::fp32), inter = neox;
  inter.layout = Layout::interleaved;
  RefProblem problem = in.problem(neox, 1);
  problem.positions = {5};
  EXPECT_NE(reference_outputs(neox, problem).tensors[0].value, reference_outputs(inter, problem).tensors[0].value);
}

TEST(ReferenceRotation, PartialRotaryBiasAndVCopy) {
  Spec spec = small_spec(10, 4, 2, 1, Layout::neox, DType::bf16);
  spec.io.qkv_bias = true;
  spec.io.copy_v = true;
  spec.io.output = OutputForm::separate;
  const Inputs in(spec, 3);
  RefProblem problem = in.problem(spec, 3);
  problem.positions = {0, 17, 4095};
  const RefOutputs out = reference_outputs(spec, problem);
  ASSERT_EQ(out.tensors.size(), 3u);
  for (int64_t t = 0; t < 3; ++t) {
    for (int64_t h = 0; h < 2; ++h) {
      const std::vector<double> biased = in.row(spec, 0, t, h, true);
      const std::vector<double> want = rotate_by_hand(spec, problem.positions[t], biased);
      expect_row(out.tensors[0], (t * 2 + h) * 10, want, 1e-12);
      for (int e = 4; e < 10; ++e) {  // pass-through: exactly the biased input
        EXPECT_EQ(out.tensors[0].value[(t * 2 + h) * 10 + e], biased[e]);
        EXPECT_EQ(out.tensors[0].scale[(t * 2 + h) * 10 + e], std::fabs(biased[e]));
      }
      EXPECT_NEAR(out.tensors[0].scale[(t * 2 + h) * 10], std::hypot(biased[0], biased[2]), 1e-12);
    }
    expect_row(out.tensors[1], t * 10, rotate_by_hand(spec, problem.positions[t], in.row(spec, 1, t, 0, true)), 1e-12);
    expect_row(out.tensors[2], t * 10, in.row(spec, 2, t, 0, true), 0.0);  // v: bias, never rotated
  }
}

TEST(ReferenceRotation, GqaHeadsShareTheTokenAngle) {
  Spec spec = small_spec(16, 16, 6, 2, Layout::interleaved, DType::fp16);
  spec.io.output = OutputForm::separate;  // copy_v off: no v output
  const Inputs in(spec, 4);
  RefProblem problem = in.problem(spec, 4);
  problem.positions = {9, 1, 300, 2};
  const RefOutputs out = reference_outputs(spec, problem);
  ASSERT_EQ(out.tensors.size(), 2u);
  EXPECT_EQ(out.tensors[0].heads, 6);
  EXPECT_EQ(out.tensors[1].heads, 2);
  EXPECT_EQ(out.tensors[0].size(), 4 * 6 * 16);
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t h = 0; h < 6; ++h)
      expect_row(out.tensors[0], (t * 6 + h) * 16, rotate_by_hand(spec, problem.positions[t], in.row(spec, 0, t, h, false)), 1e-12);
    for (int64_t h = 0; h < 2; ++h)
      expect_row(out.tensors[1], (t * 2 + h) * 16, rotate_by_hand(spec, problem.positions[t], in.row(spec, 1, t, h, false)), 1e-12);
  }
}

TEST(ReferenceRotation, VarlenPositionsWithStartPos) {
  Spec spec = small_spec(8, 8, 2, 1, Layout::neox, DType::fp32);
  spec.io.positions = PositionsForm::varlen;
  const Inputs in(spec, 5);
  RefProblem problem = in.problem(spec, 5);
  problem.cu_seqlens = {0, 3, 5};
  problem.start_pos = {10, 0};
  const RefOutputs out = reference_outputs(spec, problem);
  EXPECT_EQ(out.token_positions, (std::vector<int64_t>{10, 11, 12, 0, 1}));
  EXPECT_EQ(out.run_length, 13);
  for (int64_t t = 0; t < 5; ++t)
    expect_row(out.tensors[1], t * 8, rotate_by_hand(spec, out.token_positions[t], in.row(spec, 1, t, 0, false)), 1e-12);
  problem.start_pos.clear();  // no start positions: every sequence starts at 0
  EXPECT_EQ(reference_outputs(spec, problem).token_positions, (std::vector<int64_t>{0, 1, 2, 0, 1}));
  problem.cu_seqlens = {0, 3, 4};  // does not end at T
  EXPECT_THROW(reference_outputs(spec, problem), std::invalid_argument);
}

TEST(ReferenceRotation, PackedInputPaddedOutputZeroRows) {
  Spec spec = small_spec(8, 6, 2, 1, Layout::interleaved, DType::bf16);
  spec.io.input = InputForm::packed_qkv;
  spec.io.output = OutputForm::padded_bhsd;
  spec.io.positions = PositionsForm::varlen;
  spec.io.qkv_bias = spec.io.copy_v = true;
  const Inputs in(spec, 4);
  // Packed rows [q0 q1 k0 v0] per token, with 8 spare elements of token stride.
  const int64_t width = 4 * 8, stride = width + 8;
  std::vector<double> packed(static_cast<size_t>(4 * stride), 7.0);
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t e = 0; e < 8; ++e) {
      packed[t * stride + e] = in.q[(t * 2) * 8 + e];
      packed[t * stride + 8 + e] = in.q[(t * 2 + 1) * 8 + e];
      packed[t * stride + 16 + e] = in.k[t * 8 + e];
      packed[t * stride + 24 + e] = in.v[t * 8 + e];
    }
  const std::vector<uint8_t> packed_bytes = encode_values(spec.dtype, packed);
  RefProblem problem;
  problem.num_tokens = 4;
  problem.qkv = RefInput{packed_bytes.data(), stride, 0};
  problem.bias = in.bias_bytes.data();
  problem.cu_seqlens = {0, 3, 4};
  problem.start_pos = {0, 100};
  problem.max_seq_len = 5;
  const RefOutputs out = reference_outputs(spec, problem);
  ASSERT_EQ(out.tensors.size(), 3u);
  const RefTensor& q = out.tensors[0];
  EXPECT_EQ(q.layout, RefLayout::padded_bhsd);
  EXPECT_EQ(q.batch, 2);
  EXPECT_EQ(q.rows, 5);
  EXPECT_EQ(q.row_token, (std::vector<int64_t>{0, 1, 2, -1, -1, 3, -1, -1, -1, -1}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t s = 0; s < 5; ++s) {
        const int64_t first = ((b * 2 + h) * 5 + s) * 8;
        const int64_t token = q.row_token[b * 5 + s];
        if (token < 0) {
          for (int e = 0; e < 8; ++e) EXPECT_TRUE(q.padding[first + e] && q.value[first + e] == 0.0);
          continue;
        }
        EXPECT_EQ(q.padding[first], 0);
        expect_row(q, first, rotate_by_hand(spec, out.token_positions[token], in.row(spec, 0, token, h, true)), 1e-12);
      }
  // Token 3 is row 0 of sequence 1 at position 100; v is biased, not rotated.
  expect_row(out.tensors[1], (1 * 5 + 0) * 8, rotate_by_hand(spec, 100, in.row(spec, 1, 3, 0, true)), 1e-12);
  expect_row(out.tensors[2], (1 * 5 + 0) * 8, in.row(spec, 2, 3, 0, true), 0.0);
  EXPECT_TRUE(out.tensors[2].padding[(1 * 5 + 1) * 8]);
}

TEST(ReferenceRotation, PackedInPlaceWithoutCopyVLeavesVUntouched) {
  Spec spec = small_spec(4, 4, 1, 1, Layout::neox, DType::fp16);
  spec.io.input = InputForm::packed_qkv;
  spec.io.qkv_bias = true;
  const std::vector<double> packed = random_values(spec.dtype, 2 * 12), bias = random_values(spec.dtype, 12);
  const auto packed_bytes = encode_values(spec.dtype, packed), bias_bytes = encode_values(spec.dtype, bias);
  RefProblem problem;
  problem.num_tokens = 2;
  problem.qkv.data = packed_bytes.data();
  problem.bias = bias_bytes.data();
  problem.positions = {1, 2};
  const RefOutputs out = reference_outputs(spec, problem);
  ASSERT_EQ(out.tensors.size(), 1u);
  EXPECT_EQ(out.tensors[0].name, "qkv");
  EXPECT_EQ(out.tensors[0].heads, 3);
  for (int64_t t = 0; t < 2; ++t)
    for (int e = 0; e < 4; ++e) {
      EXPECT_EQ(out.tensors[0].value[t * 12 + 8 + e], packed[t * 12 + 8 + e]);  // v: no bias
      EXPECT_NE(out.tensors[0].value[t * 12 + 4 + e], packed[t * 12 + 4 + e]);  // k: rotated
    }
  problem.bias = nullptr;  // the spec asks for a bias
  EXPECT_THROW(reference_outputs(spec, problem), std::invalid_argument);
}

// ---------------------------------------------------------------- other rope types

Spec freq_spec(RopeType type, int d, double theta, int64_t max_positions) {
  Spec s = small_spec(d, d, 1, 1, Layout::neox, DType::fp32);
  s.rope.type = type;
  s.rope.theta = theta;
  s.max_position_embeddings = max_positions;
  return s;
}

TEST(ReferenceFreqs, LinearNtkAndDynamic) {
  const Spec plain = freq_spec(RopeType::default_, 64, 10000, 2048);
  const RefFreqs base = reference_freqs(plain, 1, true);
  Spec linear = plain;
  linear.rope.type = RopeType::linear;
  linear.rope.factor = 3.0;
  const RefFreqs lin = reference_freqs(linear, 1, true);
  for (size_t i = 0; i < base.inv_freq.size(); ++i)
    EXPECT_EQ(lin.inv_freq[i], static_cast<double>(static_cast<float>(base.inv_freq[i]) / 3.0f));

  Spec ntk = plain;
  ntk.rope.type = RopeType::ntk;
  ntk.rope.alpha = 4.0;
  const RefFreqs n = reference_freqs(ntk, 1, false);
  EXPECT_NEAR(n.base, 10000 * std::pow(4.0, 64.0 / 62.0), 1e-6);
  EXPECT_NEAR(n.inv_freq[31], std::pow(n.base, -62.0 / 64.0), 1e-18);

  Spec dynamic = plain;
  dynamic.rope.type = RopeType::dynamic;
  dynamic.rope.factor = 2.0;
  EXPECT_EQ(reference_freqs(dynamic, 2048, true).inv_freq, base.inv_freq);  // L <= M: default
  const RefFreqs grown = reference_freqs(dynamic, 4096, true);
  const double grown_base = 10000 * std::pow(2.0 * 4096 / 2048 - 1, 64.0 / 62.0);
  EXPECT_NEAR(grown.base, grown_base, 1e-6);
  EXPECT_NEAR(grown.inv_freq[1], std::pow(grown_base, -2.0 / 64.0), 2 * kFloatUlp);
  EXPECT_LT(grown.inv_freq[31], base.inv_freq[31]);
  dynamic.rope.seq_len = 4096;  // fixed length: run length ignored
  EXPECT_EQ(reference_freqs(dynamic, 10, true).inv_freq, grown.inv_freq);
  dynamic.rope.factor.reset();
  EXPECT_THROW(reference_freqs(dynamic, 10, true), std::invalid_argument);
}

TEST(ReferenceFreqs, YarnCheckValues) {
  Spec gpt_oss = freq_spec(RopeType::yarn, 64, 150000, 131072);
  gpt_oss.rope.factor = 32.0;
  gpt_oss.rope.original_max_position_embeddings = 4096;
  gpt_oss.rope.truncate = false;
  const RefFreqs f = reference_freqs(gpt_oss, 1, true);
  EXPECT_NEAR(*f.yarn_low, 8.0928, 1e-4);
  EXPECT_NEAR(*f.yarn_high, 17.3980, 1e-4);
  EXPECT_NEAR(f.attention_factor, 0.1 * std::log(32.0) + 1, 1e-15);
  // Pairs below low extrapolate (default), pairs above high interpolate (default / f).
  const RefFreqs plain = reference_freqs(freq_spec(RopeType::default_, 64, 150000, 131072), 1, true);
  EXPECT_EQ(f.inv_freq[0], plain.inv_freq[0]);
  EXPECT_NEAR(f.inv_freq[31], plain.inv_freq[31] / 32, 2 * kFloatUlp * plain.inv_freq[31] / 32);
  EXPECT_GT(f.inv_freq[12], plain.inv_freq[12] / 32);
  EXPECT_LT(f.inv_freq[12], plain.inv_freq[12]);

  Spec qwen = freq_spec(RopeType::yarn, 128, 1e6, 131072);  // no factor: f = M / O = 4
  qwen.rope.original_max_position_embeddings = 32768;
  EXPECT_NEAR(reference_freqs(qwen, 1, true).attention_factor, 1.13863, 1e-5);
  qwen.rope.attention_factor = 0.5;
  EXPECT_EQ(reference_freqs(qwen, 1, true).attention_factor, 0.5);
}

TEST(ReferenceFreqs, LongropeSwitchesTablesAboveOriginalLength) {
  Spec spec = freq_spec(RopeType::longrope, 8, 10000, 400);
  spec.rope.original_max_position_embeddings = 100;
  spec.rope.short_factor = {1.0, 1.5, 2.0, 3.0};
  spec.rope.long_factor = {2.0, 4.0, 8.0, 16.0};
  const RefFreqs short_table = reference_freqs(spec, 100, false), long_table = reference_freqs(spec, 101, false);
  EXPECT_FALSE(short_table.longrope_long);
  EXPECT_TRUE(long_table.longrope_long);
  for (int i = 0; i < 4; ++i) {
    const double plain = std::pow(10000.0, -2.0 * i / 8);
    EXPECT_NEAR(short_table.inv_freq[i], plain / spec.rope.short_factor[i], 1e-15);
    EXPECT_NEAR(long_table.inv_freq[i], plain / spec.rope.long_factor[i], 1e-15);
  }
  const double s = std::sqrt(1 + std::log(4.0) / std::log(100.0));  // f = M / O = 4
  EXPECT_NEAR(short_table.attention_factor, s, 1e-15);
  EXPECT_NEAR(long_table.attention_factor, s, 1e-15);
  spec.rope.long_factor.pop_back();
  EXPECT_THROW(reference_freqs(spec, 1, true), std::invalid_argument);
}

}  // namespace
