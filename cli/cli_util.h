#pragma once
// Small helpers shared by the cli/cmd_*.cpp files.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ropejit/config.h"
#include "ropejit/runtime.h"

namespace ropejit::cli {

/// A config from `--config`: inline JSON ({...}) or a file path; empty = default_config(spec).
Config config_option(const Spec& spec, const std::string& value);

/// Splits "a,b,c".
std::vector<std::string> split_list(const std::string& text);

/// Reads a whole file (Error io_error naming the path).
std::string read_file(const std::string& path);

/// Writes `bytes` to the file `path` names, or throws Error(io_error) "cannot write PATH: REASON"
/// (the OS's strerror). A regular file (or a new one) is replaced atomically: written to a temp
/// file beside it, then renamed over it, so a failure leaves the old file (or none), never a
/// partial one. Anything else (a symlink, /dev/stdout, a FIFO) is written in place.
void write_file(const std::string& path, std::string_view bytes);

/// Throws Error(io_error) "WHAT: cannot create files in DIR: REASON" unless a file can be
/// created in the folder `dir` (a probe file, removed at once). Commands that write late (after
/// compiling or tuning) call it first, so a wrong path fails before the work, not after.
void require_writable_folder(const std::string& dir, const std::string& what);

/// The folder a file path is in ("." for a bare name), for require_writable_folder.
std::string parent_folder(const std::string& path);

/// The enum value a flag names; nullopt for an empty value; otherwise Error(invalid_argument)
/// naming the flag, the value and the allowed names of the enum's one table.
template <class E>
std::optional<E> enum_option(const std::string& flag, const std::string& value) {
  if (value.empty()) return std::nullopt;
  if (auto e = enum_from_string<E>(value)) return e;
  throw Error(Status::invalid_argument,
              fmt::format("{} {} is not allowed: must be one of {}", flag, value, allowed_names<E>()));
}

/// The kernel for `--config` (empty: tuned or heuristic configs).
Kernel kernel_option(Runtime& runtime, const Spec& spec, const std::string& config);

/// `--check-tokens N` of run and bench into `*value` (left at -1 when not given).
void add_check_tokens_option(CLI::App* cmd, int64_t* value);

/// The tokens the float64 check covers for `--check-tokens` (-1: check::checked_tokens_for(spec)).
int64_t check_tokens_option(const Spec& spec, int64_t value);

}  // namespace ropejit::cli
