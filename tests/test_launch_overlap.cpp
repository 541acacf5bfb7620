// Buffers a launch writes must not share memory with its other buffers, checked on the byte
// ranges the launch touches; views that interleave without meeting (q and k of a fused QKV
// tensor, the K and V halves of a combined paged cache) and an output given as its own
// input's view stay allowed.
// ropejit-tier: unit
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "launch/launch_args.h"  // private: check_launch's overlap rules under test
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::expect_rejected;
using ropejit::test::SpecFields;
using ropejit::test::Storage;

namespace {

constexpr int kHeads = 4, kKvHeads = 2, kDim = 64, kPageSize = 4;

SpecFields shape_fields() {
  SpecFields f;
  f.num_q_heads = kHeads;
  f.num_kv_heads = kKvHeads;
  f.head_dim = kDim;
  f.rotary_dim = kDim;
  return f;
}

Spec paged_spec() {
  SpecFields f = shape_fields();
  f.output = "paged_kv";
  f.io_extra = {{"cache_dtype", "auto"}, {"cache_index", "slot_mapping"}, {"page_size", kPageSize}};
  return ropejit::test::make_spec(f);
}

// Three tokens into two-page caches, each tensor in its own 64 KiB of `s`.
Args paged_args(Storage& s, std::vector<int32_t>& positions, std::vector<int64_t>& slots) {
  Args a;
  a.num_tokens = 3;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.v = s.at(2 << 16);
  a.positions = positions.data();
  a.k_cache = s.at(3 << 16);
  a.v_cache = s.at(4 << 16);
  a.cache_num_pages = 2;
  a.slot_mapping = slots.data();
  return a;
}

}  // namespace

TEST(LaunchOverlap, OneTensorAsBothCachesIsRefusedByName) {
  Storage s;
  std::vector<int32_t> positions = {0, 1, 2};
  std::vector<int64_t> slots = {0, 1, 2};
  const Spec spec = paged_spec();
  const Args a = paged_args(s, positions, slots);
  EXPECT_NO_THROW(check_launch(spec, 8, a, true));
  Args b = a;
  b.v_cache = b.k_cache;
  expect_rejected(spec, b, "k_cache", "overlap v_cache at");
  b = a;  // half a page further on: still the same bytes
  b.v_cache = static_cast<char*>(a.k_cache) + kPageSize * kKvHeads * kDim;
  expect_rejected(spec, b, "k_cache", "overlap v_cache at");
  b = a;  // a written cache over a read-only input
  b.k_cache = a.k;
  expect_rejected(spec, b, "k_cache", "overlap k at");
}

TEST(LaunchOverlap, CombinedKvCacheHalvesInterleaveWithoutMeeting) {
  // [pages, 2, page_size, Hkv, D] as engines allocate it: K and V pages alternate.
  Storage s;
  std::vector<int32_t> positions = {0, 1, 2};
  std::vector<int64_t> slots = {0, 5, 2};
  const Spec spec = paged_spec();
  Args a = paged_args(s, positions, slots);
  const int64_t page_elements = int64_t(kPageSize) * kKvHeads * kDim;
  const int64_t page_bytes = page_elements * 2;  // bf16
  a.k_cache = s.at(3 << 16);
  a.v_cache = s.at((3 << 16) + page_bytes);
  a.k_cache_page_stride = a.v_cache_page_stride = 2 * page_elements;
  EXPECT_NO_THROW(check_launch(spec, 8, a, true));
  a.v_cache_page_stride = 0;  // dense V pages would run into K's
  expect_rejected(spec, a, "k_cache", "overlap v_cache at");
}

TEST(LaunchOverlap, FusedQkvViewsAndInPlaceAliasing) {
  Storage s;
  std::vector<int32_t> positions = {0, 1, 2, 3};
  // q and k as views of one [T, (Hq + 2 Hkv) D] row (in place): their bytes interleave.
  const Spec inplace = ropejit::test::make_spec(shape_fields());
  const int64_t row = int64_t(kHeads + 2 * kKvHeads) * kDim;
  Args a;
  a.num_tokens = 4;
  a.q = s.at(0);
  a.k = s.at(kHeads * kDim * 2);
  a.q_stride = a.k_stride = row;
  a.positions = positions.data();
  EXPECT_NO_THROW(check_launch(inplace, 8, a, true));
  Args b = a;  // k starting inside q's heads
  b.k = s.at(kDim * 2);
  expect_rejected(inplace, b, "q", "overlap k at");

  // Separate outputs: q_out may be q's own view (in place by aliasing), not k's.
  SpecFields f = shape_fields();
  f.output = "separate";
  const Spec separate = ropejit::test::make_spec(f);
  Args c;
  c.num_tokens = 4;
  c.q = s.at(0);
  c.k = s.at(1 << 16);
  c.q_out = s.at(2 << 16);
  c.k_out = s.at(3 << 16);
  c.positions = positions.data();
  EXPECT_NO_THROW(check_launch(separate, 8, c, true));
  Args d = c;
  d.q_out = d.q;
  EXPECT_NO_THROW(check_launch(separate, 8, d, true));
  d = c;
  d.q_out = d.k;
  expect_rejected(separate, d, "q_out", "overlap k at");
  d = c;  // an output over the positions array (device memory: its contents are not read)
  d.positions = s.at(4 << 16);
  d.k_out = s.at(4 << 16);
  expect_rejected(separate, d, "k_out", "overlap positions at", /*host_memory=*/false);
}
