// The rope block of an HF config (v5 rope_parameters / v4 rope_scaling) and the base, checked
// the way transformers v5 RotaryEmbeddingConfigMixin checks them (modeling_rope_utils.py):
// a missing required key is an error there too; what HF only warns about is a warning here
// when the math stays well defined, and an error when HF would crash or compute garbage.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "hf_context.h"
#include "spec_json.h"

namespace ropejit {

using nlohmann::json;

namespace {

/// One HF rope_type: ropejit's type and HF v5's keys for it. rope_theta and
/// partial_rotary_factor are allowed with every type; `unsupported` says why a type is refused.
struct HfRopeType {
  std::string_view name;
  RopeType type;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
  std::string_view unsupported;
};

// HF requires original_max_position_embeddings for yarn and longrope too, but its
// standardize_rope_params fills it (top-level key, else M) first: optional in a config.json.
const std::vector<HfRopeType>& hf_rope_types() {
  static const std::vector<std::string_view> yarn_optional{
      "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
      "mscale", "mscale_all_dim", "truncate"};
  static const std::vector<std::string_view> longrope_optional{
      "original_max_position_embeddings", "attention_factor", "factor"};
  static const std::vector<HfRopeType> table{
      {"default", RopeType::default_, {}, {}, {}},
      {"linear", RopeType::linear, {"factor"}, {}, {}},
      {"dynamic", RopeType::dynamic, {"factor"}, {}, {}},
      {"yarn", RopeType::yarn, {"factor"}, yarn_optional, {}},
      {"longrope", RopeType::longrope, {"short_factor", "long_factor"}, longrope_optional, {}},
      {"su", RopeType::longrope, {"short_factor", "long_factor"}, longrope_optional, {}},
      {"llama3", RopeType::llama3,
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
       {}, {}},
      {"mrope", RopeType::default_, {}, {}, {}},  // HF v5 maps it to default + mrope_section
      // HF's validator lists no factor for proportional, yet its table divides by it (default 1).
      {"proportional", RopeType::proportional, {}, {"factor"}, {}},
      {"ntk", RopeType::ntk, {}, {},
       "ntk is ropejit's static NTK type, not an HF rope_type: write the spec's rope block by hand"},
  };
  return table;
}

// Block keys that mean multimodal RoPE, which a single-stream spec cannot express.
constexpr std::string_view kMropeKeys[] = {"mrope_section", "mrope_interleaved"};

bool contains(const std::vector<std::string_view>& list, std::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

bool applies(const HfRopeType& row, std::string_view key) {
  return contains(row.required, key) || contains(row.optional, key);
}

// A key some HF rope type reads (so a misplaced one is "does not apply", not "unknown").
bool known_anywhere(std::string_view key) {
  if (key == "rope_theta" || key == "partial_rotary_factor") return true;
  for (const auto& row : hf_rope_types())
    if (applies(row, key)) return true;
  return false;
}

std::string type_names() {
  std::string out;
  for (const auto& row : hf_rope_types())
    if (row.unsupported.empty()) out += (out.empty() ? "" : ", ") + std::string(row.name);
  return out;
}

// Python `x or default`: HF reads a 0 yarn beta as unset.
bool is_unset(std::string_view key, const json& value) {
  return value.is_null() ||
         ((key == "beta_fast" || key == "beta_slow") && value.is_number() && value.get<double>() == 0);
}

// The rope_type row, or nullptr after reporting why not.
const HfRopeType* rope_type_row(const json& block, const std::string& block_key, HfContext& ctx) {
  const json* rope_type = HfContext::member(block, "rope_type");
  const json* type = HfContext::member(block, "type");
  const json* name = rope_type ? rope_type : type;
  const std::string key = block_key + (rope_type ? ".rope_type" : ".type");
  if (rope_type && type && *rope_type != *type) {
    ctx.error(block_key + ".type", "/rope/rope_type",
              fmt::format("{} is not allowed: must equal rope_type ({}) when both are given",
                          show_json(*type), show_json(*rope_type)));
    return nullptr;
  }
  if (!name) return &hf_rope_types().front();
  if (name->is_string()) {
    const std::string& text = name->get_ref<const std::string&>();
    for (const auto& row : hf_rope_types()) {
      if (row.name != text) continue;
      if (row.unsupported.empty()) return &row;
      ctx.error(key, "/rope/rope_type",
                fmt::format("{} is not allowed: {}", show_json(*name), row.unsupported));
      return nullptr;
    }
    std::vector<std::string_view> names;
    for (const auto& row : hf_rope_types()) names.push_back(row.name);
    const std::string suggestion = nearest_key(text, names);
    ctx.not_allowed(key, *name,
                    "one of " + type_names() +
                        (suggestion.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", suggestion)),
                    "/rope/rope_type");
    return nullptr;
  }
  ctx.not_allowed(key, *name, "a string, one of " + type_names(), "/rope/rope_type");
  return nullptr;
}

// Copies the block's keys that apply to the type; reports the others the way HF does. The
// multimodal keys are read by import_mrope (families with `mrope`), refused elsewhere.
void copy_keys(const json& block, const std::string& block_key, const HfRopeType& row,
               const ModelFamily& family, HfContext& ctx, json& rope) {
  std::vector<std::string_view> type_keys = row.required;
  type_keys.insert(type_keys.end(), row.optional.begin(), row.optional.end());
  type_keys.push_back("rope_theta");
  for (const auto& item : block.items()) {
    const std::string& key = item.key();
    const std::string key_path = block_key + "." + key;
    if (key == "partial_rotary_factor" && row.type == RopeType::proportional) {
      rope[key] = item.value();  // proportional keeps its fraction with the angles (rotary_dim = head_dim)
      ctx.source("/rope/" + key, key_path);
      continue;
    }
    if (key == "rope_type" || key == "type" || key == "rope_theta" || key == "partial_rotary_factor")
      continue;  // read by the caller
    if (std::find(std::begin(kMropeKeys), std::end(kMropeKeys), key) != std::end(kMropeKeys)) {
      if (!family.mrope)
        ctx.error(key_path, "/rope",
                  fmt::format("multimodal RoPE is imported for model_type {} only (a {} model has one "
                              "position stream)",
                              model_types_where(has_mrope), family.model_type.empty() ? "generic" : family.model_type));
      continue;
    }
    if (item.value().is_object()) {  // v5 per-layer-type blocks: {"full_attention": {...}}
      ctx.error(key_path, "/rope",
                "an object is not allowed here: per-layer-type rope parameters (layer_types) need "
                "one spec per layer type; import a config holding one block");
      continue;
    }
    // PhiMoE's rotary reads these two (other families' modules ignore them, as HF warns); its
    // forward puts them in place of every non-default type's factor, which a spec has for longrope only.
    const bool mscale_key = family.longrope_mscale && (key == "short_mscale" || key == "long_mscale");
    if (mscale_key && row.type != RopeType::longrope && row.type != RopeType::default_) {
      ctx.error(key_path, "/rope",
                fmt::format("{} is not allowed with rope_type \"{}\": must be absent (PhiMoE's forward multiplies "
                            "cos and sin by it in place of the type's attention factor; ropejit takes it with "
                            "longrope only)", show_json(item.value()), row.name));
      continue;
    }
    if (applies(row, key) || (mscale_key && row.type == RopeType::longrope)) {
      if (is_unset(key, item.value())) continue;
      const RopeParamRule* rule = find_rope_param(key);
      if (rule && rule->kind == ParamKind::integer &&
          !ctx.integer(item.value(), key_path, 1, "/rope/" + key))
        continue;  // a length: HF's Python int (8192.0 is refused)
      rope[key] = item.value();
      ctx.source("/rope/" + key, key_path);
      continue;
    }
    if (known_anywhere(key)) {
      ctx.warn(key_path, fmt::format("does not apply to rope_type \"{}\"; ignored, as HF does (it "
                                     "warns: unrecognized key)", row.name));
    } else {
      const std::string suggestion = nearest_key(key, type_keys);
      ctx.warn(key_path, fmt::format("unknown key for rope_type \"{}\"{}; ignored, as HF does (it "
                                     "warns: unrecognized key)", row.name,
                                     suggestion.empty() ? "" : " (did you mean \"" + suggestion + "\"?)"));
    }
  }
}

// The base: the block's rope_theta (v5), else the family's top-level keys, else ChatGLM's
// 10000 * rope_ratio, else the family default.
void import_theta(const json& text, const json* block, const std::string& block_key,
                  const ModelFamily& family, HfContext& ctx, json& rope) {
  const std::string pointer = "/rope/rope_theta";
  auto [top_key, top] = ctx.first_of(text, family.theta_keys, true, pointer);
  if (const json* inner = block ? HfContext::member(*block, "rope_theta") : nullptr) {
    rope["rope_theta"] = *inner;
    ctx.source(pointer, block_key + ".rope_theta");
    if (top && *top != *inner)
      ctx.warn(ctx.path(top_key), fmt::format("{} ignored: {}.rope_theta ({}) wins, as in HF v5",
                                              show_json(*top), block_key, show_json(*inner)));
  } else if (top) {
    rope["rope_theta"] = *top;
    ctx.source(pointer, ctx.path(top_key));
  } else if (const json* ratio = family.theta_from_rope_ratio ? HfContext::member(text, "rope_ratio")
                                                              : nullptr) {
    if (auto r = ctx.positive(*ratio, ctx.path("rope_ratio"), pointer)) {
      rope["rope_theta"] = 10000.0 * *r;  // ChatGLM: base = 10000 * rope_ratio
      ctx.source(pointer, ctx.path("rope_ratio"));
    }
  } else {
    rope["rope_theta"] = family.theta_default;
    ctx.source(pointer, ctx.path(family.theta_keys.front()));
  }
}

// Phi-3 keeps O at the top level, where it wins (standardize_rope_params); longrope without
// any O uses M as HF does.
void import_original_length(const json& text, const std::string& block_key, RopeType type,
                            std::optional<int64_t> max_positions, const std::string& max_key,
                            HfContext& ctx, json& rope) {
  const std::string key = "original_max_position_embeddings";
  if (type != RopeType::llama3 && type != RopeType::yarn && type != RopeType::longrope) return;
  if (const json* top = HfContext::member(text, key)) {
    if (!ctx.integer(*top, ctx.path(key), 1, "/rope/" + key)) return;
    if (rope.contains(key) && rope[key] != *top)
      ctx.warn(block_key + "." + key, fmt::format("{} ignored: the top-level {} ({}) wins, as in HF",
                                                  show_json(rope[key]), key, show_json(*top)));
    rope[key] = *top;
    ctx.source("/rope/" + key, ctx.path(key));
  } else if (type == RopeType::longrope && !rope.contains(key) && max_positions) {
    rope[key] = *max_positions;
    ctx.source("/rope/" + key, max_key);
  }
}

// Warnings where HF warns and the table stays well defined. `original_key` names where O came from.
void warn_like_hf(const json& rope, const std::string& block_key, const std::string& original_key, RopeType type,
                  std::optional<int64_t> max_positions, HfContext& ctx) {
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = rope.find(key);
    if (it == rope.end() || !it->is_number() || !std::isfinite(it->get<double>())) return std::nullopt;
    return it->get<double>();
  };
  if (type == RopeType::llama3) {
    auto low = number("low_freq_factor"), high = number("high_freq_factor");
    if (low && high && *low == *high)
      ctx.warn(block_key + ".high_freq_factor",
               fmt::format("equal to low_freq_factor ({}): the smooth band is empty (wavelengths "
                           "below O/high_freq_factor unchanged, above O/low_freq_factor divided "
                           "by factor); HF warns, ropejit computes it", *low));
    // HF expects O < M and warns otherwise; llama3's frequencies depend on O alone, not on M.
    auto original = number("original_max_position_embeddings");
    if (original && max_positions && *original >= static_cast<double>(*max_positions))
      ctx.warn(original_key, fmt::format("{} is not below max_position_embeddings ({}); HF warns, ropejit "
                                         "computes the table (llama3's frequencies depend on it, not on "
                                         "max_position_embeddings)", *original, *max_positions));
  }
  if (type == RopeType::yarn && max_positions) {
    auto factor = number("factor"), original = number("original_max_position_embeddings");
    if (factor && original && *original > 0) {
      const double implicit = static_cast<double>(*max_positions) / *original;
      if (implicit != *factor && implicit != 1.0)
        ctx.warn(block_key + ".factor",
                 fmt::format("{} differs from max_position_embeddings / "
                             "original_max_position_embeddings ({}); the explicit factor is used, "
                             "as HF does (it warns)", *factor, implicit));
    }
  }
}

// The pairs the spec rotates as the spec reads them: rotary_dim, else floor(head_dim *
// partial_rotary_factor), else head_dim, halved; 0 when the spec has no usable head_dim yet.
int spec_rotary_pairs(const json& spec) {
  const json* head_dim = HfContext::member(spec, "head_dim");
  if (const json* dim = HfContext::member(spec, "rotary_dim"); dim && dim->is_number_integer())
    return static_cast<int>(dim->get<int64_t>() / 2);
  if (!head_dim || !head_dim->is_number_integer()) return 0;
  if (const json* f = HfContext::member(spec, "partial_rotary_factor"); f && f->is_number())
    return static_cast<int>(std::floor(head_dim->get<int64_t>() * f->get<double>())) / 2;
  return static_cast<int>(head_dim->get<int64_t>() / 2);
}

// The section of a rope block without mrope_section: the family's modeling default, as HF's rotary
// applies it to the spec's pairs. Interleaved, HF slices height's pairs [1 : 3h : 3] and width's
// [2 : 3w : 3] of the pairs there are (a section past them is cut short, silently) and temporal
// takes the rest; contiguous, torch.split needs the counts to sum to the pairs (else HF raises).
std::optional<std::vector<int>> default_mrope_section(const std::string& block_key, const ModelFamily& family,
                                                     const json& spec, HfContext& ctx) {
  std::vector<int> counts = family.mrope_default;
  const int pairs = spec_rotary_pairs(spec);
  const std::string shown = show_json(json(counts));
  if (pairs <= 0) return counts;  // the head's own error is reported
  if (family.mrope_interleaved) {
    counts[1] = std::min(counts[1], (pairs + 1) / 3);
    counts[2] = std::min(counts[2], pairs / 3);
    counts[0] = pairs - counts[1] - counts[2];
    if (counts != family.mrope_default)
      ctx.warn(block_key + ".mrope_section",
               fmt::format("absent: model_type {}'s rotary takes {} ({}), which over {} pairs interleaves as {}", family.model_type,
                           shown, family.source, pairs, show_json(json(counts))));
    return counts;
  }
  if (counts[0] + counts[1] + counts[2] != pairs) {
    ctx.error(block_key + ".mrope_section", "/io/mrope_section",
              fmt::format("missing, and model_type {}'s rotary default {} ({}) sums to {} pairs, not rotary_dim / 2 = {}: "
                          "HF's own rotary raises there (torch.split); give the sections",
                          family.model_type, shown, family.source, counts[0] + counts[1] + counts[2], pairs));
    return std::nullopt;
  }
  return counts;
}

// Multimodal RoPE (Qwen2-VL's mrope_section, Qwen3-VL's mrope_interleaved): [3, T] positions.
// Without a section the family's rotary takes its modeling default, as HF's does.
void import_mrope(const json& block, const std::string& block_key, const ModelFamily& family, HfContext& ctx,
                  json& spec) {
  const json* section = HfContext::member(block, "mrope_section");
  const json* interleaved = HfContext::member(block, "mrope_interleaved");
  json& io = spec["io"];
  std::string from = block_key + ".mrope_section";
  if (section) {
    io["mrope_section"] = *section;
  } else if (auto counts = default_mrope_section(block_key, family, spec, ctx)) {
    io["mrope_section"] = *counts;
    from = std::string(family.source) + " (its rotary's default: " + block_key + " has no mrope_section)";
  } else {
    return;
  }
  ctx.source("/io/mrope_section", from);
  io["positions"] = "mrope";
  ctx.source("/io/positions", from);
  // The family's module decides the form; HF reads no mrope_interleaved key.
  io["mrope_interleaved"] = family.mrope_interleaved;
  ctx.source("/io/mrope_interleaved", block_key + (interleaved ? ".mrope_interleaved" : ".mrope_section"));
  if (interleaved && *interleaved != json(family.mrope_interleaved))
    ctx.warn(block_key + ".mrope_interleaved",
             fmt::format("{} ignored, as HF does: model_type {}'s rotary module {} the streams", show_json(*interleaved),
                         family.model_type, family.mrope_interleaved ? "always interleaves" : "never interleaves"));
}

// Per-layer-type blocks (HF v5: {"full_attention": {...}, "sliding_attention": {...}}): the one
// of `layer_type`. False after reporting why none can be taken.
bool pick_layer_block(const json*& block, std::string& block_key, const std::string& layer_type, HfContext& ctx);

}  // namespace

bool is_per_layer_rope_block(const json& block) {
  if (!block.is_object() || block.empty()) return false;
  for (const auto& item : block.items())
    if (!item.value().is_object() && !item.value().is_null()) return false;
  return !block.contains("rope_type") && !block.contains("type") && !block.contains("rope_theta");
}

namespace {

bool pick_layer_block(const json*& block, std::string& block_key, const std::string& layer_type, HfContext& ctx) {
  const bool per_layer = block && is_per_layer_rope_block(*block);
  if (!per_layer) {
    if (layer_type.empty()) return true;
    ctx.error(block_key, "/rope",
              fmt::format("layer_type \"{}\" is not allowed: the config has one rope block for every layer "
                          "(import it without a layer type)", layer_type));
    return false;
  }
  std::string types;
  for (const auto& item : block->items()) types += (types.empty() ? "" : ", ") + item.key();
  if (layer_type.empty()) {
    ctx.error(block_key, "/rope",
              fmt::format("per-layer-type rope parameters ({}): pick one with layer_type (CLI --layer-type, "
                          "Python layer_type=), or import every distinct one with --layers", types));
    return false;
  }
  const json* chosen = HfContext::member(*block, layer_type);
  if (!chosen) {
    ctx.error(block_key + "." + layer_type, "/rope",
              fmt::format(block->contains(layer_type)
                              ? "null: layers of type \"{0}\" have no RoPE (no spec to import)"
                              : "layer_type \"{0}\" is not allowed: must be one of {1}",
                          layer_type, types));
    return false;
  }
  block = chosen;
  block_key += "." + layer_type;
  return true;
}

}  // namespace

const json* rope_block_fraction(const json& text, const std::string& layer_type) {
  const json* block = HfContext::member(text, "rope_parameters");
  if (!block) block = HfContext::member(text, "rope_scaling");
  if (block && is_per_layer_rope_block(*block)) block = layer_type.empty() ? nullptr : HfContext::member(*block, layer_type);
  if (!block || !block->is_object()) return nullptr;
  // Proportional RoPE keeps its fraction in the rope block: the whole head is paired.
  const json* type = HfContext::member(*block, "rope_type");
  if (type && *type == "proportional") return nullptr;
  return HfContext::member(*block, "partial_rotary_factor");
}

void import_rope(const json& text, const ModelFamily& family, std::optional<int64_t> max_positions,
                 const std::string& max_key, const std::string& layer_type, HfContext& ctx, json& spec) {
  const json* parameters = HfContext::member(text, "rope_parameters");
  const json* scaling = HfContext::member(text, "rope_scaling");
  const json* block = parameters ? parameters : scaling;
  std::string block_key = ctx.path(parameters ? "rope_parameters" : "rope_scaling");
  if (parameters && scaling && *parameters != *scaling) {
    ctx.error(ctx.path("rope_scaling"), "/rope",
              show_json(*scaling) + " is not allowed beside a different rope_parameters: keep one "
              "block (HF v5 prefers rope_scaling, v5 configs write rope_parameters)");
    return;
  }
  if (!pick_layer_block(block, block_key, layer_type, ctx)) {
    ctx.cover("/rope");
    return;
  }
  if (block && !block->is_object()) {
    ctx.not_allowed(block_key, *block,
                    "an object such as {\"rope_type\": \"linear\", \"factor\": 2.0}, or null",
                    "/rope");
    return;
  }
  const json empty = json::object();
  if (!block) block = &empty;
  const HfRopeType* row = rope_type_row(*block, block_key, ctx);
  if (!row) {
    ctx.cover("/rope");
    return;
  }
  const std::string type_key = block_key + (HfContext::member(*block, "rope_type") ? ".rope_type" : ".type");
  if (row->name == "mrope" && !family.mrope) {
    ctx.error(type_key, "/rope/rope_type",
              fmt::format("\"mrope\" is not allowed: multimodal RoPE is imported for model_type {} only",
                          model_types_where(has_mrope)));
    return;
  }
  json rope = json::object();
  rope["rope_type"] = std::string(to_string(row->type));
  ctx.source("/rope/rope_type", type_key);
  copy_keys(*block, block_key, *row, family, ctx, rope);
  if (family.mrope) import_mrope(*block, block_key, family, ctx, spec);
  import_original_length(text, block_key, row->type, max_positions, max_key, ctx, rope);
  for (std::string_view key : row->required)
    if (!rope.contains(std::string(key)) && !HfContext::member(*block, key) &&
        !(key == "original_max_position_embeddings" && HfContext::member(text, key)))  // reported
      ctx.error(block_key + "." + std::string(key), "/rope/" + std::string(key),
                fmt::format("missing required key for rope_type \"{}\" (HF raises KeyError)",
                            row->name));
  import_theta(text, block == &empty ? nullptr : block, block_key, family, ctx, rope);
  const std::string original_key = "original_max_position_embeddings";
  warn_like_hf(rope, block_key,
               HfContext::member(text, original_key) ? ctx.path(original_key) : block_key + "." + original_key,
               row->type, max_positions, ctx);
  spec["rope"] = rope;
}

}  // namespace ropejit
