// Launch argument checks: every bad argument is a named invalid_argument error before any
// kernel runs (docs/architecture.md §9), for every input/output/positions form.
// ropejit-tier: unit
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "launch/launch_args.h"  // private: check_launch and the buffer rows under test
#include "support/backends.h"
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::expect_rejected;
using ropejit::test::SpecFields;
using ropejit::test::Storage;

namespace {

Spec fused_spec(const std::string& output, bool bias) {
  SpecFields f;
  f.input = "packed_qkv";
  f.output = output;
  f.qkv_bias = bias;
  f.positions = "varlen";
  f.num_q_heads = 4;
  f.num_kv_heads = 2;
  f.head_dim = 64;
  f.rotary_dim = 64;
  return ropejit::test::make_spec(f);
}

// A valid launch of the default spec (separate q and k in place, explicit positions): 4 tokens.
Args four_tokens(Storage& s, std::vector<int32_t>& positions) {
  Args a;
  a.num_tokens = 4;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.positions = positions.data();
  return a;
}

}  // namespace

TEST(LaunchArgs, SeparateInplaceExplicit) {
  Storage s;
  const Spec spec = ropejit::test::make_spec({});
  std::vector<int32_t> positions = {0, 1, 2, 3};
  const Args a = four_tokens(s, positions);
  EXPECT_NO_THROW(check_launch(spec, 8, a, true));

  Args b = a;
  b.q = nullptr;
  expect_rejected(spec, b, "q", "null is not allowed");
  b = a;
  b.k = s.at((1 << 16) + 2);
  expect_rejected(spec, b, "k", "16-byte aligned");
  b = a;
  b.qkv = s.at(0);
  expect_rejected(spec, b, "qkv", "must be null");
  b = a;
  b.q_out = s.at(0);
  expect_rejected(spec, b, "q_out", "must be null unless io.output separate or padded_bhsd");
  b = a;
  b.q_stride = 100;
  expect_rejected(spec, b, "q_stride", "multiple of 8");
  b = a;
  b.q_stride = 8;
  expect_rejected(spec, b, "q_stride", ">= 1024");
  b = a;
  b.num_tokens = -1;
  expect_rejected(spec, b, "num_tokens", "-1 is not allowed");
  b = a;
  b.positions = nullptr;
  expect_rejected(spec, b, "positions", "null is not allowed");
  b = a;
  b.bias = s.at(0);
  expect_rejected(spec, b, "bias", "must be null unless io.qkv_bias (this spec does not use it)");
  b = a;
  b.cu_seqlens = reinterpret_cast<const int32_t*>(s.at(0));
  expect_rejected(spec, b, "cu_seqlens", "must be null unless io.positions varlen");
  std::vector<int32_t> negative = {0, 1, -5, 3};
  b = a;
  b.positions = negative.data();
  expect_rejected(spec, b, "positions", "positions[2] = -5");
  // Device memory is not read: the same array passes when it is not host memory.
  EXPECT_NO_THROW(check_launch(spec, 8, b, false));
}

TEST(LaunchArgs, FusedPaddedVarlen) {
  Storage s;
  const Spec spec = fused_spec("padded_bhsd", true);
  std::vector<int32_t> cu = {0, 3, 3, 7};
  std::vector<int64_t> start = {10, 0, 5};
  Args a;
  a.num_tokens = 7;
  a.qkv = s.at(0);
  a.bias = s.at(1 << 18);
  a.q_out = s.at(1 << 17);
  a.k_out = s.at(3 << 17);
  a.v_out = s.at(5 << 17);
  a.cu_seqlens = cu.data();
  a.start_pos = start.data();
  a.batch = 3;
  a.max_seq_len = 4;
  const CheckedLaunch ok = check_launch(spec, 8, a, true);
  EXPECT_EQ(ok.rows, 12);  // batch * max_seq_len, padding rows included

  Args b = a;
  b.bias = nullptr;
  expect_rejected(spec, b, "bias", "qkv_bias is true");
  b = a;
  b.max_seq_len = 3;
  expect_rejected(spec, b, "max_seq_len", "smaller than the longest sequence (4)");
  std::vector<int32_t> not_monotone = {0, 3, 2, 7};
  b = a;
  b.cu_seqlens = not_monotone.data();
  expect_rejected(spec, b, "cu_seqlens", "must be non-decreasing");
  std::vector<int32_t> wrong_end = {0, 3, 3, 6};
  b = a;
  b.cu_seqlens = wrong_end.data();
  expect_rejected(spec, b, "cu_seqlens", "must equal num_tokens = 7");
  b = a;
  b.v_out = nullptr;
  expect_rejected(spec, b, "v_out", "required");
  b = a;
  b.q_out_stride = 64;
  expect_rejected(spec, b, "q_out_stride", "64 is not allowed: must be 0 unless io.output separate");
  b = a;
  b.batch = 0;
  expect_rejected(spec, b, "batch", "must be >= 1");
  b = a;
  b.positions = cu.data();
  expect_rejected(spec, b, "positions", "must be null unless io.positions explicit or mrope");
  std::vector<int64_t> bad_start = {-1, 0, 0};
  b = a;
  b.start_pos = bad_start.data();
  expect_rejected(spec, b, "start_pos", "start_pos[0] = -1");
}

TEST(LaunchArgs, OffsetPositions) {
  Storage s;
  SpecFields f;
  f.positions = "offset";
  f.output = "separate";
  const Spec spec = ropejit::test::make_spec(f);
  std::vector<int64_t> start = {100};
  Args a;
  a.num_tokens = 5;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.q_out = s.at(2 << 16);
  a.k_out = s.at(3 << 16);
  a.start_pos = start.data();
  const CheckedLaunch ok = check_launch(spec, 8, a, true);
  EXPECT_EQ(ok.rows, 5);
  EXPECT_EQ(ok.params.start_pos, reinterpret_cast<const i64*>(start.data()));
  Args b = a;
  b.start_pos = nullptr;  // all positions from 0
  EXPECT_NO_THROW(check_launch(spec, 8, b, true));

  std::vector<int32_t> positions = {0, 1, 2, 3, 4};
  b = a;
  b.positions = positions.data();
  expect_rejected(spec, b, "positions", "must be null unless io.positions explicit or mrope");
  std::vector<int32_t> cu = {0, 5};
  b = a;
  b.cu_seqlens = cu.data();
  expect_rejected(spec, b, "cu_seqlens", "must be null unless io.positions varlen");
  b = a;
  b.batch = 2;
  expect_rejected(spec, b, "batch", "must be 0 or 1");
  std::vector<int64_t> negative = {-3};
  b = a;
  b.start_pos = negative.data();
  expect_rejected(spec, b, "start_pos", "start_pos[0] = -3");
  std::vector<int64_t> past_int32 = {(int64_t(1) << 31) - 3};
  b = a;
  b.start_pos = past_int32.data();
  expect_rejected(spec, b, "start_pos", "must lie in [0, 2^31)");
  b = a;
  b.seq_len = 104;  // positions 100..104 need seq_len >= 105
  expect_rejected(spec, b, "start_pos", "must be < seq_len = 104");
  b.seq_len = 105;
  EXPECT_NO_THROW(check_launch(spec, 8, b, true));
  // Device memory is not read.
  b = a;
  b.start_pos = negative.data();
  EXPECT_NO_THROW(check_launch(spec, 8, b, false));
}

TEST(LaunchArgs, MropePositionsAreThreeStreams) {
  Storage s;
  SpecFields f;
  f.positions = "mrope";
  f.mrope_section = {16, 24, 24};
  const Spec spec = ropejit::test::make_spec(f);
  std::vector<int64_t> positions = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23};  // [3, 4]
  Args a;
  a.num_tokens = 4;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.positions = positions.data();
  a.positions_type = PositionsType::int64;
  const CheckedLaunch ok = check_launch(spec, 8, a, true);
  EXPECT_EQ(ok.params.positions, positions.data());
  EXPECT_EQ(ok.params.positions_are_int64, 1);

  Args b = a;
  b.positions = nullptr;
  expect_rejected(spec, b, "positions", "mrope ([3, num_tokens])");
  std::vector<int64_t> start = {0};
  b = a;
  b.start_pos = start.data();
  expect_rejected(spec, b, "start_pos", "must be null unless io.positions varlen or offset");
  // Every stream is checked: a bad width position (stream 2, token 1) is entry 9.
  std::vector<int64_t> bad = positions;
  bad[9] = -7;
  b = a;
  b.positions = bad.data();
  expect_rejected(spec, b, "positions", "positions[9] = -7");
  b.seq_len = 24;
  b.positions = positions.data();
  EXPECT_NO_THROW(check_launch(spec, 8, b, true));
  b.seq_len = 23;  // the width stream reaches 23
  expect_rejected(spec, b, "positions", "positions[11] = 23");
  // [3, T] int32 positions: bytes_moved counts all three streams.
  SpecFields g = f;
  g.positions = "explicit";
  g.mrope_section.clear();
  EXPECT_EQ(bytes_moved(spec, 10, 0, 0) - bytes_moved(ropejit::test::make_spec(g), 10, 0, 0), 2 * 10 * 4);
}

TEST(LaunchArgs, QkNormWeights) {
  Storage s;
  SpecFields f;
  f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  const Spec spec = ropejit::test::make_spec(f);
  std::vector<int32_t> positions = {0, 1};
  Args a;
  a.num_tokens = 2;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.positions = positions.data();
  a.q_norm_weight = s.at(2 << 16);
  a.k_norm_weight = s.at(3 << 16);
  const CheckedLaunch ok = check_launch(spec, 8, a, true);
  EXPECT_EQ(ok.params.norm_weight[0], a.q_norm_weight);
  EXPECT_EQ(ok.params.norm_weight[1], a.k_norm_weight);
  Args b = a;
  b.k_norm_weight = nullptr;
  expect_rejected(spec, b, "k_norm_weight", "qk_norm has weight per_head");
  b = a;
  b.q_norm_weight = s.at((2 << 16) + 4);
  expect_rejected(spec, b, "q_norm_weight", "16-byte aligned");
  // Without a weighted norm the pointers must stay null.
  expect_rejected(ropejit::test::make_spec({}), a, "q_norm_weight", "must be null unless qk_norm with weight per_head");
  SpecFields unweighted = f;
  unweighted.qk_norm["weight"] = "none";
  expect_rejected(ropejit::test::make_spec(unweighted), a, "q_norm_weight", "must be null");
  // bytes_moved: the two [D] weight vectors once, and the tail of a partial rotary head moves.
  SpecFields plain;
  EXPECT_EQ(bytes_moved(spec, 10, 0, 0) - bytes_moved(ropejit::test::make_spec(plain), 10, 0, 0), 2 * 128 * 2);
  SpecFields partial = f, partial_plain;
  partial.rotary_dim = partial_plain.rotary_dim = 64;
  EXPECT_EQ(bytes_moved(ropejit::test::make_spec(partial), 10, 0, 0) -
                bytes_moved(ropejit::test::make_spec(partial_plain), 10, 0, 0),
            2 * 128 * 2 + 2 * 10 * (8 + 2) * 64 * 2);
}

TEST(LaunchArgs, RunTimeLengthRequiredWhereFrequenciesDependOnIt) {
  Storage s;
  std::vector<int32_t> positions = {0, 1, 5000};
  for (const char* type : {"dynamic", "longrope"}) {
    SpecFields f;
    f.rope = ropejit::test::rope_blocks_for_every_type(128, 4096)[std::string(type) == "dynamic" ? 3 : 5];
    f.max_position_embeddings = 4096;
    const Spec spec = ropejit::test::make_spec(f);
    Args a;
    a.num_tokens = 3;
    a.q = s.at(0);
    a.k = s.at(1 << 16);
    a.positions = positions.data();
    expect_rejected(spec, a, "seq_len", std::string("rope_type ") + type + " needs seq_len");
    a.seq_len = 5000;  // < max position + 1
    expect_rejected(spec, a, "positions", "must be < seq_len = 5000");
    a.seq_len = 5001;
    const CheckedLaunch ok = check_launch(spec, 8, a, true);
    if (std::string(type) == "dynamic") {
      EXPECT_EQ(ok.params.use_dynamic_base, 1);  // 5001 > M = 4096
    } else {
      EXPECT_EQ(ok.params.use_long_table, 1);  // 5001 > O = 1024
    }
  }
}

TEST(LaunchArgs, KernelLaunchChecksBeforeRunning) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  RuntimeOptions o;
  o.backend = BackendKind::host;
  Runtime runtime(o);
  const Kernel kernel = runtime.get(fused_spec("separate", false));
  Storage s;
  const std::vector<uint8_t> before = s.bytes;
  Args a;
  a.num_tokens = 2;
  a.qkv = s.at(0);
  a.q_out = s.at(1 << 17);
  a.k_out = nullptr;  // missing
  a.v_out = s.at(3 << 17);
  std::vector<int32_t> cu = {0, 2};
  a.cu_seqlens = cu.data();
  a.batch = 1;
  EXPECT_THROW(kernel.launch(a), Error);
  EXPECT_EQ(s.bytes, before) << "a rejected launch must not write anything";
}

TEST(LaunchArgs, KernelOutlivesItsRuntime) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  const Spec spec = ropejit::test::make_spec({});
  std::vector<uint16_t> q(3 * 8 * 128), k(3 * 2 * 128);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint16_t>(0x3c00 + (i * 37) % 512);  // bf16 in [1.0, 2.9]
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint16_t>(0xbc00 + (i * 91) % 512);
  std::vector<int32_t> positions = {5, 700, 4095};
  auto run = [&](const Kernel& kernel, std::vector<uint16_t> q_copy, std::vector<uint16_t> k_copy) {
    Args a;
    a.num_tokens = 3;
    a.q = q_copy.data();
    a.k = k_copy.data();
    a.positions = positions.data();
    kernel.launch(a);
    return std::make_pair(q_copy, k_copy);
  };
  std::optional<Kernel> kept;
  std::pair<std::vector<uint16_t>, std::vector<uint16_t>> with_runtime;
  {
    RuntimeOptions o;
    o.backend = BackendKind::host;
    Runtime runtime(o);
    kept = runtime.get(spec);
    with_runtime = run(*kept, q, k);
  }
  EXPECT_NE(with_runtime.first, q);  // rotated
  EXPECT_EQ(run(*kept, q, k), with_runtime);
}

// Issue 15: values no form reads are still checked, and sizes never overflow int64 silently.
TEST(LaunchArgs, NegativeCountsOutOfRangeEnumsAndOverflowsAreRefused) {
  Storage s;
  const Spec spec = ropejit::test::make_spec({});
  std::vector<int32_t> positions = {0, 1, 2, 3};
  const Args a = four_tokens(s, positions);
  Args b = a;
  b.seq_len = -5;
  expect_rejected(spec, b, "seq_len", "-5 is not allowed: must be 0 (not given) or in [1, 2^31]");
  b = a;
  b.batch = -3;
  expect_rejected(spec, b, "batch", "-3 is not allowed");
  b = a;
  b.max_seq_len = -1;
  expect_rejected(spec, b, "max_seq_len", "-1 is not allowed");
  b = a;
  b.positions_type = static_cast<PositionsType>(7);
  expect_rejected(spec, b, "positions_type", "7 is not allowed: must be int32 (0) or int64 (1)");
  b = a;
  b.num_tokens = int64_t(1) << 40;
  b.q_stride = int64_t(1) << 40;  // 2^40 rows 2^40 elements apart: offsets past int64
  expect_rejected(spec, b, "q_stride", "overflow a 64-bit byte offset");

  EXPECT_EQ(bytes_moved(spec, 4, 0, 0), bytes_moved(spec, 2, 0, 0) * 2);
  for (int64_t tokens : {int64_t(-1), INT64_MAX, (int64_t(1) << 40) + 1}) {
    try {
      bytes_moved(spec, tokens, 0, 0);
      ADD_FAILURE() << "bytes_moved accepted " << tokens << " tokens";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("num_tokens"), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(bytes_moved(spec, int64_t(1) << 40, 0, 0), 0);  // the largest launch counts without overflow
}

// Found by fuzz_c_launch_args (tests/fuzz/crashes/): a qkv or bias pointer at the top of the
// address space passed every check, and forming its k and v offsets wrapped (UB). Refused now.
TEST(LaunchArgs, PointersWhoseRowWrapsTheAddressSpaceAreRefused) {
  const Spec spec = fused_spec("inplace", true);
  Storage s;
  std::vector<int32_t> cu = {0, 1};
  Args a;
  a.num_tokens = 1;
  a.qkv = reinterpret_cast<void*>(uintptr_t(0xffffffffffffff10ull));
  a.bias = s.at(0);
  a.cu_seqlens = cu.data();
  a.batch = 1;
  expect_rejected(spec, a, "qkv", "run past the end of the address space", false);
  a.qkv = s.at(1 << 16);
  a.bias = reinterpret_cast<const void*>(uintptr_t(0xffffffffffffff10ull));
  expect_rejected(spec, a, "bias", "run past the end of the address space", false);
}
