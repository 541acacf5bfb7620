// Disk cache: round trip, key sensitivity, corrupt entries, unwritable folders, LRU eviction,
// Binary payloads; where its warning goes (the sink, else stderr), also from a Runtime.
// ropejit-tier: unit
#include <memory>
#include <stdexcept>
#include <string_view>

#include <gtest/gtest.h>

#include "ropejit/runtime.h"
#include "support/backends.h"
#include "support/cache_test_util.h"

using namespace ropejit::cache_test;
namespace fs = std::filesystem;
using ropejit::Binary;
using ropejit::CacheKey;
using ropejit::DiskCache;
using ropejit::DiskCacheOptions;

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
  // chmod 0555 does not stop root, but nobody can create files in procfs: root gets
  // /proc/self, a folder no file can be made in, instead.
  TempDir tmp;
  std::string read_only = tmp.path();
  if (::geteuid() == 0) {
    if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "running as root without /proc: nothing is read-only";
    read_only = "/proc/self";
  } else {
    ASSERT_EQ(::chmod(tmp.path().c_str(), 0555), 0);
  }
  for (const std::string& dir : {read_only, read_only + "/sub"}) {
    WarningSink sink;
    DiskCache cache(options_for(dir, &sink));
    EXPECT_FALSE(cache.enabled()) << dir;
    CacheKey key = random_key();
    EXPECT_FALSE(cache.store(key, "payload"));
    EXPECT_FALSE(cache.store(key, "payload"));
    EXPECT_FALSE(cache.load(key).has_value());
    ASSERT_EQ(sink.messages->size(), 1u) << dir;
    EXPECT_NE(sink.messages->front().find(read_only), std::string::npos) << sink.messages->front();
    // The sink gets the text; the "ropejit: warning: " prefix is the stderr default's.
    EXPECT_EQ(sink.messages->front().rfind("kernel disk cache disabled (", 0), 0u) << sink.messages->front();
  }
}

TEST(DiskCache, WithoutASinkTheWarningGoesToStderrOnce) {
  TempDir tmp;
  const std::string file = tmp.path() + "/not-a-folder";
  write_file(file, "x");
  testing::internal::CaptureStderr();
  {
    DiskCache cache(options_for(file + "/cache"));
    EXPECT_FALSE(cache.store(random_key(), "payload"));
    EXPECT_FALSE(cache.store(random_key(), "payload"));
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.rfind("ropejit: warning: kernel disk cache disabled (", 0), 0u) << err;
  EXPECT_NE(err.find(file), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(DiskCache, ASinkThatThrowsCannotFailTheCache) {
  TempDir tmp;
  const std::string file = tmp.path() + "/not-a-folder";
  write_file(file, "x");
  int calls = 0;
  DiskCacheOptions o = options_for(file + "/cache");
  o.warn = [&calls](const std::string&) {
    ++calls;
    throw std::runtime_error("sink failure");
  };
  std::unique_ptr<DiskCache> cache;
  ASSERT_NO_THROW(cache = std::make_unique<DiskCache>(o));
  EXPECT_FALSE(cache->enabled());
  EXPECT_NO_THROW(EXPECT_FALSE(cache->store(random_key(), "payload")));
  EXPECT_EQ(calls, 1);
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


// ---- RuntimeOptions::on_warning: a Runtime's warnings reach the caller's sink ----

namespace {

/// RuntimeOptions::on_warning collecting into a vector.
struct WarningLog {
  std::shared_ptr<std::vector<std::string>> messages = std::make_shared<std::vector<std::string>>();
  std::function<void(std::string_view)> fn() {
    auto m = messages;
    return [m](std::string_view s) { m->emplace_back(s); };
  }
};

}  // namespace

TEST(RuntimeWarnings, MissingTuningDatabaseWarnsTheSinkOnce) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "built without the host backend";
  TempDir tmp;
  const std::string db = tmp.path() + "/absent/tuning.json";
  WarningLog warnings;
  ropejit::RuntimeOptions o;
  o.backend = ropejit::BackendKind::host;
  o.disk_cache = false;
  o.tuning_db = db;
  o.on_warning = warnings.fn();
  testing::internal::CaptureStderr();
  { ropejit::Runtime runtime(o); }
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(warnings.messages->size(), 1u) << "stderr: " << err;
  EXPECT_NE(warnings.messages->front().find(db), std::string::npos) << warnings.messages->front();
  EXPECT_EQ(err.find("ropejit: warning"), std::string::npos) << "printed although a sink was set: " << err;
}

TEST(RuntimeWarnings, UnwritableCacheFolderWarnsTheSinkOnce) {
  // Both backends cache on disk; the host one needs no device.
  const bool cuda = ropejit::test::cuda_device_usable();
  if (!cuda && !ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: no CUDA device and no host backend";
  TempDir tmp;
  const std::string file = tmp.path() + "/not-a-folder";
  write_file(file, "x");  // no folder can be made under a file, as root too
  WarningLog warnings;
  ropejit::RuntimeOptions o;
  o.backend = cuda ? ropejit::BackendKind::cuda : ropejit::BackendKind::host;
  o.cache_dir = file + "/cache";
  o.on_warning = warnings.fn();
  ropejit::Runtime runtime(o);
  ASSERT_EQ(warnings.messages->size(), 1u);
  EXPECT_NE(warnings.messages->front().find("memory only"), std::string::npos) << warnings.messages->front();
  EXPECT_NE(warnings.messages->front().find(file), std::string::npos) << warnings.messages->front();
}
