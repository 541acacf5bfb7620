// Rope types whose frequencies depend on the run length (dynamic NTK, LongRoPE): every position
// a launch rotates must lie below its seq_len, or it would silently take the wrong table. The
// host backend refuses such a launch by name for every positions form, through the C++ and the
// C API; on the cuda backend, which never reads device arrays, the kernel gives the positions
// past seq_len NaN angles instead (emulated here on the host backend with the cuda path's
// launch checks).
// ropejit-tier: unit
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/kernel_variant.h"
#include "launch/launch_args.h"  // private: check_launch's seq_len rules under test
#include "ropejit/ropejit.h"
#include "support/backends.h"
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

namespace ropejit {
namespace {

using test::expect_rejected;
using test::SpecFields;
using test::Storage;

// Phi-3.5-like LongRoPE (d 64, O 1024, M 4096) or dynamic NTK (M 4096) with `positions`.
SpecFields run_length_fields(const std::string& type, const std::string& positions) {
  SpecFields f;
  f.head_dim = f.rotary_dim = 64;
  f.num_q_heads = 4;
  f.num_kv_heads = 2;
  f.max_position_embeddings = 4096;
  f.positions = positions;
  f.rope = test::rope_blocks_for_every_type(64, 4096)[type == "dynamic" ? 3 : 5];
  return f;
}

std::string reason(const std::string& type) {
  return type == "longrope" ? "(rope_type longrope picks its table from seq_len)"
                            : "(rope_type dynamic picks its base from seq_len)";
}

TEST(RunLengthLaunch, ExplicitPositionsPastSeqLenAreRefusedWithTheReason) {
  Storage s;
  std::vector<int32_t> positions = {0, 1, 2, 5000};
  for (const std::string type : {"longrope", "dynamic"}) {
    const Spec spec = test::make_spec(run_length_fields(type, "explicit"));
    Args a;
    a.num_tokens = 4;
    a.q = s.at(0);
    a.k = s.at(1 << 16);
    a.positions = positions.data();
    expect_rejected(spec, a, "seq_len", "0 is not allowed: rope_type " + type + " needs seq_len");
    a.seq_len = 4096;
    expect_rejected(spec, a, "positions",
                    "positions[3] = 5000 is not allowed: must be < seq_len = 4096 " + reason(type));
    a.seq_len = 5001;
    EXPECT_NO_THROW(check_launch(spec, 8, a, true));
  }
  // A type that ignores the length still refuses an inconsistent one, with the generic reason.
  Args a;
  a.num_tokens = 4;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.positions = positions.data();
  a.seq_len = 100;
  expect_rejected(test::make_spec({}), a, "positions", "must be < seq_len = 100 (seq_len = max(position) + 1 when given)");
}

// Before: varlen positions (start_pos + the index in the sequence) were never compared with
// seq_len, so a LongRoPE launch reaching position 5000 with seq_len 4096 took the short table.
TEST(RunLengthLaunch, VarlenAndPaddedPositionsPastSeqLenAreRefused) {
  Storage s;
  std::vector<int32_t> cu_seqlens = {0, 3, 5};
  std::vector<int64_t> start_pos = {10, 4998};  // sequence 1 covers positions 4998, 4999
  for (const std::string type : {"longrope", "dynamic"})
    for (const std::string output : {"inplace", "padded_bhsd"}) {
      SpecFields f = run_length_fields(type, "varlen");
      f.output = output;
      const Spec spec = test::make_spec(f);
      Args a;
      a.num_tokens = 5;
      a.batch = 2;
      a.cu_seqlens = cu_seqlens.data();
      a.start_pos = start_pos.data();
      a.q = s.at(0);
      a.k = s.at(1 << 16);
      if (output == "padded_bhsd") {
        a.q_out = s.at(2 << 16);
        a.k_out = s.at(3 << 16);
        a.max_seq_len = 3;
      }
      a.seq_len = 4096;
      expect_rejected(spec, a, "start_pos",
                      "start_pos[1] = 4998 is not allowed: sequence 1 reaches position 4999, which must be < "
                      "seq_len = 4096 " + reason(type));
      a.seq_len = 5000;
      EXPECT_NO_THROW(check_launch(spec, 8, a, true)) << type << " " << output;
      a.start_pos = nullptr;  // positions 0, 1, 2 and 0, 1
      a.seq_len = 2;
      expect_rejected(spec, a, "cu_seqlens",
                      "sequence 0 of 3 tokens is not allowed: it reaches position 2, which must be < seq_len = 2 " +
                          reason(type));
      a.seq_len = 3;
      EXPECT_NO_THROW(check_launch(spec, 8, a, true)) << type << " " << output;
    }
}

TEST(RunLengthLaunch, OffsetAndRerotatePositionsPastTheirLengthsAreRefused) {
  Storage s;
  std::vector<int64_t> start = {4094};
  const Spec offset = test::make_spec(run_length_fields("longrope", "offset"));
  Args a;
  a.num_tokens = 3;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.start_pos = start.data();
  a.seq_len = 4096;
  expect_rejected(offset, a, "start_pos",
                  "start_pos[0] = 4094 is not allowed: the last position 4096 must be < seq_len = 4096 " +
                      reason("longrope"));

  SpecFields f = run_length_fields("longrope", "explicit");
  f.op = "rerotate";
  f.output = "paged_kv";
  f.io_extra = {{"page_size", 16}};
  const Spec rerotate = test::make_spec(f);
  std::vector<int32_t> positions = {0, 1500};
  std::vector<int64_t> slots = {0, 1};
  Args r;
  r.num_tokens = 2;
  r.positions = positions.data();
  r.k_cache = s.at(0);
  r.cache_num_pages = 1;
  r.slot_mapping = slots.data();
  r.from_seq_len = 1024;  // the keys' table: short; but key 1 sits at 1500
  r.seq_len = 2000;
  expect_rejected(rerotate, r, "positions",
                  "key 1 is at position 1500, which is not allowed: must be < from_seq_len = 1024 (the length the "
                  "keys were written at) (rope_type longrope picks its table from from_seq_len)");
  r.from_seq_len = 1501;
  r.seq_len = 1500;
  expect_rejected(rerotate, r, "new_positions",
                  "key 1 moves to position 1500, which is not allowed: must be < seq_len = 1500 " + reason("longrope"));
}

TEST(RunLengthLaunch, CApiRefusesTheLaunchByName) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  ropejit_runtime_options options;
  ropejit_runtime_options_init(&options);
  options.backend = ROPEJIT_BACKEND_HOST;
  ropejit_runtime* runtime = nullptr;
  ASSERT_EQ(ropejit_runtime_create(&options, &runtime), ROPEJIT_STATUS_OK) << ropejit_last_error();
  ropejit_kernel* kernel = nullptr;
  const std::string spec = test::spec_json(run_length_fields("longrope", "varlen")).dump();
  ASSERT_EQ(ropejit_kernel_get(runtime, spec.c_str(), &kernel), ROPEJIT_STATUS_OK) << ropejit_last_error();
  std::vector<uint16_t> q(5 * 4 * 64, 0x3f80), k(5 * 2 * 64, 0x3f80);  // bf16 1.0
  const std::vector<uint16_t> q_before = q;
  std::vector<int32_t> cu_seqlens = {0, 3, 5};
  std::vector<int64_t> start_pos = {10, 4998};
  ropejit_args a;
  ropejit_args_init(&a);
  a.num_tokens = 5;
  a.batch = 2;
  a.cu_seqlens = cu_seqlens.data();
  a.start_pos = start_pos.data();
  a.q = q.data();
  a.k = k.data();
  a.seq_len = 4096;
  EXPECT_EQ(ropejit_kernel_launch(kernel, &a, nullptr), ROPEJIT_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ropejit_last_error()).find("Args::start_pos: start_pos[1] = 4998 is not allowed"),
            std::string::npos)
      << ropejit_last_error();
  EXPECT_EQ(q, q_before);  // refused before anything ran
  a.seq_len = 5000;
  EXPECT_EQ(ropejit_kernel_launch(kernel, &a, nullptr), ROPEJIT_STATUS_OK) << ropejit_last_error();
  ropejit_kernel_destroy(kernel);
  ropejit_runtime_destroy(runtime);
}

// The cuda backend's contract, run on the host backend: the launch checks without reading the
// arrays (as for device memory), then the kernel. Tokens at or past seq_len come out NaN in their
// rotated part (the tail untouched); the others are rotated exactly as in a correct launch.
TEST(RunLengthLaunch, DeviceKernelGivesPositionsPastSeqLenNaNAngles) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  const std::unique_ptr<Backend> backend = make_host_backend();
  for (const std::string type : {"longrope", "dynamic"}) {
    SpecFields f = run_length_fields(type, "explicit");
    f.rotary_dim = 32;  // a pass-through tail [32, 64)
    if (type == "longrope") {
      f.rope["short_factor"] = std::vector<double>(16, 1.0);
      f.rope["long_factor"] = std::vector<double>(16, 4.0);
    }
    f.dtype = "fp32";
    const Spec spec = test::make_spec(f);
    const Config config = default_config(spec);
    const auto variant = KernelVariant::create(*backend, spec, config, nullptr);
    const int64_t T = 4;
    const std::vector<int32_t> positions = {7, 4095, 4096, 5000};  // seq_len 4096: tokens 2 and 3 uncovered
    auto launch = [&](int64_t seq_len, std::vector<float>& q, std::vector<float>& k) {
      Args a;
      a.num_tokens = T;
      a.q = q.data();
      a.k = k.data();
      a.positions = positions.data();
      a.seq_len = seq_len;
      const CheckedLaunch checked = check_launch(spec, config.vec, a, /*host_memory=*/false);
      EXPECT_EQ(checked.params.seq_len, seq_len);
      variant->launch(checked.params, variant->dims(checked.rows), nullptr);
    };
    std::vector<float> q(T * 4 * 64), k(T * 2 * 64);
    for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i)) + 0.1f;
    for (size_t i = 0; i < k.size(); ++i) k[i] = std::cos(0.23f * static_cast<float>(i)) - 0.1f;
    std::vector<float> q_short = q, k_short = k, q_right = q, k_right = k;
    launch(4096, q_short, k_short);  // too short for tokens 2 and 3
    launch(5001, q_right, k_right);  // covers every token
    for (int64_t t = 0; t < T; ++t)
      for (int h = 0; h < 4; ++h)
        for (int e = 0; e < 64; ++e) {
          const size_t i = static_cast<size_t>((t * 4 + h) * 64 + e);
          SCOPED_TRACE(type + " token " + std::to_string(t) + " element " + std::to_string(e));
          if (e >= 32) {
            EXPECT_EQ(q_short[i], q[i]);  // the tail is never touched
          } else {
            EXPECT_EQ(std::isnan(q_short[i]), t >= 2) << q_short[i];
            EXPECT_FALSE(std::isnan(q_right[i])) << q_right[i];
          }
        }
    // Tokens below seq_len are rotated by the seq_len the launch names: a correct launch with
    // that length (positions 7 and 4095 only) gives the same bits.
    std::vector<float> q_two(q.begin(), q.begin() + 2 * 4 * 64), k_two(k.begin(), k.begin() + 2 * 2 * 64);
    Args a;
    a.num_tokens = 2;
    a.q = q_two.data();
    a.k = k_two.data();
    a.positions = positions.data();
    a.seq_len = 4096;
    const CheckedLaunch checked = check_launch(spec, config.vec, a, /*host_memory=*/true);
    variant->launch(checked.params, variant->dims(checked.rows), nullptr);
    EXPECT_EQ(std::memcmp(q_two.data(), q_short.data(), q_two.size() * sizeof(float)), 0) << type;
    EXPECT_EQ(std::memcmp(k_two.data(), k_short.data(), k_two.size() * sizeof(float)), 0) << type;
  }
}

}  // namespace
}  // namespace ropejit
