// The C API (ropejit/ropejit.h) over the C++ Runtime: status codes plus a thread-local
// message; every entry point catches everything so no exception crosses the ABI.
#include "ropejit/ropejit.h"

#include <memory>
#include <new>
#include <string>

#include <fmt/format.h>

#include "ropejit/config.h"
#include "ropejit/error.h"
#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/spec.h"

// Kernels keep their runtime alive (KernelImpl points into the Runtime's backend), so the
// handles share ownership of it.
struct ropejit_runtime {
  std::shared_ptr<ropejit::Runtime> runtime;
};
struct ropejit_kernel {
  std::shared_ptr<ropejit::Runtime> runtime;
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

ropejit_status fail(Status code, std::string message) {
  try {
    last_error = std::move(message);
  } catch (...) {
    // Out of memory while recording the message: keep the code, lose the text.
  }
  return static_cast<ropejit_status>(code);
}

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

void require_non_null(const void* p, const char* name) {
  if (!p) throw Error(Status::invalid_argument, fmt::format("{} is null: must be a valid pointer", name));
}

/// Checks the caller's struct_size against this library's struct (older layouts would be
/// accepted here once the struct grows; today there is one).
void check_struct_size(size_t got, size_t ours, const char* type) {
  if (got == ours) return;
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
              fmt::format("{}.struct_size {} is not allowed: must be {} (sizeof({}))", type, got, ours, type));
}

ropejit::RuntimeOptions to_options(const ropejit_runtime_options& o) {
  ropejit::RuntimeOptions options;
  switch (o.backend) {
    case ROPEJIT_BACKEND_AUTO: options.backend = ropejit::BackendKind::auto_; break;
    case ROPEJIT_BACKEND_CUDA: options.backend = ropejit::BackendKind::cuda; break;
    case ROPEJIT_BACKEND_HOST: options.backend = ropejit::BackendKind::host; break;
    default:
      throw Error(Status::invalid_argument,
                  fmt::format("ropejit_runtime_options.backend {} is not allowed: must be ROPEJIT_BACKEND_AUTO (0), "
                              "ROPEJIT_BACKEND_CUDA (1) or ROPEJIT_BACKEND_HOST (2)",
                              int(o.backend)));
  }
  if (o.cache_dir) options.cache_dir = o.cache_dir;
  options.disk_cache = o.disk_cache != 0;
  if (o.tuning_db) options.tuning_db = o.tuning_db;
  if (o.arch) options.arch = o.arch;
  if (o.device < 0)
    throw Error(Status::invalid_argument,
                fmt::format("ropejit_runtime_options.device {} is not allowed: must be >= 0", o.device));
  options.device = o.device;
  return options;
}

ropejit::Args to_args(const ropejit_args& a) {
  ropejit::Args args;
  args.num_tokens = a.num_tokens;
  args.q = a.q;
  args.k = a.k;
  args.v = a.v;
  args.q_stride = a.q_stride;
  args.k_stride = a.k_stride;
  args.v_stride = a.v_stride;
  args.qkv = a.qkv;
  args.qkv_stride = a.qkv_stride;
  args.bias = a.bias;
  args.q_out = a.q_out;
  args.k_out = a.k_out;
  args.v_out = a.v_out;
  args.q_out_stride = a.q_out_stride;
  args.k_out_stride = a.k_out_stride;
  args.v_out_stride = a.v_out_stride;
  args.positions = a.positions;
  switch (a.positions_type) {
    case ROPEJIT_POSITIONS_INT32: args.positions_type = ropejit::PositionsType::int32; break;
    case ROPEJIT_POSITIONS_INT64: args.positions_type = ropejit::PositionsType::int64; break;
    default:
      throw Error(Status::invalid_argument,
                  fmt::format("positions_type {} is not allowed: must be ROPEJIT_POSITIONS_INT32 (0) or "
                              "ROPEJIT_POSITIONS_INT64 (1)",
                              int(a.positions_type)));
  }
  args.cu_seqlens = a.cu_seqlens;
  args.start_pos = a.start_pos;
  args.batch = a.batch;
  args.max_seq_len = a.max_seq_len;
  args.seq_len = a.seq_len;
  return args;
}

}  // namespace

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
    if (options) {
      check_struct_size(options->struct_size, sizeof(ropejit_runtime_options), "ropejit_runtime_options");
      cxx_options = to_options(*options);
    }
    auto handle = std::make_unique<ropejit_runtime>();
    handle->runtime = std::make_shared<ropejit::Runtime>(std::move(cxx_options));
    *runtime = handle.release();
  });
}

void ropejit_runtime_destroy(ropejit_runtime* runtime) {
  guarded("ropejit_runtime_destroy", [&] { delete runtime; });
}

const char* ropejit_runtime_backend(const ropejit_runtime* runtime) {
  const char* name = nullptr;
  guarded("ropejit_runtime_backend", [&] {
    if (runtime) name = runtime->runtime->backend() == "cuda" ? "cuda" : "host";
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
    ropejit::Kernel cxx_kernel = runtime->runtime->get(spec);
    *kernel = new ropejit_kernel{runtime->runtime, std::move(cxx_kernel)};
  });
}

void ropejit_kernel_destroy(ropejit_kernel* kernel) {
  guarded("ropejit_kernel_destroy", [&] { delete kernel; });
}

ropejit_status ropejit_kernel_launch(const ropejit_kernel* kernel, const ropejit_args* args, void* stream) {
  return guarded("ropejit_kernel_launch", [&] {
    require_non_null(kernel, "kernel");
    require_non_null(args, "args");
    check_struct_size(args->struct_size, sizeof(ropejit_args), "ropejit_args");
    kernel->kernel.launch(to_args(*args), stream);
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

const char* ropejit_status_string(ropejit_status status) {
  if (status < ROPEJIT_STATUS_OK || status > ROPEJIT_STATUS_INTERNAL) return "unknown";
  return ropejit::status_name(static_cast<Status>(status));
}

const char* ropejit_last_error(void) { return last_error.c_str(); }

const char* ropejit_version(void) { return ropejit::version(); }

}  // extern "C"
