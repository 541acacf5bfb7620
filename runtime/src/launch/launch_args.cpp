// Launch argument checks (docs/architecture.md §9): bad input never reaches a kernel; and
// each io form's buffers, so the workload builders and bytes_moved follow the same rows.
#include "launch/launch_args.h"
#include "launch/launch_checks.h"
#include "launch/tensor_rows.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "ropejit/freqs.h"

namespace ropejit {

namespace {

using namespace launch_detail;

constexpr int64_t kMaxTokens = int64_t(1) << 40;
// ---------------------------------------------------------------- input forms

bool copies_v(const Spec& s) { return s.io.copy_v; }
int64_t q_moved(const Spec& s) { return s.num_q_heads * q_moved_per_head(s); }
int64_t k_moved(const Spec& s) { return s.num_kv_heads * k_moved_per_head(s); }
constexpr const char* kCopyVWhy = "when the spec copies v (io.copy_v)";

// Separate q, k and v (when copied) [T, H, D], read (rewritten by the inplace output form).
constexpr TensorRow kInputSeparate[] = {
    {"q", "q_stride", nullptr, {"T", "Hq", "D"}, BufferKind::input, nullptr, "when the spec's io.input is separate",
     {ParamSlot::in_q}, q_moved},
    {"k", "k_stride", nullptr, {"T", "Hkv", "D"}, BufferKind::input, nullptr, "when the spec's io.input is separate",
     {ParamSlot::in_k}, k_moved},
    {"v", "v_stride", nullptr, {"T", "Hkv", "D"}, BufferKind::input, copies_v, kCopyVWhy, {ParamSlot::in_v}},
};

// The separate output form's q_out, k_out, v_out (when copied) [T, H, D], written.
constexpr TensorRow kOutputSeparate[] = {
    {"q_out", "q_out_stride", nullptr, {"T", "Hq", "D"}, BufferKind::output, nullptr,
     "when the spec's io.output is not inplace", {ParamSlot::out_q}, q_moved, nullptr, FieldUse::required,
     &element::q_output},
    {"k_out", "k_out_stride", nullptr, {"T", "Hkv", "D"}, BufferKind::output, nullptr,
     "when the spec's io.output is not inplace", {ParamSlot::out_k}, k_moved},
    {"v_out", "v_out_stride", nullptr, {"T", "Hkv", "D"}, BufferKind::output, copies_v, kCopyVWhy,
     {ParamSlot::out_v}},
};

void bind_input_separate(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kInputSeparate);
}

// Packed [T, Hq + 2 Hkv, D]: q, k and v heads of each token in one row, read.
constexpr TensorRow kInputPacked[] = {
    {"qkv", "qkv_stride", nullptr, {"T", "Hq+2Hkv", "D"}, BufferKind::input, nullptr,
     "when the spec's io.input is packed_qkv", {ParamSlot::in_qkv},
     [](const Spec& s) { return q_moved(s) + k_moved(s) + (s.io.copy_v ? int64_t(s.num_kv_heads) * s.head_dim : 0); }},
};

void bind_input_packed(const FormContext& c, const Args& a, KernelParams& p) { bind_tensor_rows(c, a, p, kInputPacked); }

// ---------------------------------------------------------------- output forms (return grid rows)

int64_t bind_output_inplace(const FormContext&, const Args& a, KernelParams& p) {
  for (int r = 0; r < 3; ++r) p.out[r] = p.in[r];
  return a.num_tokens;
}

int64_t bind_output_separate(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kOutputSeparate);
  return a.num_tokens;
}

// Padded [B, H, S, D] outputs (each row its sequence's and position's), which need max_seq_len;
// padding rows are written (zeros) even when no token arrives.
bool no_tokens_needed(const Spec&) { return true; }
constexpr TensorRow kOutputPadded[] = {
    {"q_out", nullptr, nullptr, {"B", "Hq", "S", "D"}, BufferKind::output, nullptr,
     "when the spec's io.output is not inplace", {ParamSlot::out_q}, q_moved, nullptr, FieldUse::required,
     &element::q_output, no_tokens_needed, RowLayout::padded, {RowField{"max_seq_len"}}},
    {"k_out", nullptr, nullptr, {"B", "Hkv", "S", "D"}, BufferKind::output, nullptr,
     "when the spec's io.output is not inplace", {ParamSlot::out_k}, k_moved, nullptr, FieldUse::required,
     &element::storage, no_tokens_needed, RowLayout::padded, {RowField{"max_seq_len"}}},
    {"v_out", nullptr, nullptr, {"B", "Hkv", "S", "D"}, BufferKind::output, copies_v, kCopyVWhy, {ParamSlot::out_v},
     nullptr, nullptr, FieldUse::required, &element::storage, no_tokens_needed, RowLayout::padded,
     {RowField{"max_seq_len"}}},
};

int64_t bind_output_padded(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kOutputPadded);
  require(a.max_seq_len >= 1 && a.max_seq_len <= (1 << 30), "max_seq_len",
          fmt::format("{} is not allowed: must be in [1, 2^30] for padded_bhsd", a.max_seq_len));
  p.max_seq_len = a.max_seq_len;
  return int64_t(a.batch) * a.max_seq_len;
}

// ---------------------------------------------------------------- buffers of one launch, per form

void buffers_input_separate(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kInputSeparate, out);
}

void buffers_input_packed(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kInputPacked, out);
}

void buffers_output_inplace(const Spec&, const LaunchShape&, std::vector<BufferDesc>& out) {
  for (BufferDesc& b : out)
    if (b.kind == BufferKind::input) b.kind = BufferKind::inout;
}

void buffers_output_separate(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kOutputSeparate, out);
}

void buffers_output_padded(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kOutputPadded, out);
}

// QKV bias: one row of [(Hq + 2 Hkv) D], split by role like the packed input; padded outputs
// write the bias into padding rows, so it is needed with no tokens too.
constexpr TensorRow kBias[] = {
    {"bias", nullptr, nullptr, {"Hq+2Hkv", "D"}, BufferKind::bias, [](const Spec& s) { return s.io.qkv_bias; },
     "when the spec's io.qkv_bias is true", {ParamSlot::bias_qkv}, nullptr, nullptr, FieldUse::required,
     &element::storage, [](const Spec& s) { return s.io.output == OutputForm::padded_bhsd; }},
};

void buffers_bias(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kBias, out);
}

// One descriptor per form, indexed by the spec's enum: a new form is one row and its binder.
using AddBuffers = void (*)(const Spec&, const LaunchShape&, std::vector<BufferDesc>&);
struct InputFormOps {
  InputForm form;
  void (*bind)(const FormContext&, const Args&, KernelParams&);
  AddBuffers buffers;
};
struct OutputFormOps {
  OutputForm form;
  int64_t (*bind)(const FormContext&, const Args&, KernelParams&);
  AddBuffers buffers;  // after the inputs: inplace marks them rewritten
  void (*check_host)(const Spec&, const Args&);  // reads host arrays (host backend only), or null
};

constexpr InputFormOps kInputForms[] = {{InputForm::separate, bind_input_separate, buffers_input_separate},
                                        {InputForm::packed_qkv, bind_input_packed, buffers_input_packed}};
constexpr OutputFormOps kOutputForms[] = {
    {OutputForm::inplace, bind_output_inplace, buffers_output_inplace, nullptr},
    {OutputForm::separate, bind_output_separate, buffers_output_separate, nullptr},
    {OutputForm::padded_bhsd, bind_output_padded, buffers_output_padded, nullptr},
    {OutputForm::paged_kv, bind_output_paged, buffers_output_paged, check_paged_host}};

template <class Ops, size_t N, class Form>
const Ops& find_form(const Ops (&table)[N], Form form) {
  for (const Ops& ops : table)
    if (ops.form == form) return ops;
  throw Error(Status::internal, fmt::format("no launch descriptor for io form {}", to_string(form)));
}

void bind_bias(const FormContext& c, const Args& a, KernelParams& p) { bind_tensor_rows(c, a, p, kBias); }

// QK-norm weights (qk_norm with weight per_head) for q and k, in the storage dtype, read as
// vectors like the data: [D] each (scope head, shared by the heads), or [Hq, D] and [Hkv, D]
// (scope all, HF's q_norm.weight of Hq·D values); q's only when q is normed (heads q_and_k).
// A LayerNorm's biases (bias per_head) likewise, [D] each (scope head only).
template <NormScope kScope, int kRole>
bool norm_weights(const Spec& s) {
  return s.qk_norm.enabled && s.qk_norm.weight == NormWeight::per_head && s.qk_norm.scope == kScope &&
         (kRole == kRoleK || norm_of_q(s));
}
template <int kRole>
bool norm_biases(const Spec& s) {
  return s.qk_norm.enabled && s.qk_norm.bias == NormWeight::per_head && (kRole == kRoleK || norm_of_q(s));
}
constexpr const char* kNormHeadWhy = "when the spec's qk_norm has weight per_head ([head_dim])";
constexpr const char* kNormQHeadWhy = "when the spec's qk_norm has weight per_head ([head_dim]) and heads q_and_k";
constexpr const char* kNormAllWhy =
    "when the spec's qk_norm has weight per_head and scope all (q [Hq, head_dim], k [Hkv, head_dim])";
constexpr const char* kNormBiasWhy = "when the spec's qk_norm is a layernorm with bias per_head ([head_dim])";
constexpr const char* kNormQBiasWhy =
    "when the spec's qk_norm is a layernorm with bias per_head ([head_dim]) and heads q_and_k";

constexpr TensorRow kNormWeights[] = {
    {"q_norm_weight", nullptr, nullptr, {"D"}, BufferKind::norm_weight, norm_weights<NormScope::head, kRoleQ>,
     kNormQHeadWhy, {ParamSlot::norm_q}},
    {"q_norm_weight", nullptr, nullptr, {"Hq", "D"}, BufferKind::norm_weight, norm_weights<NormScope::all, kRoleQ>,
     kNormAllWhy, {ParamSlot::norm_q}},
    {"k_norm_weight", nullptr, nullptr, {"D"}, BufferKind::norm_weight, norm_weights<NormScope::head, kRoleK>,
     kNormHeadWhy, {ParamSlot::norm_k}},
    {"k_norm_weight", nullptr, nullptr, {"Hkv", "D"}, BufferKind::norm_weight, norm_weights<NormScope::all, kRoleK>,
     kNormAllWhy, {ParamSlot::norm_k}},
    {"q_norm_bias", nullptr, nullptr, {"D"}, BufferKind::bias, norm_biases<kRoleQ>, kNormQBiasWhy,
     {ParamSlot::norm_bias_q}},
    {"k_norm_bias", nullptr, nullptr, {"D"}, BufferKind::bias, norm_biases<kRoleK>, kNormBiasWhy,
     {ParamSlot::norm_bias_k}},
};

void bind_norm_weights(const FormContext& c, const Args& a, KernelParams& p) { bind_tensor_rows(c, a, p, kNormWeights); }

void buffers_norm_weights(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kNormWeights, out);
}

// FP8 q_out with scales the launch computes: one float32 per (token, head) or per token, written.
constexpr TensorRow kQScaleOut[] = {
    {"q_scale_out", nullptr, nullptr, {"T", "Hq"}, BufferKind::output,
     [](const Spec& s) { return q_scale_computed(s) && q_scale_per_head(s); },
     "when the spec's io.q_scale is per_token_head", {ParamSlot::q_scale_out}, nullptr, nullptr, FieldUse::required,
     &element::fp32},
    {"q_scale_out", nullptr, nullptr, {"T"}, BufferKind::output,
     [](const Spec& s) { return q_scale_computed(s) && !q_scale_per_head(s); }, "when the spec's io.q_scale is per_token",
     {ParamSlot::q_scale_out}, nullptr, nullptr, FieldUse::required, &element::fp32},
};

// The caller's cos_sin_cache (io.angles cos_sin_cache): [rows, rotary_dim] in io.cos_sin_dtype,
// one row read per token, its row count bound beside it.
constexpr RowElement kCosSinElement{[](const Spec& s, PositionsType) { return to_string(s.io.cos_sin_dtype); },
                                    [](const Spec& s, PositionsType) { return dtype_size(s.io.cos_sin_dtype); },
                                    [](const FormContext& c, PositionsType) { return dtype_size(c.spec.io.cos_sin_dtype); }};
constexpr TensorRow kCosSinCache[] = {
    {"cos_sin_cache", nullptr, nullptr, {"cos_sin_rows", "d"}, BufferKind::table, caller_cos_sin,
     "when the spec's io.angles is cos_sin_cache", {}, nullptr, nullptr, FieldUse::required, &kCosSinElement,
     nullptr, RowLayout::rows, {RowField{"cos_sin_cache_rows"}}, "T", false,
     [](const TensorRef& view, KernelParams& p) { p.cos_sin_table = view.ptr; }},
};

void bind_cos_sin_cache(const FormContext& c, const Args& a, KernelParams& p) {
  if (!caller_cos_sin(c.spec)) return;
  require(a.cos_sin_cache_rows >= 1 && a.cos_sin_cache_rows <= kMaxPosition + 1, "cos_sin_cache_rows",
          fmt::format("{} is not allowed: must be in [1, 2^31] with io.angles cos_sin_cache", a.cos_sin_cache_rows));
  bind_tensor_rows(c, a, p, kCosSinCache);
  p.cos_sin_table_rows = a.cos_sin_cache_rows;  // a position at or past it rotates to NaN
}

// Run-time length for methods whose frequencies depend on it (dynamic NTK, LongRoPE).
void bind_run_length(const FormContext& c, const Args& a, KernelParams& p) {
  if (!op_facts(c.spec.op).uses_rope) return;  // seq_len stays a plain bound on positions
  const RunLength run = run_length_choices(c.spec, c.spec.rope, a.seq_len, "seq_len", c.any);
  p.use_dynamic_base = run.use_dynamic_base;
  p.dynamic_log2_base = run.dynamic_log2_base;
  p.use_long_table = run.use_long_table;
  p.seq_len = run.covers;
}

}  // namespace

namespace launch_detail {

// Op rope's row: the input form, the bias, the QK-norm weights, the positions form, the output form.
extern const LaunchOp kLaunchOp_rope = {
    OpKind::rope,
    [](const FormContext& c, const Args& a, KernelParams& p) {
      find_form(kInputForms, c.spec.io.input).bind(c, a, p);
      bind_bias(c, a, p);
      bind_norm_weights(c, a, p);
      bind_positions(c, a, p);
      return find_form(kOutputForms, c.spec.io.output).bind(c, a, p);
    },
    [](const Spec& spec, const Args& a) {
      check_positions_form_host(spec, a);
      if (const auto check = find_form(kOutputForms, spec.io.output).check_host) check(spec, a);
    },
    [](const Spec& spec, const LaunchShape& shape, std::vector<BufferDesc>& out) {
      find_form(kInputForms, spec.io.input).buffers(spec, shape, out);
      buffers_bias(spec, shape, out);
      buffers_norm_weights(spec, shape, out);
      buffers_positions(spec, shape, out);
      find_form(kOutputForms, spec.io.output).buffers(spec, shape, out);
    }};

#define ROPEJIT_LAUNCH_OP_DECLARE(name) extern const LaunchOp kLaunchOp_##name;
ROPEJIT_OPS(ROPEJIT_LAUNCH_OP_DECLARE)
#undef ROPEJIT_LAUNCH_OP_DECLARE

const LaunchOp& launch_op(OpKind op) {
#define ROPEJIT_LAUNCH_OP_ROW(name) &kLaunchOp_##name,
  static const LaunchOp* const rows[] = {ROPEJIT_OPS(ROPEJIT_LAUNCH_OP_ROW)};
#undef ROPEJIT_LAUNCH_OP_ROW
  const LaunchOp& row = *rows[static_cast<int>(op)];
  if (row.op != op) throw Error(Status::internal, fmt::format("launch op table out of order at {}", to_string(op)));
  return row;
}

RunLength run_length_choices(const Spec& spec, const RopeParams& rope, int64_t length, const char* field, bool any) {
  RunLength out;
  if (needs_seq_len(rope) && any)
    require(length >= 1 && length <= kMaxPosition + 1, field,
            fmt::format("{} is not allowed: rope_type {} needs {} = max(position) + 1 in [1, 2^31]", length,
                        to_string(rope.type), field));
  if (rope.type == RopeType::dynamic && !rope.seq_len && length > spec.max_position_embeddings) {
    out.use_dynamic_base = 1;
    out.dynamic_log2_base = std::log2(static_cast<double>(static_cast<float>(dynamic_ntk_base(spec, rope, length))));
  }
  if (rope.type == RopeType::longrope) out.use_long_table = longrope_uses_long(spec, rope, length) ? 1 : 0;
  if (needs_seq_len(rope)) out.covers = length;
  return out;
}

std::string seq_len_reason(const RopeParams& rope, const char* field) {
  if (rope.type == RopeType::longrope) return fmt::format(" (rope_type longrope picks its table from {})", field);
  if (needs_seq_len(rope)) return fmt::format(" (rope_type dynamic picks its base from {})", field);
  return fmt::format(" ({} = max(position) + 1 when given)", field);
}

}  // namespace launch_detail

bool needs_seq_len(const Spec& spec) { return op_facts(spec.op).uses_rope && needs_seq_len(spec.rope); }

bool needs_seq_len(const RopeParams& rope) {
  return frequencies_depend_on_run_length(rope.type) && !rope.seq_len;  // seq_len: dynamic's fixed length
}

CheckedLaunch check_launch(const Spec& spec, int vec, const Args& a, bool host_memory) {
  return check_launch(spec, vec, a, host_memory, used_args_fields(spec));
}

CheckedLaunch check_launch(const Spec& spec, int vec, const Args& a, bool host_memory, const ArgsFieldSet& used) {
  require(a.num_tokens >= 0 && a.num_tokens <= kMaxTokens, "num_tokens",
          fmt::format("{} is not allowed: must be in [0, 2^40]", a.num_tokens));
  // Values no form reads still must not be nonsense: a negative count is a caller's bug.
  require(a.seq_len >= 0 && a.seq_len <= kMaxPosition + 1, "seq_len",
          fmt::format("{} is not allowed: must be 0 (not given) or in [1, 2^31]", a.seq_len));
  require(a.batch >= 0, "batch", fmt::format("{} is not allowed: must be >= 0", a.batch));
  require(a.max_seq_len >= 0, "max_seq_len", fmt::format("{} is not allowed: must be >= 0", a.max_seq_len));
  require(a.positions_type == PositionsType::int32 || a.positions_type == PositionsType::int64, "positions_type",
          fmt::format("{} is not allowed: must be int32 (0) or int64 (1)", static_cast<int>(a.positions_type)));
  // Any other field this spec's launches do not read must be left at its default.
  check_unused_fields(a, used);
  const int esize = dtype_size(spec.dtype);
  const FormContext c{spec, vec, esize, vec * esize, a.num_tokens > 0,
                      spec.head_dim, spec.num_q_heads, spec.num_kv_heads};
  CheckedLaunch out;
  KernelParams& p = out.params;
  p.num_tokens = a.num_tokens;
  const LaunchOp& op = launch_op(spec.op);
  out.rows = op.bind(c, a, p);
  bind_tensor_rows(c, a, p, kQScaleOut);
  bind_cos_sin_cache(c, a, p);
  // FP8 q_out: 1 / the static q_scale, or 1 where the launch computes the scales (q_scale_out).
  p.q_inv_scale = q_scale_computed(spec) ? 1.0f : inverse_scale(spec.io.q_output_dtype, a.q_scale, "q_scale");
  bind_run_length(c, a, p);
  // On the host backend the pointers are host memory: the arrays' contents are checked too.
  if (host_memory) op.check_host(spec, a);
  check_no_overlap(spec, a);
  return out;
}

std::vector<BufferDesc> launch_buffers(const Spec& spec, const LaunchShape& shape) {
  std::vector<BufferDesc> out;
  launch_op(spec.op).buffers(spec, shape, out);
  buffers_tensor_rows(spec, shape, kQScaleOut, out);
  buffers_tensor_rows(spec, shape, kCosSinCache, out);
  return out;
}

Args bind_buffers(const std::vector<BufferDesc>& buffers, const LaunchShape& shape, const std::vector<void*>& ptrs,
                  int64_t seq_len, int64_t from_seq_len) {
  Args a;
  a.num_tokens = shape.tokens;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferDesc& b = buffers[i];
    const int64_t stride = b.row_stride == b.row_elements ? 0 : b.row_stride;  // 0: dense
    set_field_pointer(kArgsFields[args_field_index(b.name)], a, ptrs.at(i));  // by the row's field names
    if (const char* field = b.stride_field()) set_field_integer(kArgsFields[args_field_index(field)], a, stride);
    bind_row_fields(b, shape, a);
  }
  a.seq_len = seq_len;
  a.from_seq_len = from_seq_len;
  a.q_scale = shape.q_scale;  // 0 unless the spec's q_out is FP8 (launch_buffers binds it there)
  return a;
}

int64_t BufferDesc::checked_product(int64_t a, int64_t b, int64_t c) const {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out) || __builtin_mul_overflow(out, c, &out))
    throw Error(Status::invalid_argument,
                fmt::format("{}: {} rows of {} x {} bytes overflow a 64-bit byte count", name, a, b, c));
  return out;
}

int64_t bytes_moved(const Spec& spec, int64_t tokens, int batch, int64_t max_seq_len) {
  // The launch's own limits, so no size product below can overflow before it is checked.
  require(tokens >= 0 && tokens <= kMaxTokens, "num_tokens", fmt::format("{} is not allowed: must be in [0, 2^40]", tokens));
  require(batch >= 0, "batch", fmt::format("{} is not allowed: must be >= 0", batch));
  require(max_seq_len >= 0 && max_seq_len <= kMaxTokens, "max_seq_len",
          fmt::format("{} is not allowed: must be in [0, 2^40]", max_seq_len));
  int64_t bytes = 0;
  for (const BufferDesc& b : launch_buffers(spec, {tokens, batch, max_seq_len, PositionsType::int32}))
    if (__builtin_add_overflow(bytes, b.moved_bytes(), &bytes))
      throw Error(Status::invalid_argument,
                  fmt::format("bytes moved by {} tokens overflow a 64-bit byte count", tokens));
  return bytes;
}

}  // namespace ropejit
