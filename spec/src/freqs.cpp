// Frequency math of every rope_type (docs/rope-math.md), in HF float32 parity or float64.
// Each formula is written once as a template on the working type T: float reproduces HF's
// torch float32 evaluation step by step (python scalars enter float32 ops cast to float),
// double is the same formulas in double precision (one division where torch divides a python
// scalar by a tensor as a reciprocal and a product).
#include "ropejit/freqs.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include <fmt/core.h>

namespace ropejit {

namespace {

constexpr double kPi = 3.14159265358979323846;

/// O: original_max_position_embeddings, falling back to M (HF v5 standardization).
double original_max_positions(const Spec& spec) {
  if (spec.rope.original_max_position_embeddings)
    return static_cast<double>(*spec.rope.original_max_position_embeddings);
  return static_cast<double>(spec.max_position_embeddings);
}

/// f for yarn/longrope: the explicit factor, else M / O.
double factor_or_ratio(const Spec& spec) {
  if (spec.rope.factor) return *spec.rope.factor;
  return static_cast<double>(spec.max_position_embeddings) / original_max_positions(spec);
}

/// YaRN's m(f, k) = 1 if f <= 1 else 0.1 k ln f + 1.
double yarn_mscale(double factor, double k) {
  if (factor <= 1.0) return 1.0;
  return 0.1 * k * std::log(factor) + 1.0;
}

/// Python truthiness of an optional number: set and non-zero.
bool truthy(const std::optional<double>& v) { return v.has_value() && *v != 0.0; }

/// Exponent 2i/d as HF forms it: float(2i) / d in T.
template <class T>
T pair_exponent(int i, int rotary_dim) {
  return static_cast<T>(2 * i) / static_cast<T>(rotary_dim);
}

/// b^(2i/d) in T. float: the float32 pow of the float-cast base (as torch does with a python
/// base), taken correctly rounded (pow in double, one rounding) so every platform, the
/// kernels' dynamic NTK path and the test reference agree bit for bit (glibc powf and torch
/// differ from it by one ulp in rare near-halfway cases).
template <class T>
T pos_freq(double base, int i, int rotary_dim) {
  const T exponent = pair_exponent<T>(i, rotary_dim);
  return static_cast<T>(std::pow(static_cast<double>(static_cast<T>(base)), static_cast<double>(exponent)));
}

/// Default RoPE: 1 / b^(2i/d).
template <class T>
std::vector<T> default_inv_freq(double base, int rotary_dim) {
  std::vector<T> inv(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) inv[i] = T(1) / pos_freq<T>(base, i, rotary_dim);
  return inv;
}

template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

/// YaRN correction dimension for r rotations (python double, HF operation order).
double yarn_correction_dim(double rotations, int rotary_dim, double base, double original) {
  return (rotary_dim * std::log(original / (rotations * 2 * kPi))) / (2 * std::log(base));
}

template <class T>
void fill_yarn(const Spec& spec, FreqTable& table) {
  const RopeParams& rope = spec.rope;
  const int d = spec.rotary_dim;
  const double original = original_max_positions(spec);
  const double factor = factor_or_ratio(spec);

  if (rope.attention_factor) {
    table.attention_factor = *rope.attention_factor;
  } else if (truthy(rope.mscale) && truthy(rope.mscale_all_dim)) {
    table.attention_factor = yarn_mscale(factor, *rope.mscale) / yarn_mscale(factor, *rope.mscale_all_dim);
  } else {
    table.attention_factor = yarn_mscale(factor, 1.0);
  }
  if (truthy(rope.mscale_all_dim)) {
    const double m = yarn_mscale(factor, *rope.mscale_all_dim);
    table.yarn_attention_softmax_scale = m * m;
  }

  // A missing or zero beta means the default (python `x or default`).
  const double beta_fast = truthy(rope.beta_fast) ? *rope.beta_fast : 32.0;
  const double beta_slow = truthy(rope.beta_slow) ? *rope.beta_slow : 1.0;
  double low = yarn_correction_dim(beta_fast, d, rope.theta, original);
  double high = yarn_correction_dim(beta_slow, d, rope.theta, original);
  if (rope.truncate.value_or(true)) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  table.yarn_low = low;
  table.yarn_high = high;
  if (low == high) high += 0.001;  // prevent a zero-width ramp

  const T span = static_cast<T>(high - low);
  const T low_t = static_cast<T>(low);
  const T factor_t = static_cast<T>(factor);
  std::vector<T> inv(d / 2);
  for (int i = 0; i < d / 2; ++i) {
    const T pos = pos_freq<T>(rope.theta, i, d);
    const T inv_extrapolation = T(1) / pos;
    const T inv_interpolation = T(1) / (factor_t * pos);
    T ramp = (static_cast<T>(i) - low_t) / span;
    ramp = std::min(std::max(ramp, T(0)), T(1));
    const T extrapolation_factor = T(1) - ramp;
    const T interpolated = inv_interpolation * (T(1) - extrapolation_factor);
    const T extrapolated = inv_extrapolation * extrapolation_factor;
    inv[i] = interpolated + extrapolated;
  }
  table.inv_freq = widen(inv);
}

/// LongRoPE table 1 / (ext[i] * b^(2i/d)) for one factor list.
template <class T>
std::vector<double> longrope_table(const Spec& spec, const std::vector<double>& ext,
                                   const char* field) {
  const int d = spec.rotary_dim;
  if (static_cast<int>(ext.size()) != d / 2)
    throw Error(Status::invalid_spec,
                fmt::format("/rope/{}: has {} numbers, rotary_dim {} needs {}", field, ext.size(),
                            d, d / 2),
                std::string("/rope/") + field);
  std::vector<T> inv(d / 2);
  for (int i = 0; i < d / 2; ++i)
    inv[i] = T(1) / (static_cast<T>(ext[i]) * pos_freq<T>(spec.rope.theta, i, d));
  return widen(inv);
}

template <class T>
void fill_longrope(const Spec& spec, FreqTable& table) {
  const double original = original_max_positions(spec);
  const double factor = factor_or_ratio(spec);
  if (spec.rope.attention_factor) {
    table.attention_factor = *spec.rope.attention_factor;
  } else if (factor <= 1.0) {
    table.attention_factor = 1.0;
  } else {
    table.attention_factor = std::sqrt(1 + std::log(factor) / std::log(original));
  }
  // PhiMoE: its forward scales by short_mscale / long_mscale in place of the factor.
  table.attention_factor_long = spec.rope.long_mscale.value_or(table.attention_factor);
  if (spec.rope.short_mscale) table.attention_factor = *spec.rope.short_mscale;
  table.inv_freq = longrope_table<T>(spec, spec.rope.short_factor, "short_factor");
  table.inv_freq_long = longrope_table<T>(spec, spec.rope.long_factor, "long_factor");
}

/// python_scalar / tensor. torch's Tensor.__rtruediv__ is reciprocal() * scalar: in float32 two
/// roundings (HF's llama3 table differs from the one division by up to 4 ulp there); float64
/// keeps the one division of the math.
template <class T>
T scalar_over(double scalar, T value) {
  if constexpr (std::is_same_v<T, float>) return (1.0f / value) * static_cast<float>(scalar);
  else return static_cast<T>(scalar) / value;
}

// HF's _compute_llama3_parameters, torch op by op: python scalars enter float32 ops cast to
// float, tensor / scalar is one division, scalar / tensor a reciprocal then a product.
template <class T>
void fill_llama3(const Spec& spec, FreqTable& table) {
  const RopeParams& rope = spec.rope;
  const double factor = rope.factor.value_or(1.0);
  const double low_freq_factor = rope.low_freq_factor.value_or(1.0);
  const double high_freq_factor = rope.high_freq_factor.value_or(4.0);
  const double original = original_max_positions(spec);
  // Python doubles, compared against float32 wavelengths after a cast (torch scalar rules).
  const T low_freq_wavelen = static_cast<T>(original / low_freq_factor);
  const T high_freq_wavelen = static_cast<T>(original / high_freq_factor);
  const T factor_t = static_cast<T>(factor);
  const T smooth_span = static_cast<T>(high_freq_factor - low_freq_factor);

  std::vector<T> inv = default_inv_freq<T>(rope.theta, spec.rotary_dim);
  std::array<int, 3> counts{0, 0, 0};
  for (T& value : inv) {
    const T wavelen = scalar_over(2 * kPi, value);  // 2 * math.pi / inv_freq
    if (wavelen < high_freq_wavelen) {
      ++counts[0];
    } else if (wavelen > low_freq_wavelen) {
      value = value / factor_t;
      ++counts[2];
    } else if (high_freq_factor == low_freq_factor) {
      ++counts[0];  // empty smooth band: a wavelength on its one edge is not above O/lf
    } else {
      // (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
      const T smooth = (scalar_over(original, wavelen) - static_cast<T>(low_freq_factor)) / smooth_span;
      value = (T(1) - smooth) * value / factor_t + smooth * value;
      ++counts[1];
    }
  }
  table.inv_freq = widen(inv);
  table.llama3_counts = counts;
}

/// proportional (Gemma 4): HF's 1 / b^(2i/head_dim) for the first rope_angles pairs and 0 for
/// the others (the neox pairs span the whole head), every value then divided by f.
template <class T>
void fill_proportional(const Spec& spec, FreqTable& table) {
  const int d = spec.rotary_dim;  // head_dim (validation)
  const int rotated =
      std::min(d / 2, proportional_rope_angles(spec.rope.partial_rotary_factor.value_or(1.0), d));
  const T factor = static_cast<T>(spec.rope.factor.value_or(1.0));
  std::vector<T> inv(d / 2, T(0));
  for (int i = 0; i < rotated; ++i) inv[i] = (T(1) / pos_freq<T>(spec.rope.theta, i, d)) / factor;
  table.inv_freq = widen(inv);
  table.rotated_pairs = rotated;
}

/// Default formula with base b (T-cast), then the linear divisor (1 when unused).
template <class T>
std::vector<double> base_table(double base, int rotary_dim, std::optional<double> divisor) {
  std::vector<T> inv = default_inv_freq<T>(base, rotary_dim);
  if (divisor)
    for (T& v : inv) v = v / static_cast<T>(*divisor);
  return widen(inv);
}

/// io.axes: pair k's inv_freq from its axis's table: the axis's own default table over its
/// 2 * pairs_a dims with its theta, or entry index * A + axis of the table over rotary_dim
/// (global_alternate, Pixtral).
template <class T>
std::vector<double> axes_table(const Spec& spec) {
  const AxesSpec& axes = spec.io.axes;
  const int count = static_cast<int>(axes.pairs.size());
  std::vector<std::vector<T>> tables;
  if (axes.frequencies == AxisFrequencies::global_alternate) tables.push_back(default_inv_freq<T>(spec.rope.theta, spec.rotary_dim));
  else
    for (int a = 0; a < count; ++a) tables.push_back(default_inv_freq<T>(axes.theta.at(a), 2 * axes.pairs[a]));
  std::vector<T> inv(spec.rotary_dim / 2);
  for (int k = 0; k < spec.rotary_dim / 2; ++k) {
    const PairAxis at = pair_axis(axes, k);
    inv[k] = axes.frequencies == AxisFrequencies::global_alternate ? tables[0].at(at.index * count + at.axis)
                                                                  : tables[at.axis].at(at.index);
  }
  return widen(inv);
}

template <class T>
FreqTable compute(const Spec& spec) {
  FreqTable table;
  table.rotary_dim = spec.rotary_dim;
  table.rotated_pairs = spec.rotary_dim / 2;
  const RopeParams& rope = spec.rope;
  const int d = spec.rotary_dim;
  switch (rope.type) {
    case RopeType::default_:
      table.inv_freq = spec.io.positions == PositionsForm::axes && !caller_cos_sin(spec)
                           ? axes_table<T>(spec) : base_table<T>(rope.theta, d, std::nullopt);
      break;
    case RopeType::linear:
      table.inv_freq = base_table<T>(rope.theta, d, rope.factor.value_or(1.0));
      break;
    case RopeType::ntk: {
      const double alpha = rope.alpha.value_or(rope.factor.value_or(1.0));
      const double base = rope.theta * std::pow(alpha, static_cast<double>(d) / (d - 2));
      table.inv_freq = base_table<T>(base, d, std::nullopt);
      break;
    }
    case RopeType::dynamic: {
      const int64_t length = rope.seq_len.value_or(spec.max_position_embeddings);
      table.inv_freq = base_table<T>(dynamic_ntk_base(spec, length), d, std::nullopt);
      break;
    }
    case RopeType::yarn:
      fill_yarn<T>(spec, table);
      break;
    case RopeType::longrope:
      fill_longrope<T>(spec, table);
      break;
    case RopeType::llama3:
      fill_llama3<T>(spec, table);
      break;
    case RopeType::proportional:
      fill_proportional<T>(spec, table);
      break;
  }
  if (rope.type != RopeType::longrope) table.attention_factor_long = table.attention_factor;
  return table;
}

void check_rotary_dim(const Spec& spec) {
  if (spec.rotary_dim < 2 || spec.rotary_dim % 2 != 0)
    throw Error(Status::invalid_spec,
                fmt::format("/rotary_dim: {} is not allowed: must be an even number >= 2",
                            spec.rotary_dim),
                "/rotary_dim");
}

}  // namespace

FreqTable compute_freqs(const Spec& spec, FreqMode mode) {
  check_rotary_dim(spec);
  return mode == FreqMode::hf_fp32 ? compute<float>(spec) : compute<double>(spec);
}

int proportional_rope_angles(double partial_rotary_factor, int head_dim) {
  return static_cast<int>(std::floor(partial_rotary_factor * head_dim / 2.0));
}

double dynamic_ntk_base(const Spec& spec, int64_t length) { return dynamic_ntk_base(spec, spec.rope, length); }

double dynamic_ntk_base(const Spec& spec, const RopeParams& rope, int64_t length) {
  const double max_positions = static_cast<double>(spec.max_position_embeddings);
  const double factor = rope.factor.value_or(1.0);
  const double d = spec.rotary_dim;
  // HF resets to the base table at or below M: L' = max(L, M).
  const double effective = std::max(static_cast<double>(length), max_positions);
  if (effective == max_positions) return rope.theta;
  return rope.theta * std::pow((factor * effective / max_positions) - (factor - 1), d / (d - 2));
}

FreqTable compute_freqs_dynamic(const Spec& spec, int64_t length, FreqMode mode) {
  check_rotary_dim(spec);
  FreqTable table;
  table.rotary_dim = spec.rotary_dim;
  table.rotated_pairs = spec.rotary_dim / 2;
  const double base = dynamic_ntk_base(spec, length);
  table.inv_freq = mode == FreqMode::hf_fp32 ? base_table<float>(base, spec.rotary_dim, std::nullopt)
                                             : base_table<double>(base, spec.rotary_dim, std::nullopt);
  return table;
}

bool longrope_uses_long(const Spec& spec, int64_t length) { return longrope_uses_long(spec, spec.rope, length); }

bool longrope_uses_long(const Spec& spec, const RopeParams& rope, int64_t length) {
  const int64_t original = rope.original_max_position_embeddings.value_or(spec.max_position_embeddings);
  return length > original;
}

}  // namespace ropejit
