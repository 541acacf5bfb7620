// Spec validation: JSON document -> canonical Spec, collecting every problem at once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/core.h>

#include "ropejit/freqs.h"
#include "ropejit/json_limits.h"
#include "spec_ops.h"
#include "spec_reader.h"

namespace ropejit {

using nlohmann::json;
using namespace spec_detail;

namespace {

constexpr ParamKind kind_of(double RopeParams::*) { return ParamKind::number; }
constexpr ParamKind kind_of(std::optional<double> RopeParams::*) { return ParamKind::number; }
constexpr ParamKind kind_of(std::optional<int64_t> RopeParams::*) { return ParamKind::integer; }
constexpr ParamKind kind_of(std::optional<bool> RopeParams::*) { return ParamKind::boolean; }
constexpr ParamKind kind_of(std::vector<double> RopeParams::*) { return ParamKind::number_list; }

// One row; the kind comes from the member's type, so the two cannot disagree.
template <class Member>
RopeParamRule param(std::string_view key, Member RopeParams::*field, double min, bool exclusive,
                    RopeTypeSet required, RopeTypeSet optional, std::string_view doc,
                    json fallback = nullptr, RopeTypeSet fallback_max_positions = {}) {
  return {key,      field,    kind_of(field),      min, exclusive, std::nullopt, required, optional,
          fallback, fallback_max_positions, doc};
}

// The same row with an upper bound (inclusive) on its number.
RopeParamRule at_most(RopeParamRule rule, double max) {
  rule.max = max;
  return rule;
}

}  // namespace

const std::vector<RopeParamRule>& rope_param_rules() {
  using R = RopeType;
  using P = RopeParams;
  // key, member, min, exclusive, required by, optional for, doc [, default, absent = M for]
  static const std::vector<RopeParamRule> rules{
      param("rope_theta", &P::theta, 0, true, RopeTypeSet::all(), {},
            "base b of inv_freq = 1 / b^(2i/d)"),
      // proportional: HF reads it (default 1) though its validator lists no factor key.
      param("factor", &P::factor, 1, false, {R::linear, R::dynamic, R::yarn, R::llama3},
            {R::longrope, R::proportional}, "scaling factor f (context extension ratio)"),
      // Required by HF for yarn too, but HF fills a missing one from M.
      param("original_max_position_embeddings", &P::original_max_position_embeddings, 1, false,
            {R::longrope, R::llama3}, {R::yarn}, "pre-training context length O", nullptr,
            {R::yarn}),
      param("low_freq_factor", &P::low_freq_factor, 0, true, {R::llama3}, {},
            "llama3: low-frequency wavelength factor"),
      param("high_freq_factor", &P::high_freq_factor, 0, true, {R::llama3}, {},
            "llama3: high-frequency wavelength factor"),
      param("beta_fast", &P::beta_fast, 0, true, {}, {R::yarn},
            "yarn: fast correction bound (default 32)", 32.0),
      param("beta_slow", &P::beta_slow, 0, true, {}, {R::yarn},
            "yarn: slow correction bound (default 1)", 1.0),
      param("mscale", &P::mscale, 0, false, {}, {R::yarn},
            "yarn: attention-factor coefficient (DeepSeek)"),
      param("mscale_all_dim", &P::mscale_all_dim, 0, false, {}, {R::yarn},
            "yarn: attention-factor divisor coefficient"),
      param("attention_factor", &P::attention_factor, 0, true, {}, {R::yarn, R::longrope},
            "explicit attention factor s"),
      param("truncate", &P::truncate, 0, false, {}, {R::yarn},
            "yarn: round the correction range (default true)", true),
      param("alpha", &P::alpha, 1, false, {R::ntk}, {}, "ntk: static NTK-aware scale alpha"),
      param("seq_len", &P::seq_len, 1, false, {}, {R::dynamic},
            "dynamic: fixed length L (vLLM behaviour)"),
      param("short_factor", &P::short_factor, 0, true, {R::longrope}, {},
            "longrope: rotary_dim/2 short factors"),
      param("long_factor", &P::long_factor, 0, true, {R::longrope}, {},
            "longrope: rotary_dim/2 long factors"),
      // PhiMoE's forward multiplies cos/sin by these instead of the attention factor.
      param("short_mscale", &P::short_mscale, 0, true, {}, {R::longrope},
            "longrope: attention factor s while the short table applies (PhiMoE)"),
      param("long_mscale", &P::long_mscale, 0, true, {}, {R::longrope},
            "longrope: attention factor s while the long table applies (PhiMoE)"),
      at_most(param("partial_rotary_factor", &P::partial_rotary_factor, 0, true, {}, {R::proportional},
                    "proportional: share of the head_dim/2 pairs given a frequency (default 1)", 1.0),
              1.0),
  };
  return rules;
}

const RopeParamRule* find_rope_param(std::string_view key) {
  for (const auto& rule : rope_param_rules())
    if (rule.key == key) return &rule;
  return nullptr;
}

json rope_param_value(const RopeParams& rope, const RopeParamRule& rule) {
  return std::visit(
      [&](auto member) -> json {
        const auto& value = rope.*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, double> ||
                      std::is_same_v<std::decay_t<decltype(value)>, std::vector<double>>)
          return value;  // always set
        else
          return value ? json(*value) : json(nullptr);
      },
      rule.field);
}

const RopeTypeParams& rope_type_params(RopeType type) {
  static const std::vector<RopeTypeParams> table = [] {
    std::vector<RopeTypeParams> out;
    for (const auto& row : enum_table<RopeType>()) {
      RopeTypeParams params{row.value, {}, {}};
      for (const auto& rule : rope_param_rules()) {
        if (rule.required.has(row.value)) params.required.push_back(rule.key);
        else if (rule.optional.has(row.value)) params.optional.push_back(rule.key);
      }
      out.push_back(std::move(params));
    }
    return out;
  }();
  for (const auto& row : table)
    if (row.type == type) return row;
  return table.front();
}

const std::vector<std::string_view>& spec_top_level_keys() {
  static const std::vector<std::string_view> keys{
      "name",   "head_dim", "rotary_dim", "partial_rotary_factor", "num_q_heads", "num_kv_heads",
      "layout", "dtype",    "max_position_embeddings", "angle",    "rope",        "io", "qk_norm",
      "op",     "rotary_slice", "inverse", "hadamard"};
  static const std::vector<std::string_view> with_ops = [] {
    std::vector<std::string_view> all = keys;
    for (std::string_view key : op_block_keys()) all.push_back(key);
    return all;
  }();
  return with_ops;
}

const std::vector<std::string_view>& spec_required_keys() {
  static const std::vector<std::string_view> keys{
      "name", "head_dim", "num_q_heads", "num_kv_heads", "layout", "dtype",
      "max_position_embeddings", "rope"};
  return keys;
}

const std::vector<std::string_view>& spec_io_keys() {
  static const std::vector<std::string_view> keys{"input",        "output",       "qkv_bias",    "copy_v",
                                                  "positions",    "mrope_section", "mrope_interleaved", "axes",
                                                  "cache_layout", "cache_dtype",  "cache_index", "page_size",
                                                  "q_output",     "q_output_dtype", "q_scale", "cache_scale",
                                                  "v_scale_layout", "angles",     "cos_sin_dtype", "scale_rounding"};
  return keys;
}

bool io_requires_copy_v(const IoSpec& io) {
  if (io.output == OutputForm::paged_kv) return true;  // v goes into the V cache (unless K = V: copy_v false)
  return io.input == InputForm::packed_qkv && (io.output != OutputForm::inplace || io.qkv_bias);
}

namespace {


// Stores one rope parameter value into the RopeParams member its row names.
void store(RopeParams& rope, const RopeParamRule& rule, const json& value, Reader& reader,
           const std::string& pointer) {
  std::visit(
      [&](auto member) {
        using Field = std::remove_reference_t<decltype(rope.*member)>;
        if constexpr (std::is_same_v<Field, std::optional<int64_t>>) {
          if (auto i = reader.integer(value, pointer, static_cast<int64_t>(rule.min), kMaxPositions))
            rope.*member = *i;
        } else if constexpr (std::is_same_v<Field, std::optional<bool>>) {
          if (auto b = reader.boolean(value, pointer)) rope.*member = *b;
        } else if constexpr (std::is_same_v<Field, std::vector<double>>) {
          if (auto list = reader.number_list(value, pointer, rule.min, rule.min_exclusive))
            rope.*member = *list;
        } else {  // double, std::optional<double>
          if (auto d = reader.number(value, pointer, rule.min, rule.min_exclusive, rule.max)) rope.*member = *d;
        }
      },
      rule.field);
}

}  // namespace

RopeParams spec_detail::read_rope(const json& block, Reader& reader, int rotary_dim, int64_t max_positions,
                                  const std::string& base) {
  RopeParams rope;
  if (!block.is_object()) {
    reader.not_allowed(base, block, "an object");
    return rope;
  }
  std::optional<RopeType> type;
  if (const json* t = member(block, "rope_type"))
    type = reader.enumeration<RopeType>(*t, base + "/rope_type");
  else
    reader.add(base + "/rope_type", "missing required key \"rope_type\"");
  if (type) rope.type = *type;

  std::vector<std::string_view> all_keys{"rope_type"};
  for (const auto& rule : rope_param_rules()) all_keys.push_back(rule.key);
  const RopeTypeParams& params = rope_type_params(rope.type);
  std::vector<std::string_view> type_keys{"rope_type"};
  for (auto k : params.required) type_keys.push_back(k);
  for (auto k : params.optional) type_keys.push_back(k);

  for (const auto& item : block.items()) {
    const std::string& key = item.key();
    const std::string pointer = base + "/" + key;
    if (key == "rope_type") continue;
    const RopeParamRule* rule = find_rope_param(key);
    if (!rule) {
      // Prefer suggesting a parameter of this rope type, then any rope parameter.
      std::string suggestion = type ? nearest_key(key, type_keys) : std::string();
      if (suggestion.empty()) suggestion = nearest_key(key, all_keys);
      if (!suggestion.empty())
        reader.add(pointer, fmt::format("unknown key; did you mean \"{}\"?", suggestion));
      else
        reader.unknown_key(pointer, key, type ? type_keys : all_keys);
      continue;
    }
    if (type && !rule->applies(*type)) {
      reader.add(pointer, fmt::format("does not apply to rope_type \"{}\"; its keys are: {}",
                                      to_string(*type), join_keys(type_keys)));
      continue;
    }
    store(rope, *rule, item.value(), reader, pointer);
  }
  // A key every type requires is missing whatever the type; the others only for a known type.
  for (const auto& rule : rope_param_rules()) {
    if (!rule.required.has(rope.type) || member(block, rule.key)) continue;
    const std::string pointer = base + "/" + std::string(rule.key);
    if (rule.required == RopeTypeSet::all())
      reader.add(pointer, fmt::format("missing required key \"{}\"", rule.key));
    else if (type)
      reader.add(pointer, fmt::format("missing required key \"{}\" for rope_type \"{}\"",
                                      rule.key, to_string(*type)));
  }
  if (!type) return rope;

  // Defaults of unset parameters (an invalid value leaves its member unset too).
  for (const auto& rule : rope_param_rules()) {
    if (!rule.applies(rope.type) || !rope_param_value(rope, rule).is_null()) continue;
    const std::string pointer = base + "/" + std::string(rule.key);
    if (rule.fallback_max_positions.has(rope.type)) {
      if (max_positions > 0) store(rope, rule, max_positions, reader, pointer);  // HF: O = M
    } else if (!rule.fallback.is_null()) {
      store(rope, rule, rule.fallback, reader, pointer);
    }
  }

  switch (rope.type) {
    case RopeType::yarn:
      if (*rope.beta_fast < *rope.beta_slow) {
        if (const json* fast = member(block, "beta_fast"))
          reader.not_allowed(base + "/beta_fast", *fast,
                             fmt::format("a number >= beta_slow ({})", *rope.beta_slow));
        else
          reader.not_allowed(base + "/beta_slow", *member(block, "beta_slow"),
                             fmt::format("a number <= beta_fast ({})", *rope.beta_fast));
      }
      break;
    case RopeType::llama3:
      // Equal factors (Llama 4) leave the smooth band empty; below them the bands overlap.
      if (rope.low_freq_factor && rope.high_freq_factor &&
          *rope.high_freq_factor < *rope.low_freq_factor)
        reader.not_allowed(base + "/high_freq_factor", *member(block, "high_freq_factor"),
                           fmt::format("a number > low_freq_factor ({}), or equal to it (no "
                                       "smooth band)", *rope.low_freq_factor));
      // original_max_position_embeddings >= max_position_embeddings is accepted, as by HF (which
      // only warns, as the HF import does): the llama3 table depends on O alone.
      break;
    case RopeType::proportional:
      rope.factor = rope.factor.value_or(1.0);  // HF's default, written so equal blocks hash alike
      // HF: rope_angles = int(partial_rotary_factor * head_dim // 2) pairs keep a frequency.
      if (const json* fraction = member(block, "partial_rotary_factor");
          fraction && rotary_dim > 0 && rope.partial_rotary_factor &&
          proportional_rope_angles(*rope.partial_rotary_factor, rotary_dim) < 1)
        reader.not_allowed(base + "/partial_rotary_factor", *fraction,
                           fmt::format("a fraction giving at least one rotated pair (floor({} * {} / 2) "
                                       ">= 1)", *rope.partial_rotary_factor, rotary_dim));
      break;
    case RopeType::longrope:
      if (rotary_dim > 0)
        for (std::string_view key : {"short_factor", "long_factor"}) {
          const json* list = member(block, key);
          if (list && list->is_array() && static_cast<int>(list->size()) != rotary_dim / 2)
            reader.not_allowed(base + "/" + std::string(key), *list,
                               fmt::format("a list of {} numbers > 0 (rotary_dim / 2)",
                                           rotary_dim / 2));
        }
      break;
    default:
      break;
  }
  return rope;
}

namespace {

// proportional pairs element i with i + head_dim/2 across the whole head (HF's rotate_half of a
// full-width cos/sin whose last pairs have frequency 0), so its rotary_dim is head_dim; the
// rotated share is the rope block's own partial_rotary_factor.
void check_proportional_rotary(const json& document, Reader& reader, const Spec& spec) {
  const bool proportional = spec.rope.type == RopeType::proportional ||
                            (written_rope(spec) && written_rope(spec)->type == RopeType::proportional);
  if (!proportional || spec.head_dim <= 0 || spec.rotary_dim <= 0 || spec.rotary_dim == spec.head_dim) return;
  const std::string why = "with rope_type proportional (its pairs (i, i + head_dim/2) span the whole head; "
                          "rotate a share of them with rope.partial_rotary_factor)";
  if (const json* rotary = member(document, "rotary_dim"))
    reader.not_allowed("/rotary_dim", *rotary, fmt::format("{} (head_dim) {}", spec.head_dim, why));
  else if (const json* fraction = member(document, "partial_rotary_factor"))
    reader.not_allowed("/partial_rotary_factor", *fraction, "absent or 1 " + why);
}

// A Hadamard transform of q and k heads (op rope): a power-of-2 head whose vectors fit one warp's
// lanes at the widest access (16 bytes), in the per-head kernel (not the all-heads one).
void check_hadamard(Reader& reader, const Spec& spec) {
  const int widest = 16 / dtype_size(spec.dtype), most = 32 * widest;  // a warp of 16-byte vectors
  const bool power_of_two = spec.head_dim > 0 && (spec.head_dim & (spec.head_dim - 1)) == 0;
  if (!op_facts(spec.op).hadamard_key)
    reader.not_allowed("/hadamard", json(true),
                       fmt::format("false when op is {} (a Hadamard transform: {})", to_string(spec.op),
                                   ops_taking(&OpFacts::hadamard_key)));
  else if (!power_of_two || spec.head_dim > most)
    reader.not_allowed("/hadamard", json(true),
                       fmt::format("false with head_dim {} (a Hadamard transform needs a power of 2 of at most {} "
                                   "{} values: a head's vectors within one warp)",
                                   spec.head_dim, most, to_string(spec.dtype)));
  else if (all_heads_segment(spec))
    reader.not_allowed("/hadamard", json(true),
                       "false with qk_norm scope \"all\" or io.q_scale \"per_token\" (their kernel walks a "
                       "token's heads in lane slots: no head is whole in one warp segment)");
}

// With io.angles cos_sin_cache the caller's cache holds the scaled cos/sin (attention factor
// included): these are the only fields of the rope block it allows, each with its one value; any
// other rope field or the top-level angle would be ignored, so it is refused by name.
constexpr std::pair<std::string_view, std::string_view> kCallerAnglesRope[] = {{"rope_type", "default"}};
constexpr const char* kCallerAnglesWhy =
    "with io.angles cos_sin_cache (the caller's cache already holds the scaled cos and sin, attention factor "
    "included: it would be ignored)";

bool caller_angles(const json& document) {
  const json* io = member(document, "io");
  const json* angles = io && io->is_object() ? member(*io, "angles") : nullptr;
  return angles && *angles == to_string(AnglesSource::cos_sin_cache);
}

void check_caller_angles_rope(const json& document, Reader& reader) {
  if (const json* angle = member(document, "angle"))
    reader.not_allowed("/angle", *angle, std::string("absent ") + kCallerAnglesWhy);
  const json* block = member(document, "rope");
  if (!block) return;  // reported as missing
  if (!block->is_object()) {
    reader.not_allowed("/rope", *block, "an object");
    return;
  }
  std::string allowed;
  for (const auto& [key, value] : kCallerAnglesRope)
    allowed += fmt::format("{}{}: \"{}\"", allowed.empty() ? "" : ", ", key, value);
  for (const auto& item : block->items()) {
    const auto* row = std::find_if(std::begin(kCallerAnglesRope), std::end(kCallerAnglesRope),
                                   [&](const auto& r) { return r.first == item.key(); });
    if (row == std::end(kCallerAnglesRope))
      reader.not_allowed("/rope/" + item.key(), item.value(),
                         fmt::format("absent {} (the rope block takes only {})", kCallerAnglesWhy, allowed));
    else if (item.value() != row->second)
      reader.not_allowed("/rope/" + item.key(), item.value(), fmt::format("\"{}\" {}", row->second, kCallerAnglesWhy));
  }
  for (const auto& [key, value] : kCallerAnglesRope)
    if (!member(*block, key)) reader.add("/rope/" + std::string(key), fmt::format("missing required key \"{}\"", key));
}

}  // namespace

Spec spec_from_json(const json& document, std::vector<SpecIssue>& issues) {
  // Every issue is listed at once; 4096.0 reads as 4096 (tools that print every number as a float).
  Reader reader([&](const std::string& pointer, const std::string& message) { issues.push_back({pointer, message}); });
  reader.accept_integral_floats();
  Spec spec;
  if (!document.is_object()) {
    reader.not_allowed("", document, "an object (a spec)");
    return spec;
  }
  reader.check_keys(document, "", spec_top_level_keys());
  for (auto key : spec_required_keys())
    if (!member(document, key))
      reader.add("/" + std::string(key), fmt::format("missing required key \"{}\"", key));
  auto required = [&](std::string_view key) { return member(document, key); };

  if (const json* v = required("name")) {
    if (v->is_string() && !v->get_ref<const std::string&>().empty())
      spec.name = v->get<std::string>();
    else
      reader.not_allowed("/name", *v, "a non-empty string");
  }
  if (const json* v = member(document, "op")) spec.op = reader.enumeration<OpKind>(*v, "/op").value_or(spec.op);
  const json* head_dim_json = required("head_dim");
  if (head_dim_json)
    spec.head_dim = static_cast<int>(reader.integer(*head_dim_json, "/head_dim", 1, kMaxHeadDim).value_or(0));

  // rotary_dim: explicit, or floor(head_dim * partial_rotary_factor), or head_dim.
  const int max_rotary = spec.head_dim > 0 ? spec.head_dim : kMaxHeadDim;
  const std::string rotary_must =
      fmt::format("an even integer in [2, {}]{}", max_rotary, spec.head_dim > 0 ? " (head_dim)" : "");
  int64_t rotary_dim = 0;  // 0: not given, or invalid (reported)
  if (const json* v = member(document, "rotary_dim")) {
    rotary_dim = reader.integer(*v, "/rotary_dim", 2, max_rotary, rotary_must).value_or(0);
    if (rotary_dim % 2 != 0) {
      reader.not_allowed("/rotary_dim", *v, rotary_must);
      rotary_dim = 0;
    }
  }
  if (const json* v = member(document, "partial_rotary_factor")) {
    auto fraction = reader.number(*v, "/partial_rotary_factor", 0, true, 1.0);
    if (fraction && spec.head_dim > 0) {
      // Python int(D * f): the same double product HF forms.
      const auto derived = static_cast<int64_t>(std::floor(spec.head_dim * *fraction));
      const json* explicit_dim = member(document, "rotary_dim");
      // A fraction that gives no usable rotary_dim is its own problem, whatever rotary_dim says.
      if (derived < 2 || derived % 2 != 0)
        reader.not_allowed("/partial_rotary_factor", *v,
                           fmt::format("a fraction giving an even rotary_dim >= 2 (floor({} * {}) "
                                       "= {})", spec.head_dim, *fraction, derived));
      else if (explicit_dim && rotary_dim && rotary_dim != derived)
        reader.not_allowed("/rotary_dim", *explicit_dim,
                           fmt::format("{} = floor(head_dim * partial_rotary_factor) when both "
                                       "are given", derived));
      else if (!explicit_dim)
        rotary_dim = derived;
    }
  }
  if (!rotary_dim && !member(document, "rotary_dim") && !member(document, "partial_rotary_factor")) {
    // Full rotation by default: the head itself must then hold whole pairs.
    if (spec.head_dim % 2 != 0 && head_dim_json)
      reader.not_allowed("/head_dim", *head_dim_json,
                         "an even integer when rotary_dim and partial_rotary_factor are absent "
                         "(the whole head rotates in pairs)");
    else
      rotary_dim = spec.head_dim;
  }
  spec.rotary_dim = static_cast<int>(rotary_dim);

  if (const json* v = required("num_q_heads"))
    spec.num_q_heads = static_cast<int>(reader.integer(*v, "/num_q_heads", 1, kMaxHeads).value_or(0));
  if (const json* v = required("num_kv_heads")) {
    spec.num_kv_heads =
        static_cast<int>(reader.integer(*v, "/num_kv_heads", 1, kMaxHeads).value_or(0));
    if (spec.num_kv_heads > 0 && spec.num_q_heads > 0 && spec.num_q_heads % spec.num_kv_heads != 0)
      reader.not_allowed("/num_kv_heads", *v,
                         fmt::format("a divisor of num_q_heads ({})", spec.num_q_heads));
  }
  if (const json* v = required("layout"))
    spec.layout = reader.enumeration<Layout>(*v, "/layout").value_or(spec.layout);
  // Interleaved pairs are read as vectors of >= 2 elements from each head's start, which an
  // odd head_dim leaves misaligned in every other head.
  if (spec.layout == Layout::interleaved && spec.head_dim % 2 != 0 && head_dim_json)
    reader.not_allowed("/head_dim", *head_dim_json, "an even integer with layout interleaved");
  if (const json* v = member(document, "rotary_slice"))
    spec.rotary_slice = reader.enumeration<RotarySlice>(*v, "/rotary_slice").value_or(spec.rotary_slice);
  if (const json* v = member(document, "inverse"))
    if (const auto inverse = reader.boolean(*v, "/inverse")) spec.inverse = *inverse;
  if (const json* v = member(document, "hadamard"))
    if (const auto hadamard = reader.boolean(*v, "/hadamard")) spec.hadamard = *hadamard;
  if (const json* v = required("dtype"))
    spec.dtype = reader.enumeration<DType>(*v, "/dtype").value_or(spec.dtype);
  if (const json* v = required("max_position_embeddings"))
    spec.max_position_embeddings =
        reader.integer(*v, "/max_position_embeddings", 1, kMaxPositions).value_or(0);
  if (const json* v = member(document, "angle"))
    spec.angle = reader.enumeration<AnglePrecision>(*v, "/angle").value_or(spec.angle);
  if (caller_angles(document))
    check_caller_angles_rope(document, reader);  // spec.rope stays the default block
  else if (const json* v = required("rope"))
    spec.rope = read_rope(*v, reader, spec.rotary_dim, spec.max_position_embeddings, "/rope");
  spec.io = read_io(member(document, "io"), reader, spec.rotary_dim, spec.rope.type, spec.op);
  read_axes(member(document, "io"), reader, spec);
  if (const json* v = member(document, "qk_norm")) spec.qk_norm = read_qk_norm(*v, reader);
  const bool all_norm = spec.qk_norm.enabled && spec.qk_norm.scope == NormScope::all;
  for (const auto& [key, mode] : {std::pair{"q_scale", spec.io.q_scale}, std::pair{"cache_scale", spec.io.cache_scale}})
    if (mode == QScale::per_token_head && all_norm)
      reader.not_allowed(fmt::format("/io/{}", key), std::string("per_token_head"),
                         "\"static\" with qk_norm scope \"all\" (its heads share a warp segment: per-head scales "
                         "are not there yet)");
  // Rounding applies to the scales a launch computes; the launch's own are the caller's.
  const bool cache_scale_computed = quantized_cache(spec) && !caller_cache_scale(spec);
  if (spec.io.scale_rounding != ScaleRounding::none && !q_scale_computed(spec) && !cache_scale_computed)
    reader.not_allowed("/io/scale_rounding", std::string(to_string(spec.io.scale_rounding)),
                       "\"none\" unless a scale is computed (an FP8 io.q_output_dtype with q_scale per_token_head or "
                       "per_token, an FP8 io.cache_dtype with cache_scale per_token_head, or cache_layout fp8_ds_mla "
                       "or fp8_deepseek_v4)");
  if (spec.inverse && (!op_facts(spec.op).inverse_key || caller_cos_sin(spec)))
    reader.not_allowed("/inverse", json(true),
                       fmt::format("false when op is {}{} (an inverse rotation: {} with computed angles; op "
                                   "inverse_rope turns q back by itself)",
                                   to_string(spec.op), caller_cos_sin(spec) ? " with io.angles cos_sin_cache" : "",
                                   ops_taking(&OpFacts::inverse_key)));
  if (spec.hadamard) check_hadamard(reader, spec);
  check_cache_forms(reader, spec);

  // Per-token q scales reduce over a row's heads in one warp segment (qk_norm_all.cuh's kernel),
  // which holds an all-heads norm but none per head, nor per-head cache scales or NVFP4 blocks.
  if (q_scale_per_token(spec)) {
    const char* why = nullptr;
    if (spec.qk_norm.enabled && spec.qk_norm.scope == NormScope::head) why = "qk_norm scope \"head\"";
    else if (cache_scale_per_head(spec)) why = "io.cache_scale per_token_head";
    else if (nvfp4_cache(spec)) why = "io.cache_dtype nvfp4";
    if (why)
      reader.not_allowed("/io/q_scale", std::string("per_token"),
                         fmt::format("\"static\" or \"per_token_head\" with {} (per-token scales run in the "
                                     "all-heads kernel: no norm, or qk_norm scope \"all\")", why));
  }
  if (cache_scale_per_head(spec) && !op_facts(spec.op).quant.per_head_cache_scale)
    reader.not_allowed("/io/cache_scale", std::string("per_token_head"),
                       fmt::format("\"static\" when op is {} (per-head cache scales: {} so far)", to_string(spec.op),
                                   ops_taking(&OpQuantForms::per_head_cache_scale)));
  refuse_other_op_blocks(document, reader, spec);
  spec_op(spec.op).read(document, reader, spec);
  check_proportional_rotary(document, reader, spec);
  if (issues.empty()) check_derived_frequencies(spec, reader);
  return spec;
}

Spec spec_from_json(const json& document) {
  std::vector<SpecIssue> issues;
  Spec spec = spec_from_json(document, issues);
  if (!issues.empty()) throw SpecError(std::move(issues));
  return spec;
}

}  // namespace ropejit
