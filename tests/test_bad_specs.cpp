// The bad-spec corpus (tests/data/bad_specs/, issue 15): every case is refused naming its field,
// by the library and by `ropejit emit`, which exits 1..127 and writes nothing.
// ropejit-tier: unit
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/build_paths.h"
#include "ropejit/spec.h"
#include "support/repo_paths.h"
#include "support/run_command.h"

namespace ropejit {
namespace {

using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct BadSpec {
  std::string name;
  std::string text;
  std::string pointer;  // the field the error must name; empty: malformed JSON (line and column)
};

std::vector<BadSpec> bad_specs() {
  const json base = json::parse(read_text(test::data_path("bad_specs/base.json")));
  std::vector<BadSpec> out;
  for (const json& c : json::parse(read_text(test::data_path("bad_specs/cases.json")))) {
    BadSpec bad{c.at("name"), {}, c.at("expect_pointer")};
    if (c.contains("text")) {
      bad.text = c["text"];
    } else {
      json spec = base;
      const json removals = c.value("remove", json::array()), changes = c.value("set", json::object());
      for (const json& pointer : removals) {
        const json::json_pointer p(pointer.get<std::string>());
        spec[p.parent_pointer()].erase(p.back());
      }
      for (const auto& [pointer, value] : changes.items()) spec[json::json_pointer(pointer)] = value;
      bad.text = spec.dump();
    }
    out.push_back(std::move(bad));
  }
  return out;
}

TEST(BadSpecs, BaseIsValid) {
  EXPECT_NO_THROW(parse_spec(read_text(test::data_path("bad_specs/base.json"))));
}

TEST(BadSpecs, EveryCaseIsRefusedNamingItsField) {
  const auto cases = bad_specs();
  ASSERT_GE(cases.size(), 80u) << "tests/data/bad_specs/cases.json must hold at least 80 cases";
  for (const BadSpec& bad : cases) {
    SCOPED_TRACE(bad.name + ": " + bad.text);
    try {
      parse_spec(bad.text);
      ADD_FAILURE() << "accepted";
    } catch (const SpecError& e) {
      EXPECT_EQ(e.code(), Status::invalid_spec);
      bool named = false;
      for (const SpecIssue& issue : e.issues()) named = named || issue.pointer == bad.pointer;
      EXPECT_TRUE(named) << "no issue at \"" << bad.pointer << "\"; got:\n" << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a SpecError: " << e.what();
    }
  }
}

TEST(BadSpecs, TheCommandExitsWithTheFieldAndWritesNothing) {
  const std::string cli = ropejit::test::cli_path();
  if (cli.empty()) GTEST_SKIP() << "SKIPPED: built without the ropejit command";
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("bad_specs_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const BadSpec& bad : bad_specs()) {
    SCOPED_TRACE(bad.name);
    const std::string spec = (dir / (bad.name + ".json")).string(), out = (dir / (bad.name + ".cu")).string();
    std::ofstream(spec, std::ios::binary) << bad.text;
    const auto [status, printed] = test::run_command("'" + cli + "' emit '" + spec + "' -o '" + out + "' 2>&1");
    EXPECT_GE(status, 1) << printed;
    EXPECT_LE(status, 127) << printed;
    EXPECT_NE(printed.find((bad.pointer.empty() ? "(document)" : bad.pointer) + ":"), std::string::npos) << printed;
    EXPECT_FALSE(std::filesystem::exists(out)) << "wrote " << out;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ropejit
