// launch_fields (ropejit/introspect.h): the ropejit_args fields a spec's launches use, read off
// the buffers launch_buffers binds, so the list cannot drift from the launch checks.
#include "ropejit/introspect.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launch/dim_symbols.h"
#include "launch/launch_args.h"

namespace ropejit {

namespace {

LaunchField& field_named(std::vector<LaunchField>& fields, std::string_view name) {
  for (LaunchField& f : fields)
    if (f.name == name) return f;
  throw Error(Status::internal, fmt::format("launch buffer field {} is not a ropejit_args field", name));
}

/// Raises a field's use to `use` (required beats optional beats unused).
void mark(LaunchField& field, FieldUse use) { field.use = std::min(field.use, use); }

}  // namespace

std::vector<LaunchField> launch_fields(const Spec& spec) {
  std::vector<LaunchField> fields;
  for (size_t i = 0; const char* name = ropejit_struct_field("ropejit_args", i, nullptr); ++i)
    if (std::string_view(name) != "struct_size") fields.emplace_back().name = name;
  mark(field_named(fields, "num_tokens"), FieldUse::required);
  mark(field_named(fields, "seq_len"), needs_seq_len(spec) ? FieldUse::required : FieldUse::optional);
  // The buffers with int32 and with int64 positions: an element type that differs is either.
  LaunchShape shape;
  const std::vector<BufferDesc> buffers = launch_buffers(spec, shape);
  shape.positions_type = PositionsType::int64;
  const std::vector<BufferDesc> buffers_int64 = launch_buffers(spec, shape);
  for (size_t b = 0; b < buffers.size(); ++b) {
    const BufferDesc& buffer = buffers[b];
    LaunchField& field = field_named(fields, buffer.name);
    mark(field, buffer.use);
    field.written = field.written || buffer.is_written();
    field.whole_output = buffer.kind == BufferKind::output && buffer.moved_rows < 0;  // a cache's scales move slots
    if (buffer.stride) field.stride_field = buffer.stride;
    if (buffer.head_stride) field.head_stride_field = buffer.head_stride;
    const std::string_view type = buffer.element_type;
    field.dtype = type == buffers_int64[b].element_type ? type : "int32|int64";
    for (const char* dim : buffer.dims)
      if (dim) field.dims.emplace_back(dim);
    for (const BoundField& bound : buffer.bound)
      if (bound.name) mark(field_named(fields, bound.name), bound.use);
  }
  return fields;
}

int64_t dim_value(std::string_view symbol, const Spec& spec, const LaunchShape& shape) {
  for (const DimSymbol& row : kDimSymbols)
    if (row.symbol == symbol) return row.value(spec, shape);
  std::vector<std::string_view> allowed;
  for (const DimSymbol& row : kDimSymbols) allowed.push_back(row.symbol);
  throw Error(Status::invalid_argument,
              fmt::format("dim symbol \"{}\" is not allowed: must be one of {}", symbol, fmt::join(allowed, " | ")));
}

std::vector<int64_t> field_shape(const LaunchField& field, const Spec& spec, const LaunchShape& shape) {
  std::vector<int64_t> sizes;
  for (std::string_view dim : field.dims) sizes.push_back(dim_value(dim, spec, shape));
  return sizes;
}

std::vector<CallSize> call_sizes() {
  std::vector<CallSize> sizes;
  for (const DimSymbol& row : kDimSymbols)
    if (row.args_field) sizes.push_back({row.symbol, row.args_field, row.args_offset});
  return sizes;
}

void set_call_size(LaunchShape& shape, std::string_view args_field, int64_t size) {
  if (const DimSymbol* row = size_field_row(args_field)) return row->load(shape, size);
  std::vector<std::string_view> allowed;
  for (const DimSymbol& row : kDimSymbols)
    if (row.load) allowed.push_back(row.args_field);
  throw Error(Status::invalid_argument, fmt::format("call size \"{}\" is not allowed: must be one of {}", args_field,
                                                    fmt::join(allowed, " | ")));
}

}  // namespace ropejit
