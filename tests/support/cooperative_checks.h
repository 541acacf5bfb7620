#pragma once
// The collective tests as checks that do not care where the kernel runs: one CUDA source and
// the expected values from the Programming Guide's definitions (warp_simulation.h). The host
// backend (test_host_cooperative.cpp) and a GPU (test_cooperative_cuda.cpp) are held to the same
// bits by the same checks, so they agree with each other bit for bit.
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ropejit/internal/host_jit.h"

namespace ropejit::test {

/// Every kernel of the collective tests (each test compiles it for one entry); the misuse
/// kernels at its end are undefined in CUDA and run on the host backend only.
extern const char* const kCooperativeKernels;

/// Host memory a kernel reads or writes.
struct HostBuffer {
  void* data;    ///< host pointer
  size_t bytes;  ///< its size
};

/// Runs `entry` of kCooperativeKernels over `dims`, with in[i] as params.in[i].ptr and out[i]
/// as params.out[i].ptr (copied to and from the device where the launcher has one).
using CooperativeLaunch =
    std::function<void(const std::string& entry, const HostLaunchDims& dims,
                       const std::vector<HostBuffer>& in, const std::vector<HostBuffer>& out)>;

/// CUDA's dim3 pair (grid, block).
HostLaunchDims dims_of(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz);

/// The shapes both suites run (full and partial warps; 1-D, 2-D and 3-D blocks; many blocks).
extern const std::vector<HostLaunchDims> kWarpOpsOneDimensional;    ///< warp_ops, 1-D blocks
extern const std::vector<HostLaunchDims> kWarpOpsMultiDimensional;  ///< warp_ops, 2-D and 3-D blocks
extern const std::vector<HostLaunchDims> kWarpOpsManyBlocks;        ///< warp_ops, 128 blocks of 300
extern const std::vector<HostLaunchDims> kWarpThenBlockSumShapes;   ///< warp_then_block_sum
extern const std::vector<HostLaunchDims> kSharedTreeSumShapes;      ///< shared_tree_sum

/// A fresh generator; prints its seed under `tag`.
std::mt19937 seeded_rng(const char* tag);

/// warp_ops (every shuffle at widths 32/16/8, votes, divergent masks) over `dims`: checks every
/// defined slot of every thread; returns the launch's wall time in ms.
double check_warp_ops(const CooperativeLaunch& launch, const HostLaunchDims& dims, std::mt19937& rng);

/// warp_then_block_sum: butterfly sums in each warp, then a fixed-order tree in shared memory;
/// both compared bit for bit with the same order computed here.
void check_warp_then_block_sum(const CooperativeLaunch& launch, const HostLaunchDims& dims,
                               std::mt19937& rng);

/// shared_tree_sum: a neighbour's value read across a barrier, then a tree over the block,
/// bit for bit.
void check_shared_tree_sum(const CooperativeLaunch& launch, const HostLaunchDims& dims,
                           std::mt19937& rng);

/// full_mask_with_exited_lanes: a full mask while some lanes of each warp have exited.
void check_exited_lanes(const CooperativeLaunch& launch, std::mt19937& rng);

}  // namespace ropejit::test
