// Disk cache: round trip, key sensitivity, corrupt entries, unwritable folders, LRU eviction,
// Binary payloads, and two processes sharing one folder.
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

namespace {

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

std::mt19937_64& rng_engine() {
  static std::mt19937_64 r = [] {
    uint64_t seed = std::random_device{}();
    std::printf("[ test_disk_cache seed %llu ]\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return r;
}

// A fresh random 64-bit number (seed printed once).
uint64_t rng() { return rng_engine()(); }

std::string random_bytes(size_t n, std::mt19937_64& r = rng_engine()) {
  std::string s(n, '\0');
  for (char& c : s) c = char(r() & 0xff);
  return s;
}

std::string random_hex(size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(n, '0');
  for (char& c : s) c = digits[rng() % 16];
  return s;
}

CacheKey random_key() {
  CacheKey key;
  key.source_hash_hex = random_hex(32);
  key.options = "--std=c++17 -default-device --gpu-architecture=sm_90 -DSEED=" + random_hex(8);
  key.arch = "sm_90";
  key.nvrtc_version = "13.0";
  key.ropejit_version = "0.1.0";
  key.backend = "cuda";
  return key;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

void set_mtime(const std::string& path, int64_t seconds_ago) {
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

DiskCacheOptions options_for(const std::string& dir, WarningSink* sink = nullptr) {
  DiskCacheOptions o;
  o.dir = dir;
  if (sink) o.warn = sink->fn();
  return o;
}

}  // namespace

TEST(DiskCache, RoundTripAndPersistence) {
  TempDir tmp;
  WarningSink sink;
  DiskCache cache(options_for(tmp.path(), &sink));
  ASSERT_TRUE(cache.enabled());
  EXPECT_EQ(cache.dir(), tmp.path());
  CacheKey key = random_key();
  std::string payload = random_bytes(10000 + rng() % 5000);

  EXPECT_FALSE(cache.load(key).has_value());
  ASSERT_TRUE(cache.store(key, payload));
  auto loaded = cache.load(key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, payload);

  // <dir>/<2 hex>/<32 hex>.bin
  fs::path p(cache.path_for(key));
  EXPECT_EQ(p.parent_path().parent_path().string(), tmp.path());
  EXPECT_EQ(p.extension(), ".bin");
  EXPECT_EQ(p.stem().string().size(), 32u);
  EXPECT_EQ(p.parent_path().filename().string(), p.stem().string().substr(0, 2));
  EXPECT_TRUE(fs::is_regular_file(p));

  // Another object (another process, later) sees the same entry.
  DiskCache again(options_for(tmp.path(), &sink));
  auto loaded_again = again.load(key);
  ASSERT_TRUE(loaded_again.has_value());
  EXPECT_EQ(*loaded_again, payload);

  // Overwrite with a new payload.
  std::string payload2 = random_bytes(77);
  ASSERT_TRUE(cache.store(key, payload2));
  EXPECT_EQ(cache.load(key).value_or(""), payload2);
  EXPECT_EQ(cache.entry_count(), 1u);
  EXPECT_TRUE(sink.messages->empty());
}

TEST(DiskCache, EmptyPayloadRoundTrips) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CacheKey key = random_key();
  ASSERT_TRUE(cache.store(key, ""));
  auto loaded = cache.load(key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(loaded->empty());
}

TEST(DiskCache, EveryKeyFieldMatters) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CacheKey base = random_key();
  std::string payload = random_bytes(512);
  ASSERT_TRUE(cache.store(base, payload));
  ASSERT_EQ(cache.load(base).value_or(""), payload);

  std::string CacheKey::*fields[] = {&CacheKey::source_hash_hex, &CacheKey::options,
                                     &CacheKey::arch,            &CacheKey::nvrtc_version,
                                     &CacheKey::ropejit_version, &CacheKey::backend};
  for (auto field : fields) {
    CacheKey other = base;
    other.*field += "x";
    SCOPED_TRACE(other.text());
    EXPECT_NE(other.text(), base.text());
    EXPECT_NE(cache.path_for(other), cache.path_for(base));
    EXPECT_FALSE(cache.load(other).has_value());
  }
  // Field boundaries cannot be forged: a newline inside a value is escaped.
  CacheKey a = base, b = base;
  a.options = "x\narch=sm_80";
  b.options = "x";
  b.arch = "sm_80\narch=" + base.arch;
  EXPECT_NE(a.text(), b.text());
  const std::string a_text = a.text();
  EXPECT_EQ(std::count(a_text.begin(), a_text.end(), '\n'), 7);
}

TEST(DiskCache, TruncatedEntryMissesThenRewrites) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CacheKey key = random_key();
  std::string payload = random_bytes(4096);
  ASSERT_TRUE(cache.store(key, payload));
  const std::string path = cache.path_for(key);
  const std::string full = read_file(path);
  const size_t key_len = key.text().size();
  std::vector<size_t> cuts = {0, 1, 7, 8, 12, 15, 16, 16 + key_len / 2, 16 + key_len,
                              24 + key_len, 24 + key_len + 1, full.size() / 2,
                              full.size() - 9, full.size() - 8, full.size() - 1};
  for (int i = 0; i < 5; ++i) cuts.push_back(rng() % full.size());
  for (size_t cut : cuts) {
    SCOPED_TRACE("truncated to " + std::to_string(cut) + " of " + std::to_string(full.size()));
    write_file(path, full.substr(0, cut));
    EXPECT_FALSE(cache.load(key).has_value());
  }
  // Extra trailing bytes are just as foreign.
  write_file(path, full + "z");
  EXPECT_FALSE(cache.load(key).has_value());
  ASSERT_TRUE(cache.store(key, payload));
  EXPECT_EQ(cache.load(key).value_or(""), payload);
}

TEST(DiskCache, GarbageAndFlippedBytesMiss) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CacheKey key = random_key();
  std::string payload = random_bytes(2048);
  ASSERT_TRUE(cache.store(key, payload));
  const std::string path = cache.path_for(key);
  const std::string full = read_file(path);

  for (size_t size : {size_t(1), size_t(31), size_t(32), full.size(), size_t(100000)}) {
    write_file(path, random_bytes(size));
    EXPECT_FALSE(cache.load(key).has_value()) << "garbage of " << size << " bytes";
  }
  // Any single flipped byte (magic, version, lengths, key, payload, checksum) is a miss.
  for (int i = 0; i < 40; ++i) {
    std::string bad = full;
    size_t at = i < 8 ? size_t(i) : rng() % bad.size();
    bad[at] = char(bad[at] ^ (1 + rng() % 255));
    write_file(path, bad);
    EXPECT_FALSE(cache.load(key).has_value()) << "byte " << at << " flipped";
  }
  ASSERT_TRUE(cache.store(key, payload));
  EXPECT_EQ(cache.load(key).value_or(""), payload);
}

TEST(DiskCache, ValidEntryOfAnotherKeyAtThePathMisses) {
  TempDir tmp_a, tmp_b;
  DiskCache cache(options_for(tmp_a.path()));
  DiskCache other_cache(options_for(tmp_b.path()));
  CacheKey key = random_key();
  CacheKey foreign = random_key();
  std::string foreign_payload = random_bytes(300);
  ASSERT_TRUE(other_cache.store(foreign, foreign_payload));
  // Simulate a hash collision: a well-formed file for `foreign` at `key`'s path.
  const std::string path = cache.path_for(key);
  fs::create_directories(fs::path(path).parent_path());
  fs::copy_file(other_cache.path_for(foreign), path);
  EXPECT_FALSE(cache.load(key).has_value());
  auto info = cache.list();
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].key_text, foreign.text());
  EXPECT_TRUE(info[0].header_ok);

  std::string payload = random_bytes(400);
  ASSERT_TRUE(cache.store(key, payload));
  EXPECT_EQ(cache.load(key).value_or(""), payload);
}

TEST(DiskCache, FolderUnderARegularFileIsMemoryOnlyWithOneWarning) {
  TempDir tmp;
  const std::string file = tmp.path() + "/not-a-folder";
  write_file(file, "x");
  WarningSink sink;
  DiskCache cache(options_for(file + "/cache", &sink));
  EXPECT_FALSE(cache.enabled());
  CacheKey key = random_key();
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(cache.store(key, "payload"));
    EXPECT_FALSE(cache.load(key).has_value());
  }
  EXPECT_EQ(cache.try_lock(key), nullptr);
  ASSERT_EQ(sink.messages->size(), 1u);
  EXPECT_NE(sink.messages->front().find("memory only"), std::string::npos);
  EXPECT_NE(sink.messages->front().find(file), std::string::npos);
}

TEST(DiskCache, ReadOnlyFolderIsMemoryOnlyWithOneWarning) {
  if (::geteuid() == 0) {
    // root ignores mode bits; the regular-file variant above covers this case.
    GTEST_SKIP() << "running as root: chmod 0555 does not stop writes";
  }
  TempDir tmp;
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0555), 0);
  for (const std::string& dir : {tmp.path(), tmp.path() + "/sub"}) {
    WarningSink sink;
    DiskCache cache(options_for(dir, &sink));
    EXPECT_FALSE(cache.enabled()) << dir;
    CacheKey key = random_key();
    EXPECT_FALSE(cache.store(key, "payload"));
    EXPECT_FALSE(cache.store(key, "payload"));
    EXPECT_FALSE(cache.load(key).has_value());
    EXPECT_EQ(sink.messages->size(), 1u) << dir;
  }
}

TEST(DiskCache, FolderLostAfterStartDisablesWithOneWarning) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache";
  WarningSink sink;
  DiskCache cache(options_for(dir, &sink));
  ASSERT_TRUE(cache.enabled());
  fs::remove_all(dir);
  write_file(dir, "now a file");  // works as root too: no folder can be made under it
  CacheKey key = random_key();
  EXPECT_FALSE(cache.store(key, "a"));
  EXPECT_FALSE(cache.store(random_key(), "b"));
  EXPECT_FALSE(cache.enabled());
  EXPECT_EQ(sink.messages->size(), 1u);
}

TEST(DiskCache, ResolvesLocationFromOptionsThenEnvironment) {
  struct EnvGuard {
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    void set(const char* name, const char* value) {
      const char* old = std::getenv(name);
      saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value) ::setenv(name, value, 1);
      else ::unsetenv(name);
    }
    ~EnvGuard() {
      for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
        if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
        else ::unsetenv(it->first.c_str());
      }
    }
  } env;
  env.set("ROPEJIT_CACHE_DIR", "/tmp/rj-env");
  env.set("XDG_CACHE_HOME", "/tmp/rj-xdg");
  env.set("HOME", "/tmp/rj-home");
  EXPECT_EQ(ropejit::resolve_cache_dir("/tmp/rj-explicit"), "/tmp/rj-explicit");
  EXPECT_EQ(ropejit::resolve_cache_dir(), "/tmp/rj-env");
  env.set("ROPEJIT_CACHE_DIR", "");
  EXPECT_EQ(ropejit::resolve_cache_dir(), "/tmp/rj-xdg/ropejit");
  env.set("XDG_CACHE_HOME", nullptr);
  EXPECT_EQ(ropejit::resolve_cache_dir(), "/tmp/rj-home/.cache/ropejit");
  env.set("XDG_CACHE_HOME", "relative/xdg");  // not absolute: ignored per the XDG spec
  EXPECT_EQ(ropejit::resolve_cache_dir(), "/tmp/rj-home/.cache/ropejit");
  env.set("HOME", nullptr);
  EXPECT_EQ(ropejit::resolve_cache_dir(), "");  // never the working directory

  WarningSink sink;
  DiskCache cache(options_for("", &sink));
  EXPECT_FALSE(cache.enabled());
  EXPECT_EQ(sink.messages->size(), 1u);

  TempDir tmp;
  env.set("ROPEJIT_CACHE_DIR", tmp.path().c_str());
  DiskCache from_env(options_for(""));
  EXPECT_TRUE(from_env.enabled());
  EXPECT_EQ(from_env.dir(), tmp.path());
}

TEST(DiskCache, EvictsLeastRecentlyUsedBeyondMaxBytes) {
  TempDir tmp;
  DiskCacheOptions o = options_for(tmp.path());
  std::vector<CacheKey> keys;
  std::vector<std::string> payloads;
  for (int i = 0; i < 5; ++i) {
    CacheKey k = random_key();
    k.options = "fixed-length-options";  // every entry has the same size
    keys.push_back(k);
    payloads.push_back(random_bytes(1000));
  }
  uint64_t entry_size = 0;
  {
    DiskCache probe(options_for(tmp.path()));
    ASSERT_TRUE(probe.store(keys[0], payloads[0]));
    entry_size = probe.total_bytes();
    probe.clear();
  }
  ASSERT_GT(entry_size, 1000u);
  o.max_bytes = 3 * entry_size + entry_size / 2;  // room for three entries
  DiskCache cache(o);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.store(keys[i], payloads[i]));
  EXPECT_EQ(cache.entry_count(), 3u);
  set_mtime(cache.path_for(keys[0]), 300);
  set_mtime(cache.path_for(keys[1]), 200);
  set_mtime(cache.path_for(keys[2]), 100);
  auto listed = cache.list();
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].path, cache.path_for(keys[0]));  // oldest first

  ASSERT_TRUE(cache.load(keys[0]).has_value());  // a hit makes key 0 the youngest
  ASSERT_TRUE(cache.store(keys[3], payloads[3]));
  EXPECT_EQ(cache.entry_count(), 3u);
  EXPECT_LE(cache.total_bytes(), o.max_bytes);
  EXPECT_FALSE(cache.load(keys[1]).has_value()) << "least recently used entry survived";
  EXPECT_EQ(cache.load(keys[0]).value_or(""), payloads[0]);
  EXPECT_EQ(cache.load(keys[3]).value_or(""), payloads[3]);

  set_mtime(cache.path_for(keys[2]), 100);
  ASSERT_TRUE(cache.store(keys[4], payloads[4]));
  EXPECT_FALSE(cache.load(keys[2]).has_value());
  EXPECT_EQ(cache.entry_count(), 3u);

  // An entry larger than the bound is kept (it was just stored) and evicts all others.
  CacheKey huge = random_key();
  std::string huge_payload = random_bytes(size_t(o.max_bytes) + 10);
  ASSERT_TRUE(cache.store(huge, huge_payload));
  EXPECT_EQ(cache.entry_count(), 1u);
  EXPECT_EQ(cache.load(huge).value_or(""), huge_payload);
}

TEST(DiskCache, ClearRemovesEveryEntry) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  std::vector<CacheKey> keys;
  for (int i = 0; i < 6; ++i) {
    keys.push_back(random_key());
    ASSERT_TRUE(cache.store(keys.back(), random_bytes(100 + i)));
  }
  auto held = cache.try_lock(keys[0]);
  EXPECT_EQ(cache.entry_count(), 6u);
  EXPECT_GT(cache.total_bytes(), 600u);
  EXPECT_EQ(cache.clear(), 6u);
  EXPECT_EQ(cache.entry_count(), 0u);
  EXPECT_EQ(cache.total_bytes(), 0u);
  for (const auto& k : keys) EXPECT_FALSE(cache.load(k).has_value());
  ASSERT_TRUE(cache.store(keys[1], "again"));
  EXPECT_EQ(cache.load(keys[1]).value_or(""), "again");
}

TEST(DiskCache, AdvisoryLockExcludesSecondHolder) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CacheKey key = random_key();
  auto first = cache.try_lock(key);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(cache.try_lock(key), nullptr);
  EXPECT_NE(cache.try_lock(random_key()), nullptr);
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    auto l = cache.lock(key);
    acquired = l != nullptr;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(acquired.load());
  first.reset();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_NE(cache.try_lock(key), nullptr);
}

TEST(DiskCache, BinaryPayloadRoundTrip) {
  Binary b;
  b.arch = "sm_90a";
  b.is_ptx = true;
  b.image = random_bytes(3000);
  b.entry = "ropejit_rope_" + random_hex(16);
  b.source_hash = {rng(), rng()};
  b.registers = int(rng() % 255);
  b.spill_bytes = int(rng() % 100);
  b.stack_bytes = int(rng() % 100);
  b.shared_bytes = int(rng() % 10000);
  b.compile_ms = 1.0 + double(rng() % 100000) / 7.0;
  b.log = "ptxas info    : Used " + std::to_string(b.registers) + " registers\n";

  std::string payload = ropejit::serialize_binary(b);
  auto back = ropejit::deserialize_binary(payload);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->arch, b.arch);
  EXPECT_EQ(back->is_ptx, b.is_ptx);
  EXPECT_EQ(back->image, b.image);
  EXPECT_EQ(back->entry, b.entry);
  EXPECT_EQ(back->source_hash, b.source_hash);
  EXPECT_EQ(back->registers, b.registers);
  EXPECT_EQ(back->spill_bytes, b.spill_bytes);
  EXPECT_EQ(back->stack_bytes, b.stack_bytes);
  EXPECT_EQ(back->shared_bytes, b.shared_bytes);
  EXPECT_EQ(back->compile_ms, b.compile_ms);
  EXPECT_EQ(back->log, b.log);

  Binary unset;  // registers = -1 survives the trip
  EXPECT_EQ(ropejit::deserialize_binary(ropejit::serialize_binary(unset))->registers, -1);
  for (size_t cut : {size_t(0), size_t(3), payload.size() / 2, payload.size() - 1})
    EXPECT_FALSE(ropejit::deserialize_binary(payload.substr(0, cut)).has_value()) << cut;
  EXPECT_FALSE(ropejit::deserialize_binary(payload + "x").has_value());

  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CacheKey key = random_key();
  ASSERT_TRUE(cache.store(key, payload));
  auto loaded = cache.load(key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(ropejit::deserialize_binary(*loaded)->image, b.image);
}

namespace {

// Deterministic payload of one key index, identical in every process; sizes vary.
std::string payload_for(int index, uint64_t run_seed) {
  std::mt19937_64 r(run_seed * 1000003 + uint64_t(index));
  return random_bytes(1 + (r() % 48000), r);
}

// Stores and loads random keys; returns the number of loads that were neither a miss nor
// the exact payload.
int hammer(DiskCache& cache, const std::vector<CacheKey>& keys, uint64_t run_seed,
           uint64_t worker_seed, int iterations) {
  std::mt19937_64 r(worker_seed);
  int bad = 0;
  for (int i = 0; i < iterations; ++i) {
    int index = int(r() % keys.size());
    if (r() % 3 == 0) {
      cache.store(keys[index], payload_for(index, run_seed));
    } else {
      auto got = cache.load(keys[index]);
      if (got && *got != payload_for(index, run_seed)) ++bad;
    }
  }
  return bad;
}

}  // namespace

TEST(DiskCache, TwoProcessesShareOneFolderWithoutCorruption) {
  TempDir tmp;
  const uint64_t run_seed = rng();
  std::vector<CacheKey> keys;
  for (int i = 0; i < 12; ++i) keys.push_back(random_key());
  DiskCacheOptions o = options_for(tmp.path());
  o.max_bytes = 200000;  // about half the keys fit: eviction races with readers too
  const int iterations = 1500;

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    DiskCache cache(o);
    int bad = cache.enabled() ? hammer(cache, keys, run_seed, run_seed ^ 0xc0ffee, iterations) : 99;
    ::_exit(bad == 0 ? 0 : 1);
  }
  DiskCache cache(o);
  ASSERT_TRUE(cache.enabled());
  int bad = hammer(cache, keys, run_seed, run_seed ^ 0xbeef, iterations);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(bad, 0) << "parent saw corrupt payloads";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child saw corrupt payloads";

  // No temp files are left behind; every remaining entry is intact.
  for (const auto& e : cache.list()) EXPECT_TRUE(e.header_ok) << e.path;
  size_t temps = 0;
  for (auto& f : fs::recursive_directory_iterator(tmp.path()))
    if (f.path().filename().string().find(".tmp.") != std::string::npos) ++temps;
  EXPECT_EQ(temps, 0u);
  int hits = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto got = cache.load(keys[i]);
    if (got) {
      ++hits;
      EXPECT_EQ(*got, payload_for(int(i), run_seed));
    }
  }
  EXPECT_GT(hits, 0);
}

TEST(DiskCache, ThreadsShareOneCacheWithoutCorruption) {
  TempDir tmp;
  const uint64_t run_seed = rng();
  std::vector<CacheKey> keys;
  for (int i = 0; i < 8; ++i) keys.push_back(random_key());
  DiskCacheOptions o = options_for(tmp.path());
  o.max_bytes = 150000;
  DiskCache cache(o);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { bad += hammer(cache, keys, run_seed, run_seed + t, 400); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_TRUE(cache.enabled());
}

namespace {

// Runs a shell command line; returns (exit status, stdout).
std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {-1, output};
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

TEST(DiskCache, CliListsClearsAndPrintsPath) {
  const std::string cli = ROPEJIT_CLI_PATH;
  if (cli.empty()) GTEST_SKIP() << "the ropejit command is not built (ROPEJIT_BUILD_CLI=OFF)";
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  CacheKey key = random_key();
  key.arch = "sm_86";
  ASSERT_TRUE(cache.store(key, random_bytes(2000)));
  ASSERT_TRUE(cache.store(random_key(), random_bytes(10)));

  auto [path_rc, path_out] = run_command(cli + " cache path --dir '" + tmp.path() + "'");
  EXPECT_EQ(path_rc, 0);
  EXPECT_EQ(path_out, tmp.path() + "\n");

  auto [ls_rc, ls_out] = run_command(cli + " cache ls --dir '" + tmp.path() + "'");
  EXPECT_EQ(ls_rc, 0);
  EXPECT_NE(ls_out.find("sm_86"), std::string::npos) << ls_out;
  EXPECT_NE(ls_out.find(key.source_hash_hex.substr(0, 12)), std::string::npos) << ls_out;
  EXPECT_NE(ls_out.find("2 entries"), std::string::npos) << ls_out;

  auto [clear_rc, clear_out] = run_command(cli + " cache clear --dir '" + tmp.path() + "'");
  EXPECT_EQ(clear_rc, 0) << clear_out;
  EXPECT_EQ(cache.entry_count(), 0u);
  EXPECT_FALSE(cache.load(key).has_value());
}
