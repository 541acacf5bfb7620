#pragma once
/// The tuning database (docs/architecture.md §8, docs/tuning.md): per device, the best Config
/// of each (spec hash, token bucket). One JSON file may carry sections for several devices:
///   {"format": 1, "devices": [{"metadata": {...}, "entries": [{...}, ...]}, ...]}
/// Lookup uses the section whose metadata equals the running device's; other sections are
/// carried along untouched and never overwritten.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ropejit/buckets.h"
#include "ropejit/config.h"
#include "ropejit/spec.h"
#include "ropejit/warnings.h"

namespace ropejit {

/// The file format this ropejit reads and writes.
inline constexpr int kTuningDbFormat = 1;

/// What a tuning result depends on: a section applies only to a device with equal metadata.
struct DeviceMetadata {
  std::string ropejit_version;     ///< version()
  std::string nvrtc_version;       ///< nvrtc_version()
  int driver_version = 0;          ///< cuDriverGetVersion (13000 = 13.0)
  std::string gpu_name;            ///< cuDeviceGetName
  std::string compute_capability;  ///< "9.0"
  int sm_count = 0;
  int64_t l2_bytes = 0;
  bool operator==(const DeviceMetadata& o) const;
  bool operator!=(const DeviceMetadata& o) const { return !(*this == o); }
  /// "NVIDIA H100 80GB HBM3 (cc 9.0, 132 SMs, driver 13000, nvrtc 13.0, ropejit 0.1.0)".
  std::string describe() const;
};

/// A measured config (the winner or the runner-up of one bucket).
struct TimedConfig {
  Config config;
  double time_us = 0.0;
};

/// One tuned (spec, bucket).
struct TuningEntry {
  std::string spec_hash;    ///< spec_hash(spec).hex()
  std::string spec_name;    ///< for people; not part of the key
  int bucket = 0;           ///< index into kBucketUpperBounds
  int64_t tokens = 0;       ///< token count it was measured at
  TimedConfig best;
  std::optional<TimedConfig> runner_up;
  double default_time_us = 0.0;  ///< the heuristic default at the same token count (0: unknown)
  double gbps = 0.0;        ///< bytes moved / best time
  std::string date;         ///< ISO 8601 UTC, "2025-01-31T12:00:00Z"
};

/// One device's results.
struct DeviceSection {
  DeviceMetadata metadata;
  std::vector<TuningEntry> entries;  ///< at most one per (spec_hash, bucket)
};

/// A whole database file.
struct TuningDbFile {
  std::vector<DeviceSection> devices;
};


/// JSON text of a database file (stable key order, entries sorted by spec hash and bucket).
std::string tuning_db_to_json(const TuningDbFile& file);
/// Parses JSON text; throws Error(io_error) naming the JSON pointer of the first bad field: a
/// value of the wrong type or out of range (sm_count >= 1, driver_version and l2_bytes >= 0,
/// times finite and > 0, tokens in the entry's bucket, date ISO 8601 UTC), a NUL byte, or
/// nesting deeper than kMaxJsonDepth (ropejit/json_limits.h).
TuningDbFile tuning_db_from_json(const std::string& text);

/// Reads a database file: nullopt when absent; a malformed or truncated file or another
/// format is reported to `warn` and read as nullopt (never throws for file contents). `what`
/// names the file in that warning ("ignoring <what> <path>: ...").
std::optional<TuningDbFile> read_tuning_db(const std::string& path, const WarningSink& warn = {},
                                           const std::string& what = "tuning database");

/// Merges `from` into `into`: sections with equal metadata combine; for the same
/// (spec_hash, bucket) the newer date wins, compared as times (a date that is no ISO 8601 UTC
/// time never wins; equal dates: the faster time).
void merge_tuning_db(TuningDbFile& into, const TuningDbFile& from);

/// Adds `entries` for `metadata` to the file at `path` under an flock'ed `<path>.lock`:
/// read, merge, write a temp file, rename. Sections of other devices are kept as they are.
/// A corrupt file is moved aside to `<path>.corrupt-<unix time>` (with a warning) and a fresh
/// one written; a file of another format is never overwritten (Error io_error).
void save_tuning_entries(const std::string& path, const DeviceMetadata& metadata,
                         const std::vector<TuningEntry>& entries, const WarningSink& warn = {});

/// Merges whole files into `path` with the same locking and publishing as save_tuning_entries.
void merge_tuning_db_into(const std::string& path, const TuningDbFile& from, const WarningSink& warn = {});

/// The entries of one device, indexed for get(): a lookup is a hash lookup.
class TuningDb {
 public:
  /// Reads `path` and keeps the section matching `device`. No such section (or an unreadable
  /// file) → empty, with one warning naming the sections the file does have.
  TuningDb(const std::string& path, const DeviceMetadata& device, const WarningSink& warn = {});
  /// From an in-memory file.
  TuningDb(const TuningDbFile& file, const DeviceMetadata& device);
  /// From a section already chosen (a shipped file's, ropejit/shipped_tuning.h).
  explicit TuningDb(const DeviceSection& section);
  /// True when a section for the device was found (it may hold no entries).
  bool has_section() const { return has_section_; }
  /// The entry of the bucket itself, else of the nearest tuned bucket (ties: the smaller one);
  /// entries whose config is invalid for `spec` are skipped. nullopt when none.
  std::optional<Config> lookup(const Spec& spec, int bucket) const;
  /// Same, keyed by spec hash hex (no validity check).
  std::optional<Config> lookup(const std::string& spec_hash_hex, int bucket) const;
  /// Number of entries of the matching section.
  size_t size() const;

 private:
  void index(const DeviceSection& section);
  std::unordered_map<std::string, std::array<std::optional<Config>, kNumBuckets>> by_spec_;
  size_t size_ = 0;
  bool has_section_ = false;
};

/// ISO 8601 UTC of now ("2025-01-31T12:00:00Z").
std::string utc_now_iso8601();

}  // namespace ropejit
