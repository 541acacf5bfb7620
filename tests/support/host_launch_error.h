#pragma once
// A host-backend launch that must fail: misuse CUDA leaves undefined (a deadlock, an exited lane
// read) is an error on the host, never a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ropejit/internal/host_jit.h"
#include "ropejit/error.h"

namespace ropejit::test {

/// Launches `module` (entry `entry`) expecting Error(status) whose message holds every fragment;
/// fails (and aborts: a hung launch cannot be cancelled) when the launch takes over 60 s.
inline void expect_launch_error(const HostModule& module, const std::string& entry, const HostLaunchDims& d,
                                Status status, const std::vector<std::string>& fragments) {
  EXPECT_TRUE(module.cooperative()) << entry;
  std::vector<unsigned> out(4096, 0);
  KernelParams params{};
  params.out[0].ptr = out.data();
  std::promise<std::optional<Error>> outcome;
  std::future<std::optional<Error>> result = outcome.get_future();
  std::thread launcher([&] {
    try {
      module.launch(d, params);
      outcome.set_value(std::nullopt);
    } catch (const Error& e) {
      outcome.set_value(e);
    }
  });
  if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "%s: the launch hangs instead of failing\n", entry.c_str());
    std::abort();
  }
  launcher.join();
  const std::optional<Error> error = result.get();
  ASSERT_TRUE(error) << entry << ": the launch succeeded";
  EXPECT_EQ(error->code(), status) << error->what();
  for (const std::string& fragment : fragments)
    EXPECT_NE(std::string(error->what()).find(fragment), std::string::npos)
        << entry << ": '" << fragment << "' missing from: " << error->what();
}

}  // namespace ropejit::test
