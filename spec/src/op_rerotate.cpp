// Op rerotate's row of the spec layer's op table: the `rerotate` block (read, written, its
// schema) and what the op rules out.
#include <fmt/core.h>

#include "spec_ops.h"

namespace ropejit::spec_detail {

namespace {

// Values of the io block that rerotate cannot honour (it reads no q, k or v, writes no q and
// leaves v where it is), each with the reason.
void check_rerotate_io(const json* io, const Spec& spec, Reader& reader) {
  const char* const what = "when op is rerotate";
  if (spec.io.output != OutputForm::paged_kv) {
    const json* output = io ? member(*io, "output") : nullptr;
    if (output)
      reader.not_allowed("/io/output", *output,
                         fmt::format("\"paged_kv\" {} (it rotates the keys of a paged K cache in place)", what));
    else
      reader.add("/io/output", fmt::format("missing: op rerotate needs \"paged_kv\" (and page_size): it rotates "
                                           "the keys of a paged K cache in place"));
  }
  if (!io) return;
  if (const json* v = member(*io, "input"); v && spec.io.input != InputForm::separate)
    reader.not_allowed("/io/input", *v, fmt::format("\"separate\" or absent {} (no q, k or v is read)", what));
  if (const json* v = member(*io, "qkv_bias"); v && spec.io.qkv_bias)
    reader.not_allowed("/io/qkv_bias", *v, fmt::format("false {} (cached keys already carry their bias)", what));
  if (const json* v = member(*io, "q_output"); v && spec.io.q_output != QOutput::inplace)
    reader.not_allowed("/io/q_output", *v, fmt::format("\"inplace\" or absent {} (no q is written)", what));
  if (per_pair_positions(spec))
    reader.not_allowed("/io/positions", std::string(to_string(spec.io.positions)),
                       fmt::format("explicit, varlen or offset {} (one position per cached key)", what));
}

// The kernel bakes one ratio s_to / s_from: PhiMoE's per-table factors must not differ.
void check_one_factor(const RopeParams& rope, const std::string& base, Reader& reader) {
  if ((!rope.short_mscale && !rope.long_mscale) || rope.short_mscale == rope.long_mscale) return;
  const bool has_long = rope.long_mscale.has_value();
  reader.not_allowed(base + (has_long ? "/long_mscale" : "/short_mscale"),
                     json(has_long ? *rope.long_mscale : *rope.short_mscale),
                     fmt::format("equal to {} when op is rerotate (its kernel scales by one ratio of attention factors)",
                                 has_long ? "short_mscale" : "long_mscale"));
}

// The `rerotate` block (`from`, defaulting to the rope block) and what the op rules out (an
// output other than paged_kv, a bias, a QK-norm, mrope positions, q_output separate).
void read_op(const json& document, Reader& reader, Spec& spec) {
  const json* block = member(document, "rerotate");
  spec.from_rope = spec.rope;
  if (block) {
    if (!block->is_object()) {
      reader.not_allowed("/rerotate", *block, "an object such as {\"from\": {\"rope_type\": \"default\", ...}}");
    } else {
      static const std::vector<std::string_view> keys{"from"};
      reader.check_keys(*block, "/rerotate", keys);
      if (const json* from = member(*block, "from"))
        spec.from_rope = read_rope(*from, reader, spec.rotary_dim, spec.max_position_embeddings, "/rerotate/from");
    }
  }
  check_rerotate_io(member(document, "io"), spec, reader);
  check_one_factor(spec.rope, "/rope", reader);
  check_one_factor(spec.from_rope, "/rerotate/from", reader);
  if (const json* v = member(document, "qk_norm"))
    reader.not_allowed("/qk_norm", *v, "absent when op is rerotate (cached keys are already normalized)");
}

// Written only when it differs from rope: absent means the same block, so one text each.
void write_op(const Spec& spec, nlohmann::ordered_json& out) {
  nlohmann::ordered_json from = nlohmann::ordered_json::object();
  put_rope_fields(from, spec.from_rope, spec.max_position_embeddings);
  if (from != out["rope"]) out["rerotate"] = {{"from", std::move(from)}};
}

void schema_op(nlohmann::ordered_json& properties) {
  properties["rerotate"] = {
      {"description", "op rerotate only: the rope parameters the cached keys were written with (default: rope)"},
      {"type", "object"},
      {"properties", {{"from", {{"$ref", "#/$defs/rope"}}}}},
      {"additionalProperties", false}};
}

}  // namespace

extern const SpecOp kSpecOp_rerotate = {
    OpKind::rerotate,
    "rerotate: rotate the keys already in a paged K cache from rerotate.from and the positions they were "
    "written at to rope and new positions",
    "rerotate", "/rerotate/from", read_op, write_op, schema_op};

}  // namespace ropejit::spec_detail
