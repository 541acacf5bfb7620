// rope_type proportional (Gemma 4's global layers): the spec rules with their named errors,
// canonical JSON, the HF import of its rope block, and the kernel leaving the frequency-0 pairs
// bit for bit as they were (conformance: test_conformance.cpp ProportionalRope; HF's tables:
// test_freqs_golden.cpp).
// ropejit-tier: conformance
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hf_import.h"  // private: spec_from_hf reading the proportional block, under test
#include "ropejit/freqs.h"
#include "ropejit/runtime.h"
#include "support/backends.h"
#include "support/spec_builder.h"

namespace ropejit {
namespace {

using nlohmann::json;
using test::SpecFields;

SpecFields gemma4_fields() {
  SpecFields f;
  f.head_dim = 512;
  f.rotary_dim = 512;
  f.num_q_heads = 8;
  f.num_kv_heads = 4;
  f.max_position_embeddings = 131072;
  f.rope = {{"rope_type", "proportional"}, {"rope_theta", 1000000.0}, {"partial_rotary_factor", 0.25}};
  return f;
}

void expect_error(const json& spec, const std::string& pointer, const std::string& fragment) {
  const std::string message = test::spec_error(spec);
  EXPECT_NE(message.find(pointer + ": "), std::string::npos) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << message;
}

TEST(Proportional, SpecDefaultsAndCanonicalForm) {
  const Spec spec = test::make_spec(gemma4_fields());
  EXPECT_EQ(spec.rope.type, RopeType::proportional);
  EXPECT_EQ(spec.rope.factor, 1.0);  // HF's default, written out
  EXPECT_EQ(spec.rope.partial_rotary_factor, 0.25);
  const std::string canonical = canonical_json(spec);
  EXPECT_NE(canonical.find(R"("rope":{"rope_type":"proportional","rope_theta":1000000.0,"factor":1.0,)"
                           R"("partial_rotary_factor":0.25})"),
            std::string::npos)
      << canonical;
  SpecFields explicit_factor = gemma4_fields();
  explicit_factor.rope["factor"] = 1.0;
  EXPECT_EQ(spec_hash(test::make_spec(explicit_factor)), spec_hash(spec));
  SpecFields whole = gemma4_fields();
  whole.rope.erase("partial_rotary_factor");
  EXPECT_EQ(test::make_spec(whole).rope.partial_rotary_factor, 1.0);
  EXPECT_EQ(compute_freqs(test::make_spec(whole), FreqMode::hf_fp32).rotated_pairs, 256);
  EXPECT_EQ(compute_freqs(spec, FreqMode::hf_fp32).rotated_pairs, 64);
  EXPECT_EQ(compute_freqs(spec, FreqMode::float64).rotated_pairs, 64);
}

TEST(Proportional, SpecErrorsNameTheField) {
  SpecFields f = gemma4_fields();
  f.rotary_dim = 128;
  expect_error(test::spec_json(f), "/rotary_dim",
               "128 is not allowed: must be 512 (head_dim) with rope_type proportional");
  json top_fraction = test::spec_json(gemma4_fields());
  top_fraction.erase("rotary_dim");
  top_fraction["partial_rotary_factor"] = 0.25;
  expect_error(top_fraction, "/partial_rotary_factor", "0.25 is not allowed: must be absent or 1 with rope_type proportional");
  for (double bad : {0.0, -0.5, 1.5}) {
    f = gemma4_fields();
    f.rope["partial_rotary_factor"] = bad;
    expect_error(test::spec_json(f), "/rope/partial_rotary_factor", "must be a number > 0 and <= 1");
  }
  f = gemma4_fields();
  f.rope["partial_rotary_factor"] = 0.003;  // floor(0.003 * 512 / 2) = 0 pairs
  expect_error(test::spec_json(f), "/rope/partial_rotary_factor", "a fraction giving at least one rotated pair");
  f = gemma4_fields();
  f.rope["factor"] = 0.5;
  expect_error(test::spec_json(f), "/rope/factor", "0.5 is not allowed: must be a number >= 1");
  f = gemma4_fields();
  f.rope["low_freq_factor"] = 1.0;
  expect_error(test::spec_json(f), "/rope/low_freq_factor", "does not apply to rope_type \"proportional\"");
  f = gemma4_fields();
  f.rope = {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 2.0}, {"partial_rotary_factor", 0.5}};
  expect_error(test::spec_json(f), "/rope/partial_rotary_factor", "does not apply to rope_type \"linear\"");
  f = gemma4_fields();
  f.rope["rope_theta"] = 1e-320;  // every rotated pair's inv_freq: no float32 > 0
  expect_error(test::spec_json(f), "/rope/rope_theta", "inv_freq[0, 64) finite float32s > 0");
  f = gemma4_fields();
  f.rope["factor"] = 1e300;  // divides every inv_freq to 0: only the pairs past rope_angles may be 0
  expect_error(test::spec_json(f), "/rope/factor", "a factor keeping inv_freq[0, 64) finite float32s > 0");
}

TEST(Proportional, HfImportReadsTheBlockAndItsFactor) {
  const json config = {{"model_type", "llama"},  {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                       {"head_dim", 512},        {"hidden_size", 2304},      {"max_position_embeddings", 131072},
                       {"rope_parameters", {{"rope_type", "proportional"}, {"rope_theta", 1000000.0}, {"factor", 8.0}}}};
  std::vector<std::string> warnings;
  const Spec spec = spec_from_hf(config, HfImportOptions{"gemma-4-global", std::nullopt, std::nullopt}, &warnings);
  EXPECT_EQ(spec.rope.type, RopeType::proportional);
  EXPECT_EQ(spec.rope.factor, 8.0);  // HF divides by it though its validator does not list it
  EXPECT_EQ(spec.rope.partial_rotary_factor, 1.0);
  EXPECT_EQ(spec.rotary_dim, 512);
}

TEST(Proportional, ShippedGemma4SpecIsHfsDefaultGlobalLayer) {
  const Spec spec = load_spec_file(test::spec_path("gemma-4-global"));
  EXPECT_EQ(spec.rope.type, RopeType::proportional);
  EXPECT_EQ(spec.head_dim, 512);
  EXPECT_EQ(spec.rotary_dim, 512);
  EXPECT_EQ(spec.rope.partial_rotary_factor, 0.25);
  EXPECT_EQ(spec.rope.theta, 1000000.0);
  EXPECT_TRUE(spec.qk_norm.enabled);
  EXPECT_EQ(spec.qk_norm.weight_offset, 0.0);  // Gemma4RMSNorm multiplies by the weight itself
}

// Storage bits of one element: any pattern; NaN only in fp32 (fp16/bf16 stores quiet a NaN, in
// every pass-through element alike); the specials (+-0, +-inf, subnormals) always among them.
uint32_t random_bits(DType dtype, std::mt19937& rng, int64_t index) {
  static const uint32_t specials16[] = {0x8000, 0x0000, 0x0001, 0x8001, 0x03ff};  // +-0, subnormals
  if (index % 7 == 0) return specials16[(index / 7) % 5] | (dtype == DType::fp32 ? (index % 2 ? 0x80000000u : 0) : 0);
  if (dtype == DType::fp32) return static_cast<uint32_t>(rng());
  uint32_t bits = rng() & 0xffffu;
  const uint32_t exponent = dtype == DType::bf16 ? 0x7f80u : 0x7c00u;
  if ((bits & exponent) == exponent) bits &= exponent | 0x8000u;  // +-inf, never NaN
  return bits;
}

// The pairs past rope_angles keep their bytes exactly, with both layouts, every dtype, in place
// and to separate outputs, angles computed or from the cos/sin table, at positions up to 2^17.
TEST(Proportional, FrequencyZeroPairsKeepTheirBits) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  RuntimeOptions options;
  options.backend = BackendKind::host;
  Runtime runtime(options);
  std::mt19937 rng(std::random_device{}());
  const int D = 64, rotated = 8;  // partial_rotary_factor 0.25
  const int64_t T = 6;
  const std::vector<int32_t> positions{0, 1, 77, 4095, 65535, 131071};
  int checked = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (DType dtype : {DType::fp32, DType::fp16, DType::bf16})
      for (const char* output : {"inplace", "separate"})
        for (SinCosMode sincos : {SinCosMode::compute, SinCosMode::table}) {
          SpecFields f = gemma4_fields();
          f.head_dim = f.rotary_dim = D;
          f.num_q_heads = 4;
          f.num_kv_heads = 2;
          f.layout = layout;
          f.dtype = std::string(to_string(dtype));
          f.output = output;
          const Spec spec = test::make_spec(f);
          Config config = default_config(spec);
          config.sincos = sincos;
          const Kernel kernel = runtime.get(spec, config);
          const int esize = dtype_size(dtype);
          std::vector<uint8_t> q(T * 4 * D * esize), k(T * 2 * D * esize);
          for (auto* buffer : {&q, &k})
            for (size_t i = 0; i < buffer->size() / esize; ++i) {
              const uint32_t bits = random_bits(dtype, rng, static_cast<int64_t>(i));
              std::memcpy(buffer->data() + i * esize, &bits, esize);  // little endian: the low bytes
            }
          std::vector<uint8_t> q_out(q.size(), 0xa5), k_out(k.size(), 0xa5);
          const std::vector<uint8_t> q_in = q, k_in = k;
          Args a;
          a.num_tokens = T;
          a.q = q.data();
          a.k = k.data();
          a.positions = positions.data();
          if (std::string(output) == "separate") {
            a.q_out = q_out.data();
            a.k_out = k_out.data();
          }
          kernel.launch(a);
          const bool inplace = std::string(output) == "inplace";
          const std::vector<uint8_t>& q_after = inplace ? q : q_out;
          const std::vector<uint8_t>& k_after = inplace ? k : k_out;
          for (const auto& [in, after] : {std::pair{&q_in, &q_after}, std::pair{&k_in, &k_after}}) {
            for (size_t i = 0; i < in->size() / esize; ++i) {
              const int e = static_cast<int>(i % D);
              const int pair = std::string(layout) == "neox" ? e % (D / 2) : e / 2;
              if (pair < rotated) continue;
              ASSERT_EQ(std::memcmp(in->data() + i * esize, after->data() + i * esize, esize), 0)
                  << layout << " " << to_string(dtype) << " " << output << " " << to_string(sincos) << " element "
                  << i << " (pair " << pair << ")";
              ++checked;
            }
          }
        }
  EXPECT_EQ(checked, 2 * 3 * 2 * 2 * T * (4 + 2) * (D - 2 * rotated));
}

}  // namespace
}  // namespace ropejit
