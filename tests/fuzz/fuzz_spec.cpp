// libFuzzer target: spec JSON text → parse_spec (validation) → canonical JSON round trip.
// Promises checked (spec.h, docs/spec.md): bad text throws SpecError with at least one issue
// (or an Error with status invalid_spec) and nothing else escapes; an accepted spec's canonical
// JSON parses again to the same canonical text and hash, pretty_json says the same, the C API
// agrees, and the spec can be planned and generated with its default config
// (tests/test_spec_fuzz.cpp promises that too).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_common.h"
#include "ropejit/config.h"
#include "ropejit/error.h"
#include "ropejit/freqs.h"
#include "ropejit/ropejit.h"
#include "ropejit/source.h"
#include "ropejit/spec.h"

using ropejit::fuzz::finding;

namespace {

// The canonical text must be a fixed point: parse it, and it must validate to itself.
void check_round_trip(const ropejit::Spec& spec) {
  const std::string canonical = ropejit::canonical_json(spec);
  ropejit::Spec again;
  try {
    again = ropejit::parse_spec(canonical);
  } catch (const ropejit::Error& e) {
    finding("canonical JSON of an accepted spec does not parse: " + std::string(e.what()) + "\n" + canonical);
  }
  const std::string canonical_again = ropejit::canonical_json(again);
  if (canonical_again != canonical)
    finding("canonical JSON is not a fixed point:\n  first:  " + canonical + "\n  second: " + canonical_again);
  if (ropejit::spec_hash(again) != ropejit::spec_hash(spec)) finding("spec_hash changed across the round trip");
  // The indented form carries the same content.
  try {
    if (ropejit::canonical_json(ropejit::parse_spec(ropejit::pretty_json(spec))) != canonical)
      finding("pretty_json parses to another spec than canonical_json:\n" + canonical);
  } catch (const ropejit::Error& e) {
    finding("pretty_json of an accepted spec does not parse: " + std::string(e.what()));
  }
}

// The C API parses the same way and returns the same canonical text (NUL-free input only: it
// takes a C string).
void check_c_api(const std::string& text, const std::string* canonical) {
  char* json = nullptr;
  const ropejit_status status = ropejit_spec_canonical_json(text.c_str(), &json);
  if ((status == ROPEJIT_STATUS_OK) != (canonical != nullptr))
    finding("ropejit_spec_canonical_json status " + std::to_string(status) + " disagrees with parse_spec: " +
            ropejit_last_error());
  if (canonical && (!json || *canonical != json)) finding("ropejit_spec_canonical_json differs from canonical_json");
  if (!canonical && status != ROPEJIT_STATUS_INVALID_SPEC)
    finding("ropejit_spec_canonical_json of bad text: status " + std::to_string(status) + " (want invalid_spec): " +
            ropejit_last_error());
  std::free(json);
}

// An accepted spec can be planned with its heuristic default config and generated.
void check_generates(const ropejit::Spec& spec) {
  try {
    const ropejit::Plan plan = ropejit::make_plan(spec, ropejit::default_config(spec));
    const ropejit::Source source = ropejit::generate_source(plan);
    if (source.text.empty() || source.entry.empty()) finding("generate_source gave an empty source");
    (void)ropejit::compute_freqs(spec, ropejit::FreqMode::float64);
  } catch (const ropejit::Error& e) {
    finding("an accepted spec fails to plan or generate: " + std::string(e.what()) + "\n" +
            ropejit::canonical_json(spec));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(ropejit::fuzz::as_text(data, size));
  ropejit::Spec spec;
  try {
    spec = ropejit::parse_spec(text);
  } catch (const ropejit::SpecError& e) {
    if (e.issues().empty()) finding("SpecError without issues: " + std::string(e.what()));
    if (text.find('\0') == std::string::npos) check_c_api(text, nullptr);
    return 0;
  } catch (const ropejit::Error& e) {
    // Derived-value checks (freqs.cpp) may throw a plain Error; it must still say invalid_spec.
    if (e.code() != ropejit::Status::invalid_spec)
      finding("parse_spec threw status " + std::string(ropejit::status_name(e.code())) + ": " + e.what());
    if (text.find('\0') == std::string::npos) check_c_api(text, nullptr);
    return 0;
  }
  check_round_trip(spec);
  if (text.find('\0') == std::string::npos) {
    const std::string canonical = ropejit::canonical_json(spec);
    check_c_api(text, &canonical);
  }
  check_generates(spec);
  return 0;
}
