// Pre-parse limits of JSON text and the clipping of quoted values (ropejit/json_limits.h).
#include "ropejit/json_limits.h"

#include <fmt/core.h>

namespace ropejit {

std::optional<std::string> json_text_problem(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t at = 0; at < text.size(); ++at) {
    const char c = text[at];
    if (c == '\0')
      return fmt::format("a NUL byte at byte offset {} is not allowed: JSON text holds none (what "
                         "follows it would be ignored)", at);
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return fmt::format("nesting deeper than {} levels at byte offset {} is not allowed (arrays and "
                           "objects nest at most {} deep)", kMaxJsonDepth, at, kMaxJsonDepth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::string clip_for_message(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  const std::string_view ellipsis = "...";
  size_t keep = max_bytes > ellipsis.size() ? max_bytes - ellipsis.size() : 0;
  // Back up over UTF-8 continuation bytes so no character is split.
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return std::string(text.substr(0, keep)) + std::string(ellipsis);
}

}  // namespace ropejit
