// Spec text in and out: parsing with positions, canonical JSON, pretty JSON, content hashes.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <xxhash.h>

#include "json_parse.h"
#include "spec_json.h"
#include "spec_ops.h"

namespace ropejit {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string join_issues(const std::vector<SpecIssue>& issues) {
  std::string out;
  for (const auto& issue : issues) {
    if (!out.empty()) out += "\n";
    out += issue.to_string();
  }
  return out;
}


bool is_scalar_list(const ordered_json& value) {
  if (!value.is_array() || value.empty()) return false;
  for (const auto& item : value)
    if (item.is_structured()) return false;
  return true;
}

void pretty_into(std::string& out, const ordered_json& value, int indent) {
  const std::string pad(indent, ' '), inner(indent + 2, ' ');
  if (value.is_object() && !value.empty()) {
    out += "{\n";
    size_t i = 0;
    for (const auto& item : value.items()) {
      out += inner + json(item.key()).dump() + ": ";
      pretty_into(out, item.value(), indent + 2);
      out += ++i < value.size() ? ",\n" : "\n";
    }
    out += pad + "}";
  } else if (is_scalar_list(value)) {
    // Number lists (longrope factors) stay compact: wrapped lines, not one number per line.
    std::string line = "[";
    std::string lines;
    for (size_t i = 0; i < value.size(); ++i) {
      std::string item = value[i].dump() + (i + 1 < value.size() ? ", " : "]");
      if (line.size() + item.size() > 92) {
        while (!line.empty() && line.back() == ' ') line.pop_back();
        lines += line + "\n";
        line = inner;
      }
      line += item;
    }
    out += lines + line;
  } else if (value.is_array() && !value.empty()) {
    out += "[\n";
    for (size_t i = 0; i < value.size(); ++i) {
      out += inner;
      pretty_into(out, value[i], indent + 2);
      out += i + 1 < value.size() ? ",\n" : "\n";
    }
    out += pad + "]";
  } else {
    out += value.dump();
  }
}

}  // namespace

namespace spec_detail {

// Every parameter of the rope type, in table order; an unset one is written as its default.
void put_rope_fields(ordered_json& out, const RopeParams& rope, int64_t max_positions) {
  out["rope_type"] = std::string(to_string(rope.type));
  for (const auto& rule : rope_param_rules()) {
    if (!rule.applies(rope.type)) continue;
    json value = rope_param_value(rope, rule);
    if (value.is_null())
      value = rule.fallback_max_positions.has(rope.type) ? json(max_positions) : rule.fallback;
    if (!value.is_null()) out[std::string(rule.key)] = value;
  }
}

}  // namespace spec_detail

SpecError::SpecError(std::vector<SpecIssue> issues)
    : Error(Status::invalid_spec, join_issues(issues),
            issues.empty() ? std::string() : issues.front().pointer),
      issues_(std::move(issues)) {}

Spec parse_spec(std::string_view json_text) {
  return spec_from_json(parse_json_reporting_field(json_text, FieldNaming::json_pointer));
}

Spec load_spec_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(Status::io_error, fmt::format("cannot read spec file {}: {}", path, std::strerror(errno)));
  std::stringstream text;
  text << file.rdbuf();
  return parse_spec(text.str());
}

ordered_json spec_to_json(const Spec& spec) {
  ordered_json out;
  out["name"] = spec.name;
  // Only another op than the default says its op: every rope spec keeps the text (and hash) it had.
  if (spec.op != OpKind{}) out["op"] = std::string(to_string(spec.op));
  out["head_dim"] = spec.head_dim;
  out["rotary_dim"] = spec.rotary_dim;
  out["num_q_heads"] = spec.num_q_heads;
  out["num_kv_heads"] = spec.num_kv_heads;
  out["layout"] = std::string(to_string(spec.layout));
  // Only a trailing slice says so: every other spec keeps the text (and hash) it had.
  if (spec.rotary_slice != RotarySlice{}) out["rotary_slice"] = std::string(to_string(spec.rotary_slice));
  if (spec.inverse) out["inverse"] = true;  // only then: every other spec keeps its hash
  if (spec.hadamard) out["hadamard"] = true;  // likewise
  out["dtype"] = std::string(to_string(spec.dtype));
  out["max_position_embeddings"] = spec.max_position_embeddings;
  if (!caller_cos_sin(spec)) out["angle"] = std::string(to_string(spec.angle));  // no angle is computed
  ordered_json rope = ordered_json::object();
  if (caller_cos_sin(spec)) rope["rope_type"] = std::string(to_string(spec.rope.type));  // the caller's cos/sin
  else spec_detail::put_rope_fields(rope, spec.rope, spec.max_position_embeddings);
  out["rope"] = std::move(rope);
  if (const auto write = spec_detail::spec_op(spec.op).write) write(spec, out);
  ordered_json io = ordered_json::object();
  io["input"] = std::string(to_string(spec.io.input));
  io["output"] = std::string(to_string(spec.io.output));
  io["qkv_bias"] = spec.io.qkv_bias;
  io["copy_v"] = spec.io.copy_v;
  io["positions"] = std::string(to_string(spec.io.positions));
  if (spec.io.positions == PositionsForm::mrope) {
    io["mrope_section"] = spec.io.mrope_section;
    io["mrope_interleaved"] = spec.io.mrope_interleaved;
  }
  if (spec.io.positions == PositionsForm::axes) spec_detail::write_axes(spec, io);
  if (paged_kv(spec)) {
    io["cache_layout"] = std::string(to_string(spec.io.cache_layout));
    io["cache_dtype"] = std::string(to_string(spec.io.cache_dtype));
    io["cache_index"] = std::string(to_string(spec.io.cache_index));
    io["page_size"] = spec.io.page_size;
    io["q_output"] = std::string(to_string(spec.io.q_output));
    if (cache_scale_per_head(spec)) io["cache_scale"] = "per_token_head";  // only then: old hashes hold
    if (spec.io.cache_dtype == CacheDType::nvfp4) io["v_scale_layout"] = std::string(to_string(spec.io.v_scale_layout));
  }
  if (spec.io.q_output_dtype != CacheDType::auto_) {  // canonical only when FP8: old hashes hold
    io["q_output_dtype"] = std::string(to_string(spec.io.q_output_dtype));
    io["q_scale"] = std::string(to_string(spec.io.q_scale));
  }
  if (spec.io.scale_rounding != ScaleRounding::none)  // canonical only then: old hashes hold
    io["scale_rounding"] = std::string(to_string(spec.io.scale_rounding));
  if (caller_cos_sin(spec)) {  // canonical only then: old hashes hold
    io["angles"] = std::string(to_string(spec.io.angles));
    io["cos_sin_dtype"] = std::string(to_string(spec.io.cos_sin_dtype));
  }
  out["io"] = std::move(io);
  if (spec.qk_norm.enabled) {
    out["qk_norm"] = {{"type", std::string(to_string(spec.qk_norm.type))},
                      {"eps", spec.qk_norm.eps},
                      {"weight", std::string(to_string(spec.qk_norm.weight))},
                      {"weight_offset", spec.qk_norm.weight_offset},
                      {"scope", std::string(to_string(spec.qk_norm.scope))}};
    if (spec.qk_norm.bias != NormWeight::none)  // canonical only then: old hashes hold
      out["qk_norm"]["bias"] = std::string(to_string(spec.qk_norm.bias));
    if (spec.qk_norm.heads != NormHeads::q_and_k) out["qk_norm"]["heads"] = std::string(to_string(spec.qk_norm.heads));
  }
  return out;
}

std::string pretty_json_text(const ordered_json& value) {
  std::string out;
  pretty_into(out, value, 0);
  return out + "\n";
}

std::string canonical_json(const Spec& spec) { return spec_to_json(spec).dump(); }

std::string pretty_json(const Spec& spec) { return pretty_json_text(spec_to_json(spec)); }

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

Hash128 hash_bytes(std::string_view bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return Hash128{h.high64, h.low64};
}

Hash128 spec_hash(const Spec& spec) { return hash_bytes(canonical_json(spec)); }

}  // namespace ropejit
