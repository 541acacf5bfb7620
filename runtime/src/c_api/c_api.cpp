// The C API (ropejit/ropejit.h) over the C++ Runtime: status codes plus a thread-local
// message; every entry point catches everything so no exception crosses the ABI.
#include "ropejit/ropejit.h"

#include <cstddef>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ropejit/config.h"
#include "ropejit/error.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/spec.h"
#include "ropejit/internal/c_api_guard.h"
#include "launch/args_fields.h"

// A kernel keeps its backend alive and may outlive the Runtime that made it (ropejit/runtime.h),
// so each handle owns just its object: ropejit_runtime_destroy never invalidates a kernel.
struct ropejit_runtime {
  explicit ropejit_runtime(ropejit::RuntimeOptions options) : runtime(std::move(options)) {}
  ropejit::Runtime runtime;
};
struct ropejit_kernel {
  ropejit::Kernel kernel;
};

namespace {

using ropejit::Error;
using ropejit::Status;

static_assert(int(Status::ok) == ROPEJIT_STATUS_OK && int(Status::invalid_spec) == ROPEJIT_STATUS_INVALID_SPEC &&
                  int(Status::invalid_argument) == ROPEJIT_STATUS_INVALID_ARGUMENT &&
                  int(Status::unsupported) == ROPEJIT_STATUS_UNSUPPORTED &&
                  int(Status::compile_error) == ROPEJIT_STATUS_COMPILE_ERROR &&
                  int(Status::backend_error) == ROPEJIT_STATUS_BACKEND_ERROR &&
                  int(Status::io_error) == ROPEJIT_STATUS_IO_ERROR && int(Status::internal) == ROPEJIT_STATUS_INTERNAL,
              "ropejit_status must keep the numbers of ropejit::Status");
static_assert(int(ropejit::BackendKind::auto_) == ROPEJIT_BACKEND_AUTO &&
                  int(ropejit::BackendKind::cuda) == ROPEJIT_BACKEND_CUDA &&
                  int(ropejit::BackendKind::host) == ROPEJIT_BACKEND_HOST,
              "ropejit_backend must keep the numbers of ropejit::BackendKind");

thread_local std::string last_error;

using ropejit::c_api::check_struct_size;
using ropejit::c_api::guarded;
using ropejit::c_api::require_non_null;

/// ropejit_runtime_options as 0.1.0 shipped it ended before on_warning; the next header's
/// before programmatic_dependent_launch.
constexpr size_t kOptionsSizeV010 = offsetof(ropejit_runtime_options, on_warning);
constexpr size_t kOptionsSizeBeforePdl = offsetof(ropejit_runtime_options, programmatic_dependent_launch);

/// The caller's struct (its struct_size bytes, already checked: an older caller's is shorter)
/// with the fields it lacks at the defaults `init` sets.
template <class Struct>
Struct completed(const Struct& given, void (*init)(Struct*)) {
  Struct out;
  init(&out);
  std::memcpy(&out, &given, given.struct_size);
  return out;
}

/// The caller's options (struct_size bytes of them: an older caller's struct is shorter) with
/// the fields it lacks at their defaults.
ropejit_runtime_options complete_options(const ropejit_runtime_options* given) {
  check_struct_size(given->struct_size, sizeof(ropejit_runtime_options), "ropejit_runtime_options",
                    {kOptionsSizeV010, kOptionsSizeBeforePdl});
  return completed(*given, ropejit_runtime_options_init);
}

ropejit::RuntimeOptions to_options(const ropejit_runtime_options& o) {
  ropejit::RuntimeOptions options;
  const int backend = ropejit::c_api::c_enum_value(o.backend);
  switch (backend) {
    case ROPEJIT_BACKEND_AUTO: options.backend = ropejit::BackendKind::auto_; break;
    case ROPEJIT_BACKEND_CUDA: options.backend = ropejit::BackendKind::cuda; break;
    case ROPEJIT_BACKEND_HOST: options.backend = ropejit::BackendKind::host; break;
    default:
      throw Error(Status::invalid_argument,
                  fmt::format("ropejit_runtime_options.backend {} is not allowed: must be ROPEJIT_BACKEND_AUTO (0), "
                              "ROPEJIT_BACKEND_CUDA (1) or ROPEJIT_BACKEND_HOST (2)",
                              backend));
  }
  if (o.cache_dir) options.cache_dir = o.cache_dir;
  options.disk_cache = o.disk_cache != 0;
  if (o.tuning_db) options.tuning_db = o.tuning_db;
  if (o.arch) options.arch = o.arch;
  if (o.device < 0)
    throw Error(Status::invalid_argument,
                fmt::format("ropejit_runtime_options.device {} is not allowed: must be >= 0", o.device));
  options.device = o.device;
  options.programmatic_dependent_launch = o.programmatic_dependent_launch != 0;
  if (auto* callback = o.on_warning) {
    void* user_data = o.user_data;
    // NUL-terminated copy: the C callback takes a const char*. A failed copy (out of memory)
    // throws into warn(), which drops it: the warning is lost, the operation goes on.
    options.on_warning = [callback, user_data](std::string_view message) {
      const std::string text(message);
      callback(text.c_str(), user_data);
    };
  }
  return options;
}

// ropejit::Args is a ropejit_args (ropejit/runtime.h): one copy converts, with no field list to
// keep in step with the header.
static_assert(sizeof(ropejit::Args) == sizeof(ropejit_args), "ropejit::Args must be exactly a ropejit_args");
// The C header declares ropejit_positions_type as a C enum and C++ sees ropejit::PositionsType:
// both must be int-sized for C and C++ callers to agree on the layout of ropejit_args.
static_assert(sizeof(ropejit_positions_type) == sizeof(int) && alignof(ropejit_positions_type) == alignof(int),
              "ropejit::PositionsType must have the size and alignment of a C enum (int)");

ropejit::Args to_args(const ropejit_args& a) {
  // Any int fits a C enum: refuse values the kernel would misread before copying.
  if (a.positions_type != ROPEJIT_POSITIONS_INT32 && a.positions_type != ROPEJIT_POSITIONS_INT64)
    throw Error(Status::invalid_argument,
                fmt::format("positions_type {} is not allowed: must be ROPEJIT_POSITIONS_INT32 (0) or "
                            "ROPEJIT_POSITIONS_INT64 (1)",
                            int(a.positions_type)));
  ropejit::Args args;
  static_cast<ropejit_args&>(args) = a;
  return args;
}

/// One public struct's fields for ropejit_struct_field. The offsets come from the compiler; the
/// args table is generated from ROPEJIT_ARGS_FIELDS (checked to tile ropejit_args); a field
/// missing from the others is caught by tests/c_api/check_ctypes_layout.py (options) and
/// tests/test_introspect.cpp (the introspection structs' ends), one that no longer exists fails to compile.
struct FieldInfo {
  const char* name;
  size_t offset;
};
#define ROPEJIT_FIELD(type, name) FieldInfo{#name, offsetof(type, name)}
constexpr FieldInfo kOptionsFields[] = {
    ROPEJIT_FIELD(ropejit_runtime_options, struct_size), ROPEJIT_FIELD(ropejit_runtime_options, backend),
    ROPEJIT_FIELD(ropejit_runtime_options, cache_dir),   ROPEJIT_FIELD(ropejit_runtime_options, disk_cache),
    ROPEJIT_FIELD(ropejit_runtime_options, tuning_db),   ROPEJIT_FIELD(ropejit_runtime_options, arch),
    ROPEJIT_FIELD(ropejit_runtime_options, device),      ROPEJIT_FIELD(ropejit_runtime_options, on_warning),
    ROPEJIT_FIELD(ropejit_runtime_options, user_data),
    ROPEJIT_FIELD(ropejit_runtime_options, programmatic_dependent_launch),
};
#define ROPEJIT_ARGS_FIELD(f, since, used_by) ROPEJIT_FIELD(ropejit_args, f),
constexpr FieldInfo kArgsLayout[] = {ROPEJIT_FIELD(ropejit_args, struct_size), ROPEJIT_ARGS_FIELDS(ROPEJIT_ARGS_FIELD)};
#undef ROPEJIT_ARGS_FIELD
constexpr FieldInfo kSpecInfoFields[] = {
    ROPEJIT_FIELD(ropejit_spec_info, struct_size),  ROPEJIT_FIELD(ropejit_spec_info, head_dim),
    ROPEJIT_FIELD(ropejit_spec_info, rotary_dim),   ROPEJIT_FIELD(ropejit_spec_info, num_q_heads),
    ROPEJIT_FIELD(ropejit_spec_info, num_kv_heads), ROPEJIT_FIELD(ropejit_spec_info, max_position_embeddings),
    ROPEJIT_FIELD(ropejit_spec_info, rope_theta),   ROPEJIT_FIELD(ropejit_spec_info, layout),
    ROPEJIT_FIELD(ropejit_spec_info, dtype),        ROPEJIT_FIELD(ropejit_spec_info, angle),
    ROPEJIT_FIELD(ropejit_spec_info, rope_type),    ROPEJIT_FIELD(ropejit_spec_info, input),
    ROPEJIT_FIELD(ropejit_spec_info, output),       ROPEJIT_FIELD(ropejit_spec_info, positions),
    ROPEJIT_FIELD(ropejit_spec_info, cache_layout), ROPEJIT_FIELD(ropejit_spec_info, cache_dtype),
    ROPEJIT_FIELD(ropejit_spec_info, cache_index),  ROPEJIT_FIELD(ropejit_spec_info, q_output),
    ROPEJIT_FIELD(ropejit_spec_info, page_size),    ROPEJIT_FIELD(ropejit_spec_info, qkv_bias),
    ROPEJIT_FIELD(ropejit_spec_info, copy_v),       ROPEJIT_FIELD(ropejit_spec_info, mrope_section),
    ROPEJIT_FIELD(ropejit_spec_info, mrope_interleaved), ROPEJIT_FIELD(ropejit_spec_info, qk_norm),
    ROPEJIT_FIELD(ropejit_spec_info, qk_norm_weight), ROPEJIT_FIELD(ropejit_spec_info, spec_hash),
    ROPEJIT_FIELD(ropejit_spec_info, op),            ROPEJIT_FIELD(ropejit_spec_info, from_rope_type),
};
constexpr FieldInfo kLaunchFieldFields[] = {
    ROPEJIT_FIELD(ropejit_launch_field, struct_size), ROPEJIT_FIELD(ropejit_launch_field, name),
    ROPEJIT_FIELD(ropejit_launch_field, use),         ROPEJIT_FIELD(ropejit_launch_field, dtype),
    ROPEJIT_FIELD(ropejit_launch_field, rank),        ROPEJIT_FIELD(ropejit_launch_field, dims),
};
#undef ROPEJIT_FIELD

/// Every struct ropejit_struct_field describes: its name, fields and size.
struct StructInfo {
  const char* type;
  const FieldInfo* fields;
  size_t count;
  size_t size;
};
#define ROPEJIT_STRUCT(type, fields) StructInfo{#type, fields, std::size(fields), sizeof(type)}
constexpr StructInfo kStructs[] = {
    ROPEJIT_STRUCT(ropejit_args, kArgsLayout), ROPEJIT_STRUCT(ropejit_runtime_options, kOptionsFields),
    ROPEJIT_STRUCT(ropejit_spec_info, kSpecInfoFields), ROPEJIT_STRUCT(ropejit_launch_field, kLaunchFieldFields),
};
#undef ROPEJIT_STRUCT

}  // namespace

ropejit_status ropejit::c_api::fail(Status code, std::string message) {
  try {
    last_error = std::move(message);
  } catch (...) {
    // Out of memory while recording the message: keep the code, lose the text.
  }
  return static_cast<ropejit_status>(code);
}

void ropejit::c_api::check_struct_size(size_t got, size_t ours, const char* type, const size_t* older,
                                      size_t count) {
  if (got == ours || std::find(older, older + count, got) != older + count) return;
  if (got == 0)
    throw Error(Status::invalid_argument,
                fmt::format("{}.struct_size is 0: initialize it with {}_init() or set it to sizeof({})", type, type,
                            type));
  if (got > ours)
    throw Error(Status::unsupported,
                fmt::format("{}.struct_size {} is not allowed: this library's {} has {} bytes (the header is newer "
                            "than the library)",
                            type, got, type, ours));
  throw Error(Status::invalid_argument,
              count ? fmt::format("{}.struct_size {} is not allowed: must be {} (sizeof({})) or an earlier "
                                  "release's size ({})",
                                  type, got, ours, type, fmt::join(older, older + count, ", "))
                           : fmt::format("{}.struct_size {} is not allowed: must be {} (sizeof({}))", type, got, ours, type));
}

char* ropejit::c_api::malloc_copy(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

extern "C" {

void ropejit_runtime_options_init(ropejit_runtime_options* options) {
  if (!options) return;
  *options = ropejit_runtime_options{};
  options->struct_size = sizeof(ropejit_runtime_options);
  options->backend = ROPEJIT_BACKEND_AUTO;
  options->disk_cache = 1;
  options->device = 0;
}

void ropejit_args_init(ropejit_args* args) {
  if (!args) return;
  *args = ropejit_args{};
  args->struct_size = sizeof(ropejit_args);
  args->positions_type = ROPEJIT_POSITIONS_INT32;
}

ropejit_status ropejit_runtime_create(const ropejit_runtime_options* options, ropejit_runtime** runtime) {
  return guarded("ropejit_runtime_create", [&] {
    require_non_null(runtime, "runtime (the output handle)");
    *runtime = nullptr;
    ropejit::RuntimeOptions cxx_options;
    if (options) cxx_options = to_options(complete_options(options));
    *runtime = new ropejit_runtime(std::move(cxx_options));
  });
}

void ropejit_runtime_destroy(ropejit_runtime* runtime) {
  guarded("ropejit_runtime_destroy", [&] { delete runtime; });
}

const char* ropejit_runtime_backend(const ropejit_runtime* runtime) {
  const char* name = nullptr;
  guarded("ropejit_runtime_backend", [&] {
    if (runtime) name = runtime->runtime.backend() == "cuda" ? "cuda" : "host";
  });
  return name;
}

ropejit_status ropejit_kernel_get(ropejit_runtime* runtime, const char* spec_json, ropejit_kernel** kernel) {
  return guarded("ropejit_kernel_get", [&] {
    require_non_null(kernel, "kernel (the output handle)");
    *kernel = nullptr;
    require_non_null(runtime, "runtime");
    require_non_null(spec_json, "spec_json");
    const ropejit::Spec spec = ropejit::parse_spec(spec_json);
    *kernel = new ropejit_kernel{runtime->runtime.get(spec)};
  });
}

void ropejit_kernel_destroy(ropejit_kernel* kernel) {
  guarded("ropejit_kernel_destroy", [&] { delete kernel; });
}

ropejit_status ropejit_kernel_launch(const ropejit_kernel* kernel, const ropejit_args* args, void* stream) {
  return guarded("ropejit_kernel_launch", [&] {
    require_non_null(kernel, "kernel");
    require_non_null(args, "args");
    check_struct_size(args->struct_size, sizeof(ropejit_args), "ropejit_args", ropejit::kArgsOlderSizes.data(),
                      ropejit::kArgsOlderSizes.size());
    kernel->kernel.launch(to_args(completed(*args, ropejit_args_init)), stream);
  });
}

ropejit_status ropejit_kernel_bytes_moved(const ropejit_kernel* kernel, int64_t num_tokens, int batch,
                                          int64_t max_seq_len, int64_t* bytes) {
  return guarded("ropejit_kernel_bytes_moved", [&] {
    require_non_null(bytes, "bytes (the output)");
    *bytes = 0;
    require_non_null(kernel, "kernel");
    if (num_tokens < 0)
      throw Error(Status::invalid_argument, fmt::format("num_tokens {} is not allowed: must be >= 0", num_tokens));
    if (batch < 0 || max_seq_len < 0)
      throw Error(Status::invalid_argument,
                  fmt::format("batch {} / max_seq_len {} is not allowed: must be >= 0", batch, max_seq_len));
    *bytes = ropejit::bytes_moved(kernel->kernel.spec(), num_tokens, batch, max_seq_len);
  });
}

const char* ropejit_struct_field(const char* type, size_t index, size_t* offset) {
  const char* name = nullptr;
  size_t at = 0;
  for (const StructInfo& s : kStructs)
    if (type && std::strcmp(type, s.type) == 0) {
      name = index < s.count ? s.fields[index].name : nullptr;
      at = index < s.count ? s.fields[index].offset : s.size;
    }
  if (offset) *offset = at;
  return name;
}

const char* ropejit_status_string(ropejit_status status) {
  const int code = ropejit::c_api::c_enum_value(status);
  if (code < ROPEJIT_STATUS_OK || code > ROPEJIT_STATUS_INTERNAL) return "unknown";
  return ropejit::status_name(static_cast<Status>(code));
}

const char* ropejit_last_error(void) { return last_error.c_str(); }

const char* ropejit_version(void) { return ropejit::version(); }

}  // extern "C"
