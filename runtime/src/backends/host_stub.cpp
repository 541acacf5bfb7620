// Host backend stand-ins for builds without it (-DROPEJIT_HOST_BACKEND=OFF): compiling says
// unsupported, and callers can ask first through host_backend_available().
#ifndef ROPEJIT_HAVE_HOST_BACKEND

#include "backends/host/host_jit.h"
#include "ropejit/error.h"

namespace ropejit {

namespace {
[[noreturn]] void no_host_backend() {
  throw Error(Status::unsupported,
              "host backend: this build has none (configure with -DROPEJIT_HOST_BACKEND=ON)");
}
}  // namespace

std::unique_ptr<HostModule> HostModule::compile(const std::string&, const std::string&) { no_host_backend(); }
std::string HostModule::compile_object(const std::string&, const std::string&) { no_host_backend(); }
std::unique_ptr<HostModule> HostModule::load_object(std::string_view, const std::string&) { no_host_backend(); }

std::string host_jit_target() { return "none"; }
std::string host_jit_compiler() { return "none"; }
std::string host_jit_flags() { return "none"; }

bool host_backend_available() noexcept { return false; }

}  // namespace ropejit

#endif  // ROPEJIT_HAVE_HOST_BACKEND
