// The reference helpers every op shares, the per-op table reference_outputs dispatches through,
// and the tolerance check (compare). The ops' own math: reference_rope.cpp, op_rerotate.cpp.
#include "ropejit/check/reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "reference_detail.h"
#include "ropejit/fp_convert.h"

namespace ropejit::ref::detail {

[[noreturn]] void bad_problem(const std::string& what) {
  throw std::invalid_argument("reference_outputs: " + what);
}

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
  if (per_pair_positions(spec)) {  // [3, T] / [A, T]: the first stream stands for the token
    if (static_cast<int64_t>(problem.positions.size()) != position_streams(spec) * problem.num_tokens)
      bad_problem("mrope / axes positions need one row of num_tokens entries per stream ([3, T] / [A, T])");
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
  t.padding.assign(n, layout == RefLayout::padded_bhsd ? 1 : 0);  // rows stored later clear it
  return t;
}

RefTensor make_cache_tensor(const Spec& spec, const RefProblem& problem, const std::string& name, double fp8_scale,
                            const std::string& scale_name) {
  return make_cache_tensor(spec, problem, name, fp8_scale, scale_name, spec.num_kv_heads, spec.head_dim);
}

RefTensor make_cache_tensor(const Spec& spec, const RefProblem& problem, const std::string& name, double fp8_scale,
                            const std::string& scale_name, int64_t heads, int64_t head_dim) {
  RefTensor cache = make_tensor(name, RefLayout::padded_bhsd, problem.cache_pages, spec.io.page_size, heads, head_dim);
  std::fill(cache.padding.begin(), cache.padding.end(), 0);
  cache.untouched.assign(cache.value.size(), 1);  // until a token's slot writes it
  cache.cache_dtype = spec.io.cache_dtype;
  cache.quant_scale = caller_cache_scale(spec) ? fp8_scale : 1.0;  // else none, or the launch's own
  if (!(cache.quant_scale > 0.0)) bad_problem("an FP8 cache needs " + scale_name + " > 0");
  return cache;
}

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

Fp8Format fp8_format(CacheDType type) {
  return type == CacheDType::fp8_e5m2 ? Fp8Format::e5m2 : type == CacheDType::nvfp4 ? Fp8Format::e2m1 : Fp8Format::e4m3;
}

// Each op's row lives in its own file; ROPEJIT_OPS lists them (a missing one fails to link).
#define ROPEJIT_CHECK_OP_ROW(name) &kCheckOp_##name,
const CheckOp* const kCheckOps[] = {ROPEJIT_OPS(ROPEJIT_CHECK_OP_ROW)};
#undef ROPEJIT_CHECK_OP_ROW

const CheckOp& check_op(OpKind op) {
  for (const CheckOp* row : kCheckOps)
    if (row->op == op) return *row;
  bad_problem("no check row for op " + std::string(to_string(op)));
}

}  // namespace ropejit::ref::detail

namespace ropejit::ref {

using detail::fp8_format;

const RefTensor* RefOutputs::find(const std::string& name) const {
  for (const RefTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

// The per-group FP8 scale of a group's amax: max(amax * fl32(1 / FP8 max), 1 / (FP8 max * 512)); with
// scale_rounding ue8m0 the least power of two >= max(amax / FP8 max, that floor).
double group_scale(const Spec& spec, CacheDType type, double amax) {
  const double fp8_max = type == CacheDType::fp8_e4m3 ? 448.0 : 57344.0;
  const double floor = 1.0 / (fp8_max * 512.0);
  if (spec.io.scale_rounding != ScaleRounding::ue8m0)
    return std::max(amax * static_cast<double>(static_cast<float>(1.0 / fp8_max)), floor);
  return detail::pow2_ceil(std::max(amax / fp8_max, floor));
}

// An indexer K cache's scale (cache_layout fp8_indexer), as vLLM's indexer_k_quant_and_cache:
// fl32(max(amax, 1e-4) / 448), with ue8m0 the least power of two >= it.
double indexer_scale(const Spec& spec, double amax) {
  const double scale = static_cast<float>(std::max(static_cast<float>(amax), 1e-4f) / 448.0f);
  return spec.io.scale_rounding == ScaleRounding::ue8m0 ? detail::pow2_ceil(scale) : scale;
}

// Per-head cache scales: each written (slot, kv head)'s group_scale over its D values, set on
// its elements; the "<k|v>_scale_cache" tensor [slots, Hkv, 1] (float32), unwritten entries
// untouched. An indexer's K cache holds them after each page's codes: a part of "k_cache".
RefTensor per_head_cache_scales(const Spec& spec, RefTensor& cache) {
  const std::string name = cache.name.substr(0, 1) + "_scale_cache";
  const int64_t D = cache.head_dim, H = cache.heads, page_size = cache.rows;
  const bool indexer = indexer_cache(spec);
  RefTensor scales = indexer ? detail::make_tensor("k_cache scales", RefLayout::padded_bhsd, cache.batch, page_size, H, 1)
                             : detail::make_tensor(name, RefLayout::token_major, 1, cache.batch * page_size, H, 1);
  if (indexer) {  // [pages, page_size] floats, page_size * D bytes into each page
    std::fill(scales.padding.begin(), scales.padding.end(), 0);
    scales.buffer = cache.name;
    scales.byte_offset = page_size * D;
    scales.part_token_stride = 1;
  }
  scales.dtype = DType::fp32;
  scales.untouched.assign(scales.value.size(), 1);
  cache.quant_scales.assign(cache.value.size(), group_scale(spec, spec.io.cache_dtype, 0.0));
  for (int64_t page = 0; page < cache.batch; ++page)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t offset = 0; offset < page_size; ++offset) {
        const size_t base = static_cast<size_t>(((page * H + h) * page_size + offset) * D);
        if (cache.untouched[base]) continue;  // no token writes this slot
        double amax = 0.0;
        for (int64_t e = 0; e < D; ++e) amax = std::max(amax, std::fabs(cache.value[base + static_cast<size_t>(e)]));
        const double scale = indexer ? indexer_scale(spec, amax) : group_scale(spec, spec.io.cache_dtype, amax);
        for (int64_t e = 0; e < D; ++e) cache.quant_scales[base + static_cast<size_t>(e)] = scale;
        const size_t at = static_cast<size_t>((page * page_size + offset) * H + h);
        scales.value[at] = scales.scale[at] = scale;
        scales.untouched[at] = 0;
      }
  return scales;
}

// Computed FP8 q scales, per (token, head) or per token (over all its heads): each group's
// max(amax * fl32(1 / FP8 max), 1 / (FP8 max * 512)) over its expected values, set on its
// elements; the "q_scale" tensor [T, Hq, 1] or [T, 1, 1] (float32) the launch writes. Padding
// rows (padded_bhsd) take the floor and no entry.
RefTensor computed_q_scales(const Spec& spec, RefTensor& q, int64_t tokens) {
  const double floor = group_scale(spec, spec.io.q_output_dtype, 0.0);
  const bool per_token = q_scale_per_token(spec);
  const int64_t groups = per_token ? 1 : q.heads;  // scales a token
  RefTensor scales = detail::make_tensor("q_scale", RefLayout::token_major, 1, tokens, groups, 1);
  scales.dtype = DType::fp32;
  q.quant_scales.assign(q.value.size(), floor);
  const bool padded = q.layout == RefLayout::padded_bhsd;
  const int64_t D = q.head_dim;
  auto base_of = [&](int64_t b, int64_t h, int64_t s) {
    return static_cast<size_t>(padded ? ((b * q.heads + h) * q.rows + s) * D : (s * q.heads + h) * D);
  };
  for (int64_t b = 0; b < q.batch; ++b)
    for (int64_t s = 0; s < q.rows; ++s) {
      const int64_t token = padded ? q.row_token[static_cast<size_t>(b * q.rows + s)] : s;
      if (token < 0) continue;
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t first = per_token ? 0 : g, last = per_token ? q.heads : g + 1;  // the group's heads
        double amax = 0.0;
        for (int64_t h = first; h < last; ++h)
          for (int64_t e = 0; e < D; ++e) amax = std::max(amax, std::fabs(q.value[base_of(b, h, s) + static_cast<size_t>(e)]));
        const double scale = group_scale(spec, spec.io.q_output_dtype, amax);
        for (int64_t h = first; h < last; ++h)
          for (int64_t e = 0; e < D; ++e) q.quant_scales[base_of(b, h, s) + static_cast<size_t>(e)] = scale;
        scales.value[static_cast<size_t>(token * groups + g)] = scale;
        scales.scale[static_cast<size_t>(token * groups + g)] = scale;
      }
    }
  return scales;
}

}  // namespace

RefTensor nvfp4_block_scales(RefTensor& cache) {
  const std::string name = cache.name.substr(0, 1) + "_scale_cache";
  const int64_t D = cache.head_dim, H = cache.heads, page_size = cache.rows, blocks = D / kNvfp4Block;
  RefTensor scales = detail::make_tensor(name, RefLayout::padded_bhsd, cache.batch, page_size, H, blocks);
  std::fill(scales.padding.begin(), scales.padding.end(), 0);
  scales.untouched.assign(scales.value.size(), 1);
  scales.cache_dtype = CacheDType::fp8_e4m3;  // codes of the block scale's value, scale 1
  const float global = static_cast<float>(cache.quant_scale);
  const double inv_global = 1.0f / global;    // the launch's float32 reciprocal, as the kernel's
  const double inv_six = 1.0f / 6.0f;
  cache.quant_scales.assign(cache.value.size(), 0.0);
  for (int64_t row = 0; row < cache.batch * H * page_size; ++row) {  // (page, head, offset) rows
    const size_t base = static_cast<size_t>(row * D);
    if (cache.untouched[base]) continue;  // no token writes this slot
    for (int64_t b = 0; b < blocks; ++b) {
      double amax = 0.0;
      for (int64_t i = 0; i < kNvfp4Block; ++i)
        amax = std::max(amax, std::fabs(cache.value[base + static_cast<size_t>(b * kNvfp4Block + i)]));
      const double sf_value = inv_global * (amax * inv_six);
      const double sf = fp8_bits_to_double(Fp8Format::e4m3, round_to_fp8_bits(Fp8Format::e4m3, sf_value));
      const size_t at = static_cast<size_t>(row * blocks + b);
      scales.value[at] = scales.scale[at] = sf_value;
      scales.untouched[at] = 0;
      for (int64_t i = 0; i < kNvfp4Block; ++i)
        cache.quant_scales[base + static_cast<size_t>(b * kNvfp4Block + i)] = sf / inv_global;
    }
  }
  return scales;
}

void adopt_block_scales(RefTensor& cache, const RefTensor& scales, const std::vector<uint8_t>& codes) {
  const double inv_global = 1.0f / static_cast<float>(cache.quant_scale);
  for (int64_t at = 0; at < scales.size(); ++at) {
    if (scales.untouched[static_cast<size_t>(at)]) continue;
    const double sf = fp8_bits_to_double(Fp8Format::e4m3, codes[static_cast<size_t>(at)]);
    for (int64_t i = 0; i < kNvfp4Block; ++i)
      cache.quant_scales[static_cast<size_t>(at * kNvfp4Block + i)] = sf / inv_global;
  }
}

// DeepSeek-V4's cell (cache_layout fp8_deepseek_v4): the "k_cache" tensor [pages, page_size, 1,
// 512] becomes three parts of its buffer: the 448 nope values as FP8 codes, each 64-value block at
// 2^e, e = ceil(log2(max(amax, 1e-4) / 448)) over the values rounded to bf16 (the kernel quantizes
// those); the 64 rope values in bf16 at byte 448; each slot's 8 scale bytes (e + 127 a block, then
// 0) after the page's 576-byte slots.
void deepseek_v4_parts(RefTensor& cache, std::vector<RefTensor>& out) {
  constexpr int64_t kNope = 448, kRope = 64, kBlocks = kNope / kDeepseekV4Block;
  const int64_t slots = cache.batch * cache.rows, page_size = cache.rows;
  RefTensor codes = detail::make_tensor("k_cache", RefLayout::padded_bhsd, cache.batch, page_size, 1, kNope);
  RefTensor rope = detail::make_tensor("k_cache rope", RefLayout::padded_bhsd, cache.batch, page_size, 1, kRope);
  RefTensor bytes = detail::make_tensor("k_cache scales", RefLayout::padded_bhsd, cache.batch, page_size, 1,
                                        kDeepseekV4ScaleBytes);
  for (RefTensor* t : {&codes, &rope, &bytes}) {
    std::fill(t->padding.begin(), t->padding.end(), 0);
    t->untouched.assign(t->value.size(), 1);
  }
  codes.cache_dtype = CacheDType::fp8_e4m3;
  codes.quantized_from = DType::bf16;
  codes.quant_scales.assign(codes.value.size(), 1.0);
  rope.buffer = bytes.buffer = "k_cache";
  rope.byte_offset = kNope;
  bytes.byte_offset = page_size * kDeepseekV4TokenBytes;
  bytes.part_token_stride = kDeepseekV4ScaleBytes;
  bytes.exact_bytes = true;
  for (int64_t slot = 0; slot < slots; ++slot) {
    const size_t base = static_cast<size_t>(slot * cache.head_dim);
    if (cache.untouched[base]) continue;
    for (int64_t b = 0; b < kBlocks; ++b) {
      const auto bf16 = [&](int64_t e) {
        return dtype_bits_to_double(DType::bf16, round_to_dtype_bits(DType::bf16, cache.value[base + e]));
      };
      double amax = 0.0;
      for (int64_t e = b * kDeepseekV4Block; e < (b + 1) * kDeepseekV4Block; ++e) amax = std::max(amax, std::fabs(bf16(e)));
      const double scale = detail::pow2_ceil(static_cast<float>(std::max(static_cast<float>(amax), 1e-4f) / 448.0f));
      for (int64_t e = b * kDeepseekV4Block; e < (b + 1) * kDeepseekV4Block; ++e) {
        const size_t at = static_cast<size_t>(slot * kNope + e);
        codes.value[at] = cache.value[base + e];
        codes.scale[at] = cache.scale[base + e];
        codes.quant_scales[at] = scale;
        codes.untouched[at] = 0;
      }
      int exponent = 0;
      std::frexp(scale, &exponent);  // scale = 2^(exponent - 1)
      bytes.value[static_cast<size_t>(slot * kDeepseekV4ScaleBytes + b)] = exponent - 1 + 127;
    }
    for (int64_t i = 0; i < kDeepseekV4ScaleBytes; ++i) bytes.untouched[static_cast<size_t>(slot * kDeepseekV4ScaleBytes + i)] = 0;
    for (int64_t e = 0; e < kRope; ++e) {
      const size_t at = static_cast<size_t>(slot * kRope + e);
      rope.value[at] = cache.value[base + kNope + e];
      rope.scale[at] = cache.scale[base + kNope + e];
      rope.inv_freq_slack[at] = cache.inv_freq_slack[base + kNope + e];
      rope.untouched[at] = 0;
    }
  }
  cache = std::move(codes);
  out.push_back(std::move(rope));
  out.push_back(std::move(bytes));
}

RefOutputs reference_outputs(const Spec& spec, const RefProblem& problem) {
  RefOutputs out = detail::check_op(spec.op).reference(spec, problem);
  if (deepseek_v4_cache(spec))
    for (size_t i = 0; i < out.tensors.size(); ++i)
      if (out.tensors[i].name == "k_cache") {
        std::vector<RefTensor> parts;
        deepseek_v4_parts(out.tensors[i], parts);
        for (RefTensor& part : parts) out.tensors.push_back(std::move(part));
        break;
      }
  if (nvfp4_cache(spec) || cache_scale_per_head(spec)) {  // the scales written beside each cache
    const size_t caches = out.tensors.size();
    for (size_t i = 0; i < caches; ++i)
      if (out.tensors[i].name == "k_cache" || out.tensors[i].name == "v_cache") {
        RefTensor scales = nvfp4_cache(spec) ? nvfp4_block_scales(out.tensors[i])
                                             : per_head_cache_scales(spec, out.tensors[i]);
        out.tensors.push_back(std::move(scales));
      }
  }
  if (spec.io.q_output_dtype == CacheDType::auto_) return out;
  for (size_t i = 0; i < out.tensors.size(); ++i)  // FP8 q_out: codes of fp8(q / scale), as a cache's
    if (out.tensors[i].name == "q") {
      RefTensor& q = out.tensors[i];
      q.cache_dtype = spec.io.q_output_dtype;
      if (q_scale_computed(spec)) {
        out.tensors.push_back(computed_q_scales(spec, out.tensors[i], problem.num_tokens));
        break;  // the push may move the tensors
      }
      if (!(problem.q_scale > 0.0)) detail::bad_problem("an FP8 q_out needs q_scale > 0");
      q.quant_scale = problem.q_scale;
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

/// The scale of FP8 element `index`: its own (per-head scales) or the tensor's.
double quant_scale_at(const RefTensor& expected, int64_t index) {
  return expected.quant_scales.empty() ? expected.quant_scale : expected.quant_scales[static_cast<size_t>(index)];
}

/// The value an FP8 element stands for: its code's value times its scale.
double fp8_value(const RefTensor& expected, int64_t index, uint32_t bits) {
  return fp8_bits_to_double(fp8_format(expected.cache_dtype), static_cast<uint8_t>(bits)) *
         quant_scale_at(expected, index);
}

/// An FP8 element: the correctly rounded, saturated code of value / scale, or any code that
/// rounding a quotient within fp32 noise of it gives (the kernel computes in float32: a value far
/// smaller than its pair, cancelled in x cos - y sin, carries the pair's absolute rounding noise,
/// which a small per-head scale spreads over many subnormal codes).
bool fp8_matches(const RefTensor& expected, int64_t index, uint8_t bits, const Tolerance& tolerance,
                 double& reference_value, CheckResult& result) {
  const Fp8Format format = fp8_format(expected.cache_dtype);
  const double quant_scale = quant_scale_at(expected, index);
  const auto through = [&](double v) {  // the value as the kernel quantizes it (V4: rounded to bf16 first)
    const std::optional<DType> first = expected.quantized_from;
    return first ? dtype_bits_to_double(*first, round_to_dtype_bits(*first, v)) : v;
  };
  // An NVFP4 block whose scale rounded to 0 stores zeros (the kernel's multiplier is 0).
  const double quotient = quant_scale == 0.0 ? 0.0 * expected.value[index] : through(expected.value[index]) / quant_scale;
  const uint8_t want = round_to_fp8_bits(format, quotient);
  reference_value = fp8_bits_to_double(format, want) * quant_scale;
  const double got = fp8_bits_to_double(format, bits) * quant_scale;
  if (std::isfinite(got)) result.max_abs_error = std::max(result.max_abs_error, std::fabs(got - reference_value));
  const int64_t ulps = fp8_ulp_distance(format, bits, want);
  if (ulps != std::numeric_limits<int64_t>::max()) result.max_ulps = std::max(result.max_ulps, ulps);
  if (ulps == 0) return true;
  if (ulps == std::numeric_limits<int64_t>::max()) return false;  // NaN against a number, or the reverse
  // fp32 math noise of the value, and the kernel's float32 reciprocal of the scale.
  if (quant_scale == 0.0) return false;
  const double noise = tolerance.fp32_relative * std::max(std::fabs(expected.value[index]), expected.scale[index]);
  const double tiny = std::fabs(quotient) * std::ldexp(1.0, -22);
  const double below = through(expected.value[index] - noise) / quant_scale - tiny;
  const double above = through(expected.value[index] + noise) / quant_scale + tiny;
  const double low = fp8_bits_to_double(format, round_to_fp8_bits(format, below));
  const double high = fp8_bits_to_double(format, round_to_fp8_bits(format, above));
  const double code = fp8_bits_to_double(format, bits);
  return code >= low && code <= high;
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
    if (!expected.untouched.empty() && expected.untouched[index]) continue;  // the caller's byte check
    const bool fp8 = expected.cache_dtype != CacheDType::auto_;
    uint32_t bits;
    if (expected.exact_bytes) {  // one byte, exactly the expected value
      const uint8_t byte = static_cast<const uint8_t*>(actual.data)[actual_offset(expected, actual, index)];
      ++result.checked;
      if (byte != expected.value[index] && result.failures++ == 0) {
        char values[64];
        std::snprintf(values, sizeof values, ": byte %u, expected %.0f", byte, expected.value[index]);
        result.first_failure = describe_location(expected, index) + values;
      }
      continue;
    }
    if (expected.cache_dtype == CacheDType::nvfp4) {  // element e of a row: byte e / 2, low nibble for even e
      const int64_t e = index % expected.head_dim;
      const int64_t byte = actual_offset(expected, actual, index - e) + e / 2;
      bits = (static_cast<const uint8_t*>(actual.data)[byte] >> (4 * (e % 2))) & 0xfu;
    } else {
      const int64_t offset = actual_offset(expected, actual, index);
      bits = fp8 ? static_cast<const uint8_t*>(actual.data)[offset] : load_bits(dtype, actual.data, offset);
    }
    const double want = expected.value[index];
    const double got = fp8 ? fp8_value(expected, index, bits) : dtype_bits_to_double(dtype, bits);
    ++result.checked;
    bool pass;
    double reference_value = want;
    if (std::isnan(want)) {
      pass = std::isnan(got);  // no value to give (the caller's cache has no row): NaN, in any dtype
    } else if (fp8) {
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
