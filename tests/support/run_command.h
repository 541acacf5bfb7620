#pragma once
// Test helper: run a shell command line (the CLI tests) and capture what it prints.
#include <string>
#include <utility>

namespace ropejit::test {

/// Exit status (-1 when it did not exit normally) and stdout of a shell command line; the
/// caller redirects stderr as it needs (`2>&1` to capture it too).
std::pair<int, std::string> run_command(const std::string& command);

}  // namespace ropejit::test
