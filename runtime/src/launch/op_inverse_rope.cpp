// Op inverse_rope's row of the launch op table: one tensor [T, Hq, D] (its q fields) whose rope
// slice turns back in place at the positions of the spec's positions form; nothing else. Its
// binding serves op rope_tensor too (the same tensor turned forward).
#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

namespace {

int64_t rope_slices(const Spec& s) { return int64_t(s.num_q_heads) * s.rotary_dim; }

// q [T, Hq, D] in place: only the rope slice of each head moves (the pass-through part is neither
// read nor written).
constexpr TensorRow kRows[] = {
    {"q", "q_stride", nullptr, {"T", "Hq", "D"}, BufferKind::inout, nullptr,
     "when the spec's op rotates one tensor in place (q's fields carry it)", {ParamSlot::in_q, ParamSlot::out_q},
     rope_slices},
};

}  // namespace

int64_t bind_one_tensor_rotation(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kRows);
  bind_positions(c, a, p);
  return a.num_tokens;
}

void buffers_one_tensor_rotation(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kRows, out);
  buffers_positions(s, shape, out);
}

extern const LaunchOp kLaunchOp_inverse_rope = {OpKind::inverse_rope, bind_one_tensor_rotation,
                                                check_positions_form_host, buffers_one_tensor_rotation};

}  // namespace ropejit::launch_detail
