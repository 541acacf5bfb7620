#pragma once
// Test helper: the fixture of the conformance suites, which run every case on both backends:
// host everywhere, cuda where a GPU is usable (the GPU tier). A suite derives from
// BackendConformance and is instantiated with BackendKind::host and BackendKind::cuda.
#include <initializer_list>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "ropejit/check/harness.h"
#include "ropejit/config.h"
#include "ropejit/spec.h"
#include "support/backends.h"
#include "support/conformance_sample.h"
#include "support/spec_builder.h"

namespace ropejit {
// Test names and ctest lines show "host" / "cuda" rather than the enum's bytes.
inline void PrintTo(BackendKind kind, std::ostream* os) { *os << to_string(kind); }
}  // namespace ropejit

namespace ropejit::test {

/// The head shape of a conformance case: D, d and the head counts.
struct HeadShape {
  int head_dim, rotary_dim, num_q_heads, num_kv_heads;
};

/// The fields every suite's case `index` starts from: its name, layout, dtype and head shape, the
/// angle mode alternating with the index, positions up to 4096.
inline SpecFields shaped_fields(const char* name, const HeadShape& shape, const char* layout, const char* dtype,
                                int index) {
  SpecFields f;
  f.name = name;
  f.layout = layout;
  f.dtype = dtype;
  f.head_dim = shape.head_dim;
  f.rotary_dim = shape.rotary_dim;
  f.num_q_heads = shape.num_q_heads;
  f.num_kv_heads = shape.num_kv_heads;
  f.angle = index % 2 ? "exact" : "fp32";
  f.max_position_embeddings = 4096;
  return f;
}

/// The spec's default config, with sin/cos from the runtime's table when `table` and the spec
/// allows it (the cases that cover both sin/cos modes).
inline Config default_or_table_config(const Spec& spec, bool table) {
  Config config = default_config(spec);
  Config with_table = config;
  with_table.sincos = SinCosMode::table;
  return table && !config_problem(spec, with_table) ? with_table : config;
}

/// Skips the backend this run lacks; one Runtime per backend for the whole process (kernels are
/// compiled once, whichever suite asks first).
class BackendConformance : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (GetParam() == BackendKind::cuda && !cuda_device_usable())
      GTEST_SKIP() << "SKIPPED: cuda conformance tier: no usable GPU";
    if (GetParam() == BackendKind::host && !host_backend_built())
      GTEST_SKIP() << "SKIPPED: host conformance tier: built without the host backend";
  }
  static Runtime& runtime() {
    if (GetParam() == BackendKind::host) {
      static Runtime host(options_for(BackendKind::host));
      return host;
    }
    static Runtime cuda(options_for(BackendKind::cuda));
    return cuda;
  }
  /// The spec's default kernel on T = 1, 7 and 201 tokens; strided rows and int32 positions on
  /// odd case indices.
  void expect_token_counts(const Spec& spec, int index, const std::string& what) {
    const Kernel kernel = runtime().get(spec);
    for (int64_t tokens : {int64_t(1), int64_t(7), int64_t(201)}) {
      check::CaseOptions o;
      o.tokens = tokens;
      o.strided = index % 2 == 1;
      o.positions_type = index % 2 ? PositionsType::int32 : PositionsType::int64;
      expect_case(kernel, o, what);
    }
  }
  /// Runs `tokens` tokens through every valid config of `spec` over these vector widths, heads per
  /// thread and sin/cos modes (the rest the default's); returns how many configs ran.
  int expect_every_config(const Spec& spec, std::initializer_list<int> vecs, std::initializer_list<int> heads,
                          int64_t tokens, std::initializer_list<SinCosMode> sincos = {SinCosMode::compute}) {
    int configs = 0;
    for (int vec : vecs)
      for (int h : heads)
        for (SinCosMode mode : sincos) {
          Config c = default_config(spec);
          c.vec = vec;
          c.heads_per_thread = h;
          c.sincos = mode;
          if (config_problem(spec, c)) continue;
          check::CaseOptions o;
          o.tokens = tokens;
          expect_case(runtime().get(spec, c), o, config_name(c));
          ++configs;
        }
    return configs;
  }
  /// Runs one case against the float64 reference; a failure names the backend, `what`, the
  /// token count, the report and the spec.
  /// ROPEJIT_CONFORMANCE_SAMPLE (conformance_sample.h) may leave a kernel's cases out.
  void expect_case(const Kernel& kernel, const check::CaseOptions& options, const std::string& what) {
    const std::string spec_json = canonical_json(kernel.spec());
    if (!sample_.keeps(spec_json + " " + config_name(kernel.config_for(1)), conformance_form(spec_json))) return;
    const check::CaseReport report = check::run_case(runtime(), kernel, options);
    EXPECT_TRUE(report.ok()) << to_string(GetParam()) << " " << what << " tokens " << options.tokens << "\n"
                             << report.summary() << canonical_json(kernel.spec());
  }

 private:
  ConformanceSample sample_{conformance_sample_step()};
  static RuntimeOptions options_for(BackendKind kind) {
    RuntimeOptions o;
    o.backend = kind;
    return o;
  }
};

}  // namespace ropejit::test
