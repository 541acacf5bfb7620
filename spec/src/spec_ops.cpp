// The spec layer's op table: one row per ROPEJIT_OPS entry, each defined in its op's own file
// (op rope, the base op, has nothing of its own beyond the common fields).
#include "spec_ops.h"

#include <fmt/core.h>

namespace ropejit::spec_detail {

extern const SpecOp kSpecOp_rope = {
    OpKind::rope,
    "rope (default): rotate q and k as they are produced",
    nullptr, nullptr,
    [](const json&, Reader&, Spec&) {},
    nullptr, nullptr};

#define ROPEJIT_SPEC_OP_DECLARE(name) extern const SpecOp kSpecOp_##name;
ROPEJIT_OPS(ROPEJIT_SPEC_OP_DECLARE)
#undef ROPEJIT_SPEC_OP_DECLARE

namespace {

#define ROPEJIT_SPEC_OP_ROW(name) &kSpecOp_##name,
const SpecOp* const kSpecOps[] = {ROPEJIT_OPS(ROPEJIT_SPEC_OP_ROW)};
#undef ROPEJIT_SPEC_OP_ROW

}  // namespace

const SpecOp& spec_op(OpKind op) {
  const SpecOp& row = *kSpecOps[static_cast<int>(op)];
  if (row.op != op) throw Error(Status::internal, fmt::format("spec op table out of order at {}", to_string(op)));
  return row;
}

std::vector<std::string_view> op_block_keys() {
  std::vector<std::string_view> keys;
  for (const SpecOp* row : kSpecOps)
    if (row->block) keys.push_back(row->block);
  return keys;
}

void refuse_io_of_q_inplace_op(const json& document, Reader& reader, const Spec& spec, const char* when) {
  if (const json* io = member(document, "io")) {
    if (const json* v = member(*io, "input"); v && spec.io.input != InputForm::separate)
      reader.not_allowed("/io/input", *v, fmt::format("\"separate\" or absent {}", when));
    if (const json* v = member(*io, "output"); v && spec.io.output != OutputForm::inplace)
      reader.not_allowed("/io/output", *v, fmt::format("\"inplace\" or absent {}", when));
    if (const json* v = member(*io, "qkv_bias"); v && spec.io.qkv_bias)
      reader.not_allowed("/io/qkv_bias", *v, fmt::format("false {}", when));
    if (per_pair_positions(spec))
      reader.not_allowed("/io/positions", std::string(to_string(spec.io.positions)),
                         fmt::format("explicit, varlen or offset {}", when));
  }
  if (const json* v = member(document, "qk_norm")) reader.not_allowed("/qk_norm", *v, fmt::format("absent {}", when));
}

void read_one_tensor_rotation(const json& document, Reader& reader, Spec& spec) {
  const std::string when = fmt::format("when op is {} (one tensor, rotated {}in place)", to_string(spec.op),
                                       op_facts(spec.op).inverse ? "back " : "");
  refuse_io_of_q_inplace_op(document, reader, spec, when.c_str());
  if (const json* io = member(document, "io"))
    if (const json* v = member(*io, "copy_v"); v && spec.io.copy_v)
      reader.not_allowed("/io/copy_v", *v, fmt::format("false {}", when));
  if (frequencies_depend_on_run_length(spec.rope.type))
    reader.not_allowed("/rope/rope_type", std::string(to_string(spec.rope.type)),
                       fmt::format("a rope_type whose frequencies do not depend on the run length {}", when));
}

void refuse_other_op_blocks(const json& document, Reader& reader, const Spec& spec) {
  for (const SpecOp* row : kSpecOps)
    if (row->block && row->op != spec.op)
      if (const json* block = member(document, row->block))
        reader.not_allowed(std::string("/") + row->block, *block,
                           fmt::format("absent unless op is \"{}\"", to_string(row->op)));
}

}  // namespace ropejit::spec_detail
