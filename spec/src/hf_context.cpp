// HfContext: issues and warnings keyed by config.json paths, and the renaming of spec
// validation problems back to the config keys their fields came from.
#include "hf_context.h"

#include <cctype>
#include <cmath>
#include <limits>

#include <fmt/core.h>

#include "spec_json.h"

namespace ropejit {

using nlohmann::json;

void HfContext::error(const std::string& key_path, const std::string& spec_pointer,
                      std::string message) {
  if (!spec_pointer.empty()) {
    message += " (spec field " + spec_pointer + ")";
    cover(spec_pointer);
  }
  issues_.push_back({key_path, std::move(message)});
}

void HfContext::not_allowed(const std::string& key_path, const json& value,
                            const std::string& must, const std::string& spec_pointer) {
  error(key_path, spec_pointer, show_json(value) + " is not allowed: must be " + must);
}

void HfContext::warn(const std::string& key_path, const std::string& message) {
  warnings_.push_back(key_path.empty() ? message : key_path + ": " + message);
}

void HfContext::source(const std::string& spec_pointer, const std::string& key_path) {
  sources_.emplace_back(spec_pointer, key_path);
}

const json* HfContext::member(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  const size_t dot = key.find('.');  // "attn_config.kv_n_heads": a key of a sub-config
  if (dot != std::string_view::npos) {
    const json* outer = member(object, key.substr(0, dot));
    return outer ? member(*outer, key.substr(dot + 1)) : nullptr;
  }
  auto it = object.find(std::string(key));
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::pair<std::string_view, const json*> HfContext::first_of(
    const json& object, const std::vector<std::string_view>& keys, bool agree,
    const std::string& spec_pointer) {
  std::pair<std::string_view, const json*> found{"", nullptr};
  for (std::string_view key : keys) {
    const json* value = member(object, key);
    if (!value) continue;
    if (!found.second) {
      found = {key, value};
    } else if (agree && *value != *found.second) {
      error(path(key), spec_pointer,
            fmt::format("{} is not allowed: must equal {} ({}), another name of the same value",
                        show_json(*value), found.first, show_json(*found.second)));
    }
  }
  return found;
}

std::optional<int64_t> HfContext::integer(const json& value, const std::string& key_path,
                                          int64_t min, const std::string& spec_pointer) {
  const std::string must = fmt::format("an integer >= {}", min);
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
        static_cast<int64_t>(u) >= min)
      return static_cast<int64_t>(u);
  } else if (value.is_number_integer()) {
    if (value.get<int64_t>() >= min) return value.get<int64_t>();
  }
  not_allowed(key_path, value, must, spec_pointer);
  return std::nullopt;
}

std::optional<bool> HfContext::boolean(const json& value, const std::string& key_path,
                                       const std::string& spec_pointer) {
  if (value.is_boolean()) return value.get<bool>();
  not_allowed(key_path, value, "true or false", spec_pointer);
  return std::nullopt;
}

std::optional<double> HfContext::positive(const json& value, const std::string& key_path,
                                          const std::string& spec_pointer) {
  if (value.is_number()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && d > 0) return d;
  }
  not_allowed(key_path, value, "a finite number > 0", spec_pointer);
  return std::nullopt;
}

namespace {

// `pointer` is `base` or lies under it.
bool under(const std::string& pointer, const std::string& base) {
  return pointer == base ||
         (pointer.size() > base.size() && pointer.compare(0, base.size(), base) == 0 &&
          pointer[base.size()] == '/');
}

// Replaces whole-word `word` in `text`.
void replace_word(std::string& text, const std::string& word, const std::string& by) {
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at)) {
    const size_t end = at + word.size();
    if ((at > 0 && is_word(text[at - 1])) || (end < text.size() && is_word(text[end]))) {
      at = end;
      continue;
    }
    text.replace(at, word.size(), by);
    at += by.size();
  }
}

}  // namespace

std::vector<SpecIssue> HfContext::rename(const std::vector<SpecIssue>& spec_issues) const {
  std::vector<SpecIssue> out;
  for (const SpecIssue& issue : spec_issues) {
    bool covered = false;
    for (const auto& base : covered_) covered = covered || under(issue.pointer, base);
    if (covered) continue;
    const std::pair<std::string, std::string>* best = nullptr;
    for (const auto& src : sources_)
      if (under(issue.pointer, src.first) && (!best || src.first.size() > best->first.size()))
        best = &src;
    std::string message = issue.message;
    // The spec's head names read as the config's in a config-level message.
    for (const auto& src : sources_)
      if (src.first == "/num_q_heads" || src.first == "/num_kv_heads")
        replace_word(message, src.first.substr(1), src.second);
    if (!best) {
      out.push_back({issue.pointer, message});
      continue;
    }
    std::string key = best->second;
    // "/rope/long_factor/3" under "/rope/long_factor" -> "rope_scaling.long_factor[3]".
    for (size_t at = best->first.size(); at < issue.pointer.size();) {
      const size_t next = issue.pointer.find('/', at + 1);
      key += "[" + issue.pointer.substr(at + 1, next == std::string::npos ? next : next - at - 1) + "]";
      at = next == std::string::npos ? issue.pointer.size() : next;
    }
    out.push_back({key, message + " (spec field " + issue.pointer + ")"});
  }
  return out;
}

}  // namespace ropejit
