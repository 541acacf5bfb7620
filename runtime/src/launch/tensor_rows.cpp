// The checks, KernelParams views and buffers derived from tensor rows (launch/tensor_rows.h).
#include "launch/tensor_rows.h"

#include <algorithm>

#include <fmt/format.h>

namespace ropejit::launch_detail {

namespace {

constexpr uint8_t kTokenDim = dim_symbol_id("T");

// Dim i of a row at `shape` (dims after the first are the spec's: any shape will do).
int64_t dim(const Spec& spec, const TensorRow& r, size_t i, const LaunchShape& shape = {}) {
  return kDimSymbols[r.dim_ids[i]].value(spec, shape);
}

// Elements of one token row: the product of the dims after the first.
int64_t row_elements(const Spec& spec, const TensorRow& r) {
  int64_t n = 1;
  for (size_t i = 1; i < r.dim_ids.size() && r.dim_ids[i] != kNoDim; ++i) n *= dim(spec, r, i);
  return n;
}

// Elements of the whole of a one-row tensor (a weight, a bias), or of one token row.
int64_t dense_row(const Spec& spec, const TensorRow& r) {
  return row_elements(spec, r) * (r.dim_ids[0] == kTokenDim ? 1 : dim(spec, r, 0));
}

// The innermost dim: the elements of one head (the row itself for a rank-2 tensor).
int64_t head_width(const Spec& spec, const TensorRow& r) {
  if (r.dim_ids[1] == kNoDim) return 1;  // [T]: one element a token
  size_t last = 1;
  while (last + 1 < r.dim_ids.size() && r.dim_ids[last + 1] != kNoDim) ++last;
  return dim(spec, r, last);
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
  check_span(view.ptr, dense_row(c.spec, r) * c.esize, r.name);  // the k and v parts are offsets into its row
  char* base = static_cast<char*>(view.ptr);
  const int64_t first[3] = {0, c.Hq, c.Hq + c.Hkv};
  for (int role = kRoleQ; role <= kRoleV; ++role) {
    char* part = base ? base + first[role] * c.D * c.esize : nullptr;
    if (slot == ParamSlot::bias_qkv) p.bias[role] = part;
    else p.in[role] = token_major(part, view.token_stride, view.head_stride);
  }
}

// Bytes a row's pointer is aligned to: a vector of the storage dtype, else one element.
int element_align(const FormContext& c, RowElement element) {
  switch (element) {
    case RowElement::storage: return c.align;
    case RowElement::fp32: return 4;
    case RowElement::int64: return 8;
  }
  return c.align;
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
    case ParamSlot::slot_mapping: p.slot_mapping = static_cast<const i64*>(view.ptr); return;
    case ParamSlot::in_qkv:
    case ParamSlot::bias_qkv: bind_qkv_parts(c, r, view, slot, p); return;
  }
}

TensorRef bind_row(const FormContext& c, const Args& a, const TensorRow& r) {
  void* ptr = const_cast<void*>(field_pointer(kArgsFields[r.ptr_field], a));
  if ((c.any || (r.needed_without_tokens && r.needed_without_tokens(c.spec))) && r.use == FieldUse::required)
    check_present(ptr, r.name, r.why);
  check_aligned(ptr, element_align(c, r.element), r.name);
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
  }
}

void buffers_tensor_rows(const Spec& spec, const LaunchShape& shape, const TensorRow* rows, size_t n,
                         std::vector<BufferDesc>& out) {
  for (const TensorRow* r = rows; r != rows + n; ++r) {
    if (!r->used_by(spec)) continue;
    // Token rows, or (a weight, a bias) one row of every element.
    const bool tokens = r->dim_ids[0] == kTokenDim;
    const int64_t row = dense_row(spec, *r);
    BufferDesc b = data_buffer(spec, r->name, r->kind, tokens ? dim(spec, *r, 0, shape) : 1, row,
                               r->moved ? r->moved(spec) : row, r->token_stride != nullptr, nullptr, r->dims,
                               r->token_stride);
    if (r->element == RowElement::fp32) {
      b.element_bytes = 4;
      b.fp32 = true;
    } else if (r->element == RowElement::int64) {
      b.element_bytes = 8;
    }
    if (r->head_stride) b.bound[1] = {r->head_stride, FieldUse::optional};
    if (r->written) b.written_row_elements = r->written(spec);
    b.use = r->use;
    out.push_back(b);
  }
}

}  // namespace ropejit::launch_detail
