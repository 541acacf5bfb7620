// The positions forms' launch arguments and buffers (docs/spec.md io.positions): explicit [T],
// mrope [3, T] or axes [A, T] positions (int32 or int64), varlen's cu_seqlens and start_pos, offset's start_pos;
// every op places its rows by them.
#include <algorithm>

#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

namespace {

template <PositionsForm kForm>
bool positions_are(const Spec& s) { return s.io.positions == kForm; }
bool always(const Spec&) { return true; }
constexpr const char* kVarlenWhy = "when the spec's io.positions is varlen";

// A positions array in device memory: explicit [num_tokens], or mrope [3, num_tokens]
// stream-major (temporal, height, width), as HF's position_ids of Qwen2-VL; cu_seqlens [B + 1]
// (required with no tokens too) and the optional start_pos [B] (null: every sequence starts at
// 0); offset's start_pos [1]: one sequence at an offset kept in device memory, so a captured graph
// replays decode steps while the caller advances start_pos[0] (HF's cache_position).
constexpr TensorRow kPositionsRows[] = {
    {"positions", nullptr, nullptr, {"T"}, BufferKind::positions, positions_are<PositionsForm::explicit_>,
     "when the spec's io.positions is explicit", {ParamSlot::positions}, nullptr, nullptr, FieldUse::required,
     &element::positions, nullptr, RowLayout::rows, {RowField{"positions_type", FieldUse::optional}}},
    {"positions", nullptr, nullptr, {"3", "T"}, BufferKind::positions, positions_are<PositionsForm::mrope>,
     "when the spec's io.positions is mrope ([3, num_tokens])", {ParamSlot::positions}, nullptr, nullptr,
     FieldUse::required, &element::positions, nullptr, RowLayout::rows,
     {RowField{"positions_type", FieldUse::optional}}},
    {"positions", nullptr, nullptr, {"A", "T"}, BufferKind::positions, positions_are<PositionsForm::axes>,
     "when the spec's io.positions is axes ([A, num_tokens]: one row per axis of io.axes)", {ParamSlot::positions},
     nullptr, nullptr, FieldUse::required, &element::positions, nullptr, RowLayout::rows,
     {RowField{"positions_type", FieldUse::optional}}},
    {"cu_seqlens", nullptr, nullptr, {"B+1"}, BufferKind::cu_seqlens, positions_are<PositionsForm::varlen>,
     kVarlenWhy, {ParamSlot::cu_seqlens}, nullptr, nullptr, FieldUse::required, &element::int32, always,
     RowLayout::rows, {RowField{"batch"}}},
    {"start_pos", nullptr, nullptr, {"B"}, BufferKind::start_pos, positions_are<PositionsForm::varlen>, kVarlenWhy,
     {ParamSlot::start_pos}, nullptr, nullptr, FieldUse::optional, &element::int64},
    {"start_pos", nullptr, nullptr, {"1"}, BufferKind::start_pos, positions_are<PositionsForm::offset>,
     "when the spec's io.positions is offset", {ParamSlot::start_pos}, nullptr, nullptr, FieldUse::optional,
     &element::int64},
};

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

// Explicit [T], mrope [3, T] or axes [A, T] positions: every entry in [0, 2^31) and below seq_len
// when given.
void check_positions_host(const Spec& spec, const Args& a) {
  const int64_t entries = position_streams(spec) * a.num_tokens;
  for (int64_t t = 0; t < entries; ++t) {
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

// The form's scalar fields (its arrays are rows): varlen's batch, offset's one sequence.
void bind_form_fields(const FormContext& c, const Args& a, KernelParams& p) {
  switch (c.spec.io.positions) {
    case PositionsForm::explicit_:
    case PositionsForm::mrope:
    case PositionsForm::axes: p.positions_are_int64 = a.positions_type == PositionsType::int64; return;
    case PositionsForm::varlen:
      require(a.batch >= 1, "batch", fmt::format("{} is not allowed: must be >= 1 with varlen positions", a.batch));
      p.batch = a.batch;
      return;
    case PositionsForm::offset:
      require(a.batch == 0 || a.batch == 1, "batch",
              fmt::format("{} is not allowed: must be 0 or 1 with offset positions (one sequence)", a.batch));
      return;
  }
}

}  // namespace

void bind_positions(const FormContext& c, const Args& a, KernelParams& p) {
  bind_form_fields(c, a, p);
  bind_tensor_rows(c, a, p, kPositionsRows);
}

void check_positions_form_host(const Spec& spec, const Args& a) {
  switch (spec.io.positions) {
    case PositionsForm::explicit_:
    case PositionsForm::mrope:
    case PositionsForm::axes:
      if (a.num_tokens > 0) check_positions_host(spec, a);
      return;
    case PositionsForm::varlen: check_varlen_host(spec, a); return;
    case PositionsForm::offset: check_offset_host(spec, a); return;
  }
}

void buffers_positions(const Spec& spec, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(spec, shape, kPositionsRows, out);
}

}  // namespace ropejit::launch_detail
