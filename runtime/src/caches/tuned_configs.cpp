// Tuned config lookup for Runtime::get(): the tuning database section of the running device,
// read once per Runtime; get() resolves each bucket with a hash lookup.
#include "caches/tuned_configs.h"

#include <fmt/format.h>

#include "backends/device_info.h"
#include "ropejit/tuning_db.h"

namespace ropejit {

TunedConfigs::TunedConfigs(const std::string& db_path, const Backend& backend,
                           const WarningSink& on_warning) {
  if (db_path.empty()) return;
  DeviceMetadata device;
  try {
    device = device_metadata(backend);
  } catch (const Error& e) {
    warn(on_warning, fmt::format("ignoring tuning database {}: cannot identify the device: {}", db_path, e.what()));
    return;
  }
  db_ = std::make_unique<TuningDb>(db_path, device, on_warning);
}

TunedConfigs::~TunedConfigs() = default;

std::optional<Config> TunedConfigs::lookup(const Spec& spec, int bucket) const {
  if (!db_) return std::nullopt;
  return db_->lookup(spec, bucket);
}

}  // namespace ropejit
