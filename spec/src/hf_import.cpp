// HF config.json -> spec JSON. The per-model_type conventions come from the family table
// (hf_families.cpp), the rope block from hf_rope.cpp, the bias and QK-norm from hf_norm.cpp;
// this file reads the sizes, the rotary dim and the length, and reports every problem by its
// config.json key.
// The math each field feeds is described in docs/rope-math.md.
#include "hf_import.h"
#include "spec_ops.h"

#include <algorithm>

#include <fmt/core.h>

#include "hf_context.h"
#include "json_parse.h"
#include "spec_json.h"

namespace ropejit {

using nlohmann::json;

namespace {

// Copies an integer size into the spec, or reports it (HF sizes are Python ints: 8.0 fails).
void copy_integer(json& spec, const char* field, const json& value, const std::string& key_path,
                  int64_t min, HfContext& ctx) {
  const std::string pointer = std::string("/") + field;
  if (auto i = ctx.integer(value, key_path, min, pointer)) {
    spec[field] = *i;
    ctx.source(pointer, key_path);
  }
}

// Sizes: q heads, head_dim (explicit, else hidden / heads), kv heads by the family's rule.
void import_heads(const json& text, const ModelFamily& family, HfContext& ctx, json& spec) {
  auto [heads_key, heads_json] = ctx.first_of(text, family.head_keys, true, "/num_q_heads");
  std::optional<int64_t> heads;
  const std::string heads_path = ctx.path(heads_json ? heads_key : family.head_keys.front());
  if (!heads_json) {
    const bool nested = text.contains("text_config") && family.text_config.empty();
    ctx.error(heads_path, "/num_q_heads",
              std::string("missing required key") +
                  (nested ? " (a multimodal config keeps it in text_config; ropejit reads "
                            "text_config for model_type llama4)" : ""));
  } else if ((heads = ctx.integer(*heads_json, heads_path, 1, "/num_q_heads"))) {
    spec["num_q_heads"] = *heads;
    ctx.source("/num_q_heads", heads_path);
  }

  auto [dim_key, dim] = ctx.first_of(text, family.head_dim_keys, false, "/head_dim");
  if (dim) {
    copy_integer(spec, "head_dim", *dim, ctx.path(dim_key), 1, ctx);
  } else if (!heads) {
    ctx.cover("/head_dim");
  } else {
    auto [hidden_key, hidden] = ctx.first_of(text, family.hidden_keys, true, "/head_dim");
    const std::string hidden_path = ctx.path(hidden ? hidden_key : family.hidden_keys.front());
    const std::string why = family.head_dim_keys.empty()
                                ? ""
                                : fmt::format(" ({} is absent)", family.head_dim_keys.front());
    if (!hidden) {
      ctx.error(hidden_path, "/head_dim",
                fmt::format("missing required key: head_dim = {} / {}{}", hidden_path, heads_path, why));
    } else if (auto h = ctx.integer(*hidden, hidden_path, 1, "/head_dim")) {
      if (*h % *heads != 0) {
        ctx.error(hidden_path, "/head_dim",
                  fmt::format("{} is not allowed: must be a multiple of {} ({}): head_dim = {} / {}{}"
                              " (HF would floor it to {})", *h, heads_path, *heads, hidden_path,
                              heads_path, why, *h / *heads));
      } else {
        spec["head_dim"] = *h / *heads;
        ctx.source("/head_dim", hidden_path + " / " + heads_path);
      }
    }
  }

  auto [kv_key, kv] = ctx.first_of(text, family.kv_keys, family.kv_rule == KvRule::falcon, "/num_kv_heads");
  const std::string kv_path = kv ? ctx.path(kv_key) : std::string();
  bool flags_ok = true;  // a non-boolean flag is reported once; no rule is applied then
  auto flag = [&](const char* key, bool fallback) {
    const json* v = HfContext::member(text, key);
    if (!v) return fallback;
    auto b = ctx.boolean(*v, ctx.path(key), "/num_kv_heads");
    flags_ok = flags_ok && b.has_value();
    return b.value_or(fallback);
  };
  bool grouped = true;  // the config's kv count applies (else: a family rule decides)
  if (family.kv_rule == KvRule::falcon) {
    // FalconAttention: num_kv_heads if (new_decoder_architecture or not multi_query) else 1;
    // the custom-code n_head_kv implied the new architecture.
    const bool new_arch = flag("new_decoder_architecture", kv_key == "n_head_kv");
    const bool multi_query = flag("multi_query", true);
    if (!flags_ok) return;
    grouped = new_arch || !multi_query;
    if (!grouped) {
      spec["num_kv_heads"] = 1;
      ctx.source("/num_kv_heads", ctx.path("multi_query"));
      if (kv && *kv != json(1))
        ctx.warn(kv_path, fmt::format("{} ignored: multi_query without new_decoder_architecture "
                                      "means one kv head (FalconAttention)", show_json(*kv)));
      return;
    }
  } else if (family.kv_rule == KvRule::chatglm) {
    grouped = flag("multi_query_attention", false);
    if (!flags_ok) return;
    if (grouped && !kv)
      ctx.error(ctx.path(family.kv_keys.front()), "/num_kv_heads",
                "missing required key: multi_query_attention is true");
    if (!grouped && kv)
      ctx.warn(kv_path, fmt::format("{} ignored: multi_query_attention is not true, so ChatGLM "
                                    "keeps one kv head per q head", show_json(*kv)));
  }
  if (grouped && kv) {
    copy_integer(spec, "num_kv_heads", *kv, kv_path, 1, ctx);
  } else if (heads && !(grouped && family.kv_rule == KvRule::chatglm)) {
    spec["num_kv_heads"] = *heads;  // HF's default: as many kv heads as q heads
    ctx.source("/num_kv_heads", heads_path);
  } else {
    ctx.cover("/num_kv_heads");
  }
}

// Rotary dim: rotary_dim and/or one fraction (rope block, top level, GPT-NeoX's rotary_pct).
void import_rotary(const json& text, const ModelFamily& family, const std::string& layer_type, HfContext& ctx,
                   json& spec) {
  if (family.rope_head_only) return;  // MLA: head_dim is already the rotated part
  if (const json* dim = HfContext::member(text, "rotary_dim"))
    copy_integer(spec, "rotary_dim", *dim, ctx.path("rotary_dim"), 1, ctx);
  const json* block = HfContext::member(text, "rope_parameters");
  std::string block_key = block ? "rope_parameters" : "rope_scaling";
  if (!layer_type.empty()) block_key += "." + layer_type;
  std::vector<std::pair<std::string, const json*>> fractions{
      {ctx.path(block_key + ".partial_rotary_factor"), rope_block_fraction(text, layer_type)},
      {ctx.path("partial_rotary_factor"), HfContext::member(text, "partial_rotary_factor")},
      {ctx.path("rotary_pct"), HfContext::member(text, "rotary_pct")}};
  const std::pair<std::string, const json*>* chosen = nullptr;
  for (const auto& fraction : fractions) {
    if (!fraction.second) continue;
    if (!chosen) {
      chosen = &fraction;
    } else if (*fraction.second != *chosen->second) {
      ctx.error(fraction.first, "/partial_rotary_factor",
                fmt::format("{} is not allowed: must equal {} ({}) when both are given",
                            show_json(*fraction.second), chosen->first, show_json(*chosen->second)));
    }
  }
  if (chosen) {
    spec["partial_rotary_factor"] = *chosen->second;
    ctx.source("/partial_rotary_factor", chosen->first);
  } else if (!spec.contains("rotary_dim") && family.rotary_dim_default) {
    spec["rotary_dim"] = *family.rotary_dim_default;
    ctx.source("/rotary_dim", ctx.path("rotary_dim"));
  } else if (!spec.contains("rotary_dim") && family.rotary_fraction_default) {
    spec["partial_rotary_factor"] = *family.rotary_fraction_default;
    ctx.source("/partial_rotary_factor", ctx.path("partial_rotary_factor"));
  }
}

// M: the first length key, else the family default; returns it with its key when an integer.
std::optional<int64_t> import_length(const json& text, const ModelFamily& family,
                                     const std::string& model_type, HfContext& ctx, json& spec,
                                     std::string& key_path) {
  const std::string pointer = "/max_position_embeddings";
  auto [key, value] = ctx.first_of(text, family.max_keys, false, pointer);
  key_path = ctx.path(value ? key : family.max_keys.front());
  if (value) {
    copy_integer(spec, "max_position_embeddings", *value, key_path, 1, ctx);
    if (!spec.contains("max_position_embeddings")) return std::nullopt;
    return spec["max_position_embeddings"].get<int64_t>();
  }
  if (family.max_default) {
    spec["max_position_embeddings"] = *family.max_default;
    ctx.source(pointer, key_path);
    return family.max_default;
  }
  ctx.error(key_path, pointer,
            fmt::format("missing required key (model_type \"{}\" has no default)", model_type));
  return std::nullopt;
}

// A QKV bias selects the fused pre-attention form: packed QKV in, rotated in place, v biased.
struct Imported {
  json spec;
  HfContext context;
};

// Where a config keeps its text model: the family row's sub-config, else `text_config` where
// the top level has no heads (transformers 5 composites; the nested model_type picks the row).
struct TextModel {
  const ModelFamily* family = nullptr;  // nullptr: not in the table
  std::string_view key;                 // "" for the top level
  const json* text = nullptr;           // nullptr or a non-object: reported by the caller
};

TextModel locate_text_model(const json& config, const std::string& model_type) {
  TextModel out{find_model_family(model_type), "", &config};
  const json* nested = HfContext::member(config, "text_config");
  const bool use_nested = nested && nested->is_object() && (!out.family || out.family->text_config.empty()) &&
                          !HfContext::member(config, "num_attention_heads") && !HfContext::member(config, "n_head");
  if (use_nested && !out.family) {
    const json* inner = HfContext::member(*nested, "model_type");
    if (inner && inner->is_string()) out.family = find_model_family(inner->get<std::string>());
  }
  if (out.family && !out.family->text_config.empty()) out.key = out.family->text_config;
  else if (use_nested) out.key = "text_config";
  if (!out.key.empty()) out.text = HfContext::member(config, out.key);
  return out;
}

// Olmo3Config.convert_rope_params_to_dict on a config without rope_parameters: a rope_scaling
// scales the family's scaling_layer_type only, the other types rotating with rope_type default
// at the class's default_theta (it pops rope_theta for the first type, so the second gets the
// default). True when that makes the layer types differ.
bool rope_differs_by_layer_type(const json& text, const ModelFamily& family) {
  if (family.scaling_layer_type.empty() || HfContext::member(text, "rope_parameters")) return false;
  const json* scaling = HfContext::member(text, "rope_scaling");
  if (scaling && is_per_layer_rope_block(*scaling)) return false;  // already keyed by layer type
  const json* theta = HfContext::member(text, "rope_theta");
  const bool scaled = scaling && scaling->is_object() && !scaling->empty();
  if (!scaled && !(theta && *theta != json(family.theta_default))) return false;
  const json* types = HfContext::member(text, "layer_types");
  if (!types || !types->is_array()) return true;  // the class's default pattern mixes sliding layers in
  return std::any_of(types->begin(), types->end(),
                     [&](const json& t) { return t.is_string() && t != family.scaling_layer_type; });
}

// transformers 5's per-layer overrides for the layers of `layer_type`: per_layer_config
// ({"05": {"head_dim": 512}}; HF requires a type's layers to agree), or Gemma 4's config.json
// form, global_head_dim / num_global_key_value_heads for the full_attention layers.
json layer_text(const json& text, const std::string& layer_type, const ModelFamily& family, HfContext& ctx) {
  json out = text;
  if (rope_differs_by_layer_type(text, family) && layer_type != family.scaling_layer_type) {
    out.erase("rope_scaling");  // rope_type default, at the family's base
    if (const json* theta = HfContext::member(text, "rope_theta"); theta && *theta != json(family.theta_default))
      ctx.warn(ctx.path("rope_theta"),
               fmt::format("{} is not this layer type's base: {}'s config class gives it to the {} layers and the "
                           "\"{}\" layers its default_theta {} (transformers 5.24), as this spec does",
                           show_json(*theta), family.model_type, family.scaling_layer_type, layer_type,
                           show_json(json(family.theta_default))));
    out.erase("rope_theta");
  }
  // The keys this import reads: other overrides (sliding_window, MLP sizes) may differ freely.
  std::vector<std::string_view> read{"rope_parameters", "rope_scaling", "partial_rotary_factor", "rotary_dim"};
  for (const auto* keys : {&family.head_keys, &family.hidden_keys, &family.head_dim_keys, &family.kv_keys,
                           &family.max_keys, &family.theta_keys})
    read.insert(read.end(), keys->begin(), keys->end());
  auto shaping = [&](const json& overrides) {
    json kept = json::object();
    for (const auto& item : overrides.items())
      if (std::find(read.begin(), read.end(), item.key()) != read.end()) kept[item.key()] = item.value();
    return kept;
  };
  const json* per_layer = HfContext::member(text, "per_layer_config");
  const json* types = HfContext::member(text, "layer_types");
  if (per_layer && per_layer->is_object() && !per_layer->empty()) {
    std::optional<std::pair<std::string, json>> first;  // the type's first layer and its overrides
    const size_t count = types && types->is_array() ? types->size() : 0;
    for (size_t i = 0; i < count; ++i) {
      if ((*types)[i] != layer_type) continue;
      json overrides = json::object();
      for (const auto& item : per_layer->items())
        if (item.value().is_object() && std::all_of(item.key().begin(), item.key().end(), ::isdigit) &&
            !item.key().empty() && std::stoull(item.key().substr(0, 9)) == i)
          overrides = shaping(item.value());
      if (!first) {
        first.emplace(std::to_string(i), overrides);
      } else if (overrides != first->second) {
        ctx.error(ctx.path("per_layer_config"), "",
                  fmt::format("{} for layer {} is not allowed: must equal layer {}'s {}, another layer of type "
                              "\"{}\" (one spec per layer type; HF refuses the same)", show_json(overrides), i,
                              first->first, show_json(first->second), layer_type));
        return out;
      }
    }
    if (first)
      for (const auto& item : first->second.items()) out[item.key()] = item.value();
    return out;
  }
  if (layer_type != "full_attention") return out;
  if (const json* dim = HfContext::member(text, "global_head_dim")) out["head_dim"] = *dim;
  const json* kv = HfContext::member(text, "num_global_key_value_heads");
  const json* k_eq_v = HfContext::member(text, "attention_k_eq_v");
  if (kv && !(k_eq_v && *k_eq_v == false)) out["num_key_value_heads"] = *kv;
  return out;
}

// Another op than rope (a NoPE layer's, from hf_layer_ops): "op" and the op's block from the
// config keys of the same names (SpecOp::hf_keys).
void import_op(const json& text, OpKind op, HfContext& ctx, json& spec) {
  const spec_detail::SpecOp& row = spec_detail::spec_op(op);
  spec["op"] = std::string(to_string(op));
  // An op over one tensor's heads (Llama 4's NoPE q, DeepSeek-V4's attention output) is past the
  // model's QK-norm: the norm belongs to the layer's rope spec.
  if (op_facts(op).heads == OpHeads::q || op_facts(op).heads == OpHeads::q_latent) spec.erase("qk_norm");
  json block = json::object();
  for (const char* const* key = row.hf_keys; key && *key; ++key)
    if (const json* v = HfContext::member(text, *key)) {
      block[*key] = *v;
      ctx.source(fmt::format("/{}/{}", row.block, *key), ctx.path(*key));
    }
  if (!block.empty()) spec[row.block] = block;
  if (row.import_hf) row.import_hf(text, ctx, spec);
}

Imported import_config(const json& config, const HfImportOptions& options) {
  if (!config.is_object())
    throw SpecError({{"", show_json(config) + " is not allowed: must be an object (a config.json)"}});
  std::string model_type;
  std::vector<SpecIssue> early;  // found before the text model's context exists
  // Present but null is a type error too: HF looks the value up in its model table.
  const auto model_type_it = config.find("model_type");
  const json* model_type_json = model_type_it == config.end() ? nullptr : &*model_type_it;
  if (model_type_json && model_type_json->is_string())
    model_type = model_type_json->get<std::string>();
  else if (model_type_json)
    early.push_back({"model_type", show_json(*model_type_json) +
                                       " is not allowed: must be a string such as \"llama\""});
  const TextModel located = locate_text_model(config, model_type);
  const ModelFamily* found = located.family;
  if (!found && early.empty() && !options.assume_generic)
    throw SpecError({{"model_type",
                      fmt::format("{} is not allowed: must be a model_type of ropejit's family table (docs/hf-import.md); "
                                  "families differ in pairing and head keys, so none is guessed: pass --assume-llama "
                                  "for Llama's conventions, or import in Python with transformers installed",
                                  model_type.empty() ? std::string("missing") : show_json(json(model_type)))}});
  const ModelFamily& family = found ? *found : generic_model_family();
  if (!family.not_rope.empty())
    throw SpecError({{"model_type", fmt::format("\"{}\" is not allowed: it has no rotary embedding "
                                                "({}; {})", model_type, family.not_rope, family.source)}});
  if (!family.unsupported.empty())
    throw SpecError({{"model_type", fmt::format("\"{}\" is not allowed: ropejit cannot express its RoPE: {} ({})",
                                                family.model_type, family.unsupported, family.source)}});
  const json* text = located.text;
  const std::string prefix = located.key.empty() ? "" : std::string(located.key) + ".";
  if (!text || !text->is_object())
    throw SpecError({{std::string(located.key),
                      text ? fmt::format("{} is not allowed: must be an object holding the text "
                                         "model of model_type \"{}\"", show_json(*text), model_type)
                           : fmt::format("missing required key: model_type \"{}\" keeps its "
                                         "text model there", model_type)}});
  Imported out{json::object(), HfContext(prefix)};
  HfContext& ctx = out.context;
  json layered;
  // layer_type "indexer" (and V4's keys): the family's sparse-attention indexer, with the model's rope block.
  const auto [indexer, apart] = indexer_part(family, model_type, options.layer_type, options.op);
  // An indexer with keys apart rotates with the main attention's rope block of its layers
  // (rope_block_label: V4's "compress").
  const std::string layer_type = indexer && !apart ? std::string() : options.layer_type;
  // The per-layer-type rope of a v4 Olmo 3 config is in `layered`: the rope block is not keyed by type.
  const bool typed_rope = rope_differs_by_layer_type(*text, family);
  const std::string rope_layer_type = typed_rope ? std::string() : rope_block_label(family, layer_type);
  if (typed_rope && layer_type.empty())
    ctx.error(ctx.path(HfContext::member(*text, "rope_scaling") ? "rope_scaling" : "rope_theta"), "/rope",
              fmt::format("applies to the {} layers only ({}'s config class; the other layer types rotate with "
                          "rope_type default at {}): pick one with layer_type (CLI --layer-type, Python "
                          "layer_type=), or import every distinct one with --layers",
                          family.scaling_layer_type, family.model_type, show_json(json(family.theta_default))));
  if (!layer_type.empty()) text = &(layered = layer_text(*text, layer_type, family, ctx));
  for (auto& issue : early) ctx.error(issue.pointer, "", issue.message);
  if (!found && early.empty())
    ctx.warn("model_type", fmt::format("{} is not in ropejit's family table: imported with Llama's conventions "
                                       "(neox pairing, head_dim, num_key_value_heads, attention_bias) as "
                                       "asked; check the checkpoint or pass --layout",
                                       model_type.empty() ? "missing, so it" : "\"" + model_type + "\""));
  if (!family.no_rope_key.empty())
    if (const json* v = HfContext::member(*text, family.no_rope_key))
      if (ctx.boolean(*v, ctx.path(family.no_rope_key), "").value_or(false))
        ctx.error(ctx.path(family.no_rope_key), "",
                  "true is not allowed: must be false: ALiBi biases the attention scores instead "
                  "of rotating q and k, so there is no RoPE to generate (" +
                      std::string(family.source) + ")");

  json& spec = out.spec;
  spec["name"] = !options.name.empty()  ? options.name
                 : model_type.empty()    ? "model"
                 : indexer               ? model_type + "-" + options.layer_type
                                         : model_type;
  if (indexer && !apart) {
    import_indexer_shape(*text, family, ctx, spec);
  } else {
    import_heads(*text, family, ctx, spec);
    import_rotary(*text, family, rope_layer_type, ctx, spec);
    if (apart) import_indexer_apart(*text, family, options.layer_type, ctx, spec);
  }
  Layout layout = indexer ? family.indexer.layout : family.layout;
  // The main attention's layout key (DeepSeek's rope_interleave) is no flag of the indexer's.
  if (const json* flag = family.layout_key.empty() || indexer ? nullptr : HfContext::member(*text, family.layout_key))
    if (auto interleave = ctx.boolean(*flag, ctx.path(family.layout_key), "/layout")) {
      layout = *interleave ? Layout::interleaved : Layout::neox;  // HF: apply_rotary_pos_emb(_interleave)
      ctx.source("/layout", ctx.path(family.layout_key));
    }
  spec["layout"] = std::string(to_string(options.layout.value_or(layout)));
  if (family.inverse_rotation) {
    spec["inverse"] = true;
    ctx.source("/inverse", ctx.path("model_type"));
  }
  if (!indexer && family.rotary_slice != RotarySlice{}) {
    spec["rotary_slice"] = std::string(to_string(family.rotary_slice));
    ctx.source("/rotary_slice", ctx.path("model_type"));
  }
  spec["dtype"] = std::string(to_string(options.dtype.value_or(DType::bf16)));
  std::string max_key;
  const auto max_positions = import_length(*text, family, model_type, ctx, spec, max_key);
  import_rope(*text, family, max_positions, max_key, rope_layer_type, ctx, spec);
  if (!indexer) {  // the indexer's projections have no bias; its k_norm came with its shape
    import_bias(*text, family, ctx, spec);
    import_qk_norm(*text, family, ctx, spec);
  }
  if (options.op != OpKind{}) import_op(*text, options.op, ctx, spec);
  return out;
}

void append(std::vector<std::string>* warnings, const HfContext& ctx) {
  if (warnings) warnings->insert(warnings->end(), ctx.warnings().begin(), ctx.warnings().end());
}

}  // namespace

const json& hf_text_model(const json& config) {
  if (!config.is_object()) return config;
  const json* type = HfContext::member(config, "model_type");
  const TextModel located = locate_text_model(config, type && type->is_string() ? type->get<std::string>() : "");
  return located.text && located.text->is_object() ? *located.text : config;
}

std::vector<std::string> hf_rope_layer_types(const json& config) {
  const json& text = hf_text_model(config);
  if (!text.is_object()) return {};
  const json* block = HfContext::member(text, "rope_parameters");
  if (!block) block = HfContext::member(text, "rope_scaling");
  const json* type = HfContext::member(config, "model_type");
  const ModelFamily* family =
      locate_text_model(config, type && type->is_string() ? type->get<std::string>() : "").family;
  const bool typed_rope = family && rope_differs_by_layer_type(text, *family);  // every listed type rotates
  if (!typed_rope && (!block || !is_per_layer_rope_block(*block))) return {};
  std::vector<std::string> out;
  auto add = [&](const std::string& type) {
    if ((typed_rope || block->contains(type)) && std::find(out.begin(), out.end(), type) == out.end())
      out.push_back(type);
  };
  if (const json* types = HfContext::member(text, "layer_types"); types && types->is_array())
    for (const auto& t : *types)
      if (t.is_string()) add(t.get<std::string>());
  if (typed_rope) return out;  // without layer_types: none, and the import asks for a layer type
  for (const auto& item : block->items()) add(item.key());
  return out;
}

namespace {

// The text model, its family row (generic when not in the table) and the key path prefix.
struct LayerContext {
  const json& text;
  const ModelFamily& family;
  std::string prefix;
};

LayerContext layer_context(const json& config) {
  const json* type = config.is_object() ? HfContext::member(config, "model_type") : nullptr;
  const TextModel located = locate_text_model(config, type && type->is_string() ? type->get<std::string>() : "");
  const json& text = hf_text_model(config);
  const std::string_view key = &text == &config ? "" : located.key;
  return {text, located.family ? *located.family : generic_model_family(), key.empty() ? "" : std::string(key) + "."};
}

// 1 where layer i rotates, per no_rope_layers, or HF's default every-interval-th NoPE layer
// (no_rope_layer_interval, else the family's) when the list is absent (or empty, Llama 4).
std::vector<int> rope_layer_flags(const LayerContext& c, size_t count) {
  std::vector<int> flags(count, 1);
  const json* no_rope = HfContext::member(c.text, "no_rope_layers");
  if (no_rope && !no_rope->is_null() && !no_rope->is_array())
    throw SpecError(std::vector<SpecIssue>{{c.prefix + "no_rope_layers", "is not allowed: must be a list"}});
  const bool listed = no_rope && no_rope->is_array() && !(no_rope->empty() && c.family.no_rope_empty_is_default);
  if (!listed) {
    if (!c.family.no_rope_interval) return flags;
    int64_t interval = *c.family.no_rope_interval;
    if (const json* v = HfContext::member(c.text, "no_rope_layer_interval")) {
      if (!v->is_number_integer() || v->get<int64_t>() < 1)
        throw SpecError(std::vector<SpecIssue>{{c.prefix + "no_rope_layer_interval",
                                                show_json(*v) + " is not allowed: must be an integer >= 1"}});
      interval = v->get<int64_t>();
    }
    for (size_t i = 0; i < count; ++i) flags[i] = (int64_t(i) + 1) % interval != 0 ? 1 : 0;
    return flags;
  }
  for (size_t i = 0; i < count && i < no_rope->size(); ++i) {
    const json& use = (*no_rope)[i];
    if (!use.is_number_integer() && !use.is_boolean())
      throw SpecError(std::vector<SpecIssue>{{fmt::format("{}no_rope_layers[{}]", c.prefix, i), show_json(use) + " is not allowed: must be 0 or 1"}});
    flags[i] = (use.is_boolean() ? use.get<bool>() : use.get<int64_t>() != 0) ? 1 : 0;  // HF: use_rope = no_rope_layers[i]
  }
  return flags;
}

}  // namespace

std::vector<std::optional<std::string>> hf_layer_rope_map(const json& config) {
  if (!hf_text_model(config).is_object())
    throw SpecError(std::vector<SpecIssue>{{"", "is not allowed: must be an object (a config.json)"}});
  const LayerContext c = layer_context(config);
  const json& text = c.text;
  const std::string& prefix = c.prefix;
  const json* types = HfContext::member(text, "layer_types");
  const json* layers = HfContext::member(text, "num_hidden_layers");
  if (types && !types->is_array()) throw SpecError(std::vector<SpecIssue>{{prefix + "layer_types", "is not allowed: must be a list"}});
  size_t count = types ? types->size() : 0;
  if (layers && layers->is_number_integer() && layers->get<int64_t>() > 0 && layers->get<int64_t>() < (1 << 20))
    count = static_cast<size_t>(layers->get<int64_t>());
  if (count == 0)
    throw SpecError(std::vector<SpecIssue>{{prefix + "num_hidden_layers", "missing required key: the layer count (or layer_types)"}});
  const std::vector<std::string> blocks = hf_rope_layer_types(config);
  const json* block = HfContext::member(text, "rope_parameters");
  if (!block) block = HfContext::member(text, "rope_scaling");
  const std::vector<int> rotates = rope_layer_flags(c, count);
  std::vector<std::optional<std::string>> out(count, std::string());
  for (size_t i = 0; i < count; ++i) {
    if (!blocks.empty()) {
      if (!types || i >= types->size() || !(*types)[i].is_string())
        throw SpecError(std::vector<SpecIssue>{{fmt::format("{}layer_types[{}]", prefix, i),
                          "missing required key: a per-layer-type rope block needs each layer's type"}});
      // A type without an entry has no RoPE (LFM3's conv layers: HF rotates only the listed types).
      const std::string type = rope_block_label(c.family, (*types)[i].get<std::string>());
      const bool rotated = !block || !is_per_layer_rope_block(*block) ||  // Olmo 3's v4 block: every type rotates
                           (block->contains(type) && !(*block)[type].is_null());
      out[i] = rotated ? std::optional<std::string>(type) : std::nullopt;
    }
    if (!rotates[i]) out[i] = std::nullopt;
  }
  return out;
}

std::vector<std::optional<OpKind>> hf_layer_ops(const json& config) {
  const std::vector<std::optional<std::string>> rope = hf_layer_rope_map(config);
  const LayerContext c = layer_context(config);
  bool nope_op = c.family.nope_op_default;  // what a NoPE layer runs instead, when the family has one
  if (const json* v = c.family.nope_op_key.empty() ? nullptr : HfContext::member(c.text, c.family.nope_op_key)) {
    // HF tests it for truth (`if self.attn_temperature_tuning and ...`): a number counts too.
    if (!v->is_boolean() && !v->is_number())
      throw SpecError(std::vector<SpecIssue>{{c.prefix + std::string(c.family.nope_op_key),
                                              show_json(*v) + " is not allowed: must be true or false"}});
    nope_op = v->is_boolean() ? v->get<bool>() : v->get<double>() != 0.0;
  }
  const std::vector<int> rotates = rope_layer_flags(c, rope.size());
  std::vector<std::optional<OpKind>> out(rope.size());
  for (size_t i = 0; i < rope.size(); ++i) {
    if (rope[i]) out[i] = OpKind::rope;
    else if (!rotates[i] && nope_op && !c.family.nope_op_key.empty()) out[i] = c.family.nope_op;
  }
  return out;
}

json parse_hf_config(std::string_view text) {
  return parse_json_reporting_field(text, FieldNaming::key_path);
}

json spec_json_from_hf(const json& config, const HfImportOptions& options,
                       std::vector<std::string>* warnings) {
  Imported imported = import_config(config, options);
  append(warnings, imported.context);
  if (!imported.context.issues().empty()) throw SpecError(imported.context.issues());
  return imported.spec;
}

Spec spec_from_hf(const json& config, const HfImportOptions& options,
                  std::vector<std::string>* warnings) {
  Imported imported = import_config(config, options);
  append(warnings, imported.context);
  std::vector<SpecIssue> spec_issues;
  Spec spec = spec_from_json(imported.spec, spec_issues);
  std::vector<SpecIssue> issues = imported.context.issues();
  for (auto& issue : imported.context.rename(spec_issues)) issues.push_back(std::move(issue));
  if (!issues.empty()) throw SpecError(std::move(issues));
  return spec;
}

HfConfig HfConfig::parse(std::string_view text) {
  return HfConfig(std::make_shared<const Document>(Document{parse_hf_config(text)}));
}

std::vector<std::optional<std::string>> hf_layer_rope_map(const HfConfig& config) {
  return hf_layer_rope_map(config.document().json);
}

std::vector<std::optional<OpKind>> hf_layer_ops(const HfConfig& config) { return hf_layer_ops(config.document().json); }

Spec spec_from_hf(const HfConfig& config, const HfImportOptions& options, std::vector<std::string>* warnings) {
  return spec_from_hf(config.document().json, options, warnings);
}

}  // namespace ropejit
