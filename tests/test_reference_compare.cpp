// Tests of the reference's checker (compare): rounding, ulps, padding, strides, slack.
// ropejit-tier: unit
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ropejit/fp_convert.h"
#include "support/ref_test_util.h"
#include "ropejit/check/reference.h"

using namespace ropejit;
using namespace ropejit::ref;
using namespace ropejit::ref::test_util;

namespace {


TEST(ReferenceCompare, CorrectlyRoundedPassesAndTwoUlpsFail) {
  for (DType dtype : {DType::bf16, DType::fp16, DType::fp32}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    Spec spec = small_spec(8, 6, 2, 1, Layout::neox, dtype);
    const Inputs in(spec, 3);
    RefProblem problem = in.problem(spec, 3);
    problem.positions = {2, 900, 65000};
    const RefOutputs out = reference_outputs(spec, problem);
    const RefTensor& q = out.tensors[0];
    std::vector<uint8_t> actual = rounded_bytes(dtype, q);
    CheckResult ok = compare(dtype, q, ActualTensor{actual.data()});
    EXPECT_TRUE(ok.ok()) << ok.summary();
    EXPECT_EQ(ok.checked, q.size());
    EXPECT_EQ(ok.max_ulps, 0);
    // Element 14 = token 0, head 1, element 6: passed through, so its scale is its own size.
    const uint32_t bits = load_bits(dtype, actual.data(), 14);
    store_value(dtype, actual.data(), 14, dtype_bits_to_double(dtype, bits + 1));
    EXPECT_TRUE(compare(dtype, q, ActualTensor{actual.data()}).ok());
    store_value(dtype, actual.data(), 14, dtype_bits_to_double(dtype, bits + (dtype == DType::fp32 ? 64 : 2)));
    const CheckResult bad = compare(dtype, q, ActualTensor{actual.data()});
    EXPECT_EQ(bad.failures, 1) << bad.summary();
    EXPECT_NE(bad.first_failure.find("q token 0 head 1 element 6"), std::string::npos) << bad.first_failure;
    store_value(dtype, actual.data(), 14, std::nan(""));
    EXPECT_EQ(compare(dtype, q, ActualTensor{actual.data()}).failures, 1);
  }
}

TEST(ReferenceCompare, SmallElementsOfLargePairsAndPadding) {
  RefTensor t;
  t.name = "q";
  t.layout = RefLayout::padded_bhsd;
  t.rows = 2;
  t.heads = 1;
  t.head_dim = 2;
  t.value = {1e-4, 1.0, 0.0, 0.0};
  t.scale = {1.0, 1.0, 0.0, 0.0};
  t.padding = {0, 0, 1, 1};
  t.row_token = {0, -1};
  for (DType dtype : {DType::fp32, DType::bf16}) {
    const auto check = [&](double first, double pad) {
      return compare(dtype, t, ActualTensor{encode_values(dtype, {first, 1.0, pad, -0.0}).data()});
    };
    EXPECT_TRUE(check(1e-4 + 1e-6, 0.0).ok());   // within fp32 noise of the pair's size
    EXPECT_FALSE(check(1e-4 + 1e-5, 0.0).ok());  // beyond it
    const CheckResult pad = check(1e-4, 1e-30);
    EXPECT_EQ(pad.failures, 1);
    EXPECT_NE(pad.first_failure.find("padding"), std::string::npos) << pad.first_failure;
  }
}

TEST(ReferenceCompare, StridedActualAndInvFreqSlack) {
  Spec spec = small_spec(8, 8, 1, 1, Layout::interleaved, DType::fp32);
  const Inputs in(spec, 2);
  RefProblem problem = in.problem(spec, 2);
  problem.positions = {1000000, 999};
  const RefOutputs out = reference_outputs(spec, problem);
  const RefTensor& q = out.tensors[0];
  // Token stride 11 instead of 8.
  std::vector<double> strided(22, std::nan(""));
  for (int t = 0; t < 2; ++t)
    for (int e = 0; e < 8; ++e) strided[t * 11 + e] = q.value[t * 8 + e];
  const auto strided_bytes = encode_values(DType::fp32, strided);
  EXPECT_TRUE(compare(DType::fp32, q, ActualTensor{strided_bytes.data(), 11}).ok());
  EXPECT_FALSE(compare(DType::fp32, q, ActualTensor{strided_bytes.data()}).ok());
  // A kernel whose inv_freq is one float32 ulp off at position 10^6.
  std::vector<double> off(16);
  for (int t = 0; t < 2; ++t) {
    const std::vector<double> row = in.row(spec, 0, t, 0, false);
    for (int i = 0; i < 4; ++i) {
      const double inv = out.freqs.inv_freq[i] * (1 + kFloatUlp);
      const auto [x, y] = rotate_pair(row[2 * i], row[2 * i + 1], reference_angle(spec, out.token_positions[t], inv), 1.0);
      off[t * 8 + 2 * i] = x;
      off[t * 8 + 2 * i + 1] = y;
    }
  }
  const auto off_bytes = encode_values(DType::fp32, off);
  EXPECT_FALSE(compare(DType::fp32, q, ActualTensor{off_bytes.data()}).ok());
  Tolerance lenient;
  lenient.inv_freq_ulps = 2;
  const CheckResult r = compare(DType::fp32, q, ActualTensor{off_bytes.data()}, lenient);
  EXPECT_TRUE(r.ok()) << r.summary();
}

}  // namespace
