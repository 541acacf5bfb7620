#pragma once
/// Limits every JSON text ropejit reads is held to (spec, HF config.json, tuning database,
/// launch config), checked before parsing, and the clipping of values quoted in messages.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ropejit {

/// Deepest nesting of arrays and objects a JSON text may have. Real files nest under 8 levels;
/// the bound keeps every recursive walk of a parsed value (copy, dump) off the stack limit.
inline constexpr int kMaxJsonDepth = 64;

/// Longest quotation of a value in an error message, in bytes.
inline constexpr size_t kMaxQuotedChars = 80;

/// Why `text` is refused before parsing, naming the byte offset: a NUL byte (the JSON parser
/// would stop there and ignore the rest) or nesting deeper than kMaxJsonDepth. nullopt: neither.
std::optional<std::string> json_text_problem(std::string_view text);

/// `text` for a message: at most `max_bytes` bytes, cut on a UTF-8 character boundary and
/// ending in "..." when cut.
std::string clip_for_message(std::string_view text, size_t max_bytes = kMaxQuotedChars);

}  // namespace ropejit
