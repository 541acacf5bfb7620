// The ops over one tensor's heads in place: inverse_rope (DeepSeek-V4's attention output: its rope
// slice rotated back by minus the angle) and rope_tensor (the same turned forward: V4's indexer
// queries and compressed keys), against the float64 reference on fresh random inputs with poisoned
// outputs: every rope type whose frequencies do not depend on the run length x layout x dtype,
// crossed with leading and trailing slices, head shapes, positions forms, strided rows, every
// vector width, heads per thread and the cos/sin table, and odd token counts; then the spec errors
// of what the ops rule out.
// ropejit-tier: conformance
// ropejit-tier: unit InverseRopeSpec
#include <array>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "support/conformance_fixture.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::HeadShape;
using ropejit::test::SpecFields;

namespace {

class InverseRope : public ropejit::test::BackendConformance {};

// V4's 512/64 output heads; a whole-head slice; a partial neox slice one lane rotates whole (bf16).
const HeadShape kHeadShapes[] = {{512, 64, 8, 1}, {128, 128, 6, 1}, {96, 24, 4, 1}, {192, 64, 5, 1}};
const char* const kPositions[] = {"explicit", "varlen", "offset"};

const char* const kOneTensorOps[] = {"inverse_rope", "rope_tensor"};

SpecFields inverse_fields(int index, const char* layout, const char* dtype, const nlohmann::json& rope,
                          const char* op = "inverse_rope") {
  SpecFields f = ropejit::test::shaped_fields(op, kHeadShapes[index % std::size(kHeadShapes)], layout, dtype, index);
  f.op = op;
  f.rotary_slice = index % 3 ? "trailing" : "leading";
  f.positions = kPositions[index % 3];
  ropejit::test::set_rope(f, rope);
  return f;
}

}  // namespace

TEST_P(InverseRope, EveryRopeTypeLayoutAndDtype) {
  int index = 0;
  for (const nlohmann::json& rope : ropejit::test::rope_blocks_for_every_type(64, 4096)) {
    if (frequencies_depend_on_run_length(*enum_from_string<RopeType>(rope["rope_type"].get<std::string>()))) continue;
    for (const char* layout : {"interleaved", "neox"})
      for (const char* dtype : {"bf16", "fp16", "fp32"}) {
        const SpecFields f = inverse_fields(index, layout, dtype, rope);
        const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
        for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(201)}) {
          check::CaseOptions o;
          o.tokens = tokens;
          o.strided = index % 4 == 1;
          o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
          expect_case(kernel, o,
                      fmt::format("inverse_rope {} {} {} {} D{}/{} {} {}", rope.dump().substr(0, 60), layout, dtype,
                                  f.rotary_slice, f.head_dim, f.rotary_dim, f.positions, f.angle));
        }
        ++index;
      }
  }
  EXPECT_EQ(index, 42);  // 7 rope blocks x 2 layouts x 3 dtypes
}

// rope_tensor shares the kernel with its rotation turned forward: every rope type and layout, one
// dtype each in turn (the dtypes' paths are inverse_rope's above).
TEST_P(InverseRope, RopeTensorEveryRopeTypeAndLayout) {
  int index = 0;
  for (const nlohmann::json& rope : ropejit::test::rope_blocks_for_every_type(64, 4096)) {
    if (frequencies_depend_on_run_length(*enum_from_string<RopeType>(rope["rope_type"].get<std::string>()))) continue;
    for (const char* layout : {"interleaved", "neox"}) {
      const char* dtype = std::array{"bf16", "fp16", "fp32"}[index % 3];
      const SpecFields f = inverse_fields(index, layout, dtype, rope, "rope_tensor");
      const Kernel kernel = runtime().get(ropejit::test::make_spec(f));
      for (int64_t tokens : {int64_t(1), int64_t(37)}) {
        check::CaseOptions o;
        o.tokens = tokens;
        o.strided = index % 4 == 1;
        expect_case(kernel, o,
                    fmt::format("rope_tensor {} {} {} {} D{}/{} {}", rope.dump().substr(0, 60), layout, dtype,
                                f.rotary_slice, f.head_dim, f.rotary_dim, f.positions));
      }
      ++index;
    }
  }
  EXPECT_EQ(index, 14);  // 7 rope blocks x 2 layouts
}

TEST_P(InverseRope, EveryConfig) {
  for (const char* op : kOneTensorOps) {
    const Spec spec = ropejit::test::make_spec(
        inverse_fields(1, "interleaved", "bf16", {{"rope_type", "default"}, {"rope_theta", 10000.0}}, op));
    EXPECT_GE(expect_every_config(spec, {2, 4, 8}, {1, 3, 8}, 13, {SinCosMode::compute, SinCosMode::table}), 12) << op;
  }
}

INSTANTIATE_TEST_SUITE_P(Backend, InverseRope, ::testing::Values(BackendKind::host, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// What the ops rule out is refused by name, with the allowed set.
TEST(InverseRopeSpec, RefusesWhatTheOpCannotDo) {
  for (const char* op : kOneTensorOps) {
    SpecFields f = inverse_fields(0, "interleaved", "bf16", {{"rope_type", "default"}, {"rope_theta", 10000.0}}, op);
    const nlohmann::json base = ropejit::test::spec_json(f);
    const std::pair<nlohmann::json, std::string> cases[] = {
        {{{"io", {{"output", "separate"}}}},
         fmt::format("/io/output: \"separate\" is not allowed: must be \"inplace\" or absent when op is {}", op)},
        {{{"io", {{"input", "packed_qkv"}}}}, "/io/input: \"packed_qkv\" is not allowed"},
        {{{"io", {{"qkv_bias", true}}}}, "/io/qkv_bias: true is not allowed"},
        {{{"io", {{"copy_v", true}}}}, fmt::format("/io/copy_v: true is not allowed: must be false when op is {}", op)},
        {{{"io", {{"positions", "mrope"}, {"mrope_section", {16, 8, 8}}}}}, "/io/positions: \"mrope\" is not allowed"},
        {{{"qk_norm", {{"type", "rmsnorm"}, {"eps", 1e-6}}}}, "/qk_norm: "},
        {{{"rope", {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}}}},
         "/rope/rope_type: \"dynamic\" is not allowed: must be a rope_type whose frequencies do not depend on the run "
         "length"},
        {{{"hadamard", true}}, fmt::format("/hadamard: true is not allowed: must be false when op is {}", op)},
        {{{"inverse", true}}, fmt::format("/inverse: true is not allowed: must be false when op is {}", op)},
    };
    for (const auto& [patch, want] : cases) {
      nlohmann::json spec = base;
      for (const auto& item : patch.items()) {
        if (item.value().is_object() && spec.contains(item.key()) && spec[item.key()].is_object())
          spec[item.key()].update(item.value());
        else
          spec[item.key()] = item.value();
      }
      const std::string error = ropejit::test::spec_error(spec);
      EXPECT_NE(error.find(want), std::string::npos) << op << " " << patch.dump() << "\n" << error;
    }
    EXPECT_EQ(ropejit::test::spec_error(base), "accepted") << op;
  }
}
