// Tuned config lookup. The tuning database itself (tuner/) arrives with the autotuner issue;
// until then no database is read and every bucket uses the heuristic default.
#include "tuned_configs.h"

namespace ropejit {

class TuningDb {};

TunedConfigs::TunedConfigs(const std::string&, const Backend&) {}
TunedConfigs::~TunedConfigs() = default;

std::optional<Config> TunedConfigs::lookup(const Spec&, int) const { return std::nullopt; }

}  // namespace ropejit
