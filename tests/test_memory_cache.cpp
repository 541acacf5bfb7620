// Memory cache: one factory call per key under contention, exceptions, hit cost.
// ropejit-tier: unit
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ropejit/internal/memory_cache.h"

using ropejit::Hash128;
using ropejit::MemoryCache;
using ropejit::MemoryCacheKey;

namespace {

std::mt19937_64& rng_engine() {
  static std::mt19937_64 r = [] {
    uint64_t seed = std::random_device{}();
    std::printf("[ test_memory_cache seed %llu ]\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return r;
}

// A fresh random 64-bit number (seed printed once).
uint64_t rng() { return rng_engine()(); }

MemoryCacheKey random_key() {
  return MemoryCacheKey{Hash128{rng(), rng()}, "cuda", "sm_90"};
}

// A stand-in for a loaded kernel.
struct FakeKernel {
  uint64_t id;
};

}  // namespace

TEST(MemoryCache, GetOrCreateStoresTheFactoryResult) {
  MemoryCache<FakeKernel> cache;
  MemoryCacheKey key = random_key();
  const uint64_t id = rng();
  int calls = 0;
  EXPECT_EQ(cache.find(key), nullptr);
  auto first = cache.get_or_create(key, [&] {
    ++calls;
    return std::make_shared<FakeKernel>(FakeKernel{id});
  });
  auto second = cache.get_or_create(key, [&] {
    ++calls;
    return std::make_shared<FakeKernel>(FakeKernel{id + 1});
  });
  EXPECT_EQ(calls, 1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(first->id, id);
  EXPECT_EQ(cache.find(key).get(), first.get());
  EXPECT_EQ(cache.size(), 1u);
}

TEST(MemoryCache, EveryKeyFieldMatters) {
  MemoryCache<FakeKernel> cache;
  MemoryCacheKey base = random_key();
  cache.insert(base, std::make_shared<FakeKernel>(FakeKernel{rng()}));
  std::vector<MemoryCacheKey> others(5, base);
  others[0].source_hash.hi ^= 1;
  others[1].source_hash.lo ^= 1ull << 63;
  others[2].backend = "host";
  others[3].arch = "sm_80";
  others[4].arch = "sm_90a";
  for (const auto& k : others) EXPECT_EQ(cache.find(k), nullptr) << k.backend << " " << k.arch;
  EXPECT_NE(cache.find(base), nullptr);
}

TEST(MemoryCache, ConcurrentRequestersRunTheFactoryOncePerKey) {
  MemoryCache<FakeKernel> cache;
  constexpr int kKeys = 48;
  constexpr int kThreads = 12;
  std::vector<MemoryCacheKey> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(random_key());
  // Same hash, different arch/backend: distinct keys that collide on the source hash.
  keys[1].source_hash = keys[0].source_hash;
  keys[1].arch = "sm_80";
  keys[2].source_hash = keys[0].source_hash;
  keys[2].backend = "host";

  std::vector<std::atomic<int>> calls(kKeys);
  std::vector<std::vector<FakeKernel*>> seen(kThreads, std::vector<FakeKernel*>(kKeys));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 order(t * 7919 + 1);
      std::vector<int> indices(kKeys);
      for (int i = 0; i < kKeys; ++i) indices[i] = i;
      std::shuffle(indices.begin(), indices.end(), order);
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      for (int i : indices) {
        auto k = cache.get_or_create(keys[i], [&, i] {
          calls[i]++;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a "compile"
          return std::make_shared<FakeKernel>(FakeKernel{uint64_t(i)});
        });
        seen[t][i] = k.get();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(calls[i].load(), 1) << "key " << i;
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_NE(seen[t][i], nullptr);
      EXPECT_EQ(seen[t][i], seen[0][i]) << "thread " << t << " key " << i;
      EXPECT_EQ(seen[t][i]->id, uint64_t(i));
    }
  }
  EXPECT_EQ(cache.size(), size_t(kKeys));
}

TEST(MemoryCache, FactoryFailureReachesWaitersAndLaterCallsRetry) {
  MemoryCache<FakeKernel> cache;
  MemoryCacheKey key = random_key();
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> calls{0};
  auto failing = [&] {
    ++calls;
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return release; });
    throw std::runtime_error("compile failed");
    return std::shared_ptr<FakeKernel>();
  };
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      try {
        cache.get_or_create(key, failing);
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) == "compile failed") ++failures;
      }
    });
  }
  while (calls.load() == 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let the others queue up
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 6);
  EXPECT_LE(calls.load(), 6);
  EXPECT_GE(calls.load(), 1);
  EXPECT_EQ(cache.find(key), nullptr);
  EXPECT_EQ(cache.size(), 0u);

  const uint64_t id = rng();
  auto ok = cache.get_or_create(key, [&] { return std::make_shared<FakeKernel>(FakeKernel{id}); });
  EXPECT_EQ(ok->id, id);
  EXPECT_EQ(cache.find(key).get(), ok.get());
}

TEST(MemoryCache, EraseAndClearKeepHeldValuesAlive) {
  MemoryCache<FakeKernel> cache;
  MemoryCacheKey a = random_key(), b = random_key();
  auto va = cache.get_or_create(a, [] { return std::make_shared<FakeKernel>(FakeKernel{1}); });
  cache.insert(b, std::make_shared<FakeKernel>(FakeKernel{2}));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.erase(a));
  EXPECT_FALSE(cache.erase(a));
  EXPECT_EQ(va->id, 1u);
  EXPECT_EQ(cache.find(a), nullptr);
  int calls = 0;
  cache.get_or_create(a, [&] {
    ++calls;
    return std::make_shared<FakeKernel>(FakeKernel{3});
  });
  EXPECT_EQ(calls, 1);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.find(b), nullptr);
}

// Hits among a thousand keys return each key's own kernel and never call the factory. What a hit
// costs is bench/bench_runtime.cpp's BM_MemoryCacheHit (a timed assertion here failed under load).
TEST(MemoryCache, HitsAmongAThousandKeysNeverCallTheFactory) {
  MemoryCache<FakeKernel> cache;
  std::vector<MemoryCacheKey> keys;
  for (int i = 0; i < 1000; ++i) {
    keys.push_back(random_key());
    cache.insert(keys.back(), std::make_shared<FakeKernel>(FakeKernel{uint64_t(i)}));
  }
  for (int i = 0; i < 20000; ++i) {
    const size_t at = size_t(i * 7919) % keys.size();
    auto k = cache.get_or_create(keys[at], []() -> std::shared_ptr<FakeKernel> { throw std::logic_error("miss"); });
    ASSERT_EQ(k->id, at) << "lookup " << i;
  }
}
