// Conformance of rotary_slice "trailing" (a head's last rotary_dim elements rotate, its first
// D - d pass through: DeepSeek-V4's [nope | rope] heads, MLA's q) against the float64 reference on
// fresh random inputs with poisoned outputs: layout x dtype crossed with head shapes (V4's 512/64
// with one kv head, MLA's 192/64, partial neox slices a lane rotates whole), every io form (packed
// and separate input, bias, copied v, in place, separate, padded, paged KV with FP8 caches),
// positions forms, QK-norm per head and over all heads, a paged cache without a V cache (K = V),
// the re-rotation of a paged K cache, and odd token counts. A kernel that rotated the leading slice fails every case (checked by hand).
// ropejit-tier: conformance
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "support/conformance_fixture.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class TrailingSlice : public ropejit::test::BackendConformance {};

using ropejit::test::HeadShape;
// V4 (Flash-like): 512 with a 64-element rope slice and one KV head; MLA's q head 128 + 64;
// a neox half of 12 (bf16: one lane rotates the slice); a whole-head slice (trailing = leading).
const HeadShape kHeadShapes[] = {{512, 64, 8, 1}, {192, 64, 6, 2}, {96, 24, 4, 4}, {128, 32, 8, 2}, {64, 64, 4, 1}};
const char* const kOutputs[] = {"inplace", "separate", "padded_bhsd", "paged_kv"};
const char* const kPositions[] = {"explicit", "varlen", "offset"};

SpecFields fields(int index, const char* layout, const char* dtype) {
  SpecFields f = ropejit::test::shaped_fields("rotary-slice", kHeadShapes[index % std::size(kHeadShapes)], layout,
                                              dtype, index);
  f.rotary_slice = "trailing";
  f.rope = index % 3 ? nlohmann::json{{"rope_type", "default"}, {"rope_theta", 10000.0}}
                     : nlohmann::json{{"rope_type", "yarn"}, {"rope_theta", 160000.0}, {"factor", 16.0},
                                      {"original_max_position_embeddings", 1024}};
  return f;
}

}  // namespace

// The rope op: every io form, with and without a QK-norm (per head, over all heads).
TEST_P(TrailingSlice, RopeEveryIoForm) {
  const nlohmann::json norms[] = {nullptr,
                                  {{"type", "rmsnorm"}, {"eps", 1e-6}},
                                  {{"type", "rmsnorm"}, {"eps", 1e-6}, {"weight", "none"}},
                                  {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", "all"}}};
  int index = 0;
  for (const char* layout : {"interleaved", "neox"})
    for (const char* dtype : {"bf16", "fp16", "fp32"})
      for (int form = 0; form < 4; ++form) {
        SpecFields f = fields(index, layout, dtype);
        f.output = kOutputs[form];
        f.positions = f.output == "padded_bhsd" ? "varlen" : kPositions[index % 3];
        f.input = index % 3 == 1 ? "packed_qkv" : "separate";
        f.qkv_bias = index % 5 >= 3;
        f.qk_norm = norms[index % 4];
        // A paged cache without a V cache every other time: K = V (DeepSeek-V4), copy_v false.
        const bool k_is_v = f.output == "paged_kv" && index % 8 < 4;
        if (f.output == "paged_kv")
          f.io_extra = {{"cache_layout", index % 3 ? "nhd" : "hnd"},
                        {"cache_dtype", index % 2 ? "fp8_e4m3" : "auto"},
                        {"page_size", index % 2 ? 16 : 5},
                        {"q_output", index % 6 < 3 ? "inplace" : "separate"},
                        {"copy_v", !k_is_v}};
        f.copy_v = (f.output == "paged_kv" && !k_is_v) || index % 4 == 2 ||
                   (f.input == "packed_qkv" && (f.output != "inplace" || f.qkv_bias));
        const Spec spec = ropejit::test::make_spec(f);
        const Kernel kernel = runtime().get(spec);
        for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(201)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.strided = index % 4 == 1 && f.output != "padded_bhsd";
          expect_case(kernel, o,
                      fmt::format("trailing {} {} D{}/{} Hq{} Hkv{} {} {} {} norm {} {}", layout, dtype, f.head_dim,
                                  f.rotary_dim, f.num_q_heads, f.num_kv_heads, f.input, f.output, f.positions,
                                  f.qk_norm.dump(), config_name(default_config(spec))));
        }
        ++index;
      }
  EXPECT_EQ(index, 24);
}

// Every heads_per_thread and vector width of one V4-like shape: the lane maps of each work shape.
TEST_P(TrailingSlice, EveryConfigOfAV4Head) {
  SpecFields f = fields(1, "interleaved", "bf16");
  f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  EXPECT_GE(expect_every_config(ropejit::test::make_spec(f), {2, 4, 8}, {1, 2, 3, 9}, 13), 10);
}

// Re-rotating the trailing slice of keys in a paged cache (bf16 and FP8); the leading D - d stay.
TEST_P(TrailingSlice, RerotateKvCache) {
  int index = 0;
  for (const char* layout : {"interleaved", "neox"})
    for (const char* cache_dtype : {"auto", "fp8_e4m3"}) {
      SpecFields f = fields(index, layout, "bf16");
      f.op = "rerotate";
      f.output = "paged_kv";
      f.io_extra = {{"cache_dtype", cache_dtype}, {"page_size", 16}};
      const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
      for (int64_t tokens : {int64_t(1), int64_t(37)}) {
        check::CaseOptions o;
        o.tokens = tokens;
        expect_case(kernel, o, fmt::format("rerotate trailing {} {}", layout, cache_dtype));
      }
      ++index;
    }
}

INSTANTIATE_TEST_SUITE_P(Backend, TrailingSlice, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });
