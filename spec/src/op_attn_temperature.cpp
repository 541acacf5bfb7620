// Op attn_temperature's row of the spec layer's op table (Llama 4's NoPE layers): the
// `attn_temperature` block and what the op rules out (it scales q in place, nothing else).
#include <fmt/core.h>

#include "spec_ops.h"

namespace ropejit::spec_detail {

namespace {

constexpr const char* kWhen = "when op is attn_temperature (it scales q in place)";

// floor_scale and attn_scale (HF's defaults 8192 and 0.1 when absent).
void read_op(const json& document, Reader& reader, Spec& spec) {
  if (const json* block = member(document, "attn_temperature")) {
    if (!block->is_object()) {
      reader.not_allowed("/attn_temperature", *block, "an object such as {\"floor_scale\": 8192, \"attn_scale\": 0.1}");
    } else {
      reader.check_keys(*block, "/attn_temperature", {"floor_scale", "attn_scale"});
      AttnTemperature& t = spec.attn_temperature;
      if (const json* v = member(*block, "floor_scale"))
        t.floor_scale = reader.integer(*v, "/attn_temperature/floor_scale", 1, (int64_t(1) << 31) - 1).value_or(t.floor_scale);
      if (const json* v = member(*block, "attn_scale"))
        t.attn_scale = reader.number(*v, "/attn_temperature/attn_scale", 0.0, false, 1e6).value_or(t.attn_scale);
    }
  }
  refuse_io_of_q_inplace_op(document, reader, spec, kWhen);
}

void write_op(const Spec& spec, nlohmann::ordered_json& out) {
  out["attn_temperature"] = {{"floor_scale", spec.attn_temperature.floor_scale},
                             {"attn_scale", spec.attn_temperature.attn_scale}};
}

void schema_op(nlohmann::ordered_json& properties) {
  properties["attn_temperature"] = {
      {"description", "op attn_temperature only: q at position p is scaled by log1p(floor((p + 1) / floor_scale)) * "
                      "attn_scale + 1 (Llama 4's NoPE layers)"},
      {"type", "object"},
      {"properties",
       {{"floor_scale", {{"description", "default 8192"}, {"type", "integer"}, {"minimum", 1}, {"maximum", 2147483647}}},
        {"attn_scale", {{"description", "default 0.1"}, {"type", "number"}, {"minimum", 0}, {"maximum", 1e6}}}}},
      {"additionalProperties", false}};
}

constexpr const char* kHfKeys[] = {"floor_scale", "attn_scale", nullptr};  // Llama4TextConfig's

}  // namespace

extern const SpecOp kSpecOp_attn_temperature = {
    OpKind::attn_temperature,
    "attn_temperature: scale q in place by the attention temperature of its position (Llama 4's NoPE layers)",
    "attn_temperature", nullptr, read_op, write_op, schema_op, kHfKeys};

}  // namespace ropejit::spec_detail
