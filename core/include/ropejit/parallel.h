#pragma once
/// Runs independent jobs on a few threads (NVRTC compiles: thread-safe, CPU-bound).
#include <cstddef>
#include <functional>

namespace ropejit {

/// Threads `requested` asks for: itself when > 0, else the hardware threads (at least 1).
unsigned worker_threads(int requested);

/// Calls job(i) for every i in [0, count) on up to `threads` threads, each index once, and
/// returns when all are done. Jobs must not throw (catch inside and record the error).
void parallel_for(size_t count, unsigned threads, const std::function<void(size_t)>& job);

}  // namespace ropejit
