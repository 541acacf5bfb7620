// Atomic whole-file writes and lock files shared by the kernel cache and the tuning database.
#include "ropejit/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include <fmt/format.h>

namespace ropejit {

namespace {

uint64_t random_u64() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (uint64_t(std::hash<std::thread::id>{}(std::this_thread::get_id())) << 1)};
  return rng();
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= size_t(n);
  }
  return true;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::string write_file_atomically(const std::string& path, std::string_view bytes, bool durable) {
  const std::string temp = fmt::format("{}.tmp.{}.{:016x}", path, ::getpid(), random_u64());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const size_t slash = path.find_last_of('/');
  if (fd < 0 && errno == ENOENT && slash != std::string::npos && slash > 0) {
    const std::string folder = path.substr(0, slash);  // a concurrent cleaner removed it: once more
    if (::mkdir(folder.c_str(), 0755) == 0 || errno == EEXIST)
      fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0) return fmt::format("cannot write {}: {}", temp, errno_text());
  bool ok = write_all(fd, bytes.data(), bytes.size()) && (!durable || ::fsync(fd) == 0);
  std::string why = ok ? std::string() : errno_text();
  if (::close(fd) != 0 && ok) ok = false, why = errno_text();
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) ok = false, why = errno_text();
  if (ok) return "";
  ::unlink(temp.c_str());
  return fmt::format("cannot write {}: {}", path, why);
}

bool is_atomic_temp_name(std::string_view name) { return name.find(".tmp.") != std::string_view::npos; }

FileLock::FileLock(const std::string& path, bool wait, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (why) *why = fmt::format("cannot open lock file {}: {}", path, errno_text());
    return;
  }
  int rc;
  do rc = ::flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    if (why) *why = fmt::format("cannot lock {}: {}", path, errno_text());
    ::close(fd);
    return;
  }
  fd_ = fd;
}

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

FileLock::~FileLock() {
  if (fd_ < 0) return;
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
}

}  // namespace ropejit
