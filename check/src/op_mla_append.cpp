// Op mla_append's check row: q after the launch (its heads' rope pairs rotated, in place or in
// q_out with the rest copied) and the latent cache rows [kv_c | rotated k_pe] at each token's slot,
// in float64 (HF modeling_deepseek_v3.py: q_rot and k_rot by the same cos/sin, the cache holding
// the normed kv_c and the rotated k_rot); with concat_k, k [T, Hq, D]: each head's k_nope in the
// pass-through slice and k_rot in the rotary one (HF's `torch.cat((k_pass, k_rot), dim=-1)` after
// `k_rot.expand`); the harness's q, k_pe, kv_c and k_nope buffers as inputs.
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference_detail.h"
#include "ropejit/internal/workload.h"

namespace ropejit::ref::detail {
namespace {

// fp8_ds_mla rows, three parts of the k_cache buffer: kv_c's FP8 codes at their tile's scale,
// the float32 scales (vLLM's max(fl(amax / 448), FLT_MIN), ue8m0 rounded up to a power of two),
// the rotated k_pe in the dtype; slots no token maps to untouched.
void ds_mla_rows(const Spec& spec, const RefProblem& problem, const std::vector<int64_t>& slots, RefOutputs& out) {
  const int64_t T = problem.num_tokens, d = spec.rotary_dim, rank = spec.mla_append.kv_lora_rank;
  const int64_t tiles = rank / kDsMlaTile;
  RefTensor codes = make_cache_tensor(spec, problem, "k_cache", 1.0, "k_scale", 1, rank);
  RefTensor scales = make_cache_tensor(spec, problem, "k_cache scales", 1.0, "k_scale", 1, tiles);
  RefTensor rope = make_cache_tensor(spec, problem, "k_cache rope", 1.0, "k_scale", 1, d);
  scales.cache_dtype = rope.cache_dtype = CacheDType::auto_;
  scales.dtype = DType::fp32;
  scales.buffer = rope.buffer = "k_cache";
  scales.byte_offset = rank;
  rope.byte_offset = rank + 4 * tiles;
  codes.quant_scales.assign(codes.value.size(), 1.0);
  const auto in = [&](const RefInput& x, int64_t width, int64_t t, int64_t e) {
    return load_value(spec.dtype, x.data, t * (x.token_stride ? x.token_stride : width) + e);
  };
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slots[static_cast<size_t>(t)];
    if (slot < 0) continue;
    for (int64_t tile = 0; tile < tiles; ++tile) {
      float amax = 0.0f;  // inputs in bf16 / fp16: exact in float
      for (int64_t e = tile * kDsMlaTile; e < (tile + 1) * kDsMlaTile; ++e)
        amax = std::max(amax, static_cast<float>(std::fabs(in(problem.v, rank, t, e))));
      double scale = std::max(amax / 448.0f, std::numeric_limits<float>::min());
      if (spec.io.scale_rounding == ScaleRounding::ue8m0) scale = pow2_ceil(scale);
      const size_t at = static_cast<size_t>(slot * tiles + tile);
      scales.value[at] = scales.scale[at] = scale;
      scales.untouched[at] = 0;
      for (int64_t e = tile * kDsMlaTile; e < (tile + 1) * kDsMlaTile; ++e) {
        const size_t i = static_cast<size_t>(slot * rank + e);
        codes.value[i] = in(problem.v, rank, t, e);
        codes.scale[i] = std::fabs(codes.value[i]);
        codes.quant_scales[i] = scale;
        codes.untouched[i] = 0;
      }
    }
    const int64_t base = slot * d;
    for (int64_t e = 0; e < d; ++e) {
      rope.value[static_cast<size_t>(base + e)] = in(problem.k, d, t, e);
      rope.scale[static_cast<size_t>(base + e)] = std::fabs(rope.value[static_cast<size_t>(base + e)]);
      rope.untouched[static_cast<size_t>(base + e)] = 0;
    }
    rotate_row_pairs(spec, out.freqs, out.token_positions[t], 1.0, rope.value, rope.scale, base,
                     [&](int i) { return pair_elements(spec.layout, static_cast<int>(d), i); });
  }
  out.tensors.push_back(std::move(codes));
  out.tensors.push_back(std::move(scales));
  out.tensors.push_back(std::move(rope));
}

RefOutputs reference_op(const Spec& spec, const RefProblem& problem) {
  const int64_t T = problem.num_tokens, D = spec.head_dim, H = spec.num_q_heads;
  const int64_t d = spec.rotary_dim, rank = spec.mla_append.kv_lora_rank;
  if (!problem.q.data || !problem.k.data || !problem.v.data) bad_problem("op mla_append needs q, k_pe and kv_c");
  const Sequences seqs = split_sequences(problem);
  RefOutputs out;
  out.token_positions = token_positions(spec, problem, seqs);
  int64_t max_position = -1;
  for (int64_t p : out.token_positions) max_position = std::max(max_position, p);
  out.run_length = problem.run_length > 0 ? problem.run_length : max_position + 1;
  out.freqs = reference_freqs(spec, out.run_length, /*hf_fp32=*/true);
  auto input = [&](const RefInput& in, int64_t row_elements, int64_t t, int64_t element) {
    return load_value(spec.dtype, in.data, t * (in.token_stride ? in.token_stride : row_elements) + element);
  };

  // q, or q_out (the harness's name); absorbed_q: heads [q_latent | rotated q_pe] of L + d.
  const bool absorbed = spec.mla_append.absorbed_q;
  const int64_t width = absorbed ? rank + d : D, shift = width - D;  // q's element e lands at e + shift
  if (absorbed && !problem.q_latent.data) bad_problem("mla_append.absorbed_q needs q_latent");
  out.tensors.push_back(make_tensor("q", RefLayout::token_major, 1, T, H, width));
  {
    RefTensor& q = out.tensors.back();
    const int64_t head_stride = problem.q.head_stride ? problem.q.head_stride : D;
    const int64_t latent_stride = problem.q_latent.head_stride ? problem.q_latent.head_stride : rank;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = (t * H + h) * width;
        for (int64_t e = absorbed ? D - d : 0; e < D; ++e) q.value[base + e + shift] = input(problem.q, H * D, t, h * head_stride + e);
        for (int64_t e = 0; absorbed && e < rank; ++e)
          q.value[base + e] = input(problem.q_latent, H * latent_stride, t, h * latent_stride + e);
        for (int64_t e = 0; e < width; ++e) q.scale[base + e] = std::fabs(q.value[base + e]);
        rotate_row_pairs(spec, out.freqs, out.token_positions[t], 1.0, q.value, q.scale, base + shift,
                         [&](int i) { return pair_elements(spec, i); });
      }
  }

  if (spec.mla_append.concat_k) {
    if (!problem.k_nope.data) bad_problem("mla_append.concat_k needs k_nope");
    const int64_t nope = D - d, head_stride = problem.k_nope.head_stride ? problem.k_nope.head_stride : nope;
    const bool trailing = spec.rotary_slice == RotarySlice::trailing;  // [k_nope | k_rot], else [k_rot | k_nope]
    const int64_t pass_begin = trailing ? 0 : d, rot_begin = trailing ? nope : 0;
    out.tensors.push_back(make_tensor("k", RefLayout::token_major, 1, T, H, D));
    RefTensor& k = out.tensors.back();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = (t * H + h) * D;
        for (int64_t e = 0; e < nope; ++e)
          k.value[base + pass_begin + e] = input(problem.k_nope, H * head_stride, t, h * head_stride + e);
        for (int64_t e = 0; e < d; ++e) k.value[base + rot_begin + e] = input(problem.k, d, t, e);
        for (int64_t e = 0; e < D; ++e) k.scale[base + e] = std::fabs(k.value[base + e]);
        rotate_row_pairs(spec, out.freqs, out.token_positions[t], 1.0, k.value, k.scale, base,
                         [&](int i) { return pair_elements(spec, i); });
      }
  }

  const std::vector<int64_t> slots = cache_slots(spec, problem, seqs, out.token_positions);
  if (ds_mla_cache(spec)) {
    ds_mla_rows(spec, problem, slots, out);
    return out;
  }
  out.tensors.push_back(make_cache_tensor(spec, problem, "k_cache", problem.k_scale, "k_scale", 1, rank + d));
  RefTensor& cache = out.tensors.back();
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = slots[static_cast<size_t>(t)];
    if (slot < 0) continue;
    const int64_t base = ((slot / cache.rows) * cache.rows + slot % cache.rows) * cache.head_dim;  // one head a slot
    for (int64_t e = 0; e < rank; ++e) cache.value[base + e] = input(problem.v, rank, t, e);
    for (int64_t e = 0; e < d; ++e) cache.value[base + rank + e] = input(problem.k, d, t, e);
    for (int64_t e = 0; e < rank + d; ++e) {
      cache.scale[base + e] = std::fabs(cache.value[base + e]);
      cache.untouched[base + e] = 0;
    }
    // k_pe's pairs by the spec's layout within its own d elements.
    rotate_row_pairs(spec, out.freqs, out.token_positions[t], 1.0, cache.value, cache.scale, base + rank,
                     [&](int i) { return pair_elements(spec.layout, static_cast<int>(d), i); });
  }
  return out;
}

void problem_inputs_op(const Spec& spec, const HostWorkload& host, RefProblem& problem) {
  problem_inputs_q(spec, host, problem);
  if (const HostBuffer* b = host.find("k_pe")) problem.k = {b->bytes.data(), b->desc.row_stride, spec.rotary_dim};
  if (const HostBuffer* b = host.find("kv_c"))
    problem.v = {b->bytes.data(), b->desc.row_stride, spec.mla_append.kv_lora_rank};
  if (const HostBuffer* b = host.find("k_nope"))
    problem.k_nope = {b->bytes.data(), b->desc.row_stride, spec.head_dim - spec.rotary_dim};
  if (const HostBuffer* b = host.find("q_latent"))
    problem.q_latent = {b->bytes.data(), b->desc.row_stride, spec.mla_append.kv_lora_rank};
}

}  // namespace

extern const CheckOp kCheckOp_mla_append{OpKind::mla_append, reference_op, problem_inputs_op};

}  // namespace ropejit::ref::detail
