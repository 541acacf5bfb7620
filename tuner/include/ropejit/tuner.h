#pragma once
/// The autotuner (docs/architecture.md §8, docs/tuning.md): per spec, the pruned search space of
/// tunables(); per token bucket, every candidate checked against the reference output and
/// timed within a budget, the top few re-measured head to head, the winner stored in the
/// tuning database. Measuring sits behind the Measurer interface (cuda events on a GPU; a
/// deterministic cost model in tests).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ropejit/buckets.h"
#include "ropejit/compile.h"
#include "ropejit/config.h"
#include "ropejit/kernel_stats.h"
#include "ropejit/roofline.h"
#include "ropejit/spec.h"
#include "ropejit/tuning_db.h"

namespace ropejit {

// ---------------------------------------------------------------- search space

/// A config left out of the search, and why.
struct PrunedConfig {
  Config config;
  std::string reason;
};

/// The configs worth compiling for a spec, and the ones pruned before any compile.
struct SearchSpace {
  std::vector<Config> configs;      ///< valid and not pointless; the default always included
  std::vector<PrunedConfig> pruned;
};

/// Every combination of tunables() values, in table order.
std::vector<Config> full_config_space();

/// Spec-level pruning: config_problem (invalid), heads_per_thread beyond the heads of the
/// spec, vector widths narrower than the two widest valid ones.
SearchSpace search_space(const Spec& spec);

/// What one tuning launch covers at a token count: sequences, padding, rows of the grid.
struct WorkloadShape {
  int64_t tokens = 0;       ///< T
  int batch = 1;            ///< sequences (varlen positions or padded_bhsd output)
  int64_t max_seq_len = 0;  ///< S: longest sequence (padded_bhsd rows per sequence)
  int64_t rows = 0;         ///< grid rows: T, or batch * S for padded_bhsd
  int64_t bytes = 0;        ///< bytes_moved of one launch (for GB/s)
};

/// The workload the tuner measures at `tokens`: decode-like (one token per sequence) up to
/// 64 tokens, then sequences of up to 1024 tokens.
WorkloadShape workload_shape(const Spec& spec, int64_t tokens);

/// Bucket-level pruning of a spec's space at `tokens` on a device with `sm_count` SMs:
/// block_threads beyond what one block of work needs (a smaller block covers the same
/// work), and persistent grids that launch exactly what blocks mode launches.
/// `pruned` (optional) receives the reasons.
std::vector<Config> bucket_candidates(const Spec& spec, const std::vector<Config>& space, int64_t tokens,
                                      int sm_count, std::vector<PrunedConfig>* pruned = nullptr);

/// Modelled memory time below which the static estimate does not prune: launch overhead, which
/// the model leaves out, dominates there.
constexpr double kStaticPruneMinMemoryUs = 20.0;

/// The static report of each config, by config name: `binaries[i]` is the CUBIN of `configs[i]`
/// (null: not compiled or left out, so no report). One disassembly per distinct source (configs
/// sharing one differ only in launch fields), on `threads` threads. Empty when some non-null
/// binary yields no report: a partial set would rank candidates against a wrong best.
std::map<std::string, KernelStats> static_reports(const Spec& spec, const std::vector<Config>& configs,
                                                  const std::vector<const Binary*>& binaries, unsigned threads);

/// Bucket pruning by the static model (ropejit/roofline.h): each candidate's roofline estimate
/// on `part` for `shape`; those slower than `factor` x the best estimate are left out, except
/// the default. Nothing is pruned when `factor` <= 0 or the modelled memory time is below
/// kStaticPruneMinMemoryUs. `stats` holds every candidate's report by config name (Error
/// internal when one is missing); `pruned` (optional) receives the reasons.
std::vector<Config> static_prune(const Spec& spec, const std::vector<Config>& candidates,
                                 const std::map<std::string, KernelStats>& stats, const GpuPart& part,
                                 const WorkloadShape& shape, double factor,
                                 std::vector<PrunedConfig>* pruned = nullptr);

// ---------------------------------------------------------------- measuring

/// Where the tuner compiles, checks and times candidates.
class Measurer {
 public:
  virtual ~Measurer() = default;
  /// Compiles and loads `configs` for `spec` (in parallel where it can). One result per
  /// config: the binary (its registers and spills), or an error text.
  struct Prepared {
    std::optional<Binary> binary;
    std::string error;
  };
  virtual std::vector<Prepared> prepare(const Spec& spec, const std::vector<Config>& configs) = 0;
  /// Builds fresh random inputs for `tokens` of the last prepared spec (every candidate of a
  /// bucket runs on the same workload).
  virtual void set_workload(const WorkloadShape& shape) = 0;
  /// Runs `config` once and compares its output with the reference; "" when it matches,
  /// else what differs.
  virtual std::string check(const Config& config) = 0;
  /// `samples` timings of one launch each, in microseconds (inputs rotated so they are not
  /// cache hits); the first call after set_workload includes no warm-up: the tuner asks for it.
  virtual std::vector<double> time(const Config& config, int samples) = 0;
  /// Device-to-device copy bandwidth in GB/s (read + write bytes per second); 0 = unknown.
  virtual double copy_bandwidth_gbps() = 0;
  /// SMs of the device (sizes persistent grids and bucket pruning).
  virtual int sm_count() const = 0;
  /// The roofline part this device is (gpu_part_for_device), or null: no static pruning.
  virtual const GpuPart* gpu_part() const { return nullptr; }
  /// Milliseconds on the clock the budget is kept on (GPU: steady clock; fakes: simulated).
  virtual double now_ms() = 0;
};

/// Options of the cuda measurer.
struct CudaMeasurerOptions {
  int device = 0;                 ///< CUDA ordinal
  std::string cache_dir;          ///< disk cache of compiled candidates; empty = default
  bool disk_cache = true;
  int compile_threads = 0;        ///< 0 = hardware threads
  double rotate_l2_multiple = 4;  ///< input sets rotate over at least this many times L2
};

/// The GPU measurer (cuda backend, CUDA events). Throws Error(backend_error) with "tuning
/// measures on a GPU" when no CUDA device is usable.
std::unique_ptr<Measurer> make_cuda_measurer(const CudaMeasurerOptions& options = {});

/// Metadata of the device a cuda measurer runs on (for the database).
DeviceMetadata cuda_device_metadata(int device);

// ---------------------------------------------------------------- tuning

/// Tuning options.
struct TuneOptions {
  std::vector<int64_t> tokens = {1, 16, 256, 4096, 65536};  ///< one per bucket tuned
  double budget_ms = 2000.0;   ///< measuring time per (spec, token count), compiles excluded
  int warmup_samples = 3;      ///< timed launches discarded before each candidate's samples
  int min_samples = 5;         ///< per candidate (a candidate that cannot get them is skipped)
  int max_samples = 200;
  int head_to_head = 3;        ///< best few re-measured together (plus the default)
  double head_to_head_share = 0.25;  ///< budget fraction kept for the head-to-head round
  /// Candidates the static model estimates slower than this x the best are not measured
  /// (static_prune); 0 (default) = measure every candidate. Off by default: it costs one
  /// disassembly per source, and at 1.5 it pruned nothing in the specs tried (docs/PERF.md).
  double static_prune_factor = 0.0;
};

/// Progress of a tuning run (for a progress line).
struct TuneProgress {
  int spec_index = 0, spec_count = 0;
  std::string spec_name;
  int token_index = 0, token_count = 0;
  int64_t tokens = 0;
  int candidate = 0, candidates = 0;
  double elapsed_s = 0.0;  ///< since tune() started
  double eta_s = 0.0;      ///< estimated seconds left
};

/// One candidate at one token count.
struct CandidateResult {
  Config config;
  int registers = -1;
  int spill_bytes = 0;
  std::string rejected;   ///< why it cannot win ("" = measured and correct)
  double time_us = 0.0;   ///< median
  int samples = 0;
  double gbps = 0.0;
  double copy_fraction = 0.0;  ///< gbps / measured copy bandwidth
};

/// The outcome at one token count.
struct BucketResult {
  int bucket = 0;
  int64_t tokens = 0;
  WorkloadShape shape;
  std::vector<CandidateResult> candidates;
  std::optional<CandidateResult> best, runner_up;
  CandidateResult default_result;  ///< the heuristic default, measured the same way
  double speedup = 0.0;             ///< default time / best time
  double elapsed_ms = 0.0;          ///< budget clock spent
};

/// The outcome for one spec.
struct SpecTuneResult {
  Spec spec;
  std::string spec_hash;
  SearchSpace space;
  std::vector<CandidateResult> compile_rejected;  ///< failed to compile, or spilled registers
  std::vector<BucketResult> buckets;
  /// Database entries for the buckets that found a winner.
  std::vector<TuningEntry> entries() const;
};

/// Receives progress; may be empty.
using ProgressSink = std::function<void(const TuneProgress&)>;

/// Tunes each spec at each token count (one per bucket: duplicates by bucket are dropped).
std::vector<SpecTuneResult> tune(const std::vector<Spec>& specs, Measurer& measurer, const TuneOptions& options,
                                 const ProgressSink& progress = {});

}  // namespace ropejit
