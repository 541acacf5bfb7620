// The calibrated static model against the GPU (unit tier): every launch recorded in
// tests/data/perf/ stays within its band of the model's estimate, and the part table's fitted
// constants are the fit's (docs/static-report.md §3; `ropejit model check|fit FILE`).
// ropejit-tier: unit
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/check/model_check.h"
#include "support/repo_paths.h"

using namespace ropejit;

namespace {

const char* const kMeasurements[] = {"perf/h200-2026-11-28.json"};

std::string table(const std::vector<check::ModelCheck>& checks) {
  std::string out;
  for (const auto& c : checks)
    out += fmt::format("  {:<32} T={:<6} measured {:>9.2f} us  model {:>9.2f} us  ratio {:.3f}{}\n",
                       c.row.measured.label, c.row.measured.tokens, c.row.measured.us, c.estimate.estimate_us, c.ratio,
                       c.in_band ? "" : fmt::format("  OUTSIDE ±{:.0f} %", 100 * c.row.measured.band));
  return out;
}

}  // namespace

TEST(ModelCalibration, EveryRecordedLaunchWithinItsBand) {
  for (const char* file : kMeasurements) {
    const check::Measurements m = check::load_measurements(test::data_path(file));
    ASSERT_GE(m.rows.size(), 23u) << file;
    const auto checks = check::check_model(check::model_rows(m, test::source_dir() + "/specs"), find_gpu_part(m.part));
    int outside = 0;
    for (const auto& c : checks) outside += !c.in_band;
    EXPECT_EQ(outside, 0) << file << ":\n" << table(checks);
  }
}

TEST(ModelCalibration, FittedConstantsAreTheFitsOwn) {
  // Hand-set constants drift from the data: the table's must do as well as a fresh fit.
  for (const char* file : kMeasurements) {
    const check::Measurements m = check::load_measurements(test::data_path(file));
    const auto rows = check::model_rows(m, test::source_dir() + "/specs");
    const GpuPart& part = find_gpu_part(m.part);
    const GpuPart fitted = check::fit_model(rows, part);
    EXPECT_LE(check::worst_band_share(check::check_model(rows, part)),
              check::worst_band_share(check::check_model(rows, fitted)) + 0.01)
        << file << ": `ropejit model fit " << file << "` finds latency_ns " << fitted.latency_ns << ", chunk_bytes "
        << fitted.chunk_bytes << ", overlap " << fitted.overlap << ", event_launch_us " << fitted.event_launch_us
        << ", l2_latency_ns " << fitted.l2_latency_ns;
  }
}

TEST(ModelCalibration, TheModelCanMissAndSaysSo) {
  // The band check fails where it should: the same launches 30 % slower leave it.
  const check::Measurements m = check::load_measurements(test::data_path(kMeasurements[0]));
  auto rows = check::model_rows(m, test::source_dir() + "/specs");
  for (auto& r : rows) r.measured.us *= 1.3;
  const auto checks = check::check_model(rows, find_gpu_part(m.part));
  EXPECT_GT(check::worst_band_share(checks), 1.0);
  for (const auto& c : checks) EXPECT_FALSE(c.in_band && std::abs(c.ratio - 1) > c.row.measured.band);
}

TEST(ModelCalibration, BadFilesAreRefusedByField) {
  const std::string dir = ::testing::TempDir();
  auto refuse = [&](const std::string& text, const std::string& field) {
    const std::string path = dir + "/measurements.json";
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    try {
      check::load_measurements(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refuse("{", "not JSON");
  refuse(R"({"format": 2})", "/format");
  refuse(R"({"format": 1, "part": "V100", "device": "", "date": "", "commit": "", "source": "", "rows": []})", "V100");
  refuse(R"({"format": 1, "part": "H200", "device": "", "date": "", "commit": "", "source": "", "rows": []})", "/rows");
  refuse(R"({"format": 1, "part": "H200", "device": "", "date": "", "commit": "", "source": "", "rows": [{"label": "x",
            "spec": "llama-3.1-8b", "dtype": "bf16", "tokens": 1, "timing": "later", "us": 1}]})", "/rows/0/timing");
}
