#pragma once
/// Frequency math (docs/rope-math.md §4, §7): per-pair inv_freq and the attention factor for
/// every rope_type, in HF float32 parity or float64.
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "ropejit/spec.h"

namespace ropejit {

/// hf_fp32: every step in float32 as HF evaluates it (what kernels bake); float64: the same
/// formulas in double.
enum class FreqMode { hf_fp32, float64 };

/// Names of FreqMode values (CLI --mode, messages).
inline constexpr std::array<EnumName<FreqMode>, 2> kFreqModeNames{{
    {FreqMode::hf_fp32, "hf_fp32"}, {FreqMode::float64, "float64"}}};
/// The FreqMode table, so to_string / enum_from_string / allowed_names work on it.
template <> constexpr const auto& enum_table<FreqMode>() { return kFreqModeNames; }

/// Host-computed frequency data of a spec.
struct FreqTable {
  int rotary_dim = 0;
  /// Leading pairs with a frequency: d/2, except proportional, whose later pairs have inv_freq 0
  /// (kernels leave them as they are, bit for bit).
  int rotated_pairs = 0;
  std::vector<double> inv_freq;       ///< d/2 values (longrope: the short table)
  std::vector<double> inv_freq_long;  ///< longrope only: the long table
  double attention_factor = 1.0;      ///< s, multiplies cos and sin (longrope: with the short table)
  double attention_factor_long = 1.0;  ///< s with longrope's long table (PhiMoE's long_mscale); else s
  std::optional<double> yarn_low;     ///< yarn correction range (after truncate/clamp)
  std::optional<double> yarn_high;
  std::optional<std::array<int, 3>> llama3_counts;  ///< unchanged, smoothed, divided
  std::optional<double> yarn_attention_softmax_scale;  ///< DeepSeek m(f, mscale_all_dim)^2, reported only
};

/// The table of a spec. For `dynamic` this is the table at length <= M (default RoPE) unless
/// the spec fixes rope.seq_len; use dynamic_ntk_base for run-time lengths.
FreqTable compute_freqs(const Spec& spec, FreqMode mode);

/// proportional: the pairs that keep a frequency, HF's rope_angles =
/// int(partial_rotary_factor * head_dim // 2) (the product in double, then floored).
int proportional_rope_angles(double partial_rotary_factor, int head_dim);

/// Dynamic NTK base b' for run-time length L = max(position)+1 (HF formula, in double).
double dynamic_ntk_base(const Spec& spec, int64_t length);
/// The same for the rope block `rope` with the spec's shape (op rerotate's old parameters),
/// without copying the spec: launch checks call it.
double dynamic_ntk_base(const Spec& spec, const RopeParams& rope, int64_t length);

/// The dynamic NTK table for length L (HF: float32 pow of the double base).
FreqTable compute_freqs_dynamic(const Spec& spec, int64_t length, FreqMode mode);

/// LongRoPE: true when the long table applies at run-time length L (L > O).
bool longrope_uses_long(const Spec& spec, int64_t length);
/// The same for the rope block `rope` (op rerotate's old parameters).
bool longrope_uses_long(const Spec& spec, const RopeParams& rope, int64_t length);

}  // namespace ropejit
