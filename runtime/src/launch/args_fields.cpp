// The ropejit_args field table's readers and the generic "unused field left at its default"
// launch check (runtime/src/launch/args_fields.h).
#include "launch/args_fields.h"

#include <cstring>

#include <fmt/format.h>

#include "launch/launch_checks.h"
#include "ropejit/introspect.h"

namespace ropejit {

namespace {

// Shape fields other checks range-check and read beside the arrays that use them (batch with
// padded_bhsd rows, max_seq_len with varlen's longest sequence), so "unused" is not theirs to judge.
constexpr std::string_view kShapeFields[] = {"num_tokens", "batch", "max_seq_len", "seq_len", "positions_type"};

template <class T>
T read_as(const ArgsField& f, const ropejit_args& a) {
  T value;
  std::memcpy(&value, reinterpret_cast<const char*>(&a) + f.offset, sizeof value);
  return value;
}

}  // namespace

const ArgsField* find_args_field(std::string_view name) {
  for (const ArgsField& f : kArgsFields)
    if (f.name == name) return &f;
  return nullptr;
}

size_t args_field_index(std::string_view name) {
  if (const ArgsField* f = find_args_field(name)) return size_t(f - kArgsFields);
  throw Error(Status::internal, fmt::format("{} is not a ropejit_args field", name));
}

const void* field_pointer(const ArgsField& f, const ropejit_args& a) {
  if (f.kind != ArgsFieldKind::pointer)
    throw Error(Status::internal, fmt::format("ropejit_args::{} is not a pointer", f.name));
  return read_as<const void*>(f, a);
}

int64_t field_integer(const ArgsField& f, const ropejit_args& a) {
  switch (f.kind) {
    case ArgsFieldKind::int64: return read_as<int64_t>(f, a);
    case ArgsFieldKind::int32: return read_as<int>(f, a);
    case ArgsFieldKind::positions_type: return int(read_as<ropejit_positions_type>(f, a));
    default: throw Error(Status::internal, fmt::format("ropejit_args::{} is not an integer", f.name));
  }
}

void set_field_pointer(const ArgsField& f, ropejit_args& a, const void* value) {
  if (f.kind != ArgsFieldKind::pointer)
    throw Error(Status::internal, fmt::format("ropejit_args::{} is not a pointer", f.name));
  std::memcpy(reinterpret_cast<char*>(&a) + f.offset, &value, sizeof value);
}

void set_field_integer(const ArgsField& f, ropejit_args& a, int64_t value) {
  char* at = reinterpret_cast<char*>(&a) + f.offset;
  if (f.kind == ArgsFieldKind::int64) {
    std::memcpy(at, &value, sizeof value);
  } else if (f.kind == ArgsFieldKind::int32) {
    const int narrow = static_cast<int>(value);
    std::memcpy(at, &narrow, sizeof narrow);
  } else {
    throw Error(Status::internal, fmt::format("ropejit_args::{} is not an int64 or int", f.name));
  }
}

bool field_is_default(const ArgsField& f, const ropejit_args& a) {
  switch (f.kind) {
    case ArgsFieldKind::pointer: return field_pointer(f, a) == nullptr;
    case ArgsFieldKind::float32: return read_as<float>(f, a) == 0.0f;
    default: return field_integer(f, a) == 0;
  }
}

std::string field_value_text(const ArgsField& f, const ropejit_args& a) {
  switch (f.kind) {
    case ArgsFieldKind::pointer: return launch_detail::ptr_text(field_pointer(f, a));
    case ArgsFieldKind::float32: return fmt::format("{}", read_as<float>(f, a));
    default: return fmt::format("{}", field_integer(f, a));
  }
}

bool is_shape_field(std::string_view name) {
  for (std::string_view shape : kShapeFields)
    if (name == shape) return true;
  return false;
}

ArgsFieldSet used_args_fields(const Spec& spec) {
  ArgsFieldSet used;
  for (const LaunchField& field : launch_fields(spec))
    if (field.use != FieldUse::unused) used.set(args_field_index(field.name));
  return used;
}

void check_unused_fields(const ropejit_args& a, const ArgsFieldSet& used) {
  for (size_t i = 0; i < kArgsFieldCount; ++i) {
    const ArgsField& f = kArgsFields[i];
    if (used.test(i) || field_is_default(f, a) || is_shape_field(f.name)) continue;
    launch_detail::fail(std::string(f.name),
                        fmt::format("{} is not allowed: must be {} unless {} (this spec does not use it)",
                                    field_value_text(f, a), f.kind == ArgsFieldKind::pointer ? "null" : "0",
                                    f.used_by));
  }
}

}  // namespace ropejit
