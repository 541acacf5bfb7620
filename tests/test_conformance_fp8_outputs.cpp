// FP8 q output (io.q_output_dtype fp8_e4m3 / fp8_e5m2, the launch's q_scale): q_out holds the
// correctly rounded, saturated codes of q / q_scale, checked against the float64 reference (one
// code off only within fp32 noise of a midpoint) on fresh random inputs with poisoned outputs and
// a scale that sometimes saturates: every output form that writes q_out (separate, padded,
// paged_kv with q_output separate), QK-norm per head and over all heads, bias, packed input,
// partial and trailing slices, FP8 and plain caches, MLA's q_out and absorbed q, odd token counts,
// every config; per-head scales (computed in the launch: q's per (token, head), the paged cache's
// per (slot, kv head)) against the float64 amax; then the spec errors.
// ropejit-tier: conformance
// ropejit-tier: unit Fp8QOutputSpec
#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "support/conformance_fixture.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class Fp8QOutput : public ropejit::test::BackendConformance {};

using ropejit::test::HeadShape;
const HeadShape kHeadShapes[] = {{128, 128, 8, 2}, {128, 64, 6, 3}, {96, 24, 4, 4}, {192, 64, 4, 1}};
const char* const kOutputs[] = {"separate", "padded_bhsd", "paged_kv"};
const nlohmann::json kNorms[] = {nullptr,
                                 {{"type", "rmsnorm"}, {"eps", 1e-6}},
                                 {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", "all"}}};

SpecFields fp8_q_fields(int index, const char* layout, const char* dtype, const char* q_dtype) {
  SpecFields f = ropejit::test::shaped_fields("fp8-q", kHeadShapes[index % std::size(kHeadShapes)], layout, dtype,
                                              index);
  if (index % 4 == 3) f.rotary_slice = "trailing";
  f.output = kOutputs[index % 3];
  f.positions = f.output == "paged_kv" || f.output == "padded_bhsd" ? "varlen" : "explicit";
  f.input = index % 5 == 2 ? "packed_qkv" : "separate";
  f.qkv_bias = index % 3 == 1;
  f.qk_norm = kNorms[index % 3];
  f.io_extra = {{"q_output_dtype", q_dtype}};
  if (f.output == "paged_kv") {
    f.io_extra["q_output"] = "separate";
    f.io_extra["page_size"] = index % 2 ? 16 : 1;
    f.io_extra["cache_dtype"] = index % 4 < 2 ? "fp8_e4m3" : "auto";
  }
  return f;
}

}  // namespace

TEST_P(Fp8QOutput, EveryOutputFormNormAndLayout) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"bf16", "fp32"})
      for (const char* q_dtype : {"fp8_e4m3", "fp8_e5m2"})
        for (int form = 0; form < 3; ++form) {
          const Spec spec = make_spec(fp8_q_fields(index, layout, dtype, q_dtype));
          ASSERT_EQ(to_string(spec.io.q_output_dtype), std::string(q_dtype));
          expect_token_counts(spec, index,
                              fmt::format("fp8 q {} {} -> {} {} D{}/{} Hq{} Hkv{} norm {}", layout, dtype, q_dtype,
                                          to_string(spec.io.output), spec.head_dim, spec.rotary_dim, spec.num_q_heads,
                                          spec.num_kv_heads, spec.qk_norm.enabled ? to_string(spec.qk_norm.scope) : "-"));
          ++index;
        }
  EXPECT_EQ(index, 24);
}

TEST_P(Fp8QOutput, EveryConfig) {
  EXPECT_GE(expect_every_config(make_spec(fp8_q_fields(0, "neox", "bf16", "fp8_e4m3")), {2, 4, 8}, {1, 3}, 9), 6);
  EXPECT_GE(expect_every_config(make_spec(fp8_q_fields(1, "interleaved", "bf16", "fp8_e4m3")), {2, 4, 8}, {1, 3}, 9), 6);
}

// Computed q scales over every output form, layouts, e4m3/e5m2, GQA role slots, partial and
// trailing slices: `mode` per_token_head or per_token, with no norm or `norm`.
class Fp8QComputedScales : public Fp8QOutput {
 protected:
  void expect_every_form(const char* mode, const nlohmann::json& norm) {
    const nlohmann::json norms[] = {nullptr, norm};
    int index = 0;
    for (const char* layout : {"neox", "interleaved"})
      for (const char* q_dtype : {"fp8_e4m3", "fp8_e5m2"})
        for (int form = 0; form < 3; ++form) {
          SpecFields f = fp8_q_fields(index, layout, index % 3 ? "bf16" : "fp32", q_dtype);
          f.output = kOutputs[form];
          f.positions = f.output == "separate" ? "explicit" : "varlen";
          if (f.output == "paged_kv")
            f.io_extra.update({{"q_output", "separate"}, {"page_size", 16}, {"cache_dtype", "fp8_e4m3"}});
          f.qk_norm = norms[index % 2];
          f.io_extra["q_scale"] = mode;
          const Spec spec = make_spec(f);
          ASSERT_EQ(to_string(spec.io.q_scale), std::string(mode));
          expect_token_counts(spec, index,
                              fmt::format("fp8 q {} {} -> {} {} D{}/{} Hq{} Hkv{} norm {}", mode, layout, q_dtype,
                                          to_string(spec.io.output), spec.head_dim, spec.rotary_dim,
                                          spec.num_q_heads, spec.num_kv_heads, spec.qk_norm.enabled));
          ++index;
        }
    EXPECT_EQ(index, 12);
  }
  void expect_every_config_of(const char* mode) {
    SpecFields f = fp8_q_fields(0, "neox", "bf16", "fp8_e4m3");
    f.qk_norm = nullptr;
    f.io_extra["q_scale"] = mode;
    EXPECT_GE(expect_every_config(make_spec(f), {2, 4, 8}, {1, 3, 5}, 9), 6);
  }
};

// Per-head scales (io.q_scale per_token_head): each (token, head)'s scale from its amax, written to
// q_scale_out [T, Hq] and checked against the float64 amax; the codes against value / that scale;
// without a norm (the lanes cooperate for the amax alone) and with one per head.
TEST_P(Fp8QComputedScales, PerTokenHeadEveryFormAndLayout) {
  expect_every_form("per_token_head", {{"type", "rmsnorm"}, {"eps", 1e-6}});
}
TEST_P(Fp8QComputedScales, PerTokenHeadEveryConfig) { expect_every_config_of("per_token_head"); }

// Per-token scales (io.q_scale per_token): one scale over all of a token's q heads, reduced in the
// row's warp segment (the all-heads kernel), written to q_scale_out [T]; no norm or an all-heads one.
TEST_P(Fp8QComputedScales, PerTokenEveryFormAndLayout) {
  expect_every_form("per_token", {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", "all"}});
}
TEST_P(Fp8QComputedScales, PerTokenEveryConfig) { expect_every_config_of("per_token"); }

// io.scale_rounding ue8m0 (DeepSeek's scale_fmt): each computed scale rounded up to a power of two,
// the codes scaled by it: per (token, head) and per token q scales, per (slot, kv head) cache scales,
// bf16 and fp32, against the float64 reference's frexp rounding. Its scales differ from the
// unrounded ones (the check sees a kernel that does not round).
TEST_P(Fp8QComputedScales, Ue8m0ScalesArePowersOfTwo) {
  int index = 0;
  for (const char* mode : {"per_token_head", "per_token", "cache"})
    for (const char* layout : {"neox", "interleaved"}) {
      SpecFields f = fp8_q_fields(index, layout, index % 2 ? "bf16" : "fp32", "fp8_e4m3");
      f.qk_norm = nullptr;
      if (std::string(mode) == "cache") {
        f.output = "paged_kv";
        f.positions = "explicit";
        f.io_extra = {{"cache_dtype", "fp8_e4m3"}, {"cache_scale", "per_token_head"}, {"page_size", 16}};
      } else {
        f.io_extra["q_scale"] = mode;
      }
      f.io_extra["scale_rounding"] = "ue8m0";
      const Spec spec = make_spec(f);
      ASSERT_EQ(spec.io.scale_rounding, ScaleRounding::ue8m0);
      expect_token_counts(spec, index,
                          fmt::format("ue8m0 {} {} D{}/{} Hq{} Hkv{}", mode, layout, spec.head_dim, spec.rotary_dim,
                                      spec.num_q_heads, spec.num_kv_heads));
      ++index;
    }
  EXPECT_EQ(index, 6);
}

INSTANTIATE_TEST_SUITE_P(Backend, Fp8QComputedScales, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Per-(slot, kv head) scales of an FP8 paged cache (io.cache_scale per_token_head): k and v each
// get their head's scale in k_scale_cache / v_scale_cache [slots, Hkv]; every other entry stays.
// Layouts, cache layouts, slot mapping and block tables, with and without a QK-norm, e4m3/e5m2,
// K = V (no V cache), an FP8 q beside it.
TEST_P(Fp8QOutput, PerSlotHeadCacheScales) {
  const nlohmann::json norms[] = {nullptr, {{"type", "rmsnorm"}, {"eps", 1e-6}}};
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* cache_dtype : {"fp8_e4m3", "fp8_e5m2"})
      for (int variant = 0; variant < 3; ++variant) {
        SpecFields f = ropejit::test::shaped_fields("fp8-cache-scales", kHeadShapes[index % std::size(kHeadShapes)],
                                                    layout, index % 3 ? "bf16" : "fp32", index);
        f.output = "paged_kv";
        const bool block_tables = variant == 1;
        f.positions = block_tables ? "varlen" : "explicit";
        f.qk_norm = norms[index % 2];
        f.io_extra = {{"cache_dtype", cache_dtype}, {"cache_scale", "per_token_head"},
                      {"cache_layout", index % 3 ? "nhd" : "hnd"}, {"page_size", index % 2 ? 16 : 1},
                      {"cache_index", block_tables ? "block_tables" : "slot_mapping"}};
        if (variant == 2) {  // an FP8 q with its own per-head scales beside the cache's
          f.io_extra["q_output"] = "separate";
          f.io_extra["q_output_dtype"] = "fp8_e4m3";
          f.io_extra["q_scale"] = "per_token_head";
        }
        if (index % 4 == 3) f.copy_v = false;  // K = V: no V cache, no v scales
        nlohmann::json spec = ropejit::test::spec_json(f);
        if (index % 4 == 3) spec["io"]["copy_v"] = false;
        const Spec parsed = parse_spec(spec.dump());
        ASSERT_TRUE(cache_scale_per_head(parsed));
        expect_token_counts(parsed, index,
                            fmt::format("fp8 cache per head {} {} {} D{}/{} Hq{} Hkv{} norm {} copy_v {}", layout,
                                        cache_dtype, to_string(parsed.io.cache_index), parsed.head_dim,
                                        parsed.rotary_dim, parsed.num_q_heads, parsed.num_kv_heads,
                                        parsed.qk_norm.enabled, parsed.io.copy_v));
        ++index;
      }
  EXPECT_EQ(index, 12);
}

// MLA: q_out in FP8, the whole head or the absorbed [q_latent | q_pe].
TEST_P(Fp8QOutput, MlaQOutAndAbsorbedQ) {
  int index = 0;
  for (bool absorbed : {false, true})
    for (const char* q_dtype : {"fp8_e4m3", "fp8_e5m2"}) {
      SpecFields f = ropejit::test::shaped_fields("mla-fp8-q", {192, 64, 16, 1}, "interleaved", "bf16", index);
      f.op = "mla_append";
      f.rotary_slice = "trailing";
      f.output = "paged_kv";
      f.io_extra = {{"q_output", "separate"}, {"q_output_dtype", q_dtype}, {"page_size", 16},
                    {"cache_dtype", index % 2 ? "fp8_e4m3" : "auto"}};
      nlohmann::json spec = ropejit::test::spec_json(f);
      spec["mla_append"] = {{"kv_lora_rank", 512}, {"absorbed_q", absorbed}};
      expect_token_counts(parse_spec(spec.dump()), index,
                          fmt::format("mla fp8 q {} absorbed {}", q_dtype, absorbed));
      ++index;
    }
}

INSTANTIATE_TEST_SUITE_P(Backend, Fp8QOutput, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// An FP8 q needs q_out; other ops rewrite q in place in its dtype.
TEST(Fp8QOutputSpec, RefusesWhereQIsNotWrittenToQOut) {
  const nlohmann::json base = ropejit::test::spec_json(fp8_q_fields(0, "neox", "bf16", "fp8_e4m3"));
  EXPECT_EQ(ropejit::test::spec_error(base), "accepted");
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](nlohmann::json& s) { s["io"]["output"] = "inplace"; },
       "/io/q_output_dtype: \"fp8_e4m3\" is not allowed: must be \"auto\" unless q goes to q_out"},
      {[](nlohmann::json& s) { s["io"] = {{"output", "paged_kv"}, {"page_size", 16}, {"q_output_dtype", "fp8_e4m3"}}; },
       "/io/q_output_dtype: \"fp8_e4m3\" is not allowed: must be \"auto\" unless q goes to q_out"},
      {[](nlohmann::json& s) { s["io"]["q_output_dtype"] = "fp4"; }, "/io/q_output_dtype: \"fp4\" is not allowed"},
      {[](nlohmann::json& s) {
         s["op"] = "inverse_rope";
         s["io"] = {{"q_output_dtype", "fp8_e4m3"}};
         s["num_kv_heads"] = s["num_q_heads"];
       },
       "/io/q_output_dtype: \"fp8_e4m3\" is not allowed: must be \"auto\" when op is inverse_rope"},
      {[](nlohmann::json& s) {
         s["io"]["q_output_dtype"] = "auto";
         s["io"]["q_scale"] = "static";
       },
       "/io/q_scale: \"static\" is not allowed: must be absent unless io.q_output_dtype is an FP8 type"},
      {[](nlohmann::json& s) { s["io"]["q_scale"] = "per_tensor"; }, "/io/q_scale: \"per_tensor\" is not allowed"},
      {[](nlohmann::json& s) {
         s["io"]["q_scale"] = "per_token";
         s["qk_norm"] = {{"type", "rmsnorm"}, {"eps", 1e-6}};
       },
       "/io/q_scale: \"per_token\" is not allowed: must be \"static\" or \"per_token_head\" with qk_norm scope "
       "\"head\""},
      {[](nlohmann::json& s) {
         s["io"] = {{"output", "paged_kv"}, {"page_size", 16}, {"q_output", "separate"}, {"q_output_dtype", "fp8_e4m3"},
                    {"q_scale", "per_token"}, {"cache_dtype", "fp8_e4m3"}, {"cache_scale", "per_token_head"}};
       },
       "/io/q_scale: \"per_token\" is not allowed: must be \"static\" or \"per_token_head\" with io.cache_scale "
       "per_token_head"},
      {[](nlohmann::json& s) {
         s["io"]["q_scale"] = "per_token_head";
         s["qk_norm"] = {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", "all"}};
       },
       "/io/q_scale: \"per_token_head\" is not allowed: must be \"static\" with qk_norm scope \"all\""},
      {[](nlohmann::json& s) {
         s["io"] = {{"output", "paged_kv"}, {"page_size", 16}, {"cache_scale", "per_token_head"}};
       },
       "/io/cache_scale: \"per_token_head\" is not allowed: must be absent unless io.cache_dtype is an FP8 type"},
      {[](nlohmann::json& s) {
         s["io"] = {{"output", "paged_kv"}, {"page_size", 16}, {"cache_dtype", "fp8_e4m3"}, {"cache_scale", "per_token"}};
       },
       "/io/cache_scale: \"per_token\" is not allowed: must be \"static\" or \"per_token_head\""},
      {[](nlohmann::json& s) { s["io"]["cache_scale"] = "per_token_head"; },
       "/io/cache_scale: \"per_token_head\" is not allowed: must be absent unless io.output is \"paged_kv\""},
      {[](nlohmann::json& s) { s["io"]["scale_rounding"] = "ue8m0"; },  // q_scale static: the caller's scale
       "/io/scale_rounding: \"ue8m0\" is not allowed: must be \"none\" unless a scale is computed"},
      {[](nlohmann::json& s) {
         s["io"]["q_scale"] = "per_token_head";
         s["io"]["scale_rounding"] = "e8m0";
       },
       "/io/scale_rounding: \"e8m0\" is not allowed"},
  };
  for (const auto& [edit, want] : cases) {
    nlohmann::json spec = base;
    edit(spec);
    const std::string error = ropejit::test::spec_error(spec);
    EXPECT_NE(error.find(want), std::string::npos) << spec.dump() << "\n" << error;
  }
  // The canonical form names it only when FP8: the hash of every other spec is unchanged.
  nlohmann::json plain = base;
  plain["io"].erase("q_output_dtype");
  EXPECT_EQ(canonical_json(parse_spec(plain.dump())).find("q_output_dtype"), std::string::npos);
  EXPECT_NE(canonical_json(parse_spec(base.dump())).find("\"q_output_dtype\":\"fp8_e4m3\""), std::string::npos);
  // scale_rounding likewise only when ue8m0.
  nlohmann::json rounded = base;
  rounded["io"]["q_scale"] = "per_token_head";
  EXPECT_EQ(canonical_json(parse_spec(rounded.dump())).find("scale_rounding"), std::string::npos);
  rounded["io"]["scale_rounding"] = "ue8m0";
  EXPECT_NE(canonical_json(parse_spec(rounded.dump())).find("\"scale_rounding\":\"ue8m0\""), std::string::npos);
}
