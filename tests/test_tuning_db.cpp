// The tuning database: round trip, merge, metadata mismatch, concurrent writers, corrupt
// files, other formats, nearest-bucket lookup.
// ropejit-tier: unit
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "support/build_paths.h"
#include "ropejit/internal/backend.h"
#include "ropejit/internal/device_info.h"
#include "ropejit/compile.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/tuning_db.h"
#include "support/backends.h"
#include "support/run_command.h"
#include "support/spec_builder.h"
#include "support/tuning_db_test_util.h"

namespace ropejit {
namespace {

namespace fs = std::filesystem;

TEST_F(TuningDbTest, RoundTripKeepsEveryField) {
  TuningDbFile file;
  TuningEntry e = entry(random_hash(rng_), 3, 512, 12.5);
  e.best.config.vec = 4;
  e.best.config.heads_per_thread = 2;
  e.best.config.sincos = SinCosMode::table;
  e.best.config.grid = GridMode::persistent;
  TuningEntry no_runner_up = entry(random_hash(rng_), 0, 64, 1.25);
  no_runner_up.runner_up.reset();
  file.devices.push_back({h100(), {e, no_runner_up}});
  save_tuning_entries(path_, h100(), file.devices[0].entries, sink());
  const auto back = read_tuning_db(path_, sink());
  ASSERT_TRUE(back);
  ASSERT_EQ(back->devices.size(), 1u);
  EXPECT_EQ(back->devices[0].metadata, h100());
  ASSERT_EQ(back->devices[0].entries.size(), 2u);
  for (const auto& got : back->devices[0].entries) {
    const TuningEntry& want = got.spec_hash == e.spec_hash ? e : no_runner_up;
    EXPECT_EQ(got.spec_name, want.spec_name);
    EXPECT_EQ(got.bucket, want.bucket);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.best.config, want.best.config);
    EXPECT_DOUBLE_EQ(got.best.time_us, want.best.time_us);
    EXPECT_EQ(got.runner_up.has_value(), want.runner_up.has_value());
    if (want.runner_up) EXPECT_EQ(got.runner_up->config, want.runner_up->config);
    EXPECT_DOUBLE_EQ(got.default_time_us, want.default_time_us);
    EXPECT_DOUBLE_EQ(got.gbps, want.gbps);
    EXPECT_EQ(got.date, want.date);
  }
  EXPECT_TRUE(warnings_.empty());
  // Same content, same text: serialization is deterministic.
  EXPECT_EQ(tuning_db_to_json(*back), slurp(path_));
  EXPECT_FALSE(fs::exists(path_ + ".tmp")) << "no temp file left behind";
}

TEST_F(TuningDbTest, BadFieldsAreNamedByJsonPointer) {
  auto text = tuning_db_to_json(TuningDbFile{{{h100(), {entry(random_hash(rng_), 2, 128, 3.0)}}}});
  const auto bad_bucket = std::string(text).replace(text.find("\"bucket\": 2"), 11, "\"bucket\": 9");
  try {
    tuning_db_from_json(bad_bucket);
    FAIL() << "bucket 9 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "/devices/0/entries/0/bucket");
    EXPECT_NE(std::string(e.what()).find("9 is not allowed"), std::string::npos) << e.what();
  }
  const auto bad_vec = std::string(text).replace(text.find("\"vec\": 8"), 8, "\"vec\": \"x\"");
  try {
    tuning_db_from_json(bad_vec);
    FAIL() << "vec \"x\" accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "/devices/0/entries/0/best/config");
  }
}

TEST_F(TuningDbTest, SavingMergesWithTheFileOnDisk) {
  const std::string a = random_hash(rng_), b = random_hash(rng_);
  save_tuning_entries(path_, h100(), {entry(a, 1, 64, 2.0), entry(a, 4, 256, 40.0)}, sink());
  save_tuning_entries(path_, h100(), {entry(b, 1, 128, 2.5)}, sink());
  // Same key again: the newer date wins even though it is slower.
  save_tuning_entries(path_, h100(), {entry(a, 4, 512, 45.0, "2025-06-01T00:00:00Z")}, sink());
  // Same key, older date: ignored.
  save_tuning_entries(path_, h100(), {entry(a, 1, 1024, 1.0, "2024-01-01T00:00:00Z")}, sink());
  TuningDb db(path_, h100(), sink());
  EXPECT_EQ(db.size(), 3u);
  EXPECT_EQ(db.lookup(a, 1)->block_threads, 64);
  EXPECT_EQ(db.lookup(a, 4)->block_threads, 512);
  EXPECT_EQ(db.lookup(b, 1)->block_threads, 128);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(TuningDbTest, MergeCombinesFilesFromSeveralGpus) {
  const std::string a = random_hash(rng_);
  TuningDbFile from_h100{{{h100(), {entry(a, 2, 64, 5.0)}}}};
  TuningDbFile from_h200{{{h200(), {entry(a, 2, 256, 4.0)}}}};
  merge_tuning_db_into(path_, from_h100, sink());
  merge_tuning_db_into(path_, from_h200, sink());
  const auto file = read_tuning_db(path_);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->devices.size(), 2u);
  // Each device sees its own result for the same spec and bucket.
  EXPECT_EQ(TuningDb(path_, h100(), sink()).lookup(a, 2)->block_threads, 64);
  EXPECT_EQ(TuningDb(path_, h200(), sink()).lookup(a, 2)->block_threads, 256);
  // In memory, merging is the same operation.
  TuningDbFile both = from_h100;
  merge_tuning_db(both, from_h200);
  merge_tuning_db(both, from_h200);  // idempotent
  EXPECT_EQ(tuning_db_to_json(both), tuning_db_to_json(*file));
}

TEST_F(TuningDbTest, MetadataMismatchIsIgnoredWithAWarningAndNeverOverwritten) {
  const std::string a = random_hash(rng_);
  save_tuning_entries(path_, h100(), {entry(a, 3, 64, 5.0)}, sink());
  const std::string h100_text = slurp(path_);
  std::vector<DeviceMetadata> others(4, h100());
  others[0] = h200();
  others[1].driver_version = 12080;
  others[2].nvrtc_version = "12.8";
  others[3].ropejit_version = "0.2.0";
  for (const DeviceMetadata& other : others) {
    warnings_.clear();
    TuningDb db(path_, other, sink());
    EXPECT_EQ(db.size(), 0u);
    EXPECT_FALSE(db.lookup(a, 3));
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("no results for this device"), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find("NVIDIA H100 80GB HBM3"), std::string::npos) << "names what the file holds";
  }
  // A tuner on another device adds its own section; the H100's is kept exactly.
  save_tuning_entries(path_, h200(), {entry(a, 3, 1024, 4.0)}, sink());
  const auto file = read_tuning_db(path_);
  ASSERT_TRUE(file);
  ASSERT_EQ(file->devices.size(), 2u);
  const auto h100_only = tuning_db_from_json(h100_text);
  EXPECT_EQ(tuning_db_to_json(TuningDbFile{{file->devices[0]}}), tuning_db_to_json(h100_only));
  EXPECT_EQ(TuningDb(path_, h100(), sink()).lookup(a, 3)->block_threads, 64);
}

TEST_F(TuningDbTest, ConcurrentWritersLoseNoEntries) {
  constexpr int kPerWriter = 40;
  const uint64_t seed = rng_();
  std::vector<pid_t> children;
  for (int writer = 0; writer < 2; ++writer) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::mt19937_64 rng(seed + writer);
      int status = 0;
      try {
        for (int i = 0; i < kPerWriter; ++i)
          save_tuning_entries(path_, h100(), {entry(random_hash(rng), i % kNumBuckets, 64 << (writer * 2), 1.0 + i)},
                              [](const std::string&) {});
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const auto file = read_tuning_db(path_, sink());
  ASSERT_TRUE(file);
  ASSERT_EQ(file->devices.size(), 1u);
  EXPECT_EQ(file->devices[0].entries.size(), size_t(2 * kPerWriter));
  int from_first = 0, from_second = 0;
  for (const auto& e : file->devices[0].entries) {
    from_first += e.best.config.block_threads == 64;
    from_second += e.best.config.block_threads == 256;
  }
  EXPECT_EQ(from_first, kPerWriter);
  EXPECT_EQ(from_second, kPerWriter);
  for (const auto& p : fs::directory_iterator(dir_))
    EXPECT_EQ(p.path().filename().string().find(".tmp."), std::string::npos) << "leftover " << p.path();
}

TEST_F(TuningDbTest, TruncatedFileIsIgnoredThenMovedAsideOnSave) {
  const std::string a = random_hash(rng_);
  save_tuning_entries(path_, h100(), {entry(a, 1, 64, 2.0), entry(a, 2, 128, 3.0)}, sink());
  const std::string full = slurp(path_);
  std::ofstream(path_, std::ios::trunc) << full.substr(0, full.size() / 2);

  EXPECT_FALSE(read_tuning_db(path_, sink()));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(path_), std::string::npos);
  warnings_.clear();
  TuningDb db(path_, h100(), sink());
  EXPECT_EQ(db.size(), 0u);
  EXPECT_FALSE(db.lookup(a, 1));
  EXPECT_FALSE(warnings_.empty());

  warnings_.clear();
  save_tuning_entries(path_, h100(), {entry(a, 5, 512, 9.0)}, sink());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(".corrupt-"), std::string::npos) << warnings_[0];
  int aside = 0;
  for (const auto& p : fs::directory_iterator(dir_))
    if (p.path().filename().string().rfind("tuning.json.corrupt-", 0) == 0) {
      ++aside;
      EXPECT_EQ(slurp(p.path().string()), full.substr(0, full.size() / 2)) << "kept as it was";
    }
  EXPECT_EQ(aside, 1);
  TuningDb fresh(path_, h100(), sink());
  EXPECT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh.lookup(a, 5)->block_threads, 512);
}

TEST_F(TuningDbTest, AnotherFormatIsNeverOverwritten) {
  const std::string future = R"({"format": 2, "devices": [], "something": "new"})";
  std::ofstream(path_) << future;
  EXPECT_FALSE(read_tuning_db(path_, sink()));
  EXPECT_EQ(warnings_.size(), 1u);
  try {
    save_tuning_entries(path_, h100(), {entry(random_hash(rng_), 1, 64, 2.0)}, sink());
    FAIL() << "overwrote a format 2 file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::io_error);
    EXPECT_EQ(e.field(), "/format");
  }
  EXPECT_EQ(slurp(path_), future);
}

TEST_F(TuningDbTest, MissingFileIsEmptyWithAWarning) {
  TuningDb db(path_, h100(), sink());
  EXPECT_EQ(db.size(), 0u);
  EXPECT_EQ(warnings_.size(), 1u);
  EXPECT_FALSE(read_tuning_db(path_, sink()));
}

TEST_F(TuningDbTest, LookupTakesTheNearestTunedBucket) {
  const std::string a = random_hash(rng_);
  TuningDbFile file{{{h100(), {entry(a, 1, 64, 1.0), entry(a, 5, 512, 10.0)}}}};
  TuningDb db(file, h100());
  EXPECT_EQ(db.lookup(a, 0)->block_threads, 64);
  EXPECT_EQ(db.lookup(a, 1)->block_threads, 64);
  EXPECT_EQ(db.lookup(a, 2)->block_threads, 64);
  EXPECT_EQ(db.lookup(a, 3)->block_threads, 64) << "a tie goes to the smaller bucket";
  EXPECT_EQ(db.lookup(a, 4)->block_threads, 512);
  EXPECT_EQ(db.lookup(a, 5)->block_threads, 512);
  EXPECT_EQ(db.lookup(a, 6)->block_threads, 512);
  EXPECT_FALSE(db.lookup(random_hash(rng_), 3)) << "an untuned spec has no entry";
  EXPECT_FALSE(TuningDb(file, h200()).lookup(a, 1)) << "another device's section never applies";
}

TEST_F(TuningDbTest, SpecLookupSkipsConfigsInvalidForTheSpec) {
  test::SpecFields f;
  f.dtype = "fp32";  // vec 8 is 32 bytes: invalid
  const Spec spec = test::make_spec(f);
  const std::string hash = spec_hash(spec).hex();
  TuningEntry bad = entry(hash, 2, 64, 1.0);
  bad.best.config.vec = 8;
  TuningEntry good = entry(hash, 4, 256, 5.0);
  good.best.config.vec = 4;
  TuningDb db(TuningDbFile{{{h100(), {bad, good}}}}, h100());
  ASSERT_TRUE(db.lookup(spec, 2));
  EXPECT_EQ(db.lookup(spec, 2)->block_threads, 256) << "the invalid nearer entry is skipped";
  EXPECT_FALSE(config_problem(spec, *db.lookup(spec, 2)));
}

// ---------------------------------------------------------------- what a file may hold (issue 15)

// Each value is refused naming its field, never wrapped or read as a winner; read_tuning_db
// warns and ignores the file instead of throwing.
TEST_F(TuningDbTest, OutOfRangeValuesAreRefusedNamingTheField) {
  const std::string text = tuning_db_to_json(TuningDbFile{{{h100(), {entry(random_hash(rng_), 2, 128, 3.0)}}}});
  struct Case {
    std::string from, to, field;
  };
  const std::string meta = "/devices/0/metadata/", at = "/devices/0/entries/0/";
  const std::vector<Case> cases{
      {"\"sm_count\": 132", "\"sm_count\": 4294967428", meta + "sm_count"},  // 2^32 + 132 wrapped to 132
      {"\"sm_count\": 132", "\"sm_count\": 0", meta + "sm_count"},
      {"\"driver_version\": 13000", "\"driver_version\": 4294980296", meta + "driver_version"},
      {"\"driver_version\": 13000", "\"driver_version\": -1", meta + "driver_version"},
      {"\"l2_bytes\": 52428800", "\"l2_bytes\": 18446744073709551615", meta + "l2_bytes"},
      {"\"time_us\": 3.0", "\"time_us\": -3.0", at + "best/time_us"},
      {"\"time_us\": 3.0", "\"time_us\": 0", at + "best/time_us"},
      {"\"tokens\": 64", "\"tokens\": -64", at + "tokens"},
      {"\"tokens\": 64", "\"tokens\": 65", at + "tokens"},  // bucket 2 is 9-64
      {"\"default_time_us\": 4.5", "\"default_time_us\": -4.5", at + "default_time_us"},
      {"\"date\": \"2025-01-01T00:00:00Z\"", "\"date\": \"zzzz\"", at + "date"},
      {"\"date\": \"2025-01-01T00:00:00Z\"", "\"date\": \"2025-02-30T00:00:00Z\"", at + "date"},
      {"\"date\": \"2025-01-01T00:00:00Z\"", "\"date\": \"2025-01-01 00:00:00\"", at + "date"},
      {"\"sm_count\": 132", "\"sm_count\": \"" + std::string(100000, 'x') + "\"", meta + "sm_count"},  // quoted clipped
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.to);
    ASSERT_NE(text.find(c.from), std::string::npos) << text;
    const std::string bad = std::string(text).replace(text.find(c.from), c.from.size(), c.to);
    try {
      tuning_db_from_json(bad);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::io_error);
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_NE(std::string(e.what()).find("is not allowed"), std::string::npos) << e.what();
      EXPECT_LT(std::string(e.what()).size(), 400u) << "a value quoted whole";
    }
    std::ofstream(path_, std::ios::trunc) << bad;
    warnings_.clear();
    EXPECT_FALSE(read_tuning_db(path_, sink()));
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find(c.field), std::string::npos) << warnings_[0];
  }
}

TEST_F(TuningDbTest, MergeComparesDatesAsTimesAndABadDateNeverWins) {
  const std::string a = random_hash(rng_);
  const TuningEntry dated = entry(a, 1, 64, 5.0, "2025-01-01T00:00:00Z");
  const TuningEntry undated = entry(a, 1, 1024, 0.5, "zzzz");  // "zzzz" > any date as text
  for (const auto& order : {std::vector<TuningEntry>{dated, undated}, std::vector<TuningEntry>{undated, dated}}) {
    TuningDbFile file{{{h100(), {order[0]}}}};
    merge_tuning_db(file, TuningDbFile{{{h100(), {order[1]}}}});
    ASSERT_EQ(file.devices[0].entries.size(), 1u);
    EXPECT_EQ(file.devices[0].entries[0].date, dated.date);
  }
  TuningDbFile file{{{h100(), {entry(a, 1, 64, 5.0, "2025-01-01T23:59:59Z")}}}};
  merge_tuning_db(file, TuningDbFile{{{h100(), {entry(a, 1, 128, 9.0, "2025-01-02T00:00:00Z")}}}});
  EXPECT_EQ(file.devices[0].entries[0].best.config.block_threads, 128) << "a second later wins, though slower";
}

TEST_F(TuningDbTest, DeepNestingOrANulByteIsIgnoredWithAWarningThenMovedAsideOnSave) {
  const std::string deep(100000, '[');
  const std::string valid = tuning_db_to_json(TuningDbFile{{{h100(), {entry(random_hash(rng_), 1, 64, 2.0)}}}});
  const std::vector<std::pair<std::string, std::string>> texts{
      {deep, "nesting deeper than 64"},
      {"{\"format\": " + deep + std::string(100000, ']') + "}", "nesting deeper than 64"},  // dumped in messages
      {valid + std::string(1, '\0') + "garbage", "NUL byte"},
  };
  for (const auto& [text, why] : texts) {
    SCOPED_TRACE(why);
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << text;
    warnings_.clear();
    EXPECT_FALSE(read_tuning_db(path_, sink()));
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find(why), std::string::npos) << warnings_[0];
    EXPECT_EQ(TuningDb(path_, h100(), sink()).size(), 0u);
    warnings_.clear();
    save_tuning_entries(path_, h100(), {entry(random_hash(rng_), 5, 512, 9.0)}, sink());
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find(".corrupt-"), std::string::npos) << warnings_[0];
    EXPECT_EQ(TuningDb(path_, h100(), sink()).size(), 1u);
    for (const auto& p : fs::directory_iterator(dir_))
      if (p.path().filename().string().rfind("tuning.json.corrupt-", 0) == 0) fs::remove(p.path());
  }
}

TEST_F(TuningDbTest, TheCommandsSurviveADeeplyNestedDatabase) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: the ropejit CLI is not part of this build";
  std::ofstream(path_) << std::string(100000, '[') << std::string(100000, ']');
  auto [show_status, show_output] = test::run_command(cli + " db show '" + path_ + "' 2>&1");
  EXPECT_EQ(show_status, 1) << show_output;  // -1 when killed by SIGSEGV
  EXPECT_NE(show_output.find("nesting deeper than 64"), std::string::npos) << show_output;
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: ropejit run needs the host backend here";
  const std::string spec = test::source_dir() + "/specs/llama-3.1-8b.json";
  auto [run_status, run_output] = test::run_command("ROPEJIT_TUNING_DB='" + path_ + "' " + cli + " run '" + spec +
                                                    "' --backend host --tokens 4 2>&1");
  EXPECT_EQ(run_status, 0) << run_output;  // the database is ignored with a warning
  EXPECT_NE(run_output.find("nesting deeper than 64"), std::string::npos) << run_output;
}

// ---------------------------------------------------------------- device metadata

TEST(DeviceMetadata, HostMetadataComesFromTheBackendsProperties) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "built without the host backend";
  const std::unique_ptr<Backend> host = make_host_backend();
  const DeviceProperties p = host->properties();
  EXPECT_EQ(p.name, "host");
  EXPECT_EQ(p.sm_count, int(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(p.sm_count, host->sm_count());
  EXPECT_EQ(p.compute_capability_major, 0);
  EXPECT_EQ(p.compute_capability_minor, 0);
  EXPECT_EQ(p.ordinal, 0);
  const DeviceMetadata m = device_metadata(*host);
  EXPECT_EQ(m.gpu_name, "host");
  EXPECT_EQ(m.compute_capability, host->arch()) << "the host's section is keyed by its arch, never a GPU's cc";
  EXPECT_EQ(m.sm_count, p.sm_count);
  EXPECT_EQ(m.l2_bytes, 0);
  EXPECT_EQ(m.driver_version, 0);
  EXPECT_EQ(m.ropejit_version, version());
  EXPECT_EQ(m.nvrtc_version, nvrtc_version());
  EXPECT_NE(m, h100());
}

// ---------------------------------------------------------------- Runtime::get reads it

TEST_F(TuningDbTest, RuntimeGetUsesTheRunningDevicesSectionPerBucket) {
  std::unique_ptr<Backend> host;
  try {
    host = make_host_backend();
  } catch (const Error& e) {
    GTEST_SKIP() << "no host backend in this build: " << e.what();
  }
  test::SpecFields f;
  f.num_q_heads = 4;
  f.num_kv_heads = 2;
  const Spec spec = test::make_spec(f);
  Config small = default_config(spec), large = default_config(spec);
  small.block_threads = 64;
  small.heads_per_thread = 1;
  large.block_threads = 512;
  large.grid = GridMode::persistent;
  const std::string hash = spec_hash(spec).hex();
  TuningEntry e1 = entry(hash, 0, 64, 1.0), e5 = entry(hash, 5, 512, 10.0);
  e1.best.config = small;
  e5.best.config = large;
  save_tuning_entries(path_, device_metadata(*host), {e1, e5}, sink());
  // Another device's section with a different answer must not leak in.
  TuningEntry other = entry(hash, 0, 1024, 1.0);
  save_tuning_entries(path_, h100(), {other}, sink());

  RuntimeOptions options;
  options.backend = BackendKind::host;
  options.tuning_db = path_;
  Runtime runtime(options);
  const Kernel kernel = runtime.get(spec);
  EXPECT_EQ(kernel.config_for(1), small);
  EXPECT_EQ(kernel.config_for(8), small);         // bucket 1: nearest is 0
  EXPECT_EQ(kernel.config_for(64), small);        // bucket 2: 2 from bucket 0, 3 from bucket 5
  EXPECT_EQ(kernel.config_for(300), large);       // bucket 3: 3 from bucket 0, 2 from bucket 5
  EXPECT_EQ(kernel.config_for(100000), large);    // bucket 6
  EXPECT_EQ(kernel.config_for(5000), large);      // bucket 5 itself
  // An untuned spec gets the heuristic default everywhere.
  f.num_kv_heads = 4;
  const Spec untuned = test::make_spec(f);
  EXPECT_EQ(runtime.get(untuned).config_for(300), default_config(untuned));
}

}  // namespace
}  // namespace ropejit
