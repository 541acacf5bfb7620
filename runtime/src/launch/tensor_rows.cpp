// The checks, KernelParams views and buffers derived from tensor rows (launch/tensor_rows.h).
#include "launch/tensor_rows.h"

#include <algorithm>
#include <array>
#include <iterator>

#include <fmt/format.h>

namespace ropejit::launch_detail {

namespace {

// Dim i of a row at `shape` (the spec's dims need none: any shape will do).
int64_t dim(const Spec& spec, const TensorRow& r, size_t i, const LaunchShape& shape = {}) {
  return kDimSymbols[r.dim_ids[i]].value(spec, shape);
}

size_t rank(const TensorRow& r) {
  size_t n = 0;
  while (n < r.dim_ids.size() && r.dim_ids[n] != kNoDim) ++n;
  return n;
}

// The dims that count a row's rows: up to its first LaunchShape dim (T, B, pages: [3, T] is 3T rows
// of one position), none for a weight or a bias (one row of every element).
size_t row_dims(const TensorRow& r) {
  for (size_t i = 0; i < rank(r); ++i)
    if (kDimSymbols[r.dim_ids[i]].from_shape) return i + 1;
  return 0;
}

int64_t product(const Spec& spec, const TensorRow& r, size_t from, size_t to, const LaunchShape& shape) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= dim(spec, r, i, shape);
  return n;
}

// Elements of one row (padded: the heads of one (sequence, position), [H, D]).
int64_t row_elements(const Spec& spec, const TensorRow& r, const LaunchShape& shape = {}) {
  if (r.layout == RowLayout::padded) return dim(spec, r, 1) * dim(spec, r, 3);
  return product(spec, r, row_dims(r), rank(r), shape);
}

// Rows of the whole tensor at `shape` (padded: B * S).
int64_t row_count(const Spec& spec, const TensorRow& r, const LaunchShape& shape) {
  if (r.layout == RowLayout::padded) return dim(spec, r, 0, shape) * dim(spec, r, 2, shape);
  return product(spec, r, 0, row_dims(r), shape);
}

// The innermost dim: the elements of one head (the row itself for a rank-2 tensor).
int64_t head_width(const Spec& spec, const TensorRow& r) {
  if (rank(r) < 2) return 1;  // [T]: one element a token
  return dim(spec, r, rank(r) - 1);
}

int64_t stride_arg(const Args& a, size_t field) { return field == kNoArgsField ? 0 : field_integer(kArgsFields[field], a); }

// Heads of `width` elements that may be further apart than their width: a view of a wider
// projection output (token-major: heads `head_stride` apart, tokens at least `heads` of them
// apart) or a transposed batched matmul's [H, T, width] (head-major: tokens at least `width`
// apart, heads at least T tokens apart). Strides are multiples of the vector width; 0 is dense.
TensorRef bind_head_strided(const FormContext& c, const TensorRow& r, void* ptr, int64_t token_stride,
                            int64_t head_stride, int64_t tokens) {
  const int64_t width = head_width(c.spec, r), count = dim(c.spec, r, 1);
  const int64_t heads = resolve_stride(head_stride, width, c.vec, r.head_stride, count, c.esize);
  int64_t token_major_min = 0, tokens_span = 0, last = 0;
  if (__builtin_mul_overflow(heads, count, &token_major_min))
    fail(r.head_stride, fmt::format("{} is not allowed: {} heads of it overflow 64 bits", heads, count));
  const int64_t rows = token_stride == 0 ? token_major_min : token_stride;
  const bool head_major = !__builtin_mul_overflow(rows, tokens, &tokens_span) && heads >= tokens_span;
  if (token_stride != 0 && (token_stride % c.vec != 0 || token_stride < width ||
                            (token_stride < token_major_min && !head_major)))
    fail(r.token_stride,
         fmt::format("{} is not allowed: must be 0 (dense), a multiple of {} and either >= {} ({} head strides: "
                     "token-major) or, with heads >= T rows apart (head-major), >= {}",
                     token_stride, c.vec, token_major_min, r.dims[1], width));
  if (__builtin_mul_overflow(std::max<int64_t>(tokens - 1, 0), rows, &tokens_span) ||
      __builtin_mul_overflow(count - 1, heads, &last) || __builtin_add_overflow(tokens_span, last, &last) ||
      __builtin_add_overflow(last, width, &last) || __builtin_mul_overflow(last, int64_t{c.esize}, &last))
    fail(r.token_stride, fmt::format("{} is not allowed: {} rows of it overflow a 64-bit byte offset", rows, tokens));
  return TensorRef{ptr, rows, heads, 0};
}

// The q, k and v inputs (or bias rows) as views into each row of one packed tensor: head offsets
// 0, Hq, Hq + Hkv.
void bind_qkv_parts(const FormContext& c, const TensorRow& r, const TensorRef& view, ParamSlot slot, KernelParams& p) {
  check_span(view.ptr, row_elements(c.spec, r) * c.esize, r.name);  // the k and v parts are offsets into its row
  char* base = static_cast<char*>(view.ptr);
  const int64_t first[3] = {0, c.Hq, c.Hq + c.Hkv};
  for (int role = kRoleQ; role <= kRoleV; ++role) {
    char* part = base ? base + first[role] * c.D * c.esize : nullptr;
    if (slot == ParamSlot::bias_qkv) p.bias[role] = part;
    else p.in[role] = token_major(part, view.token_stride, view.head_stride);
  }
}

// A paged cache's pages: its page stride resolved (vectors of codes; NVFP4: bytes) and the
// caches' bytes within int64 (cache_num_pages pages of it).
TensorRef bind_paged(const FormContext& c, const Args& a, const TensorRow& r, void* ptr) {
  const int64_t page_stride = resolve_stride(stride_arg(a, r.stride_field), row_elements(c.spec, r),
                                             nvfp4(c.spec) ? c.vec / 2 : c.vec, r.token_stride);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(a.cache_num_pages, page_stride, &bytes) ||
      __builtin_mul_overflow(bytes, int64_t{cache_dtype_size(c.spec.io.cache_dtype, c.spec.dtype)}, &bytes))
    fail(r.token_stride, fmt::format("{} is not allowed: cache_num_pages {} pages of it overflow a 64-bit size",
                                     page_stride, a.cache_num_pages));
  return cache_tensor(c.spec, ptr, page_stride);
}

// Stores a row's checked view where `slot` says.
void store_view(const FormContext& c, const TensorRow& r, const TensorRef& view, ParamSlot slot, KernelParams& p) {
  switch (slot) {
    case ParamSlot::none: return;
    case ParamSlot::in_q: p.in[kRoleQ] = view; return;
    case ParamSlot::in_k: p.in[kRoleK] = view; return;
    case ParamSlot::in_v: p.in[kRoleV] = view; return;
    case ParamSlot::out_q: p.out[kRoleQ] = view; return;
    case ParamSlot::out_k: p.out[kRoleK] = view; return;
    case ParamSlot::out_v: p.out[kRoleV] = view; return;
    case ParamSlot::heads_in: p.mla_heads_in = view; return;
    case ParamSlot::k_concat: p.k_concat = view; return;
    case ParamSlot::q_scale_out: p.q_scale_out = static_cast<float*>(view.ptr); return;
    case ParamSlot::norm_q: p.norm_weight[0] = view.ptr; return;
    case ParamSlot::norm_k: p.norm_weight[1] = view.ptr; return;
    case ParamSlot::norm_bias_q: p.norm_bias[0] = view.ptr; return;
    case ParamSlot::norm_bias_k: p.norm_bias[1] = view.ptr; return;
    case ParamSlot::slot_mapping: p.slot_mapping = static_cast<const i64*>(view.ptr); return;
    case ParamSlot::positions: p.positions = view.ptr; return;
    case ParamSlot::cu_seqlens: p.cu_seqlens = static_cast<const int32_t*>(view.ptr); return;
    case ParamSlot::start_pos: p.start_pos = static_cast<const i64*>(view.ptr); return;
    case ParamSlot::new_positions: p.new_positions = view.ptr; return;
    case ParamSlot::new_start_pos: p.new_start_pos = static_cast<const i64*>(view.ptr); return;
    case ParamSlot::block_tables: p.block_tables = static_cast<const int32_t*>(view.ptr); return;
    case ParamSlot::scale_cache_k: p.cache_scale_out[0] = static_cast<float*>(view.ptr); return;
    case ParamSlot::scale_cache_v: p.cache_scale_out[1] = static_cast<float*>(view.ptr); return;
    case ParamSlot::in_qkv:
    case ParamSlot::bias_qkv: bind_qkv_parts(c, r, view, slot, p); return;
  }
}

TensorRef bind_row(const FormContext& c, const Args& a, const TensorRow& r) {
  void* ptr = const_cast<void*>(field_pointer(kArgsFields[r.ptr_field], a));
  if ((c.any || (r.needed_without_tokens && r.needed_without_tokens(c.spec))) && r.use == FieldUse::required)
    check_present(ptr, r.name, r.why);
  check_aligned(ptr, r.element->align(c, a.positions_type), r.name);
  if (r.layout == RowLayout::paged) return bind_paged(c, a, r, ptr);
  if (r.layout == RowLayout::padded) {  // [B, H, S, D]: rows D apart, heads S rows, sequences H heads
    const int64_t S = a.max_seq_len, D = head_width(c.spec, r);
    return TensorRef{ptr, D, S * D, dim(c.spec, r, 1) * S * D};
  }
  if (!r.token_stride) return TensorRef{ptr, row_elements(c.spec, r), head_width(c.spec, r), 0};  // dense
  const int64_t token_stride = stride_arg(a, r.stride_field);
  if (r.head_stride)
    return bind_head_strided(c, r, ptr, token_stride, stride_arg(a, r.head_field), a.num_tokens);
  const int64_t rows = resolve_stride(token_stride, row_elements(c.spec, r), c.vec, r.token_stride, a.num_tokens,
                                      c.esize);
  return token_major(ptr, rows, head_width(c.spec, r));
}

}  // namespace

void bind_tensor_rows(const FormContext& c, const Args& a, KernelParams& p, const TensorRow* rows, size_t n) {
  for (const TensorRow* r = rows; r != rows + n; ++r) {
    if (!r->used_by(c.spec)) continue;
    const TensorRef view = bind_row(c, a, *r);
    for (ParamSlot slot : r->slots) store_view(c, *r, view, slot, p);
    if (r->store) r->store(view, p);
  }
}

void buffers_tensor_rows(const Spec& spec, const LaunchShape& shape, const TensorRow* rows, size_t n,
                         std::vector<BufferDesc>& out) {
  for (const TensorRow* r = rows; r != rows + n; ++r) {
    if (!r->used_by(spec)) continue;
    const int64_t row = row_elements(spec, *r, shape);
    BufferDesc b{r->name, r->kind, row_count(spec, *r, shape), row, row, r->element->bytes(spec, shape.positions_type),
                 r->moved ? r->moved(spec) : row, r->token_stride && r->layout != RowLayout::paged, r->dims};
    size_t bound = 0;
    auto add = [&](const char* name, FieldUse use) { b.bound.at(bound++) = {name, use}; };
    if (r->token_stride) add(r->token_stride, FieldUse::optional);
    if (r->head_stride) add(r->head_stride, FieldUse::optional);
    for (const RowField& f : r->fields)
      if (f.name) add(f.name, f.use_of ? f.use_of(spec) : f.use);
    if (r->element == &element::q_output && fp8_q_output(spec) && !q_scale_computed(spec))
      add("q_scale", FieldUse::required);  // FP8 codes of q / q_scale
    b.element_type = r->element->type(spec, shape.positions_type);
    if (r->moved_rows_id != kNoDim) b.moved_rows = kDimSymbols[r->moved_rows_id].value(spec, shape);
    if (r->written) b.written_row_elements = r->written(spec);
    b.also_read = r->also_read;
    b.stride = r->token_stride;
    b.head_stride = r->head_stride;
    b.use = r->use;
    out.push_back(b);
  }
}

namespace {

// The Args fields a row's buffer may bind beside its pointer that are not call sizes (those are
// the dim rows' args_field): each from the launch's shape.
struct ShapeField {
  std::string_view name;
  void (*store)(Args& a, const LaunchShape& shape);
};
constexpr ShapeField kShapeFields[] = {
    {"positions_type", [](Args& a, const LaunchShape& s) { a.positions_type = s.positions_type; }},
    {"k_scale", [](Args& a, const LaunchShape& s) { a.k_scale = s.k_scale; }},
    {"v_scale", [](Args& a, const LaunchShape& s) { a.v_scale = s.v_scale; }},
};

}  // namespace

void bind_row_fields(const BufferDesc& b, const LaunchShape& shape, Args& a) {
  static const Spec kAnySpec{};  // a call size's value reads the shape only
  for (const BoundField& f : b.bound) {
    if (!f.name) continue;
    if (const DimSymbol* size = size_field_row(f.name)) {
      set_field_integer(kArgsFields[args_field_index(f.name)], a, size->value(kAnySpec, shape));
      continue;
    }
    for (const ShapeField& field : kShapeFields)
      if (field.name == f.name) field.store(a, shape);
  }
}

LaunchShape shape_from_args(const Args& a) {
  // Each dim row's ropejit_args field, resolved at compile time (this runs on every launch's check).
  static constexpr auto kFields = [] {
    std::array<size_t, std::size(kDimSymbols)> ids{};
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = args_field_id(kDimSymbols[i].args_field);
    return ids;
  }();
  LaunchShape shape;
  for (size_t i = 0; i < kFields.size(); ++i)
    if (kDimSymbols[i].load) kDimSymbols[i].load(shape, field_integer(kArgsFields[kFields[i]], a));
  shape.positions_type = a.positions_type;
  return shape;
}

}  // namespace ropejit::launch_detail
