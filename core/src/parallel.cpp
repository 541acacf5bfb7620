#include "ropejit/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace ropejit {

unsigned worker_threads(int requested) {
  if (requested > 0) return static_cast<unsigned>(requested);
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_for(size_t count, unsigned threads, const std::function<void(size_t)>& job) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++) job(i);
  };
  const size_t extra = std::min<size_t>(std::max(1u, threads), count);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < extra; ++t) pool.emplace_back(worker);
  worker();  // the calling thread works too
  for (auto& t : pool) t.join();
}

}  // namespace ropejit
