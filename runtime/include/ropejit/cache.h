#pragma once
/// Disk cache of compiled kernels (docs/architecture.md §7): content-addressed files, atomic
/// publish, full key checked on load, LRU bound by size, memory-only fallback when unwritable.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ropejit/atomic_file.h"
#include "ropejit/compile.h"
#include "ropejit/warnings.h"

namespace ropejit {

/// Everything a cached binary depends on. Each field changes the file the key maps to.
struct CacheKey {
  std::string source_hash_hex;   ///< Source::hash.hex()
  std::string options;           ///< compiler options, joined (e.g. NVRTC flags)
  std::string arch;              ///< exact target, "sm_90"
  std::string nvrtc_version;     ///< nvrtc_version(), or the host compiler version
  std::string ropejit_version;   ///< ropejit::version()
  std::string backend;           ///< "cuda" | "host"

  /// Canonical text: a header line, then one `name=value` line per field in fixed order
  /// (backslash and newline escaped). Stored inside the file and compared on load.
  std::string text() const;
  /// XXH3-128 of text(); names the file.
  Hash128 hash() const;
};

/// Construction options of a DiskCache.
struct DiskCacheOptions {
  /// Cache folder; empty = resolve_cache_dir("").
  std::string dir;
  /// Bound on the total size of entries; the least recently used go first.
  uint64_t max_bytes = uint64_t(1) << 30;
  /// fsync each entry before publishing it (durability across power loss; slower).
  bool fsync = false;
  /// Receives the one "cache disabled" warning (its text, without the "ropejit: warning: "
  /// prefix); empty = print "ropejit: warning: <text>" to stderr. Runtime passes
  /// RuntimeOptions::on_warning here. Must not throw (an exception is dropped).
  WarningSink warn;
};

/// One entry as listed by DiskCache::list().
struct CacheEntryInfo {
  std::string path;        ///< full file path
  uint64_t size = 0;       ///< file size in bytes
  int64_t mtime_ns = 0;    ///< last store or load hit (ns since the epoch)
  std::string key_text;    ///< stored key text; empty when the header is unreadable
  bool header_ok = false;  ///< magic, version and lengths agree with the file size
};

/// Advisory per-key lock (flock on a side file); released on destruction. Only avoids
/// duplicate compile work: readers never take it and correctness never depends on it.
class CacheLock {
 public:
  /// Takes ownership of a held lock.
  explicit CacheLock(FileLock lock) noexcept : lock_(std::move(lock)) {}
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  FileLock lock_;
};

/// Resolves the cache folder: `explicit_dir`, else $ROPEJIT_CACHE_DIR, else
/// $XDG_CACHE_HOME/ropejit (absolute only), else $HOME/.cache/ropejit. Empty when none of
/// these is set; never the working directory.
std::string resolve_cache_dir(const std::string& explicit_dir = {});

/// Content-addressed cache of opaque payloads at `<dir>/<2 hex>/<32 hex>.bin`. Thread-safe;
/// several processes may share one folder.
class DiskCache {
 public:
  /// Resolves and creates the folder; if that or a probe write fails, the cache is disabled
  /// (every load misses, stores are dropped) and one warning goes to the sink.
  explicit DiskCache(DiskCacheOptions options = {});

  /// False when the folder is unusable (memory-only operation).
  bool enabled() const noexcept { return enabled_.load(std::memory_order_acquire); }
  /// The resolved folder (may be empty or unusable when !enabled()).
  const std::string& dir() const noexcept { return dir_; }
  /// The configured size bound.
  uint64_t max_bytes() const noexcept { return options_.max_bytes; }

  /// File an entry for `key` lives in.
  std::string path_for(const CacheKey& key) const;

  /// The payload stored for `key`, or nullopt: absent, truncated, corrupt, another key, or
  /// disabled. A hit refreshes the entry's mtime (its LRU age).
  std::optional<std::string> load(const CacheKey& key) const;

  /// Publishes `payload` for `key` atomically (temp file + rename), then evicts the least
  /// recently used entries beyond max_bytes. False when disabled or the write failed (the
  /// first failure disables the cache with one warning).
  bool store(const CacheKey& key, std::string_view payload);

  /// Non-blocking advisory lock for `key`; nullptr when another holder has it or disabled.
  std::unique_ptr<CacheLock> try_lock(const CacheKey& key) const;
  /// Blocking advisory lock for `key` (waits for another compiler); nullptr when disabled.
  std::unique_ptr<CacheLock> lock(const CacheKey& key) const;

  /// Every entry file, oldest (least recently used) first.
  std::vector<CacheEntryInfo> list() const;
  /// Removes every published entry and crashed writers' stale temporaries; lock files and
  /// in-flight temporaries stay, so clearing never breaks a running writer. Returns the entries removed.
  size_t clear();
  /// Sum of entry file sizes.
  uint64_t total_bytes() const;
  /// Number of entry files.
  size_t entry_count() const;

 private:
  void disable(const std::string& reason) const;
  void evict_beyond_bound(const std::string& keep_path);
  std::unique_ptr<CacheLock> open_lock(const CacheKey& key, bool wait) const;

  DiskCacheOptions options_;
  std::string dir_;
  mutable std::atomic<bool> enabled_{false};
  mutable std::once_flag warned_;
  std::mutex evict_mutex_;
};

/// Serializes a Binary (every field) into a cache payload.
std::string serialize_binary(const Binary& binary);

/// Parses a payload written by serialize_binary; nullopt when malformed.
std::optional<Binary> deserialize_binary(std::string_view payload);

}  // namespace ropejit
