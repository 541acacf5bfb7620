#pragma once
// One way out for every library warning (a disabled disk cache, an ignored tuning database):
// the caller's sink (RuntimeOptions::on_warning, ropejit_runtime_options.on_warning,
// DiskCacheOptions::warn), else one "ropejit: warning: ..." line on stderr. Library code never
// prints to stderr itself, so an embedding program decides where warnings go.
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

namespace ropejit {

/// Receives one warning's text, without the "ropejit: warning: " prefix. Empty = print it.
using WarningSink = std::function<void(const std::string&)>;

/// Sends `message` to `sink`, or prints "ropejit: warning: <message>" to stderr when the sink is
/// empty. An exception from the sink is dropped: a warning must never fail the operation that
/// raised it (and callers raise warnings inside std::call_once and noexcept paths).
inline void warn(const WarningSink& sink, const std::string& message) noexcept {
  try {
    if (sink) {
      sink(message);
      return;
    }
  } catch (...) {
    return;
  }
  // One fprintf call: stdio locks the stream, so concurrent warnings never interleave.
  std::fprintf(stderr, "ropejit: warning: %s\n", message.c_str());
}

}  // namespace ropejit
