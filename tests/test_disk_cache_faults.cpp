// Disk cache faults (issue 15): what is found at an entry path (FIFO, link, folder) never hangs or
// escapes the folder, and `clear` during writers never breaks them.
#include <sys/stat.h>
#include <unistd.h>

#include <future>

#include <gtest/gtest.h>

#include "support/cache_test_util.h"

using namespace ropejit::cache_test;

namespace {

// Runs `fn` on another thread; fails the test (instead of hanging it) after `seconds`.
template <class Fn>
void within_seconds(int seconds, Fn fn, const char* what) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not return within " << seconds << " s";
    std::_Exit(1);  // the blocked thread cannot be joined: end the test binary with the failure
  }
  done.get();
}

}  // namespace

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
