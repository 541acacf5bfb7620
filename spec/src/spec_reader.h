#pragma once
// Internal: the validating JSON reader of spec validation (every problem collected, each named
// by its JSON pointer, value and allowed set) and the readers of the io and qk_norm blocks,
// shared by spec_validate.cpp (top level, rope) and spec_validate_io.cpp (io, qk_norm, the
// derived-frequency check).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "ropejit/spec.h"
#include "spec_json.h"

namespace ropejit::spec_detail {

using nlohmann::json;

inline std::string join(const std::vector<std::string_view>& items) {
  std::string out;
  for (auto item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

inline std::string bound_text(double min, bool exclusive) {
  return fmt::format("{} {}", exclusive ? ">" : ">=", min);
}

// Collects issues while reading one document.
class Reader {
 public:
  explicit Reader(std::vector<SpecIssue>& issues) : issues_(issues) {}

  void add(std::string pointer, std::string message) {
    issues_.push_back({std::move(pointer), std::move(message)});
  }
  void not_allowed(const std::string& pointer, const json& value, const std::string& must) {
    add(pointer, show_json(value) + " is not allowed: must be " + must);
  }

  // Reports keys outside `allowed`, suggesting the nearest one.
  void check_keys(const json& object, const std::string& pointer,
                  const std::vector<std::string_view>& allowed) {
    for (const auto& item : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), item.key()) != allowed.end()) continue;
      unknown_key(pointer + "/" + item.key(), item.key(), allowed);
    }
  }
  void unknown_key(const std::string& pointer, const std::string& key,
                   const std::vector<std::string_view>& allowed) {
    std::string suggestion = nearest_key(key, allowed);
    if (!suggestion.empty())
      add(pointer, fmt::format("unknown key; did you mean \"{}\"?", suggestion));
    else
      add(pointer, "unknown key; allowed keys: " + join(allowed));
  }

  std::optional<int64_t> integer(const json& value, const std::string& pointer, int64_t lo,
                                 int64_t hi, const std::string& must = {}) {
    std::string must_text = must.empty() ? fmt::format("an integer in [{}, {}]", lo, hi) : must;
    if (value.is_number_unsigned()) {
      uint64_t u = value.get<uint64_t>();
      if (u >= static_cast<uint64_t>(lo) && u <= static_cast<uint64_t>(hi))
        return static_cast<int64_t>(u);
    } else if (value.is_number_integer()) {
      int64_t i = value.get<int64_t>();
      if (i >= lo && i <= hi) return i;
    } else if (value.is_number_float()) {
      double d = value.get<double>();  // 4096.0 is accepted as an integer
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
          d <= static_cast<double>(hi))
        return static_cast<int64_t>(d);
    }
    not_allowed(pointer, value, must_text);
    return std::nullopt;
  }

  std::optional<double> number(const json& value, const std::string& pointer, double min,
                               bool exclusive, std::optional<double> max = std::nullopt) {
    std::string range = bound_text(min, exclusive) + (max ? fmt::format(" and <= {}", *max) : "");
    if (value.is_number()) {
      double d = value.get<double>();
      if (!std::isfinite(d)) {
        not_allowed(pointer, value, "a finite number " + range);
        return std::nullopt;
      }
      if ((exclusive ? d > min : d >= min) && (!max || d <= *max)) return d;
    }
    not_allowed(pointer, value, "a number " + range);
    return std::nullopt;
  }

  std::optional<bool> boolean(const json& value, const std::string& pointer) {
    if (value.is_boolean()) return value.get<bool>();
    not_allowed(pointer, value, "true or false");
    return std::nullopt;
  }

  template <class E>
  std::optional<E> enumeration(const json& value, const std::string& pointer) {
    if (value.is_string()) {
      const auto& text = value.get_ref<const std::string&>();
      if (auto e = enum_from_string<E>(text)) return e;
      std::vector<std::string_view> names;
      for (const auto& row : enum_table<E>()) names.push_back(row.name);
      std::string suggestion = nearest_key(text, names);
      if (!suggestion.empty()) {
        not_allowed(pointer, value,
                    fmt::format("one of {} (did you mean \"{}\"?)", allowed_names<E>(), suggestion));
        return std::nullopt;
      }
    }
    not_allowed(pointer, value, "one of " + allowed_names<E>());
    return std::nullopt;
  }

  std::optional<std::vector<double>> number_list(const json& value, const std::string& pointer,
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

 private:
  std::vector<SpecIssue>& issues_;
};

inline const json* member(const json& object, std::string_view key) {
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

/// A rope block at JSON pointer `base` ("/rope", "/rerotate/from"); rotary_dim and
/// max_positions are 0 when unknown.
RopeParams read_rope(const json& block, Reader& reader, int rotary_dim, int64_t max_positions,
                     const std::string& base);

/// The io block (absent: the defaults), with io.mrope_* checked against rotary_dim and the rope
/// type; an op whose kernel reads no v copies none.
IoSpec read_io(const json* block, Reader& reader, int rotary_dim, RopeType rope_type, OpKind op);

/// The qk_norm block (present: enabled).
QkNorm read_qk_norm(const json& block, Reader& reader);

/// Adds an issue when the spec's baked frequencies or attention factor are no finite float32 > 0
/// (and those of the op's from_rope block).
void check_derived_frequencies(const Spec& spec, Reader& reader);

}  // namespace ropejit::spec_detail
