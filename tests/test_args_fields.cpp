// The ropejit_args field list (ropejit/args_fields.h) and its table (runtime/src/launch/args_fields.h):
// it lists the struct's fields as the C API does, gives the earlier headers' struct sizes, and
// drives the one launch check that refuses a field a spec does not use.
// ropejit-tier: unit
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/internal/c_api_guard.h"
#include "launch/args_fields.h"  // private: kArgsFields and used_args_fields, the field table under test
#include "launch/launch_args.h"  // private: check_launch refusing unused fields, under test
#include "ropejit/introspect.h"
#include "ropejit/ropejit.h"
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::expect_rejected;
using ropejit::test::SpecFields;
using ropejit::test::Storage;

namespace {

SpecFields paged_fields(const std::string& cache_dtype) {
  SpecFields f;
  f.output = "paged_kv";
  f.num_q_heads = 4;
  f.num_kv_heads = 2;
  f.head_dim = f.rotary_dim = 64;
  f.io_extra = {{"cache_dtype", cache_dtype}, {"cache_index", "slot_mapping"}, {"page_size", 4}};
  return f;
}

SpecFields rerotate_fields() {
  SpecFields f = paged_fields("auto");
  f.op = "rerotate";
  f.io_extra.erase("cache_dtype");
  return f;
}

/// A valid launch of `spec` (5 tokens, FP8 scales `scale`), each buffer in `storage`; checked
/// as device memory, so no array is read.
Args valid_args(const Spec& spec, Storage& storage, float scale = 0.0f) {
  const LaunchShape shape{5, 2, 8, PositionsType::int32, 6, 3, scale, scale};
  const Args a = test::bound_args(spec, launch_buffers(spec, shape), shape, storage);
  EXPECT_NO_THROW(check_launch(spec, default_config(spec).vec, a, false));
  return a;
}

const ArgsField& row(std::string_view name) { return kArgsFields[args_field_index(name)]; }

/// `set` (which changes field `name`) refused on `unused_in` as unused, with the whole message,
/// and accepted on `used_in` (whose valid launch has FP8 scales `used_scale`).
void expect_refused_unless_used(const std::string& name, const Spec& unused_in, const Spec& used_in,
                                const std::function<void(Args&)>& set, const std::string& message,
                                float used_scale = 0.0f) {
  Storage storage;
  Args bad = valid_args(unused_in, storage);
  set(bad);
  expect_rejected(unused_in, bad, name, "Args::" + name + ": " + message + " (this spec does not use it)", false);
  Args good = valid_args(used_in, storage, used_scale);
  set(good);
  EXPECT_NO_THROW(check_launch(used_in, default_config(used_in).vec, good, false)) << name;
  // A caller's kept used set gives the same verdicts.
  EXPECT_THROW(check_launch(unused_in, default_config(unused_in).vec, bad, false, used_args_fields(unused_in)), Error);
  EXPECT_NO_THROW(check_launch(used_in, default_config(used_in).vec, good, false, used_args_fields(used_in)));
}

}  // namespace

TEST(ArgsFields, TableListsTheCApiFieldsInOrder) {
  size_t offset = 0;
  ASSERT_STREQ(ropejit_struct_field("ropejit_args", 0, &offset), "struct_size");
  for (size_t i = 0; i < kArgsFieldCount; ++i) {
    const char* name = ropejit_struct_field("ropejit_args", i + 1, &offset);
    ASSERT_NE(name, nullptr) << kArgsFields[i].name;
    EXPECT_EQ(kArgsFields[i].name, name);
    EXPECT_EQ(kArgsFields[i].offset, offset) << name;
    EXPECT_EQ(args_field_index(name), i);
  }
  EXPECT_EQ(ropejit_struct_field("ropejit_args", kArgsFieldCount + 1, &offset), nullptr);
  EXPECT_EQ(offset, sizeof(ropejit_args));
  EXPECT_EQ(find_args_field("struct_size"), nullptr);
  EXPECT_THROW(args_field_index("no_such_field"), Error);
  // The type kinds the generic readers follow.
  EXPECT_EQ(row("q").kind, ArgsFieldKind::pointer);
  EXPECT_EQ(row("q_stride").kind, ArgsFieldKind::int64);
  EXPECT_EQ(row("batch").kind, ArgsFieldKind::int32);
  EXPECT_EQ(row("k_scale").kind, ArgsFieldKind::float32);
  EXPECT_EQ(row("positions_type").kind, ArgsFieldKind::positions_type);
}

TEST(ArgsFields, OlderStructSizesEndBeforeEachLaterGeneration) {
  ASSERT_EQ(kArgsGenerations, 9);
  EXPECT_EQ(kArgsOlderSizes[0], offsetof(ropejit_args, q_norm_weight));
  EXPECT_EQ(kArgsOlderSizes[1], offsetof(ropejit_args, k_cache));
  EXPECT_EQ(kArgsOlderSizes[2], offsetof(ropejit_args, new_positions));
  EXPECT_EQ(kArgsOlderSizes[3], offsetof(ropejit_args, kv_c));
  EXPECT_EQ(kArgsOlderSizes[4], offsetof(ropejit_args, k_nope));
  EXPECT_EQ(kArgsOlderSizes[5], offsetof(ropejit_args, q_scale));
  EXPECT_EQ(kArgsOlderSizes[6], offsetof(ropejit_args, cos_sin_cache));
  EXPECT_EQ(kArgsOlderSizes[7], offsetof(ropejit_args, q_norm_bias));
  for (size_t size : kArgsOlderSizes)
    EXPECT_NO_THROW(c_api::check_struct_size(size, sizeof(ropejit_args), "ropejit_args", kArgsOlderSizes.data(),
                                             kArgsOlderSizes.size()));
  try {
    c_api::check_struct_size(kArgsOlderSizes[0] + 8, sizeof(ropejit_args), "ropejit_args", kArgsOlderSizes.data(),
                             kArgsOlderSizes.size());
    FAIL() << "a size between generations was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(kArgsOlderSizes[2])), std::string::npos) << e.what();
  }
}

TEST(ArgsFields, ReadersAndDefaults) {
  Args a;
  for (const ArgsField& f : kArgsFields) EXPECT_TRUE(field_is_default(f, a)) << f.name;
  a.k_scale = -0.0f;
  EXPECT_TRUE(field_is_default(row("k_scale"), a));
  a.k_scale = 0.5f;
  a.batch = 3;
  a.positions_type = PositionsType::int64;
  a.k_cache_page_stride = 1024;
  EXPECT_FALSE(field_is_default(row("k_scale"), a));
  EXPECT_EQ(field_value_text(row("k_scale"), a), "0.5");
  EXPECT_EQ(field_integer(row("batch"), a), 3);
  EXPECT_EQ(field_integer(row("positions_type"), a), 1);
  EXPECT_EQ(field_integer(row("k_cache_page_stride"), a), 1024);
  EXPECT_EQ(field_value_text(row("q"), a), "null");
  EXPECT_EQ(field_pointer(row("q"), a), nullptr);
  EXPECT_THROW(field_pointer(row("batch"), a), Error);
}

TEST(ArgsFields, UsedSetIsWhatLaunchFieldsCallsUsed) {
  for (const SpecFields& f : {SpecFields{}, paged_fields("fp8_e4m3"), rerotate_fields()}) {
    const Spec spec = test::make_spec(f);
    const ArgsFieldSet used = used_args_fields(spec);
    for (const LaunchField& field : launch_fields(spec))
      EXPECT_EQ(used.test(args_field_index(field.name)), field.use != FieldUse::unused) << field.name;
  }
}

TEST(ArgsFields, UnusedPointersAreRefusedByNameWhereUnused) {
  const Spec plain = test::make_spec({});  // separate q, k in place, explicit positions
  Storage other;
  void* const p = other.at(0);
  const std::string at = fmt::format("{}", p);
  expect_refused_unless_used("v_cache", plain, test::make_spec(paged_fields("auto")), [&](Args& a) { a.v_cache = p; },
                             at + " is not allowed: must be null unless io.output paged_kv with op rope");
  SpecFields weighted;
  weighted.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  expect_refused_unless_used("q_norm_weight", plain, test::make_spec(weighted),
                             [&](Args& a) { a.q_norm_weight = p; },
                             at + " is not allowed: must be null unless qk_norm with weight per_head and heads q_and_k");
  // Op rerotate reads no q: the rope-only pointers are refused there.
  expect_refused_unless_used("q", test::make_spec(rerotate_fields()), plain, [&](Args& a) { a.q = p; },
                             at + " is not allowed: must be null unless io.input separate with op rope or attn_temperature");
  expect_refused_unless_used("new_positions", plain, test::make_spec(rerotate_fields()),
                             [&](Args& a) { a.new_positions = p; },
                             at + " is not allowed: must be null unless op rerotate with io.positions explicit");
}

TEST(ArgsFields, UnusedScalarsAreRefusedByNameWhereUnused) {
  const Spec plain = test::make_spec({});
  SpecFields separate_out;
  separate_out.output = "separate";
  separate_out.copy_v = true;
  const Spec copies_v = test::make_spec(separate_out);
  // Strides of buffers the spec has no use for (k_out in place, v not copied): dense-valued, still refused.
  expect_refused_unless_used("k_out_stride", plain, copies_v, [](Args& a) { a.k_out_stride = 2 * 128; },
                             "256 is not allowed: must be 0 unless io.output separate, or mla_append.concat_k");
  expect_refused_unless_used("v_stride", plain, copies_v, [](Args& a) { a.v_stride = 2 * 128; },
                             "256 is not allowed: must be 0 unless op rope with io.input separate and io.copy_v");
  expect_refused_unless_used("from_seq_len", plain, test::make_spec(rerotate_fields()),
                             [](Args& a) { a.from_seq_len = 4096; }, "4096 is not allowed: must be 0 unless op rerotate");
  // An FP8 cache's scale: unused (so 0) with an auto cache dtype.
  expect_refused_unless_used("k_scale", test::make_spec(paged_fields("auto")),
                             test::make_spec(paged_fields("fp8_e4m3")), [](Args& a) { a.k_scale = 0.25f; },
                             "0.25 is not allowed: must be 0 unless an fp8 io.cache_dtype (cache_scale static, not fp8_ds_mla) "
                             "with paged_kv or op rerotate", 0.5f);
  expect_refused_unless_used("cache_num_pages", plain, test::make_spec(paged_fields("auto")),
                             [](Args& a) { a.cache_num_pages = 6; },
                             "6 is not allowed: must be 0 unless io.output paged_kv or op rerotate");
}

TEST(ArgsFields, ShapeFieldsAreLeftToTheirRangeChecks) {
  const Spec plain = test::make_spec({});
  Storage storage;
  Args a = valid_args(plain, storage);
  a.batch = 1;        // read beside cu_seqlens or padded rows elsewhere
  a.max_seq_len = 7;  // padded_bhsd's S
  a.seq_len = 64;
  a.positions_type = PositionsType::int64;
  EXPECT_NO_THROW(check_launch(plain, default_config(plain).vec, a, false));
  for (const char* name : {"num_tokens", "batch", "max_seq_len", "seq_len", "positions_type"})
    EXPECT_TRUE(is_shape_field(name)) << name;
  EXPECT_FALSE(is_shape_field("from_seq_len"));
}
