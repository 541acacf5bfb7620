// The rope parameter table is the one place a rope parameter is described: every RopeParams
// member has exactly one row, and parsing, storing, canonical JSON and the schema follow it.
// ropejit-tier: unit
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ropejit/spec.h"
#include "spec_json.h"  // private: rope_param_rules and spec_to_json, the parameter table under test
#include "support/spec_builder.h"

namespace ropejit {
namespace {

using nlohmann::json;

// The address of a member as a row names it.
const void* member_address(const RopeParams& rope, const RopeParamRule& rule) {
  return std::visit([&](auto member) -> const void* { return &(rope.*member); }, rule.field);
}

TEST(RopeParams, EveryMemberButTypeHasExactlyOneRow) {
  RopeParams rope;
  // Fails to compile when RopeParams gains or loses a member: add its row, then the name here.
  auto& [type, theta, factor, original, low, high, beta_fast, beta_slow, mscale, mscale_all_dim,
         attention_factor, truncate, alpha, seq_len, short_factor, long_factor, partial_rotary_factor,
         short_mscale, long_mscale] = rope;
  (void)type;
  const std::vector<const void*> members{
      &theta,    &factor,         &original,         &low,      &high,  &beta_fast,
      &beta_slow, &mscale,        &mscale_all_dim,   &attention_factor, &truncate,
      &alpha,    &seq_len,        &short_factor,     &long_factor,      &partial_rotary_factor,
      &short_mscale, &long_mscale};
  ASSERT_EQ(rope_param_rules().size(), members.size());
  std::set<const void*> named;
  for (const auto& rule : rope_param_rules()) {
    const void* at = member_address(rope, rule);
    EXPECT_TRUE(named.insert(at).second) << rule.key << " names a member another row names";
    EXPECT_NE(std::find(members.begin(), members.end(), at), members.end()) << rule.key;
    EXPECT_EQ(find_rope_param(rule.key), &rule) << rule.key;
  }
}

// A value of the parameter's kind, valid for `type` and different from its default.
json sample_value(const RopeParamRule& rule, RopeType type, int rotary_dim) {
  const std::string key(rule.key);
  if (key == "original_max_position_embeddings") return 4096;
  if (key == "seq_len") return 6000;
  if (key == "low_freq_factor") return 1.5;
  if (key == "high_freq_factor") return 3.5;
  if (key == "beta_fast") return 24.0;
  if (key == "beta_slow") return 2.0;
  if (key == "truncate") return false;
  if (key == "short_factor") return json(std::vector<double>(rotary_dim / 2, 1.25));
  if (key == "long_factor") return json(std::vector<double>(rotary_dim / 2, 3.5));
  if (key == "factor") return type == RopeType::longrope ? 8.0 : 4.0;
  if (key == "alpha") return 2.5;
  if (key == "rope_theta") return 123456.0;
  return 0.75;  // mscale, mscale_all_dim, attention_factor
}

TEST(RopeParams, EveryRowIsReadStoredAndWrittenBackForEveryRopeType) {
  const int rotary_dim = 64;
  for (const auto& row : enum_table<RopeType>()) {
    SCOPED_TRACE(std::string(row.name));
    test::SpecFields f;
    f.head_dim = f.rotary_dim = rotary_dim;
    f.max_position_embeddings = 32768;
    f.rope = {{"rope_type", std::string(row.name)}};
    std::set<std::string> expected{"rope_type"};
    for (const auto& rule : rope_param_rules()) {
      if (!rule.applies(row.value)) continue;
      f.rope[std::string(rule.key)] = sample_value(rule, row.value, rotary_dim);
      expected.insert(std::string(rule.key));
    }
    const Spec spec = test::make_spec(f);
    // Stored in the member the row names.
    for (const auto& rule : rope_param_rules()) {
      const json value = rope_param_value(spec.rope, rule);
      if (rule.applies(row.value))
        EXPECT_EQ(value, f.rope[std::string(rule.key)]) << rule.key;
      else
        EXPECT_TRUE(value.is_null() || value == json::array()) << rule.key << " = " << value;
    }
    // Written back: the applicable keys, the same values, and parsed again to the same spec.
    const auto canonical = spec_to_json(spec);
    std::set<std::string> written;
    for (const auto& item : canonical["rope"].items()) written.insert(item.key());
    EXPECT_EQ(written, expected);
    EXPECT_EQ(json::parse(canonical["rope"].dump()), f.rope);
    EXPECT_EQ(spec_hash(parse_spec(canonical.dump())), spec_hash(spec));
  }
}

TEST(RopeParams, AKeyOfAnotherRopeTypeIsRejectedByName) {
  for (const auto& row : enum_table<RopeType>()) {
    for (const auto& rule : rope_param_rules()) {
      if (rule.applies(row.value)) continue;
      test::SpecFields f;
      f.rope = {{"rope_type", std::string(row.name)}, {"rope_theta", 10000.0}};
      for (const auto& other : rope_param_rules())
        if (other.required.has(row.value))
          f.rope[std::string(other.key)] = sample_value(other, row.value, f.rotary_dim);
      f.rope[std::string(rule.key)] = sample_value(rule, row.value, f.rotary_dim);
      try {
        test::make_spec(f);
        ADD_FAILURE() << rule.key << " accepted for " << row.name;
      } catch (const SpecError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("/rope/" + std::string(rule.key)), std::string::npos) << message;
        EXPECT_NE(message.find("does not apply"), std::string::npos) << message;
      }
    }
  }
}

TEST(RopeParams, DefaultsComeFromTheTable) {
  for (const auto& rule : rope_param_rules()) {
    for (const auto& row : enum_table<RopeType>()) {
      if (!rule.optional.has(row.value)) continue;
      if (rule.fallback.is_null() && !rule.fallback_max_positions.has(row.value)) continue;
      SCOPED_TRACE(std::string(rule.key) + " of " + std::string(row.name));
      test::SpecFields f;
      f.max_position_embeddings = 12345;
      f.rope = {{"rope_type", std::string(row.name)}};
      for (const auto& other : rope_param_rules())
        if (other.required.has(row.value))
          f.rope[std::string(other.key)] = sample_value(other, row.value, f.rotary_dim);
      const Spec spec = test::make_spec(f);
      const json want = rule.fallback_max_positions.has(row.value) ? json(12345) : rule.fallback;
      EXPECT_EQ(rope_param_value(spec.rope, rule), want);
      EXPECT_EQ(json::parse(spec_to_json(spec)["rope"][std::string(rule.key)].dump()), want);
    }
  }
}

}  // namespace
}  // namespace ropejit
