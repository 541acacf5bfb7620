#pragma once
// Tuned launch configs for get(): the tuning database entry of the nearest bucket, if any.
#include <memory>
#include <optional>
#include <string>

#include "ropejit/internal/backend.h"
#include "ropejit/config.h"
#include "ropejit/warnings.h"

namespace ropejit {

class TuningDb;

/// Read-only view of the tuned configs for one backend's device: the user's tuning database
/// when it has a section for the device, else the device's shipped tuning file, else none.
class TunedConfigs {
 public:
  /// Opens `db_path` (empty: no database). A database that is absent, unreadable or whose
  /// metadata does not match the backend (GPU, versions) is ignored with one warning to `on_warning`
  /// (Runtime passes RuntimeOptions::on_warning; empty = stderr). Then, without a section for
  /// the device, the shipped file in the folder shipped_tuning_dir(`shipped_dir`) names
  /// (ropejit/shipped_tuning.h): absent silently, ignored with one warning when it does not apply.
  TunedConfigs(const std::string& db_path, const std::string& shipped_dir, const Backend& backend,
               const WarningSink& on_warning = {});
  ~TunedConfigs();
  /// The tuned config for (spec, bucket), or the nearest tuned bucket's, or nullopt.
  std::optional<Config> lookup(const Spec& spec, int bucket) const;

 private:
  std::unique_ptr<TuningDb> db_;
};

}  // namespace ropejit
