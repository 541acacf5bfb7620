#pragma once
// Host backend, cooperative launches: the threads of a block run as fibers on one OS thread,
// switched only at warp and block collectives (__syncthreads, __shfl*_sync, votes, __syncwarp).
// JIT'd kernels reach this file's extern "C" functions through symbols host_jit.cpp defines in
// every module; templates/ropejit/host_shim.cuh declares them and wraps them under CUDA's names.
// No LLVM types here.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ropejit/error.h"
#include "ropejit/params.cuh"

/// Per-thread entry the generated cooperative launcher passes in: sets the CUDA indices from
/// `dims` = {gridDim xyz, blockDim xyz, blockIdx xyz, threadIdx xyz} and runs the kernel.
using RopejitCoopThreadFn = void (*)(const ropejit::KernelParams*, const unsigned* dims);

extern "C" {
/// Runs blocks [block_begin, block_end) of the grid, each block's threads as fibers on the
/// calling OS thread. Never throws (it is called from JIT'd code): the first error stops the
/// remaining blocks and is kept for take_cooperative_error().
void ropejit_coop_run_blocks(RopejitCoopThreadFn thread_fn, const ropejit::KernelParams* params,
                             unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned long long block_begin,
                             unsigned long long block_end);
/// __syncthreads(): waits until every thread of the block has arrived.
void ropejit_coop_syncthreads(void);
/// __syncwarp(mask): waits until every lane of `mask` has arrived.
void ropejit_coop_syncwarp(unsigned mask);
/// __shfl*_sync: `mode` 0 idx, 1 up, 2 down, 3 xor; `operand` srcLane, delta or laneMask;
/// `value` the caller's bits. Returns the source lane's bits (PTX shfl.sync semantics).
unsigned long long ropejit_coop_shfl(int mode, unsigned mask, unsigned long long value,
                                     unsigned operand, int width);
/// __ballot_sync (mode 0: the ballot), __any_sync (1) and __all_sync (2: 1 or 0).
unsigned ropejit_coop_vote(int mode, unsigned mask, int predicate);
}

namespace ropejit {

/// The error the last ropejit_coop_run_blocks on this OS thread stopped at, cleared on read.
std::optional<Error> take_cooperative_error();

/// Name and address of every ropejit_coop_* function, for the JIT's symbol table.
std::vector<std::pair<const char*, void*>> cooperative_symbols();

/// Prefix of the support functions a kernel calls when it uses a collective (not the launcher's
/// ropejit_coop_run_blocks): the host JIT emits the fiber launcher only for such kernels.
constexpr const char* kCooperativePrimitivePrefix = "ropejit_coop_";
/// The launcher's support function, excluded from the detection above.
constexpr const char* kCooperativeRunBlocks = "ropejit_coop_run_blocks";

}  // namespace ropejit
