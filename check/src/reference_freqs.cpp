// Reference frequency math, written from docs/rope-math.md and HF v5 modeling_rope_utils.
// In hf_fp32 mode every torch float32 step is mirrored by rounding a float64 result to
// float32: for + - * / one float64 step then one rounding equals the float32 operation, and
// pow is then correctly rounded (torch's own float32 pow may differ in the last bit).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "ropejit/check/reference.h"

namespace ropejit::ref {
namespace {

constexpr double kPi = 3.14159265358979323846;

/// Rounding of every intermediate: to float32 (HF parity) or none (float64).
struct Arith {
  bool fp32;
  double operator()(double x) const { return fp32 ? static_cast<double>(static_cast<float>(x)) : x; }
};

[[noreturn]] void missing(const char* field, RopeType type) {
  throw std::invalid_argument(std::string("reference_freqs: /rope/") + field + " is required for " +
                              std::string(to_string(type)));
}

double require(const std::optional<double>& v, const char* field, RopeType type) {
  if (!v) missing(field, type);
  return *v;
}

/// HF's default table for base b: 1 / b^(float32(2i) / d).
std::vector<double> default_inv_freq(double base, int rotary_dim, Arith r) {
  std::vector<double> inv_freq(static_cast<size_t>(rotary_dim / 2));
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const double exponent = r(r(2.0 * i) / r(rotary_dim));
    const double power = r(std::pow(r(base), exponent));
    inv_freq[static_cast<size_t>(i)] = r(1.0 / power);
  }
  return inv_freq;
}

/// O, falling back to M when absent.
int64_t original_max(const Spec& spec) {
  return spec.rope.original_max_position_embeddings.value_or(spec.max_position_embeddings);
}

/// f, falling back to M / O when absent (yarn, longrope).
double factor_or_ratio(const Spec& spec) {
  if (spec.rope.factor) return *spec.rope.factor;
  return static_cast<double>(spec.max_position_embeddings) / static_cast<double>(original_max(spec));
}

/// YaRN's m(f, k) = 1 if f <= 1 else 0.1 k ln f + 1.
double yarn_mscale(double factor, double k) { return factor <= 1.0 ? 1.0 : 0.1 * k * std::log(factor) + 1.0; }

void compute_yarn(const Spec& spec, Arith r, RefFreqs& out) {
  const RopeParams& p = spec.rope;
  const int d = spec.rotary_dim;
  const double base = p.theta;
  const double factor = factor_or_ratio(spec);
  const double original = static_cast<double>(original_max(spec));

  if (p.attention_factor) {
    out.attention_factor = *p.attention_factor;
  } else if (p.mscale.value_or(0.0) != 0.0 && p.mscale_all_dim.value_or(0.0) != 0.0) {
    out.attention_factor = yarn_mscale(factor, *p.mscale) / yarn_mscale(factor, *p.mscale_all_dim);
  } else {
    out.attention_factor = yarn_mscale(factor, 1.0);
  }

  const double beta_fast = p.beta_fast.value_or(0.0) != 0.0 ? *p.beta_fast : 32.0;
  const double beta_slow = p.beta_slow.value_or(0.0) != 0.0 ? *p.beta_slow : 1.0;
  auto correction_dim = [&](double rotations) {
    return (d * std::log(original / (rotations * 2 * kPi))) / (2 * std::log(base));
  };
  double low = correction_dim(beta_fast);
  double high = correction_dim(beta_slow);
  if (p.truncate.value_or(true)) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  out.yarn_low = low;
  out.yarn_high = high;
  if (low == high) high += 0.001;  // HF avoids a division by zero in the ramp

  out.inv_freq.resize(static_cast<size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) {
    const double pos_freq = r(std::pow(r(base), r(r(2.0 * i) / r(d))));
    const double inv_extrapolation = r(1.0 / pos_freq);
    const double inv_interpolation = r(1.0 / r(r(factor) * pos_freq));
    const double linear = r(r(r(static_cast<double>(i)) - r(low)) / r(high - low));
    const double ramp = std::clamp(linear, 0.0, 1.0);
    const double extrapolation_weight = r(1.0 - ramp);
    out.inv_freq[static_cast<size_t>(i)] =
        r(r(inv_interpolation * r(1.0 - extrapolation_weight)) + r(inv_extrapolation * extrapolation_weight));
  }
}

void compute_longrope(const Spec& spec, int64_t run_length, Arith r, RefFreqs& out) {
  const RopeParams& p = spec.rope;
  const int d = spec.rotary_dim;
  const size_t pairs = static_cast<size_t>(d / 2);
  if (p.short_factor.size() != pairs || p.long_factor.size() != pairs)
    throw std::invalid_argument("reference_freqs: /rope/short_factor and /rope/long_factor need " +
                                std::to_string(pairs) + " numbers each");
  if (!p.original_max_position_embeddings) missing("original_max_position_embeddings", p.type);
  const double original = static_cast<double>(*p.original_max_position_embeddings);
  const double factor = factor_or_ratio(spec);
  if (p.attention_factor) {
    out.attention_factor = *p.attention_factor;
  } else {
    out.attention_factor = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(original));
  }
  out.longrope_long = run_length > *p.original_max_position_embeddings;
  const std::optional<double>& mscale = out.longrope_long ? p.long_mscale : p.short_mscale;  // PhiMoE
  if (mscale) out.attention_factor = *mscale;
  const std::vector<double>& ext = out.longrope_long ? p.long_factor : p.short_factor;
  out.inv_freq.resize(pairs);
  for (size_t i = 0; i < pairs; ++i) {
    const double power = r(std::pow(r(p.theta), r(r(2.0 * static_cast<double>(i)) / r(d))));
    out.inv_freq[i] = r(1.0 / r(r(ext[i]) * power));
  }
}

void compute_llama3(const Spec& spec, Arith r, RefFreqs& out) {
  const RopeParams& p = spec.rope;
  const double factor = require(p.factor, "factor", p.type);
  const double low_freq_factor = require(p.low_freq_factor, "low_freq_factor", p.type);
  const double high_freq_factor = require(p.high_freq_factor, "high_freq_factor", p.type);
  if (!p.original_max_position_embeddings) missing("original_max_position_embeddings", p.type);
  const double original = static_cast<double>(*p.original_max_position_embeddings);
  const double low_freq_wavelen = r(original / low_freq_factor);
  const double high_freq_wavelen = r(original / high_freq_factor);
  out.inv_freq = default_inv_freq(p.theta, spec.rotary_dim, r);
  // python scalar / tensor: torch takes the reciprocal, then the product (float64: one division).
  auto scalar_over = [&](double scalar, double tensor) {
    return r.fp32 ? r(r(1.0 / tensor) * r(scalar)) : scalar / tensor;
  };
  for (double& inv_freq : out.inv_freq) {
    const double wavelen = scalar_over(2 * kPi, inv_freq);
    if (wavelen < high_freq_wavelen) continue;  // high frequency: unchanged
    const double divided = r(inv_freq / r(factor));
    if (wavelen > low_freq_wavelen) {  // low frequency: interpolated
      inv_freq = divided;
      continue;
    }
    if (high_freq_factor == low_freq_factor) continue;  // no smooth band: its edge is kept
    const double smooth = r(r(scalar_over(original, wavelen) - r(low_freq_factor)) / r(high_freq_factor - low_freq_factor));
    inv_freq = r(r(r(r(1.0 - smooth) * inv_freq) / r(factor)) + r(smooth * inv_freq));
  }
}

/// Gemma 4's proportional RoPE: rope_angles = int(f_p * head_dim // 2) pairs get 1 / b^(2i /
/// head_dim), the rest of the head_dim/2 pairs 0; then all are divided by the factor (default 1).
void compute_proportional(const Spec& spec, Arith r, RefFreqs& out) {
  const RopeParams& p = spec.rope;
  const int head_dim = spec.head_dim;
  if (spec.rotary_dim != head_dim) throw std::invalid_argument("reference_freqs: proportional needs rotary_dim == head_dim");
  const double fraction = p.partial_rotary_factor.value_or(1.0);
  const int rope_angles = static_cast<int>(std::floor(fraction * head_dim / 2));
  const double factor = p.factor.value_or(1.0);
  out.inv_freq.assign(static_cast<size_t>(head_dim / 2), 0.0);
  for (int i = 0; i < rope_angles && i < head_dim / 2; ++i) {
    const double power = r(std::pow(r(p.theta), r(r(2.0 * i) / r(head_dim))));
    out.inv_freq[static_cast<size_t>(i)] = r(r(1.0 / power) / r(factor));
  }
}

}  // namespace

std::vector<int> axes_pair_order(const AxesSpec& axes, bool axis_of_pair) {
  std::vector<int> out;
  const int count = static_cast<int>(axes.pairs.size());
  if (axes.placement == AxisPlacement::contiguous) {  // torch.cat of the axes' columns
    for (int a = 0; a < count; ++a)
      for (int j = 0; j < axes.pairs[a]; ++j) out.push_back(axis_of_pair ? a : j);
  } else {  // torch.stack([axis 0, axis 1, ...], -1).flatten(): column j of every axis in turn
    for (int j = 0; j < axes.pairs.at(0); ++j)
      for (int a = 0; a < count; ++a) out.push_back(axis_of_pair ? a : j);
  }
  return out;
}

namespace {

/// io.axes: each axis's table as the libraries build it (its own default table over 2 pairs_a dims
/// with its theta; or, global_alternate, Pixtral's freqs[a::A] of one table over rotary_dim), laid
/// out by the placement.
std::vector<double> axes_inv_freq(const Spec& spec, Arith r) {
  const AxesSpec& axes = spec.io.axes;
  const int count = static_cast<int>(axes.pairs.size());
  std::vector<std::vector<double>> tables(static_cast<size_t>(count));
  const std::vector<double> global = default_inv_freq(spec.rope.theta, spec.rotary_dim, r);
  for (int a = 0; a < count; ++a) {
    if (axes.frequencies == AxisFrequencies::global_alternate) {
      for (size_t k = static_cast<size_t>(a); k < global.size(); k += static_cast<size_t>(count)) tables[a].push_back(global[k]);
    } else {
      if (axes.theta.size() != axes.pairs.size()) throw std::invalid_argument("reference_freqs: io.axes needs a theta per axis");
      tables[a] = default_inv_freq(axes.theta[a], 2 * axes.pairs[a], r);
    }
  }
  const std::vector<int> axis = axes_pair_order(axes, true), index = axes_pair_order(axes, false);
  std::vector<double> inv_freq;
  for (size_t k = 0; k < axis.size(); ++k) inv_freq.push_back(tables.at(axis[k]).at(index[k]));
  return inv_freq;
}

}  // namespace

RefFreqs reference_freqs(const Spec& spec, int64_t run_length, bool hf_fp32) {
  const Arith r{hf_fp32};
  const RopeParams& p = spec.rope;
  const int d = spec.rotary_dim;
  if (d <= 0 || d % 2 != 0) throw std::invalid_argument("reference_freqs: rotary_dim must be even and > 0");
  RefFreqs out;
  out.base = p.theta;
  switch (p.type) {
    case RopeType::default_:
      out.inv_freq = spec.io.positions == PositionsForm::axes && spec.io.angles == AnglesSource::computed
                         ? axes_inv_freq(spec, r) : default_inv_freq(p.theta, d, r);
      break;
    case RopeType::linear: {
      const double factor = require(p.factor, "factor", p.type);
      out.inv_freq = default_inv_freq(p.theta, d, r);
      for (double& v : out.inv_freq) v = r(v / r(factor));
      break;
    }
    case RopeType::ntk: {
      const double alpha = require(p.alpha, "alpha", p.type);
      out.base = p.theta * std::pow(alpha, static_cast<double>(d) / (d - 2));
      out.inv_freq = default_inv_freq(out.base, d, r);
      break;
    }
    case RopeType::dynamic: {
      const double factor = require(p.factor, "factor", p.type);
      const int64_t length = std::max(p.seq_len.value_or(run_length), spec.max_position_embeddings);
      const double m = static_cast<double>(spec.max_position_embeddings);
      out.base = p.theta * std::pow(factor * static_cast<double>(length) / m - (factor - 1),
                                    static_cast<double>(d) / (d - 2));
      out.inv_freq = default_inv_freq(out.base, d, r);
      break;
    }
    case RopeType::yarn:
      compute_yarn(spec, r, out);
      break;
    case RopeType::longrope:
      compute_longrope(spec, run_length, r, out);
      break;
    case RopeType::llama3:
      compute_llama3(spec, r, out);
      break;
    case RopeType::proportional:
      compute_proportional(spec, r, out);
      break;
  }
  return out;
}

double reference_angle(AnglePrecision angle, int64_t position, double inv_freq) {
  if (angle == AnglePrecision::exact) return static_cast<double>(position) * inv_freq;
  const float product = static_cast<float>(position) * static_cast<float>(inv_freq);
  return static_cast<double>(product);
}

double reference_angle(const Spec& spec, int64_t position, double inv_freq) {
  return reference_angle(spec.angle, position, inv_freq);
}

std::pair<double, double> rotate_pair(double x, double y, double angle, double attention_factor) {
  const double c = std::cos(angle), s = std::sin(angle);
  return {(x * c - y * s) * attention_factor, (y * c + x * s) * attention_factor};
}

std::pair<int, int> pair_elements(Layout layout, int rotary_dim, int pair) {
  if (layout == Layout::interleaved) return {2 * pair, 2 * pair + 1};
  return {pair, pair + rotary_dim / 2};
}

std::pair<int, int> pair_elements(const Spec& spec, int pair) {
  const int begin = spec.rotary_slice == RotarySlice::trailing ? spec.head_dim - spec.rotary_dim : 0;
  const auto [a, b] = pair_elements(spec.layout, spec.rotary_dim, pair);
  return {begin + a, begin + b};
}

}  // namespace ropejit::ref
