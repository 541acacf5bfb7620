#pragma once
/// Files several processes share (the kernel cache's entries, the tuning database): whole-file
/// writes that readers never see half done, and an exclusive lock file.
///
/// Durability policy (one for the project): a write is always atomic (temp file + rename); it is
/// also fsync'ed before the rename when `durable`: the tuning database always (small, precious,
/// measured once), the kernel cache when its `fsync` option asks (an entry lost in a crash is
/// compiled again).
#include <string>
#include <string_view>

namespace ropejit {

/// Writes `bytes` to `path` through `<path>.tmp.<pid>.<random>` in the same folder (created
/// exclusively; the folder made again once if a concurrent cleaner removed it), fsync'ed when
/// `durable`, renamed over `path`. Returns "" on success, else what failed, naming the file; the
/// temp file never outlives a failure.
std::string write_file_atomically(const std::string& path, std::string_view bytes, bool durable);

/// True for a temp file name write_file_atomically makes (cleaners remove stale ones).
bool is_atomic_temp_name(std::string_view name);

/// An exclusive flock on `path` (created if missing), held until destruction.
class FileLock {
 public:
  /// Locks `path`: waits for the lock when `wait`, else gives up at once; `locked()` says which.
  /// `why` (may be null) receives what failed.
  FileLock(const std::string& path, bool wait, std::string* why = nullptr);
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  /// True while this object holds the lock.
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace ropejit
