// Tuned config lookup for Runtime::get(): the tuning database section of the running device,
// else its shipped tuning file, read once per Runtime; get() resolves each bucket with a hash lookup.
#include "caches/tuned_configs.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "ropejit/internal/device_info.h"
#include "ropejit/shipped_tuning.h"
#include "ropejit/tuning_db.h"

namespace ropejit {

namespace {

// The device's metadata, or nullopt with a warning that `what` is ignored.
std::optional<DeviceMetadata> identify(const Backend& backend, const std::string& what, const WarningSink& warn) {
  try {
    return device_metadata(backend);
  } catch (const Error& e) {
    ropejit::warn(warn, fmt::format("ignoring {}: cannot identify the device: {}", what, e.what()));
    return std::nullopt;
  }
}

}  // namespace

TunedConfigs::TunedConfigs(const std::string& db_path, const std::string& shipped_dir, const Backend& backend,
                           const WarningSink& on_warning) {
  if (!db_path.empty()) {
    const auto device = identify(backend, "tuning database " + db_path, on_warning);
    if (!device) return;
    db_ = std::make_unique<TuningDb>(db_path, *device, on_warning);
    if (db_->has_section()) return;  // the user's own results for this device win
    db_.reset();
  }
  const ShippedTuningDir shipped = shipped_tuning_dir(shipped_dir);
  if (shipped.dir.empty()) return;
  std::error_code ec;
  if (!std::filesystem::is_directory(shipped.dir, ec)) {  // only a folder named by the user can be missing
    warn(on_warning, fmt::format("shipped tuning folder {} (from {}) is not a folder; using heuristic configs",
                                 shipped.dir, shipped.origin));
    return;
  }
  // Named from the GPU name alone, so a device without a shipped file costs one stat (no NVRTC load).
  std::string gpu_name;
  try {
    gpu_name = backend.properties().name;
  } catch (const Error&) {
    return;  // no name, no shipped file: heuristic configs
  }
  const std::string path = (std::filesystem::path(shipped.dir) / shipped_tuning_file_name(gpu_name)).string();
  if (!std::filesystem::exists(path, ec)) return;
  const auto device = identify(backend, "shipped tuning file " + path, on_warning);
  if (!device) return;
  if (auto section = read_shipped_tuning(path, *device, on_warning)) db_ = std::make_unique<TuningDb>(*section);
}

TunedConfigs::~TunedConfigs() = default;

std::optional<Config> TunedConfigs::lookup(const Spec& spec, int bucket) const {
  if (!db_) return std::nullopt;
  return db_->lookup(spec, bucket);
}

}  // namespace ropejit
