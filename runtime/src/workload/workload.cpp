// The one workload builder (see workload.h): sequences, positions and buffer contents.
#include "ropejit/internal/workload.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

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

// An FP8 scale: one case in four small enough that the largest inputs saturate, else 0.01-0.1.
float draw_fp8_scale(CacheDType type, std::mt19937_64& rng) {
  // NVFP4's global scale: one case in four saturates (block scales past 448, codes past 6), one
  // in four takes block scales into e4m3's subnormals, the others calibrated (block scales ~100).
  if (type == CacheDType::nvfp4) {
    const uint64_t draw = rng() % 4;
    if (draw == 0) return static_cast<float>(1.75 / (448.0 * 6.0));
    if (draw == 1) return static_cast<float>(std::uniform_real_distribution<double>(20.0, 200.0)(rng));
    return static_cast<float>(std::uniform_real_distribution<double>(0.0015, 0.02)(rng));
  }
  const double saturating = 1.75 / (type == CacheDType::fp8_e4m3 ? 448.0 : 57344.0);
  return static_cast<float>(rng() % 4 == 0 ? saturating : std::uniform_real_distribution<double>(0.01, 0.1)(rng));
}

// paged_kv: where each token's k and v go, on caches with a few pages no token writes. slot
// mapping: a random distinct slot per token, about one token in eight not cached (-1). block
// tables: fresh pages for the blocks each sequence writes (the first partly filled already:
// its earlier slots must stay untouched), other entries on a page nobody may write. FP8 scales:
// one case in four saturates every |x| > 1.75, the others scale by a number in [0.01, 0.1].
void draw_cache(const Spec& spec, const WorkloadOptions& o, std::mt19937_64& rng, HostWorkload& w) {
  const int64_t page_size = spec.io.page_size;
  if (spec.io.cache_index == CacheIndex::slot_mapping) {
    w.shape.cache_pages = o.tokens / page_size + 1 + static_cast<int64_t>(rng() % 3);
    std::vector<int64_t> slots(static_cast<size_t>(w.shape.cache_pages * page_size));
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
    std::shuffle(slots.begin(), slots.end(), rng);
    for (int64_t t = 0; t < o.tokens; ++t)  // token 0 always cached: every case has a slot to check
      w.slot_mapping.push_back(t > 0 && rng() % 8 == 0 ? -1 : slots[static_cast<size_t>(t)]);
  } else {
    std::vector<std::pair<int64_t, int64_t>> blocks;  // per sequence: first and last block written
    int64_t pages = 0, max_blocks = 1;
    for (int b = 0; b < w.shape.batch; ++b) {
      const int64_t len = w.cu_seqlens[b + 1] - w.cu_seqlens[b], start = w.start_pos[b];
      // An empty sequence writes no block: last = first - 1.
      blocks.emplace_back(start / page_size, len ? (start + len - 1) / page_size : start / page_size - 1);
      pages += blocks.back().second - blocks.back().first + 1;
      max_blocks = std::max(max_blocks, blocks.back().second + 1);
    }
    const int64_t foreign = pages;  // the page no entry written to may be
    w.shape.cache_pages = pages + 1;
    w.shape.max_blocks_per_seq = max_blocks + static_cast<int64_t>(rng() % 2);
    std::vector<int32_t> order(static_cast<size_t>(pages));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::shuffle(order.begin(), order.end(), rng);
    w.block_tables.assign(static_cast<size_t>(w.shape.batch * w.shape.max_blocks_per_seq), static_cast<int32_t>(foreign));
    size_t next = 0;
    for (int b = 0; b < w.shape.batch; ++b)
      for (int64_t block = blocks[b].first; block <= blocks[b].second; ++block)
        w.block_tables[static_cast<size_t>(b * w.shape.max_blocks_per_seq + block)] = order[next++];
  }
  if (caller_cache_scale(spec))
    for (float* scale : {&w.shape.k_scale, &w.shape.v_scale}) *scale = draw_fp8_scale(spec.io.cache_dtype, rng);
}

// An op whose data was written with other positions (OpFacts::from_rope): where each key moves. Explicit: a new position per key (one case in four keeps
// them all: the LongRoPE switch), else a shift of each sequence's start, as a context shift
// moves a window; positions stay in [0, max_position).
void draw_moves(const Spec& spec, const WorkloadOptions& o, std::mt19937_64& rng, HostWorkload& w) {
  const PositionsForm form = spec.io.positions;
  // Each key's sequence (offset: the one) and old position, as the positions form gives them.
  std::vector<int> sequence(static_cast<size_t>(o.tokens), 0);
  w.moved_positions.assign(static_cast<size_t>(o.tokens), 0);
  for (int64_t t = 0; t < o.tokens; ++t) {
    if (form == PositionsForm::explicit_) {
      w.moved_positions[t] = w.positions[t];
      continue;
    }
    int& b = sequence[t];
    if (form == PositionsForm::varlen)
      while (w.cu_seqlens[b + 1] <= t) ++b;
    w.moved_positions[t] = w.start_pos[b] + (form == PositionsForm::varlen ? t - w.cu_seqlens[b] : t);
  }
  w.from_seq_len = w.seq_len;
  if (rng() % 4 != 0) {
    std::uniform_int_distribution<int64_t> position(0, std::max<int64_t>(o.max_position - 1, 0));
    if (form == PositionsForm::explicit_) {
      for (auto& p : w.moved_positions) p = position(rng);
      w.new_positions = w.moved_positions;
    } else {
      for (size_t b = 0; b < w.start_pos.size(); ++b) {
        const int64_t len = form == PositionsForm::varlen ? w.cu_seqlens[b + 1] - w.cu_seqlens[b] : o.tokens;
        w.new_start_pos.push_back(std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(o.max_position - len, 0))(rng));
      }
      for (int64_t t = 0; t < o.tokens; ++t) w.moved_positions[t] += w.new_start_pos[sequence[t]] - w.start_pos[sequence[t]];
    }
  }
  w.seq_len = 1 + (o.tokens ? *std::max_element(w.moved_positions.begin(), w.moved_positions.end()) : 0);
}

// A cache the launch reads (OpFacts::from_rope: written before, with from_rope): random finite values (the keys), in the cache dtype: normal(0, 1)
// in the storage dtype, or FP8 codes that are no NaN (and no infinity: e5m2).
std::string random_keys(const Spec& spec, int64_t count, std::mt19937_64& rng) {
  if (spec.io.cache_dtype == CacheDType::auto_) return random_values(spec.dtype, count, 0, 1.0, rng);
  std::string bytes(static_cast<size_t>(count), '\0');
  const bool e4m3 = spec.io.cache_dtype == CacheDType::fp8_e4m3;
  for (char& c : bytes) {
    uint8_t code;
    do code = static_cast<uint8_t>(rng());
    while (e4m3 ? (code & 0x7f) == 0x7f : (code & 0x7c) == 0x7c);
    c = static_cast<char>(code);
  }
  return bytes;
}

std::string random_bytes(int64_t count, std::mt19937_64& rng) {
  std::string bytes(static_cast<size_t>(count), '\0');
  for (size_t at = 0; at < bytes.size(); at += 8) {
    const uint64_t word = rng();
    std::memcpy(&bytes[at], &word, std::min<size_t>(8, bytes.size() - at));
  }
  return bytes;
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
    case BufferKind::cache: return written_rope(spec) ? random_keys(spec, b.rows * b.row_stride, rng) : random_bytes(b.bytes(), rng);
    case BufferKind::slot_mapping: return raw_bytes(w.slot_mapping);
    case BufferKind::block_tables: return raw_bytes(w.block_tables);
    case BufferKind::new_positions:
      if (w.new_positions.empty()) return {};  // keys keep their positions: the argument stays null
      if (w.shape.positions_type == PositionsType::int64) return raw_bytes(w.new_positions);
      return raw_bytes(std::vector<int32_t>(w.new_positions.begin(), w.new_positions.end()));
    case BufferKind::new_start_pos: return raw_bytes(w.new_start_pos);
    case BufferKind::table:  // the caller's own numbers (a cos/sin cache: any finite values, not unit pairs)
      return random_values(*enum_from_string<DType>(b.element_type), b.rows * b.row_stride, o.distinct_elements,
                           1.0, rng);
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
    case PositionsForm::mrope:
    case PositionsForm::axes: draw_positions(o, position_streams(spec), rng, w); break;
  }
  if (written_rope(spec)) draw_moves(spec, o, rng, w);
  if (paged_kv(spec)) draw_cache(spec, o, rng, w);
  // A row for every position, and 0-2 rows no token reads (odd sizes).
  if (caller_cos_sin(spec))
    w.shape.cos_sin_rows =
        o.cos_sin_rows ? o.cos_sin_rows : std::max<int64_t>(w.seq_len, 1) + static_cast<int64_t>(rng() % 3);
  if (spec.io.q_output_dtype != CacheDType::auto_ && !q_scale_computed(spec))
    w.shape.q_scale = draw_fp8_scale(spec.io.q_output_dtype, rng);
  for (BufferDesc desc : launch_buffers(spec, w.shape)) {
    // Gaps between token rows and cache pages: a kernel must leave them untouched.
    if ((desc.token_rows || desc.kind == BufferKind::cache) && o.stride_vec > 0)
      desc.row_stride += o.stride_vec * (1 + static_cast<int64_t>(rng() % 2));
    std::string bytes = contents(spec, o, w, desc, rng);
    w.buffers.push_back({desc, std::move(bytes)});
  }
  return w;
}

}  // namespace ropejit
