// The collective tests' kernels and checks (cooperative_checks.h).
#include "support/cooperative_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "support/warp_simulation.h"

namespace ropejit::test {

const char* const kCooperativeKernels = R"(#include "ropejit/params.cuh"

__device__ unsigned linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
__device__ unsigned linear_block() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// The lanes the caller's warp has (a block's last warp may be partial).
__device__ unsigned existing_lanes() {
  const unsigned t = linear_thread();
  const unsigned left = block_threads() - (t - t % 32);
  return left >= 32 ? 0xffffffffu : (1u << left) - 1u;
}

#define SLOTS 48
extern "C" __global__ void warp_ops(const ropejit::KernelParams p) {
  const unsigned t = linear_thread();
  const unsigned g = linear_block() * block_threads() + t;
  const unsigned lane = t % 32;
  const unsigned full = existing_lanes();
  const unsigned v = static_cast<const unsigned*>(p.in[0].ptr)[g];
  unsigned* out = static_cast<unsigned*>(p.out[0].ptr) + (unsigned long long)g * SLOTS;
  int s = 0;
  for (int width = 32; width >= 8; width /= 2) {
    out[s++] = __shfl_sync(full, v, (int)(lane * 7 + 3), width);
    out[s++] = __shfl_sync(full, v, -3, width);
    out[s++] = __shfl_up_sync(full, v, 1u, width);
    out[s++] = __shfl_up_sync(full, v, 5u, width);
    out[s++] = __shfl_down_sync(full, v, 1u, width);
    out[s++] = __shfl_down_sync(full, v, 6u, width);
    out[s++] = __shfl_xor_sync(full, v, 1, width);
    out[s++] = __shfl_xor_sync(full, v, width - 1, width);
    out[s++] = __shfl_xor_sync(full, v, 8, width);
  }
  out[s++] = __float_as_uint(__shfl_down_sync(full, (float)v * 0.5f, 3u));
  const unsigned long long wide = __shfl_xor_sync(full, (unsigned long long)v << 20 | lane, 5);
  out[s++] = (unsigned)wide;
  out[s++] = (unsigned)(wide >> 32);
  out[s++] = __ballot_sync(full, v & 1);
  out[s++] = __any_sync(full, v % 61 == 0);
  out[s++] = __all_sync(full, v % 3 != 0);
  out[s++] = __all_sync(full, lane < 32);
  out[s++] = __any_sync(full, 0);
  __syncwarp(full);
  if (lane % 2 == 0) {
    const unsigned even = full & 0x55555555u;
    out[35] = __shfl_xor_sync(even, v, 2);
    out[36] = __shfl_sync(even, v, (int)(lane + 4));
    out[37] = __ballot_sync(even, v & 2);
    __syncwarp(even);
    out[38] = __shfl_up_sync(even, v, 2u, 8);
  }
  if (lane < 16) {
    const unsigned low = full & 0xffffu;
    out[39] = __shfl_down_sync(low, v, 3u, 16);
    out[40] = __shfl_sync(low, v, 17, 16);
    out[41] = __all_sync(low, v & 4);
    out[42] = __shfl_xor_sync(low, v, 4, 8);
  }
  // The indices are the caller's again after its collectives ran the block's other threads.
  out[43] = threadIdx.x + 1000 * threadIdx.y + 1000000 * threadIdx.z;
  out[44] = linear_block();
}

// values[0] = the fixed-order tree sum of values[0, count); every thread of the block calls it.
__device__ void tree_sum_in_place(float* values, unsigned count, unsigned t) {
  unsigned span = 1;
  while (span < count) span *= 2;
  for (unsigned stride = span / 2; stride >= 1; stride /= 2) {
    if (t < stride && t + stride < count) values[t] += values[t + stride];
    __syncthreads();
  }
}

// Butterfly sums within each warp, then a tree over the warps' sums in shared memory.
extern "C" __global__ void warp_then_block_sum(const ropejit::KernelParams p) {
  __shared__ float warp_sums[32];
  const unsigned t = linear_thread();
  const unsigned g = linear_block() * block_threads() + t;
  float x = static_cast<const float*>(p.in[0].ptr)[g];
  for (int m = 16; m >= 1; m /= 2) x += __shfl_xor_sync(0xffffffffu, x, m);
  static_cast<float*>(p.out[1].ptr)[g] = x;
  const unsigned warps = block_threads() / 32;
  if (t % 32 == 0) warp_sums[t / 32] = x;
  __syncthreads();
  tree_sum_in_place(warp_sums, warps, t);
  if (t == 0) static_cast<float*>(p.out[0].ptr)[linear_block()] = warp_sums[0];
}

// A tree over all the block's values in shared memory; every thread also reads its
// neighbour's value, written by another thread before the first barrier.
extern "C" __global__ void shared_tree_sum(const ropejit::KernelParams p) {
  __shared__ float values[1024];
  const unsigned t = linear_thread(), n = block_threads();
  const unsigned g = linear_block() * n + t;
  values[t] = static_cast<const float*>(p.in[0].ptr)[g];
  __syncthreads();
  static_cast<float*>(p.out[1].ptr)[g] = values[(t + 1) % n];
  __syncthreads();
  tree_sum_in_place(values, n, t);
  if (t == 0) static_cast<float*>(p.out[0].ptr)[linear_block()] = values[0];
}

// Lanes that exited stay in a mask (CUDA: "all non-exited threads named in mask"); the lanes of
// warp w that stay are the bits of in[1][w]. Every shuffle reads a live lane.
extern "C" __global__ void full_mask_with_exited_lanes(const ropejit::KernelParams p) {
  const unsigned t = linear_thread();
  if (!(static_cast<const unsigned*>(p.in[1].ptr)[t / 32] >> t % 32 & 1u)) return;
  const unsigned v = static_cast<const unsigned*>(p.in[0].ptr)[t];
  unsigned* out = static_cast<unsigned*>(p.out[0].ptr) + t * 6;
  out[0] = __shfl_xor_sync(0xffffffffu, v, 2);
  out[1] = __shfl_xor_sync(0xffffffffu, v, 8, 16);
  out[2] = __ballot_sync(0xffffffffu, v & 1);
  out[3] = __all_sync(0xffffffffu, v % 3 != 0);
  out[4] = __any_sync(0xffffffffu, v % 61 == 0);
  __syncwarp(0xffffffffu);
  out[5] = __all_sync(0xffffffffu, 1);
}

// ---- misuse: undefined in CUDA, a launch error on the host ----
extern "C" __global__ void exit_before_barrier(const ropejit::KernelParams p) {
  if (blockIdx.x == 2 && threadIdx.x == 5) return;
  __syncthreads();
  static_cast<unsigned*>(p.out[0].ptr)[linear_thread()] = 1;
}
extern "C" __global__ void shuffle_from_exited_lane(const ropejit::KernelParams p) {
  const unsigned lane = linear_thread() % 32;
  if (lane == 3) return;
  static_cast<unsigned*>(p.out[0].ptr)[linear_thread()] = __shfl_sync(0xffffffffu, lane, 3);
}
extern "C" __global__ void half_warp_at_barrier(const ropejit::KernelParams p) {
  const unsigned lane = linear_thread() % 32;
  if (lane < 16) {
    static_cast<unsigned*>(p.out[0].ptr)[linear_thread()] = __shfl_xor_sync(0xffffffffu, lane, 1);
  } else {
    __syncthreads();
  }
}
extern "C" __global__ void ballot_mask_without_caller(const ropejit::KernelParams p) {
  const unsigned lane = linear_thread() % 32;
  static_cast<unsigned*>(p.out[0].ptr)[linear_thread()] = __ballot_sync(1u << ((lane + 1) % 32), 1);
}
extern "C" __global__ void full_mask_on_partial_warp(const ropejit::KernelParams p) {
  static_cast<unsigned*>(p.out[0].ptr)[linear_thread()] = __any_sync(0xffffffffu, 1);
}
extern "C" __global__ void mismatched_votes(const ropejit::KernelParams p) {
  const unsigned lane = linear_thread() % 32;
  unsigned* out = static_cast<unsigned*>(p.out[0].ptr);
  if (lane % 2) out[lane] = __any_sync(0xffffffffu, 1);
  else out[lane] = __all_sync(0xffffffffu, 1);
}
)";

namespace {

constexpr unsigned kSlots = 48;
constexpr unsigned kUnwritten = 0xdeadbeefu;

unsigned bits_of(float x) {
  unsigned bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

/// Expected slots of one warp of warp_ops: nothing where CUDA leaves the value undefined.
std::vector<std::vector<std::optional<unsigned>>> expected_warp_ops(const std::vector<unsigned>& v) {
  const unsigned lanes = static_cast<unsigned>(v.size());
  const unsigned full = lanes == 32 ? ~0u : (1u << lanes) - 1u;
  std::vector<std::vector<std::optional<unsigned>>> out(
      lanes, std::vector<std::optional<unsigned>>(kSlots, kUnwritten));
  std::vector<float> halves;
  std::vector<unsigned long long> wides;
  std::vector<bool> odd, div61, not3, yes, no, bit1, bit2;
  for (unsigned lane = 0; lane < lanes; ++lane) {
    halves.push_back(static_cast<float>(v[lane]) * 0.5f);
    wides.push_back(static_cast<unsigned long long>(v[lane]) << 20 | lane);
    odd.push_back(v[lane] & 1), div61.push_back(v[lane] % 61 == 0), not3.push_back(v[lane] % 3 != 0);
    yes.push_back(true), no.push_back(false), bit1.push_back(v[lane] & 2), bit2.push_back(v[lane] & 4);
  }
  const unsigned even = full & 0x55555555u, low = full & 0xffffu;
  for (unsigned lane = 0; lane < lanes; ++lane) {
    auto& o = out[lane];
    int s = 0;
    for (unsigned width = 32; width >= 8; width /= 2) {
      o[s++] = shuffled(Shuffle::idx, v, full, lane, static_cast<int>(lane * 7 + 3), width);
      o[s++] = shuffled(Shuffle::idx, v, full, lane, -3, width);
      o[s++] = shuffled(Shuffle::up, v, full, lane, 1, width);
      o[s++] = shuffled(Shuffle::up, v, full, lane, 5, width);
      o[s++] = shuffled(Shuffle::down, v, full, lane, 1, width);
      o[s++] = shuffled(Shuffle::down, v, full, lane, 6, width);
      o[s++] = shuffled(Shuffle::bfly, v, full, lane, 1, width);
      o[s++] = shuffled(Shuffle::bfly, v, full, lane, static_cast<int>(width) - 1, width);
      o[s++] = shuffled(Shuffle::bfly, v, full, lane, 8, width);
    }
    const auto half = shuffled(Shuffle::down, halves, full, lane, 3);
    o[s++] = half ? std::optional<unsigned>(bits_of(*half)) : std::nullopt;
    const auto wide = shuffled(Shuffle::bfly, wides, full, lane, 5);
    o[s++] = wide ? std::optional<unsigned>(static_cast<unsigned>(*wide)) : std::nullopt;
    o[s++] = wide ? std::optional<unsigned>(static_cast<unsigned>(*wide >> 32)) : std::nullopt;
    o[s++] = ballot(odd, full);
    o[s++] = ballot(div61, full) != 0;
    o[s++] = ballot(not3, full) == full;
    o[s++] = ballot(yes, full) == full;
    o[s++] = ballot(no, full) != 0;
    if (lane % 2 == 0) {
      o[35] = shuffled(Shuffle::bfly, v, even, lane, 2);
      o[36] = shuffled(Shuffle::idx, v, even, lane, static_cast<int>(lane + 4));
      o[37] = ballot(bit1, even);
      o[38] = shuffled(Shuffle::up, v, even, lane, 2, 8);
    }
    if (lane < 16) {
      o[39] = shuffled(Shuffle::down, v, low, lane, 3, 16);
      o[40] = shuffled(Shuffle::idx, v, low, lane, 17, 16);
      o[41] = ballot(bit2, low) == low;
      o[42] = shuffled(Shuffle::bfly, v, low, lane, 4, 8);
    }
  }
  return out;
}

/// Slots 43 and 44 of warp_ops: threadIdx and the block read after the collectives.
void expect_indices(std::vector<std::vector<std::optional<unsigned>>>& expected,
                    const HostLaunchDims& d, unsigned block, unsigned first) {
  for (unsigned lane = 0; lane < expected.size(); ++lane) {
    const unsigned t = first + lane;
    expected[lane][43] = t % d.block_x + 1000 * (t / d.block_x % d.block_y) +
                         1000000 * (t / (d.block_x * d.block_y));
    expected[lane][44] = block;
  }
}

/// Inputs whose sums depend on the order of the additions.
std::vector<float> spread_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

/// The fixed-order tree of warp_then_block_sum and shared_tree_sum over `values`.
float tree_sum(std::vector<float> values) {
  size_t span = 1;
  while (span < values.size()) span *= 2;
  for (size_t stride = span / 2; stride >= 1; stride /= 2)
    for (size_t t = 0; t < stride && t + stride < values.size(); ++t) values[t] += values[t + stride];
  return values[0];
}

}  // namespace

HostLaunchDims dims_of(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz) {
  HostLaunchDims d;
  d.grid_x = gx, d.grid_y = gy, d.grid_z = gz;
  d.block_x = bx, d.block_y = by, d.block_z = bz;
  return d;
}

const std::vector<HostLaunchDims> kWarpOpsOneDimensional = {
    dims_of(2, 1, 1, 32, 1, 1), dims_of(3, 1, 1, 64, 1, 1),
    dims_of(1, 1, 1, 48, 1, 1),  // a partial last warp of 16 lanes
    dims_of(1, 1, 1, 7, 1, 1)};  // one partial warp
const std::vector<HostLaunchDims> kWarpOpsMultiDimensional = {
    dims_of(2, 2, 1, 12, 5, 1),  // 2-D, 60 threads: last warp 28 lanes
    dims_of(1, 1, 2, 8, 4, 3)};  // 3-D, 96 threads
const std::vector<HostLaunchDims> kWarpOpsManyBlocks = {dims_of(128, 1, 1, 100, 3, 1)};
const std::vector<HostLaunchDims> kWarpThenBlockSumShapes = {
    dims_of(4, 1, 1, 256, 1, 1), dims_of(3, 2, 1, 32, 3, 1), dims_of(160, 1, 1, 256, 1, 1)};
const std::vector<HostLaunchDims> kSharedTreeSumShapes = {
    dims_of(3, 1, 1, 10, 10, 1), dims_of(2, 1, 1, 1024, 1, 1), dims_of(1, 1, 1, 1, 1, 1)};

std::mt19937 seeded_rng(const char* tag) {
  const unsigned seed = std::random_device{}();
  std::printf("[%s] random seed %u\n", tag, seed);
  return std::mt19937(seed);
}

double check_warp_ops(const CooperativeLaunch& launch, const HostLaunchDims& d, std::mt19937& rng) {
  const unsigned n = d.block_x * d.block_y * d.block_z;
  const unsigned blocks = d.grid_x * d.grid_y * d.grid_z;
  std::vector<unsigned> in(static_cast<size_t>(n) * blocks);
  for (unsigned& x : in) x = static_cast<unsigned>(rng());
  for (unsigned lane = 0; lane < std::min(n, 32u); ++lane) in[lane] = 3 * lane + 1;  // all: true
  std::vector<unsigned> out(in.size() * kSlots, kUnwritten);
  const auto start = std::chrono::steady_clock::now();
  launch("warp_ops", d, {{in.data(), in.size() * sizeof in[0]}}, {{out.data(), out.size() * sizeof out[0]}});
  const double launch_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  size_t checked = 0;
  for (unsigned block = 0; block < blocks; ++block) {
    for (unsigned first = 0; first < n; first += 32) {
      const unsigned lanes = std::min(32u, n - first);
      const size_t base = static_cast<size_t>(block) * n + first;
      const std::vector<unsigned> warp(in.begin() + base, in.begin() + base + lanes);
      auto expected = expected_warp_ops(warp);
      expect_indices(expected, d, block, first);
      for (unsigned lane = 0; lane < lanes; ++lane) {
        for (unsigned s = 0; s < kSlots; ++s) {
          if (!expected[lane][s]) continue;
          ++checked;
          EXPECT_EQ(out[(base + lane) * kSlots + s], *expected[lane][s])
              << "block " << block << " thread " << first + lane << " slot " << s;
          if (out[(base + lane) * kSlots + s] != *expected[lane][s]) return launch_ms;
        }
      }
    }
  }
  EXPECT_GT(checked, in.size() * 10);
  return launch_ms;
}

namespace {

/// A float-sum kernel's run: spread inputs, one sum per block (out[0]) and one value per thread
/// (out[1]), both poisoned with NaN before the launch.
struct FloatSumRun {
  unsigned n = 0, blocks = 0;  // threads per block, blocks
  std::vector<float> in, sums, per_thread;
};

FloatSumRun run_float_sum(const CooperativeLaunch& launch, const char* entry, const HostLaunchDims& d,
                          std::mt19937& rng) {
  FloatSumRun r;
  r.n = d.block_x * d.block_y * d.block_z;
  r.blocks = d.grid_x * d.grid_y * d.grid_z;
  r.in = spread_floats(static_cast<size_t>(r.n) * r.blocks, rng);
  r.sums.assign(r.blocks, NAN);
  r.per_thread.assign(r.in.size(), NAN);
  launch(entry, d, {{r.in.data(), r.in.size() * sizeof(float)}},
         {{r.sums.data(), r.sums.size() * sizeof(float)}, {r.per_thread.data(), r.per_thread.size() * sizeof(float)}});
  return r;
}

}  // namespace

void check_warp_then_block_sum(const CooperativeLaunch& launch, const HostLaunchDims& d,
                               std::mt19937& rng) {
  const FloatSumRun r = run_float_sum(launch, "warp_then_block_sum", d, rng);
  const unsigned n = r.n;
  const std::vector<float>& in = r.in;
  for (unsigned block = 0; block < r.blocks; ++block) {
    std::vector<float> warp_sums;
    for (unsigned first = 0; first < n; first += 32) {
      std::vector<float> x(in.begin() + block * n + first, in.begin() + block * n + first + 32);
      for (unsigned m = 16; m >= 1; m /= 2) {
        std::vector<float> next(32);
        for (unsigned lane = 0; lane < 32; ++lane) next[lane] = x[lane] + x[lane ^ m];
        x = next;
      }
      for (unsigned lane = 0; lane < 32; ++lane)
        ASSERT_EQ(bits_of(r.per_thread[block * n + first + lane]), bits_of(x[lane]))
            << "block " << block << " thread " << first + lane;
      warp_sums.push_back(x[0]);
    }
    ASSERT_EQ(bits_of(r.sums[block]), bits_of(tree_sum(warp_sums)))
        << "block " << block << " of " << n << " threads";
  }
}

void check_shared_tree_sum(const CooperativeLaunch& launch, const HostLaunchDims& d,
                           std::mt19937& rng) {
  const FloatSumRun r = run_float_sum(launch, "shared_tree_sum", d, rng);  // per_thread: the neighbours
  const unsigned n = r.n;
  for (unsigned block = 0; block < r.blocks; ++block) {
    const std::vector<float> values(r.in.begin() + block * n, r.in.begin() + (block + 1) * n);
    for (unsigned t = 0; t < n; ++t)
      ASSERT_EQ(r.per_thread[block * n + t], values[(t + 1) % n]) << "block " << block << " thread " << t;
    ASSERT_EQ(bits_of(r.sums[block]), bits_of(tree_sum(values)))
        << "block " << block << " of " << n << " threads";
  }
}

void check_exited_lanes(const CooperativeLaunch& launch, std::mt19937& rng) {
  constexpr unsigned kThreads = 96, kSlotsEach = 6;
  std::vector<unsigned> in(kThreads), out(kThreads * kSlotsEach, kUnwritten);
  for (unsigned& x : in) x = static_cast<unsigned>(rng());
  in[0] = 61;  // warp 0's any: true
  // Every lane of warp 0; warp 1's even lanes; warp 2's first 16 (a grid's end mid-warp).
  std::vector<unsigned> live_lanes = {0xffffffffu, 0x55555555u, 0x0000ffffu};
  launch("full_mask_with_exited_lanes", dims_of(1, 1, 1, kThreads, 1, 1),
         {{in.data(), in.size() * sizeof(unsigned)}, {live_lanes.data(), live_lanes.size() * sizeof(unsigned)}},
         {{out.data(), out.size() * sizeof(unsigned)}});
  for (unsigned warp = 0; warp < kThreads / 32; ++warp) {
    const std::vector<unsigned> v(in.begin() + warp * 32, in.begin() + warp * 32 + 32);
    const unsigned live = live_lanes[warp];
    std::vector<bool> odd, not3, div61;
    for (unsigned lane = 0; lane < 32; ++lane)
      odd.push_back(v[lane] & 1), not3.push_back(v[lane] % 3 != 0), div61.push_back(v[lane] % 61 == 0);
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned t = warp * 32 + lane;
      const unsigned* o = &out[t * kSlotsEach];
      if (!(live >> lane & 1u)) {
        for (unsigned s = 0; s < kSlotsEach; ++s) EXPECT_EQ(o[s], kUnwritten) << "exited thread " << t;
        continue;
      }
      EXPECT_EQ(o[0], shuffled(Shuffle::bfly, v, live, lane, 2)) << "thread " << t;
      EXPECT_EQ(o[1], shuffled(Shuffle::bfly, v, live, lane, 8, 16)) << "thread " << t;
      EXPECT_EQ(o[2], ballot(odd, live)) << "thread " << t << ": the ballot counts live lanes only";
      EXPECT_EQ(o[3], unsigned(ballot(not3, live) == live)) << "thread " << t;
      EXPECT_EQ(o[4], unsigned(ballot(div61, live) != 0)) << "thread " << t;
      EXPECT_EQ(o[5], 1u) << "thread " << t << ": __all_sync over the live lanes";
    }
  }
}

}  // namespace ropejit::test
