// op rerotate outside the kernel: its spec fields (named errors, canonical JSON that leaves every
// rope spec's hash as it was), its launch checks (every bad argument named before any launch),
// its buffers and bytes, and its launch fields.
// ropejit-tier: conformance
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch/launch_args.h"  // private: check_launch's rerotate argument rules under test
#include "ropejit/config.h"
#include "ropejit/introspect.h"
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::expect_rejected;
using ropejit::test::SpecFields;
using ropejit::test::spec_error;
using ropejit::test::Storage;

namespace {

SpecFields rerotate_fields(const std::string& cache_index = "slot_mapping") {
  SpecFields f;
  f.op = "rerotate";
  f.output = "paged_kv";
  f.positions = cache_index == "block_tables" ? "varlen" : "explicit";
  f.num_q_heads = 4;
  f.num_kv_heads = 2;
  f.head_dim = 64;
  f.rotary_dim = 64;
  f.io_extra = {{"cache_index", cache_index}, {"page_size", 4}};
  return f;
}

void expect_error(const nlohmann::json& spec, const std::string& fragment) {
  const std::string error = spec_error(spec);
  EXPECT_NE(error.find(fragment), std::string::npos) << "wanted: " << fragment << "\ngot: " << error;
}

}  // namespace

TEST(Rerotate, SpecFieldsAreValidatedWithNamedErrors) {
  const nlohmann::json spec = test::spec_json(rerotate_fields());
  ASSERT_EQ(spec_error(spec), "accepted");
  const Spec parsed = parse_spec(spec.dump());
  EXPECT_EQ(parsed.op, OpKind::rerotate);
  EXPECT_FALSE(parsed.io.copy_v) << "v is untouched";
  EXPECT_EQ(parsed.from_rope.type, parsed.rope.type) << "from defaults to the rope block";

  nlohmann::json bad = spec;
  bad["io"]["output"] = "inplace";
  bad["io"].erase("page_size");
  bad["io"].erase("cache_index");
  expect_error(bad, "/io/output: \"inplace\" is not allowed: must be \"paged_kv\" when op is rerotate");
  bad = spec;
  bad["io"]["qkv_bias"] = true;
  expect_error(bad, "/io/qkv_bias: true is not allowed: must be false when op is rerotate");
  bad = spec;
  bad["io"]["copy_v"] = true;
  expect_error(bad, "/io/copy_v: true is not allowed: must be false when op is rerotate");
  bad = spec;
  bad["io"]["q_output"] = "separate";
  expect_error(bad, "/io/q_output: \"separate\" is not allowed");
  bad = spec;
  bad["io"]["input"] = "packed_qkv";
  expect_error(bad, "/io/input: \"packed_qkv\" is not allowed");
  bad = spec;
  bad["qk_norm"] = {{"type", "rmsnorm"}};
  expect_error(bad, "/qk_norm: ");
  bad = spec;
  bad["op"] = "rotate";
  expect_error(bad, "/op: \"rotate\" is not allowed: must be one of rope | rerotate");
  bad = spec;
  bad["rerotate"] = {{"from", {{"rope_type", "linear"}, {"rope_theta", 10000.0}}}};
  expect_error(bad, "/rerotate/from/factor: missing required key \"factor\" for rope_type \"linear\"");
  bad["rerotate"] = {{"to", nullptr}};
  expect_error(bad, "/rerotate/to: unknown key");
  bad["rerotate"] = {{"from", {{"rope_type", "default"}, {"rope_theta", 1e-320}}}};
  expect_error(bad, "/rerotate/from/rope_theta: ");
  bad = test::spec_json(rerotate_fields());
  bad.erase("op");
  bad["rerotate"] = {{"from", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  expect_error(bad, "/rerotate: ");
}

TEST(Rerotate, CanonicalJsonNamesTheOpOnlyForRerotate) {
  SpecFields f = rerotate_fields();
  f.from_rope = {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 2.0}};
  const Spec spec = test::make_spec(f);
  const std::string text = canonical_json(spec);
  EXPECT_NE(text.find("\"op\":\"rerotate\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"rerotate\":{\"from\":{\"rope_type\":\"linear\""), std::string::npos) << text;
  EXPECT_EQ(canonical_json(parse_spec(text)), text) << "canonical text round-trips";
  f.from_rope = {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 3.0}};
  EXPECT_NE(spec_hash(test::make_spec(f)), spec_hash(spec)) << "the old parameters are part of the hash";
  // A rope spec's canonical text has no op: every existing hash (cache keys, tuning entries) holds.
  const std::string rope_text = canonical_json(test::make_spec(SpecFields{}));
  EXPECT_EQ(rope_text.find("\"op\""), std::string::npos) << rope_text;
  nlohmann::json explicit_rope = test::spec_json(SpecFields{});
  explicit_rope["op"] = "rope";
  EXPECT_EQ(canonical_json(parse_spec(explicit_rope.dump())), rope_text);
}

TEST(Rerotate, LaunchChecksNameEveryArgument) {
  const Spec spec = test::make_spec(rerotate_fields());
  Storage s;
  std::vector<int32_t> positions = {3, 9, 0};
  std::vector<int64_t> slots = {0, 5, 6};
  Args a;
  a.num_tokens = 3;
  a.positions = positions.data();
  a.k_cache = s.at(0);
  a.cache_num_pages = 4;
  a.slot_mapping = slots.data();
  EXPECT_NO_THROW(check_launch(spec, default_config(spec).vec, a, true));

  Args bad = a;
  bad.q = s.at(1 << 16);
  expect_rejected(spec, bad, "q", "must be null unless io.input separate with op rope or attn_temperature");
  bad = a;
  bad.v_cache = s.at(1 << 16);
  expect_rejected(spec, bad, "v_cache", "must be null unless io.output paged_kv with op rope");
  bad = a;
  bad.k_cache = nullptr;
  expect_rejected(spec, bad, "k_cache", "null is not allowed");
  bad = a;
  std::vector<int64_t> new_start = {0};
  bad.new_start_pos = new_start.data();
  expect_rejected(spec, bad, "new_start_pos", "must be null unless op rerotate with io.positions varlen or offset");
  bad = a;
  std::vector<int32_t> moved = {1, 2, -1};
  bad.new_positions = moved.data();
  expect_rejected(spec, bad, "new_positions", "key 2 moves to position -1");
  moved[2] = 40;
  bad.seq_len = 40;
  expect_rejected(spec, bad, "new_positions", "must be < seq_len = 40");
  bad = a;
  bad.from_seq_len = 9;
  expect_rejected(spec, bad, "positions", "key 1 is at position 9, which is not allowed: must be < from_seq_len = 9");
  bad = a;
  slots[2] = 5;
  expect_rejected(spec, bad, "slot_mapping", "both write cache slot 5");
  slots[2] = 6;

  // A rope spec refuses the rerotate arguments.
  const Spec rope = test::make_spec(SpecFields{});
  Args r;
  r.num_tokens = 1;
  r.q = s.at(0);
  r.k = s.at(1 << 16);
  r.positions = positions.data();
  r.new_positions = positions.data();
  expect_rejected(rope, r, "new_positions", "must be null unless op rerotate with io.positions explicit");
  r.new_positions = nullptr;
  r.from_seq_len = 5;
  expect_rejected(rope, r, "from_seq_len", "5 is not allowed: must be 0 unless op rerotate");
}

TEST(Rerotate, LongRopeFromNeedsTheLengthTheKeysWereWrittenAt) {
  SpecFields f = rerotate_fields();
  std::vector<double> factors(32, 1.5);
  f.rope = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"short_factor", factors}, {"long_factor", factors},
            {"original_max_position_embeddings", 1024}};
  const Spec spec = test::make_spec(f);
  Storage s;
  std::vector<int32_t> positions = {3};
  std::vector<int64_t> slots = {0};
  Args a;
  a.num_tokens = 1;
  a.positions = positions.data();
  a.k_cache = s.at(0);
  a.cache_num_pages = 1;
  a.slot_mapping = slots.data();
  a.seq_len = 2000;
  expect_rejected(spec, a, "from_seq_len", "rope_type longrope needs from_seq_len");
  a.from_seq_len = 1000;
  const CheckedLaunch launch = check_launch(spec, default_config(spec).vec, a, true);
  EXPECT_EQ(launch.params.from_use_long_table, 0);  // written at 1000 <= O: the short table
  EXPECT_EQ(launch.params.use_long_table, 1);       // moving to 2000 > O: the long one
  for (const LaunchField& field : launch_fields(spec)) {
    if (field.name == "from_seq_len" || field.name == "seq_len" || field.name == "k_cache")
      EXPECT_EQ(field.use, FieldUse::required) << field.name;
    if (field.name == "new_positions") EXPECT_EQ(field.use, FieldUse::optional);
    if (field.name == "q" || field.name == "v_cache") EXPECT_EQ(field.use, FieldUse::unused) << field.name;
  }
}

TEST(Rerotate, BytesMovedCountTheRotaryPartOfEachKeyReadAndWritten) {
  SpecFields f = rerotate_fields();
  f.rotary_dim = 32;
  const Spec spec = test::make_spec(f);
  // 10 keys x 2 heads x 32 rotated bf16 elements, read and written; int32 positions and new
  // positions; an 8-byte slot per key.
  EXPECT_EQ(bytes_moved(spec, 10, 0, 0), 10 * 2 * 32 * 2 * 2 + 10 * 4 + 10 * 4 + 10 * 8);
}
