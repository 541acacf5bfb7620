// The C API's spec introspection (ropejit/ropejit.h): what a spec validated to, its frequencies
// and its launch fields, from the C++ Spec, compute_freqs and launch_fields.
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ropejit/internal/c_api_guard.h"
#include "ropejit/freqs.h"
#include "ropejit/introspect.h"
#include "ropejit/ropejit.h"
#include "ropejit/spec.h"

namespace {

using ropejit::Error;
using ropejit::Status;
using ropejit::c_api::check_struct_size;
using ropejit::c_api::guarded;
using ropejit::c_api::require_non_null;

static_assert(int(ropejit::FieldUse::required) == ROPEJIT_FIELD_REQUIRED &&
                  int(ropejit::FieldUse::optional) == ROPEJIT_FIELD_OPTIONAL &&
                  int(ropejit::FieldUse::unused) == ROPEJIT_FIELD_UNUSED,
              "ropejit_field_use must keep the numbers of ropejit::FieldUse");

/// The static C string of an enum value's name: the enum tables hold whole string literals.
template <class E>
const char* c_name(E value) {
  return ropejit::to_string(value).data();
}

/// `spec_json` parsed and validated, as ropejit_kernel_get does it (the same message on failure).
ropejit::Spec parsed(const char* spec_json) {
  require_non_null(spec_json, "spec_json");
  return ropejit::parse_spec(spec_json);
}

ropejit_spec_info describe(const ropejit::Spec& spec) {
  ropejit_spec_info info{};
  info.struct_size = sizeof(ropejit_spec_info);
  info.head_dim = spec.head_dim;
  info.rotary_dim = spec.rotary_dim;
  info.num_q_heads = spec.num_q_heads;
  info.num_kv_heads = spec.num_kv_heads;
  info.max_position_embeddings = spec.max_position_embeddings;
  info.rope_theta = spec.rope.theta;
  info.layout = c_name(spec.layout);
  info.dtype = c_name(spec.dtype);
  info.angle = c_name(spec.angle);
  info.rope_type = c_name(spec.rope.type);
  const ropejit::IoSpec& io = spec.io;
  info.input = c_name(io.input);
  info.output = c_name(io.output);
  info.positions = c_name(io.positions);
  info.cache_layout = c_name(io.cache_layout);
  info.cache_dtype = c_name(io.cache_dtype);
  info.cache_index = c_name(io.cache_index);
  info.q_output = c_name(io.q_output);
  info.page_size = io.page_size;
  info.qkv_bias = io.qkv_bias;
  info.copy_v = io.copy_v;
  for (size_t i = 0; i < io.mrope_section.size() && i < 3; ++i) info.mrope_section[i] = io.mrope_section[i];
  info.mrope_interleaved = io.mrope_interleaved;
  info.qk_norm = spec.qk_norm.enabled;
  info.qk_norm_weight = spec.qk_norm.enabled ? c_name(spec.qk_norm.weight) : nullptr;
  info.op = c_name(spec.op);
  info.from_rope_type = ropejit::written_rope(spec) ? c_name(spec.from_rope.type) : nullptr;
  const std::string hash = ropejit::spec_hash(spec).hex();
  std::memcpy(info.spec_hash, hash.c_str(), sizeof(info.spec_hash));  // 32 digits and the NUL
  return info;
}

}  // namespace

extern "C" {

ropejit_status ropejit_spec_describe(const char* spec_json, ropejit_spec_info* info) {
  return guarded("ropejit_spec_describe", [&] {
    require_non_null(info, "info (the output)");
    check_struct_size(info->struct_size, sizeof(ropejit_spec_info), "ropejit_spec_info");
    *info = describe(parsed(spec_json));
  });
}

ropejit_status ropejit_spec_canonical_json(const char* spec_json, char** json) {
  return guarded("ropejit_spec_canonical_json", [&] {
    require_non_null(json, "json (the output)");
    *json = nullptr;
    *json = ropejit::c_api::malloc_copy(ropejit::canonical_json(parsed(spec_json)));
  });
}

ropejit_status ropejit_spec_freqs(const char* spec_json, int long_table, double* inv_freq, size_t capacity,
                                  size_t* count, double* attention_factor, double* softmax_scale) {
  return guarded("ropejit_spec_freqs", [&] {
    require_non_null(count, "count (the output)");
    *count = 0;
    const ropejit::Spec spec = parsed(spec_json);
    if (long_table != 0 && long_table != 1)
      throw Error(Status::invalid_argument, fmt::format("long_table {} is not allowed: must be 0 or 1", long_table));
    if (long_table && spec.rope.type != ropejit::RopeType::longrope)
      throw Error(Status::invalid_argument,
                  fmt::format("long_table 1 is not allowed: rope_type {} has one table (only longrope has a long one)",
                              ropejit::to_string(spec.rope.type)));
    const ropejit::FreqTable table = ropejit::compute_freqs(spec, ropejit::FreqMode::hf_fp32);
    const std::vector<double>& values = long_table ? table.inv_freq_long : table.inv_freq;
    *count = values.size();
    if (attention_factor) *attention_factor = long_table ? table.attention_factor_long : table.attention_factor;
    if (softmax_scale) *softmax_scale = table.yarn_attention_softmax_scale.value_or(1.0);
    if (!inv_freq && capacity == 0) return;  // a size query
    require_non_null(inv_freq, "inv_freq");
    if (capacity < values.size())
      throw Error(Status::invalid_argument,
                  fmt::format("capacity {} is not allowed: the table has {} values (rotary_dim / 2)", capacity,
                              values.size()));
    std::memcpy(inv_freq, values.data(), values.size() * sizeof(double));
  });
}

ropejit_status ropejit_spec_launch_field(const char* spec_json, size_t index, ropejit_launch_field* field) {
  return guarded("ropejit_spec_launch_field", [&] {
    require_non_null(field, "field (the output)");
    check_struct_size(field->struct_size, sizeof(ropejit_launch_field), "ropejit_launch_field");
    const std::vector<ropejit::LaunchField> fields = ropejit::launch_fields(parsed(spec_json));
    ropejit_launch_field out{};
    out.struct_size = sizeof(ropejit_launch_field);
    out.use = ROPEJIT_FIELD_UNUSED;
    if (index < fields.size()) {  // past the last: name NULL ends the iteration
      const ropejit::LaunchField& f = fields[index];
      if (f.dims.size() > std::size(out.dims))
        throw Error(Status::internal, fmt::format("launch field {} has {} dims", f.name, f.dims.size()));
      out.name = f.name.data();  // LaunchField's strings view whole literals: NUL-terminated
      out.use = static_cast<ropejit_field_use>(f.use);
      out.dtype = f.dtype.empty() ? nullptr : f.dtype.data();
      out.rank = static_cast<int>(f.dims.size());
      for (size_t d = 0; d < f.dims.size(); ++d) out.dims[d] = f.dims[d].data();
    }
    *field = out;
  });
}

}  // extern "C"
