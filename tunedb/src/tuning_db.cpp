// The tuning database file: JSON (de)serialization, merging, locked atomic saves, lookup.
#include "ropejit/tuning_db.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ropejit/atomic_file.h"
#include "ropejit/error.h"
#include "ropejit/json_fields.h"
#include "ropejit/json_limits.h"
#include "ropejit/warnings.h"

namespace ropejit {

using json = nlohmann::ordered_json;
using in_json = nlohmann::json;  // what JsonFields reads; key order does not matter when reading

namespace {

void emit_warning(const WarningSink& warn, const std::string& message) { ropejit::warn(warn, message); }

// The database's fields: the first problem throws io_error naming its JSON pointer.
JsonFields db_fields() { return JsonFields(Status::io_error, "tuning database "); }

// Seconds since 1970 of an ISO 8601 UTC time "YYYY-MM-DDTHH:MM:SSZ" (the form utc_now_iso8601
// writes), or nullopt: dates are compared as times, never as text.
std::optional<int64_t> utc_seconds(const std::string& text) {
  static constexpr char kForm[] = "dddd-dd-ddTdd:dd:ddZ";
  if (text.size() != sizeof kForm - 1) return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i)
    if (kForm[i] == 'd' ? !std::isdigit(static_cast<unsigned char>(text[i])) : text[i] != kForm[i]) return std::nullopt;
  auto number = [&](size_t at, size_t n) { return std::stoi(text.substr(at, n)); };
  const int year = number(0, 4), month = number(5, 2), day = number(8, 2);
  const int hour = number(11, 2), minute = number(14, 2), second = number(17, 2);
  static constexpr int kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month < 1 || month > 12 || day < 1 || day > kDaysIn[month - 1] + (month == 2 && leap) || hour > 23 ||
      minute > 59 || second > 60)
    return std::nullopt;
  // Days from civil (Howard Hinnant's algorithm): proleptic Gregorian, 1970-01-01 = 0.
  const int y = year - (month <= 2);
  const int era = (y >= 0 ? y : y - 399) / 400, year_of_era = y - era * 400;
  const int day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  const int64_t days = int64_t(era) * 146097 + day_of_era - 719468;
  return days * 86400 + hour * 3600 + minute * 60 + second;
}

json metadata_json(const DeviceMetadata& m) {
  json j;
  j["ropejit_version"] = m.ropejit_version;
  j["nvrtc_version"] = m.nvrtc_version;
  j["driver_version"] = m.driver_version;
  j["gpu_name"] = m.gpu_name;
  j["compute_capability"] = m.compute_capability;
  j["sm_count"] = m.sm_count;
  j["l2_bytes"] = m.l2_bytes;
  return j;
}

// Reading throws on the first problem, so each reader's value is there when it returns.
DeviceMetadata metadata_from(const in_json& j, const std::string& p) {
  JsonFields f = db_fields();
  DeviceMetadata m;
  m.ropejit_version = *f.string_field(j, p, "ropejit_version");
  m.nvrtc_version = *f.string_field(j, p, "nvrtc_version");
  m.driver_version = static_cast<int>(*f.integer_field(j, p, "driver_version", 0, INT_MAX));
  m.gpu_name = *f.string_field(j, p, "gpu_name");
  m.compute_capability = *f.string_field(j, p, "compute_capability");
  m.sm_count = static_cast<int>(*f.integer_field(j, p, "sm_count", 1, INT_MAX));
  m.l2_bytes = *f.integer_field(j, p, "l2_bytes", 0, INT64_MAX);
  return m;
}

json timed_json(const TimedConfig& t) {
  json j;
  j["config"] = json::parse(config_to_json(t.config));
  j["time_us"] = t.time_us;
  return j;
}

TimedConfig timed_from(const in_json& j, const std::string& p) {
  JsonFields f = db_fields();
  TimedConfig t;
  const in_json& c = *f.member(j, p, "config");
  try {
    t.config = config_from_json(c.dump());
  } catch (const Error& e) {
    f.add(p + "/config", e.what());
  }
  t.time_us = *f.number_field(j, p, "time_us", 0.0, true);  // a measured time: > 0
  return t;
}

json entry_json(const TuningEntry& e) {
  json j;
  j["spec_hash"] = e.spec_hash;
  j["spec_name"] = e.spec_name;
  j["bucket"] = e.bucket;
  j["bucket_tokens"] = bucket_name(e.bucket);
  j["tokens"] = e.tokens;
  j["best"] = timed_json(e.best);
  j["runner_up"] = e.runner_up ? timed_json(*e.runner_up) : json(nullptr);
  j["default_time_us"] = e.default_time_us;
  j["gbps"] = e.gbps;
  j["date"] = e.date;
  return j;
}

TuningEntry entry_from(const in_json& j, const std::string& p) {
  JsonFields f = db_fields();
  constexpr auto optional = JsonFields::Presence::optional;
  TuningEntry e;
  e.spec_hash = *f.string_field(j, p, "spec_hash");
  if (e.spec_hash.size() != 32 || e.spec_hash.find_first_not_of("0123456789abcdef") != std::string::npos)
    f.not_allowed(p + "/spec_hash", e.spec_hash, "32 lowercase hex digits");
  if (j.contains("spec_name") && j["spec_name"].is_string()) e.spec_name = j["spec_name"].get<std::string>();
  e.bucket = static_cast<int>(*f.integer_field(j, p, "bucket", 0, kNumBuckets - 1));
  e.tokens = *f.integer_field(j, p, "tokens", 1, INT64_MAX);
  if (bucket_of(e.tokens) != e.bucket)
    f.not_allowed(p + "/tokens", e.tokens,
                  fmt::format("a token count of bucket {} ({})", e.bucket, bucket_name(e.bucket)));
  e.best = timed_from(*f.member(j, p, "best"), p + "/best");
  if (j.contains("runner_up") && !j["runner_up"].is_null()) e.runner_up = timed_from(j["runner_up"], p + "/runner_up");
  e.default_time_us = f.number_field(j, p, "default_time_us", 0.0, false, optional).value_or(e.default_time_us);
  e.gbps = f.number_field(j, p, "gbps", 0.0, false, optional).value_or(e.gbps);
  e.date = *f.string_field(j, p, "date");
  if (!utc_seconds(e.date))
    f.not_allowed(p + "/date", e.date, "an ISO 8601 UTC time such as \"2025-01-31T12:00:00Z\"");
  return e;
}

bool entry_less(const TuningEntry& a, const TuningEntry& b) {
  return std::tie(a.spec_hash, a.bucket) < std::tie(b.spec_hash, b.bucket);
}

// Newer date wins (a date that does not parse never does); equal dates: the faster best time.
bool replaces(const TuningEntry& candidate, const TuningEntry& current) {
  const auto candidate_time = utc_seconds(candidate.date), current_time = utc_seconds(current.date);
  if (candidate_time != current_time) return candidate_time > current_time;  // nullopt sorts first
  return candidate.best.time_us < current.best.time_us;
}

void merge_entries(DeviceSection& into, const std::vector<TuningEntry>& entries) {
  std::map<std::pair<std::string, int>, size_t> at;
  for (size_t i = 0; i < into.entries.size(); ++i) at[{into.entries[i].spec_hash, into.entries[i].bucket}] = i;
  for (const auto& e : entries) {
    auto it = at.find({e.spec_hash, e.bucket});
    if (it == at.end()) {
      at[{e.spec_hash, e.bucket}] = into.entries.size();
      into.entries.push_back(e);
    } else if (replaces(e, into.entries[it->second])) {
      into.entries[it->second] = e;
    }
  }
  std::sort(into.entries.begin(), into.entries.end(), entry_less);
}

DeviceSection& section_for(TuningDbFile& file, const DeviceMetadata& metadata) {
  for (auto& s : file.devices)
    if (s.metadata == metadata) return s;
  file.devices.push_back(DeviceSection{metadata, {}});
  return file.devices.back();
}

/// What is at a database path. Only a regular file is read or replaced: a FIFO would block
/// the reader, and a folder or a device is not ours to move aside.
struct FileRead {
  enum Kind { absent, regular, other } kind = absent;
  std::string text;     ///< the file's bytes (regular)
  std::string problem;  ///< why it is not read (other): "is a FIFO, not a regular file"
};

FileRead read_whole(const std::string& path) {
  FileRead r;
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR) {
      r.kind = FileRead::other;
      r.problem = fmt::format("cannot be opened: {}", std::strerror(errno));
    }
    return r;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    r.kind = FileRead::other;
    r.problem = S_ISDIR(st.st_mode) ? "is a folder, not a regular file"
                : S_ISFIFO(st.st_mode) ? "is a FIFO, not a regular file"
                                       : "is not a regular file";
    ::close(fd);
    return r;
  }
  r.kind = FileRead::regular;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.kind = FileRead::other;
      r.problem = fmt::format("cannot be read: {}", std::strerror(errno));
      break;
    }
    if (n == 0) break;
    r.text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return r;
}

/// The file a link at `path` points to (saving replaces that file and keeps the link); `path`
/// itself when it is no link or its target cannot be resolved.
std::string resolve_link(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return path;
  std::string target(real);
  std::free(real);
  return target;
}

/// flock'ed `<path>.lock` for one read-merge-write; an error when it cannot be taken.
FileLock lock_database(const std::string& path) {
  std::string why;
  FileLock lock(path + ".lock", /*wait=*/true, &why);
  if (!lock.locked()) throw Error(Status::io_error, "tuning database: " + why);
  return lock;
}

// Always durable (ropejit/atomic_file.h): a database is small and precious, measured once.
void write_atomically(const std::string& path, const std::string& text) {
  if (std::string why = write_file_atomically(path, text, /*durable=*/true); !why.empty())
    throw Error(Status::io_error, "tuning database: " + why);
}

// Under the lock: the current file (or empty), moving a corrupt one aside; refuses other formats.
TuningDbFile read_for_update(const std::string& path, const WarningSink& warn) {
  const FileRead read = read_whole(path);
  if (read.kind == FileRead::absent) return {};
  if (read.kind == FileRead::other)
    throw Error(Status::io_error, fmt::format("tuning database {} {}; refusing to replace it", path, read.problem));
  const std::string& text = read.text;
  // Text that is refused before parsing (a NUL byte, deep nesting) is corrupt: moved aside below.
  const auto j = json_text_problem(text) ? json(json::value_t::discarded) : json::parse(text, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("format") && j["format"] != kTuningDbFormat)
    throw Error(Status::io_error,
                fmt::format("tuning database {}: /format {} is not the format this ropejit writes ({}); "
                            "refusing to overwrite it",
                            path, clip_for_message(j["format"].dump()), kTuningDbFormat),
                "/format");
  try {
    return tuning_db_from_json(text);  // throws naming why the text is unreadable
  } catch (const Error& e) {
    const std::string aside = fmt::format("{}.corrupt-{}", path, static_cast<long long>(std::time(nullptr)));
    if (::rename(path.c_str(), aside.c_str()) != 0)
      throw Error(Status::io_error, fmt::format("tuning database {} is unreadable ({}) and could not be moved "
                                                "aside to {}: {}",
                                                path, e.what(), aside, std::strerror(errno)));
    emit_warning(warn, fmt::format("tuning database {} is unreadable ({}); moved it to {} and writing a fresh one",
                                   path, e.what(), aside));
    return {};
  }
}

}  // namespace

bool DeviceMetadata::operator==(const DeviceMetadata& o) const {
  return ropejit_version == o.ropejit_version && nvrtc_version == o.nvrtc_version &&
         driver_version == o.driver_version && gpu_name == o.gpu_name &&
         compute_capability == o.compute_capability && sm_count == o.sm_count && l2_bytes == o.l2_bytes;
}

std::string DeviceMetadata::describe() const {
  return fmt::format("{} (cc {}, {} SMs, L2 {} MiB, driver {}, nvrtc {}, ropejit {})", gpu_name,
                     compute_capability, sm_count, l2_bytes / (1024 * 1024), driver_version, nvrtc_version,
                     ropejit_version);
}

std::string tuning_db_to_json(const TuningDbFile& file) {
  json root;
  root["format"] = kTuningDbFormat;
  json devices = json::array();
  for (const auto& section : file.devices) {
    json s;
    s["metadata"] = metadata_json(section.metadata);
    std::vector<TuningEntry> sorted = section.entries;
    std::sort(sorted.begin(), sorted.end(), entry_less);
    json entries = json::array();
    for (const auto& e : sorted) entries.push_back(entry_json(e));
    s["entries"] = std::move(entries);
    devices.push_back(std::move(s));
  }
  root["devices"] = std::move(devices);
  return root.dump(2) + "\n";
}

TuningDbFile tuning_db_from_json(const std::string& text) {
  if (auto problem = json_text_problem(text)) throw Error(Status::io_error, "tuning database: " + *problem);
  const auto j = in_json::parse(text, nullptr, false);
  if (j.is_discarded()) throw Error(Status::io_error, "tuning database: not valid JSON (truncated?)");
  JsonFields f = db_fields();
  const int64_t format = *f.integer_field(j, "", "format", INT64_MIN, INT64_MAX);
  if (format != kTuningDbFormat)
    f.add("/format", fmt::format("{} is not allowed: this ropejit reads format {}", format, kTuningDbFormat));
  const in_json& devices = *f.member(j, "", "devices");
  if (!devices.is_array()) f.not_allowed("/devices", devices, "an array");
  TuningDbFile file;
  for (size_t i = 0; i < devices.size(); ++i) {
    const std::string p = fmt::format("/devices/{}", i);
    DeviceSection section;
    section.metadata = metadata_from(*f.member(devices[i], p, "metadata"), p + "/metadata");
    const in_json& entries = *f.member(devices[i], p, "entries");
    if (!entries.is_array()) f.not_allowed(p + "/entries", entries, "an array");
    std::vector<TuningEntry> parsed;
    for (size_t e = 0; e < entries.size(); ++e) parsed.push_back(entry_from(entries[e], fmt::format("{}/entries/{}", p, e)));
    // A file may list a device twice (hand-concatenated): combine instead of failing.
    merge_entries(section_for(file, section.metadata), parsed);
  }
  return file;
}

std::optional<TuningDbFile> read_tuning_db(const std::string& path, const WarningSink& warn, const std::string& what) {
  const FileRead read = read_whole(path);
  if (read.kind == FileRead::absent) return std::nullopt;
  if (read.kind == FileRead::other) {
    emit_warning(warn, fmt::format("ignoring {} {}: it {}", what, path, read.problem));
    return std::nullopt;
  }
  try {
    return tuning_db_from_json(read.text);
  } catch (const Error& e) {
    emit_warning(warn, fmt::format("ignoring {} {}: {}", what, path, e.what()));
    return std::nullopt;
  }
}

void merge_tuning_db(TuningDbFile& into, const TuningDbFile& from) {
  for (const auto& section : from.devices) merge_entries(section_for(into, section.metadata), section.entries);
}

void save_tuning_entries(const std::string& path, const DeviceMetadata& metadata,
                         const std::vector<TuningEntry>& entries, const WarningSink& warn) {
  TuningDbFile update;
  update.devices.push_back(DeviceSection{metadata, entries});
  merge_tuning_db_into(path, update, warn);
}

void merge_tuning_db_into(const std::string& path, const TuningDbFile& from, const WarningSink& warn) {
  if (path.empty()) throw Error(Status::invalid_argument, "tuning database path is empty");
  const std::string target = resolve_link(path);
  const FileLock lock = lock_database(target);
  TuningDbFile file = read_for_update(target, warn);
  merge_tuning_db(file, from);
  write_atomically(target, tuning_db_to_json(file));
}

// "shipped or heuristic": without this device's section the runtime tries its shipped file next.
TuningDb::TuningDb(const std::string& path, const DeviceMetadata& device, const WarningSink& warn) {
  const auto file = read_tuning_db(path, warn);
  if (!file) {
    if (read_whole(path).kind == FileRead::absent)
      emit_warning(warn, fmt::format("tuning database {} does not exist; using shipped or heuristic configs", path));
    return;
  }
  for (const auto& s : file->devices)
    if (s.metadata == device) {
      index(s);
      return;
    }
  std::string have;
  for (const auto& s : file->devices) have += "\n  " + s.metadata.describe();
  emit_warning(warn, fmt::format("tuning database {} has no results for this device ({}); it holds:{}; "
                                 "using shipped or heuristic configs",
                                 path, device.describe(), have.empty() ? std::string("\n  (nothing)") : have));
}

TuningDb::TuningDb(const TuningDbFile& file, const DeviceMetadata& device) {
  for (const auto& s : file.devices)
    if (s.metadata == device) {
      index(s);
      return;
    }
}

TuningDb::TuningDb(const DeviceSection& section) { index(section); }

void TuningDb::index(const DeviceSection& section) {
  has_section_ = true;
  for (const auto& e : section.entries) {
    by_spec_[e.spec_hash][static_cast<size_t>(e.bucket)] = e.best.config;
    ++size_;
  }
}

size_t TuningDb::size() const { return size_; }

std::optional<Config> TuningDb::lookup(const std::string& spec_hash_hex, int bucket) const {
  auto it = by_spec_.find(spec_hash_hex);
  if (it == by_spec_.end()) return std::nullopt;
  // Nearest tuned bucket: distance 0, then 1 below, 1 above, 2 below, ...
  for (int distance = 0; distance < kNumBuckets; ++distance)
    for (int b : {bucket - distance, bucket + distance})
      if (b >= 0 && b < kNumBuckets && it->second[static_cast<size_t>(b)]) return it->second[static_cast<size_t>(b)];
  return std::nullopt;
}

std::optional<Config> TuningDb::lookup(const Spec& spec, int bucket) const {
  auto it = by_spec_.find(spec_hash(spec).hex());
  if (it == by_spec_.end()) return std::nullopt;
  for (int distance = 0; distance < kNumBuckets; ++distance)
    for (int b : {bucket - distance, bucket + distance}) {
      if (b < 0 || b >= kNumBuckets) continue;
      const auto& c = it->second[static_cast<size_t>(b)];
      if (c && !config_problem(spec, *c)) return c;
    }
  return std::nullopt;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace ropejit
