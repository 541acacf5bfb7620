#pragma once
// Helpers shared by the disk cache tests (test_disk_cache*.cpp).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ropejit/cache.h"

namespace fs = std::filesystem;
using ropejit::Binary;
using ropejit::CacheKey;
using ropejit::DiskCache;
using ropejit::DiskCacheOptions;


namespace ropejit::cache_test {


// A fresh folder from mkdtemp, removed (permissions restored first) at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/ropejit-cache-test.XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    if (!made) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::end(it);
         it.increment(ec))
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0755);
    ::chmod(path_.c_str(), 0755);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `fn` on another thread; fails the test (instead of hanging it) after `seconds`.
template <class Fn>
inline void within_seconds(int seconds, Fn fn, const char* what) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not return within " << seconds << " s";
    std::_Exit(1);  // the blocked thread cannot be joined: end the test binary with the failure
  }
  done.get();
}

inline std::mt19937_64& rng_engine() {
  static std::mt19937_64 r = [] {
    uint64_t seed = std::random_device{}();
    std::printf("[ test_disk_cache seed %llu ]\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return r;
}

// A fresh random 64-bit number (seed printed once).
inline uint64_t rng() { return rng_engine()(); }

inline std::string random_bytes(size_t n, std::mt19937_64& r = rng_engine()) {
  std::string s(n, '\0');
  for (char& c : s) c = char(r() & 0xff);
  return s;
}

inline std::string random_hex(size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(n, '0');
  for (char& c : s) c = digits[rng() % 16];
  return s;
}

inline CacheKey random_key() {
  CacheKey key;
  key.source_hash_hex = random_hex(32);
  key.options = "--std=c++17 -default-device --gpu-architecture=sm_90 -DSEED=" + random_hex(8);
  key.arch = "sm_90";
  key.nvrtc_version = "13.0";
  key.ropejit_version = "0.1.0";
  key.backend = "cuda";
  return key;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

inline void set_mtime(const std::string& path, int64_t seconds_ago) {
  timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// Collects warnings instead of printing them.
struct WarningSink {
  std::shared_ptr<std::vector<std::string>> messages = std::make_shared<std::vector<std::string>>();
  std::function<void(const std::string&)> fn() {
    auto m = messages;
    return [m](const std::string& s) { m->push_back(s); };
  }
};

inline DiskCacheOptions options_for(const std::string& dir, WarningSink* sink = nullptr) {
  DiskCacheOptions o;
  o.dir = dir;
  if (sink) o.warn = sink->fn();
  return o;
}


}  // namespace ropejit::cache_test
