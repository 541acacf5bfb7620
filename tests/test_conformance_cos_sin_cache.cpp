// The caller's cos/sin (io.angles cos_sin_cache, vLLM's and FlashInfer's cos_sin_cache
// [rows, rotary_dim]): each token rotates by its position's row, widened from the cache's dtype,
// checked against the float64 reference on fresh random inputs, a fresh random cache (any finite
// numbers: nothing may assume unit pairs or recompute them) and poisoned outputs: pairing x
// partial rotary x GQA x cache dtype x io forms (separate, in place, packed qkv with bias, padded,
// QK-norm, paged KV append, FP8 q_out, MRoPE's three streams), odd token counts and cache sizes; a
// position without a row rotates to NaN; and the spec's refusals of rope fields the cache leaves
// without effect.
// ropejit-tier: conformance
// ropejit-tier: unit CosSinCacheSpec
// ropejit-tier: compile CosSinCacheCompile
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/introspect.h"
#include "ropejit/runtime.h"
#include "support/build_paths.h"
#include "support/conformance_fixture.h"
#include "support/repo_paths.h"
#include "support/run_command.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

class CosSinCache : public ropejit::test::BackendConformance {};

using ropejit::test::HeadShape;
// Full rotation with GQA 4:1, partial rotary (Phi-2-like 80/32, GLM-like 128/64), MHA, one kv head.
const HeadShape kHeadShapes[] = {{128, 128, 8, 2}, {80, 32, 4, 4}, {128, 64, 6, 1}, {64, 64, 4, 2}};

// A spec whose angles come from the caller's cache of `cache_dtype`; `index` varies the shape.
SpecFields cache_fields(int index, const char* layout, const char* dtype, const char* cache_dtype) {
  SpecFields f = ropejit::test::shaped_fields("cos-sin-cache", kHeadShapes[index % std::size(kHeadShapes)], layout,
                                              dtype, index);
  f.angle.clear();  // absent: no angle is computed
  f.rope = {{"rope_type", "default"}};
  f.io_extra = {{"angles", "cos_sin_cache"}, {"cos_sin_dtype", cache_dtype}};
  return f;
}

// Three position streams over the rotary pairs: Qwen2-VL's sections (temporal first, the rest split)
// or Qwen3-VL's interleaved ones; in place or into separate outputs.
void mrope(SpecFields& f, int index, bool interleaved) {
  const int half = f.rotary_dim / 2;
  f.positions = "mrope";
  f.mrope_section = {half - 2 * (half / 3), half / 3, half / 3};
  f.mrope_interleaved = interleaved;
  if (index % 2) f.output = "separate";
}

// One io form of a case: the fields it sets on top of cache_fields.
struct IoForm {
  const char* name;
  void (*apply)(SpecFields& f, int index);
};

const IoForm kIoForms[] = {
    {"separate", [](SpecFields& f, int) { f.output = "separate"; }},
    {"inplace", [](SpecFields& f, int index) { f.positions = index % 2 ? "offset" : "explicit"; }},
    {"packed_qkv+bias",
     [](SpecFields& f, int) {
       f.input = "packed_qkv";
       f.qkv_bias = true;
       f.copy_v = true;
     }},
    {"padded_bhsd",
     [](SpecFields& f, int) {
       f.output = "padded_bhsd";
       f.positions = "varlen";
     }},
    {"qk_norm",
     [](SpecFields& f, int index) {
       f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}, {"scope", index % 2 ? "all" : "head"}};
     }},
    {"paged_kv",
     [](SpecFields& f, int index) {
       f.output = "paged_kv";
       f.positions = index % 2 ? "varlen" : "explicit";
       f.io_extra.update({{"page_size", index % 2 ? 16 : 5},
                          {"cache_dtype", index % 3 ? "auto" : "fp8_e4m3"},
                          {"cache_index", index % 2 ? "block_tables" : "slot_mapping"},
                          {"q_output", index % 4 < 2 ? "inplace" : "separate"}});
     }},
    {"fp8_q_out",
     [](SpecFields& f, int index) {
       f.output = "separate";
       f.io_extra.update({{"q_output_dtype", index % 2 ? "fp8_e5m2" : "fp8_e4m3"},
                          {"q_scale", index % 3 ? "static" : "per_token_head"}});
     }},
    // vLLM's MRotaryEmbedding: positions [3, T], each pair reads its section's stream's row.
    {"mrope", [](SpecFields& f, int index) { mrope(f, index, false); }},
    {"mrope_interleaved", [](SpecFields& f, int index) { mrope(f, index, true); }},
};

const char* const kCacheDtypes[] = {"fp32", "bf16", "fp16"};
const char* const kDtypes[] = {"bf16", "fp16", "fp32"};

}  // namespace

// Every io form under both pairings, each with a cache dtype, storage dtype and head shape of its
// own (the index walks them), on 1, 7 and 201 tokens; strided rows every other case.
TEST_P(CosSinCache, EveryIoFormPairingAndCacheDtype) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const IoForm& form : kIoForms) {
      const char* cache_dtype = kCacheDtypes[index % 3];
      const char* dtype = kDtypes[(index / 3) % 3];
      SpecFields f = cache_fields(index, layout, dtype, cache_dtype);
      form.apply(f, index);
      const Spec spec = ropejit::test::make_spec(f);
      ASSERT_TRUE(caller_cos_sin(spec));
      const Kernel kernel = runtime().get(spec);
      for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(201)}) {
        check::CaseOptions o;
        o.tokens = tokens;
        o.strided = index % 2 == 1 && f.output != "padded_bhsd" && f.output != "paged_kv";
        o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
        expect_case(kernel, o,
                    fmt::format("{} {} {} cache {} D{}/{} Hq{} Hkv{}", form.name, layout, dtype, cache_dtype,
                                f.head_dim, f.rotary_dim, f.num_q_heads, f.num_kv_heads));
      }
      ++index;
    }
  EXPECT_EQ(index, 18);
}

// Every vector width and heads per thread of one GQA shape: each lane map reads its pairs' row.
TEST_P(CosSinCache, EveryConfigOfOneShape) {
  for (const char* layout : {"neox", "interleaved"}) {
    SpecFields f = cache_fields(0, layout, "bf16", "fp32");
    EXPECT_GE(expect_every_config(ropejit::test::make_spec(f), {2, 4, 8}, {1, 2, 4}, 13), 6) << layout;
  }
}

// Positions past the cache's rows (and a cache of one row): those tokens' rotated elements come
// out NaN, the others (and every pass-through element, v, padding) as usual; nothing past the
// cache is read (the workload allocates exactly its rows: sanitizers see any read beyond).
TEST_P(CosSinCache, PositionsWithoutARowRotateToNan) {
  int index = 0;
  for (const char* output : {"inplace", "separate", "paged_kv", "padded_bhsd"})
    for (int64_t rows : {int64_t(1), int64_t(97)}) {
      SpecFields f = cache_fields(index + 1, index % 2 ? "interleaved" : "neox", "bf16", kCacheDtypes[index % 3]);
      f.output = output;
      if (f.output == "paged_kv") f.io_extra.update({{"page_size", 16}});
      if (f.output == "padded_bhsd") f.positions = "varlen";
      const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
      check::CaseOptions o;
      o.tokens = 57;
      o.max_position = 200;  // about half the tokens past 97 rows, all but position 0 past 1
      o.cos_sin_rows = rows;
      expect_case(kernel, o, fmt::format("{} with {} cache rows", output, rows));
      ++index;
    }
  for (bool interleaved : {false, true}) {  // mrope: only the pairs whose stream has no row are NaN
    SpecFields f = cache_fields(interleaved ? 0 : 2, "neox", "bf16", "fp32");
    mrope(f, 1, interleaved);
    check::CaseOptions o;
    o.tokens = 57;
    o.max_position = 200;
    o.cos_sin_rows = 97;
    expect_case(runtime().get(ropejit::test::make_spec(f)), o, fmt::format("mrope interleaved {}", interleaved));
  }
}

// NVRTC has nothing to say about the cache's kernels (no unreachable code, no spills), for every
// io form, pairing and cache dtype of the conformance cases.
TEST(CosSinCacheCompile, EveryIoFormCompilesCleanForSm90) {
  int index = 0;
  for (const char* layout : {"neox", "interleaved"})
    for (const IoForm& form : kIoForms) {
      SpecFields f = cache_fields(index, layout, kDtypes[(index / 3) % 3], kCacheDtypes[index % 3]);
      form.apply(f, index++);
      const Spec spec = ropejit::test::make_spec(f);
      const Binary b = compile_nvrtc(generate_source(make_plan(spec, default_config(spec))), "sm_90");
      EXPECT_EQ(b.log.find("warning"), std::string::npos) << form.name << " " << layout << "\n" << b.log;
      EXPECT_EQ(b.spill_bytes, 0) << form.name << " " << layout << "\n" << b.log;
    }
}

INSTANTIATE_TEST_SUITE_P(Backend, CosSinCache, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---------------------------------------------------------------- the spec and the launch fields

namespace {

std::string cache_spec_error(const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json spec = ropejit::test::spec_json(cache_fields(0, "neox", "bf16", "bf16"));
  change(spec);
  return ropejit::test::spec_error(spec);
}

}  // namespace

// The form is read, written canonically (and read back to the same hash).
TEST(CosSinCacheSpec, ReadAndCanonical) {
  const Spec spec = ropejit::test::make_spec(cache_fields(0, "neox", "bf16", "fp16"));
  EXPECT_EQ(spec.io.angles, AnglesSource::cos_sin_cache);
  EXPECT_EQ(spec.io.cos_sin_dtype, DType::fp16);
  const std::string canonical = canonical_json(spec);
  EXPECT_NE(canonical.find("\"angles\":\"cos_sin_cache\""), std::string::npos) << canonical;
  EXPECT_EQ(canonical.find("rope_theta"), std::string::npos) << canonical;
  EXPECT_EQ(spec_hash(parse_spec(canonical)).hex(), spec_hash(spec).hex());
  // The default: computed angles, fp32 cache dtype, neither written.
  SpecFields computed;
  const Spec plain = ropejit::test::make_spec(computed);
  EXPECT_EQ(plain.io.angles, AnglesSource::computed);
  EXPECT_EQ(canonical_json(plain).find("angles"), std::string::npos);
}

// Rope fields the cache would leave without effect are refused naming the field, the value and why.
TEST(CosSinCacheSpec, RefusesFieldsTheCacheIgnores) {
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> change;
    std::vector<std::string> says;
  };
  const Case cases[] = {
      {"rope_theta", [](nlohmann::json& s) { s["rope"]["rope_theta"] = 10000.0; },
       {"/rope/rope_theta", "10000", "cos_sin_cache", "ignored", "rope_type: \"default\""}},
      {"yarn", [](nlohmann::json& s) { s["rope"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
       {"/rope/rope_type", "yarn", "\"default\"", "/rope/factor"}},
      {"attention_factor", [](nlohmann::json& s) { s["rope"]["attention_factor"] = 1.2; },
       {"/rope/attention_factor", "1.2", "attention factor included"}},
      {"angle", [](nlohmann::json& s) { s["angle"] = "exact"; }, {"/angle", "exact", "ignored"}},
      {"no rope_type", [](nlohmann::json& s) { s["rope"] = nlohmann::json::object(); },
       {"/rope/rope_type", "missing"}},
      {"other op", [](nlohmann::json& s) { s["op"] = "inverse_rope"; },
       {"/io/angles", "cos_sin_cache", "op is inverse_rope", "op rope so far"}},
      {"dtype", [](nlohmann::json& s) { s["io"]["cos_sin_dtype"] = "fp64"; }, {"/io/cos_sin_dtype", "fp64", "bf16"}},
      {"dtype without cache", [](nlohmann::json& s) { s["io"].erase("angles"); },
       {"/io/cos_sin_dtype", "absent unless io.angles is \"cos_sin_cache\""}},
      {"angles value", [](nlohmann::json& s) { s["io"]["angles"] = "table"; },
       {"/io/angles", "table", "computed", "cos_sin_cache"}},
  };
  for (const Case& c : cases) {
    const std::string error = cache_spec_error(c.change);
    for (const std::string& part : c.says) EXPECT_NE(error.find(part), std::string::npos) << c.what << ": " << error;
  }
}

// The launch takes cos_sin_cache [cos_sin_rows, d] of the cache dtype and its row count; a
// computed-angles spec refuses both; bytes moved count one cache row per token.
TEST(CosSinCacheSpec, LaunchFieldsAndBytesMoved) {
  const Spec spec = ropejit::test::make_spec(cache_fields(1, "neox", "bf16", "fp16"));
  bool cache = false, rows = false;
  for (const LaunchField& field : launch_fields(spec)) {
    if (field.name == "cos_sin_cache") {
      cache = true;
      EXPECT_EQ(field.use, FieldUse::required);
      EXPECT_EQ(field.dtype, "fp16");
      ASSERT_EQ(field.dims.size(), 2u);
      EXPECT_EQ(field.dims[0], "cos_sin_rows");
      EXPECT_EQ(field.dims[1], "d");
      EXPECT_FALSE(field.written);
    }
    if (field.name == "cos_sin_cache_rows") rows = field.use == FieldUse::required;
  }
  EXPECT_TRUE(cache && rows);
  SpecFields computed = cache_fields(1, "neox", "bf16", "fp16");
  computed.io_extra = nullptr;
  computed.rope["rope_theta"] = 10000.0;
  const Spec plain = ropejit::test::make_spec(computed);
  for (const LaunchField& field : launch_fields(plain))
    if (field.name == "cos_sin_cache" || field.name == "cos_sin_cache_rows") EXPECT_EQ(field.use, FieldUse::unused);
  // One row of rotary_dim fp16 values a token on top of the computed form's bytes.
  EXPECT_EQ(bytes_moved(spec, 10, 0, 0) - bytes_moved(plain, 10, 0, 0), 10 * spec.rotary_dim * 2);
}

// `ropejit freqs` has no table to show for the caller's angles: it says so instead of printing
// frequencies no launch uses.
TEST(CosSinCacheSpec, FreqsCommandRefusesTheCallersAngles) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: built without the ropejit command";
  const auto [rc, out] = ropejit::test::run_command(
      cli + " freqs '" + ropejit::test::spec_path("llama-3.1-8b-cos-sin-cache") + "' 2>&1");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("io.angles cos_sin_cache is not allowed"), std::string::npos) << out;
}
