// Launch argument checks (docs/architecture.md §9): bad input never reaches a kernel; and
// each io form's buffers, so the workload builders and bytes_moved follow the same rows.
#include "launch/launch_args.h"
#include "launch/launch_checks.h"
#include "launch/tensor_rows.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "ropejit/freqs.h"

namespace ropejit {

namespace {

using namespace launch_detail;

constexpr int64_t kMaxTokens = int64_t(1) << 40;
// One side's q, k, v pointers: q and k present when `required` (v too when the spec copies
// it), each aligned for the kernel's vector accesses (a v the spec does not copy is refused as unused).
void check_qkv(const std::array<const void*, 3>& ptrs, const std::array<const char*, 3>& names, bool required,
               bool copy_v, int align, const char* why) {
  if (required) {
    check_present(ptrs[0], names[0], why);
    check_present(ptrs[1], names[1], why);
    if (copy_v) check_present(ptrs[2], names[2], "when the spec copies v (io.copy_v)");
  }
  for (int r = 0; r < 3; ++r) check_aligned(ptrs[r], align, names[r]);
}

void check_varlen_host(const Spec& spec, const Args& a) {
  const int32_t* cu = a.cu_seqlens;
  require(cu[0] == 0, "cu_seqlens", fmt::format("cu_seqlens[0] = {} is not allowed: must be 0", cu[0]));
  int64_t longest = 0;
  for (int b = 0; b < a.batch; ++b) {
    if (cu[b + 1] < cu[b])
      fail("cu_seqlens", fmt::format("cu_seqlens[{}] = {} < cu_seqlens[{}] = {}: must be non-decreasing",
                                     b + 1, cu[b + 1], b, cu[b]));
    const int64_t length = cu[b + 1] - cu[b];
    longest = std::max<int64_t>(longest, length);
    if (a.start_pos && (a.start_pos[b] < 0 || a.start_pos[b] + length > kMaxPosition + 1))
      fail("start_pos", fmt::format("start_pos[{}] = {} is not allowed: positions must lie in [0, 2^31)",
                                    b, a.start_pos[b]));
    const int64_t last = (a.start_pos ? a.start_pos[b] : 0) + length - 1;  // sequence b's last position
    if (length > 0 && a.seq_len > 0 && last >= a.seq_len) {
      const std::string reason = seq_len_reason(spec.rope, "seq_len");
      if (a.start_pos)
        fail("start_pos", fmt::format("start_pos[{}] = {} is not allowed: sequence {} reaches position {}, which "
                                      "must be < seq_len = {}{}", b, a.start_pos[b], b, last, a.seq_len, reason));
      fail("cu_seqlens", fmt::format("sequence {} of {} tokens is not allowed: it reaches position {}, which must "
                                     "be < seq_len = {}{}", b, length, last, a.seq_len, reason));
    }
  }
  if (cu[a.batch] != a.num_tokens)
    fail("cu_seqlens", fmt::format("cu_seqlens[batch={}] = {} is not allowed: must equal num_tokens = {}",
                                   a.batch, cu[a.batch], a.num_tokens));
  if (spec.io.output == OutputForm::padded_bhsd && longest > a.max_seq_len)
    fail("max_seq_len", fmt::format("{} is not allowed: smaller than the longest sequence ({})",
                                    a.max_seq_len, longest));
}

// Explicit [T] or mrope [3, T] positions: every entry in [0, 2^31) and below seq_len when given.
void check_positions_host(const Spec& spec, const Args& a, int64_t count) {
  for (int64_t t = 0; t < count; ++t) {
    const int64_t p = a.positions_type == PositionsType::int64
                          ? static_cast<const int64_t*>(a.positions)[t]
                          : static_cast<const int32_t*>(a.positions)[t];
    if (p < 0 || p > kMaxPosition)
      fail("positions", fmt::format("positions[{}] = {} is not allowed: must lie in [0, 2^31)", t, p));
    if (a.seq_len > 0 && p >= a.seq_len)
      fail("positions", fmt::format("positions[{}] = {} is not allowed: must be < seq_len = {}{}", t, p, a.seq_len,
                                    seq_len_reason(spec.rope, "seq_len")));
  }
}


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
     "when the spec's io.output is not inplace", {ParamSlot::out_q}, q_moved},
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

// ---------------------------------------------------------------- positions forms

// A positions array in device memory: explicit [num_tokens], or mrope [3, num_tokens]
// stream-major (temporal, height, width), as HF's position_ids of Qwen2-VL.
template <PositionsForm kForm>
void bind_positions_array(const FormContext& c, const Args& a, KernelParams& p) {
  const std::string when = fmt::format("when the spec's io.positions is {}", to_string(kForm));
  if (c.any)
    check_present(a.positions, "positions",
                  (kForm == PositionsForm::mrope ? when + " ([3, num_tokens])" : when).c_str());
  check_aligned(a.positions, a.positions_type == PositionsType::int64 ? 8 : 4, "positions");
  p.positions = a.positions;
  p.positions_are_int64 = a.positions_type == PositionsType::int64;
}

void bind_positions_varlen(const FormContext&, const Args& a, KernelParams& p) {
  require(a.batch >= 1, "batch", fmt::format("{} is not allowed: must be >= 1 with varlen positions", a.batch));
  check_present(a.cu_seqlens, "cu_seqlens", "when the spec's io.positions is varlen");
  p.cu_seqlens = a.cu_seqlens;
  p.start_pos = reinterpret_cast<const i64*>(a.start_pos);
  p.batch = a.batch;
}

// One sequence at an offset kept in device memory, so a captured graph replays decode steps
// while the caller advances start_pos[0] (HF's cache_position = arange(past, past + T)).
void bind_positions_offset(const FormContext&, const Args& a, KernelParams& p) {
  require(a.batch == 0 || a.batch == 1, "batch",
          fmt::format("{} is not allowed: must be 0 or 1 with offset positions (one sequence)", a.batch));
  check_aligned(a.start_pos, 8, "start_pos");
  p.start_pos = reinterpret_cast<const i64*>(a.start_pos);
}

void check_offset_host(const Spec& spec, const Args& a) {
  if (a.num_tokens == 0) return;
  const int64_t start = a.start_pos ? a.start_pos[0] : 0;
  if (start < 0 || start > kMaxPosition + 1 - a.num_tokens)
    fail("start_pos", fmt::format("start_pos[0] = {} is not allowed: positions [start_pos[0], start_pos[0] + "
                                  "num_tokens) must lie in [0, 2^31)", start));
  if (a.seq_len > 0 && start + a.num_tokens > a.seq_len)
    fail("start_pos", fmt::format("start_pos[0] = {} is not allowed: the last position {} must be < seq_len = {}{}",
                                  start, start + a.num_tokens - 1, a.seq_len, seq_len_reason(spec.rope, "seq_len")));
}

// ---------------------------------------------------------------- output forms (return grid rows)

int64_t bind_output_inplace(const FormContext&, const Args& a, KernelParams& p) {
  for (int r = 0; r < 3; ++r) p.out[r] = p.in[r];
  return a.num_tokens;
}

int64_t bind_output_separate(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kOutputSeparate);
  return a.num_tokens;
}

int64_t bind_output_padded(const FormContext& c, const Args& a, KernelParams& p) {
  // Padding rows are written (zeros) even when no token arrives.
  check_qkv({a.q_out, a.k_out, a.v_out}, {"q_out", "k_out", "v_out"}, true, c.spec.io.copy_v, c.align,
            "when the spec's io.output is not inplace");
  require(a.max_seq_len >= 1 && a.max_seq_len <= (1 << 30), "max_seq_len",
          fmt::format("{} is not allowed: must be in [1, 2^30] for padded_bhsd", a.max_seq_len));
  const int64_t S = a.max_seq_len, D = c.D;
  p.out[kRoleQ] = TensorRef{a.q_out, D, S * D, c.Hq * S * D};
  p.out[kRoleK] = TensorRef{a.k_out, D, S * D, c.Hkv * S * D};
  p.out[kRoleV] = TensorRef{a.v_out, D, S * D, c.Hkv * S * D};
  p.max_seq_len = a.max_seq_len;
  return int64_t(a.batch) * S;
}

// ---------------------------------------------------------------- buffers of one launch, per form

template <auto Ptr>
void bind_padded(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.*Ptr = ptr;
  a.max_seq_len = static_cast<int>(shape.max_seq_len);
}

void bind_positions_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.positions = ptr;
  a.positions_type = shape.positions_type;
}

void bind_cu_seqlens_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.cu_seqlens = static_cast<const int32_t*>(ptr);
  a.batch = shape.batch;
}

void buffers_input_separate(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kInputSeparate, out);
}

void buffers_input_packed(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kInputPacked, out);
}

// A positions array of kStreams entries per token: explicit [T] (1), mrope [3, T] (3).
template <int kStreams>
void buffers_positions_array(const Spec&, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int bytes = shape.positions_type == PositionsType::int64 ? 8 : 4;
  const std::array<const char*, 4> dims = kStreams == 1 ? std::array<const char*, 4>{"T"}
                                                        : std::array<const char*, 4>{"3", "T"};
  out.push_back({"positions", BufferKind::positions, kStreams * shape.tokens, 1, 1, bytes, 1, false, bind_positions_ptr,
                 dims, {BoundField{"positions_type", FieldUse::optional}}});
}

// start_pos: optional (null: every sequence starts at position 0).
BufferDesc start_pos_buffer(int64_t rows, const char* dim) {
  BufferDesc b{"start_pos", BufferKind::start_pos, rows, 1, 1, 8, 1, false, bind_to<&ropejit_args::start_pos>, {dim}};
  b.use = FieldUse::optional;
  return b;
}

void buffers_positions_varlen(const Spec&, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  out.push_back({"cu_seqlens", BufferKind::cu_seqlens, int64_t(shape.batch) + 1, 1, 1, 4, 1, false,
                 bind_cu_seqlens_ptr, {"B+1"}, {BoundField{"batch", FieldUse::required}}});
  out.push_back(start_pos_buffer(shape.batch, "B"));
}

void buffers_positions_offset(const Spec&, const LaunchShape&, std::vector<BufferDesc>& out) {
  out.push_back(start_pos_buffer(1, "1"));
}

void buffers_output_inplace(const Spec&, const LaunchShape&, std::vector<BufferDesc>& out) {
  for (BufferDesc& b : out)
    if (b.kind == BufferKind::input) b.kind = BufferKind::inout;
}

void buffers_output_separate(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kOutputSeparate, out);
}

// Padded [B, H, S, D] outputs (each row its sequence's and position's), which need max_seq_len.
void buffers_output_padded(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  constexpr const char* kNames[3] = {"q_out", "k_out", "v_out"};
  constexpr const char* kHeads[3] = {"Hq", "Hkv", "Hkv"};
  constexpr Bind kBinds[3] = {bind_padded<&ropejit_args::q_out>, bind_padded<&ropejit_args::k_out>,
                              bind_padded<&ropejit_args::v_out>};
  const int64_t D = s.head_dim, heads[3] = {s.num_q_heads, s.num_kv_heads, s.num_kv_heads};
  const int64_t moved[3] = {q_moved(s), k_moved(s), heads[2] * D};
  for (int r = 0; r < (s.io.copy_v ? 3 : 2); ++r) {
    BufferDesc b = data_buffer(s, kNames[r], BufferKind::output, int64_t(shape.batch) * shape.max_seq_len,
                               heads[r] * D, moved[r], false, kBinds[r], {"B", kHeads[r], "S", "D"});
    b.bound[0] = {"max_seq_len", FieldUse::required};
    out.push_back(b);
  }
}

// QKV bias: one row of [(Hq + 2 Hkv) D], split by role like the packed input; padded outputs
// write the bias into padding rows, so it is needed with no tokens too.
constexpr TensorRow kBias[] = {
    {"bias", nullptr, nullptr, {"Hq+2Hkv", "D"}, BufferKind::bias, [](const Spec& s) { return s.io.qkv_bias; },
     "when the spec's io.qkv_bias is true", {ParamSlot::bias_qkv}, nullptr, nullptr, FieldUse::required,
     RowElement::storage, [](const Spec& s) { return s.io.output == OutputForm::padded_bhsd; }},
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
struct PositionsFormOps {
  PositionsForm form;
  void (*bind)(const FormContext&, const Args&, KernelParams&);
  void (*check_host)(const Spec&, const Args&);  // reads host arrays (host backend only)
  AddBuffers buffers;
};
struct OutputFormOps {
  OutputForm form;
  int64_t (*bind)(const FormContext&, const Args&, KernelParams&);
  AddBuffers buffers;  // after the inputs: inplace marks them rewritten
  void (*check_host)(const Spec&, const Args&);  // reads host arrays (host backend only), or null
};

template <int kStreams>
void check_positions_array_host(const Spec& spec, const Args& a) {
  if (a.num_tokens > 0) check_positions_host(spec, a, kStreams * a.num_tokens);
}

constexpr InputFormOps kInputForms[] = {{InputForm::separate, bind_input_separate, buffers_input_separate},
                                        {InputForm::packed_qkv, bind_input_packed, buffers_input_packed}};
constexpr PositionsFormOps kPositionsForms[] = {
    {PositionsForm::explicit_, bind_positions_array<PositionsForm::explicit_>, check_positions_array_host<1>,
     buffers_positions_array<1>},
    {PositionsForm::varlen, bind_positions_varlen, check_varlen_host, buffers_positions_varlen},
    {PositionsForm::offset, bind_positions_offset, check_offset_host, buffers_positions_offset},
    {PositionsForm::mrope, bind_positions_array<PositionsForm::mrope>, check_positions_array_host<3>,
     buffers_positions_array<3>}};
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
// (scope all, HF's q_norm.weight of Hq·D values).
template <NormScope kScope>
bool norm_weights(const Spec& s) {
  return s.qk_norm.enabled && s.qk_norm.weight == NormWeight::per_head && s.qk_norm.scope == kScope;
}
constexpr const char* kNormHeadWhy = "when the spec's qk_norm has weight per_head ([head_dim])";
constexpr const char* kNormAllWhy =
    "when the spec's qk_norm has weight per_head and scope all (q [Hq, head_dim], k [Hkv, head_dim])";

constexpr TensorRow kNormWeights[] = {
    {"q_norm_weight", nullptr, nullptr, {"D"}, BufferKind::norm_weight, norm_weights<NormScope::head>, kNormHeadWhy,
     {ParamSlot::norm_q}},
    {"q_norm_weight", nullptr, nullptr, {"Hq", "D"}, BufferKind::norm_weight, norm_weights<NormScope::all>,
     kNormAllWhy, {ParamSlot::norm_q}},
    {"k_norm_weight", nullptr, nullptr, {"D"}, BufferKind::norm_weight, norm_weights<NormScope::head>, kNormHeadWhy,
     {ParamSlot::norm_k}},
    {"k_norm_weight", nullptr, nullptr, {"Hkv", "D"}, BufferKind::norm_weight, norm_weights<NormScope::all>,
     kNormAllWhy, {ParamSlot::norm_k}},
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
     RowElement::fp32},
    {"q_scale_out", nullptr, nullptr, {"T"}, BufferKind::output,
     [](const Spec& s) { return q_scale_computed(s) && !q_scale_per_head(s); }, "when the spec's io.q_scale is per_token",
     {ParamSlot::q_scale_out}, nullptr, nullptr, FieldUse::required, RowElement::fp32},
};

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

void bind_positions(const FormContext& c, const Args& a, KernelParams& p) {
  find_form(kPositionsForms, c.spec.io.positions).bind(c, a, p);
}

void check_positions_form_host(const Spec& spec, const Args& a) {
  find_form(kPositionsForms, spec.io.positions).check_host(spec, a);
}

void buffers_positions(const Spec& spec, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  find_form(kPositionsForms, spec.io.positions).buffers(spec, shape, out);
}

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
  if (spec.io.q_output_dtype == CacheDType::auto_) return out;
  const bool computed = q_scale_computed(spec);
  for (BufferDesc& b : out)  // FP8 q_out: one-byte codes, with the static q_scale bound
    if (std::string_view(b.name) == "q_out") {
      b.element_bytes = 1;
      b.fp8 = spec.io.q_output_dtype;
      for (BoundField& f : b.bound)
        if (!f.name && !computed) {
          f = {"q_scale", FieldUse::required};
          break;
        }
    }
  buffers_tensor_rows(spec, shape, kQScaleOut, out);
  return out;
}

Args bind_buffers(const std::vector<BufferDesc>& buffers, const LaunchShape& shape, const std::vector<void*>& ptrs,
                  int64_t seq_len, int64_t from_seq_len) {
  Args a;
  a.num_tokens = shape.tokens;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferDesc& b = buffers[i];
    const int64_t stride = b.row_stride == b.row_elements ? 0 : b.row_stride;  // 0: dense
    if (b.bind) {
      b.bind(a, shape, ptrs.at(i), stride);
      continue;
    }
    set_field_pointer(kArgsFields[args_field_index(b.name)], a, ptrs.at(i));  // a tensor row's: by name
    if (const char* field = b.stride_field()) set_field_integer(kArgsFields[args_field_index(field)], a, stride);
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
