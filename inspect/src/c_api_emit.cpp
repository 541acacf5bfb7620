// ropejit_emit_source: the C door to generate_source and emit_standalone (ropejit/ropejit.h).
#include "ropejit/internal/c_api_guard.h"
#include "ropejit/ropejit.h"
#include "ropejit/source.h"
#include "ropejit/standalone.h"

ropejit_status ropejit_emit_source(const char* spec_json, const char* config_json, int standalone, char** source) {
  return ropejit::c_api::guarded("ropejit_emit_source", [&] {
    ropejit::c_api::require_non_null(source, "source (the output)");
    *source = nullptr;
    ropejit::c_api::require_non_null(spec_json, "spec_json");
    if (standalone != 0 && standalone != 1)
      throw ropejit::Error(ropejit::Status::invalid_argument,
                           "standalone " + std::to_string(standalone) + " is not allowed: must be 0 or 1");
    const ropejit::Spec spec = ropejit::parse_spec(spec_json);
    const ropejit::Config config = config_json ? ropejit::config_from_json(config_json) : ropejit::default_config(spec);
    const std::string text = standalone ? ropejit::emit_standalone(spec, config)
                                        : ropejit::generate_source(ropejit::make_plan(spec, config)).text;
    *source = ropejit::c_api::malloc_copy(text);
  });
}
