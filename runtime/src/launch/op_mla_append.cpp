// Op mla_append's row of the launch op table (docs/ops.md "MLA latent-cache append"): q
// [T, Hq, D] in place or q_out, k_pe [T, d] and kv_c [T, kv_lora_rank] read, the latent cache
// k_cache [pages, page_size, kv_lora_rank + d] written at each token's slot (slot mapping or
// block tables), k_scale for an FP8 cache, the positions form's arrays; with concat_k also
// k_nope [T, Hq, D - d] read (any head stride) and k_out [T, Hq, D] written.
#include "launch/cache_rows.h"

namespace ropejit::launch_detail {

namespace {

// Elements a latent cache row (one slot): kv_lora_rank + d, or fp8_ds_mla's bytes.
int64_t latent_row(const Spec& s) {
  return ds_mla_cache(s) ? ds_mla_row_bytes(s) : int64_t(s.mla_append.kv_lora_rank) + s.rotary_dim;
}

bool q_in_place(const Spec& s) { return s.io.q_output == QOutput::inplace; }
bool q_separate(const Spec& s) { return !q_in_place(s); }
int64_t q_rope_part(const Spec& s) { return int64_t(s.num_q_heads) * s.rotary_dim; }

constexpr const char* kOpWhy = "when the spec's op is mla_append";
constexpr const char* kQOutWhy = "when the spec's io.q_output is separate";
constexpr const char* kConcatWhy = "when mla_append.concat_k is true";

// q in place (its rope part read and written) or read (whole, or its rope part with absorbed_q)
// for q_out [T, Hq, D] (absorbed_q: [T, Hq, kv_lora_rank + d]); absorbed_q's q_latent (heads any
// stride apart); k_pe and kv_c read into the latent cache.
constexpr TensorRow kRows[] = {
    {"q", "q_stride", nullptr, {"T", "Hq", "D"}, BufferKind::inout, q_in_place, kOpWhy,
     {ParamSlot::in_q, ParamSlot::out_q}, q_rope_part, q_rope_part},
    {"q", "q_stride", nullptr, {"T", "Hq", "D"}, BufferKind::input, q_separate, kOpWhy, {ParamSlot::in_q},
     [](const Spec& s) { return s.mla_append.absorbed_q ? q_rope_part(s) : int64_t(s.num_q_heads) * s.head_dim; }},
    {"q_out", "q_out_stride", nullptr, {"T", "Hq", "D"}, BufferKind::output,
     [](const Spec& s) { return q_separate(s) && !s.mla_append.absorbed_q; }, kQOutWhy, {ParamSlot::out_q}, nullptr,
     nullptr, FieldUse::required, &element::q_output},
    {"q_out", "q_out_stride", nullptr, {"T", "Hq", "L+d"}, BufferKind::output,
     [](const Spec& s) { return q_separate(s) && s.mla_append.absorbed_q; }, kQOutWhy, {ParamSlot::out_q}, nullptr,
     nullptr, FieldUse::required, &element::q_output},
    {"q_latent", "q_latent_stride", "q_latent_head_stride", {"T", "Hq", "L"}, BufferKind::input,
     [](const Spec& s) { return s.mla_append.absorbed_q; }, "when mla_append.absorbed_q is true",
     {ParamSlot::heads_in}},
    {"k_pe", "k_pe_stride", nullptr, {"T", "d"}, BufferKind::input, nullptr, kOpWhy, {ParamSlot::in_k}},
    {"kv_c", "kv_c_stride", nullptr, {"T", "L"}, BufferKind::input, nullptr, kOpWhy, {ParamSlot::in_v}},
};

// The latent cache [pages, page_size, kv_lora_rank + d]: one row a slot, written at each token's,
// with k_scale for an FP8 cache; or fp8_ds_mla's rows of bytes (their scales inside).
template <bool kDsMla>
constexpr TensorRow latent_cache_row() {
  return {"k_cache", "k_cache_page_stride", nullptr, {"pages", "page_size", kDsMla ? "ds_mla_row" : "L+d"},
          BufferKind::cache, [](const Spec& s) { return ds_mla_cache(s) == kDsMla; }, kPagedWhy, {ParamSlot::out_k},
          latent_row, nullptr, FieldUse::required, &element::cache, nullptr, RowLayout::paged,
          {RowField{"cache_num_pages"}, RowField{"k_scale", FieldUse::unused, static_scale_use}}, "T"};
}
constexpr TensorRow kLatentCache[] = {latent_cache_row<false>(), latent_cache_row<true>()};

// concat_k (after the latent cache): k_nope's heads (any stride) read, k_out [T, Hq, D] written.
constexpr TensorRow kConcatRows[] = {
    {"k_nope", "k_nope_stride", "k_nope_head_stride", {"T", "Hq", "D-d"}, BufferKind::input,
     [](const Spec& s) { return s.mla_append.concat_k; }, kConcatWhy, {ParamSlot::heads_in}},
    {"k_out", "k_out_stride", nullptr, {"T", "Hq", "D"}, BufferKind::output,
     [](const Spec& s) { return s.mla_append.concat_k; }, kConcatWhy, {ParamSlot::k_concat}},
};

int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kRows);
  bind_tensor_rows(c, a, p, kLatentCache);
  bind_cache_index(c, a, p);
  p.cache_inv_scale[0] = caller_cache_scale(c.spec) ? inverse_scale(c.spec.io.cache_dtype, a.k_scale, "k_scale") : 1.0f;
  bind_tensor_rows(c, a, p, kConcatRows);
  bind_positions(c, a, p);
  return a.num_tokens;
}

void check_host_op(const Spec& spec, const Args& a) {
  check_positions_form_host(spec, a);
  check_paged_host(spec, a);
}

// The tensor rows', the latent cache (one row per token), the slot index, the positions.
void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kRows, out);
  buffers_tensor_rows(s, shape, kLatentCache, out);
  buffers_tensor_rows(s, shape, kConcatRows, out);
  buffers_cache_index(s, shape, out);
  buffers_positions(s, shape, out);
}

}  // namespace

extern const LaunchOp kLaunchOp_mla_append = {
    OpKind::mla_append, bind_op, check_host_op, buffers_op,
    latent_row};  // [kv_c | k_pe]

}  // namespace ropejit::launch_detail
