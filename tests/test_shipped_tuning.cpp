// Shipped tuning files (docs/tuning.md, "Shipped tuning files"): the file name of a GPU, the
// folder, the matching rule (driver free, ropejit and CUDA major.minor fixed), the lookup order
// user database > shipped file > heuristic, and the one-line messages of an ignored file. Every
// case runs on the host backend with a synthetic file for the running "device" (gpu name "host").
// ropejit-tier: unit
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "support/build_paths.h"
#include "ropejit/internal/backend.h"
#include "ropejit/internal/device_info.h"
#include "caches/tuned_configs.h"  // private: TunedConfigs, the lookup order get() uses, without compiling
#include "ropejit/runtime.h"
#include "ropejit/shipped_tuning.h"
#include "ropejit/source.h"
#include "ropejit/tuning_db.h"
#include "support/run_command.h"
#include "support/scoped_env.h"
#include "support/spec_builder.h"
#include "support/tuning_db_test_util.h"

namespace ropejit {
namespace {

namespace fs = std::filesystem;
using test::ScopedEnv;

TEST(ShippedTuning, FileNameComesFromTheGpuName) {
  EXPECT_EQ(shipped_tuning_file_name("NVIDIA H200"), "nvidia-h200.json");
  EXPECT_EQ(shipped_tuning_file_name("NVIDIA H100 80GB HBM3"), "nvidia-h100-80gb-hbm3.json");
  EXPECT_EQ(shipped_tuning_file_name("  NVIDIA GeForce RTX 4090 (rev. A)  "), "nvidia-geforce-rtx-4090-rev-a.json");
  EXPECT_EQ(shipped_tuning_file_name("../../etc/passwd"), "etc-passwd.json") << "no path separators survive";
  EXPECT_EQ(shipped_tuning_file_name("host"), "host.json");
  EXPECT_EQ(shipped_tuning_file_name(" -- "), "unnamed.json");
}

TEST(ShippedTuning, ASectionAppliesUnderAnotherDriverButNotAnotherVersionOrDevice) {
  const DeviceMetadata running = h200();
  DeviceMetadata s = running;
  EXPECT_TRUE(shipped_section_applies(s, running));
  s.driver_version = 12040;
  EXPECT_TRUE(shipped_section_applies(s, running)) << "users have other drivers";
  s.nvrtc_version = running.nvrtc_version + ".88";
  EXPECT_TRUE(shipped_section_applies(s, running)) << "the CUDA patch level does not matter";
  std::vector<DeviceMetadata> others(6, running);
  others[0].ropejit_version = "0.0.9";
  others[1].nvrtc_version = "12.8";
  others[2].gpu_name = "NVIDIA H100 80GB HBM3";
  others[3].compute_capability = "9.1";
  others[4].sm_count = 66;
  others[5].l2_bytes += 1;
  for (const auto& other : others) EXPECT_FALSE(shipped_section_applies(other, running)) << other.describe();
  EXPECT_NE(s, running) << "user databases keep the exact rule";
}

TEST(ShippedTuning, FolderComesFromTheOptionThenTheEnvironmentAndNoneTurnsItOff) {
  ScopedEnv env(kShippedTuningDirEnv, "/tmp/from-env");
  EXPECT_EQ(shipped_tuning_dir("/tmp/given").dir, "/tmp/given");
  EXPECT_EQ(shipped_tuning_dir().dir, "/tmp/from-env");
  EXPECT_EQ(shipped_tuning_dir("none").dir, "") << "the option wins over the environment";
  for (const char* off : {"none", ""}) {
    ScopedEnv inner(kShippedTuningDirEnv, off);
    const ShippedTuningDir d = shipped_tuning_dir();
    EXPECT_EQ(d.dir, "") << off;
    EXPECT_NE(d.origin.find("off"), std::string::npos) << d.origin;
  }
}

// In the build folder the library reads the source tree's tunedb/shipped; an installed one
// (tests/install/check_install.sh) reads DATADIR/ropejit/tuning.
TEST(ShippedTuning, TheLibraryInItsBuildFolderReadsTheSourceTree) {
  ScopedEnv env(kShippedTuningDirEnv, nullptr);
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&shipped_tuning_file_name), &info), 0);
  std::error_code ec;
  if (!fs::equivalent(fs::path(info.dli_fname).parent_path(), ropejit::test::library_dir(), ec))
    GTEST_SKIP() << "libropejit runs from " << info.dli_fname << ", not its build folder";
  const ShippedTuningDir d = shipped_tuning_dir();
  ASSERT_FALSE(d.dir.empty()) << d.origin;
  EXPECT_TRUE(fs::equivalent(d.dir, fs::path(ropejit::test::configured_source_dir()) / "tunedb" / "shipped", ec)) << d.dir;
  EXPECT_NE(d.origin.find("source tree"), std::string::npos) << d.origin;
  ASSERT_EQ(d.searched.size(), 3u);
  EXPECT_EQ(fs::path(d.searched[1]).filename(), "tuning") << "the Python package's folder beside the library";
  EXPECT_NE(d.searched[2].find("ropejit/tuning"), std::string::npos) << "the install prefix's";
}

/// A host backend, its metadata, a spec, and a folder for the shipped file of the host.
class ShippedTuningTest : public TuningDbTest {
 protected:
  void SetUp() override {
    TuningDbTest::SetUp();
    try {
      host_ = make_host_backend();
    } catch (const Error& e) {
      GTEST_SKIP() << "no host backend in this build: " << e.what();
    }
    device_ = device_metadata(*host_);
    shipped_ = (dir_ / "shipped").string();
    fs::create_directories(shipped_);
    test::SpecFields f;
    f.num_q_heads = 4;
    f.num_kv_heads = 2;
    spec_ = test::make_spec(f);
    small_ = large_ = default_config(spec_);
    small_.block_threads = 64;
    small_.heads_per_thread = 1;
    large_.block_threads = 512;
    large_.grid = GridMode::persistent;
  }
  std::string host_file() const { return shipped_ + "/" + shipped_tuning_file_name(device_.gpu_name); }
  /// Entries for buckets 0 (`first`) and 5 (`last`) of spec_.
  std::vector<TuningEntry> entries(const Config& first, const Config& last) const {
    TuningEntry e0 = entry(spec_hash(spec_).hex(), 0, 64, 1.0), e5 = entry(spec_hash(spec_).hex(), 5, 512, 10.0);
    e0.best.config = first;
    e5.best.config = last;
    return {e0, e5};
  }
  void ship(const DeviceMetadata& m, const std::vector<TuningEntry>& e) const {
    std::ofstream(host_file(), std::ios::trunc) << tuning_db_to_json(TuningDbFile{{{m, e}}});
  }
  /// Shipped metadata for this host under another driver and CUDA patch level: still applies.
  DeviceMetadata shipped_for_host() const {
    DeviceMetadata m = device_;
    m.driver_version = device_.driver_version + 1000;
    m.nvrtc_version = device_.nvrtc_version + ".99";
    return m;
  }
  std::optional<Config> tuned(const std::string& db, const std::string& shipped_dir, int bucket = 0) {
    return TunedConfigs(db, shipped_dir, *host_, sink()).lookup(spec_, bucket);
  }
  std::unique_ptr<Backend> host_;
  DeviceMetadata device_;
  std::string shipped_;
  Spec spec_;
  Config small_, large_;
};

TEST_F(ShippedTuningTest, RuntimeGetUsesTheShippedFileOfTheRunningDevice) {
  ScopedEnv no_db("ROPEJIT_TUNING_DB", nullptr);
  ship(shipped_for_host(), entries(small_, large_));
  RuntimeOptions options;
  options.backend = BackendKind::host;
  options.disk_cache = false;
  options.shipped_tuning_dir = shipped_;
  options.on_warning = [this](std::string_view w) { warnings_.emplace_back(w); };
  Runtime runtime(options);
  const Kernel kernel = runtime.get(spec_);
  EXPECT_EQ(kernel.config_for(1), small_);       // bucket 0 itself
  EXPECT_EQ(kernel.config_for(64), small_);      // bucket 2: nearest is 0
  EXPECT_EQ(kernel.config_for(5000), large_);    // bucket 5 itself
  EXPECT_EQ(kernel.config_for(100000), large_);  // bucket 6: nearest is 5
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ShippedTuningTest, AUserDatabaseSectionForTheDeviceWinsOverTheShippedFile) {
  ship(shipped_for_host(), entries(small_, large_));
  save_tuning_entries(path_, device_, entries(large_, large_), sink());
  EXPECT_EQ(tuned(path_, shipped_), large_) << "the user's section, not the shipped one";
  EXPECT_TRUE(warnings_.empty());
  // A user database without this device's section leaves the shipped file in charge.
  fs::remove(path_);
  save_tuning_entries(path_, h100(), entries(large_, large_), sink());
  EXPECT_EQ(tuned(path_, shipped_), small_);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("no results for this device"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("using shipped or heuristic configs"), std::string::npos) << warnings_[0];
}

TEST_F(ShippedTuningTest, AFileForAnotherRopejitOrCudaVersionIsIgnoredWithOneLine) {
  DeviceMetadata other_ropejit = shipped_for_host(), other_cuda = shipped_for_host();
  other_ropejit.ropejit_version = "0.0.1-other";
  other_cuda.nvrtc_version = "9.9";
  const std::string running = "ropejit " + device_.ropejit_version + " with CUDA (NVRTC) " + device_.nvrtc_version;
  for (const auto& [made_for, what] :
       {std::pair{other_ropejit, "ropejit 0.0.1-other with CUDA (NVRTC) " + device_.nvrtc_version + ".99"},
        std::pair{other_cuda, "ropejit " + device_.ropejit_version + " with CUDA (NVRTC) 9.9"}}) {
    SCOPED_TRACE(what);
    ship(made_for, entries(small_, large_));
    warnings_.clear();
    EXPECT_FALSE(tuned("", shipped_));
    ASSERT_EQ(warnings_.size(), 1u);
    const std::string& w = warnings_[0];
    EXPECT_EQ(w.find('\n'), std::string::npos) << "one line: " << w;
    EXPECT_NE(w.find("ignoring shipped tuning file " + host_file()), std::string::npos) << w;
    EXPECT_NE(w.find("made for " + what), std::string::npos) << w;
    EXPECT_NE(w.find("running " + running), std::string::npos) << w;
  }
  // Another device of the same name (an SM count cut down): named by its hardware instead.
  DeviceMetadata other_device = shipped_for_host();
  other_device.sm_count += 1;
  ship(other_device, entries(small_, large_));
  warnings_.clear();
  EXPECT_FALSE(tuned("", shipped_));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(warnings_[0].find('\n'), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find(std::to_string(other_device.sm_count) + " SMs, L2"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("running on host"), std::string::npos) << warnings_[0];
}

TEST_F(ShippedTuningTest, ADamagedFileIsIgnoredWithAWarningAndNeverThrows) {
  const std::string valid = tuning_db_to_json(TuningDbFile{{{shipped_for_host(), entries(small_, large_)}}});
  const std::vector<std::pair<std::string, std::string>> damaged{
      {valid.substr(0, valid.size() / 2), "truncated"},
      {"", "empty"},
      {std::string(100000, '['), "nested"},
      {valid + std::string(1, '\0'), "NUL byte"},
      {R"({"format": 2, "devices": []})", "another format"},
      {std::string(valid).replace(valid.find("\"sm_count\""), 10, "\"sm_count\": -1, \"x\""), "bad field"},
  };
  for (const auto& [text, why] : damaged) {
    SCOPED_TRACE(why);
    std::ofstream(host_file(), std::ios::binary | std::ios::trunc) << text;
    warnings_.clear();
    std::optional<Config> got;
    ASSERT_NO_THROW(got = tuned("", shipped_));
    EXPECT_FALSE(got);
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("ignoring shipped tuning file " + host_file()), std::string::npos) << warnings_[0];
  }
  fs::remove(host_file());
  fs::create_directory(host_file());  // a folder where the file should be
  warnings_.clear();
  EXPECT_FALSE(tuned("", shipped_));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("is a folder"), std::string::npos) << warnings_[0];
}

TEST_F(ShippedTuningTest, NoneTurnsShippedFilesOffAndAnAbsentFileIsSilent) {
  ship(shipped_for_host(), entries(small_, large_));
  EXPECT_EQ(tuned("", shipped_), small_) << "the file is read when shipped files are on";
  EXPECT_FALSE(tuned("", "none"));
  {
    ScopedEnv off(kShippedTuningDirEnv, "none");
    EXPECT_FALSE(tuned("", ""));
  }
  {
    ScopedEnv on(kShippedTuningDirEnv, shipped_.c_str());
    EXPECT_EQ(tuned("", ""), small_) << "the environment names the folder";
  }
  EXPECT_TRUE(warnings_.empty());
  fs::remove(host_file());
  EXPECT_FALSE(tuned("", shipped_));
  EXPECT_TRUE(warnings_.empty()) << "most devices have no shipped file: " << warnings_[0];
  EXPECT_FALSE(tuned("", (dir_ / "no-such-folder").string()));
  ASSERT_EQ(warnings_.size(), 1u) << "a folder named by the user that is missing";
  EXPECT_NE(warnings_[0].find("no-such-folder"), std::string::npos) << warnings_[0];
}

TEST_F(ShippedTuningTest, SectionsThatDifferOnlyInTheDriverCombine) {
  DeviceMetadata driver_a = shipped_for_host(), driver_b = shipped_for_host();
  driver_b.driver_version += 10;
  std::vector<TuningEntry> a = entries(small_, large_), b = entries(small_, large_);
  a.pop_back();  // bucket 0 from one machine
  b.erase(b.begin());  // bucket 5 from another
  std::ofstream(host_file()) << tuning_db_to_json(TuningDbFile{{{driver_a, a}, {h100(), a}, {driver_b, b}}});
  const auto section = read_shipped_tuning(host_file(), device_, sink());
  ASSERT_TRUE(section);
  EXPECT_EQ(section->entries.size(), 2u);
  TuningDb db(*section);
  EXPECT_EQ(db.lookup(spec_, 0), small_);
  EXPECT_EQ(db.lookup(spec_, 5), large_);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(ShippedTuningTest, DbShippedListsTheFolderAndEveryFile) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: the ropejit CLI is not part of this build";
  ship(shipped_for_host(), entries(small_, large_));
  std::ofstream(shipped_ + "/broken.json") << "{";
  const auto [status, out] = test::run_command(std::string(kShippedTuningDirEnv) + "='" + shipped_ + "' " + cli +
                                               " db shipped --gpu 'NVIDIA H200' 2>&1");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("shipped tuning folder: " + shipped_ + " ($ROPEJIT_SHIPPED_TUNING_DIR)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("  host.json\n    " + shipped_for_host().describe() + ": 2 entries"), std::string::npos) << out;
  EXPECT_NE(out.find("  broken.json\n    unreadable: ignoring tuning database"), std::string::npos) << out;
  EXPECT_NE(out.find("\"NVIDIA H200\" looks for nvidia-h200.json"), std::string::npos) << out;
}

}  // namespace
}  // namespace ropejit
