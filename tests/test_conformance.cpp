// Conformance suite (host backend): generated kernels vs the independent float64 reference on
// fresh random inputs with poisoned outputs, over layouts × dtypes × head dims × partial
// rotary × GQA × every rope_type × positions × token counts × both angle modes.
// ropejit-tier: conformance
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/check/harness.h"
#include "support/conformance_fixture.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

struct Shape {
  int head_dim, rotary_dim;
};
const Shape kShapes[] = {{64, 64}, {80, 80}, {96, 96}, {128, 128}, {256, 256},
                         {96, 24}, {128, 32}, {80, 32}, {256, 64}, {128, 64}};
const int kGqaRatios[] = {1, 4, 7, 8};
const char* const kDtypes[] = {"fp32", "fp16", "bf16"};

// The suite runs on both backends: host everywhere, cuda where a GPU is usable (the GPU tier).
class Conformance : public ropejit::test::BackendConformance {};

// The fields every matrix case varies: shape, layout, dtype; GQA ratio and angle mode rotate
// with the case index.
SpecFields case_fields(const char* name, const char* layout, const char* dtype, int head_dim, int rotary_dim,
                       int index, int kv_choices) {
  SpecFields f;
  f.name = name;
  f.layout = layout;
  f.dtype = dtype;
  f.head_dim = head_dim;
  f.rotary_dim = rotary_dim;
  f.num_kv_heads = 1 + index % kv_choices;
  f.num_q_heads = f.num_kv_heads * kGqaRatios[index % 4];
  f.angle = index % 2 ? "exact" : "fp32";
  f.max_position_embeddings = 4096;
  return f;
}

}  // namespace

// Every rope_type × layout × dtype, with head shape, GQA ratio, angle mode and positions form
// rotating through their values; each kernel runs at 1, 3, 17 and 1000+ tokens.
TEST_P(Conformance, Matrix) {
  std::mt19937 rng(std::random_device{}());
  int index = 0;
  const size_t rope_count = ropejit::test::rope_blocks_for_every_type(64, 8192).size();
  for (size_t rope_index = 0; rope_index < rope_count; ++rope_index)
    for (const char* layout : {"neox", "interleaved"})
      for (const char* dtype : kDtypes) {
        const Shape shape = kShapes[index % std::size(kShapes)];
        SpecFields f = case_fields("matrix", layout, dtype, shape.head_dim, shape.rotary_dim, index, 3);
        ropejit::test::set_rope(f, ropejit::test::rope_blocks_for_every_type(shape.rotary_dim,
                                                                             f.max_position_embeddings)[rope_index]);
        const int positions_form = index % 4;  // int32, int64, varlen, offset
        f.positions = positions_form == 2 ? "varlen" : positions_form == 3 ? "offset" : "explicit";
        const Spec spec = ropejit::test::make_spec(f);
        const Kernel kernel = runtime().get(spec);
        for (int64_t tokens : {int64_t(1), int64_t(3), int64_t(17), int64_t(1000 + rng() % 200)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.positions_type = positions_form == 1 ? PositionsType::int64 : PositionsType::int32;
          // Past M for half the cases, so dynamic NTK and the long LongRoPE table are exercised.
          o.max_position = (index + tokens) % 2 ? 3 * f.max_position_embeddings : f.max_position_embeddings;
          expect_case(kernel, o, std::string(to_string(spec.rope.type)) + " " + layout + " " + dtype);
        }
        ++index;
      }
  EXPECT_EQ(index, static_cast<int>(rope_count * 6));
}

// The exact angle mode stays exact at positions up to 2^20; the fp32 mode matches HF's
// float32 product there too.
TEST_P(Conformance, LargePositionsBothAngleModes) {
  for (const char* angle : {"exact", "fp32"})
    for (const char* dtype : {"fp32", "bf16"}) {
      SpecFields f;
      f.angle = angle;
      f.dtype = dtype;
      f.max_position_embeddings = 1 << 20;
      f.rope = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
      const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
      check::CaseOptions o;
      o.tokens = 257;
      o.max_position = int64_t(1) << 20;
      o.positions_type = PositionsType::int64;
      expect_case(kernel, o, std::string(angle) + " " + dtype);
    }
}

// Offset positions (one sequence at start_pos[0]): every input/output form it allows, decode
// (T = 1) and prefill sizes, positions past M so dynamic NTK takes its run-time base.
TEST_P(Conformance, OffsetPositions) {
  int index = 0;
  for (const char* input : {"separate", "packed_qkv"})
    for (const char* output : {"inplace", "separate"})
      for (bool bias : {false, true}) {
        SpecFields f;
        f.positions = "offset";
        f.input = input;
        f.output = output;
        f.qkv_bias = bias;
        // Packed input with a separate output or a bias moves v too (the spec requires it).
        f.copy_v = std::string(input) == "packed_qkv" && (std::string(output) != "inplace" || bias);
        f.dtype = kDtypes[index % 3];
        f.layout = index % 2 ? "interleaved" : "neox";
        f.rope = index % 2 ? nlohmann::json{{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}}
                           : nlohmann::json{{"rope_type", "default"}, {"rope_theta", 500000.0}};
        const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
        for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(300)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.max_position = 4 * f.max_position_embeddings;
          expect_case(kernel, o, std::string(input) + " " + output + (bias ? " bias" : ""));
        }
        ++index;
      }
}

// Multimodal positions [3, T] (Qwen2-VL contiguous sections, Qwen3-VL interleaved) crossed with
// layout, dtype, partial rotary, GQA, scaling type, input/output forms, bias, both position
// types, both sincos modes and both angle modes; every element checked at decode and prefill sizes.
TEST_P(Conformance, MropePositions) {
  struct MropeShape {
    int head_dim, rotary_dim;
    std::vector<int> contiguous, interleaved;  // each sums to rotary_dim / 2
  };
  const MropeShape shapes[] = {{128, 128, {16, 24, 24}, {24, 20, 20}},
                               {80, 64, {8, 12, 12}, {12, 10, 10}},
                               {64, 64, {10, 11, 11}, {12, 10, 10}},
                               {96, 32, {4, 6, 6}, {6, 5, 5}}};
  const char* const rope_types[] = {"default", "linear", "yarn", "llama3", "ntk"};
  int index = 0;
  for (int round = 0; round < 2; ++round)
  for (bool interleaved : {false, true})
    for (const char* layout : {"neox", "interleaved"})
      for (const char* dtype : kDtypes) {
        const MropeShape& shape = shapes[(index + round) % std::size(shapes)];
        SpecFields f = case_fields("mrope", layout, dtype, shape.head_dim, shape.rotary_dim, index, 2);
        f.positions = "mrope";
        f.mrope_section = interleaved ? shape.interleaved : shape.contiguous;
        f.mrope_interleaved = interleaved;
        const std::string rope_type = rope_types[index % std::size(rope_types)];
        for (const auto& block : ropejit::test::rope_blocks_for_every_type(shape.rotary_dim, f.max_position_embeddings))
          if (block["rope_type"] == rope_type) f.rope = block;
        f.input = index % 4 == 1 ? "packed_qkv" : "separate";
        f.output = index % 3 == 2 ? "separate" : "inplace";
        f.qkv_bias = index % 5 == 3;
        f.copy_v = f.input == "packed_qkv" && (f.output != "inplace" || f.qkv_bias);
        const Spec spec = ropejit::test::make_spec(f);
        const Config config = ropejit::test::default_or_table_config(spec, index % 4 == 3);
        const Kernel kernel = runtime().get(spec, config);
        for (int64_t tokens : {int64_t(1), int64_t(5), int64_t(333)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.positions_type = index % 2 ? PositionsType::int64 : PositionsType::int32;
          o.max_position = index % 2 ? 3 * f.max_position_embeddings : f.max_position_embeddings;
          expect_case(kernel, o, fmt::format("mrope{} {} {} {} {} {}", interleaved ? " interleaved" : "", layout, dtype,
                                             rope_type, f.input, f.output));
        }
        ++index;
      }
  EXPECT_EQ(index, 24);
}

// QK-norm (RMSNorm of each q and k head, then RoPE; Qwen3 weights, Gemma's 1 + w, no weight)
// crossed with layout, dtype, head_dim, partial rotary (the tail is normalized too), GQA, bias,
// packed and separate inputs, every output form and positions form, and mrope.
TEST_P(Conformance, QkNorm) {
  struct NormShape {
    int head_dim, rotary_dim;
  };
  const NormShape shapes[] = {{128, 128}, {256, 256}, {64, 32}, {80, 80}, {96, 48}};
  const nlohmann::json norms[] = {
      {{"type", "rmsnorm"}, {"eps", 1e-6}},                                        // Qwen3
      {{"type", "rmsnorm"}, {"eps", 1e-6}, {"weight_offset", 1.0}},                // Gemma 3
      {{"type", "rmsnorm"}, {"eps", 1e-5}, {"weight", "none"}, {"scope", "head"}}};  // unweighted
  const char* const outputs[] = {"inplace", "separate", "padded_bhsd"};
  const char* const positions[] = {"explicit", "varlen", "offset", "mrope"};
  int index = 0;
  for (int round = 0; round < 2; ++round)
    for (const char* layout : {"neox", "interleaved"})
      for (const char* dtype : kDtypes)
        for (const auto& norm : norms) {
          const NormShape& shape = shapes[(index + round) % std::size(shapes)];
          SpecFields f = case_fields("qk-norm", layout, dtype, shape.head_dim, shape.rotary_dim, index, 3);
          f.qk_norm = norm;
          f.output = outputs[index % 3];
          f.positions = f.output == std::string("padded_bhsd") ? "varlen" : positions[(index / 3) % 4];
          if (f.positions == "mrope") {
            const int half = shape.rotary_dim / 2;
            f.mrope_section = {half - 2 * (half / 4), half / 4, half / 4};
          }
          f.input = index % 2 ? "packed_qkv" : "separate";
          f.qkv_bias = index % 4 >= 2;
          f.copy_v = f.input == "packed_qkv" && (f.output != "inplace" || f.qkv_bias);
          f.rope = index % 3 ? nlohmann::json{{"rope_type", "default"}, {"rope_theta", 1000000.0}}
                             : nlohmann::json{{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0},
                                              {"original_max_position_embeddings", 2048}};
          const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
          for (int64_t tokens : {int64_t(1), int64_t(6), int64_t(200)}) {
            check::CaseOptions o;
            o.tokens = tokens;
            o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
            expect_case(kernel, o, fmt::format("qk_norm {} {} {} D{} {} {} {}", norm.dump(), layout, dtype,
                                               shape.head_dim, f.input, f.output, f.positions));
          }
          ++index;
        }
  EXPECT_EQ(index, 36);
}

// RoPE + paged KV-cache append: both cache layouts x the spec dtype and both FP8 formats x slot
// mapping (some tokens -1) and block tables, crossed with layout, dtype, head shape (partial
// rotary), GQA, page size, bias, QK-norm, packed input, q in place or out, every positions form
// a cache index allows, rope types and strided rows and pages. The caches start as random bytes:
// every slot no token maps to, and every page gap, must keep them.
TEST_P(Conformance, PagedKvCache) {
  const Shape shapes[] = {{128, 128}, {64, 64}, {96, 24}, {256, 64}, {80, 80}};
  const int page_sizes[] = {16, 1, 5, 64};
  const char* const slot_positions[] = {"explicit", "varlen", "offset", "mrope"};
  const nlohmann::json ropes[] = {
      {{"rope_type", "default"}, {"rope_theta", 1000000.0}},
      {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 1024}},
      {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}}};
  int index = 0;
  for (int round = 0; round < 4; ++round)
    for (const char* cache_layout : {"nhd", "hnd"})
      for (const char* cache_dtype : {"auto", "fp8_e4m3", "fp8_e5m2"})
        for (const char* cache_index : {"slot_mapping", "block_tables"}) {
          const Shape& shape = shapes[(index + round) % std::size(shapes)];
          const char* layout = (index / 2) % 2 ? "interleaved" : "neox";
          SpecFields f = case_fields("paged", layout, kDtypes[(index + round) % 3], shape.head_dim, shape.rotary_dim,
                                     index, 3);
          f.output = "paged_kv";
          f.io_extra = {{"cache_layout", cache_layout}, {"cache_dtype", cache_dtype}, {"cache_index", cache_index},
                        {"page_size", page_sizes[(index + round) % 4]},
                        {"q_output", (index / 3) % 2 ? "separate" : "inplace"}};
          f.positions = cache_index == std::string("block_tables") ? "varlen" : slot_positions[(index / 2 + round) % 4];
          if (f.positions == "mrope") {
            const int half = shape.rotary_dim / 2;
            f.mrope_section = {half - 2 * (half / 4), half / 4, half / 4};
          }
          f.input = index % 5 < 2 ? "packed_qkv" : "separate";
          f.qkv_bias = index % 3 == 1;
          if (round % 2 == 1) f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
          f.rope = ropes[(index + round) % 3];
          const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
          for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(300)}) {
            check::CaseOptions o;
            o.tokens = tokens;
            o.strided = index % 4 == 3;
            o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
            expect_case(kernel, o, fmt::format("paged {} {} {} {} {} D{}/{} {} {} {}", cache_layout, cache_dtype,
                                               cache_index, layout, f.dtype, shape.head_dim, shape.rotary_dim,
                                               f.input, f.positions, f.io_extra.dump()));
          }
          ++index;
        }
  EXPECT_EQ(index, 48);
}

// Re-rotation of a paged K cache (op rerotate): both cache layouts x the spec dtype and both FP8
// formats x slot mapping (explicit or offset positions) and block tables (varlen), crossed with
// layout, dtype, head shape (partial rotary, a whole-slice neox lane), GQA, page size and the old
// and new rope blocks: a shift of positions under one block, LongRoPE's short table to its long
// one, and a change of scaling. The cache holds random finite keys; every other slot, the tail
// of each head and every page gap must keep their bytes.
TEST_P(Conformance, RerotateKvCache) {
  const Shape shapes[] = {{128, 128}, {64, 64}, {96, 24}, {256, 64}, {80, 80}};
  const int page_sizes[] = {16, 1, 5, 64};
  const char* const slot_positions[] = {"explicit", "offset"};
  std::vector<double> short_factor(64), long_factor(64);
  for (int i = 0; i < 64; ++i) {
    short_factor[i] = 1.0 + 0.02 * i;
    long_factor[i] = 1.0 + 0.9 * i;
  }
  const nlohmann::json longrope = {{"rope_type", "longrope"}, {"rope_theta", 10000.0},
                                   {"original_max_position_embeddings", 1024}};
  const nlohmann::json ropes[][2] = {  // {to, from}; a null from: the same block
      {{{"rope_type", "default"}, {"rope_theta", 1000000.0}}, nullptr},
      {longrope, nullptr},
      {{{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}},
       {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 2.0}}}};
  int index = 0;
  for (int round = 0; round < 2; ++round)
    for (const char* cache_layout : {"nhd", "hnd"})
      for (const char* cache_dtype : {"auto", "fp8_e4m3", "fp8_e5m2"})
        for (const char* cache_index : {"slot_mapping", "block_tables"}) {
          const Shape& shape = shapes[(index + round) % std::size(shapes)];
          const char* layout = (index / 2) % 2 ? "interleaved" : "neox";
          SpecFields f = case_fields("rerotate", layout, kDtypes[(index + round) % 3], shape.head_dim, shape.rotary_dim,
                                     index, 3);
          f.op = "rerotate";
          f.output = "paged_kv";
          f.io_extra = {{"cache_layout", cache_layout}, {"cache_dtype", cache_dtype}, {"cache_index", cache_index},
                        {"page_size", page_sizes[(index + round) % 4]}};
          f.positions = cache_index == std::string("block_tables") ? "varlen" : slot_positions[(index / 2 + round) % 2];
          const auto& [to, from] = ropes[(index + round) % 3];
          f.rope = to;
          f.from_rope = from;
          if (to == longrope) {
            const std::vector<double> half(short_factor.begin(), short_factor.begin() + shape.rotary_dim / 2);
            f.rope["short_factor"] = half;
            f.rope["long_factor"] = std::vector<double>(long_factor.begin(), long_factor.begin() + shape.rotary_dim / 2);
          }
          const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
          for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(300)}) {
            check::CaseOptions o;
            o.tokens = tokens;
            o.strided = index % 4 == 3;  // page gaps
            o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
            o.max_position = 3000;  // LongRoPE: keys on both sides of O = 1024
            expect_case(kernel, o, fmt::format("rerotate {} {} {} {} {} D{}/{} {} {}", cache_layout, cache_dtype,
                                               cache_index, layout, f.dtype, shape.head_dim, shape.rotary_dim,
                                               f.positions, f.rope.dump().substr(0, 40)));
          }
          ++index;
        }
  EXPECT_EQ(index, 24);
}

// Gemma 4's proportional RoPE: pairs across the whole head, the first partial_rotary_factor share
// rotated and the rest kept, crossed with head_dim (512 and 256 as Gemma 4's global layers, and
// shares whose last rotated pair falls inside a vector lane), factor, layout, dtype, GQA, Gemma 4's
// QK-norm (no weight offset), every output form, positions forms and the cos/sin table; then the
// re-rotation of its paged K cache (kept pairs keep their bytes).
TEST_P(Conformance, ProportionalRope) {
  struct Case {
    int head_dim;
    double fraction, factor;
  };
  const Case cases[] = {{512, 0.25, 1.0}, {256, 0.25, 8.0}, {80, 0.1, 1.0}, {96, 0.75, 2.0}, {64, 1.0, 1.0}};
  const char* const outputs[] = {"inplace", "separate", "paged_kv", "padded_bhsd"};
  int index = 0;
  for (int round = 0; round < 2; ++round)
    for (const char* layout : {"neox", "interleaved"})
      for (const char* dtype : kDtypes) {
        const Case& c = cases[(index + round) % std::size(cases)];
        SpecFields f = case_fields("proportional", layout, dtype, c.head_dim, c.head_dim, index, 2);
        f.rope = {{"rope_type", "proportional"}, {"rope_theta", 1000000.0}, {"factor", c.factor},
                  {"partial_rotary_factor", c.fraction}};
        f.output = outputs[index % 4];
        f.positions = f.output == "padded_bhsd" ? "varlen" : index % 3 == 1 ? "offset" : "explicit";
        if (f.output == "paged_kv") f.io_extra = {{"page_size", 16}};
        if (index % 3 == 0) f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
        const Spec spec = ropejit::test::make_spec(f);
        const Config config = ropejit::test::default_or_table_config(spec, index % 4 == 1);
        const Kernel kernel = runtime().get(spec, config);
        for (int64_t tokens : {int64_t(1), int64_t(9), int64_t(300)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.max_position = 1 << 17;
          expect_case(kernel, o, fmt::format("proportional D{} f{} x{} {} {} {} {}", c.head_dim, c.fraction, c.factor,
                                             layout, dtype, f.output, config_name(config)));
        }
        ++index;
      }
  EXPECT_EQ(index, 12);
  for (const char* cache_dtype : {"auto", "fp8_e4m3"}) {
    SpecFields f = case_fields("proportional-rerotate", "neox", "bf16", 256, 256, 1, 2);
    f.op = "rerotate";
    f.output = "paged_kv";
    f.io_extra = {{"page_size", 16}, {"cache_dtype", cache_dtype}};
    f.rope = {{"rope_type", "proportional"}, {"rope_theta", 1000000.0}, {"factor", 8.0}, {"partial_rotary_factor", 0.25}};
    f.from_rope = {{"rope_type", "proportional"}, {"rope_theta", 1000000.0}, {"partial_rotary_factor", 0.25}};
    const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
    check::CaseOptions o;
    o.tokens = 77;
    expect_case(kernel, o, std::string("proportional rerotate ") + cache_dtype);
  }
}

// Packed QKV + bias + rotation + scatter (issue 4 forms), ragged batches with empty sequences.
TEST_P(Conformance, FusedForms) {
  int index = 0;
  for (const char* output : {"inplace", "separate", "padded_bhsd"})
    for (bool bias : {false, true})
      for (const char* layout : {"neox", "interleaved"}) {
        SpecFields f;
        f.input = "packed_qkv";
        f.output = output;
        f.qkv_bias = bias;
        f.layout = layout;
        f.positions = "varlen";
        f.dtype = kDtypes[index % 3];
        f.head_dim = index % 2 ? 128 : 80;
        f.rotary_dim = index % 2 ? 128 : 32;
        f.num_kv_heads = 2;
        f.num_q_heads = 14;
        f.rope = index % 2 ? nlohmann::json{{"rope_type", "default"}, {"rope_theta", 1000000.0}}
                           : nlohmann::json{{"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 4.0},
                                            {"original_max_position_embeddings", 2048}};
        const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
        for (int64_t tokens : {1, 2, 37, 600}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.batch = tokens == 1 ? 3 : 1 + index % 6;  // T = 1 with 3 sequences: two are empty
          o.strided = output != std::string("padded_bhsd") && tokens % 2 == 1;
          expect_case(kernel, o, std::string(output) + (bias ? " bias " : " ") + layout);
        }
        ++index;
      }
}

// Separate inputs and outputs with strides wider than dense: gaps must stay untouched.
TEST_P(Conformance, StridedSeparateTensors) {
  for (const char* output : {"inplace", "separate"})
    for (bool copy_v : {false, true}) {
      SpecFields f;
      f.output = output;
      f.copy_v = copy_v;
      f.qkv_bias = copy_v;
      f.head_dim = 96;
      f.rotary_dim = 24;
      f.dtype = "fp16";
      f.num_q_heads = 7;
      f.num_kv_heads = 1;
      const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
      check::CaseOptions o;
      o.tokens = 129;
      o.strided = true;
      expect_case(kernel, o, std::string(output) + (copy_v ? " copy_v" : ""));
    }
}

// Role slots (shape.cuh: a thread takes a kv head's q heads, then its k and v head, each role
// compiled alone) in every output form, with and without copied v, bias or QK-norm, MHA and GQA.
TEST_P(Conformance, RoleSlots) {
  int index = 0;
  for (const char* output : {"inplace", "separate", "padded_bhsd", "paged_kv"})
    for (int q_per_kv : {1, 3}) {
      SpecFields f = case_fields("role-slots", index % 2 ? "interleaved" : "neox", kDtypes[index % 3], 64,
                                 index % 3 ? 64 : 32, index, 3);
      f.output = output;
      f.num_kv_heads = 2;
      f.num_q_heads = 2 * q_per_kv;
      f.copy_v = index % 3 != 0 || f.output == "paged_kv";
      f.qkv_bias = index % 4 == 1;
      f.positions = f.output == "padded_bhsd" ? "varlen" : "explicit";
      if (index % 2 == 0) f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
      if (f.output == "paged_kv") f.io_extra = {{"cache_dtype", q_per_kv == 1 ? "auto" : "fp8_e4m3"}, {"page_size", 4}};
      const Spec spec = ropejit::test::make_spec(f);
      Config c = default_config(spec);
      c.heads_per_thread = total_heads(spec) / f.num_kv_heads;
      ASSERT_TRUE(work_shape(spec, c).role_slots) << output;
      const Kernel kernel = runtime().get(spec, c);
      for (int64_t tokens : {1, 45}) {
        check::CaseOptions o;
        o.tokens = tokens;
        o.strided = tokens % 2 == 1;
        expect_case(kernel, o, fmt::format("role slots {} q/kv {} {}", output, q_per_kv, config_name(c)));
      }
      ++index;
    }
}

// Every tunable value produces the same (correct) results.
TEST_P(Conformance, EveryTunableValue) {
  SpecFields f;
  f.rope = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 2048}};
  f.num_q_heads = 12;
  f.num_kv_heads = 3;
  const Spec spec = ropejit::test::make_spec(f);
  std::vector<Config> configs;
  for (const auto& t : tunables())
    for (int value : t.values) {
      Config c = default_config(spec);
      set_tunable(c, t.name, value);
      if (!config_problem(spec, c)) configs.push_back(c);
    }
  EXPECT_GE(configs.size(), 12u);
  for (const Config& c : configs) {
    const Kernel kernel = runtime().get(spec, c);
    for (int64_t tokens : {5, 700}) {
      check::CaseOptions o;
      o.tokens = tokens;
      o.max_position = 8192;
      expect_case(kernel, o, config_name(c));
    }
  }
}

// Op attn_temperature (Llama 4's NoPE layers): q scaled in place, every dtype and positions form,
// odd token counts, strided rows, a small floor_scale so positions cross many floors.
TEST_P(Conformance, AttnTemperature) {
  int index = 0;
  for (const char* dtype : kDtypes)
    for (const char* positions : {"explicit", "varlen", "offset"}) {
      SpecFields f = case_fields("attn-temperature", "neox", dtype, index % 2 ? 80 : 128, index % 2 ? 80 : 128, index, 3);
      f.op = "attn_temperature";
      f.positions = positions;
      f.max_position_embeddings = 1 << 20;
      nlohmann::json spec = ropejit::test::spec_json(f);
      spec["attn_temperature"] = {{"floor_scale", 1 + index * 37}, {"attn_scale", 0.05 * (index + 1)}};
      const Kernel kernel = runtime().get(parse_spec(spec.dump()));
      for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(301)}) {
        check::CaseOptions o;
        o.tokens = tokens;
        o.strided = index % 3 == 1;
        o.positions_type = index % 2 ? PositionsType::int64 : PositionsType::int32;
        o.max_position = 1 << 20;
        expect_case(kernel, o, fmt::format("attn_temperature {} {} floor_scale {}", dtype, positions, 1 + index * 37));
      }
      ++index;
    }
  EXPECT_EQ(index, 9);
}

// The real model specs in specs/ run end to end and match the reference.
TEST_P(Conformance, ModelSpecs) {
  const auto files = ropejit::test::spec_files();
  ASSERT_GE(files.size(), 13u);
  for (const auto& path : files) {
    const Spec spec = load_spec_file(path);
    const Kernel kernel = runtime().get(spec);
    for (int64_t tokens : {1, 300}) {
      check::CaseOptions o;
      o.tokens = tokens;
      o.batch = 3;
      o.max_position = spec.max_position_embeddings;
      expect_case(kernel, o, path);
    }
  }
}

// Every model spec with its decode config (default_config(spec, tokens): one head a thread, loads
// ahead of the angles) at decode sizes, and with loads ahead (Config::ahead) where its kernel has
// them and its default has not: the same results as every other config.
TEST_P(Conformance, DecodeAndLoadsAheadConfigs) {
  int ahead_specs = 0;
  for (const auto& path : ropejit::test::spec_files()) {
    const Spec spec = load_spec_file(path);
    std::vector<std::pair<Config, std::vector<int64_t>>> runs = {{default_config(spec, 1), {1, 8}}};
    Config ahead = default_config(spec);
    ahead.ahead = true;
    if (!default_config(spec).ahead && !config_problem(spec, ahead)) runs.push_back({ahead, {7, 301}});
    ahead_specs += default_config(spec).ahead || runs.size() > 1;
    for (const auto& [config, token_counts] : runs) {
      const Kernel kernel = runtime().get(spec, config);
      for (int64_t tokens : token_counts) {
        check::CaseOptions o;
        o.tokens = tokens;
        o.batch = tokens > 3 ? 3 : 1;
        o.max_position = spec.max_position_embeddings;
        expect_case(kernel, o, fmt::format("{} {}", path, config_name(config)));
      }
    }
  }
  EXPECT_GE(ahead_specs, 20);
}

INSTANTIATE_TEST_SUITE_P(Backend, Conformance, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });
