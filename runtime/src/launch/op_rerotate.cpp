// Op rerotate's row of the launch op table (docs/ops.md "Re-rotating the KV cache"): the K
// cache with its slot index and scale, the keys' old positions (the positions form) and new ones,
// and the run lengths that select each rope block's frequencies.
#include <utility>

#include "launch/cache_rows.h"

namespace ropejit::launch_detail {

namespace {

// Where the keys move, optional (null: they keep their positions), beside from_seq_len: each key's
// new position [T] (explicit positions, int32 or int64 as the old ones), or each sequence's new
// start [B] (varlen) or [1].
FieldUse from_seq_len_use(const Spec& s) {
  return needs_seq_len(s.from_rope) ? FieldUse::required : FieldUse::optional;
}
bool explicit_positions(const Spec& s) { return s.io.positions == PositionsForm::explicit_; }
bool varlen_positions(const Spec& s) { return s.io.positions == PositionsForm::varlen; }
bool one_start(const Spec& s) { return !explicit_positions(s) && !varlen_positions(s); }
constexpr const char* kRerotateWhy = "when the spec's op is rerotate";
constexpr RowField kFromSeqLen{"from_seq_len", FieldUse::optional, from_seq_len_use};

constexpr TensorRow kNewPositions[] = {
    {"new_positions", nullptr, nullptr, {"T"}, BufferKind::new_positions, explicit_positions, kRerotateWhy,
     {ParamSlot::new_positions}, nullptr, nullptr, FieldUse::optional, &element::positions, nullptr,
     RowLayout::rows, {kFromSeqLen}},
    {"new_start_pos", nullptr, nullptr, {"B"}, BufferKind::new_start_pos, varlen_positions, kRerotateWhy,
     {ParamSlot::new_start_pos}, nullptr, nullptr, FieldUse::optional, &element::int64, nullptr, RowLayout::rows,
     {kFromSeqLen}},
    {"new_start_pos", nullptr, nullptr, {"1"}, BufferKind::new_start_pos, one_start, kRerotateWhy,
     {ParamSlot::new_start_pos}, nullptr, nullptr, FieldUse::optional, &element::int64, nullptr, RowLayout::rows,
     {kFromSeqLen}},
};

// The K cache, each key's rotary part read and rewritten.
int64_t rotary_part(const Spec& s) { return int64_t(s.num_kv_heads) * s.rotary_dim; }
constexpr auto kKCache = cache_rows<false, rotary_part, true>();

// Old position of key t and, when given, its new one (host arrays; cu_seqlens already checked).
std::pair<int64_t, int64_t> key_positions(const Spec& spec, const Args& a, int64_t t) {
  auto element = [&](const void* array) {
    return a.positions_type == PositionsType::int64 ? static_cast<const int64_t*>(array)[t]
                                                    : static_cast<const int32_t*>(array)[t];
  };
  if (spec.io.positions == PositionsForm::explicit_) {
    const int64_t old_position = element(a.positions);
    return {old_position, a.new_positions ? element(a.new_positions) : old_position};
  }
  int b = 0;
  if (spec.io.positions == PositionsForm::varlen)
    while (a.cu_seqlens[b + 1] <= t) ++b;
  const int64_t index = spec.io.positions == PositionsForm::varlen ? t - a.cu_seqlens[b] : t;
  const int64_t old_position = (a.start_pos ? a.start_pos[b] : 0) + index;
  return {old_position, a.new_start_pos ? a.new_start_pos[b] + index : old_position};
}

// Binds the positions form, the K cache (slot index, page stride, k_scale), the new positions
// and the old rope parameters' run-time choices (check_unused_fields refuses the rope-only ones).
int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  bind_positions(c, a, p);
  bind_tensor_rows(c, a, p, kKCache);
  bind_cache_index(c, a, p);
  p.cache_inv_scale[0] = inverse_scale(c.spec.io.cache_dtype, a.k_scale, "k_scale");
  p.cache_scale = c.spec.io.cache_dtype == CacheDType::auto_ ? 1.0f : a.k_scale;
  bind_tensor_rows(c, a, p, kNewPositions);
  require(a.from_seq_len >= 0 && a.from_seq_len <= kMaxPosition + 1, "from_seq_len",
          fmt::format("{} is not allowed: must be 0 (not given) or in [1, 2^31]", a.from_seq_len));
  const RunLength from = run_length_choices(c.spec, c.spec.from_rope, a.from_seq_len, "from_seq_len", c.any);
  p.from_use_dynamic_base = from.use_dynamic_base;
  p.from_dynamic_log2_base = from.dynamic_log2_base;
  p.from_use_long_table = from.use_long_table;
  p.from_seq_len = from.covers;
  return a.num_tokens;
}

// Old positions below from_seq_len and new ones in [0, 2^31) and below seq_len.
void check_host_op(const Spec& spec, const Args& a) {
  Args structure = a;  // cu_seqlens and ranges; the lengths are checked per key below
  structure.seq_len = 0;
  check_positions_form_host(spec, structure);
  check_paged_host(spec, a);
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const auto [old_position, new_position] = key_positions(spec, a, t);
    if (a.from_seq_len > 0 && old_position >= a.from_seq_len)
      fail(spec.io.positions == PositionsForm::explicit_ ? "positions" : "start_pos",
           fmt::format("key {} is at position {}, which is not allowed: must be < from_seq_len = {} (the length "
                       "the keys were written at){}", t, old_position, a.from_seq_len,
                       needs_seq_len(spec.from_rope) ? seq_len_reason(spec.from_rope, "from_seq_len") : ""));
    const char* field = spec.io.positions == PositionsForm::explicit_ ? "new_positions" : "new_start_pos";
    if (new_position < 0 || new_position > kMaxPosition)
      fail(field, fmt::format("key {} moves to position {}, which is not allowed: must lie in [0, 2^31)", t,
                              new_position));
    if (a.seq_len > 0 && new_position >= a.seq_len)
      fail(field, fmt::format("key {} moves to position {}, which is not allowed: must be < seq_len = {}{}", t,
                              new_position, a.seq_len, seq_len_reason(spec.rope, "seq_len")));
  }
}

// The positions form's, the new positions (with from_seq_len), the K cache (each key read and
// written), the slot index.
void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_positions(s, shape, out);
  buffers_tensor_rows(s, shape, kNewPositions, out);
  buffers_tensor_rows(s, shape, kKCache, out);
  buffers_cache_index(s, shape, out);
}

}  // namespace

extern const LaunchOp kLaunchOp_rerotate = {OpKind::rerotate, bind_op, check_host_op, buffers_op};

}  // namespace ropejit::launch_detail
