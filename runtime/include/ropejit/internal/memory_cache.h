#pragma once
// In-memory cache of loaded kernels (docs/architecture.md §7):
// (source hash, backend, arch) → shared_ptr<T>.
// A hit is a shared-locked hash lookup; concurrent requesters of one missing key run the
// factory once and the others wait for its result.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "ropejit/spec.h"

namespace ropejit {

/// What identifies one loaded kernel in memory.
struct MemoryCacheKey {
  Hash128 source_hash;   ///< Source::hash
  std::string backend;   ///< "cuda" | "host"
  std::string arch;      ///< "sm_90", or the host target

  bool operator==(const MemoryCacheKey& o) const {
    return source_hash == o.source_hash && backend == o.backend && arch == o.arch;
  }
};

/// Hash of a MemoryCacheKey: the source hash is already uniform, the strings are short.
struct MemoryCacheKeyHash {
  size_t operator()(const MemoryCacheKey& k) const noexcept {
    size_t h = size_t(k.source_hash.lo ^ (k.source_hash.hi * 0x9e3779b97f4a7c15ull));
    h ^= std::hash<std::string>{}(k.backend) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= std::hash<std::string>{}(k.arch) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
  }
};

/// Thread-safe map from key to a shared T, filled by a factory at most once per key at a time.
template <class T>
class MemoryCache {
 public:
  /// The cached value, or nullptr when absent or still being created.
  std::shared_ptr<T> find(const MemoryCacheKey& key) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = slots_.find(key);
    if (it == slots_.end() || !it->second->ready.load(std::memory_order_acquire)) return nullptr;
    return it->second->value;
  }

  /// The cached value for `key`, or the one `factory()` returns (stored for next time).
  /// Concurrent callers with the same missing key wait for the first caller's factory; if it
  /// throws, every waiter gets the same exception and the key stays absent (a later call
  /// retries). The factory runs with no lock held, but must not request the same key.
  template <class Factory>
  std::shared_ptr<T> get_or_create(const MemoryCacheKey& key, Factory&& factory) {
    std::shared_ptr<Slot> slot;
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      auto it = slots_.find(key);
      if (it != slots_.end()) {
        if (it->second->ready.load(std::memory_order_acquire)) return it->second->value;
        slot = it->second;
      }
    }
    bool creator = false;
    if (!slot) {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      auto [it, inserted] = slots_.try_emplace(key, nullptr);
      if (inserted) it->second = std::make_shared<Slot>();
      slot = it->second;
      creator = inserted;
    }
    if (!creator) return wait_for(*slot);

    try {
      std::shared_ptr<T> value = std::forward<Factory>(factory)();
      {
        std::lock_guard<std::mutex> guard(slot->mutex);
        slot->value = value;
        slot->done = true;
        slot->ready.store(true, std::memory_order_release);
      }
      slot->cv.notify_all();
      return value;
    } catch (...) {
      {
        std::lock_guard<std::mutex> guard(slot->mutex);
        slot->error = std::current_exception();
        slot->done = true;
      }
      slot->cv.notify_all();
      {
        std::unique_lock<std::shared_mutex> lock(mutex_);
        auto it = slots_.find(key);
        if (it != slots_.end() && it->second == slot) slots_.erase(it);
      }
      throw;
    }
  }

  /// Stores `value` for `key`, replacing what was there.
  void insert(const MemoryCacheKey& key, std::shared_ptr<T> value) {
    auto slot = std::make_shared<Slot>();
    slot->value = std::move(value);
    slot->done = true;
    slot->ready.store(true, std::memory_order_release);
    std::unique_lock<std::shared_mutex> lock(mutex_);
    slots_[key] = std::move(slot);
  }

  /// Drops one key; true when it was present. Holders of the value keep it alive.
  bool erase(const MemoryCacheKey& key) {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    return slots_.erase(key) > 0;
  }

  /// Drops every key (values live on while referenced elsewhere).
  void clear() {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    slots_.clear();
  }

  /// Number of keys, including ones still being created.
  size_t size() const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return slots_.size();
  }

 private:
  // One key's value, or the rendezvous of callers waiting for it to be created.
  struct Slot {
    std::atomic<bool> ready{false};
    std::shared_ptr<T> value;
    std::exception_ptr error;
    bool done = false;
    std::mutex mutex;
    std::condition_variable cv;
  };

  static std::shared_ptr<T> wait_for(Slot& slot) {
    std::unique_lock<std::mutex> guard(slot.mutex);
    slot.cv.wait(guard, [&] { return slot.done; });
    if (slot.error) std::rethrow_exception(slot.error);
    return slot.value;
  }

  mutable std::shared_mutex mutex_;
  std::unordered_map<MemoryCacheKey, std::shared_ptr<Slot>, MemoryCacheKeyHash> slots_;
};

}  // namespace ropejit
