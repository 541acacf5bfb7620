// The paged_kv output form outside the kernel: its spec fields (named errors, canonical JSON),
// its launch argument checks (every bad argument named before any launch) and its bytes.
// ropejit-tier: conformance
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch/launch_args.h"  // private: check_launch's paged_kv argument rules under test
#include "ropejit/config.h"
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::expect_rejected;
using ropejit::test::SpecFields;
using ropejit::test::spec_error;
using ropejit::test::Storage;

namespace {

SpecFields paged_fields(const std::string& cache_dtype, const std::string& cache_index) {
  SpecFields f;
  f.output = "paged_kv";
  f.positions = cache_index == "block_tables" ? "varlen" : "explicit";
  f.num_q_heads = 4;
  f.num_kv_heads = 2;
  f.head_dim = 64;
  f.rotary_dim = 64;
  f.io_extra = {{"cache_dtype", cache_dtype}, {"cache_index", cache_index}, {"page_size", 4}};
  return f;
}

}  // namespace

TEST(PagedKv, SpecFieldsAreValidatedWithNamedErrors) {
  nlohmann::json spec = ropejit::test::spec_json(paged_fields("fp8_e4m3", "slot_mapping"));
  EXPECT_EQ(spec_error(spec), "accepted");
  const Spec parsed = parse_spec(spec.dump());
  EXPECT_TRUE(parsed.io.copy_v);  // v goes into the V cache
  EXPECT_EQ(parsed.io.page_size, 4);
  EXPECT_EQ(parsed.io.cache_dtype, CacheDType::fp8_e4m3);
  EXPECT_NE(canonical_json(parsed).find("\"cache_layout\":\"nhd\""), std::string::npos);  // defaults written

  nlohmann::json bad = spec;
  bad["io"].erase("page_size");
  EXPECT_NE(spec_error(bad).find("/io/page_size: missing"), std::string::npos) << spec_error(bad);
  bad = spec;
  bad["io"]["page_size"] = 0;
  EXPECT_NE(spec_error(bad).find("/io/page_size: 0 is not allowed"), std::string::npos) << spec_error(bad);
  bad = spec;
  bad["io"]["cache_dtype"] = "fp8";
  EXPECT_NE(spec_error(bad).find("auto | fp8_e4m3 | fp8_e5m2"), std::string::npos) << spec_error(bad);
  nlohmann::json k_is_v = spec;  // K = V (DeepSeek-V4): no V cache, the engine reads the K cache as V
  k_is_v["io"]["copy_v"] = false;
  EXPECT_EQ(spec_error(k_is_v), "accepted");
  EXPECT_FALSE(parse_spec(k_is_v.dump()).io.copy_v);
  bad = spec;
  bad["io"]["cache_index"] = "block_tables";
  EXPECT_NE(spec_error(bad).find("/io/positions: \"explicit\" is not allowed: must be \"varlen\" when cache_index is "
                                 "block_tables"),
            std::string::npos)
      << spec_error(bad);
  bad = spec;
  bad["io"]["output"] = "inplace";
  EXPECT_NE(spec_error(bad).find("/io/cache_dtype: \"fp8_e4m3\" is not allowed: must be absent unless io.output is "
                                 "\"paged_kv\""),
            std::string::npos)
      << spec_error(bad);
}

TEST(PagedKv, SlotMappingArguments) {
  Storage s;
  const Spec spec = ropejit::test::make_spec(paged_fields("fp8_e4m3", "slot_mapping"));
  std::vector<int32_t> positions = {0, 1, 2};
  std::vector<int64_t> slots = {5, -1, 0};
  Args a;
  a.num_tokens = 3;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.v = s.at(2 << 16);
  a.positions = positions.data();
  a.k_cache = s.at(3 << 16);
  a.v_cache = s.at(4 << 16);
  a.cache_num_pages = 2;  // slots [0, 8)
  a.slot_mapping = slots.data();
  a.k_scale = 0.5f;
  a.v_scale = 0.25f;
  const CheckedLaunch ok = check_launch(spec, 8, a, true);
  EXPECT_EQ(ok.params.cache_pages, 2);
  EXPECT_EQ(ok.params.cache_inv_scale[0], 2.0f);
  EXPECT_EQ(ok.params.out[kRoleK].batch_stride, 4 * 2 * 64);  // dense pages
  EXPECT_EQ(ok.params.out[kRoleQ].ptr, a.q);                   // q in place

  Args b = a;
  b.k_cache = nullptr;
  expect_rejected(spec, b, "k_cache", "null is not allowed");
  b = a;
  b.v_cache = s.at((4 << 16) + 4);
  expect_rejected(spec, b, "v_cache", "8-byte aligned");  // 8 FP8 elements per store
  b = a;
  b.k_out = s.at(0);
  expect_rejected(spec, b, "k_out", "must be null unless io.output separate or padded_bhsd");
  // K = V (copy_v false): no V cache, so neither v nor v_cache nor v_scale may be given.
  SpecFields k_is_v = paged_fields("fp8_e4m3", "slot_mapping");
  k_is_v.io_extra["copy_v"] = false;
  const Spec shared = ropejit::test::make_spec(k_is_v);
  b = a;
  b.v = nullptr;
  b.v_cache = nullptr;
  b.v_scale = 0.0f;
  const CheckedLaunch no_v = check_launch(shared, 8, b, true);
  EXPECT_EQ(no_v.params.out[kRoleV].ptr, nullptr);
  b.v_cache = a.v_cache;
  expect_rejected(shared, b, "v_cache", "must be null unless");
  b.v_cache = nullptr;
  b.v = a.v;
  expect_rejected(shared, b, "v", "must be null unless");
  b = a;
  b.cache_num_pages = 0;
  expect_rejected(spec, b, "cache_num_pages", "0 is not allowed");
  slots = {8, -1, 0};
  expect_rejected(spec, a, "slot_mapping", "slot_mapping[0] = 8 is not allowed");
  slots = {5, -2, 0};
  expect_rejected(spec, a, "slot_mapping", "slot_mapping[1] = -2 is not allowed");
  slots = {5, 0, 5};
  expect_rejected(spec, a, "slot_mapping", "tokens 0 and 2 both write cache slot 5");
  slots = {5, -1, 0};
  b = a;
  b.slot_mapping = nullptr;
  expect_rejected(spec, b, "slot_mapping", "null is not allowed");
  b = a;
  b.block_tables = reinterpret_cast<const int32_t*>(s.at(0));
  expect_rejected(spec, b, "block_tables", "must be null");
  b = a;
  b.k_scale = 0.0f;
  expect_rejected(spec, b, "k_scale", "0 is not allowed: must be a finite number > 0");
  b = a;
  b.v_scale = std::numeric_limits<float>::infinity();
  expect_rejected(spec, b, "v_scale", "must be a finite number > 0");
  b = a;
  b.k_cache_page_stride = 8;
  expect_rejected(spec, b, "k_cache_page_stride", ">= 512");
  b = a;
  b.cache_num_pages = int64_t(1) << 40;
  b.k_cache_page_stride = int64_t(1) << 40;
  expect_rejected(spec, b, "k_cache_page_stride", "overflow");

  const Spec plain = ropejit::test::make_spec(paged_fields("auto", "slot_mapping"));
  expect_rejected(plain, a, "k_scale", "0.5 is not allowed: must be 0 unless an fp8 io.cache_dtype");

  // Another output form: a cache argument is a mistake, named rather than ignored.
  SpecFields inplace_fields = paged_fields("auto", "slot_mapping");
  inplace_fields.output = "inplace";
  inplace_fields.io_extra = nullptr;
  const Spec inplace = ropejit::test::make_spec(inplace_fields);
  b = Args();
  b.num_tokens = 3;
  b.q = a.q;
  b.k = a.k;
  b.positions = a.positions;
  EXPECT_NO_THROW(check_launch(inplace, 8, b, true));
  b.slot_mapping = slots.data();
  expect_rejected(inplace, b, "slot_mapping", "must be null unless io.cache_index slot_mapping with io.output paged_kv");
  b.slot_mapping = nullptr;
  b.cache_num_pages = 4;
  expect_rejected(inplace, b, "cache_num_pages", "4 is not allowed: must be 0 unless io.output paged_kv");
}

TEST(PagedKv, BlockTablesArguments) {
  Storage s;
  SpecFields f = paged_fields("auto", "block_tables");
  f.io_extra["q_output"] = "separate";
  const Spec spec = ropejit::test::make_spec(f);
  // Two sequences: 3 tokens from position 2 (blocks 0 and 1), 2 tokens from position 0.
  std::vector<int32_t> cu = {0, 3, 5};
  std::vector<int64_t> start = {2, 0};
  std::vector<int32_t> tables = {1, 0, 2, 9};  // [2, 2]; entry [1][1] is never used
  Args a;
  a.num_tokens = 5;
  a.q = s.at(0);
  a.k = s.at(1 << 16);
  a.v = s.at(2 << 16);
  a.q_out = s.at(5 << 16);
  a.cu_seqlens = cu.data();
  a.start_pos = start.data();
  a.batch = 2;
  a.k_cache = s.at(3 << 16);
  a.v_cache = s.at(4 << 16);
  a.cache_num_pages = 3;
  a.block_tables = tables.data();
  a.max_blocks_per_seq = 2;
  EXPECT_NO_THROW(check_launch(spec, 8, a, true));

  Args b = a;
  b.q_out = nullptr;
  expect_rejected(spec, b, "q_out", "null is not allowed: required when the spec's io.q_output is separate");
  b = a;
  b.max_blocks_per_seq = 1;  // sequence 0 reaches position 4, block 1
  expect_rejected(spec, b, "max_blocks_per_seq", "sequence 0 reaches position 4");
  tables = {1, 3, 2, 9};
  expect_rejected(spec, a, "block_tables", "block_tables[0][1] = 3 is not allowed");
  tables = {1, 2, 2, 9};  // sequence 0's position 4 and sequence 1's position 0 share page 2, offset 0
  expect_rejected(spec, a, "block_tables", "both write cache slot 8");
  tables = {1, 0, 2, 9};
  b = a;
  b.slot_mapping = reinterpret_cast<const int64_t*>(s.at(0));
  expect_rejected(spec, b, "slot_mapping", "must be null");
}

// What a launch moves: q read and written (whole heads: the QK-norm rewrites the tail), k and v
// read once, one cache slot per token in the cache dtype, int32 positions, the slot mapping and
// the weights.
TEST(PagedKv, BytesMovedCountWhatTheFormMoves) {
  SpecFields f = paged_fields("fp8_e5m2", "slot_mapping");
  f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  const Spec spec = ropejit::test::make_spec(f);
  const int64_t T = 100, D = 64, Hq = 4, Hkv = 2;
  const int64_t q = T * Hq * D * 2 * 2, kv_in = 2 * T * Hkv * D * 2, cache = 2 * T * Hkv * D * 1;
  EXPECT_EQ(bytes_moved(spec, T, 0, 0), q + kv_in + cache + T * 4 + T * 8 + 2 * D * 2);

  // q in place without a norm keeps its tail; the caches still take whole heads.
  SpecFields partial = paged_fields("auto", "slot_mapping");
  partial.rotary_dim = 32;
  const Spec tail = ropejit::test::make_spec(partial);
  EXPECT_EQ(bytes_moved(tail, T, 0, 0), T * Hq * 32 * 2 * 2 + 2 * T * Hkv * D * 2 + 2 * T * Hkv * D * 2 + T * 4 + T * 8);
}
