// libFuzzer target: tuning database files (tunedb/include/ropejit/tuning_db.h): load, merge,
// write, load again. The input is one file, or two joined by the line "#merge#" (kSeparator).
// Promises checked: read_tuning_db never throws for file contents and reports every refused
// file to the warning sink; tuning_db_from_json throws only ropejit::Error (io_error) and agrees
// with read_tuning_db; the merge of two loaded files writes JSON that loads to the same JSON;
// merging a file into itself changes nothing; every entry is found by TuningDb::lookup.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.h"
#include "ropejit/error.h"
#include "ropejit/tuning_db.h"

using ropejit::fuzz::finding;

namespace {

constexpr std::string_view kSeparator = "\n#merge#\n";

// One file through both readers: from a real file (never throws) and from text (Error only).
std::optional<ropejit::TuningDbFile> load(std::string_view text, const std::string& path) {
  ropejit::fuzz::write_file(path, text);
  std::vector<std::string> warnings;
  std::optional<ropejit::TuningDbFile> from_file;
  try {
    from_file = ropejit::read_tuning_db(path, [&](const std::string& w) { warnings.push_back(w); });
  } catch (const std::exception& e) {
    finding(std::string("read_tuning_db threw for file contents: ") + e.what());
  }
  if (!from_file && warnings.empty()) finding("read_tuning_db refused a file without a warning");
  if (from_file && !warnings.empty()) finding("read_tuning_db accepted a file but warned: " + warnings[0]);
  std::optional<ropejit::TuningDbFile> from_text;
  try {
    from_text = ropejit::tuning_db_from_json(std::string(text));
  } catch (const ropejit::Error& e) {
    if (e.code() != ropejit::Status::io_error)
      finding(std::string("tuning_db_from_json threw status ") + ropejit::status_name(e.code()) + ": " + e.what());
  }
  if (from_file.has_value() != from_text.has_value()) finding("read_tuning_db and tuning_db_from_json disagree");
  if (from_file && ropejit::tuning_db_to_json(*from_file) != ropejit::tuning_db_to_json(*from_text))
    finding("read_tuning_db and tuning_db_from_json read different files");
  return from_file;
}

// What the library writes, it reads back to the same text.
void check_written_reloads(const ropejit::TuningDbFile& file) {
  const std::string written = ropejit::tuning_db_to_json(file);
  try {
    const std::string again = ropejit::tuning_db_to_json(ropejit::tuning_db_from_json(written));
    if (again != written) finding("tuning_db_to_json → from_json → to_json changed the text:\n" + written + "\n---\n" + again);
  } catch (const ropejit::Error& e) {
    finding("the library cannot read what it wrote: " + std::string(e.what()) + "\n" + written);
  }
}

// Every stored (spec hash, bucket) is found by lookup in its device's section.
void check_lookup(const ropejit::TuningDbFile& file) {
  for (const ropejit::DeviceSection& section : file.devices) {
    const ropejit::TuningDb db(file, section.metadata);
    for (const ropejit::TuningEntry& e : section.entries)
      if (!db.lookup(e.spec_hash, e.bucket)) finding("lookup misses a stored entry " + e.spec_hash);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = ropejit::fuzz::as_text(data, size);
  const size_t cut = input.find(kSeparator);
  const std::string_view first = input.substr(0, cut);
  const std::string_view second = cut == std::string_view::npos ? std::string_view() : input.substr(cut + kSeparator.size());
  const std::string& dir = ropejit::fuzz::scratch_dir();

  std::optional<ropejit::TuningDbFile> a = load(first, dir + "/a.json");
  std::optional<ropejit::TuningDbFile> b;
  if (cut != std::string_view::npos) b = load(second, dir + "/b.json");
  if (!a) return 0;
  check_written_reloads(*a);
  check_lookup(*a);

  // Merging a file into itself is a no-op (equal entries never replace each other).
  ropejit::TuningDbFile self = *a;
  merge_tuning_db(self, *a);
  if (ropejit::tuning_db_to_json(self) != ropejit::tuning_db_to_json(*a)) finding("merging a file into itself changed it");

  if (b) {
    ropejit::TuningDbFile merged = *a;
    merge_tuning_db(merged, *b);
    check_written_reloads(merged);
    check_lookup(merged);
  }
  return 0;
}
