// op rerotate's check row: the K cache after the launch in float64, and the harness's inputs
// for it (the keys as they were, and where they move).
#include <algorithm>
#include <cmath>
#include <utility>

#include "reference_detail.h"
#include "ropejit/error.h"
#include "ropejit/internal/workload.h"

namespace ropejit::ref::detail {
namespace {

/// The K cache after the launch (see reference_outputs).
RefOutputs reference_op(const Spec& spec, const RefProblem& problem) {
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

  out.tensors.push_back(make_cache_tensor(spec, problem, "k_cache", problem.k_scale, "k_scale"));
  RefTensor& cache = out.tensors.back();
  const bool fp8 = spec.io.cache_dtype != CacheDType::auto_;
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
        const auto [a, b] = pair_elements(spec, i);
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

/// The keys as they were (the workload's k_cache, at its page stride) and where they move.
void problem_inputs_op(const Spec&, const HostWorkload& host, RefProblem& problem) {
  const HostBuffer* cache = host.find("k_cache");
  if (!cache) throw Error(Status::internal, "rerotate workload has no k_cache");
  problem.k_cache_in = cache->bytes.data();
  problem.cache_page_stride = cache->desc.row_stride;
  problem.new_positions = host.moved_positions;
  problem.from_run_length = host.from_seq_len;
}

}  // namespace

extern const CheckOp kCheckOp_rerotate{OpKind::rerotate, reference_op, problem_inputs_op};

}  // namespace ropejit::ref::detail
