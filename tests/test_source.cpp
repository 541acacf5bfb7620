// Generator: configs, plans and source text.
// ropejit-tier: unit
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "ropejit/embedded_templates.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

std::vector<Spec> matrix_specs() {
  std::vector<Spec> out;
  for (const char* layout : {"neox", "interleaved"})
    for (const char* dtype : {"fp32", "fp16", "bf16"})
      for (auto [D, d] : std::vector<std::pair<int, int>>{{64, 64}, {80, 32}, {96, 24}, {128, 128}, {256, 64}}) {
        SpecFields f;
        f.layout = layout;
        f.dtype = dtype;
        f.head_dim = D;
        f.rotary_dim = d;
        out.push_back(ropejit::test::make_spec(f));
      }
  return out;
}

}  // namespace

TEST(Source, DeterministicForSamePlan) {
  for (const auto& path : ropejit::test::spec_files()) {
    const Spec spec = load_spec_file(path);
    const Plan plan = make_plan(spec, default_config(spec));
    const Source a = generate_source(plan), b = generate_source(make_plan(spec, default_config(spec)));
    EXPECT_EQ(a.text, b.text) << path;
    EXPECT_EQ(a.hash, b.hash) << path;
    EXPECT_EQ(a.hash, hash_bytes(a.text + templates_hash().hex()));
  }
}

TEST(Source, ConfigChangesSource) {
  const Spec spec = ropejit::test::make_spec({});
  Config a = default_config(spec), b = a;
  b.block_threads = a.block_threads == 128 ? 256 : 128;
  EXPECT_NE(generate_source(make_plan(spec, a)).hash, generate_source(make_plan(spec, b)).hash);
}

TEST(Source, BakesExactFloatInvFreq) {
  SpecFields f;
  f.rope = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  f.max_position_embeddings = 131072;
  const Spec spec = ropejit::test::make_spec(f);
  const Plan plan = make_plan(spec, default_config(spec));
  const std::string text = generate_source(plan).text;
  const auto table_start = text.find("kInvFreq[64] = {");
  ASSERT_NE(table_start, std::string::npos) << text;
  std::regex hex_float(R"((-?0x[0-9a-f.]+p[+-]?\d+)f)");
  std::vector<float> baked;
  const std::string table = text.substr(table_start, text.find("};", table_start) - table_start);
  for (auto it = std::sregex_iterator(table.begin(), table.end(), hex_float); it != std::sregex_iterator(); ++it)
    baked.push_back(std::strtof((*it)[1].str().c_str(), nullptr));
  ASSERT_EQ(baked.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(baked[i], static_cast<float>(plan.freqs.inv_freq[i])) << i;
}

TEST(Source, ThinOneEntryNoKernelBody) {
  const Spec spec = ropejit::test::make_spec({});
  const std::string text = generate_source(make_plan(spec, default_config(spec))).text;
  EXPECT_EQ(text.find("for ("), std::string::npos) << "kernel logic belongs in templates/";
  std::regex entry(R"(extern "C" __global__)");
  EXPECT_EQ(std::distance(std::sregex_iterator(text.begin(), text.end(), entry), std::sregex_iterator()), 1);
  EXPECT_NE(text.find("#include \"ropejit/rope.cuh\""), std::string::npos);
}

TEST(Config, DefaultIsValidForEverySpec) {
  for (const auto& path : ropejit::test::spec_files()) {
    const Spec spec = load_spec_file(path);
    EXPECT_FALSE(config_problem(spec, default_config(spec))) << path;
  }
  for (const Spec& spec : matrix_specs()) {
    const Config c = default_config(spec);
    EXPECT_FALSE(config_problem(spec, c)) << spec.head_dim << "/" << spec.rotary_dim;
    EXPECT_LE(c.vec * dtype_size(spec.dtype), 16);
  }
}

TEST(Config, ProblemsAreNamed) {
  SpecFields f;
  f.head_dim = 96;
  f.rotary_dim = 24;  // GPT-NeoX: the rotated half is 12, the slice 3 vectors of 8
  const Spec spec = ropejit::test::make_spec(f);
  Config c = default_config(spec);
  EXPECT_EQ(c.vec, 8);  // one lane rotates the whole slice in 16-byte accesses
  EXPECT_TRUE(work_shape(spec, c).whole_slice);
  f.head_dim = 160;
  f.rotary_dim = 40;  // half 20: vec 8 would take 5 vectors per lane, over the cap
  const Spec wide_spec = ropejit::test::make_spec(f);
  c = default_config(wide_spec);
  EXPECT_EQ(c.vec, 4);
  EXPECT_FALSE(work_shape(wide_spec, c).whole_slice);
  c.vec = 8;
  auto problem = config_problem(wide_spec, c);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("rotated half 20"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("at most 4 vectors"), std::string::npos) << *problem;
  c = default_config(spec);
  c.block_threads = 100;
  ASSERT_TRUE(config_problem(spec, c));
  EXPECT_NE(config_problem(spec, c)->find("multiple of 32"), std::string::npos);
  try {
    make_plan(spec, c);
    FAIL() << "make_plan accepted an invalid config";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::unsupported);
  }
  SpecFields fp32;
  fp32.dtype = "fp32";
  Config wide = default_config(ropejit::test::make_spec(fp32));
  EXPECT_EQ(wide.vec, 4);
  wide.vec = 8;
  EXPECT_TRUE(config_problem(ropejit::test::make_spec(fp32), wide));
}

TEST(Config, TableModeRejectedForRunTimeFrequencies) {
  SpecFields f;
  f.rope = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}};
  const Spec spec = ropejit::test::make_spec(f);
  Config c = default_config(spec);
  c.sincos = SinCosMode::table;
  ASSERT_TRUE(config_problem(spec, c));
}

TEST(Config, JsonRoundTripAndErrors) {
  Config c;
  c.block_threads = 512;
  c.vec = 4;
  c.heads_per_thread = 8;
  c.sincos = SinCosMode::table;
  c.grid = GridMode::persistent;
  EXPECT_EQ(config_from_json(config_to_json(c)), c);
  EXPECT_EQ(config_name(c), "bt512.v4.h8.table.persistent");
  try {
    config_from_json(R"({"vec": 4, "blok_threads": 3})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "/blok_threads");
  }
  try {
    config_from_json(R"({"sincos": "fast"})");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compute | table"), std::string::npos) << e.what();
  }
}

// Issue 15: a launch config of JSON nested 100k deep, or an integer beyond int, is refused
// (never a stack overflow in a message, never wrapped into a valid value); quotes are clipped.
TEST(Config, JsonRefusesDeepNestingAndIntegersBeyondInt) {
  try {
    config_from_json(std::string(100000, '['));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("nesting deeper than 64"), std::string::npos) << e.what();
  }
  try {
    config_from_json(std::string(100000, 'x'));
    FAIL();
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 400u) << "the text quoted whole";
  }
  try {
    config_from_json(R"({"block_threads": 4294967552})");  // 2^32 + 256 wrapped to 256
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "/block_threads");
    EXPECT_NE(std::string(e.what()).find("4294967552 is not allowed"), std::string::npos) << e.what();
  }
}

// Defence in depth behind spec validation: a non-finite value would print as "inff"/"nanf",
// which does not compile; the emitter refuses it naming the constant.
TEST(Source, NonFiniteLiteralsAreRefusedNamingTheConstant) {
  const Spec spec = ropejit::test::make_spec(SpecFields{});
  Plan plan = make_plan(spec, default_config(spec));
  plan.freqs.attention_factor = 1e300;  // finite in double, inf in float32
  try {
    generate_source(plan);
    FAIL() << "emitted an infinite attention factor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kAttentionFactor = 1e+300 is no finite float32"), std::string::npos)
        << e.what();
  }
  plan = make_plan(spec, default_config(spec));
  plan.freqs.inv_freq[3] = std::nan("");
  try {
    generate_source(plan);
    FAIL() << "emitted a NaN inv_freq";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kInvFreq[3] = nan"), std::string::npos) << e.what();
  }
}

TEST(Config, WorkShapeCoversEveryElement) {
  for (const Spec& spec : matrix_specs()) {
    const Config c = default_config(spec);
    const WorkShape w = work_shape(spec, c);
    // Each rotating lane covers pairs_per_lane pairs (2 elements each); together, [0, d).
    EXPECT_EQ(w.rot_lanes * w.pairs_per_lane * 2, spec.rotary_dim);
    EXPECT_EQ(w.whole_slice, spec.layout == Layout::neox && (spec.rotary_dim / 2) % c.vec != 0);
    EXPECT_GE(w.head_groups * c.heads_per_thread, w.heads);
    const LaunchDims dims = launch_dims(spec, c, 1000, 132);
    EXPECT_GE(int64_t(dims.grid) * dims.block, int64_t(1000) * w.head_groups * w.lanes);
  }
}

// Role slots (shape.cuh) exactly where every slot of a thread holds one role: one head group per
// kv head, Hq a multiple of Hkv; the default for FP8 appends where that is so, FP8 re-rotations
// take up to 8 kv heads a thread.
TEST(Config, RoleSlotsWhereEverySlotHasOneRole) {
  const Spec qwen = load_spec_file(ropejit::test::source_dir() + "/specs/qwen3-8b-paged-fp8.json");
  Config c = default_config(qwen);
  EXPECT_EQ(c.heads_per_thread, 6);  // 32 q + 8 k + 8 v heads, 8 kv heads
  WorkShape w = work_shape(qwen, c);
  EXPECT_TRUE(w.role_slots);
  EXPECT_EQ(w.q_slots, 4);
  EXPECT_EQ(w.head_groups, 8);
  c.heads_per_thread = 4;  // 12 groups: slot 2 holds q heads and k heads
  EXPECT_FALSE(work_shape(qwen, c).role_slots);
  const Spec shift = load_spec_file(ropejit::test::source_dir() + "/specs/llama-3.1-8b-context-shift.json");
  EXPECT_EQ(default_config(shift).heads_per_thread, 8);
  EXPECT_FALSE(work_shape(shift, default_config(shift)).role_slots);  // k heads only
  SpecFields f;
  f.output = "paged_kv";
  f.copy_v = true;
  f.io_extra = {{"cache_dtype", "fp8_e5m2"}, {"page_size", 16}};
  f.num_q_heads = 32;
  f.num_kv_heads = 1;  // MQA: 34 heads a thread would leave too few threads
  EXPECT_EQ(default_config(ropejit::test::make_spec(f)).heads_per_thread, 4);
  f.num_kv_heads = 8;
  EXPECT_EQ(default_config(ropejit::test::make_spec(f)).heads_per_thread, 6);
  f.io_extra["cache_dtype"] = "auto";  // a bf16 cache keeps the general default
  EXPECT_EQ(default_config(ropejit::test::make_spec(f)).heads_per_thread, 4);
  f.output = "inplace";  // role slots by config only: 32 q and 8 k heads, 5 a thread
  f.copy_v = false;
  f.io_extra = nullptr;
  c = default_config(ropejit::test::make_spec(f));
  EXPECT_FALSE(work_shape(ropejit::test::make_spec(f), c).role_slots);
  c.heads_per_thread = 5;
  EXPECT_TRUE(work_shape(ropejit::test::make_spec(f), c).role_slots);
}

TEST(Config, PersistentGridIsTheResidentBlocks) {
  const Spec spec = load_spec_file(ropejit::test::source_dir() + "/specs/llama-3.1-8b.json");
  Config c = default_config(spec);
  c.block_threads = 256;
  c.grid = GridMode::persistent;
  const int64_t rows = 1 << 20;  // far more work than one wave
  // The occupancy the loaded kernel reaches (e.g. 3 blocks of 256 at 80 registers) sizes it.
  EXPECT_EQ(launch_dims(spec, c, rows, 132, 3).grid, 132u * 3);
  EXPECT_EQ(launch_dims(spec, c, rows, 132, 1).grid, 132u);
  // Unknown occupancy: the thread limit's bound, 2048 / 256 = 8 blocks per SM.
  EXPECT_EQ(launch_dims(spec, c, rows, 132).grid, 132u * 8);
  // Small launches stay one block per 256 items.
  const int64_t items = work_items(work_shape(spec, c), 3);
  EXPECT_EQ(launch_dims(spec, c, 3, 132, 3).grid, unsigned((items + 255) / 256));
  // Blocks mode ignores the occupancy.
  c.grid = GridMode::blocks;
  EXPECT_EQ(launch_dims(spec, c, rows, 132, 3).grid, launch_dims(spec, c, rows, 132).grid);
}

TEST(Config, BytesMovedCountsEveryReadAndWriteOnce) {
  const Spec padded = load_spec_file(ropejit::test::source_dir() + "/specs/qwen2.5-7b-padded.json");
  // 13 tokens in 2 sequences, S = 10: reads 13 rows, writes 20 rows (padding included) of
  // 28 q + 4 k + 4 v heads × 128 bf16; the bias once; cu_seqlens[3] int32 + start_pos[2] int64.
  const int64_t row = (28 + 4 + 4) * 128 * 2;
  EXPECT_EQ(bytes_moved(padded, 13, 2, 10), (13 + 20) * row + row + 3 * 4 + 2 * 8);
  // Llama-3.1-8B in place: only the rotated elements move; explicit int32 positions.
  const Spec llama = load_spec_file(ropejit::test::source_dir() + "/specs/llama-3.1-8b.json");
  EXPECT_EQ(bytes_moved(llama, 1000, 0, 0), 1000 * (2 * 40 * 128 * 2 + 4));
  // GPT-NeoX in place rotates 24 of 96: the untouched tail is not counted.
  const Spec neox = load_spec_file(ropejit::test::source_dir() + "/specs/gpt-neox-20b.json");
  EXPECT_EQ(bytes_moved(neox, 10, 0, 0), 10 * (2 * 128 * 24 * 2 + 4));
}

TEST(Source, LaunchOnlyFieldsShareOneSource) {
  const Spec spec = ropejit::test::make_spec({});
  Config blocks = default_config(spec), persistent = blocks;
  persistent.grid = GridMode::persistent;
  EXPECT_EQ(generate_source(make_plan(spec, blocks)).hash, generate_source(make_plan(spec, persistent)).hash);
}

// The cache key covers the templates: the embedded hash is the hash of templates/ as it is on
// disk, and changing one byte of one header changes it (so every Source hash and disk key).
TEST(Source, TemplatesHashCoversEveryTemplateByte) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, std::string>> files;
  const fs::path root = fs::path(ropejit::test::source_dir()) / "templates";
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().extension() != ".cuh") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    files.emplace_back(fs::relative(entry.path(), root).generic_string(), text.str());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), embedded_templates().size());
  std::vector<EmbeddedFile> on_disk;
  for (const auto& [name, text] : files) on_disk.push_back({name, text});
  EXPECT_EQ(hash_templates(on_disk), templates_hash());

  for (size_t f = 0; f < on_disk.size(); ++f) {
    std::string edited = files[f].second;
    edited[edited.size() / 2] ^= 1;
    std::vector<EmbeddedFile> changed = on_disk;
    changed[f].text = edited;
    EXPECT_NE(hash_templates(changed), templates_hash()) << files[f].first;
  }
}

// Found by the spec fuzzer: an odd head_dim left vectors misaligned in every other head, and
// an explicit dense stride (not a multiple of vec) was refused while 0 was accepted.
TEST(Config, DefaultVectorDividesTheHeadSoEveryHeadIsAligned) {
  SpecFields f;
  f.head_dim = 769;
  f.rotary_dim = 256;
  const Spec spec = ropejit::test::make_spec(f);
  const Config c = default_config(spec);
  EXPECT_EQ(c.vec, 1);
  EXPECT_FALSE(config_problem(spec, c));
  Config wide = c;
  wide.vec = 8;
  ASSERT_TRUE(config_problem(spec, wide));
  EXPECT_NE(config_problem(spec, wide)->find("head_dim 769"), std::string::npos);

  f.layout = "interleaved";
  try {
    ropejit::test::make_spec(f);
    FAIL() << "interleaved with an odd head_dim was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/head_dim"), std::string::npos) << e.what();
  }
}
