// Every file the `ropejit` command writes is checked: a failed write names the path and the
// OS's reason, exits 1, and leaves no partial file. Runs the binary (ropejit::test::cli_path()); needs
// no backend: emit, the --out-dir check, db and the tune --db check all fail before compiling.
// ropejit-tier: unit
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/build_paths.h"
#include "support/run_command.h"
#include "support/repo_paths.h"

namespace fs = std::filesystem;

namespace {

using ropejit::test::run_command;
std::pair<int, std::string> shell(const std::string& command) { return run_command(command); }

/// Exit status and stdout + stderr of `ropejit ARGS`.
std::pair<int, std::string> cli(const std::string& args) {
  return shell(std::string(ropejit::test::cli_path()) + " " + args + " 2>&1");
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh folder, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ropejit-cli-errors.XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  /// Every name in the folder: a failed write must not leave temp files behind.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

#define SKIP_WITHOUT_CLI() \
  if (std::string(ropejit::test::cli_path()).empty()) GTEST_SKIP() << "SKIPPED: built without the ropejit command"

std::string spec_path() { return ropejit::test::spec_path("llama-3.1-8b"); }

}  // namespace

TEST(CliErrors, EmitToAMissingFolderFailsNamingPathAndReason) {
  SKIP_WITHOUT_CLI();
  auto [rc, out] = cli("emit '" + spec_path() + "' -o /nonexistent-ropejit-dir/x.cu");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot write /nonexistent-ropejit-dir/x.cu: No such file or directory"), std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists("/nonexistent-ropejit-dir"));
}

TEST(CliErrors, EmitWritesTheFileStdoutGets) {
  SKIP_WITHOUT_CLI();
  TempDir tmp;
  const std::string file = tmp.path() + "/kernel.cu";
  auto [rc, out] = cli("emit '" + spec_path() + "' -o '" + file + "'");
  ASSERT_EQ(rc, 0) << out;
  auto [rc2, source] = shell(std::string(ropejit::test::cli_path()) + " emit '" + spec_path() + "'");
  ASSERT_EQ(rc2, 0);
  EXPECT_EQ(slurp(file), source);
  EXPECT_EQ(tmp.names(), std::vector<std::string>{"kernel.cu"});  // no temp file left
  // Replacing an existing file keeps its permission bits.
  ASSERT_EQ(::chmod(file.c_str(), 0640), 0);
  auto [rc3, out3] = cli("emit '" + spec_path() + "' -o '" + file + "'");
  ASSERT_EQ(rc3, 0) << out3;
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

TEST(CliErrors, EmitOntoAFolderFails) {
  SKIP_WITHOUT_CLI();
  TempDir tmp;
  auto [rc, out] = cli("emit '" + spec_path() + "' -o '" + tmp.path() + "'");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot write " + tmp.path() + ": Is a directory"), std::string::npos) << out;
}

// A write that fails part way (the file size limit: EFBIG) leaves the old file as it was and
// no temp file. SIGXFSZ is ignored so the write returns the error instead of killing.
TEST(CliErrors, FailedWriteLeavesTheOldFileAndNoPartialOne) {
  SKIP_WITHOUT_CLI();
  auto [rc0, source] = shell(std::string(ropejit::test::cli_path()) + " emit '" + spec_path() + "'");
  ASSERT_EQ(rc0, 0);
  if (source.size() <= 1024) GTEST_SKIP() << "the emitted source fits under a 1-block size limit";
  TempDir tmp;
  const std::string file = tmp.path() + "/kernel.cu";
  { std::ofstream(file) << "old contents"; }
  auto [rc, out] = shell("trap '' XFSZ; ulimit -f 1 && exec " + std::string(ropejit::test::cli_path()) + " emit '" +
                         spec_path() + "' -o '" + file + "' 2>&1");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot write " + file + ": File too large"), std::string::npos) << out;
  EXPECT_EQ(slurp(file), "old contents");
  EXPECT_EQ(tmp.names(), std::vector<std::string>{"kernel.cu"});
}

TEST(CliErrors, StandardOutputThatCannotBeWrittenFails) {
  SKIP_WITHOUT_CLI();
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  // stderr to the pipe, stdout to a device where every write fails with ENOSPC.
  auto [rc, out] = shell(std::string(ropejit::test::cli_path()) + " emit '" + spec_path() + "' 2>&1 >/dev/full");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot write standard output: No space left on device"), std::string::npos) << out;
  // -o naming a device writes through it (no temp file beside /dev/full), checked the same way.
  auto [rc2, out2] = cli("emit '" + spec_path() + "' -o /dev/full");
  EXPECT_EQ(rc2, 1) << out2;
  EXPECT_NE(out2.find("cannot write /dev/full: No space left on device"), std::string::npos) << out2;
}

TEST(CliErrors, CompileOutDirIsCheckedBeforeCompiling) {
  SKIP_WITHOUT_CLI();
  auto [rc, out] = cli("compile '" + spec_path() + "' --arch sm_90 --out-dir /nonexistent-ropejit-dir");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("--out-dir: cannot create files in /nonexistent-ropejit-dir: No such file or directory"),
            std::string::npos)
      << out;
}

TEST(CliErrors, DbExportAndMergeCheckTheirOutput) {
  SKIP_WITHOUT_CLI();
  TempDir tmp;
  const std::string db = tmp.path() + "/db.json";
  { std::ofstream(db) << R"({"format": 1, "devices": []})"; }
  auto [rc, out] = cli("db export '" + db + "' -o /nonexistent-ropejit-dir/out.json");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("cannot write /nonexistent-ropejit-dir/out.json: No such file or directory"), std::string::npos)
      << out;
  auto [rc2, out2] = cli("db export '" + db + "' -o '" + tmp.path() + "/out.json'");
  EXPECT_EQ(rc2, 0) << out2;
  EXPECT_NE(slurp(tmp.path() + "/out.json").find("\"devices\""), std::string::npos);

  auto [rc3, out3] = cli("db merge /nonexistent-ropejit-dir/merged.json '" + db + "'");
  EXPECT_EQ(rc3, 1) << out3;
  EXPECT_NE(out3.find("tuning database /nonexistent-ropejit-dir/merged.json: cannot create files in "
                      "/nonexistent-ropejit-dir: No such file or directory"),
            std::string::npos)
      << out3;
}

TEST(CliErrors, TuneChecksTheDatabaseFolderBeforeMeasuring) {
  SKIP_WITHOUT_CLI();
  auto [rc, out] = cli("tune '" + spec_path() + "' --db /nonexistent-ropejit-dir/db.json");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("--db /nonexistent-ropejit-dir/db.json: cannot create files in /nonexistent-ropejit-dir: No "
                     "such file or directory"),
            std::string::npos)
      << out;
}
