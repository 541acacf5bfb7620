// The one workload builder (see workload.h): sequences, positions and buffer contents.
#include "workload.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "ropejit/fp_convert.h"

namespace ropejit {

namespace {

// `count` elements of normal(0, scale) values in `dtype`, never zero; with `distinct` > 0
// only that many are drawn and repeated (drawing every element of a multi-GB set is slow).
std::string random_values(DType dtype, int64_t count, int64_t distinct, double scale, std::mt19937_64& rng) {
  const size_t esize = static_cast<size_t>(dtype_size(dtype));
  const int64_t drawn = distinct > 0 ? std::min(count, distinct) : count;
  const uint32_t magnitude_mask = esize == 4 ? 0x7fffffffu : 0x7fffu;
  const uint32_t half = ref::round_to_dtype_bits(dtype, 0.5);
  std::normal_distribution<double> normal(0.0, scale);
  std::string bytes(static_cast<size_t>(count) * esize, '\0');
  for (int64_t i = 0; i < drawn; ++i) {
    uint32_t bits = ref::round_to_dtype_bits(dtype, normal(rng));
    if ((bits & magnitude_mask) == 0) bits = half;  // a zero would hide a missing multiply
    std::memcpy(&bytes[size_t(i) * esize], &bits, esize);  // little endian: the low bytes
  }
  for (size_t at = size_t(drawn) * esize; at < bytes.size(); at += size_t(drawn) * esize)
    std::memcpy(&bytes[at], bytes.data(), std::min(size_t(drawn) * esize, bytes.size() - at));
  return bytes;
}

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Sequence boundaries: fixed-length sequences (the last takes what remains), or random cuts
// with zero-length sequences allowed.
std::vector<int32_t> split_tokens(int64_t tokens, int batch, int64_t sequence_tokens, std::mt19937_64& rng) {
  std::vector<int32_t> cu{0};
  if (sequence_tokens > 0) {
    for (int b = 1; b < batch; ++b) cu.push_back(static_cast<int32_t>(std::min<int64_t>(tokens, b * sequence_tokens)));
  } else {
    std::uniform_int_distribution<int64_t> cut(0, tokens);
    for (int b = 1; b < batch; ++b) cu.push_back(static_cast<int32_t>(cut(rng)));
    std::sort(cu.begin(), cu.end());
  }
  cu.push_back(static_cast<int32_t>(tokens));
  return cu;
}

// Varlen: sequences, their start positions (every position < max_position), S and the run length.
void draw_sequences(const Spec& spec, const WorkloadOptions& o, std::mt19937_64& rng, HostWorkload& w) {
  const int batch = o.batch ? o.batch : 1 + static_cast<int>(rng() % 8);
  w.shape.batch = batch;
  w.cu_seqlens = split_tokens(o.tokens, batch, o.sequence_tokens, rng);
  int64_t longest = 0, run_length = 1;
  for (int b = 0; b < batch; ++b) {
    const int64_t len = w.cu_seqlens[b + 1] - w.cu_seqlens[b];
    w.start_pos.push_back(std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(o.max_position - len, 0))(rng));
    longest = std::max(longest, len);
    if (len > 0) run_length = std::max(run_length, w.start_pos.back() + len);
  }
  if (spec.io.output == OutputForm::padded_bhsd)
    w.shape.max_seq_len =
        std::max<int64_t>(1, longest + (o.max_slack > 0 ? static_cast<int64_t>(rng() % (o.max_slack + 1)) : 0));
  w.seq_len = run_length;
}

// Explicit positions [T], or mrope [3, T] (`streams` 3, stream-major; each stream drawn on its
// own, as a vision token's height and width differ from its temporal position).
void draw_positions(const WorkloadOptions& o, int streams, std::mt19937_64& rng, HostWorkload& w) {
  std::uniform_int_distribution<int64_t> position(0, std::max<int64_t>(o.max_position - 1, 0));
  w.positions.resize(static_cast<size_t>(streams * o.tokens));
  for (auto& p : w.positions) p = position(rng);
  w.seq_len = 1 + (o.tokens ? *std::max_element(w.positions.begin(), w.positions.end()) : 0);
}

// Offset: one sequence whose positions start_pos[0] + [0, T) stay below max_position.
void draw_offset(const WorkloadOptions& o, std::mt19937_64& rng, HostWorkload& w) {
  const int64_t start = std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(o.max_position - o.tokens, 0))(rng);
  w.start_pos = {start};
  w.seq_len = start + std::max<int64_t>(o.tokens, 1);
}

// Contents of one buffer before the launch.
std::string contents(const Spec& spec, const WorkloadOptions& o, const HostWorkload& w, const BufferDesc& b,
                     std::mt19937_64& rng) {
  switch (b.kind) {
    case BufferKind::input:
    case BufferKind::inout: return random_values(spec.dtype, b.rows * b.row_stride, o.distinct_elements, 1.0, rng);
    case BufferKind::bias: return random_values(spec.dtype, b.rows * b.row_stride, o.distinct_elements, 0.5, rng);
    case BufferKind::norm_weight: return random_values(spec.dtype, b.rows * b.row_stride, 0, 1.0, rng);
    case BufferKind::output: return std::string(static_cast<size_t>(b.bytes()), '\xff');
    case BufferKind::positions:
      if (w.shape.positions_type == PositionsType::int64) return raw_bytes(w.positions);
      return raw_bytes(std::vector<int32_t>(w.positions.begin(), w.positions.end()));
    case BufferKind::cu_seqlens: return raw_bytes(w.cu_seqlens);
    case BufferKind::start_pos: return raw_bytes(w.start_pos);
  }
  return {};
}

}  // namespace

const HostBuffer* HostWorkload::find(const std::string& name) const {
  for (const HostBuffer& b : buffers)
    if (name == b.desc.name) return &b;
  return nullptr;
}

int64_t HostWorkload::bytes_moved() const {
  int64_t bytes = 0;
  for (const HostBuffer& b : buffers) bytes += b.desc.moved_bytes();
  return bytes;
}

HostWorkload make_host_workload(const Spec& spec, const WorkloadOptions& o) {
  std::mt19937_64 rng(o.seed);
  HostWorkload w;
  w.shape.tokens = o.tokens;
  w.shape.positions_type = o.positions_type;
  switch (spec.io.positions) {
    case PositionsForm::explicit_: draw_positions(o, 1, rng, w); break;
    case PositionsForm::varlen: draw_sequences(spec, o, rng, w); break;
    case PositionsForm::offset: draw_offset(o, rng, w); break;
    case PositionsForm::mrope: draw_positions(o, 3, rng, w); break;
  }
  for (BufferDesc desc : launch_buffers(spec, w.shape)) {
    // Gaps between token rows: a kernel must leave them untouched.
    if (desc.token_rows && o.stride_vec > 0) desc.row_stride += o.stride_vec * (1 + static_cast<int64_t>(rng() % 2));
    std::string bytes = contents(spec, o, w, desc, rng);
    w.buffers.push_back({desc, std::move(bytes)});
  }
  return w;
}

}  // namespace ropejit
