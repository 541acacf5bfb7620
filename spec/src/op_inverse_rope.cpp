// Op inverse_rope's row of the spec layer's op table (DeepSeek-V4's attention output): one
// [T, num_q_heads, head_dim] tensor whose rope slice turns back by the angle of its token's
// position, in place; no block of its own, and what the op rules out.
#include <fmt/core.h>

#include "spec_ops.h"

namespace ropejit::spec_detail {

namespace {

constexpr const char* kWhen = "when op is inverse_rope (one tensor, rotated back in place)";

// The io values and rope types the op cannot honour, each with the reason.
void read_op(const json& document, Reader& reader, Spec& spec) {
  refuse_io_of_q_inplace_op(document, reader, spec, kWhen);
  if (const json* io = member(document, "io"))
    if (const json* v = member(*io, "copy_v"); v && spec.io.copy_v)
      reader.not_allowed("/io/copy_v", *v, fmt::format("false {}", kWhen));
  // Their tables depend on the launch's run length, which this op's launch does not carry.
  if (frequencies_depend_on_run_length(spec.rope.type))
    reader.not_allowed("/rope/rope_type", std::string(to_string(spec.rope.type)),
                       fmt::format("a rope_type whose frequencies do not depend on the run length {}", kWhen));
}

}  // namespace

extern const SpecOp kSpecOp_inverse_rope = {
    OpKind::inverse_rope,
    "inverse_rope: rotate the rope slice of each head of one [T, num_q_heads, head_dim] tensor by minus its "
    "position's angle, in place (DeepSeek-V4's attention output)",
    nullptr, nullptr, read_op, nullptr, nullptr, nullptr};

}  // namespace ropejit::spec_detail
