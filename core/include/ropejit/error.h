#pragma once
/// Errors shared by every pipeline stage: a status code, the spec field (JSON pointer) when
/// there is one, and a compiler log when there is one.
#include <stdexcept>
#include <string>

namespace ropejit {

/// Status codes; the C API returns the same numbers (ropejit.h keeps them in sync).
enum class Status : int {
  ok = 0,
  invalid_spec = 1,       ///< the spec JSON is malformed or fails validation
  invalid_argument = 2,   ///< a launch or API argument is bad (null, misaligned, out of range)
  unsupported = 3,        ///< valid spec/config that this build or backend cannot implement
  compile_error = 4,      ///< NVRTC or the host compiler rejected the generated source
  backend_error = 5,      ///< CUDA driver / host JIT failure
  io_error = 6,           ///< file system problem (cache, tuning database, spec file)
  internal = 7,           ///< a bug in ropejit
};

/// Short stable name of a status ("invalid_spec").
const char* status_name(Status s) noexcept;

/// The exception type of the C++ API.
class Error : public std::runtime_error {
 public:
  /// An error with a code, a message, and optionally the spec field and a compiler log.
  Error(Status code, std::string message, std::string field = {}, std::string log = {})
      : std::runtime_error(std::move(message)), code_(code), field_(std::move(field)),
        log_(std::move(log)) {}
  /// The status code.
  Status code() const noexcept { return code_; }
  /// JSON pointer of the offending spec field, or empty.
  const std::string& field() const noexcept { return field_; }
  /// Compiler (NVRTC / clang) log, or empty.
  const std::string& log() const noexcept { return log_; }

 private:
  Status code_;
  std::string field_;
  std::string log_;
};

}  // namespace ropejit
