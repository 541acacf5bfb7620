#pragma once
// Test helper: ROPEJIT_CONFORMANCE_SAMPLE=N checks a sample of a conformance test's kernels (the
// sanitizer tier, scripts/sanitize.sh); unset or 1, every kernel is checked (the plain tiers).
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace ropejit::test {

/// The sample's step N from ROPEJIT_CONFORMANCE_SAMPLE: 1 (everything) when unset; a value that
/// is not a positive integer throws, so a typo never silently checks everything or nothing.
inline int conformance_sample_step() {
  const char* text = std::getenv("ROPEJIT_CONFORMANCE_SAMPLE");
  if (!text || !*text) return 1;
  char* end = nullptr;
  const long step = std::strtol(text, &end, 10);
  if (*end || step < 1 || step > 1000000)
    throw std::invalid_argument(std::string("ROPEJIT_CONFORMANCE_SAMPLE=") + text + ": want a positive integer");
  return static_cast<int>(step);
}

/// The form a sampled run keeps at least one kernel of: op × io form (input, output, the cache
/// and q_out element types) × rope type, read from a spec's canonical JSON.
inline std::string conformance_form(const std::string& canonical_spec_json) {
  const auto spec = nlohmann::json::parse(canonical_spec_json);
  const auto io = spec.value("io", nlohmann::json::object());
  const auto rope = spec.value("rope", nlohmann::json::object());
  return spec.value("op", "rope") + " " + io.value("input", "") + " " + io.value("output", "") + " " +
         io.value("cache_dtype", "auto") + " " + io.value("q_output_dtype", "auto") + " " +
         rope.value("rope_type", "");
}

/// Which of one test's kernels a sampled run checks: the first kernel of each form, and every
/// Nth of the others (in the order the test meets them); every kernel when N is 1.
class ConformanceSample {
 public:
  explicit ConformanceSample(int step) : step_(step) {}
  /// `kernel` names one kernel (its spec and config); `form` is conformance_form of its spec.
  /// The same kernel gets the same answer each time (its token counts go together).
  bool keeps(const std::string& kernel, const std::string& form) {
    if (step_ == 1) return true;
    const auto known = decided_.find(kernel);
    if (known != decided_.end()) return known->second;
    const bool keep = forms_.insert(form).second || repeats_++ % step_ == 0;
    decided_.emplace(kernel, keep);
    return keep;
  }

 private:
  int step_;
  int repeats_ = 0;
  std::set<std::string> forms_;
  std::map<std::string, bool> decided_;
};

}  // namespace ropejit::test
