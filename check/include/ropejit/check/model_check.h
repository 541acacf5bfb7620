#pragma once
/// The calibrated static model against recorded GPU measurements: each measured launch (what
/// ran, at which size, how it was timed, and the static figures of the kernel that ran then)
/// next to the model's estimate. The data lives in tests/data/perf/ (docs/static-report.md §3).
#include <cstdint>
#include <string>
#include <vector>

#include "ropejit/roofline.h"
#include "ropejit/runtime.h"

namespace ropejit::check {

/// One measured launch.
struct MeasuredLaunch {
  std::string label;       ///< the benchmark's shape name ("llama-3.1-8b")
  std::string spec;        ///< specs/<spec>.json, with `dtype` put in
  std::string dtype;       ///< "bf16"
  int64_t tokens = 0;      ///< T
  int batch = 1;           ///< varlen sequences of the benchmark's workload
  LaunchTiming timing = LaunchTiming::event;
  bool inputs_in_l2 = false;  ///< the inputs were in L2 (a decode step right after their producer)
  double us = 0;           ///< the time measured
  double band = 0.15;      ///< how far the model may be off: |estimate / us - 1| <= band
  Config config;           ///< the config that ran
  KernelStats stats;       ///< the static figures of the kernel that ran (those the model reads)
  int64_t reread_per_row = -1;   ///< its bytes read a second time a row (-1: as today's code)
  int64_t reread_distance = -1;  ///< its item's bytes between the two reads
};

/// A file of measurements from one GPU run.
struct Measurements {
  std::string part;     ///< the model's part ("H200")
  std::string device;   ///< the device's name
  std::string date;     ///< of the run
  std::string commit;   ///< the kernels' commit
  std::string source;   ///< where the numbers are written down, and the command
  std::vector<MeasuredLaunch> rows;
};

/// Reads a measurements file (format 1). Error(invalid_argument) naming the JSON pointer of the
/// first bad field.
Measurements load_measurements(const std::string& path);

/// One row as the model sees it: the measurement, the launch's memory access and grid rows.
struct ModelRow {
  MeasuredLaunch measured;
  MemoryAccess access;
  int64_t rows = 0;  ///< grid rows (tokens, or batch * S for a padded output)
};

/// The rows of `m`, each spec read from `specs_dir`/<spec>.json with the row's dtype. With
/// `current_kernels`, the static figures are those of today's kernels (each spec's default
/// config compiled for the part's arch now): a prediction for the next run, not a check.
std::vector<ModelRow> model_rows(const Measurements& m, const std::string& specs_dir, bool current_kernels = false);

/// One row with the model's estimate on `part`.
struct ModelCheck {
  ModelRow row;
  Roofline estimate;
  double ratio = 0;  ///< estimate / measured
  bool in_band = false;
};

/// The model's estimate of every row on `part` (the measurements' part, or constants to try).
std::vector<ModelCheck> check_model(const std::vector<ModelRow>& rows, const GpuPart& part);

/// The part's fitted constants (latency_ns, l2_latency_ns, chunk_bytes, overlap, event_launch_us)
/// that minimize the worst |ratio - 1| / band over `rows`, by coordinate search from `start`;
/// the measured ones (copy_gbs, graph_launch_us) and the datasheet's stay.
GpuPart fit_model(const std::vector<ModelRow>& rows, const GpuPart& start);

/// The worst |ratio - 1| / band of `checks` (<= 1: every row in its band).
double worst_band_share(const std::vector<ModelCheck>& checks);

}  // namespace ropejit::check
