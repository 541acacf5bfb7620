// Status names and the version string.
#include "ropejit/error.h"
#include "ropejit/version.h"

namespace ropejit {

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_spec: return "invalid_spec";
    case Status::invalid_argument: return "invalid_argument";
    case Status::unsupported: return "unsupported";
    case Status::compile_error: return "compile_error";
    case Status::backend_error: return "backend_error";
    case Status::io_error: return "io_error";
    case Status::internal: return "internal";
  }
  return "unknown";
}

const char* version() noexcept { return ROPEJIT_VERSION; }

}  // namespace ropejit
