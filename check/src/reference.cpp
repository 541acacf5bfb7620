// Expected outputs of one launch (bias add -> rotate -> scatter) and the tolerance check.
#include "ropejit/check/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "ropejit/fp_convert.h"

namespace ropejit::ref {
namespace {

[[noreturn]] void bad_problem(const std::string& what) {
  throw std::invalid_argument("reference_outputs: " + what);
}

/// Sequence and row of every token, from cu_seqlens (empty when not given).
struct Sequences {
  int64_t batch = 0;
  std::vector<int64_t> sequence_of_token;
  std::vector<int64_t> row_of_token;
};

Sequences split_sequences(const RefProblem& problem) {
  Sequences seqs;
  const auto& cu = problem.cu_seqlens;
  if (cu.empty()) return seqs;
  seqs.batch = static_cast<int64_t>(cu.size()) - 1;
  if (seqs.batch < 1 || cu.front() != 0 || cu.back() != problem.num_tokens)
    bad_problem("cu_seqlens must start at 0 and end at num_tokens (" + std::to_string(problem.num_tokens) + ")");
  seqs.sequence_of_token.resize(static_cast<size_t>(problem.num_tokens));
  seqs.row_of_token.resize(static_cast<size_t>(problem.num_tokens));
  for (int64_t b = 0; b < seqs.batch; ++b) {
    if (cu[b + 1] < cu[b]) bad_problem("cu_seqlens must not decrease");
    for (int64_t t = cu[b]; t < cu[b + 1]; ++t) {
      seqs.sequence_of_token[t] = b;
      seqs.row_of_token[t] = t - cu[b];
    }
  }
  return seqs;
}

std::vector<int64_t> token_positions(const Spec& spec, const RefProblem& problem, const Sequences& seqs) {
  if (spec.io.positions == PositionsForm::mrope) {  // [3, T]: the temporal stream stands for the token
    if (static_cast<int64_t>(problem.positions.size()) != 3 * problem.num_tokens)
      bad_problem("mrope positions need 3 * num_tokens entries ([3, T])");
    return std::vector<int64_t>(problem.positions.begin(), problem.positions.begin() + problem.num_tokens);
  }
  if (spec.io.positions == PositionsForm::explicit_) {
    if (static_cast<int64_t>(problem.positions.size()) != problem.num_tokens)
      bad_problem("explicit positions need num_tokens entries");
    return problem.positions;
  }
  if (spec.io.positions == PositionsForm::offset) {  // one sequence: start_pos[0] + t
    if (problem.start_pos.size() > 1) bad_problem("offset positions take at most one start_pos");
    const int64_t start = problem.start_pos.empty() ? 0 : problem.start_pos[0];
    std::vector<int64_t> positions(static_cast<size_t>(problem.num_tokens));
    for (int64_t t = 0; t < problem.num_tokens; ++t) positions[t] = start + t;
    return positions;
  }
  if (seqs.batch == 0) bad_problem("varlen positions need cu_seqlens");
  if (!problem.start_pos.empty() && static_cast<int64_t>(problem.start_pos.size()) != seqs.batch)
    bad_problem("start_pos needs one entry per sequence");
  std::vector<int64_t> positions(static_cast<size_t>(problem.num_tokens));
  for (int64_t t = 0; t < problem.num_tokens; ++t) {
    const int64_t start = problem.start_pos.empty() ? 0 : problem.start_pos[seqs.sequence_of_token[t]];
    positions[t] = start + seqs.row_of_token[t];
  }
  return positions;
}

/// The position stream of each frequency pair, built the way HF builds it. Qwen2-VL
/// (apply_multimodal_rotary_pos_emb): cos/sin of width rotary_dim (the d/2 frequencies twice)
/// split into chunks of mrope_section * 2, chunk i taken from stream i % 3. Qwen3-VL
/// (apply_interleaved_mrope): the temporal stream's frequencies, with slice(1, 3 h, 3) taken
/// from height and slice(2, 3 w, 3) from width. Every other form: stream 0 throughout.
std::vector<int> pair_streams(const Spec& spec) {
  const int half = spec.rotary_dim / 2;
  std::vector<int> stream(static_cast<size_t>(half), 0);
  if (spec.io.positions != PositionsForm::mrope) return stream;
  const std::vector<int>& section = spec.io.mrope_section;
  if (section.size() != 3) bad_problem("mrope needs io.mrope_section of 3 counts");
  if (spec.io.mrope_interleaved) {
    for (int dim = 1; dim <= 2; ++dim)
      for (int j = dim; j < 3 * section[dim] && j < half; j += 3) stream[j] = dim;
    return stream;
  }
  std::vector<int> emb;  // stream of each of the rotary_dim cos/sin columns
  for (int chunk = 0; chunk < 6; ++chunk) emb.insert(emb.end(), section[chunk % 3], chunk % 3);
  if (static_cast<int>(emb.size()) != 2 * half) bad_problem("mrope_section must sum to rotary_dim / 2");
  for (int j = 0; j < half; ++j) {
    if (emb[j] != emb[j + half]) bad_problem("mrope columns j and j + d/2 disagree");  // rotate_half pairs them
    stream[j] = emb[j];
  }
  return stream;
}

/// RMSNorm of one biased head row (Qwen3 / Gemma 3 q_norm, k_norm): x / sqrt(mean(x^2) + eps)
/// times (weight_offset + w) per element, in float64.
void normalize_head(const Spec& spec, const void* weight, std::vector<double>& row) {
  const QkNorm& norm = spec.qk_norm;
  const bool weighted = norm.weight == NormWeight::per_head;
  if (weighted && !weight) bad_problem("qk_norm with weight per_head needs problem.q_norm_weight and k_norm_weight");
  double squares = 0.0;
  for (double x : row) squares += x * x;
  const double inv_rms = 1.0 / std::sqrt(squares / static_cast<double>(row.size()) + norm.eps);
  for (size_t e = 0; e < row.size(); ++e)
    row[e] *= inv_rms * (weighted ? norm.weight_offset + load_value(spec.dtype, weight, static_cast<int64_t>(e)) : 1.0);
}

/// Reads head rows of one role (q, k or v) from either input form.
struct RoleReader {
  DType dtype;
  int head_dim;
  const void* data;
  int64_t token_stride;
  int64_t head_stride;
  int64_t first_head;  // packed: role's first head inside the row
  double at(int64_t token, int64_t head, int element) const {
    return load_value(dtype, data, token * token_stride + (first_head + head) * head_stride + element);
  }
};

RoleReader make_reader(const Spec& spec, const RefInput& in, int64_t heads, int64_t first_head) {
  const int64_t d = spec.head_dim;
  return RoleReader{spec.dtype, spec.head_dim, in.data,
                    in.token_stride ? in.token_stride : heads * d,
                    in.head_stride ? in.head_stride : d, first_head};
}

RefTensor make_tensor(const std::string& name, RefLayout layout, int64_t batch, int64_t rows,
                      int64_t heads, int64_t head_dim) {
  RefTensor t;
  t.name = name;
  t.layout = layout;
  t.batch = batch;
  t.rows = rows;
  t.heads = heads;
  t.head_dim = head_dim;
  const size_t n = static_cast<size_t>(batch * rows * heads * head_dim);
  t.value.assign(n, 0.0);
  t.scale.assign(n, 0.0);
  t.inv_freq_slack.assign(n, 0.0);
  t.padding.assign(n, layout == RefLayout::padded_bhsd ? 1 : 0);  // rows filled below clear it
  return t;
}

/// Where token t, head h of a role lands in an output tensor (-1: nowhere).
struct Destination {
  RefTensor* tensor;
  int64_t head_offset;  // packed in place: the role's first head
  const std::vector<int64_t>* slots = nullptr;  // a paged cache: each token's slot (-1: none)
  int64_t element_index(const Sequences& seqs, int64_t token, int64_t head) const {
    const int64_t h = head_offset + head;
    if (slots) {  // page = slot / page_size is the cache's "batch", offset its "row"
      const int64_t slot = (*slots)[static_cast<size_t>(token)];
      if (slot < 0) return -1;
      return (((slot / tensor->rows) * tensor->heads + h) * tensor->rows + slot % tensor->rows) * tensor->head_dim;
    }
    if (tensor->layout == RefLayout::token_major) return (token * tensor->heads + h) * tensor->head_dim;
    const int64_t b = seqs.sequence_of_token[token], s = seqs.row_of_token[token];
    return ((b * tensor->heads + h) * tensor->rows + s) * tensor->head_dim;
  }
};

/// paged_kv: the cache slot of every token, from the slot mapping, or from its sequence's block
/// table at its position; checked against the caches' size.
std::vector<int64_t> cache_slots(const Spec& spec, const RefProblem& problem, const Sequences& seqs,
                                 const std::vector<int64_t>& positions) {
  const int64_t T = problem.num_tokens, page_size = spec.io.page_size;
  std::vector<int64_t> slots(static_cast<size_t>(T), -1);
  for (int64_t t = 0; t < T; ++t) {
    if (spec.io.cache_index == CacheIndex::slot_mapping) {
      if (static_cast<int64_t>(problem.slot_mapping.size()) != T) bad_problem("slot_mapping needs num_tokens entries");
      slots[t] = problem.slot_mapping[t];
    } else {
      if (seqs.batch == 0) bad_problem("block_tables needs varlen sequences (cu_seqlens)");
      const int64_t block = positions[t] / page_size;
      const size_t at = static_cast<size_t>(seqs.sequence_of_token[t] * problem.max_blocks_per_seq + block);
      if (block >= problem.max_blocks_per_seq || at >= problem.block_tables.size())
        bad_problem("block_tables has no entry for a token's block");
      slots[t] = int64_t{problem.block_tables[at]} * page_size + positions[t] % page_size;
    }
    if (slots[t] < -1 || slots[t] >= problem.cache_pages * page_size) bad_problem("a cache slot lies outside the caches");
  }
  return slots;
}

Fp8Format fp8_format(CacheDType type) { return type == CacheDType::fp8_e5m2 ? Fp8Format::e5m2 : Fp8Format::e4m3; }

/// op rerotate: the K cache after the launch (see reference_outputs).
RefOutputs reference_rerotate(const Spec& spec, const RefProblem& problem) {
  const int64_t T = problem.num_tokens, D = spec.head_dim, Hkv = spec.num_kv_heads, page_size = spec.io.page_size;
  if (!problem.k_cache_in) bad_problem("op rerotate needs problem.k_cache_in");
  const Sequences seqs = split_sequences(problem);
  RefOutputs out;
  out.token_positions = token_positions(spec, problem, seqs);
  const std::vector<int64_t>& moved = problem.new_positions.empty() ? out.token_positions : problem.new_positions;
  if (static_cast<int64_t>(moved.size()) != T) bad_problem("new_positions needs num_tokens entries");
  int64_t max_old = -1, max_new = -1;
  for (int64_t t = 0; t < T; ++t) {
    max_old = std::max(max_old, out.token_positions[t]);
    max_new = std::max(max_new, moved[t]);
  }
  out.run_length = problem.run_length > 0 ? problem.run_length : max_new + 1;
  out.freqs = reference_freqs(spec, out.run_length, /*hf_fp32=*/true);
  Spec written = spec;
  written.rope = spec.from_rope;
  const RefFreqs from = reference_freqs(written, problem.from_run_length > 0 ? problem.from_run_length : max_old + 1, true);
  const std::vector<int64_t> slots = cache_slots(spec, problem, seqs, out.token_positions);

  out.tensors.push_back(make_tensor("k_cache", RefLayout::padded_bhsd, problem.cache_pages, page_size, Hkv, D));
  RefTensor& cache = out.tensors.back();
  std::fill(cache.padding.begin(), cache.padding.end(), 0);
  cache.untouched.assign(cache.value.size(), 1);  // until a key's rotary pairs are written
  const bool fp8 = spec.io.cache_dtype != CacheDType::auto_;
  cache.cache_dtype = spec.io.cache_dtype;
  cache.quant_scale = fp8 ? problem.k_scale : 1.0;
  if (!(cache.quant_scale > 0.0)) bad_problem("an FP8 cache needs k_scale > 0");
  // Element (page, offset, head, e) of the cache as it was: nhd [pages, page_size, Hkv, D] or
  // hnd [pages, Hkv, page_size, D], pages page_stride apart.
  const bool hnd = spec.io.cache_layout == CacheLayout::hnd;
  const int64_t page_stride = problem.cache_page_stride ? problem.cache_page_stride : page_size * Hkv * D;
  const int64_t row_stride = hnd ? D : Hkv * D, head_stride = hnd ? page_size * D : D;
  const Fp8Format format = fp8_format(spec.io.cache_dtype);
  auto stored = [&](int64_t page, int64_t offset, int64_t head, int e) {
    const int64_t at = page * page_stride + offset * row_stride + head * head_stride + e;
    if (!fp8) return load_value(spec.dtype, problem.k_cache_in, at);
    return fp8_bits_to_double(format, static_cast<const uint8_t*>(problem.k_cache_in)[at]) * problem.k_scale;
  };
  const double ratio = out.freqs.attention_factor / from.attention_factor;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slots[static_cast<size_t>(t)];
    if (slot < 0) continue;
    const int64_t page = slot / page_size, offset = slot % page_size;
    for (int64_t h = 0; h < Hkv; ++h) {
      const int64_t base = ((page * Hkv + h) * page_size + offset) * D;
      for (int i = 0; i < spec.rotary_dim / 2; ++i) {
        if (out.freqs.inv_freq[i] == 0.0 && from.inv_freq[i] == 0.0) continue;  // no angle: bytes kept
        const auto [a, b] = pair_elements(spec.layout, spec.rotary_dim, i);
        const double x = stored(page, offset, h, a), y = stored(page, offset, h, b);
        const double angle = reference_angle(spec, moved[t], out.freqs.inv_freq[i]) -
                             reference_angle(spec, out.token_positions[t], from.inv_freq[i]);
        const auto [rx, ry] = rotate_pair(x, y, angle, ratio);
        for (const auto& [e, value] : {std::pair<int, double>{a, rx}, {b, ry}}) {
          cache.value[base + e] = value;
          cache.scale[base + e] = ratio * std::hypot(x, y);
          cache.untouched[base + e] = 0;
        }
      }
    }
  }
  return out;
}

}  // namespace

const RefTensor* RefOutputs::find(const std::string& name) const {
  for (const RefTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

RefOutputs reference_outputs(const Spec& spec, const RefProblem& problem) {
  if (written_rope(spec)) return reference_rerotate(spec, problem);
  const int64_t T = problem.num_tokens, D = spec.head_dim;
  const int64_t Hq = spec.num_q_heads, Hkv = spec.num_kv_heads;
  const int rotary_dim = spec.rotary_dim;
  if (T < 0 || D <= 0 || Hq <= 0 || Hkv <= 0 || rotary_dim > D) bad_problem("sizes do not fit the spec");
  if (spec.io.qkv_bias != (problem.bias != nullptr))
    bad_problem(spec.io.qkv_bias ? "io.qkv_bias needs problem.bias" : "problem.bias given but io.qkv_bias is false");

  const Sequences seqs = split_sequences(problem);
  RefOutputs out;
  out.token_positions = token_positions(spec, problem, seqs);
  const std::vector<int> streams = pair_streams(spec);
  // Position of token t for pair i: its stream's entry of the [3, T] array (mrope), else the token's.
  auto position_of = [&](int64_t t, int i) {
    return spec.io.positions == PositionsForm::mrope ? problem.positions[static_cast<size_t>(streams[i] * T + t)]
                                                     : out.token_positions[t];
  };
  int64_t max_position = -1;
  for (int64_t p : spec.io.positions == PositionsForm::mrope ? problem.positions : out.token_positions)
    max_position = std::max(max_position, p);
  out.run_length = problem.run_length > 0 ? problem.run_length : max_position + 1;
  out.freqs = reference_freqs(spec, out.run_length, /*hf_fp32=*/true);

  // Inputs per role.
  const bool packed = spec.io.input == InputForm::packed_qkv;
  RoleReader readers[3];
  bool have_v;
  if (packed) {
    if (!problem.qkv.data) bad_problem("packed_qkv input needs problem.qkv");
    RefInput row = problem.qkv;
    if (!row.token_stride) row.token_stride = (Hq + 2 * Hkv) * D;
    readers[0] = make_reader(spec, row, Hq, 0);
    readers[1] = make_reader(spec, row, Hkv, Hq);
    readers[2] = make_reader(spec, row, Hkv, Hq + Hkv);
    have_v = true;
  } else {
    if (!problem.q.data || !problem.k.data) bad_problem("separate input needs problem.q and problem.k");
    readers[0] = make_reader(spec, problem.q, Hq, 0);
    readers[1] = make_reader(spec, problem.k, Hkv, 0);
    have_v = problem.v.data != nullptr;
    if (have_v) readers[2] = make_reader(spec, problem.v, Hkv, 0);
  }
  if (spec.io.copy_v && !have_v) bad_problem("io.copy_v needs problem.v");

  // Output tensors per role.
  const int64_t role_heads[3] = {Hq, Hkv, Hkv};
  const char* role_names[3] = {"q", "k", "v"};
  const bool inplace = spec.io.output == OutputForm::inplace;
  // In place, an untouched v must stay as it was: it is expected unchanged.
  const bool emit_v = spec.io.copy_v || (inplace && have_v);
  Destination dest[3] = {};
  const bool paged = spec.io.output == OutputForm::paged_kv;
  std::vector<int64_t> slots;
  if (paged) {
    slots = cache_slots(spec, problem, seqs, out.token_positions);
    if (spec.io.q_output == QOutput::inplace && packed) {  // q rotated in place; k and v stay as they are
      out.tensors.push_back(make_tensor("qkv", RefLayout::token_major, 1, T, Hq + 2 * Hkv, D));
      RefTensor& qkv = out.tensors.back();
      qkv.untouched.assign(qkv.value.size(), 0);
      for (int64_t t = 0; t < T; ++t)
        std::fill(qkv.untouched.begin() + ((t * (Hq + 2 * Hkv) + Hq) * D),
                  qkv.untouched.begin() + ((t + 1) * (Hq + 2 * Hkv) * D), 1);
    } else {
      out.tensors.push_back(make_tensor("q", RefLayout::token_major, 1, T, Hq, D));
    }
    for (int role = 1; role < 3; ++role) {
      out.tensors.push_back(make_tensor(role == 1 ? "k_cache" : "v_cache", RefLayout::padded_bhsd,
                                        problem.cache_pages, spec.io.page_size, Hkv, D));
      RefTensor& cache = out.tensors.back();
      std::fill(cache.padding.begin(), cache.padding.end(), 0);
      cache.untouched.assign(cache.value.size(), 1);  // until a token's slot writes it
      cache.cache_dtype = spec.io.cache_dtype;
      cache.quant_scale = spec.io.cache_dtype == CacheDType::auto_ ? 1.0 : role == 1 ? problem.k_scale : problem.v_scale;
      if (!(cache.quant_scale > 0.0)) bad_problem("FP8 caches need k_scale and v_scale > 0");
    }
    dest[0] = Destination{&out.tensors[0], 0};
    dest[1] = Destination{&out.tensors[1], 0, &slots};
    dest[2] = Destination{&out.tensors[2], 0, &slots};
  } else if (spec.io.output == OutputForm::padded_bhsd) {
    if (seqs.batch == 0) bad_problem("padded_bhsd output needs cu_seqlens");
    int64_t longest = 0;
    for (int64_t b = 0; b < seqs.batch; ++b)
      longest = std::max<int64_t>(longest, problem.cu_seqlens[b + 1] - problem.cu_seqlens[b]);
    const int64_t S = problem.max_seq_len ? problem.max_seq_len : longest;
    if (S < longest) bad_problem("max_seq_len is below the longest sequence");
    for (int role = 0; role < 3; ++role) {
      if (role == 2 && !spec.io.copy_v) break;
      out.tensors.push_back(make_tensor(role_names[role], RefLayout::padded_bhsd, seqs.batch, S, role_heads[role], D));
      out.tensors.back().row_token.assign(static_cast<size_t>(seqs.batch * S), -1);
      for (int64_t t = 0; t < T; ++t)
        out.tensors.back().row_token[seqs.sequence_of_token[t] * S + seqs.row_of_token[t]] = t;
    }
  } else if (inplace && packed) {
    out.tensors.push_back(make_tensor("qkv", RefLayout::token_major, 1, T, Hq + 2 * Hkv, D));
  } else {
    for (int role = 0; role < 3; ++role)
      if (role < 2 || emit_v) out.tensors.push_back(make_tensor(role_names[role], RefLayout::token_major, 1, T, role_heads[role], D));
  }
  for (int role = 0; role < 3 && !paged; ++role) {
    if (out.tensors.size() == 1) {
      dest[role] = Destination{&out.tensors[0], role == 0 ? 0 : role == 1 ? Hq : Hq + Hkv};
    } else if (role < static_cast<int>(out.tensors.size())) {
      dest[role] = Destination{&out.tensors[static_cast<size_t>(role)], 0};
    }
  }

  // The math: per token, per role, per head.
  const int pairs = rotary_dim / 2;
  const double s = out.freqs.attention_factor;
  const int64_t bias_offset[3] = {0, Hq * D, (Hq + Hkv) * D};
  std::vector<double> angle(static_cast<size_t>(pairs)), angle_slack(static_cast<size_t>(pairs));
  const double float_ulp = std::ldexp(1.0, -23);  // relative spacing bound of float32
  std::vector<double> row(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < pairs; ++i) {
      const double position = static_cast<double>(position_of(t, i));
      angle[i] = reference_angle(spec, position_of(t, i), out.freqs.inv_freq[i]);
      angle_slack[i] = position * out.freqs.inv_freq[i] * float_ulp +
                       (spec.angle == AnglePrecision::fp32 ? std::fabs(angle[i]) * float_ulp : 0.0);
    }
    for (int role = 0; role < 3; ++role) {
      if (role == 2 && !emit_v) continue;
      const bool touched = role < 2 || spec.io.copy_v;  // an untouched v gets no bias
      const Destination& to = dest[role];
      if (to.slots && (*to.slots)[static_cast<size_t>(t)] < 0) continue;  // k and v of an uncached token
      for (int64_t h = 0; h < role_heads[role]; ++h) {
        for (int e = 0; e < D; ++e) {
          row[e] = readers[role].at(t, h, e);
          if (touched && problem.bias) row[e] += load_value(spec.dtype, problem.bias, bias_offset[role] + h * D + e);
        }
        if (role < 2 && spec.qk_norm.enabled) normalize_head(spec, role == 0 ? problem.q_norm_weight : problem.k_norm_weight, row);
        const int64_t base = to.element_index(seqs, t, h);
        RefTensor& tensor = *to.tensor;
        for (int e = 0; e < D; ++e) {
          tensor.value[base + e] = row[e];
          tensor.scale[base + e] = std::fabs(row[e]);
          tensor.padding[base + e] = 0;
          if (!tensor.untouched.empty()) tensor.untouched[base + e] = 0;
        }
        if (role == 2) continue;  // v is never rotated
        for (int i = 0; i < pairs; ++i) {
          const auto [a, b] = pair_elements(spec.layout, rotary_dim, i);
          if (out.freqs.inv_freq[i] == 0.0) {  // proportional's frequency-0 pairs: cos 1, sin 0
            tensor.value[base + a] = row[a] * s;
            tensor.value[base + b] = row[b] * s;
            continue;
          }
          const auto [x, y] = rotate_pair(row[a], row[b], angle[i], s);
          const double pair_scale = s * std::hypot(row[a], row[b]);
          tensor.value[base + a] = x;
          tensor.value[base + b] = y;
          tensor.scale[base + a] = pair_scale;
          tensor.scale[base + b] = pair_scale;
          tensor.inv_freq_slack[base + a] = angle_slack[i] * pair_scale;
          tensor.inv_freq_slack[base + b] = angle_slack[i] * pair_scale;
        }
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------- compare

std::string CheckResult::summary() const {
  char line[256];
  std::snprintf(line, sizeof line, "%lld/%lld elements failed; max abs error %.3g, max scaled error %.3g, max ulps %lld",
                static_cast<long long>(failures), static_cast<long long>(checked), max_abs_error,
                max_scaled_error, static_cast<long long>(max_ulps));
  return first_failure.empty() ? std::string(line) : std::string(line) + "; first: " + first_failure;
}

namespace {

/// Human-readable location of element `index` of an expected tensor.
std::string describe_location(const RefTensor& t, int64_t index) {
  const int64_t e = index % t.head_dim;
  int64_t rest = index / t.head_dim;
  char text[160];
  if (t.layout == RefLayout::token_major) {
    const int64_t h = rest % t.heads, token = rest / t.heads;
    std::snprintf(text, sizeof text, "%s token %lld head %lld element %lld", t.name.c_str(),
                  static_cast<long long>(token), static_cast<long long>(h), static_cast<long long>(e));
  } else {
    const int64_t s = rest % t.rows;
    rest /= t.rows;
    const int64_t h = rest % t.heads, b = rest / t.heads;
    const int64_t token = t.row_token.empty() ? -1 : t.row_token[b * t.rows + s];
    std::snprintf(text, sizeof text, "%s batch %lld row %lld (token %lld) head %lld element %lld", t.name.c_str(),
                  static_cast<long long>(b), static_cast<long long>(s), static_cast<long long>(token),
                  static_cast<long long>(h), static_cast<long long>(e));
  }
  return text;
}

/// The value an FP8 cache element stands for: its code's value times the scale.
double fp8_value(const RefTensor& expected, uint32_t bits) {
  return fp8_bits_to_double(fp8_format(expected.cache_dtype), static_cast<uint8_t>(bits)) * expected.quant_scale;
}

/// An FP8 element: the correctly rounded, saturated code of value / scale, or its neighbour when
/// that quotient lies within fp32 noise of the midpoint between the two codes.
bool fp8_matches(const RefTensor& expected, int64_t index, uint8_t bits, const Tolerance& tolerance,
                 double& reference_value, CheckResult& result) {
  const Fp8Format format = fp8_format(expected.cache_dtype);
  const double quotient = expected.value[index] / expected.quant_scale;
  const uint8_t want = round_to_fp8_bits(format, quotient);
  reference_value = fp8_bits_to_double(format, want) * expected.quant_scale;
  const double got = fp8_bits_to_double(format, bits) * expected.quant_scale;
  if (std::isfinite(got)) result.max_abs_error = std::max(result.max_abs_error, std::fabs(got - reference_value));
  const int64_t ulps = fp8_ulp_distance(format, bits, want);
  if (ulps != std::numeric_limits<int64_t>::max()) result.max_ulps = std::max(result.max_ulps, ulps);
  if (ulps == 0) return true;
  if (ulps != 1) return false;
  const double midpoint = (fp8_bits_to_double(format, bits) + fp8_bits_to_double(format, want)) / 2;
  // fp32 math noise of the value, and the kernel's float32 reciprocal of the scale.
  const double noise = tolerance.fp32_relative * std::max(std::fabs(expected.value[index]), expected.scale[index]) /
                           expected.quant_scale + std::fabs(quotient) * std::ldexp(1.0, -22);
  return std::fabs(quotient - midpoint) <= noise;
}

}  // namespace

int64_t actual_offset(const RefTensor& expected, const ActualTensor& actual, int64_t index) {
  const int64_t D = expected.head_dim, H = expected.heads, S = expected.rows;
  const bool padded = expected.layout == RefLayout::padded_bhsd;
  const int64_t head_stride = actual.head_stride ? actual.head_stride : (padded ? S * D : D);
  const int64_t token_stride = actual.token_stride ? actual.token_stride : (padded ? D : H * D);
  const int64_t batch_stride = actual.batch_stride ? actual.batch_stride : H * S * D;
  const int64_t e = index % D;
  int64_t rest = index / D;
  if (!padded) return (rest / H) * token_stride + (rest % H) * head_stride + e;
  const int64_t s = rest % S;
  rest /= S;
  return (rest / H) * batch_stride + (rest % H) * head_stride + s * token_stride + e;
}

CheckResult compare(DType dtype, const RefTensor& expected, const ActualTensor& actual, const Tolerance& tolerance) {
  CheckResult result;
  if (!actual.data) {
    result.failures = 1;
    result.first_failure = expected.name + ": no actual data";
    return result;
  }
  for (int64_t index = 0; index < expected.size(); ++index) {
    const int64_t offset = actual_offset(expected, actual, index);
    if (!expected.untouched.empty() && expected.untouched[index]) continue;  // the caller's byte check
    const bool fp8 = expected.cache_dtype != CacheDType::auto_;
    const uint32_t bits = fp8 ? static_cast<const uint8_t*>(actual.data)[offset] : load_bits(dtype, actual.data, offset);
    const double want = expected.value[index];
    const double got = fp8 ? fp8_value(expected, bits) : dtype_bits_to_double(dtype, bits);
    ++result.checked;
    bool pass;
    double reference_value = want;
    if (fp8) {
      pass = fp8_matches(expected, index, static_cast<uint8_t>(bits), tolerance, reference_value, result);
    } else if (expected.padding[index]) {
      pass = got == 0.0;  // +0 or -0; NaN compares false
    } else {
      const double error = std::fabs(got - want);
      const double magnitude = std::max(std::fabs(want), expected.scale[index]);
      const double slack = expected.inv_freq_slack.empty() ? 0.0 : tolerance.inv_freq_ulps * expected.inv_freq_slack[index];
      if (std::isfinite(error)) {
        result.max_abs_error = std::max(result.max_abs_error, error);
        if (magnitude > 0) result.max_scaled_error = std::max(result.max_scaled_error, error / magnitude);
      }
      if (dtype == DType::fp32) {
        pass = error <= tolerance.fp32_relative * magnitude + slack;  // false for NaN
      } else {
        const uint32_t want_bits = round_to_dtype_bits(dtype, want);
        reference_value = dtype_bits_to_double(dtype, want_bits);
        const int64_t ulps = ulp_distance(dtype, bits, want_bits);
        if (ulps != std::numeric_limits<int64_t>::max()) result.max_ulps = std::max(result.max_ulps, ulps);
        // One storage ulp at the expected value: distance to the next representable number.
        const uint32_t magnitude_bits = want_bits & 0x7FFFu;
        const uint32_t neighbour = is_nonfinite_bits(dtype, magnitude_bits + 1) ? magnitude_bits - 1 : magnitude_bits + 1;
        const double spacing = std::fabs(dtype_bits_to_double(dtype, neighbour) - dtype_bits_to_double(dtype, magnitude_bits));
        pass = !is_nonfinite_bits(dtype, bits) &&
               (ulps <= tolerance.max_ulps || error <= tolerance.fp32_relative * expected.scale[index] + spacing + slack);
      }
    }
    if (!pass) {
      if (result.failures++ == 0) {
        char values[200];
        std::snprintf(values, sizeof values, ": actual %.9g, expected %.9g (in storage type %.9g), scale %.4g%s",
                      got, want, reference_value, expected.scale[index],
                      expected.padding[index] ? " [padding must be zero]" : "");
        result.first_failure = describe_location(expected, index) + values;
      }
    }
  }
  return result;
}

}  // namespace ropejit::ref
