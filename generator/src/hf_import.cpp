// HF config.json -> spec JSON: v4 `rope_scaling` (type / rope_type), v5 `rope_parameters`,
// the older spellings of theta and rotary dim, and the per-family conventions (layout, bias).
#include "hf_import.h"

#include <algorithm>
#include <cmath>

#include "spec_json.h"

namespace ropejit {

using nlohmann::json;

namespace {

// Families whose checkpoints pair (2i, 2i+1) (ROPE_REFERENCE.md "Rotary dim and layouts").
bool is_interleaved_family(const std::string& model_type) {
  static const std::vector<std::string> families{"gptj",   "chatglm",     "glm",
                                                 "glm4",   "deepseek_v2", "deepseek_v3"};
  return std::find(families.begin(), families.end(), model_type) != families.end();
}

bool is_deepseek(const std::string& model_type) {
  return model_type == "deepseek_v2" || model_type == "deepseek_v3";
}

// GLM / ChatGLM rotate the first half of each head unless the config says otherwise.
bool is_glm_family(const std::string& model_type) {
  return model_type == "chatglm" || model_type == "glm" || model_type == "glm4";
}

// The first non-null member among `keys`, or nullptr.
const json* first_of(const json& object, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = object.find(key);
    if (it != object.end() && !it->is_null()) return &*it;
  }
  return nullptr;
}

// The v4 `type` / v5 `rope_type` name in ropejit's vocabulary (`su` is LongRoPE's old name).
std::string rope_type_name(const json& block) {
  const json* type = first_of(block, {"rope_type", "type"});
  if (!type || !type->is_string()) return type ? type->dump() : "default";
  std::string name = type->get<std::string>();
  if (name == "su") return "longrope";
  return name;
}

// True when a parameter value means "unset" in HF (null, or 0 for yarn's beta bounds).
bool is_unset(std::string_view key, const json& value) {
  if (value.is_null()) return true;
  if ((key == "beta_fast" || key == "beta_slow") && value.is_number() && value.get<double>() == 0)
    return true;
  return false;
}

}  // namespace

json spec_json_from_hf(const json& config, const HfImportOptions& options) {
  if (!config.is_object())
    throw Error(Status::invalid_spec, "HF config must be a JSON object, got " + config.dump());
  const std::string model_type = config.value("model_type", std::string());
  json spec = json::object();
  spec["name"] = !options.name.empty() ? options.name : !model_type.empty() ? model_type : "model";

  // Sizes: head_dim explicit (DeepSeek: the rope part of MLA), else hidden / heads.
  const json* heads = first_of(config, {"num_attention_heads", "n_head"});
  const json* hidden = first_of(config, {"hidden_size", "n_embd"});
  const json* head_dim = is_deepseek(model_type) ? first_of(config, {"qk_rope_head_dim"})
                                                 : first_of(config, {"head_dim", "kv_channels"});
  if (head_dim)
    spec["head_dim"] = *head_dim;
  else if (heads && hidden && heads->is_number_integer() && hidden->is_number_integer() &&
           heads->get<int64_t>() > 0)
    spec["head_dim"] = hidden->get<int64_t>() / heads->get<int64_t>();
  if (heads) spec["num_q_heads"] = *heads;
  if (const json* kv = first_of(config, {"num_key_value_heads", "multi_query_group_num"}))
    spec["num_kv_heads"] = *kv;
  else if (heads)
    spec["num_kv_heads"] = *heads;  // HF default: no GQA

  // Rotary dim: GPT-J's explicit rotary_dim, else the fraction (v5 name, then GPT-NeoX's).
  if (!is_deepseek(model_type)) {
    if (const json* dim = first_of(config, {"rotary_dim"})) spec["rotary_dim"] = *dim;
    if (const json* fraction = first_of(config, {"partial_rotary_factor", "rotary_pct"}))
      spec["partial_rotary_factor"] = *fraction;
    else if (is_glm_family(model_type) && !spec.contains("rotary_dim"))
      spec["partial_rotary_factor"] = 0.5;
  }

  spec["layout"] = std::string(to_string(options.layout.value_or(
      is_interleaved_family(model_type) ? Layout::interleaved : Layout::neox)));
  spec["dtype"] = std::string(to_string(options.dtype.value_or(DType::bf16)));
  if (const json* m = first_of(config, {"max_position_embeddings", "n_positions", "seq_length"}))
    spec["max_position_embeddings"] = *m;

  // Rope block: v5 rope_parameters, else v4 rope_scaling; theta from the block or top level.
  const json* block = first_of(config, {"rope_parameters", "rope_scaling"});
  const json empty = json::object();
  if (!block || !block->is_object()) block = &empty;
  json rope = json::object();
  const std::string type_name = rope_type_name(*block);
  rope["rope_type"] = type_name;
  if (const json* theta = first_of(*block, {"rope_theta"}))
    rope["rope_theta"] = *theta;
  else if (const json* top = first_of(config, {"rope_theta", "rotary_emb_base"}))
    rope["rope_theta"] = *top;
  else if (const json* ratio = first_of(config, {"rope_ratio"}); ratio && ratio->is_number())
    rope["rope_theta"] = 10000.0 * ratio->get<double>();  // GLM: base 10000 scaled by rope_ratio
  else
    rope["rope_theta"] = 10000.0;  // HF's default base

  // Copy the parameters that apply to the type; HF ignores the rest, so do we.
  const auto type = enum_from_string<RopeType>(type_name);
  for (const auto& rule : rope_param_rules()) {
    if (rule.key == "rope_theta") continue;
    const std::string key(rule.key);
    auto it = block->find(key);
    if (it == block->end() || is_unset(rule.key, *it)) continue;
    if (type) {
      const RopeTypeParams& params = rope_type_params(*type);
      bool applies = std::find(params.required.begin(), params.required.end(), rule.key) !=
                         params.required.end() ||
                     std::find(params.optional.begin(), params.optional.end(), rule.key) !=
                         params.optional.end();
      if (!applies) continue;
    }
    rope[key] = *it;
  }
  // Phi-3: a top-level original_max_position_embeddings wins over the block's.
  if (type && (*type == RopeType::longrope || *type == RopeType::yarn ||
               *type == RopeType::llama3))
    if (const json* o = first_of(config, {"original_max_position_embeddings"}))
      rope["original_max_position_embeddings"] = *o;
  spec["rope"] = rope;

  // A QKV bias means the fused pre-attention form: packed QKV in, rotated in place, v biased.
  const json* bias = first_of(config, {"attention_bias", "add_qkv_bias"});
  if ((bias && bias->is_boolean() && bias->get<bool>()) || model_type == "qwen2")
    spec["io"] = {{"input", "packed_qkv"}, {"output", "inplace"}, {"qkv_bias", true}};
  return spec;
}

Spec spec_from_hf(const json& config, const HfImportOptions& options) {
  return spec_from_json(spec_json_from_hf(config, options));
}

}  // namespace ropejit
