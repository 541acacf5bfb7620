// The host backend's object code in the disk cache (issue 15): a second process (here: a second
// Runtime, whose memory cache is empty) links the stored object instead of running clang, and
// computes the same bytes; the key holds the CPU and flags; a bad entry is recompiled.
// ropejit-tier: unit
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ropejit/internal/host_jit.h"
#include "ropejit/cache.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/version.h"
#include "support/cache_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::cache_test::TempDir;

namespace {

struct Outputs {
  std::vector<uint16_t> q, k;
};

/// Random bf16 q and k (|x| in [1, 4), both signs) and positions, fresh per run of the suite.
struct Inputs {
  static constexpr int kTokens = 7;
  std::vector<uint16_t> q, k;
  std::vector<int32_t> positions;
  explicit Inputs(const Spec& spec) {
    std::random_device seed_source;
    const unsigned seed = seed_source();
    std::printf("[ host disk cache inputs seed %u ]\n", seed);
    std::mt19937 rng(seed);
    auto bf16 = [&] { return static_cast<uint16_t>(0x3f80 + rng() % 0x100 + (rng() % 2 ? 0x8000 : 0)); };
    q.resize(size_t(kTokens) * spec.num_q_heads * spec.head_dim);
    k.resize(size_t(kTokens) * spec.num_kv_heads * spec.head_dim);
    for (auto& x : q) x = bf16();
    for (auto& x : k) x = bf16();
    for (int t = 0; t < kTokens; ++t) positions.push_back(static_cast<int32_t>(rng() % 4096));
  }
  Outputs run(const Kernel& kernel) const {
    Outputs out{q, k};
    Args a;
    a.num_tokens = kTokens;
    a.q = out.q.data();
    a.k = out.k.data();
    a.positions = positions.data();
    kernel.launch(a);
    return out;
  }
};

RuntimeOptions host_options(const std::string& cache_dir) {
  RuntimeOptions o;
  o.backend = BackendKind::host;
  o.cache_dir = cache_dir;
  return o;
}

/// The key the host backend files `spec`'s default-config kernel under, built from the parts
/// cache.h documents: a change to any part is a different file.
CacheKey host_key(const Spec& spec) {
  CacheKey key;
  key.source_hash_hex = generate_source(make_plan(spec, default_config(spec))).hash.hex();
  key.options = host_jit_flags();
  key.arch = host_jit_target();
  key.nvrtc_version = host_jit_compiler();
  key.ropejit_version = version();
  key.backend = "host";
  return key;
}

}  // namespace

TEST(HostDiskCache, ASecondRuntimeLinksTheStoredObjectAndComputesTheSameBytes) {
  if (!host_backend_available()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  TempDir tmp;
  const Spec spec = ropejit::test::make_spec({});
  const Inputs inputs(spec);
  Outputs compiled, loaded;
  {
    Runtime runtime(host_options(tmp.path()));
    const Kernel kernel = runtime.get(spec, default_config(spec));
    EXPECT_FALSE(kernel.from_cache()) << "an empty cache folder cannot hold the kernel";
    compiled = inputs.run(kernel);
  }
  DiskCache cache(DiskCacheOptions{tmp.path()});
  const auto entries = cache.list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_NE(entries[0].key_text.find("backend=host"), std::string::npos) << entries[0].key_text;
  {
    Runtime runtime(host_options(tmp.path()));
    const Kernel kernel = runtime.get(spec, default_config(spec));
    EXPECT_TRUE(kernel.from_cache()) << "the second runtime compiled again";
    loaded = inputs.run(kernel);
  }
  EXPECT_NE(compiled.q, inputs.q) << "the kernel wrote nothing";
  EXPECT_NE(compiled.k, inputs.k) << "the kernel wrote nothing";
  EXPECT_EQ(loaded.q, compiled.q);
  EXPECT_EQ(loaded.k, compiled.k);
}

TEST(HostDiskCache, TheKeyHoldsTheCpuItsFeaturesAndTheFlags) {
  if (!host_backend_available()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  TempDir tmp;
  const Spec spec = ropejit::test::make_spec({});
  { Runtime(host_options(tmp.path())).get(spec, default_config(spec)); }
  DiskCache cache(DiskCacheOptions{tmp.path()});
  const CacheKey key = host_key(spec);
  const auto payload = cache.load(key);
  ASSERT_TRUE(payload) << "no entry under the documented key:\n" << key.text();
  const auto binary = deserialize_binary(*payload);
  ASSERT_TRUE(binary);
  EXPECT_EQ(binary->image.substr(0, 4), std::string("\x7f" "ELF")) << "the image is not an object file";
  EXPECT_NE(key.arch.find(" cpu="), std::string::npos) << key.arch;
  EXPECT_NE(key.arch.find('+'), std::string::npos) << "no CPU features in " << key.arch;
  EXPECT_NE(key.options.find("-march=native"), std::string::npos) << key.options;
  // Another CPU or other flags: another file, so a copied cache folder never runs foreign code.
  CacheKey other_cpu = key;
  other_cpu.arch += ",-avx2";
  EXPECT_NE(cache.path_for(other_cpu), cache.path_for(key));
  EXPECT_FALSE(cache.load(other_cpu));
}

TEST(HostDiskCache, AnEntryTheLinkerRejectsIsCompiledAgainAndReplaced) {
  if (!host_backend_available()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  TempDir tmp;
  const Spec spec = ropejit::test::make_spec({});
  const Inputs inputs(spec);
  Outputs expected;
  {
    RuntimeOptions o = host_options("");
    o.disk_cache = false;
    expected = inputs.run(Runtime(o).get(spec, default_config(spec)));
  }
  // A well-formed entry (checksum, key, entry name and source hash all agree) whose image is
  // not an object file: what a different linker or a damaged writer could leave.
  DiskCache cache(DiskCacheOptions{tmp.path()});
  const CacheKey key = host_key(spec);
  Binary bad;
  bad.arch = "host";
  bad.entry = generate_source(make_plan(spec, default_config(spec))).entry;
  bad.source_hash = generate_source(make_plan(spec, default_config(spec))).hash;
  bad.image = "not an object file";
  ASSERT_TRUE(cache.store(key, serialize_binary(bad)));
  {
    Runtime runtime(host_options(tmp.path()));
    const Kernel kernel = runtime.get(spec, default_config(spec));
    EXPECT_FALSE(kernel.from_cache()) << "the rejected entry was reported as a cache hit";
    const Outputs got = inputs.run(kernel);
    EXPECT_EQ(got.q, expected.q);
    EXPECT_EQ(got.k, expected.k);
  }
  const auto replaced = deserialize_binary(cache.load(key).value_or(""));
  ASSERT_TRUE(replaced) << "the entry was not rewritten";
  EXPECT_EQ(replaced->image.substr(0, 4), std::string("\x7f" "ELF"));
}

TEST(HostDiskCache, DisabledMeansNoFiles) {
  if (!host_backend_available()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  TempDir tmp;
  RuntimeOptions o = host_options(tmp.path());
  o.disk_cache = false;
  const Spec spec = ropejit::test::make_spec({});
  { Runtime(o).get(spec, default_config(spec)); }
  EXPECT_EQ(DiskCache(DiskCacheOptions{tmp.path()}).entry_count(), 0u);
}
