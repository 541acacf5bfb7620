// Op mla_append (Multi-head Latent Attention: q's rope part rotated, the latent cache row
// [kv_c | rotated k_pe] appended) against the float64 reference on fresh random inputs with
// poisoned outputs and caches: layout x dtype x cache dtype, crossed with DeepSeek's shapes (q
// heads of 128 + 64 with a trailing slice, kv_lora_rank 512; 16 and 128 heads) and others (a
// leading slice, a neox half one lane rotates whole, kv_lora_rank 64), slot mapping and block
// tables, q in place and q_out, every positions form, strided rows, odd token counts, every
// vector width and heads per thread; vLLM's fp8_ds_mla rows; then the spec errors of what the op
// rules out.
// ropejit-tier: conformance
// ropejit-tier: unit MlaAppendSpec
#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "hf_import.h"  // private: spec_from_hf, the HF importer under test
#include "ropejit/config.h"
#include "support/conformance_fixture.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class MlaLatentAppend : public ropejit::test::BackendConformance {};

struct MlaShape {
  int head_dim, rotary_dim, num_q_heads, kv_lora_rank;
  const char* slice;
};
const MlaShape kShapes[] = {{192, 64, 16, 512, "trailing"}, {192, 64, 128, 512, "trailing"},
                            {96, 24, 5, 64, "trailing"},    {128, 32, 3, 128, "leading"}};
const char* const kPositions[] = {"explicit", "varlen", "offset"};

SpecFields mla_fields(int index, const char* layout, const char* dtype, const char* cache_dtype) {
  const MlaShape& shape = kShapes[index % std::size(kShapes)];
  SpecFields f;
  f.name = "mla";
  f.op = "mla_append";
  f.head_dim = shape.head_dim;
  f.rotary_dim = shape.rotary_dim;
  f.rotary_slice = shape.slice;
  f.num_q_heads = shape.num_q_heads;
  f.num_kv_heads = 1;
  f.layout = layout;
  f.dtype = dtype;
  f.angle = index % 2 ? "exact" : "fp32";
  f.max_position_embeddings = 4096;
  f.output = "paged_kv";
  const bool block_tables = index % 4 == 3;
  f.positions = block_tables ? "varlen" : kPositions[index % 3];
  f.io_extra = {{"cache_dtype", cache_dtype},
                {"cache_index", block_tables ? "block_tables" : "slot_mapping"},
                {"page_size", index % 2 ? 16 : 1},
                {"q_output", index % 3 == 1 ? "separate" : "inplace"}};
  f.rope = index % 2 ? nlohmann::json{{"rope_type", "default"}, {"rope_theta", 10000.0}}
                     : nlohmann::json{{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 40.0},
                                      {"original_max_position_embeddings", 1024}, {"mscale", 1.0},
                                      {"mscale_all_dim", 0.707}};
  return f;
}

nlohmann::json mla_json(const SpecFields& f, int kv_lora_rank) {
  nlohmann::json spec = ropejit::test::spec_json(f);
  spec["mla_append"] = {{"kv_lora_rank", kv_lora_rank}};
  return spec;
}

Spec mla_spec(int index, const char* layout, const char* dtype, const char* cache_dtype) {
  return parse_spec(mla_json(mla_fields(index, layout, dtype, cache_dtype), kShapes[index % std::size(kShapes)].kv_lora_rank).dump());
}

}  // namespace

TEST_P(MlaLatentAppend, EveryLayoutDtypeCacheAndIndex) {
  int index = 0;
  for (const char* layout : {"interleaved", "neox"})
    for (const char* dtype : {"bf16", "fp16", "fp32"})
      for (const char* cache_dtype : {"auto", "fp8_e4m3", "fp8_e5m2"}) {
        const Spec spec = mla_spec(index, layout, dtype, cache_dtype);
        expect_token_counts(spec, index,
                            fmt::format("mla {} {} cache {} D{}/{} {} Hq{} rank {}", layout, dtype, cache_dtype,
                                        spec.head_dim, spec.rotary_dim, to_string(spec.rotary_slice),
                                        spec.num_q_heads, spec.mla_append.kv_lora_rank));
        ++index;
      }
  EXPECT_EQ(index, 18);
}

TEST_P(MlaLatentAppend, EveryConfig) {
  EXPECT_GE(expect_every_config(mla_spec(0, "interleaved", "bf16", "fp8_e4m3"), {2, 4, 8}, {1, 3, 16}, 9), 9);
}

// concat_k (prefill's concat_mla_k): k_out [T, Hq, D] = each head's k_nope and the rotated k_pe,
// beside the q rotation and the latent row, over every shape (both slices, a whole neox slice),
// layouts, dtypes, q in place and q_out, FP8 and plain caches.
Spec mla_concat_spec(int index, const char* layout, const char* dtype, const char* cache_dtype) {
  nlohmann::json spec = mla_json(mla_fields(index, layout, dtype, cache_dtype), kShapes[index % std::size(kShapes)].kv_lora_rank);
  spec["mla_append"]["concat_k"] = true;
  return parse_spec(spec.dump());
}

TEST_P(MlaLatentAppend, ConcatKEveryShapeLayoutAndOutput) {
  int index = 0;
  for (const char* layout : {"interleaved", "neox"})
    for (const char* dtype : {"bf16", "fp32"})
      for (int shape = 0; shape < 4; ++shape) {
        const Spec spec = mla_concat_spec(index, layout, dtype, index % 3 == 2 ? "fp8_e4m3" : "auto");
        ASSERT_TRUE(spec.mla_append.concat_k);
        expect_token_counts(spec, index,
                            fmt::format("mla concat_k {} {} D{}/{} {} Hq{} q {}", layout, dtype, spec.head_dim,
                                        spec.rotary_dim, to_string(spec.rotary_slice), spec.num_q_heads,
                                        to_string(spec.io.q_output)));
        ++index;
      }
  EXPECT_EQ(index, 16);
}

// absorbed_q (decode with the absorbed W_UK): q_out [T, Hq, L + d] = each head's q_latent then its
// rotated q_pe, beside the latent row; the trailing-slice shapes, layouts, dtypes, cache dtypes.
Spec mla_absorbed_spec(int index, const char* layout, const char* dtype, const char* cache_dtype) {
  const int shape = index % 3;  // the trailing-slice shapes of kShapes
  nlohmann::json spec = mla_json(mla_fields(shape, layout, dtype, cache_dtype), kShapes[shape].kv_lora_rank);
  spec["mla_append"]["absorbed_q"] = true;
  spec["io"]["q_output"] = "separate";
  return parse_spec(spec.dump());
}

TEST_P(MlaLatentAppend, AbsorbedQEveryShapeLayoutAndCache) {
  int index = 0;
  for (const char* layout : {"interleaved", "neox"})
    for (const char* dtype : {"bf16", "fp32"})
      for (const char* cache_dtype : {"auto", "fp8_e4m3", "fp8_e5m2"}) {
        const Spec spec = mla_absorbed_spec(index, layout, dtype, cache_dtype);
        ASSERT_TRUE(spec.mla_append.absorbed_q);
        expect_token_counts(spec, index,
                            fmt::format("mla absorbed_q {} {} cache {} D{}/{} Hq{} rank {}", layout, dtype,
                                        cache_dtype, spec.head_dim, spec.rotary_dim, spec.num_q_heads,
                                        spec.mla_append.kv_lora_rank));
        ++index;
      }
  EXPECT_EQ(index, 12);
}

TEST_P(MlaLatentAppend, AbsorbedQEveryConfig) {
  EXPECT_GE(expect_every_config(mla_absorbed_spec(0, "interleaved", "bf16", "fp8_e4m3"), {2, 4, 8}, {1, 3, 16}, 9), 9);
}

TEST_P(MlaLatentAppend, ConcatKEveryConfig) {
  EXPECT_GE(expect_every_config(mla_concat_spec(0, "interleaved", "bf16", "auto"), {2, 4, 8}, {1, 3, 16}, 9), 9);
  EXPECT_GE(expect_every_config(mla_concat_spec(3, "neox", "fp16", "fp8_e4m3"), {2, 4, 8}, {1, 3}, 6), 6);
}

// io.cache_layout fp8_ds_mla (vLLM's row: kv_lora_rank FP8 codes, a float32 scale per 128, the
// rotated k_pe in the dtype): DeepSeek's shape and a leading slice of another width, both
// layouts, bf16 and fp16, computed scales as vLLM's or ue8m0, q in place, q_out, concat_k and
// absorbed_q; each part of the row against the reference (the harness checks every row byte).
Spec ds_mla_spec(int index, const char* layout, const char* dtype, const char* rounding) {
  const bool deepseek = index % 2 == 0;
  SpecFields f = mla_fields(deepseek ? 0 : 3, layout, dtype, "fp8_e4m3");
  f.positions = kPositions[index % 3];
  f.io_extra["cache_index"] = index % 4 == 3 ? "block_tables" : "slot_mapping";
  if (index % 4 == 3) f.positions = "varlen";
  f.io_extra["cache_layout"] = "fp8_ds_mla";
  if (std::string(rounding) != "none") f.io_extra["scale_rounding"] = rounding;
  nlohmann::json spec = mla_json(f, deepseek ? 512 : 1024);
  if (index % 3 == 2) spec["mla_append"]["concat_k"] = true;
  if (deepseek && index % 4 == 2) {
    spec["mla_append"] = {{"kv_lora_rank", 512}, {"absorbed_q", true}};
    spec["io"]["q_output"] = "separate";
  }
  return parse_spec(spec.dump());
}

TEST_P(MlaLatentAppend, DsMlaRowEveryLayoutDtypeRoundingAndForm) {
  int index = 0;
  for (const char* layout : {"interleaved", "neox"})
    for (const char* dtype : {"bf16", "fp16"})
      for (const char* rounding : {"none", "ue8m0"}) {
        const Spec spec = ds_mla_spec(index, layout, dtype, rounding);
        ASSERT_TRUE(ds_mla_cache(spec));
        expect_token_counts(spec, index,
                            fmt::format("mla fp8_ds_mla {} {} {} D{}/{} {} rank {} concat_k {} absorbed_q {}", layout,
                                        dtype, rounding, spec.head_dim, spec.rotary_dim, to_string(spec.rotary_slice),
                                        spec.mla_append.kv_lora_rank, spec.mla_append.concat_k,
                                        spec.mla_append.absorbed_q));
        ++index;
      }
  EXPECT_EQ(index, 8);
}

TEST_P(MlaLatentAppend, DsMlaRowEveryConfig) {
  EXPECT_GE(expect_every_config(ds_mla_spec(0, "interleaved", "bf16", "none"), {2, 4, 8}, {1, 3, 16}, 9), 9);
}

INSTANTIATE_TEST_SUITE_P(Backend, MlaLatentAppend, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// What the op rules out is refused by name, with the allowed set.
TEST(MlaAppendSpec, RefusesWhatTheOpCannotDo) {
  const nlohmann::json base = mla_json(mla_fields(0, "interleaved", "bf16", "auto"), 512);
  EXPECT_EQ(ropejit::test::spec_error(base), "accepted");
  EXPECT_EQ(parse_spec(base.dump()).mla_append.kv_lora_rank, 512);
  const std::pair<std::function<void(nlohmann::json&)>, std::string> cases[] = {
      {[](nlohmann::json& s) { s["mla_append"]["kv_lora_rank"] = 500; },
       "/mla_append/kv_lora_rank: 500 is not allowed: must be a multiple of 8"},
      {[](nlohmann::json& s) { s["mla_append"]["rank"] = 5; }, "/mla_append"},
      {[](nlohmann::json& s) { s["io"] = {{"output", "inplace"}}; },
       "/io/output: \"inplace\" is not allowed: must be \"paged_kv\" when op is mla_append"},
      {[](nlohmann::json& s) { s["num_kv_heads"] = 2; s["num_q_heads"] = 16; },
       "/num_kv_heads: 2 is not allowed: must be 1 (the one latent head)"},
      {[](nlohmann::json& s) { s["qk_norm"] = {{"type", "rmsnorm"}, {"eps", 1e-6}}; }, "/qk_norm: "},
      {[](nlohmann::json& s) { s["io"]["qkv_bias"] = true; }, "/io/qkv_bias: true is not allowed"},
      {[](nlohmann::json& s) { s["io"]["copy_v"] = true; }, "/io/copy_v: true is not allowed"},
      {[](nlohmann::json& s) { s["io"]["input"] = "packed_qkv"; }, "/io/input: \"packed_qkv\" is not allowed"},
      {[](nlohmann::json& s) { s["mla_append"]["concat_k"] = 1; }, "/mla_append/concat_k: "},
      {[](nlohmann::json& s) {
         s["mla_append"]["concat_k"] = true;
         s["head_dim"] = 64;
       },
       "/mla_append/concat_k: true is not allowed: must be false when rotary_dim equals head_dim 64"},
      {[](nlohmann::json& s) { s["mla_append"]["absorbed_q"] = true; },
       "/io/q_output: \"inplace\" is not allowed: must be \"separate\" when mla_append.absorbed_q is true"},
      {[](nlohmann::json& s) {
         s["mla_append"]["absorbed_q"] = true;
         s["io"]["q_output"] = "separate";
         s["rotary_slice"] = "leading";
       },
       "/rotary_slice: \"leading\" is not allowed: must be \"trailing\" when mla_append.absorbed_q is true"},
      {[](nlohmann::json& s) {
         s["mla_append"]["absorbed_q"] = true;
         s["mla_append"]["concat_k"] = true;
         s["io"]["q_output"] = "separate";
       },
       "/mla_append/concat_k: true is not allowed: must be false when mla_append.absorbed_q is true"},
      {[](nlohmann::json& s) { s["io"]["cache_layout"] = "fp8_ds_mla"; },
       "/io/cache_dtype: \"auto\" is not allowed: must be \"fp8_e4m3\" with cache_layout fp8_ds_mla"},
      {[](nlohmann::json& s) {
         s["io"]["cache_layout"] = "fp8_ds_mla";
         s["io"]["cache_dtype"] = "fp8_e4m3";
         s["mla_append"]["kv_lora_rank"] = 768;
       },
       "/mla_append/kv_lora_rank: 768 is not allowed: must be a multiple of 512 with cache_layout fp8_ds_mla"},
      {[](nlohmann::json& s) {
         s["io"]["cache_layout"] = "fp8_ds_mla";
         s["io"]["cache_dtype"] = "fp8_e4m3";
         s["dtype"] = "fp32";
       },
       "/dtype: \"fp32\" is not allowed: must be \"bf16\" or \"fp16\" with cache_layout fp8_ds_mla"},
      {[](nlohmann::json& s) {
         s["io"]["cache_layout"] = "fp8_ds_mla";
         s["io"]["cache_dtype"] = "fp8_e4m3";
         s["head_dim"] = 132;
         s["rotary_dim"] = 4;
       },
       "/rotary_dim: 4 is not allowed: must be a multiple of 8 with cache_layout fp8_ds_mla"},
      {[](nlohmann::json& s) { s["io"]["cache_dtype"] = "fp8_e4m3"; s["io"]["scale_rounding"] = "ue8m0"; },
       "/io/scale_rounding: \"ue8m0\" is not allowed: must be \"none\" unless a scale is computed"},
  };
  for (const auto& [edit, want] : cases) {
    nlohmann::json spec = base;
    edit(spec);
    const std::string error = ropejit::test::spec_error(spec);
    EXPECT_NE(error.find(want), std::string::npos) << spec.dump() << "\n" << error;
  }
  nlohmann::json other = base;  // the block under another op
  other.erase("op");
  other["io"] = {{"output", "inplace"}};
  EXPECT_NE(ropejit::test::spec_error(other).find("/mla_append"), std::string::npos) << ropejit::test::spec_error(other);
}

// op mla_append from an HF config: DeepSeek-V3's sizes give specs/deepseek-v3-mla.json's kernel
// (q heads 128 + 64 with the rope part trailing, one latent head, kv_lora_rank 512, paged 64);
// a config without MLA's head sizes is refused by name.
TEST(MlaAppendSpec, ImportsAnMlaConfigWhole) {
  const nlohmann::json config = {
      {"model_type", "deepseek_v3"},    {"hidden_size", 7168},         {"num_attention_heads", 128},
      {"num_key_value_heads", 128},     {"q_lora_rank", 1536},         {"kv_lora_rank", 512},
      {"qk_nope_head_dim", 128},        {"qk_rope_head_dim", 64},      {"v_head_dim", 128},
      {"max_position_embeddings", 163840},
      {"rope_scaling", {{"type", "yarn"}, {"factor", 40}, {"original_max_position_embeddings", 4096},
                        {"beta_fast", 32}, {"beta_slow", 1}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}}}};
  HfImportOptions options;
  options.name = "deepseek-v3-mla";
  options.op = OpKind::mla_append;
  const Spec imported = spec_from_hf(config, options);
  EXPECT_EQ(imported.head_dim, 192);
  EXPECT_EQ(imported.rotary_dim, 64);
  EXPECT_EQ(imported.rotary_slice, RotarySlice::trailing);
  EXPECT_EQ(imported.num_kv_heads, 1);
  EXPECT_EQ(imported.io.page_size, 64);
  EXPECT_EQ(spec_hash(imported), spec_hash(load_spec_file(ropejit::test::spec_path("deepseek-v3-mla"))));
  nlohmann::json plain = config;
  plain.erase("qk_nope_head_dim");
  try {
    spec_from_hf(plain, options);
    FAIL() << "a config without qk_nope_head_dim was imported as mla_append";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("qk_nope_head_dim: missing: op mla_append needs qk_nope_head_dim"),
              std::string::npos) << e.what();
  }
}
