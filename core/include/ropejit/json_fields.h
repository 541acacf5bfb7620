#pragma once
/// Reading typed fields of JSON objects with named errors, for every JSON ropejit reads (spec,
/// tuning database, launch config): each problem names its JSON pointer, the value and the
/// allowed set ("/head_dim: 2048 is not allowed: must be an integer in [1, 1024]").
/// Internal: it includes nlohmann/json, which the installed package does not ship, so the
/// install rule leaves this header out.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropejit/enums.h"
#include "ropejit/error.h"

namespace ropejit {

/// A JSON value as messages show it (non-finite numbers by name, long values cut).
std::string show_json(const nlohmann::json& value);

/// Closest candidate by edit distance if close enough to be a likely typo, else empty.
std::string nearest_key(std::string_view key, const std::vector<std::string_view>& candidates);

/// Keys joined for messages: "name, head_dim".
std::string join_keys(const std::vector<std::string_view>& keys);

/// Reads the fields of JSON objects, reporting each problem as "<pointer>: <value> is not
/// allowed: must be <allowed set>". One type, two policies: collecting (every problem goes to
/// a sink and reading goes on, so a spec's validator lists them all) or throwing (the first
/// problem throws Error(status, prefix + pointer + ": " + message, pointer), the pointer clipped
/// in the message). Readers return nullopt for a refused value, which only the collecting policy
/// ever sees.
class JsonFields {
 public:
  /// Receives one problem: its JSON pointer and message.
  using Sink = std::function<void(const std::string& pointer, const std::string& message)>;
  /// Whether a member may be absent.
  enum class Presence { required, optional };

  /// Collecting: each problem goes to `sink`, and reading goes on.
  explicit JsonFields(Sink sink);
  /// Throwing: the first problem throws Error(status, prefix + pointer + ": " + message, pointer).
  JsonFields(Status status, std::string prefix);

  /// Reads an integral float (4096.0) as an integer; off by default (refused as "12.0").
  JsonFields& accept_integral_floats(bool accept = true) {
    integral_floats_ = accept;
    return *this;
  }

  /// Reports `message` at `pointer` (throwing: throws it).
  void add(const std::string& pointer, const std::string& message);
  /// Reports "<value> is not allowed: must be <must>" at `pointer`.
  void not_allowed(const std::string& pointer, const nlohmann::json& value, const std::string& must);

  /// Reports each key of `object` (at `pointer`) outside `allowed`, suggesting the nearest one.
  void check_keys(const nlohmann::json& object, const std::string& pointer,
                  const std::vector<std::string_view>& allowed);
  /// Reports `key` (at `pointer`) as unknown: "did you mean" its nearest allowed key, else all of them.
  void unknown_key(const std::string& pointer, const std::string& key,
                   const std::vector<std::string_view>& allowed);
  /// Member `key` of `object` (at `pointer`), or nullptr: a problem when `object` is no object,
  /// or when `key` is absent and `presence` is required.
  const nlohmann::json* member(const nlohmann::json& object, const std::string& pointer,
                               std::string_view key, Presence presence = Presence::required);

  /// An integer in [lo, hi], a uint64 too (never wrapped); `must` replaces the allowed set's text.
  std::optional<int64_t> integer(const nlohmann::json& value, const std::string& pointer, int64_t lo,
                                 int64_t hi, const std::string& must = {});
  /// A finite number >= min (> min when `exclusive`) and <= max when given.
  std::optional<double> number(const nlohmann::json& value, const std::string& pointer, double min,
                               bool exclusive, std::optional<double> max = std::nullopt);
  /// true or false.
  std::optional<bool> boolean(const nlohmann::json& value, const std::string& pointer);
  /// A string.
  std::optional<std::string> string(const nlohmann::json& value, const std::string& pointer);
  /// A list of numbers, each as number() reads it (its problems named by index).
  std::optional<std::vector<double>> number_list(const nlohmann::json& value, const std::string& pointer,
                                                 double min, bool exclusive);
  /// One of E's names (enums.h), suggesting the nearest name for a typo.
  template <class E>
  std::optional<E> enumeration(const nlohmann::json& value, const std::string& pointer) {
    const std::string* text = value.is_string() ? &value.get_ref<const std::string&>() : nullptr;
    if (text)
      if (auto e = enum_from_string<E>(*text)) return e;
    std::vector<std::string_view> names;
    for (const auto& row : enum_table<E>()) names.push_back(row.name);
    not_allowed(pointer, value, enum_must(allowed_names<E>(), text ? nearest_key(*text, names) : std::string()));
    return std::nullopt;
  }

  /// Member `key` of `object` read by integer() at pointer + "/" + key; nullopt when absent.
  std::optional<int64_t> integer_field(const nlohmann::json& object, const std::string& pointer,
                                       std::string_view key, int64_t lo, int64_t hi,
                                       Presence presence = Presence::required);
  /// Member `key` of `object` read by number() at pointer + "/" + key; nullopt when absent.
  std::optional<double> number_field(const nlohmann::json& object, const std::string& pointer,
                                     std::string_view key, double min, bool exclusive,
                                     Presence presence = Presence::required);
  /// Member `key` of `object` read by string() at pointer + "/" + key; nullopt when absent.
  std::optional<std::string> string_field(const nlohmann::json& object, const std::string& pointer,
                                          std::string_view key, Presence presence = Presence::required);
  /// Member `key` of `object` read by enumeration() at pointer + "/" + key; nullopt when absent.
  template <class E>
  std::optional<E> enum_field(const nlohmann::json& object, const std::string& pointer, std::string_view key,
                              Presence presence = Presence::required) {
    const nlohmann::json* value = member(object, pointer, key, presence);
    return value ? enumeration<E>(*value, pointer + "/" + std::string(key)) : std::nullopt;
  }

 private:
  // "one of a | b", with " (did you mean \"a\"?)" when a suggestion is given.
  static std::string enum_must(const std::string& names, const std::string& suggestion);

  Sink sink_;  // empty: the throwing policy
  Status status_ = Status::internal;
  std::string prefix_;
  bool integral_floats_ = false;
};

}  // namespace ropejit
