// Host backend collectives: __syncthreads, __syncwarp, the four shuffles, the three votes and
// static __shared__ arrays give CUDA's results; misuse fails the launch instead of hanging.
// Expected values: the Programming Guide's definitions (support/cooperative_checks.h); the
// same checks run on a GPU in test_cooperative_cuda.cpp.
// ropejit-tier: compile+sanitize
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/host/fiber_context.h"  // private: forces the ucontext fallback switch, under test
#include "ropejit/internal/host_jit.h"
#include "ropejit/compile.h"
#include "ropejit/error.h"
#include "ropejit/source.h"
#include "support/host_launch_error.h"
#include "support/cooperative_checks.h"

namespace ropejit {
namespace {

#define SKIP_WITHOUT_HOST_BACKEND() \
  if (!host_backend_available()) GTEST_SKIP() << "built without the host backend"

using test::check_warp_ops;
using test::dims_of;

std::mt19937 seeded_rng() { return test::seeded_rng("host_cooperative"); }

/// The kernels of kCooperativeKernels compiled for `entry`, once per entry for the whole suite.
const HostModule& module_for(const std::string& entry) {
  static std::vector<std::pair<std::string, std::unique_ptr<HostModule>>> modules;
  for (const auto& [name, module] : modules)
    if (name == entry) return *module;
  modules.emplace_back(entry, HostModule::compile(test::kCooperativeKernels, entry));
  return *modules.back().second;
}

/// Launches on the host backend: the buffers are the kernel's memory.
void host_launch(const std::string& entry, const HostLaunchDims& d, const std::vector<test::HostBuffer>& in,
                 const std::vector<test::HostBuffer>& out) {
  KernelParams params{};
  for (size_t i = 0; i < in.size(); ++i) params.in[i].ptr = in[i].data;
  for (size_t i = 0; i < out.size(); ++i) params.out[i].ptr = out[i].data;
  module_for(entry).launch(d, params);
}

double check_warp_ops(const HostLaunchDims& d, std::mt19937& rng) { return check_warp_ops(host_launch, d, rng); }

TEST(HostCooperative, WarpShufflesAndVotesMatchCudaOneDimensionalBlocks) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  EXPECT_TRUE(module_for("warp_ops").cooperative());
  for (const HostLaunchDims& d : test::kWarpOpsOneDimensional) check_warp_ops(d, rng);
}

TEST(HostCooperative, WarpShufflesAndVotesMatchCudaMultiDimensionalBlocks) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  for (const HostLaunchDims& d : test::kWarpOpsMultiDimensional) check_warp_ops(d, rng);
}

TEST(HostCooperative, ManyBlocksOverWorkerThreads) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  // 38400 threads of 39.5 collectives on average (35, plus 5 on even lanes, 4 on lanes < 16),
  // over several CPU workers.
  const double ms = check_warp_ops(test::kWarpOpsManyBlocks.at(0), rng);
  std::printf("[host_cooperative] 38400 threads x 39.5 collectives: %.1f ms (%.0f ns per thread "
              "and collective, %u CPU threads, %s switch)\n",
              ms, ms * 1e6 / (38400.0 * 39.5), std::max(1u, std::thread::hardware_concurrency()),
              fiber_fast_switch() ? "fast" : "ucontext");
}

/// Runs the enclosing scope's launches with the ucontext switch (the fallback where the fast
/// switch is missing or unsafe), restoring the default after.
class UcontextSwitch {
 public:
  UcontextSwitch() : previous_(set_fiber_fast_switch(false)) {}
  ~UcontextSwitch() { set_fiber_fast_switch(previous_); }

 private:
  bool previous_;
};

TEST(HostCooperative, UcontextFallbackSwitchGivesTheSameResults) {
  SKIP_WITHOUT_HOST_BACKEND();
  UcontextSwitch fallback;
  ASSERT_FALSE(fiber_fast_switch());
  auto rng = seeded_rng();
  check_warp_ops(dims_of(3, 1, 1, 64, 1, 1), rng);
  check_warp_ops(dims_of(2, 2, 1, 12, 5, 1), rng);
  const double ms = check_warp_ops(dims_of(16, 1, 1, 100, 3, 1), rng);
  std::printf("[host_cooperative] ucontext switch: 4800 threads x 39.5 collectives: %.1f ms (%.0f ns "
              "per thread and collective)\n", ms, ms * 1e6 / (4800.0 * 39.5));
}

TEST(HostCooperative, WarpButterflyThenSharedTreeIsBitExact) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  for (const HostLaunchDims& d : test::kWarpThenBlockSumShapes)
    test::check_warp_then_block_sum(host_launch, d, rng);
}

TEST(HostCooperative, SharedTreeOverTwoDimensionalBlocksIsBitExact) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  EXPECT_TRUE(module_for("shared_tree_sum").cooperative());
  for (const HostLaunchDims& d : test::kSharedTreeSumShapes)
    test::check_shared_tree_sum(host_launch, d, rng);
}

TEST(HostCooperative, ExitedLanesInAMaskAreNotWaitedFor) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  test::check_exited_lanes(host_launch, rng);
}

/// The launch of `entry` fails with `status`, its message holding every fragment (host_launch_error.h).
void expect_launch_error(const std::string& entry, const HostLaunchDims& d, Status status,
                         const std::vector<std::string>& fragments) {
  test::expect_launch_error(module_for(entry), entry, d, status, fragments);
}

TEST(HostCooperative, ThreadExitingBeforeABarrierIsAnError) {
  SKIP_WITHOUT_HOST_BACKEND();
  expect_launch_error("exit_before_barrier", dims_of(4, 1, 1, 64, 1, 1), Status::backend_error,
                      {"__syncthreads", "block (2,0,0)", "thread(s) 5 exited", "0-4,6-63 wait"});
}

TEST(HostCooperative, ShuffleReadingAnExitedLaneIsAnError) {
  SKIP_WITHOUT_HOST_BACKEND();
  expect_launch_error("shuffle_from_exited_lane", dims_of(1, 1, 1, 64, 1, 1), Status::backend_error,
                      {"__shfl_sync", "block (0,0,0) warp 0", "lane 0 reads lane 3, which exited"});
}

TEST(HostCooperative, LanesThatNeverArriveAreADeadlock) {
  SKIP_WITHOUT_HOST_BACKEND();
  expect_launch_error("half_warp_at_barrier", dims_of(2, 1, 1, 32, 1, 1), Status::backend_error,
                      {"deadlock in block (0,0,0)", "__syncthreads: thread(s) 16-31 wait",
                       "__shfl_xor_sync mask 0xffffffff: warp 0 lane(s) 0-15 wait for lane(s) 16-31"});
}

TEST(HostCooperative, MaskWithoutTheCallerIsAnError) {
  SKIP_WITHOUT_HOST_BACKEND();
  expect_launch_error("ballot_mask_without_caller", dims_of(1, 1, 1, 32, 1, 1),
                      Status::invalid_argument,
                      {"__ballot_sync in block (0,0,0) thread 0 (warp 0 lane 0)", "0x00000002",
                       "does not name the calling lane"});
}

TEST(HostCooperative, MaskNamingLanesBeyondAPartialWarpIsAnError) {
  SKIP_WITHOUT_HOST_BACKEND();
  expect_launch_error("full_mask_on_partial_warp", dims_of(1, 1, 1, 40, 1, 1),
                      Status::invalid_argument,
                      {"__any_sync", "thread 32 (warp 1 lane 0)", "lane(s) 8-31", "8 lanes"});
}

TEST(HostCooperative, MismatchedCollectivesAreAnError) {
  SKIP_WITHOUT_HOST_BACKEND();
  expect_launch_error("mismatched_votes", dims_of(1, 1, 1, 32, 1, 1), Status::backend_error,
                      {"mismatched warp collectives in block (0,0,0) warp 0", "__all_sync",
                       "__any_sync"});
}

TEST(HostCooperative, ModuleStaysUsableAfterAFailedLaunch) {
  SKIP_WITHOUT_HOST_BACKEND();
  auto rng = seeded_rng();
  expect_launch_error("half_warp_at_barrier", dims_of(1, 1, 1, 32, 1, 1), Status::backend_error,
                      {"deadlock"});
  check_warp_ops(dims_of(2, 1, 1, 32, 1, 1), rng);
}

TEST(HostCooperative, KernelWithoutCollectivesKeepsThePlainLauncher) {
  SKIP_WITHOUT_HOST_BACKEND();
  const std::string source = R"(#include "ropejit/params.cuh"
extern "C" __global__ void copy(const ropejit::KernelParams p) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  static_cast<float*>(p.out[0].ptr)[i] = static_cast<const float*>(p.in[0].ptr)[i];
}
)";
  EXPECT_FALSE(HostModule::compile(source, "copy")->cooperative());
}

TEST(HostCooperative, TestKernelsAreValidCudaForSm90) {
  Source source;
  source.text = test::kCooperativeKernels;
  source.entry = "warp_ops";
  const Binary binary = compile_nvrtc(source, "sm_90");
  EXPECT_FALSE(binary.image.empty());
  EXPECT_EQ(binary.log.find("warning"), std::string::npos) << binary.log;
}

TEST(HostCooperative, UcontextFallbackReportsDeadlocksAndStaysUsable) {
  SKIP_WITHOUT_HOST_BACKEND();
  UcontextSwitch fallback;
  expect_launch_error("half_warp_at_barrier", dims_of(2, 1, 1, 32, 1, 1), Status::backend_error,
                      {"deadlock in block (0,0,0)", "__syncthreads: thread(s) 16-31 wait"});
  auto rng = seeded_rng();
  check_warp_ops(dims_of(2, 1, 1, 32, 1, 1), rng);  // the abandoned fibers' stacks are reused
}

}  // namespace
}  // namespace ropejit
