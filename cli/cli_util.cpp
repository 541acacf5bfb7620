#include "cli_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "ropejit/check/harness.h"

namespace ropejit::cli {

namespace {

[[noreturn]] void write_failed(const std::string& path, int err) {
  throw Error(Status::io_error, fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

/// Writes all of `bytes` to `fd`; false with errno set on failure.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

/// A name beside `path` no other writer uses: the process id and a counter.
std::string temp_path_for(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return fmt::format("{}.{}.tmp-{}-{}", folder, name, ::getpid(), counter++);
}

}  // namespace

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Status::io_error, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, std::string_view bytes) {
  if (path.empty()) throw Error(Status::invalid_argument, "cannot write a file with an empty name");
  struct stat st {};
  const bool exists = ::lstat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    // A device, FIFO or symlink: renaming over it would replace the node itself, not write
    // through it. O_TRUNC on a folder fails with EISDIR, which is the message we want.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) write_failed(path, errno);
    const bool ok = write_all(fd, bytes);
    const int err = errno;
    if (::close(fd) != 0 && ok) write_failed(path, errno);
    if (!ok) write_failed(path, err);
    return;
  }
  // Renaming over a file needs only the folder writable: keep refusing a read-only file, as
  // writing it in place would.
  if (exists && ::access(path.c_str(), W_OK) != 0) write_failed(path, errno);
  const std::string temp = temp_path_for(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) write_failed(path, errno);  // the folder is missing or unwritable: name the user's path
  // A replaced file keeps its permission bits (the temp file starts with the umask's).
  bool ok = (!exists || ::fchmod(fd, st.st_mode & 07777) == 0) && write_all(fd, bytes);
  int err = ok ? 0 : errno;
  // close() reports delayed write errors (NFS, quotas): a write is only done once it succeeds.
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(temp.c_str());
    write_failed(path, err);
  }
}

std::string parent_folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void require_writable_folder(const std::string& dir, const std::string& what) {
  const std::string probe = temp_path_for((dir.empty() ? std::string(".") : dir) + "/.ropejit-probe");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(Status::io_error,
                fmt::format("{}: cannot create files in {}: {}", what, dir.empty() ? "." : dir, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

Config config_option(const Spec& spec, const std::string& value) {
  if (value.empty()) return default_config(spec);
  const std::string text = value.front() == '{' ? value : read_file(value);
  return config_from_json(text);
}

Kernel kernel_option(Runtime& runtime, const Spec& spec, const std::string& config) {
  return config.empty() ? runtime.get(spec) : runtime.get(spec, config_option(spec, config));
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

void add_check_tokens_option(CLI::App* cmd, int64_t* value) {
  cmd->add_option("--check-tokens", *value,
                  "tokens compared with the float64 reference when --tokens is larger: that many on fresh data "
                  "and the same config, the full launch timed (default: about 2^25 values of q, k and v; 0: every "
                  "token)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 26));
}

int64_t check_tokens_option(const Spec& spec, int64_t value) {
  return value < 0 ? check::checked_tokens_for(spec) : value;
}

}  // namespace ropejit::cli
