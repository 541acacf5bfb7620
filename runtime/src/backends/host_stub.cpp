// Host backend stand-ins for builds without it (-DROPEJIT_HOST_BACKEND=OFF): compiling says
// unsupported, and callers can ask first through host_backend_available().
#ifndef ROPEJIT_HAVE_HOST_BACKEND

#include <utility>

#include "backends/host/fiber_context.h"
#include "ropejit/internal/host_jit.h"
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
// No HostModule exists in such a build (the three makers above throw); the tests still link these.
struct HostModule::Impl {};
HostModule::HostModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HostModule::~HostModule() = default;
void HostModule::launch(const HostLaunchDims&, const KernelParams&) const { no_host_backend(); }
double HostModule::compile_ms() const { no_host_backend(); }
bool HostModule::cooperative() const { no_host_backend(); }

bool fiber_fast_switch() { return false; }
bool set_fiber_fast_switch(bool) { return false; }

std::string host_jit_target() { return "none"; }
std::string host_jit_compiler() { return "none"; }
std::string host_jit_flags() { return "none"; }

bool host_backend_available() noexcept { return false; }

}  // namespace ropejit

#endif  // ROPEJIT_HAVE_HOST_BACKEND
