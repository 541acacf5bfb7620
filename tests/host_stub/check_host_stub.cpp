// A build without the host backend (-DROPEJIT_HOST_BACKEND=OFF: the GPU machine's bundle) links
// runtime/src/backends/host_stub.cpp in place of the JIT, and its tests call HostModule and the
// fiber switch. This program links the stub alone (with core) in the default build, so a member
// the stub lacks fails every build, not only the rare one (it once broke scripts/gpu-prepare.sh);
// then it checks that each answers "unsupported" or "none".
#include <cstdio>
#include <memory>

#include "backends/host/fiber_context.h"  // private: the stub of the fiber switch, under test
#include "ropejit/internal/host_jit.h"
#include "ropejit/error.h"

namespace {

using namespace ropejit;

template <typename Call>
bool throws_unsupported(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.code() == Status::unsupported;
  }
  return false;
}

}  // namespace

int main() {
  int failures = 0;
  auto expect = [&](bool ok, const char* what) {
    if (!ok) std::fprintf(stderr, "FAILED: %s\n", what), ++failures;
  };
  expect(!host_backend_available(), "host_backend_available() is false");
  std::unique_ptr<HostModule> made;  // its destructor needs ~HostModule
  expect(throws_unsupported([&] { made = HostModule::compile("", "k"); }), "HostModule::compile throws unsupported");
  expect(throws_unsupported([] { HostModule::compile_object("", "k"); }), "compile_object throws unsupported");
  expect(throws_unsupported([] { HostModule::load_object("", "k"); }), "load_object throws unsupported");
  // No HostModule exists without the backend (nor can one be made outside host_jit.cpp, where
  // Impl is complete), so these members are checked by the link alone: reading the volatile
  // pointers keeps each reference, and a member the stub lacks fails this program's build.
  static void (HostModule::*volatile launch)(const HostLaunchDims&, const KernelParams&) const = &HostModule::launch;
  static double (HostModule::*volatile compile_ms)() const = &HostModule::compile_ms;
  static bool (HostModule::*volatile cooperative)() const = &HostModule::cooperative;
  (void)launch, (void)compile_ms, (void)cooperative;
  expect(!fiber_fast_switch() && !set_fiber_fast_switch(true), "the fiber switch reports the ucontext path");
  expect(host_jit_target() == "none" && host_jit_compiler() == "none" && host_jit_flags() == "none",
         "the cache-key parts read \"none\"");
  if (failures == 0) std::printf("host stub: links (every HostModule member and the fiber switch defined); the callable ones answer unsupported/none\n");
  return failures == 0 ? 0 : 1;
}
