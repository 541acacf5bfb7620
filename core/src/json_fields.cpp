// Typed JSON field reading with named errors (ropejit/json_fields.h).
#include "ropejit/json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/core.h>

#include "ropejit/json_limits.h"

namespace ropejit {

using nlohmann::json;

namespace {

// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::string bound_text(double min, bool exclusive) { return fmt::format("{} {}", exclusive ? ">" : ">=", min); }

// The allowed set of integer(): a bound left at the int64 limit is not spelled out.
std::string integer_must(int64_t lo, int64_t hi) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  if (lo == kMin && hi == kMax) return "an integer";
  if (hi == kMax) return fmt::format("an integer >= {}", lo);
  return fmt::format("an integer in [{}, {}]", lo, hi);
}

// The int64 in [lo, hi] that `value` holds exactly, or nullopt (a uint64 beyond hi is never wrapped).
std::optional<int64_t> exact_integer(const json& value, int64_t lo, int64_t hi, bool integral_floats) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (hi >= 0 && u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo)))
      return static_cast<int64_t>(u);
  } else if (value.is_number_integer()) {
    const int64_t i = value.get<int64_t>();
    if (i >= lo && i <= hi) return i;
  } else if (value.is_number_float() && integral_floats) {
    const double d = value.get<double>();
    // [-2^63, 2^63): the doubles that convert to int64 without overflow.
    constexpr double kTwo63 = 9223372036854775808.0;
    if (std::isfinite(d) && d == std::floor(d) && d >= -kTwo63 && d < kTwo63) {
      const auto i = static_cast<int64_t>(d);
      if (i >= lo && i <= hi) return i;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string show_json(const json& value) {
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  }
  if (value.is_array() && value.size() > 4) return fmt::format("a list of {} items", value.size());
  return clip_for_message(value.dump());
}

std::string nearest_key(std::string_view key, const std::vector<std::string_view>& candidates) {
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  const size_t limit = key.size() <= 4 ? 1 : key.size() <= 8 ? 2 : 3;
  for (auto candidate : candidates) {
    size_t distance = edit_distance(key, candidate);
    // "type" -> "rope_type", "theta" -> "rope_theta": a known key ending in "_" + key.
    bool suffix = candidate.size() > key.size() + 1 &&
                  candidate.substr(candidate.size() - key.size()) == key &&
                  candidate[candidate.size() - key.size() - 1] == '_';
    if ((distance <= limit || suffix) && distance < best_distance) {
      best = std::string(candidate);
      best_distance = distance;
    }
  }
  return best;
}

JsonFields::JsonFields(Sink sink) : sink_(std::move(sink)) {}

JsonFields::JsonFields(Status status, std::string prefix) : status_(status), prefix_(std::move(prefix)) {}

void JsonFields::add(const std::string& pointer, const std::string& message) {
  // The message quotes the pointer clipped (a 100k-character key); the error's field keeps it whole.
  if (!sink_) throw Error(status_, prefix_ + clip_for_message(pointer) + ": " + message, pointer);
  sink_(pointer, message);
}

void JsonFields::not_allowed(const std::string& pointer, const json& value, const std::string& must) {
  add(pointer, show_json(value) + " is not allowed: must be " + must);
}

void JsonFields::check_keys(const json& object, const std::string& pointer,
                            const std::vector<std::string_view>& allowed) {
  for (const auto& item : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) != allowed.end()) continue;
    unknown_key(pointer + "/" + item.key(), item.key(), allowed);
  }
}

void JsonFields::unknown_key(const std::string& pointer, const std::string& key,
                             const std::vector<std::string_view>& allowed) {
  const std::string suggestion = nearest_key(key, allowed);
  if (!suggestion.empty())
    add(pointer, fmt::format("unknown key; did you mean \"{}\"?", suggestion));
  else
    add(pointer, "unknown key; allowed keys: " + join_keys(allowed));
}

const json* JsonFields::member(const json& object, const std::string& pointer, std::string_view key,
                               Presence presence) {
  if (!object.is_object()) {
    not_allowed(pointer, object, "an object");
    return nullptr;
  }
  auto it = object.find(std::string(key));
  if (it != object.end()) return &*it;
  if (presence == Presence::required)
    add(pointer + "/" + std::string(key), fmt::format("missing required key \"{}\"", key));
  return nullptr;
}

std::optional<int64_t> JsonFields::integer(const json& value, const std::string& pointer, int64_t lo, int64_t hi,
                                           const std::string& must) {
  if (auto i = exact_integer(value, lo, hi, integral_floats_)) return i;
  not_allowed(pointer, value, must.empty() ? integer_must(lo, hi) : must);
  return std::nullopt;
}

std::optional<double> JsonFields::number(const json& value, const std::string& pointer, double min, bool exclusive,
                                         std::optional<double> max) {
  const std::string range = bound_text(min, exclusive) + (max ? fmt::format(" and <= {}", *max) : "");
  if (value.is_number()) {
    const double d = value.get<double>();
    if (!std::isfinite(d)) {
      not_allowed(pointer, value, "a finite number " + range);
      return std::nullopt;
    }
    if ((exclusive ? d > min : d >= min) && (!max || d <= *max)) return d;
  }
  not_allowed(pointer, value, "a number " + range);
  return std::nullopt;
}

std::optional<bool> JsonFields::boolean(const json& value, const std::string& pointer) {
  if (value.is_boolean()) return value.get<bool>();
  not_allowed(pointer, value, "true or false");
  return std::nullopt;
}

std::optional<std::string> JsonFields::string(const json& value, const std::string& pointer) {
  if (value.is_string()) return value.get<std::string>();
  not_allowed(pointer, value, "a string");
  return std::nullopt;
}

std::optional<std::vector<double>> JsonFields::number_list(const json& value, const std::string& pointer,
                                                           double min, bool exclusive) {
  if (!value.is_array()) {
    not_allowed(pointer, value, "a list of numbers " + bound_text(min, exclusive));
    return std::nullopt;
  }
  std::vector<double> out;
  bool ok = true;
  for (size_t i = 0; i < value.size(); ++i) {
    auto d = number(value[i], pointer + "/" + std::to_string(i), min, exclusive);
    ok = ok && d.has_value();
    out.push_back(d.value_or(0.0));
  }
  return ok ? std::optional<std::vector<double>>(out) : std::nullopt;
}

std::string join_keys(const std::vector<std::string_view>& keys) {
  std::string out;
  for (auto key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

std::string JsonFields::enum_must(const std::string& names, const std::string& suggestion) {
  return suggestion.empty() ? "one of " + names : fmt::format("one of {} (did you mean \"{}\"?)", names, suggestion);
}

std::optional<int64_t> JsonFields::integer_field(const json& object, const std::string& pointer, std::string_view key,
                                                 int64_t lo, int64_t hi, Presence presence) {
  const json* value = member(object, pointer, key, presence);
  return value ? integer(*value, pointer + "/" + std::string(key), lo, hi) : std::nullopt;
}

std::optional<double> JsonFields::number_field(const json& object, const std::string& pointer, std::string_view key,
                                               double min, bool exclusive, Presence presence) {
  const json* value = member(object, pointer, key, presence);
  return value ? number(*value, pointer + "/" + std::string(key), min, exclusive) : std::nullopt;
}

std::optional<std::string> JsonFields::string_field(const json& object, const std::string& pointer,
                                                    std::string_view key, Presence presence) {
  const json* value = member(object, pointer, key, presence);
  return value ? string(*value, pointer + "/" + std::string(key)) : std::nullopt;
}

}  // namespace ropejit
