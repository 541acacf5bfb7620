// Tuning database faults (issue 15): a truncated, zero-filled or bit-flipped file, a FIFO, a folder
// or a link at the path, and eight processes saving while another reads. Reading never throws or
// hangs; saving never loses an entry and never replaces what is not a regular file.
// ropejit-tier: unit
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ropejit/error.h"
#include "ropejit/tuning_db.h"
#include "support/cache_test_util.h"
#include "support/tuning_db_test_util.h"

namespace ropejit {
namespace {

namespace fs = std::filesystem;

/// A valid database of `n` entries for the H100 section, as text.
std::string valid_db(std::mt19937_64& rng, int n) {
  TuningDbFile file;
  file.devices.push_back(DeviceSection{h100(), {}});
  for (int i = 0; i < n; ++i) file.devices[0].entries.push_back(entry(random_hash(rng), i % kNumBuckets, 64 << (i % 3), 1.0 + i));
  return tuning_db_to_json(file);
}

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }

class TuningDbFaults : public TuningDbTest {};

TEST_F(TuningDbFaults, TruncatedAtAnyLengthIsIgnoredWithOneWarning) {
  const std::string full = valid_db(rng_, 4);
  const size_t whole = full.find_last_of('}') + 1;  // what follows is whitespace
  const size_t step = std::max<size_t>(1, whole / 400);
  for (size_t length = 0; length < whole; length += step) {
    write(path_, full.substr(0, length));
    warnings_.clear();
    std::optional<TuningDbFile> read;
    ASSERT_NO_THROW(read = read_tuning_db(path_, sink())) << "truncated to " << length;
    // The only complete JSON prefix of the file is the file: every shorter one is refused.
    EXPECT_FALSE(read) << "truncated to " << length << " bytes was accepted";
    EXPECT_EQ(warnings_.size(), 1u) << "truncated to " << length;
    ASSERT_NO_THROW(TuningDb(path_, h100(), sink()));
  }
}

TEST_F(TuningDbFaults, ZeroFilledFileIsIgnoredThenMovedAsideOnSave) {
  write(path_, std::string(4096, '\0'));
  EXPECT_FALSE(read_tuning_db(path_, sink()));
  ASSERT_EQ(warnings_.size(), 1u);
  const std::string hash = random_hash(rng_);
  save_tuning_entries(path_, h100(), {entry(hash, 3, 128, 2.0)}, sink());
  TuningDb db(path_, h100(), sink());
  ASSERT_TRUE(db.lookup(hash, 3));
  EXPECT_EQ(db.lookup(hash, 3)->block_threads, 128);
  int aside = 0;
  for (const auto& p : fs::directory_iterator(dir_))
    aside += p.path().filename().string().rfind("tuning.json.corrupt-", 0) == 0 &&
             slurp(p.path().string()) == std::string(4096, '\0');
  EXPECT_EQ(aside, 1) << "the zero-filled file was not kept aside as it was";
}

TEST_F(TuningDbFaults, BitFlipsAreReadOrRefusedNeverThrownAndSavesKeepEveryEntry) {
  const std::string full = valid_db(rng_, 6);
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string damaged = full;
    const int flips = 1 + int(rng_() % 4);
    for (int f = 0; f < flips; ++f) damaged[rng_() % damaged.size()] ^= char(1u << (rng_() % 8));
    write(path_, damaged);
    warnings_.clear();
    std::optional<TuningDbFile> read;
    ASSERT_NO_THROW(read = read_tuning_db(path_, sink())) << "trial " << trial;
    if (read) {
      ++accepted;  // a flip inside a name or a digit can leave valid JSON: then it must round-trip
      EXPECT_NO_THROW(tuning_db_from_json(tuning_db_to_json(*read))) << "trial " << trial;
    } else {
      ++refused;
      EXPECT_EQ(warnings_.size(), 1u) << "trial " << trial;
    }
    const std::string hash = random_hash(rng_);
    try {
      save_tuning_entries(path_, h100(), {entry(hash, 2, 256, 3.0)}, sink());
    } catch (const Error& e) {
      // Only a flip that turned the format number into another format stops a save.
      EXPECT_EQ(e.field(), "/format") << "trial " << trial << ": " << e.what();
      continue;
    }
    TuningDb db(path_, h100(), sink());
    ASSERT_TRUE(db.lookup(hash, 2)) << "trial " << trial << ": the saved entry is missing";
  }
  std::printf("[ bit flips: %d read, %d refused ]\n", accepted, refused);
  EXPECT_GT(refused, 0);
}

TEST_F(TuningDbFaults, FifoAtThePathIsIgnoredNotAHangAndNeverReplaced) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0644), 0);
  cache_test::within_seconds(20, [&] {
    EXPECT_FALSE(read_tuning_db(path_, sink()));
    TuningDb db(path_, h100(), sink());
    EXPECT_EQ(db.size(), 0u);
  }, "reading a FIFO");
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_[0].find("FIFO"), std::string::npos) << warnings_[0];
  cache_test::within_seconds(20, [&] {
    try {
      save_tuning_entries(path_, h100(), {entry(random_hash(rng_), 1, 64, 2.0)}, sink());
      ADD_FAILURE() << "saved over a FIFO";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::io_error);
      EXPECT_NE(std::string(e.what()).find("refusing to replace"), std::string::npos) << e.what();
    }
  }, "saving over a FIFO");
  struct stat st {};
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced or moved";
}

TEST_F(TuningDbFaults, FolderAtThePathIsNeverMovedAside) {
  fs::create_directories(path_ + "/inside");
  EXPECT_FALSE(read_tuning_db(path_, sink()));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("folder"), std::string::npos) << warnings_[0];
  EXPECT_THROW(save_tuning_entries(path_, h100(), {entry(random_hash(rng_), 1, 64, 2.0)}, sink()), Error);
  EXPECT_TRUE(fs::is_directory(path_ + "/inside")) << "the folder was moved or removed";
}

TEST_F(TuningDbFaults, SavingThroughALinkUpdatesItsTargetAndKeepsTheLink) {
  const std::string target = (dir_ / "real.json").string();
  write(target, valid_db(rng_, 2));
  ASSERT_EQ(::symlink(target.c_str(), path_.c_str()), 0);
  ASSERT_TRUE(read_tuning_db(path_, sink()));
  const std::string hash = random_hash(rng_);
  save_tuning_entries(path_, h100(), {entry(hash, 4, 512, 5.0)}, sink());
  EXPECT_TRUE(fs::is_symlink(path_)) << "the link was replaced by a file";
  const auto through_target = read_tuning_db(target, sink());
  ASSERT_TRUE(through_target);
  EXPECT_EQ(through_target->devices.at(0).entries.size(), 3u);
  EXPECT_TRUE(TuningDb(path_, h100(), sink()).lookup(hash, 4));
}

TEST_F(TuningDbFaults, EightWritersAndAReaderLoseNothingAndNeverSeeAPartialFile) {
  constexpr int kWriters = 8, kPerWriter = 12;
  const uint64_t seed = rng_();
  std::vector<pid_t> writers;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::mt19937_64 rng(seed + w);
      int status = 0;
      try {
        for (int i = 0; i < kPerWriter; ++i)
          save_tuning_entries(path_, h100(), {entry(random_hash(rng), i % kNumBuckets, 64, 1.0 + w)},
                              [](const std::string&) {});
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    writers.push_back(pid);
  }
  // The reader: every read sees a whole file (or none yet), never a half-written one.
  const pid_t reader = ::fork();
  ASSERT_GE(reader, 0);
  if (reader == 0) {
    int partial = 0;
    for (int i = 0; i < 400; ++i)
      read_tuning_db(path_, [&](const std::string&) { ++partial; });
    ::_exit(partial == 0 ? 0 : 2);
  }
  for (pid_t pid : writers) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  int status = 0;
  ASSERT_EQ(::waitpid(reader, &status, 0), reader);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the reader saw a partial file";
  const auto file = read_tuning_db(path_, sink());
  ASSERT_TRUE(file);
  EXPECT_EQ(file->devices.at(0).entries.size(), size_t(kWriters * kPerWriter));
}

}  // namespace
}  // namespace ropejit
