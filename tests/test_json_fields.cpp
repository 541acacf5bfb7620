// The one reader of JSON fields (ropejit/json_fields.h): each type and its bounds, uint64 never
// wrapped, unknown keys with a suggestion, missing keys, and both policies' message form
// "<pointer>: <value> is not allowed: must be <allowed set>".
// ropejit-tier: unit
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ropejit/json_fields.h"

namespace ropejit {
namespace {

using nlohmann::json;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A collecting reader and the "pointer: message" lines it gathered.
struct Collected {
  std::vector<std::string> issues;
  JsonFields fields{[this](const std::string& pointer, const std::string& message) {
    issues.push_back(pointer + ": " + message);
  }};
};

TEST(JsonFields, IntegerBoundsAndTheAllowedSetInTheMessage) {
  Collected c;
  EXPECT_EQ(c.fields.integer(json(7), "/n", 1, 8), 7);
  EXPECT_EQ(c.fields.integer(json(1), "/n", 1, 8), 1);
  EXPECT_EQ(c.fields.integer(json(8), "/n", 1, 8), 8);
  EXPECT_EQ(c.fields.integer(json(-3), "/n", -5, 8), -3);
  EXPECT_TRUE(c.issues.empty());
  EXPECT_FALSE(c.fields.integer(json(9), "/n", 1, 8));
  EXPECT_FALSE(c.fields.integer(json(0), "/n", 1, 8));
  EXPECT_FALSE(c.fields.integer(json("8"), "/n", 1, 8));
  EXPECT_FALSE(c.fields.integer(json(true), "/n", 1, 8));
  EXPECT_FALSE(c.fields.integer(json(3), "/n", 4, 8, "an even integer in [4, 8]"));
  const std::vector<std::string> want{
      "/n: 9 is not allowed: must be an integer in [1, 8]",
      "/n: 0 is not allowed: must be an integer in [1, 8]",
      "/n: \"8\" is not allowed: must be an integer in [1, 8]",
      "/n: true is not allowed: must be an integer in [1, 8]",
      "/n: 3 is not allowed: must be an even integer in [4, 8]",
  };
  EXPECT_EQ(c.issues, want);
}

TEST(JsonFields, IntegerBoundsAtTheInt64LimitsAreNotSpelledOut) {
  Collected c;
  EXPECT_FALSE(c.fields.integer(json(-1), "/a", 0, kInt64Max));
  EXPECT_FALSE(c.fields.integer(json("x"), "/b", kInt64Min, kInt64Max));
  ASSERT_EQ(c.issues.size(), 2u);
  EXPECT_EQ(c.issues[0], "/a: -1 is not allowed: must be an integer >= 0");
  EXPECT_EQ(c.issues[1], "/b: \"x\" is not allowed: must be an integer");
}

// nlohmann reads a positive integer as uint64: one beyond int64 (or beyond hi) is refused,
// never wrapped into a valid, possibly negative, value.
TEST(JsonFields, Uint64BeyondInt64IsRefusedNeverWrapped) {
  Collected c;
  const json huge = json::parse("18446744073709551615");
  ASSERT_TRUE(huge.is_number_unsigned());
  EXPECT_FALSE(c.fields.integer(huge, "/u", kInt64Min, kInt64Max));
  EXPECT_FALSE(c.fields.integer(json::parse("9223372036854775808"), "/u", 0, kInt64Max));
  EXPECT_FALSE(c.fields.integer(json::parse("4294967552"), "/u", 0, std::numeric_limits<int>::max()));
  EXPECT_EQ(c.issues.size(), 3u);
  EXPECT_EQ(c.issues[0], "/u: 18446744073709551615 is not allowed: must be an integer");
  // The largest int64 and an unsigned value under a negative lower bound are read.
  EXPECT_EQ(c.fields.integer(json::parse("9223372036854775807"), "/u", 0, kInt64Max), kInt64Max);
  EXPECT_EQ(c.fields.integer(json::parse("5"), "/u", kInt64Min, kInt64Max), 5);
  EXPECT_EQ(c.issues.size(), 3u);
}

TEST(JsonFields, IntegralFloatsOnlyWhenAccepted) {
  Collected strict;
  EXPECT_FALSE(strict.fields.integer(json(4096.0), "/n", 1, 8192));
  ASSERT_EQ(strict.issues.size(), 1u);
  EXPECT_EQ(strict.issues[0], "/n: 4096.0 is not allowed: must be an integer in [1, 8192]");

  Collected loose;
  loose.fields.accept_integral_floats();
  EXPECT_EQ(loose.fields.integer(json(4096.0), "/n", 1, 8192), 4096);
  EXPECT_FALSE(loose.fields.integer(json(4096.5), "/n", 1, 8192));
  EXPECT_FALSE(loose.fields.integer(json(16384.0), "/n", 1, 8192));
  EXPECT_FALSE(loose.fields.integer(json(1e300), "/n", kInt64Min, kInt64Max)) << "beyond int64: no overflow";
  EXPECT_FALSE(loose.fields.integer(json(9223372036854775808.0), "/n", kInt64Min, kInt64Max));
  EXPECT_FALSE(loose.fields.integer(json(std::numeric_limits<double>::infinity()), "/n", kInt64Min, kInt64Max));
  ASSERT_EQ(loose.issues.size(), 5u);
  EXPECT_EQ(loose.issues[0], "/n: 4096.5 is not allowed: must be an integer in [1, 8192]");
  EXPECT_EQ(loose.issues[4], "/n: inf is not allowed: must be an integer");
}

// A list's problems are named by index.
TEST(JsonFields, NumberBoundsFinitenessAndLists) {
  Collected c;
  EXPECT_EQ(c.fields.number(json(0.5), "/x", 0, true, 1.0), 0.5);
  EXPECT_EQ(c.fields.number(json(1.0), "/x", 0, true, 1.0), 1.0);
  EXPECT_EQ(c.fields.number(json(0), "/x", 0, false), 0.0);
  EXPECT_EQ(c.fields.number(json(3), "/x", 0, false), 3.0) << "an integer is a number";
  EXPECT_TRUE(c.issues.empty());
  EXPECT_FALSE(c.fields.number(json(0), "/x", 0, true));
  EXPECT_FALSE(c.fields.number(json(1.5), "/x", 0, true, 1.0));
  EXPECT_FALSE(c.fields.number(json(-1.0), "/x", 0, false));
  EXPECT_FALSE(c.fields.number(json("1"), "/x", 1, false));
  EXPECT_FALSE(c.fields.number(json(std::numeric_limits<double>::infinity()), "/x", 0, true));
  EXPECT_FALSE(c.fields.number(json(std::numeric_limits<double>::quiet_NaN()), "/x", 0, true));
  EXPECT_EQ(c.fields.number_list(json::array({1.0, 2.5}), "/l", 0, true), (std::vector<double>{1.0, 2.5}));
  EXPECT_FALSE(c.fields.number_list(json::array({1.0, -2.0, 0}), "/l", 0, true));
  EXPECT_FALSE(c.fields.number_list(json(1.0), "/l", 0, true));
  const std::vector<std::string> want{
      "/x: 0 is not allowed: must be a number > 0",
      "/x: 1.5 is not allowed: must be a number > 0 and <= 1",
      "/x: -1.0 is not allowed: must be a number >= 0",
      "/x: \"1\" is not allowed: must be a number >= 1",
      "/x: inf is not allowed: must be a finite number > 0",
      "/x: nan is not allowed: must be a finite number > 0",
      "/l/1: -2.0 is not allowed: must be a number > 0",
      "/l/2: 0 is not allowed: must be a number > 0",
      "/l: 1.0 is not allowed: must be a list of numbers > 0",
  };
  EXPECT_EQ(c.issues, want);
}

TEST(JsonFields, BooleanStringAndEnum) {
  Collected c;
  EXPECT_EQ(c.fields.boolean(json(false), "/b"), false);
  EXPECT_EQ(c.fields.string(json("H100"), "/s"), "H100");
  EXPECT_EQ(c.fields.enumeration<Layout>(json("interleaved"), "/layout"), Layout::interleaved);
  EXPECT_TRUE(c.issues.empty());
  EXPECT_FALSE(c.fields.boolean(json("true"), "/b"));
  EXPECT_FALSE(c.fields.string(json(5), "/s"));
  EXPECT_FALSE(c.fields.enumeration<Layout>(json("noex"), "/layout"));
  EXPECT_FALSE(c.fields.enumeration<Layout>(json("gptj"), "/layout"));
  EXPECT_FALSE(c.fields.enumeration<Layout>(json(1), "/layout"));
  const std::vector<std::string> want{
      "/b: \"true\" is not allowed: must be true or false",
      "/s: 5 is not allowed: must be a string",
      "/layout: \"noex\" is not allowed: must be one of neox | interleaved (did you mean \"neox\"?)",
      "/layout: \"gptj\" is not allowed: must be one of neox | interleaved",
      "/layout: 1 is not allowed: must be one of neox | interleaved",
  };
  EXPECT_EQ(c.issues, want);
}

TEST(JsonFields, UnknownKeysSuggestTheNearestOne) {
  Collected c;
  const json object = {{"head_dim", 64}, {"rotary_dims", 64}, {"zzz", 1}};
  c.fields.check_keys(object, "/io", {"head_dim", "rotary_dim", "layout"});
  const std::vector<std::string> want{
      "/io/rotary_dims: unknown key; did you mean \"rotary_dim\"?",
      "/io/zzz: unknown key; allowed keys: head_dim, rotary_dim, layout",
  };
  EXPECT_EQ(c.issues, want);
  EXPECT_EQ(nearest_key("theta", {"rope_theta", "factor"}), "rope_theta") << "a key ending in _ + the typo";
  EXPECT_EQ(nearest_key("qqqqqq", {"rope_theta", "factor"}), "");
}

TEST(JsonFields, MissingAndOptionalMembers) {
  Collected c;
  const json object = {{"sm_count", 132}, {"gpu_name", "H100"}};
  EXPECT_EQ(c.fields.integer_field(object, "/m", "sm_count", 1, 1024), 132);
  EXPECT_EQ(c.fields.string_field(object, "/m", "gpu_name"), "H100");
  EXPECT_FALSE(c.fields.number_field(object, "/m", "gbps", 0, false, JsonFields::Presence::optional));
  EXPECT_FALSE(c.fields.enum_field<Layout>(object, "/m", "layout", JsonFields::Presence::optional));
  EXPECT_TRUE(c.issues.empty()) << "an absent optional member is no problem";
  EXPECT_FALSE(c.fields.integer_field(object, "/m", "l2_bytes", 0, kInt64Max));
  EXPECT_FALSE(c.fields.integer_field(object, "/m", "sm_count", 1, 100));
  EXPECT_FALSE(c.fields.string_field(json::array({1}), "/m", "gpu_name"));
  const std::vector<std::string> want{
      "/m/l2_bytes: missing required key \"l2_bytes\"",
      "/m/sm_count: 132 is not allowed: must be an integer in [1, 100]",
      "/m: [1] is not allowed: must be an object",
  };
  EXPECT_EQ(c.issues, want);
}

// Throwing: the first problem is an Error with the caller's status, its prefix, the pointer
// as the error's field, and reading stops there.
TEST(JsonFields, ThrowingPolicyThrowsTheFirstProblem) {
  JsonFields db(Status::io_error, "tuning database ");
  const json object = {{"bucket", 9}, {"tokens", -1}};
  EXPECT_EQ(db.integer_field(object, "/e", "bucket", 0, 9), 9);
  try {
    db.integer_field(object, "/e", "bucket", 0, 7);
    FAIL() << "bucket 9 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::io_error);
    EXPECT_EQ(e.field(), "/e/bucket");
    EXPECT_STREQ(e.what(), "tuning database /e/bucket: 9 is not allowed: must be an integer in [0, 7]");
  }
  JsonFields config(Status::invalid_argument, "config ");
  try {
    config.check_keys(json{{"blok_threads", 3}, {"vec", 4}}, "", {"block_threads", "vec"});
    FAIL() << "unknown key accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
    EXPECT_EQ(e.field(), "/blok_threads");
    EXPECT_STREQ(e.what(), "config /blok_threads: unknown key; did you mean \"block_threads\"?");
  }
  const std::string long_key(100000, 'k');
  try {
    config.check_keys(json{{long_key, 1}}, "", {"vec"});
    FAIL() << "unknown key accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "/" + long_key) << "the field keeps the whole pointer";
    EXPECT_LT(std::string(e.what()).size(), 200u) << "the message quotes it clipped";
  }
  try {
    config.string_field(json::object(), "", "date");
    FAIL() << "a missing key accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "config /date: missing required key \"date\"");
  }
}

// Quoted values are cut, so a 100k-character value never makes a 100k-character message.
TEST(JsonFields, LongValuesAreClippedInMessages) {
  Collected c;
  EXPECT_FALSE(c.fields.integer(json(std::string(100000, 'x')), "/n", 1, 8));
  EXPECT_FALSE(c.fields.string(json::array({1, 2, 3, 4, 5, 6}), "/s"));
  ASSERT_EQ(c.issues.size(), 2u);
  EXPECT_LT(c.issues[0].size(), 200u) << c.issues[0];
  EXPECT_EQ(c.issues[1], "/s: a list of 6 items is not allowed: must be a string");
}

}  // namespace
}  // namespace ropejit
