#pragma once
// The C API's exception barrier, shared by every file that defines C entry points (c_api.cpp,
// c_api_introspect.cpp, inspect/src/c_api_emit.cpp): no exception crosses the ABI; the message goes to the
// thread-local ropejit_last_error().
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>

#include <fmt/format.h>

#include "ropejit/error.h"
#include "ropejit/ropejit.h"

namespace ropejit::c_api {

/// Records `message` as this thread's last error and returns `code` as a C status.
ropejit_status fail(Status code, std::string message);

/// Runs `body`, mapping every exception to a status and a message.
template <class Body>
ropejit_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return ROPEJIT_STATUS_OK;
  } catch (const Error& e) {
    std::string message = e.what();
    if (!e.log().empty()) message += "\n" + e.log();
    return fail(e.code(), std::move(message));
  } catch (const std::bad_alloc&) {
    return fail(Status::internal, std::string(function) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(Status::internal, std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return fail(Status::internal, std::string(function) + ": internal error: unknown exception");
  }
}

/// Checks the caller's struct_size: `ours` (sizeof in this library) or, for a struct that grew,
/// one of the `count` sizes at `older` (its earlier releases'; the fields past them keep their defaults).
void check_struct_size(size_t got, size_t ours, const char* type, const size_t* older, size_t count);
/// The same with the earlier sizes listed.
inline void check_struct_size(size_t got, size_t ours, const char* type, std::initializer_list<size_t> older = {}) {
  check_struct_size(got, ours, type, older.begin(), older.size());
}

/// `text` as a NUL-terminated copy the C caller releases with free().
char* malloc_copy(const std::string& text);

/// Error(invalid_argument) naming `name` when `p` is null.
inline void require_non_null(const void* p, const char* name) {
  if (!p) throw Error(Status::invalid_argument, fmt::format("{} is null: must be a valid pointer", name));
}

/// The int a C caller stored in an enum argument or field: read as an int, because loading a
/// C++ enum holding a value outside its range is undefined behaviour.
template <class E>
int c_enum_value(const E& value) {
  static_assert(sizeof(E) == sizeof(int), "C API enums are int-sized");
  int out = 0;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

}  // namespace ropejit::c_api
