// Disk cache shared by processes and threads, and the `ropejit cache` command.
// ropejit-tier: unit
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/build_paths.h"
#include "support/run_command.h"
#include "support/cache_test_util.h"

using namespace ropejit::cache_test;
using ropejit::CacheKey;
using ropejit::DiskCache;
using ropejit::DiskCacheOptions;

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

using ropejit::test::run_command;

}  // namespace

TEST(DiskCache, CliListsClearsAndPrintsPath) {
  const std::string cli = ropejit::test::cli_path();
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
