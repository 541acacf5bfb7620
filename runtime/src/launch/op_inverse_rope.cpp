// Op inverse_rope's row of the launch op table: one tensor [T, Hq, D] (its q fields) whose rope
// slice turns back in place at the positions of the spec's positions form; nothing else.
#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

namespace {

int64_t rope_slices(const Spec& s) { return int64_t(s.num_q_heads) * s.rotary_dim; }

// q [T, Hq, D] in place: only the rope slice of each head moves (the pass-through part is neither
// read nor written).
constexpr TensorRow kRows[] = {
    {"q", "q_stride", nullptr, {"T", "Hq", "D"}, BufferKind::inout, nullptr,
     "when the spec's op is inverse_rope (the tensor rotated back in place)", {ParamSlot::in_q, ParamSlot::out_q},
     rope_slices},
};

int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kRows);
  bind_positions(c, a, p);
  return a.num_tokens;
}

void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kRows, out);
  buffers_positions(s, shape, out);
}

}  // namespace

extern const LaunchOp kLaunchOp_inverse_rope = {OpKind::inverse_rope, bind_op, check_positions_form_host, buffers_op};

}  // namespace ropejit::launch_detail
