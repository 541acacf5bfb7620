// Spec validation of the io and qk_norm blocks and of the frequencies a spec derives.
#include <algorithm>
#include <cmath>
#include <exception>

#include <fmt/core.h>

#include "ropejit/freqs.h"
#include "spec_ops.h"
#include "spec_reader.h"

namespace ropejit::spec_detail {

namespace {

// io.mrope_section and io.mrope_interleaved: only with positions mrope, three counts of pairs
// summing to rotary_dim / 2; interleaved, the height and width streams take pairs 1, 4, ... and
// 2, 5, ... below 3 x their count, which must fit in the pairs.
void read_mrope(const json& block, const std::string& base, int rotary_dim, RopeType rope_type, IoSpec& io,
                Reader& reader) {
  const json* section = member(block, "mrope_section");
  const json* interleaved = member(block, "mrope_interleaved");
  if (io.positions != PositionsForm::mrope) {
    if (section) reader.not_allowed(base + "/mrope_section", *section, "absent unless io.positions is \"mrope\"");
    if (interleaved)
      reader.not_allowed(base + "/mrope_interleaved", *interleaved, "absent unless io.positions is \"mrope\"");
    return;
  }
  if (interleaved) io.mrope_interleaved = reader.boolean(*interleaved, base + "/mrope_interleaved").value_or(false);
  // dynamic NTK and LongRoPE pick their frequencies from the sequence length, which three
  // position streams leave undefined (no released model combines them).
  if (frequencies_depend_on_run_length(rope_type))
    reader.not_allowed(base + "/positions", std::string("mrope"),
                       fmt::format("another form with rope_type {} (its frequencies depend on the sequence "
                                   "length, which three position streams do not define)",
                                   to_string(rope_type)));
  const int pairs = rotary_dim / 2;
  const std::string must = fmt::format("a list of 3 integers >= 1 (temporal, height, width pairs) summing to "
                                       "rotary_dim / 2 = {}", pairs);
  if (!section) {
    reader.add(base + "/mrope_section", "missing: io.positions \"mrope\" needs it (" + must + ")");
    return;
  }
  if (!section->is_array() || section->size() != 3) {
    reader.not_allowed(base + "/mrope_section", *section, must);
    return;
  }
  std::vector<int> counts;
  for (size_t i = 0; i < 3; ++i)
    if (auto n = reader.integer((*section)[i], fmt::format("{}/mrope_section/{}", base, i), 1, kMaxHeadDim))
      counts.push_back(static_cast<int>(*n));
  if (counts.size() != 3) return;
  if (pairs > 0 && counts[0] + counts[1] + counts[2] != pairs) {
    reader.not_allowed(base + "/mrope_section", *section, must);
    return;
  }
  // Interleaved, height takes pairs 1, 4, ..., 3h - 2 and width 2, 5, ..., 3w - 1: each must exist.
  if (io.mrope_interleaved && pairs > 0 && (3 * counts[1] - 2 > pairs - 1 || 3 * counts[2] - 1 > pairs - 1))
    reader.not_allowed(base + "/mrope_section", *section,
                       fmt::format("height count <= (rotary_dim / 2 + 1) / 3 = {} and width count <= rotary_dim / 6 "
                                   "= {} with mrope_interleaved (height takes pairs 1, 4, ..., width 2, 5, ... of the {})",
                                   (pairs + 1) / 3, pairs / 3, pairs));
  io.mrope_section = counts;
}

// The paged_kv keys: only with output paged_kv; page_size required there. block_tables finds
// a token's page from its sequence and position, which only varlen positions give.
constexpr int kMaxPageSize = 1 << 16;

// An FP8 scale mode key (q_scale, cache_scale): read from the QScale table, and only with an FP8
// element type at `type_key`. Returns the key's value, or null when absent.
const json* read_scale_mode(const json& block, const std::string& base, const char* key, CacheDType type,
                            const char* type_key, QScale& mode, Reader& reader) {
  const json* v = member(block, key);
  if (!v) return nullptr;
  mode = reader.enumeration<QScale>(*v, base + "/" + key).value_or(mode);
  if (type == CacheDType::auto_)
    reader.not_allowed(base + "/" + key, *v, fmt::format("absent unless io.{} is an FP8 type", type_key));
  return v;
}

void read_paged_kv(const json& block, const std::string& base, IoSpec& io, Reader& reader) {
  static const char* const kKeys[] = {"cache_layout", "cache_dtype", "cache_index", "page_size", "q_output",
                                      "cache_scale", "v_scale_layout"};
  if (io.output != OutputForm::paged_kv) {
    for (const char* key : kKeys)
      if (const json* v = member(block, key))
        reader.not_allowed(base + "/" + key, *v, "absent unless io.output is \"paged_kv\"");
    return;
  }
  if (const json* v = member(block, "cache_layout"))
    io.cache_layout = reader.enumeration<CacheLayout>(*v, base + "/cache_layout").value_or(io.cache_layout);
  if (const json* v = member(block, "cache_dtype"))
    io.cache_dtype = reader.enumeration<CacheDType>(*v, base + "/cache_dtype").value_or(io.cache_dtype);
  if (const json* v = member(block, "cache_index"))
    io.cache_index = reader.enumeration<CacheIndex>(*v, base + "/cache_index").value_or(io.cache_index);
  if (const json* v = read_scale_mode(block, base, "cache_scale", io.cache_dtype, "cache_dtype", io.cache_scale, reader))
    if (io.cache_scale == QScale::per_token)  // a cache's scales are per (slot, kv head) or static
      reader.not_allowed(base + "/cache_scale", *v, "\"static\" or \"per_token_head\" (per_token is q's)");
  if (const json* v = member(block, "v_scale_layout")) {
    io.v_scale_layout = reader.enumeration<BlockScaleLayout>(*v, base + "/v_scale_layout").value_or(io.v_scale_layout);
    if (io.cache_dtype != CacheDType::nvfp4)
      reader.not_allowed(base + "/v_scale_layout", *v, "absent unless io.cache_dtype is \"nvfp4\"");
  }
  if (const json* v = member(block, "q_output"))
    io.q_output = reader.enumeration<QOutput>(*v, base + "/q_output").value_or(io.q_output);
  if (const json* v = member(block, "page_size"))
    io.page_size = static_cast<int>(reader.integer(*v, base + "/page_size", 1, kMaxPageSize).value_or(0));
  else
    reader.add(base + "/page_size",
               fmt::format("missing: io.output \"paged_kv\" needs it (tokens per cache page, an integer in [1, {}])",
                           kMaxPageSize));
  if (io.cache_index == CacheIndex::block_tables && io.positions != PositionsForm::varlen)
    reader.not_allowed(base + "/positions", std::string(to_string(io.positions)),
                       "\"varlen\" when cache_index is block_tables (a token's page comes from its sequence "
                       "and position; use cache_index slot_mapping with other positions)");
}

// q_output_dtype (FP8 q for FP8 attention, scaled by the launch's q_scale): q must go to q_out
// (a separate or padded output, or paged_kv / mla_append with q_output separate), of an op that
// takes it (OpQuantForms::fp8_q_out).
void read_q_quantization(const json& block, const std::string& base, OpKind op, IoSpec& io, Reader& reader) {
  if (const json* v = member(block, "q_output_dtype"))
    io.q_output_dtype = reader.enumeration<CacheDType>(*v, base + "/q_output_dtype").value_or(io.q_output_dtype);
  if (const json* v = read_scale_mode(block, base, "q_scale", io.q_output_dtype, "q_output_dtype", io.q_scale, reader)) {
    if (io.q_output_dtype != CacheDType::auto_ && io.q_scale != QScale::static_ && !op_facts(op).quant.computed_q_scale)
      reader.not_allowed(base + "/q_scale", *v,
                         fmt::format("\"static\" when op is {} (computed scales: {} so far)", to_string(op),
                                     ops_taking(&OpQuantForms::computed_q_scale)));
  }
  if (io.q_output_dtype == CacheDType::auto_) return;
  if (io.q_output_dtype == CacheDType::nvfp4) {
    reader.not_allowed(base + "/q_output_dtype", "nvfp4", "auto, fp8_e4m3 or fp8_e5m2 (NVFP4 is a cache format)");
    return;
  }
  const bool q_out = io.output == OutputForm::separate || io.output == OutputForm::padded_bhsd ||
                     (io.output == OutputForm::paged_kv && io.q_output == QOutput::separate);
  if (!op_facts(op).quant.fp8_q_out)
    reader.not_allowed(base + "/q_output_dtype", std::string(to_string(io.q_output_dtype)),
                       fmt::format("\"auto\" when op is {} (q is rewritten in place in its dtype)", to_string(op)));
  else if (!q_out)
    reader.not_allowed(base + "/q_output_dtype", std::string(to_string(io.q_output_dtype)),
                       "\"auto\" unless q goes to q_out (io.output separate or padded_bhsd, or q_output "
                       "separate): FP8 q cannot overwrite q in place");
}

// io.angles and io.cos_sin_dtype: the caller's cos_sin_cache serves every angle of a position (mrope:
// each pair reads its own stream's row), for the ops whose launches take it (OpFacts::caller_cos_sin).
void read_angles(const json& block, const std::string& base, OpKind op, IoSpec& io, Reader& reader) {
  const json* angles = member(block, "angles");
  if (angles) io.angles = reader.enumeration<AnglesSource>(*angles, base + "/angles").value_or(io.angles);
  const json* dtype = member(block, "cos_sin_dtype");
  if (dtype) io.cos_sin_dtype = reader.enumeration<DType>(*dtype, base + "/cos_sin_dtype").value_or(io.cos_sin_dtype);
  if (io.angles != AnglesSource::cos_sin_cache) {
    if (dtype) reader.not_allowed(base + "/cos_sin_dtype", *dtype, "absent unless io.angles is \"cos_sin_cache\"");
    return;
  }
  if (!op_facts(op).caller_cos_sin)
    reader.not_allowed(base + "/angles", *angles,
                       fmt::format("\"computed\" when op is {} (a caller's cos_sin_cache: {} so far)", to_string(op),
                                   ops_taking(&OpFacts::caller_cos_sin)));
}

}  // namespace

// qk_norm: {"type": "rmsnorm" | "layernorm", "eps": 1e-6, "weight": "per_head" | "none",
// "bias": "none" | "per_head" (layernorm), "weight_offset": 0, "scope": "head" | "all",
// "heads": "q_and_k" | "k"}.
QkNorm read_qk_norm(const json& block, Reader& reader) {
  const std::string base = "/qk_norm";
  QkNorm norm;
  if (!block.is_object()) {
    reader.not_allowed(base, block, "an object such as {\"type\": \"rmsnorm\", \"eps\": 1e-6}");
    return norm;
  }
  static const std::vector<std::string_view> keys{"type", "eps", "weight", "bias", "weight_offset", "scope", "heads"};
  reader.check_keys(block, base, keys);
  norm.enabled = true;
  const json* type = member(block, "type");
  if (!type) reader.add(base + "/type", "missing required key \"type\" (\"rmsnorm\" or \"layernorm\")");
  else norm.type = reader.enumeration<NormType>(*type, base + "/type").value_or(norm.type);
  if (const json* v = member(block, "scope"))
    norm.scope = reader.enumeration<NormScope>(*v, base + "/scope").value_or(norm.scope);
  if (const json* v = member(block, "heads"))
    norm.heads = reader.enumeration<NormHeads>(*v, base + "/heads").value_or(norm.heads);
  if (const json* v = member(block, "eps")) norm.eps = reader.number(*v, base + "/eps", 0, true, 1.0).value_or(norm.eps);
  if (const json* v = member(block, "weight"))
    norm.weight = reader.enumeration<NormWeight>(*v, base + "/weight").value_or(norm.weight);
  if (const json* v = member(block, "bias")) {
    norm.bias = reader.enumeration<NormWeight>(*v, base + "/bias").value_or(norm.bias);
    if (norm.bias == NormWeight::per_head && norm.type != NormType::layernorm)
      reader.not_allowed(base + "/bias", *v, "\"none\" unless type is \"layernorm\" (an RMSNorm has no bias)");
  }
  if (const json* v = member(block, "weight_offset")) {
    norm.weight_offset = reader.number(*v, base + "/weight_offset", -16.0, false, 16.0).value_or(0.0);
    if (norm.weight == NormWeight::none && norm.weight_offset != 0.0)
      reader.not_allowed(base + "/weight_offset", *v, "0 when weight is \"none\" (there is no weight to offset)");
  }
  // The all-heads kernel (qk_norm_all.cuh) sums squares over a row's q heads and its k heads: no mean, both roles.
  if (norm.scope == NormScope::all && norm.type == NormType::layernorm)
    reader.not_allowed(base + "/scope", std::string("all"), "\"head\" with type \"layernorm\"");
  if (norm.scope == NormScope::all && norm.heads == NormHeads::k)
    reader.not_allowed(base + "/heads", std::string("k"), "\"q_and_k\" with scope \"all\"");
  return norm;
}

IoSpec read_io(const json* block, Reader& reader, int rotary_dim, RopeType rope_type, OpKind op) {
  const std::string base = "/io";
  IoSpec io;
  if (!block) return io;
  if (!block->is_object()) {
    reader.not_allowed(base, *block, "an object");
    return io;
  }
  reader.check_keys(*block, base, spec_io_keys());
  if (const json* v = member(*block, "input"))
    io.input = reader.enumeration<InputForm>(*v, base + "/input").value_or(io.input);
  if (const json* v = member(*block, "output"))
    io.output = reader.enumeration<OutputForm>(*v, base + "/output").value_or(io.output);
  if (const json* v = member(*block, "qkv_bias"))
    io.qkv_bias = reader.boolean(*v, base + "/qkv_bias").value_or(io.qkv_bias);
  if (const json* v = member(*block, "positions"))
    io.positions = reader.enumeration<PositionsForm>(*v, base + "/positions").value_or(io.positions);
  const bool reads_v = op_facts(op).heads == OpHeads::qkv;  // the op's kernel reads q, k and v
  io.copy_v = reads_v && io_requires_copy_v(io);
  if (const json* v = member(*block, "copy_v")) {
    auto copy_v = reader.boolean(*v, base + "/copy_v");
    if (copy_v && *copy_v && !reads_v)
      reader.not_allowed(base + "/copy_v", *v,
                         fmt::format("false when op is {} (its kernel reads no v; v is untouched)", to_string(op)));
    else if (copy_v && !*copy_v && io.copy_v && io.output != OutputForm::paged_kv)  // paged: K = V, no V cache
      reader.not_allowed(base + "/copy_v", *v,
                         io.output != OutputForm::inplace
                             ? "true when input is packed_qkv and output is not inplace"
                             : "true when input is packed_qkv with qkv_bias (v gets its bias)");
    else if (copy_v)
      io.copy_v = *copy_v;
  }
  if (io.output == OutputForm::padded_bhsd && io.positions != PositionsForm::varlen)
    reader.not_allowed(base + "/positions", std::string(to_string(io.positions)),
                       "\"varlen\" when output is padded_bhsd");
  read_mrope(*block, base, rotary_dim, rope_type, io, reader);
  read_paged_kv(*block, base, io, reader);
  read_q_quantization(*block, base, op, io, reader);
  if (const json* v = member(*block, "scale_rounding"))  // checked against the scales in spec_validate.cpp
    io.scale_rounding = reader.enumeration<ScaleRounding>(*v, base + "/scale_rounding").value_or(io.scale_rounding);
  read_angles(*block, base, op, io, reader);
  return io;
}

namespace {

// A value the kernel bakes as a float literal: finite and > 0 once rounded to float32.
bool bad_float32(double v) {
  const float f = static_cast<float>(v);
  return !std::isfinite(v) || !std::isfinite(f) || f <= 0.0f;
}

// The first of the leading `rotated` pairs whose inv_freq is no finite float32 > 0, or -1. The
// pairs past them (proportional's) must hold an exact 0: the kernel leaves those as they are.
int first_bad_pair(const std::vector<double>& inv_freq, int rotated) {
  for (size_t i = 0; i < inv_freq.size(); ++i)
    if (static_cast<int>(i) < rotated ? bad_float32(inv_freq[i]) : inv_freq[i] != 0.0) return static_cast<int>(i);
  return -1;
}

}  // namespace

// Every value the generator bakes must be a finite, non-zero float32: parameters that pass
// one by one can still combine into NaN, zero or infinite values (yarn with rope_theta 1
// divides by log(1); rope_theta 1e-320 rounds to a float32 0), which would emit a kernel that
// does not compile or computes garbage. Each problem names the field that causes it.
namespace {

// check_derived_frequencies of the rope block at `base` ("/rope" or "/rerotate/from").
void check_rope_frequencies(const Spec& spec, const std::string& base, Reader& reader) {
  FreqTable table, unscaled;
  Spec default_rope = spec;  // the base alone: tells a bad rope_theta from a bad scaling
  default_rope.rope = RopeParams{};
  default_rope.rope.theta = spec.rope.theta;
  try {
    table = compute_freqs(spec, FreqMode::hf_fp32);
    unscaled = compute_freqs(default_rope, FreqMode::hf_fp32);
  } catch (const std::exception& e) {
    reader.add(base, fmt::format("the frequencies of this rope block cannot be computed: {}", e.what()));
    return;
  }
  const std::string finite = table.rotated_pairs < spec.rotary_dim / 2
                                 ? fmt::format("inv_freq[0, {}) finite float32s > 0", table.rotated_pairs)
                                 : std::string("every inv_freq a finite float32 > 0");
  const RopeParams& rope = spec.rope;
  unscaled.inv_freq.resize(static_cast<size_t>(table.rotated_pairs));  // the pairs the rope block keeps
  const AxesSpec& axes = spec.io.axes;
  if (int i = first_bad_pair(table.inv_freq, table.rotated_pairs);
      i >= 0 && spec.io.positions == PositionsForm::axes && axes.frequencies == AxisFrequencies::own) {
    const PairAxis at = pair_axis(axes, i);  // the axis whose own base gives the value
    reader.not_allowed(fmt::format("/io/axes/theta/{}", at.axis), axes.theta.at(at.axis),
                       fmt::format("a base giving {} (axis {}'s inv_freq[{}] = 1 / theta^({}/{}) = {})", finite,
                                   at.axis, at.index, 2 * at.index, 2 * axes.pairs.at(at.axis), table.inv_freq[i]));
  } else if (int i = first_bad_pair(unscaled.inv_freq, table.rotated_pairs); i >= 0) {
    reader.not_allowed(base + "/rope_theta", rope.theta,
                       fmt::format("a base giving {} (inv_freq[{}] = 1 / rope_theta^({}/{}) = {})", finite, i, 2 * i,
                                   spec.rotary_dim, unscaled.inv_freq[i]));
  } else if (rope.type == RopeType::longrope) {
    for (const char* key : {"short_factor", "long_factor"}) {
      const bool is_short = key == std::string_view("short_factor");
      const std::vector<double>& values = is_short ? table.inv_freq : table.inv_freq_long;
      if (int i = first_bad_pair(values, table.rotated_pairs); i >= 0) {
        reader.not_allowed(fmt::format("{}/{}/{}", base, key, i), (is_short ? rope.short_factor : rope.long_factor).at(i),
                           fmt::format("a factor keeping {} (it gives inv_freq[{}] = {})", finite, i, values[i]));
        break;
      }
    }
  } else if (int i = first_bad_pair(table.inv_freq, table.rotated_pairs); i >= 0) {
    // The one parameter that scales a base that is fine alone; else the combination is named.
    const std::string gives = fmt::format("it gives inv_freq[{}] = {}", i, table.inv_freq[i]);
    if ((rope.type == RopeType::linear || rope.type == RopeType::llama3 || rope.type == RopeType::proportional) &&
        rope.factor)
      reader.not_allowed(base + "/factor", *rope.factor, fmt::format("a factor keeping {} ({})", finite, gives));
    else if (rope.type == RopeType::ntk && rope.alpha)
      reader.not_allowed(base + "/alpha", *rope.alpha, fmt::format("an alpha keeping {} ({})", finite, gives));
    else
      reader.add(base, fmt::format("this rope block (rope_type {}, rope_theta {}) is not allowed: {}; every inv_freq "
                                      "must be a finite float32 > 0", to_string(rope.type), rope.theta, gives));
  }
  const std::string baked = "a finite float32 > 0 (at most 3.4e38: the kernel bakes it as a float)";
  if (bad_float32(table.attention_factor)) {
    if (rope.attention_factor)
      reader.not_allowed(base + "/attention_factor", *rope.attention_factor, baked);
    else
      reader.add(base, fmt::format("this rope block (rope_type {}) is not allowed: it gives the attention factor "
                                      "{}, which must be {}", to_string(rope.type), table.attention_factor, baked));
  }
}

}  // namespace

void check_derived_frequencies(const Spec& spec, Reader& reader) {
  check_rope_frequencies(spec, "/rope", reader);
  if (written_rope(spec)) check_rope_frequencies(from_rope_spec(spec), spec_op(spec.op).from_pointer, reader);
  if (spec.qk_norm.enabled && bad_float32(spec.qk_norm.eps))
    reader.not_allowed("/qk_norm/eps", spec.qk_norm.eps,
                       "a number >= 1.4e-45 (the smallest float32 > 0: the kernel bakes it as a float)");
}

}  // namespace ropejit::spec_detail
