// Op mla_append's row of the launch op table (docs/spec.md "MLA latent-cache append"): q
// [T, Hq, D] in place or q_out, k_pe [T, d] and kv_c [T, kv_lora_rank] read, the latent cache
// k_cache [pages, page_size, kv_lora_rank + d] written at each token's slot (slot mapping or
// block tables), k_scale for an FP8 cache, the positions form's arrays; with concat_k also
// k_nope [T, Hq, D - d] read (any head stride) and k_out [T, Hq, D] written.
#include <algorithm>

#include "launch/launch_checks.h"

namespace ropejit::launch_detail {

namespace {

int64_t latent_row(const Spec& s) { return int64_t(s.mla_append.kv_lora_rank) + s.rotary_dim; }

// An input of Hq heads of `width` elements whose heads may be further apart than their width: a
// view of a wider projection output (token-major: heads `head_stride` apart, tokens at least Hq
// of them apart) or a transposed batched matmul's [Hq, T, width] (head-major: tokens at least
// `width` apart, heads at least T tokens apart). Strides are multiples of the vector width; 0 is
// dense (width; Hq head strides).
TensorRef bind_head_strided(const FormContext& c, const void* ptr, int64_t token_stride, int64_t head_stride,
                            int64_t width, int64_t tokens, const char* name, const char* token_name,
                            const char* head_name, const char* why) {
  if (c.any) check_present(ptr, name, why);
  check_aligned(ptr, c.align, name);
  const int64_t heads = resolve_stride(head_stride, width, c.vec, head_name, c.Hq, c.esize);
  int64_t token_major_min = 0, tokens_span = 0, last = 0;
  if (__builtin_mul_overflow(heads, c.Hq, &token_major_min))
    fail(head_name, fmt::format("{} is not allowed: {} heads of it overflow 64 bits", heads, c.Hq));
  int64_t rows = token_stride == 0 ? token_major_min : token_stride;
  const bool head_major = !__builtin_mul_overflow(rows, tokens, &tokens_span) && heads >= tokens_span;
  if (token_stride != 0 && (token_stride % c.vec != 0 || token_stride < width ||
                            (token_stride < token_major_min && !head_major)))
    fail(token_name, fmt::format("{} is not allowed: must be 0 (dense), a multiple of {} and either >= {} (Hq "
                                 "head strides: token-major) or, with heads >= T rows apart (head-major), >= {}",
                                 token_stride, c.vec, token_major_min, width));
  if (__builtin_mul_overflow(std::max<int64_t>(tokens - 1, 0), rows, &tokens_span) ||
      __builtin_mul_overflow(c.Hq - 1, heads, &last) || __builtin_add_overflow(tokens_span, last, &last) ||
      __builtin_add_overflow(last, width, &last) || __builtin_mul_overflow(last, int64_t{c.esize}, &last))
    fail(token_name, fmt::format("{} is not allowed: {} rows of it overflow a 64-bit byte offset", rows, tokens));
  return TensorRef{const_cast<void*>(ptr), rows, heads, 0};
}

// concat_k: k_nope's heads (any stride, bind_head_strided); k_out dense heads of D.
void bind_concat_k(const FormContext& c, const Args& a, KernelParams& p) {
  const char* why = "when mla_append.concat_k is true";
  p.mla_heads_in = bind_head_strided(c, a.k_nope, a.k_nope_stride, a.k_nope_head_stride, c.D - c.spec.rotary_dim,
                               a.num_tokens, "k_nope", "k_nope_stride", "k_nope_head_stride", why);
  if (c.any) check_present(a.k_out, "k_out", why);
  check_aligned(a.k_out, c.align, "k_out");
  p.k_concat = token_major(a.k_out, resolve_stride(a.k_out_stride, c.Hq * c.D, c.vec, "k_out_stride", a.num_tokens, c.esize),
                           c.D);
}

// Elements of one q_out head: D, or kv_lora_rank + d with absorbed_q.
int64_t q_out_width(const Spec& s) { return s.mla_append.absorbed_q ? latent_row(s) : s.head_dim; }

int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  const Spec& s = c.spec;
  const char* why = "when the spec's op is mla_append";
  if (c.any) {
    check_present(a.q, "q", why);
    check_present(a.k_pe, "k_pe", why);
    check_present(a.kv_c, "kv_c", why);
  }
  check_aligned(a.q, c.align, "q");
  check_aligned(a.k_pe, c.align, "k_pe");
  check_aligned(a.kv_c, c.align, "kv_c");
  p.in[kRoleQ] = token_major(a.q, resolve_stride(a.q_stride, c.Hq * c.D, c.vec, "q_stride", a.num_tokens, c.esize), c.D);
  if (s.io.q_output == QOutput::inplace) {
    p.out[kRoleQ] = p.in[kRoleQ];
  } else {
    if (c.any) check_present(a.q_out, "q_out", "when the spec's io.q_output is separate");
    check_aligned(a.q_out, c.align, "q_out");
    const int64_t width = q_out_width(s);
    p.out[kRoleQ] =
        token_major(a.q_out, resolve_stride(a.q_out_stride, c.Hq * width, c.vec, "q_out_stride", a.num_tokens, c.esize),
                    width);
  }
  if (s.mla_append.absorbed_q)
    p.mla_heads_in = bind_head_strided(c, a.q_latent, a.q_latent_stride, a.q_latent_head_stride, s.mla_append.kv_lora_rank,
                                 a.num_tokens, "q_latent", "q_latent_stride", "q_latent_head_stride",
                                 "when mla_append.absorbed_q is true");
  p.in[kRoleK] = token_major(const_cast<void*>(a.k_pe),
                             resolve_stride(a.k_pe_stride, s.rotary_dim, c.vec, "k_pe_stride", a.num_tokens, c.esize),
                             s.rotary_dim);
  const int64_t rank = s.mla_append.kv_lora_rank;
  p.in[kRoleV] = token_major(const_cast<void*>(a.kv_c),
                             resolve_stride(a.kv_c_stride, rank, c.vec, "kv_c_stride", a.num_tokens, c.esize), rank);
  // The latent cache: one head of kv_lora_rank + d elements a slot (bind_cache's checks at that width).
  FormContext row = c;
  row.D = latent_row(s);
  row.Hkv = 1;
  p.out[kRoleK] = bind_cache(row, a.k_cache, a.k_cache_page_stride, "k_cache", "k_cache_page_stride", a.cache_num_pages);
  bind_cache_index(c, a, p);
  p.cache_inv_scale[0] = inverse_scale(c.spec.io.cache_dtype, a.k_scale, "k_scale");
  if (s.mla_append.concat_k) bind_concat_k(c, a, p);
  bind_positions(c, a, p);
  return a.num_tokens;
}

void check_host_op(const Spec& spec, const Args& a) {
  check_positions_form_host(spec, a);
  check_paged_host(spec, a);
}

void bind_latent_cache_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t stride) {
  a.k_cache = ptr;
  a.k_cache_page_stride = stride;
  a.k_scale = shape.k_scale;
  a.cache_num_pages = shape.cache_pages;
}

// q (in place, its rope part moved; or read whole and q_out written whole), k_pe and kv_c read,
// the latent cache (one row per token), the slot index, the positions.
void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int64_t D = s.head_dim, Hq = s.num_q_heads, rank = s.mla_append.kv_lora_rank;
  const bool inplace = s.io.q_output == QOutput::inplace, absorbed = s.mla_append.absorbed_q;
  const int64_t q_read = inplace || absorbed ? Hq * s.rotary_dim : Hq * D, width = q_out_width(s);
  out.push_back(data_buffer(s, "q", inplace ? BufferKind::inout : BufferKind::input, shape.tokens, Hq * D, q_read,
                            true, bind_to<&ropejit_args::q, &ropejit_args::q_stride>, {"T", "Hq", "D"}, "q_stride"));
  if (inplace)
    out.back().written_row_elements = Hq * s.rotary_dim;
  else
    out.push_back(data_buffer(s, "q_out", BufferKind::output, shape.tokens, Hq * width, Hq * width, true,
                              bind_to<&ropejit_args::q_out, &ropejit_args::q_out_stride>,
                              {"T", "Hq", absorbed ? "L+d" : "D"}, "q_out_stride"));
  if (absorbed) {
    out.push_back(data_buffer(s, "q_latent", BufferKind::input, shape.tokens, Hq * rank, Hq * rank, true,
                              bind_to<&ropejit_args::q_latent, &ropejit_args::q_latent_stride>, {"T", "Hq", "L"},
                              "q_latent_stride"));
    out.back().bound[1] = {"q_latent_head_stride", FieldUse::optional};
  }
  out.push_back(data_buffer(s, "k_pe", BufferKind::input, shape.tokens, s.rotary_dim, s.rotary_dim, true,
                            bind_to<&ropejit_args::k_pe, &ropejit_args::k_pe_stride>, {"T", "d"}, "k_pe_stride"));
  out.push_back(data_buffer(s, "kv_c", BufferKind::input, shape.tokens, rank, rank, true,
                            bind_to<&ropejit_args::kv_c, &ropejit_args::kv_c_stride>, {"T", "L"}, "kv_c_stride"));
  const int64_t page_elements = int64_t(s.io.page_size) * latent_row(s);
  const FieldUse scale_use = s.io.cache_dtype == CacheDType::auto_ ? FieldUse::unused : FieldUse::required;
  BufferDesc cache{"k_cache", BufferKind::cache, shape.cache_pages, page_elements, page_elements,
                   cache_dtype_size(s.io.cache_dtype, s.dtype), latent_row(s), false, bind_latent_cache_ptr,
                   {"pages", "page_size", "L+d"},
                   {BoundField{"cache_num_pages", FieldUse::required}, {"k_cache_page_stride", FieldUse::optional},
                    {"k_scale", scale_use}}};
  cache.moved_rows = shape.tokens;  // one row per token
  out.push_back(cache);
  if (s.mla_append.concat_k) {
    const int64_t nope = D - s.rotary_dim;
    out.push_back(data_buffer(s, "k_nope", BufferKind::input, shape.tokens, Hq * nope, Hq * nope, true,
                              bind_to<&ropejit_args::k_nope, &ropejit_args::k_nope_stride>, {"T", "Hq", "D-d"},
                              "k_nope_stride"));
    out.back().bound[1] = {"k_nope_head_stride", FieldUse::optional};
    out.push_back(data_buffer(s, "k_out", BufferKind::output, shape.tokens, Hq * D, Hq * D, true,
                              bind_to<&ropejit_args::k_out, &ropejit_args::k_out_stride>, {"T", "Hq", "D"},
                              "k_out_stride"));
  }
  out.push_back(cache_index_buffer(s, shape));
  buffers_positions(s, shape, out);
}

}  // namespace

extern const LaunchOp kLaunchOp_mla_append = {
    OpKind::mla_append, bind_op, check_host_op, buffers_op,
    [](const Spec& spec) { return int64_t(spec.mla_append.kv_lora_rank) + spec.rotary_dim; }};  // [kv_c | k_pe]

}  // namespace ropejit::launch_detail
