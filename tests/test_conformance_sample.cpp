// ROPEJIT_CONFORMANCE_SAMPLE: a sampled conformance run keeps one kernel of every form, then
// every Nth; unset, every kernel; a bad value is refused.
// ropejit-tier: unit
#include <string>

#include <gtest/gtest.h>

#include "support/conformance_sample.h"
#include "support/scoped_env.h"

using ropejit::test::conformance_form;
using ropejit::test::conformance_sample_step;
using ropejit::test::ConformanceSample;
using ropejit::test::ScopedEnv;

TEST(ConformanceSample, StepFromTheEnvironment) {
  {
    ScopedEnv unset("ROPEJIT_CONFORMANCE_SAMPLE", nullptr);
    EXPECT_EQ(conformance_sample_step(), 1);
  }
  {
    ScopedEnv four("ROPEJIT_CONFORMANCE_SAMPLE", "4");
    EXPECT_EQ(conformance_sample_step(), 4);
  }
  for (const char* bad : {"0", "-2", "4x", "every"}) {
    ScopedEnv env("ROPEJIT_CONFORMANCE_SAMPLE", bad);
    EXPECT_THROW(conformance_sample_step(), std::invalid_argument) << bad;
  }
}

TEST(ConformanceSample, FirstOfEachFormThenEveryNth) {
  ConformanceSample sample(3);
  EXPECT_TRUE(sample.keeps("a1", "form a"));
  EXPECT_TRUE(sample.keeps("b1", "form b"));
  EXPECT_TRUE(sample.keeps("a2", "form a"));   // repeat 0
  EXPECT_FALSE(sample.keeps("a3", "form a"));  // repeat 1
  EXPECT_FALSE(sample.keeps("b2", "form b"));  // repeat 2
  EXPECT_TRUE(sample.keeps("a4", "form a"));   // repeat 3
  EXPECT_FALSE(sample.keeps("a3", "form a")) << "a kernel keeps its first answer";
  EXPECT_TRUE(sample.keeps("a1", "form a"));
}

TEST(ConformanceSample, StepOneKeepsEverything) {
  ConformanceSample sample(1);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(sample.keeps("k" + std::to_string(i), "one form"));
}

TEST(ConformanceSample, FormIsOpIoFormAndRopeType) {
  const std::string paged =
      R"({"op":"rerotate","rope":{"rope_type":"yarn"},"io":{"input":"separate","output":"paged_kv","cache_dtype":"fp8_e4m3"}})";
  EXPECT_EQ(conformance_form(paged), "rerotate separate paged_kv fp8_e4m3 auto yarn");
  EXPECT_EQ(conformance_form(R"({"rope":{"rope_type":"default"},"io":{"input":"packed_qkv","output":"inplace"}})"),
            "rope packed_qkv inplace auto auto default");
}
