#pragma once
/// The independent float64 reference of the conformance suite: plain loops written from
/// docs/rope-math.md. It reads only the Spec struct; it shares no code with
/// templates/ or the generator's frequency math, so a bug there cannot hide here.
///
/// Three parts:
///  1. reference_freqs: per-pair inv_freq and attention factor for every rope_type, either
///     reproducing HF's float32 steps (what kernels bake) or in pure float64.
///  2. reference_outputs: the expected contents of every output tensor of one launch
///     (bias add -> rotate -> scatter, in float64), with a per-element tolerance scale and
///     the padding rows that must be exactly zero.
///  3. compare: actual output bytes vs expected values under the tolerance policy below.
///
/// Tolerance policy (compare):
///  - fp32 storage: |actual - expected| <= fp32_relative * max(|expected|, scale). `scale` is
///    the magnitude of the pair the element came from: s * |(x, y)| for rotated elements (x, y
///    after the bias add), |x| for pass-through and v elements. An element of a rotated pair
///    can be near zero while its pair is not; fp32 math errs relative to the pair, so the
///    error is judged against the pair's size.
///  - fp16/bf16 storage: the actual bits are within max_ulps of the correctly rounded expected
///    value (ulps counted through zero across the sign), or |actual - expected| <=
///    fp32_relative * scale + one storage ulp at the expected value (the fp32 math bound of
///    results far smaller than their pair, where a storage ulp is smaller than fp32 noise).
///  - both: tolerance.inv_freq_ulps * inv_freq_slack is added to the allowed error (0 unless
///    asked for: a baked inv_freq table must equal reference_freqs bit for bit).
///  - padding elements must be +0 or -0; NaN or inf never passes.
///  - FP8 cache elements: the code is fp8(expected / quant_scale) rounded to nearest even with
///    saturation, or its neighbour when expected / quant_scale lies within fp32 noise
///    (fp32_relative * scale / quant_scale) of the midpoint between the two.
///  - untouched elements are skipped (the caller compares their bytes with the input's).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ropejit/spec.h"

namespace ropejit::ref {

// ---------------------------------------------------------------- frequencies

/// Frequency data of a spec at one run length, computed independently of spec/ and codegen/.
struct RefFreqs {
  std::vector<double> inv_freq;      ///< rotary_dim/2 values (float32 values when hf_fp32)
  double attention_factor = 1.0;     ///< s, multiplies cos and sin
  double base = 0.0;                 ///< the base used (ntk / dynamic: the changed base b')
  std::optional<double> yarn_low;    ///< yarn correction range after truncate and clamp
  std::optional<double> yarn_high;
  bool longrope_long = false;        ///< longrope: the long factors were used (L > O)
};

/// inv_freq and attention factor of `spec` (docs/rope-math.md §4, §7; HF v5 semantics).
/// run_length is L = max(position) + 1 of the launch: dynamic (L' = max(L, M), unless
/// spec.rope.seq_len fixes L) and longrope (long table when L > O) depend on it; the other
/// types ignore it. hf_fp32 = true rounds every step to float32 as HF's torch code does (the
/// table ropejit kernels bake; inv_freq values are then exact float32 numbers); false keeps
/// every step in float64. float32 pow is taken correctly rounded (float64 pow, one rounding):
/// a definition every platform can reproduce. torch's float32 pow differs from it by one ulp
/// in about one pair in 64 (HF golden) and glibc powf in ~0.06% of inputs, so a generator
/// that bakes powf values can differ from this table in rare pairs.
/// Throws std::invalid_argument when a required field is missing.
RefFreqs reference_freqs(const Spec& spec, int64_t run_length, bool hf_fp32);

/// io.axes in the order the libraries lay their per-axis columns out (torch.cat of the axes, or
/// stack-and-flatten for alternating): each rotary pair's axis (`axis_of_pair`), or its index
/// within its axis.
std::vector<int> axes_pair_order(const AxesSpec& axes, bool axis_of_pair);

/// Angle of pair frequency inv_freq at `position`: fp32 = float(float(position) * float(inv_freq))
/// (HF's float32 product), exact = double(position) * inv_freq.
double reference_angle(AnglePrecision angle, int64_t position, double inv_freq);
/// The same with the spec's angle precision.
double reference_angle(const Spec& spec, int64_t position, double inv_freq);

/// Rotates (x, y) by `angle` with cos and sin in float64, times attention_factor:
/// x' = (x cos - y sin) s, y' = (y cos + x sin) s.
std::pair<double, double> rotate_pair(double x, double y, double angle, double attention_factor);

/// Element indices (first, second) of rotated pair i: neox (i, i + d/2), interleaved (2i, 2i+1).
std::pair<int, int> pair_elements(Layout layout, int rotary_dim, int pair);
/// The elements of rotary pair `pair` within a head of `spec`: pair_elements shifted to the
/// head's last rotary_dim elements when its rotary_slice is trailing.
std::pair<int, int> pair_elements(const Spec& spec, int pair);

// ---------------------------------------------------------------- one launch

/// One input tensor as raw bytes of spec.dtype. Element (token t, head h, element e) is at
/// element offset t * token_stride + h * head_stride + e; a stride of 0 means dense.
struct RefInput {
  const void* data = nullptr;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
};

/// The inputs of one launch. Which fields apply follows spec.io:
///  - input separate: q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D] (v needed when copy_v; given
///    without copy_v in the inplace form, the expected v is the unchanged input);
///  - input packed_qkv: qkv [T, (Hq + 2 Hkv) D]: q heads, then k heads, then v heads;
///  - qkv_bias: bias [(Hq + 2 Hkv) D] in spec.dtype (q part, k part, v part);
///  - positions explicit: `positions` [T]; varlen: position = start_pos[b] + index in sequence b
///    (start_pos empty = all 0), sequences from cu_seqlens [B + 1] (cu_seqlens[0] = 0,
///    cu_seqlens[B] = T). padded_bhsd output needs cu_seqlens in either positions form.
struct RefProblem {
  int64_t num_tokens = 0;             ///< T
  RefInput q, k, v;                   ///< input separate
  RefInput qkv;                       ///< input packed_qkv
  const void* bias = nullptr;         ///< [(Hq + 2 Hkv) D] in spec.dtype, when io.qkv_bias
  const void* q_norm_weight = nullptr;  ///< [D] ([Hq·D] with scope all) in spec.dtype, when qk_norm has weight per_head
  const void* k_norm_weight = nullptr;  ///< [D] ([Hkv·D] with scope all) in spec.dtype, likewise for k
  const void* q_norm_bias = nullptr;    ///< [D] in spec.dtype, when qk_norm is a layernorm with bias per_head
  const void* k_norm_bias = nullptr;    ///< [D] in spec.dtype, likewise for k
  std::vector<int64_t> positions;     ///< explicit positions [T], or mrope [3, T] (stream-major)
  std::vector<int32_t> cu_seqlens;    ///< [B + 1] prefix sums of sequence lengths
  std::vector<int64_t> start_pos;     ///< [B] tokens already cached per sequence, or empty
  int64_t max_seq_len = 0;            ///< padded_bhsd S (0: the longest sequence)
  int64_t run_length = 0;             ///< L for dynamic/longrope (0: max(position) + 1)
  // paged_kv: k and v of token t go to cache slot slot_mapping[t] (-1: nowhere), or with
  // block_tables to page block_tables[b][p / page_size], offset p % page_size, for position p
  // of sequence b. Slot s is page s / page_size, offset s % page_size.
  std::vector<int64_t> slot_mapping;  ///< cache_index slot_mapping: [T]
  std::vector<int32_t> block_tables;  ///< cache_index block_tables: [B, max_blocks_per_seq]
  int64_t max_blocks_per_seq = 0;     ///< block_tables row length
  int64_t cache_pages = 0;            ///< pages of each cache
  double k_scale = 1.0, v_scale = 1.0;  ///< FP8 caches: stored value = fp8(x / scale)
  double q_scale = 1.0;                 ///< FP8 q_out (io.q_output_dtype): stored = fp8(q / q_scale)
  // op rerotate: the K cache before the launch (the cache dtype's bytes; pages
  // cache_page_stride elements apart, 0: dense), each key's new position (empty: unchanged) and
  // the length the keys were written at (0: max(old position) + 1). The keys' old positions are
  // the positions form's; their slots are found from them as for the append.
  const void* k_cache_in = nullptr;
  int64_t cache_page_stride = 0;
  std::vector<int64_t> new_positions;
  int64_t from_run_length = 0;
  /// io.angles cos_sin_cache: the caller's cache [cos_sin_rows, rotary_dim] in io.cos_sin_dtype (row p:
  /// d/2 cos, then d/2 sin of position p); a token whose position has no row rotates to NaN.
  const void* cos_sin_cache = nullptr;
  int64_t cos_sin_rows = 0;
  /// op mla_append with concat_k: k_nope [T, Hq, D - d] (head_stride 0: dense).
  RefInput k_nope;
  /// op mla_append with absorbed_q: q_latent [T, Hq, kv_lora_rank] (head_stride 0: dense).
  RefInput q_latent;
};

/// Memory order of an expected output tensor.
enum class RefLayout {
  token_major,  ///< [T, H, D]: element (t, h, e) at (t H + h) D + e
  padded_bhsd   ///< [B, H, S, D]: element (b, h, s, e) at ((b H + h) S + s) D + e; a paged
                ///< cache is one too, with B = pages and S = page_size (its strides say nhd/hnd)
};

/// Expected contents of one output tensor, dense in its layout.
struct RefTensor {
  std::string name;               ///< "q", "k", "v", or "qkv" (packed in place)
  RefLayout layout = RefLayout::token_major;
  int64_t batch = 1;              ///< B (token_major: 1)
  int64_t rows = 0;               ///< token_major: T; padded_bhsd: S
  int64_t heads = 0;              ///< H (packed in place: Hq + 2 Hkv)
  int64_t head_dim = 0;           ///< D
  std::vector<double> value;      ///< expected value of each element
  std::vector<double> scale;      ///< magnitude of the element's pair (tolerance, see top)
  /// Rotated elements: how far the element moves when inv_freq is one float32 ulp off
  /// (p ulp(inv_freq), plus one ulp of a float32 angle, times s |(x, y)|); else 0.
  std::vector<double> inv_freq_slack;
  std::vector<uint8_t> padding;   ///< 1: a padding element that must be exactly zero
  std::vector<int64_t> row_token; ///< padded_bhsd: token of each (b, s) row, -1 for padding
  /// 1: an element the launch must not write (a cache slot no token maps to, the k and v part
  /// of a packed buffer whose q is rotated in place); compare skips it, the caller checks its
  /// bytes are unchanged. Empty: none.
  std::vector<uint8_t> untouched;
  /// paged_kv caches: the cache element type (auto: the spec's dtype) and, for FP8, the scale:
  /// the stored code must be fp8(value / quant_scale), correctly rounded and saturated.
  CacheDType cache_dtype = CacheDType::auto_;
  double quant_scale = 1.0;
  /// FP8 with a scale per element (per-head FP8 q): used instead of quant_scale when not empty.
  std::vector<double> quant_scales;
  /// The element type when it is not the spec's (float32 scales a launch writes), else unset.
  std::optional<DType> dtype;
  /// A part of a buffer of mixed elements (fp8_ds_mla's rows): the buffer's name (else `name`)
  /// and the part's first byte in each row; its strides are the buffer's, in its own elements.
  std::string buffer;
  int64_t byte_offset = 0;
  int64_t part_token_stride = 0;  ///< a part's own row stride (its elements; one head), else the buffer's
  bool exact_bytes = false;       ///< elements are bytes that must equal `value` (DeepSeek-V4's scale bytes)
  /// FP8 codes of values first rounded to this type (DeepSeek-V4's cell quantizes bf16 values).
  std::optional<DType> quantized_from;
  /// The buffer this tensor is checked against.
  const std::string& buffer_name() const { return buffer.empty() ? name : buffer; }
  /// Number of elements.
  int64_t size() const { return static_cast<int64_t>(value.size()); }
};

/// Everything a launch should produce, plus what the reference used to get there.
struct RefOutputs {
  std::vector<RefTensor> tensors;        ///< in order q, k, v (or the one packed "qkv")
  std::vector<int64_t> token_positions;  ///< position of each token (mrope: its temporal stream)
  int64_t run_length = 0;                ///< the L used for frequencies
  RefFreqs freqs;                        ///< reference_freqs(spec, run_length, hf_fp32 = true)
  /// The tensor of that name, or nullptr.
  const RefTensor* find(const std::string& name) const;
};

/// Expected outputs of one launch in float64: widen inputs, add the bias, rotate pairs of the
/// first rotary_dim elements of q and k heads by the spec's angle of reference_freqs(..., true)
/// times the attention factor, pass elements >= rotary_dim through (with bias), copy v with
/// bias (never rotated), and scatter into the spec's output form. op rerotate: the K cache,
/// each key's rotary pairs (read from k_cache_in) rotated by angle(new position, the spec's
/// freqs) - angle(old position, rerotate.from's) times s / s_from, everything else untouched.
/// Throws std::invalid_argument when the problem does not fit the spec.
RefOutputs reference_outputs(const Spec& spec, const RefProblem& problem);

/// NVFP4: an expected cache's block scales, "<k|v>_scale_cache" [pages, page_size, Hkv, D / 16]
/// (padded_bhsd, e4m3 codes of value sf = fl(1 / k_scale) * (amax * fl(1 / 6)) over each written
/// row's 16-value blocks); each element's quant scale set to e4m3(sf) / fl(1 / k_scale).
RefTensor nvfp4_block_scales(RefTensor& cache);
/// NVFP4: the element scales of `cache` from the launch's block-scale codes (index as `scales`),
/// once those were checked: a scale the kernel may round either way (fp32 noise at an e4m3
/// midpoint) then judges the codes it scaled.
void adopt_block_scales(RefTensor& cache, const RefTensor& scales, const std::vector<uint8_t>& codes);

// ---------------------------------------------------------------- checking

/// Where the actual tensor lives: raw bytes of the storage type with element strides laid out
/// as params.cuh's TensorRef: element (b, s, h, e) at b * batch_stride + s * token_stride +
/// h * head_stride + e (token_major: b = 0, s = token). A stride of 0 means dense in the
/// expected tensor's layout.
struct ActualTensor {
  const void* data = nullptr;
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  int64_t batch_stride = 0;
};

/// Element offset of expected element `index` in the actual tensor (ActualTensor's strides).
int64_t actual_offset(const RefTensor& expected, const ActualTensor& actual, int64_t index);

/// Tolerance policy knobs (meaning at the top of this file).
struct Tolerance {
  double fp32_relative = 2e-6;  ///< relative to max(|expected|, scale)
  int64_t max_ulps = 1;         ///< fp16/bf16: ulps from the correctly rounded expected value
  /// Float32 ulps by which the kernel's inv_freq may differ from the reference's: 0 when the
  /// kernel uses a baked table (it must match bit for bit); set it (e.g. 2) where a kernel
  /// computes inv_freq itself (dynamic NTK on the device), whose pow is not correctly rounded.
  double inv_freq_ulps = 0.0;
};

/// Outcome of comparing one tensor.
struct CheckResult {
  int64_t checked = 0;          ///< elements compared (padding included)
  int64_t failures = 0;         ///< elements outside tolerance
  double max_abs_error = 0.0;   ///< max |actual - expected| over non-padding elements
  double max_scaled_error = 0.0;  ///< max |actual - expected| / max(|expected|, scale)
  int64_t max_ulps = 0;         ///< fp16/bf16: max ulps from the correctly rounded value
  std::string first_failure;    ///< location and values of the first failing element
  /// True when something was checked and nothing failed.
  bool ok() const { return checked > 0 && failures == 0; }
  /// One line: counts, max errors and the first failure.
  std::string summary() const;
};

/// Compares actual bytes of `dtype` with an expected tensor under `tolerance`.
CheckResult compare(DType dtype, const RefTensor& expected, const ActualTensor& actual,
                    const Tolerance& tolerance = {});
/// The same with the tensor's element type (the spec's storage type unless it names another).
inline CheckResult compare(const Spec& spec, const RefTensor& expected, const ActualTensor& actual,
                           const Tolerance& tolerance = {}) {
  return compare(expected.dtype.value_or(spec.dtype), expected, actual, tolerance);
}

}  // namespace ropejit::ref
