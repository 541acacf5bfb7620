// Cooperative host launches: a block's threads run as fibers on one OS thread and
// switch only at collectives. A collective is resolved when no fiber can run any more; if
// nothing then completes, the block is deadlocked and the launch fails instead of hanging.
// Called from JIT'd code built with -fno-exceptions: nothing here throws across that code.
#include "backends/host/cooperative.h"

#include "backends/host/fiber_context.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ropejit {
namespace {

constexpr unsigned kWarpSize = 32;
// Kernels keep small frames (no recursion, no big local arrays); the guard page below turns
// an overflow into a fault instead of silent corruption.
constexpr size_t kFiberStackBytes = 64 << 10;

enum class Wait : std::uint8_t { runnable, barrier, warp, done };

/// The warp collectives, by the CUDA name they report under.
enum class Collective : std::uint8_t {
  syncwarp, shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all
};

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::syncwarp: return "__syncwarp";
    case Collective::shfl_idx: return "__shfl_sync";
    case Collective::shfl_up: return "__shfl_up_sync";
    case Collective::shfl_down: return "__shfl_down_sync";
    case Collective::shfl_xor: return "__shfl_xor_sync";
    case Collective::ballot: return "__ballot_sync";
    case Collective::any: return "__any_sync";
    case Collective::all: return "__all_sync";
  }
  return "?";
}

/// One CUDA thread of the block in flight and what it waits at.
struct Fiber {
  FiberContext context;
  Wait wait = Wait::runnable;
  Collective kind = Collective::syncwarp;
  unsigned mask = 0;
  unsigned long long value = 0;  // shfl: the caller's bits; votes: predicate != 0
  unsigned operand = 0;          // shfl: srcLane, delta or laneMask
  int width = 32;
  unsigned long long result = 0;
};

/// Fiber stacks of one OS thread, each behind a guard page, reused across blocks and launches.
class FiberStacks {
 public:
  FiberStacks() = default;
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;
  ~FiberStacks() {
    for (void* mapping : mappings_) munmap(mapping, guard_bytes() + kFiberStackBytes);
  }
  /// The usable stack of fiber `index`, or null when the memory cannot be mapped.
  char* stack(size_t index) {
    while (mappings_.size() <= index) {
      void* mapping = mmap(nullptr, guard_bytes() + kFiberStackBytes, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
      if (mapping == MAP_FAILED) return nullptr;
      mprotect(mapping, guard_bytes(), PROT_NONE);  // stacks grow down into it
      mappings_.push_back(mapping);
    }
    return static_cast<char*>(mappings_[index]) + guard_bytes();
  }

 private:
  static size_t guard_bytes() {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return page;
  }
  std::vector<void*> mappings_;
};

/// The block this OS thread is running: its fibers, the scheduler's context, the first error.
struct BlockRun {
  RopejitCoopThreadFn thread_fn = nullptr;
  const KernelParams* params = nullptr;
  unsigned dims[12] = {};  // gridDim, blockDim, blockIdx, then threadIdx filled per fiber
  unsigned threads = 0;
  std::vector<Fiber> fibers;
  FiberContext scheduler;
  unsigned current = 0;
  std::optional<Error> error;
};

thread_local FiberStacks tls_stacks;
thread_local BlockRun* tls_run = nullptr;
thread_local std::optional<Error> tls_last_error;

std::string block_name(const BlockRun& run) {
  return fmt::format("block ({},{},{})", run.dims[6], run.dims[7], run.dims[8]);
}

/// "0-14,16,20-31": lanes or threads as ranges.
std::string ranges(const std::vector<unsigned>& sorted) {
  std::string text;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += j == i ? fmt::format("{}", sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
    i = j + 1;
  }
  return text;
}

std::string lane_ranges(unsigned bits) {
  std::vector<unsigned> lanes;
  for (unsigned lane = 0; lane < kWarpSize; ++lane)
    if (bits >> lane & 1u) lanes.push_back(lane);
  return ranges(lanes);
}

unsigned lanes_in_warp(const BlockRun& run, unsigned warp) {
  const unsigned left = run.threads - warp * kWarpSize;
  return left < kWarpSize ? left : kWarpSize;
}

unsigned warp_bits(unsigned lanes) { return lanes >= kWarpSize ? ~0u : (1u << lanes) - 1u; }

[[noreturn]] void fiber_main() {
  BlockRun& run = *tls_run;
  fiber_started(run.scheduler);
  const unsigned index = run.current;
  unsigned dims[12];
  std::copy(run.dims, run.dims + 9, dims);
  dims[9] = index % run.dims[3];
  dims[10] = index / run.dims[3] % run.dims[4];
  dims[11] = index / (run.dims[3] * run.dims[4]);
  run.thread_fn(run.params, dims);
  run.fibers[index].wait = Wait::done;
  fiber_switch(run.fibers[index].context, run.scheduler, /*from_ends=*/true);
  __builtin_unreachable();  // the scheduler never resumes a finished fiber
}

/// Records the caller's misuse and never resumes it (its frames are abandoned, not unwound).
void fail_in_fiber(BlockRun& run, Fiber& fiber, Status status, const std::string& message) {
  if (!run.error) run.error.emplace(status, message);
  fiber.wait = Wait::done;
}

/// Arguments CUDA leaves undefined, checked where the calling lane arrives.
bool arrival_is_valid(BlockRun& run, Fiber& fiber, const char* primitive) {
  const unsigned index = run.current;
  const unsigned warp = index / kWarpSize, lane = index % kWarpSize;
  const unsigned existing = warp_bits(lanes_in_warp(run, warp));
  std::string problem;
  if (!(fiber.mask >> lane & 1u)) {
    problem = "does not name the calling lane";
  } else if (fiber.mask & ~existing) {
    problem = fmt::format("names lane(s) {} that the block does not have (its last warp has {} lanes)",
                          lane_ranges(fiber.mask & ~existing), lanes_in_warp(run, warp));
  } else if (fiber.width < 1 || fiber.width > 32 || (fiber.width & (fiber.width - 1))) {
    problem = fmt::format("width {} is not a power of 2 in [1, 32]", fiber.width);
  }
  if (problem.empty()) return true;
  fail_in_fiber(run, fiber, Status::invalid_argument,
                fmt::format("host backend: {} in {} thread {} (warp {} lane {}): mask {:#010x} {}",
                            primitive, block_name(run), index, warp, lane, fiber.mask, problem));
  return false;
}

/// Parks the calling fiber until the scheduler resolves what it waits at; returns its result.
unsigned long long park(Wait wait, Collective kind, unsigned mask, unsigned long long value,
                        unsigned operand, int width) {
  BlockRun* run = tls_run;
  if (!run) {
    if (!tls_last_error)
      tls_last_error.emplace(Status::internal,
                             "host backend: a collective ran outside a cooperative launch");
    return 0;
  }
  Fiber& fiber = run->fibers[run->current];
  fiber.wait = wait;
  fiber.kind = kind;
  fiber.mask = mask;
  fiber.value = value;
  fiber.operand = operand;
  fiber.width = width;
  if (wait == Wait::warp) arrival_is_valid(*run, fiber, collective_name(kind));
  fiber_switch(fiber.context, run->scheduler);
  return fiber.result;
}

/// PTX shfl.sync: the lane `lane` reads from (itself when the source is outside its segment).
unsigned shfl_source(Collective kind, unsigned lane, unsigned operand, int width) {
  const int segmask = (kWarpSize - width) & 0x1f;  // c[12:8]
  const int clamp = kind == Collective::shfl_up ? 0 : 0x1f;  // c[4:0]
  const int b = static_cast<int>(operand & 0x1f);
  const int l = static_cast<int>(lane);
  const int max_lane = (l & segmask) | (clamp & ~segmask);
  const int min_lane = l & segmask;
  int j = l;
  bool in_range = true;
  switch (kind) {
    case Collective::shfl_up: j = l - b; in_range = j >= max_lane; break;
    case Collective::shfl_down: j = l + b; in_range = j <= max_lane; break;
    case Collective::shfl_xor: j = l ^ b; in_range = j <= max_lane; break;
    default: j = min_lane | (b & ~segmask); in_range = j <= max_lane; break;
  }
  return static_cast<unsigned>(in_range ? j : l);
}

/// Completes the collective of `mask` in warp `warp`: every lane of it that has not exited waits
/// there (`live`; CUDA asks that of "all non-exited threads named in mask"). False (with run.error)
/// when a shuffle reads a lane that exited: undefined in CUDA.
bool complete_warp_collective(BlockRun& run, unsigned warp, unsigned mask, unsigned live) {
  Fiber* lanes = &run.fibers[warp * kWarpSize];
  unsigned ballot = 0;  // votes count the lanes that have not exited
  for (unsigned lane = 0; lane < kWarpSize; ++lane)
    if (live >> lane & 1u && lanes[lane].value) ballot |= 1u << lane;
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    if (!(live >> lane & 1u)) continue;
    Fiber& f = lanes[lane];
    switch (f.kind) {
      case Collective::syncwarp: f.result = 0; break;
      case Collective::ballot: f.result = ballot; break;
      case Collective::any: f.result = ballot != 0; break;
      case Collective::all: f.result = ballot == live; break;
      default: {
        // A source lane outside the mask holds no value: unspecified on the GPU, 0 here.
        const unsigned source = shfl_source(f.kind, lane, f.operand, f.width);
        if (mask >> source & 1u && !(live >> source & 1u)) {
          if (!run.error)
            run.error.emplace(Status::backend_error,
                              fmt::format("host backend: {} in {} warp {}: lane {} reads lane {}, which exited "
                                          "(undefined in CUDA); mask {:#010x}",
                                          collective_name(f.kind), block_name(run), warp, lane, source, mask));
          return false;
        }
        f.result = mask >> source & 1u ? lanes[source].value : 0;
      }
    }
    f.wait = Wait::runnable;
  }
  return true;
}

void fail(BlockRun& run, Status status, const std::string& message) {
  if (!run.error) run.error.emplace(status, message);
}

/// Threads of the block in state `wait`, as ranges.
std::string threads_in(const BlockRun& run, Wait wait) {
  std::vector<unsigned> found;
  for (unsigned i = 0; i < run.threads; ++i)
    if (run.fibers[i].wait == wait) found.push_back(i);
  return ranges(found);
}

/// Every fiber is parked or done: completes what can complete. False (with run.error) when
/// nothing can: a deadlock or a collective CUDA leaves undefined.
bool resolve(BlockRun& run) {
  unsigned at_barrier = 0, at_warp = 0, done = 0;
  for (const Fiber& f : run.fibers) {
    at_barrier += f.wait == Wait::barrier;
    at_warp += f.wait == Wait::warp;
    done += f.wait == Wait::done;
  }
  if (at_warp == 0 && at_barrier > 0) {
    if (done > 0) {
      fail(run, Status::backend_error,
           fmt::format("host backend: __syncthreads in {}: thread(s) {} exited while thread(s) {} "
                       "wait at it (undefined in CUDA; the GPU may hang)",
                       block_name(run), threads_in(run, Wait::done), threads_in(run, Wait::barrier)));
      return false;
    }
    for (Fiber& f : run.fibers) f.wait = Wait::runnable;
    return true;
  }
  bool progressed = false;
  std::string stuck;  // what each unresolved warp collective waits for, for the deadlock report
  for (unsigned warp = 0; warp * kWarpSize < run.threads; ++warp) {
    Fiber* lanes = &run.fibers[warp * kWarpSize];
    const unsigned count = lanes_in_warp(run, warp);
    unsigned exited = 0, handled = 0;
    for (unsigned lane = 0; lane < count; ++lane)
      if (lanes[lane].wait == Wait::done) exited |= 1u << lane;
    for (unsigned lane = 0; lane < count; ++lane) {
      const Fiber& f = lanes[lane];
      if (f.wait != Wait::warp || handled >> lane & 1u) continue;
      const unsigned mask = f.mask;
      const unsigned live = mask & ~exited;  // lanes that exited are not waited for, as on the GPU
      unsigned arrived = 0, other_kind = 0;
      for (unsigned k = 0; k < count; ++k) {
        if (!(mask >> k & 1u) || lanes[k].wait != Wait::warp || lanes[k].mask != mask) continue;
        arrived |= 1u << k;
        if (lanes[k].kind != f.kind) other_kind |= 1u << k;
      }
      handled |= arrived;
      if (arrived != live) {
        stuck += fmt::format("; {} mask {:#010x}: warp {} lane(s) {} wait for lane(s) {}",
                             collective_name(f.kind), mask, warp, lane_ranges(arrived),
                             lane_ranges(live & ~arrived));
        continue;
      }
      if (other_kind) {
        fail(run, Status::backend_error,
             fmt::format("host backend: mismatched warp collectives in {} warp {} mask {:#010x}: "
                         "lane(s) {} at {}, lane(s) {} at another ({} first)",
                         block_name(run), warp, mask, lane_ranges(live & ~other_kind),
                         collective_name(f.kind), lane_ranges(other_kind),
                         collective_name(lanes[__builtin_ctz(other_kind)].kind)));
        return false;
      }
      if (!complete_warp_collective(run, warp, mask, live)) return false;
      progressed = true;
    }
  }
  if (progressed) return true;
  std::string message = fmt::format("host backend: deadlock in {}", block_name(run));
  if (at_barrier) message += fmt::format("; __syncthreads: thread(s) {} wait", threads_in(run, Wait::barrier));
  message += stuck;
  if (done) message += fmt::format("; thread(s) {} exited", threads_in(run, Wait::done));
  fail(run, Status::backend_error, message);
  return false;
}

/// Runs every thread of block `block` to its end; false (with run.error) when it cannot.
bool run_block(BlockRun& run, unsigned long long block) {
  const unsigned long long gxy = 1ull * run.dims[0] * run.dims[1];
  run.dims[6] = static_cast<unsigned>(block % run.dims[0]);
  run.dims[7] = static_cast<unsigned>(block / run.dims[0] % run.dims[1]);
  run.dims[8] = static_cast<unsigned>(block / gxy);
  for (unsigned i = 0; i < run.threads; ++i) {
    Fiber& f = run.fibers[i];
    char* stack = tls_stacks.stack(i);
    if (!stack) {
      fail(run, Status::backend_error,
           fmt::format("host backend: cannot map {} fiber stacks of {} KiB", run.threads,
                       kFiberStackBytes >> 10));
      return false;
    }
    f.wait = Wait::runnable;
    fiber_prepare(f.context, stack, kFiberStackBytes, fiber_main);
  }
  for (;;) {
    bool all_done = true;
    for (unsigned i = 0; i < run.threads; ++i) {
      if (run.fibers[i].wait == Wait::runnable) {
        run.current = i;
        fiber_switch(run.scheduler, run.fibers[i].context);
        if (run.error) return false;
      }
      all_done = all_done && run.fibers[i].wait == Wait::done;
    }
    if (all_done) return true;
    if (!resolve(run)) return false;
  }
}

}  // namespace

std::optional<Error> take_cooperative_error() {
  std::optional<Error> error = std::move(tls_last_error);
  tls_last_error.reset();
  return error;
}

std::vector<std::pair<const char*, void*>> cooperative_symbols() {
  return {{"ropejit_coop_run_blocks", reinterpret_cast<void*>(&ropejit_coop_run_blocks)},
          {"ropejit_coop_syncthreads", reinterpret_cast<void*>(&ropejit_coop_syncthreads)},
          {"ropejit_coop_syncwarp", reinterpret_cast<void*>(&ropejit_coop_syncwarp)},
          {"ropejit_coop_shfl", reinterpret_cast<void*>(&ropejit_coop_shfl)},
          {"ropejit_coop_vote", reinterpret_cast<void*>(&ropejit_coop_vote)}};
}

}  // namespace ropejit

using ropejit::BlockRun;
using ropejit::Collective;
using ropejit::Wait;

extern "C" void ropejit_coop_run_blocks(RopejitCoopThreadFn thread_fn,
                                        const ropejit::KernelParams* params, unsigned gx,
                                        unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned long long block_begin,
                                        unsigned long long block_end) {
  BlockRun run;
  run.thread_fn = thread_fn;
  run.params = params;
  const unsigned dims[6] = {gx, gy, gz, bx, by, bz};
  std::copy(dims, dims + 6, run.dims);
  run.threads = bx * by * bz;
  run.fibers.resize(run.threads);
  ropejit::tls_run = &run;
  for (unsigned long long block = block_begin; block < block_end; ++block)
    if (!run_block(run, block)) break;
  ropejit::tls_run = nullptr;
  if (run.error && !ropejit::tls_last_error) ropejit::tls_last_error = std::move(run.error);
}

extern "C" void ropejit_coop_syncthreads(void) {
  ropejit::park(Wait::barrier, Collective::syncwarp, 0, 0, 0, 32);
}

extern "C" void ropejit_coop_syncwarp(unsigned mask) {
  ropejit::park(Wait::warp, Collective::syncwarp, mask, 0, 0, 32);
}

extern "C" unsigned long long ropejit_coop_shfl(int mode, unsigned mask, unsigned long long value,
                                                unsigned operand, int width) {
  static constexpr Collective kModes[] = {Collective::shfl_idx, Collective::shfl_up,
                                          Collective::shfl_down, Collective::shfl_xor};
  const Collective kind = kModes[static_cast<unsigned>(mode) & 3u];
  return ropejit::park(Wait::warp, kind, mask, value, operand, width);
}

extern "C" unsigned ropejit_coop_vote(int mode, unsigned mask, int predicate) {
  static constexpr Collective kModes[] = {Collective::ballot, Collective::any, Collective::all};
  const Collective kind = kModes[mode >= 0 && mode < 3 ? mode : 0];
  return static_cast<unsigned>(ropejit::park(Wait::warp, kind, mask, predicate != 0, 0, 32));
}
