// Disk cache faults (issue 15): what is found at an entry path (FIFO, link, folder) never hangs or
// escapes the folder, and `clear` during writers never breaks them.
// ropejit-tier: unit
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include <gtest/gtest.h>

#include "support/cache_test_util.h"

using namespace ropejit::cache_test;


TEST(DiskCacheFaults, FifoAtTheEntryPathIsAMissNotAHang) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  const CacheKey key = random_key();
  const std::string path = cache.path_for(key);
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);
  within_seconds(10, [&] { EXPECT_FALSE(cache.load(key).has_value()); }, "load() of a FIFO");
  within_seconds(10, [&] { EXPECT_EQ(cache.list().size(), 0u); }, "list() with a FIFO");
  within_seconds(10, [&] { EXPECT_TRUE(cache.store(key, "payload")); }, "store() over a FIFO");
  EXPECT_EQ(cache.load(key).value_or(""), "payload");
}

TEST(DiskCacheFaults, LinkAtTheEntryPathIsNotFollowed) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path() + "/cache"));
  const CacheKey key = random_key(), other = random_key();
  ASSERT_TRUE(cache.store(other, "the other entry"));
  const std::string path = cache.path_for(key);
  fs::create_directories(fs::path(path).parent_path());
  fs::create_symlink(cache.path_for(other), path);  // a valid entry, but of another key
  EXPECT_FALSE(cache.load(key).has_value());
  const std::string outside = tmp.path() + "/outside";
  write_file(outside, "not the cache's");
  fs::remove(path);
  fs::create_symlink(outside, path);
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_TRUE(cache.store(key, "mine"));  // replaces the link, never writes through it
  EXPECT_EQ(read_file(outside), "not the cache's");
  EXPECT_EQ(cache.load(key).value_or(""), "mine");
}

TEST(DiskCacheFaults, FolderAtTheEntryPathIsAMiss) {
  TempDir tmp;
  WarningSink sink;
  DiskCache cache(options_for(tmp.path(), &sink));
  const CacheKey key = random_key();
  fs::create_directories(cache.path_for(key));
  EXPECT_FALSE(cache.load(key).has_value());
  EXPECT_EQ(cache.list().size(), 0u);
}

TEST(DiskCacheFaults, ClearLeavesLocksAndInFlightTemporaries) {
  TempDir tmp;
  DiskCache cache(options_for(tmp.path()));
  const CacheKey key = random_key();
  ASSERT_TRUE(cache.store(key, "entry"));
  auto held = cache.try_lock(key);
  ASSERT_NE(held, nullptr);
  const std::string path = cache.path_for(key);
  const std::string in_flight = path + ".tmp.1.00000000000000aa", stale = path + ".tmp.2.00000000000000bb";
  write_file(in_flight, "a writer is writing");
  write_file(stale, "a crashed writer's");
  set_mtime(stale, 2 * 3600);
  EXPECT_EQ(cache.clear(), 1u);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::exists(in_flight));
  EXPECT_FALSE(fs::exists(stale));
  std::string lock_path = path;
  lock_path.replace(lock_path.size() - 4, 4, ".lock");
  EXPECT_TRUE(fs::exists(lock_path));
  EXPECT_EQ(cache.try_lock(key), nullptr);  // still excluded: the held lock's file is the same file
}

// The audit's failure: writers disabled their cache when `clear` removed their temporaries or
// shards under them. Threads store into few shards while another thread clears in a loop.
TEST(DiskCacheFaults, ClearDuringWritersNeverDisablesThem) {
  TempDir tmp;
  WarningSink sink;
  DiskCache cache(options_for(tmp.path(), &sink));
  std::atomic<bool> writing{true};
  std::atomic<int> failed_stores{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 6; ++w)
    writers.emplace_back([&, w] {
      std::mt19937_64 r(uint64_t(w) * 7919 + 1);
      for (int i = 0; i < 300; ++i)
        if (!cache.store(random_key(), random_bytes(1 + r() % 3000, r))) ++failed_stores;
    });
  std::thread clearer([&] {
    while (writing) cache.clear();
  });
  for (std::thread& t : writers) t.join();
  writing = false;
  clearer.join();
  EXPECT_EQ(failed_stores.load(), 0);
  EXPECT_TRUE(cache.enabled());
  EXPECT_TRUE(sink.messages->empty()) << sink.messages->front();
}

// Eight processes, each with its own DiskCache on one folder, store while this one clears.
TEST(DiskCacheFaults, ClearDuringEightWriterProcessesNeverDisablesThem) {
  TempDir tmp;
  constexpr int kWriters = 8, kStores = 150;
  const uint64_t seed = rng();
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      WarningSink sink;
      DiskCache cache(options_for(tmp.path(), &sink));
      std::mt19937_64 r(seed + uint64_t(w));
      int failed = 0;
      for (int i = 0; i < kStores; ++i) failed += !cache.store(random_key(), random_bytes(1 + r() % 3000, r));
      // exit 0: every store landed and the cache stayed on; else the count of failures (capped)
      ::_exit(failed == 0 && cache.enabled() && sink.messages->empty() ? 0 : std::min(100, 1 + failed));
    }
    children.push_back(pid);
  }
  DiskCache clearer(options_for(tmp.path()));
  size_t cleared = 0;
  std::map<pid_t, int> status_of;
  while (status_of.size() < children.size()) {
    cleared += clearer.clear();
    for (pid_t pid : children) {
      int status = 0;
      if (!status_of.count(pid) && ::waitpid(pid, &status, WNOHANG) == pid) status_of[pid] = status;
    }
  }
  for (const auto& [pid, status] : status_of) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "a writer lost stores or disabled its cache (exit " << WEXITSTATUS(status) << ")";
  }
  std::printf("[ %zu entries cleared while %d processes stored %d each ]\n", cleared, kWriters, kStores);
}

// A folder this user may read but not write: the cache turns itself off with one warning naming
// the folder, loads miss, stores are refused, nothing throws. Root writes everywhere, so as root
// the check runs in a child that has switched to the unprivileged user `nobody` (65534).
TEST(DiskCacheFaults, ReadOnlyFolderDisablesTheCacheWithOneWarning) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache";
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);  // others may walk to the folder, not write it
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  auto check = [&dir]() -> int {
    WarningSink sink;
    DiskCache cache(options_for(dir, &sink));
    if (cache.enabled()) return 10;
    if (sink.messages->size() != 1 || sink.messages->front().find(dir) == std::string::npos) return 11;
    const CacheKey key = random_key();
    if (cache.store(key, "payload")) return 12;
    if (cache.load(key)) return 13;
    return sink.messages->size() == 1 ? 0 : 14;
  };
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
    EXPECT_EQ(check(), 0);
    return;
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
    ::_exit(check());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "SKIPPED: running as root and cannot switch to user nobody";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 enabled, 11 warning, 12 stored, 13 loaded, 14 more warnings";
}
