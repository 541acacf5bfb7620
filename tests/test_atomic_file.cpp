// The shared file helpers (ropejit/atomic_file.h): an atomic write leaves the old file or the
// new one and no temp file, a failed one names the file, and a lock file excludes a second taker.
// ropejit-tier: unit
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "ropejit/atomic_file.h"

namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct TempFolder {
  std::string path = fs::temp_directory_path() / ("ropejit-atomic-" + std::to_string(::getpid()));
  TempFolder() { fs::create_directories(path); }
  ~TempFolder() { fs::remove_all(path); }
};

}  // namespace

TEST(AtomicFile, WriteReplacesWholeAndLeavesNoTemp) {
  TempFolder folder;
  const std::string path = folder.path + "/db.json";
  for (const bool durable : {false, true}) {
    ASSERT_EQ(ropejit::write_file_atomically(path, "first", durable), "");
    ASSERT_EQ(ropejit::write_file_atomically(path, std::string(100000, 'x'), durable), "");
    EXPECT_EQ(read_text(path), std::string(100000, 'x'));
  }
  int files = 0;
  for (const auto& entry : fs::directory_iterator(folder.path)) {
    ++files;
    EXPECT_FALSE(ropejit::is_atomic_temp_name(entry.path().filename().string())) << entry.path();
  }
  EXPECT_EQ(files, 1);
  // A folder that cannot hold the file: the error names it, nothing is left behind.
  const std::string why = ropejit::write_file_atomically(folder.path + "/no/such/dir/f", "x", false);
  EXPECT_NE(why.find("no/such/dir"), std::string::npos) << why;
}

TEST(AtomicFile, LockExcludesASecondTakerUntilReleased) {
  TempFolder folder;
  const std::string path = folder.path + "/x.lock";
  {
    ropejit::FileLock first(path, /*wait=*/true);
    ASSERT_TRUE(first.locked());
    std::string why;
    ropejit::FileLock second(path, /*wait=*/false, &why);  // flock: another open file description
    EXPECT_FALSE(second.locked());
    EXPECT_NE(why.find("cannot lock"), std::string::npos) << why;
  }
  ropejit::FileLock again(path, /*wait=*/false);
  EXPECT_TRUE(again.locked());
  std::string why;
  ropejit::FileLock missing(folder.path + "/none/x.lock", /*wait=*/false, &why);
  EXPECT_FALSE(missing.locked());
  EXPECT_NE(why.find("cannot open lock file"), std::string::npos) << why;
}
