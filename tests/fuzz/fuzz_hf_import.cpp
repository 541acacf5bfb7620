// libFuzzer target: HF config.json text → parse_hf_config → spec_from_hf (spec/src/hf_import.h).
// Promises checked: a bad config throws SpecError (at least one issue, each naming a config key
// or the document) and nothing else escapes, nlohmann's exceptions included; an imported spec is
// a valid spec: its canonical JSON parses back to the same text.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "hf_import.h"
#include "ropejit/error.h"
#include "ropejit/spec.h"

using ropejit::fuzz::finding;

namespace {

// Either step may refuse the input, only with invalid_spec (SpecError is an Error).
bool refused(const ropejit::Error& e, const char* step) {
  if (e.code() != ropejit::Status::invalid_spec)
    finding(std::string(step) + " threw status " + ropejit::status_name(e.code()) + ": " + e.what());
  if (auto* spec_error = dynamic_cast<const ropejit::SpecError*>(&e); spec_error && spec_error->issues().empty())
    finding(std::string(step) + " threw a SpecError without issues: " + e.what());
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = ropejit::fuzz::as_text(data, size);
  nlohmann::json config;
  try {
    config = ropejit::parse_hf_config(text);
  } catch (const ropejit::Error& e) {
    refused(e, "parse_hf_config");
    return 0;
  }
  std::vector<std::string> warnings;
  ropejit::Spec spec;
  try {
    spec = ropejit::spec_from_hf(config, ropejit::HfImportOptions{}, &warnings);
  } catch (const ropejit::Error& e) {
    refused(e, "spec_from_hf");
    return 0;
  }
  for (const std::string& w : warnings)
    if (w.empty()) finding("spec_from_hf gave an empty warning");
  // The imported spec went through validation: its canonical text is a valid spec of itself.
  const std::string canonical = ropejit::canonical_json(spec);
  try {
    if (ropejit::canonical_json(ropejit::parse_spec(canonical)) != canonical)
      finding("an imported spec's canonical JSON is not a fixed point:\n" + canonical);
  } catch (const ropejit::Error& e) {
    finding("an imported spec's canonical JSON does not parse: " + std::string(e.what()) + "\n" + canonical);
  }
  // The unvalidated spec JSON of the same config is what spec_from_hf validated: it must not throw now.
  try {
    (void)ropejit::spec_json_from_hf(config, ropejit::HfImportOptions{}, nullptr);
  } catch (const ropejit::Error& e) {
    finding("spec_json_from_hf throws for a config spec_from_hf accepted: " + std::string(e.what()));
  }
  return 0;
}
