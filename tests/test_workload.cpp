// The one description of a launch's buffers (launch_buffers, per io form) and the one workload
// builder on it: bytes_moved is their sum, bound buffers pass the launch checks, and the
// builder's contents keep the promises the harness, tuner and benchmark rely on.
// ropejit-tier: unit
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launch/launch_args.h"  // private: launch_buffers, the buffer rows under test
#include "ropejit/fp_convert.h"
#include "support/repo_paths.h"
#include "support/spec_builder.h"
#include "ropejit/internal/workload.h"

using namespace ropejit;

namespace {

// Every spec in specs/ with every io form combination the spec format accepts.
std::vector<Spec> every_spec_and_io_form() {
  std::vector<Spec> out;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir() + "/specs")) {
    if (entry.path().filename() == "schema.json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json base = nlohmann::json::parse(text.str());
    // Every row of the form tables: a new form is covered without an edit here.
    for (const auto& input : enum_table<InputForm>())
      for (const auto& output : enum_table<OutputForm>())
        for (const auto& positions : enum_table<PositionsForm>())
          for (bool copy_v : {false, true})
            for (bool bias : {false, true}) {
              nlohmann::json j = base;
              j["io"] = {{"input", input.name}, {"output", output.name}, {"positions", positions.name},
                         {"copy_v", copy_v}, {"qkv_bias", bias}};
              if (positions.value == PositionsForm::mrope) {  // sections of the spec's own rotary_dim
                const int half = (j.contains("rotary_dim") ? j["rotary_dim"].get<int>() : j["head_dim"].get<int>()) / 2;
                j["io"]["mrope_section"] = {half - 2 * (half / 4), half / 4, half / 4};
              }
              if (positions.value == PositionsForm::axes) {  // two axes over the spec's own rotary_dim
                const int half = (j.contains("rotary_dim") ? j["rotary_dim"].get<int>() : j["head_dim"].get<int>()) / 2;
                j["io"]["axes"] = {{"pairs", {half - half / 2, half / 2}}};
              }
              try {
                out.push_back(parse_spec(j.dump()));
              } catch (const SpecError&) {
                // a combination the format rejects
              }
            }
  }
  return out;
}

// bytes_moved as the spec documents it, written out independently of the buffer rows.
int64_t documented_bytes(const Spec& spec, int64_t tokens, int batch, int64_t S) {
  const int64_t D = spec.head_dim, esize = dtype_size(spec.dtype);
  // The tail [d, D) moves when it leaves the buffer or changes (bias, QK-norm of the whole head).
  const bool tail = spec.io.output != OutputForm::inplace || spec.io.qkv_bias || spec.qk_norm.enabled;
  // op attn_temperature: every element of the q heads, read and written; ops inverse_rope and
  // rope_tensor: the rope slice of the one tensor's heads; op rope: q and k.
  const bool one_tensor = spec.op == OpKind::inverse_rope || spec.op == OpKind::rope_tensor;
  const int64_t row = spec.op == OpKind::attn_temperature ? spec.num_q_heads * D
                      : one_tensor                        ? spec.num_q_heads * spec.rotary_dim
                                                          : (spec.num_q_heads + spec.num_kv_heads) * (tail ? D : spec.rotary_dim) +
                                                                (spec.io.copy_v ? spec.num_kv_heads * D : 0);
  const int64_t out_rows = spec.io.output == OutputForm::padded_bhsd ? batch * S : tokens;
  int64_t bytes = (tokens + out_rows) * row * esize;
  if (spec.io.qkv_bias) bytes += (spec.num_q_heads + 2 * spec.num_kv_heads) * D * esize;
  if (spec.qk_norm.enabled && spec.qk_norm.weight == NormWeight::per_head)  // q, k weights: [D], or [H, D] over all heads
    bytes += (spec.qk_norm.scope == NormScope::all ? spec.num_q_heads + spec.num_kv_heads : 2) * D * esize;
  switch (spec.io.positions) {
    case PositionsForm::explicit_: bytes += tokens * 4; break;  // int32
    case PositionsForm::varlen: bytes += (batch + 1) * 4 + batch * 8; break;
    case PositionsForm::offset: bytes += 8; break;  // start_pos[0]
    case PositionsForm::mrope: bytes += 3 * tokens * 4; break;  // [3, T] int32
    case PositionsForm::axes: bytes += static_cast<int64_t>(spec.io.axes.pairs.size()) * tokens * 4; break;  // [A, T]
  }
  return bytes;
}

}  // namespace

TEST(Workload, BytesMovedIsTheSumOfTheBuffersForEverySpecAndIoForm) {
  const std::vector<Spec> specs = every_spec_and_io_form();
  ASSERT_GT(specs.size(), 100u);
  for (const Spec& spec : specs) {
    for (const LaunchShape& shape : {LaunchShape{13, 2, 10}, LaunchShape{0, 1, 1}, LaunchShape{4096, 4, 1024}}) {
      SCOPED_TRACE(spec.name + " " + canonical_json(spec) + " T=" + std::to_string(shape.tokens));
      const std::vector<BufferDesc> buffers = launch_buffers(spec, shape);
      int64_t sum = 0;
      for (const BufferDesc& b : buffers) sum += b.moved_bytes();
      EXPECT_EQ(bytes_moved(spec, shape.tokens, shape.batch, shape.max_seq_len), sum);
      EXPECT_EQ(sum, documented_bytes(spec, shape.tokens, shape.batch, shape.max_seq_len));
      // Bound to disjoint aligned address ranges (never read: host_memory false), they form
      // Args the launch checks accept, covering the rows the grid runs over.
      std::vector<void*> ptrs;
      uintptr_t next = uintptr_t(1) << 20;
      for (const BufferDesc& b : buffers) {
        ptrs.push_back(reinterpret_cast<void*>(next));
        next += (static_cast<uintptr_t>(b.bytes()) + (uintptr_t(1) << 20)) & ~((uintptr_t(1) << 20) - 1);
      }
      const Args args = bind_buffers(buffers, shape, ptrs, 1 << 20);
      const CheckedLaunch checked = check_launch(spec, default_config(spec).vec, args, false);
      const bool padded = spec.io.output == OutputForm::padded_bhsd;
      EXPECT_EQ(checked.rows, padded ? shape.batch * shape.max_seq_len : shape.tokens);
    }
  }
}

TEST(Workload, HarnessOptionsGiveValidPoisonedStridedData) {
  test::SpecFields f;  // separate q, k, v in and out: every buffer kind that may be strided
  f.output = "separate";
  f.qkv_bias = true;
  f.copy_v = true;
  const Spec spec = test::make_spec(f);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    WorkloadOptions o;
    o.tokens = 37;
    o.positions_type = seed % 2 ? PositionsType::int64 : PositionsType::int32;
    o.max_position = 100;
    o.stride_vec = 8;
    o.seed = seed;
    const HostWorkload w = make_host_workload(spec, o);
    const HostWorkload again = make_host_workload(spec, o);
    ASSERT_TRUE(w.find("q") && w.find("v_out") && w.find("bias") && w.find("positions"));
    EXPECT_EQ(w.find("q")->bytes, again.find("q")->bytes) << "same seed, same data";
    for (const HostBuffer& b : w.buffers) {
      EXPECT_EQ(int64_t(b.bytes.size()), b.desc.bytes()) << b.desc.name;
      if (b.desc.token_rows) {
        EXPECT_GT(b.desc.row_stride, b.desc.row_elements) << b.desc.name;
        EXPECT_EQ((b.desc.row_stride - b.desc.row_elements) % 8, 0) << b.desc.name;
      }
      if (b.desc.kind == BufferKind::output) EXPECT_EQ(b.bytes, std::string(b.bytes.size(), '\xff')) << b.desc.name;
      if (b.desc.kind == BufferKind::input || b.desc.kind == BufferKind::bias)
        for (int64_t i = 0; i < b.desc.rows * b.desc.row_stride; ++i)
          ASSERT_NE(ref::load_value(spec.dtype, b.bytes.data(), i), 0.0) << b.desc.name << "[" << i << "]";
    }
    for (int64_t p : w.positions) EXPECT_TRUE(p >= 0 && p < 100);
    EXPECT_EQ(w.find("positions")->desc.element_bytes, o.positions_type == PositionsType::int64 ? 8 : 4);
  }
}

TEST(Workload, SequencesRandomOrFixedKeepPositionsBelowTheMaximum) {
  const Spec spec = load_spec_file(test::spec_path("qwen2.5-7b-padded"));
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    WorkloadOptions o;
    o.tokens = 40;
    o.max_slack = 2;
    o.max_position = 64;
    o.seed = seed;
    const HostWorkload w = make_host_workload(spec, o);  // random batch and cuts
    ASSERT_TRUE(w.shape.batch >= 1 && w.shape.batch <= 8);
    ASSERT_EQ(w.cu_seqlens.size(), size_t(w.shape.batch) + 1);
    EXPECT_EQ(w.cu_seqlens.front(), 0);
    EXPECT_EQ(w.cu_seqlens.back(), 40);
    int64_t longest = 0;
    for (int b = 0; b < w.shape.batch; ++b) {
      const int64_t len = w.cu_seqlens[b + 1] - w.cu_seqlens[b];
      ASSERT_GE(len, 0);
      longest = std::max(longest, len);
      EXPECT_LE(w.start_pos[b] + len, 64);
    }
    EXPECT_TRUE(w.shape.max_seq_len >= std::max<int64_t>(1, longest) && w.shape.max_seq_len <= longest + 2);
  }
  WorkloadOptions fixed;  // the tuner's and the benchmark's: full sequences, the last shorter
  fixed.tokens = 2500;
  fixed.batch = 3;
  fixed.sequence_tokens = 1024;
  const HostWorkload w = make_host_workload(spec, fixed);
  EXPECT_EQ(w.cu_seqlens, (std::vector<int32_t>{0, 1024, 2048, 2500}));
  EXPECT_EQ(w.shape.max_seq_len, 1024);
}

TEST(Workload, DistinctElementsRepeatOneBlock) {
  const Spec spec = load_spec_file(test::spec_path("llama-3.1-8b"));
  WorkloadOptions o;
  o.tokens = 64;
  o.distinct_elements = 1000;
  const HostWorkload w = make_host_workload(spec, o);
  const std::string& q = w.find("q")->bytes;
  EXPECT_EQ(q.substr(0, 2000), q.substr(2000, 2000));
  EXPECT_NE(q.substr(0, 1000), q.substr(1000, 1000));
}
