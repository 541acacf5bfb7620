// Multi-axis RoPE (io.positions axes: vision towers, diffusion transformers): each rotary pair
// rotates by its axis's row of [A, T] positions with its axis's frequencies, checked against the
// float64 reference (which lays the axes' tables out as the libraries do: torch.cat or
// stack-and-flatten) on fresh random inputs, random positions per axis and poisoned outputs:
// the families' shapes (Flux, Flux 2, Wan, HunyuanVideo, Qwen2-VL vision, Pixtral, Kimi) x pairing
// x dtype x io forms (in place, separate, packed qkv with bias, padded, QK-norm per head and over
// all heads, FP8 q_out, the caller's cos_sin_cache) x both angle modes and sin/cos modes; and the
// spec's rules and refusals of io.axes.
// ropejit-tier: conformance
// ropejit-tier: unit AxesSpec
// ropejit-tier: compile AxesCompile
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ropejit/check/reference.h"
#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/freqs.h"
#include "ropejit/runtime.h"
#include "support/conformance_fixture.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class AxesConformance : public ropejit::test::BackendConformance {};

// One family's rotary: head shape, pairing, the axes block.
struct AxesFamily {
  const char* name;
  ropejit::test::HeadShape shape;
  const char* layout;
  nlohmann::json axes;
};

const AxesFamily kFamilies[] = {
    {"flux", {128, 128, 24, 24}, "interleaved",
     {{"pairs", {8, 28, 28}}, {"theta", {10000, 10000, 10000}}}},
    {"flux2", {128, 128, 6, 6}, "interleaved", {{"pairs", {16, 16, 16, 16}}, {"theta", {2000, 2000, 2000, 2000}}}},
    {"wan", {128, 128, 40, 40}, "interleaved", {{"pairs", {22, 21, 21}}, {"theta", {10000, 10000, 10000}}}},
    {"hunyuan-video", {128, 128, 4, 4}, "interleaved", {{"pairs", {8, 28, 28}}, {"theta", {256, 256, 256}}}},
    {"qwen2-vl-vision", {80, 80, 16, 16}, "neox", {{"pairs", {20, 20}}}},
    {"pixtral", {64, 64, 16, 16}, "neox", {{"pairs", {16, 16}}, {"frequencies", "global_alternate"}}},
    {"kimi-moonvit", {72, 72, 8, 8}, "neox", {{"pairs", {18, 18}}, {"placement", "alternating"}}},
    // Odd shares, per-axis bases, a pass-through tail and GQA: nothing may assume a family's numbers.
    {"mixed", {88, 60, 6, 2}, "neox", {{"pairs", {7, 11, 12}}, {"theta", {100, 10000, 3e5}}}},
    {"mixed-alternating", {96, 72, 4, 2}, "interleaved",
     {{"pairs", {12, 12, 12}}, {"theta", {500, 10000, 20}}, {"placement", "alternating"}}},
};

SpecFields axes_fields(const AxesFamily& family, const char* dtype, int index) {
  SpecFields f = ropejit::test::shaped_fields(family.name, family.shape, family.layout, dtype, index);
  f.positions = "axes";
  f.io_extra = {{"axes", family.axes}};
  return f;
}

// One io form of a case: the fields it sets on top of axes_fields.
struct IoForm {
  const char* name;
  void (*apply)(SpecFields& f, int index);
};

const IoForm kIoForms[] = {
    {"inplace", [](SpecFields&, int) {}},
    {"separate", [](SpecFields& f, int) { f.output = "separate"; }},
    {"packed_qkv+bias",  // a packed QKV projection's output (Qwen-VL vision's qkv Linear)
     [](SpecFields& f, int) {
       f.input = "packed_qkv";
       f.qkv_bias = true;
       f.copy_v = true;
     }},
    {"qk_norm_head",  // Flux, HunyuanVideo, Qwen-Image: RMSNorm per head before the rotation
     [](SpecFields& f, int) { f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}}; }},
    {"qk_norm_all",  // Wan: RMSNorm over all of a token's heads
     [](SpecFields& f, int) { f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", "all"}}; }},
    {"fp8_q_out",
     [](SpecFields& f, int) {
       f.output = "separate";
       f.io_extra.update({{"q_output_dtype", "fp8_e4m3"}});
     }},
};

const char* const kDtypes[] = {"bf16", "fp16", "fp32"};

}  // namespace

// Every family under every io form, a dtype, angle mode and position type per case, the table
// sin/cos mode every third case; 1, 7 and 333 tokens (odd, past one block), positions per axis
// drawn independently up to 4 x max_position_embeddings.
TEST_P(AxesConformance, EveryFamilyAndIoForm) {
  int index = 0;
  for (const AxesFamily& family : kFamilies)
    for (const IoForm& form : kIoForms) {
      SpecFields f = axes_fields(family, kDtypes[index % 3], index);
      form.apply(f, index);
      const Spec spec = ropejit::test::make_spec(f);
      ASSERT_EQ(position_streams(spec), static_cast<int>(family.axes["pairs"].size()));
      const Config config = ropejit::test::default_or_table_config(spec, index % 3 == 2);
      const Kernel kernel = runtime().get(spec, config);
      for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(333)}) {
        check::CaseOptions o;
        o.tokens = tokens;
        o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
        o.max_position = index % 4 == 1 ? 4 * f.max_position_embeddings : 97;
        o.strided = index % 5 == 4 && f.input == "separate";
        expect_case(kernel, o, fmt::format("{} {} {} {}", family.name, form.name, f.dtype, f.angle));
      }
      ++index;
    }
  EXPECT_EQ(index, static_cast<int>(std::size(kFamilies) * std::size(kIoForms)));
}

// The caller's cos_sin_cache with axes (diffusers' precomputed freqs_cis): each pair reads the row
// of its axis's position; a position past the cache rotates only that axis's pairs to NaN.
TEST_P(AxesConformance, CallerCacheReadsEachPairsAxisRow) {
  int index = 0;
  for (const AxesFamily& family : {kFamilies[0], kFamilies[4], kFamilies[6]}) {
    SpecFields f = axes_fields(family, kDtypes[index % 3], index);
    f.angle.clear();
    f.rope = {{"rope_type", "default"}};
    f.io_extra["axes"].erase("theta");
    f.io_extra.update({{"angles", "cos_sin_cache"}, {"cos_sin_dtype", index % 2 ? "bf16" : "fp32"}});
    const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
    for (int64_t rows : {int64_t(97), int64_t(300)}) {
      check::CaseOptions o;
      o.tokens = 57;
      o.max_position = 200;  // with 97 rows, about half of each axis's positions have none
      o.cos_sin_rows = rows;
      expect_case(kernel, o, fmt::format("{} cache rows {}", family.name, rows));
    }
    ++index;
  }
}

// Every vector width and heads per thread of Qwen2-VL vision's head (80: no power of two) and
// Flux's: each lane map finds its pairs' axes.
TEST_P(AxesConformance, EveryConfigOfTwoFamilies) {
  for (const AxesFamily& family : {kFamilies[0], kFamilies[4]}) {
    const Spec spec = ropejit::test::make_spec(axes_fields(family, "bf16", 0));
    EXPECT_GE(expect_every_config(spec, {2, 4, 8}, {1, 2, 4}, 13, {SinCosMode::compute, SinCosMode::table}), 4)
        << family.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Backend, AxesConformance, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// NVRTC has nothing to say about the axes kernels (no unreachable code, no spills).
TEST(AxesCompile, EveryFamilyCompilesCleanForSm90) {
  int index = 0;
  for (const AxesFamily& family : kFamilies) {
    SpecFields f = axes_fields(family, kDtypes[index % 3], index);
    kIoForms[index % std::size(kIoForms)].apply(f, index);
    ++index;
    const Spec spec = ropejit::test::make_spec(f);
    const Binary b = compile_nvrtc(generate_source(make_plan(spec, default_config(spec))), "sm_90");
    EXPECT_EQ(b.log.find("warning"), std::string::npos) << family.name << "\n" << b.log;
    EXPECT_EQ(b.spill_bytes, 0) << family.name << "\n" << b.log;
  }
}

// ---------------------------------------------------------------- the spec

namespace {

std::string axes_error(const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json spec = ropejit::test::spec_json(axes_fields(kFamilies[0], "bf16", 0));
  change(spec);
  return ropejit::test::spec_error(spec);
}

}  // namespace

// Canonical JSON names every axis's base (rope_theta when absent) and the defaults, and reads back
// to the same spec.
TEST(AxesSpec, CanonicalFormFillsEveryDefault) {
  SpecFields f = axes_fields(kFamilies[4], "bf16", 0);
  f.rope = {{"rope_type", "default"}, {"rope_theta", 12345.0}};
  const Spec spec = ropejit::test::make_spec(f);
  EXPECT_EQ(spec.io.axes.theta, (std::vector<double>{12345.0, 12345.0}));
  const nlohmann::json canonical = nlohmann::json::parse(canonical_json(spec));
  EXPECT_EQ(canonical["io"]["axes"],
            (nlohmann::json{{"pairs", {20, 20}}, {"theta", {12345.0, 12345.0}}, {"frequencies", "own"},
                            {"placement", "contiguous"}}));
  EXPECT_EQ(canonical_json(parse_spec(canonical_json(spec))), canonical_json(spec));
}

// Each pair's inv_freq is its axis's own default table (theta_a^(-j / pairs_a)), or Pixtral's
// every-A-th entry of one table; the generator's table equals the reference's layout of them.
TEST(AxesSpec, FrequenciesAreEachAxisOwnTable) {
  const Spec flux = ropejit::test::make_spec(axes_fields(kFamilies[7], "bf16", 0));  // pairs 7, 11, 12
  const FreqTable table = compute_freqs(flux, FreqMode::float64);
  EXPECT_DOUBLE_EQ(table.inv_freq[0], 1.0);
  EXPECT_DOUBLE_EQ(table.inv_freq[3], std::pow(100.0, -3.0 / 7.0));
  EXPECT_DOUBLE_EQ(table.inv_freq[7], 1.0);  // axis 1 starts over
  EXPECT_DOUBLE_EQ(table.inv_freq[7 + 5], std::pow(10000.0, -5.0 / 11.0));
  EXPECT_DOUBLE_EQ(table.inv_freq[18 + 11], std::pow(3e5, -11.0 / 12.0));
  const Spec pixtral = ropejit::test::make_spec(axes_fields(kFamilies[5], "fp32", 0));  // 16 + 16, one table
  const FreqTable shared = compute_freqs(pixtral, FreqMode::float64);
  EXPECT_DOUBLE_EQ(shared.inv_freq[1], std::pow(10000.0, -4.0 / 64.0));       // height: entries 0, 2, 4, ...
  EXPECT_DOUBLE_EQ(shared.inv_freq[16 + 1], std::pow(10000.0, -6.0 / 64.0));  // width: entries 1, 3, 5, ...
  for (const AxesFamily& family : kFamilies) {
    const Spec spec = ropejit::test::make_spec(axes_fields(family, "bf16", 0));
    const std::vector<double> generated = compute_freqs(spec, FreqMode::hf_fp32).inv_freq;
    EXPECT_EQ(generated, ref::reference_freqs(spec, 1, true).inv_freq) << family.name;
    const std::vector<int> axis = ref::axes_pair_order(spec.io.axes, true);
    for (int k = 0; k < spec.rotary_dim / 2; ++k) EXPECT_EQ(pair_axis(spec.io.axes, k).axis, axis[k]) << family.name;
  }
}

// Each refusal names the field, the value and what is allowed.
TEST(AxesSpec, RefusalsNameTheFieldAndTheRule) {
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["pairs"] = {8, 28, 27}; }).find(
                "/io/axes/pairs: [8,28,27] is not allowed: must be a list of 1 to 4 integers >= 1 (rotary pairs per "
                "axis) summing to rotary_dim / 2 = 64"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["pairs"] = {8, 8, 8, 8, 32}; }).find("/io/axes/pairs"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["pairs"] = {0, 36, 28}; }).find("/io/axes/pairs/0"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["theta"] = {10000, 10000}; }).find(
                "/io/axes/theta: [10000,10000] is not allowed: must be a list of 3 numbers > 0 (one base per axis)"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["theta"] = {10000, -1, 10000}; }).find("/io/axes/theta/1"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["theta"] = {10000, 1e-300, 10000}; }).find("/io/axes/theta/1"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["placement"] = "alternating"; }).find(
                "/io/axes/pairs: [8,28,28] is not allowed: must be equal counts with placement \"alternating\""),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["placement"] = "interleave"; }).find(
                "/io/axes/placement: \"interleave\" is not allowed"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) {
              s["io"]["axes"] = {{"pairs", {32, 32}}, {"theta", {1, 1}}, {"frequencies", "global_alternate"}};
            }).find("/io/axes/theta: [1,1] is not allowed: must be absent with frequencies \"global_alternate\""),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["axes"]["pair"] = 1; }).find("/io/axes/pair"), std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"].erase("axes"); }).find("/io/axes: missing: io.positions \"axes\" needs it"),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["io"]["positions"] = "explicit"; }).find(
                "/io/axes: {\"pairs\":[8,28,28],\"theta\":[10000,10000,10000]} is not allowed: must be absent unless "
                "io.positions is \"axes\""),
            std::string::npos);
  EXPECT_NE(axes_error([](auto& s) { s["rope"] = {{"rope_type", "linear"}, {"rope_theta", 1e4}, {"factor", 2.0}}; })
                .find("/rope/rope_type: \"linear\" is not allowed: must be \"default\" with io.positions \"axes\""),
            std::string::npos);
}
