// Host backend stand-ins for builds without it (-DROPEJIT_HOST_BACKEND=OFF): compiling says
// unsupported, and callers can ask first through host_backend_available().
#ifndef ROPEJIT_HAVE_HOST_BACKEND

#include "host/host_jit.h"
#include "ropejit/error.h"

namespace ropejit {

std::unique_ptr<HostModule> HostModule::compile(const std::string&, const std::string&) {
  throw Error(Status::unsupported,
              "host backend: this build has none (configure with -DROPEJIT_HOST_BACKEND=ON)");
}

bool host_backend_available() noexcept { return false; }

}  // namespace ropejit

#endif  // ROPEJIT_HAVE_HOST_BACKEND
