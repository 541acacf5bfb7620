// The collective tests of test_host_cooperative.cpp run on a GPU: the same kernels
// (support/cooperative_checks.h), the same expected values, so what the host backend computes for
// shuffles, votes, barriers and fixed-order reductions is what CUDA computes, bit for bit. Without
// a usable GPU every test is SKIPPED (gpu tier).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/backend.h"      // private: cuda_available
#include "backends/cuda_driver.h"  // private: the driver table; the kernels take 3-D grids and blocks
#include "ropejit/compile.h"
#include "ropejit/source.h"
#include "support/cooperative_checks.h"

namespace ropejit {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "SKIPPED: cuda backend: no usable GPU"

using test::dims_of;

/// Compiles each entry for the device once, copies the buffers in and out around each launch.
class CudaLauncher {
 public:
  CudaLauncher() : d_(cuda_driver()), context_(d_, 0) {
    CudaContextScope scope(d_, context_.ctx);
    int major = 0, minor = 0;
    d_.check(d_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, context_.device),
             "cuDeviceGetAttribute");
    d_.check(d_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, context_.device),
             "cuDeviceGetAttribute");
    arch_ = "sm_" + std::to_string(major * 10 + minor);
  }
  ~CudaLauncher() {
    CudaContextScope scope(d_, context_.ctx);
    for (const Loaded& m : modules_) d_.cuModuleUnload(m.module);
  }

  void operator()(const std::string& entry, const HostLaunchDims& dims,
                  const std::vector<test::HostBuffer>& in, const std::vector<test::HostBuffer>& out) {
    CudaContextScope scope(d_, context_.ctx);
    KernelParams params{};
    std::vector<CUdeviceptr> owned;
    auto upload = [&](const test::HostBuffer& b) {
      CUdeviceptr p = 0;
      d_.check(d_.cuMemAlloc(&p, b.bytes), "cuMemAlloc");
      owned.push_back(p);
      d_.check(d_.cuMemcpyHtoD(p, b.data, b.bytes), "cuMemcpyHtoD");  // outputs keep their poison
      return reinterpret_cast<void*>(p);
    };
    for (size_t i = 0; i < in.size(); ++i) params.in[i].ptr = upload(in[i]);
    for (size_t i = 0; i < out.size(); ++i) params.out[i].ptr = upload(out[i]);
    void* args[] = {&params};
    d_.check(d_.cuLaunchKernel(function(entry), dims.grid_x, dims.grid_y, dims.grid_z, dims.block_x,
                               dims.block_y, dims.block_z, 0, nullptr, args, nullptr),
             "cuLaunchKernel");
    d_.check(d_.cuCtxSynchronize(), "cuCtxSynchronize");
    for (size_t i = 0; i < out.size(); ++i)
      d_.check(d_.cuMemcpyDtoH(out[i].data, reinterpret_cast<CUdeviceptr>(params.out[i].ptr), out[i].bytes),
               "cuMemcpyDtoH");
    for (CUdeviceptr p : owned) d_.check(d_.cuMemFree(p), "cuMemFree");
  }

  /// A launcher the checks take (this object must outlive it).
  test::CooperativeLaunch launch() {
    return [this](const std::string& e, const HostLaunchDims& dims, const std::vector<test::HostBuffer>& in,
                  const std::vector<test::HostBuffer>& out) { (*this)(e, dims, in, out); };
  }

 private:
  CUfunction function(const std::string& entry) {
    for (const Loaded& m : modules_)
      if (m.entry == entry) return m.function;
    Source source;
    source.text = test::kCooperativeKernels;
    source.entry = entry;
    const Binary binary = compile_nvrtc(source, arch_);  // CUBIN for this exact device
    CUmodule module = nullptr;
    d_.check(d_.cuModuleLoadDataEx(&module, binary.image.data(), 0, nullptr, nullptr), "cuModuleLoadDataEx");
    CUfunction f = nullptr;
    d_.check(d_.cuModuleGetFunction(&f, module, entry.c_str()), "cuModuleGetFunction");
    modules_.push_back({entry, module, f});
    return f;
  }

  const CudaDriver& d_;
  CudaPrimaryContext context_;
  std::string arch_;
  struct Loaded {
    std::string entry;
    CUmodule module;
    CUfunction function;
  };
  std::vector<Loaded> modules_;
};

TEST(CooperativeCuda, WarpShufflesAndVotesMatchTheHostsExpectedValues) {
  SKIP_WITHOUT_GPU();
  auto rng = test::seeded_rng("cooperative_cuda");
  CudaLauncher gpu;
  // The host tests' shapes: full and partial warps, 1-D, 2-D and 3-D blocks, many blocks.
  for (const HostLaunchDims d : {dims_of(2, 1, 1, 32, 1, 1), dims_of(3, 1, 1, 64, 1, 1),
                                 dims_of(1, 1, 1, 48, 1, 1), dims_of(1, 1, 1, 7, 1, 1),
                                 dims_of(2, 2, 1, 12, 5, 1), dims_of(1, 1, 2, 8, 4, 3),
                                 dims_of(128, 1, 1, 100, 3, 1)})
    test::check_warp_ops(gpu.launch(), d, rng);
}

TEST(CooperativeCuda, WarpButterflyThenSharedTreeIsBitExact) {
  SKIP_WITHOUT_GPU();
  auto rng = test::seeded_rng("cooperative_cuda");
  CudaLauncher gpu;
  for (const HostLaunchDims d : {dims_of(4, 1, 1, 256, 1, 1), dims_of(3, 2, 1, 32, 3, 1),
                                 dims_of(160, 1, 1, 256, 1, 1)})
    test::check_warp_then_block_sum(gpu.launch(), d, rng);
}

TEST(CooperativeCuda, SharedTreeOverTwoDimensionalBlocksIsBitExact) {
  SKIP_WITHOUT_GPU();
  auto rng = test::seeded_rng("cooperative_cuda");
  CudaLauncher gpu;
  for (const HostLaunchDims d : {dims_of(3, 1, 1, 10, 10, 1), dims_of(2, 1, 1, 1024, 1, 1),
                                 dims_of(1, 1, 1, 1, 1, 1)})
    test::check_shared_tree_sum(gpu.launch(), d, rng);
}

TEST(CooperativeCuda, ExitedLanesInAMaskAreNotWaitedFor) {
  SKIP_WITHOUT_GPU();
  auto rng = test::seeded_rng("cooperative_cuda");
  CudaLauncher gpu;
  test::check_exited_lanes(gpu.launch(), rng);
}

}  // namespace
}  // namespace ropejit
