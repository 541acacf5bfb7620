// The collective tests of test_host_cooperative.cpp run on a GPU: the same kernels
// (support/cooperative_checks.h), the same expected values, so what the host backend computes for
// shuffles, votes, barriers and fixed-order reductions is what CUDA computes, bit for bit. Without
// a usable GPU every test is SKIPPED (gpu tier).
// ropejit-tier: gpu
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/cuda_driver.h"
#include "ropejit/compile.h"
#include "ropejit/source.h"
#include "support/cooperative_checks.h"

namespace ropejit {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "SKIPPED: cuda backend: no usable GPU"

/// Compiles each entry for the device once; the cuda backend gives the arch and the memory, the
/// driver the launch (the backend's launches are 1-D, these kernels take 3-D grids and blocks).
class CudaLauncher {
 public:
  CudaLauncher()
      : backend_(make_cuda_backend(0, "")), d_(cuda_driver()), context_(d_, backend_->properties().ordinal) {}
  ~CudaLauncher() {
    CudaContextScope scope(d_, context_.ctx);
    for (const Loaded& m : modules_) d_.cuModuleUnload(m.module);
  }

  void operator()(const std::string& entry, const HostLaunchDims& dims,
                  const std::vector<test::HostBuffer>& in, const std::vector<test::HostBuffer>& out) {
    KernelParams params{};
    std::vector<void*> owned;
    auto upload = [&](const test::HostBuffer& b) {
      owned.push_back(backend_->alloc(b.bytes));
      backend_->copy_to_device(owned.back(), b.data, b.bytes);  // outputs keep their poison
      return owned.back();
    };
    for (size_t i = 0; i < in.size(); ++i) params.in[i].ptr = upload(in[i]);
    for (size_t i = 0; i < out.size(); ++i) params.out[i].ptr = upload(out[i]);
    {
      CudaContextScope scope(d_, context_.ctx);
      void* args[] = {&params};
      d_.check(d_.cuLaunchKernel(function(entry), dims.grid_x, dims.grid_y, dims.grid_z, dims.block_x,
                                 dims.block_y, dims.block_z, 0, nullptr, args, nullptr),
               "cuLaunchKernel");
    }
    backend_->synchronize();
    for (size_t i = 0; i < out.size(); ++i) backend_->copy_to_host(out[i].data, params.out[i].ptr, out[i].bytes);
    for (void* p : owned) backend_->free(p);
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
    const Binary binary = compile_nvrtc(source, backend_->arch());  // CUBIN for this exact device
    CUmodule module = nullptr;
    d_.check(d_.cuModuleLoadDataEx(&module, binary.image.data(), 0, nullptr, nullptr), "cuModuleLoadDataEx");
    CUfunction f = nullptr;
    d_.check(d_.cuModuleGetFunction(&f, module, entry.c_str()), "cuModuleGetFunction");
    modules_.push_back({entry, module, f});
    return f;
  }

  std::unique_ptr<Backend> backend_;
  const CudaDriver& d_;
  CudaPrimaryContext context_;
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
  for (const auto& shapes : {test::kWarpOpsOneDimensional, test::kWarpOpsMultiDimensional, test::kWarpOpsManyBlocks})
    for (const HostLaunchDims& d : shapes) test::check_warp_ops(gpu.launch(), d, rng);
}

TEST(CooperativeCuda, WarpButterflyThenSharedTreeIsBitExact) {
  SKIP_WITHOUT_GPU();
  auto rng = test::seeded_rng("cooperative_cuda");
  CudaLauncher gpu;
  for (const HostLaunchDims& d : test::kWarpThenBlockSumShapes) test::check_warp_then_block_sum(gpu.launch(), d, rng);
}

TEST(CooperativeCuda, SharedTreeOverTwoDimensionalBlocksIsBitExact) {
  SKIP_WITHOUT_GPU();
  auto rng = test::seeded_rng("cooperative_cuda");
  CudaLauncher gpu;
  for (const HostLaunchDims& d : test::kSharedTreeSumShapes) test::check_shared_tree_sum(gpu.launch(), d, rng);
}

TEST(CooperativeCuda, ExitedLanesInAMaskAreNotWaitedFor) {
  SKIP_WITHOUT_GPU();
  auto rng = test::seeded_rng("cooperative_cuda");
  CudaLauncher gpu;
  test::check_exited_lanes(gpu.launch(), rng);
}

}  // namespace
}  // namespace ropejit
