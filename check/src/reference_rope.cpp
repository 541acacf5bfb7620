// op rope's check row: one float64 math loop over the (token, role, head) rows of a launch (bias
// add -> QK-norm -> rotate), each row handed to its output form's destination (a row of
// kOutputFormDestinations), and the harness's inputs for it (q, k, v, bias, norm weights).
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "reference_detail.h"
#include "ropejit/internal/workload.h"

namespace ropejit::ref::detail {
namespace {

/// The position stream of each frequency pair, built the way HF builds it. Qwen2-VL
/// (apply_multimodal_rotary_pos_emb): cos/sin of width rotary_dim (the d/2 frequencies twice)
/// split into chunks of mrope_section * 2, chunk i taken from stream i % 3. Qwen3-VL
/// (apply_interleaved_mrope): the temporal stream's frequencies, with slice(1, 3 h, 3) taken
/// from height and slice(2, 3 w, 3) from width. io.axes: each pair's axis (axes_pair_order). Every
/// other form: stream 0 throughout.
std::vector<int> pair_streams(const Spec& spec) {
  const int half = spec.rotary_dim / 2;
  std::vector<int> stream(static_cast<size_t>(half), 0);
  if (spec.io.positions == PositionsForm::axes) return axes_pair_order(spec.io.axes, /*axis_of_pair=*/true);
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

/// 1 / sqrt(mean(x^2) + eps) of `count` values whose squares sum to `squares`, in float64.
double inverse_rms(const Spec& spec, double squares, int64_t count) {
  return 1.0 / std::sqrt(squares / static_cast<double>(count) + spec.qk_norm.eps);
}

/// One (token, role, head) row as the math loop leaves it, D elements each.
struct HeadRow {
  std::vector<double> value;           ///< expected value
  std::vector<double> scale;           ///< magnitude of the element's pair
  std::vector<double> inv_freq_slack;  ///< rotated elements' inv_freq slack, else 0
};

/// One biased head row less `mean` (a LayerNorm's; 0 for an RMSNorm) times inv_rms and
/// (weight_offset + w) per element, plus a LayerNorm's bias b; w and b read from the role's at
/// `first` (0 for a per-head norm's shared [D] vectors, head * D for scope all's). Each element's
/// magnitude (row.scale) is |value|, or for a LayerNorm that of its terms, (|x| + mean_magnitude) *
/// inv_rms * |w| + |b|: a centred value near 0 still carries the rounding of x and of the mean.
void normalize_head(const Spec& spec, const void* weight, const void* bias, int64_t first, double mean,
                    double mean_magnitude, double inv_rms, HeadRow& row) {
  const QkNorm& norm = spec.qk_norm;
  const bool weighted = norm.weight == NormWeight::per_head, biased = norm.bias == NormWeight::per_head;
  if (weighted && !weight) bad_problem("qk_norm with weight per_head needs problem.q_norm_weight and k_norm_weight");
  if (biased && !bias) bad_problem("qk_norm with bias per_head needs problem.q_norm_bias and k_norm_bias");
  for (size_t e = 0; e < row.value.size(); ++e) {
    const int64_t at = first + static_cast<int64_t>(e);
    const double w = weighted ? norm.weight_offset + load_value(spec.dtype, weight, at) : 1.0;
    const double b = biased ? load_value(spec.dtype, bias, at) : 0.0;
    const double x = row.value[e];
    row.value[e] = (x - mean) * inv_rms * w + b;
    row.scale[e] = norm.type == NormType::layernorm ? (std::fabs(x) + mean_magnitude) * inv_rms * std::fabs(w) + std::fabs(b)
                                                    : std::fabs(row.value[e]);
  }
}

/// The spec's Hadamard transform of a rotated head row in float64, from its definition (not the
/// kernel's butterflies): y_k = sum_e (-1)^popcount(k & e) x_e / sqrt(D), Sylvester's order. Each
/// output mixes every input, so its magnitude and slack are their sums over sqrt(D): a float32
/// butterfly's rounding grows with the terms' size, not with the (possibly small) result.
void hadamard_head(HeadRow& row) {
  const size_t n = row.value.size();
  double scale_sum = 0.0, slack_sum = 0.0;
  for (size_t e = 0; e < n; ++e) {
    scale_sum += row.scale[e];
    slack_sum += row.inv_freq_slack[e];
  }
  const double norm = 1.0 / std::sqrt(static_cast<double>(n));
  std::vector<double> out(n, 0.0);
  for (size_t k = 0; k < n; ++k)
    for (size_t e = 0; e < n; ++e) out[k] += (__builtin_popcountll(k & e) % 2 ? -row.value[e] : row.value[e]);
  for (size_t k = 0; k < n; ++k) {
    row.value[k] = out[k] * norm;
    row.scale[k] = scale_sum * norm;
    row.inv_freq_slack[k] = slack_sum * norm;
  }
}

/// A head's LayerNorm statistics in float64: its mean, the magnitude of a float32 mean's error
/// (sqrt(D) * mean(|x|): a sum's rounding grows as the square root of its terms), and
/// 1 / sqrt(var + eps).
struct LayerNormStats {
  double mean, mean_magnitude, inv_std;
};
LayerNormStats layer_norm_stats(const Spec& spec, const std::vector<double>& row) {
  const double count = static_cast<double>(row.size());
  double sum = 0.0, sum_abs = 0.0, centred = 0.0;
  for (double x : row) {
    sum += x;
    sum_abs += std::fabs(x);
  }
  const double mean = sum / count;
  for (double x : row) centred += (x - mean) * (x - mean);
  return {mean, sum_abs / std::sqrt(count), 1.0 / std::sqrt(centred / count + spec.qk_norm.eps)};
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

// ---------------------------------------------------------------- output forms

/// Roles of a launch's rows, the index of readers and targets.
constexpr int kRoleQ = 0, kRoleK = 1, kRoleV = 2, kRoles = 3;
constexpr const char* kRoleNames[kRoles] = {"q", "k", "v"};

/// What an output form reads of the launch.
struct RopeLaunch {
  const Spec& spec;
  const RefProblem& problem;
  const Sequences& seqs;
  const std::vector<int64_t>& positions;  ///< each token's position
  bool packed;                            ///< input packed_qkv
  bool have_v;                            ///< a v input is given
  /// Heads of a role: Hq for q, Hkv for k and v.
  int64_t heads(int role) const { return role == kRoleQ ? spec.num_q_heads : spec.num_kv_heads; }
};


/// Where a role's rows go: its tensor in RefOutputs::tensors (-1: the role is no output of the
/// form; the loop skips it) and the role's first head there (packed in place: q, k, v heads).
struct RoleTarget {
  int tensor = -1;
  int64_t first_head = 0;
};

/// What a form's make_tensors leaves for its store_row.
struct FormTargets {
  std::array<RoleTarget, kRoles> roles;
  std::vector<int64_t> slots;  ///< paged_kv: each token's cache slot (-1: none)
};

/// One output form's destination: the expected tensors it makes and where it stores a row.
struct OutputFormDestination {
  OutputForm form;
  /// Appends the form's expected tensors and says where each role's rows go.
  FormTargets (*make_tensors)(const RopeLaunch& launch, std::vector<RefTensor>& tensors);
  /// Writes row (token, head) of `role` into its tensor (or drops it: an uncached token's k, v).
  void (*store_row)(const RopeLaunch& launch, const FormTargets& targets, int role, int64_t token, int64_t head,
                    const HeadRow& row, std::vector<RefTensor>& tensors);
};

/// Writes a row's D elements from element `base` on: stored, so neither padding nor untouched.
void write_row(RefTensor& tensor, int64_t base, const HeadRow& row) {
  for (int64_t e = 0; e < static_cast<int64_t>(row.value.size()); ++e) {
    tensor.value[base + e] = row.value[e];
    tensor.scale[base + e] = row.scale[e];
    tensor.inv_freq_slack[base + e] = row.inv_freq_slack[e];
    tensor.padding[base + e] = 0;
    if (!tensor.untouched.empty()) tensor.untouched[base + e] = 0;
  }
}

/// A token-major [T, heads, D] tensor appended; its index.
int add_token_major(const RopeLaunch& launch, std::vector<RefTensor>& tensors, const std::string& name,
                    int64_t heads) {
  tensors.push_back(
      make_tensor(name, RefLayout::token_major, 1, launch.problem.num_tokens, heads, launch.spec.head_dim));
  return static_cast<int>(tensors.size()) - 1;
}

/// One tensor per role, make_one(role) made; v only when `with_v`.
template <class MakeOne>
FormTargets tensor_per_role(bool with_v, std::vector<RefTensor>& tensors, MakeOne make_one) {
  FormTargets targets;
  for (int role = 0; role < kRoles; ++role) {
    if (role == kRoleV && !with_v) break;
    tensors.push_back(make_one(role));
    targets.roles[role] = RoleTarget{static_cast<int>(tensors.size()) - 1, 0};
  }
  return targets;
}

FormTargets token_major_per_role(const RopeLaunch& launch, std::vector<RefTensor>& tensors, bool with_v) {
  return tensor_per_role(with_v, tensors, [&](int role) {
    return make_tensor(kRoleNames[role], RefLayout::token_major, 1, launch.problem.num_tokens, launch.heads(role),
                       launch.spec.head_dim);
  });
}

/// Row (token, head) of a token-major target at the role's first head.
void store_token_major(const RopeLaunch& launch, const FormTargets& targets, int role, int64_t token, int64_t head,
                       const HeadRow& row, std::vector<RefTensor>& tensors) {
  const RoleTarget& target = targets.roles[role];
  RefTensor& tensor = tensors[static_cast<size_t>(target.tensor)];
  write_row(tensor, (token * tensor.heads + target.first_head + head) * launch.spec.head_dim, row);
}

/// inplace: packed input is one qkv tensor (v always: an untouched v must stay as it was);
/// separate input q, k and v where given.
FormTargets inplace_tensors(const RopeLaunch& launch, std::vector<RefTensor>& tensors) {
  if (!launch.packed) return token_major_per_role(launch, tensors, launch.spec.io.copy_v || launch.have_v);
  const int64_t Hq = launch.spec.num_q_heads, Hkv = launch.spec.num_kv_heads;
  const int qkv = add_token_major(launch, tensors, "qkv", Hq + 2 * Hkv);
  FormTargets targets;
  targets.roles = {RoleTarget{qkv, 0}, RoleTarget{qkv, Hq}, RoleTarget{qkv, Hq + Hkv}};
  return targets;
}

/// separate: q, k, and v when copied, each [T, H, D].
FormTargets separate_tensors(const RopeLaunch& launch, std::vector<RefTensor>& tensors) {
  return token_major_per_role(launch, tensors, launch.spec.io.copy_v);
}

/// padded_bhsd: q, k, and v when copied, each [B, H, S, D] with S the longest sequence or max_seq_len.
FormTargets padded_tensors(const RopeLaunch& launch, std::vector<RefTensor>& tensors) {
  const Sequences& seqs = launch.seqs;
  const std::vector<int32_t>& cu = launch.problem.cu_seqlens;
  if (seqs.batch == 0) bad_problem("padded_bhsd output needs cu_seqlens");
  int64_t longest = 0;
  for (int64_t b = 0; b < seqs.batch; ++b) longest = std::max<int64_t>(longest, cu[b + 1] - cu[b]);
  const int64_t S = launch.problem.max_seq_len ? launch.problem.max_seq_len : longest;
  if (S < longest) bad_problem("max_seq_len is below the longest sequence");
  return tensor_per_role(launch.spec.io.copy_v, tensors, [&](int role) {
    RefTensor t = make_tensor(kRoleNames[role], RefLayout::padded_bhsd, seqs.batch, S, launch.heads(role),
                              launch.spec.head_dim);
    t.row_token.assign(static_cast<size_t>(seqs.batch * S), -1);
    for (int64_t token = 0; token < launch.problem.num_tokens; ++token)
      t.row_token[seqs.sequence_of_token[token] * S + seqs.row_of_token[token]] = token;
    return t;
  });
}

void store_padded(const RopeLaunch& launch, const FormTargets& targets, int role, int64_t token, int64_t head,
                  const HeadRow& row, std::vector<RefTensor>& tensors) {
  RefTensor& tensor = tensors[static_cast<size_t>(targets.roles[role].tensor)];
  const int64_t b = launch.seqs.sequence_of_token[token], s = launch.seqs.row_of_token[token];
  write_row(tensor, ((b * tensor.heads + head) * tensor.rows + s) * tensor.head_dim, row);
}

/// paged_kv: q (rotated in a packed input's place, whose k and v stay as they are, or its own
/// tensor), then the K and V caches, each slot untouched until a token writes it.
FormTargets paged_tensors(const RopeLaunch& launch, std::vector<RefTensor>& tensors) {
  const Spec& spec = launch.spec;
  const int64_t T = launch.problem.num_tokens, D = spec.head_dim, Hq = spec.num_q_heads, Hkv = spec.num_kv_heads;
  FormTargets targets;
  targets.slots = cache_slots(spec, launch.problem, launch.seqs, launch.positions);
  if (spec.io.q_output == QOutput::inplace && launch.packed) {
    RefTensor& qkv = tensors[static_cast<size_t>(add_token_major(launch, tensors, "qkv", Hq + 2 * Hkv))];
    qkv.untouched.assign(qkv.value.size(), 0);
    for (int64_t t = 0; t < T; ++t)
      std::fill(qkv.untouched.begin() + ((t * (Hq + 2 * Hkv) + Hq) * D),
                qkv.untouched.begin() + ((t + 1) * (Hq + 2 * Hkv) * D), 1);
  } else {
    add_token_major(launch, tensors, "q", Hq);
  }
  tensors.push_back(make_cache_tensor(spec, launch.problem, "k_cache", launch.problem.k_scale, "k_scale"));
  if (spec.io.copy_v)  // else K = V: the engine reads the K cache as V, and there is no V cache
    tensors.push_back(make_cache_tensor(spec, launch.problem, "v_cache", launch.problem.v_scale, "v_scale"));
  targets.roles = {RoleTarget{0, 0}, RoleTarget{1, 0}, RoleTarget{spec.io.copy_v ? 2 : -1, 0}};
  return targets;
}

void store_paged(const RopeLaunch& launch, const FormTargets& targets, int role, int64_t token, int64_t head,
                 const HeadRow& row, std::vector<RefTensor>& tensors) {
  if (role == kRoleQ) return store_token_major(launch, targets, role, token, head, row, tensors);
  const int64_t slot = targets.slots[static_cast<size_t>(token)];
  if (slot < 0) return;  // k and v of an uncached token
  RefTensor& cache = tensors[static_cast<size_t>(targets.roles[role].tensor)];
  // page = slot / page_size is the cache's "batch", offset its "row"
  write_row(cache, (((slot / cache.rows) * cache.heads + head) * cache.rows + slot % cache.rows) * cache.head_dim, row);
}

/// One row per output form; a new form is a row here and its two functions.
constexpr std::array<OutputFormDestination, 4> kOutputFormDestinations{{
    {OutputForm::inplace, inplace_tensors, store_token_major},
    {OutputForm::separate, separate_tensors, store_token_major},
    {OutputForm::padded_bhsd, padded_tensors, store_padded},
    {OutputForm::paged_kv, paged_tensors, store_paged}}};
static_assert(kOutputFormDestinations.size() == kOutputNames.size(), "an output form without its destination row");

const OutputFormDestination& output_form_destination(OutputForm form) {
  for (const OutputFormDestination& row : kOutputFormDestinations)
    if (row.form == form) return row;
  bad_problem("no reference destination for output form " + std::string(to_string(form)));
}

// ---------------------------------------------------------------- the math

/// The caller's cos/sin of pair `pair` at `position` (io.angles cos_sin_cache; mrope: the pair's
/// stream's position), widened from the cache's dtype; NaN for a position the cache has no row for.
void caller_pair_cos_sin(const Spec& spec, const RefProblem& problem, int64_t position, int pair, double& cos,
                         double& sin) {
  if (!problem.cos_sin_cache) bad_problem("io.angles cos_sin_cache needs problem.cos_sin_cache");
  const int64_t d = spec.rotary_dim, half = d / 2;
  const bool has_row = position >= 0 && position < problem.cos_sin_rows;
  cos = has_row ? load_value(spec.io.cos_sin_dtype, problem.cos_sin_cache, position * d + pair) : std::nan("");
  sin = has_row ? load_value(spec.io.cos_sin_dtype, problem.cos_sin_cache, position * d + half + pair) : std::nan("");
}

/// Expected outputs of a rope launch (see reference_outputs).
RefOutputs reference_rope(const Spec& spec, const RefProblem& problem) {
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
  // Position of token t for pair i: its stream's entry of the [3, T] / [A, T] array (mrope, axes),
  // else the token's.
  const bool streamed = per_pair_positions(spec);
  auto position_of = [&](int64_t t, int i) {
    return streamed ? problem.positions[static_cast<size_t>(streams[i] * T + t)] : out.token_positions[t];
  };
  int64_t max_position = -1;
  for (int64_t p : streamed ? problem.positions : out.token_positions)
    max_position = std::max(max_position, p);
  out.run_length = problem.run_length > 0 ? problem.run_length : max_position + 1;
  out.freqs = reference_freqs(spec, out.run_length, /*hf_fp32=*/true);

  // Inputs per role.
  const bool packed = spec.io.input == InputForm::packed_qkv;
  RoleReader readers[kRoles];
  bool have_v;
  if (packed) {
    if (!problem.qkv.data) bad_problem("packed_qkv input needs problem.qkv");
    RefInput row = problem.qkv;
    if (!row.token_stride) row.token_stride = (Hq + 2 * Hkv) * D;
    readers[kRoleQ] = make_reader(spec, row, Hq, 0);
    readers[kRoleK] = make_reader(spec, row, Hkv, Hq);
    readers[kRoleV] = make_reader(spec, row, Hkv, Hq + Hkv);
    have_v = true;
  } else {
    if (!problem.q.data || !problem.k.data) bad_problem("separate input needs problem.q and problem.k");
    readers[kRoleQ] = make_reader(spec, problem.q, Hq, 0);
    readers[kRoleK] = make_reader(spec, problem.k, Hkv, 0);
    have_v = problem.v.data != nullptr;
    if (have_v) readers[kRoleV] = make_reader(spec, problem.v, Hkv, 0);
  }
  if (spec.io.copy_v && !have_v) bad_problem("io.copy_v needs problem.v");

  // Output tensors: the form's.
  const RopeLaunch launch{spec, problem, seqs, out.token_positions, packed, have_v};
  const OutputFormDestination& destination = output_form_destination(spec.io.output);
  const FormTargets targets = destination.make_tensors(launch, out.tensors);

  // The math: per token, per role, per head, one row handed to the destination.
  const int pairs = rotary_dim / 2;
  const double s = out.freqs.attention_factor;
  const int64_t bias_offset[kRoles] = {0, Hq * D, (Hq + Hkv) * D};
  std::vector<double> angle(static_cast<size_t>(pairs)), angle_slack(static_cast<size_t>(pairs));
  std::vector<double> cos_row(static_cast<size_t>(pairs)), sin_row(static_cast<size_t>(pairs));  // the caller's
  const double float_ulp = std::ldexp(1.0, -23);  // relative spacing bound of float32
  HeadRow row;
  row.value.resize(static_cast<size_t>(D));
  row.scale.resize(static_cast<size_t>(D));
  row.inv_freq_slack.resize(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < pairs; ++i) {
      if (caller_cos_sin(spec)) caller_pair_cos_sin(spec, problem, position_of(t, i), i, cos_row[i], sin_row[i]);
      const double position = static_cast<double>(position_of(t, i));
      angle[i] = (spec.inverse ? -1.0 : 1.0) * reference_angle(spec, position_of(t, i), out.freqs.inv_freq[i]);
      angle_slack[i] = position * out.freqs.inv_freq[i] * float_ulp +
                       (spec.angle == AnglePrecision::fp32 ? std::fabs(angle[i]) * float_ulp : 0.0);
    }
    for (int role = 0; role < kRoles; ++role) {
      if (targets.roles[role].tensor < 0) continue;  // not an output of this form
      const bool touched = role != kRoleV || spec.io.copy_v;  // an untouched v gets no bias
      auto biased = [&](int64_t h, int e) {
        const double x = readers[role].at(t, h, e);
        return touched && problem.bias ? x + load_value(spec.dtype, problem.bias, bias_offset[role] + h * D + e) : x;
      };
      const bool normed = role != kRoleV && spec.qk_norm.enabled && (role == kRoleK || norm_of_q(spec));
      const void* norm_weight = role == kRoleQ ? problem.q_norm_weight : problem.k_norm_weight;
      const void* norm_bias = role == kRoleQ ? problem.q_norm_bias : problem.k_norm_bias;
      // scope all (OLMo 2): one RMS over the token's every head of the role.
      double role_inv_rms = 0.0;
      if (normed && spec.qk_norm.scope == NormScope::all) {
        double squares = 0.0;
        for (int64_t h = 0; h < launch.heads(role); ++h)
          for (int e = 0; e < D; ++e) squares += biased(h, e) * biased(h, e);
        role_inv_rms = inverse_rms(spec, squares, launch.heads(role) * D);
      }
      for (int64_t h = 0; h < launch.heads(role); ++h) {
        double squares = 0.0;
        for (int e = 0; e < D; ++e) {
          row.value[e] = biased(h, e);
          row.scale[e] = std::fabs(row.value[e]);
          row.inv_freq_slack[e] = 0.0;
          squares += row.value[e] * row.value[e];
        }
        if (normed && spec.qk_norm.scope == NormScope::all) {
          normalize_head(spec, norm_weight, norm_bias, h * D, 0.0, 0.0, role_inv_rms, row);
        } else if (normed && spec.qk_norm.type == NormType::layernorm) {
          const LayerNormStats stats = layer_norm_stats(spec, row.value);
          normalize_head(spec, norm_weight, norm_bias, 0, stats.mean, stats.mean_magnitude, stats.inv_std, row);
        } else if (normed) {
          normalize_head(spec, norm_weight, norm_bias, 0, 0.0, 0.0, inverse_rms(spec, squares, D), row);
        }
        for (int i = 0; i < pairs && role != kRoleV; ++i) {  // v is never rotated
          const auto [a, b] = pair_elements(spec, i);
          const double x = row.value[a], y = row.value[b];
          const double magnitude = std::hypot(row.scale[a], row.scale[b]);  // hypot(x, y) unless a LayerNorm's
          if (caller_cos_sin(spec)) {  // the caller's numbers as they are: no angle, no attention factor
            row.value[a] = x * cos_row[i] - y * sin_row[i];
            row.value[b] = y * cos_row[i] + x * sin_row[i];
            row.scale[a] = row.scale[b] = magnitude * std::hypot(cos_row[i], sin_row[i]);
            continue;
          }
          if (out.freqs.inv_freq[i] == 0.0) {  // proportional's frequency-0 pairs: cos 1, sin 0
            row.value[a] = x * s;
            row.value[b] = y * s;
            continue;
          }
          const auto [rx, ry] = rotate_pair(x, y, angle[i], s);
          const double pair_scale = s * magnitude;
          row.value[a] = rx;
          row.value[b] = ry;
          row.scale[a] = row.scale[b] = pair_scale;
          row.inv_freq_slack[a] = row.inv_freq_slack[b] = angle_slack[i] * pair_scale;
        }
        if (spec.hadamard && role != kRoleV) hadamard_head(row);
        destination.store_row(launch, targets, role, t, h, row, out.tensors);
      }
    }
  }
  return out;
}

/// The reference's view of a token-major input buffer.
RefInput ref_input(const HostBuffer& b, int64_t head_dim) { return {b.bytes.data(), b.desc.row_stride, head_dim}; }

/// The q, k, v (or packed qkv) inputs at their row strides, the bias and the QK-norm weights and biases.
void rope_problem_inputs(const Spec& spec, const HostWorkload& host, RefProblem& problem) {
  for (const auto& [name, input] : {std::pair<const char*, RefInput*>{"q", &problem.q}, {"k", &problem.k},
                                    {"v", &problem.v}, {"qkv", &problem.qkv}})
    if (const HostBuffer* b = host.find(name)) *input = ref_input(*b, spec.head_dim);
  if (const HostBuffer* b = host.find("bias")) problem.bias = b->bytes.data();
  if (const HostBuffer* b = host.find("q_norm_weight")) problem.q_norm_weight = b->bytes.data();
  if (const HostBuffer* b = host.find("k_norm_weight")) problem.k_norm_weight = b->bytes.data();
  if (const HostBuffer* b = host.find("q_norm_bias")) problem.q_norm_bias = b->bytes.data();
  if (const HostBuffer* b = host.find("k_norm_bias")) problem.k_norm_bias = b->bytes.data();
  if (const HostBuffer* b = host.find("cos_sin_cache")) problem.cos_sin_cache = b->bytes.data();
  problem.cos_sin_rows = host.shape.cos_sin_rows;
}

}  // namespace

extern const CheckOp kCheckOp_rope{OpKind::rope, reference_rope, rope_problem_inputs};

}  // namespace ropejit::ref::detail
