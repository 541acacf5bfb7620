// Disk cache: content-addressed entry files, atomic publish, LRU by mtime
// (docs/architecture.md §7).
#include "ropejit/cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>

#include <fmt/core.h>
#include <xxhash.h>

#include "ropejit/warnings.h"

namespace ropejit {

namespace {

constexpr char kMagic[8] = {'R', 'O', 'P', 'E', 'J', 'I', 'T', 'C'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderBytes = 16;    // magic, version u32, key length u32
constexpr size_t kFixedBytes = 32;     // header + payload length u64 + checksum u64
constexpr uint32_t kMaxKeyBytes = 1 << 20;
constexpr int64_t kStaleTempNs = int64_t(3600) * 1000000000;  // crashed writers' leftovers

// ---- little-endian byte helpers (files are portable across hosts) ----
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(p[i])) << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(p[i])) << (8 * i);
  return v;
}

// Keeps each field on one line so the key text is unambiguous.
void append_escaped(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out.push_back(c);
  }
}

int64_t mtime_ns_of(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uint64_t random_u64() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (uint64_t(std::hash<std::thread::id>{}(std::this_thread::get_id())) << 1)};
  return rng();
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    size -= size_t(n);
  }
  return true;
}

// Reads up to `size` bytes at `offset`; returns the count read (short at end of file).
size_t read_at(int fd, char* data, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, data + done, size - done, off_t(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (n == 0) break;
    done += size_t(n);
  }
  return done;
}

std::string errno_text() { return std::strerror(errno); }

// Every file in the two-level layout: (path, name) pairs, tolerant of concurrent deletion.
template <class Visit>
void for_each_cache_file(const std::string& dir, Visit&& visit) {
  DIR* top = ::opendir(dir.c_str());
  if (!top) return;
  while (dirent* shard = ::readdir(top)) {
    std::string shard_name = shard->d_name;
    if (shard_name.size() != 2 || !std::isxdigit(uint8_t(shard_name[0])) ||
        !std::isxdigit(uint8_t(shard_name[1])))
      continue;
    std::string shard_path = dir + "/" + shard_name;
    DIR* sub = ::opendir(shard_path.c_str());
    if (!sub) continue;
    while (dirent* file = ::readdir(sub)) {
      std::string name = file->d_name;
      if (name == "." || name == "..") continue;
      visit(shard_path + "/" + name, name);
    }
    ::closedir(sub);
  }
  ::closedir(top);
}

// Opens an entry for reading without blocking (a FIFO at the path would hang a plain open) and
// without following a link; the caller fstats and refuses anything but a regular file.
int open_entry(const std::string& path) {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
}

// Reads the header and key of an entry without touching the payload.
CacheEntryInfo read_entry_info(const std::string& path) {
  CacheEntryInfo info;
  info.path = path;
  int fd = open_entry(path);
  if (fd < 0) return info;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    info.size = uint64_t(st.st_size);
    info.mtime_ns = mtime_ns_of(st);
    char header[kHeaderBytes];
    if (info.size >= kFixedBytes && read_at(fd, header, kHeaderBytes, 0) == kHeaderBytes &&
        std::memcmp(header, kMagic, 8) == 0 && get_u32(header + 8) == kFormatVersion) {
      uint32_t key_len = get_u32(header + 12);
      if (key_len <= kMaxKeyBytes && kFixedBytes + key_len <= info.size) {
        std::string key(key_len, '\0');
        char len_bytes[8];
        if (read_at(fd, key.data(), key_len, kHeaderBytes) == key_len &&
            read_at(fd, len_bytes, 8, kHeaderBytes + key_len) == 8) {
          info.key_text = std::move(key);
          info.header_ok = kFixedBytes + key_len + get_u64(len_bytes) == info.size;
        }
      }
    }
  }
  ::close(fd);
  return info;
}

}  // namespace

// ---------------------------------------------------------------- CacheKey

std::string CacheKey::text() const {
  std::string out = "ropejit-cache-key 1\n";
  const std::pair<const char*, const std::string*> fields[] = {
      {"source_hash", &source_hash_hex}, {"options", &options},
      {"arch", &arch},                   {"nvrtc_version", &nvrtc_version},
      {"ropejit_version", &ropejit_version}, {"backend", &backend}};
  for (const auto& [name, value] : fields) {
    out += name;
    out.push_back('=');
    append_escaped(out, *value);
    out.push_back('\n');
  }
  return out;
}

Hash128 CacheKey::hash() const { return hash_bytes(text()); }

// ---------------------------------------------------------------- CacheLock

// ---------------------------------------------------------------- location

std::string resolve_cache_dir(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  const char* env = std::getenv("ROPEJIT_CACHE_DIR");
  if (env && *env) return env;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/ropejit";  // XDG: relative is invalid
  const char* home = std::getenv("HOME");
  if (home && home[0] == '/') return std::string(home) + "/.cache/ropejit";
  return {};
}

// ---------------------------------------------------------------- DiskCache

namespace {

// mkdir -p; true when `path` exists as a folder afterwards.
bool make_dirs(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !make_dirs(path.substr(0, slash))) return false;
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  return false;
}

}  // namespace

DiskCache::DiskCache(DiskCacheOptions options) : options_(std::move(options)) {
  dir_ = resolve_cache_dir(options_.dir);
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  if (dir_.empty()) {
    disable("no cache folder: set ROPEJIT_CACHE_DIR, XDG_CACHE_HOME or HOME");
    return;
  }
  if (!make_dirs(dir_)) {
    disable(fmt::format("cannot create folder {}: {}", dir_, errno_text()));
    return;
  }
  // A probe write catches read-only folders and file systems up front.
  std::string probe = fmt::format("{}/.probe.{}.{:016x}", dir_, ::getpid(), random_u64());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 || !write_all(fd, "x", 1)) {
    std::string why = errno_text();
    if (fd >= 0) ::close(fd), ::unlink(probe.c_str());
    disable(fmt::format("cannot write in {}: {}", dir_, why));
    return;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  enabled_.store(true, std::memory_order_release);
}

void DiskCache::disable(const std::string& reason) const {
  enabled_.store(false, std::memory_order_release);
  std::call_once(warned_, [&] {
    warn(options_.warn,
         fmt::format("kernel disk cache disabled ({}); kernels are cached in memory only", reason));
  });
}

std::string DiskCache::path_for(const CacheKey& key) const {
  std::string name = key.hash().hex();
  return dir_ + "/" + name.substr(0, 2) + "/" + name + ".bin";
}

std::optional<std::string> DiskCache::load(const CacheKey& key) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_for(key);
  int fd = open_entry(path);
  if (fd < 0) return std::nullopt;
  struct FdCloser { int fd; ~FdCloser() { ::close(fd); } } closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  const uint64_t size = uint64_t(st.st_size);
  const std::string expected_key = key.text();
  // The size is fully determined by the key: anything else is truncated or foreign.
  if (size < kFixedBytes + expected_key.size()) return std::nullopt;
  std::string bytes(size, '\0');
  if (read_at(fd, bytes.data(), size, 0) != size) return std::nullopt;
  const char* p = bytes.data();
  if (std::memcmp(p, kMagic, 8) != 0 || get_u32(p + 8) != kFormatVersion) return std::nullopt;
  const uint32_t key_len = get_u32(p + 12);
  if (key_len != expected_key.size() ||
      std::memcmp(p + kHeaderBytes, expected_key.data(), key_len) != 0)
    return std::nullopt;
  const uint64_t payload_len = get_u64(p + kHeaderBytes + key_len);
  if (payload_len != size - kFixedBytes - key_len) return std::nullopt;
  const size_t checked = size - 8;
  if (XXH3_64bits(p, checked) != get_u64(p + checked)) return std::nullopt;

  ::futimens(fd, nullptr);  // LRU: a hit makes the entry young again (best effort)
  return bytes.substr(kHeaderBytes + key_len + 8, payload_len);
}

bool DiskCache::store(const CacheKey& key, std::string_view payload) {
  if (!enabled()) return false;
  const std::string key_text = key.text();
  std::string bytes;
  bytes.reserve(kFixedBytes + key_text.size() + payload.size());
  bytes.append(kMagic, 8);
  put_u32(bytes, kFormatVersion);
  put_u32(bytes, uint32_t(key_text.size()));
  bytes += key_text;
  put_u64(bytes, payload.size());
  bytes.append(payload.data(), payload.size());
  put_u64(bytes, XXH3_64bits(bytes.data(), bytes.size()));

  const std::string path = path_for(key);
  const std::string shard = path.substr(0, path.find_last_of('/'));
  if (::mkdir(shard.c_str(), 0755) != 0 && errno != EEXIST) {
    disable(fmt::format("cannot create folder {}: {}", shard, errno_text()));
    return false;
  }
  // Readers see the old entry or the new one, never a partial file (a concurrent clear may
  // remove the empty shard meanwhile: the helper makes it again once).
  if (std::string why = write_file_atomically(path, bytes, options_.fsync); !why.empty()) {
    disable(why);
    return false;
  }
  evict_beyond_bound(path);
  return true;
}

void DiskCache::evict_beyond_bound(const std::string& keep_path) {
  std::lock_guard<std::mutex> guard(evict_mutex_);
  struct Item {
    std::string path;
    uint64_t size;
    int64_t mtime_ns;
  };
  std::vector<Item> items;
  uint64_t total = 0;
  const int64_t now = now_ns();
  for_each_cache_file(dir_, [&](const std::string& path, const std::string& name) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (is_atomic_temp_name(name)) {
      if (now - mtime_ns_of(st) > kStaleTempNs) ::unlink(path.c_str());
      return;
    }
    if (!ends_with(name, ".bin")) return;
    total += uint64_t(st.st_size);
    items.push_back({path, uint64_t(st.st_size), mtime_ns_of(st)});
  });
  if (total <= options_.max_bytes) return;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.path < b.path;
  });
  for (const Item& item : items) {
    if (total <= options_.max_bytes) break;
    if (item.path == keep_path) continue;  // the entry just stored always survives
    if (::unlink(item.path.c_str()) == 0 || errno == ENOENT) total -= item.size;
  }
}

std::unique_ptr<CacheLock> DiskCache::open_lock(const CacheKey& key, bool wait) const {
  if (!enabled()) return nullptr;
  std::string path = path_for(key);
  path.replace(path.size() - 4, 4, ".lock");
  const std::string shard = path.substr(0, path.find_last_of('/'));
  if (::mkdir(shard.c_str(), 0755) != 0 && errno != EEXIST) return nullptr;
  FileLock file_lock(path, wait);
  if (!file_lock.locked()) return nullptr;
  return std::make_unique<CacheLock>(std::move(file_lock));
}

std::unique_ptr<CacheLock> DiskCache::try_lock(const CacheKey& key) const {
  return open_lock(key, false);
}

std::unique_ptr<CacheLock> DiskCache::lock(const CacheKey& key) const {
  return open_lock(key, true);
}

std::vector<CacheEntryInfo> DiskCache::list() const {
  std::vector<CacheEntryInfo> entries;
  if (dir_.empty()) return entries;
  for_each_cache_file(dir_, [&](const std::string& path, const std::string& name) {
    if (!ends_with(name, ".bin") || is_atomic_temp_name(name)) return;
    CacheEntryInfo info = read_entry_info(path);
    if (info.mtime_ns != 0 || info.size != 0) entries.push_back(std::move(info));
  });
  std::sort(entries.begin(), entries.end(), [](const CacheEntryInfo& a, const CacheEntryInfo& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.path < b.path;
  });
  return entries;
}

size_t DiskCache::clear() {
  if (dir_.empty()) return 0;
  std::lock_guard<std::mutex> guard(evict_mutex_);
  size_t removed = 0;
  std::vector<std::string> shards;
  const int64_t now = now_ns();
  // Published entries only, and temporaries old enough to be a crashed writer's: a writer's
  // in-flight temporary and every lock file stay (deleting a held lock file would let a second
  // process take "the same" lock on a new file).
  for_each_cache_file(dir_, [&](const std::string& path, const std::string& name) {
    shards.push_back(path.substr(0, path.find_last_of('/')));
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;
    if (is_atomic_temp_name(name)) {
      if (S_ISREG(st.st_mode) && now - mtime_ns_of(st) > kStaleTempNs) ::unlink(path.c_str());
    } else if (ends_with(name, ".bin") && ::unlink(path.c_str()) == 0) {
      ++removed;
    }
  });
  for (const std::string& shard : shards) ::rmdir(shard.c_str());  // only succeeds when empty
  return removed;
}

uint64_t DiskCache::total_bytes() const {
  uint64_t total = 0;
  for (const CacheEntryInfo& e : list()) total += e.size;
  return total;
}

size_t DiskCache::entry_count() const { return list().size(); }

// ---------------------------------------------------------------- Binary payloads

namespace {

constexpr uint32_t kBinaryPayloadVersion = 1;

void put_string(std::string& out, std::string_view s) {
  put_u64(out, s.size());
  out.append(s.data(), s.size());
}

// Bounds-checked reader; any overrun sets `ok` false.
struct PayloadReader {
  std::string_view in;
  size_t pos = 0;
  bool ok = true;

  const char* take(size_t n) {
    if (!ok || in.size() - pos < n) {
      ok = false;
      return nullptr;
    }
    const char* p = in.data() + pos;
    pos += n;
    return p;
  }
  uint32_t u32() { const char* p = take(4); return p ? get_u32(p) : 0; }
  uint64_t u64() { const char* p = take(8); return p ? get_u64(p) : 0; }
  int i32() { return int(int32_t(u32())); }
  std::string str() {
    uint64_t n = u64();
    if (!ok || n > in.size() - pos) {
      ok = false;
      return {};
    }
    const char* p = take(size_t(n));
    return p ? std::string(p, size_t(n)) : std::string();
  }
};

}  // namespace

std::string serialize_binary(const Binary& b) {
  std::string out;
  out.reserve(b.image.size() + b.log.size() + b.arch.size() + b.entry.size() + 96);
  put_u32(out, kBinaryPayloadVersion);
  put_string(out, b.arch);
  put_u32(out, b.is_ptx ? 1 : 0);
  put_string(out, b.image);
  put_string(out, b.entry);
  put_u64(out, b.source_hash.hi);
  put_u64(out, b.source_hash.lo);
  put_u32(out, uint32_t(int32_t(b.registers)));
  put_u32(out, uint32_t(int32_t(b.spill_bytes)));
  put_u32(out, uint32_t(int32_t(b.stack_bytes)));
  put_u32(out, uint32_t(int32_t(b.shared_bytes)));
  uint64_t ms_bits = 0;
  static_assert(sizeof(double) == sizeof(uint64_t), "IEEE double expected");
  std::memcpy(&ms_bits, &b.compile_ms, sizeof ms_bits);
  put_u64(out, ms_bits);
  put_string(out, b.log);
  return out;
}

std::optional<Binary> deserialize_binary(std::string_view payload) {
  PayloadReader r{payload};
  if (r.u32() != kBinaryPayloadVersion || !r.ok) return std::nullopt;
  Binary b;
  b.arch = r.str();
  uint32_t is_ptx = r.u32();
  if (is_ptx > 1) return std::nullopt;
  b.is_ptx = is_ptx == 1;
  b.image = r.str();
  b.entry = r.str();
  b.source_hash.hi = r.u64();
  b.source_hash.lo = r.u64();
  b.registers = r.i32();
  b.spill_bytes = r.i32();
  b.stack_bytes = r.i32();
  b.shared_bytes = r.i32();
  uint64_t ms_bits = r.u64();
  std::memcpy(&b.compile_ms, &ms_bits, sizeof ms_bits);
  b.log = r.str();
  if (!r.ok || r.pos != payload.size()) return std::nullopt;
  return b;
}

}  // namespace ropejit
