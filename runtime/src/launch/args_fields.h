#pragma once
// The ropejit_args fields as a table (from ROPEJIT_ARGS_FIELDS, ropejit/args_fields.h): name,
// offset, size, type and generation of each, checked at compile time to tile the struct; and
// the launch check that refuses fields a spec does not use, by that table.
#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ropejit/args_fields.h"
#include "ropejit/error.h"
#include "ropejit/ropejit.h"
#include "ropejit/spec.h"

namespace ropejit {

/// What a ropejit_args field holds, for reading it without naming it.
enum class ArgsFieldKind { pointer, int64, int32, float32, positions_type };

/// The kind of a field of type T; anything else fails to compile (a new kind needs a reader).
template <class T>
constexpr ArgsFieldKind args_field_kind() {
  if constexpr (std::is_pointer_v<T>) return ArgsFieldKind::pointer;
  else if constexpr (std::is_same_v<T, int64_t>) return ArgsFieldKind::int64;
  else if constexpr (std::is_same_v<T, int>) return ArgsFieldKind::int32;
  else if constexpr (std::is_same_v<T, float>) return ArgsFieldKind::float32;
  else {
    static_assert(std::is_same_v<T, ropejit_positions_type>, "a ropejit_args field of a type with no ArgsFieldKind");
    return ArgsFieldKind::positions_type;
  }
}

/// One ropejit_args field (struct_size excepted).
struct ArgsField {
  std::string_view name;
  size_t offset, size, align;
  ArgsFieldKind kind;
  int since;                ///< the struct generation that added it (ropejit/args_fields.h)
  std::string_view used_by; ///< the specs whose launches read it
};

#define ROPEJIT_ARGS_FIELD_ROW(f, since, used_by)                                                                  \
  ArgsField{#f, offsetof(ropejit_args, f), sizeof(ropejit_args::f), alignof(decltype(ropejit_args::f)),          \
            args_field_kind<decltype(ropejit_args::f)>(), since, used_by},
/// Every ropejit_args field after struct_size, in declaration order.
inline constexpr ArgsField kArgsFields[] = {ROPEJIT_ARGS_FIELDS(ROPEJIT_ARGS_FIELD_ROW)};
#undef ROPEJIT_ARGS_FIELD_ROW
inline constexpr size_t kArgsFieldCount = std::size(kArgsFields);

namespace args_fields_detail {
constexpr size_t round_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

// Each row starts where the previous one ends (rounded to its alignment), the first after
// struct_size, and the last ends the struct: none out of order, none missing (but one that fits
// in another's padding, which has_fields catches).
constexpr bool rows_tile_the_struct() {
  size_t end = offsetof(ropejit_args, struct_size) + sizeof(ropejit_args::struct_size);
  int since = 0;
  for (const ArgsField& f : kArgsFields) {
    if (f.offset != round_up(end, f.align) || f.since < since) return false;
    end = f.offset + f.size;
    since = f.since;
  }
  return round_up(end, alignof(ropejit_args)) == sizeof(ropejit_args);
}

// Converts to any field type: counts a struct's fields by how many initializers it takes.
struct AnyField {
  template <class T>
  constexpr operator T() const noexcept { return T{}; }
};
template <class T, size_t... I>
constexpr auto initializable(std::index_sequence<I...>) -> decltype(T{(void(I), AnyField{})...}, true) {
  return true;
}
template <class T>
constexpr bool initializable(...) { return false; }
// ropejit_args has exactly `n` fields: n initializers compile, n + 1 do not (it is a C struct
// of scalars, so no brace elision blurs the count). Catches a field hidden in another's padding.
template <class T, size_t n>
constexpr bool has_fields() {
  return initializable<T>(std::make_index_sequence<n>{}) && !initializable<T>(std::make_index_sequence<n + 1>{});
}

constexpr int generations() {
  int last = 0;
  for (const ArgsField& f : kArgsFields) last = f.since > last ? f.since : last;
  return last + 1;
}
}  // namespace args_fields_detail

static_assert(args_fields_detail::has_fields<ropejit_args, kArgsFieldCount + 1>(),
              "ROPEJIT_ARGS_FIELDS (ropejit/args_fields.h) must have one row per ropejit_args field after struct_size");
static_assert(args_fields_detail::rows_tile_the_struct(),
              "ROPEJIT_ARGS_FIELDS (ropejit/args_fields.h) must list the ropejit_args fields in declaration "
              "order, generations non-decreasing");

/// Struct generations (ropejit/args_fields.h `since`): this header's and every earlier one.
inline constexpr int kArgsGenerations = args_fields_detail::generations();

/// The struct_size of each earlier header's ropejit_args: where the first field of each later
/// generation starts, oldest first.
inline constexpr std::array<size_t, kArgsGenerations - 1> kArgsOlderSizes = [] {
  std::array<size_t, kArgsGenerations - 1> sizes{};
  int next = 1;
  for (const ArgsField& f : kArgsFields)
    if (f.since == next) sizes[size_t(next++ - 1)] = f.offset;
  return sizes;
}();

/// A set of fields, by their index in kArgsFields.
using ArgsFieldSet = std::bitset<kArgsFieldCount>;

/// No field: a tensor row's stride field it does not have.
inline constexpr size_t kNoArgsField = SIZE_MAX;

/// The index of field `name` in kArgsFields (kNoArgsField for null); evaluated in a constant
/// expression, a name that is no field fails to compile (the throw is not a constant).
constexpr size_t args_field_id(const char* name) {
  if (!name) return kNoArgsField;
  for (size_t i = 0; i < kArgsFieldCount; ++i)
    if (kArgsFields[i].name == std::string_view(name)) return i;
  throw Error(Status::internal, std::string(name) + " is not a ropejit_args field");
}

/// The row of field `name`, or null when ropejit_args has no such field.
const ArgsField* find_args_field(std::string_view name);
/// The index of field `name` in kArgsFields; Error(internal) when there is none.
size_t args_field_index(std::string_view name);

/// A pointer field's value.
const void* field_pointer(const ArgsField& f, const ropejit_args& a);
/// An integer field's value (int64, int, positions type); Error(internal) for another kind.
int64_t field_integer(const ArgsField& f, const ropejit_args& a);
/// Stores a pointer field's value (the Args binding of a buffer).
void set_field_pointer(const ArgsField& f, ropejit_args& a, const void* value);
/// Stores an integer field's value (int64 or int); Error(internal) for another kind.
void set_field_integer(const ArgsField& f, ropejit_args& a, int64_t value);
/// True when the field is at the default ropejit_args_init gives it: null, 0 (or -0.0).
bool field_is_default(const ArgsField& f, const ropejit_args& a);
/// The field's value as an error message shows it: "null" or the address, the number.
std::string field_value_text(const ArgsField& f, const ropejit_args& a);

/// True for the shape fields (num_tokens, batch, max_seq_len, seq_len, positions_type), which
/// check_unused_fields leaves to their range checks.
bool is_shape_field(std::string_view name);
/// The fields launches of `spec` read (launch_fields' required or optional).
ArgsFieldSet used_args_fields(const Spec& spec);
/// Refuses, naming it, every field outside `used` that is not at its default:
/// "Args::v_cache: 0x... is not allowed: must be null unless io.output paged_kv with op rope (this
/// spec does not use it)". The shape fields are exempt (see args_fields.cpp).
void check_unused_fields(const ropejit_args& a, const ArgsFieldSet& used);

}  // namespace ropejit
